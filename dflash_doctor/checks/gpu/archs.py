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

One module each: archs_coverage, archs_runtime and archs_symbols, with what they share in archs_common.
Everything is judged from the `arch_coverage` facts (which also record the --target-arch list), so `judge`
on a saved report gives the same answer on any machine.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from dflash_doctor.check import Facts
from dflash_doctor.checks.gpu.archs_common import Library
from dflash_doctor.checks.gpu.archs_coverage import coverage_findings, invalid_target_archs, targets_to_judge
from dflash_doctor.checks.gpu.archs_runtime import runtime_findings
from dflash_doctor.checks.gpu.archs_symbols import symbol_findings
from dflash_doctor.checks.remedy import Installer
from dflash_doctor.codes import Code
from dflash_doctor.facts.archs_shapes import ArchCoverage
from dflash_doctor.facts.environment_shapes import Distributions, Target
from dflash_doctor.facts.nvml_shapes import Gpu
from dflash_doctor.model import Finding, Status

__all__ = ["ArchCoverageCheck"]


CODES: tuple[Code, ...] = (
    Code("arch-coverage.covered", "The stack's GPU code covers the GPUs",
         "Every library of the stack that carries CUDA device code (flash-attn, vLLM's kernels, torch's "
         "libtorch_cuda) has SASS that runs on each GPU, or on each --target-arch: read from the `.nv_fatbin` "
         "section of the installed files, nothing loaded. SASS built for sm_XY runs on compute capability X.Z "
         "for Z >= Y, never across major versions; sm_90a-style code only on exactly that GPU. Libraries that "
         "their owner uses only on some GPUs (vLLM's FA3 on 9.x, FlashMLA) are counted as 'used only on other "
         "GPUs'. `dflash-doctor -v` lists each library's architectures."),
    Code("arch-coverage.ptx-jit-only", "A library reaches this GPU only through PTX JIT",
         "The library has no SASS that runs on this GPU, only PTX for an older architecture. The driver "
         "JIT-compiles the PTX when a kernel module first loads: seconds to minutes for a large library on each "
         "start (the driver's compute cache keeps the result), and it works only with a driver that knows the "
         "PTX ISA version. It runs, slowly at first. A build with SASS for the GPU avoids it: for flash-attn, "
         "FLASH_ATTN_CUDA_ARCHS with 80, 90, 100 or 120 and a build from source."),
    Code("arch-coverage.no-kernel-image", "A library has no code for this GPU",
         "The library carries neither SASS that runs on the GPU's compute capability nor PTX the driver could "
         "compile for it. It may still import, but its first kernel launch fails with 'no kernel image is "
         "available for execution on the device' (CUDA error 209), inside `vllm serve`. Typical causes: a "
         "flash-attn built with a FLASH_ATTN_CUDA_ARCHS that missed this GPU (a value like '86' builds nothing; "
         "'80' covers every 8.x GPU), a torch build for an older CUDA that cannot compile for Blackwell "
         "(sm_100/sm_120 need CUDA 12.8), or a GPU older than the library supports (flash-attn 2 needs compute "
         "capability 8.0). Also raised when the only code is PTX of an ISA newer than the driver (PTX ISA 9.0 "
         "needs a CUDA 13.0 driver): the JIT fails with CUDA_ERROR_UNSUPPORTED_PTX_VERSION. The remediation "
         "names the rebuild or the build to install."),
    Code("arch-coverage.optional-no-kernel-image", "An optional library has no code for this GPU",
         "A library that only some models or quantization methods use (vLLM's FlashMLA for MLA models, "
         "QuTLASS for fp_quant) has no code for this GPU. Serving other models is unaffected; those features "
         "fail at their first kernel launch."),
    Code("arch-coverage.no-target", "No GPU and no --target-arch: coverage not judged",
         "There is no GPU to judge compiled code against (--no-gpu, or NVML found none) and no --target-arch "
         "was given. In a CI image build, pass the GPUs the image will run on: `--target-arch sm_86,sm_90`. "
         "The C/C++ runtime and torch-symbol checks of the same libraries still ran."),
    Code("arch-coverage.target-arch-invalid", "--target-arch is not a list of GPU architectures",
         "The --target-arch value could not be read. Give SASS names or compute capabilities, comma-separated: "
         "sm_86,sm_90 or 8.6,9.0 (sm_90a is read as 9.0)."),
    Code("arch-coverage.no-device-code", "No library of the stack carries CUDA device code",
         "None of the scanned libraries has a `.nv_fatbin`: typically a CPU build of torch without vLLM or "
         "flash-attn. Nothing to judge for GPU architectures."),
    Code("arch-coverage.runtime-ok", "The host's C and C++ runtime is new enough",
         "Every scanned library's GLIBC_, GLIBCXX_ and CXXABI_ version requirements (read from its "
         "`.gnu.version_r`) are met by this host's glibc and by the libstdc++ the target interpreter loads."),
    Code("arch-coverage.runtime-too-old", "A library needs a newer glibc or libstdc++ than this host has",
         "The library was linked on a newer system: its import fails with \"version `GLIBC_2.32' not found\" "
         "(or GLIBCXX_/CXXABI_). flash-attn's release wheels from 2.8.0.post1 on are built on Ubuntu 22.04 and "
         "need GLIBC 2.32 (flash-attn#1708, #2225). glibc cannot be upgraded inside a Python environment: build "
         "the library on this host (flash-attn: FLASH_ATTENTION_FORCE_BUILD=TRUE with --no-build-isolation), or "
         "run on a newer base image. For GLIBCXX, a newer libstdc++ also works."),
    Code("arch-coverage.undefined-symbol", "A library needs torch symbols the installed torch does not export",
         "The library leaves libtorch/libc10 symbols undefined that none of the installed torch's libraries "
         "export: it was built against another torch version, CUDA variant or C++ ABI. Its import fails with "
         "`undefined symbol: _ZN3c10...`, and so does everything that imports it (flash_attn/__init__.py "
         "imports flash_attn_2_cuda). Predicted from the ELF files, before anything is imported. Rebuild it "
         "against the installed torch, or install the torch it was built for."),
    Code("arch-coverage.symbols-ok", "The stack's torch symbols all resolve",
         "Every libtorch/libc10 symbol the scanned libraries need is exported by the installed torch's "
         "libraries."),
)


