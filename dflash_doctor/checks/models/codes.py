"""The finding codes of the models layer: one constant per finding id, with its title and explanation. The
checks in checks.models build every finding from these (`DIR_MISSING.finding(...)`), so each id is one grep from
its explanation."""

from __future__ import annotations

from dataclasses import replace

from dflash_doctor.codes import Code

__all__ = [
    "ATTENTION_BACKEND",
    "ATTENTION_CODES",
    "ATTENTION_NONE_VALID",
    "ATTENTION_NOT_GIVEN",
    "ATTENTION_NO_GPU_FACTS",
    "ATTENTION_NO_VLLM",
    "ATTENTION_SELECTED_INVALID",
    "ATTENTION_UNKNOWN",
    "CODES",
    "DRAFTER_ARCHITECTURE_UNKNOWN",
    "DRAFTER_BLOCK_SIZE",
    "DRAFTER_CAUSALITY",
    "DRAFTER_CHECKED",
    "DRAFTER_CODES",
    "DRAFTER_CONFIG_WEIGHTS",
    "DRAFTER_CONTEXT_LIMITS_SERVED",
    "DRAFTER_CONTEXT_SHORTER_THAN_SERVED",
    "DRAFTER_DFLASH2_BLOCK_MISMATCH",
    "DRAFTER_DOMINO_HEAD",
    "DRAFTER_DTYPE",
    "DRAFTER_FC_WIDTH",
    "DRAFTER_FP8_KERNEL",
    "DRAFTER_HIDDEN_SIZE_MISMATCH",
    "DRAFTER_LAYER_IDS_HEURISTIC",
    "DRAFTER_LAYER_IDS_INVALID",
    "DRAFTER_LAYER_IDS_MISSING",
    "DRAFTER_LAYER_IDS_VLLM_OFFSET",
    "DRAFTER_LAYER_TYPES_LENGTH",
    "DRAFTER_MADE_FOR",
    "DRAFTER_MASK_HIDDEN",
    "DRAFTER_MASK_TOKEN_INVALID",
    "DRAFTER_MASK_TOKEN_MISSING",
    "DRAFTER_MASK_TOKEN_OUT_OF_VOCAB",
    "DRAFTER_MASK_TOKEN_TOP_LEVEL",
    "DRAFTER_NOT_GIVEN",
    "DRAFTER_NOT_JUDGED",
    "DRAFTER_OK",
    "DRAFTER_PADDED_VOCAB_V2",
    "DRAFTER_QUANTIZED_ACCEPTANCE",
    "DRAFTER_QUANTIZED_ATTENTION",
    "DRAFTER_ROPE_LAYOUT_FROM_TARGET",
    "DRAFTER_SAMPLE_FROM_ANCHOR",
    "DRAFTER_SLIDING_IGNORED",
    "DRAFTER_SLIDING_WINDOW_MISSING",
    "DRAFTER_TARGET_DEPTH_MISMATCH",
    "DRAFTER_TARGET_HIDDEN_SIZE_NULL",
    "DRAFTER_TARGET_NO_AUX_HIDDEN_STATES",
    "DRAFTER_TARGET_UNSUPPORTED",
    "DRAFTER_TENSOR_MISSING",
    "DRAFTER_TENSOR_PREFIX",
    "DRAFTER_TENSOR_SHAPE",
    "DRAFTER_TENSOR_UNEXPECTED",
    "DRAFTER_VLLM_WITHOUT_DFLASH",
    "DRAFTER_VOCAB_MISMATCH",
    "DRAFTER_WEIGHTS_FILE",
    "FILES_CODES",
    "FILES_CONFIG_BROKEN",
    "FILES_CONFIG_INCOMPLETE",
    "FILES_DIR_MISSING",
    "FILES_DIR_UNREADABLE",
    "FILES_INDEX_MISMATCH",
    "FILES_NOT_DOWNLOADED",
    "FILES_NOT_GIVEN",
    "FILES_NO_WEIGHTS",
    "FILES_OK",
    "FILES_TOKENIZER_MISSING",
    "FILES_WEIGHTS_BROKEN",
]

# drafter

DRAFTER_NOT_JUDGED = Code(
    "drafter.not-judged",
    "The drafter was not compared: its files are broken",
    "A config.json that does not parse or a directory that is missing leaves nothing to compare. Fix "
    "the model-files findings first.",
)

