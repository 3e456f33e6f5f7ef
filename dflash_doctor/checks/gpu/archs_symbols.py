"""torch symbols: a libtorch/libc10 symbol a library needs that the installed torch does not export fails its
import ("undefined symbol"), predicted here before anything is imported."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from packaging.version import InvalidVersion, Version

from dflash_doctor.checks.gpu.archs_libraries import Library, by_distribution, group_label, plural
from dflash_doctor.checks.gpu.codes import (
    ARCH_COVERAGE_SYMBOLS_OK,
    ARCH_COVERAGE_UNDEFINED_SYMBOL,
)
from dflash_doctor.checks.remedy import Installer, flash_attn_source_build
from dflash_doctor.facts.gpu.archs_shapes import ArchCoverage, ArchTorch
from dflash_doctor.model import Finding, Remediation, Status


def symbol_findings(libraries: list[Library], section: ArchCoverage, installer: Installer) -> list[Finding]:
    torch = section.torch
    if torch is None or torch.exports is None:
        return []  # no torch, or its libraries could not all be read: nothing can be called missing
    checked = [lib for lib in libraries if lib.facts.missing is not None]
    failing = [lib for lib in checked if lib.facts.missing]
    if failing:
        return [_undefined_symbols(group, torch, section.demangled, installer) for group in by_distribution(failing)]
    users = [lib for lib in checked if lib.facts.undefined_total]
    if not users:
        return []
    return [ARCH_COVERAGE_SYMBOLS_OK.finding(
        Status.PASS,
        title=f"the torch symbols of {plural(len(users), 'library', 'libraries')} all resolve against torch "
        f"{torch.version}",
        evidence={"libraries": {lib.label: lib.facts.undefined_total for lib in users},
                  "torch_exports": torch.exports},
    )]


def _undefined_symbols(libs: list[Library], torch: ArchTorch, demangled: Mapping[str, str],
                       installer: Installer) -> Finding:
    first = libs[0]
    symbol = str((first.facts.missing or [""])[0])
    readable = demangled.get(symbol, symbol)
    total = sum(lib.facts.missing_total or len(lib.facts.missing or ()) for lib in libs)
    version = torch.version
    if len(libs) == 1:
        more = f" (+{total - 1} more)" if total > 1 else ""
        title = (f"{first.label} needs {readable}{more}, which torch {version} does not export: "
                 f"`import {first.facts.module or first.name}` would fail with undefined symbol")
    else:
        title = (f"{group_label(libs)} need torch symbols that torch {version} does not export (e.g. {readable} "
                 f"in {first.name}): their imports would fail with undefined symbol")
    these = "it needs: it was" if len(libs) == 1 else "these need: they were"
    detail = [(f"None of torch {version}'s libraries ({', '.join(torch.exporters)}) exports "
               f"{plural(total, 'symbol', 'symbols')} {these} built against another torch. Loading "
               f"{first.name} fails with \"undefined symbol: {symbol}\", and so does everything that imports it.")]
    if torch.cpu_build:
        detail.append(f"torch {version} is a CPU build: it exports no CUDA symbols (c10::cuda::, at::cuda::).")
    if first.facts.canonical == "flash-attn":
        detail.append("flash_attn/__init__.py imports flash_attn_2_cuda, so even the pure-Triton "
                      "flash_attn.ops.triton.rotary import that vLLM makes fails.")
    return ARCH_COVERAGE_UNDEFINED_SYMBOL.finding(
        Status.FAIL,
        title=title,
        detail="\n".join(detail),
        evidence={"libraries": [{**lib.evidence(), "missing": lib.facts.missing,
                                 "missing_demangled": [demangled.get(m, m) for m in lib.facts.missing or ()],
                                 "missing_total": lib.facts.missing_total} for lib in libs],
                  "torch": version, "torch_cuda": torch.cuda, "requires_torch": first.facts.requires_torch},
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


def _symbol_remedy(lib: Library, torch: ArchTorch, installer: Installer) -> tuple[Remediation, ...]:
    canonical, version = lib.facts.canonical, lib.facts.version
    installed = _base(torch.version)
    pinned = _exact_pin(lib.facts.requires_torch)
    if pinned is not None and _base(pinned) != installed:
        return (Remediation(installer.install(f"torch=={pinned}"),
                            f"{lib.owner} requires torch=={pinned}, the torch its kernels were built against"),)
    if torch.cpu_build:
        wanted = pinned or installed
        return (Remediation(installer.uninstall("torch"), f"remove the CPU build of torch {torch.version}"),
                Remediation(installer.install(f"torch=={wanted}"),
                            f"PyPI's torch {wanted} for Linux x86_64 is the CUDA build"))
    if canonical == "flash-attn":
        return (Remediation(
            flash_attn_source_build(installer, f"flash-attn=={version}"),
            f"rebuild flash-attn {version} from source against the installed torch {torch.version}",
        ),)
    return ()
