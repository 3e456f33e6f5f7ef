"""A child process and every process it started end together, by pid, whatever session or group they moved to.

Killing a process group misses what left it: a daemon that called `setsid()` (after a double fork) is in a
session of its own, and once its parent has exited it is reparented to init, out of reach. A process that is
a *child subreaper* (Linux's PR_SET_CHILD_SUBREAPER) keeps its orphaned descendants as its children instead,
so every process started below it stays below it, and `end_descendants` can find each one in /proc (by its
parent pid) and SIGKILL it, round after round, until none is left alive. Where there is no /proc or no
prctl (not Linux), this ends what a group kill ends, no less.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from dflash_doctor.process import kill_group

__all__ = ["become_subreaper", "descendants", "end_descendants", "end_tree", "group_running"]

PR_SET_CHILD_SUBREAPER = 36
END_WITHIN_S = 5.0
"""How long killing a tree may go on (each round kills all it finds; a few rounds end any tree)."""


def become_subreaper() -> bool:
    """Make this process the child subreaper of its descendants (Linux); False where that is not possible."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _processes() -> dict[int, tuple[int, str, int]]:
    """Each process's parent pid, state and process group, from /proc/<pid>/stat ({} without /proc)."""
    found: dict[int, tuple[int, str, int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            stat = Path("/proc", entry, "stat").read_bytes()
            # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after its last ')'
            state, ppid, pgrp = stat.rsplit(b")", 1)[1].split()[:3]
            found[int(entry)] = (int(ppid), state.decode("ascii", "replace"), int(pgrp))
        except (OSError, ValueError, IndexError):
            continue  # it ended while we looked
    return found


def descendants(root: int) -> dict[int, str]:
    """Every process below `root` now, with its state ("Z" for one that has ended and not been reaped)."""
    parents = _processes()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in parents.items():
        children.setdefault(ppid, []).append(pid)
    found: dict[int, str] = {}
    todo = list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        if pid in found or pid == root:
            continue
        found[pid] = parents[pid][1]
        todo.extend(children.get(pid, ()))
    return found


def group_running(pgid: int) -> bool:
    """Whether a process of group `pgid` is still running: one that has ended and waits to be reaped (state Z) is
    not, as init in some containers never reaps its orphans. False without /proc."""
    return any(pgrp == pgid and state not in ("Z", "X") for _, state, pgrp in _processes().values())


def end_descendants(root: int, within_s: float = END_WITHIN_S) -> bool:
    """SIGKILL every live process below `root`, again until none is left (True) or `within_s` has passed.

    Complete when `root` is a child subreaper that does not start processes meanwhile (it is stopped, or it is
    the caller): a process started while a round kills is orphaned into `root`'s tree and met in the next."""
    deadline = time.monotonic() + within_s
    while True:
        live = [pid for pid, state in descendants(root).items() if state not in ("Z", "X")]
        if not live:
            return True
        if time.monotonic() > deadline:
            return False
        for pid in live:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.001)


def end_tree(proc: subprocess.Popen[bytes]) -> None:
    """Kill `proc` (a child started with start_new_session=True, made a child subreaper) and every process
    below it: it is stopped first, so that it neither starts nor reaps a process while its tree is killed."""
    if proc.poll() is None:  # not yet reaped: its pid is still its own
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(proc.pid, signal.SIGSTOP)
        end_descendants(proc.pid)
    kill_group(proc)
