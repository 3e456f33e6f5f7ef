"""Real imports in the target interpreter, each in its own subprocess with a timeout."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from dflash_doctor.check import Context
from dflash_doctor.envfacts import Distributions
from dflash_doctor.probe import run_probe

ROTARY_MODULE = "flash_attn.ops.triton.rotary"
ROTARY_NAMES = ("apply_rotary",)
# Imports started at once: each may load torch (seconds of CPU), and CI machines have two cores.
PARALLEL_IMPORTS = 4


def try_import(
    ctx: Context, module: str, names: Sequence[str] = (), preload: Sequence[str] = (), file: str | None = None
) -> dict[str, Any]:
    args = {"module": module, "names": list(names), "preload": list(preload), "file": file,
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


def collect_extensions(ctx: Context, earlier: Mapping[str, Any]) -> dict[str, Any]:
    """Load each compiled extension module of the stack on its own, after torch (whose libraries they link)."""
    dists = Distributions(earlier.get("distributions") or {})
    jobs: list[tuple[str, str, str]] = []
    other_python: list[dict[str, Any]] = []
    for dist in dists:
        for ext in dist.facts.get("extensions") or []:
            if dist.canonical == "torch":
                continue  # `import torch` itself is the preload; its own extensions load with it
            path = f"{dist.location}/{ext['path']}"
            if ext.get("abi_tag"):
                # Named for another interpreter's ABI: this one's import system never looks at the file, so
                # loading it by hand would test something no import does.
                other_python.append({"module": ext["module"], "distribution": dist.name, "path": path,
                                     "abi_tag": ext["abi_tag"], "ok": False, "loaded": False})
                continue
            jobs.append((dist.name, ext["module"], path))
    has_torch = dists.get("torch") is not None

    def load(job: tuple[str, str, str]) -> dict[str, Any]:
        owner, module, path = job
        facts = try_import(ctx, module, preload=("torch",) if has_torch else (), file=path)
        facts["distribution"] = owner
        facts["path"] = path
        return facts

    with ThreadPoolExecutor(max_workers=PARALLEL_IMPORTS) as pool:
        results = list(pool.map(load, jobs))
    return {"extensions": {"torch_installed": has_torch, "items": results + other_python}}
