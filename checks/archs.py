"""Layer: the stack's compiled GPU code, judged from its ELF files, with or without a GPU.

- Architecture coverage: for each GPU (NVML facts) or each `--target-arch` (a CI image build), does every
  library carry code that runs there? SASS that runs as is passes; PTX alone warns (the driver JIT-compiles
  it at first use, and only a driver that knows its PTX ISA can); nothing fails: "no kernel image is
  available for execution on the device" at the first launch. Libraries their owner loads only on some GPUs
  (knowledge.archs_advice ARCH_GATED_LIBRARIES) are not held to the others.
- The C and C++ runtime: GLIBC_/GLIBCXX_/CXXABI_ versions a library requires above what this host gives
  the target interpreter fail its import ("version `GLIBC_2.32' not found").
- torch symbols: a libtorch/libc10 symbol a library needs that the installed torch does not export fails its
  import ("undefined symbol"), predicted here before anything is imported.

Everything is judged from the `arch_coverage` facts (which also record the --target-arch list), so `judge`
on a saved report gives the same answer on any machine.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from packaging.version import InvalidVersion, Version

from dflash_doctor.archs import CC, coverage
from dflash_doctor.check import Facts
from dflash_doctor.envfacts import version_tuple
from dflash_doctor.knowledge.archs_advice import (
    ARCH_GATED_LIBRARIES,
    FA2_ARCH_VALUES,
    FA2_ARCHS_ENV,
    FA2_ARCHS_ENV_FIRST_RELEASE,
    FA2_MIN_COMPUTE_CAPABILITY,
    FA2_UBUNTU_2204_WHEELS_FROM,
    PTX_ISA_MIN_CUDA,
    SASS_MIN_TOOLKIT,
    TORCH_CU128_FIRST_RELEASE,
    VLLM_RELEASE_ARCH_LIST,
    LibraryGate,
)
from dflash_doctor.model import Finding, Remediation, Status
from dflash_doctor.remedy import Installer

__all__ = ["ArchCoverageCheck"]

_GIB = 1 << 30
_SHOWN = 3  # names listed in a title before "(+N more)"
_RUNTIME_ORDER = ("GLIBC", "GLIBCXX", "CXXABI")


@dataclass(frozen=True)
class Target:
    """A compute capability to judge against: a group of identical GPUs, or one --target-arch."""

    label: str
    cc: CC
    driver_cuda: str | None = None
    evidence: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Library:
    facts: Mapping[str, Any]

    @property
    def name(self) -> str:
        module = self.facts.get("module")
        return str(module) if module else str(self.facts["path"]).rsplit("/", 1)[-1]

    @property
    def owner(self) -> str:
        return f"{self.facts['distribution']} {self.facts.get('version')}"

    @property
    def label(self) -> str:
        return f"{self.name} ({self.owner})"

    @property
    def fatbin(self) -> Mapping[str, Any] | None:
        fatbin = self.facts.get("fatbin")
        return fatbin if fatbin and (fatbin.get("sass") or fatbin.get("ptx") or fatbin.get("lto")) else None

    @property
    def gate(self) -> LibraryGate | None:
        return next((g for g in ARCH_GATED_LIBRARIES.value if g.distribution == self.facts.get("canonical")
                     and fnmatch.fnmatch(str(self.facts["path"]), g.path)), None)

    def code(self) -> str:
        fatbin = self.fatbin or {}
        parts = [f"SASS {', '.join(fatbin.get('sass') or ()) or 'none'}",
                 f"PTX {', '.join(fatbin.get('ptx') or ()) or 'none'}"]
        if fatbin.get("lto"):
            parts.append(f"LTO-IR {', '.join(fatbin['lto'])} (not loadable)")
        return "; ".join(parts)

    def evidence(self) -> dict[str, Any]:
        fatbin = self.fatbin or {}
        return {"file": self.facts.get("file"), "distribution": self.facts.get("distribution"),
                "version": self.facts.get("version"), "sass": fatbin.get("sass"), "ptx": fatbin.get("ptx"),
                "ptx_isa": fatbin.get("ptx_isa")}


@dataclass(frozen=True)
class Verdict:
    status: str
    """"sass", "ptx-jit", "ptx-too-new", "none", "not-used"."""
    by: str | None = None
    needs_cuda: str | None = None


class ArchCoverageCheck:
    id: ClassVar[str] = "arch-coverage"
    layer: ClassVar[str] = "gpu"
    title: ClassVar[str] = "Compiled GPU code"
    # "gpu" (NVML) is judged when present; without it the --target-arch list recorded in arch_coverage is.
    needs: ClassVar[frozenset[str]] = frozenset({"arch_coverage", "target", "gpu"})
    after: ClassVar[frozenset[str]] = frozenset()
    requires_gpu: ClassVar[bool] = False

    def judge(self, facts: Facts) -> Iterable[Finding]:
        section = facts["arch_coverage"]
        installer = Installer.for_target(facts["target"])
        libraries = [Library(item) for item in section.get("libraries") or []]
        findings: list[Finding] = []
        if section.get("target_archs_error"):
            findings.append(_invalid_target_archs(section))
        targets, absent_why = _targets(section, facts.raw("gpu"))
        if targets:
            findings += _coverage(targets, libraries, section, installer)
        elif not section.get("target_archs_error"):
            findings.append(Finding(
                id="archs.no-target",
                status=Status.SKIP,
                title=f"compiled GPU code not judged: {absent_why}; pass --target-arch (e.g. sm_86,sm_90) "
                "for the GPUs this environment will run on",
                detail="Without a GPU the doctor cannot know which architectures matter. The C/C++ runtime and "
                "torch-symbol judgements of the same libraries still ran.",
                evidence={"no_gpu": section.get("no_gpu")},
            ))
        findings += _runtime(libraries, section, installer)
        findings += _symbols(libraries, section, installer)
        # Worst first: the terminal prints the headline finding's detail where it stands in the list.
        return sorted(findings, key=lambda finding: -finding.status.rank)


# ---------------------------------------------------------------------------------------------------------
# What to judge against
# ---------------------------------------------------------------------------------------------------------


def _invalid_target_archs(section: Mapping[str, Any]) -> Finding:
    given = ",".join(section.get("target_archs_given") or ())
    return Finding(
        id="archs.target-arch-invalid",
        status=Status.FAIL,
        title=f"--target-arch {given!r} is not a list of GPU architectures: {section['target_archs_error']}",
        detail="Give SASS names or compute capabilities, comma-separated: sm_86,sm_90 or 8.6,9.0.",
        evidence={"given": section.get("target_archs_given")},
    )


def _targets(section: Mapping[str, Any], gpu: Any) -> tuple[list[Target], str]:
    targets: list[Target] = []
    why = "no GPU"
    if section.get("no_gpu"):
        why = "--no-gpu and no --target-arch"
    elif isinstance(gpu, Mapping) and "_error" not in gpu:
        targets += _gpu_targets(gpu)
        nvml = gpu.get("nvml") or {}
        if not targets and not nvml.get("ok", True):
            why = f"no GPU (NVML: {(nvml.get('error') or {}).get('message') or 'unavailable'})"
    for arch in section.get("target_archs") or ():
        cc = (int(arch[3:-1]), int(arch[-1]))
        targets.append(Target(f"{arch} (target)", cc, evidence={"target_arch": arch}))
    return targets, why


def _gpu_targets(gpu: Mapping[str, Any]) -> list[Target]:
    groups: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for device in gpu.get("devices") or ():
        cc = device.get("compute_capability")
        if not cc or len(cc) != 2:
            continue
        total = (device.get("memory") or {}).get("total")
        gib = round(total / _GIB) if isinstance(total, int) and total > 0 else None
        groups.setdefault((device.get("name"), int(cc[0]), int(cc[1]), gib), []).append(device)
    targets = []
    for (name, major, minor, gib), devices in groups.items():
        indices = [int(d.get("index", 0)) for d in devices]
        label = f"GPU{_index_range(indices)} {name or 'GPU'} sm_{major}{minor}" + (f", {gib} GiB" if gib else "")
        targets.append(Target(label, (major, minor), gpu.get("cuda_driver_version"),
                              {"gpus": indices, "name": name, "memory_gib": gib,
                               "uuids": [d.get("uuid") for d in devices]}))
    return targets


def _index_range(indices: Sequence[int]) -> str:
    ordered = sorted(indices)
    if len(ordered) > 1 and ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"{ordered[0]}-{ordered[-1]}"
    return ",".join(str(i) for i in ordered)


# ---------------------------------------------------------------------------------------------------------
# Coverage
# ---------------------------------------------------------------------------------------------------------


def _verdict(library: Library, target: Target) -> Verdict:
    gate = library.gate
    if gate is not None and not gate.used_on_cc(target.cc):
        return Verdict("not-used")
    fatbin = library.fatbin or {}
    found = coverage(fatbin.get("sass") or (), fatbin.get("ptx") or (), target.cc)
    if found["status"] == "ptx-jit" and target.driver_cuda:
        # The oldest PTX ISA in the library: if even that is too new for the driver, the JIT cannot run.
        isas = sorted(fatbin.get("ptx_isa") or (), key=version_tuple)
        needs = PTX_ISA_MIN_CUDA.value.get(isas[0]) if isas else None
        if needs and version_tuple(needs) > version_tuple(target.driver_cuda):
            return Verdict("ptx-too-new", found["by"], needs)
    return Verdict(found["status"], found["by"])


def _plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def _names(items: Sequence[str]) -> str:
    shown = ", ".join(items[:_SHOWN])
    return shown + (f" (+{len(items) - _SHOWN} more)" if len(items) > _SHOWN else "")


def _coverage(targets: list[Target], libraries: list[Library], section: Mapping[str, Any],
              installer: Installer) -> list[Finding]:
    with_code = [lib for lib in libraries if lib.fatbin is not None]
    if not with_code:
        torch = section.get("torch") or {}
        return [Finding(
            id="archs.no-device-code",
            status=Status.SKIP,
            title="no library of the stack carries CUDA device code"
            + (f" (torch {torch.get('version')} is a CPU build)" if torch.get("cpu_build") else ""),
            evidence={"libraries": len(libraries), "targets": [t.label for t in targets]},
        )]
    verdicts = {(lib.facts["file"], t.label): _verdict(lib, t) for lib in with_code for t in targets}
    findings: list[Finding] = []
    summaries = []
    for target in targets:
        statuses = [verdicts[(lib.facts["file"], target.label)].status for lib in with_code]
        strict_none = [lib for lib in with_code if verdicts[(lib.facts["file"], target.label)].status
                       in ("none", "ptx-too-new") and not (lib.gate and lib.gate.optional)]
        if strict_none:
            continue
        text = f"{target.label}: {_plural(statuses.count('sass'), 'library', 'libraries')} covered by SASS"
        if statuses.count("ptx-jit"):
            text += f", {statuses.count('ptx-jit')} by PTX JIT"
        optional_none = statuses.count("none") + statuses.count("ptx-too-new")
        if optional_none:
            text += f", {optional_none} optional without code"
        if statuses.count("not-used"):
            text += f" ({statuses.count('not-used')} used only on other GPUs)"
        summaries.append((target, text))
    if summaries:
        findings.append(Finding(
            id="archs.covered",
            status=Status.PASS,
            title="; ".join(text for _target, text in summaries),
            evidence={"targets": [{"label": t.label, "cc": list(t.cc), **t.evidence} for t, _ in summaries],
                      "libraries": {lib.label: lib.code() for lib in with_code},
                      "unreadable": [lib.facts.get("error") for lib in libraries if lib.facts.get("error")][:5]},
        ))
    all_ccs = sorted({t.cc for t in targets})
    for lib in with_code:
        by_status: dict[str, list[tuple[Target, Verdict]]] = {}
        for target in targets:
            verdict = verdicts[(lib.facts["file"], target.label)]
            by_status.setdefault(verdict.status, []).append((target, verdict))
        missing = by_status.get("none", []) + by_status.get("ptx-too-new", [])
        if missing:
            findings.append(_no_kernel_image(lib, missing, all_ccs, section, installer))
        if by_status.get("ptx-jit"):
            findings.append(_ptx_jit(lib, by_status["ptx-jit"]))
    return findings


def _no_kernel_image(lib: Library, missing: list[tuple[Target, Verdict]], all_ccs: list[CC],
                     section: Mapping[str, Any], installer: Installer) -> Finding:
    optional = bool(lib.gate and lib.gate.optional)
    labels = [t.label for t, _ in missing]
    too_new = [(t, v) for t, v in missing if v.status == "ptx-too-new"]
    detail = [f"{lib.label} carries {lib.code()}."]
    if too_new:
        target, verdict = too_new[0]
        detail.append(f"Its only usable code for {target.label} is PTX ({verdict.by}, PTX ISA "
                      f"{', '.join((lib.fatbin or {}).get('ptx_isa') or ())}), which needs a CUDA {verdict.needs_cuda} "
                      f"driver to JIT-compile; this driver supports CUDA {target.driver_cuda}. Update the driver, "
                      "or get a build with SASS for this GPU.")
    if lib.gate is not None:
        detail.append(f"{lib.gate.role} is used on {lib.gate.used_on}"
                      + ("; only some models or quantization methods use it." if optional else "."))
    detail.append("Its kernels fail at the first launch with 'no kernel image is available for execution on the "
                  "device' (CUDA error 209).")
    remedies, more = _coverage_remedy(lib, [t.cc for t, _ in missing], all_ccs, section, installer)
    detail += more
    return Finding(
        id="archs.optional-no-kernel-image" if optional else "archs.no-kernel-image",
        status=Status.WARN if optional else Status.FAIL,
        title=f"{lib.label} has no kernel image for {_names(labels)}: {lib.code()}",
        detail="\n".join(detail),
        evidence={**lib.evidence(), "targets": labels,
                  "driver_too_old_for_ptx": [{"target": t.label, "needs_cuda": v.needs_cuda} for t, v in too_new]},
        remediation=remedies,
    )


def _ptx_jit(lib: Library, jitted: list[tuple[Target, Verdict]]) -> Finding:
    fatbin = lib.fatbin or {}
    labels = [t.label for t, _ in jitted]
    by = sorted({v.by for _, v in jitted if v.by})
    isas = sorted(fatbin.get("ptx_isa") or (), key=version_tuple)
    driver = PTX_ISA_MIN_CUDA.value.get(isas[0]) if isas else None
    isa = ", ".join(isas) or "unknown"
    return Finding(
        id="archs.ptx-jit-only",
        status=Status.WARN,
        title=f"{lib.label} runs on {_names(labels)} only through PTX JIT of {', '.join(by)}: slow first start",
        detail=f"{lib.label} carries {lib.code()}: no SASS runs on "
        + ("these GPUs" if len(labels) > 1 else "this GPU")
        + f". The driver JIT-compiles the PTX (ISA {isa}) when each kernel module first loads, which takes "
        "seconds to minutes for a large library and is then kept in the driver's compute cache; it also needs a "
        + (f"driver for CUDA {driver} or newer" if driver else "driver that knows that PTX ISA")
        + ". A build with SASS for this GPU starts at once.",
        evidence={**lib.evidence(), "targets": labels, "jit_from": by},
    )


def _coverage_remedy(lib: Library, failing: list[CC], all_ccs: list[CC], section: Mapping[str, Any],
                     installer: Installer) -> tuple[tuple[Remediation, ...], list[str]]:
    canonical = lib.facts.get("canonical")
    version = str(lib.facts.get("version"))
    if canonical == "flash-attn":
        return _fa2_remedy(version, failing, all_ccs, installer)
    if canonical == "torch":
        return _torch_remedy(section.get("torch") or {}, failing, installer)
    if canonical == "vllm":
        archs = " ".join(f"{cc[0]}.{cc[1]}" for cc in all_ccs)
        advice = (f"vLLM takes its architectures from TORCH_CUDA_ARCH_LIST when it is built (its release images "
                  f"use '{VLLM_RELEASE_ARCH_LIST.value}'); for this GPU build vLLM {version} from source with "
                  f"TORCH_CUDA_ARCH_LIST='{archs}', as its GPU installation guide describes.")
        return (), [advice]
    return (), [f"Install a build of {lib.facts.get('distribution')} made for this GPU's architecture."]


def _fa2_remedy(version: str, failing: list[CC], all_ccs: list[CC],
                installer: Installer) -> tuple[tuple[Remediation, ...], list[str]]:
    floor = FA2_MIN_COMPUTE_CAPABILITY.value
    too_old = [cc for cc in failing if cc < floor]
    if too_old:
        uninstall = Remediation(installer.uninstall("flash-attn"),
                                f"flash-attn 2 supports compute capability {floor[0]}.{floor[1]} and newer only; "
                                "vLLM serves without it (it skips the flash_attn import when the package is absent)")
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
    command = installer.install(spec, no_build_isolation=True, reinstall=True, no_deps=True,
                                env={FA2_ARCHS_ENV.value: ";".join(wanted), "FLASH_ATTENTION_FORCE_BUILD": "TRUE",
                                     "MAX_JOBS": "4"})
    why = (f"build flash-attn with SASS for {', '.join('sm_' + v for v in wanted)} against the installed torch "
           f"(needs nvcc {toolkit}+" + ("; sm_80 code serves every 8.x GPU)" if "80" in wanted else ")"))
    advice = (f"{FA2_ARCHS_ENV.value} takes only {', '.join(values.values())}: a value like 86 matches nothing "
              "and builds no GPU code at all.")
    return (Remediation(command, why),), [advice]


def _torch_remedy(torch: Mapping[str, Any], failing: list[CC],
                  installer: Installer) -> tuple[tuple[Remediation, ...], list[str]]:
    show = Remediation(
        installer.run("-c", "import torch; print(torch.__version__, torch.version.cuda, "
                            "getattr(torch._C, '_cuda_getArchFlags', lambda: 'no CUDA build')())"),
        "the architectures this torch was compiled for (works without a GPU)",
    )
    remedies = [show]
    needed = max((SASS_MIN_TOOLKIT.value.get(cc[0], "0") for cc in failing), key=version_tuple)
    version, cuda = str(torch.get("version") or ""), torch.get("cuda")
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


# ---------------------------------------------------------------------------------------------------------
# The C and C++ runtime
# ---------------------------------------------------------------------------------------------------------


def _by_distribution(libraries: Iterable[Library]) -> list[list[Library]]:
    groups: dict[tuple[str, str], list[Library]] = {}
    for lib in libraries:
        groups.setdefault((str(lib.facts["distribution"]), str(lib.facts.get("version"))), []).append(lib)
    return list(groups.values())


def _group_label(libs: Sequence[Library]) -> str:
    if len(libs) == 1:
        return libs[0].label
    return f"{libs[0].owner}: {_plural(len(libs), 'library', 'libraries')} ({_names([lib.name for lib in libs])})"


def _runtime(libraries: list[Library], section: Mapping[str, Any], installer: Installer) -> list[Finding]:
    host = section.get("host") or {}
    provides: Mapping[str, str] = host.get("provides") or {}
    readable = [lib for lib in libraries if not lib.facts.get("error")]
    if not readable or not provides:
        return []
    highest: dict[str, str] = {}
    failing: list[tuple[Library, dict[str, dict[str, str | None]]]] = []
    from dflash_doctor.elf import unmet_versions  # here, not at import: the ELF reader is not cheap to load

    for lib in readable:
        needs = lib.facts.get("needs_versions") or {}
        for prefix, version in needs.items():
            if prefix not in highest or version_tuple(version) > version_tuple(highest[prefix]):
                highest[prefix] = version
        # A prefix the host does not report at all (libstdc++ not found) is not judged: its `errors` say why.
        unmet = {k: v for k, v in unmet_versions(dict(needs), dict(provides)).items() if v["provides"]}
        if unmet:
            failing.append((lib, unmet))
    if failing:
        return [_runtime_too_old([(lib, unmet) for lib, unmet in failing if lib in group], host, installer)
                for group in _by_distribution(lib for lib, _ in failing)]
    have = ", ".join(f"{k} {v}" for k, v in sorted(provides.items()))
    need = ", ".join(f"{k} {v}" for k, v in sorted(highest.items()))
    return [Finding(
        id="archs.runtime-ok",
        status=Status.PASS,
        title=f"{_plural(len(readable), 'library needs', 'libraries need')} at most {need or 'no versioned symbol'}; "
        f"this host provides {have}",
        evidence={"needs": highest, "provides": dict(provides), "libstdcxx": host.get("libstdcxx")},
    )]


def _runtime_too_old(failing: list[tuple[Library, dict[str, dict[str, str | None]]]], host: Mapping[str, Any],
                     installer: Installer) -> Finding:
    libs = [lib for lib, _ in failing]
    unmet: dict[str, dict[str, str | None]] = {}
    for _lib, lib_unmet in failing:
        for prefix, need in lib_unmet.items():
            known = unmet.get(prefix)
            if known is None or version_tuple(str(need["needs"])) > version_tuple(str(known["needs"])):
                unmet[prefix] = need
    ordered = sorted(unmet.items(), key=lambda item: _RUNTIME_ORDER.index(item[0]))
    words = [f"{prefix}_{need['needs']}" for prefix, need in ordered]
    have = ", ".join(f"{prefix} {need['provides']}" for prefix, need in ordered)
    first = libs[0]
    detail = [(f"Importing {first.name} fails with \"version `{words[0]}' not found (required by "
               f"{first.facts.get('file')})\".")]
    remedies: list[Remediation] = []
    if "GLIBC" in unmet:
        detail.append("glibc cannot be upgraded inside a Python environment: build the library on this host, or "
                      "run on an image with a newer glibc.")
    if {"GLIBCXX", "CXXABI"} & set(unmet):
        libstdcxx = (host.get("libstdcxx") or {}).get("path")
        detail.append(f"The target interpreter loads {libstdcxx}: a newer libstdc++ (the OS package, or "
                      "conda-forge's libstdcxx-ng in a conda env) or a build on this host fixes it.")
    if first.facts.get("canonical") == "flash-attn":
        detail.append(f"flash-attn's release wheels from {FA2_UBUNTU_2204_WHEELS_FROM.value} on are built on "
                      "Ubuntu 22.04 and need GLIBC 2.32 (flash-attn#1708, #2225).")
        remedies.append(Remediation(
            installer.install(f"flash-attn=={first.facts.get('version')}", no_build_isolation=True,
                              reinstall=True, no_deps=True,
                              env={"FLASH_ATTENTION_FORCE_BUILD": "TRUE", "MAX_JOBS": "4"}),
            "build flash-attn from source on this host, against its own glibc and libstdc++",
        ))
    return Finding(
        id="archs.runtime-too-old",
        status=Status.FAIL,
        title=f"{_group_label(libs)} need{'s' if len(libs) == 1 else ''} {', '.join(words)}; this host "
        f"provides {have}",
        detail="\n".join(detail),
        evidence={"libraries": [{**lib.evidence(), "needs": lib.facts.get("needs_versions"), "unmet": lib_unmet}
                                for lib, lib_unmet in failing],
                  "host": {k: host.get(k) for k in ("provides", "glibc", "libstdcxx")}},
        remediation=tuple(remedies),
    )


# ---------------------------------------------------------------------------------------------------------
# torch symbols
# ---------------------------------------------------------------------------------------------------------


def _symbols(libraries: list[Library], section: Mapping[str, Any], installer: Installer) -> list[Finding]:
    torch = section.get("torch")
    if not torch or torch.get("exports") is None:
        return []  # no torch, or its libraries could not all be read: nothing can be called missing
    checked = [lib for lib in libraries if lib.facts.get("missing") is not None]
    failing = [lib for lib in checked if lib.facts["missing"]]
    if failing:
        demangled: Mapping[str, str] = section.get("demangled") or {}
        return [_undefined_symbols(group, torch, demangled, installer) for group in _by_distribution(failing)]
    users = [lib for lib in checked if lib.facts.get("undefined_total")]
    if not users:
        return []
    return [Finding(
        id="archs.symbols-ok",
        status=Status.PASS,
        title=f"the torch symbols of {_plural(len(users), 'library', 'libraries')} all resolve against torch "
        f"{torch.get('version')}",
        evidence={"libraries": {lib.label: lib.facts.get("undefined_total") for lib in users},
                  "torch_exports": torch.get("exports")},
    )]


def _undefined_symbols(libs: list[Library], torch: Mapping[str, Any], demangled: Mapping[str, str],
                       installer: Installer) -> Finding:
    first = libs[0]
    symbol = str(first.facts["missing"][0])
    readable = demangled.get(symbol, symbol)
    total = sum(int(lib.facts.get("missing_total") or len(lib.facts["missing"])) for lib in libs)
    version = torch.get("version")
    if len(libs) == 1:
        more = f" (+{total - 1} more)" if total > 1 else ""
        title = (f"{first.label} needs {readable}{more}, which torch {version} does not export: "
                 f"`import {first.facts.get('module') or first.name}` would fail with undefined symbol")
    else:
        title = (f"{_group_label(libs)} need torch symbols that torch {version} does not export (e.g. {readable} "
                 f"in {first.name}): their imports would fail with undefined symbol")
    these = "it needs: it was" if len(libs) == 1 else "these need: they were"
    detail = [(f"None of torch {version}'s libraries ({', '.join(torch.get('exporters') or ())}) exports "
               f"{_plural(total, 'symbol', 'symbols')} {these} built against another torch. Loading "
               f"{first.name} fails with \"undefined symbol: {symbol}\", and so does everything that imports it.")]
    if torch.get("cpu_build"):
        detail.append(f"torch {version} is a CPU build: it exports no CUDA symbols (c10::cuda::, at::cuda::).")
    if first.facts.get("canonical") == "flash-attn":
        detail.append("flash_attn/__init__.py imports flash_attn_2_cuda, so even the pure-Triton "
                      "flash_attn.ops.triton.rotary import that vLLM makes fails.")
    return Finding(
        id="archs.undefined-symbol",
        status=Status.FAIL,
        title=title,
        detail="\n".join(detail),
        evidence={"libraries": [{**lib.evidence(), "missing": lib.facts["missing"],
                                 "missing_demangled": [demangled.get(m, m) for m in lib.facts["missing"]],
                                 "missing_total": lib.facts.get("missing_total")} for lib in libs],
                  "torch": version, "torch_cuda": torch.get("cuda"), "requires_torch": first.facts.get("requires_torch")},
        remediation=_symbol_remedy(first, torch, installer),
    )


def _exact_pin(requirement: str | None) -> str | None:
    if requirement and requirement.startswith("torch==") and "," not in requirement and "*" not in requirement:
        return requirement[len("torch=="):]
    return None


def _base(version: Any) -> str:
    try:
        return Version(str(version)).base_version
    except InvalidVersion:
        return str(version)


def _symbol_remedy(lib: Library, torch: Mapping[str, Any], installer: Installer) -> tuple[Remediation, ...]:
    canonical, version = lib.facts.get("canonical"), lib.facts.get("version")
    installed = _base(torch.get("version"))
    pinned = _exact_pin(lib.facts.get("requires_torch"))
    if pinned is not None and _base(pinned) != installed:
        return (Remediation(installer.install(f"torch=={pinned}"),
                            f"{lib.owner} requires torch=={pinned}, the torch its kernels were built against"),)
    if torch.get("cpu_build"):
        wanted = pinned or installed
        return (Remediation(installer.uninstall("torch"), f"remove the CPU build of torch {torch.get('version')}"),
                Remediation(installer.install(f"torch=={wanted}"),
                            f"PyPI's torch {wanted} for Linux x86_64 is the CUDA build"))
    if canonical == "flash-attn":
        return (Remediation(
            installer.install(f"flash-attn=={version}", no_build_isolation=True, reinstall=True, no_deps=True,
                              env={"FLASH_ATTENTION_FORCE_BUILD": "TRUE", "MAX_JOBS": "4"}),
            f"rebuild flash-attn {version} from source against the installed torch {torch.get('version')}",
        ),)
    return ()
