"""Opening the inspected environment's files without being led by them.

A RECORD line, a symlink or a FIFO decides which path the doctor would open; the rules below keep that
from blocking it (a FIFO), feeding it without end (/dev/zero), or pointing it outside the environment
(`flash_attn/../../../../tmp/x/evil.so`). The environment probe applies the same rules in the target
(dflash_doctor/facts/probes/environment.py, standard library only: the probe prelude, probes/_prelude.py, holds
the target's copy of FORBIDDEN, `forbidden` and `file_kind`, and tests/test_probe_prelude.py holds it to these):

- only regular files are opened, with O_NONBLOCK (a FIFO swapped in after a stat cannot block), checked
  again with fstat after the open;
- nothing whose real path is under /dev, /proc or /sys;
- where the caller gives the environment's roots (recorded by the probe as target.environment_roots: the
  sys.path entries, the install-scheme directories of the prefix of each site directory on sys.path, the
  project directories of editable installs), nothing that resolves outside them.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from typing import BinaryIO, Final

from dflash_doctor.facts.python.environment_shapes import Target

__all__ = ["FORBIDDEN", "UnsafeFile", "environment_roots", "file_kind", "inside", "open_regular", "open_resolved",
           "read_regular", "refusal", "under"]

FORBIDDEN: Final = ("/dev", "/proc", "/sys")


class UnsafeFile(OSError):
    """A file the doctor will not open; str() says why, naming the file."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def file_kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"


def under(path: str, roots: Iterable[str]) -> bool:
    """`path` is one of `roots` or below one, as written: no symlink is followed (`inside` resolves them)."""
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def forbidden(real: str) -> bool:
    return under(real, FORBIDDEN)


def environment_roots(target: Target | None) -> list[str] | None:
    """The roots the environment probe recorded (real paths), or None without the target's facts."""
    if target is None:
        return None
    return [r for r in target.environment_roots if r]


def inside(path: str, roots: Iterable[str] | None) -> bool:
    """`path` resolves (symlinks followed) under one of `roots`, and not under /dev, /proc or /sys.
    `roots` None: no root limit (only the /dev, /proc, /sys rule)."""
    real = os.path.realpath(path)
    if forbidden(real):
        return False
    return roots is None or under(real, roots)


def refusal(path: str, roots: Iterable[str] | None = None) -> str | None:
    """Why `path` will not be opened (naming it and what it is), or None when it may be. Never raises."""
    real = os.path.realpath(path)
    if forbidden(real) or (roots is not None and not inside(path, roots)):
        return f"{path}: resolves to {real}, outside the environment: never opened"
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    if not stat.S_ISREG(mode):
        return f"{path}: {file_kind(mode)}, not a regular file: never opened"
    return None


def open_regular(path: str | os.PathLike[str], roots: Iterable[str] | None = None) -> BinaryIO:
    """Open `path` for binary reading if it is a regular file inside `roots` (see the module docstring).
    Raises UnsafeFile (naming the file and what it is) or OSError."""
    name = os.fspath(path)
    return open_resolved(name, os.path.realpath(name), roots)


def open_resolved(name: str, real: str, roots: Iterable[str] | None = None) -> BinaryIO:
    """`open_regular` for a path whose real path (`os.path.realpath`) the caller has just resolved."""
    if forbidden(real) or (roots is not None and not under(real, roots)):
        raise UnsafeFile(name, f"resolves to {real}, outside the environment: never opened")
    fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UnsafeFile(name, f"{file_kind(mode)}, not a regular file: never opened")
        # O_NONBLOCK means nothing to a regular file's reads; clear it all the same.
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def read_regular(path: str | os.PathLike[str], limit: int, roots: Iterable[str] | None = None) -> bytes:
    """At most `limit` bytes of a regular file (open_regular's rules). Raises UnsafeFile or OSError."""
    with open_regular(path, roots) as handle:
        return handle.read(limit)
