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
