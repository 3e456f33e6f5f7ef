"""Runs probe scripts inside the *target* interpreter, isolated.

The scripts beside this module use the standard library only (the target may lack this package,
packaging or rich) and print one JSON document after a marker line, so that anything an imported
module prints on its own cannot be mistaken for facts. Each runs as `python -B -c SOURCE` in its own
process group with a timeout: a segfault becomes a signal name, a hang a timeout, and stderr is kept
(trimmed) as evidence. What a probe writes is read as it comes, up to `STDOUT_CAP` bytes of stdout (its JSON
document) and `STDERR_CAP` of stderr: past either, its process group is killed and the outcome says so
(a `.pth` file or a `sitecustomize` that writes endlessly while the interpreter starts would otherwise
grow the doctor without bound). Probes that need torch run as forked children of one process per doctor run
that imported it once (`SharedTargetProcess`), each still a process of its own.

Every probe process starts through `launch`, which isolates it the way `vllm serve`'s console script is: the
target's sys.path as that script sees it (PYTHONPATH, site-packages, .pth files), never the working directory
(which `-c` and `-m` would put first, so that a contextlib.py there would run in the probe), and none of the
interpreter's interactive hooks (PYTHONSTARTUP, PYTHONINSPECT). The working directory stays the process's own:
relative paths in a serve command resolve against it. The probe prelude (`_prelude.py`, put in front of every
probe by `probe_source`) takes the working directory off sys.path before its first import and installs the
extension guard; a directory the doctor makes for each process, first on its PYTHONPATH and removed after it,
holds the same prelude as sitecustomize.py, so that the Python processes a probe starts (vLLM's model-registry
subprocess) are guarded and isolated alike. The rest of the user's environment (CUDA_VISIBLE_DEVICES, ...) is
passed as it is, plus PYTHONDONTWRITEBYTECODE=1, so nothing is written into the target.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dflash_doctor.process import CHUNK, STDERR_CAP, STDOUT_CAP, exchange, kill_group, safe_path_environ

__all__ = [
    "MARKER", "PROBE_VARIABLE", "SHARED_IMPORTS", "Launched", "ProbeJob", "ProbeOutcome", "SharedRun",
    "SharedTargetProcess", "documents", "launch", "overflow_error", "probe_environ", "probe_source", "run_probe",
    "run_probes_sharing_imports",
]

MARKER = "@@dflash-doctor-facts@@"
SHARED_IMPORTS = ("torch",)
"""What the run's one target process (`SharedTargetProcess`) imports before it forks the probes that need the stack: a
cold `import torch` costs seconds, and each probe importing it again made the cost scale with the stack."""
# The target process's own marker (probes/target_process.py): the jobs' output it relays holds MARKER.
TARGET_PROCESS_MARKER = "@@dflash-doctor-target-process@@"
TARGET_PROCESS_LINE_CAP = 64 << 20
"""The longest line of the target process's protocol: a job's outcome holds its stdout (up to STDOUT_CAP,
JSON-escaped)."""
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
    stdout: str = ""
    """What the probe printed (kept in memory, never reported): a batch probe's documents, one per item."""
    overflow: str | None = None
    """"stdout" or "stderr" when the probe wrote more than its cap there and was stopped for it."""

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


PRELUDE = "_prelude"
"""The script put in front of every probe, and carried into the processes a probe starts as sitecustomize.py."""
PROBE_VARIABLE = "DFLASH_DOCTOR_PROBE"
"""What the doctor tells the prelude (JSON): the directory it carries the prelude in, what it added to the
environment and what it took out (`probe_environ`); the prelude adds the guard's roots for a probe's children."""
INTERPRETER_HOOKS = ("PYTHONSTARTUP", "PYTHONINSPECT")
"""Variables that make an interpreter run more than it was asked to (a startup file, an interactive prompt after
the script that reads stdin): `vllm serve` does not go interactive, and a probe never does."""


def probe_source(name: str) -> str:
    """Probe script `name`, after the prelude."""
    return (_HERE / f"{PRELUDE}.py").read_text(encoding="utf-8") + "\n" + (_HERE / f"{name}.py").read_text(encoding="utf-8")


