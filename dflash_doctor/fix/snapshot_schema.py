"""Reading a `fix` snapshot without trusting it.

A snapshot directory is only files on disk: anyone who can write there can hand `fix --undo` any
`snapshot.json`. So, before anything is touched:

- `fix.json` and `snapshot.json` are read from regular files only (a FIFO cannot block the read, /dev/zero
  cannot feed it), at most a bounded number of bytes, and parsed as JSON with every failure (malformed,
  too deep, a number Python will not convert) a SnapshotError naming the file;
- each document is checked against its schema: the types, bounded counts, lengths and integers;
- every path it names is absolute and normalised (no `..`, no `//`), below one of the roots, which must be
  roots of the environment as the live interpreter reports them now (never the snapshot's own claim),
  and resolves (its parent's symlinks followed) inside those live roots; no path lies below one the snapshot
  says is a link or a file (a link it would restore first could lead the rest outside);
- every saved file's copy is a regular file inside the snapshot's own `files/` (no link on the way), whose
  sha256 is the one recorded.

Anything else is a SnapshotError: `fix --undo` reports it (exit 2) with nothing changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dflash_doctor.facts.safefile import UnsafeFile, forbidden, open_regular, under
from dflash_doctor.shape import frozen_dataclass

__all__ = ["FORMAT", "RealPaths", "Snapshot", "SnapshotError", "confine", "load", "load_run", "read_json", "resolves_inside",
           "sha256_of"]

FORMAT = "dflash-doctor/fix-snapshot/v1"
MAX_RUN_BYTES = 1 << 20  # fix.json: a list of step names
MAX_SNAPSHOT_BYTES = 256 << 20  # snapshot.json: ~250 bytes a path; a large CUDA env holds ~100k paths
MAX_ENTRIES = 2_000_000
MAX_STEPS = 1000
MAX_ROOTS = 64
MAX_PATH = 4096
MAX_NAME = 255
MAX_TEXT = 1 << 16
MAX_FREEZE = 16 << 20
INT64 = 1 << 63
KINDS = ("file", "dir", "link", "other")
STEP_NAME = re.compile(r"step-[0-9]{1,6}")
SHA256 = re.compile(r"[0-9a-f]{64}")


class SnapshotError(Exception):
    """A snapshot that cannot be read or written, or one that is not to be trusted; str() names the file."""


def shown(value: object, limit: int = 120) -> str:
    """A value from the snapshot, quoted on one line whatever it holds."""
    try:
        text = json.dumps(value, ensure_ascii=True)
    except (TypeError, ValueError, RecursionError):
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit] + "..."


def read_json(path: Path, limit: int) -> Any:
    """The JSON document in `path`, a regular file of at most `limit` bytes; raises SnapshotError naming it."""
    try:
        with open_regular(path) as handle:
            if os.fstat(handle.fileno()).st_size > limit:
                raise SnapshotError(f"{path}: larger than {limit} bytes, more than a fix snapshot writes")
            raw = handle.read(limit + 1)
    except UnsafeFile as exc:
        raise SnapshotError(f"{path}: {exc.reason}") from None
    except OSError as exc:
        raise SnapshotError(f"{path}: {exc.strerror or exc}") from None
    if len(raw) > limit:
        raise SnapshotError(f"{path}: larger than {limit} bytes, more than a fix snapshot writes")
    try:
        return json.loads(raw)
    except (ValueError, RecursionError, MemoryError) as exc:
        reason = str(exc).splitlines()[0][:200] if str(exc).strip() else ""
        raise SnapshotError(f"{path}: not JSON ({type(exc).__name__}{': ' + reason if reason else ''})") from None


def sha256_of(path: str) -> str:
    digest = hashlib.sha256()
    with open_regular(path) as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


# --------------------------------------------------------------------------- the documents


def _int(value: object, low: int, high: int) -> bool:
    return type(value) is int and low <= value < high


def _text(value: object, limit: int = MAX_TEXT) -> bool:
    return isinstance(value, str) and len(value) <= limit and "\0" not in value


def _path_problem(path: object) -> str:
    """Why `path` is no path a snapshot holds ("" when it is one)."""
    if not isinstance(path, str) or not path or len(path) > MAX_PATH or "\0" in path:
        return "not a path"
    if not os.path.isabs(path) or path.startswith("//") or os.path.normpath(path) != path:
        return "not an absolute, normalised path (no `..`, `.` or `//`)"
    if any(len(part.encode("utf-8", "surrogateescape")) > MAX_NAME for part in path.split("/")):
        return "a name longer than any file system holds"
    return ""


def load_run(run_dir: Path, fix_format: str, python: str) -> list[str]:
    """The steps taken by the fix run in `run_dir` (its `fix.json`), for `python`."""
    meta_path = run_dir / "fix.json"
    data = read_json(meta_path, MAX_RUN_BYTES)
    if not isinstance(data, dict) or data.get("format") != fix_format:
        raise SnapshotError(f"{meta_path}: not a dflash-doctor fix run (no \"format\": {shown(fix_format)})")
    steps = data.get("steps_taken")
    if not isinstance(steps, list) or len(steps) > MAX_STEPS or \
            not all(isinstance(s, str) and STEP_NAME.fullmatch(s) for s in steps) or len(set(steps)) != len(steps):
        raise SnapshotError(f"{meta_path}: \"steps_taken\" is not a list of distinct step-N names: "
                            f"{shown(steps)}")
    if data.get("python") != python:
        raise SnapshotError(f"{meta_path}: the fix run was for {shown(data.get('python'))}, not {python}: "
                            "pass that interpreter as --python")
    return [str(s) for s in steps]


@frozen_dataclass(frozen=True)
class Snapshot:
    """A snapshot.json that has its schema (not yet confined to an environment: see `confine`)."""

    directory: Path
    python: str
    command: str
    roots: tuple[str, ...]
    manifest: Mapping[str, tuple[str, int, int, int]]  # path -> (kind, size, mode, mtime_ns)
    saved: Mapping[str, Mapping[str, Any]]  # path -> {"type": file|dir|link, ...}

    @property
    def file(self) -> Path:
        return self.directory / "snapshot.json"

    def copy_of(self, path: str) -> Path:
        return self.directory / "files" / path.lstrip(os.sep)


def _saved_problem(info: object) -> str:
    if not isinstance(info, dict):
        return "not an object"
    kind = info.get("type")
    if kind == "dir":
        return "" if _int(info.get("mode"), 0, 0o10000) else "no \"mode\" 0..0o7777"
    if kind == "link":
        target = info.get("target")
        return "" if _text(target, MAX_PATH) and target else "no \"target\" path"
    if kind == "file":
        if not isinstance(info.get("sha256"), str) or not SHA256.fullmatch(info["sha256"]):
            return "no \"sha256\" of 64 hex digits"
        if not _int(info.get("mode"), 0, 0o10000):
            return "no \"mode\" 0..0o7777"
        return "" if _int(info.get("mtime_ns"), -INT64, INT64) else "no \"mtime_ns\" 64-bit integer"
    return f"\"type\" {shown(kind)} is none of file, dir, link"


def load(directory: Path, python: str | None = None) -> Snapshot:
    """The snapshot in `directory`, checked against its schema; raises SnapshotError naming what is wrong."""
    where = directory / "snapshot.json"
    try:
        st = os.lstat(directory)
    except OSError as exc:
        raise SnapshotError(f"{directory}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise SnapshotError(f"{directory}: not a directory (a snapshot is one; links are not followed)")
    data = read_json(where, MAX_SNAPSHOT_BYTES)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise SnapshotError(f"{where}: not a dflash-doctor fix snapshot (no \"format\": {shown(FORMAT)})")
    if not _text(data.get("python"), MAX_PATH) or (python is not None and data["python"] != python):
        raise SnapshotError(f"{where}: taken for {shown(data.get('python'))}, not {python}")
    command = data.get("command")
    if not isinstance(command, str) or not _text(command) or "\n" in command or "\r" in command:
        raise SnapshotError(f"{where}: \"command\" is not one line of text: {shown(command)}")
    if not _text(data.get("freeze", ""), MAX_FREEZE):
        raise SnapshotError(f"{where}: \"freeze\" is not text")
    roots = data.get("roots")
    if not isinstance(roots, list) or not 1 <= len(roots) <= MAX_ROOTS:
        raise SnapshotError(f"{where}: \"roots\" is not a list of 1 to {MAX_ROOTS} paths: {shown(roots)}")
    for root in roots:
        if _path_problem(root):
            raise SnapshotError(f"{where}: root {shown(root)}: {_path_problem(root)}")
    manifest, saved = data.get("manifest"), data.get("saved")
    for name, table in (("manifest", manifest), ("saved", saved)):
        if not isinstance(table, dict) or len(table) > MAX_ENTRIES:
            raise SnapshotError(f"{where}: \"{name}\" is not an object of at most {MAX_ENTRIES} paths")
    assert isinstance(manifest, dict) and isinstance(saved, dict)
    for path, entry in manifest.items():
        if _path_problem(path):
            raise SnapshotError(f"{where}: manifest path {shown(path)}: {_path_problem(path)}")
        if not (isinstance(entry, list) and len(entry) == 4 and entry[0] in KINDS and _int(entry[1], 0, INT64)
                and _int(entry[2], 0, 0o10000) and _int(entry[3], -INT64, INT64)):
            raise SnapshotError(f"{where}: manifest entry of {shown(path)} is not [kind, size, mode, mtime_ns] "
                                f"(kind one of {', '.join(KINDS)}, 64-bit integers): {shown(entry)}")
    for path, info in saved.items():
        problem = _path_problem(path) or _saved_problem(info)
        if problem:
            raise SnapshotError(f"{where}: saved path {shown(path)}: {problem}")
        listed = manifest.get(path)
        if isinstance(listed, list) and listed and listed[0] != info["type"]:  # taken together: they agree
            raise SnapshotError(f"{where}: saved path {shown(path)} is a {info['type']}, the manifest says a "
                                f"{shown(listed[0])}")
    for root in roots:
        if manifest.get(root, [None])[0] != "dir":
            raise SnapshotError(f"{where}: the manifest does not hold its root {shown(root)} as a directory")
    return Snapshot(directory, str(data["python"]), str(command), tuple(str(r) for r in roots),
                    {p: (str(e[0]), int(e[1]), int(e[2]), int(e[3])) for p, e in manifest.items()},
                    {p: dict(i) for p, i in saved.items()})


# --------------------------------------------------------------------------- the environment it may touch


class RealPaths:
    """Real paths (symlinks resolved, as os.path.realpath), each worked out from its parent's, remembered: one
    lstat a level instead of a walk from / for every path, so no depth of directories makes it quadratic."""

    def __init__(self) -> None:
        self.known: dict[str, str] = {}

    def forget(self) -> None:
        """After a link was made or removed: what was worked out may resolve otherwise now."""
        self.known.clear()

    def real(self, path: str) -> str:
        chain = []
        above = path
        while above not in self.known and os.path.dirname(above) != above:
            chain.append(above)
            above = os.path.dirname(above)
        real = self.known.get(above, above)
        for step in reversed(chain):
            candidate = os.path.join(real, os.path.basename(step))
            try:
                link = stat.S_ISLNK(os.lstat(candidate).st_mode)
            except OSError:
                link = False
            real = os.path.realpath(candidate) if link else candidate
            self.known[step] = real
        return real


def resolves_inside(path: str, roots: Sequence[str], real_roots: Sequence[str], paths: RealPaths) -> bool:
    """`path` is a root, or its parent's real path (symlinks followed) with its name lies inside `real_roots`;
    `path` itself is never followed (a link is restored or removed as a link)."""
    if path in roots:
        return True
    real = os.path.join(paths.real(os.path.dirname(path)), os.path.basename(path))
    return not forbidden(real) and under(real, real_roots)


def confine(snapshots: Iterable[Snapshot], roots: Sequence[str]) -> None:
    """Raise SnapshotError unless everything `snapshots` would touch is inside `roots`, the environment's
    roots as its interpreter reports them now, and every saved copy is the file it claims (module docstring)."""
    snapshots = list(snapshots)
    real_roots = [os.path.realpath(r) for r in roots]
    not_dirs = {p for s in snapshots for p, e in s.manifest.items() if e[0] != "dir"}
    not_dirs |= {p for s in snapshots for p, i in s.saved.items() if i["type"] != "dir"}
    paths = RealPaths()
    for snap in snapshots:
        foreign = [r for r in snap.roots if r not in roots]
        if foreign:
            raise SnapshotError(f"{snap.file}: root {shown(foreign[0])} is not one of the environment's "
                                f"({', '.join(roots) or 'none'}): nothing restored there")
        for table, path in [("manifest", p) for p in snap.manifest] + [("saved", p) for p in snap.saved]:
            if not under(path, snap.roots):
                raise SnapshotError(f"{snap.file}: {table} path {shown(path)} is outside its roots")
            if path in not_dirs and path in roots:
                raise SnapshotError(f"{snap.file}: {table} says the environment's root {shown(path)} is no directory")
            above = os.path.dirname(path)
            while above not in snap.roots and above != "/" and path not in snap.roots:
                if above in not_dirs:
                    raise SnapshotError(f"{snap.file}: {table} path {shown(path)} lies below {shown(above)}, "
                                        "which a snapshot says is a link or a file")
                above = os.path.dirname(above)
            if not resolves_inside(path, snap.roots, real_roots, paths):
                raise SnapshotError(f"{snap.file}: {table} path {shown(path)} resolves to "
                                    f"{shown(paths.real(os.path.dirname(path)))}/..., outside the environment")
        files = os.path.realpath(snap.directory / "files")
        for path, info in snap.saved.items():
            if info["type"] != "file":
                continue
            copy = snap.copy_of(path)
            if paths.real(str(copy)) != os.path.join(files, path.lstrip(os.sep)):
                raise SnapshotError(f"{copy}: the saved copy of {shown(path)} is reached through a link")
            try:
                st = os.lstat(copy)
                if not stat.S_ISREG(st.st_mode):
                    raise SnapshotError(f"{copy}: the saved copy of {shown(path)} is not a regular file")
                digest = sha256_of(str(copy))
            except UnsafeFile as exc:
                raise SnapshotError(f"{copy}: {exc.reason}") from None
            except OSError as exc:
                raise SnapshotError(f"{copy}: the saved copy of {shown(path)}: {exc.strerror or exc}") from None
            if digest != info["sha256"]:
                raise SnapshotError(f"{copy}: the saved copy of {shown(path)} is not the file recorded "
                                    "(sha256 differs)")