DRAFTER_OK = Code(
    "drafter.ok",
    "The drafter fits its target and this vLLM",
    "Architecture, mask token, target_layer_ids, fc width, tensor shapes, vocabulary and dtype agree "
    "with the target and with what the installed vLLM's DFlash loader expects.",
)

DRAFTER_CHECKED = Code(
    "drafter.checked",
    "What holds for the drafter",
    "The drafter rules that passed, listed beside the ones that did not.",
)

DRAFTER_VLLM_WITHOUT_DFLASH = Code(
    "drafter.vllm-without-dflash",
    "The installed vLLM has no DFlash",
    "DFlash (vllm/model_executor/models/qwen3_dflash.py) first shipped in vLLM 0.20.0. Upgrade vLLM.",
)

DRAFTER_ARCHITECTURE_UNKNOWN = Code(
    "drafter.architecture-unknown",
    "The drafter's architecture is not in vLLM's registry",
    "With method dflash, vLLM renames each architecture to DFlash{arch} unless it starts or ends with "
    "'DFlash' (transformers_utils/configs/eagle.py) and looks it up in its model registry; the released "
    "drafters say DFlashDraftModel. An unknown name fails when the engine starts.",
)

DRAFTER_MASK_TOKEN_MISSING = Code(
    "drafter.mask-token-missing",
    "dflash_config.mask_token_id is missing",
    "DFlash fills the drafted positions with a mask token; vLLM reads its id from "
    "dflash_config.mask_token_id and otherwise stops: 'For parallel drafting, the draft model config "
    "must have `pard_token`, `ptd_token_id`, or `dflash_config.mask_token_id` specified in its "
    "config.json.' Take the id from the publisher's config.",
)

DRAFTER_MASK_TOKEN_TOP_LEVEL = Code(
    "drafter.mask-token-top-level",
    "mask_token_id is at the top level, not in dflash_config",
    "vLLM 0.34 also reads a top-level mask_token_id; 0.20-0.24 read only dflash_config.mask_token_id. "
    "Move it into dflash_config so every version finds it.",
)

DRAFTER_MASK_TOKEN_INVALID = Code(
    "drafter.mask-token-invalid",
    "dflash_config.mask_token_id is not a token id",
    "It must be an integer. Take it from the publisher's config.",
)

DRAFTER_MASK_TOKEN_OUT_OF_VOCAB = Code(
    "drafter.mask-token-out-of-vocab",
    "The mask token id is outside the target's vocabulary",
    "The mask token is embedded with the target's embedding table; an id at or past vocab_size indexes "
    "past the table (a device-side assert on the GPU). The drafter belongs to another tokenizer, or the "
    "id is wrong.",
)

DRAFTER_LAYER_IDS_MISSING = Code(
    "drafter.layer-ids-missing",
    "dflash_config.target_layer_ids is missing",
    "The drafter reads the target's hidden states at the layers it was trained on. Without the ids, "
    "vLLM falls back to EAGLE-3's default layers, which no DFlash drafter was trained on; z-lab/dflash "
    "and SGLang now require the key. Take dflash_config.target_layer_ids from the drafter publisher's "
    "own config.json; never compute them (z-lab/dflash#156, SGLang#37475).",
)

DRAFTER_LAYER_IDS_INVALID = Code(
    "drafter.layer-ids-invalid",
    "target_layer_ids are out of range, unordered or not integers",
    "Each id names a target layer whose output the drafter reads: 0 <= id < the target's "
    "num_hidden_layers, strictly increasing. An id past the target's depth is never recorded, fc's "
    "input comes up short and the first forward pass fails. Take dflash_config.target_layer_ids from "
    "the drafter publisher's own config.json; never compute them (z-lab/dflash#156, SGLang#37475).",
)

DRAFTER_LAYER_IDS_HEURISTIC = Code(
    "drafter.layer-ids-heuristic",
    "target_layer_ids equal the uniform-spacing formula",
    "z-lab/dflash's build_target_layer_ids spreads ids evenly from 1 to n-3. That formula is wrong for "
    "most released drafters; a wrong set of the right length loads fine and acceptance silently "
    "collapses (z-lab/dflash#156, SGLang#37475). Ids equal to it were likely computed when the config "
    "was written by hand. Take dflash_config.target_layer_ids from the drafter publisher's own "
    "config.json; never compute them (z-lab/dflash#156, SGLang#37475).",
)

