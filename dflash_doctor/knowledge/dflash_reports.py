"""DFlash failures users reported against vLLM, and the vLLM facts the doctor needs to catch them before
`vllm serve`: what each failure is, where in vLLM it comes from, the versions it applies to and the issue or
PR that says so. The checks read the installed vLLM's source for everything it can tell (parsers,
interfaces, runners, markers: facts.serve.vllm_pairing); what is here is what the source cannot say (a bug's
symptom, a version a report names) and the text the doctor looks for in it.

Version ranges are (first, last): inclusive; `last` None means "every later release read or reported".
Releases whose sdists were read: 0.18.0, 0.19.1, 0.20.1, 0.21.0, 0.22.0, 0.23.0, 0.24.0, 0.34.0.
"""

from __future__ import annotations

from typing import Any

from dflash_doctor.knowledge import Fact
from dflash_doctor.shape import frozen_dataclass

__all__ = [
    "AUTO_TOOL_CHOICE_RULE",
    "DFLASH2_CONV_BLOCK",
    "DRAFTER_CONTEXT_RAISED",
    "DRAFTER_CONTEXT_V2",
    "EAGLE3_INTERFACE_RULE",
    "FP8_KERNELS",
    "FP8_QUERY_NEEDS_BFLOAT16",
    "FUSED_KV_GUARD",
    "FUSED_KV_RAW_WEIGHT",
    "KNOWN_BAD",
    "LANGUAGE_MODEL_ONLY",
    "LAYER_TYPES_LENGTH",
    "PADDED_VOCAB_V2",
    "PARSER_REGISTRIES",
    "PARSER_VALIDATION",
    "QUANTIZED_PAIR_ACCEPTANCE",
    "ROPE_LAYOUT_FROM_TARGET",
    "RULES_VERIFIED_THROUGH",
    "SPECULATORS_DFLASH",
    "SPECULATORS_LAUNCH",
    "TRUST_REMOTE_CODE_RULE",
    "V2_DEFAULT_SINCE",
    "VALIDATED_BY_VLLM",
    "WEIGHT_FILE_SELECTION",
    "KnownBad",
]

_READ = "vllm 0.20.1 and 0.34.0 sdists"

PARSER_REGISTRIES: Fact[dict[str, tuple[tuple[str, ...], str, str]]] = Fact(
    value={
        "reasoning": (("reasoning/__init__.py",), "_REASONING_PARSERS_TO_REGISTER", "ReasoningParserManager"),
        "tool": (("tool_parsers/__init__.py", "entrypoints/openai/tool_parsers/__init__.py"),
                 "_TOOL_PARSERS_TO_REGISTER", "ToolParserManager"),
    },
    source="vllm/reasoning/__init__.py `_REASONING_PARSERS_TO_REGISTER = {name: (file, class), ...}` registered "
    "lazily by register_lazy_reasoning_parsers(); vllm/tool_parsers/__init__.py `_TOOL_PARSERS_TO_REGISTER` the "
    "same (0.20.1 line 24, 0.34.0 line 24); older releases kept tool parsers under "
    "vllm/entrypoints/openai/tool_parsers/ and registered them with @ToolParserManager.register_module(name)",
    read_from=f"{_READ}; 0.22.0, 0.24.0",
    note="Entries are (files relative to the vllm package, lazy table name, manager class). A plugin "
    "(--tool-parser-plugin / --reasoning-parser-plugin) registers more names at start; the doctor cannot read "
    "those, so a name outside the registry with a plugin given is a warning.",
)

PARSER_VALIDATION: Fact[dict[str, str]] = Fact(
    value={
        "reasoning": "invalid reasoning parser: {name} (chose from {{ {choices} }})",
        "tool": "invalid tool call parser: {name} (chose from {{ {choices} }})",
    },
    source="validate_api_server_args raises KeyError with these texts before the engine starts: "
    "0.20.1 vllm/entrypoints/openai/api_server.py:516-530, 0.34.0 vllm/entrypoints/common/cli_args.py:624-641. "
    "The reasoning parser is checked whenever one is given; the tool-call parser only with "
    "--enable-auto-tool-choice",
    read_from=_READ,
)

