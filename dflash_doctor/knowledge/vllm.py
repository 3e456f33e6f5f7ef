"""vLLM: how it imports the external flash_attn, how it serves DFlash, and the config checks `vllm serve`
runs before it loads a model, per release.

Read from the released artifacts themselves (PyPI sdists ``vllm-<ver>.tar.gz`` unpacked, plus the wheels of
0.20.1 and 0.24.0 for METADATA): every release 0.18.0 .. 0.34.0 except 0.15.x (no sdist on PyPI; the
0.15.0 wheel was read for one fact). Commit ids from each sdist's vllm/_version.py: 0.19.1 gb1388b1fb,
0.20.0 gb8160878f, 0.20.1 gf98b2747f, 0.21.0 g9da56fd18, 0.22.0 g0b3ba88f1, 0.23.0 g91df0fad4,
0.24.0 gee0da84ab, 0.34.0 g62d4bc3c7.

Version ranges are written ``(first, last_read)``: the first release that has the behaviour and the last
release read that still has it (inclusive). ``last_read`` is not a promise about later releases.

The doctor reads the installed vLLM's own source (AST) for the import guards and messages wherever it can;
the tables here are documentation and the fallback for when that source cannot be read.
"""

from __future__ import annotations

from dflash_doctor.knowledge import Fact

__all__ = [
    "ATTENTION_BACKEND_CLI_FLAG",
    "ATTENTION_BACKEND_ENV_REMOVED_IN",
    "ATTENTION_BACKEND_PRIORITY",
    "DEVICE_QUERY_OPS",
    "DFLASH_ARCHITECTURE_RULE",
    "DFLASH_FIRST_RELEASE",
    "DFLASH_MASK_TOKEN_ERRORS",
    "DFLASH_MASK_TOKEN_LOOKUP",
    "DFLASH_MAX_DRAFT_SEQS",
    "DFLASH_METHOD_AUTODETECT",
    "DFLASH_NON_CAUSAL_SCOPE",
    "DFLASH_REGISTRY",
    "DFLASH_TARGET_LAYER_IDS_PLUS_ONE",
    "DFLASH_TARGET_MODEL_TYPE_ALLOWLIST",
    "DRAFT_ATTENTION_BACKEND_FIELD",
    "DRAFT_TP_MESSAGE",
    "DRAFT_TP_RULE",
    "FLASH_ATTN_BACKEND_MIN_COMPUTE_CAPABILITY",
    "HEADS_TP_MESSAGE",
    "NON_CAUSAL_BACKENDS",
    "NO_VALID_BACKEND_MESSAGES",
    "REQUIRES_EXTERNAL_FLASH_ATTN",
    "ROTARY_FLASH_ATTN_GUARD",
    "ROTARY_GUARD_SITE",
    "SPEC_DECODE_SLOT_RULES",
    "TORCH_PINS",
    "VERIFY_MAX_MODEL_LEN_MESSAGES",
    "WHEEL_PLATFORM_TAGS",
    "WORLD_SIZE_GPU_MESSAGE",
]

_SDISTS = "vllm PyPI sdists"
_V0201 = "vllm 0.20.1 sdist (gf98b2747f)"
_V0240 = "vllm 0.24.0 sdist (gee0da84ab)"
_V0340 = "vllm 0.34.0 sdist (g62d4bc3c7)"
_THREE = f"{_V0201}; {_V0240}; {_V0340}"

# ---------------------------------------------------------------------------------------------------------
# The external flash_attn on the serving path
# ---------------------------------------------------------------------------------------------------------

ROTARY_GUARD_SITE: Fact[str] = Fact(
    value="vllm/model_executor/layers/rotary_embedding/common.py:ApplyRotaryEmb.__init__",
    source="common.py ApplyRotaryEmb.__init__ imports flash_attn.ops.triton.rotary.apply_rotary; "
    "rotary_embedding/base.py RotaryEmbeddingBase.__init__ builds `self.apply_rotary_emb = "
    "ApplyRotaryEmb(...)` (0.20.1 base.py:65), so the import runs when every RoPE layer is constructed, "
    "the target's and the DFlash drafter's",
    read_from=f"{_SDISTS} 0.18.0 .. 0.34.0",
    note="The imported function is used only in forward_hip (ROCm); forward_cuda uses the bundled "
    "vllm.vllm_flash_attn.layers.rotary.apply_rotary_emb. The import is attempted on CUDA anyway.",
)

