"""What vLLM imports from outside itself, and which of those imports sit on the serving path.

The doctor reads the import sites and their guards from the installed vLLM's own source (AST); this
module only says which packages to look for and which sites `vllm serve` is known to reach.
"""

from __future__ import annotations

from dflash_doctor.knowledge import Fact

EXTERNAL_KERNEL_MODULES: Fact[tuple[str, ...]] = Fact(
    value=("flash_attn", "flash_attn_interface", "flash_attn_3", "flashinfer", "xformers", "deep_gemm",
           "triton_kernels", "flash_mla", "aiter"),
    source="grep of `^\\s*(from|import) (flash_attn|flashinfer|...)` and `import_module(\"...\")` over the vllm "
    "package: external packages vLLM imports optionally (its bundled copies live under vllm.vllm_flash_attn "
    "and vllm.third_party and are not external)",
    read_from="vllm 0.20.1 and 0.24.0 wheels",
)

SERVING_PATH_SITES: Fact[tuple[tuple[str, str], ...]] = Fact(
    value=(("vllm/model_executor/layers/rotary_embedding/common.py", "flash_attn"),),
    source="vllm/model_executor/layers/rotary_embedding/base.py: RotaryEmbeddingBase.__init__ builds "
    "ApplyRotaryEmb(...) for every RoPE layer, and ApplyRotaryEmb.__init__ (common.py) imports "
    "flash_attn.ops.triton.rotary; every RoPE target (Qwen3) and the DFlash drafter construct one",
    read_from="vllm 0.20.1 and 0.34.0 wheels",
)

VENDORED_DEEP_GEMM: Fact[dict[str, tuple[str, ...]]] = Fact(
    value={"0.20.1": ("3.12",), "0.24.0": ("3.10", "3.11", "3.12", "3.13", "3.14")},
    source="the wheels' file lists: vllm/third_party/deep_gemm/_C.cpython-3XX-x86_64-linux-gnu.so, one file per "
    "CPython the release ships DeepGEMM's extension for (the wheels themselves are cp38-abi3). When it cannot be "
    "imported, vllm/utils/deep_gemm.py (0.20.1) still finds the package (has_deep_gemm: find_spec of "
    "vllm.third_party.deep_gemm), _import_deep_gemm returns None, and each DeepGEMM entry point then raises "
    "RuntimeError(\"DeepGEMM backend is not available or outdated. ...\") where VLLM_USE_DEEP_GEMM (default 1) "
    "and the GPU select it; VLLM_USE_DEEP_GEMM=0 turns it off",
    read_from="vllm-0.20.1-1-cp38-abi3-manylinux_2_35_x86_64.whl, vllm-0.24.0-cp38-abi3-manylinux_2_28_x86_64.whl",
)
"""vLLM release -> the CPython versions its wheel ships vllm.third_party.deep_gemm._C for."""