AUTO_TOOL_CHOICE_RULE: Fact[str] = Fact(
    value="Error: --enable-auto-tool-choice requires --tool-call-parser",
    source="validate_parsed_serve_args: `if args.enable_auto_tool_choice and not args.tool_call_parser: raise "
    "TypeError(...)` (0.20.1 vllm/entrypoints/openai/cli_args.py:373, 0.34.0 "
    "vllm/entrypoints/common/cli_args.py:562)",
    read_from=_READ,
)

TRUST_REMOTE_CODE_RULE: Fact[str] = Fact(
    value="a config.json whose model_type neither vLLM's own config registry nor the installed transformers "
    "knows loads only through its auto_map code, which needs --trust-remote-code",
    source="vllm/transformers_utils/config.py get_config: model types in `_CONFIG_REGISTRY` (a LazyConfigDict of "
    "model_type=ConfigClass) use vLLM's own class, the rest go to transformers' AutoConfig.from_pretrained("
    "trust_remote_code=...) (0.20.1 lines 80, 187-215); transformers resolve_trust_remote_code raises when "
    "the config has remote code (auto_map) and no local class (model_type not in CONFIG_MAPPING) and "
    "trust_remote_code is False",
    read_from=f"{_READ}; transformers models/auto/configuration_auto.py and dynamic_module_utils.py",
    note="A known model_type with an auto_map (the DFlash drafters' AutoModel entry) loads without remote code: "
    "the auto_map is then unused.",
)

LANGUAGE_MODEL_ONLY: Fact[str] = Fact(
    value="--language-model-only sets every modality's limit to 0; vLLM then builds no vision tower "
    "(StageMissingLayer) and loads none of its weights",
    source="vllm/config/multimodal.py MultiModalConfig.language_model_only: \"If True, disables all multimodal "
    "inputs by setting all modality limits to 0\", get_limit_per_prompt returns 0 (0.20.1 lines 76, 264); "
    "vllm/model_executor/models/interfaces.py SupportsMultiModal._mark_tower_model skips a tower whose "
    "modalities all have limit 0 (0.20.1 lines 249-290). 0.34.0 also refuses it with cudagraph_mm_encoder "
    "(config/vllm.py:1502)",
    read_from=f"{_READ}; present in every sdist 0.18.0 .. 0.34.0",
)

WEIGHT_FILE_SELECTION: Fact[str] = Fact(
    value="vLLM loads every *.safetensors in the directory whatever its name (else *.bin, else *.pt); with "
    "model.safetensors.index.json only the files its weight_map names; with any consolidated*.safetensors "
    "only those (Mistral format, consolidated.safetensors.index.json)",
    source="vllm/model_executor/model_loader/default_loader.py DefaultModelLoader._prepare_weights: load_format "
    "'auto' becomes 'mistral' when consolidated*.safetensors files exist, else 'hf' with allow_patterns "
    "['*.safetensors', '*.bin'] (+ '*.pt' as fallback); the first pattern that matches wins; then "
    "weight_utils.filter_duplicate_safetensors_files keeps only files listed in the index (0.20.1 lines "
    "107-201, weight_utils.py:667-685; the same in 0.34.0 lines 167-260)",
    read_from=_READ,
    note="So renaming dflash-*.safetensors to model.safetensors is never needed; it matters only when an index "
    "names another file.",
)

DRAFTER_CONTEXT_V2: Fact[str] = Fact(
    value="on the V2 model runner a drafter whose max_position_embeddings (after rope scaling) is below the "
    "served max_model_len reads past its rotary cache on the first longer request: CUDA illegal memory access, "
    "engine down; the V1 runner stops drafting for such a request instead",
    source="vLLM issue #57941 (0.29.0, target extended with --hf-overrides, drafter z-lab/Muse-Glimmer-30B-DFlash2 at "
    "131072, a 150k request kills the engine) and PR #57964 (open: raises the drafter's max_position_embeddings "
    "to the target's max_model_len): \"This is a V2 model runner failure ... The V1 runner keys "
    "effective_drafter_max_model_len on the draft's own max_model_len and _input_fits_in_drafter stops "
    "drafting\"; V1: vllm/v1/worker/gpu_model_runner.py effective_drafter_max_model_len / _input_fits_in_drafter "
    "(0.24.0 lines 632, 4419)",
    read_from="vLLM #57941, PR #57964 (open as read); vllm 0.24.0 sdist",
    note="How far past decides it, and the doctor cannot know the requests to come: in the report the request was "
    "about 19,000 positions past a 131072-position drafter (0.29.0); on an H200 with vLLM 0.26.0 and the V2 runner, "
    "a 300-token request 52 positions past a 256-position toy drafter was answered with all 15 drafted tokens "
    "accepted and the engine alive (fixtures/engine/vllm-0.26.0/15-drafter-context-short-v2.json, a known limit)",
)

