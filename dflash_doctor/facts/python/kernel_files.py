"""Files outside the distributions' own that decide whether the kernel packages load: FlashInfer's JIT cache (the
libraries the serve will load from the user's cache, and the CUDA runtime each was linked against) and the `.pth`
files of the installed distributions (read by Python only in a site directory).

In the doctor's own process, nothing imported: the JIT cache is found as flashinfer/jit/env.py finds it
(knowledge.flashinfer.FLASHINFER_JIT_CACHE), for the installed flashinfer-python's version only (the directory that
version reads); at most MAX_LIBRARIES libraries are read, only regular files, each at most MAX_LIBRARY_BYTES, their
ELF dynamic section alone (facts.elf). A `.pth` is read only inside the environment, at most MAX_PTH_BYTES.
"""

from __future__ import annotations

import glob
import itertools
import os
import stat
from collections.abc import Mapping
from typing import Any, Final

from dflash_doctor.context import Context
from dflash_doctor.facts.elf import ElfError
from dflash_doctor.facts.elf.symbols import dynamic_facts, open_elf
from dflash_doctor.facts.fix.build_env import torch_cuda
from dflash_doctor.facts.python.environment_shapes import Distributions, SysPath, SysPathEntry, Target
from dflash_doctor.facts.python.kernel_files_shapes import KernelFiles
from dflash_doctor.facts.safefile import UnsafeFile, environment_roots, read_regular
from dflash_doctor.facts.shape import Collected, by_section
from dflash_doctor.knowledge.flashinfer import FLASHINFER_JIT_CACHE

__all__ = ["MAX_LIBRARIES", "MAX_LIBRARY_BYTES", "MAX_LISTED", "MAX_PTH_BYTES", "SECTION", "collect", "flashinfer_cache",
           "pth_files"]

SECTION: Final = "kernel_files"
MAX_LIBRARIES: Final = 256
MAX_LISTED: Final = 10_000
MAX_LIBRARY_BYTES: Final = 2 << 30
MAX_PTH_BYTES: Final = 64 * 1024
MAX_PTH_LINES: Final = 64


def collect(ctx: Context, earlier: Mapping[str, object]) -> Collected:
    target = Target.read(earlier.get(Target.SECTION))
    dists = Distributions.read(earlier.get(Distributions.SECTION)) or Distributions()
    sys_path = SysPath.read(earlier.get(SysPath.SECTION)) or SysPath()
    return by_section(KernelFiles.collected({
        "flashinfer_cache": flashinfer_cache(dists, target or Target(), dict(os.environ)),
        "pth_files": pth_files(dists, sys_path, environment_roots(target)),
    }))


def flashinfer_cache(dists: Distributions, target: Target, environ: Mapping[str, str]) -> dict[str, Any] | None:
    """The JIT cache the installed flashinfer-python reads: `$FLASHINFER_WORKSPACE_BASE` (as the target's environment
    has it) or the home directory, then `.cache/flashinfer/<version>/`; None without flashinfer-python."""
    version = dists.version("flashinfer-python")
    if version is None:
        return None
    layout = FLASHINFER_JIT_CACHE.value
    base = target.environ.values.get(layout.base_variable) or environ.get(layout.base_variable)
    base_from = layout.base_variable if base else "HOME"
    if not base:
        base = os.path.expanduser("~")
    directory = os.path.join(base, *layout.relative)
    version_dir = os.path.join(directory, version)
    torch = torch_cuda(dists)
    facts: dict[str, Any] = {"directory": directory, "base_from": base_from, "flashinfer_version": version,
                             "version_dir": version_dir, "exists": os.path.isdir(version_dir),
                             "torch_cuda": torch.get("cuda"), "torch_version": torch.get("version")}
    if not facts["exists"]:
        return facts
    try:
        # listed up to MAX_LISTED names (a cache of every module for every arch holds a few hundred)
        found = sorted(itertools.islice(glob.iglob(os.path.join(glob.escape(version_dir), layout.library_glob)),
                                        MAX_LISTED))
    except OSError as exc:
        return {**facts, "error": f"{version_dir}: {exc.strerror or exc}"}
    libraries: list[dict[str, Any]] = []
    skipped: list[str] = []
    for path in found:
        if len(libraries) >= MAX_LIBRARIES:
            skipped.append(f"{len(found) - len(libraries) - len(skipped)} more libraries: only {MAX_LIBRARIES} read")
            break
        why = _unreadable(path)
        if why:
            skipped.append(f"{path}: {why}")
            continue
        libraries.append(_cached_library(path, layout.runtime_prefix))
    return {**facts, "libraries": libraries, "found": len(found), "skipped": skipped[:20]}


