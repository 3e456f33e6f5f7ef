"""What vLLM requires of a DFlash drafter, its target and the `vllm serve` command line.

Read from vLLM's own source (sdists 0.19.1, 0.20.0, 0.20.1, 0.21.0, 0.22.0, 0.23.0, 0.24.0 and 0.34.0), with
z-lab/dflash and SGLang where vLLM follows them. Where a rule changed between versions, the doctor does not
guess from the version number: it looks for the marker text below in the *installed* vLLM's source
(`dflash_doctor.facts.serve.serve.read_vllm_dflash`) and falls back to the version ranges recorded here only
when no source can be read.
"""

from __future__ import annotations

from typing import Any

from dflash_doctor.knowledge import Fact

__all__ = [
    "ATTENTION_FALLBACK",
    "AUX_HIDDEN_STATE_MODEL_TYPES",
    "BATCH_DEFAULTS",
    "BATCH_HUGE_MARKER",
    "DFLASH_ARCH_RENAME",
    "DFLASH_FIRST_VERSION",
    "DFLASH_INSTALL_SPEC",
    "DFLASH_MODEL_FILE",
    "DRAFTER_REGISTRY_ARCH",
    "DRAFT_TP_RULE",
    "DTYPE_AUTO_DOWNCAST",
    "FC_INPUT_RULE",
    "FLASH_ATTN_QUANTIZED_KV",
    "HEADS_DIVISIBLE_RULE",
    "KV_CACHE_ONE_SEQUENCE",
    "KV_HEADS_TP_RULE",
    "LAYER_IDS_PLUS_ONE_MARKER",
    "MASK_HIDDEN_FORBIDDEN",
    "MASK_TOKEN_RULE",
    "MASK_TOP_LEVEL_MARKER",
    "MAX_LEN_DERIVATION",
    "MAX_MODEL_LEN_RULE",
    "METHOD_DETECTION",
    "NON_CAUSAL_SCOPE",
    "NUM_SPEC_TOKENS_REQUIRED",
    "SAMPLE_FROM_ANCHOR_MARKER",
    "SCHEDULER_RULES",
    "SLIDING_WINDOW_MARKER",
    "SPEC_BLOCK",
    "SPEC_BUDGET_RULES",
    "SPEC_BUDGET_RULE_A",
    "SPEC_BUDGET_RULE_B",
    "TARGET_HIDDEN_SIZE_NULL",
    "TARGET_LAYER_IDS_REQUIRED",
    "UNIFORM_LAYER_HEURISTIC",
    "UNSUPPORTED_DRAFTER_TENSORS",
    "WEIGHT_LOADER_STRICT",
    "WORLD_SIZE_RULE",
    "YARN_ALREADY_SCALED_MARKER",
    "uniform_layer_ids",
]

_ALL_READ = "vllm sdists 0.20.0, 0.20.1, 0.21.0, 0.22.0, 0.23.0, 0.24.0, 0.34.0"

DFLASH_MODEL_FILE: Fact[str] = Fact(
    value="vllm/model_executor/models/qwen3_dflash.py",
    source="vllm/model_executor/models/qwen3_dflash.py (DFlashQwen3ForCausalLM) and the registry entry "
    "`\"DFlashDraftModel\": (\"qwen3_dflash\", \"DFlashQwen3ForCausalLM\")` in vllm/model_executor/models/registry.py",
    read_from="absent from the vllm 0.19.1 sdist; present in " + _ALL_READ,
    note="The doctor decides whether the installed vLLM has DFlash by this file, not by its version.",
)

DFLASH_FIRST_VERSION: Fact[str] = Fact(
    value="0.20.0",
    source="qwen3_dflash.py and vllm/v1/spec_decode/dflash.py first appear in the 0.20.0 sdist; "
    "`DFlashModelTypes = Literal[\"dflash\"]` first appears in vllm/config/speculative.py 0.20.0",
    read_from="vllm sdists 0.19.1 (absent) and 0.20.0 (present)",
)

DFLASH_INSTALL_SPEC: Fact[str] = Fact(
    value="vllm>=0.20.1",
    source="DFlash first ships in vLLM 0.20.0 (DFLASH_FIRST_VERSION); 0.20.1 is the oldest release the doctor's "
    "rules and recorded engine runs were taken from (fixtures/engine, tests/test_fact_shapes.py's vLLM 0.20.1 "
    "environment), so it is the floor a remediation installs",
    read_from="vllm 0.20.1 sdist and wheel; fixtures/engine (vLLM 0.20.1 on an H200)",
)