V2_DEFAULT_SINCE: Fact[str] = Fact(
    value="0.29.0",
    source="vLLM PR #57964: \"the V2 model runner, which is the default runner since 0.29.0\"; the source read: "
    "0.22.0 uses V2 only with VLLM_USE_V2_MODEL_RUNNER=1; 0.24.0 by default for "
    "DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES (config/vllm.py:68, Qwen3ForCausalLM among them); 0.34.0 has no V1 "
    "GPU runner (vllm/v1/worker/gpu_model_runner.py is gone)",
    read_from="vLLM PR #57964; vllm 0.22.0, 0.24.0, 0.34.0 sdists",
    note="Used only when the installed source does not show which runner is the default.",
)

DRAFTER_CONTEXT_RAISED: Fact[dict[str, Any]] = Fact(
    value={
        "since": "0.33.0",
        "cache_only_rope_types": ("default", "linear", "llama3", "ntk", "proportional"),
        "override_marker": "_CACHE_ONLY_ROPE_TYPES",
        "limiter_marker": "def _limit_max_model_len_to_draft",
    },
    source="vllm/config/speculative.py SpeculativeConfig._maybe_override_draft_max_position_embeddings: \"Raise a "
    "draft's max_position_embeddings up to the target's ... Only drafts whose RoPE types are all in "
    "_CACHE_ONLY_ROPE_TYPES are resized\" (_rope_only_sizes_cache: every RoPE entry's rope_type, \"default\" when "
    "absent; every method but draft_model, draft_shares_target_positions); otherwise vllm/config/vllm.py "
    "VllmConfig._limit_max_model_len_to_draft on the V2 runner: \"The draft model's max_model_len (%d) is smaller "
    "than the target model's (%d) and the V2 model runner can't skip speculation for longer sequences; reducing "
    "max_model_len to %d.\" In 0.29.0-0.32.0 the override covers eagle and eagle3 only and there is no limiter; "
    "the fix cites vLLM #48894 and #57941",
    read_from="vllm sdists 0.29.0, 0.30.0, 0.32.0 (absent), 0.33.0, 0.34.0 (present)",
)

RULES_VERIFIED_THROUGH: Fact[str] = Fact(
    value="0.34.0",
    source="tests/test_release_matrix.py: the newest release whose own functions the doctor's version-dependent "
    "rules (context length, the drafter's context, the model runner) are held to in CI (vllm_release.MATRIX)",
    read_from="vllm sdists 0.20.1, 0.22.1, 0.24.0, 0.26.0, 0.29.0, 0.30.0, 0.33.0, 0.34.0",
    note="A newer vLLM gets serve-command.vllm-newer-than-verified: its own parser and validation count first.",
)

FP8_QUERY_NEEDS_BFLOAT16: Fact[dict[str, Any]] = Fact(
    value={"kv_cache_dtypes": ("fp8", "fp8_e4m3"), "compute_capability_major": 9, "backend": "FLASH_ATTN",
           "since": "0.20.1",
           "engine_error": "RuntimeError: For FP16/BF16 input, output must have the same dtype as inputs. For FP8 "
                           "input, output must have dtype BF16"},
    source="vllm/model_executor/layers/attention/attention.py: with an fp8 KV cache and a backend that "
    "`supports_quant_query_input` the layer quantizes the query to fp8 (`self.query_quant = QuantFP8(...)`); "
    "vllm/v1/attention/backends/fa_utils.py `flash_attn_supports_quant_query_input()` is true off XPU, and on sm_90 "
    "FlashAttention runs as version 3, whose kernel (torch.ops._vllm_fa3_C.fwd) writes fp8 queries only to "
    "bfloat16. Recorded on an H200 with vLLM 0.20.1 (fixtures/engine/11-kv-cache-fp8.json: a float16 target, "
    "--kv-cache-dtype fp8: the engine starts, selects FLASH_ATTN and dies on the first request with the error "
    "above; 12-kv-cache-fp8-bfloat16.json: the same with --dtype bfloat16 serves)",
    read_from="vllm sdists 0.20.1 to 0.34.0 (the query quantization and FA3's use on sm_90 are unchanged); vLLM "
    "0.20.1 on the H200",
    note="0.34.0 dequantizes instead on its FlashAttention-4 path for head size 512 on sm_90 "
    "(uses_sm90_fa4_fp8_kv_dequant): not judged for head size 512.",
)

