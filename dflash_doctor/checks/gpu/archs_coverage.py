"""Architecture coverage: for each GPU (NVML facts) or each `--target-arch` (a CI image build), does every
library carry code that runs there? SASS that runs as is passes; PTX alone warns (the driver JIT-compiles it
at first use, and only a driver that knows its PTX ISA can); nothing fails: "no kernel image is available
for execution on the device" at the first launch. Libraries their owner loads only on some GPUs
(knowledge.archs_advice ARCH_GATED_LIBRARIES) are not held to the others."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Any

from packaging.version import InvalidVersion, Version

from dflash_doctor.checks.gpu.archs_libraries import Library, plural, shown_names
from dflash_doctor.checks.gpu.codes import (
    ARCH_COVERAGE_COVERED,
    ARCH_COVERAGE_NO_DEVICE_CODE,
    ARCH_COVERAGE_NO_KERNEL_IMAGE,
    ARCH_COVERAGE_OPTIONAL_NO_KERNEL_IMAGE,
    ARCH_COVERAGE_PTX_JIT_ONLY,
    ARCH_COVERAGE_TARGET_ARCH_INVALID,
)
from dflash_doctor.checks.remedy import Installer, flash_attn_source_build, uninstall_remediation
from dflash_doctor.facts.gpu.archs_shapes import ArchCoverage, ArchTorch, Fatbin
from dflash_doctor.facts.gpu.nvml_shapes import Gpu, GpuDevice
from dflash_doctor.facts.python.envfacts import version_tuple
from dflash_doctor.facts.python.environment_shapes import Distributions
from dflash_doctor.knowledge.archs import CC, coverage
from dflash_doctor.knowledge.archs_advice import (
    FA2_ARCH_VALUES,
    FA2_ARCHS_ENV,
    FA2_ARCHS_ENV_FIRST_RELEASE,
    FA2_MIN_COMPUTE_CAPABILITY,
    PTX_ISA_MIN_CUDA,
    SASS_MIN_TOOLKIT,
    TORCH_CU128_FIRST_RELEASE,
    VLLM_RELEASE_ARCH_LIST,
)
from dflash_doctor.model import Finding, Remediation, Status
from dflash_doctor.shape import frozen_dataclass
from dflash_doctor.units import GIB


@frozen_dataclass(frozen=True)
class Target:
    """A compute capability to judge against: a group of identical GPUs, or one --target-arch."""

    label: str
    cc: CC
    driver_cuda: str | None = None
    evidence: Mapping[str, Any] = field(default_factory=dict)


@frozen_dataclass(frozen=True)
class Verdict:
    status: str
    """"sass", "ptx-jit", "ptx-too-new", "none", "not-used"."""
    by: str | None = None
    needs_cuda: str | None = None


def invalid_target_archs(section: ArchCoverage) -> Finding:
    given = ",".join(section.target_archs_given)
    return ARCH_COVERAGE_TARGET_ARCH_INVALID.finding(
        Status.FAIL,
        title=f"--target-arch {given!r} is not a list of GPU architectures: {section.target_archs_error}",
        detail="Give SASS names or compute capabilities, comma-separated: sm_86,sm_90 or 8.6,9.0.",
        evidence={"given": section.target_archs_given},
    )


def targets_to_judge(section: ArchCoverage, gpu: Gpu | None) -> tuple[list[Target], str]:
    targets: list[Target] = []
    why = "no GPU"
    if section.no_gpu:
        why = "--no-gpu and no --target-arch"
    elif gpu is not None:
        targets += _gpu_targets(gpu)
        nvml = gpu.nvml
        if not targets and nvml is not None and not nvml.ok:
            why = f"no GPU (NVML: {(nvml.error.message if nvml.error else None) or 'unavailable'})"
    for arch in section.target_archs:
        cc = (int(arch[3:-1]), int(arch[-1]))
        targets.append(Target(f"{arch} (target)", cc, evidence={"target_arch": arch}))
    return targets, why


def _gpu_targets(gpu: Gpu) -> list[Target]:
    groups: dict[tuple[Any, ...], list[GpuDevice]] = {}
    for device in gpu.devices:
        cc = device.compute_capability
        if not cc or len(cc) != 2:
            continue
        total = device.memory.total if device.memory else None
        gib = round(total / GIB) if isinstance(total, int) and total > 0 else None
        groups.setdefault((device.name, int(cc[0]), int(cc[1]), gib), []).append(device)
    targets = []
    for (name, major, minor, gib), devices in groups.items():
        indices = [d.index for d in devices]
        label = f"GPU{_index_range(indices)} {name or 'GPU'} sm_{major}{minor}" + (f", {gib} GiB" if gib else "")
        targets.append(Target(label, (major, minor), gpu.cuda_driver_version,
                              {"gpus": indices, "name": name, "memory_gib": gib,
                               "uuids": [d.uuid for d in devices]}))
    return targets


def _index_range(indices: Sequence[int]) -> str:
    ordered = sorted(indices)
    if len(ordered) > 1 and ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"{ordered[0]}-{ordered[-1]}"
    return ",".join(str(i) for i in ordered)


def _verdict(library: Library, target: Target) -> Verdict:
    gate = library.gate
    if gate is not None and not gate.used_on_cc(target.cc):
        return Verdict("not-used")
    fatbin = library.fatbin or Fatbin()
    found = coverage(fatbin.sass, fatbin.ptx, target.cc)
    if found["status"] == "ptx-jit" and target.driver_cuda:
        # The oldest PTX ISA in the library: if even that is too new for the driver, the JIT cannot run.
        isas = sorted(fatbin.ptx_isa, key=version_tuple)
        needs = PTX_ISA_MIN_CUDA.value.get(isas[0]) if isas else None
        if needs and version_tuple(needs) > version_tuple(target.driver_cuda):
            return Verdict("ptx-too-new", found["by"], needs)
    return Verdict(found["status"], found["by"])


def coverage_findings(targets: list[Target], libraries: list[Library], section: ArchCoverage,
              installer: Installer, dists: Distributions | None = None) -> list[Finding]:
    with_code = [lib for lib in libraries if lib.fatbin is not None]
    if not with_code:
        torch = section.torch or ArchTorch()
        return [ARCH_COVERAGE_NO_DEVICE_CODE.finding(
            Status.SKIP,
            title="no library of the stack carries CUDA device code"
            + (f" (torch {torch.version} is a CPU build)" if torch.cpu_build else ""),
            evidence={"libraries": len(libraries), "targets": [t.label for t in targets]},
        )]
    verdicts = {(lib.facts.file, t.label): _verdict(lib, t) for lib in with_code for t in targets}
    findings: list[Finding] = []
    summaries = []
    for target in targets:
        statuses = [verdicts[(lib.facts.file, target.label)].status for lib in with_code]
        strict_none = [lib for lib in with_code if verdicts[(lib.facts.file, target.label)].status
                       in ("none", "ptx-too-new") and not (lib.gate and lib.gate.optional)]
        if strict_none:
            continue
        text = f"{target.label}: {plural(statuses.count('sass'), 'library', 'libraries')} covered by SASS"
        if statuses.count("ptx-jit"):
            text += f", {statuses.count('ptx-jit')} by PTX JIT"
        optional_none = statuses.count("none") + statuses.count("ptx-too-new")
        if optional_none:
            text += f", {optional_none} optional without code"
        if statuses.count("not-used"):
            text += f" ({statuses.count('not-used')} used only on other GPUs)"
        summaries.append((target, text))
    if summaries:
        findings.append(ARCH_COVERAGE_COVERED.finding(
            Status.PASS,
            title="; ".join(text for _target, text in summaries),
            evidence={"targets": [{"label": t.label, "cc": list(t.cc), **t.evidence} for t, _ in summaries],
                      "libraries": {lib.label: lib.code() for lib in with_code},
                      "unreadable": [lib.facts.error for lib in libraries if lib.facts.error][:5]},
        ))
    all_ccs = sorted({t.cc for t in targets})
    for lib in with_code:
        by_status: dict[str, list[tuple[Target, Verdict]]] = {}
        for target in targets:
            verdict = verdicts[(lib.facts.file, target.label)]
            by_status.setdefault(verdict.status, []).append((target, verdict))
        missing = by_status.get("none", []) + by_status.get("ptx-too-new", [])
        if missing:
            findings.append(_no_kernel_image(lib, missing, all_ccs, section, installer, dists))
        if by_status.get("ptx-jit"):
            findings.append(_ptx_jit(lib, by_status["ptx-jit"]))
    return findings


def _no_kernel_image(lib: Library, missing: list[tuple[Target, Verdict]], all_ccs: list[CC],
                     section: ArchCoverage, installer: Installer, dists: Distributions | None) -> Finding:
    optional = bool(lib.gate and lib.gate.optional)
    labels = [t.label for t, _ in missing]
    too_new = [(t, v) for t, v in missing if v.status == "ptx-too-new"]
    detail = [f"{lib.label} carries {lib.code()}."]
    if too_new:
        target, verdict = too_new[0]
        detail.append(f"Its only usable code for {target.label} is PTX ({verdict.by}, PTX ISA "
                      f"{', '.join(lib.fatbin.ptx_isa if lib.fatbin else ())}), which needs a CUDA {verdict.needs_cuda} "
                      f"driver to JIT-compile; this driver supports CUDA {target.driver_cuda}. Update the driver, "
                      "or get a build with SASS for this GPU.")
    if lib.gate is not None:
        detail.append(f"{lib.gate.role} is used on {lib.gate.used_on}"
                      + ("; only some models or quantization methods use it." if optional else "."))
    detail.append("Its kernels fail at the first launch with 'no kernel image is available for execution on the "
                  "device' (CUDA error 209).")
    remedies, more = _coverage_remedy(lib, [t.cc for t, _ in missing], all_ccs, section, installer, dists)
    detail += more
    return (ARCH_COVERAGE_OPTIONAL_NO_KERNEL_IMAGE if optional else ARCH_COVERAGE_NO_KERNEL_IMAGE).finding(
        Status.WARN if optional else Status.FAIL,
        title=f"{lib.label} has no kernel image for {shown_names(labels)}: {lib.code()}",
        detail="\n".join(detail),
        evidence={**lib.evidence(), "targets": labels,
                  "driver_too_old_for_ptx": [{"target": t.label, "needs_cuda": v.needs_cuda} for t, v in too_new]},
        remediation=remedies,
    )


def _ptx_jit(lib: Library, jitted: list[tuple[Target, Verdict]]) -> Finding:
    fatbin = lib.fatbin or Fatbin()
    labels = [t.label for t, _ in jitted]
    by = sorted({v.by for _, v in jitted if v.by})
    isas = sorted(fatbin.ptx_isa, key=version_tuple)
    driver = PTX_ISA_MIN_CUDA.value.get(isas[0]) if isas else None
    isa = ", ".join(isas) or "unknown"
    return ARCH_COVERAGE_PTX_JIT_ONLY.finding(
        Status.WARN,
        title=f"{lib.label} runs on {shown_names(labels)} only through PTX JIT of {', '.join(by)}: slow first start",
        detail=f"{lib.label} carries {lib.code()}: no SASS runs on "
        + ("these GPUs" if len(labels) > 1 else "this GPU")
        + f". The driver JIT-compiles the PTX (ISA {isa}) when each kernel module first loads, which takes "
        "seconds to minutes for a large library and is then kept in the driver's compute cache; it also needs a "
        + (f"driver for CUDA {driver} or newer" if driver else "driver that knows that PTX ISA")
        + ". A build with SASS for this GPU starts at once.",
        evidence={**lib.evidence(), "targets": labels, "jit_from": by},
    )


def _coverage_remedy(lib: Library, failing: list[CC], all_ccs: list[CC], section: ArchCoverage,
                     installer: Installer, dists: Distributions | None) -> tuple[tuple[Remediation, ...], list[str]]:
    canonical = lib.facts.canonical
    version = str(lib.facts.version)
    if canonical == "flash-attn":
        return _fa2_remedy(version, failing, all_ccs, installer, dists)
    if canonical == "torch":
        return _torch_remedy(section.torch or ArchTorch(), failing, installer)
    if canonical == "vllm":
        archs = " ".join(f"{cc[0]}.{cc[1]}" for cc in all_ccs)
        advice = (f"vLLM takes its architectures from TORCH_CUDA_ARCH_LIST when it is built (its release images "
                  f"use '{VLLM_RELEASE_ARCH_LIST.value}'); for this GPU build vLLM {version} from source with "
                  f"TORCH_CUDA_ARCH_LIST='{archs}', as its GPU installation guide describes.")
        return (), [advice]
    return (), [f"Install a build of {lib.facts.distribution} made for this GPU's architecture."]


def _fa2_remedy(version: str, failing: list[CC], all_ccs: list[CC], installer: Installer,
                dists: Distributions | None) -> tuple[tuple[Remediation, ...], list[str]]:
    floor = FA2_MIN_COMPUTE_CAPABILITY.value
    too_old = [cc for cc in failing if cc < floor]
    if too_old:
        why = (f"flash-attn 2 supports compute capability {floor[0]}.{floor[1]} and newer only; "
               "vLLM serves without it (it skips the flash_attn import when the package is absent)")
        v2 = dists.get("flash-attn") if dists is not None else None
        if dists is not None and v2 is not None:
            # flash-attn-4 beside it would be left a namespace flash_attn, which vLLM's guard lets die: both go,
            # with the directories pip's uninstall leaves
            removed = [v2, *(d for d in (dists.get("flash-attn-4"),) if d is not None)]
            uninstall = uninstall_remediation(dists, removed, installer, why)
        else:
            uninstall = Remediation(installer.uninstall("flash-attn"), why)
        advice = (f"flash-attn 2 does not run on compute capability {too_old[0][0]}.{too_old[0][1]} at all (its "
                  "README: Ampere, Ada or Hopper GPUs; Turing needs FlashAttention 1.x).")
        return (uninstall,), [advice]
    values = FA2_ARCH_VALUES.value
    unknown = [cc for cc in failing if cc[0] not in values]
    if unknown:
        advice = (f"No flash-attn 2 release can build for compute capability {unknown[0][0]}.{unknown[0][1]}: "
                  f"{FA2_ARCHS_ENV.value} accepts only {', '.join(values.values())}.")
        return (), [advice]
    wanted = sorted({values[cc[0]] for cc in all_ccs if cc >= floor and cc[0] in values}, key=int)
    try:
        has_env = Version(version) >= Version(FA2_ARCHS_ENV_FIRST_RELEASE.value)
    except InvalidVersion:
        has_env = False
    spec = f"flash-attn=={version}" if has_env else f"flash-attn>={FA2_ARCHS_ENV_FIRST_RELEASE.value},<3"
    toolkit = max((SASS_MIN_TOOLKIT.value.get(int(v[:-1]), "11.7") for v in wanted), key=version_tuple)
    command = flash_attn_source_build(installer, spec, archs=wanted)
    why = (f"build flash-attn with SASS for {', '.join('sm_' + v for v in wanted)} against the installed torch "
           f"(needs nvcc {toolkit}+" + ("; sm_80 code serves every 8.x GPU)" if "80" in wanted else ")"))
    advice = (f"{FA2_ARCHS_ENV.value} takes only {', '.join(values.values())}: a value like 86 matches nothing "
              "and builds no GPU code at all.")
    return (Remediation(command, why),), [advice]


def _torch_remedy(torch: ArchTorch, failing: list[CC],
                  installer: Installer) -> tuple[tuple[Remediation, ...], list[str]]:
    show = Remediation(
        installer.run("-c", "import torch; print(torch.__version__, torch.version.cuda, "
                            "getattr(torch._C, '_cuda_getArchFlags', lambda: 'no CUDA build')())"),
        "the architectures this torch was compiled for (works without a GPU)",
    )
    remedies = [show]
    needed = max((SASS_MIN_TOOLKIT.value.get(cc[0], "0") for cc in failing), key=version_tuple)
    version, cuda = torch.version or "", torch.cuda
    try:
        base = Version(version).base_version
        has_cu128 = Version(base) >= Version(TORCH_CU128_FIRST_RELEASE.value)
    except InvalidVersion:
        base, has_cu128 = version, False
    if needed == "12.8" and has_cu128 and (not cuda or version_tuple(str(cuda)) < (12, 8)):
        remedies.append(Remediation(
            installer.install(f"torch=={base}", "--index-url", "https://download.pytorch.org/whl/cu128",
                              reinstall=True),
            f"torch {base} built with CUDA 12.8, the first toolkit that compiles for compute capability 10.x/12.x; "
            "keep the version vLLM pins",
        ))
    return tuple(remedies), [f"torch {version} (CUDA {cuda or 'unknown'}) was not compiled for this GPU."]
