"""The Python layer: the target's distributions, the flash-attn v2/v4 namespace, the imports vLLM makes and the
extensions they load.

Each check reads its sections and hands typed views to its rules: distributions.py with kernel_packages.py over
requirements.py (distributions), namespaces.py over namespace_layout.py (namespaces), imports.py with
import_failures.py, guards.py and extension_abi.py (imports, import-surface, extensions); codes.py holds every
finding's code; flashinfer.py and pth.py (kernel-packages).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from dflash_doctor.check import Check, Facts
from dflash_doctor.checks.python.codes import CODES, KERNEL_PACKAGES_NONE
from dflash_doctor.checks.python.distributions import distribution_findings
from dflash_doctor.checks.python.flashinfer import flashinfer_findings, jit_cache_findings
from dflash_doctor.checks.python.import_failures import ImportContext
from dflash_doctor.checks.python.imports import extension_findings, rotary_findings, surface_findings
from dflash_doctor.checks.python.namespaces import namespace_findings
from dflash_doctor.checks.python.pth import pth_findings
from dflash_doctor.checks.remedy import Installer
from dflash_doctor.codes import Code
from dflash_doctor.facts.gpu.nvml_shapes import Gpu
from dflash_doctor.facts.python.environment_shapes import Distributions, Resolution, Target
from dflash_doctor.facts.python.imports_shapes import Extensions, RotaryImport, SurfaceImports
from dflash_doctor.facts.python.kernel_files_shapes import KernelFiles
from dflash_doctor.facts.python.vllm_source_shapes import VllmServeImports, VllmSource, VllmSurface
from dflash_doctor.model import Finding, Status

__all__ = ["CODES", "DistributionsCheck", "ExtensionsCheck", "ImportSurfaceCheck", "KernelPackagesCheck",
           "NamespaceCheck", "RotaryImportCheck"]


def _codes_of(check_id: str) -> tuple[Code, ...]:
    return tuple(code for code in CODES if code.id.startswith(check_id + "."))


def _import_context(facts: Facts) -> ImportContext:
    """What a failing import is judged against: the environment, and whether a GPU is expected here (the NVML
    section; `skipped` under --no-gpu)."""
    target = facts.section(Target)
    return ImportContext(facts.section(Distributions), facts.section(Resolution), Installer.for_target(target),
                         gpu=facts.optional_section(Gpu), marker_env=target.marker_environment)


class DistributionsCheck(Check):
    """Installed distributions: the stack's versions, its requirements as the installed metadata states them (vLLM
    pins torch exactly), duplicate dist-infos, RECORD integrity of the stack and its kernel packages, and metadata
    too broken to read."""

    id: ClassVar[str] = "distributions"
    layer: ClassVar[str] = "python"
    title: ClassVar[str] = "Installed distributions"
    codes: ClassVar[tuple[Code, ...]] = _codes_of("distributions")
    needs: ClassVar[frozenset[str]] = frozenset({"target", "distributions"})
    # Judged better with: what `vllm serve` imports on its way up (a report saved before it was collected is
    # judged without it).
    wants: ClassVar[frozenset[str]] = frozenset({"vllm_serve_imports"})

    def judge(self, facts: Facts) -> Iterable[Finding]:
        return distribution_findings(facts.section(Distributions), facts.section(Target),
                                     facts.optional_section(VllmServeImports))


class NamespaceCheck(Check):
    """The flash_attn namespace: who owns which files under flash_attn/ (RECORD), how `flash_attn` resolves on the
    target's sys.path, what shadows it, and the files that flash-attn and flash-attn-4 both claim. Whether a
    namespace `flash_attn` is fatal depends on the installed vLLM: judged by the guard its own source puts around
    the rotary import (guards.py)."""

    id: ClassVar[str] = "namespaces"
    layer: ClassVar[str] = "python"
    title: ClassVar[str] = "flash_attn namespace"
    codes: ClassVar[tuple[Code, ...]] = _codes_of("namespaces")
    needs: ClassVar[frozenset[str]] = frozenset({"target", "distributions", "resolution", "vllm_source"})

    def judge(self, facts: Facts) -> Iterable[Finding]:
        resolution = facts.section(Resolution).of("flash_attn")
        return namespace_findings(facts.section(Distributions), resolution, facts.section(VllmSource),
                                  Installer.for_target(facts.section(Target)))


class RotaryImportCheck(Check):
    """The exact `from flash_attn.ops.triton.rotary import apply_rotary` vLLM runs at engine start, in the target."""

    id: ClassVar[str] = "imports"
    layer: ClassVar[str] = "python"
    title: ClassVar[str] = "flash_attn rotary import"
    codes: ClassVar[tuple[Code, ...]] = _codes_of("imports")
    needs: ClassVar[frozenset[str]] = frozenset(
        {"target", "distributions", "resolution", "rotary_import", "vllm_source", "gpu"}
    )

    def judge(self, facts: Facts) -> Iterable[Finding]:
        return rotary_findings(facts.section(RotaryImport), _import_context(facts), facts.section(VllmSource))


class ImportSurfaceCheck(Check):
    """Every import of an external kernel package in the installed vLLM's source, judged by the exception the
    target really raises against the guard vLLM puts around it."""

    id: ClassVar[str] = "import-surface"
    layer: ClassVar[str] = "python"
    title: ClassVar[str] = "vLLM's external kernel imports"
    codes: ClassVar[tuple[Code, ...]] = _codes_of("import-surface")
    needs: ClassVar[frozenset[str]] = frozenset(
        {"target", "distributions", "resolution", "vllm_surface", "surface_imports", "gpu"}
    )

    def judge(self, facts: Facts) -> Iterable[Finding]:
        return surface_findings(facts.section(VllmSurface), facts.section(SurfaceImports), _import_context(facts))


class ExtensionsCheck(Check):
    """Every compiled extension module of the stack, loaded on its own in the target."""

    id: ClassVar[str] = "extensions"
    layer: ClassVar[str] = "python"
    title: ClassVar[str] = "Compiled extensions load"
    codes: ClassVar[tuple[Code, ...]] = _codes_of("extensions")
    needs: ClassVar[frozenset[str]] = frozenset({"target", "distributions", "resolution", "extensions", "gpu"})

    def judge(self, facts: Facts) -> Iterable[Finding]:
        return extension_findings(facts.section(Extensions).items, facts.section(Target), _import_context(facts))


class KernelPackagesCheck(Check):
    """The kernel packages as they will load: FlashInfer's three distributions at the versions its import accepts,
    its JIT cache's libraries against torch's CUDA and the driver's, and `.pth` files Python never reads (cutlass)."""

    id: ClassVar[str] = "kernel-packages"
    layer: ClassVar[str] = "python"
    title: ClassVar[str] = "Kernel packages as they load"
    codes: ClassVar[tuple[Code, ...]] = _codes_of("kernel-packages")
    needs: ClassVar[frozenset[str]] = frozenset({"target", "distributions", "resolution", "kernel_files"})
    # Judged better with: the driver's CUDA (NVML) for the JIT cache's libraries.
    wants: ClassVar[frozenset[str]] = frozenset({"gpu"})

    def judge(self, facts: Facts) -> Iterable[Finding]:
        target = facts.section(Target)
        files = facts.section(KernelFiles)
        installer = Installer.for_target(target)
        cache = files.flashinfer_cache
        findings = [
            *flashinfer_findings(facts.section(Distributions), target.environ, installer,
                                 cache.torch_cuda if cache else None),
            *jit_cache_findings(cache, facts.optional_section(Gpu)),
            *pth_findings(files.pth_files, facts.section(Resolution), installer),
        ]
        return findings or [KERNEL_PACKAGES_NONE.finding(
            Status.PASS, title="no flashinfer-python and no .pth file: nothing to judge")]
