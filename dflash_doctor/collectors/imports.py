"""Real imports in the target interpreter, each in its own subprocess with a timeout."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from dflash_doctor.check import Context
from dflash_doctor.envfacts import Distributions
from dflash_doctor.knowledge.stack import STACK_EXTENSION_MODULES
from dflash_doctor.probe import run_probe
from dflash_doctor.safefile import environment_roots, refusal

ROTARY_MODULE = "flash_attn.ops.triton.rotary"
ROTARY_NAMES = ("apply_rotary",)
# Imports started at once: each may load torch (seconds of CPU), and CI machines have two cores.
PARALLEL_IMPORTS = 4


def try_import(
    ctx: Context, module: str, names: Sequence[str] = (), preload: Sequence[str] = (), file: str | None = None,
    roots: Sequence[str] | None = None,
) -> dict[str, Any]:
    args = {"module": module, "names": list(names), "preload": list(preload), "file": file, "roots": roots,
            "report_modules": ["flash_attn", "flash_attn_2_cuda", "torch", "triton", "vllm", "flashinfer"]}
    outcome = run_probe(ctx.python, "try_import", args, timeout_s=ctx.timeout_s, cwd=ctx.cwd)
    facts: dict[str, Any] = {"module": module, "names": list(names), "process": outcome.as_facts()}
    if outcome.data is not None:
        facts.update(outcome.data)
    else:
        facts["ok"] = False
    return facts


def collect_rotary(ctx: Context, _earlier: Mapping[str, Any]) -> dict[str, Any]:
    """`from flash_attn.ops.triton.rotary import apply_rotary`, exactly as vLLM's ApplyRotaryEmb does it."""
    return {"rotary_import": try_import(ctx, ROTARY_MODULE, ROTARY_NAMES)}


def collect_surface(ctx: Context, earlier: Mapping[str, Any]) -> dict[str, Any]:
    """Each distinct module the installed vLLM imports from an external kernel package."""
    source = earlier.get("vllm_surface") or {}
    wanted = sorted({(s["module"], tuple(s["names"])) for s in source.get("sites") or []})
    with ThreadPoolExecutor(max_workers=PARALLEL_IMPORTS) as pool:
        results = list(pool.map(lambda mn: try_import(ctx, mn[0], mn[1]), wanted))
    return {"surface_imports": {"imports": results}}


def extension_jobs(earlier: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The stack's extension modules to judge: those RECORD lists, and those only the import system finds
    (labelled found_by "import-system"), each with the reason it will not be opened, if any."""
    dists = Distributions(earlier.get("distributions") or {})
    roots = environment_roots(earlier.get("target"))
    jobs: list[dict[str, Any]] = []
    for dist in dists:
        for ext in dist.facts.get("extensions") or []:
            path = os.path.join(dist.location, ext["path"])
            jobs.append({"distribution": dist.name, "version": dist.version, "canonical": dist.canonical,
                         "module": ext["module"], "path": path, "found_by": "record",
                         "abi_tag": ext.get("abi_tag"), "refused": refusal(path, roots)})
    for found in (earlier.get("distributions") or {}).get("import_extensions", {}).get("found") or []:
        owner_name = STACK_EXTENSION_MODULES.value.get(found["module"])
        owner = dists.get(owner_name) if owner_name else None
        # What `import name` itself would load, wherever the import system found it (an editable finder may
        # point into a source tree): only the file kind and /dev, /proc, /sys decide.
        jobs.append({"distribution": owner.name if owner else (owner_name or found["module"]),
                     "version": owner.version if owner else None, "canonical": owner_name,
                     "module": found["module"], "path": found["path"], "found_by": "import-system",
                     "finder": found.get("finder"), "shadows": found.get("shadows"),
                     "refused": refusal(found["path"])})
    return jobs


def collect_extensions(ctx: Context, earlier: Mapping[str, Any]) -> dict[str, Any]:
    """Load each compiled extension module of the stack on its own, after torch (whose libraries they link)."""
    dists = Distributions(earlier.get("distributions") or {})
    jobs = [job for job in extension_jobs(earlier) if job["canonical"] != "torch"]
    # `import torch` itself is the preload; its own extensions load with it
    # A file named for another interpreter's ABI: this one's import system never looks at it, so loading it
    # by hand would test something no import does.
    other_python = [{"module": job["module"], "distribution": job["distribution"], "path": job["path"],
                     "abi_tag": job["abi_tag"], "ok": False, "loaded": False} for job in jobs if job.get("abi_tag")]
    jobs = [job for job in jobs if not job.get("abi_tag")]
    has_torch = dists.get("torch") is not None
    roots = environment_roots(earlier.get("target"))

    def load(job: dict[str, Any]) -> dict[str, Any]:
        label = {k: job[k] for k in ("distribution", "path", "found_by") if job.get(k) is not None}
        label.update({k: job[k] for k in ("finder", "shadows") if job.get(k)})
        if job["refused"]:
            return {"module": job["module"], "ok": False, "refused": job["refused"], **label}
        allowed = None if job["found_by"] == "import-system" or roots is None else roots
        facts = try_import(ctx, job["module"], preload=("torch",) if has_torch else (), file=job["path"],
                           roots=allowed)
        facts.update(label)
        return facts

    with ThreadPoolExecutor(max_workers=PARALLEL_IMPORTS) as pool:
        results = list(pool.map(load, jobs))
    return {"extensions": {"torch_installed": has_torch, "items": results + other_python}}