def _unreadable(path: str) -> str | None:
    try:
        info = os.lstat(path)
    except OSError as exc:
        return exc.strerror or str(exc)
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file: never read"
    if info.st_size > MAX_LIBRARY_BYTES:
        return f"{info.st_size} bytes, over {MAX_LIBRARY_BYTES >> 30} GiB: not read"
    return None


def _cached_library(path: str, runtime_prefix: str) -> dict[str, Any]:
    size = os.lstat(path).st_size
    try:
        with open_elf(path) as (elf, mapped):
            needed = dynamic_facts(elf, mapped, path)["needed"]
    except ElfError as exc:
        return {"path": path, "size": size, "cudart": [], "error": exc.message}
    return {"path": path, "size": size, "cudart": [n for n in needed if n.startswith(runtime_prefix)]}


def pth_files(dists: Distributions, sys_path: SysPath, roots: list[str] | None) -> list[dict[str, Any]]:
    """Each `.pth` a distribution's RECORD lists at its top, with whether site read it and what its lines name."""
    entries = {os.path.realpath(e.path or "."): e for e in sys_path.entries}
    on_path = set(entries)
    found = []
    for dist in dists.items:
        for name in dist.top_levels:
            if not name.endswith(".pth") or "/" in name:
                continue
            entry = entries.get(os.path.realpath(dist.location or "."))
            if entry is None:
                continue  # not on sys.path: nothing of it is importable, whatever its .pth says
            found.append(_pth_file(dist.name, dist.version, dist.location, name, entry, on_path, roots))
    return found


def _processed(entry: SysPathEntry) -> bool:
    return entry.site_dir if entry.site_dir is not None else entry.kind in ("site", "user-site")


def _pth_file(dist: str, version: str | None, location: str, name: str, entry: SysPathEntry, on_path: set[str],
              roots: list[str] | None) -> dict[str, Any]:
    file = os.path.join(location, name)
    facts: dict[str, Any] = {"distribution": dist, "version": version, "location": location, "name": name,
                             "file": file, "processed": _processed(entry), "location_kind": entry.kind}
    try:
        text = read_regular(file, MAX_PTH_BYTES + 1, roots)
    except UnsafeFile as exc:
        return {**facts, "error": exc.reason}
    except OSError as exc:
        return {**facts, "error": exc.strerror or str(exc)}
    if len(text) > MAX_PTH_BYTES:
        return {**facts, "error": f"larger than {MAX_PTH_BYTES >> 10} KiB: not read"}
    lines: list[dict[str, Any]] = []
    # As site.addpackage reads it: '#' comments and blank lines skipped, 'import' lines run, the others joined to
    # the directory and added when they exist.
    for number, raw in enumerate(text.decode("utf-8", "replace").splitlines(), 1):
        line = raw.rstrip()
        if not line.strip() or line.startswith("#"):
            continue
        if len(lines) >= MAX_PTH_LINES:
            break
        if line.startswith(("import ", "import\t")):
            lines.append({"line": number, "text": line[:300]})
            continue
        path = os.path.join(location, line)
        lines.append({"line": number, "text": line[:300], "path": path, "exists": os.path.isdir(path),
                      "on_sys_path": os.path.realpath(path) in on_path})
    return {**facts, "lines": lines}