VALIDATED_BY_VLLM: Fact[tuple[str, ...]] = Fact(
    value=("serve-command.spec-method", "serve-command.spec-k-missing", "serve-command.spec-k-invalid",
           "serve-command.spec-draft-tp", "serve-command.max-model-len", "serve-command.scheduler",
           "serve-command.token-budget"),
    source="vllm/engine/arg_utils.py EngineArgs.create_engine_config builds ModelConfig (_get_and_verify_max_len), "
    "SpeculativeConfig (method, num_speculative_tokens, draft_tensor_parallel_size), SchedulerConfig and VllmConfig "
    "(max_num_batched_tokens against max_num_seqs and max_model_len, the speculative token budget); "
    "tests/test_vllm_validation.py holds each of these findings to vLLM 0.20.1's own verdict on the same command",
    read_from=_READ,
    note="The doctor's rules for these classes restate vLLM's validation. Where vLLM's own validation ran and "
    "accepted the command on a release newer than RULES_VERIFIED_THROUGH, a rule's fail there is shown as a warning: "
    "vLLM's verdict counts first.",
)

SPECULATORS_DFLASH: Fact[dict[str, Any]] = Fact(
    value={
        "types": {"dflash": "DFlashDraftModel", "dflash2": "DFlash2DraftModel"},
        "aux_minus_one_marker": "[i - 1 for i in aux_layer_ids]",
        "aux_minus_one_since": "0.22.1",
        # What each later addition to update_dflash writes into dflash_config: marker in algos.py, first release.
        "optional_keys": {"causal": ("sliding_window_non_causal", "0.26.0"),
                          "sample_from_anchor": ('"sample_from_anchor": config_dict.get(', "0.29.0")},
        "dflash2_keys": ("conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k"),
    },
    source="vllm/transformers_utils/configs/speculators/base.py SpeculatorsConfig.extract_transformers_pre_trained_"
    "config (the model's config is transformer_layer_config, then the algorithm's updater) and algos.py update_dflash: "
    "architectures [\"DFlashDraftModel\"], draft_vocab_size and target_hidden_size copied, "
    "eagle_aux_hidden_state_layer_ids = aux_hidden_state_layer_ids, dflash_config = {mask_token_id (required), "
    "target_layer_ids: [i - 1 for i in aux_layer_ids] (\"DFlash configs use different indexing for the target "
    "layers, see #40727\"; 0.20.1 takes them as they are), sample_from_anchor (default False), causal: not "
    "sliding_window_non_causal (default True)} (sample_from_anchor from 0.29.0, causal from 0.26.0); update_dflash2 (from 0.29.0) the same with DFlash2DraftModel and "
    "conv_kernel_size, conv_group_size, selector_rank, selector_top_k into dflash_config",
    read_from="vllm sdists 0.20.1, 0.22.1, 0.24.0, 0.26.0, 0.29.0, 0.30.0, 0.33.0, 0.34.0; tests/test_release_matrix.py "
    "runs each release's update_dflash against speculators_keys",
)

