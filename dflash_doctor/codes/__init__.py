"""Finding codes: `Code` (an id, its title, its explanation) and how codes make one table.

Every finding a check emits carries an id of a `Code`. Ids are stable: once released, an id keeps its
meaning; a retired id stays listed with `retired` set. Each check package holds the codes of the findings
it emits (its `codes.py`, beside the code that emits them) and each check class lists its own (`codes`);
the doctor's own codes live here (`core.py`). The table of every id is built above the checks, from the
loaded ones (`dflash_doctor.registry.CODES`, `code_table`), and `dflash-doctor explain ID` prints an entry.
This package imports nothing of the checks.

Every id is `<check-id>.<name>`. Where a shared helper reports the same thing for several checks (a
failing import's cause, "nothing given"), each check has its own id with the one explanation, written
once under the first and copied to the others as the v1 alias table (`codes/aliases.py`) lists them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from dflash_doctor.codes.aliases import V1_ALIASES
from dflash_doctor.model import JSON, Finding, Remediation, Status
from dflash_doctor.shape import frozen_dataclass

__all__ = ["Code", "table", "with_aliases"]


@frozen_dataclass(frozen=True)
class Code:
    id: str
    title: str
    explanation: str
    """What it catches, why it matters, what to do instead."""
    since: str = "0.1.0"
    retired: str | None = None

    def finding(self, status: Status, title: str = "", detail: str = "", *,
                evidence: Mapping[str, JSON] | None = None, remediation: Iterable[Remediation] = (),
                cause: str | Code = "") -> Finding:
        """A finding of this code: each finding is built from its code, so its id is one grep from its
        explanation. `title` says what was found this time (the code's own title when left out)."""
        return Finding(id=self.id, status=status, title=title or self.title, detail=detail,
                       evidence=dict(evidence or {}), remediation=tuple(remediation),
                       cause=cause.id if isinstance(cause, Code) else cause)


def table(*sections: Iterable[Code]) -> dict[str, Code]:
    merged: dict[str, Code] = {}
    for section in sections:
        for code in section:
            if code.id in merged:
                raise ValueError(f"finding id {code.id!r} is defined twice")
            merged[code.id] = code
    return merged


def with_aliases(codes: dict[str, Code]) -> dict[str, Code]:
    """`codes`, plus each check's copy of an explanation shared under the v1 alias table."""
    for first, *others in V1_ALIASES.values():
        for other in others:
            if first in codes and other not in codes:
                codes[other] = replace(codes[first], id=other)
    return codes