DRAFTER_REGISTRY_ARCH: Fact[str] = Fact(
    value="DFlashDraftModel",
    source="vllm/model_executor/models/registry.py `_SPECULATIVE_DECODING_MODELS`: "
    "`\"DFlashDraftModel\": (\"qwen3_dflash\", \"DFlashQwen3ForCausalLM\")` (line 576 in 0.20.1, 686 in 0.34.0; "
    "0.34.0 adds DFlash2DraftModel, DFlashLagunaForCausalLM and others)",
    read_from=_ALL_READ,
    note="The doctor reads the accepted names from the installed registry.py (AST), so new variants count.",
)

DFLASH_ARCH_RENAME: Fact[str] = Fact(
    value="an architecture that neither starts nor ends with 'DFlash' is renamed DFlash{arch} before the "
    "registry lookup",
    source="vllm/transformers_utils/configs/eagle.py EAGLEConfig.__init__: `elif method == \"dflash\": "
    "kwargs[\"architectures\"] = [arch if arch.startswith(\"DFlash\") or arch.endswith(\"DFlash\") else "
    "f\"DFlash{arch}\" for arch in self.model.architectures]`; then SpeculativeConfig.update_arch_() looks the "
    "names up with registry.inspect_model_cls",
    read_from=_ALL_READ,
)

METHOD_DETECTION: Fact[str] = Fact(
    value="without `method`, vLLM picks 'dflash' only when 'dflash' is in the draft model path (lower-cased); "
    "otherwise the drafter is loaded as a plain 'draft_model'",
    source="vllm/config/speculative.py SpeculativeConfig.__post_init__: `if self.method is None: ... self.method "
    "= \"draft_model\"`, then `elif \"dflash\" in self.draft_model_config.model.lower(): self.method = \"dflash\"`",
    read_from="vllm 0.20.1 sdist (config/speculative.py lines 453 and 591)",
)

NUM_SPEC_TOKENS_REQUIRED: Fact[str] = Fact(
    value="num_speculative_tokens must be given for DFlash: drafters have no n_predict, and vLLM never reads "
    "their block_size",
    source="vllm/config/speculative.py SpeculativeConfig.__post_init__, for a draft model without n_predict: "
    "`raise ValueError(\"A speculative model was provided, but neither `speculative_token_tree` nor "
    "`num_speculative_tokens` was provided\")` (0.20.1 lines 672-678), which comes before _verify_args's own "
    "check; `num_speculative_tokens: int = Field(default=None, gt=0)` (line 76), so pydantic rejects 0 or less "
    "first: \"Input should be greater than 0\". Both messages are what vLLM 0.20.1's create_engine_config "
    "raised in tests/test_vllm_validation.py. 0.34.0 vllm/v1/worker/gpu/spec_decode/speculator_config.py: "
    "\"A speculative model was provided, but `num_speculative_tokens` was not provided\"",
    read_from="vllm 0.20.1 and 0.34.0 sdists; vLLM 0.20.1 run on its CPU platform",
)

SPEC_BLOCK: Fact[str] = Fact(
    value="a DFlash block is one anchor (bonus) token plus block_size - 1 mask tokens, so num_speculative_tokens "
    "fits the trained block when it is at most block_size - 1",
    source="vllm/v1/spec_decode/dflash.py set_inputs_first_pass: `num_query_per_req = 1 + "
    "self.num_speculative_tokens` (one bonus query followed by K mask queries); "
    "vllm/transformers_utils/configs/speculators/algos.py: 'anchor is a bonus token, only mask tokens predict, "
    "yielding block_size - 1 speculative tokens'; z-lab/dflash README serves its b16 drafters with "
    "num_speculative_tokens 15",
    read_from="vllm 0.20.1 and 0.34.0 sdists; z-lab/dflash 44947fb README",
    note="vLLM itself never compares K with block_size for DFlash (only DSpark checks its trained block), so "
    "a larger K starts and drafts past the trained block: a warning, derived.",
)

MASK_TOKEN_RULE: Fact[str] = Fact(
    value="the drafter's config.json must give dflash_config.mask_token_id",
    source="0.20.0-0.23.0 vllm/v1/spec_decode/llm_base_proposer.py _init_parallel_drafting_params: "
    "`dflash_config.mask_token_id`, else `pard_token`, else `ptd_token_id`, else `raise ValueError(\"For parallel "
    "drafting, the draft model config must have `pard_token`, `ptd_token_id`, or `dflash_config.mask_token_id` "
    "specified in its config.json.\")` (0.20.1 line 341); 0.24.0/0.34.0 "
    "vllm/v1/worker/gpu/spec_decode/utils.py get_parallel_drafting_token_id: \"Model config must specify "
    "`dflash_config.mask_token_id`, ...\"",
    read_from=_ALL_READ,
    note="The mask id is embedded with the target's embedding table, so it must be below the target's "
    "vocab_size (an id past the table is an out-of-range index on the GPU).",
)

