"""The shapes of the sections `facts.python.imports` collects: rotary_import, surface_imports, extensions.

Each is made of `ImportFacts`: what the try_import probe (facts/probes/try_import.py) reported for one
import, and how its process went.
"""

from __future__ import annotations

from dataclasses import field
from typing import ClassVar

from dflash_doctor.facts.python.environment_shapes import ProbeRun, Shadowed
from dflash_doctor.facts.shape import Shape, frozen_dataclass

__all__ = [
    "ChainedException", "ExtensionFacts", "Extensions", "ImportException", "ImportFacts", "ImportProcess",
    "LibraryLookup", "Preload", "RecordLine", "RotaryImport", "StackVersions", "SurfaceImports",
]


@frozen_dataclass(frozen=True)
class ImportProcess(ProbeRun):
    """How the import's process went (`ProbeOutcome.as_facts`; `batch`: imports its process ran)."""

    batch: int | None = None


@frozen_dataclass(frozen=True)
class ChainedException(Shape):
    type: str = ""
    message: str = ""


@frozen_dataclass(frozen=True)
class ImportException(Shape):
    """What the import raised, as the probe described it."""

    type: str = ""
    mro: list[str] = field(default_factory=list)
    message: str = ""
    name: str | None = None
    path: str | None = None
    chain: list[ChainedException] = field(default_factory=list)
    traceback: str = ""


@frozen_dataclass(frozen=True)
class Preload(Shape):
    """A module imported before the one judged (torch, before an extension that links it)."""

    module: str = ""
    ok: bool = False
    exception: ImportException | None = None


@frozen_dataclass(frozen=True)
class LibraryLookup(Shape):
    """A library the extension needs (DT_NEEDED), and where it was found: "loaded", "dlopen", a path, or None."""

    name: str = ""
    found: str | None = None


@frozen_dataclass(frozen=True)
class StackVersions(Shape):
    """The stack's versions as the importing process saw them."""

    python_tag: str = ""
    torch: str | None = None
    torch_cuda: str | None = None
    torch_git: str | None = None
    torch_cxx11_abi: bool | None = None
    triton: str | None = None


@frozen_dataclass(frozen=True)
class ImportFacts(Shape):
    """One import in the target interpreter."""

    module: str = ""
    names: list[str] = field(default_factory=list)
    process: ImportProcess | None = None
    preload: list[Preload] = field(default_factory=list)
    ok: bool = False
    file: str | None = None
    exception: ImportException | None = None
    seconds: float | None = None
    libraries: list[LibraryLookup] | None = None
    loaded: dict[str, str | None] | bool = field(default_factory=dict)
    """Where each package of interest, and each on the way to the module, was loaded from (False for an
    extension built for another interpreter, which is not loaded)."""
    versions: StackVersions | None = None


@frozen_dataclass(frozen=True)
class RotaryImport(ImportFacts):
    """`from flash_attn.ops.triton.rotary import apply_rotary`, as vLLM's ApplyRotaryEmb does it."""

    SECTION: ClassVar[str] = "rotary_import"


@frozen_dataclass(frozen=True)
class SurfaceImports(Shape):
    """Each distinct module the installed vLLM imports from an external kernel package."""

    SECTION: ClassVar[str] = "surface_imports"

    imports: list[ImportFacts] = field(default_factory=list)


@frozen_dataclass(frozen=True)
class RecordLine(Shape):
    """A line of a RECORD file: which file, which line."""

    record: str | None = None
    line: int | None = None


@frozen_dataclass(frozen=True)
class ExtensionFacts(ImportFacts):
    """One compiled extension of the stack, loaded on its own after torch (or why it was not)."""

    distribution: str | None = None
    path: str | None = None
    found_by: str | None = None
    """"record" (its distribution's RECORD lists it) or "import-system" (only the import system finds it)."""
    finder: str | None = None
    shadows: Shadowed | None = None
    refused: str | None = None
    """Why the file was not loaded (not a regular file, outside the environment)."""
    record_line: RecordLine | None = None
    """A RECORD line lists the file the import system found, resolving outside the
    environment (a symlink out), so it is no extension RECORD keeps."""
    abi_tag: str | None = None
    """Another interpreter's ABI tag in the file name: not loaded, no import of this one would."""


@frozen_dataclass(frozen=True)
class Extensions(Shape):
    SECTION: ClassVar[str] = "extensions"

    torch_installed: bool = False
    items: list[ExtensionFacts] = field(default_factory=list)