ROTARY_FLASH_ATTN_GUARD: Fact[tuple[tuple[str, str, str, str], ...]] = Fact(
    value=(
        (
            "0.18.0",
            "0.21.0",
            "find_spec",
            'if find_spec("flash_attn") is not None: from flash_attn.ops.triton.rotary import apply_rotary',
        ),
        (
            "0.22.0",
            "0.23.0",
            "find_spec_not_cpu",
            (
                'if not current_platform.is_cpu() and find_spec("flash_attn") is not None: '
                "from flash_attn.ops.triton.rotary import apply_rotary"
            ),
        ),
        (
            "0.24.0",
            "0.34.0",
            "suppress_module_not_found",
            (
                "if not current_platform.is_cpu(): with suppress(ModuleNotFoundError): "
                'self.apply_rotary_emb_flash_attn = import_module("flash_attn.ops.triton.rotary").apply_rotary'
            ),
        ),
    ),
    source="vllm/model_executor/layers/rotary_embedding/common.py, ApplyRotaryEmb.__init__: line 137 in "
    "0.18.0-0.21.0, 138 in 0.22.0/0.23.0, 140 in 0.24.0, 128 in 0.34.0. Entries are (first, last_read, "
    "kind, code)",
    read_from=f"{_SDISTS} 0.18.0, 0.19.0, 0.19.1, 0.20.0, 0.20.1, 0.21.0, 0.22.0, 0.23.0, 0.24.0 .. 0.34.0 "
    "(each release read); the 0.20.1 and 0.24.0 wheels carry the same file",
    note="Documentation and fallback only: the doctor reads the guard from the installed vLLM by AST. "
    "Consequences with flash-attn whose flash_attn/__init__.py imports flash_attn_2_cuda unguarded "
    "(every release to 2.8.3.post2): find_spec kinds are FATAL whenever find_spec('flash_attn') finds "
    "anything and the import then fails for any reason, including a namespace-only flash_attn "
    "(flash-attn-4 alone: ModuleNotFoundError 'flash_attn.ops') and a missing flash_attn_2_cuda. "
    "suppress_module_not_found survives those two but not ImportError (undefined symbol, GLIBC_2.32), "
    "which is fatal in every version.",
)

REQUIRES_EXTERNAL_FLASH_ATTN: Fact[bool] = Fact(
    value=False,
    source="wheel METADATA Requires-Dist: no flash-attn / flash_attn entry (vLLM bundles its own build as "
    "vllm/vllm_flash_attn/, _vllm_fa2_C.abi3.so 183 MiB and _vllm_fa3_C.abi3.so 145 MiB in the 0.20.1 wheel)",
    read_from="vllm 0.20.1 and 0.24.0 wheels",
)

# ---------------------------------------------------------------------------------------------------------
# DFlash
# ---------------------------------------------------------------------------------------------------------

DFLASH_FIRST_RELEASE: Fact[str] = Fact(
    value="0.20.0",
    source="vllm/model_executor/models/qwen3_dflash.py and vllm/v1/spec_decode/dflash.py are absent from the "
    "0.18.0, 0.19.0, 0.19.1 sdists and present from 0.20.0 on",
    read_from=f"{_SDISTS} 0.18.0 .. 0.34.0",
    note="0.34.0 no longer has vllm/v1/spec_decode/dflash.py (the proposer moved to "
    "vllm/v1/worker/gpu/spec_decode/dflash/); qwen3_dflash.py is still there.",
)

DFLASH_REGISTRY: Fact[dict[str, tuple[str, str]]] = Fact(
    value={"DFlashDraftModel": ("qwen3_dflash", "DFlashQwen3ForCausalLM")},
    source="vllm/model_executor/models/registry.py _SPECULATIVE_DECODING_MODELS: "
    '"DFlashDraftModel": ("qwen3_dflash", "DFlashQwen3ForCausalLM") (0.20.1 line 576, 0.24.0 line 606, '
    "0.34.0 line 686)",
    read_from=_THREE,
    note="The only DFlash entry in 0.20.x-0.24.0. 0.34.0 adds DFlash2DraftModel, DFlash2BeamDraftModel, "
    "DFlash2RicursiveDraftModel, (DFlash)MuseGlimmerAssistantModel, DFlashQwen3XPressModel and "
    "DFlashLagunaForCausalLM.",
)

DFLASH_ARCHITECTURE_RULE: Fact[str] = Fact(
    value='arch if arch.startswith("DFlash") or arch.endswith("DFlash") else f"DFlash{arch}"',
    source='vllm/transformers_utils/configs/eagle.py EAGLEConfig.__init__, `elif method == "dflash":` '
    "branch (line 71 in 0.20.1, 0.24.0 and 0.34.0): applied to every name in the drafter's `architectures`",
    read_from=_THREE,
    note="So architectures ['DFlashDraftModel'] is kept and resolves to qwen3_dflash; ['Qwen3ForCausalLM'] "
    "becomes 'DFlashQwen3ForCausalLM', which is no registry key in 0.20.x-0.24.0. 0.34.0 also keeps "
    "'LiLiCorrDraftModel' unchanged.",
)

DFLASH_METHOD_AUTODETECT: Fact[str] = Fact(
    value='"dflash" in draft_model_config.model.lower()',
    source="vllm/config/speculative.py SpeculativeConfig.__post_init__ method auto-detection (0.20.1 line "
    "591, 0.24.0 line 746; checked after 'eagle-' and 'eagle3' in the path); 0.34.0: "
    "vllm/v1/worker/gpu/spec_decode/dflash/config.py DFlashSpeculatorConfig.matches (line 24-25)",
    read_from=_THREE,
    note="Without method='dflash' in --speculative-config, a drafter whose path does not contain 'dflash' is "
    "not detected as DFlash.",
)