DRAFTER_LAYER_IDS_VLLM_OFFSET = Code(
    "drafter.layer-ids-vllm-offset",
    "This vLLM reads target_layer_ids one layer early",
    "vLLM 0.20.0-0.21.0 pass DFlash's ids to the target as they are, but the target records the output "
    "of layer i as aux state i + 1; from 0.22.0 vLLM adds 1. On the older versions every id reads the "
    "layer before the trained one and acceptance suffers. Upgrade to vLLM 0.22.0 or later.",
)

DRAFTER_TARGET_DEPTH_MISMATCH = Code(
    "drafter.target-depth-mismatch",
    "The drafter was trained for a target of another depth",
    "The drafter's num_target_layers differs from the target's num_hidden_layers: it was likely made "
    "for another model.",
)

DRAFTER_HIDDEN_SIZE_MISMATCH = Code(
    "drafter.hidden-size-mismatch",
    "The drafter's hidden size differs from the target's",
    "The drafter embeds its queries with the target's embedding table and projects the target's hidden "
    "states through fc; both have the target's width. hidden_size must equal the target's unless "
    "target_hidden_size says otherwise.",
)

DRAFTER_TARGET_HIDDEN_SIZE_NULL = Code(
    "drafter.target-hidden-size-null",
    "target_hidden_size is null",
    "vLLM 0.20-0.24 build fc with `target_hidden_size * n` whenever the key exists, so a null value is "
    "a TypeError at model construction. Delete the key or set the target's hidden_size.",
)

DRAFTER_FC_WIDTH = Code(
    "drafter.fc-width",
    "fc.weight's width does not match the layer ids and the target",
    "fc.weight is [hidden_size, len(target_layer_ids) x (target_hidden_size or hidden_size)] and its "
    "input is the target's hidden states at those layers, concatenated. A different stored width fails "
    "the weight loader's shape check; a different target width fails the first forward pass. The usual "
    "cause is a target_layer_ids list of the wrong length.",
)

DRAFTER_CONFIG_WEIGHTS = Code(
    "drafter.config-weights",
    "The drafter's config.json contradicts its own weights",
    "The weights record the geometry they were saved with: the layers they hold, the hidden size "
    "(norm.weight), head_dim (q_norm), heads and KV heads (q_proj and k_proj rows / head_dim) and the "
    "intermediate size (gate_proj). vLLM builds the drafter from config.json instead, so a key that "
    "disagrees makes every tensor that depends on it missing, unexpected or mis-shaped, and loading "
    "stops. This is the one finding to fix; the tensor findings that follow from it name it as their "
    "cause. A layer count above what the weights hold is reported here once, never enumerated. Set the "
    "key to what the weights say, or take the publisher's config.json.",
)

DRAFTER_TENSOR_SHAPE = Code(
    "drafter.tensor-shape",
    "A drafter tensor's shape does not match its config.json",
    "vLLM builds each parameter from config.json (hidden_size, heads, head_dim, intermediate_size) and "
    "the weight loader asserts equal shapes. The config.json was likely written for another model.",
)

DRAFTER_TENSOR_MISSING = Code(
    "drafter.tensor-missing",
    "Tensors the config implies are missing",
    "vLLM stops with 'Following weights were not initialized from checkpoint'. num_hidden_layers or "
    "attention_bias in config.json may not match the weights.",
)

DRAFTER_TENSOR_UNEXPECTED = Code(
    "drafter.tensor-unexpected",
    "Tensors that match no parameter of vLLM's DFlash drafter",
    "vLLM stops with 'There is no module or parameter named ...'. The checkpoint is for another runtime "
    "or architecture.",
)

DRAFTER_TENSOR_PREFIX = Code(
    "drafter.tensor-prefix",
    "Drafter tensors carry a 'model.' prefix",
    "vLLM's DFlash loader adds 'model.' to every tensor name itself; a prefixed checkpoint becomes "
    "'model.model....' and matches nothing. Re-save it without the prefix.",
)

DRAFTER_MASK_HIDDEN = Code(
    "drafter.mask-hidden",
    "The drafter ships a mask_hidden tensor",
    "vLLM asserts 'DFlash should use mask_token_id to embed the padding hidden state': a checkpoint "
    "with mask_hidden was exported for another runtime.",
)

