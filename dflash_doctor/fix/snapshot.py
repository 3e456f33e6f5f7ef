"""Snapshots for `dflash-doctor fix`: what a step will touch, copied before it runs, so that the step can be
rolled back and `fix --undo` can put every byte back.

A snapshot is a directory holding `snapshot.json` and `files/` (copies, by absolute path), readable by its
owner only (directories 0o700, files 0o600: the copies may hold anything the environment holds). It records:

- a manifest of the environment's roots (the venv's prefix; for an interpreter that is not a venv, its
  site-packages and scripts directories): every path with its type, size, mode and mtime;
- a copy of every file, link and directory the step will touch (the distributions it removes or replaces:
  their RECORD'd files and dist-info; the top-level directories they share; the leftovers it deletes), with
  each file's sha256. A path is copied by its real path (its parent's symlinks resolved, inside the roots),
  never through a link, and nothing is written in the snapshot through a link;
- the installer's freeze output, for a person reading it.

Restoring first checks the snapshot (fix.snapshot_schema: its schema, and every path inside the roots the
live interpreter reports), then removes what appeared inside the roots since the snapshot, puts every copied
path back byte for byte (mode and mtime too), recreates directories that went, and then says what differs
still: a file the step changed that the snapshot did not copy (so it cannot be restored) is named, never
ignored. Each write is checked again, just before it, to resolve inside the roots.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from dflash_doctor.documents import writer
from dflash_doctor.facts.safefile import open_regular, under
from dflash_doctor.fix.snapshot_schema import (
    FORMAT,
    MAX_RUN_BYTES,
    RealPaths,
    Snapshot,
    SnapshotError,
    confine,
    load,
    load_run,
    read_json,
    resolves_inside,
    sha256_of,
)
from dflash_doctor.process import safe_path_environ

__all__ = ["Snapshot", "SnapshotError", "apply", "confine", "latest", "load", "load_run", "private_dir", "restore",
           "snapshot_root", "take", "write_private"]

DIR_MODE = 0o700
FILE_MODE = 0o600


def snapshot_root() -> Path:
    base = os.environ.get("DFLASH_DOCTOR_SNAPSHOTS") or os.path.join(
        os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "dflash-doctor", "fix")
    return Path(base)


def private_dir(path: Path) -> None:
    """`path` made (parents too) or found, a directory (not a link), then made owner-only."""
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    if os.path.islink(path):
        raise SnapshotError(f"{path}: a link, where a snapshot directory goes")
    os.chmod(path, DIR_MODE)


def write_private(path: Path, text: str) -> None:
    """Write `path` as a file only its owner reads (replacing the doctor's own one there, never following a link)."""
    writer.replace(str(path), text, writer.JSON_DOCUMENT, FILE_MODE)


def _entry(path: str) -> list[Any]:
    st = os.lstat(path)
    kind = "link" if stat.S_ISLNK(st.st_mode) else "dir" if stat.S_ISDIR(st.st_mode) else \
        "file" if stat.S_ISREG(st.st_mode) else "other"
    return [kind, st.st_size, stat.S_IMODE(st.st_mode), st.st_mtime_ns]


def manifest(roots: Sequence[str]) -> dict[str, list[Any]]:
    """Every path under the roots (links not followed) -> [type, size, mode, mtime_ns]. Walked with a list, not
    recursion: no depth of directories ends it."""
    found: dict[str, list[Any]] = {}
    for root in roots:
        if not os.path.isdir(root):
            continue
        st = os.stat(root)  # a root reached through a link is still the directory it names
        found[root] = ["dir", st.st_size, stat.S_IMODE(st.st_mode), st.st_mtime_ns]
        pending = [root]
        while pending:
            try:
                with os.scandir(pending.pop()) as entries:
                    listed = [entry.path for entry in entries]
            except OSError:
                continue
            for path in listed:
                try:
                    found[path] = entry = _entry(path)
                except OSError:
                    continue
                if entry[0] == "dir":
                    pending.append(path)
    return found


def _real_key(path: str, roots: Sequence[str], real_roots: Sequence[str], paths: RealPaths) -> str | None:
    """`path` with its parent's links resolved, written below the root (as given) it lies in; None outside."""
    real = os.path.join(paths.real(os.path.dirname(path)), os.path.basename(path))
    for root, real_root in zip(roots, real_roots):
        if path == root:
            return root
        if real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep):
            return root.rstrip(os.sep) + real[len(real_root.rstrip(os.sep)):]
    return None


