"""Third-party checks are guests: what they declare is validated, their code runs bounded in time, and
whatever they raise (SystemExit and KeyboardInterrupt included) becomes an `error` finding naming the
plugin and its entry point.

A plugin's code (its import, its attributes, its `judge`) runs in a daemon thread that the doctor waits
for at most the run's `--timeout`; a thread still busy then is abandoned (the doctor ends with
`os._exit` when one is left, see `lingering`). The built-in checks are the doctor's own code and run
directly.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, TypeVar

from dflash_doctor.check import Check, Facts, SectionError
from dflash_doctor.model import Finding, Remediation, Status

__all__ = ["CHECK_ID", "STOP", "GuestCheck", "Overtime", "bounded", "declaration_problems", "lingering", "wrap"]

CHECK_ID = re.compile(r"[a-z0-9][a-z0-9._-]*")
"""A check id or layer, as the report schema allows it."""
FINDING_ID = re.compile(r"[a-z0-9-]+\.[a-z0-9.-]+")
RESERVED_IDS = frozenset({"doctor", "plugins"})
"""Ids of the results the doctor itself reports."""
KNOWN_LAYERS = ("python", "gpu", "kernels", "models", "serve")
"""The built-in layers; a plugin may name a layer of its own (e.g. "site")."""

STOP = threading.Event()
"""Set when the run is being stopped (SIGTERM, SIGINT): nobody waits for a guest any more."""

_abandoned: list[threading.Thread] = []
_abandoned_lock = threading.Lock()

T = TypeVar("T")


class Overtime(Exception):
    """The guest did not finish in time (or the run was stopped while it was busy)."""

    def __init__(self, seconds: float, stopped: bool) -> None:
        super().__init__(f"still busy after {seconds:.1f} s" + (" when the run was stopped" if stopped else ""))
        self.seconds = seconds
        self.stopped = stopped


class Raised(Exception):
    """What a guest raised, caught in its own thread (BaseException included)."""

    def __init__(self, exception: BaseException) -> None:
        super().__init__(describe(exception))
        self.exception = exception

    def __str__(self) -> str:
        return describe(self.exception)


def describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def bounded(call: Callable[[], T], timeout_s: float, name: str) -> T:
    """Run a guest's `call` in a daemon thread and wait at most `timeout_s` (less when STOP is set).

    Returns what it returned. Raises `Raised` for anything it raised (BaseException included; a
    `SectionError` is re-raised as itself so the runner reports the missing facts) and `Overtime` when it
    did not finish; the thread is then abandoned.
    """
    if STOP.is_set():
        raise Overtime(0.0, True)  # the run is being stopped: a guest's code is not started any more
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - a guest's SystemExit/KeyboardInterrupt is a finding
            box["error"] = exc

    thread = threading.Thread(target=run, name=f"dflash-doctor-guest:{name}", daemon=True)
    started = time.monotonic()
    thread.start()
    deadline = started + max(timeout_s, 0.0)
    while thread.is_alive() and not STOP.is_set():
        thread.join(min(0.05, max(deadline - time.monotonic(), 0.0)))
        if time.monotonic() >= deadline:
            break
    if thread.is_alive():
        with _abandoned_lock:
            _abandoned.append(thread)
        raise Overtime(time.monotonic() - started, STOP.is_set())
    if "error" in box:
        error: BaseException = box["error"]
        if isinstance(error, SectionError):
            raise error
        raise Raised(error)
    value: T = box["value"]
    return value


def lingering() -> bool:
    """Whether a guest's thread abandoned on timeout is still running (the process should not wait)."""
    with _abandoned_lock:
        return any(t.is_alive() for t in _abandoned)


def _names(value: object) -> frozenset[str] | None:
    """A set of non-empty strings (given as a set, frozenset, list or tuple), else None."""
    if not isinstance(value, (set, frozenset, list, tuple)):
        return None
    if not all(isinstance(v, str) and v for v in value):
        return None
    return frozenset(value)


def declaration_problems(check: object) -> list[str]:
    """What is wrong with what a check declares ([] when it is usable)."""
    missing = [name for name in ("id", "layer", "title", "needs", "judge") if not hasattr(check, name)]
    if missing:
        return [f"not a dflash-doctor check: it has no {', '.join(missing)}"]
    problems: list[str] = []
    ident = getattr(check, "id", None)
    if not isinstance(ident, str) or not CHECK_ID.fullmatch(ident):
        problems.append(f"id {ident!r} is not a check id (lower-case letters, digits, '.', '_', '-')")
    elif ident in RESERVED_IDS:
        problems.append(f"id {ident!r} is reserved for the doctor's own results")
    layer = getattr(check, "layer", None)
    if not isinstance(layer, str) or not CHECK_ID.fullmatch(layer):
        problems.append(f"layer {layer!r} is not a layer name (one of {', '.join(KNOWN_LAYERS)}, or a name of "
                        "its own in lower-case letters, digits, '.', '_', '-')")
    title = getattr(check, "title", None)
    if not isinstance(title, str) or not title.strip():
        problems.append(f"title {title!r} is not a non-empty string")
    if _names(getattr(check, "needs", None)) is None:
        problems.append(f"needs {getattr(check, 'needs', None)!r} is not a set of fact-section names")
    if _names(getattr(check, "after", frozenset())) is None:
        problems.append(f"after {getattr(check, 'after', None)!r} is not a set of check ids")
    if not isinstance(getattr(check, "requires_gpu", False), bool):
        problems.append(f"requires_gpu {getattr(check, 'requires_gpu', None)!r} is not True or False")
    if not callable(getattr(check, "judge", None)):
        problems.append("judge is not callable")
    return problems