MASK_TOP_LEVEL_MARKER: Fact[str] = Fact(
    value='getattr(hf_config, "mask_token_id", None)',
    source="0.34.0 vllm/v1/worker/gpu/spec_decode/utils.py get_parallel_drafting_token_id: a top-level "
    "`mask_token_id` is accepted after dflash_config.mask_token_id",
    read_from="vllm 0.34.0 sdist (absent from 0.20.0-0.24.0)",
)

TARGET_LAYER_IDS_REQUIRED: Fact[str] = Fact(
    value="dflash_config.target_layer_ids is required: the doctor never falls back to a formula",
    source="z-lab/dflash#156 and PR #157 (make target_layer_ids required); SGLang #37475 and PR #37476 (same); "
    "vLLM without ids falls back to EAGLE-3's (2, n//2, n-3) aux layers "
    "(vllm/model_executor/models/interfaces.py get_eagle3_default_aux_hidden_state_layers), which no DFlash "
    "drafter was trained on",
    read_from="/work/shared/research/dflash.md section 1; vllm 0.20.1 sdist",
)

UNIFORM_LAYER_HEURISTIC: Fact[str] = Fact(
    value="build_target_layer_ids(n_target, n_draft): [n_target // 2] for one draft layer, else "
    "round(1 + i * (n_target - 4) / (n_draft - 1)) for i in range(n_draft)",
    source="z-lab/dflash dflash/model.py build_target_layer_ids (start = 1, end = num_target_layers - 3, "
    "int(round(start + i * span / (num_draft_layers - 1)))); the same helper in SGLang dflash_utils.py",
    read_from="z-lab/dflash 44947fb; SGLang dflash_utils.py (stored index)",
    note="Wrong for 14 of 20 released drafters (z-lab/dflash#156): for Qwen3.8-27B-DFlash2 it gives "
    "[1, 16, 31, 46, 61] where the trained ids are [5, 19, 33, 47, 61]; the count matches, the weights load, "
    "and acceptance silently collapses. A config equal to it was likely computed, not copied.",
)


