"""The shapes of the sections `facts.vllm_source` collects: vllm_source and vllm_surface.

Both are one scan of the installed vLLM's source (`facts.vllm_scan.scan_package`): vllm_source over the
files `vllm serve` is known to reach, vllm_surface over every file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from dflash_doctor.facts.shape import Shape

__all__ = ["Guard", "ImportSite", "ScanError", "VllmScan", "VllmSource", "VllmSurface"]


@dataclass(frozen=True)
class Guard(Shape):
    """What stands around an import statement: a try/except, a `suppress`, an if (innermost first)."""

    kind: str = ""
    """"try", "suppress", "if" (or another branch kind)."""
    line: int = 0
    catches: list[str] = field(default_factory=list)
    test: str | None = None
    branch: str | None = None


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class ScanError(Shape):
    file: str = ""
    error: str = ""


@dataclass(frozen=True)
class VllmScan(Shape):
    installed: bool = False
    version: str | None = None
    root: str | None = None
    files_scanned: int = 0
    files_parsed: int = 0
    sites: list[ImportSite] = field(default_factory=list)
    errors: list[ScanError] = field(default_factory=list)


@dataclass(frozen=True)
class VllmSource(VllmScan):
    SECTION: ClassVar[str] = "vllm_source"


@dataclass(frozen=True)
class VllmSurface(VllmScan):
    SECTION: ClassVar[str] = "vllm_surface"
