"""DFlash-format drafts that vLLM serves otherwise than they were trained, and the newest releases' serving
conditions around DFlash: the causality vLLM resolves for a drafter, Domino's GRU head, prefix caching with
DFlash2/DSpark on hybrid targets, NVIDIA Confidential Computing. Each fact with the file and release it was
read from; what the installed vLLM's source can say is read from it (facts.serve.vllm_pairing), and what is here
is the precedence, the names and the symptoms the source does not spell.

Version ranges are (first, last): inclusive; `last` None means "every later release read".
"""

from __future__ import annotations

from dflash_doctor.knowledge import Fact

__all__ = [
    "CAUSALITY_KEYS",
    "CONFIDENTIAL_COMPUTE",
    "DOMINO_HEAD",
    "HYBRID_PREFIX_CACHE",
    "JETSPEC_CAUSAL",
]

CAUSALITY_KEYS: Fact[tuple[str, ...]] = Fact(
    value=("is_causal", "dflash_config.causal", "layer_types"),
    source="vllm/model_executor/models/qwen3_dflash.py `_dflash_layer_causal` (0.28.0-0.34.0, line 86 in 0.34.0): "
    "`is_causal` when set, else `dflash_config.causal` when set, else the layer is causal only when "
    "layer_types[i] == \"sliding_attention\", else non-causal; 0.26.0-0.27.1 the same without `is_causal` (line 55: "
    "\"dflash_config.causal overrides all layers; else only SWA layers causal\"); 0.25.1 `_resolve_layer_attention` "
    "(dflash_config.causal overrides, else sliding layers causal; mixed layer_types raise NotImplementedError); "
    "0.24.0 v1/worker/gpu/spec_decode/dflash/utils.py get_dflash_causal and 0.23.0 v1/spec_decode/dflash.py line 71: "
    "`dflash_config.get(\"causal\", False)` only; 0.20.1-0.22.1 read no causality key (every DFlash layer non-causal)",
    read_from="vllm sdists 0.20.1, 0.22.1, 0.23.0, 0.24.0, 0.25.1, 0.26.0, 0.27.1, 0.28.0, 0.29.0, 0.30.0, 0.31.0, "
    "0.32.0, 0.33.0, 0.34.0",
    note="The precedence, first to last. Which of the keys the installed release reads is read from its source "
    "(facts.serve.vllm_pairing._causality); a key it does not read is skipped, and with none deciding the layer is "
    "non-causal.",
)

JETSPEC_CAUSAL: Fact[str] = Fact(
    value="jetspec",
    source="NVIDIA-NeMo/Automodel PR #2913 (merged 2026-07): \"JetSpec drafts share the DFlash on-disk format but are "
    "trained with causal in-block attention: train_jetspec now stamps dflash_config.causal=true so vLLM matches it at "
    "inference, and a --dflash-causal flag covers checkpoints trained before the stamp existed\"; Automodel PR #2867 "
    "(the draft architecture is unchanged, Qwen3DFlashDraftModel: JetSpec differs from DFlash only in the attention "
    "mask and the loss); vllm-project/speculators PR #747 (open as read: a JetSpec speculator config); vLLM PR "
    "#43445 (a causal-trained checkpoint served non-causal: acceptance length 3.48 against 4.03 expected on mt-bench)",
    read_from="NVIDIA-NeMo/Automodel #2867, #2913; vllm-project/speculators #747; vllm-project/vllm #43445",
    note="No reliable on-disk marker tells a JetSpec draft from a DFlash one: the architecture is the same, and "
    "checkpoints trained before the stamp carry nothing. The doctor judges what is provable: a draft that states "
    "its causality (is_causal, dflash_config.causal) served otherwise by the installed vLLM, and a draft whose own "
    "config names JetSpec (this value, in a string of its config) served non-causal.",
)

