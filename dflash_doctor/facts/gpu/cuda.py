"""The CUDA stack and the kernels, for real, in the target interpreter.

`cuda_stack` (imports torch and Triton, launches nothing) and each kernel family run as processes of
their own, so that a crash or hang in one is a finding for that one alone. They run as forked children
of the run's one target process that imported torch first (`facts.probes.SharedTargetProcess`): on a cold machine,
three processes importing torch side by side each took 6.4 s where one takes 4.5 s, and a forked child
starts with it loaded. A family whose package is not installed exits before touching torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dflash_doctor.context import Context
from dflash_doctor.facts.gpu.cuda_shapes import CudaStack, Kernels
from dflash_doctor.facts.probes import SHARED_IMPORTS, ProbeJob, ProbeOutcome, run_probes_sharing_imports
from dflash_doctor.facts.shape import Collected, Shape, by_section
from dflash_doctor.knowledge.gpu import BF16_MIN_COMPUTE_CAPABILITY

__all__ = ["KERNEL_FAMILIES", "KERNEL_PROBLEM", "collect"]

# The order the report lists them in.
KERNEL_FAMILIES = (
    "sdpa", "triton", "flash_attn", "flash_attn_cute", "flash_attn_rotary", "vllm_flash_attn", "vllm_rotary",
)

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


def collect(ctx: Context, _earlier: Mapping[str, object], wanted: frozenset[str]) -> Collected:
    jobs: list[ProbeJob] = []
    if CudaStack.SECTION in wanted:
        jobs.append(ProbeJob("cuda_stack", "cuda_stack", {}))
    if Kernels.SECTION in wanted:
        jobs += [ProbeJob(family, "kernels", dict(KERNEL_PROBLEM, family=family)) for family in KERNEL_FAMILIES]
    if ctx.target_process is not None:
        outcomes = ctx.target_process.run(jobs)
        shared_process = ctx.target_process.facts()
    else:
        shared = run_probes_sharing_imports(ctx.python, jobs, preload=SHARED_IMPORTS, timeout_s=ctx.timeout_s,
                                            cwd=ctx.cwd)
        outcomes, shared_process = shared.outcomes, shared.target_process
    sections: list[Shape] = []
    if CudaStack.SECTION in wanted:
        sections.append(CudaStack.collected(_with_process(outcomes["cuda_stack"], {"shared_process": shared_process})))
    if Kernels.SECTION in wanted:
        families = [_with_process(outcomes[family], {"family": family}) for family in KERNEL_FAMILIES]
        kernels: dict[str, Any] = {"problem": KERNEL_PROBLEM, "families": families}
        if CudaStack.SECTION not in wanted:
            kernels["shared_process"] = shared_process
        sections.append(Kernels.collected(kernels))
    return by_section(*sections)


def _with_process(outcome: ProbeOutcome, first: dict[str, Any]) -> dict[str, Any]:
    facts = dict(first, process=outcome.as_facts())
    if isinstance(outcome.data, dict):
        facts.update(outcome.data)
    return facts