DRAFTER_VOCAB_MISMATCH = Code(
    "drafter.vocab-mismatch",
    "The drafter's vocabulary differs from the target's",
    "The drafter shares the target's embedding and lm_head, so its vocab_size must equal the target's, "
    "unless it brings its own lm_head and a d2t mapping (draft_vocab_size). A drafter vocabulary below "
    "the target's is a warning: a target padded past its tokenizer (MiMo: 152576 against its drafter's "
    "152064) drafts as usual with the target's head (vLLM PR #46435), but a drafter made for another "
    "tokenizer drafts other tokens.",
)

DRAFTER_DTYPE = Code(
    "drafter.dtype",
    "The drafter's weights do not fit the serving dtype",
    "vLLM serves the drafter in the target's dtype. bfloat16 or float32 weights served in float16 can "
    "overflow.",
)

DRAFTER_BLOCK_SIZE = Code(
    "drafter.block-size",
    "num_speculative_tokens exceeds the drafter's block",
    "A DFlash block is one anchor plus block_size - 1 mask tokens; vLLM drafts num_speculative_tokens "
    "masks and never checks them against block_size, so a larger value drafts positions the drafter "
    "never trained on. Use block_size - 1 (15 for the b16 drafters).",
)

DRAFTER_DFLASH2_BLOCK_MISMATCH = Code(
    "drafter.dflash2-block-mismatch",
    "A DFlash2 drafter served with fewer speculative tokens than its block",
    "vLLM builds DFlash2's grouped convolution over blocks of 1 + num_speculative_tokens positions "
    "(qwen3_dflash2.py, from 0.29.0), while the drafter was trained on block_size positions: with fewer "
    "tokens the convolution's positions no longer line up with training, and acceptance drops with no "
    "error (vllm-project/recipes #837: k \"must be 7 (block_size 8 minus one)\"). Serve with block_size "
    "- 1. (More tokens than that is drafter.block-size.)",
)

DRAFTER_SLIDING_WINDOW_MISSING = Code(
    "drafter.sliding-window-missing",
    "Sliding-attention layers without a window",
    "vLLM 0.34 stops with 'DFlash sliding attention requires a window size configured in "
    "dflash_config.swa_window_size or the top-level sliding_window.' Set the window from the "
    "publisher's config.",
)

DRAFTER_SLIDING_IGNORED = Code(
    "drafter.sliding-ignored",
    "This vLLM ignores the drafter's sliding-window layers",
    "vLLM 0.20-0.24 never read layer_types for DFlash: every drafter layer runs full attention, unlike "
    "training. Upgrade vLLM for sliding-window drafters.",
)

DRAFTER_SAMPLE_FROM_ANCHOR = Code(
    "drafter.sample-from-anchor",
    "dflash_config.sample_from_anchor is true",
    "vLLM 0.34 refuses it: 'sample_from_anchor=True is not supported for DFlash. DFlash uses a fixed "
    "1+N query layout where the anchor is the bonus token.' Older versions ignore the key.",
)

DRAFTER_TARGET_UNSUPPORTED = Code(
    "drafter.target-unsupported",
    "This vLLM runs DFlash only on some target model types",
    "vLLM 0.20-0.21 raise '{method} is only supported for [...] models' unless the target's text "
    "model_type contains one of the listed families (llama, qwen, ...).",
)

DRAFTER_CONTEXT_SHORTER_THAN_SERVED = Code(
    "drafter.context-shorter-than-served",
    "The drafter's context is shorter than the served one",
    "The drafter's max_position_embeddings (after rope scaling) is below --max-model-len (or the "
    "target's own length). On the V2 model runner (vLLM's default from 0.29; the only one in 0.34) the "
    "first request longer than the drafter's context reads past its rotary cache and the engine dies "
    "with a CUDA illegal memory access (vLLM #57941, PR #57964); on the V1 runner drafting stops for "
    "such requests. Serve with --max-model-len no longer than the drafter's context, or raise the "
    "drafter's max_position_embeddings as PR #57964 does. From vLLM 0.33 vLLM itself raises a drafter "
    "whose RoPE only sizes a cache (default, linear, llama3, ntk, proportional) and lowers the served "
    "length for the others (drafter.context-limits-served).",
)

