"""What the arch-coverage judgements share: a compiled library as the facts describe it, and how to name
groups of them in a finding."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from typing import Any

from dflash_doctor.facts.gpu.archs_shapes import ArchLibrary, Fatbin
from dflash_doctor.knowledge.archs_advice import ARCH_GATED_LIBRARIES, LibraryGate
from dflash_doctor.shape import frozen_dataclass

_SHOWN = 3  # names listed in a title before "(+N more)"


@frozen_dataclass(frozen=True)
class Library:
    facts: ArchLibrary

    @property
    def name(self) -> str:
        return self.facts.module or self.facts.path.rsplit("/", 1)[-1]

    @property
    def owner(self) -> str:
        version = self.facts.version
        owner = f"{self.facts.distribution} {version}" if version else self.facts.distribution
        if self.facts.found_by == "import-system":
            owner += ", found by the import system, not in any RECORD"
        return owner

    @property
    def label(self) -> str:
        return f"{self.name} ({self.owner})"

    @property
    def fatbin(self) -> Fatbin | None:
        """The library's device code, when it carries any."""
        fatbin = self.facts.fatbin
        return fatbin if fatbin and (fatbin.sass or fatbin.ptx or fatbin.lto) else None

    @property
    def gate(self) -> LibraryGate | None:
        return next((g for g in ARCH_GATED_LIBRARIES.value if g.distribution == self.facts.canonical
                     and fnmatch.fnmatch(self.facts.path, g.path)), None)

    def code(self) -> str:
        fatbin = self.fatbin or Fatbin()
        parts = [f"SASS {', '.join(fatbin.sass) or 'none'}", f"PTX {', '.join(fatbin.ptx) or 'none'}"]
        if fatbin.lto:
            parts.append(f"LTO-IR {', '.join(fatbin.lto)} (not loadable)")
        return "; ".join(parts)

    def evidence(self) -> dict[str, Any]:
        fatbin = self.fatbin
        return {"file": self.facts.file, "distribution": self.facts.distribution,
                "found_by": self.facts.found_by or "record", "version": self.facts.version,
                "sass": fatbin.sass if fatbin else None, "ptx": fatbin.ptx if fatbin else None,
                "ptx_isa": fatbin.ptx_isa if fatbin else None}


def plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def shown_names(items: Sequence[str]) -> str:
    shown = ", ".join(items[:_SHOWN])
    return shown + (f" (+{len(items) - _SHOWN} more)" if len(items) > _SHOWN else "")


def by_distribution(libraries: Iterable[Library]) -> list[list[Library]]:
    groups: dict[tuple[str, str, str], list[Library]] = {}
    for lib in libraries:
        key = (lib.facts.distribution, str(lib.facts.version), str(lib.facts.found_by))
        groups.setdefault(key, []).append(lib)
    return list(groups.values())


def group_label(libs: Sequence[Library]) -> str:
    if len(libs) == 1:
        return libs[0].label
    return f"{libs[0].owner}: {plural(len(libs), 'library', 'libraries')} ({shown_names([lib.name for lib in libs])})"
