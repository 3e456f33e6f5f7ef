"""The shapes of the sections `facts.python.vllm_source` collects: vllm_source and vllm_surface.

Both are one scan of the installed vLLM's source (`facts.python.vllm_scan.scan_package`): vllm_source over the
files `vllm serve` is known to reach, vllm_surface over every file.
"""

from __future__ import annotations

from dataclasses import field
from typing import ClassVar

from dflash_doctor.facts.shape import Shape, frozen_dataclass

__all__ = ["Guard", "ImportSite", "ImportedAt", "ImportedElsewhere", "ScanError", "ServeImport", "ServeRoot", "VllmScan",
           "VllmServeImports", "VllmSource", "VllmSurface"]


@frozen_dataclass(frozen=True)
class Guard(Shape):
    """What stands around an import statement: a try/except, a `suppress`, an if (innermost first)."""

    kind: str = ""
    """"try", "suppress", "if" (or another branch kind)."""
    line: int = 0
    catches: list[str] = field(default_factory=list)
    test: str | None = None
    branch: str | None = None


@frozen_dataclass(frozen=True)
class ImportSite(Shape):
    """One import statement of an external kernel package in vLLM's source."""

    file: str = ""
    line: int = 0
    module: str = ""
    names: list[str] = field(default_factory=list)
    statement: str = ""
    scope: str = ""
    """"function" or "module"."""
    where: str = ""
    guards: list[Guard] = field(default_factory=list)


@frozen_dataclass(frozen=True)
class ScanError(Shape):
    file: str = ""
    error: str = ""


@frozen_dataclass(frozen=True)
class VllmScan(Shape):
    installed: bool = False
    version: str | None = None
    root: str | None = None
    files_scanned: int = 0
    files_parsed: int = 0
    sites: list[ImportSite] = field(default_factory=list)
    errors: list[ScanError] = field(default_factory=list)


@frozen_dataclass(frozen=True)
class VllmSource(VllmScan):
    SECTION: ClassVar[str] = "vllm_source"


@frozen_dataclass(frozen=True)
class VllmSurface(VllmScan):
    SECTION: ClassVar[str] = "vllm_surface"


@frozen_dataclass(frozen=True)
class ServeImport(Shape):
    """A package outside vLLM that a module on `vllm serve`'s way up imports (facts.python.vllm_serve_path)."""

    module: str = ""
    """As imported: "fastapi.middleware.cors"."""
    names: list[str] = field(default_factory=list)
    reach: str = ""
    """"serve" (unconditional all the way), "conditional" (under an if on the way) or "guarded" (vLLM catches
    the ImportError)."""
    file: str = ""
    line: int = 0
    chain: list[str] = field(default_factory=list)
    """vLLM's modules from the root the scan started at to the one that imports it."""


@frozen_dataclass(frozen=True)
class ImportedAt(Shape):
    file: str = ""
    line: int = 0
    scope: str = ""
    """"module" (at column 0) or "block" (indented: in a function, a class, a try or an if)."""


@frozen_dataclass(frozen=True)
class ImportedElsewhere(Shape):
    files: int = 0
    sites: list[ImportedAt] = field(default_factory=list)


@frozen_dataclass(frozen=True)
class ServeRoot(Shape):
    module: str = ""
    found: bool = False


@frozen_dataclass(frozen=True)
class VllmServeImports(Shape):
    """What `vllm serve` imports on its way up, from the installed vLLM's files (facts.python.vllm_serve_path)."""

    SECTION: ClassVar[str] = "vllm_serve_imports"

    installed: bool = False
    version: str | None = None
    root: str | None = None
    entry: str = ""
    entry_from: str = ""
    roots: list[ServeRoot] = field(default_factory=list)
    complete: bool = False
    modules_reached: int = 0
    files_parsed: int = 0
    bytes_read: int = 0
    seconds: float = 0.0
    imports: list[ServeImport] = field(default_factory=list)
    errors: list[ScanError] = field(default_factory=list)
    elsewhere: dict[str, ImportedElsewhere] = field(default_factory=dict)
    """By top-level import name, for the requirements of vLLM that are not met and not imported on the way up."""
    elsewhere_complete: bool = True
    elsewhere_seconds: float = 0.0
