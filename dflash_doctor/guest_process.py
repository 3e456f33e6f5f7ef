"""The guest process: where a third-party check's code runs (see `dflash_doctor.guest`).

Started by the doctor as a child of its own interpreter, with the doctor's sys.path. Reads one request, a
JSON document, on stdin: {"mode": "declare" or "judge", "name", "entry_point": "module:attr", "timeout_s",
and for "judge" the fact "sections" and the "prior" results as report JSON}. Loads the plugin, validates
what it declares, and for "judge" runs its `judge` on Facts rebuilt from that JSON. Writes one answer on
stdout after `ANSWER`: {"declared": {...}}, {"findings": [...]}, {"raised": "Type: message"},
{"invalid": "why"} or {"section_error": {"section", "reason", "what"}}; what the plugin prints goes to
stderr. Its time is the doctor's to bound (it kills this process group); an alarm ends it a little after
its timeout should the doctor be gone.
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import resource  # Unix; a subreaper is Linux
import signal
import sys
from importlib import metadata
from typing import Any

from dflash_doctor.check import Facts, SectionError
from dflash_doctor.facts.proctree import become_subreaper, end_descendants
from dflash_doctor.guest import ANSWER, _finding_problem, _plain, declarations, describe
from dflash_doctor.model import CheckResult

__all__ = ["main"]

GROUP = "dflash_doctor.checks"
GRACE_S = 5


def _orphan_guard(timeout_s: float, parent: int) -> None:
    """End this process (by the kernel, whatever holds the GIL) if its parent is gone or long past its timeout."""
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.alarm(max(1, math.ceil(timeout_s)) + GRACE_S)
    _parent_death_signal(signal.SIGKILL, parent)


def _parent_death_signal(signum: int, parent: int) -> None:
    """Have the kernel send `signum` to this process when its parent ends (Linux)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signum)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it ended before the line above
        os.kill(os.getpid(), signum)


def _load(request: dict[str, Any]) -> Any:
    loaded = metadata.EntryPoint(str(request.get("name") or "plugin"), str(request["entry_point"]), GROUP).load()
    return loaded() if isinstance(loaded, type) else loaded


def _declared(plugin: Any) -> dict[str, Any]:
    declared, problems = declarations(plugin)
    return {"invalid": "; ".join(problems)} if declared is None else {"declared": declared}


def _judge(plugin: Any, request: dict[str, Any]) -> dict[str, Any]:
    prior = {str(key): CheckResult.from_dict(value) for key, value in (request.get("prior") or {}).items()}
    facts = Facts(request.get("sections") or {}, prior=prior)
    try:
        findings = tuple(plugin.judge(facts))
    except SectionError as exc:
        return {"section_error": {"section": exc.section, "reason": exc.reason, "what": exc.what}}
    except BaseException as exc:  # noqa: BLE001 - a plugin's SystemExit/KeyboardInterrupt is a finding
        return {"raised": describe(exc)}
    for item in findings:
        problem = _finding_problem(item)
        if problem:
            return {"invalid": problem}
    try:
        return {"findings": [_plain(item).to_dict() for item in findings]}
    except (ValueError, TypeError, RecursionError) as exc:  # a cycle, a key JSON cannot have, a tuple nested deep
        return {"invalid": f"a finding whose evidence is not JSON data ({describe(exc)})"}


def answer(request: dict[str, Any]) -> dict[str, Any]:
    """What the guest answers to `request`."""
    try:
        plugin = _load(request)
        declared = _declared(plugin)
    except BaseException as exc:  # noqa: BLE001 - whatever loading it raises is reported, SystemExit included
        return {"raised": describe(exc)}
    if request.get("mode") != "judge" or "invalid" in declared:
        return declared
    return _judge(plugin, request)


def _reply(protocol: int, request: dict[str, Any]) -> None:
    """Answer `request` on the `protocol` fd and end this process (the plugin's code runs here)."""
    reply = json.dumps(answer(request), default=repr)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    data = (ANSWER + reply + "\n").encode("utf-8")
    while data:
        data = data[os.write(protocol, data):]
    os._exit(0)  # a plugin's threads and atexit handlers are not waited for


def _supervise(worker: int, timeout_s: float, parent: int) -> None:
    """Wait for the worker, then end every process the plugin left behind (a daemon in a session of its own
    included: this process is their subreaper), and exit as the worker did. Ended early, by the doctor's death
    or past the timeout, it ends them all the same."""
    def end(signum: int, frame: object) -> None:
        end_descendants(os.getpid())
        os._exit(1)

    signal.signal(signal.SIGTERM, end)
    signal.signal(signal.SIGALRM, end)
    signal.alarm(max(1, math.ceil(timeout_s)) + GRACE_S)
    _parent_death_signal(signal.SIGTERM, parent)
    _, status = os.waitpid(worker, 0)
    end_descendants(os.getpid())
    code = os.waitstatus_to_exitcode(status)
    if code < 0:  # killed by a signal: this process dies of the same, that the doctor reports it by name

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the worker dumped its core, if any
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code if code >= 0 else 128 - code)


def main() -> None:
    sys.argv[:] = ["dflash-doctor-guest"]  # not the doctor's sys.path, which came in this way
    protocol = os.dup(1)
    os.dup2(2, 1)  # the plugin's prints go to stderr; stdout carries the answer alone
    request = json.loads(sys.stdin.buffer.read() or b"{}")
    timeout_s = float(request.get("timeout_s") or 60.0)
    parent = int(request.get("parent") or os.getppid())
    if become_subreaper():  # the plugin runs in a child; whatever it starts, however detached, ends with it
        supervisor = os.getpid()
        worker = os.fork()
        if worker:
            _supervise(worker, timeout_s, parent)
        parent = supervisor
    _orphan_guard(timeout_s, parent)
    _reply(protocol, request)
