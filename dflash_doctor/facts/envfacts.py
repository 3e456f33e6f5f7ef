"""Read-only views over the environment facts, shared by the checks that judge them."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["canonical", "version_tuple", "Distributions", "Dist"]


def canonical(name: str) -> str:
    """PEP 503 normalized name (the same rule as packaging.utils.canonicalize_name)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def version_tuple(text: str | None) -> tuple[int, ...]:
    """Leading numeric release parts, for ordering versions that PEP 440 may not parse ("12.8",
    "2.11.0+cu130", "580.159.04", "GLIBC 2.32"): digits of each dot-separated part until one has none."""
    parts: list[int] = []
    for piece in (text or "").split("+")[0].split("."):
        digits = "".join(c for c in piece if c.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


@dataclass(frozen=True)
class Dist:
    facts: Mapping[str, Any]

    @property
    def name(self) -> str:
        return str(self.facts.get("name"))

    @property
    def canonical(self) -> str:
        return canonical(self.name)

    @property
    def version(self) -> str | None:
        value = self.facts.get("version")
        return str(value) if value is not None else None

    @property
    def location(self) -> str:
        return str(self.facts.get("location"))

    @property
    def requires(self) -> list[str]:
        return list(self.facts.get("requires") or [])

    @property
    def claims(self) -> list[Mapping[str, Any]]:
        return list(self.facts.get("claims") or [])

    def label(self) -> str:
        return f"{self.name} {self.version}" if self.version else self.name


class Distributions:
    """Distributions in sys.path order; the first of a name is the one Python's importlib.metadata sees."""

    def __init__(self, section: Mapping[str, Any]) -> None:
        self.all = [Dist(item) for item in section.get("items", [])]
        self._first: dict[str, Dist] = {}
        for dist in self.all:
            self._first.setdefault(dist.canonical, dist)

    def get(self, name: str) -> Dist | None:
        return self._first.get(canonical(name))

    def version(self, name: str) -> str | None:
        dist = self.get(name)
        return dist.version if dist else None

    def __iter__(self) -> Iterator[Dist]:
        return iter(self._first.values())

    def duplicates(self) -> dict[str, list[Dist]]:
        groups: dict[str, list[Dist]] = {}
        for dist in self.all:
            groups.setdefault(dist.canonical, []).append(dist)
        return {name: dists for name, dists in groups.items() if len(dists) > 1}

    def requiring(self, name: str) -> list[Dist]:
        """Installed distributions that declare a requirement on `name` (any marker, any extra)."""
        wanted = canonical(name)
        found = []
        for dist in self:
            for requirement in dist.requires:
                match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
                if match and canonical(match.group(1)) == wanted:
                    found.append(dist)
                    break
        return found
