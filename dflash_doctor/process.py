"""Running a child process the doctor starts, bounded: what it is fed and what it writes are exchanged through
its pipes as they come, each stream up to a cap, within a deadline, and its whole process group is killed when
any of them is passed (`exchange`, `kill_group`); a Python child never runs the working directory's modules
(`safe_path_environ`). Standard library only: probes (facts.probes), guests (guest), the installer's dry runs
(facts.fix.dryrun) and `fix` start their processes through it."""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from dflash_doctor.shape import frozen_dataclass

__all__ = ["CHUNK", "STDERR_CAP", "STDOUT_CAP", "Exchange", "exchange", "kill_group", "safe_path_environ"]

STDOUT_CAP = 8 << 20
"""The most a child may write to stdout unless `exchange` is told otherwise, a probe's cap (its JSON document: the environment probe's is about 1 kB per
distribution); past it the probe is stopped."""
STDERR_CAP = 4 << 20
"""The most a child may write to stderr unless told otherwise, a probe's cap (only its trimmed ends are kept as evidence)."""
CHUNK = 1 << 16
"""How much one read or write of a pipe moves."""


def safe_path_environ(base: Mapping[str, str]) -> dict[str, str]:
    """`base` with PYTHONSAFEPATH=1 (unless the user set it): the environment of every Python process the doctor
    starts in the user's working directory (a probe, the installer `--verify-fixes` asks and `fix` runs), whose
    `-c` or `-m` would otherwise put that directory first on sys.path, so that a pip.py or json.py there would
    run. From Python 3.11 on; an older interpreter ignores it (a probe's prelude takes the directory off)."""
    env = dict(base)
    if not env.get("PYTHONSAFEPATH"):
        env["PYTHONSAFEPATH"] = "1"
    return env


@frozen_dataclass(frozen=True)
class Exchange:
    """What a child wrote, and how its run ended (`exchange`)."""

    stdout: bytes
    stderr: bytes
    timed_out: bool
    overflow: str | None
    """"stdout" or "stderr": it wrote more than its cap there and its process group was killed."""
    stopped: bool = False
    """`stop` was set while it ran, and its process group was killed."""


def exchange(proc: subprocess.Popen[bytes], payload: bytes, timeout_s: float, *, stdout_cap: int = STDOUT_CAP,
             stderr_cap: int = STDERR_CAP, stop: threading.Event | None = None,
             kill: Callable[[subprocess.Popen[bytes]], None] | None = None) -> Exchange:
    """Feed `payload` to `proc`'s stdin and read its stdout and stderr as they come, each up to its cap.

    `proc` leads its own process group (start_new_session=True) and has pipes for all three streams. The
    group is killed (by `kill`, if given) when `timeout_s` has passed, when a stream goes past its cap, or
    when `stop` is set; `proc` has been waited for when this returns. Memory stays within the caps however much it writes."""
    deadline = time.monotonic() + max(timeout_s, 0.0)
    caps = {"stdout": stdout_cap, "stderr": stderr_cap}
    buffers = {"stdout": bytearray(), "stderr": bytearray()}
    timed_out = stopped = False
    overflow: str | None = None
    view = memoryview(payload)
    with selectors.DefaultSelector() as selector:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        if view:
            os.set_blocking(proc.stdin.fileno(), False)
            selector.register(proc.stdin, selectors.EVENT_WRITE, "stdin")
        else:
            _close(proc.stdin)
        for stream, pipe in (("stdout", proc.stdout), ("stderr", proc.stderr)):
            os.set_blocking(pipe.fileno(), False)
            selector.register(pipe, selectors.EVENT_READ, stream)
        while selector.get_map() and overflow is None:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            if stop is not None and stop.is_set():
                stopped = True
                break
            for key, _ in selector.select(min(left, 0.05) if stop is not None else left):
                if key.data == "stdin":
                    try:
                        view = view[os.write(key.fd, view[:CHUNK]):]
                    except BlockingIOError:
                        continue
                    except OSError:  # it closed its stdin (or exited) without reading it all: its business
                        view = view[:0]
                    if not view:
                        selector.unregister(key.fileobj)
                        _close(proc.stdin)
                    continue
                try:
                    chunk = os.read(key.fd, CHUNK)
                except BlockingIOError:
                    continue
                except OSError:
                    chunk = b""
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                buffer = buffers[key.data]
                buffer += chunk
                if len(buffer) > caps[key.data]:
                    del buffer[caps[key.data]:]
                    overflow = key.data
                    break
    if not (timed_out or stopped or overflow):
        try:  # its pipes are closed; it may still run (a grandchild holds none of them): bounded by the rest
            proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            timed_out = True
    if timed_out or stopped or overflow or proc.poll() is None:
        (kill or kill_group)(proc)
    proc.wait()
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        _close(pipe)
    return Exchange(bytes(buffers["stdout"]), bytes(buffers["stderr"]), timed_out, overflow, stopped)


def _close(pipe: Any) -> None:
    with contextlib.suppress(OSError):
        if pipe is not None:
            pipe.close()


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group `proc` leads (started with start_new_session=True); `proc` alone where that fails."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