DRAFTER_CONTEXT_LIMITS_SERVED = Code(
    "drafter.context-limits-served",
    "vLLM lowers the served context to the drafter's",
    "From vLLM 0.33, a drafter shorter than the served context whose RoPE cannot simply grow (yarn, "
    "dynamic, longrope) makes VllmConfig._limit_max_model_len_to_draft lower the served max_model_len "
    "to the drafter's, with only a log line: the server starts, and every request longer than the "
    "drafter's context is refused. Say the length on the command line (--max-model-len), or serve a "
    "drafter made for the longer context.",
)

DRAFTER_LAYER_TYPES_LENGTH = Code(
    "drafter.layer-types-length",
    "layer_types and num_hidden_layers disagree",
    "transformers refuses a config whose layer_types does not have one entry per layer "
    "(\"`num_hidden_layers` (N) must be equal to the number of layer types (M)\"), so vLLM never builds "
    "the drafter. Take layer_types from the publisher's config.json.",
)

DRAFTER_TARGET_NO_AUX_HIDDEN_STATES = Code(
    "drafter.target-no-aux-hidden-states",
    "The target's model class does not expose auxiliary hidden states",
    "DFlash reads hidden states from inside the target; the installed vLLM checks that the target's "
    "class implements SupportsEagle3 (read from its runner and the class's bases) and otherwise stops "
    "at start with \"Model does not support EAGLE3 interface\" (vLLM PR #45546). Use a vLLM whose class "
    "for this architecture implements it, or another target.",
)

DRAFTER_QUANTIZED_ATTENTION = Code(
    "drafter.quantized-attention",
    "A quantized drafter with quantized q/k/v",
    "The installed vLLM's DFlash drafter file (the one its registry serves the drafter's architecture from) "
    "slices qkv_proj.weight raw for its fused context K/V and applies F.linear, bypassing the quantization "
    "method: FP8 q/k/v stop the start-up profiling run with \"expected mat1 and mat2 to have the same dtype\", "
    "packed 4-bit with an AttributeError (vLLM #51581, #53116). qwen3_dflash.py does so up to 0.30.x; from 0.31.0 "
    "the slice sits under a guard on the layers' quant method, which the doctor reads from the installed source "
    "(laguna_dflash.py has no guard through 0.34.0). Serve the BF16 drafter, or one quantized with self_attn "
    "left out.",
)

DRAFTER_DOMINO_HEAD = Code(
    "drafter.domino-head",
    "A Domino draft, whose GRU head vLLM has no runtime for",
    "Domino drafts are DFlash drafts with a GRU correction head (prefix_gru, embed_proj) that refines the parallel "
    "draft's logits from the tokens drafted before. No vLLM release runs it (the Domino PR #47627 was closed "
    "unmerged): the DFlash loader has no module for the head's tensors and stops (\"There is no module or parameter "
    "named 'prefix_gru'\"; a KeyError before 0.26), and a copy with the head's tensors removed serves the bare "
    "backbone, without the correction it was trained for (NVIDIA-NeMo/Automodel #2913 refuses to serve them for "
    "that reason). The doctor reads the head's tensors from the safetensors headers and whether the installed "
    "vLLM's drafter files name prefix_gru. Serve the plain DFlash draft, or the Domino draft on a runtime that "
    "runs the head.",
)

DRAFTER_CAUSALITY = Code(
    "drafter.causality",
    "The drafter's causality as vLLM resolves it differs from what the draft states or needs",
    "vLLM serves a DFlash draft non-causal unless the config says otherwise, and which keys it reads depends on "
    "the release: 0.34 (from 0.28) takes is_causal, then dflash_config.causal, then sliding layers from "
    "layer_types; 0.26-0.27 the last two; 0.23-0.24 dflash_config.causal alone; 0.20-0.22 none. A draft trained "
    "with causal in-block attention (JetSpec: the DFlash format, trained causal; Automodel stamps "
    "dflash_config.causal=true) served non-causal, or the reverse, loses acceptance (vLLM PR #43445). The doctor "
    "reads the keys from the installed source and warns where a stated key is not the one that decides, or a "
    "config that names JetSpec resolves non-causal. No on-disk marker tells an unstamped JetSpec draft from a "
    "DFlash one, so such a draft is not judged. Set dflash_config.causal to how the draft was trained.",
)

