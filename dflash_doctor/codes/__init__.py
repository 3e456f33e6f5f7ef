"""The one table of finding ids.

Every finding a check emits carries an id from this table. Ids are stable: once released, an id keeps
its meaning; a retired id stays listed with `retired` set. Each built-in check module holds the codes of
the findings it emits (its `CODES`, right after its imports: id, title, explanation beside the code that
emits them); the codes that belong to no check live here, in sibling modules: the doctor's own
(`core.py`), fleet comparisons and baselines (`fleet.py`), the fix verification (`build.py`). The table is
assembled from them on first use, and `dflash-doctor explain ID` prints an entry.

Every id is `<check-id>.<name>`. Where a shared helper reports the same thing for several checks (a
failing import's cause, "nothing given"), each check has its own id with the one explanation, written
once under the first and copied to the others as the v1 alias table (`codes/aliases.py`) lists them.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace

from dflash_doctor.model import JSON, Finding, Remediation, Status

__all__ = ["Code", "CODES", "lookup", "table"]


@dataclass(frozen=True)
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


def _build() -> Mapping[str, Code]:
    # The check modules import `Code` from here, so they are imported only now, when the table is first read.
    from dflash_doctor.checks import BUILTIN_CHECKS
    from dflash_doctor.codes import build, core, fleet

    modules = dict.fromkeys(value.split(":")[0] for _, value in BUILTIN_CHECKS)  # imports.py holds three checks
    sections = [core.CODES, *(importlib.import_module(name).CODES for name in modules), fleet.CODES, build.CODES]
    return _with_shared(table(*sections))


def _with_shared(codes: dict[str, Code]) -> dict[str, Code]:
    from dflash_doctor.codes.aliases import V1_ALIASES

    for first, *others in V1_ALIASES.values():
        for other in others:
            if first in codes and other not in codes:
                codes[other] = replace(codes[first], id=other)
    return codes


class _Table(Mapping[str, Code]):
    """The table, assembled on first use."""

    _codes: Mapping[str, Code] | None = None

    def _table(self) -> Mapping[str, Code]:
        if self._codes is None:
            self._codes = _build()
        return self._codes

    def __getitem__(self, code_id: str) -> Code:
        return self._table()[code_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


CODES: Mapping[str, Code] = _Table()


def lookup(code_id: str) -> Code | None:
    return CODES.get(code_id)