DFLASH_TARGET_MODEL_TYPE_ALLOWLIST: Fact[tuple[tuple[str, str, tuple[str, ...]], ...]] = Fact(
    value=(
        (
            "0.20.0",
            "0.20.1",
            (
                "llama",
                "qwen",
                "minicpm",
                "gpt_oss",
                "hunyuan_vl",
                "hunyuan_v1_dense",
                "afmoe",
                "nemotron_h",
                "deepseek_v2",
                "deepseek_v3",
                "kimi_k2",
                "kimi_k25",
                "minimax_m2",
                "gemma4",
            ),
        ),
        (
            "0.21.0",
            "0.21.0",
            (
                "llama",
                "qwen",
                "minicpm",
                "gpt_oss",
                "hunyuan_vl",
                "hunyuan_v1_dense",
                "afmoe",
                "nemotron_h",
                "deepseek_v2",
                "deepseek_v3",
                "kimi_k2",
                "kimi_k25",
                "minimax_m2",
                "laguna",
                "gemma4",
            ),
        ),
    ),
    source="vllm/config/speculative.py (0.20.1 line 905) aux_hidden_states_supported: for method in "
    "('eagle3', 'extract_hidden_states', 'dflash') the target hf_text_config.model_type must CONTAIN one of "
    'these, else ValueError(f"{self.method} is only supported for {aux_hidden_states_supported} models. '
    'Got {self.target_model_config.hf_text_config.model_type=}")',
    read_from=f"{_V0201}; 0.20.0 and 0.21.0 sdists (present), 0.22.0, 0.23.0, 0.24.0, 0.28.0, 0.34.0 "
    "(absent)",
    note="Entries are (first, last_read, substrings); 0.21.0 adds 'laguna'. From 0.22.0 there is no such "
    "allowlist.",
)

_V1_PROPOSER = "vllm/v1/spec_decode/llm_base_proposer.py:_init_parallel_drafting_params"
_V2_RUNNER = "vllm/v1/worker/gpu/spec_decode/utils.py:get_parallel_drafting_token_id"
_MASK_ORDER_OLD = ("dflash_config.mask_token_id", "pard_token", "ptd_token_id")
_MASK_ORDER_NEW = (
    "dflash_config.mask_token_id",
    "mask_token_id",
    "dspark_noise_token_id",
    "pard_token",
    "ptd_token_id",
)

DFLASH_MASK_TOKEN_LOOKUP: Fact[tuple[tuple[str, str, str, tuple[str, ...]], ...]] = Fact(
    value=(
        ("0.20.0", "0.27.0", _V1_PROPOSER, _MASK_ORDER_OLD),
        ("0.24.0", "0.24.0", _V2_RUNNER, _MASK_ORDER_OLD),
        ("0.25.0", "0.34.0", _V2_RUNNER, _MASK_ORDER_NEW),
        ("0.28.0", "0.33.0", _V1_PROPOSER, _MASK_ORDER_NEW),
    ),
    source="0.20.1 llm_base_proposer.py:326-345 and 0.24.0 llm_base_proposer.py:330-349 (V1 proposer); "
    "0.24.0 v1/worker/gpu/spec_decode/utils.py:54-70 and 0.34.0 utils.py:141-163 (model runner V2 path). "
    "Entries are (first, last_read, function, lookup order); 'mask_token_id' is the top-level config "
    "attribute",
    read_from=f"{_V0201}; {_V0240}; {_V0340}; top-level lookup checked in every sdist 0.24.0 .. 0.34.0",
    note="Two code paths: the V1 proposer (llm_base_proposer.py; gone in 0.34.0) and the model runner V2 "
    "path (vllm/v1/worker/gpu/, from 0.24.0); which one runs is VllmConfig.use_v2_model_runner (0.24.0 "
    "config/vllm.py:522: VLLM_USE_V2_MODEL_RUNNER if set, else a per-model default). 0.33.0 V1 order: "
    "llm_base_proposer.py:363-372. Missing key -> ValueError at drafter set-up, see "
    "DFLASH_MASK_TOKEN_ERRORS.",
)

DFLASH_MASK_TOKEN_ERRORS: Fact[dict[str, str]] = Fact(
    value={
        "0.20.1": "For parallel drafting, the draft model config must have `pard_token`, `ptd_token_id`, or "
        "`dflash_config.mask_token_id` specified in its config.json.",
        "0.24.0-v2-runner": "Model config must specify `dflash_config.mask_token_id`, `pard_token`, or "
        "`ptd_token_id` for parallel drafting.",
        "0.34.0": "Model config must specify `dflash_config.mask_token_id`, `mask_token_id`, "
        "`dspark_noise_token_id`, `pard_token`, or `ptd_token_id` for parallel drafting.",
    },
    source="ValueError texts: 0.20.1 v1/spec_decode/llm_base_proposer.py:341-345 (same text in 0.24.0 "
    "lines 345-349); 0.24.0 v1/worker/gpu/spec_decode/utils.py:67-70; 0.34.0 same file lines 159-163",
    read_from=_THREE,
)