def uniform_layer_ids(num_target_layers: int, num_draft_layers: int) -> list[int]:
    """UNIFORM_LAYER_HEURISTIC, exactly as z-lab wrote it (Python's round, ties to even)."""
    if num_draft_layers == 1:
        return [num_target_layers // 2]
    start, end = 1, num_target_layers - 3
    span = end - start
    return [round(start + (i * span) / (num_draft_layers - 1)) for i in range(num_draft_layers)]


LAYER_IDS_PLUS_ONE_MARKER: Fact[str] = Fact(
    value='i + 1 for i in (dflash_config.get("target_layer_ids")',
    source="vllm/v1/worker/gpu_model_runner.py _get_eagle3_aux_layers_from_config: from 0.22.0 `# Add 1 to convert "
    "DFlash's aux layer id semantics` `layer_ids = [i + 1 for i in (dflash_config.get(\"target_layer_ids\") or "
    "[])]`; 0.20.0-0.21.0 return the ids as they are. The target records aux hidden state idx + 1 after layer "
    "idx (qwen2.py `_maybe_add_hidden_state(aux_hidden_states, idx + 1, ...)`), so without the +1 every id reads "
    "the output of the layer before the one the drafter was trained on",
    read_from="vllm sdists 0.20.0, 0.20.1, 0.21.0 (as-is) and 0.22.0, 0.23.0, 0.24.0, 0.34.0 (+1)",
    note="Valid ids are 0 .. num_hidden_layers - 1 under either reading.",
)

FC_INPUT_RULE: Fact[str] = Fact(
    value="fc.weight is [hidden_size, len(target_layer_ids) * (target_hidden_size or hidden_size)], and the "
    "target supplies len(ids) * its hidden_size features",
    source="vllm/model_executor/models/qwen3_dflash.py DFlashQwen3Model.__init__ (0.20.1 lines 251-273): "
    "num_features_to_use = len(target_layer_ids) (or layer_ids, else num_hidden_layers); fc_input_size = "
    "target_hidden_size * n if the config has target_hidden_size else hidden_size * n; fc = "
    "ReplicatedLinear(fc_input_size, hidden_size, bias=False). 0.34.0 `_get_dflash_fc_input_size` and "
    "combine_hidden_states: \"DFlash drafter expects {expected} concatenated aux hidden features but received "
    "{n}. This usually means the draft model's target_layer_ids reference layers that do not exist in the "
    "target model (incompatible draft/target pair).\"",
    read_from=_ALL_READ,
    note="With use_aux_hidden_state false there is no fc (its weight is skipped).",
)

TARGET_HIDDEN_SIZE_NULL: Fact[str] = Fact(
    value='getattr(config, "target_hidden_size", None) or',
    source="0.20.0-0.24.0 qwen3_dflash.py: `if hasattr(self.config, \"target_hidden_size\"): fc_input_size = "
    "self.config.target_hidden_size * num_features_to_use`: a `\"target_hidden_size\": null` key makes that "
    "None * n, a TypeError at model construction; 0.34.0 `getattr(config, \"target_hidden_size\", None) or "
    "config.hidden_size` treats null as absent",
    read_from="vllm sdists 0.20.0-0.24.0 and 0.34.0",
)

MASK_HIDDEN_FORBIDDEN: Fact[str] = Fact(
    value="mask_hidden",
    source="qwen3_dflash.py DFlashQwen3ForCausalLM.load_weights: `assert \"mask_hidden\" not in name, (\"DFlash "
    "should use mask_token_id to embed the padding hidden state\")` (0.20.1 line 598; 0.34.0 line 986)",
    read_from=_ALL_READ,
)

UNSUPPORTED_DRAFTER_TENSORS: Fact[tuple[str, ...]] = Fact(
    value=("model.",),
    source="qwen3_dflash.py load_weights prefixes every tensor name without 'lm_head' with 'model.' itself "
    "(`elif \"lm_head\" not in name: name = \"model.\" + name`), so a checkpoint saved with a 'model.' prefix "
    "becomes 'model.model....' and matches no parameter",
    read_from=_ALL_READ,
)

WEIGHT_LOADER_STRICT: Fact[str] = Fact(
    value="a tensor that matches no parameter, a parameter no tensor fills, or a shape that differs stops loading",
    source="vllm/model_executor/models/utils.py AutoWeightsLoader._load_module (line 334): \"There is no module or "
    "parameter named ...\"; "
    "vllm/model_executor/model_loader/default_loader.py load_weights: \"Following weights were not initialized "
    "from checkpoint: ...\"; default_weight_loader asserts `param.size() == loaded_weight.size()`",
    read_from="vllm 0.20.1 sdist",
    note="Quantized drafters carry extra scale tensors; the doctor does not judge their names.",
)

SAMPLE_FROM_ANCHOR_MARKER: Fact[str] = Fact(
    value="sample_from_anchor=True is not supported for DFlash",
    source="0.34.0 vllm/v1/worker/gpu/spec_decode/dflash/speculator.py line 80: `if "
    "dflash_config.get(\"sample_from_anchor\", False): raise ValueError(\"sample_from_anchor=True is not supported "
    "for DFlash. DFlash uses a fixed 1+N query layout where the anchor is the bonus token.\")`",
    read_from="vllm 0.34.0 sdist (0.20.0-0.24.0 never read the key: the drafter then runs without it)",
)

SLIDING_WINDOW_MARKER: Fact[str] = Fact(
    value="DFlash sliding attention requires a window size",
    source="0.34.0 qwen3_dflash.py _resolve_layer_attention: a layer that is sliding (layer_types[i] == "
    "'sliding_attention', or dflash_config.use_swa) takes dflash_config.swa_window_size, else the top-level "
    "sliding_window, else `raise ValueError(\"DFlash sliding attention requires a window size configured in "
    "dflash_config.swa_window_size or the top-level sliding_window.\")`. 0.20.0-0.24.0 qwen3_dflash.py never read "
    "layer_types: every drafter layer runs full attention",
    read_from="vllm sdists 0.20.0-0.24.0 (ignored) and 0.34.0 (enforced)",
)

NON_CAUSAL_SCOPE: Fact[dict[str, str]] = Fact(
    value={
        "all-layers": 'speculative_config.method == "dflash"',
        "drafter-own-backend": "backend=spec_cfg.attention_backend",
        "drafter-own-backend-v2": "backend=speculative_config.attention_backend",
    },
    source="0.20.0-0.20.1 vllm/v1/attention/selector.py get_attn_backend: `use_non_causal = speculative_config is "
    "not None and speculative_config.method == \"dflash\"` for every attention layer, target included, with "
    "--attention-backend for all; 0.21.0-0.24.0 the DFlash proposer's _create_draft_vllm_config sets "
    "use_non_causal for the drafter only (0.23.0+: `not dflash_config.causal`) and llm_base_proposer 'Never "
    "inherit the attention backend from base': the drafter takes speculative_config.attention_backend or "
    "auto-selects; 0.34.0 v1/worker/gpu/spec_decode/dflash/utils.py load_dflash_model likewise "
    "(use_non_causal=dflash_has_any_non_causal(...), backend=speculative_config.attention_backend). 0.20.x "
    "dflash.py asserts 'Attention metadata for layer ... does not have non-causal support, which is required for "
    "DFlash. Consider using a different attention backend, such as FlashAttention.'",
    read_from=_ALL_READ,
)

FLASH_ATTN_QUANTIZED_KV: Fact[dict[str, Any]] = Fact(
    value={
        "quantized_prefixes": ("fp8", "nvfp4", "int8_per_token_head", "int4_per_token_head"),
        "fa3_major": 9,
        "fa4_major": 10,
        "fa4_marker": "fa_version == 4 and current_platform.is_device_capability_family(100)",
        "fa4_since": "0.27.1",
        "reasons": {"head_size": "head_size not supported", "kv_cache_dtype": "kv_cache_dtype not supported",
                    "capability": "compute capability not supported",
                    "non_causal": "non-causal attention not supported"},
    },
    source="FlashAttentionBackend.supports_kv_cache_dtype (v1/attention/backends/flash_attn.py) asks the "
    "FlashAttention build for a quantized (fp8) KV cache: 0.20.x `flash_attn_supports_fp8()` (every fp8 dtype, FA3 "
    "on 9.x); 0.21-0.26 only 'fp8'/'fp8_e4m3', `get_flash_attn_version() == 3 and is_device_capability_family(90)`; "
    "0.27.1+ supported_kv_cache_dtypes lists fp8/fp8_e4m3 and fa_utils.flash_attn_supports_kv_cache_dtype answers FA3 "
    "on SM90 or `fa_version == 4 and current_platform.is_device_capability_family(100)` (FA4, head sizes 128 and 256 "
    "both), never fp8_e5m2, and supports_combination adds its own reason ('FP8 KV cache requires FA3 on SM90 or FA4 "
    "on SM100'). vLLM's CUDA wheels carry FA2, FA3 and FA4 (_vllm_fa2_C, _vllm_fa3_C, vllm_flash_attn/cute). The "
    "reason strings are AttentionBackend.validate_configuration's (v1/attention/backend.py)",
    read_from="vllm sdists 0.20.1, 0.22.1, 0.24.0, 0.26.0, 0.27.1, 0.29.0, 0.30.0, 0.33.0, 0.34.0; wheels 0.20.1 and "
    "0.24.0 (the FlashAttention extensions)",
    note="Only what the doctor cannot evaluate from the installed source on constants; "
    "tests/test_release_matrix.py holds it to each release's own selector.",
)

ATTENTION_FALLBACK: Fact[dict[str, object]] = Fact(
    value={
        "priorities": {"default": ["FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION"],
                       "sm100": ["FLASHINFER", "FLASH_ATTN", "TRITON_ATTN", "FLEX_ATTENTION"]},
        "min_capability": {"FLASH_ATTN": [8, 0], "FLASHINFER": [7, 5], "TRITON_ATTN": [0, 0],
                           "FLEX_ATTENTION": [0, 0]},
        "non_causal_0.20": ["FLASH_ATTN", "FLEX_ATTENTION"],
        "non_causal_0.34": ["FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION"],
    },
    source="vllm/platforms/cuda.py _get_backend_priorities (non-MLA); supports_non_causal() and "
    "supports_compute_capability() in vllm/v1/attention/backends/{flash_attn,flashinfer,triton_attn,"
    "flex_attention}.py; TRITON_ATTN and FLASHINFER report non-causal support from 0.24.0",
    read_from="vllm sdists 0.20.1, 0.24.0 and 0.34.0",
    note="Used only when the installed vLLM's source cannot be read; the doctor otherwise evaluates those "
    "functions from the installed source for the GPU's compute capability.",
)

AUX_HIDDEN_STATE_MODEL_TYPES: Fact[tuple[str, ...]] = Fact(
    value=("llama", "qwen", "minicpm", "gpt_oss", "hunyuan_vl", "hunyuan_v1_dense", "afmoe", "nemotron_h",
           "deepseek_v2", "deepseek_v3", "kimi_k2", "kimi_k25", "minimax_m2", "gemma4"),
    source="vllm/config/speculative.py SpeculativeConfig._verify_args (0.20.1 line 905): "
    "`raise ValueError(f\"{self.method} is only supported for {aux_hidden_states_supported} models. Got "
    "{self.target_model_config.hf_text_config.model_type=}\")` when no entry is a substring of the target's "
    "text model_type",
    read_from="vllm 0.20.1 sdist (the doctor reads the installed list when it can)",
)

DRAFT_TP_RULE: Fact[str] = Fact(
    value="draft_tensor_parallel_size must be 1 or the target's tensor_parallel_size (default: the target's)",
    source="vllm/config/speculative.py SpeculativeConfig._verify_and_get_draft_tp: `raise ValueError(f\""
    "{speculative_draft_tensor_parallel_size=} cannot be other value than 1 or target model "
    "tensor_parallel_size\")` (0.20.1 line 818); `tensor_parallel_size` inside the speculative config is "
    "refused: \"'tensor_parallel_size' is not a valid argument in the speculative_config. Please pass "
    "'draft_tensor_parallel_size' instead.\"",
    read_from="vllm 0.20.1 and 0.34.0 sdists",
)

SCHEDULER_RULES: Fact[str] = Fact(
    value="without chunked prefill, max_num_batched_tokens >= max_model_len; always max_num_batched_tokens >= "
    "max_num_seqs; a warning when max_num_batched_tokens > max_num_seqs * max_model_len",
    source="vllm/config/scheduler.py SchedulerConfig.verify_max_model_len (0.20.1 lines 259-287): \""
    "max_num_batched_tokens ({n}) is smaller than max_model_len ({m}). This effectively limits the maximum "
    "sequence length to max_num_batched_tokens and makes vLLM reject longer sequences. Please increase "
    "max_num_batched_tokens or decrease max_model_len.\" only `and not self.enable_chunked_prefill`; \""
    "max_num_batched_tokens ({n}) must be greater than or equal to max_num_seqs ({s}).\"",
    read_from=_ALL_READ,
    note="Chunked prefill is on by default for generative models (engine/arg_utils.py "
    "_set_default_chunked_prefill_and_prefix_caching_args: model_config.is_chunked_prefill_supported).",
)

BATCH_DEFAULTS: Fact[dict[str, dict[str, int]]] = Fact(
    value={
        "small": {"min_gib": 0, "max_num_batched_tokens": 2048, "max_num_seqs": 256},
        "large": {"min_gib": 70, "max_num_batched_tokens": 8192, "max_num_seqs": 1024},
        "huge": {"min_gib": 160, "max_num_batched_tokens": 16384, "max_num_seqs": 1024},
    },
    source="vllm/engine/arg_utils.py EngineArgs.get_batch_defaults, OPENAI_API_SERVER column, by the first GPU's "
    "total memory as torch reports it: >= 70 GiB and a name without 'a100' gets max_num_batched_tokens 8192 and "
    "max_num_seqs 1024, others 2048 and 256 (0.20.1 lines 2208-2227); 0.34.0 adds >= 160 GiB: 16384 and 1024 (and "
    "keeps GB10 on the small tier). Without --max-num-batched-tokens and without chunked prefill it becomes "
    "max(max_model_len, default); then min(max_num_seqs * max_model_len, ...)",
    read_from="vllm sdists 0.20.1, 0.24.0 and 0.34.0",
    note="The 'large' tier excludes GPUs whose name contains 'a100'; the 'huge' tier exists where the installed "
    "source has BATCH_HUGE_MARKER.",
)

BATCH_HUGE_MARKER: Fact[str] = Fact(
    value="device_memory >= 160 * GiB_bytes",
    source="vllm/engine/arg_utils.py get_batch_defaults in 0.34.0 (absent from 0.20.1-0.24.0)",
    read_from="vllm sdists 0.20.1, 0.24.0, 0.34.0",
)

YARN_ALREADY_SCALED_MARKER: Fact[str] = Fact(
    value="YaRN variants leave max_position_embeddings already scaled",
    source="vllm/config/model.py _get_and_verify_max_len, from vLLM PR #56446 (see MAX_LEN_DERIVATION)",
    read_from="vllm sdists 0.29.0 (absent), 0.30.0, 0.31.0, 0.32.0, 0.33.0, 0.34.0 (present)",
)

SPEC_BUDGET_RULE_A: Fact[str] = Fact(
    value="scheduled_token_delta",
    source="0.20.0-0.24.0 vllm/config/vllm.py VllmConfig._set_max_num_scheduled_tokens: max_num_scheduled_tokens = "
    "max_num_batched_tokens - max_num_new_slots_for_drafting * max_num_seqs, where DFlash (parallel drafting) "
    "adds num_speculative_tokens - 1 slots per request (config/speculative.py max_num_new_slots_for_drafting); "
    "<= 0 raises \"max_num_scheduled_tokens is set to {n} based on the speculative decoding settings, which does "
    "not allow any tokens to be scheduled. Increase max_num_batched_tokens to accommodate the additional draft "
    "token slots, or decrease num_speculative_tokens or max_num_seqs.\"; < 8192 warns of suboptimal performance",
    read_from="vllm sdists 0.20.0, 0.20.1, 0.21.0, 0.22.0, 0.23.0, 0.24.0 (0.20.1 lines 1373-1420)",
)

SPEC_BUDGET_RULES: Fact[dict[str, Any]] = Fact(
    value={
        # marker in config/vllm.py -> the release that first has it (the version decides where the source is unread)
        "subtracts_marker": "max_num_batched_tokens - scheduled_token_delta", "no_subtraction_since": "0.28.0",
        "draft_seqs_marker": "max_draft_seqs", "draft_seqs_since": "0.33.0",
        "warn_below": 8192,
        # the three rules by the releases that have them; without a vLLM to read, the oldest and the newest judge
        "rule_names": {"subtracts": "0.20-0.27", "no_subtraction": "0.28-0.32", "draft_seqs": "0.33"},
        "unread_rules": ("0.20-0.27", "0.33"),
    },
    source="vllm/config/vllm.py VllmConfig._set_max_num_scheduled_tokens for DFlash (k = num_speculative_tokens): "
    "0.20.0-0.27.1 max_num_scheduled_tokens = max_num_batched_tokens - (k - 1) x max_num_seqs "
    "(max_num_new_slots_for_drafting: k - 1 for parallel drafting), <= 0 raises, < 8192 warns; 0.28.0-0.32.0 "
    "max_num_scheduled_tokens = max_num_batched_tokens (< 8192 warns) and `if max_num_batched_tokens <= "
    "scheduled_token_delta` (max_num_new_slots_for_drafting = k for DFlash) raises 'VllmConfig does not have "
    "enough slots to schedule a token ... Got max_num_batched_tokens=... and scheduled_token_delta=...'; 0.33.0+ "
    "the same with num_lookahead_tokens = k + 1, and the draft pass fits max_num_batched_tokens // (k + 1) "
    "requests: max_num_active_seqs is lowered to that, with a warning",
    read_from="vllm sdists 0.18.0-0.34.0 (the markers), 0.20.1, 0.22.1, 0.24.0, 0.26.0, 0.29.0, 0.30.0, 0.33.0, "
    "0.34.0 (held by tests/test_release_matrix.py)",
)

SPEC_BUDGET_RULE_B: Fact[str] = Fact(
    value="does not have enough slots to schedule a token",
    source="0.34.0 vllm/config/vllm.py VllmConfig._set_max_num_scheduled_tokens: `if max_num_batched_tokens <= "
    "self.num_lookahead_tokens: raise ValueError(\"VllmConfig does not have enough slots to schedule a token and "
    "support the speculative decoding settings. Got max_num_batched_tokens=... and num_lookahead_tokens=...\")` "
    "(num_lookahead_tokens = num_speculative_tokens + 1 for DFlash); then the DFlash draft pass fits at most "
    "max_num_batched_tokens // (num_speculative_tokens + 1) requests and max_num_active_seqs is lowered to that, "
    "with a warning",
    read_from="vllm 0.34.0 sdist (v1/worker/gpu/spec_decode/dflash/config.py max_num_draft_seqs)",
)

MAX_LEN_DERIVATION: Fact[dict[str, Any]] = Fact(
    value={
        # The smallest of these keys is the base length; a truthy model_max_length replaces it.
        "length_keys": ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
                        "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len"),
        # rope_parameters nested by these layer types hold one RoPE entry per layer type.
        "layer_types": ("full_attention", "sliding_attention", "chunked_attention", "linear_attention", "main",
                        "compress"),
        # RoPE types whose factor is never multiplied into the length.
        "unscaled_rope_types": ("su", "longrope", "llama3"),
        # From this release, YaRN variants too: max_position_embeddings is taken as already scaled.
        "yarn_already_scaled_since": "0.30.0",
        "already_scaled_rope_types": ("yarn", "deepseek_yarn", "deepseek_llama_scaling"),
        # A model_type containing this takes max_position_embeddings as already scaled by RoPE.
        "already_scaled_model_type": "gemma3",
    },
    source="vllm/config/model.py _get_and_verify_max_len and transformers_utils/model_arch_config_convertor.py "
    "derive_max_model_len_and_key: the base is the smallest of the length keys (\"Choose the smallest "
    "'max_length' from the possible keys\"), model_max_length overriding; the tokenizer_config's model_max_length "
    "caps it before RoPE scaling; then, unless the model_type contains gemma3, each RoPE entry's factor is "
    "multiplied in except for su/longrope/llama3. Up to 0.29.0 a yarn entry first replaces the length with its "
    "original_max_position_embeddings (rp[\"original_max_position_embeddings\"], a KeyError when absent); from "
    "0.30.0 (PR #56446) yarn, deepseek_yarn and deepseek_llama_scaling are not scaled at all: \"YaRN variants "
    "leave max_position_embeddings already scaled, as Transformers' _compute_yarn_parameters assumes\". With no "
    "--max-model-len a longrope model serves original_max_position_embeddings. A given length over the derived "
    "one passes when it is at most the config's model_max_length. The layer types are transformers' "
    "ALLOWED_LAYER_TYPES (configuration_utils, 4.57.1) that is_rope_parameters_nested accepts, plus DeepSeek-V4's "
    "\"main\" and \"compress\" (from 0.33.0; a model no older release serves).",
    read_from="vLLM sdists 0.20.1, 0.22.1, 0.24.0, 0.26.0, 0.29.0 (one function, unchanged), 0.30.0, 0.33.0, "
    "0.34.0; tests/test_release_matrix.py runs each release's own functions against this rule",
)

