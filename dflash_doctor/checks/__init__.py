"""The built-in checks, one module per layer of the stack, and the judgement helpers they share
(`remedy`, `guards`, `baseline`, the `*_common` modules)."""

from __future__ import annotations

__all__ = ["BUILTIN_CHECKS"]

# The built-in checks in their declared order: the order they are judged and shown in. pyproject.toml
# declares the same table as entry points, which is how an installed doctor finds them (a test compares
# the two); setuptools writes entry points sorted by name, so the order can only come from here. Also
# used as is when the package runs from a source tree without being installed (no entry points then).
BUILTIN_CHECKS: tuple[tuple[str, str], ...] = (
    ("distributions", "dflash_doctor.checks.python:DistributionsCheck"),
    ("namespaces", "dflash_doctor.checks.python:NamespaceCheck"),
    ("imports", "dflash_doctor.checks.python:RotaryImportCheck"),
    ("import-surface", "dflash_doctor.checks.python:ImportSurfaceCheck"),
    ("extensions", "dflash_doctor.checks.python:ExtensionsCheck"),
    ("gpu", "dflash_doctor.checks.gpu:GpuCheck"),
    ("arch-coverage", "dflash_doctor.checks.gpu:ArchCoverageCheck"),
    ("cuda-stack", "dflash_doctor.checks.gpu:CudaStackCheck"),
    ("kernels", "dflash_doctor.checks.gpu:KernelsCheck"),
    ("model-files", "dflash_doctor.checks.models:ModelFilesCheck"),
    ("drafter", "dflash_doctor.checks.models:DrafterCheck"),
    ("drafter-attention", "dflash_doctor.checks.models:DrafterAttentionCheck"),
    ("serve-command", "dflash_doctor.checks.serve:ServeCommandCheck"),
    ("serve-resources", "dflash_doctor.checks.serve:ServeResourcesCheck"),
    ("fabric", "dflash_doctor.checks.fabric:FabricCheck"),
    ("live", "dflash_doctor.checks.live:LiveCheck"),
)