def probe_environ(base: dict[str, str], carrier: str) -> dict[str, str]:
    """The environment a probe process runs in: `base` (the user's), with PYTHONDONTWRITEBYTECODE=1, without the
    interpreter's interactive hooks, with PYTHONSAFEPATH=1 (no working directory on sys.path for `-c` and `-m`, in
    the probe and every process it starts, from Python 3.11 on; the prelude does it on older ones) and `carrier`
    first on PYTHONPATH."""
    env = dict(base)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    removed = {name: env.pop(name) for name in INTERPRETER_HOOKS if name in env}
    added = [] if env.get("PYTHONSAFEPATH") else ["PYTHONSAFEPATH"]
    env = safe_path_environ(env)
    given = env.get("PYTHONPATH")
    if given is None:
        added.append("PYTHONPATH")
    env["PYTHONPATH"] = os.pathsep.join([carrier, given] if given else [carrier])
    env[PROBE_VARIABLE] = json.dumps({"carrier": carrier, "added": added, "removed": removed})
    return env


@dataclass(frozen=True)
class Launched:
    """A probe process (`launch`) and the directory that carries the prelude into the processes it starts."""

    proc: subprocess.Popen[bytes]
    carrier: str

    def remove_carrier(self) -> None:
        """Once the process (and its group) has ended."""
        shutil.rmtree(self.carrier, ignore_errors=True)


def launch(python: str, name: str, *, argv: tuple[str, ...] = (), flags: tuple[str, ...] = (), cwd: str | None = None,
           env: dict[str, str] | None = None) -> Launched:
    """Start probe script `name` in `python` (`python -B FLAGS -c SOURCE ARGV`), isolated (`probe_environ`), in a
    process group of its own with pipes for its three streams. Every probe process starts here. OSError when it
    cannot start (the carrier is removed then)."""
    carrier = tempfile.mkdtemp(prefix="dflash-doctor-probe-")
    try:
        Path(carrier, "sitecustomize.py").write_text((_HERE / f"{PRELUDE}.py").read_text(encoding="utf-8"),
                                                     encoding="utf-8")
        proc = subprocess.Popen(
            [python, "-B", *flags, "-c", probe_source(name), *argv],
            cwd=cwd,
            env=probe_environ(dict(os.environ if env is None else env), carrier),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # so a timeout can end whatever the probe started, too
        )
    except BaseException:
        shutil.rmtree(carrier, ignore_errors=True)
        raise
    return Launched(proc, carrier)


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
    flags: tuple[str, ...] = (),
) -> ProbeOutcome:
    """Run probe script `name` in `python` with `args` (JSON) and return what it reported.

    `flags` go before the script (e.g. "-S": the interpreter without its site, for the handshake)."""
    started = time.monotonic()
    try:
        launched = launch(python, name, flags=flags, cwd=cwd, env=env)
    except OSError as exc:
        return ProbeOutcome(None, None, None, False, "", 0.0, f"cannot start {python}: {exc.strerror or exc}")
    return probe_outcome(launched, python, args, timeout_s=timeout_s, started=started, marker=marker)


def probe_outcome(launched: Launched, python: str, args: Any, *, timeout_s: float, started: float,
                  marker: str = MARKER, stop: threading.Event | None = None) -> ProbeOutcome:
    """What a launched probe (`launch`) reported, given `args` (JSON) on its stdin; its carrier removed after it.
    `stop`, once set, kills its process group (its outcome then says it was killed)."""
    # The arguments go on stdin: argv is public (`ps`, /proc/PID/cmdline), and a serve command's may hold a key.
    payload = json.dumps(args if args is not None else {}).encode("utf-8")
    proc = launched.proc
    try:
        ran = exchange(proc, payload, timeout_s, stop=stop)
    finally:
        launched.remove_carrier()
    duration = time.monotonic() - started
    stderr = _trim(ran.stderr.decode("utf-8", "replace"))
    outcome = _outcome(ran.stdout.decode("utf-8", "replace"), proc.returncode, ran.timed_out, stderr, duration,
                       timeout_s, marker)
    if ran.overflow is None:
        return outcome
    error = overflow_error(ran.overflow, python, ran.stdout.decode("utf-8", "replace"))
    return dataclasses.replace(outcome, data=None, error=error, overflow=ran.overflow)


