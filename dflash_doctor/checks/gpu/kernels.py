"""Rules of the kernels check (KernelsCheck in the package): attention and rotary kernels run for real against
an fp32 reference on the same GPU."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from dflash_doctor.checks.gpu.codes import (
    KERNELS_CRASHED,
    KERNELS_ERROR,
    KERNELS_FAMILY_OK,
    KERNELS_NO_CUDA,
    KERNELS_NOT_IMPORTABLE,
    KERNELS_NOT_INSTALLED,
    KERNELS_OK,
    KERNELS_OUT_OF_MEMORY,
    KERNELS_UNSUPPORTED,
    KERNELS_WRONG_RESULT,
)
from dflash_doctor.checks.gpu.visible_devices import exception_text, sm
from dflash_doctor.checks.remedy import Installer
from dflash_doctor.facts.gpu.cuda_shapes import KernelCase, KernelDevice, KernelFamily, KernelImport, Kernels
from dflash_doctor.knowledge.flash_attn import V2_SPEC
from dflash_doctor.knowledge.gpu import (
    KERNEL_UNSUPPORTED_MESSAGES,
)
from dflash_doctor.model import CheckResult, Finding, Remediation, Status

__all__ = ["kernel_findings"]




FAMILY_TITLES = {
    "sdpa": "torch SDPA (flash, memory-efficient)",
    "triton": "Triton (the doctor's own kernel)",
    "flash_attn": "flash_attn.flash_attn_func",
    "flash_attn_cute": "flash-attn-4 (flash_attn.cute.flash_attn_func)",
    "flash_attn_rotary": "flash_attn apply_rotary",
    "vllm_flash_attn": "vLLM's bundled flash-attention",
    "vllm_rotary": "vLLM's bundled rotary",
}
# Which import check explains a family that does not import (by the check's id), in order.
IMPORT_CHECKS = {"flash_attn": ("imports", "namespaces", "extensions"),
                 # flash-attn-4 imports through a namespace flash_attn by design: its own exception explains it
                 "flash_attn_cute": (),
                 "flash_attn_rotary": ("imports", "namespaces", "extensions"),
                 "vllm_flash_attn": ("import-surface", "extensions"),
                 "vllm_rotary": ("import-surface", "extensions")}


def _declined(case: KernelCase) -> bool:
    """A kernel that refuses this GPU or dtype by design (or a case the doctor does not run here)."""
    if case.unsupported or (case.status == "not-run" and "earlier case" not in str(case.reason)):
        return True
    message = case.error.message if case.error else ""
    return case.status == "error" and any(m in message for m in KERNEL_UNSUPPORTED_MESSAGES.value)


def _case_label(case: KernelCase) -> str:
    parts = [case.kernel, case.dtype]
    if case.head_dim:
        parts.append(f"d{case.head_dim}")
    if case.variant:
        parts.append(case.variant)
    return " ".join(parts)


def _case_row(case: KernelCase) -> dict[str, Any]:
    keys = ("kernel", "dtype", "head_dim", "variant", "status", "max_abs_err", "tolerance", "first_ms", "warm_ms")
    row = case.to_json()
    return {k: row[k] for k in keys if row[k] is not None}



def _import_explanation(family: str, prior: Mapping[str, CheckResult]) -> Finding | None:
    for check_id in IMPORT_CHECKS.get(family, ()):
        result = prior.get(check_id)
        if result is None:
            continue
        bad = next((f for f in result.findings if f.status in (Status.FAIL, Status.WARN, Status.ERROR)), None)
        if bad is not None:
            return bad
    return None


@dataclass
class _Tally:
    ok: list[tuple[str, KernelCase, str]]
    declined: list[str]


def _family_findings(result: KernelFamily, prior: Mapping[str, CheckResult], installer: Installer,
                     tally: _Tally) -> Iterator[Finding]:
    family = result.family
    title = FAMILY_TITLES.get(family, family)
    process = result.process
    imported = result.import_ or KernelImport()
    if process.error and result.devices is None:
        yield KERNELS_CRASHED.finding(Status.FAIL, f"{title}: the probe process {process.error}",
                      detail=process.stderr[-1500:], evidence={"family": family, "process": process.to_json()})
        return
    if result.probe_error:
        error = result.probe_error
        yield (KERNELS_OUT_OF_MEMORY if error.oom else KERNELS_ERROR).finding(Status.FAIL,
                      f"{title}: the probe stopped: {exception_text(error)}", detail=error.traceback,
                      evidence={"family": family, "error": error.to_json()})
        return
    if not imported.installed:
        remedies: tuple[Remediation, ...] = ()
        if family.startswith("flash_attn") and family != "flash_attn_cute":
            remedies = (Remediation(installer.install(V2_SPEC.value, no_build_isolation=True),
                                    "optional: vLLM does not need flash-attn on CUDA; install v2, built against this "
                                    "torch, to have its kernels run here"),)
        package = {"triton": "Triton", "vllm_flash_attn": "vLLM", "vllm_rotary": "vLLM",
                   "flash_attn_cute": "flash-attn-4"}.get(family, "flash-attn")
        yield KERNELS_NOT_INSTALLED.finding(Status.PASS, f"{title}: {package} is not installed, not run",
                      evidence={"family": family, "statement": imported.statement}, remediation=remedies)
        return
    if not imported.ok:
        explained = _import_explanation(family, prior)
        why = (f"see {explained.id}: {explained.title}" if explained is not None
               else exception_text(imported.exception))
        yield KERNELS_NOT_IMPORTABLE.finding(Status.SKIP,
                      f"{title}: not run, `{imported.statement}` fails ({why})",
                      evidence={"family": family, "import_finding": explained.id if explained else None,
                                "exception": imported.exception.to_json() if imported.exception else None})
        return
    cuda = result.cuda
    if cuda is not None and not cuda.available:
        yield KERNELS_ERROR.finding(Status.FAIL,
                      f"{title}: torch in the probe could not use CUDA: "
                      + (exception_text(cuda.error) if cuda.error else "torch.cuda.is_available() is False"),
                      evidence={"family": family, "cuda": cuda.to_json()})
        return
    devices: list[KernelDevice] = result.devices or []
    cases = [(device, case) for device in devices for case in device.cases]
    failed_setup = [(d, d.error) for d in devices if d.error]
    for device, setup_error in failed_setup:
        yield (KERNELS_OUT_OF_MEMORY if setup_error.oom else KERNELS_ERROR).finding(Status.FAIL,
                      f"{title} on {device.name}: {exception_text(setup_error)}",
                      evidence={"family": family, "error": setup_error.to_json()})
    wrong = [(d, c) for d, c in cases if c.status == "mismatch"]
    errors = [(d, c) for d, c in cases if c.status in ("error", "not-run") and not _declined(c)]
    declined = [(d, c) for d, c in cases if _declined(c)]
    ok = [(d, c) for d, c in cases if c.status == "ok"]
    for device, case in wrong:
        yield KERNELS_WRONG_RESULT.finding(Status.FAIL,
                      f"{title} on {device.name} ({sm(device.capability)}): {_case_label(case)} is off "
                      f"by {case.max_abs_err} against the fp32 reference (tolerance {case.tolerance:.3g})"
                      + (", and not finite" if case.nonfinite else ""),
                      evidence={"family": family, "case": case.to_json()})
    for device, case in errors:
        case_error = case.error
        yield (KERNELS_OUT_OF_MEMORY if case_error and case_error.oom else KERNELS_ERROR).finding(Status.FAIL,
                      f"{title} on {device.name} ({sm(device.capability)}): {_case_label(case)} fails: "
                      + (exception_text(case_error) if case_error else str(case.reason)),
                      detail=case_error.traceback if case_error else "",
                      evidence={"family": family, "case": case.to_json()})
    for device, case in declined:
        reason = case.reason or exception_text(case.error)
        tally.declined.append(f"{_case_label(case)} ({reason})")
    for device, case in ok:
        tally.ok.append((family, case, str(device.name)))
    if ok and not wrong and not errors and not failed_setup:
        worst = max(ok, key=lambda dc: (dc[1].max_abs_err or 0) / (dc[1].tolerance or 1))[1]
        yield KERNELS_FAMILY_OK.finding(Status.PASS,
                      f"{title}: {len(ok)} case(s) within tolerance (worst {_case_label(worst)}: "
                      f"{worst.max_abs_err:.3g} <= {worst.tolerance:.3g}); first run "
                      f"{max(c.first_ms or 0 for _, c in ok):.0f} ms, warm "
                      f"{max(c.warm_ms or 0 for _, c in ok):.3f} ms",
                      evidence={"family": family, "version": imported.version,
                                "timings": result.timings, "process_s": process.duration_s,
                                "cases": [_case_row(c) for _, c in cases]})
    elif declined and not ok and not wrong and not errors:
        yield KERNELS_UNSUPPORTED.finding(Status.SKIP,
                      f"{title}: declines this GPU: {tally.declined[-1]}",
                      evidence={"family": family, "cases": [
                          _case_row(c) | {"reason": c.reason or exception_text(c.error)}
                          for _, c in declined]})


def kernel_findings(kernels: Kernels, prior: Mapping[str, CheckResult], installer: Installer) -> list[Finding]:
    """The kernels check's judgement of each family's run; `prior` holds the import checks' results, which explain
    a family that does not import."""
    tally = _Tally([], [])
    findings: list[Finding] = []
    for result in kernels.families:
        findings.extend(_family_findings(result, prior, installer, tally))
    if tally.ok and not any(f.status in (Status.FAIL, Status.ERROR) for f in findings):
        findings.insert(0, _kernels_summary(kernels, tally))
    if not findings:
        findings.append(KERNELS_NO_CUDA.finding(Status.SKIP, "no kernel family reported any case"))
    return findings


def _kernels_summary(kernels: Kernels, tally: _Tally) -> Finding:
    families = list(dict.fromkeys(FAMILY_TITLES.get(f, f) for f, _, _ in tally.ok))
    gpus = sorted({name for _, _, name in tally.ok})
    worst = max(tally.ok, key=lambda item: (item[1].max_abs_err or 0) / (item[1].tolerance or 1))
    ratio = (worst[1].max_abs_err or 0) / (worst[1].tolerance or 1)
    wall = max((r.process.duration_s or 0) for r in kernels.families)
    title = (f"{len(tally.ok)} case(s) within tolerance on {', '.join(gpus)}: {', '.join(families)}; worst error "
             f"{ratio:.2f}x tolerance ({_case_label(worst[1])}); slowest family {wall:.1f} s")
    if tally.declined:
        title += f"; not applicable here: {len(tally.declined)} case(s)"
    return KERNELS_OK.finding(Status.PASS, title, evidence={
        "problem": kernels.problem, "declined": tally.declined,
        "process_s": {r.family: r.process.duration_s for r in kernels.families}})