DFLASH_TARGET_LAYER_IDS_PLUS_ONE: Fact[tuple[tuple[str, str, bool], ...]] = Fact(
    value=(("0.20.0", "0.21.0", False), ("0.22.0", "0.34.0", True)),
    source="vllm/v1/worker/gpu_model_runner.py GPUModelRunner._get_eagle3_aux_layers_from_config: 0.20.1 "
    '(line 4945, 4961-4965) `layer_ids = dflash_config.get("target_layer_ids")` used as-is; 0.22.0 '
    "(line 5225, 5247-5250) `# Add 1 to convert DFlash's aux layer id semantics` `layer_ids = [i + 1 for i "
    'in (dflash_config.get("target_layer_ids") or [])]`; 0.24.0+ the V2 runner does the same in '
    "v1/worker/gpu/spec_decode/eagle/eagle3_utils.py (0.24.0 line 46, 0.34.0 line 114)",
    read_from=f"{_SDISTS} 0.20.0 .. 0.34.0 (each release read)",
    note="Entries are (first, last_read, converts). vLLM aux id L is the output of target layer L-1 (id 0 = "
    "embeddings: qwen2.py `_maybe_add_hidden_state(aux, 0, ...)` then `idx + 1` after each layer), while "
    "DFlash target_layer_ids name the output of layer id itself; so 0.20.x/0.21.0 feed the drafter the "
    "hidden states one layer early. eagle_aux_hidden_state_layer_ids, when present, wins in all versions.",
)

# ---------------------------------------------------------------------------------------------------------
# Serve-time config validation
# ---------------------------------------------------------------------------------------------------------

VERIFY_MAX_MODEL_LEN_MESSAGES: Fact[dict[str, str]] = Fact(
    value={
        "batched_lt_model_len": "max_num_batched_tokens ({max_num_batched_tokens}) is smaller than "
        "max_model_len ({max_model_len}). This effectively limits the maximum sequence length to "
        "max_num_batched_tokens and makes vLLM reject longer sequences. Please increase "
        "max_num_batched_tokens or decrease max_model_len.",
        "batched_lt_num_seqs": "max_num_batched_tokens ({max_num_batched_tokens}) must be greater than or "
        "equal to max_num_seqs ({max_num_seqs}).",
    },
    source="vllm/config/scheduler.py SchedulerConfig.verify_max_model_len (0.20.1 line 259, 0.24.0 line 272, "
    "0.34.0 line 361): the first raises only when `max_num_batched_tokens < max_model_len and not "
    "enable_chunked_prefill` (chunked prefill defaults to True); the second whenever "
    "max_num_batched_tokens < max_num_seqs",
    read_from=_THREE,
    note="0.20.1 and 0.24.0 also warn when max_num_batched_tokens > max_num_seqs * max_model_len; 0.34.0 "
    "replaced that warning with a max_num_active_seqs check.",
)

WORLD_SIZE_GPU_MESSAGE: Fact[str] = Fact(
    value="World size ({world_size}) is larger than the number of available GPUs ({gpu_count}) in this node. "
    "If this is intentional and you are using:\n- ray, set '--distributed-executor-backend ray'.\n"
    "- multiprocessing, set '--nnodes' appropriately.",
    source="vllm/config/parallel.py ParallelConfig.__post_init__ (0.20.1 line 812, 0.24.0 line 889, 0.34.0 "
    "line 1165): raised on CUDA when no executor backend was given, nnodes == 1 and "
    "current_platform.device_count() < world_size",
    read_from=_THREE,
    note="world_size = tensor_parallel_size * pipeline_parallel_size (* prefill context parallel).",
)

HEADS_TP_MESSAGE: Fact[str] = Fact(
    value="Total number of attention heads ({total_num_attention_heads}) must be divisible by tensor "
    "parallel size ({tensor_parallel_size}).",
    source="vllm/config/model.py ModelConfig.verify_with_parallel_config (0.20.1 line 1127, 0.24.0 line "
    "1167, 0.34.0 line 1581)",
    read_from=_THREE,
)

DRAFT_TP_RULE: Fact[str] = Fact(
    value="draft_tensor_parallel_size unset -> target tensor_parallel_size (1 for mlp_speculator); "
    "set -> must be 1 or the target tensor_parallel_size",
    source="vllm/config/speculative.py SpeculativeConfig._verify_and_get_draft_tp (0.20.1 line 789, 0.24.0 "
    "line 932)",
    read_from=_THREE,
    note="0.34.0 additionally checks the draft decode-context-parallel size (1 or the target's).",
)

