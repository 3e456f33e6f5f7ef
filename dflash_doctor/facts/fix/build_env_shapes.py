"""The declared shape of what a source build would find on this machine (facts.fix.build_env), typed to the leaves.

Saved with the dry runs (`dry_runs.build`, facts.fix.dryrun_shapes) when a remediation installs something, and read
by checks.fix.build_prereqs. Every field has a default, so an older report, or a hand-written one, loads.
"""

from __future__ import annotations

from dataclasses import field

from dflash_doctor.facts.shape import Shape, frozen_dataclass

__all__ = ["BuildEnv", "TorchBuild"]


@frozen_dataclass(frozen=True)
class TorchBuild(Shape):
    """The installed torch, as a build against it sees it: its version and `torch.version.cuda` (read from
    torch/version.py as text; None for a CPU build)."""

    installed: bool = False
    version: str | None = None
    cuda: str | None = None
    error: str | None = None
    """Why torch/version.py could not be read."""
    file: str | None = None
    """The torch/version.py read."""


@frozen_dataclass(frozen=True)
class BuildEnv(Shape):
    """The CUDA toolchain, ninja, the C++ compiler, memory, cores, torch and the archs to build for."""

    cuda_home: str | None = None
    cuda_home_from: str | None = None
    nvcc: str | None = None
    nvcc_release: str | None = None
    """"12.8", from `nvcc --version`."""
    ninja: str | None = None
    ninja_version: str | None = None
    cxx: str | None = None
    cxx_version: str | None = None
    mem_available_bytes: int | None = None
    cores: int | None = None
    torch: TorchBuild = field(default_factory=TorchBuild)
    archs: list[str] = field(default_factory=list)
    """As FLASH_ATTN_CUDA_ARCHS writes them ("90")."""
    archs_from: str | None = None
    max_jobs_env: str | None = None
    """MAX_JOBS as the environment already sets it."""