SPECULATORS_LAUNCH: Fact[dict[str, Any]] = Fact(
    value={
        "remote_only_marker": "Speculators verifier must name a remote model repository",
        "remote_only_since": "0.33.0",
        "message": "Speculators verifier must name a remote model repository. Select local verifiers explicitly "
        "with --model and --speculative-config.",
        "merge_marker": "speculative_config.update(vllm_speculative_config)",
        "merge_since": "0.29.0",
        "dflash2_marker": 'if result["method"] == "dflash2":',
        "dflash2_since": "0.29.0",
        "invalid_message": "Invalid speculators config structure",
    },
    source="vllm/transformers_utils/config.py maybe_override_with_speculators, called by EngineArgs."
    "create_engine_config for every served model that is not on cloud storage: a model whose config.json has "
    "\"speculators_config\" is served as speculators_config.verifier.name_or_path with the model itself as the "
    "drafter (speculative_config {method: speculators_model_type, num_speculative_tokens: the first proposal "
    "method's speculative_tokens, model: the served directory}); before 0.29.0 a --speculative-config given beside "
    "it is dropped, from 0.29.0 its keys are merged in (\"Apply user --speculative-config overrides\") but method "
    "and model stay the checkpoint's; from 0.33.0 a verifier that is not a string, not a valid Hub repo id "
    "(huggingface_hub validate_repo_id) or an existing local path raises \"Speculators verifier must name a remote "
    "model repository. Select local verifiers explicitly with --model and --speculative-config.\"; "
    "SpeculatorsConfig.validate_speculators_config raises \"Invalid speculators config structure\" without "
    "verifier.name_or_path or proposal_methods[0].speculative_tokens; build_vllm_speculative_config maps dflash2 to "
    "the method dflash from 0.29.0",
    read_from="vllm sdists 0.20.1, 0.22.1, 0.24.0, 0.26.0, 0.29.0, 0.30.0, 0.31.0, 0.32.0, 0.33.0, 0.34.0; "
    "tests/test_release_matrix.py runs each release's maybe_override_with_speculators against the doctor's reading",
)

PADDED_VOCAB_V2: Fact[dict[str, Any]] = Fact(
    value={
        "marker": 'getattr(dflash_model, "draft_id_to_target_id", None) is None',
        "releases": ("0.24",),
        "fixed_in": "0.25.1",
    },
    source="vllm/v1/worker/gpu/spec_decode/dflash/utils.py load_dflash_model (V2 model runner), 0.24.0: the target's "
    "lm_head is shared only `if ... getattr(dflash_model, \"draft_id_to_target_id\", None) is None`, and "
    "model_executor/models/qwen3_dflash.py DFlashQwen3ForCausalLM sets draft_id_to_target_id whenever the drafter's "
    "draft_vocab_size (vocab_size when absent) differs from the target's get_vocab_size(): a target whose vocabulary "
    "is padded past the drafter's (MiMo 152576 against 152064) keeps the drafter's own, never-loaded lm_head and "
    "accepts nothing (\"Acceptance rate (%): 0.00\"). vLLM PR #46435 (\"[Model Runer V2][DFlash] Fix lm head "
    "sharing for dflash\") shares it by _should_share(..., \"has_own_lm_head\", ...) as the V1 runner does "
    "(v1/spec_decode/llm_base_proposer.py _maybe_share_lm_head); the V2 DFlash loader first appears in 0.24.0",
    read_from="vllm sdists 0.23.0 (no V2 DFlash loader), 0.24.0 (the check), 0.25.1, 0.26.0, 0.29.0, 0.34.0 (fixed); "
    "vllm-project/vllm PR #46435",
)

ROPE_LAYOUT_FROM_TARGET: Fact[dict[str, Any]] = Fact(
    value={
        "marker": "dflash_target_rope_is_neox_style(target_model)",
        "releases": ("0.28",),
        "fixed_in": "0.29.0",
        "drafter_key": "is_neox_style",
        "interleaved_marker": "is_neox_style=False",
    },
    source="vllm 0.28.0 v1/worker/gpu/spec_decode/dflash/utils.py load_dflash_model and v1/spec_decode/dflash.py: "
    "`is_neox_style = dflash_target_rope_is_neox_style(target_model)` then `draft_model_config.hf_config."
    "is_neox_style = is_neox_style` (model_executor/models/qwen3_dflash.py: the first module of the target's "
    "language model with an is_neox_style attribute), so the drafter rotates Q/K the target's way whatever it was "
    "distilled with (vLLM PR #51655). vllm #53063: GLM-5.3 (interleaved) with incoai/GLM-5.3-DFlash2 (distilled "
    "neox) accepts 1.03 tokens per step against 7.78 forced to neox; PR #54373 (in 0.29.0) reads the drafter's own "
    "config instead: DFlashQwen3DecoderLayer `getattr(config, \"is_neox_style\", True)`. The target's layout is "
    "read from its model file in the installed vLLM: a get_rope call with is_neox_style=False",
    read_from="vllm sdists 0.27.1 (absent), 0.28.0 (present), 0.29.0 (removed); vllm-project/vllm #53063, PR #51655, "
    "PR #54373",
)

