"""DFlash-format drafts that vLLM serves otherwise than they were trained, and the newest releases' serving
conditions around DFlash: the causality vLLM resolves for a drafter, Domino's GRU head, prefix caching with
DFlash2/DSpark on hybrid targets, NVIDIA Confidential Computing. Each fact with the file and release it was
read from; what the installed vLLM's source can say is read from it (facts.vllm_pairing), and what is here
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
    "(facts.vllm_pairing._causality); a key it does not read is skipped, and with none deciding the layer is "
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

HYBRID_PREFIX_CACHE: Fact[dict[str, object]] = Fact(
    value={"first": "0.20.1", "last": "0.29.0"},
    source="vLLM issue #53505: with DFlash2 or DSpark on a hybrid target (Mamba / linear-attention layers), prefix "
    "caching and KV offload hit 0: the scheduler's block backoff for eagle-family drafts drops the last cached "
    "block of every lookup, and on a hybrid target that is the only block the Mamba state can be resumed from; "
    "fixed on main by commit fa5017a5 (2026-09-10), after the 0.29.0 cut; noonghunna/club-3090 #1324 (0.29.x "
    "affected)",
    read_from="vllm-project/vllm #53505, commit fa5017a5; noonghunna/club-3090 #1324; the range read from the "
    "scheduler's source (facts.vllm_pairing._hybrid_backoff)",
    note="The doctor reads the backoff from the installed release's source; this range is for a report recorded "
    "before it did.",
)

CONFIDENTIAL_COMPUTE: Fact[dict[str, object]] = Fact(
    value={"nvml_call": "nvmlSystemGetConfComputeState", "env": "VLLM_CONFIDENTIAL_COMPUTE", "first": "0.34.0"},
    source="vllm/platforms/cuda.py (0.34.0): confidential computing read through NVML "
    "`nvmlSystemGetConfComputeState().ccFeature`, overridden by VLLM_CONFIDENTIAL_COMPUTE; with it on, vLLM stages "
    "host-to-device copies through pinned bounce buffers (GPU memory is encrypted to the host) and peer-to-peer "
    "between GPUs is not available, so tensor parallelism's all-reduce runs without P2P or custom all-reduce. "
    "NVML: nvmlSystemGetConfComputeState fills nvmlConfComputeSystemState_t {environment, ccFeature, devToolsMode}; "
    "NVML_CC_SYSTEM_FEATURE_ENABLED = 1",
    read_from="vllm sdist 0.34.0 platforms/cuda.py; NVML API reference (nvml.h, pynvml); research field-2026-12-c.md",
)