DRAFT_TP_MESSAGE: Fact[str] = Fact(
    value="speculative_draft_tensor_parallel_size={n} cannot be other value than 1 or target model "
    "tensor_parallel_size",
    source="vllm/config/speculative.py _verify_and_get_draft_tp: "
    'f"{speculative_draft_tensor_parallel_size=} '
    'cannot be " f"other value than 1 or target model tensor_parallel_size" (0.20.1 line 819, 0.24.0 line '
    "962, 0.34.0 line 1549)",
    read_from=_THREE,
)

_RULE_0_20 = (
    "max_num_scheduled_tokens = max_num_batched_tokens - (k - 1) * max_num_seqs for DFlash "
    "(max_num_new_slots_for_drafting = k - 1 with parallel drafting); error if <= 0"
)
_MSG_NO_TOKENS_0_20 = (
    "max_num_scheduled_tokens is set to {n} based on the speculative decoding settings, which does not allow "
    "any tokens to be scheduled. Increase max_num_batched_tokens to accommodate the additional draft token "
    "slots, or decrease num_speculative_tokens or max_num_seqs."
)
_MSG_RECEIVED_0_20 = (
    "VllmConfig received max_num_scheduled_tokens but it does not have enough slots to support the "
    "speculative decoding settings. It should be greater by at least {scheduled_token_delta}, but got "
    "max_num_batched_tokens={a} and max_num_scheduled_tokens={b}."
)
_RULE_0_28 = (
    "error if max_num_batched_tokens <= scheduled_token_delta, where scheduled_token_delta = "
    "max_num_new_slots_for_drafting = k for DFlash"
)
_MSG_SLOTS_0_28 = (
    "VllmConfig does not have enough slots to schedule a token and support the speculative decoding "
    "settings. Got max_num_batched_tokens={a} and scheduled_token_delta={d}."
)
_RULE_0_33 = (
    "error if max_num_batched_tokens <= num_lookahead_tokens, where num_lookahead_tokens = k + 1 for DFlash"
)
_MSG_SLOTS_0_33 = (
    "VllmConfig does not have enough slots to schedule a token and support the speculative decoding "
    "settings. Got max_num_batched_tokens={a} and num_lookahead_tokens={n}."
)

SPEC_DECODE_SLOT_RULES: Fact[tuple[tuple[str, str, str, tuple[str, ...]], ...]] = Fact(
    value=(
        ("0.20.0", "0.27.0", _RULE_0_20, (_MSG_NO_TOKENS_0_20, _MSG_RECEIVED_0_20)),
        ("0.28.0", "0.32.0", _RULE_0_28, (_MSG_SLOTS_0_28,)),
        ("0.33.0", "0.34.0", _RULE_0_33, (_MSG_SLOTS_0_33,)),
    ),
    source="vllm/config/vllm.py VllmConfig._set_max_num_scheduled_tokens (0.20.1 line 1373, 0.24.0 line "
    "1585, 0.28.0 line 1839, 0.33.0 line 2341, 0.34.0 line 2263) with SpeculativeConfig."
    "max_num_new_slots_for_drafting (0.20.1 speculative.py:954 `slots_per_req = self.num_speculative_tokens "
    "- 1` when parallel_drafting, which DFlash sets; 0.28.0 speculative.py:1421 'DFlash uses one bonus query "
    "followed by K mask queries' -> K) and VllmConfig.num_lookahead_tokens (0.33.0 vllm.py:626, 0.34.0 via "
    "DFlashSpeculatorConfig.num_lookahead_tokens = num_speculative_tokens + 1)",
    read_from=f"{_SDISTS} 0.20.0 .. 0.34.0 (each release read for which message is present)",
    note="Entries are (first, last_read, rule, messages); k = num_speculative_tokens. All releases also warn "
    "when max_num_scheduled_tokens < 8192. The 0.20-0.27 rule is the one most likely to bite a DFlash "
    "deployment: k=15 with max_num_seqs=256 removes 3584 tokens from the scheduling budget.",
)

DFLASH_MAX_DRAFT_SEQS: Fact[tuple[tuple[str, str, str], ...]] = Fact(
    value=(("0.33.0", "0.34.0", "max_num_batched_tokens // (num_speculative_tokens + 1)"),),
    source="0.33.0 vllm/config/vllm.py:2384 `max_draft_seqs = max_num_batched_tokens // "
    "self.num_lookahead_tokens` for use_dflash()/use_dspark(); 0.34.0 "
    "v1/worker/gpu/spec_decode/dflash/config.py:58-60 max_num_draft_seqs(); if lower than "
    "max_num_active_seqs "
    "(or max_num_seqs) it overrides max_num_active_seqs with a warning ('The %s draft pass fits at most %d "
    "requests within max_num_batched_tokens=%d. Overriding max_num_active_seqs from %d to %d.' in 0.34.0)",
    read_from=f"{_SDISTS} 0.27.0 .. 0.34.0 (absent up to 0.32.0)",
    note="Entries are (first, last_read, formula). Before 0.33.0 there is no such cap; see "
    "SPEC_DECODE_SLOT_RULES for the older budget rule.",
)

