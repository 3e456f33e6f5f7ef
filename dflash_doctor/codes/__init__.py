"""The one table of finding ids.

Every finding a check emits carries an id from this table. Ids are stable: once released, an id keeps
its meaning; a retired id stays listed with `retired` set. The table is assembled from one section per
layer of the stack (kept in sibling modules so that each layer's codes sit beside each other), and
`dflash-doctor explain ID` prints an entry.

Every id is `<check-id>.<name>`. Where a shared helper reports the same thing for several checks (a
failing import's cause, "nothing given"), each check has its own id with the one explanation, written
once under the first and copied to the others as the v1 alias table (`codes/aliases.py`) lists them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

__all__ = ["Code", "CODES", "lookup", "table"]


@dataclass(frozen=True)
class Code:
    id: str
    title: str
    explanation: str
    """What it catches, why it matters, what to do instead."""
    since: str = "0.1.0"
    retired: str | None = None


def table(*sections: Iterable[Code]) -> dict[str, Code]:
    merged: dict[str, Code] = {}
    for section in sections:
        for code in section:
            if code.id in merged:
                raise ValueError(f"finding id {code.id!r} is defined twice")
            merged[code.id] = code
    return merged


def _build() -> Mapping[str, Code]:
    from dflash_doctor.codes import core, python

    sections = [core.CODES, python.CODES]
    # Later layers add their section here; an absent one is simply not there yet.
    for name in ("gpu", "archs", "models", "serve", "pairing", "fleet", "fabric", "build", "live"):
        try:
            module = __import__(f"dflash_doctor.codes.{name}", fromlist=["CODES"])
        except ModuleNotFoundError:
            continue
        sections.append(module.CODES)
    return _with_shared(table(*sections))


def _with_shared(codes: dict[str, Code]) -> dict[str, Code]:
    from dflash_doctor.codes.aliases import V1_ALIASES

    for first, *others in V1_ALIASES.values():
        for other in others:
            if first in codes and other not in codes:
                codes[other] = replace(codes[first], id=other)
    return codes


CODES: Mapping[str, Code] = _build()


def lookup(code_id: str) -> Code | None:
    return CODES.get(code_id)
