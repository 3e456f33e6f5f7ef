"""Read-only views over the environment facts, shared by the checks that judge them.

Names, requirements and the versions of Python distributions are read with `packaging` (imported on first
use, so that `dflash-doctor list` stays cheap); the probes, which run in the target with the standard
library only, keep their own small copies of these rules.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

__all__ = ["Dist", "Distributions", "canonical", "release", "requirement_name", "version_tuple"]


def canonical(name: str) -> str:
    """The PEP 503 normalized name: packaging's canonicalize_name."""

    return str(canonicalize_name(name))


@lru_cache(maxsize=4096)
def requirement_name(requirement: str) -> str | None:
    """The normalized name a PEP 508 requirement string names; None for one that does not parse."""

    try:
        return canonical(Requirement(requirement).name)
    except InvalidRequirement:
        return None


def release(version: str | None) -> tuple[int, ...] | None:
    """The release segment of a distribution's PEP 440 version (`0.24.0rc1+cu129` -> (0, 24, 0)); None when it
    does not parse. A release candidate or dev build of X counts as X: vLLM cuts its candidates from the
    release branch, so they hold what X holds."""

    try:
        return Version(version).release if version else None
    except InvalidVersion:
        return None


def version_tuple(text: str | None) -> tuple[int, ...]:
    """Leading numeric release parts, for ordering versions that are not PEP 440 (CUDA "12.8", driver
    "580.159.04", "GLIBC 2.32"): the leading digits of each dot-separated part, up to the first part that
    does not start with one or has more after its digits (`0.11.1rc1` -> (0, 11, 1), never (0, 11, 11)).
    A distribution's version is `release`'s to read."""
    parts: list[int] = []
    for piece in (text or "").split("+")[0].split("."):
        digits = len(piece) - len(piece.lstrip("0123456789"))
        if not digits:
            break
        parts.append(int(piece[:digits]))
        if digits < len(piece):
            break
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
