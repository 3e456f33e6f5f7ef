"""The installed vLLM's imports of external kernel packages, read from its source without importing it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from dflash_doctor.context import Context
from dflash_doctor.facts.envfacts import Distributions
from dflash_doctor.facts.vllm_scan import scan_package
from dflash_doctor.knowledge.vllm_imports import EXTERNAL_KERNEL_MODULES, SERVING_PATH_SITES


def vllm_package_dir(earlier: Mapping[str, Any]) -> str | None:
    resolved = (earlier.get("resolution") or {}).get("vllm") or {}
    for location in resolved.get("search_locations") or []:
        if os.path.isfile(os.path.join(location, "__init__.py")):
            return str(location)
    dist = Distributions(earlier.get("distributions") or {}).get("vllm")
    if dist is not None and os.path.isdir(os.path.join(dist.location, "vllm")):
        return os.path.join(dist.location, "vllm")
    return None


def _scan(ctx: Context, earlier: Mapping[str, Any], section: str, only: tuple[str, ...] | None) -> dict[str, Any]:
    root = vllm_package_dir(earlier)
    dist = Distributions(earlier.get("distributions") or {}).get("vllm")
    if root is None:
        return {section: {"installed": dist is not None, "version": dist.version if dist else None,
                          "root": None, "sites": []}}
    scan = scan_package(root, EXTERNAL_KERNEL_MODULES.value, only, ctx.sources)
    return {section: {"installed": True, "version": dist.version if dist else None, **scan}}


def collect(ctx: Context, earlier: Mapping[str, Any]) -> dict[str, Any]:
    """Only the files `vllm serve` is known to reach: one or two files, milliseconds."""
    return _scan(ctx, earlier, "vllm_source", tuple(sorted({path for path, _ in SERVING_PATH_SITES.value})))


def collect_surface(ctx: Context, earlier: Mapping[str, Any]) -> dict[str, Any]:
    """Every file of the installed vLLM (about a second: vLLM has thousands of modules)."""
    return _scan(ctx, earlier, "vllm_surface", None)
