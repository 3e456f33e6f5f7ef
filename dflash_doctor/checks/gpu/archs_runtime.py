"""The C and C++ runtime: GLIBC_/GLIBCXX_/CXXABI_ versions a library requires above what this machine gives the
target interpreter fail its import ("version `GLIBC_2.32' not found")."""

from __future__ import annotations

from dflash_doctor.checks.gpu.archs_libraries import Library, by_distribution, group_label, plural
from dflash_doctor.checks.gpu.codes import (
    ARCH_COVERAGE_RUNTIME_OK,
    ARCH_COVERAGE_RUNTIME_TOO_OLD,
)
from dflash_doctor.checks.remedy import Installer, flash_attn_source_build
from dflash_doctor.facts.elf import unmet_versions
from dflash_doctor.facts.gpu.archs_shapes import ArchCoverage, MachineRuntime
from dflash_doctor.facts.python.envfacts import version_tuple
from dflash_doctor.knowledge.archs_advice import FA2_UBUNTU_2204_WHEELS_FROM
from dflash_doctor.model import JSON, Finding, Remediation, Status
from dflash_doctor.shape import frozen_dataclass

_RUNTIME_ORDER = ("GLIBC", "GLIBCXX", "CXXABI")


@frozen_dataclass(frozen=True)
class Unmet:
    """A runtime version a library requires (GLIBCXX_3.4.32) above the one this machine provides (3.4.30)."""

    prefix: str
    needs: str
    provides: str

    @staticmethod
    def evidence(unmet: list[Unmet]) -> dict[str, JSON]:
        return {u.prefix: {"needs": u.needs, "provides": u.provides} for u in unmet}


def runtime_findings(libraries: list[Library], section: ArchCoverage, installer: Installer) -> list[Finding]:
    runtime = section.host
    provides = runtime.provides
    readable = [lib for lib in libraries if not lib.facts.error]
    if not readable or not provides:
        return []
    highest: dict[str, str] = {}
    failing: list[tuple[Library, list[Unmet]]] = []
    for lib in readable:
        needs = lib.facts.needs_versions or {}
        for prefix, version in needs.items():
            if prefix not in highest or version_tuple(version) > version_tuple(highest[prefix]):
                highest[prefix] = version
        # A prefix the machine does not report at all (libstdc++ not found) is not judged: its `errors` say why.
        unmet = [Unmet(prefix, str(v["needs"]), str(v["provides"]))
                 for prefix, v in unmet_versions(dict(needs), dict(provides)).items() if v["provides"]]
        if unmet:
            failing.append((lib, unmet))
    if failing:
        return [_runtime_too_old([(lib, unmet) for lib, unmet in failing if lib in group], runtime, installer)
                for group in by_distribution(lib for lib, _ in failing)]
    have = ", ".join(f"{k} {v}" for k, v in sorted(provides.items()))
    need = ", ".join(f"{k} {v}" for k, v in sorted(highest.items()))
    return [ARCH_COVERAGE_RUNTIME_OK.finding(
        Status.PASS,
        title=f"{plural(len(readable), 'library needs', 'libraries need')} at most {need or 'no versioned symbol'}; "
        f"this host provides {have}",
        evidence={"needs": highest, "provides": dict(provides),
                  "libstdcxx": runtime.libstdcxx.to_json() if runtime.libstdcxx else None},
    )]


def _runtime_too_old(failing: list[tuple[Library, list[Unmet]]], runtime: MachineRuntime,
                     installer: Installer) -> Finding:
    libs = [lib for lib, _ in failing]
    highest: dict[str, Unmet] = {}
    for _lib, lib_unmet in failing:
        for need in lib_unmet:
            known = highest.get(need.prefix)
            if known is None or version_tuple(need.needs) > version_tuple(known.needs):
                highest[need.prefix] = need
    ordered = sorted(highest.values(), key=lambda need: _RUNTIME_ORDER.index(need.prefix))
    unmet = {need.prefix for need in ordered}
    words = [f"{need.prefix}_{need.needs}" for need in ordered]
    have = ", ".join(f"{need.prefix} {need.provides}" for need in ordered)
    first = libs[0]
    detail = [(f"Importing {first.name} fails with \"version `{words[0]}' not found (required by "
               f"{first.facts.file})\".")]
    remedies: list[Remediation] = []
    if "GLIBC" in unmet:
        detail.append("glibc cannot be upgraded inside a Python environment: build the library on this host, or "
                      "run on an image with a newer glibc.")
    if {"GLIBCXX", "CXXABI"} & set(unmet):
        libstdcxx = runtime.libstdcxx.path if runtime.libstdcxx else None
        detail.append(f"The target interpreter loads {libstdcxx}: a newer libstdc++ (the OS package, or "
                      "conda-forge's libstdcxx-ng in a conda env) or a build on this host fixes it.")
    if first.facts.canonical == "flash-attn":
        detail.append(f"flash-attn's release wheels from {FA2_UBUNTU_2204_WHEELS_FROM.value} on are built on "
                      "Ubuntu 22.04 and need GLIBC 2.32 (flash-attn#1708, #2225).")
        remedies.append(Remediation(
            flash_attn_source_build(installer, f"flash-attn=={first.facts.version}"),
            "build flash-attn from source on this host, against its own glibc and libstdc++",
        ))
    return ARCH_COVERAGE_RUNTIME_TOO_OLD.finding(
        Status.FAIL,
        title=f"{group_label(libs)} need{'s' if len(libs) == 1 else ''} {', '.join(words)}; this host "
        f"provides {have}",
        detail="\n".join(detail),
        evidence={"libraries": [{**lib.evidence(), "needs": lib.facts.needs_versions, "unmet": Unmet.evidence(lib_unmet)}
                                for lib, lib_unmet in failing],
                  "host": {"provides": runtime.provides, "glibc": runtime.glibc.to_json() if runtime.glibc else None,
                           "libstdcxx": runtime.libstdcxx.to_json() if runtime.libstdcxx else None}},
        remediation=tuple(remedies),
    )