def overflow_error(stream: str, python: str, written: str = "") -> str:
    """Why a process that wrote past its cap was stopped, with the likely cause. `written`: what it wrote to
    stdout, kept: where the probe's own answer had begun, the answer is what was too large."""
    cap = STDOUT_CAP if stream == "stdout" else STDERR_CAP
    if stream == "stdout" and MARKER in written:
        return (f"gave an answer of more than {cap >> 20} MiB and was stopped: the environment holds more than the "
                "doctor reads (tens of thousands of distributions, or of files in the packages it watches)")
    return (f"wrote more than {cap >> 20} MiB to {stream} and was stopped: something that runs in {python} before "
            f"or while the probe does writes to {stream} without end (most often a .pth file in its site-packages, "
            "or a sitecustomize module, that runs at every interpreter start)")


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
    return ProbeOutcome(data, returncode, sig, timed_out, stderr, duration, error, stdout)


@dataclass(frozen=True)
class ProbeJob:
    name: str
    """The job's name in the results."""
    probe: str
    """Which probe script runs."""
    args: Any = None


@dataclass(frozen=True)
class SharedRun:
    target_process: dict[str, Any]
    """How the target process went: its own run (`process`), what it preloaded and how long it took."""
    outcomes: dict[str, ProbeOutcome]


