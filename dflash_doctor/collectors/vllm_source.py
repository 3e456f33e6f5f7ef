"""The installed vLLM's imports of external kernel packages, read from its source without importing it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from dflash_doctor.check import Context
from dflash_doctor.envfacts import Distributions
from dflash_doctor.knowledge.vllm_imports import EXTERNAL_KERNEL_MODULES
from dflash_doctor.vllm_scan import scan_package


def vllm_package_dir(earlier: Mapping[str, Any]) -> str | None:
    resolved = (earlier.get("resolution") or {}).get("vllm") or {}
    for location in resolved.get("search_locations") or []:
        if os.path.isfile(os.path.join(location, "__init__.py")):
            return str(location)
    dist = Distributions(earlier.get("distributions") or {}).get("vllm")
    if dist is not None and os.path.isdir(os.path.join(dist.location, "vllm")):
        return os.path.join(dist.location, "vllm")
    return None


def collect(ctx: Context, earlier: Mapping[str, Any]) -> dict[str, Any]:
    root = vllm_package_dir(earlier)
    dist = Distributions(earlier.get("distributions") or {}).get("vllm")
    if root is None:
        return {"vllm_source": {"installed": dist is not None, "root": None, "sites": []}}
    scan = scan_package(root, EXTERNAL_KERNEL_MODULES.value)
    return {"vllm_source": {"installed": True, "version": dist.version if dist else None, **scan}}
