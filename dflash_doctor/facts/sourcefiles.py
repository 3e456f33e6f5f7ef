"""The source files a run's scans read, each listed and read once per run however many scans read it.

vLLM's package is read by three scans that run side by side (its external kernel imports, `vllm_scan`; what
`vllm serve` imports on its way up, and where vLLM imports its unmet requirements, `vllm_serve_path`): a
2,000-file tree read, resolved and checked three times was a cost paid three times. One `SourceFiles` per
collection (`Context.sources`) keeps what was read, for the run only.

The rules of `safefile` hold for every read as if it were the only one: a read with roots never opens a file
that resolves outside them (a file another scan read without roots is refused to it all the same), and a file
refused or unreadable is refused again, with the same reason.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

from dflash_doctor.facts.safefile import UnsafeFile, open_resolved, under

__all__ = ["SourceFiles"]


class SourceFiles:
    """What the run's scans read (thread-safe): each file's real path and bytes, each tree's .py files."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._read: dict[tuple[str, int], tuple[str, bytes] | OSError] = {}
        self._listed: dict[str, list[str]] = {}
        self._real_dirs: dict[str, str] = {}

    def _realpath(self, path: str) -> str:
        """`os.path.realpath(path)`, each directory resolved once: a tree's files share a few hundred directories,
        and resolving each file's path anew took a dozen lstat calls a file (24,000 for vLLM's tree)."""
        directory, name = os.path.split(path)
        if not directory or name in ("", ".", ".."):
            return os.path.realpath(path)
        with self._lock:
            real_dir = self._real_dirs.get(directory)
        if real_dir is None:
            real_dir = os.path.realpath(directory)
            with self._lock:
                self._real_dirs[directory] = real_dir
        joined = os.path.join(real_dir, name)
        return os.path.realpath(joined) if os.path.islink(joined) else joined

    def read(self, path: str, limit: int, roots: Sequence[str] | None = None) -> bytes:
        """At most `limit` bytes of `path` (`safefile.read_regular`'s rules, `roots` included); UnsafeFile or
        OSError as it raises them."""
        key = (path, limit)
        with self._lock:
            known = self._read.get(key)
        if known is None:
            real = self._realpath(path)
            if roots is not None and not under(real, roots):  # never opened for this read
                raise UnsafeFile(path, f"resolves to {real}, outside the environment: never opened")
            try:
                with open_resolved(path, real) as handle:
                    known = (real, handle.read(limit))
            except OSError as exc:
                known = exc
            with self._lock:
                self._read.setdefault(key, known)
        if isinstance(known, OSError):
            raise known
        real, data = known
        if roots is not None and not under(real, roots):
            raise UnsafeFile(path, f"resolves to {real}, outside the environment: never opened")
        return data

    def python_files(self, root: str) -> list[str]:
        """Every .py file under `root`, `__pycache__` left out, directories and files in sorted order."""
        with self._lock:
            listed = self._listed.get(root)
        if listed is None:
            listed = []
            for dirpath, dirnames, filenames in os.walk(root):
                dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
                listed += [os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".py")]
            with self._lock:
                listed = self._listed.setdefault(root, listed)
        return list(listed)
