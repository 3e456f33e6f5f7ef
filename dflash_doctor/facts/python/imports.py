"""Real imports in the target interpreter, each in its own process with a timeout.

Each import runs as a forked child of the run's one target process that imported torch once
(`ctx.target_process`), all of them at once (it runs as many as there are cores); without that process,
each starts an interpreter of its own."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from dflash_doctor.context import Context
from dflash_doctor.facts.probes import ProbeJob, ProbeOutcome, documents, run_probe
from dflash_doctor.facts.python.envfacts import canonical
from dflash_doctor.facts.python.environment_shapes import Distributions, SysPath, Target
from dflash_doctor.facts.python.imports_shapes import Extensions, RotaryImport, SurfaceImports
from dflash_doctor.facts.python.vllm_source_shapes import VllmSurface
from dflash_doctor.facts.safefile import environment_roots, refusal
from dflash_doctor.facts.shape import Collected, by_section
from dflash_doctor.knowledge.stack import STACK_EXTENSION_MODULES
from dflash_doctor.shape import frozen_dataclass

ROTARY_MODULE = "flash_attn.ops.triton.rotary"
ROTARY_NAMES = ("apply_rotary",)
# Without a shared target process: interpreters started at once, each loading torch (seconds of CPU), on CI
# machines of two cores.
PARALLEL_IMPORTS = 4
REPORT_MODULES = ["flash_attn", "flash_attn_2_cuda", "torch", "triton", "vllm", "flashinfer"]


@frozen_dataclass(frozen=True)
class ImportJob:
    module: str
    names: Sequence[str] = ()
    preload: Sequence[str] = ()
    file: str | None = None
    roots: Sequence[str] | None = None
    """The directories the file must resolve into (checked again in the process that would load it)."""


def _spec(job: ImportJob) -> dict[str, Any]:
    return {"module": job.module, "names": list(job.names), "preload": list(job.preload), "file": job.file,
            "roots": list(job.roots) if job.roots is not None else None}


def _run(ctx: Context, probes: Sequence[ProbeJob]) -> list[ProbeOutcome]:
    if ctx.target_process is not None:
        futures = [ctx.target_process.submit(probe) for probe in probes]
        return [future.result() for future in futures]
    with ThreadPoolExecutor(max_workers=PARALLEL_IMPORTS) as pool:
        return list(pool.map(
            lambda p: run_probe(ctx.python, p.probe, p.args, timeout_s=ctx.timeout_s, cwd=ctx.cwd), probes))


def try_imports(ctx: Context, jobs: Sequence[ImportJob]) -> list[dict[str, Any]]:
    """Each import's facts, in the order given, each import in a process of its own."""
    probes = [ProbeJob(job.module, "try_import", {**_spec(job), "report_modules": REPORT_MODULES}) for job in jobs]
    return [_import_facts(job, outcome, outcome.data) for job, outcome in zip(jobs, _run(ctx, probes))]


def try_import_batches(ctx: Context, batches: Sequence[Sequence[ImportJob]]) -> list[dict[str, Any]]:
    """Each import's facts, in the order given (batch after batch), the imports of one batch one after
    another in one process.

    The imports vLLM makes from one package mostly fail or succeed together, and a process per import
    statement (over a hundred for vLLM's import surface) costs more than the imports. A batch reports
    each import as it completes: when its process crashes or hangs, the import in flight gets that
    outcome as its own, and those after it run again, each in a process of its own."""
    probes = [ProbeJob(batch[0].module, "try_import",
                       {"imports": [_spec(job) for job in batch], "report_modules": REPORT_MODULES})
              for batch in batches]
    results: list[dict[str, Any] | None] = []
    again: list[tuple[int, ImportJob]] = []
    for batch, outcome in zip(batches, _run(ctx, probes)):
        reported = {d.get("index"): d for d in documents(outcome.stdout) if isinstance(d, dict)}
        for index, job in enumerate(batch):
            if index in reported:
                facts = _import_facts(job, outcome, reported[index])
                facts["process"]["batch"] = len(batch)
                results.append(facts)
            elif index == len(reported):
                results.append(_import_facts(job, outcome, None))  # the import in flight when it ended
            else:
                again.append((len(results), job))
                results.append(None)
    for (slot, _), facts in zip(again, try_imports(ctx, [job for _, job in again])):
        results[slot] = facts
    return [facts for facts in results if facts is not None]