def _finding_problem(item: object) -> str:
    if not isinstance(item, Finding):
        return f"a {type(item).__name__} instead of a Finding"
    if not isinstance(item.id, str) or not FINDING_ID.fullmatch(item.id):
        return f"finding id {item.id!r} is not of the form 'prefix.name'"
    if not isinstance(item.status, Status):
        return f"finding {item.id}: status {item.status!r} is not a Status"
    if not isinstance(item.title, str) or not item.title.strip():
        return f"finding {item.id}: title {item.title!r} is not a non-empty string"
    if not isinstance(item.detail, str) or not isinstance(item.cause, str):
        return f"finding {item.id}: detail and cause must be strings"
    if item.cause and not FINDING_ID.fullmatch(item.cause):
        return f"finding {item.id}: cause {item.cause!r} is not a finding id"
    if not isinstance(item.evidence, Mapping):
        return f"finding {item.id}: evidence is not a mapping"
    if not all(isinstance(r, Remediation) and isinstance(r.command, str) and r.command
               and isinstance(r.why, str) for r in item.remediation):
        return f"finding {item.id}: remediation is not a sequence of Remediation with a command"
    return ""


def _plain(item: Finding) -> Finding:
    """The finding with its evidence as plain JSON data (a guest's objects become their repr)."""
    evidence = json.loads(json.dumps(dict(item.evidence), default=repr))
    return Finding(item.id, item.status, item.title, item.detail, evidence, tuple(item.remediation), item.cause)


class GuestCheck:
    """A validated third-party check; `wrap` makes one (a subclass per plugin, so the declarations stay
    class attributes as the Check protocol has them)."""

    id: ClassVar[str] = ""
    layer: ClassVar[str] = ""
    title: ClassVar[str] = ""
    needs: ClassVar[frozenset[str]] = frozenset()
    after: ClassVar[frozenset[str]] = frozenset()
    requires_gpu: ClassVar[bool] = False
    plugin: ClassVar[Any] = None
    origin: ClassVar[str] = ""
    entry_point: ClassVar[str] = ""
    timeout_s: ClassVar[float] = 60.0

    def _error(self, code: str, title: str, detail: str = "", cause: str = "", **evidence: Any) -> tuple[Finding, ...]:
        return (Finding(id=code, status=Status.ERROR, title=title, detail=detail,
                        evidence={"plugin": self.origin, "entry_point": self.entry_point, **evidence}, cause=cause),)

    def judge(self, facts: Facts) -> Iterable[Finding]:
        who = f"check plugin {self.id!r} ({self.entry_point} from {self.origin})"

        def call() -> tuple[Finding, ...] | str:
            findings = tuple(self.plugin.judge(facts))
            for item in findings:
                problem = _finding_problem(item)
                if problem:
                    return problem
            return tuple(_plain(f) for f in findings)

        try:
            judged = bounded(call, self.timeout_s, self.id)
        except Overtime as over:
            if over.stopped:
                return self._error("doctor.incomplete", f"{self.title}: not judged, the run stopped first",
                                   f"{who} was still judging when the run was stopped", cause="doctor.interrupted")
            return self._error("doctor.plugin-timeout",
                               f"{who}: judge did not return within --timeout {self.timeout_s:g} s",
                               "The doctor stopped waiting for it; its thread is abandoned.",
                               timeout_s=self.timeout_s)
        except Raised as raised:
            return self._error("doctor.plugin-crashed", f"{who}: judge raised {raised}",
                               exception=describe(raised.exception))
        if isinstance(judged, str):
            return self._error("doctor.plugin-invalid", f"{who}: judge returned {judged}")
        return judged


def wrap(plugin: object, origin: str, entry_point: str, timeout_s: float) -> Check:
    """A GuestCheck for a plugin whose `declaration_problems` are none."""
    needs = _names(getattr(plugin, "needs", None)) or frozenset()
    after = _names(getattr(plugin, "after", frozenset())) or frozenset()
    attrs = {"id": plugin.id, "layer": plugin.layer, "title": plugin.title.strip(),  # type: ignore[attr-defined]
             "needs": needs, "after": after, "requires_gpu": bool(getattr(plugin, "requires_gpu", False)),
             "plugin": plugin, "origin": origin, "entry_point": entry_point, "timeout_s": timeout_s}
    cls = type(f"GuestCheck[{attrs['id']}]", (GuestCheck,), attrs)
    guest: Check = cls()
    return guest
