# The target process: runs inside the TARGET interpreter, standard library only, Python 3.8+.
# One per doctor run. Imports the heavy modules every probe of the stack needs (torch) ONCE, then
# takes jobs (a probe's name, source and arguments) one JSON line at a time on stdin, for as long as
# the doctor sends them, and runs each in a forked child of its own, at most PARALLEL at once. A cold
# `import torch` costs seconds, and several processes importing it side by side each take longer than
# one does alone; a child forked after the import starts with it loaded. Each child is still a
# process of its own: a segfault, a hang or an import side effect in one job is that job's finding,
# with its own exit status, stderr and timeout (counted from the job's own start).
#
# Nothing here initialises CUDA before forking (importing torch does not), so each child owns its
# CUDA context. Children stay in this process's group, so the doctor, which kills the group when it
# is done, ends them too. Where os.fork is missing, each job runs as a fresh interpreter instead.
#
# Protocol: stdout carries only lines "MARKER{json}" (what imported modules print goes to stderr):
# first {"event": "hello", ...} with the handshake's answer (probes/handshake.py: which implementation and
# version this interpreter is), before anything is imported, so that the doctor need not start an interpreter
# of its own to ask; then {"event": "ready", ...the preload facts}, one {"event": "done", ...} per job, and
# {"event": "bye"} once stdin is closed and every job has ended.
#
# The prelude before this script (probes/_prelude.py) has guarded extension loads with this interpreter's own
# roots (its sys.path entries and install scheme): a preload loads only extension files that resolve inside
# them, so a symlink in site-packages to a library elsewhere is refused before dlopen runs its constructors. The
# jobs forked from here check again against the environment's roots as the doctor computed them.
import contextlib
import importlib.util
import json
import os
import platform
import selectors
import signal
import subprocess
import sys
import time
import traceback
from typing import TYPE_CHECKING, Any, Dict, List, Optional

if TYPE_CHECKING:  # the prelude's, which probe_source puts before this script
    from ._prelude import error_text

# probes.TARGET_PROCESS_MARKER: the jobs' own output holds the prelude's MARKER
TARGET_PROCESS_MARKER = "@@dflash-doctor-target-process@@"
# The process's arguments come as argv[1]: its stdin carries the jobs.
ARGS: Dict[str, Any] = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
PRELOAD: List[str] = ARGS.get("preload") or []
# Preload only when one of these import names is installed (None: always). Asking the import system
# where a top-level name is imports nothing.
PRELOAD_IF_FOUND: Optional[List[str]] = ARGS.get("preload_if_found")
PARALLEL = max(1, int(ARGS.get("parallel") or os.cpu_count() or 1))
STDOUT_CAP = 8 << 20  # a job that writes more than this to stdout (its JSON document) is stopped: the doctor's cap
STDERR_CAP = 4 << 20
STDERR_KEEP = 4000
SOURCES: Dict[str, str] = {}
CODE: Dict[str, Any] = {}  # each probe's source compiled once, here: every child forked for it runs the same code


def batch_size(job: Dict[str, Any]) -> int:
    """How many imports a try_import job makes in one process (1: one import, or another probe's job)."""
    imports = (job.get("args") or {}).get("imports") if isinstance(job.get("args"), dict) else None
    return len(imports) if isinstance(imports, list) else 1


def trim(text: str, keep: int) -> str:
    if len(text) <= keep:
        return text
    half = keep // 2
    return text[:half] + f"\n[... {len(text) - keep} characters trimmed ...]\n" + text[-half:]


