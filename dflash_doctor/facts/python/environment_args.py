"""What the environment probe is asked (`probes/environment.py`): the stack, the kernel packages, the names whose
resolution the checks judge. Apart from the collector (`facts.python.environment`) so that the run's head start
(`facts.head_start`) can ask it before the collector's shapes are imported."""

from __future__ import annotations

from typing import Any

from dflash_doctor.facts.secrets import env_allow_args
from dflash_doctor.knowledge.kernel_wheels import KERNEL_DISTRIBUTIONS
from dflash_doctor.knowledge.stack import (
    FLASH_ATTN_FAMILY,
    STACK_DISTRIBUTIONS,
    STACK_EXTENSION_MODULES,
    WATCHED_TOP_LEVELS,
)

__all__ = ["RESOLVED_NAMES", "probe_args"]

# Top-level names whose resolution (without importing) the checks judge.
RESOLVED_NAMES = ("flash_attn", "flash_attn_2_cuda", "flash_attn_3", "vllm", "torch", "triton", "flashinfer",
                  "cutlass")


def probe_args(verify_hashes: bool) -> dict[str, Any]:
    """The environment probe's arguments (JSON)."""
    return {
        "stack": list(STACK_DISTRIBUTIONS.value),
        "hash_always": list(FLASH_ATTN_FAMILY.value),
        "kernels": list(KERNEL_DISTRIBUTIONS.value),
        "watched_top_levels": list(WATCHED_TOP_LEVELS.value),
        "verify_hashes": verify_hashes,
        "env_allow": env_allow_args(),
        "find_spec": list(RESOLVED_NAMES),
        "extension_modules": sorted(STACK_EXTENSION_MODULES.value),
    }
