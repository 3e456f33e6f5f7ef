"""Rules for reading the environment facts, shared by the collectors and the checks that judge them.

Names, requirements and the versions of Python distributions are read with `packaging`, each requirement string
parsed once a process; the probes, which run in the target with the standard library only, keep their own small
copies of these rules.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache

from packaging.markers import InvalidMarker, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

__all__ = ["applicable_requirements", "canonical", "parsed_requirement", "release", "release_within", "requirement_name",
           "version_tuple"]


def canonical(name: str) -> str:
    """The PEP 503 normalized name: packaging's canonicalize_name."""

    return str(canonicalize_name(name))


@lru_cache(maxsize=16384)
def parsed_requirement(text: str) -> Requirement | None:
    """A PEP 508 requirement string, parsed once a process; None for one that does not parse. A run reads the
    same Requires-Dist lines in several rules (a serving env holds about 1,200), and packaging parses one in
    about 0.1 ms. Never changed by its readers."""

    try:
        return Requirement(text)
    except InvalidRequirement:
        return None


def requirement_name(requirement: str) -> str | None:
    """The normalized name a PEP 508 requirement string names; None for one that does not parse."""

    parsed = parsed_requirement(requirement)
    return canonical(parsed.name) if parsed is not None else None


def applicable_requirements(requires: Sequence[str], marker_env: Mapping[str, str]) -> tuple[Requirement, ...]:
    """The requirements of `requires` (a distribution's Requires-Dist) whose markers hold in `marker_env`, with
    no extra; one that does not parse, or whose marker cannot be evaluated, is left out."""

    return _applicable(tuple(requires), tuple(sorted(marker_env.items())))


_FOR_AN_EXTRA = re.compile(r""";[ \t]*extra[ \t]*==[ \t]*(?:"[^"]+"|'[^']+')[ \t]*\Z""")
"""A requirement whose whole marker is `extra == "name"`: it holds only when that extra is asked for (three in four
of a serving environment's Requires-Dist lines). Not one with a URL (`name @ URL`): there a `;` with no space
before it is the URL's own."""


@lru_cache(maxsize=2048)
def _applicable(requires: tuple[str, ...], marker_env: tuple[tuple[str, str], ...]) -> tuple[Requirement, ...]:
    environment = dict(marker_env, extra="")
    kept: list[Requirement] = []
    for text in requires:
        if "@" not in text and _FOR_AN_EXTRA.search(text):
            continue  # no extra is asked here: left out unparsed, as its marker would leave it out
        requirement = parsed_requirement(text)
        if requirement is None:
            continue
        if requirement.marker is not None:
            try:
                if not requirement.marker.evaluate(environment):
                    continue
            except (InvalidMarker, UndefinedEnvironmentName):
                continue
        kept.append(requirement)
    return tuple(kept)


def release(version: str | None) -> tuple[int, ...] | None:
    """The release segment of a distribution's PEP 440 version (`0.24.0rc1+cu129` -> (0, 24, 0)); None when it
    does not parse. A release candidate or dev build of X counts as X: vLLM cuts its candidates from the
    release branch, so they hold what X holds."""

    try:
        return Version(version).release if version else None
    except InvalidVersion:
        return None


def release_within(version: str | None, oldest: str, newest: str) -> bool:
    """Whether the distribution's release (`release`: a candidate or local build of X counts as X) lies in the
    releases read, `oldest` to `newest` included; False when it does not parse."""
    got, low, high = release(version), release(oldest), release(newest)
    return got is not None and low is not None and high is not None and low <= got <= high


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
