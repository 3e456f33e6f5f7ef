"""Rules for reading the environment facts, shared by the collectors and the checks that judge them.

Names, requirements and the versions of Python distributions are read with `packaging` (imported on first
use, so that `dflash-doctor list` stays cheap); the probes, which run in the target with the standard
library only, keep their own small copies of these rules.
"""

from __future__ import annotations

from functools import lru_cache

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

__all__ = ["canonical", "release", "release_within", "requirement_name", "version_tuple"]


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
