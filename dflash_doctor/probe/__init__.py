"""Runs probe scripts inside the *target* interpreter, isolated.

The scripts beside this module use the standard library only (the target may lack this package,
packaging or rich) and print one JSON document after a marker line, so that anything an imported
module prints on its own cannot be mistaken for facts. Each runs as `python -B -c SOURCE` in its own
process group with a timeout: a segfault becomes a signal name, a hang a timeout, and stderr is kept
(trimmed) as evidence. The user's environment (PYTHONPATH, cwd, CUDA_VISIBLE_DEVICES) is passed as it
is, plus PYTHONDONTWRITEBYTECODE=1, so nothing is written into the target.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["MARKER", "ProbeOutcome", "run_probe", "probe_source"]

MARKER = "@@dflash-doctor-facts@@"
_HERE = Path(__file__).resolve().parent
STDERR_KEEP = 4000


@dataclass(frozen=True)
class ProbeOutcome:
    data: Any
    """The probe's JSON document, or None when it did not finish."""
    returncode: int | None
    signal: str | None
    timed_out: bool
    stderr: str
    duration_s: float
    error: str | None
    """Why there is no data: spawn failure, timeout, signal, no output."""

    @property
    def ok(self) -> bool:
        return self.error is None

    def as_facts(self) -> dict[str, Any]:
        """How the run itself went, for the report (the data is stored separately)."""
        return {
            "returncode": self.returncode,
            "signal": self.signal,
            "timed_out": self.timed_out,
            "stderr": self.stderr,
            "duration_s": round(self.duration_s, 3),
            "error": self.error,
        }


def probe_source(name: str) -> str:
    return (_HERE / f"{name}.py").read_text(encoding="utf-8")


def _trim(text: str) -> str:
    if len(text) <= STDERR_KEEP:
        return text
    half = STDERR_KEEP // 2
    return text[:half] + f"\n[... {len(text) - STDERR_KEEP} characters trimmed ...]\n" + text[-half:]


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def run_probe(
    python: str,
    name: str,
    args: Any = None,
    *,
    timeout_s: float,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
) -> ProbeOutcome:
    """Run probe script `name` in `python` with `args` (JSON) and return what it reported."""
    child_env = dict(os.environ if env is None else env)
    child_env["PYTHONDONTWRITEBYTECODE"] = "1"
    argv = [python, "-B", "-c", probe_source(name), json.dumps(args if args is not None else {})]
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=child_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # so a timeout can end whatever the probe started, too
        )
    except OSError as exc:
        return ProbeOutcome(None, None, None, False, "", 0.0, f"cannot start {python}: {exc.strerror or exc}")
    try:
        out, err = proc.communicate(timeout=timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        timed_out = True
    duration = time.monotonic() - started
    stderr = _trim(err.decode("utf-8", "replace"))
    data = _parse(out.decode("utf-8", "replace"))
    sig = _signal_name(proc.returncode) if proc.returncode is not None and proc.returncode < 0 else None
    error: str | None = None
    if timed_out:
        error = f"timed out after {timeout_s:g} s"
    elif sig:
        error = f"killed by {sig}"
    elif data is None:
        error = f"exited with code {proc.returncode} without reporting facts"
    return ProbeOutcome(data, proc.returncode, sig, timed_out, stderr, duration, error)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _parse(stdout: str) -> Any:
    _, found, payload = stdout.rpartition(MARKER)
    if not found:
        return None
    try:
        return json.loads(payload.strip().splitlines()[0])
    except (json.JSONDecodeError, IndexError):
        return None
