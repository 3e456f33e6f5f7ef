"""Static facts about the stack's compiled libraries, read from their ELF files in the doctor's own process.

For each library that matters (below): the GPU architectures its fatbin carries as SASS and PTX, the
GLIBC/GLIBCXX/CXXABI versions it requires, and the libtorch/libc10 symbols it needs that the installed torch
does not export. Plus what the machine's C and C++ runtimes provide to the target interpreter, and the
`--target-arch` list, recorded here so that `judge` on a saved report sees what the run was asked.

Nothing is imported or loaded, and it is fast: on the H200 machine, torch 2.11.0+cu130's CUDA libraries
(libtorch_cuda.so is 1 GB) read in 0.65 s on a fresh machine and 0.33 s warm, a third of it torch's exported
symbols (cached in memory by path, mtime and size); vLLM 0.24.0 with torch 2.8.0+cu128, 13 libraries, reads
in 0.4-1.0 s warm on a 2-core CI-sized machine (4 s from a cold disk).

Which libraries are scanned (a decision, kept here):
- the flash-attention family, vllm and flashinfer-python: every extension module and shared library they
  install. Their kernels are built outside PyTorch's release process, and flash-attn's release wheels are
  plain `linux_x86_64` builds, not audited against a manylinux glibc (the GLIBC_2.32 trap).
- torch: `torch/lib/libtorch_cuda*.so` only, which hold all of torch's own CUDA kernels. torch's other
  libraries carry no device code, their runtime needs are those of a manylinux wheel, and the imports layer
  loads them for real. cuBLAS, cuDNN, NCCL and the rest are separate nvidia-* distributions, outside the
  stack list. Adding them costs little (all 45 of torch 2.11's read in 2.0 s on a fresh H200 machine), but
  wants care first: cuFFT's fatbin lists only sm_75 cubins, so its kernels live elsewhere.
- the rest of the stack (triton, transformers, nvidia-ml-py): no CUDA device code (Triton compiles its
  kernels at run time).
Vendored copies under `<name>.libs/` (auditwheel) are skipped: they are other projects' libraries.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final

from dflash_doctor.context import Context
from dflash_doctor.facts.elf import ElfError, exported_symbols, machine_runtime_versions, scan_library
from dflash_doctor.facts.fix.build_env import read_torch_cuda
from dflash_doctor.facts.gpu.archs_shapes import ArchCoverage
from dflash_doctor.facts.python.envfacts import canonical
from dflash_doctor.facts.python.environment_shapes import Distributions, Target
from dflash_doctor.facts.python.imports import extension_jobs
from dflash_doctor.facts.safefile import environment_roots, refusal
from dflash_doctor.facts.shape import Collected, by_section
from dflash_doctor.knowledge.archs import parse_target_archs
from dflash_doctor.knowledge.stack import FLASH_ATTN_FAMILY

__all__ = ["SECTION", "collect", "demangle"]

SECTION: Final = "arch_coverage"

FULLY_SCANNED: Final = (*FLASH_ATTN_FAMILY.value, "vllm", "flashinfer-python")
TORCH_SCANNED: Final = ("torch/lib/libtorch_cuda*.so*",)
# The libraries whose exports an extension's torch symbols resolve against (what the loader searches).
TORCH_EXPORTERS: Final = ("libtorch*.so*", "libc10*.so*")

MAX_MISSING: Final = 20
MAX_SKIPPED_SHOWN: Final = 20
MAX_PROBLEMS: Final = 5
# The scans are mostly Python holding the GIL; threads overlap only pyelftools' file reads (a cold page cache).
# Warm, 1 to 8 workers measured the same within noise on vLLM 0.24 + torch 2.8 (0.4-1.0 s).
SCAN_WORKERS: Final = max(2, min(4, os.cpu_count() or 2))
DEMANGLE_TIMEOUT_S: Final = 10.0

_exports_cache: dict[tuple[str, int, int], frozenset[str]] = {}
_exports_lock = threading.Lock()


def collect(ctx: Context, earlier: Mapping[str, object]) -> Collected:
    started = time.perf_counter()
    facts: dict[str, Any] = {"no_gpu": ctx.no_gpu, **_target_archs(ctx.target_archs)}
    target = Target.read(earlier.get(Target.SECTION))
    dists = Distributions.read(earlier.get(Distributions.SECTION)) or Distributions()

    runtime_started = time.perf_counter()
    facts["host"] = machine_runtime_versions((target.executable if target is not None else "") or None)
    facts["host"]["seconds"] = round(time.perf_counter() - runtime_started, 4)

    with ThreadPoolExecutor(max_workers=SCAN_WORKERS) as pool:
        torch_facts, exports = _torch(dists, pool, environment_roots(target))
        facts["torch"] = torch_facts
        jobs, skipped = _jobs(dists, _python_tag(target), environment_roots(target))
        jobs += _import_system_jobs(earlier)
        libraries = list(pool.map(lambda job: _scan(job, exports), jobs))
    facts["libraries"] = libraries
    facts["skipped"] = skipped[:MAX_SKIPPED_SHOWN]
    facts["skipped_total"] = len(skipped)
    facts["demangled"] = demangle(sorted({s for lib in libraries for s in lib.get("missing") or ()}))
    facts["workers"] = SCAN_WORKERS
    facts["seconds"] = round(time.perf_counter() - started, 4)
    return by_section(ArchCoverage.collected(facts))


def _target_archs(given: Iterable[str]) -> dict[str, Any]:
    given = [g for g in given if g.strip()]
    facts: dict[str, Any] = {"target_archs_given": list(given), "target_archs": [], "target_archs_error": None}
    if given:
        try:
            facts["target_archs"] = [f"sm_{major}{minor}" for major, minor in parse_target_archs(",".join(given))]
        except ValueError as exc:
            facts["target_archs_error"] = str(exc)
    return facts


# ---------------------------------------------------------------------------------------------------------
# torch: its version, CUDA build, and the symbols its libraries export
# ---------------------------------------------------------------------------------------------------------


def _torch(dists: Distributions, pool: ThreadPoolExecutor,
           roots: list[str] | None) -> tuple[dict[str, Any] | None, set[str] | None]:
    dist = dists.get("torch")
    if dist is None:
        return None, None
    started = time.perf_counter()
    lib_dir = Path(dist.location) / "torch" / "lib"
    listing_error: str | None = None
    try:
        names = sorted(os.listdir(lib_dir))
    except OSError as exc:
        names, listing_error = [], f"{lib_dir}: {exc.strerror or exc}"
    exporters = [lib_dir / n for n in names if any(fnmatch.fnmatch(n, p) for p in TORCH_EXPORTERS)]
    refused = [why for why in (refusal(str(path), roots) for path in exporters) if why]
    exporters = [path for path in exporters if refusal(str(path), roots) is None]
    results = list(pool.map(_cached_exports, exporters))
    errors = [error for _symbols, error in results if error] + ([listing_error] if listing_error else []) + refused
    exports: set[str] | None = None
    if exporters and not errors:
        exports = set().union(*(symbols for symbols, _error in results))
    return {
        "version": dist.version,
        "location": dist.location,
        **_torch_cuda(Path(dist.location) / "torch" / "version.py", roots),
        "exporters": [str(p.relative_to(dist.location)) for p in exporters],
        # None when torch's libraries could not all be read: then no symbol is called missing.
        "exports": None if exports is None else len(exports),
        "errors": errors,
        "seconds": round(time.perf_counter() - started, 4),
    }, exports


def _cached_exports(path: Path) -> tuple[frozenset[str], str | None]:
    try:
        info = path.stat()
    except OSError as exc:
        return frozenset(), f"{path}: {exc.strerror or exc}"
    key = (str(path), info.st_mtime_ns, info.st_size)
    with _exports_lock:
        cached = _exports_cache.get(key)
    if cached is not None:
        return cached, None
    try:
        symbols = frozenset(exported_symbols(path))
    except ElfError as exc:
        return frozenset(), str(exc)
    with _exports_lock:
        _exports_cache[key] = symbols
    return symbols, None


def _torch_cuda(version_py: Path, roots: list[str] | None) -> dict[str, Any]:
    """torch.version.cuda, read from torch/version.py (generated at build time) without importing torch:
    {"cuda": "12.8" | None, "cpu_build": False | True | None (version.py unreadable)}."""
    try:
        found, cuda = read_torch_cuda(version_py, 1 << 20, roots)
    except OSError:
        return {"cuda": None, "cpu_build": None}
    if not found:
        return {"cuda": None, "cpu_build": None}
    return {"cuda": cuda or None, "cpu_build": not cuda}


# ---------------------------------------------------------------------------------------------------------
# The libraries
# ---------------------------------------------------------------------------------------------------------


_CPYTHON_TAG: Final = re.compile(r"\.cpython-(\d{2,3})[a-z]*-")


def _python_tag(target: Target | None) -> str | None:
    """"311" for a CPython 3.11 target: extension files tagged for another version are never loaded."""
    if target is None:
        return None
    parts = target.python_version.split(".")
    return parts[0] + parts[1] if len(parts) >= 2 and target.implementation == "CPython" else None


def _torch_requirement(requires: Iterable[str]) -> str | None:
    for requirement in requires:
        match = re.match(r"\s*torch\b\s*([^;]*)", requirement)
        if match and not requirement.strip().startswith(("torchvision", "torchaudio", "torch-", "torch_")):
            return ("torch" + match.group(1)).replace(" ", "").replace("(", "").replace(")", "")
    return None


def _jobs(dists: Distributions, python_tag: str | None,
          roots: list[str] | None) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    jobs: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    for dist in dists.seen():
        name = canonical(dist.name)
        if name != "torch" and name not in FULLY_SCANNED:
            continue
        if not dist.record.present:  # the probe lists a stack distribution's compiled files from its RECORD
            skipped.append({"distribution": dist.name, "path": dist.location,
                            "why": "no RECORD: its files are not known"})
            continue
        items: list[tuple[str, str | None]] = [(e.path, e.module) for e in dist.extensions]
        items += [(path, None) for path in dist.libraries]
        torch_requirement = _torch_requirement(dist.requires)
        for rel, module in items:
            top = rel.split("/", 1)[0]
            if top.endswith(".libs"):
                continue  # auditwheel's vendored copies of other projects' libraries
            if name == "torch" and not any(fnmatch.fnmatch(rel, p) for p in TORCH_SCANNED):
                continue
            tag = _CPYTHON_TAG.search(rel.rsplit("/", 1)[-1])
            if tag and python_tag and tag.group(1) != python_tag:
                # vLLM ships deep_gemm's _C for five Pythons; only the target's own is ever loaded.
                skipped.append({"distribution": dist.name, "path": rel,
                                "why": f"built for CPython {tag.group(1)}, the target is {python_tag}"})
                continue
            refused = refusal(os.path.join(dist.location, rel), roots)
            if refused:
                # The environment probe leaves such RECORD lines out (and reports them); a report judged
                # again on another machine may still name them.
                skipped.append({"distribution": dist.name, "path": rel, "why": refused})
                continue
            jobs.append({
                "distribution": dist.name,
                "canonical": name,
                "version": dist.version,
                "location": dist.location,
                "path": rel,
                "kind": "extension" if module else "library",
                "module": module,
                "requires_torch": torch_requirement,
                "found_by": "record",
            })
    return jobs, skipped


def _import_system_jobs(earlier: Mapping[str, object]) -> list[dict[str, Any]]:
    """The stack's extension modules only the import system finds (no RECORD lists them)."""
    dists = Distributions.read(earlier.get(Distributions.SECTION)) or Distributions()
    jobs = []
    for job in extension_jobs(earlier):
        if job["found_by"] != "import-system" or job["refused"]:
            continue  # a refused file is reported by the extensions check
        owner = dists.get(job["canonical"]) if job["canonical"] else None
        jobs.append({
            "distribution": job["distribution"],
            "canonical": job["canonical"],
            "version": job["version"],
            "location": os.path.dirname(job["path"]),
            "path": os.path.basename(job["path"]),
            "kind": "extension",
            "module": job["module"],
            "requires_torch": _torch_requirement(owner.requires) if owner else None,
            "found_by": "import-system",
        })
    return jobs