def _dest(files: Path, path: str) -> Path:
    """Where `path`'s copy goes under `files`, its directories made owner-only on the way, none a link."""
    dest = files
    for part in path.strip(os.sep).split(os.sep)[:-1]:
        dest = dest / part
        try:
            os.mkdir(dest, DIR_MODE)
        except FileExistsError:
            if not stat.S_ISDIR(os.lstat(dest).st_mode):
                raise SnapshotError(f"{dest}: not a directory in the snapshot, where a copy goes") from None
    return dest / os.path.basename(path)


def _copy_file(source: str, dest: Path) -> tuple[str, int, int]:
    """Copy the regular file `source` to a new owner-only `dest`: its sha256 (of the bytes copied), mode, mtime."""
    digest = hashlib.sha256()
    with open_regular(source) as src:
        st = os.fstat(src.fileno())
        writer.create_new(str(dest), _chunks(src, digest), FILE_MODE)
    return digest.hexdigest(), stat.S_IMODE(st.st_mode), st.st_mtime_ns


def _chunks(src: BinaryIO, digest: Any = None) -> Iterator[bytes]:
    """`src`'s bytes in chunks of 1 MiB, each added to `digest` (a hashlib object) when one is given."""
    for chunk in iter(lambda: src.read(1 << 20), b""):
        if digest is not None:
            digest.update(chunk)
        yield chunk


def _copy_into(start: str, files: Path, saved: dict[str, dict[str, Any]], roots: Sequence[str],
               real_roots: Sequence[str], paths: RealPaths) -> None:
    key = _real_key(start, roots, real_roots, paths)
    if key is None or key in saved or not os.path.lexists(key):
        return
    # A list, not recursion (no depth of directories ends it); a directory's entries are real paths already,
    # and their copies go in the directory's copy, made just before.
    pending: list[tuple[str, Path]] = [(key, _dest(files, key))]
    while pending:
        key, dest = pending.pop()
        if key in saved:
            continue
        st = os.lstat(key)
        if stat.S_ISLNK(st.st_mode):
            target = os.readlink(key)
            os.symlink(target, dest)
            saved[key] = {"type": "link", "target": target}
        elif stat.S_ISDIR(st.st_mode):
            if not os.path.lexists(dest):
                os.mkdir(dest, DIR_MODE)
            elif not stat.S_ISDIR(os.lstat(dest).st_mode):
                raise SnapshotError(f"{dest}: not a directory in the snapshot, where a copy goes")
            saved[key] = {"type": "dir", "mode": stat.S_IMODE(st.st_mode)}
            pending.extend((os.path.join(key, name), dest / name) for name in sorted(os.listdir(key), reverse=True))
        elif stat.S_ISREG(st.st_mode):
            sha, mode, mtime_ns = _copy_file(key, dest)
            saved[key] = {"type": "file", "sha256": sha, "mode": mode, "mtime_ns": mtime_ns}