DRAFTER_QUANTIZED_ACCEPTANCE = Code(
    "drafter.quantized-acceptance",
    "The pair's quantization lowers acceptance",
    "An AWQ target gives the drafter other hidden states than the BF16 target it was trained on, and a "
    "per-tensor FP8 drafter loses its scales on the fused context path: both start, and acceptance "
    "falls, to near zero in reports (z-lab/dflash #52, #152; vLLM #51581). Measure acceptance, or serve "
    "the BF16 drafter and a BF16/FP8-block target.",
)

DRAFTER_FP8_KERNEL = Code(
    "drafter.fp8-kernel",
    "FP8 weights on a GPU without FP8 tensor cores",
    "Below sm_89 the installed vLLM runs FP8 checkpoints through its Marlin weight-only kernel (W8A16), "
    "read from its fp8.py; below the FP8 method's minimum capability (7.5) it refuses to start.",
)

DRAFTER_MADE_FOR = Code(
    "drafter.made-for",
    "The drafter was made for another target",
    "The drafter's README (its base_model) names the target it was trained for, and its layer ids, fc "
    "width or hidden size do not fit this target: vLLM fails late (\"mat1 and mat2 shapes cannot be "
    "multiplied\", vLLM PR #48113) or drafts badly. Serve the named target, or the drafter made for "
    "this one.",
)

DRAFTER_ROPE_LAYOUT_FROM_TARGET = Code(
    "drafter.rope-layout-from-target",
    "vLLM 0.28 rotates the drafter the target's way, not the way it was made",
    "vLLM 0.28.0 (PR #51655) copies the target's RoPE layout (is_neox_style of its first rotary "
    "embedding) onto the DFlash drafter. A drafter distilled with the other layout (an interleaved "
    "target such as DeepSeek or GLM-5, and a drafter that does not say \"is_neox_style\": false) drafts "
    "with rotated positions: acceptance length about 1.03 against 7.78 (vllm #53063). vLLM 0.29.0 (PR "
    "#54373) reads the drafter's own config; 0.27 and earlier use neox. The target's layout is read "
    "from its model file in the installed vLLM.",
)

DRAFTER_PADDED_VOCAB_V2 = Code(
    "drafter.padded-vocab-v2",
    "A padded target vocabulary leaves the drafter without an lm_head on V2",
    "vLLM 0.24's V2 model runner shares the target's lm_head with a DFlash drafter only when the "
    "drafter has no vocabulary mapping, and the drafter gets one whenever its vocabulary size differs "
    "from the target's: a target padded past the drafter's vocabulary (152576 against 152064) leaves "
    "the drafter with its own, never-loaded lm_head, and 0% of the drafts are accepted. vLLM PR #46435 "
    "(0.25.1 and later) fixed it; the V1 runner shares the head. Upgrade vLLM or, on the releases that "
    "still have V1 (0.34.0 refuses it), set VLLM_USE_V2_MODEL_RUNNER=0.",
)

DRAFTER_WEIGHTS_FILE = Code(
    "drafter.weights-file",
    "vLLM would not load the drafter's weights file",
    "vLLM loads every *.safetensors whatever its name; with model.safetensors.index.json only the files "
    "its weight_map names, and with a consolidated*.safetensors file only those (Mistral format). A "
    "renamed file that an index does not list, or a leftover consolidated file, is never read. No "
    "renaming is needed otherwise.",
)



# drafter-attention

ATTENTION_BACKEND = Code(
    "drafter-attention.backend",
    "The attention backend vLLM picks for DFlash's non-causal attention",
    "DFlash drafts a whole block at once with non-causal attention. The doctor evaluates the installed "
    "vLLM's own backend order (platforms/cuda.py) and each backend's supports_non_causal, "
    "compute-capability, head-size and KV-cache-dtype checks (--kv-cache-dtype, or the speculative "
    "config's kv_cache_dtype) for this GPU. In 0.20.x every layer, the target's too, needs a non-causal "
    "backend; from 0.21 only the drafter.",
)

ATTENTION_NONE_VALID = Code(
    "drafter-attention.none-valid",
    "No attention backend supports DFlash here",
    "For this GPU, head size and KV cache dtype no backend in vLLM's order supports non-causal "
    "attention; vLLM stops with 'No valid attention backend found', giving each backend's reasons (an "
    "fp8 KV cache: FlashAttention only with FA3 on sm_90 or, from 0.27.1, FA4 on sm_100; FlashInfer and "
    "Triton only from 0.24).",
)

