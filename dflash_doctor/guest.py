"""Third-party checks are guests: what they declare is validated, their code runs in a process of its own
bounded in time and output, and whatever goes wrong there (an exception, SystemExit, a crash, a hang, a C
call that never lets go of the GIL) becomes an `error` finding naming the plugin and its entry point.

A plugin's code never runs in the doctor's process: loading it (its import, its attributes) and judging
(its `judge`) each run in a child of the doctor's own interpreter (`dflash_doctor.guest_process`), fed the
facts as JSON on stdin and answering with the findings as JSON. The doctor kills the child's process group
at the run's `--timeout` or when the run is stopped (a thread could not be stopped: a plugin holding the
GIL would hold the doctor with it). The built-in checks are the doctor's own code and run in-process; the
extra process is paid only where a plugin is installed.

Whatever a plugin starts ends with its guest, a daemon that left the process group (`setsid()` after a double
fork) included: the guest process is the child subreaper of the plugin's processes, ends them all when the
plugin is done, and the doctor ends them by pid (`dflash_doctor.facts.proctree.end_tree`) when it kills the
guest at its timeout or at a stop.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, ClassVar

from dflash_doctor.check import Check, Facts, SectionError
from dflash_doctor.codes.core import PLUGIN_FOREIGN_IDS
from dflash_doctor.documents.jsondoc import DocumentError, parse_json, too_deep
from dflash_doctor.facts.proctree import end_tree
from dflash_doctor.model import Finding, Remediation, Status
from dflash_doctor.process import exchange
from dflash_doctor.shape import frozen_dataclass, section_json

__all__ = ["ANSWER", "CHECK_ID", "RESERVED_IDS", "STOP", "Declared", "GuestCheck", "GuestRun", "declaration_problems",
           "declarations", "declare", "describe", "run_guest", "wrap"]

CHECK_ID = re.compile(r"[a-z0-9][a-z0-9._-]*")
"""A check id or layer, as the report schema allows it."""
FINDING_ID = re.compile(r"[a-z0-9-]+\.[a-z0-9.-]+")
RESERVED_IDS = frozenset({"doctor", "plugins"})
"""Ids of the results the doctor itself reports."""
FOREIGN_SHOWN = 5
"""How many of the ids a plugin used that are not its own an error names."""
ID_SHOWN = 80
TEXT_SHOWN = 2000
KNOWN_LAYERS = ("python", "gpu", "kernels", "models", "serve")
"""The built-in layers; a plugin may name a layer of its own (e.g. "site")."""

STOP = threading.Event()
"""Set when the run is being stopped (SIGTERM, SIGINT): a guest still busy is killed, none is started."""

ANSWER = "@@dflash-doctor-guest@@"
"""Marks the guest's answer on its stdout (the only thing written there: a plugin's prints go to stderr)."""
ANSWER_CAP = 16 << 20
"""The most a guest's answer may hold (its findings as JSON)."""
STDERR_CAP = 1 << 20
"""The most a guest may print (to stderr; its last lines are kept as evidence)."""
STDERR_SHOWN = 1000
FINDINGS_CAP = 1000
"""The most findings one guest's judge may report (a check reports a handful)."""
EVIDENCE_DEPTH = 16
"""How deep a guest's finding's evidence may nest dicts and lists: its report (and a fleet summary of reports)
stays within the depth any JSON the doctor reads may have (`dflash_doctor.documents.jsondoc.MAX_DEPTH`)."""
BOOT = "import sys; sys.path[:] = sys.argv[1:]; from dflash_doctor.guest_process import main; main()"
"""The guest's `-c` program, given the doctor's sys.path as its arguments: `-c` puts the working directory first on
sys.path, so nothing but the built-in sys is imported before the doctor's own path replaces it (a json.py where the
doctor runs would otherwise run in every guest)."""


def describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@frozen_dataclass(frozen=True)
class GuestRun:
    """How one guest process went: its answer, or why there is none."""

    answer: Mapping[str, Any] | None
    """The guest's JSON answer (see `dflash_doctor.guest_process`); None when there is none."""
    failure: str = ""
    """Why there is no answer, as a phrase ("was killed by SIGSEGV"); "" with an answer."""
    timed_out: bool = False
    stopped: bool = False
    seconds: float = 0.0
    stderr: str = ""
    """The end of what the guest printed."""