MAX_MODEL_LEN_RULE: Fact[str] = Fact(
    value="--max-model-len may not exceed the length derived from the target's config (max_position_embeddings "
    "and the other length keys, scaled by rope_scaling's factor, capped by tokenizer_config model_max_length) "
    "unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
    source="vllm/config/model.py _get_and_verify_max_len: \"User-specified max_model_len ({m}) is greater than the "
    "derived max_model_len ({key}={n} or model_max_length={l} in model's config.json). To allow overriding this "
    "maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.\"; keys from "
    "transformers_utils/model_arch_config_convertor.py derive_max_model_len_and_key (the smallest present)",
    read_from="vllm 0.20.1 sdist (config/model.py lines 2047-2185)",
)

WORLD_SIZE_RULE: Fact[str] = Fact(
    value="tensor_parallel_size * pipeline_parallel_size <= the GPUs CUDA shows this process (single node, mp)",
    source="vllm/config/parallel.py ParallelConfig.__post_init__: `raise ValueError(f\"World size "
    "({self.world_size}) is larger than the number of available GPUs ({gpu_count}) in this node. If this is "
    "intentional and you are using:\\n- ray, set '--distributed-executor-backend ray'.\\n- multiprocessing, set "
    "'--nnodes' appropriately.\")` (0.20.1 line 812; 0.34.0 line 1165)",
    read_from="vllm 0.20.1 and 0.34.0 sdists",
)