DOMINO_HEAD: Fact[tuple[str, ...]] = Fact(
    value=("prefix_gru", "embed_proj"),
    source="NVIDIA-NeMo/Automodel PR #2913: \"Domino drafts are rejected with a clear error ...: their GRU correction "
    "head (prefix_gru / embed_proj) has no vLLM runtime, and serving the bare backbone\" loses what the head was "
    "trained for; vLLM RFC #46707 and PR #47627 (closed, not merged: `DominoHead` with prefix_gru + embed_proj in "
    "qwen3_dflash.py, selected by dflash_config.projector_type == \"domino\"); SpecForge PR #571 and speculators "
    "PR #773 (the head's modules, `self.prefix_gru = nn.GRU(...)`, `self.embed_proj = nn.Sequential(...)`). No vLLM "
    "release read names prefix_gru: its DFlash loader stops on the head's tensors, in 0.20.1-0.25.1 at "
    "`params_dict[name]` (DFlashQwen3Model.load_weights: KeyError), in 0.26.0-0.34.0 in AutoWeightsLoader "
    "(model_executor/models/utils.py: \"There is no module or parameter named 'prefix_gru' in ...\")",
    read_from="vllm sdists 0.20.1-0.34.0 (qwen3_dflash.py load_weights, models/utils.py AutoWeightsLoader); "
    "NVIDIA-NeMo/Automodel #2913; vllm-project/vllm #46707, #47627",
    note="The head's modules, the first components of its tensor names (`prefix_gru.weight_ih_l0`, "
    "`embed_proj.0.weight`); a Domino config also says `dflash_config.projector_type: \"domino\"`. The doctor "
    "reads whether the installed vLLM's drafter files name prefix_gru (a release that runs the head).",
)

HYBRID_PREFIX_CACHE: Fact[tuple[str, str]] = Fact(
    value=("0.20.1", "0.29.0"),
    source="vLLM issue #53505: with DFlash, DFlash2 or DSpark (eagle-family methods: config/speculative.py use_eagle) "
    "on a hybrid target (Mamba / linear-attention layers), prefix caching and KV offload hit 0; fixed on main by "
    "commit fa5017a5 (2026-09-10), after the 0.29.0 cut (noonghunna/club-3090 #1324: 0.29.x affected). In the "
    "source: v1/core/sched/scheduler.py _mamba_block_aligned_split backs the cacheable position off one block "
    "for them (0.29.0 lines 417-418: `if self.use_eagle: last_cache_position = max(last_cache_position - "
    "block_size, 0)`), and 0.29.0's own kv_cache_utils.py (line 1871) says the Mamba lookup window this leaves is "
    "one \"align-mode checkpointing never produces, so reuse drops to zero with no error\"; 0.30.0 "
    "v1/core/kv_cache_coordinator.py lines 154-158 (\"Match Mamba checkpoints to Eagle's attention replay "
    "boundary\": MambaManager.drop_eagle_checkpoint_block) aligns them",
    read_from="vllm sdists 0.20.1-0.34.0 (scheduler.py, kv_cache_coordinator.py, kv_cache_utils.py); "
    "vllm-project/vllm #53505; noonghunna/club-3090 #1324",
    note="The doctor reads the backoff and the alignment from the installed release (facts.serve.vllm_pairing."
    "_hybrid_prefix_cache): affected where the scheduler backs off and the coordinator does not align. The range "
    "is what that reading gives over the sdists read, for the explanation.",
)

CONFIDENTIAL_COMPUTE: Fact[dict[str, str]] = Fact(
    value={"nvml_call": "nvmlSystemGetConfComputeState", "env": "VLLM_CONFIDENTIAL_COMPUTE", "first": "0.34.0"},
    source="vllm/platforms/cuda.py (0.34.0 lines 208-243): `_nvml_confidential_compute_enabled` reads "
    "`pynvml.nvmlSystemGetConfComputeState()` and counts `ccFeature != 0` as on; `_detect_confidential_compute` "
    "lets VLLM_CONFIDENTIAL_COMPUTE override it (\"1\" on, any other value off; envs.py line 2012). With it on, "
    "vLLM turns UVA off (utils/platform_utils.py line 61: \"the device-side view of pinned host memory is not "
    "coherent\"), uses explicit staged host-to-device copies (v1/worker/gpu/buffer_utils.py line 61) and patches "
    "torch's non-blocking copies (v1/conf_compute_utils.py: \"Under bounce-buffer Confidential Computing, "
    "cudaMemcpyAsync is host-synchronous\"). Between GPUs in CC mode \"All data that flows over NVLink must be "
    "encrypted prior to transfer and decrypted at the destination GPU\", bounced through the copy engines, which "
    "\"adds constraints and latency\" (NVIDIA attestation docs, PPCIe introduction): tensor parallelism's "
    "traffic pays for it. No release before 0.34.0 names nvmlSystemGetConfComputeState",
    read_from="vllm sdists 0.33.0 and 0.34.0; docs.nvidia.com/attestation/attestation-client-tools-ppcie "
    "(ppcie_introduction); NVML nvmlConfComputeSystemState_t (nvidia-ml-py 13.615)",
)
