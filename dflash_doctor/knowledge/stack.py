"""Which distributions make up the serving stack, and which import names the flash-attention family
installs. The doctor reads everything else about them from their own installed metadata."""

from __future__ import annotations

from dflash_doctor.knowledge import Fact

STACK_DISTRIBUTIONS: Fact[tuple[str, ...]] = Fact(
    value=(
        "torch",
        "triton",
        "vllm",
        "flash-attn",
        "flash-attn-4",
        "flash-attn-3",
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
    value=("flash-attn", "flash-attn-4", "flash-attn-3", "flash-attn-cute"),
    source="PyPI project names of Dao-AILab/flash-attention's packages: setup.py PACKAGE_NAME='flash_attn' "
    "(v2), flash_attn/cute/pyproject.toml name='flash-attn-4', hopper/setup.py PACKAGE_NAME='flash_attn_3'.",
    read_from="flash-attention v2.8.3 (060c9188) and HEAD 0251105a",
)

WATCHED_TOP_LEVELS: Fact[tuple[str, ...]] = Fact(
    value=("flash_attn", "hopper", "flash_attn_2_cuda", "flash_attn_3", "flash_attn_interface", "flash_attn_config"),
    source="Top-level names the family installs: flash-attn v2 setup.py find_packages() (flash_attn, and "
    "hopper in 2.8.3) and CUDAExtension(name='flash_attn_2_cuda'); flash-attn-4 packages=['flash_attn.cute']; "
    "hopper/setup.py py_modules=['flash_attn_interface', 'flash_attn_config'] and package flash_attn_3.",
    read_from="flash-attention v2.8.3 (060c9188) and HEAD 0251105a",
)