# ---------------------------------------------------------------------------------------------------------
# Attention backends
# ---------------------------------------------------------------------------------------------------------

ATTENTION_BACKEND_PRIORITY: Fact[dict[str, tuple[str, ...]]] = Fact(
    value={
        "sm100_causal": ("FLASHINFER", "FLASH_ATTN", "TRITON_ATTN", "FLEX_ATTENTION", "TURBOQUANT"),
        "sm100_non_causal_0.26+": ("FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION", "TURBOQUANT"),
        "other_archs": ("FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION", "TURBOQUANT"),
    },
    source="vllm/platforms/cuda.py _get_backend_priorities, non-MLA branch (0.20.1 line 79, 0.24.0 line 84, "
    "0.34.0 line 81): `if device_capability.major == 10:` FlashInfer first, else FlashAttention first; from "
    "0.26.0 the condition is `device_capability.major == 10 and not use_non_causal` ('SM100f ... non-causal "
    "cutlass path (used for dflash attention) is known to have problems. So prefer FlashAttention')",
    read_from=f"{_THREE}; 0.25.0 (old rule) and 0.26.0 (new rule) sdists",
    note="'other_archs' covers SM80/86/89/90/12x. 0.34.0 prepends TRITON_FLASHINFER (SM100) or "
    "TRITON_FLASH_ATTN (SM90) for use_mm_prefix models. The first VALID backend in this order is used; "
    "validity includes non-causal support, see NON_CAUSAL_BACKENDS.",
)

NON_CAUSAL_BACKENDS: Fact[tuple[tuple[str, str, tuple[str, ...]], ...]] = Fact(
    value=(
        ("0.20.0", "0.23.0", ("FLASH_ATTN", "FLEX_ATTENTION")),
        ("0.24.0", "0.34.0", ("FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION")),
    ),
    source="AttentionBackend.supports_non_causal() defaults to False (0.20.1 "
    "vllm/v1/attention/backend.py:229, "
    "0.24.0 line 261); overridden to return True in v1/attention/backends/flash_attn.py and "
    "flex_attention.py (0.20.1 lines 111, 94) and, from 0.24.0, flashinfer.py (0.24.0 line 363) and "
    "triton_attn.py (line 278). validate_configuration adds 'non-causal attention not supported' "
    "(0.20.1 backend.py:318-319)",
    read_from=f"{_SDISTS} 0.20.1 .. 0.34.0 (CUDA backends only; ROCm and CPU ones omitted)",
    note="Entries are (first, last_read, backends). On 0.20.x-0.23.0 a DFlash drafter can therefore run only "
    "on FLASH_ATTN (compute capability >= 8.0) or FLEX_ATTENTION.",
)

DFLASH_NON_CAUSAL_SCOPE: Fact[tuple[tuple[str, str, str], ...]] = Fact(
    value=(
        ("0.20.0", "0.20.1", "all layers, target included"),
        ("0.21.0", "0.22.0", "drafter only"),
        ("0.23.0", "0.34.0", "drafter only, unless dflash_config.causal is true"),
    ),
    source="0.20.1 vllm/v1/attention/selector.py:84-87 `use_non_causal = (speculative_config is not None and "
    'speculative_config.method == "dflash")` for every attention layer; 0.21.0/0.22.0 '
    "v1/spec_decode/dflash.py:78 sets attention_config use_non_causal=True in the draft VllmConfig only "
    "(selector reads vllm_config.attention_config.use_non_causal); 0.23.0 line 80 and 0.24.0 line 85: "
    "`use_non_causal=not self.dflash_causal`",
    read_from=f"{_SDISTS} 0.20.0 .. 0.24.0; 0.34.0 selector.py:170",
    note="Entries are (first, last_read, scope). On 0.20.x the TARGET model must also get a "
    "non-causal-capable "
    "backend, so FlashInfer/Triton are excluded for it too. 0.20.x assertion when the metadata is causal: "
    "'Attention metadata for layer {layer_name} does not have non-causal support, which is required for "
    "DFlash. Consider using a different attention backend, such as FlashAttention.'",
)

FLASH_ATTN_BACKEND_MIN_COMPUTE_CAPABILITY: Fact[tuple[int, int]] = Fact(
    value=(8, 0),
    source="vllm/v1/attention/backends/flash_attn.py FlashAttentionBackend.supports_compute_capability: "
    "`return capability >= DeviceCapability(8, 0)` (0.20.1 line 202-203)",
    read_from=_V0201,
)

NO_VALID_BACKEND_MESSAGES: Fact[dict[str, str]] = Fact(
    value={
        "selected_invalid": "Selected backend {selected_backend} is not valid for this configuration. "
        "Reason: {invalid_reasons}",
        "none_valid": "No valid attention backend found for {device_name} with {config_str}. "
        "Reasons: {reasons_str}.",
    },
    source="vllm/platforms/cuda.py get_attn_backend_cls (0.20.1 lines 304-305 and 333-334; 0.24.0 lines 416 "
    "and 445; 0.34.0 lines 480/485 and 514)",
    read_from=_THREE,
)