def run_guest(request: Mapping[str, Any], timeout_s: float, stop: threading.Event | None = None) -> GuestRun:
    """Run the guest process on `request` in a child of this interpreter, at most `timeout_s` (less if `stop` is
    set); whatever it does, the answer or the reason there is none comes back, never an exception."""
    if stop is not None and stop.is_set():
        return GuestRun(None, "was not started: the run was stopped", stopped=True)
    payload = json.dumps({**request, "timeout_s": timeout_s, "parent": os.getpid()}, default=str).encode("utf-8")
    started = time.monotonic()
    try:
        proc = subprocess.Popen([sys.executable or "python3", "-c", BOOT, *sys.path],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)  # its process group is killed past its time
    except OSError as exc:
        return GuestRun(None, f"could not be started ({exc.strerror or exc})")
    try:
        ran = exchange(proc, payload, timeout_s, stdout_cap=ANSWER_CAP, stderr_cap=STDERR_CAP, stop=stop,
                       kill=end_tree)
    except BaseException:
        end_tree(proc)
        proc.wait()
        raise
    seconds = time.monotonic() - started
    stderr = ran.stderr.decode("utf-8", "replace").strip()[-STDERR_SHOWN:]
    stopped = ran.stopped or (stop is not None and stop.is_set() and ran.overflow is None)
    if ran.timed_out or stopped:
        return GuestRun(None, f"was still busy after {seconds:.1f} s", ran.timed_out, stopped, seconds, stderr)
    if ran.overflow is not None:
        cap = ANSWER_CAP if ran.overflow == "stdout" else STDERR_CAP
        return GuestRun(None, f"wrote more than {cap >> 20} MiB to {ran.overflow} and was stopped",
                        seconds=seconds, stderr=stderr)
    answer, unreadable = _answer(ran.stdout)
    if answer is not None:
        return GuestRun(answer, seconds=seconds, stderr=stderr)
    code = proc.returncode
    if code is not None and code < 0:
        failure = f"was killed by {_signal_name(-code)}"
    elif unreadable:
        failure = f"gave an answer the doctor cannot read ({unreadable})"
    else:
        failure = f"exited with code {code} without an answer"
    return GuestRun(None, failure, seconds=seconds, stderr=stderr)


def _answer(stdout: bytes) -> tuple[Mapping[str, Any] | None, str]:
    """The guest's answer, read as any JSON the doctor reads (bounded in depth and numbers: nothing after it,
    validation, redaction or rendering, runs out of stack), or why it cannot be read ("" when there is none)."""
    _, found, payload = stdout.partition(ANSWER.encode())
    if not found:
        return None, ""
    try:
        answer = parse_json(payload.decode("utf-8"))
    except UnicodeDecodeError:
        return None, "not UTF-8 text"
    except DocumentError as exc:
        return None, str(exc)
    return (answer, "") if isinstance(answer, dict) else (None, f"a JSON {type(answer).__name__}, not an object")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


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


def declarations(check: Any) -> tuple[dict[str, Any] | None, list[str]]:
    """What a third-party check declares, as plain data for the doctor (`id`, `layer`, `title`, `needs`, `after`,
    `requires_gpu`), or None and what is wrong with it. With `declaration_problems`, the one place a check's
    attributes are read without `dflash_doctor.check.Check`'s guarantee."""
    problems = declaration_problems(check)
    if problems:
        return None, problems
    return {"id": check.id, "layer": check.layer, "title": str(check.title).strip(),
            "needs": sorted(_names(check.needs) or ()),
            "after": sorted(_names(getattr(check, "after", ())) or ()),
            "requires_gpu": bool(getattr(check, "requires_gpu", False))}, []


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
    if too_deep(item.evidence, EVIDENCE_DEPTH):
        return f"finding {item.id}: evidence is nested deeper than {EVIDENCE_DEPTH} levels"
    if not all(isinstance(r, Remediation) and isinstance(r.command, str) and r.command
               and isinstance(r.why, str) for r in item.remediation):
        return f"finding {item.id}: remediation is not a sequence of Remediation with a command"
    return ""