def found(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except BaseException:  # noqa: BLE001 - a broken finder or package: whoever imports it meets the same, so say found
        return True


def preload(name: str) -> Dict[str, Any]:
    started = time.monotonic()
    facts: Dict[str, Any] = {"module": name}
    try:
        if importlib.util.find_spec(name) is None:
            facts["found"] = False
            return facts
        facts["found"] = True
        __import__(name)
        facts["imported"] = True
    except BaseException as exc:  # noqa: BLE001 - each job imports it again and reports the failure as its own fact
        facts["imported"] = False
        facts["error"] = error_text(exc)
    facts["seconds"] = round(time.monotonic() - started, 3)
    return facts


def run_in_child(job: Dict[str, Any], out_fd: int, err_fd: int, protocol: int) -> None:
    """In the forked child: become the job's probe, then exit without running the parent's handlers."""
    code = 0
    try:
        os.close(protocol)  # the job's output is its own; only the target process speaks the protocol
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # nor may it read the target process's jobs
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        # The job's own streams, for as long as the child lives (os._exit below: never closed)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
        sys.argv = ["-c", json.dumps(job.get("args") or {})]
        namespace = {"__name__": "__main__", "__builtins__": __builtins__}
        probe = job["probe"]
        code_object = CODE.get(probe)
        if code_object is None:
            code_object = compile(SOURCES[probe], f"<probe {probe}>", "exec")
        exec(code_object, namespace)  # noqa: S102 - the job is a probe's source
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - the job's failure, on its stderr, with its exit status
        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


class Running:
    def __init__(self, job: Dict[str, Any], pid: int, out_r: int, err_r: int,
                 proc: "Optional[subprocess.Popen[bytes]]" = None) -> None:
        self.job = job
        self.pid = pid
        self.proc = proc
        self.started = time.monotonic()
        self.out_r = out_r
        self.err_r = err_r
        self.buffers = {out_r: bytearray(), err_r: bytearray()}
        self.open_fds = {out_r, err_r}
        self.caps = {out_r: STDOUT_CAP, err_r: STDERR_CAP}
        self.timed_out = False
        self.overflow: Optional[str] = None


def kill(pid: int) -> None:
    with contextlib.suppress(OSError):  # already gone
        os.kill(pid, signal.SIGKILL)


class JobServer:
    """Takes the jobs on stdin, runs each in a process of its own (`forked`: a forked child, else a fresh
    interpreter), at most PARALLEL at once, and says each one's outcome on the `protocol` descriptor."""

    def __init__(self, protocol: int, forked: bool) -> None:
        self.selector = selectors.DefaultSelector()
        self.protocol = protocol
        self.forked = forked
        self.queue: List[Dict[str, Any]] = []
        self.running: List[Running] = []
        self.stdin_buffer = bytearray()
        self.stdin_open = True
        os.set_blocking(0, False)
        self.selector.register(0, selectors.EVENT_READ, None)

    def send(self, message: Dict[str, Any]) -> None:
        say(self.protocol, message)

    def read_jobs(self) -> None:
        while True:
            try:
                chunk = os.read(0, 65536)
            except BlockingIOError:
                break
            except OSError:
                chunk = b""
            if not chunk:
                self.stdin_open = False
                self.selector.unregister(0)
                break
            self.stdin_buffer.extend(chunk)
        while b"\n" in self.stdin_buffer:
            line, _, rest = bytes(self.stdin_buffer).partition(b"\n")
            self.stdin_buffer = bytearray(rest)
            if line.strip():
                self.accept(json.loads(line.decode("utf-8")))

    def accept(self, job: Dict[str, Any]) -> None:
        if "source" in job:
            SOURCES[job["probe"]] = job.pop("source")
            CODE.pop(job["probe"], None)
        if self.forked and job["probe"] not in CODE and job["probe"] in SOURCES:
            # A source that does not compile fails in the child, as its own error (see run_in_child).
            try:
                CODE[job["probe"]] = compile(SOURCES[job["probe"]], f"<probe {job['probe']}>", "exec")
            except (SyntaxError, ValueError):
                pass
        job["queued_at"] = time.monotonic()
        # A job that batches many imports (vLLM's import surface: a hundred or more) starts before the import jobs
        # with fewer imports queued after any other kind of job, the longest first: the run ends with the last job,
        # not waiting on that one. Every other job keeps its place.
        at = len(self.queue)
        if job.get("probe") == "try_import":
            weight = batch_size(job)
            while at > 0 and self.queue[at - 1].get("probe") == "try_import" and batch_size(self.queue[at - 1]) < weight:
                at -= 1
        self.queue.insert(at, job)

    def start(self, job: Dict[str, Any]) -> None:
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        proc = None
        if self.forked:
            pid = os.fork()
            if pid == 0:
                os.close(out_r)
                os.close(err_r)
                run_in_child(job, out_w, err_w, self.protocol)
        else:
            argv = [sys.executable, "-B", "-c", SOURCES[job["probe"]], json.dumps(job.get("args") or {})]
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out_w, stderr=err_w)
            pid = proc.pid
        os.close(out_w)
        os.close(err_w)
        running = Running(job, pid, out_r, err_r, proc)
        for fd in (out_r, err_r):
            os.set_blocking(fd, False)
            self.selector.register(fd, selectors.EVENT_READ, running)
        self.running.append(running)

    def close_fd(self, fd: int, running: Running) -> None:
        self.selector.unregister(fd)
        os.close(fd)
        running.open_fds.discard(fd)

    def drain(self, fd: int, running: Running) -> None:
        while fd in running.open_fds:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:
                self.close_fd(fd, running)
                return
            buffer = running.buffers[fd]
            buffer.extend(chunk)
            if len(buffer) > running.caps[fd]:  # kept in memory no further: the job is stopped for it
                del buffer[running.caps[fd]:]
                if running.overflow is None:
                    running.overflow = "stdout" if fd == running.out_r else "stderr"
                    kill(running.pid)
                self.close_fd(fd, running)
                return

    def reap(self) -> None:
        now = time.monotonic()
        for running in list(self.running):
            timeout = float(running.job.get("timeout_s") or 60.0)
            if now - running.started >= timeout and not running.timed_out:
                running.timed_out = True
                kill(running.pid)
            try:
                pid, status = os.waitpid(running.pid, os.WNOHANG)
            except ChildProcessError:
                pid, status = running.pid, 0
            if not pid:
                continue
            if running.proc is not None:
                running.proc.returncode = 0  # reaped here; stops Popen from waiting on it again
            for fd in list(running.open_fds):  # a grandchild may keep the pipes open: take what is there
                self.drain(fd, running)
                if fd in running.open_fds:
                    self.close_fd(fd, running)
            self.running.remove(running)
            self.send(self.outcome(running, status, now))

    def outcome(self, running: Running, status: int, now: float) -> Dict[str, Any]:
        returncode = None
        if os.WIFSIGNALED(status):
            returncode = -os.WTERMSIG(status)
        elif os.WIFEXITED(status):
            returncode = os.WEXITSTATUS(status)
        job = running.job
        return {
            "event": "done",
            "name": job["name"],
            "stdout": running.buffers[running.out_r].decode("utf-8", "replace"),
            "stderr": trim(running.buffers[running.err_r].decode("utf-8", "replace"), STDERR_KEEP),
            "returncode": returncode,
            "timed_out": running.timed_out,
            "overflow": running.overflow,
            "duration_s": round(now - running.started, 3),
            "queued_s": round(running.started - job["queued_at"], 3),
        }

    def serve(self) -> None:
        while self.stdin_open or self.queue or self.running:
            while self.queue and len(self.running) < PARALLEL:
                self.start(self.queue.pop(0))
            for key, _ in self.selector.select(timeout=0.02):
                if key.data is None:
                    self.read_jobs()
                else:
                    self.drain(key.fd, key.data)
            self.reap()
        self.send({"event": "bye"})


