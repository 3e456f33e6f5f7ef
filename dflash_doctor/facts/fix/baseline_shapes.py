"""The shapes of the golden baseline: the document `dflash-doctor baseline save FILE` writes (`Baseline`, checked
against documents/schema/baseline-v1.json when it is read), the `baseline` fact section that holds it for a run
(`BaselineFacts`), and the `file_hashes` section, the sha256 of the files a distribution installed, as read now
(`FileHashes`). Collected by facts.fix.baseline, judged by checks.fix.baseline.

In the document a value of null (or an absent key) means "not collected when saved": it is not compared.
"""

from __future__ import annotations

from dataclasses import field
from typing import ClassVar

from dflash_doctor.shape import Shape, frozen_dataclass

__all__ = ["SCHEMA", "Baseline", "BaselineFacts", "DistributionState", "DriverState", "FileHashes", "GpuState",
           "HashedFiles", "LibraryArchs", "PythonState", "Tool"]

SCHEMA = "dflash-doctor/baseline/v1"


@frozen_dataclass(frozen=True)
class Tool(Shape):
    name: str = "dflash-doctor"
    version: str = ""


@frozen_dataclass(frozen=True)
class PythonState(Shape):
    version: str | None = None
    implementation: str | None = None
    machine: str | None = None

    @property
    def label(self) -> str:
        return f"{self.implementation} {self.version} on {self.machine}"


@frozen_dataclass(frozen=True)
class DriverState(Shape):
    version: str | None = None
    cuda: str | None = None
    range: str | None = None
    """The driver versions the baseline accepts ("==570.*"; None: the saved version exactly)."""

    @property
    def accepted(self) -> str:
        return self.range or f"=={self.version}"


@frozen_dataclass(frozen=True)
class GpuState(Shape):
    compute_capabilities: list[str] = field(default_factory=list)
    names: list[str | None] = field(default_factory=list)


@frozen_dataclass(frozen=True)
class DistributionState(Shape):
    name: str = ""
    version: str | None = None
    files: dict[str, str | None] | None = None
    """RECORD path -> "sha256=...", None (missing) or "not hashed: why"; None: not hashed when saved."""
    files_digest: str | None = None

    @property
    def label(self) -> str:
        return f"{self.name} {self.version}"

    @property
    def pin(self) -> str:
        return f"{self.name}=={self.version}"


@frozen_dataclass(frozen=True)
class LibraryArchs(Shape):
    sass: list[str] = field(default_factory=list)
    ptx: list[str] = field(default_factory=list)

    @property
    def all(self) -> list[str]:
        return [*self.sass, *self.ptx]


@frozen_dataclass(frozen=True)
class Baseline(Shape):
    """The expected state of an environment, as saved."""

    schema: str = SCHEMA
    created: str = ""
    tool: Tool = field(default_factory=Tool)
    fingerprint: str = ""
    python: PythonState | None = None
    driver: DriverState | None = None
    gpus: GpuState | None = None
    target_archs: list[str] = field(default_factory=list)
    distributions: dict[str, DistributionState] | None = None
    """Canonical name -> the distribution (None: not collected when saved)."""
    arch_coverage: dict[str, LibraryArchs] | None = None
    """Library (site-relative path) -> the archs its compiled code carries (None: not collected)."""

    def hashed_names(self) -> list[str]:
        """The distributions whose file hashes the baseline holds: those to hash now to compare with it."""
        return [n for n, d in (self.distributions or {}).items() if d.files is not None]


@frozen_dataclass(frozen=True)
class BaselineFacts(Shape):
    """The baseline a run is compared with: the file the user named and the document it holds."""

    SECTION: ClassVar[str] = "baseline"

    file: str | None = None
    """None: no baseline was given."""
    expected: Baseline | None = None
    """None: no baseline given, or a report saved before the document was kept with it."""


@frozen_dataclass(frozen=True)
class HashedFiles(Shape):
    files: dict[str, str | None] | None = None
    """RECORD path -> "sha256=...", None (missing) or "not hashed: why"; None: no readable RECORD."""
    files_digest: str | None = None


@frozen_dataclass(frozen=True)
class FileHashes(Shape):
    """The sha256 of every file each requested distribution installed, read now (facts.fix.file_hashes)."""

    SECTION: ClassVar[str] = "file_hashes"

    requested: list[str] = field(default_factory=list)
    distributions: dict[str, HashedFiles] = field(default_factory=dict)
    """Canonical name -> its files; a requested distribution that is not installed is absent."""
