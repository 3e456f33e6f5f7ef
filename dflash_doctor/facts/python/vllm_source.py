"""The installed vLLM's imports of external kernel packages, read from its source without importing it."""

from __future__ import annotations

import os
from collections.abc import Mapping

from dflash_doctor.context import Context
from dflash_doctor.facts.python.environment_shapes import Distributions, Resolution
from dflash_doctor.facts.python.vllm_scan import scan_package
from dflash_doctor.facts.python.vllm_source_shapes import VllmSource, VllmSurface
from dflash_doctor.facts.shape import Collected, by_section
from dflash_doctor.knowledge.vllm_imports import EXTERNAL_KERNEL_MODULES, SERVING_PATH_SITES


def vllm_package_dir(earlier: Mapping[str, object]) -> str | None:
    resolution = Resolution.read(earlier.get(Resolution.SECTION)) or Resolution()
    for location in resolution.of("vllm").search_locations or []:
        if os.path.isfile(os.path.join(location, "__init__.py")):
            return str(location)
    dist = (Distributions.read(earlier.get(Distributions.SECTION)) or Distributions()).get("vllm")
    if dist is not None and os.path.isdir(os.path.join(dist.location, "vllm")):
        return os.path.join(dist.location, "vllm")
    return None


def _scan(ctx: Context, earlier: Mapping[str, object], shape: type[VllmSource | VllmSurface],
          only: tuple[str, ...] | None) -> Collected:
    root = vllm_package_dir(earlier)
    dist = (Distributions.read(earlier.get(Distributions.SECTION)) or Distributions()).get("vllm")
    if root is None:
        return by_section(shape.collected({"installed": dist is not None, "version": dist.version if dist else None,
                                           "root": None, "sites": []}))
    scan = scan_package(root, EXTERNAL_KERNEL_MODULES.value, only, ctx.sources)
    return by_section(shape.collected({"installed": True, "version": dist.version if dist else None, **scan}))


def collect(ctx: Context, earlier: Mapping[str, object]) -> Collected:
    """Only the files `vllm serve` is known to reach: one or two files, milliseconds."""
    return _scan(ctx, earlier, VllmSource, tuple(sorted({path for path, _ in SERVING_PATH_SITES.value})))


def collect_surface(ctx: Context, earlier: Mapping[str, object]) -> Collected:
    """Every file of the installed vLLM (about a second: vLLM has thousands of modules)."""
    return _scan(ctx, earlier, VllmSurface, None)
