"""The shape of the `arch_coverage` section (`facts.gpu.archs`): which GPU architectures each compiled library
of the stack carries kernels for, and the machine's runtime versions and torch's exports they need."""

from __future__ import annotations

from dataclasses import field
from typing import Any, ClassVar

from dflash_doctor.facts.shape import Shape, frozen_dataclass

__all__ = ["ArchCoverage", "ArchLibrary", "ArchTorch", "Fatbin", "MachineGlibc", "MachineLibstdcxx", "MachineRuntime"]


@frozen_dataclass(frozen=True)
class MachineGlibc(Shape):
    """This machine's glibc version, and where it was read."""

    version: str | None = None
    read_from: str | None = None


@frozen_dataclass(frozen=True)
class MachineLibstdcxx(Shape):
    """The libstdc++ the target interpreter's loader would use, and how it was found."""

    path: str | None = None
    found_by: str | None = None


@frozen_dataclass(frozen=True)
class MachineRuntime(Shape):
    """The C/C++ runtime the machine provides (`elf.machine_runtime_versions`; the section's key `host`)."""

    provides: dict[str, str] = field(default_factory=dict)
    """{"GLIBC": "2.36", "GLIBCXX": "3.4.30", "CXXABI": "1.3.13"}: the newest version of each."""
    glibc: MachineGlibc | None = None
    libstdcxx: MachineLibstdcxx | None = None
    executable: str | None = None
    errors: list[Any] = field(default_factory=list)
    seconds: float | None = None


@frozen_dataclass(frozen=True)
class ArchTorch(Shape):
    """torch's version, its CUDA build, and how many symbols its libraries export."""

    version: str | None = None
    location: str | None = None
    cuda: str | None = None
    cpu_build: bool | None = None
    exporters: list[str] = field(default_factory=list)
    exports: int | None = None
    """None when torch's libraries could not all be read: then no symbol is called missing."""
    errors: list[Any] = field(default_factory=list)
    seconds: float | None = None


@frozen_dataclass(frozen=True)
class Fatbin(Shape):
    """The device code in a library's .nv_fatbin section."""

    section: str | None = None
    sass: list[str] = field(default_factory=list)
    ptx: list[str] = field(default_factory=list)
    lto: list[str] = field(default_factory=list)
    other: list[Any] = field(default_factory=list)
    ptx_isa: list[str] = field(default_factory=list)
    entries: int | None = None
    compressed: bool | None = None
    problems: list[Any] = field(default_factory=list)


@frozen_dataclass(frozen=True)
class ArchLibrary(Shape):
    """One compiled library (an extension module or a shared library) of a stack distribution, scanned."""

    distribution: str = ""
    canonical: str | None = None
    version: str | None = None
    path: str = ""
    """Relative to the distribution's location (as RECORD lists it)."""
    kind: str = ""
    """"extension" or "library"."""
    module: str | None = None
    requires_torch: str | None = None
    found_by: str | None = None
    """"record" or "import-system"."""
    file: str = ""
    size: int | None = None
    seconds: float | None = None
    fatbin: Fatbin | None = None
    needs_versions: dict[str, str] | None = None
    """The newest GLIBC/GLIBCXX/CXXABI version the library needs."""
    needed: list[str] | None = None
    undefined_total: int | None = None
    missing: list[str] | None = None
    """torch symbols it needs that torch does not export (capped); None when not checked."""
    missing_total: int | None = None
    error: Any = None
    """Why the file could not be read (None: it was)."""


@frozen_dataclass(frozen=True)
class ArchCoverage(Shape):
    SECTION: ClassVar[str] = "arch_coverage"

    no_gpu: bool = False
    target_archs_given: list[str] = field(default_factory=list)
    target_archs: list[str] = field(default_factory=list)
    """`--target-arch` as sm_XY names."""
    target_archs_error: str | None = None
    host: MachineRuntime = field(default_factory=MachineRuntime)
    torch: ArchTorch | None = None
    """None without torch."""
    libraries: list[ArchLibrary] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    skipped_total: int = 0
    demangled: dict[str, str] = field(default_factory=dict)
    workers: int | None = None
    seconds: float | None = None
