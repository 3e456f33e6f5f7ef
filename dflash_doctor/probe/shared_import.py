# Probe host: runs inside the TARGET interpreter, standard library only, Python 3.8+.
# Imports the heavy modules every job needs (torch) ONCE, then runs each job (another probe's source
# and arguments) in a forked child of its own, all at once. A cold `import torch` costs seconds, and
# several processes importing it side by side from a cold page cache each take longer than one does
# alone; a child forked after the import starts with torch already loaded. Each child is still a
# process of its own: a segfault, a hang or an import side effect in one job is that job's finding.
#
# Nothing here initialises CUDA before forking (importing torch does not), so each child owns its
# CUDA context. Children stay in this process's group, so the doctor's timeout, which kills the group,
# ends them too; a job past its own deadline is killed here. Where os.fork is missing, each job runs
# as a fresh interpreter instead. Prints one JSON document after the marker: per job, what it wrote
# to stdout (the probe's own marker and facts), its stderr (trimmed), exit status and times.
import importlib.util
import json
import os
import selectors
import signal
import subprocess
import sys
import time
import traceback

MARKER = "@@dflash-doctor-shared-facts@@"  # the jobs' own output, relayed here, holds theirs
ARGS = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
PRELOAD = ARGS.get("preload") or []
SOURCES = ARGS.get("sources") or {}
JOBS = ARGS.get("jobs") or []
DEADLINE = time.monotonic() + float(ARGS.get("timeout_s", 60.0))
STDOUT_KEEP = 2000000
STDERR_KEEP = 4000


def trim(text, keep):
    if len(text) <= keep:
        return text
    half = keep // 2
    return text[:half] + "\n[... %d characters trimmed ...]\n" % (len(text) - keep) + text[-half:]


def preload(name):
    started = time.monotonic()
    facts = {"module": name}
    try:
        if importlib.util.find_spec(name) is None:
            facts["found"] = False
            return facts
        facts["found"] = True
        __import__(name)
        facts["imported"] = True
    except BaseException as exc:  # the job imports it again and reports the failure as its own fact
        facts["imported"] = False
        facts["error"] = "%s: %s" % (type(exc).__name__, exc)
    facts["seconds"] = round(time.monotonic() - started, 3)
    return facts


def run_in_child(job, out_fd, err_fd):
    """In the forked child: become the job's probe, then exit without running the parent's handlers."""
    code = 0
    try:
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        sys.stdout = open(1, "w", encoding="utf-8", errors="replace", closefd=False)
        sys.stderr = open(2, "w", encoding="utf-8", errors="replace", closefd=False)
        sys.argv = ["-c", json.dumps(job.get("args") or {})]
        namespace = {"__name__": "__main__", "__builtins__": __builtins__}
        exec(compile(SOURCES[job["probe"]], "<probe %s>" % job["probe"], "exec"), namespace)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


class Running:
    def __init__(self, job, pid, out_r, err_r, started):
        self.job = job
        self.pid = pid
        self.started = started
        self.out_r = out_r
        self.err_r = err_r
        self.buffers = {out_r: bytearray(), err_r: bytearray()}
        self.open_fds = {out_r, err_r}
        self.status = None
        self.timed_out = False
        self.ended = None


def start(job, selector):
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(out_r)
        os.close(err_r)
        run_in_child(job, out_w, err_w)
    os.close(out_w)
    os.close(err_w)
    running = Running(job, pid, out_r, err_r, started)
    for fd in (out_r, err_r):
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ, running)
    return running


def close(fd, running, selector):
    selector.unregister(fd)
    os.close(fd)
    running.open_fds.discard(fd)


def drain(fd, running, selector):
    """Read what is there; at end of file stop watching the descriptor."""
    while fd in running.open_fds:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            close(fd, running, selector)
            return
        running.buffers[fd].extend(chunk)


def finish(running, selector):
    """After the child exited: take what its pipes hold now (a grandchild may keep them open)."""
    for fd in list(running.open_fds):
        drain(fd, running, selector)
        if fd in running.open_fds:
            close(fd, running, selector)


def run_forked(jobs):
    selector = selectors.DefaultSelector()
    runs = [start(job, selector) for job in jobs]
    while any(r.status is None for r in runs):
        now = time.monotonic()
        for r in runs:
            if r.status is not None:
                continue
            deadline = min(DEADLINE, r.started + float(r.job.get("timeout_s") or 1e9))
            if now >= deadline and not r.timed_out:
                r.timed_out = True
                try:
                    os.kill(r.pid, signal.SIGKILL)
                except OSError:
                    pass
            pid, status = os.waitpid(r.pid, os.WNOHANG)
            if pid:
                r.status = status
                r.ended = time.monotonic()
                finish(r, selector)
        for key, _ in selector.select(timeout=0.02):
            drain(key.fd, key.data, selector)
    return [
        outcome(r.job, r.buffers[r.out_r], r.buffers[r.err_r], r.status, r.timed_out, r.ended - r.started)
        for r in runs
    ]


def outcome(job, out, err, status, timed_out, seconds):
    returncode = None
    signal_number = None
    if os.WIFSIGNALED(status):
        signal_number = os.WTERMSIG(status)
        returncode = -signal_number
    elif os.WIFEXITED(status):
        returncode = os.WEXITSTATUS(status)
    return {
        "name": job["name"],
        "stdout": trim(out.decode("utf-8", "replace"), STDOUT_KEEP),
        "stderr": trim(err.decode("utf-8", "replace"), STDERR_KEEP),
        "returncode": returncode,
        "timed_out": timed_out,
        "duration_s": round(seconds, 3),
    }


def run_spawned(jobs):
    """No fork here: each job gets an interpreter of its own, started side by side."""
    procs = []
    for job in jobs:
        argv = [sys.executable, "-B", "-c", SOURCES[job["probe"]], json.dumps(job.get("args") or {})]
        procs.append((job, time.monotonic(), subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)))
    results = []
    for job, started, proc in procs:
        timeout = max(0.1, min(DEADLINE, started + float(job.get("timeout_s") or 1e9)) - time.monotonic())
        timed_out = False
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            timed_out = True
        rc = proc.returncode
        results.append({
            "name": job["name"],
            "stdout": trim(out.decode("utf-8", "replace"), STDOUT_KEEP),
            "stderr": trim(err.decode("utf-8", "replace"), STDERR_KEEP),
            "returncode": rc,
            "timed_out": timed_out,
            "duration_s": round(time.monotonic() - started, 3),
        })
    return results


def main():
    started = time.monotonic()
    facts = {"forked": hasattr(os, "fork"), "preload": [preload(name) for name in PRELOAD]}
    facts["preload_seconds"] = round(time.monotonic() - started, 3)
    sys.stdout.flush()
    sys.stderr.flush()
    facts["jobs"] = run_forked(JOBS) if facts["forked"] else run_spawned(JOBS)
    facts["seconds"] = round(time.monotonic() - started, 3)
    sys.stdout.write("\n" + MARKER + json.dumps(facts) + "\n")
    sys.stdout.flush()


main()