def try_import(
    ctx: Context, module: str, names: Sequence[str] = (), preload: Sequence[str] = (), file: str | None = None,
    roots: Sequence[str] | None = None,
) -> dict[str, Any]:
    return try_imports(ctx, [ImportJob(module, names, preload, file, roots)])[0]


def _import_facts(job: ImportJob, outcome: ProbeOutcome, data: Any) -> dict[str, Any]:
    """The import's facts: what the probe reported for it (`data`), and how its process went; an outcome
    without facts (a crash, a hang) is a failed import with that evidence."""
    process = outcome.as_facts()
    if data is not None and not outcome.ok:
        # This import's facts arrived; its batch ended badly later, on another import.
        process.update(returncode=None, signal=None, timed_out=False, error=None)
    facts: dict[str, Any] = {"module": job.module, "names": list(job.names), "process": process}
    if isinstance(data, dict):
        facts.update(data)
        facts.pop("index", None)
    else:
        facts["ok"] = False
    return facts


def _roots(earlier: Mapping[str, object]) -> tuple[str, ...] | None:
    """The environment's roots (target.environment_roots): no extension module that resolves outside them is
    loaded by an import the doctor makes."""
    roots = environment_roots(Target.read(earlier.get(Target.SECTION)))
    return tuple(roots) if roots is not None else None


def collect_rotary(ctx: Context, earlier: Mapping[str, object]) -> Collected:
    """`from flash_attn.ops.triton.rotary import apply_rotary`, exactly as vLLM's ApplyRotaryEmb does it."""
    return by_section(RotaryImport.collected(try_import(ctx, ROTARY_MODULE, ROTARY_NAMES, roots=_roots(earlier))))


def collect_surface(ctx: Context, earlier: Mapping[str, object]) -> Collected:
    """Each distinct module the installed vLLM imports from an external kernel package."""
    source = VllmSurface.read(earlier.get(VllmSurface.SECTION)) or VllmSurface()
    wanted = sorted({(site.module, tuple(site.names)) for site in source.sites})
    # One process a package, so that what one package's import leaves behind never meets another's; the packages
    # that are nowhere on the target's path share one (their imports end at the finder: vLLM's surface names a dozen
    # optional kernel packages, and a process forked from the target costs more than that).
    absent = _absent_packages({module.split(".", 1)[0] for module, _ in wanted}, earlier)
    by_package: dict[str, list[ImportJob]] = {}
    roots = _roots(earlier)
    for module, names in wanted:
        package = module.split(".", 1)[0]
        by_package.setdefault("" if package in absent else package, []).append(ImportJob(module, names, roots=roots))
    tried = try_import_batches(ctx, list(by_package.values()))
    order = {spec: index for index, spec in enumerate(wanted)}
    tried.sort(key=lambda facts: order.get((facts["module"], tuple(facts["names"])), len(order)))
    return by_section(SurfaceImports.collected({"imports": tried}))


MAX_PATH_LISTING = 100_000
"""Names read from the target's sys.path directories to tell a package that is nowhere (`_absent_packages`)."""


def _absent_packages(packages: set[str], earlier: Mapping[str, object]) -> set[str]:
    """The top-level names in `packages` that nothing on the target's path provides: no distribution's RECORD lists
    them and no sys.path directory holds a file or directory of that name. None is called absent (an empty set) where
    that cannot be told: the distributions or sys.path unread, a distribution without a RECORD (an .egg-info, an
    .egg) or installed editable (its files are found by a finder, not on sys.path), or a directory too large to list."""
    dists = Distributions.read(earlier.get(Distributions.SECTION))
    path = SysPath.read(earlier.get(SysPath.SECTION))
    if dists is None or path is None or any(not d.record.present or d.editable for d in dists.seen()):
        return set()
    listed = {top.split(".", 1)[0] for dist in dists.seen() for top in dist.top_levels}
    on_path: set[str] = set()
    for entry in path.entries:
        if not entry.exists or not os.path.isdir(entry.path):
            if entry.exists:
                return set()  # a zip file on sys.path: its names are not listed here
            continue
        try:
            with os.scandir(entry.path) as names:
                for count, name in enumerate(names):
                    if count >= MAX_PATH_LISTING:
                        return set()
                    on_path.add(name.name.split(".", 1)[0])
        except OSError:
            return set()
    return {p for p in packages if p not in listed and p not in on_path}


