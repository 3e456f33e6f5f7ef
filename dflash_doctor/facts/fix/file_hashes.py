"""The sha256 of every file a distribution installed, as its RECORD lists them (for the golden baseline).

The `file_hashes` fact section (facts.fix.baseline collects it with `collect`; `baseline save` adds it with
`with_file_hashes`), which the baseline check judges and the report saves (under the baseline's result), so that `judge REPORT.json --baseline FILE` compares
the hashes the run read, not the files as they are later. Only regular files that resolve inside the
environment are read, never anything under /dev, /proc or /sys; a RECORD is read up to `MAX_RECORD_BYTES`.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor

from dflash_doctor.facts.fix.baseline_shapes import FileHashes
from dflash_doctor.facts.python.envfacts import canonical
from dflash_doctor.facts.python.environment_shapes import Distribution, Distributions, Target
from dflash_doctor.facts.safefile import UnsafeFile, environment_roots, open_regular, read_regular

__all__ = ["MAX_RECORD_BYTES", "OWN", "SECTION", "collect", "files_digest", "first_of_each_name", "hash_files",
           "with_file_hashes"]

SECTION = "file_hashes"
OWN = "dflash-doctor"  # the doctor itself is not part of the environment it judges

_SKIP_SUFFIXES = (".pyc",)
_SIGNATURES = ("RECORD", "RECORD.jws", "RECORD.p7s")
MAX_RECORD_BYTES = 64 << 20


def _sha256(path: str, roots: list[str] | None) -> str | None:
    """"sha256=..." of a regular file inside the environment; None when it is missing; "not hashed: ..." for
    a file that is not opened (a FIFO, a device, a path that resolves outside the environment)."""
    digest = hashlib.sha256()
    try:
        with open_regular(path, roots) as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except UnsafeFile as exc:
        return f"not hashed: {exc.reason}"
    except OSError:
        return None
    return "sha256=" + base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()


def _record_paths(dist_info: str, roots: list[str] | None) -> list[str] | None:
    try:
        text = read_regular(os.path.join(dist_info, "RECORD"), MAX_RECORD_BYTES + 1, roots).decode("utf-8")
        if len(text) > MAX_RECORD_BYTES:
            return None
        rows = list(csv.reader(io.StringIO(text)))
    except (OSError, UnicodeDecodeError, csv.Error):
        return None
    paths = []
    for row in rows:
        if not row:
            continue
        rel = row[0]
        name = rel.rsplit("/", 1)[-1]
        if rel.endswith(_SKIP_SUFFIXES) or "__pycache__/" in rel or (name in _SIGNATURES and ".dist-info/" in rel):
            continue
        paths.append(rel)
    return paths


def hash_files(dists: Iterable[Distribution], workers: int | None = None,
               roots: list[str] | None = None) -> dict[str, dict[str, str | None] | None]:
    """{canonical name: {RECORD path: "sha256=...", None (missing) or "not hashed: why"}} for each
    distribution; None where the distribution has no readable RECORD. Hashing runs on threads (hashlib
    releases the GIL). `roots`: the environment's directories (target.environment_roots); only regular files
    that resolve inside them are read, never anything under /dev, /proc or /sys."""
    jobs: list[tuple[str, str, str]] = []
    out: dict[str, dict[str, str | None] | None] = {}
    for dist in dists:
        name = canonical(dist.name)
        paths = _record_paths(dist.dist_info, roots) if dist.dist_info else None
        if paths is None:
            out[name] = None
            continue
        out[name] = {}
        jobs += [(name, rel, os.path.join(dist.location, rel)) for rel in paths]
    with ThreadPoolExecutor(max_workers=workers or min(8, (os.cpu_count() or 2) * 2)) as pool:
        for (name, rel, _), value in zip(jobs, pool.map(lambda job: _sha256(job[2], roots), jobs)):
            files = out[name]
            assert files is not None
            files[rel] = value
    return out


def files_digest(files: Mapping[str, str | None]) -> str:
    text = "\n".join(f"{path}\t{value}" for path, value in sorted(files.items()))
    return "sha256=" + hashlib.sha256(text.encode()).hexdigest()


def first_of_each_name(sections: Mapping[str, object]) -> dict[str, Distribution] | None:
    """{canonical name: distribution} of the first distribution of each name on sys.path (the one
    importlib.metadata sees), the doctor's own left out; None when the distributions were not collected."""
    dists = Distributions.read(sections.get(Distributions.SECTION))
    if dists is None:
        return None
    first = _first_named(dists.items)
    first.pop(OWN, None)
    return first


def _first_named(items: Iterable[Distribution]) -> dict[str, Distribution]:
    first: dict[str, Distribution] = {}
    for item in items:
        if item.name:
            first.setdefault(canonical(item.name), item)
    return first


def collect(sections: Mapping[str, object], names: Iterable[str]) -> FileHashes:
    """The `file_hashes` section: for each of `names` installed, {"files": {RECORD path: hash} or None (no
    readable RECORD), "files_digest": ...}."""
    wanted = sorted({canonical(n) for n in names})
    first = first_of_each_name(sections) or {}
    roots = environment_roots(Target.read(sections.get(Target.SECTION)))
    chosen = [first[n] for n in wanted if n in first]
    hashed = hash_files(chosen, roots=roots) if chosen else {}
    return FileHashes.collected({"requested": wanted, "distributions": {
        name: {"files": files, "files_digest": None if files is None else files_digest(files)}
        for name, files in sorted(hashed.items())}})


def with_file_hashes(sections: Mapping[str, object], names: Iterable[str]) -> dict[str, object]:
    """`sections` with the `file_hashes` section of `names` collected now."""
    return {**sections, FileHashes.SECTION: collect(sections, names)}