HEADS_DIVISIBLE_RULE: Fact[str] = Fact(
    value="num_attention_heads % tensor_parallel_size == 0",
    source="vllm/config/model.py ModelConfig.verify_with_parallel_config: \"Total number of attention heads ({h}) "
    "must be divisible by tensor parallel size ({tp}).\" (0.20.1 line 1126); the draft model is verified "
    "against the draft parallel config the same way (SpeculativeConfig._verify_args)",
    read_from="vllm 0.20.1 and 0.34.0 sdists",
)

KV_HEADS_TP_RULE: Fact[str] = Fact(
    value="num_key_value_heads >= tp: divisible by tp; fewer: tp divisible by num_key_value_heads (replicated)",
    source="vllm/model_executor/models/qwen3.py Qwen3Attention.__init__ (0.20.1 lines 80-90): `if "
    "self.total_num_kv_heads >= tp_size: assert self.total_num_kv_heads % tp_size == 0 else: assert tp_size % "
    "self.total_num_kv_heads == 0`; the same asserts in qwen3_dflash.py DFlashQwen3Attention",
    read_from="vllm 0.20.1 sdist",
    note="An AssertionError during model construction, after the engine has started its workers.",
)

DTYPE_AUTO_DOWNCAST: Fact[str] = Fact(
    value="--dtype auto serves a float32 checkpoint in 16 bits; the drafter is served in the target's dtype",
    source="vllm/config/model.py _resolve_auto_dtype: `# Downcast for float32 models` (0.20.1 line 1948); "
    "config/speculative.py builds the draft ModelConfig with `dtype=self.target_model_config.dtype`",
    read_from="vllm 0.20.1 sdist",
)

KV_CACHE_ONE_SEQUENCE: Fact[str] = Fact(
    value="after weights and activations, the KV cache must hold one max_model_len sequence",
    source="vllm/v1/core/kv_cache_utils.py _check_enough_kv_cache_memory: \"No available memory for the cache "
    "blocks. Try increasing `gpu_memory_utilization`...\" and \"To serve at least one request with the models's "
    "max seq len ({m}), ({x} GiB KV cache is needed, which is larger than the available KV cache memory ({y} "
    "GiB). ... Try increasing `gpu_memory_utilization` or decreasing `max_model_len`\"; the budget is "
    "vllm/v1/worker/utils.py request_memory: ceil(total * gpu_memory_utilization), refused when free memory is "
    "below it (knowledge.gpu VLLM_FREE_MEMORY_CHECK)",
    read_from="vllm 0.20.1 sdist",
    note="The doctor cannot know activation and CUDA-graph memory before vLLM profiles it: what it reports as "
    "room for the KV cache is an upper bound.",
)
