"""What the arch-coverage judgements share: a compiled library as the facts describe it, and how to name
groups of them in a finding."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dflash_doctor.knowledge.archs_advice import ARCH_GATED_LIBRARIES, LibraryGate

_SHOWN = 3  # names listed in a title before "(+N more)"


@dataclass(frozen=True)
class Library:
    facts: Mapping[str, Any]

    @property
    def name(self) -> str:
        module = self.facts.get("module")
        return str(module) if module else str(self.facts["path"]).rsplit("/", 1)[-1]

    @property
    def owner(self) -> str:
        version = self.facts.get("version")
        owner = f"{self.facts['distribution']} {version}" if version else str(self.facts["distribution"])
        if self.facts.get("found_by") == "import-system":
            owner += ", found by the import system, not in any RECORD"
        return owner

    @property
    def label(self) -> str:
        return f"{self.name} ({self.owner})"

    @property
    def fatbin(self) -> Mapping[str, Any] | None:
        fatbin = self.facts.get("fatbin")
        return fatbin if fatbin and (fatbin.get("sass") or fatbin.get("ptx") or fatbin.get("lto")) else None

    @property
    def gate(self) -> LibraryGate | None:
        return next((g for g in ARCH_GATED_LIBRARIES.value if g.distribution == self.facts.get("canonical")
                     and fnmatch.fnmatch(str(self.facts["path"]), g.path)), None)

    def code(self) -> str:
        fatbin = self.fatbin or {}
        parts = [f"SASS {', '.join(fatbin.get('sass') or ()) or 'none'}",
                 f"PTX {', '.join(fatbin.get('ptx') or ()) or 'none'}"]
        if fatbin.get("lto"):
            parts.append(f"LTO-IR {', '.join(fatbin['lto'])} (not loadable)")
        return "; ".join(parts)

    def evidence(self) -> dict[str, Any]:
        fatbin = self.fatbin or {}
        return {"file": self.facts.get("file"), "distribution": self.facts.get("distribution"),
                "found_by": self.facts.get("found_by") or "record",
                "version": self.facts.get("version"), "sass": fatbin.get("sass"), "ptx": fatbin.get("ptx"),
                "ptx_isa": fatbin.get("ptx_isa")}


def plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


def shown_names(items: Sequence[str]) -> str:
    shown = ", ".join(items[:_SHOWN])
    return shown + (f" (+{len(items) - _SHOWN} more)" if len(items) > _SHOWN else "")


def by_distribution(libraries: Iterable[Library]) -> list[list[Library]]:
    groups: dict[tuple[str, str, str], list[Library]] = {}
    for lib in libraries:
        key = (str(lib.facts["distribution"]), str(lib.facts.get("version")), str(lib.facts.get("found_by")))
        groups.setdefault(key, []).append(lib)
    return list(groups.values())


def group_label(libs: Sequence[Library]) -> str:
    if len(libs) == 1:
        return libs[0].label
    return f"{libs[0].owner}: {plural(len(libs), 'library', 'libraries')} ({shown_names([lib.name for lib in libs])})"
