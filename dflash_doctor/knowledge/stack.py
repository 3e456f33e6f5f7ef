"""Which distributions make up the serving stack, and which import names the flash-attention family
installs (derived from the flash-attention facts, so each fact is stated once)."""

from __future__ import annotations

from dflash_doctor.knowledge import Fact
from dflash_doctor.knowledge import flash_attn as fa

STACK_DISTRIBUTIONS: Fact[tuple[str, ...]] = Fact(
    value=(
        "torch",
        "triton",
        "vllm",
        *fa.DISTRIBUTIONS.value,
        "flashinfer-python",
        "transformers",
        "nvidia-ml-py",
    ),
    source="The packages `vllm serve` with DFlash loads on CUDA: vllm's wheel METADATA Requires-Dist "
    "(torch, triton via torch, flashinfer-python, transformers, nvidia-ml-py) plus the flash-attention "
    "family that vLLM imports optionally (vllm/model_executor/layers/rotary_embedding/common.py).",
    read_from="vllm 0.20.1 and 0.24.0 wheels",
)

FLASH_ATTN_FAMILY: Fact[tuple[str, ...]] = Fact(
    value=tuple(fa.DISTRIBUTIONS.value),
    source=fa.DISTRIBUTIONS.source,
    read_from=fa.DISTRIBUTIONS.read_from,
)

WATCHED_TOP_LEVELS: Fact[tuple[str, ...]] = Fact(
    value=tuple(dict.fromkeys([
        *fa.FA2_TOP_LEVELS.value,
        *(name for names in fa.FA3_TOP_LEVELS.value.values() for name in names),
        *fa.FLASH_ATTN_CUTE_TOP_LEVELS.value,
    ])),
    source=f"{fa.FA2_TOP_LEVELS.source} | {fa.FA3_TOP_LEVELS.source} | {fa.FLASH_ATTN_CUTE_TOP_LEVELS.source}",
    read_from=f"{fa.FA2_TOP_LEVELS.read_from}; {fa.FA3_TOP_LEVELS.read_from}",
)