def say(protocol: int, message: Dict[str, Any]) -> None:
    data = (TARGET_PROCESS_MARKER + json.dumps(message) + "\n").encode("utf-8")
    while data:
        data = data[os.write(protocol, data):]


def main() -> None:
    # The protocol keeps the real stdout; whatever a preloaded module prints goes to stderr.
    protocol = os.dup(1)
    os.dup2(2, 1)
    say(protocol, {"event": "hello", "implementation": platform.python_implementation(),
                   "version": list(sys.version_info[:3]), "executable": sys.executable})
    started = time.monotonic()
    facts: Dict[str, Any] = {"event": "ready", "forked": hasattr(os, "fork"), "parallel": PARALLEL, "pid": os.getpid()}
    wanted = PRELOAD
    if PRELOAD_IF_FOUND is not None:
        users = [name for name in PRELOAD_IF_FOUND if found(name)]
        facts["preload_wanted_by"] = users
        if not users:
            wanted = []
    facts["preload"] = [preload(name) for name in wanted]
    facts["preload_seconds"] = round(time.monotonic() - started, 3)
    sys.stdout.flush()
    sys.stderr.flush()
    server = JobServer(protocol, facts["forked"])
    server.send(facts)
    server.serve()
    # Nothing is left to do: skip the interpreter's teardown, which with torch loaded costs a good part of
    # a second that the doctor would otherwise wait for.
    os._exit(0)


main()