ATTENTION_BACKEND_CLI_FLAG: Fact[str] = Fact(
    value="--attention-backend",
    source='vllm/engine/arg_utils.py: `"--attention-backend", **attention_kwargs["backend"]` '
    "(AttentionConfig.backend); first in 0.13.0 (arg_utils.py:727), absent in 0.12.0; 0.20.1 line 859",
    read_from=f"vllm 0.12.0, 0.13.0, 0.14.0, 0.16.0, 0.17.0 sdists; {_V0201}; {_V0240}; {_V0340}",
    note="Values are AttentionBackendEnum names, e.g. FLASH_ATTN, FLASHINFER, TRITON_ATTN, FLEX_ATTENTION.",
)

ATTENTION_BACKEND_ENV_REMOVED_IN: Fact[str] = Fact(
    value="0.15.0",
    source="VLLM_ATTENTION_BACKEND: 0.13.0 and 0.14.0 vllm/config/attention.py:93 "
    '`self._set_from_env_if_set("backend", "VLLM_ATTENTION_BACKEND")` with the warning \'Using %s '
    "environment variable is deprecated and will be removed in v0.14.0 or v1.0.0, whichever is soonest. "
    "Please use --attention-config.%s command line argument or AttentionConfig(%s=...) config field "
    "instead.'; no occurrence in the 0.15.0 wheel's vllm/envs.py or vllm/config/attention.py, nor anywhere "
    "in the 0.16.0 .. 0.34.0 sources",
    read_from="vllm 0.11.0 .. 0.14.0 sdists, 0.15.0 wheel (509 MB; no sdist on PyPI), 0.16.0 .. 0.34.0 "
    "sdists",
    note="From 0.15.0 the variable is silently ignored. Deprecated (still honoured) in 0.13.0 and 0.14.0.",
)

DRAFT_ATTENTION_BACKEND_FIELD: Fact[str] = Fact(
    value="0.21.0",
    source="vllm/config/speculative.py SpeculativeConfig.attention_backend: AttentionBackendEnum | None "
    "('Attention backend to use for the draft model ... e.g. DFlash needs a non-causal-capable backend like "
    "FLASH_ATTN', 0.24.0 line 112); absent in 0.20.0/0.20.1, present from 0.21.0",
    read_from=f"{_SDISTS} 0.20.0 .. 0.24.0, 0.34.0",
    note="Value = first release with a drafter-only backend (--speculative-config "
    '\'{"attention_backend": "FLASH_ATTN", ...}\'); on 0.20.x --attention-backend applies to target and '
    "drafter alike.",
)

# ---------------------------------------------------------------------------------------------------------
# Pins and wheels
# ---------------------------------------------------------------------------------------------------------

TORCH_PINS: Fact[dict[str, dict[str, str]]] = Fact(
    value={
        "0.20.1": {
            "torch": "==2.11.0",
            "torchaudio": "==2.11.0",
            "torchvision": "==0.26.0",
            "flashinfer-python": "==0.6.8.post1",
            "flashinfer-cubin": "==0.6.8.post1",
            "python": "<3.15,>=3.10",
        },
        "0.24.0": {
            "torch": "==2.11.0",
            "torchaudio": "==2.11.0",
            "torchvision": "==0.26.0",
            "flashinfer-python": "==0.6.12",
            "flashinfer-cubin": "==0.6.12",
            "python": "<3.15,>=3.10",
        },
    },
    source="vllm-*.dist-info/METADATA Requires-Dist and Requires-Python of the x86_64 wheels; the same pins "
    "are in each sdist's requirements/cuda.txt lines 7-13",
    read_from="vllm-0.20.1-1-cp38-abi3-manylinux_2_35_x86_64.whl (sha256 11907857...); "
    "vllm-0.24.0-cp38-abi3-manylinux_2_28_x86_64.whl (sha256 2d2831ae...)",
    note="No flash-attn requirement in either. 0.24.0 also requires transformers>=5.5.3; 0.20.1 "
    "transformers>=4.56.0 excluding 5.0-5.4 and 5.5.0.",
)

WHEEL_PLATFORM_TAGS: Fact[dict[str, str]] = Fact(
    value={"0.20.1": "manylinux_2_35_x86_64", "0.24.0": "manylinux_2_28_x86_64"},
    source="PyPI wheel file names: vllm-0.20.1-1-cp38-abi3-manylinux_2_35_x86_64.whl (build tag 1) and "
    "vllm-0.24.0-cp38-abi3-manylinux_2_28_x86_64.whl",
    read_from="PyPI wheels vllm 0.20.1 (sha256 11907857...) and 0.24.0 (sha256 2d2831ae...), hashes matching "
    "PyPI's simple index",
    note="manylinux_2_35 means pip installs the 0.20.1 wheel only on glibc >= 2.35 (Ubuntu 22.04+).",
)