class SharedTargetProcess:
    """One process in the target interpreter that imported `preload` once, running probes as forked children.

    Jobs can be sent while it runs (`submit`), from any thread: the collectors of one doctor run share
    it, so the target's torch is imported once per run however many probes need it. Each job is still a
    process of its own, with its own exit status, stderr and timeout (`timeout_s`, from the job's own
    start); at most `parallel` run at once (default: the cores). If the process dies before or while it
    serves (a crash while preloading, say), each job it had not finished runs again in a process of
    its own; if its preload outlasts `timeout_s`, every job it holds is timed out (the same import
    would hang each of them).

    Its first message, before it imports anything, answers the handshake (`hello`): the run need not start
    an interpreter of its own to ask which Python the target is, and the preload does not wait for that
    answer. `on_ready` is called once, from the thread that reads the process, when the preload is done (or
    the process ended without finishing it).
    """

    def __init__(self, python: str, *, preload: tuple[str, ...], timeout_s: float, cwd: str | None = None,
                 parallel: int | None = None, preload_if_found: tuple[str, ...] | None = None,
                 on_ready: Callable[[], None] | None = None) -> None:
        self.python = python
        self.preload = tuple(preload)
        # Preload only if the target has one of these import names (None: always).
        self.preload_if_found = tuple(preload_if_found) if preload_if_found is not None else None
        self.timeout_s = timeout_s
        self.cwd = cwd
        self.parallel = parallel or os.cpu_count() or 1
        self._lock = threading.Lock()
        self._pending: dict[str, tuple[ProbeJob, Future[ProbeOutcome]]] = {}
        self._sources_sent: set[str] = set()
        self._ready = threading.Event()
        self._ready_facts: dict[str, Any] = {}
        self._hello = threading.Event()
        self._hello_facts: dict[str, Any] | None = None
        self._on_ready = on_ready
        self._was_ready = False
        self._ready_at: float | None = None
        self._stderr = bytearray()
        self._proc: subprocess.Popen[bytes] | None = None
        self._launched: Launched | None = None
        self._state = "new"  # new -> serving -> ended | preload-timed-out | failed
        self._error: str | None = None
        self._fallback: str | None = None
        self._started = 0.0
        self._ended_after: float | None = None
        self._count = 0
        self._alone = ThreadPoolExecutor(max_workers=self.parallel)
        self._threads: list[threading.Thread] = []

    # -- lifecycle
    def start(self) -> SharedTargetProcess:
        with self._lock:
            if self._state != "new":
                return self
            args = {"preload": list(self.preload), "parallel": self.parallel,
                    "preload_if_found": list(self.preload_if_found) if self.preload_if_found is not None else None}
            self._started = time.monotonic()
            try:
                self._launched = launch(self.python, "target_process", argv=(json.dumps(args),), cwd=self.cwd)
                self._proc = self._launched.proc
            except OSError as exc:
                self._state = "failed"
                self._error = f"cannot start {self.python}: {exc.strerror or exc}"
                self._fallback = f"the shared process could not start ({self._error}); each job ran in a process of its own"
                self._ready.set()
                self._hello.set()
                failed = True
            else:
                failed = False
                self._state = "serving"
        if failed:
            self._told_ready()
            return self
        for target in (self._read_protocol, self._read_stderr, self._watch_preload):
            thread = threading.Thread(target=target, daemon=True,
                                      name=f"dflash-doctor-target-process-{target.__name__}")
            thread.start()
            self._threads.append(thread)
        return self

    def __enter__(self) -> SharedTargetProcess:  # noqa: PYI034 - typing.Self is 3.11+
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def hello(self) -> tuple[dict[str, Any] | None, bool]:
        """The process's answer to the handshake (probes/handshake.py's document), waited for up to `timeout_s`, and
        whether it is missing because the interpreter was still silent then (True) rather than because the
        process ended or never started without answering (False: ask the handshake probe why)."""
        answered = self._hello.wait(self.timeout_s)
        with self._lock:  # killed by the preload's own timeout (the same bound), it was silent as well
            silent = self._hello_facts is None and (not answered or self._state == "preload-timed-out")
            return self._hello_facts, silent

    def kill_now(self) -> None:
        """Kill its process group and remove its carrier, taking no lock: for a signal handler that ends the doctor
        right after (`commands.run`)."""
        launched = self._launched
        if launched is not None:
            kill_group(launched.proc)
            launched.remove_carrier()

    def abort(self) -> None:
        """End the process at once, the jobs it holds with it (the run is given up: the interpreter was refused)."""
        if self._proc is not None:
            kill_group(self._proc)
        self.close()

    def close(self) -> None:
        """No more jobs: let the process finish those it holds, then end its process group."""
        proc = self._proc
        if proc is not None and proc.stdin is not None:
            with self._lock:
                try:
                    proc.stdin.close()
                except OSError:
                    pass
            try:  # it ends once the jobs it holds have (each bounded by its own timeout)
                proc.wait(timeout=self.timeout_s + 5.0)
            except subprocess.TimeoutExpired:
                pass
            kill_group(proc)
            proc.wait()
            for thread in self._threads[:2]:  # the readers end at the pipes' end of file
                thread.join(timeout=5.0)
        if self._launched is not None:
            self._launched.remove_carrier()
        self._alone.shutdown(wait=True)

    # -- jobs
    def submit(self, job: ProbeJob) -> Future[ProbeOutcome]:
        self.start()
        future: Future[ProbeOutcome] = Future()
        with self._lock:
            self._count += 1
            key = f"{self._count}:{job.name}"
            if self._state == "serving":
                assert self._proc is not None and self._proc.stdin is not None
                line: dict[str, Any] = {"name": key, "probe": job.probe, "args": job.args or {},
                                        "timeout_s": self.timeout_s}
                if job.probe not in self._sources_sent:
                    line["source"] = probe_source(job.probe)
                try:
                    self._proc.stdin.write((json.dumps(line) + "\n").encode("utf-8"))
                    self._proc.stdin.flush()
                except OSError:
                    pass  # the process is gone: the protocol reader's end of file runs it alone
                else:
                    self._sources_sent.add(job.probe)
                self._pending[key] = (job, future)
                return future
            state = self._state
        self._settle(job, future, state)
        return future

    def run(self, jobs: list[ProbeJob]) -> dict[str, ProbeOutcome]:
        """Submit `jobs` and wait for each one's outcome."""
        futures = [(job, self.submit(job)) for job in jobs]
        return {job.name: future.result() for job, future in futures}

    def facts(self) -> dict[str, Any]:
        """How the process went so far: its process, what it preloaded and how long that took."""
        proc = self._proc
        returncode = proc.returncode if proc is not None else None
        facts: dict[str, Any] = {
            "process": {
                "returncode": returncode,
                "signal": _signal_name(returncode) if returncode is not None and returncode < 0 else None,
                "timed_out": self._state == "preload-timed-out",
                "stderr": _trim(self._stderr.decode("utf-8", "replace")),
                "duration_s": round((self._ended_after or (time.monotonic() - self._started)) if self._started else 0.0, 3),
                "error": self._error,
            },
            "forked": self._ready_facts.get("forked"),
            "parallel": self._ready_facts.get("parallel", self.parallel),
            "preload": self._ready_facts.get("preload", []),
            "preload_seconds": self._ready_facts.get("preload_seconds"),
            "jobs": self._count,
        }
        if self._fallback:
            facts["fallback"] = self._fallback
        return facts

    # -- threads
    def _read_protocol(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        for line in _lines(proc.stdout.fileno(), TARGET_PROCESS_LINE_CAP):
            if line is None:  # more than STDOUT_CAP that is not the protocol: its startup writes without end
                with self._lock:
                    if self._state == "serving" and not self._ready.is_set():
                        self._state = "failed"
                        self._error = overflow_error("stdout", self.python)
                        self._fallback = (f"the shared process gave no facts ({self._error}); each job ran in a "
                                          "process of its own")
                kill_group(proc)
                break
            if not line.startswith(TARGET_PROCESS_MARKER.encode()):
                continue
            try:
                message = json.loads(line[len(TARGET_PROCESS_MARKER):])
            except (ValueError, RecursionError):
                continue
            if not isinstance(message, dict):
                continue
            if message.get("event") == "hello":
                with self._lock:
                    self._hello_facts = message
                self._hello.set()
            elif message.get("event") == "ready":
                self._ready_facts = message
                self._ready.set()
                self._told_ready()
            elif message.get("event") == "done":
                with self._lock:
                    entry = self._pending.pop(str(message.get("name")), None)
                if entry is not None:
                    entry[1].set_result(_job_outcome(message, self.timeout_s, self.python))
        proc.wait()
        self._ended_after = time.monotonic() - self._started
        with self._lock:
            if self._state == "serving":
                self._state = "ended" if self._ready.is_set() else "failed"
            returncode = proc.returncode
            why = f"killed by {_signal_name(returncode)}" if returncode is not None and returncode < 0 else (
                f"exited with code {returncode}")
            if self._state == "failed" and self._error is None:
                self._error = f"{why} before it was ready"
                self._fallback = f"the shared process gave no facts ({self._error}); each job ran in a process of its own"
            elif self._state == "ended" and self._pending:
                self._error = why
            pending, self._pending = list(self._pending.values()), {}
            state = self._state
        self._ready.set()
        self._hello.set()
        self._told_ready()
        for job, future in pending:
            self._settle(job, future, state)

    def _told_ready(self) -> None:
        with self._lock:  # once: at ready, or at the end of a process never ready
            if not self._was_ready:
                self._ready_at = time.monotonic()
            callback, self._on_ready, self._was_ready = self._on_ready, None, True
        if callback is not None:
            with contextlib.suppress(Exception):  # a listener's trouble is not the process's
                callback()

    def when_ready(self, callback: Callable[[], None]) -> None:
        """`callback` called once the preload is done (or the process ended without finishing it): now, if that has
        happened already (a process the run adopted, `facts.head_start`), else as `on_ready` is."""
        with self._lock:
            if not self._was_ready:
                self._on_ready = callback
                return
        with contextlib.suppress(Exception):
            callback()

    @property
    def started_at(self) -> float:
        """When it was started (time.monotonic()); 0.0 before."""
        return self._started

    @property
    def ready_at(self) -> float | None:
        """When its preload was done, or it ended without finishing it (time.monotonic()); None before."""
        return self._ready_at

    def _read_stderr(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stderr is not None
        fd = proc.stderr.fileno()
        for chunk in iter(lambda: os.read(fd, 65536), b""):
            self._stderr.extend(chunk)
            if len(self._stderr) > 4 * STDERR_KEEP:
                del self._stderr[STDERR_KEEP: len(self._stderr) - STDERR_KEEP]

    def _watch_preload(self) -> None:
        if self._ready.wait(self.timeout_s):
            return
        with self._lock:
            if self._state != "serving":
                return
            self._state = "preload-timed-out"
            self._error = f"timed out after {self.timeout_s:g} s while importing {', '.join(self.preload)}"
        assert self._proc is not None
        kill_group(self._proc)

    def _settle(self, job: ProbeJob, future: Future[ProbeOutcome], state: str) -> None:
        """A job the process will not run: time it out with the process, fail it with the process (which
        was ended while it served: the doctor being stopped, say), or run it alone (the process never served)."""
        if state == "preload-timed-out":
            future.set_result(ProbeOutcome(None, None, None, True, "", self.timeout_s,
                                           f"timed out after {self.timeout_s:g} s"))
            return
        if state == "ended":
            future.set_result(ProbeOutcome(None, None, None, False, "", 0.0,
                                           f"the shared target process ended ({self._error}) before this job did"))
            return
        self._alone.submit(lambda: future.set_result(
            run_probe(self.python, job.probe, job.args, timeout_s=self.timeout_s, cwd=self.cwd)))


def run_probes_sharing_imports(
    python: str,
    jobs: list[ProbeJob],
    *,
    preload: tuple[str, ...],
    timeout_s: float,
    cwd: str | None = None,
) -> SharedRun:
    """Run `jobs` in forked children of one target process that imported `preload` first (one of
    their own, ended when they are done)."""
    with SharedTargetProcess(python, preload=preload, timeout_s=timeout_s, cwd=cwd) as target_process:
        outcomes = target_process.run(jobs)
    return SharedRun(target_process.facts(), outcomes)


def _job_outcome(job: Any, timeout_s: float, python: str = "the target interpreter") -> ProbeOutcome:
    if not isinstance(job, dict):
        return ProbeOutcome(None, None, None, False, "", 0.0, "the shared process did not run this job")
    returncode = job.get("returncode") if isinstance(job.get("returncode"), int) else None
    outcome = _outcome(
        str(job.get("stdout") or ""),
        returncode,
        bool(job.get("timed_out")),
        _trim(str(job.get("stderr") or "")),
        float(job.get("duration_s") or 0.0),
        timeout_s,
    )
    overflow = job.get("overflow")
    if overflow not in ("stdout", "stderr"):
        return outcome
    error = overflow_error(str(overflow), python, str(job.get("stdout") or ""))
    return dataclasses.replace(outcome, data=None, error=error, overflow=str(overflow))


def _lines(fd: int, cap: int) -> Iterator[bytes | None]:
    """The lines read from `fd` (without their end), each cut at `cap` bytes; None once more than STDOUT_CAP
    bytes have come that are no line of the protocol (lines cut short count as such), and nothing after."""
    pending = bytearray()
    stray = 0
    while True:
        try:
            chunk = os.read(fd, CHUNK)
        except OSError:
            chunk = b""
        if not chunk:
            if pending:
                yield bytes(pending)
            return
        pending += chunk
        while True:
            end = pending.find(b"\n")
            if end < 0:
                break
            line = bytes(pending[:end])
            del pending[:end + 1]
            if not line.startswith(TARGET_PROCESS_MARKER.encode()):
                stray += len(line) + 1
            yield line
        if len(pending) > cap or (pending and not pending.startswith(TARGET_PROCESS_MARKER.encode()[:len(pending)])
                                  and stray + len(pending) > STDOUT_CAP):
            stray += len(pending)
            del pending[:]  # the rest of that line is read and dropped
        if stray > STDOUT_CAP:
            yield None
            return


def documents(stdout: str, marker: str = MARKER) -> list[Any]:
    """Every JSON document a probe printed after a marker, in order (a batch probe prints one per item)."""
    found = []
    for chunk in stdout.split(marker)[1:]:
        try:
            found.append(json.loads(chunk.strip().splitlines()[0]))
        except (json.JSONDecodeError, IndexError):
            continue
    return found


def _parse(stdout: str, marker: str = MARKER) -> Any:
    _, found, payload = stdout.rpartition(marker)
    if not found:
        return None
    try:
        return json.loads(payload.strip().splitlines()[0])
    except (ValueError, RecursionError, IndexError):  # ValueError: also a number Python will not convert
        return None