DFLASH2_CONV_BLOCK: Fact[str] = Fact(
    value="DFlash2's grouped convolution takes its block from the served k: block_size=1 + "
    "speculative_config.num_speculative_tokens, positions taken modulo that block",
    source="vllm/model_executor/models/qwen3_dflash2.py (0.29.0 to 0.34.0): "
    "\"block_size=1 + speculative_config.num_speculative_tokens\" and dflash2_grouped_conv's position % block_size; "
    "vllm-project/recipes #837: num_speculative_tokens \"must be 7 (block_size 8 minus one)\"",
    read_from="vllm sdists 0.29.0, 0.30.0, 0.33.0, 0.34.0; vllm-project/recipes #837",
)

EAGLE3_INTERFACE_RULE: Fact[str] = Fact(
    value="DFlash reads the target's auxiliary hidden states; the target's model class must implement the "
    "interface the runner checks (SupportsEagle3 in 0.20-0.34), else \"Model does not support EAGLE3 interface\"",
    source="vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py: `if not supports_eagle3(model): raise "
    "RuntimeError(\"Model does not support EAGLE3 interface\")` (0.20.1 line 18, 0.34.0 line 18); V1 "
    "vllm/v1/worker/gpu_model_runner.py: \"Model does not support EAGLE3 interface but "
    "aux_hidden_state_outputs was requested\" (0.20.1 line 4831); supports_eagle3 is isinstance(model, "
    "SupportsEagle3), a runtime-checkable protocol (model_executor/models/interfaces.py). vLLM PR #45546: "
    "MiniMax-M3's AMD class lacked it and failed at engine init",
    read_from=f"{_READ}; vLLM PR #45546",
)

LAYER_TYPES_LENGTH: Fact[str] = Fact(
    value="layer_types must have one entry per layer: num_hidden_layers == len(layer_types)",
    source="transformers configuration_utils.layer_type_validation, called by Qwen3Config.__init__ when "
    "layer_types is given: `if num_hidden_layers is not None and num_hidden_layers != len(layer_types): raise "
    "ValueError(\"`num_hidden_layers` (...) must be equal to the number of layer types (...)\")`; vLLM builds the "
    "drafter's config through transformers",
    read_from="transformers 4.5x/5.x configuration_utils.py",
)

FUSED_KV_RAW_WEIGHT: Fact[tuple[str, str | None]] = Fact(
    value=("0.20.1", "0.30.0"),
    source="vLLM issue #51581: DFlash's fused context-KV precompute (`_build_context_kv_buffers`) slices "
    "`qkv_proj.weight` raw (`kv_weights = [a.qkv_proj.weight[a.q_size :] for a in layers_attn]`) and applies F.linear, "
    "bypassing quant_method: FP8 q/k/v -> \"expected mat1 and mat2 to have the same dtype\" at the start-up profiling "
    "run; packed 4-bit -> AttributeError; NVFP4 -> \"mat1 and mat2 shapes cannot be multiplied\"; a scheme "
    "whose dtypes line up -> silent corruption and low acceptance. vLLM #53116 (the drafter's quant config "
    "never reaches packed_modules_mapping, fix PR #53122). In qwen3_dflash.py the slice is unguarded from 0.20.1 "
    "to 0.30.0 (0.29.0 line 472, 0.30.0 line 473); 0.31.0 puts it under `if all(isinstance(proj.quant_method, "
    "UnquantizedLinearMethod) for proj in self._context_qkv_projs)` (0.31.0 line 515, 0.33.0 line 514), 0.34.0 "
    "under `if _reads_raw_weights(self._context_qkv_projs)` (line 565; the helper, line 118, asks the same). "
    "laguna_dflash.py (from 0.25.1) slices unguarded through 0.34.0 (line 167)",
    read_from="vLLM #51581, #53116, PR #51620, #51684, #52816 (comments); vllm sdists 0.20.1-0.30.0, 0.31.0, "
    "0.32.0, 0.33.0, 0.34.0 (model_executor/models/qwen3_dflash.py, laguna_dflash.py)",
    note="The doctor reads the slice and its guard from the installed *_dflash.py / *_dspark.py (AST, "
    "facts.serve.vllm_pairing._fused_kv); the range is qwen3_dflash.py's, for the explanation only.",
)

