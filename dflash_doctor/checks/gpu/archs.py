"""Rules of the arch-coverage check (ArchCoverageCheck in the package): the stack's compiled GPU code, judged
from its ELF files, with or without a GPU.

- Architecture coverage: for each GPU (NVML facts) or each `--target-arch` (a CI image build), does every
  library carry code that runs there? SASS that runs as is passes; PTX alone warns (the driver JIT-compiles
  it at first use, and only a driver that knows its PTX ISA can); nothing fails: "no kernel image is
  available for execution on the device" at the first launch. Libraries their owner loads only on some GPUs
  (knowledge.archs_advice ARCH_GATED_LIBRARIES) are not held to the others.
- The C and C++ runtime: GLIBC_/GLIBCXX_/CXXABI_ versions a library requires above what this machine gives
  the target interpreter fail its import ("version `GLIBC_2.32' not found").
- torch symbols: a libtorch/libc10 symbol a library needs that the installed torch does not export fails its
  import ("undefined symbol"), predicted here before anything is imported.

One module each: archs_coverage, archs_runtime and archs_symbols, with what they share in archs_libraries.
Everything is judged from the `arch_coverage` facts (which also record the --target-arch list), so `judge`
on a saved report gives the same answer on any machine.
"""

from __future__ import annotations

from dflash_doctor.checks.gpu.archs_coverage import coverage_findings, invalid_target_archs, targets_to_judge
from dflash_doctor.checks.gpu.archs_libraries import Library
from dflash_doctor.checks.gpu.archs_runtime import runtime_findings
from dflash_doctor.checks.gpu.archs_symbols import symbol_findings
from dflash_doctor.checks.gpu.codes import (
    ARCH_COVERAGE_NO_TARGET,
)
from dflash_doctor.checks.remedy import Installer
from dflash_doctor.facts.gpu.archs_shapes import ArchCoverage
from dflash_doctor.facts.gpu.nvml_shapes import Gpu
from dflash_doctor.facts.python.environment_shapes import Distributions
from dflash_doctor.model import Finding, Status

__all__ = ["arch_coverage_findings"]


def arch_coverage_findings(section: ArchCoverage, gpu: Gpu | None, dists: Distributions | None,
                           installer: Installer) -> list[Finding]:
    """The arch-coverage check's judgement: `gpu` (NVML) is judged when present, else the --target-arch list the
    section records; `dists` only sharpens a remedy (what an uninstall of flash-attn must take along)."""
    libraries = [Library(item) for item in section.libraries]
    findings: list[Finding] = []
    if section.target_archs_error:
        findings.append(invalid_target_archs(section))
    targets, absent_why = targets_to_judge(section, gpu)
    if targets:
        findings += coverage_findings(targets, libraries, section, installer, dists)
    elif not section.target_archs_error:
        findings.append(ARCH_COVERAGE_NO_TARGET.finding(
            Status.SKIP,
            title=f"compiled GPU code not judged: {absent_why}; pass --target-arch (e.g. sm_86,sm_90) "
            "for the GPUs this environment will run on",
            detail="Without a GPU the doctor cannot know which architectures matter. The C/C++ runtime and "
            "torch-symbol judgements of the same libraries still ran.",
            evidence={"no_gpu": section.no_gpu},
        ))
    findings += runtime_findings(libraries, section, installer)
    findings += symbol_findings(libraries, section, installer)
    # Worst first: the terminal prints the headline finding's detail where it stands in the list.
    return sorted(findings, key=lambda finding: -finding.status.rank)
