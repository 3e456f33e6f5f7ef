"""The shape of the `arch_coverage` section (`facts.archs`): which GPU architectures each compiled library
of the stack carries kernels for, and the host's runtime versions and torch's exports they need."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from dflash_doctor.facts.shape import Shape

__all__ = ["ArchCoverage"]


@dataclass(frozen=True)
class ArchCoverage(Shape):
    SECTION: ClassVar[str] = "arch_coverage"

    no_gpu: bool = False
    target_archs_given: list[str] = field(default_factory=list)
    target_archs: list[str] = field(default_factory=list)
    """`--target-arch` as sm_XY names."""
    target_archs_error: str | None = None
    host: dict[str, Any] = field(default_factory=dict)
    """glibc and libstdc++ versions the host provides (`elf.host_runtime_versions`)."""
    torch: dict[str, Any] | None = None
    """torch's version, CUDA build and the libraries whose exports were read; None without torch."""
    libraries: list[dict[str, Any]] = field(default_factory=list)
    """One scan per compiled library: its fatbin's SASS and PTX, what it needs, what is missing."""
    skipped: list[Any] = field(default_factory=list)
    skipped_total: int = 0
    demangled: dict[str, str] = field(default_factory=dict)
    workers: int | None = None
    seconds: float | None = None