def _freeze(python: str, uv: bool) -> str:
    argv = ["uv", "pip", "freeze", "--python", python] if uv else [python, "-m", "pip", "freeze", "--all"]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False,
                              env={**safe_path_environ(os.environ), "PYTHONDONTWRITEBYTECODE": "1",
                                   "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"# {' '.join(argv)}: {exc}\n"
    return proc.stdout if proc.returncode == 0 else f"# {' '.join(argv)} exited {proc.returncode}\n"


def take(directory: Path, *, python: str, roots: Sequence[str], touched: Iterable[str], command: str,
         uv: bool = False) -> dict[str, Any]:
    """Copy what `command` will touch (paths inside `roots` only) into `directory`, with the roots' manifest."""
    directory.mkdir(mode=DIR_MODE, parents=True, exist_ok=False)
    os.chmod(directory, DIR_MODE)
    files = directory / "files"
    files.mkdir(mode=DIR_MODE)
    os.chmod(files, DIR_MODE)
    real_roots = [os.path.realpath(r) for r in roots]
    paths = RealPaths()
    saved: dict[str, dict[str, Any]] = {}
    for path in sorted({os.path.normpath(p) for p in touched}):
        if under(path, roots):
            _copy_into(path, files, saved, roots, real_roots, paths)
    record = {"format": FORMAT, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "python": python,
              "command": command, "roots": list(roots), "manifest": manifest(roots), "saved": saved,
              "freeze": _freeze(python, uv)}
    write_private(directory / "snapshot.json", json.dumps(record, indent=1, sort_keys=True) + "\n")
    return record


def _remove(path: str) -> None:
    """Remove `path`, a directory with all in it (links not followed; a list, not recursion, as manifest)."""
    if not stat.S_ISDIR(os.lstat(path).st_mode):
        os.unlink(path)
        return
    dirs, pending = [], [path]
    while pending:
        directory = pending.pop()
        dirs.append(directory)
        with os.scandir(directory) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                else:
                    os.unlink(entry.path)
    for directory in reversed(dirs):  # every directory after those below it
        os.rmdir(directory)


def _is_dir(path: str) -> bool:
    return stat.S_ISDIR(os.lstat(path).st_mode)


def restore(directory: Path, roots: Sequence[str]) -> list[str]:
    """Put the environment (whose roots, as its interpreter reports them, are `roots`) back as the snapshot in
    `directory` found it; returns what still differs. Raises SnapshotError, with nothing changed, for a snapshot
    that does not have its schema or would touch anything outside `roots`."""
    snap = load(directory)
    confine([snap], roots)
    return apply(snap, roots)


def apply(snap: Snapshot, roots: Sequence[str]) -> list[str]:
    """Restore a snapshot that `confine` passed for `roots`; returns what still differs."""
    real_roots = [os.path.realpath(r) for r in roots]
    walked = [r for r in snap.roots if r in roots]

    paths = RealPaths()

    def guard(path: str) -> str:
        # Checked again just before each write: what was restored before it must not lead it outside.
        if not resolves_inside(path, walked, real_roots, paths):
            raise SnapshotError(f"{snap.file}: {path} resolves outside the environment now: stopped there")
        return path

    def remove(path: str) -> None:
        link = os.path.islink(path)
        _remove(path)
        if link:
            paths.forget()

    before, saved = snap.manifest, snap.saved
    now = manifest(walked)
    # What appeared since: deepest first, so a new directory goes with everything in it.
    for path in sorted((p for p in now if p not in before), key=lambda p: p.count(os.sep), reverse=True):
        if os.path.lexists(guard(path)):
            remove(path)
    for path, entry in sorted(before.items(), key=lambda kv: kv[0].count(os.sep)):
        if entry[0] == "dir" and path not in saved:
            if os.path.lexists(guard(path)) and not _is_dir(path):
                remove(path)
            os.makedirs(path, exist_ok=True)
            os.chmod(path, entry[2])
    for path, info in sorted(saved.items(), key=lambda kv: kv[0].count(os.sep)):
        kind = info["type"]
        current = _entry(path)[0] if os.path.lexists(guard(path)) else None
        if kind == "dir":
            if current not in (None, "dir"):
                remove(path)
            os.makedirs(path, exist_ok=True)
            os.chmod(path, int(info["mode"]))
        elif kind == "link":
            if current is not None:
                remove(path)
            os.symlink(str(info["target"]), path)
            paths.forget()
        else:
            if current == "file" and sha256_of(path) == info["sha256"]:
                os.chmod(path, int(info["mode"]))
                continue
            if current is not None:
                remove(path)
            with open_regular(str(snap.copy_of(path))) as copy:
                writer.create_new(path, _chunks(copy), FILE_MODE)
            os.chmod(path, int(info["mode"]))
            os.utime(path, ns=(int(info["mtime_ns"]), int(info["mtime_ns"])))
    return differences(snap, walked)


def differences(snap: Snapshot, roots: Sequence[str]) -> list[str]:
    """What differs between the environment now and the snapshot (nothing, after a clean restore)."""
    before, saved = snap.manifest, snap.saved
    now = manifest(roots)
    found = [f"{p}: appeared" for p in now if p not in before]
    found += [f"{p}: gone" for p in before if p not in now]
    for path, entry in before.items():
        if path not in now or entry[0] == "dir":
            continue
        info = saved.get(path)
        if info is not None and info["type"] == "file":
            if now[path][0] != "file" or sha256_of(path) != info["sha256"]:
                found.append(f"{path}: content differs")
        elif tuple(now[path][:2]) != entry[:2] or (entry[0] == "file" and now[path][3] != entry[3]):
            found.append(f"{path}: changed, and the snapshot holds no copy of it")
    return sorted(found)


def latest(python: str, root: Path | None = None) -> Path | None:
    """The newest snapshot (the first step's) taken for `python` under `root` (a fix.json that cannot be read,
    or is not a regular file, is passed over)."""
    base = root or snapshot_root()
    best: tuple[str, Path] | None = None
    if not base.is_dir():
        return None
    for run_dir in base.iterdir():
        try:
            data = read_json(run_dir / "fix.json", MAX_RUN_BYTES)
        except SnapshotError:
            continue
        if isinstance(data, dict) and data.get("python") == python and data.get("steps_taken"):
            key = str(data.get("created", ""))
            if best is None or key > best[0]:
                best = (key, run_dir)
    return best[1] if best else None
