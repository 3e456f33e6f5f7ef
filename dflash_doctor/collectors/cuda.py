"""The CUDA stack and the kernels, for real, in the target interpreter.

`cuda_stack`: one probe process (imports torch once, launches nothing). `kernels`: one probe process per
kernel family, all started at once, so that a crash or hang in one family is a finding for that family
alone and the whole layer costs about one torch import of wall time. A family whose package is not
installed exits before importing torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from dflash_doctor.check import Context
from dflash_doctor.knowledge.gpu import BF16_MIN_COMPUTE_CAPABILITY
from dflash_doctor.probe import run_probe

__all__ = ["KERNEL_FAMILIES", "KERNEL_PROBLEM", "collect_kernels", "collect_stack"]

# The order the report lists them in.
KERNEL_FAMILIES = ("sdpa", "triton", "flash_attn", "flash_attn_rotary", "vllm_flash_attn", "vllm_rotary")

KERNEL_PROBLEM: dict[str, Any] = {
    # A small causal problem with the head sizes of DFlash targets (Qwen3: 128) and 64; a few hundred KB.
    "batch": 2,
    "seqlen": 128,
    "heads": 4,
    "head_dims": [128, 64],
    "dtypes": ["float16", "bfloat16"],
    "seed": 0,
    "warm_iters": 10,
    # The doctor's tolerance: 2 units in the last place of the output dtype at the problem's scale
    # (max |v| for attention, whose output is a convex combination of v's rows; max |out| otherwise).
    # Rounding the output alone costs half a unit, and P is rounded to the input dtype before P @ V
    # in flash kernels: a right kernel stays well inside, a wrong mask or layout is off by O(scale).
    "tolerance_ulps": 2.0,
    "bf16_min_cc": list(BF16_MIN_COMPUTE_CAPABILITY.value),
}


def collect_stack(ctx: Context, _earlier: Mapping[str, Any]) -> dict[str, Any]:
    outcome = run_probe(ctx.python, "cuda_stack", {}, timeout_s=ctx.timeout_s, cwd=ctx.cwd)
    facts: dict[str, Any] = {"process": outcome.as_facts()}
    if outcome.data is not None:
        facts.update(outcome.data)
    return {"cuda_stack": facts}


def run_family(ctx: Context, family: str) -> dict[str, Any]:
    args = dict(KERNEL_PROBLEM, family=family)
    outcome = run_probe(ctx.python, "kernels", args, timeout_s=ctx.timeout_s, cwd=ctx.cwd)
    facts: dict[str, Any] = {"family": family, "process": outcome.as_facts()}
    if outcome.data is not None:
        facts.update(outcome.data)
    return facts


def collect_kernels(ctx: Context, _earlier: Mapping[str, Any]) -> dict[str, Any]:
    with ThreadPoolExecutor(max_workers=len(KERNEL_FAMILIES)) as pool:
        results = list(pool.map(lambda family: run_family(ctx, family), KERNEL_FAMILIES))
    return {"kernels": {"problem": KERNEL_PROBLEM, "families": results}}
