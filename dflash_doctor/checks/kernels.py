"""Layer: attention and rotary kernels run for real against an fp32 reference on the same GPU."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from dflash_doctor.check import Facts
from dflash_doctor.checks.remedy import Installer
from dflash_doctor.knowledge.flash_attn import V2_SPEC
from dflash_doctor.knowledge.gpu import (
    KERNEL_UNSUPPORTED_MESSAGES,
)
from dflash_doctor.model import CheckResult, Finding, Remediation, Status

from .gpu_common import NO_CUDA_FINDINGS, NO_GPU_FINDINGS, _blocking, _exception_text, _installer, _sm

__all__ = ["KernelsCheck"]


# ------------------------------------------------------------------------------------ kernels check

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


def _declined(case: Mapping[str, Any]) -> bool:
    """A kernel that refuses this GPU or dtype by design (or a case the doctor does not run here)."""
    if case.get("unsupported") or (case.get("status") == "not-run" and "earlier case" not in str(case.get("reason"))):
        return True
    message = str((case.get("error") or {}).get("message") or "")
    return case.get("status") == "error" and any(m in message for m in KERNEL_UNSUPPORTED_MESSAGES.value)


def _case_label(case: Mapping[str, Any]) -> str:
    parts = [str(case.get("kernel")), str(case.get("dtype"))]
    if case.get("head_dim"):
        parts.append(f"d{case['head_dim']}")
    if case.get("variant"):
        parts.append(str(case["variant"]))
    return " ".join(parts)


def _case_row(case: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("kernel", "dtype", "head_dim", "variant", "status", "max_abs_err", "tolerance", "first_ms", "warm_ms")
    return {k: case.get(k) for k in keys if case.get(k) is not None}


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
    ok: list[tuple[str, Mapping[str, Any], str]]
    declined: list[str]


def _family_findings(result: Mapping[str, Any], prior: Mapping[str, CheckResult], installer: Installer,
                     tally: _Tally) -> Iterator[Finding]:
    family = str(result.get("family"))
    title = FAMILY_TITLES.get(family, family)
    process = result.get("process") or {}
    imported = result.get("import") or {}
    if process.get("error") and "devices" not in result:
        yield Finding("kernels.crashed", Status.FAIL, f"{title}: the probe process {process['error']}",
                      detail=str(process.get("stderr") or "")[-1500:], evidence={"family": family, "process": process})
        return
    if result.get("probe_error"):
        error = result["probe_error"]
        yield Finding("kernels.out-of-memory" if error.get("oom") else "kernels.error", Status.FAIL,
                      f"{title}: the probe stopped: {_exception_text(error)}", detail=str(error.get("traceback") or ""),
                      evidence={"family": family, "error": error})
        return
    if not imported.get("installed", True):
        remedies: tuple[Remediation, ...] = ()
        if family.startswith("flash_attn") and family != "flash_attn_cute":
            remedies = (Remediation(installer.install(V2_SPEC.value, no_build_isolation=True),
                                    "optional: vLLM does not need flash-attn on CUDA; install v2, built against this "
                                    "torch, to have its kernels run here"),)
        package = {"triton": "Triton", "vllm_flash_attn": "vLLM", "vllm_rotary": "vLLM",
                   "flash_attn_cute": "flash-attn-4"}.get(family, "flash-attn")
        yield Finding("kernels.not-installed", Status.PASS, f"{title}: {package} is not installed, not run",
                      evidence={"family": family, "statement": imported.get("statement")}, remediation=remedies)
        return
    if not imported.get("ok", True):
        explained = _import_explanation(family, prior)
        why = (f"see {explained.id}: {explained.title}" if explained is not None
               else _exception_text(imported.get("exception")))
        yield Finding("kernels.not-importable", Status.SKIP,
                      f"{title}: not run, `{imported.get('statement')}` fails ({why})",
                      evidence={"family": family, "import_finding": explained.id if explained else None,
                                "exception": imported.get("exception")})
        return
    cuda = result.get("cuda") or {}
    if cuda and not cuda.get("available"):
        yield Finding("kernels.error", Status.FAIL,
                      f"{title}: torch in the probe could not use CUDA: "
                      + (_exception_text(cuda.get("error")) if cuda.get("error") else "torch.cuda.is_available() is False"),
                      evidence={"family": family, "cuda": cuda})
        return
    cases = [(device, case) for device in result.get("devices") or [] for case in device.get("cases") or []]
    failed_setup = [d for d in result.get("devices") or [] if d.get("error")]
    for device in failed_setup:
        error = device["error"]
        yield Finding("kernels.out-of-memory" if error.get("oom") else "kernels.error", Status.FAIL,
                      f"{title} on {device.get('name')}: {_exception_text(error)}",
                      evidence={"family": family, "error": error})
    wrong = [(d, c) for d, c in cases if c.get("status") == "mismatch"]
    errors = [(d, c) for d, c in cases if c.get("status") in ("error", "not-run") and not _declined(c)]
    declined = [(d, c) for d, c in cases if _declined(c)]
    ok = [(d, c) for d, c in cases if c.get("status") == "ok"]
    for device, case in wrong:
        yield Finding("kernels.wrong-result", Status.FAIL,
                      f"{title} on {device.get('name')} ({_sm(device.get('capability'))}): {_case_label(case)} is off "
                      f"by {case.get('max_abs_err')} against the fp32 reference (tolerance {case.get('tolerance'):.3g})"
                      + (", and not finite" if case.get("nonfinite") else ""),
                      evidence={"family": family, "case": dict(case)})
    for device, case in errors:
        error = case.get("error") or {}
        oom = bool(error.get("oom"))
        yield Finding("kernels.out-of-memory" if oom else "kernels.error", Status.FAIL,
                      f"{title} on {device.get('name')} ({_sm(device.get('capability'))}): {_case_label(case)} fails: "
                      + (_exception_text(error) if error else str(case.get("reason"))),
                      detail=str(error.get("traceback") or ""), evidence={"family": family, "case": dict(case)})
    for device, case in declined:
        reason = case.get("reason") or _exception_text(case.get("error"))
        tally.declined.append(f"{_case_label(case)} ({reason})")
    for device, case in ok:
        tally.ok.append((family, case, str(device.get("name"))))
    if ok and not wrong and not errors and not failed_setup:
        worst = max(ok, key=lambda dc: (dc[1].get("max_abs_err") or 0) / (dc[1].get("tolerance") or 1))[1]
        yield Finding("kernels.family-ok", Status.PASS,
                      f"{title}: {len(ok)} case(s) within tolerance (worst {_case_label(worst)}: "
                      f"{worst.get('max_abs_err'):.3g} <= {worst.get('tolerance'):.3g}); first run "
                      f"{max(c.get('first_ms') or 0 for _, c in ok):.0f} ms, warm "
                      f"{max(c.get('warm_ms') or 0 for _, c in ok):.3f} ms",
                      evidence={"family": family, "version": imported.get("version"),
                                "timings": result.get("timings"), "process_s": process.get("duration_s"),
                                "cases": [_case_row(c) for _, c in cases]})
    elif declined and not ok and not wrong and not errors:
        yield Finding("kernels.unsupported", Status.SKIP,
                      f"{title}: declines this GPU: {tally.declined[-1]}",
                      evidence={"family": family, "cases": [_case_row(c) | {"reason": c.get("reason") or
                                                                               _exception_text(c.get("error"))}
                                                            for _, c in declined]})


class KernelsCheck:
    id: ClassVar[str] = "kernels"
    layer: ClassVar[str] = "kernels"
    title: ClassVar[str] = "GPU kernels"
    needs: ClassVar[frozenset[str]] = frozenset({"kernels", "target"})
    after: ClassVar[frozenset[str]] = frozenset({"gpu", "cuda-stack"})
    requires_gpu: ClassVar[bool] = True

    def judge(self, facts: Facts) -> Iterable[Finding]:
        blocking = _blocking(facts.prior.get("gpu"), NO_GPU_FINDINGS)
        if blocking is not None:
            return [Finding("kernels.no-gpu", Status.SKIP, f"no usable GPU ({blocking.id}): no kernel was run",
                            evidence={"gpu_finding": blocking.id})]
        blocking = _blocking(facts.prior.get("cuda-stack"), NO_CUDA_FINDINGS)
        if blocking is not None:
            return [Finding("kernels.no-cuda", Status.SKIP, f"torch cannot use CUDA here ({blocking.id}): no kernel "
                            "was run", evidence={"cuda_finding": blocking.id})]
        kernels = facts["kernels"]
        installer = _installer(facts)
        tally = _Tally([], [])
        findings: list[Finding] = []
        for result in kernels.get("families") or []:
            findings.extend(_family_findings(result, facts.prior, installer, tally))
        if tally.ok and not any(f.status in (Status.FAIL, Status.ERROR) for f in findings):
            findings.insert(0, _kernels_summary(kernels, tally))
        if not findings:
            findings.append(Finding("kernels.no-cuda", Status.SKIP, "no kernel family reported any case"))
        return findings


def _kernels_summary(kernels: Mapping[str, Any], tally: _Tally) -> Finding:
    families = list(dict.fromkeys(FAMILY_TITLES.get(f, f) for f, _, _ in tally.ok))
    gpus = sorted({name for _, _, name in tally.ok})
    worst = max(tally.ok, key=lambda item: (item[1].get("max_abs_err") or 0) / (item[1].get("tolerance") or 1))
    ratio = (worst[1].get("max_abs_err") or 0) / (worst[1].get("tolerance") or 1)
    wall = max(((r.get("process") or {}).get("duration_s") or 0) for r in kernels.get("families") or [])
    title = (f"{len(tally.ok)} case(s) within tolerance on {', '.join(gpus)}: {', '.join(families)}; worst error "
             f"{ratio:.2f}x tolerance ({_case_label(worst[1])}); slowest family {wall:.1f} s")
    if tally.declined:
        title += f"; not applicable here: {len(tally.declined)} case(s)"
    return Finding("kernels.ok", Status.PASS, title, evidence={
        "problem": kernels.get("problem"), "declined": tally.declined,
        "process_s": {r.get("family"): (r.get("process") or {}).get("duration_s") for r in kernels.get("families") or []}})