def _scan(job: Mapping[str, Any], exports: set[str] | None) -> dict[str, Any]:
    full = os.path.normpath(os.path.join(job["location"], job["path"]))
    started = time.perf_counter()
    facts = scan_library(full, exports)
    seconds = time.perf_counter() - started
    try:
        size: int | None = os.stat(full).st_size
    except OSError:
        size = None
    fatbin = facts["fatbin"]
    if fatbin is not None:
        fatbin = {key: fatbin[key] for key in ("section", "sass", "ptx", "lto", "other", "ptx_isa", "entries",
                                                "compressed")} | {"problems": fatbin["problems"][:MAX_PROBLEMS]}
    return {
        **{key: job[key] for key in ("distribution", "canonical", "version", "path", "kind", "module",
                                     "requires_torch", "found_by")},
        "file": full,
        "size": size,
        "seconds": round(seconds, 4),
        "fatbin": fatbin,
        "needs_versions": facts["needs_versions"],
        "needed": facts["needed"],
        "undefined_total": facts["undefined_total"],
        "missing": None if facts["missing"] is None else facts["missing"][:MAX_MISSING],
        "missing_total": facts["missing_total"],
        "error": facts["error"],
    }


def demangle(symbols: list[str]) -> dict[str, str]:
    """Itanium C++ names made readable with `c++filt` when it is installed; {} otherwise."""
    tool = shutil.which("c++filt")
    if not symbols or tool is None:
        return {}
    try:
        out = subprocess.run([tool], input="\n".join(symbols) + "\n", capture_output=True, text=True,
                             timeout=DEMANGLE_TIMEOUT_S, check=False).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return {}
    if len(out) != len(symbols):
        return {}
    return {raw: readable for raw, readable in zip(symbols, out) if readable and readable != raw}