FUSED_KV_GUARD: Fact[str] = Fact(
    value="UnquantizedLinearMethod",
    source="vllm/model_executor/models/qwen3_dflash.py 0.31.0 line 515 (`isinstance(proj.quant_method, "
    "UnquantizedLinearMethod)` around the raw slice), 0.34.0 lines 118-122 (`_reads_raw_weights`: \"Whether post-load "
    "`.weight` is plain (not quantized, not CPU-repacked)\")",
    read_from="vllm sdists 0.31.0, 0.33.0, 0.34.0",
    note="The class a guard names, itself or in the function its `if` calls: an `if` whose test asks it keeps a "
    "quantized layer off the raw slice (the layers then run through their quant method).",
)

QUANTIZED_PAIR_ACCEPTANCE: Fact[str] = Fact(
    value="DFlash drafters are trained on the BF16 target's hidden states: an AWQ (4-bit) target feeds them "
    "shifted features and acceptance falls, in reports to near zero; a per-tensor FP8 drafter drops its scales "
    "in the fused context-KV path (vLLM #51581) and proposes from wrong numbers",
    source="z-lab/dflash #52 (quantized targets such as AWQ), z-lab/dflash #152 (2-12% acceptance with a "
    "quantized target), vLLM #51581 (\"silent numeric corruption ... only as degraded acceptance\") and PR "
    "#51684 (per-tensor FP8 fused path)",
    read_from="z-lab/dflash #52, #152; vLLM #51581, PR #51684",
)

FP8_KERNELS: Fact[dict[str, int]] = Fact(
    value={"native_from": 89, "min_capability": 75},
    source="vllm/platforms/cuda.py `def supports_fp8(cls): return cls.has_device_capability(89)` (0.34.0 line "
    "628); vllm/model_executor/layers/quantization/fp8.py Fp8Config.get_min_capability returns 75 and "
    "Fp8LinearMethod: \"For GPUs that lack FP8 hardware support, we can leverage the Marlin kernel for fast "
    "weight-only FP8 quantization\" (0.20.1 lines 143, 277); below the minimum vLLM refuses the method at start",
    read_from=_READ,
    note="Fallback values only: the doctor reads both numbers and the Marlin path from the installed source.",
)


@frozen_dataclass(frozen=True)
class KnownBad:
    id: str
    first: str
    last: str | None
    condition: str
    """What in the command or the models triggers it: "cuda-graphs", "prefix-caching-dflash2",
    "dflash2-on-v1", "no-drafter-window"."""
    title: str
    remedy: str
    source: str
    arch: tuple[str, ...] = ()
    """Compute capabilities ("8.0") it was reported on; empty: any GPU. Judged from the GPU facts (NVML, or
    --target-arch / --gpus), never guessed: with no GPU facts an arch-bound entry is not judged."""