ATTENTION_SELECTED_INVALID = Code(
    "drafter-attention.selected-invalid",
    "The selected attention backend cannot run DFlash here",
    "An explicitly selected backend (--attention-backend, or the speculative config's attention_backend "
    "from 0.21) that does not support non-causal attention, this compute capability, head size or KV "
    "cache dtype makes vLLM stop with 'Selected backend ... is not valid for this configuration'.",
)

ATTENTION_UNKNOWN = Code(
    "drafter-attention.unknown",
    "The backend choice could not be read from vLLM's source",
    "The installed vLLM's selection code could not be evaluated for this compute capability.",
)

ATTENTION_NO_GPU_FACTS = Code(
    "drafter-attention.no-gpu-facts",
    "No GPU to choose an attention backend for",
    "No GPU facts and no --target-arch: the choice depends on the compute capability.",
)

ATTENTION_NO_VLLM = Code(
    "drafter-attention.no-vllm",
    "No vLLM source to read the backend choice from",
    "vLLM is not installed in the inspected interpreter.",
)



# model-files

FILES_NOT_GIVEN = Code(
    "model-files.not-given",
    "No model or drafter directory to check",
    "The model checks read the target's and the drafter's config.json and safetensors headers; none was "
    "given. `dflash-doctor serve -- vllm serve MODEL --speculative-config '{...\"model\": DRAFTER...}'` "
    "gives both.",
)

FILES_OK = Code(
    "model-files.files-ok",
    "The model directory reads cleanly",
    "config.json parses, every safetensors header passes the reference reader's rules (length, JSON, "
    "contiguous offsets, sizes matching dtype x shape, file length), and the index agrees with the "
    "shards.",
)

FILES_DIR_MISSING = Code(
    "model-files.dir-missing",
    "The model directory does not exist",
    "vLLM treats a name that exists on disk as a local directory, otherwise as a Hugging Face repo id. "
    "A mistyped local path therefore becomes a download attempt (or an error offline). Relative paths "
    "are resolved from the directory vllm serve runs in.",
)

FILES_DIR_UNREADABLE = Code(
    "model-files.dir-unreadable",
    "The model directory or a file in it cannot be read",
    "The serving user cannot read the directory or a file (permissions, a dangling link, a FIFO). vLLM "
    "fails while loading. Fix the permissions (chmod -R a+rX DIR).",
)

FILES_NOT_DOWNLOADED = Code(
    "model-files.not-downloaded",
    "The model is a repo id that is not in the Hugging Face cache",
    "vLLM would download it at start; the doctor checks only files on disk. Download it first "
    "(huggingface-cli download REPO) so it can be checked and so an offline start works.",
)

FILES_CONFIG_BROKEN = Code(
    "model-files.config-broken",
    "config.json is missing or not valid JSON",
    "vLLM builds the model from config.json; without it nothing loads. Download the publisher's "
    "config.json again.",
)

FILES_CONFIG_INCOMPLETE = Code(
    "model-files.config-incomplete",
    "config.json lacks keys vLLM builds the model from",
    "num_hidden_layers, hidden_size, num_attention_heads and vocab_size (in the nested text_config of a "
    "multimodal model) are required. A hand-written config.json that lacks them fails at model "
    "construction.",
)

FILES_WEIGHTS_BROKEN = Code(
    "model-files.weights-broken",
    "A safetensors file is corrupt",
    "The file's header or length breaks the safetensors format (huggingface/safetensors tensor.rs "
    "read_metadata and Metadata::validate): truncated download, a header length past the end, a header "
    "claim over 100 MB, overlapping or gapped offsets, or a byte span that does not match dtype x "
    "shape. vLLM fails while loading, after minutes. Download the file again.",
)

FILES_INDEX_MISMATCH = Code(
    "model-files.index-mismatch",
    "model.safetensors.index.json and the shards disagree",
    "A shard the index names is missing, or a tensor sits in another shard than the index says, or "
    "appears twice. Download the missing shard, or the whole snapshot again.",
)

FILES_NO_WEIGHTS = Code(
    "model-files.no-weights",
    "The directory has no weight files",
    "No *.safetensors (or other weight files) in the model directory: vLLM has nothing to load.",
)

