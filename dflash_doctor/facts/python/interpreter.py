"""The target interpreter (`--python PATH`), checked once before anything runs in it.

Every probe runs in that interpreter, so a path that is missing, a directory, not executable, not Python
(`/bin/ls`), not CPython, a Python older than the probes need, or one that does not answer within the
timeout would otherwise surface as one error per probe (and false verdicts such as "vLLM is not
installed"). `verify` runs the tiny handshake probe once, with the flags and environment every probe
gets, and turns each of those into one sentence; the command line makes that a usage error (exit 2). When the
run's shared target process (`SharedTargetProcess`) is already starting, its first message is the same answer: no
interpreter is started for the question, and the probe runs only to tell why that process gave no answer.
"""

from __future__ import annotations

import os
import stat

from dflash_doctor.documents.jsondoc import shown_path
from dflash_doctor.facts.probes import SharedTargetProcess, probe_source, run_probe
from dflash_doctor.request import absolute
from dflash_doctor.shape import frozen_dataclass

__all__ = ["MIN_VERSION", "Interpreter", "InterpreterError", "absolute", "precheck", "verify"]

MIN_VERSION = (3, 8)
"""The probe scripts' floor (dflash_doctor/facts/probes/*.py: standard library only, Python 3.8+)."""


class InterpreterError(Exception):
    """The interpreter cannot be inspected; the message says why, naming it."""


@frozen_dataclass(frozen=True)
class Interpreter:
    path: str
    implementation: str
    version: tuple[int, int, int]


def precheck(path: str) -> None:
    """InterpreterError when `path` is no file that can be run at all (missing, a directory, not executable): checked
    before anything is started in it."""
    _precheck(path, shown_path(path))


def _precheck(path: str, shown: str) -> None:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        broken = os.path.islink(path)
        raise InterpreterError(f"{shown}: no such file" + (" (a broken symlink)" if broken else "")) from None
    except (OSError, ValueError) as exc:
        raise InterpreterError(f"{shown}: cannot use it ({getattr(exc, 'strerror', None) or exc})") from None
    if stat.S_ISDIR(info.st_mode):
        raise InterpreterError(f"{shown}: is a directory; give the interpreter itself, e.g. {shown.rstrip('/')}/bin/python")
    if not stat.S_ISREG(info.st_mode):
        raise InterpreterError(f"{shown}: not a regular file, so not an interpreter")
    if not os.access(path, os.X_OK):
        raise InterpreterError(f"{shown}: not executable")


def _no_answer(shown: str, why: str, stderr: str) -> str:
    """Why the handshake got no answer. A program that is no Python (`/bin/ls`) takes the handshake's
    source, passed after -c, for a file name or text and echoes it: that is not quoted back to the user."""
    source_lines = {line.strip() for line in probe_source("handshake").splitlines() if len(line.strip()) > 8}
    said = [line for line in stderr.strip().splitlines() if line.strip()]
    echoed = any(known in line for line in said for known in source_lines)
    python_said = any(line.startswith(("Traceback (most recent call last)", "Fatal Python error")) for line in said)
    if (echoed and not python_said) or not said:
        return f"{shown} is not a Python interpreter (the doctor's handshake {why})"
    return f"{shown}: not a Python interpreter the doctor can use (the handshake {why}; it said: {said[-1][:200]})"


def verify(path: str, timeout_s: float, cwd: str | None = None,
           target_process: SharedTargetProcess | None = None) -> Interpreter:
    """Check that `path` is a CPython >= 3.8 that answers the handshake within `timeout_s`: from `target_process`'s
    first message when it is given (the run's shared process in that interpreter, started), else from the probe."""
    shown = shown_path(path)
    _precheck(path, shown)
    data, silent = target_process.hello() if target_process is not None else (None, False)
    error, stderr = "gave no answer", ""
    if data is None and not silent:  # no target process, or it ended without answering: the probe says why
        outcome = run_probe(path, "handshake", {}, timeout_s=timeout_s, cwd=cwd)
        if outcome.overflow is not None:
            # Its startup (a .pth file, say) writes without end: the interpreter is usable, its environment is what
            # is broken, and every probe's finding says so. Without its site, it answers which Python it is.
            outcome = run_probe(path, "handshake", {}, timeout_s=timeout_s, cwd=cwd, flags=("-S",))
        data, silent, error, stderr = outcome.data, outcome.timed_out, outcome.error or error, outcome.stderr
    if silent:
        raise InterpreterError(f"{shown}: did not answer within {timeout_s:g} s (--timeout); is it a Python interpreter?")
    if not isinstance(data, dict) or not isinstance(data.get("version"), list):
        raise InterpreterError(_no_answer(shown, error, stderr))
    implementation = str(data.get("implementation"))
    try:
        version = tuple(int(part) for part in data["version"][:3])
        major, minor, micro = version
    except (TypeError, ValueError):
        raise InterpreterError(f"{shown}: gave a version the doctor cannot read: {data.get('version')!r}") from None
    label = f"{implementation} {major}.{minor}.{micro}"
    if implementation != "CPython":
        raise InterpreterError(f"{shown}: is {label}; the doctor inspects CPython environments (vLLM runs on CPython)")
    if (major, minor) < MIN_VERSION:
        raise InterpreterError(f"{shown}: is {label}; the doctor's probes need Python "
                               f"{MIN_VERSION[0]}.{MIN_VERSION[1]} or newer")
    return Interpreter(path, implementation, (major, minor, micro))