class ArchCoverageCheck:
    id: ClassVar[str] = "arch-coverage"
    layer: ClassVar[str] = "gpu"
    title: ClassVar[str] = "Compiled GPU code"
    codes: ClassVar[tuple[Code, ...]] = tuple(c for c in CODES if c.id.startswith("arch-coverage."))
    # "gpu" (NVML) is judged when present; without it the --target-arch list recorded in arch_coverage is.
    # "distributions" only sharpens a remedy (what an uninstall of flash-attn must take along and clean up).
    needs: ClassVar[frozenset[str]] = frozenset({"arch_coverage", "target", "gpu", "distributions"})
    after: ClassVar[frozenset[str]] = frozenset()
    requires_gpu: ClassVar[bool] = False

    def judge(self, facts: Facts) -> Iterable[Finding]:
        section = facts.section(ArchCoverage)
        installer = Installer.for_target(facts.section(Target))
        libraries = [Library(item) for item in section.libraries]
        findings: list[Finding] = []
        if section.target_archs_error:
            findings.append(invalid_target_archs(section))
        targets, absent_why = targets_to_judge(section, facts.optional_section(Gpu))
        if targets:
            findings += coverage_findings(targets, libraries, section, installer,
                                          facts.optional_section(Distributions))
        elif not section.target_archs_error:
            findings.append(Finding(
                id="arch-coverage.no-target",
                status=Status.SKIP,
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