def _said_cut(said: object) -> str:
    """What a guest said went wrong (an exception's message, say), cut to TEXT_SHOWN characters."""
    text = str(said)
    return text if len(text) <= TEXT_SHOWN else f"{text[:TEXT_SHOWN]}... ({len(text)} characters)"


def _shown(ident: str) -> str:
    """A finding id a plugin chose, quoted for a title (escaped, cut to ID_SHOWN characters)."""
    return ascii(ident if len(ident) <= ID_SHOWN else ident[:ID_SHOWN] + "...")


def _plain(item: Finding) -> Finding:
    """The finding with its evidence as plain JSON data (a guest's objects become their repr)."""
    evidence = json.loads(json.dumps(dict(item.evidence), default=repr))
    return Finding(item.id, item.status, item.title, item.detail, evidence, tuple(item.remediation), item.cause)


@frozen_dataclass(frozen=True)
class Declared:
    """What loading a plugin in a guest process gave: its declarations, or why there are none."""

    declarations: Mapping[str, Any] | None
    """id, layer, title, needs, after, requires_gpu, as validated in the guest (None: see below)."""
    reason: str = ""
    """Why it could not be used ("SystemExit: 0", "loading it did not finish (...)")."""
    invalid: bool = False
    """It loaded, but what it declares is not usable (rather than: loading it raised, hung or crashed)."""


def declare(name: str, entry_point: str, timeout_s: float) -> Declared:
    """Load the plugin at `entry_point` ("module:attr") in a guest process and read what it declares."""
    ran = run_guest({"mode": "declare", "name": name, "entry_point": entry_point}, timeout_s)
    answer = ran.answer
    if answer is None:
        if ran.timed_out or ran.stopped:
            return Declared(None, f"loading it did not finish (still busy after {ran.seconds:.1f} s)")
        return Declared(None, f"loading it in a process of its own failed: it {ran.failure}" + _said(ran.stderr))
    if "raised" in answer:
        return Declared(None, _said_cut(answer["raised"]))
    if "invalid" in answer:
        return Declared(None, _said_cut(answer["invalid"]), invalid=True)
    declared = answer.get("declared")
    problems = declaration_problems(_Declaration(declared)) if isinstance(declared, dict) else ["no declarations"]
    if problems:
        return Declared(None, "; ".join(problems), invalid=True)
    assert isinstance(declared, dict)
    return Declared(declared)


def _said(stderr: str) -> str:
    last = stderr.strip().splitlines()[-1:]
    return f" (its last words: {last[0][:300]})" if last else ""


class _Declaration:
    """A guest's declarations as attributes, for `declaration_problems`."""

    def __init__(self, declared: Mapping[str, Any]) -> None:
        for key in ("id", "layer", "title", "needs", "after", "requires_gpu"):
            if key in declared:
                setattr(self, key, declared[key])

    def judge(self, facts: Facts) -> Iterable[Finding]:
        return ()