FILES_TOKENIZER_MISSING = Code(
    "model-files.tokenizer-missing",
    "The target has no tokenizer files",
    "vLLM loads the tokenizer from the model directory unless --tokenizer is given. Copy tokenizer.json "
    "and tokenizer_config.json in, or pass --tokenizer.",
)


# The same "nothing given" finding for the drafter checks, each with its own id (the v1 id in codes.aliases became three).
DRAFTER_NOT_GIVEN = replace(FILES_NOT_GIVEN, id="drafter.not-given")
ATTENTION_NOT_GIVEN = replace(FILES_NOT_GIVEN, id="drafter-attention.not-given")

DRAFTER_CODES: tuple[Code, ...] = (
    DRAFTER_NOT_JUDGED,
    DRAFTER_OK,
    DRAFTER_CHECKED,
    DRAFTER_VLLM_WITHOUT_DFLASH,
    DRAFTER_ARCHITECTURE_UNKNOWN,
    DRAFTER_MASK_TOKEN_MISSING,
    DRAFTER_MASK_TOKEN_TOP_LEVEL,
    DRAFTER_MASK_TOKEN_INVALID,
    DRAFTER_MASK_TOKEN_OUT_OF_VOCAB,
    DRAFTER_LAYER_IDS_MISSING,
    DRAFTER_LAYER_IDS_INVALID,
    DRAFTER_LAYER_IDS_HEURISTIC,
    DRAFTER_LAYER_IDS_VLLM_OFFSET,
    DRAFTER_TARGET_DEPTH_MISMATCH,
    DRAFTER_HIDDEN_SIZE_MISMATCH,
    DRAFTER_TARGET_HIDDEN_SIZE_NULL,
    DRAFTER_FC_WIDTH,
    DRAFTER_CONFIG_WEIGHTS,
    DRAFTER_TENSOR_SHAPE,
    DRAFTER_TENSOR_MISSING,
    DRAFTER_TENSOR_UNEXPECTED,
    DRAFTER_TENSOR_PREFIX,
    DRAFTER_MASK_HIDDEN,
    DRAFTER_VOCAB_MISMATCH,
    DRAFTER_DTYPE,
    DRAFTER_BLOCK_SIZE,
    DRAFTER_DFLASH2_BLOCK_MISMATCH,
    DRAFTER_SLIDING_WINDOW_MISSING,
    DRAFTER_SLIDING_IGNORED,
    DRAFTER_SAMPLE_FROM_ANCHOR,
    DRAFTER_TARGET_UNSUPPORTED,
    DRAFTER_CONTEXT_SHORTER_THAN_SERVED,
    DRAFTER_CONTEXT_LIMITS_SERVED,
    DRAFTER_LAYER_TYPES_LENGTH,
    DRAFTER_TARGET_NO_AUX_HIDDEN_STATES,
    DRAFTER_QUANTIZED_ATTENTION,
    DRAFTER_QUANTIZED_ACCEPTANCE,
    DRAFTER_DOMINO_HEAD,
    DRAFTER_CAUSALITY,
    DRAFTER_FP8_KERNEL,
    DRAFTER_MADE_FOR,
    DRAFTER_ROPE_LAYOUT_FROM_TARGET,
    DRAFTER_PADDED_VOCAB_V2,
    DRAFTER_WEIGHTS_FILE,
)
ATTENTION_CODES: tuple[Code, ...] = (
    ATTENTION_BACKEND,
    ATTENTION_NONE_VALID,
    ATTENTION_SELECTED_INVALID,
    ATTENTION_UNKNOWN,
    ATTENTION_NO_GPU_FACTS,
    ATTENTION_NO_VLLM,
)
FILES_CODES: tuple[Code, ...] = (
    FILES_NOT_GIVEN,
    FILES_OK,
    FILES_DIR_MISSING,
    FILES_DIR_UNREADABLE,
    FILES_NOT_DOWNLOADED,
    FILES_CONFIG_BROKEN,
    FILES_CONFIG_INCOMPLETE,
    FILES_WEIGHTS_BROKEN,
    FILES_INDEX_MISMATCH,
    FILES_NO_WEIGHTS,
    FILES_TOKENIZER_MISSING,
)
CODES: tuple[Code, ...] = (*DRAFTER_CODES, *ATTENTION_CODES, *FILES_CODES)
