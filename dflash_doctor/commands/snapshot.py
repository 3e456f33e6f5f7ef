"""Snapshots for `dflash-doctor fix`: what a step will touch, copied before it runs, so that the step can be
rolled back and `fix --undo` can put every byte back.

A snapshot is a directory holding `snapshot.json` and `files/` (copies, by absolute path). It records:

- a manifest of the environment's roots (the venv's prefix; for an interpreter that is not a venv, its
  site-packages and scripts directories): every path with its type, size, mode and mtime;
- a copy of every file, link and directory the step will touch (the distributions it removes or replaces:
  their RECORD'd files and dist-info; the top-level directories they share; the leftovers it deletes), with
  each file's sha256;
- the installer's freeze output, for a person reading it.

Restoring removes what appeared inside the roots since the snapshot, puts every copied path back byte for
byte (mode and mtime too), recreates directories that went, and then says what differs still: a file the
step changed that the snapshot did not copy (so it cannot be restored) is named, never ignored.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dflash_doctor.facts.safefile import under

__all__ = ["SnapshotError", "latest", "restore", "snapshot_root", "take"]

FORMAT = "dflash-doctor/fix-snapshot/v1"


class SnapshotError(Exception):
    """A snapshot that cannot be read or written."""


def snapshot_root() -> Path:
    base = os.environ.get("DFLASH_DOCTOR_SNAPSHOTS") or os.path.join(
        os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "dflash-doctor", "fix")
    return Path(base)


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _entry(path: str) -> list[Any]:
    st = os.lstat(path)
    kind = "link" if stat.S_ISLNK(st.st_mode) else "dir" if stat.S_ISDIR(st.st_mode) else \
        "file" if stat.S_ISREG(st.st_mode) else "other"
    return [kind, st.st_size, stat.S_IMODE(st.st_mode), st.st_mtime_ns]


def manifest(roots: Sequence[str]) -> dict[str, list[Any]]:
    """Every path under the roots (links not followed) -> [type, size, mode, mtime_ns]."""
    found: dict[str, list[Any]] = {}
    for root in roots:
        if not os.path.isdir(root):
            continue
        found[root] = _entry(root)
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                path = os.path.join(dirpath, name)
                try:
                    found[path] = _entry(path)
                except OSError:
                    continue
    return found


def _copy_into(path: str, files: Path, saved: dict[str, dict[str, Any]]) -> None:
    if path in saved or not os.path.lexists(path):
        return
    dest = files / path.lstrip(os.sep)
    dest.parent.mkdir(parents=True, exist_ok=True)
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(path), dest)
        saved[path] = {"type": "link", "target": os.readlink(path)}
    elif stat.S_ISDIR(st.st_mode):
        dest.mkdir(exist_ok=True)
        saved[path] = {"type": "dir", "mode": stat.S_IMODE(st.st_mode)}
        for name in sorted(os.listdir(path)):
            _copy_into(os.path.join(path, name), files, saved)
    elif stat.S_ISREG(st.st_mode):
        shutil.copy2(path, dest, follow_symlinks=False)
        saved[path] = {"type": "file", "sha256": _sha256(path), "mode": stat.S_IMODE(st.st_mode),
                       "mtime_ns": st.st_mtime_ns}


def _freeze(python: str, uv: bool) -> str:
    argv = ["uv", "pip", "freeze", "--python", python] if uv else [python, "-m", "pip", "freeze", "--all"]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False,
                              env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"# {' '.join(argv)}: {exc}\n"
    return proc.stdout if proc.returncode == 0 else f"# {' '.join(argv)} exited {proc.returncode}\n"


def take(directory: Path, *, python: str, roots: Sequence[str], touched: Iterable[str], command: str,
         uv: bool = False) -> dict[str, Any]:
    """Copy what `command` will touch (paths inside `roots` only) into `directory`, with the roots' manifest."""
    directory.mkdir(parents=True, exist_ok=False)
    files = directory / "files"
    files.mkdir()
    saved: dict[str, dict[str, Any]] = {}
    for path in sorted({os.path.normpath(p) for p in touched}):
        if under(path, roots):
            _copy_into(path, files, saved)
    record = {"format": FORMAT, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "python": python,
              "command": command, "roots": list(roots), "manifest": manifest(roots), "saved": saved,
              "freeze": _freeze(python, uv)}
    (directory / "snapshot.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return record


def load(directory: Path) -> dict[str, Any]:
    try:
        data = json.loads((directory / "snapshot.json").read_text())
    except (OSError, ValueError) as exc:
        raise SnapshotError(f"{directory}: not a dflash-doctor fix snapshot ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise SnapshotError(f"{directory}: not a dflash-doctor fix snapshot")
    return data


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def restore(directory: Path) -> list[str]:
    """Put the environment back as the snapshot in `directory` found it; returns what still differs."""
    data = load(directory)
    roots: list[str] = data["roots"]
    before: Mapping[str, list[Any]] = data["manifest"]
    saved: Mapping[str, Mapping[str, Any]] = data["saved"]
    files = directory / "files"
    now = manifest(roots)
    # What appeared since: deepest first, so a new directory goes with everything in it.
    for path in sorted((p for p in now if p not in before), key=lambda p: p.count(os.sep), reverse=True):
        if os.path.lexists(path):
            _remove(path)
    for path, entry in sorted(before.items(), key=lambda kv: kv[0].count(os.sep)):
        if entry[0] == "dir" and path not in saved:
            if os.path.lexists(path) and not os.path.isdir(path):
                _remove(path)
            os.makedirs(path, exist_ok=True)
            os.chmod(path, entry[2])
    for path, info in sorted(saved.items(), key=lambda kv: kv[0].count(os.sep)):
        copy = files / path.lstrip(os.sep)
        kind = info["type"]
        current = _entry(path)[0] if os.path.lexists(path) else None
        if kind == "dir":
            if current not in (None, "dir"):
                _remove(path)
            os.makedirs(path, exist_ok=True)
            os.chmod(path, int(info["mode"]))
        elif kind == "link":
            if current is not None:
                _remove(path)
            os.symlink(str(info["target"]), path)
        else:
            if current == "file" and _sha256(path) == info["sha256"]:
                os.chmod(path, int(info["mode"]))
                continue
            if current is not None:
                _remove(path)
            shutil.copy2(copy, path, follow_symlinks=False)
            os.chmod(path, int(info["mode"]))
            os.utime(path, ns=(int(info["mtime_ns"]), int(info["mtime_ns"])))
    return differences(data)


def differences(data: Mapping[str, Any]) -> list[str]:
    """What differs between the environment now and the snapshot (nothing, after a clean restore)."""
    before: Mapping[str, list[Any]] = data["manifest"]
    saved: Mapping[str, Mapping[str, Any]] = data["saved"]
    now = manifest(data["roots"])
    found = [f"{p}: appeared" for p in now if p not in before]
    found += [f"{p}: gone" for p in before if p not in now]
    for path, entry in before.items():
        if path not in now or entry[0] == "dir":
            continue
        info = saved.get(path)
        if info is not None and info["type"] == "file":
            if now[path][0] != "file" or _sha256(path) != info["sha256"]:
                found.append(f"{path}: content differs")
        elif now[path][:2] != entry[:2] or (entry[0] == "file" and now[path][3] != entry[3]):
            found.append(f"{path}: changed, and the snapshot holds no copy of it")
    return sorted(found)


def latest(python: str, root: Path | None = None) -> Path | None:
    """The newest snapshot (the first step's) taken for `python` under `root`."""
    base = root or snapshot_root()
    best: tuple[str, Path] | None = None
    if not base.is_dir():
        return None
    for run_dir in base.iterdir():
        meta = run_dir / "fix.json"
        try:
            data = json.loads(meta.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("python") == python and data.get("steps_taken"):
            key = str(data.get("created", ""))
            if best is None or key > best[0]:
                best = (key, run_dir)
    return best[1] if best else None
