"""The doctor's vocabulary: statuses, findings, check results and reports.

Plain frozen dataclasses with no I/O. Every type round-trips through plain JSON data
(`to_dict` / `from_dict`) so that a saved report can be judged again.
"""

from __future__ import annotations

import enum
import traceback
from collections.abc import Iterable, Mapping
from dataclasses import field
from typing import Any

from dflash_doctor.shape import frozen_dataclass, section_json, section_of_json

__all__ = [
    "STOPS_SERVE",
    "CheckResult",
    "Finding",
    "Remediation",
    "Status",
    "doctor_result",
    "exit_code",
    "failure_result",
    "interrupted_result",
    "stops_serve",
    "summarize",
    "worst",
]

JSON = Any


class Status(str, enum.Enum):
    """How a finding, or a whole check, came out.

    `error` means the doctor could not complete a check; it is never a user problem dressed up as one.
    """

    PASS = "pass"
    SKIP = "skip"
    WARN = "warn"
    FAIL = "fail"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return _RANK[self]

    def __str__(self) -> str:
        return self.value


_RANK = {Status.PASS: 0, Status.SKIP: 1, Status.WARN: 2, Status.FAIL: 3, Status.ERROR: 4}

# The evidence key a check sets to true on a failing finding that, as judged from the facts, stops `vllm serve`
# on its way up (an import on its serving path that raises here, caught by nothing). What to fix first reads it:
# `fix` orders its plan by it, the terminal's "start with:" prefers it.
STOPS_SERVE = "stops_serve"


def worst(statuses: Iterable[Status], default: Status = Status.PASS) -> Status:
    return max(statuses, key=lambda s: s.rank, default=default)


@frozen_dataclass(frozen=True)
class Remediation:
    """One command a user can paste, and why it helps. Commands are printed, never run."""

    command: str
    why: str
    # What the target's own installer says the command would do (checks.verify): "resolves",
    # "would-break: ...", "needs-build: ...", "fails: ...", "not-checked: why"; "" when not asked.
    verified: str = ""
    # What it would change, one line each ("install flash-attn 2.8.3 (sdist: builds)", "remove ...").
    changes: tuple[str, ...] = ()
    # After `dflash-doctor fix`: "cleared", "rolled-back: why", "skipped: why"; "" when fix did not run.
    applied: str = ""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"command": self.command, "why": self.why}
        if self.verified:
            data["verified"] = self.verified
        if self.changes:
            data["changes"] = list(self.changes)
        if self.applied:
            data["applied"] = self.applied
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Remediation:
        return cls(command=str(data["command"]), why=str(data.get("why", "")),
                   verified=str(data.get("verified") or ""),
                   changes=tuple(str(c) for c in data.get("changes") or ()),
                   applied=str(data.get("applied") or ""))


@frozen_dataclass(frozen=True)
class Finding:
    """One judgement: a stable id from the code table, a status, and the facts behind it."""

    id: str
    status: Status
    title: str
    detail: str = ""
    evidence: Mapping[str, JSON] = field(default_factory=dict)
    remediation: tuple[Remediation, ...] = ()
    # The id of the finding, in the same report, that this one follows from ("" when it is a cause of
    # its own). Renderers group a consequence under its cause; its fix is the cause's fix.
    cause: str = ""

    def to_dict(self) -> dict[str, JSON]:
        data: dict[str, JSON] = {
            "id": self.id,
            "status": self.status.value,
            "title": self.title,
            "detail": self.detail,
            "evidence": dict(self.evidence),
            "remediation": [r.to_dict() for r in self.remediation],
        }
        if self.cause:
            data["cause"] = self.cause
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        return cls(
            id=str(data["id"]),
            status=Status(data["status"]),
            title=str(data["title"]),
            detail=str(data.get("detail", "")),
            evidence=dict(data.get("evidence") or {}),
            remediation=tuple(Remediation.from_dict(r) for r in data.get("remediation") or ()),
            cause=str(data.get("cause") or ""),
        )


@frozen_dataclass(frozen=True)
class CheckResult:
    """What one check concluded, with the facts it judged (saved so the report can be judged again)."""

    id: str
    layer: str
    title: str
    status: Status
    findings: tuple[Finding, ...]
    facts: Mapping[str, object] = field(default_factory=dict)
    """The sections it judged, as the run holds them (`check.Facts`); `to_dict` writes their JSON form."""
    duration_s: float = 0.0

    def to_dict(self) -> dict[str, JSON]:
        return {
            "id": self.id,
            "layer": self.layer,
            "title": self.title,
            "status": self.status.value,
            "duration_s": round(self.duration_s, 4),
            "facts": {name: section_json(value) for name, value in dict(self.facts).items()},
            "findings": [f.to_dict() for f in self.findings],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CheckResult:
        return cls(
            id=str(data["id"]),
            layer=str(data.get("layer", "")),
            title=str(data.get("title", data["id"])),
            status=Status(data["status"]),
            findings=tuple(Finding.from_dict(f) for f in data.get("findings") or ()),
            facts={name: section_of_json(name, value) for name, value in dict(data.get("facts") or {}).items()},
            duration_s=float(data.get("duration_s", 0.0)),
        )


def summarize(results: Iterable[CheckResult]) -> dict[str, int]:
    counts = {s.value: 0 for s in Status}
    for result in results:
        counts[result.status.value] += 1
    return counts


def exit_code(results: Iterable[CheckResult], strict: bool = False) -> int:
    """0: no fail and no error. 1: any fail or error (with `strict`, any warn too)."""
    failing = {Status.FAIL, Status.ERROR} | ({Status.WARN} if strict else set())
    return 1 if any(r.status in failing for r in results) else 0


def doctor_result(finding: Finding) -> CheckResult:
    """The doctor's own result (`doctor`): what stopped or broke the run."""
    return CheckResult("doctor", "doctor", "The doctor's own run", Status.ERROR, (finding,))


def failure_result(exc: BaseException, where: str) -> CheckResult:
    """The doctor's own failure outside the checks (building or comparing the report), as a result."""
    return doctor_result(Finding(
        id="doctor.crashed", status=Status.ERROR,
        title=f"the doctor itself failed while {where} ({type(exc).__name__}: {exc}); this report is partial",
        detail="".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=12)),
        evidence={"exception": type(exc).__name__, "while": where}))


def interrupted_result(signal: str, elapsed_s: float, collected: Iterable[str], while_: str = "") -> CheckResult:
    """The doctor's own result when a signal stopped the run: after `elapsed_s`, with the sections `collected`
    (`while_`: what it was doing then, when not collecting)."""
    names = sorted(collected)
    doing = f" while {while_}" if while_ else ""
    return doctor_result(Finding(
        id="doctor.interrupted", status=Status.ERROR,
        title=f"the doctor was stopped by {signal}{doing} after {elapsed_s:.1f} s; this report is partial",
        detail=f"collected before the stop: {', '.join(names) or 'nothing'}",
        evidence={"signal": signal, "elapsed_s": round(elapsed_s, 3), "collected": names}))


def stops_serve(finding: Finding) -> bool:
    """Whether the finding fails and its check judged that it stops `vllm serve` (evidence `STOPS_SERVE`)."""
    evidence = finding.evidence if isinstance(finding.evidence, Mapping) else {}
    return finding.status in (Status.FAIL, Status.ERROR) and evidence.get(STOPS_SERVE) is True