KNOWN_BAD: Fact[tuple[KnownBad, ...]] = Fact(
    value=(
        KnownBad("cuda-graphs-concurrency", "0.22.1", "0.22.1", "cuda-graphs",
                 "DFlash with CUDA graphs crashes with cudaErrorIllegalAddress under concurrent load",
                 "--enforce-eager",
                 "z-lab/dflash #146 (vLLM 0.22.1, Qwen3.6-35B DFlash, 16 and 32 concurrent requests; the only "
                 "release reported, so the only one warned of); vLLM #44889 (--enforce-eager avoids it)"),
        KnownBad("prefix-cache-dflash2", "0.28.0", None, "prefix-caching-dflash2",
                 "prefix-cache hits drop to zero with a DFlash2 drafter: every request pays its full prefill",
                 "",
                 "z-lab/dflash #165 (vLLM nightly 0.28.1rc1.dev43, incoai/Qwen3.8-27B-DFlash2), vLLM #54360, "
                 "#54094 (0.26.1 dev, DFlash2 + YaRN: zero reuse)"),
        KnownBad("dflash2-selector-v1", "0.28.0", None, "dflash2-on-v1",
                 "DFlash2's candidate selector runs only in the V2 speculator: on the V1 model runner the drafter "
                 "silently degrades to base DFlash",
                 "VLLM_USE_V2_MODEL_RUNNER=1",
                 "noonghunna/club-3090 #1064 (DFlash2 port of vLLM PR #52816: \"The DFlash2 candidate selector only "
                 "runs in the V2 speculator. On the V1 runner the same checkpoint silently degrades to base "
                 "DFlash\")"),
        KnownBad("long-context-no-window", "0.20.0", None, "no-drafter-window",
                 "acceptance collapses at long contexts when the drafter's sliding-window layers run as full "
                 "attention",
                 "",
                 "vLLM PR #40898 (DFlash sliding-window support), AEON-7/Qwen3.6-27B-AEON-Ultimate-Uncensored-"
                 "DFlash #6 (per-position acceptance falls to 0 past ~2k tokens with SWA layers run full); "
                 "z-lab/dflash #66 (decode slows from 16k tokens on vLLM: \"vLLM's DFlash implementation doesn't "
                 "currently support sliding window attention for the draft model\", which SGLang exposes as "
                 "speculative-dflash-draft-window-size)"),
        KnownBad("dflash2-oob-sm80", "0.27.1", None, "dflash2",
                 "a DFlash2 drafter on sm_80 reads out of bounds after about 11k decode steps under sampling load: "
                 "CUDA illegal memory access (Xid 31), the engine dies",
                 "",
                 "vllm-project/vllm #55279 (open as read: \"DFlash2 (dflash method) deterministic cumulative OOB - "
                 "engine dies with CUDA IMA / Xid 31 after ~11k decode steps under sampling load (sm_80, v0.27.1)\"; "
                 "the assignee's first suspect is the split-KV block-table/metadata lifecycle, no fix merged as read); "
                 "syv-ai/qwen38-27b-rtx3090 #72 (the same report on a CMP 170HX, sm_80; not reproduced on an RTX "
                 "3090, sm_86, at 20,000 verify steps: so sm_80 only). Reported on 0.27.1 only; no later release "
                 "was reported fixed, so every later one is warned of",
                 arch=("8.0",)),
        KnownBad("custom-allreduce-geforce-p2p", "0.0.0", None, "geforce-pcie-p2p-custom-all-reduce",
                 "vLLM's custom all-reduce over a patched-driver PCIe peer path between GeForce cards hard-resets the "
                 "host under sustained decode (or returns wrong data)",
                 "--disable-custom-all-reduce",
                 "noonghunna/club-3090 #1332 (2x RTX 3090/3090 Ti, Gen4 x8, NVIDIA 610.57.04 patched with the aikitoria "
                 "open-gpu-kernel-modules P2P branch, vLLM 0.29.0 TP 2: \"the patched driver works, but vLLM's custom "
                 "all-reduce over the peer path hard-resets the machine\"; workaround --disable-custom-all-reduce; "
                 "club-3090 PR #1335: P2P off clean, P2P with custom all-reduce off clean and faster) and #922 "
                 "(\"Ampere + patched P2P: vLLM custom all-reduce returns WRONG DATA\" on two rigs; NCCL over the "
                 "same link is right). GeForce Ampere cards have no PCIe peer access with NVIDIA's stock driver: "
                 "these reports take a driver that grants it to GeForce cards as the patched one (not verified "
                 "against NVIDIA's documentation). Not tied to a vLLM release: every version with custom all-reduce",
                 arch=("8.6",)),
    ),
    source="each entry's own source; DFlash2 first shipped with vLLM PR #52816 (merged 2026-08, in 0.28 nightlies "
    "per z-lab/dflash #165)",
    read_from="the issues and PRs named in each entry",
    note="Each is a warning, only for the vLLM versions in its range (first..last inclusive, None = open-ended: "
    "no fix released as read), and, where `arch` names compute capabilities, only on those GPUs. The serve-command "
    "check judges them, but custom-allreduce-geforce-p2p, which the fabric check judges from the peer path's facts.",
)