def extension_jobs(earlier: Mapping[str, object]) -> list[dict[str, Any]]:
    """The stack's extension modules to judge: those RECORD lists, and those only the import system finds
    (labelled found_by "import-system"), each with the reason it will not be opened, if any."""
    dists = Distributions.read(earlier.get(Distributions.SECTION)) or Distributions()
    roots = environment_roots(Target.read(earlier.get(Target.SECTION)))
    jobs: list[dict[str, Any]] = []
    for dist in dists.seen():
        for ext in dist.extensions:
            path = os.path.join(dist.location, ext.path)
            jobs.append({"distribution": dist.name, "version": dist.version, "canonical": canonical(dist.name),
                         "module": ext.module, "path": path, "found_by": "record",
                         "abi_tag": ext.abi_tag, "refused": refusal(path, roots)})
    # RECORD lines that resolve outside the environment (escapes), by the path as written: a symlink RECORD lists
    # that leaves the environment is one, and the import system finds it by its name.
    escaped: dict[str, dict[str, Any]] = {}
    for dist in dists.seen():
        for line in dist.record.escapes:
            escaped[os.path.normpath(os.path.join(dist.location, line.path))] = {
                "record": dist.record.file, "line": line.line}
    for found in dists.import_extensions.found:
        owner_name = STACK_EXTENSION_MODULES.value.get(found.module)
        owner = dists.get(owner_name) if owner_name else None
        # What `import name` itself would load, resolved (a symlink in site-packages named like the extension):
        # loaded only when it lies inside the environment's roots (an editable install's project is one).
        jobs.append({"distribution": owner.name if owner else (owner_name or found.module),
                     "version": owner.version if owner else None, "canonical": owner_name,
                     "module": found.module, "path": found.path, "found_by": "import-system",
                     "finder": found.finder, "shadows": found.shadows,
                     "record_line": escaped.get(os.path.normpath(found.path)),
                     "refused": refusal(found.path, roots)})
    return jobs


def collect_extensions(ctx: Context, earlier: Mapping[str, object]) -> Collected:
    """Load each compiled extension module of the stack on its own, after torch (whose libraries they link)."""
    dists = Distributions.read(earlier.get(Distributions.SECTION)) or Distributions()
    jobs = [job for job in extension_jobs(earlier) if job["canonical"] != "torch"]
    # `import torch` itself is the preload; its own extensions load with it
    # A file named for another interpreter's ABI: this one's import system never looks at it, so loading it
    # by hand would test something no import does.
    other_python = [{"module": job["module"], "distribution": job["distribution"], "path": job["path"],
                     "abi_tag": job["abi_tag"], "ok": False, "loaded": False} for job in jobs if job.get("abi_tag")]
    jobs = [job for job in jobs if not job.get("abi_tag")]
    has_torch = dists.get("torch") is not None
    roots = _roots(earlier)

    preload = ("torch",) if has_torch else ()
    loadable = [job for job in jobs if not job["refused"]]
    loaded = try_imports(ctx, [ImportJob(job["module"], preload=preload, file=job["path"], roots=roots)
                               for job in loadable])
    facts_in_order = iter(loaded)
    results = []
    for job in jobs:
        label = {k: job[k] for k in ("distribution", "path", "found_by") if job.get(k) is not None}
        label.update({k: job[k] for k in ("finder", "shadows", "record_line") if job.get(k)})
        if job["refused"]:
            results.append({"module": job["module"], "ok": False, "refused": job["refused"], **label})
        else:
            results.append({**next(facts_in_order), **label})
    return by_section(Extensions.collected({"torch_installed": has_torch, "items": results + other_python}))
