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

TORCH_LIBRARIES: Fact[tuple[str, ...]] = Fact(
    # Name prefixes: libtorch covers libtorch.so, libtorch_cpu.so, libtorch_cuda.so, libtorch_python.so.
    value=("libtorch", "libc10", "libshm.so", "libcaffe2_nvrtc.so"),
    source="The shared libraries torch's wheels install in torch/lib/: libc10.so, libtorch.so, libtorch_cpu.so, "
    "libtorch_python.so, libtorch_global_deps.so, libshm.so (every build); libc10_cuda.so, libtorch_cuda.so, "
    "libcaffe2_nvrtc.so (CUDA builds). Extensions built with torch.utils.cpp_extension link them by name "
    "(vLLM 0.20.1's vllm/_C.abi3.so: DT_NEEDED libtorch.so, libtorch_cpu.so, libtorch_cuda.so, libc10_cuda.so, "
    "libc10.so) and find them because `import torch` loaded them first.",
    read_from="torch 2.13.0 (CPU) torch/lib; vllm 0.20.1 wheel (readelf -d vllm/_C.abi3.so)",
)


def is_torch_library(name: str) -> bool:
    """Whether a library name (`libc10.so`, a path to one) is one that torch's wheel installs."""
    base = name.rsplit("/", 1)[-1]
    return any(base.startswith(prefix) for prefix in TORCH_LIBRARIES.value)