class GuestCheck(Check):
    """A validated third-party check; `wrap` makes one (a subclass per plugin, so the declarations stay
    class attributes as `Check` declares them). Its `judge` runs the plugin's in a guest process."""

    id: ClassVar[str] = ""
    layer: ClassVar[str] = ""
    title: ClassVar[str] = ""
    needs: ClassVar[frozenset[str]] = frozenset()
    name: ClassVar[str] = ""
    """The entry point's name."""
    origin: ClassVar[str] = ""
    entry_point: ClassVar[str] = ""
    timeout_s: ClassVar[float] = 60.0
    judged_apart: ClassVar[bool] = True
    """Judged in a process of its own: the runner may judge several side by side."""

    def _error(self, code: str, title: str, detail: str = "", cause: str = "", **evidence: Any) -> tuple[Finding, ...]:
        return (Finding(id=code, status=Status.ERROR, title=title, detail=detail,
                        evidence={"plugin": self.origin, "entry_point": self.entry_point, **evidence}, cause=cause),)

    def judge(self, facts: Facts) -> Iterable[Finding]:
        who = f"check plugin {self.id!r} ({self.entry_point} from {self.origin})"
        # The plugin's process reads JSON: each section's JSON form made once, the prior results' facts among them.
        held = {name: facts.raw(name) for name in facts}
        sections = {name: section_json(value) for name, value in held.items()}
        prior = {key: replace(result, facts={name: sections[name] if held.get(name) is value else value
                                             for name, value in result.facts.items()}).to_dict()
                 for key, result in facts.prior.items()}
        request = {"mode": "judge", "name": self.name, "entry_point": self.entry_point,
                   "sections": sections, "prior": prior}
        ran = run_guest(request, self.timeout_s, STOP)
        if ran.stopped:
            return self._error("doctor.incomplete", f"{self.title}: not judged, the run stopped first",
                               f"{who} was still judging when the run was stopped", cause="doctor.interrupted")
        if ran.timed_out:
            return self._error("doctor.plugin-timeout",
                               f"{who}: judge did not return within --timeout {self.timeout_s:g} s",
                               "The doctor stopped it: its process was killed.", timeout_s=self.timeout_s)
        answer = ran.answer
        if answer is None:
            return self._error("doctor.plugin-crashed", f"{who}: judging, its process {ran.failure}",
                               ran.stderr, failure=ran.failure)
        if "section_error" in answer:
            missing = answer["section_error"]
            if isinstance(missing, dict):
                raise SectionError(str(missing.get("section")), str(missing.get("reason")),
                                   str(missing.get("what") or "could not be collected"))
        if "raised" in answer:
            raised = _said_cut(answer["raised"])
            return self._error("doctor.plugin-crashed", f"{who}: judge raised {raised}", exception=raised)
        if "invalid" in answer:
            return self._error("doctor.plugin-invalid", f"{who}: judge returned {_said_cut(answer['invalid'])}")
        try:
            listed = list(answer["findings"])
            findings = tuple(Finding.from_dict(item) for item in listed[:FINDINGS_CAP])
            problem = next((p for p in map(_finding_problem, findings) if p), "")
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            problem = describe(exc)
        if problem:
            return self._error("doctor.plugin-crashed", f"{who}: judging, its process gave an answer the doctor "
                               f"cannot read ({problem})", ran.stderr, failure=problem)
        if len(listed) > FINDINGS_CAP:  # each one is judged, redacted and rendered: a flood is cut, and said
            return (*self._own(findings, who), *self._error(
                "doctor.plugin-invalid", f"{who}: judge returned {len(listed)} findings, more than "
                f"{FINDINGS_CAP}: the first {FINDINGS_CAP} are kept, the rest dropped", findings=len(listed)))
        return self._own(findings, who)

    def _own(self, findings: tuple[Finding, ...], who: str) -> tuple[Finding, ...]:
        """The findings under this check's own ids (`<id>.<name>`), and an error naming the others, dropped: a
        plugin does not speak for the doctor (`doctor.interrupted`) or for a built-in check."""
        own = tuple(f for f in findings if f.id.startswith(f"{self.id}."))
        foreign = sorted({f.id for f in findings} - {f.id for f in own})
        if not foreign:
            return own
        shown = [_shown(ident) for ident in foreign[:FOREIGN_SHOWN]]
        more = f" and {len(foreign) - len(shown)} more" if len(foreign) > len(shown) else ""
        return (*own, PLUGIN_FOREIGN_IDS.finding(
            Status.ERROR, f"{who}: reported findings under ids that are not its own, dropped: "
            f"{', '.join(shown)}{more}", f"Its findings' ids must begin with {self.id + '.'!r}.",
            evidence={"plugin": self.origin, "entry_point": self.entry_point, "ids": shown,
                      "dropped": len(findings) - len(own)}))


def wrap(declared: Mapping[str, Any], name: str, origin: str, entry_point: str, timeout_s: float) -> Check:
    """A GuestCheck for a plugin whose declarations (`declare`) are usable."""
    attrs = {"id": declared["id"], "layer": declared["layer"], "title": str(declared["title"]).strip(),
             "needs": _names(declared.get("needs")) or frozenset(),
             "after": _names(declared.get("after", ())) or frozenset(),
             "requires_gpu": bool(declared.get("requires_gpu", False)), "name": name,
             "origin": origin, "entry_point": entry_point, "timeout_s": timeout_s}
    cls = type(f"GuestCheck[{attrs['id']}]", (GuestCheck,), attrs)
    guest: Check = cls()
    return guest