# Device queries vLLM's compiled ops answer from the GPU's capability alone, which the doctor's simulated
# platform answers as the op does when the compiled module that registers them cannot load (no CUDA driver):
# (first, last_read release, the module that registers them, the op, the capability ranges [low, high) where the op
# returns true). Every one has the schema `(int cuda_device_capability) -> bool`.
DEVICE_QUERY_OPS: Fact[tuple[tuple[str, str, str, str, tuple[tuple[int, int], ...]], ...]] = Fact(
    value=(
        ("0.20.1", "0.23.0", "vllm._C_stable_libtorch", "_C::cutlass_scaled_mm_supports_fp8", ((89, 1000),)),
        ("0.20.1", "0.23.0", "vllm._C_stable_libtorch", "_C::cutlass_scaled_mm_supports_block_fp8", ((90, 1000),)),
        ("0.20.1", "0.23.0", "vllm._C_stable_libtorch", "_C::cutlass_group_gemm_supported", ((90, 1000),)),
        ("0.20.1", "0.23.0", "vllm._C_stable_libtorch", "_C::cutlass_scaled_mm_supports_fp4", ((100, 130),)),
        ("0.24.0", "0.34.0", "vllm._C_stable_libtorch", "_C::cutlass_scaled_mm_supports_fp8", ((89, 1000),)),
        ("0.24.0", "0.34.0", "vllm._C_stable_libtorch", "_C::cutlass_scaled_mm_supports_block_fp8", ((90, 1000),)),
        ("0.24.0", "0.34.0", "vllm._C_stable_libtorch", "_C::cutlass_group_gemm_supported", ((90, 120),)),
        ("0.24.0", "0.34.0", "vllm._C_stable_libtorch", "_C::cutlass_scaled_mm_supports_fp4", ((100, 130),)),
    ),
    source="STABLE_TORCH_LIBRARY_FRAGMENT(_C, ops) defines `cutlass_scaled_mm_supports_fp8(int "
    "cuda_device_capability) -> bool` and its siblings, implemented for CompositeExplicitAutograd, in "
    "csrc/libtorch_stable/torch_bindings.cpp (0.20.1 .. 0.31.0) or csrc/torch_bindings.cpp (0.32.0 .. 0.34.0); "
    "CMakeLists.txt builds it into vllm/_C_stable_libtorch with VLLM_GPU_FLAGS (ENABLE_CUTLASS_MOE_SM90/SM100, "
    "ENABLE_NVFP4_SM100/SM120), and vllm/platforms/cuda.py imports that module. "
    "scaled_mm_entry.cu (csrc/libtorch_stable/quantization/w8a8/cutlass/ up to 0.31.0, "
    "csrc/quantization/w8a8/cutlass/ after): supports_fp8 `>= 90: CUDA_VERSION >= 12000; >= 89: "
    "CUDA_VERSION >= 12040`, supports_block_fp8 `>= 100: CUDA_VERSION >= 12080; >= 90: CUDA_VERSION >= 12000`; "
    "group_gemm_supported 0.20.1 .. 0.23.0 `>= 100: CUDA_VERSION >= 12080; >= 90: >= 12030`, 0.24.0 .. 0.34.0 "
    "`[100, 120): CUDA_VERSION >= 12080` (ENABLE_CUTLASS_MOE_SM100) and `[90, 100): >= 12030` "
    "(ENABLE_CUTLASS_MOE_SM90); nvfp4_scaled_mm_entry.cu: supports_fp4 `runtime >= 12080`, [100, 120) "
    "(ENABLE_NVFP4_SM100) and [120, 130) (ENABLE_NVFP4_SM120), the same body in every release read. The PyPI "
    "wheels are built with CUDA 13.0 (envs.py VLLM_MAIN_CUDA_VERSION default \"13.0\" from 0.20.1 on), so every "
    "CUDA_VERSION clause holds. model_executor/layers/quantization/utils/w8a8_utils.py asks "
    "`CUTLASS_FP8_SUPPORTED = cutlass_fp8_supported()` (up to 0.28.0) and `CUTLASS_BLOCK_FP8_SUPPORTED = "
    "cutlass_block_fp8_supported()` at import: the import of a model module such as qwen3.py",
    read_from=f"{_SDISTS} 0.20.1, 0.21.0, 0.22.0, 0.22.1, 0.23.0, 0.24.0, 0.25.1, 0.26.0, 0.27.1, 0.28.0, 0.29.0, "
    "0.30.0, 0.31.0, 0.32.0, 0.33.0, 0.34.0 (csrc/, CMakeLists.txt, vllm/platforms/cuda.py, w8a8_utils.py; "
    "each function body compared across releases)",
    note="0.18.0 and 0.19.1 register these ops in vllm/_C (csrc/torch_bindings.cpp, TORCH_LIBRARY) and build with "
    "CUDA 12.9; they are not answered, nor is a release between the two ranges (0.23.1 .. 0.23.x, none on PyPI as "
    "read) or past the last read: its model classes are then learned in vLLM's own subprocess.",
)
