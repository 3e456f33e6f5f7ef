"""Codes of the model layer: the model files, the DFlash drafter against its target, the drafter's attention."""

from dflash_doctor.codes import Code

_IDS_FIX = ("Take dflash_config.target_layer_ids from the drafter publisher's own config.json; never compute them "
            "(z-lab/dflash#156, SGLang#37475).")

CODES = (
    # model files
    Code("model-files.not-given", "No model or drafter directory to check",
         "The model checks read the target's and the drafter's config.json and safetensors headers; none was "
         "given. `dflash-doctor serve -- vllm serve MODEL --speculative-config '{...\"model\": DRAFTER...}'` gives "
         "both."),
    Code("drafter.not-judged", "The drafter was not compared: its files are broken",
         "A config.json that does not parse or a directory that is missing leaves nothing to compare. Fix the "
         "model-files findings first."),
    Code("model-files.files-ok", "The model directory reads cleanly",
         "config.json parses, every safetensors header passes the reference reader's rules (length, JSON, "
         "contiguous offsets, sizes matching dtype x shape, file length), and the index agrees with the shards."),
    Code("model-files.dir-missing", "The model directory does not exist",
         "vLLM treats a name that exists on disk as a local directory, otherwise as a Hugging Face repo id. A "
         "mistyped local path therefore becomes a download attempt (or an error offline). Relative paths are "
         "resolved from the directory vllm serve runs in."),
    Code("model-files.dir-unreadable", "The model directory or a file in it cannot be read",
         "The serving user cannot read the directory or a file (permissions, a dangling link, a FIFO). vLLM fails "
         "while loading. Fix the permissions (chmod -R a+rX DIR)."),
    Code("model-files.not-downloaded", "The model is a repo id that is not in the Hugging Face cache",
         "vLLM would download it at start; the doctor checks only files on disk. Download it first "
         "(huggingface-cli download REPO) so it can be checked and so an offline start works."),
    Code("model-files.config-broken", "config.json is missing or not valid JSON",
         "vLLM builds the model from config.json; without it nothing loads. Download the publisher's config.json "
         "again."),
    Code("model-files.config-incomplete", "config.json lacks keys vLLM builds the model from",
         "num_hidden_layers, hidden_size, num_attention_heads and vocab_size (in the nested text_config of a "
         "multimodal model) are required. A hand-written config.json that lacks them fails at model construction."),
    Code("model-files.weights-broken", "A safetensors file is corrupt",
         "The file's header or length breaks the safetensors format (huggingface/safetensors tensor.rs "
         "read_metadata and Metadata::validate): truncated download, a header length past the end, a header claim "
         "over 100 MB, overlapping or gapped offsets, or a byte span that does not match dtype x shape. vLLM fails "
         "while loading, after minutes. Download the file again."),
    Code("model-files.index-mismatch", "model.safetensors.index.json and the shards disagree",
         "A shard the index names is missing, or a tensor sits in another shard than the index says, or appears "
         "twice. Download the missing shard, or the whole snapshot again."),
    Code("model-files.no-weights", "The directory has no weight files",
         "No *.safetensors (or other weight files) in the model directory: vLLM has nothing to load."),
    Code("model-files.tokenizer-missing", "The target has no tokenizer files",
         "vLLM loads the tokenizer from the model directory unless --tokenizer is given. Copy tokenizer.json and "
         "tokenizer_config.json in, or pass --tokenizer."),
    # drafter
    Code("drafter.ok", "The drafter fits its target and this vLLM",
         "Architecture, mask token, target_layer_ids, fc width, tensor shapes, vocabulary and dtype agree with the "
         "target and with what the installed vLLM's DFlash loader expects."),
    Code("drafter.checked", "What holds for the drafter",
         "The drafter rules that passed, listed beside the ones that did not."),
    Code("drafter.vllm-without-dflash", "The installed vLLM has no DFlash",
         "DFlash (vllm/model_executor/models/qwen3_dflash.py) first shipped in vLLM 0.20.0. Upgrade vLLM."),
    Code("drafter.architecture-unknown", "The drafter's architecture is not in vLLM's registry",
         "With method dflash, vLLM renames each architecture to DFlash{arch} unless it starts or ends with "
         "'DFlash' (transformers_utils/configs/eagle.py) and looks it up in its model registry; the released "
         "drafters say DFlashDraftModel. An unknown name fails when the engine starts."),
    Code("drafter.mask-token-missing", "dflash_config.mask_token_id is missing",
         "DFlash fills the drafted positions with a mask token; vLLM reads its id from dflash_config.mask_token_id "
         "and otherwise stops: 'For parallel drafting, the draft model config must have `pard_token`, "
         "`ptd_token_id`, or `dflash_config.mask_token_id` specified in its config.json.' Take the id from the "
         "publisher's config."),
    Code("drafter.mask-token-top-level", "mask_token_id is at the top level, not in dflash_config",
         "vLLM 0.34 also reads a top-level mask_token_id; 0.20-0.24 read only dflash_config.mask_token_id. Move it "
         "into dflash_config so every version finds it."),
    Code("drafter.mask-token-invalid", "dflash_config.mask_token_id is not a token id",
         "It must be an integer. Take it from the publisher's config."),
    Code("drafter.mask-token-out-of-vocab", "The mask token id is outside the target's vocabulary",
         "The mask token is embedded with the target's embedding table; an id at or past vocab_size indexes past "
         "the table (a device-side assert on the GPU). The drafter belongs to another tokenizer, or the id is "
         "wrong."),
    Code("drafter.layer-ids-missing", "dflash_config.target_layer_ids is missing",
         "The drafter reads the target's hidden states at the layers it was trained on. Without the ids, vLLM "
         "falls back to EAGLE-3's default layers, which no DFlash drafter was trained on; z-lab/dflash and SGLang "
         "now require the key. " + _IDS_FIX),
    Code("drafter.layer-ids-invalid", "target_layer_ids are out of range, unordered or not integers",
         "Each id names a target layer whose output the drafter reads: 0 <= id < the target's num_hidden_layers, "
         "strictly increasing. An id past the target's depth is never recorded, fc's input comes up short and "
         "the first forward pass fails. " + _IDS_FIX),
    Code("drafter.layer-ids-heuristic", "target_layer_ids equal the uniform-spacing formula",
         "z-lab/dflash's build_target_layer_ids spreads ids evenly from 1 to n-3. That formula is wrong for most "
         "released drafters; a wrong set of the right length loads fine and acceptance silently collapses "
         "(z-lab/dflash#156, SGLang#37475). Ids equal to it were likely computed when the config was written by "
         "hand. " + _IDS_FIX),
    Code("drafter.layer-ids-vllm-offset", "This vLLM reads target_layer_ids one layer early",
         "vLLM 0.20.0-0.21.0 pass DFlash's ids to the target as they are, but the target records the output of "
         "layer i as aux state i + 1; from 0.22.0 vLLM adds 1. On the older versions every id reads the layer "
         "before the trained one and acceptance suffers. Upgrade to vLLM 0.22.0 or later."),
    Code("drafter.target-depth-mismatch", "The drafter was trained for a target of another depth",
         "The drafter's num_target_layers differs from the target's num_hidden_layers: it was likely made for "
         "another model."),
    Code("drafter.hidden-size-mismatch", "The drafter's hidden size differs from the target's",
         "The drafter embeds its queries with the target's embedding table and projects the target's hidden states "
         "through fc; both have the target's width. hidden_size must equal the target's unless target_hidden_size "
         "says otherwise."),
    Code("drafter.target-hidden-size-null", "target_hidden_size is null",
         "vLLM 0.20-0.24 build fc with `target_hidden_size * n` whenever the key exists, so a null value is a "
         "TypeError at model construction. Delete the key or set the target's hidden_size."),
    Code("drafter.fc-width", "fc.weight's width does not match the layer ids and the target",
         "fc.weight is [hidden_size, len(target_layer_ids) x (target_hidden_size or hidden_size)] and its input is "
         "the target's hidden states at those layers, concatenated. A different stored width fails the weight "
         "loader's shape check; a different target width fails the first forward pass. The usual cause is a "
         "target_layer_ids list of the wrong length."),
    Code("drafter.config-weights", "The drafter's config.json contradicts its own weights",
         "The weights record the geometry they were saved with: the layers they hold, the hidden size (norm.weight), "
         "head_dim (q_norm), heads and KV heads (q_proj and k_proj rows / head_dim) and the intermediate size "
         "(gate_proj). vLLM builds the drafter from config.json instead, so a key that disagrees makes every tensor "
         "that depends on it missing, unexpected or mis-shaped, and loading stops. This is the one finding to fix; "
         "the tensor findings that follow from it name it as their cause. A layer count above what the weights "
         "hold is reported here once, never enumerated. Set the key to what the weights say, or take the "
         "publisher's config.json."),
    Code("drafter.tensor-shape", "A drafter tensor's shape does not match its config.json",
         "vLLM builds each parameter from config.json (hidden_size, heads, head_dim, intermediate_size) and the "
         "weight loader asserts equal shapes. The config.json was likely written for another model."),
    Code("drafter.tensor-missing", "Tensors the config implies are missing",
         "vLLM stops with 'Following weights were not initialized from checkpoint'. num_hidden_layers or "
         "attention_bias in config.json may not match the weights."),
    Code("drafter.tensor-unexpected", "Tensors that match no parameter of vLLM's DFlash drafter",
         "vLLM stops with 'There is no module or parameter named ...'. The checkpoint is for another runtime or "
         "architecture."),
    Code("drafter.tensor-prefix", "Drafter tensors carry a 'model.' prefix",
         "vLLM's DFlash loader adds 'model.' to every tensor name itself; a prefixed checkpoint becomes "
         "'model.model....' and matches nothing. Re-save it without the prefix."),
    Code("drafter.mask-hidden", "The drafter ships a mask_hidden tensor",
         "vLLM asserts 'DFlash should use mask_token_id to embed the padding hidden state': a checkpoint with "
         "mask_hidden was exported for another runtime."),
    Code("drafter.vocab-mismatch", "The drafter's vocabulary differs from the target's",
         "The drafter shares the target's embedding and lm_head, so its vocab_size must equal the target's, unless "
         "it brings its own lm_head and a d2t mapping (draft_vocab_size)."),
    Code("drafter.dtype", "The drafter's weights do not fit the serving dtype",
         "vLLM serves the drafter in the target's dtype. bfloat16 or float32 weights served in float16 can "
         "overflow."),
    Code("drafter.block-size", "num_speculative_tokens exceeds the drafter's block",
         "A DFlash block is one anchor plus block_size - 1 mask tokens; vLLM drafts num_speculative_tokens masks "
         "and never checks them against block_size, so a larger value drafts positions the drafter never trained "
         "on. Use block_size - 1 (15 for the b16 drafters)."),
    Code("drafter.sliding-window-missing", "Sliding-attention layers without a window",
         "vLLM 0.34 stops with 'DFlash sliding attention requires a window size configured in "
         "dflash_config.swa_window_size or the top-level sliding_window.' Set the window from the publisher's "
         "config."),
    Code("drafter.sliding-ignored", "This vLLM ignores the drafter's sliding-window layers",
         "vLLM 0.20-0.24 never read layer_types for DFlash: every drafter layer runs full attention, unlike "
         "training. Upgrade vLLM for sliding-window drafters."),
    Code("drafter.sample-from-anchor", "dflash_config.sample_from_anchor is true",
         "vLLM 0.34 refuses it: 'sample_from_anchor=True is not supported for DFlash. DFlash uses a fixed 1+N query "
         "layout where the anchor is the bonus token.' Older versions ignore the key."),
    Code("drafter.target-unsupported", "This vLLM runs DFlash only on some target model types",
         "vLLM 0.20-0.21 raise '{method} is only supported for [...] models' unless the target's text model_type "
         "contains one of the listed families (llama, qwen, ...)."),
    # attention
    Code("drafter-attention.backend", "The attention backend vLLM picks for DFlash's non-causal attention",
         "DFlash drafts a whole block at once with non-causal attention. The doctor evaluates the installed vLLM's "
         "own backend order (platforms/cuda.py) and each backend's supports_non_causal, compute-capability and "
         "head-size checks for this GPU. In 0.20.x every layer, the target's too, needs a non-causal backend; from "
         "0.21 only the drafter."),
    Code("drafter-attention.none-valid", "No attention backend supports DFlash here",
         "For this GPU and head size no backend in vLLM's order supports non-causal attention; vLLM stops with "
         "'No valid attention backend found'. FlashAttention supports it from sm_80."),
    Code("drafter-attention.selected-invalid", "The selected attention backend cannot run DFlash here",
         "An explicitly selected backend (--attention-backend, or the speculative config's attention_backend from "
         "0.21) that does not support non-causal attention, this compute capability or this head size makes vLLM "
         "stop with 'Selected backend ... is not valid for this configuration'."),
    Code("drafter-attention.unknown", "The backend choice could not be read from vLLM's source",
         "The installed vLLM's selection code could not be evaluated for this compute capability."),
    Code("drafter-attention.no-gpu-facts", "No GPU to choose an attention backend for",
         "No GPU facts and no --target-arch: the choice depends on the compute capability."),
    Code("drafter-attention.no-vllm", "No vLLM source to read the backend choice from",
         "vLLM is not installed in the inspected interpreter."),
)
