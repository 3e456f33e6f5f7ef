"""Runs probe scripts inside the *target* interpreter, isolated.

The scripts beside this module use the standard library only (the target may lack this package,
packaging or rich) and print one JSON document after a marker line, so that anything an imported
module prints on its own cannot be mistaken for facts. Each runs as `python -B -c SOURCE` in its own
process group with a timeout: a segfault becomes a signal name, a hang a timeout, and stderr is kept
(trimmed) as evidence. Probes that all need torch run as forked children of one process that imported
it once (`run_probes_sharing_imports`), each still a process of its own. The user's environment (PYTHONPATH, cwd, CUDA_VISIBLE_DEVICES) is passed as it
is, plus PYTHONDONTWRITEBYTECODE=1, so nothing is written into the target.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["MARKER", "ProbeJob", "ProbeOutcome", "SharedRun", "run_probe", "run_probes_sharing_imports", "probe_source"]

MARKER = "@@dflash-doctor-facts@@"
# The shared-import host's own marker: the jobs' output it relays holds MARKER.
HOST_MARKER = "@@dflash-doctor-shared-facts@@"
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
    marker: str = MARKER,
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
    return _outcome(out.decode("utf-8", "replace"), proc.returncode, timed_out, stderr, duration, timeout_s, marker)


def _outcome(
    stdout: str,
    returncode: int | None,
    timed_out: bool,
    stderr: str,
    duration: float,
    timeout_s: float,
    marker: str = MARKER,
) -> ProbeOutcome:
    data = _parse(stdout, marker)
    sig = _signal_name(returncode) if returncode is not None and returncode < 0 else None
    error: str | None = None
    if timed_out:
        error = f"timed out after {timeout_s:g} s"
    elif sig:
        error = f"killed by {sig}"
    elif data is None:
        error = f"exited with code {returncode} without reporting facts"
    return ProbeOutcome(data, returncode, sig, timed_out, stderr, duration, error)


@dataclass(frozen=True)
class ProbeJob:
    name: str
    """The job's name in the results."""
    probe: str
    """Which probe script runs."""
    args: Any = None


@dataclass(frozen=True)
class SharedRun:
    host: dict[str, Any]
    """How the host process went: its own run (`process`), what it preloaded and how long it took."""
    outcomes: dict[str, ProbeOutcome]


def run_probes_sharing_imports(
    python: str,
    jobs: list[ProbeJob],
    *,
    preload: tuple[str, ...],
    timeout_s: float,
    cwd: str | None = None,
) -> SharedRun:
    """Run `jobs` in forked children of one target process that imported `preload` first.

    Each job keeps its own process, exit status, stderr and timeout (counted from the host's start, as
    if it had started alone). If the host itself dies before reporting (a crash while preloading, say),
    the jobs run again one process each, so that each still gets an outcome of its own.
    """
    args = {
        "preload": list(preload),
        "timeout_s": timeout_s,
        # Each probe's source once (one argument may not exceed 128 KiB on Linux).
        "sources": {probe: probe_source(probe) for probe in sorted({j.probe for j in jobs})},
        "jobs": [{"name": j.name, "probe": j.probe, "args": j.args or {}, "timeout_s": timeout_s} for j in jobs],
    }
    # The host reports after its deadline; the margin lets it do so before the group is killed.
    host = run_probe(python, "shared_import", args, timeout_s=timeout_s + 5.0, cwd=cwd, marker=HOST_MARKER)
    facts: dict[str, Any] = {"process": host.as_facts()}
    if isinstance(host.data, dict) and isinstance(host.data.get("jobs"), list):
        facts.update({k: v for k, v in host.data.items() if k != "jobs"})
        reported = {j.get("name"): j for j in host.data["jobs"] if isinstance(j, dict)}
        outcomes = {job.name: _job_outcome(reported.get(job.name), timeout_s) for job in jobs}
        return SharedRun(facts, outcomes)
    if host.timed_out:
        return SharedRun(facts, {job.name: host for job in jobs})
    facts["fallback"] = f"the shared process gave no facts ({host.error}); each job ran in a process of its own"
    with ThreadPoolExecutor(max_workers=max(1, len(jobs))) as pool:
        alone = list(pool.map(lambda j: run_probe(python, j.probe, j.args, timeout_s=timeout_s, cwd=cwd), jobs))
    return SharedRun(facts, {job.name: outcome for job, outcome in zip(jobs, alone)})


def _job_outcome(job: Any, timeout_s: float) -> ProbeOutcome:
    if not isinstance(job, dict):
        return ProbeOutcome(None, None, None, False, "", 0.0, "the shared process did not run this job")
    returncode = job.get("returncode") if isinstance(job.get("returncode"), int) else None
    return _outcome(
        str(job.get("stdout") or ""),
        returncode,
        bool(job.get("timed_out")),
        str(job.get("stderr") or ""),
        float(job.get("duration_s") or 0.0),
        timeout_s,
    )


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _parse(stdout: str, marker: str = MARKER) -> Any:
    _, found, payload = stdout.rpartition(marker)
    if not found:
        return None
    try:
        return json.loads(payload.strip().splitlines()[0])
    except (ValueError, RecursionError, IndexError):  # ValueError: also a number Python will not convert
        return None
