"""The built-in checks, one module per layer of the stack, and the judgement helpers they share
(`remedy`, `guards`, `baseline`, the `*_common` modules)."""

from __future__ import annotations

__all__ = ["BUILTIN_CHECKS"]

# The built-in checks in their declared order: the order they are judged and shown in. pyproject.toml
# declares the same table as entry points, which is how an installed doctor finds them (a test compares
# the two); setuptools writes entry points sorted by name, so the order can only come from here. Also
# used as is when the package runs from a source tree without being installed (no entry points then).
BUILTIN_CHECKS: tuple[tuple[str, str], ...] = (
    ("distributions", "dflash_doctor.checks.distributions:DistributionsCheck"),
    ("namespaces", "dflash_doctor.checks.namespaces:NamespaceCheck"),
    ("imports", "dflash_doctor.checks.imports:RotaryImportCheck"),
    ("import-surface", "dflash_doctor.checks.imports:ImportSurfaceCheck"),
    ("extensions", "dflash_doctor.checks.imports:ExtensionsCheck"),
    ("gpu", "dflash_doctor.checks.gpu:GpuCheck"),
    ("arch-coverage", "dflash_doctor.checks.archs:ArchCoverageCheck"),
    ("cuda-stack", "dflash_doctor.checks.cuda_stack:CudaStackCheck"),
    ("kernels", "dflash_doctor.checks.kernels:KernelsCheck"),
    ("model-files", "dflash_doctor.checks.model_files:ModelFilesCheck"),
    ("drafter", "dflash_doctor.checks.drafter:DrafterCheck"),
    ("drafter-attention", "dflash_doctor.checks.drafter_attention:DrafterAttentionCheck"),
    ("serve-command", "dflash_doctor.checks.serve_command:ServeCommandCheck"),
    ("serve-resources", "dflash_doctor.checks.serve_resources:ServeResourcesCheck"),
    ("fabric", "dflash_doctor.checks.fabric:FabricCheck"),
    ("live", "dflash_doctor.checks.live:LiveCheck"),
)
