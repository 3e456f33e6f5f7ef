"""Layer: the DFlash drafter against its target and the installed vLLM: architecture in the installed
registry, `dflash_config.mask_token_id` inside the target's vocabulary, `target_layer_ids` present, in range,
increasing and not the uniform-spacing guess, the fc width the target provides, every tensor's shape against
the drafter's own config, vocabulary and dtype against the target's; the version-dependent rules (sliding
window, sample_from_anchor, how vLLM reads the ids) as the installed vLLM's source says."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar

from dflash_doctor.check import Facts
from dflash_doctor.checks.argv import with_spec
from dflash_doctor.checks.models.common import (
    FLOAT_DTYPES,
    MAX_LISTED,
    SLIDING,
    _config_file,
    _dflash_config,
    _drafter_keys,
    _head_dim,
    _is_int,
    _marker,
    _not_given,
    _skip_if_broken,
    _spec_value,
    _vllm_label,
    gpu_view,
    list_length,
    listed,
    long_list,
    text_config,
    value_count,
)
from dflash_doctor.checks.models.drafter_pairing import padded_vocab_v2, pairing_rules
from dflash_doctor.checks.models.speculators import as_served
from dflash_doctor.checks.remedy import Installer, installer_for, quote
from dflash_doctor.codes import Code
from dflash_doctor.facts.modelfiles.model_dir import LAYERS_KEPT
from dflash_doctor.facts.models_shapes import Models
from dflash_doctor.facts.serve_shapes import ServeArgs, VllmDflash
from dflash_doctor.knowledge.dflash import (
    DRAFTER_REGISTRY_ARCH,
    FC_INPUT_RULE,
    LAYER_IDS_PLUS_ONE_MARKER,
    MASK_HIDDEN_FORBIDDEN,
    MASK_TOKEN_RULE,
    SAMPLE_FROM_ANCHOR_MARKER,
    SLIDING_WINDOW_MARKER,
    SPEC_BLOCK,
    TARGET_HIDDEN_SIZE_NULL,
    TARGET_LAYER_IDS_REQUIRED,
    UNIFORM_LAYER_HEURISTIC,
    WEIGHT_LOADER_STRICT,
    uniform_layer_ids,
)
from dflash_doctor.knowledge.dflash_reports import DFLASH2_CONV_BLOCK
from dflash_doctor.model import Finding, Remediation, Status

__all__ = ["DrafterCheck", "expected_drafter_tensors"]


_IDS_FIX = ("Take dflash_config.target_layer_ids from the drafter publisher's own config.json; never compute them "
            "(z-lab/dflash#156, SGLang#37475).")

CODES: tuple[Code, ...] = (
    Code("drafter.not-judged", "The drafter was not compared: its files are broken",
         "A config.json that does not parse or a directory that is missing leaves nothing to compare. Fix the "
         "model-files findings first."),
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
         "it brings its own lm_head and a d2t mapping (draft_vocab_size). A drafter vocabulary below the target's is "
         "a warning: a target padded past its tokenizer (MiMo: 152576 against its drafter's 152064) drafts as usual "
         "with the target's head (vLLM PR #46435), but a drafter made for another tokenizer drafts other tokens."),
    Code("drafter.dtype", "The drafter's weights do not fit the serving dtype",
         "vLLM serves the drafter in the target's dtype. bfloat16 or float32 weights served in float16 can "
         "overflow."),
    Code("drafter.block-size", "num_speculative_tokens exceeds the drafter's block",
         "A DFlash block is one anchor plus block_size - 1 mask tokens; vLLM drafts num_speculative_tokens masks "
         "and never checks them against block_size, so a larger value drafts positions the drafter never trained "
         "on. Use block_size - 1 (15 for the b16 drafters)."),
    Code("drafter.dflash2-block-mismatch", "A DFlash2 drafter served with fewer speculative tokens than its block",
         "vLLM builds DFlash2's grouped convolution over blocks of 1 + num_speculative_tokens positions "
         "(qwen3_dflash2.py, from 0.29.0), while the drafter was trained on block_size positions: with fewer tokens "
         "the convolution's positions no longer line up with training, and acceptance drops with no error "
         "(vllm-project/recipes #837: k \"must be 7 (block_size 8 minus one)\"). Serve with block_size - 1. (More "
         "tokens than that is drafter.block-size.)"),
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
    # drafter: context, layer_types
    Code("drafter.context-shorter-than-served", "The drafter's context is shorter than the served one",
         "The drafter's max_position_embeddings (after rope scaling) is below --max-model-len (or the target's own "
         "length). On the V2 model runner (vLLM's default from 0.29; the only one in 0.34) the first request longer "
         "than the drafter's context reads past its rotary cache and the engine dies with a CUDA illegal memory "
         "access (vLLM #57941, PR #57964); on the V1 runner drafting stops for such requests. Serve with "
         "--max-model-len no longer than the drafter's context, or raise the drafter's max_position_embeddings as "
         "PR #57964 does. From vLLM 0.33 vLLM itself raises a drafter whose RoPE only sizes a cache (default, linear, "
         "llama3, ntk, proportional) and lowers the served length for the others (drafter.context-limits-served)."),
    Code("drafter.context-limits-served", "vLLM lowers the served context to the drafter's",
         "From vLLM 0.33, a drafter shorter than the served context whose RoPE cannot simply grow (yarn, dynamic, "
         "longrope) makes VllmConfig._limit_max_model_len_to_draft lower the served max_model_len to the drafter's, "
         "with only a log line: the server starts, and every request longer than the drafter's context is refused. "
         "Say the length on the command line (--max-model-len), or serve a drafter made for the longer context."),
    Code("drafter.layer-types-length", "layer_types and num_hidden_layers disagree",
         "transformers refuses a config whose layer_types does not have one entry per layer (\"`num_hidden_layers` "
         "(N) must be equal to the number of layer types (M)\"), so vLLM never builds the drafter. Take layer_types "
         "from the publisher's config.json."),
    # drafter: auxiliary hidden states
    Code("drafter.target-no-aux-hidden-states", "The target's model class does not expose auxiliary hidden states",
         "DFlash reads hidden states from inside the target; the installed vLLM checks that the target's class "
         "implements SupportsEagle3 (read from its runner and the class's bases) and otherwise stops at start with "
         "\"Model does not support EAGLE3 interface\" (vLLM PR #45546). Use a vLLM whose class for this "
         "architecture implements it, or another target."),
    # drafter: quantization
    Code("drafter.quantized-attention", "A quantized drafter with quantized q/k/v",
         "The installed vLLM's DFlash drafter slices qkv_proj.weight raw for its fused context K/V and applies "
         "F.linear, bypassing the quantization method: FP8 q/k/v stop the start-up profiling run with \"expected "
         "mat1 and mat2 to have the same dtype\", packed 4-bit with an AttributeError (vLLM #51581, #53116). Serve "
         "the BF16 drafter, or one quantized with self_attn left out."),
    Code("drafter.quantized-acceptance", "The pair's quantization lowers acceptance",
         "An AWQ target gives the drafter other hidden states than the BF16 target it was trained on, and a "
         "per-tensor FP8 drafter loses its scales on the fused context path: both start, and acceptance falls, to "
         "near zero in reports (z-lab/dflash #52, #152; vLLM #51581). Measure acceptance, or serve the BF16 drafter "
         "and a BF16/FP8-block target."),
    Code("drafter.fp8-kernel", "FP8 weights on a GPU without FP8 tensor cores",
         "Below sm_89 the installed vLLM runs FP8 checkpoints through its Marlin weight-only kernel (W8A16), read "
         "from its fp8.py; below the FP8 method's minimum capability (7.5) it refuses to start."),
    # drafter: layer counts
    Code("drafter.made-for", "The drafter was made for another target",
         "The drafter's README (its base_model) names the target it was trained for, and its layer ids, fc "
         "width or hidden size do not fit this target: vLLM fails late (\"mat1 and mat2 shapes cannot be "
         "multiplied\", vLLM PR #48113) or drafts badly. Serve the named target, or the drafter made for this one."),
    # drafter: weights files
    Code("drafter.rope-layout-from-target", "vLLM 0.28 rotates the drafter the target's way, not the way it was made",
         "vLLM 0.28.0 (PR #51655) copies the target's RoPE layout (is_neox_style of its first rotary embedding) onto "
         "the DFlash drafter. A drafter distilled with the other layout (an interleaved target such as DeepSeek or "
         "GLM-5, and a drafter that does not say \"is_neox_style\": false) drafts with rotated positions: acceptance "
         "length about 1.03 against 7.78 (vllm #53063). vLLM 0.29.0 (PR #54373) reads the drafter's own config; "
         "0.27 and earlier use neox. The target's layout is read from its model file in the installed vLLM."),
    Code("drafter.padded-vocab-v2", "A padded target vocabulary leaves the drafter without an lm_head on V2",
         "vLLM 0.24's V2 model runner shares the target's lm_head with a DFlash drafter only when the drafter has no "
         "vocabulary mapping, and the drafter gets one whenever its vocabulary size differs from the target's: a "
         "target padded past the drafter's vocabulary (152576 against 152064) leaves the drafter with its own, "
         "never-loaded lm_head, and 0% of the drafts are accepted. vLLM PR #46435 (0.25.1 and later) fixed it; the "
         "V1 runner shares the head. Upgrade vLLM or set VLLM_USE_V2_MODEL_RUNNER=0."),
    Code("drafter.weights-file", "vLLM would not load the drafter's weights file",
         "vLLM loads every *.safetensors whatever its name; with model.safetensors.index.json only the files its "
         "weight_map names, and with a consolidated*.safetensors file only those (Mistral format). A renamed file "
         "that an index does not list, or a leftover consolidated file, is never read. No renaming is needed "
         "otherwise."),
)


# ------------------------------------------------------------------------------------------- drafter


def expected_drafter_tensors(config: Mapping[str, Any], keys: Mapping[str, Any], *,
                             max_layers: int, id_count: int | None = None) -> dict[str, list[int]] | None:
    """The tensors vLLM's DFlashQwen3ForCausalLM loads, by name, with their shapes (knowledge.dflash), for its
    first min(num_hidden_layers, max_layers) layers. `max_layers` is the caller's bound from what the weights
    hold: num_hidden_layers is read from a file and may say 10**12. `id_count`: the length of
    target_layer_ids when the facts keep only its first items."""
    values = [config.get(k) for k in ("hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size")]
    values.append(config.get("num_key_value_heads", config.get("num_attention_heads")))
    values.append(_head_dim(config))
    if not all(_is_int(v) for v in values):
        return None
    hidden, heads, layers, inter, kv_heads, head_dim = (int(v) for v in values)  # type: ignore[arg-type]
    dflash = _dflash_config(keys)
    shapes: dict[str, list[int]] = {"hidden_norm.weight": [hidden], "norm.weight": [hidden]}
    if dflash.get("use_aux_hidden_state", True):
        ids = dflash.get("target_layer_ids", dflash.get("layer_ids"))
        count = (id_count if id_count is not None else len(ids)) if isinstance(ids, list) else layers
        declared = keys.get("target_hidden_size")
        width = declared if _is_int(declared) else hidden
        shapes["fc.weight"] = [hidden, count * width]
    bias = bool(config.get("attention_bias"))
    for i in range(max(0, min(layers, max_layers))):
        p = f"layers.{i}"
        shapes.update({
            f"{p}.input_layernorm.weight": [hidden], f"{p}.post_attention_layernorm.weight": [hidden],
            f"{p}.self_attn.q_proj.weight": [heads * head_dim, hidden],
            f"{p}.self_attn.k_proj.weight": [kv_heads * head_dim, hidden],
            f"{p}.self_attn.v_proj.weight": [kv_heads * head_dim, hidden],
            f"{p}.self_attn.o_proj.weight": [hidden, heads * head_dim],
            f"{p}.self_attn.q_norm.weight": [head_dim], f"{p}.self_attn.k_norm.weight": [head_dim],
            f"{p}.mlp.gate_proj.weight": [inter, hidden], f"{p}.mlp.up_proj.weight": [inter, hidden],
            f"{p}.mlp.down_proj.weight": [hidden, inter],
        })
        if bias:
            shapes.update({f"{p}.self_attn.q_proj.bias": [heads * head_dim],
                           f"{p}.self_attn.k_proj.bias": [kv_heads * head_dim],
                           f"{p}.self_attn.v_proj.bias": [kv_heads * head_dim],
                           f"{p}.self_attn.o_proj.bias": [hidden]})
    return shapes



def _shape_is(name: str, shape: list[Any], expected: Mapping[str, list[int]]) -> bool:
    return expected.get(name) == shape


def _grouped(names: list[str], cause_of: Callable[[str], str]) -> list[tuple[str, list[str]]]:
    """`names` split by the finding each follows from ("" for none), in order of first appearance."""
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(cause_of(name), []).append(name)
    return list(groups.items())


# The geometry keys of config.json that the weights also record, in the order they are judged.
GEOMETRY_KEYS = ("num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
                 "intermediate_size")


def _beyond(name: str, layers: int) -> bool:
    """A `layers.N....` name with N >= layers."""
    found = layer_indices((name,))
    return bool(found) and min(found) >= layers


def layer_indices(names: Iterable[str]) -> set[int]:
    """The decoder layer numbers present in tensor names `layers.N....` (a number of at most 18 digits: a name
    may say anything, and int() of thousands of digits is slow)."""
    found: set[int] = set()
    for name in names:
        if name.startswith("layers."):
            number = name.split(".", 2)[1]
            if number.isdigit() and len(number) <= 18:
                found.add(int(number))
    return found


def weights_geometry(tensors: Mapping[str, Mapping[str, Any]],
                     layers: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What the drafter's own tensors say its config.json should hold: the layer count, and hidden size, head_dim,
    heads, KV heads and intermediate size read from the lowest layer's shapes. A value the tensors do not show is
    left out; "from" names the tensor each value was read from. `layers`: the weights facts' count of every
    layer the names show, when the facts keep only some of the tensors."""
    def shape(name: str) -> list[Any]:
        info = tensors.get(name)
        found = list((info or {}).get("shape") or [])
        return found if all(_is_int(d) for d in found) and not (info or {}).get("rank") else []

    indices = layer_indices(tensors)
    geometry: dict[str, Any] = {"num_hidden_layers": len(indices), "layers": sorted(indices)[:MAX_LISTED], "from": {}}
    if layers is not None and _is_int(layers.get("count")):
        geometry["num_hidden_layers"] = layers["count"]
        geometry["layers"] = [i for i in layers.get("first") or [] if _is_int(i)][:MAX_LISTED]
    first = f"layers.{min(indices)}" if indices else None
    for key, names in (("hidden_size", ["norm.weight", "hidden_norm.weight"]
                        + ([f"{first}.input_layernorm.weight"] if first else [])),
                       ("head_dim", [f"{first}.self_attn.q_norm.weight"] if first else [])):
        for name in names:
            if len(shape(name)) == 1:
                geometry[key], geometry["from"][key] = shape(name)[0], f"{name} {shape(name)}"
                break
    head_dim = geometry.get("head_dim")
    if first:
        for key, name in (("num_attention_heads", "self_attn.q_proj.weight"),
                          ("num_key_value_heads", "self_attn.k_proj.weight")):
            rows = shape(f"{first}.{name}")
            if len(rows) == 2 and head_dim and rows[0] % head_dim == 0:
                geometry[key], geometry["from"][key] = rows[0] // head_dim, f"{first}.{name} {rows}"
        gate = shape(f"{first}.mlp.gate_proj.weight")
        if len(gate) == 2:
            geometry["intermediate_size"] = gate[0]
            geometry["from"]["intermediate_size"] = f"{first}.mlp.gate_proj.weight {gate}"
    return geometry




class _Drafter:
    """The drafter judged against its target and the installed vLLM; one method per rule."""

    def __init__(self, drafter: Mapping[str, Any], target: Mapping[str, Any] | None,
                 vllm: VllmDflash | None, serve: ServeArgs | None, installer: Installer,
                 ccs: list[str] | None = None) -> None:
        self.ccs = list(ccs or [])
        self.drafter, self.target, self.vllm, self.serve = drafter, target, vllm, serve
        self.installer = installer
        self.file = _config_file(drafter)
        self.path = (drafter.get("resolved") or {}).get("path")
        self.config = text_config(drafter)
        self.keys = _drafter_keys(drafter, vllm)
        self.dflash = _dflash_config(self.keys)
        self.target_config = text_config(target)
        self.weights = ((drafter.get("dir") or {}).get("weights")) or {}
        self.tensors: dict[str, Any] = dict(self.weights.get("tensors") or {})
        # tensor name as vLLM's loader sees it (an EAGLE-style `midlayer.` is layer 0) -> name in the file
        self.names = {n.replace("midlayer.", "layers.0.", 1) if n.startswith("midlayer.") else n: n for n in self.tensors}
        config_keys = ((drafter.get("dir") or {}).get("config") or {}).get("keys") or []
        self.quantized = "quantization_config" in config_keys
        # What the weights themselves say of the geometry (None: no tensors, or packed quantized ones).
        # Past model_dir.MAX_TENSORS_KEPT the facts keep the tensors these rules read by name (fc, norms, the layers
        # below LAYERS_KEPT) and count the rest: names are judged on what is kept, counts on the whole.
        self.complete = bool(self.weights.get("tensors_complete", True))
        self.omitted = max(0, int(self.weights.get("tensor_count") or 0) - len(self.tensors)) if not self.complete else 0
        layers = self.weights.get("layers") if not self.complete else None
        self.geometry = None if self.quantized or not self.tensors else \
            weights_geometry({n: self.tensors[stored] for n, stored in self.names.items()},
                             layers if isinstance(layers, Mapping) else None)
        self.id_key, _, self.id_count = self._layer_ids()
        # config.json key -> the id of the finding that blames it; a consequence of that key names the finding.
        self.blamed: dict[str, str] = {}
        self.emitted: set[str] = set()
        self.label = _vllm_label(vllm)
        self.ok: list[str] = []

    def _layer_ids(self) -> tuple[str, Any, int | None]:
        """(where, value, length) of the target_layer_ids vLLM reads (dflash_config over eagle_config; "layer_ids"
        when the former is absent); the length counts a list the facts keep only the start of."""
        for key in ("target_layer_ids", "layer_ids"):
            for source in ("dflash_config", "eagle_config"):
                block = self.keys.get(source)
                if isinstance(block, Mapping) and key in block:
                    value = block[key]
                    where = f"drafter.{source}.{key}"
                    return where, value, list_length(self.drafter, where, value) if isinstance(value, list) else None
        return "", None, None

    def findings(self) -> list[Finding]:
        out: list[Finding] = []
        # Causes before their consequences: hidden_sizes and config_weights blame config.json keys, which fc and
        # tensors_match then name as the cause of each shape that follows from them.
        for rule in (self.architecture, self.mask_token, self.layer_ids, self.hidden_sizes, self.config_weights,
                     self.fc, self.tensors_match, self.vocabulary, self.dtype, self.block, self.attention_kinds,
                     self.target_kind, *pairing_rules(self, self.ccs)):
            found = rule()
            self.emitted.update(f.id for f in found)
            out.extend(found)
        if not any(f.status in (Status.FAIL, Status.WARN) for f in out):
            out.insert(0, Finding("drafter.ok", Status.PASS,
                                  f"drafter {self.path} fits target {(self.target or {}).get('name')} for {self.label}: "
                                  + "; ".join(self.ok)))
        elif self.ok:
            out.append(Finding("drafter.checked", Status.PASS, "what holds: " + "; ".join(self.ok)))
        return out

    # -- rules ------------------------------------------------------------------------------------

    def architecture(self) -> list[Finding]:
        archs = self.keys.get("architectures") or ((self.drafter.get("dir") or {}).get("config") or {}).get(
            "architectures")
        if not isinstance(archs, list) or not archs:
            return [Finding("drafter.architecture-unknown", Status.FAIL, f"{self.file} has no \"architectures\" list",
                            detail=f"vLLM looks the drafter up by architecture; DFlash drafters say "
                            f"[\"{DRAFTER_REGISTRY_ARCH.value}\"].",
                            evidence={"file": self.file})]
        renamed = [a if str(a).startswith("DFlash") or str(a).endswith("DFlash") else f"DFlash{a}" for a in archs]
        vllm = self.vllm or VllmDflash()
        if vllm.root and not vllm.has_dflash:
            return [Finding("drafter.vllm-without-dflash", Status.FAIL,
                            f"{self.label} has no DFlash support (no qwen3_dflash.py): DFlash first shipped in vLLM 0.20.0",
                            evidence={"vllm_root": vllm.root},
                            remediation=(Remediation(self.installer.install("vllm>=0.20.1"), "upgrade vLLM in the serving env"),))]
        known = vllm.dflash_archs if vllm.registry_readable else [DRAFTER_REGISTRY_ARCH.value]
        if not any(a in (known or []) for a in renamed):
            return [Finding("drafter.architecture-unknown", Status.FAIL,
                            f"{self.file}: architectures {listed(archs, limit=4)} (looked up as "
                            f"{listed(renamed, limit=4)}) are not in {self.label}'s registry, which accepts {known}",
                            detail="vLLM renames a drafter's architecture to DFlash{arch} unless it starts or ends "
                            "with DFlash, then looks it up in its model registry; an unknown name fails at start.",
                            evidence={"file": self.file, "architectures": archs[:MAX_LISTED], "accepted": known},
                            remediation=(Remediation(f"set \"architectures\": [\"{DRAFTER_REGISTRY_ARCH.value}\"] in "
                                                     f"{quote(self.file)}", "the name every released DFlash drafter uses"),))]
        self.ok.append(f"architecture {archs[0]}")
        return []

    def mask_token(self) -> list[Finding]:
        mask = self.dflash.get("mask_token_id")
        vocab = self.target_config.get("vocab_size")
        fix = Remediation(f"add \"dflash_config\": {{\"mask_token_id\": ID, ...}} to {quote(self.file)}",
                          "take ID from the drafter publisher's config.json (the target tokenizer's mask token)")
        if "mask_token_id" not in self.dflash:
            top = self.keys.get("mask_token_id")
            accepts_top = _marker(self.vllm, "mask_top_level")
            if top is not None and accepts_top:
                return [Finding("drafter.mask-token-top-level", Status.WARN,
                                f"{self.file} gives mask_token_id at the top level, not in dflash_config: {self.label} "
                                "accepts that, vLLM 0.20-0.24 do not",
                                evidence={"file": self.file, "mask_token_id": top}, remediation=(fix,))]
            found = f" (a top-level mask_token_id {top} is there, which {self.label} does not read)" if top is not None else ""
            return [Finding("drafter.mask-token-missing", Status.FAIL,
                            f"{self.file} has no dflash_config.mask_token_id{found}: vLLM stops at start with "
                            "\"the draft model config must have `pard_token`, `ptd_token_id`, or "
                            "`dflash_config.mask_token_id` specified in its config.json\"",
                            detail=MASK_TOKEN_RULE.source, evidence={"file": self.file}, remediation=(fix,))]
        if not _is_int(mask):
            return [Finding("drafter.mask-token-invalid", Status.FAIL,
                            f"{self.file}: dflash_config.mask_token_id is {mask!r}, not an integer token id",
                            evidence={"file": self.file}, remediation=(fix,))]
        if _is_int(vocab) and not 0 <= mask < vocab:
            return [Finding("drafter.mask-token-out-of-vocab", Status.FAIL,
                            f"{self.file}: dflash_config.mask_token_id {mask} is outside the target's vocabulary "
                            f"(vocab_size {vocab}): the mask embedding lookup indexes past the table",
                            detail=MASK_TOKEN_RULE.note,
                            evidence={"file": self.file, "mask_token_id": mask, "target_vocab_size": vocab},
                            remediation=(fix,))]
        self.ok.append(f"mask_token_id {mask}")
        return []

    def layer_ids(self) -> list[Finding]:
        ids = self.dflash.get("target_layer_ids")
        depth = self.target_config.get("num_hidden_layers")
        publisher = Remediation(f"copy dflash_config.target_layer_ids from the drafter publisher's own config.json "
                                f"into {quote(self.file)}", "the ids the drafter was trained on; never recompute them")
        if ids is None:
            elsewhere = [k for k in ("layer_ids",) if k in self.dflash] + \
                [k for k in ("target_layer_ids",) if k in self.keys]
            hint = f" ({' and '.join(elsewhere)} found elsewhere: vLLM's target side does not read them)" if elsewhere else ""
            return [Finding("drafter.layer-ids-missing", Status.FAIL,
                            f"{self.file} has no dflash_config.target_layer_ids{hint}: vLLM would fall back to "
                            "EAGLE-3's default layers, which no DFlash drafter was trained on",
                            detail=TARGET_LAYER_IDS_REQUIRED.value + ". " + TARGET_LAYER_IDS_REQUIRED.source,
                            evidence={"file": self.file}, remediation=(publisher,))]
        summary = long_list(self.drafter, self.id_key) if self.id_key else None
        count = self.id_count if self.id_count is not None else (len(ids) if isinstance(ids, list) else 0)
        all_ints = isinstance(ids, list) and all(_is_int(i) for i in ids) and (summary is None or summary.get("ints"))
        if not isinstance(ids, list) or not ids or not all_ints:
            shown = listed(ids, count) if isinstance(ids, list) else repr(ids)[:200]
            return [Finding("drafter.layer-ids-invalid", Status.FAIL,
                            f"{self.file}: dflash_config.target_layer_ids is {shown}, not a list of integers",
                            evidence={"file": self.file}, remediation=(publisher,))]
        problems: list[str] = []
        if _is_int(depth):
            outside = [i for i in ids if not 0 <= i < depth]
            if summary is not None and (summary.get("min", 0) < 0 or summary.get("max", 0) >= depth):
                problems.append(f"{listed(outside) if outside else 'ids'} (from {summary.get('min')} to "
                                f"{summary.get('max')}) outside [0, {depth}) for a {depth}-layer target")
            elif outside:
                problems.append(f"{listed(outside)} outside [0, {depth}) for a {depth}-layer target")
        increasing = summary.get("increasing") if summary is not None else \
            not any(b <= a for a, b in itertools.pairwise(ids))
        if not increasing:
            repeats = summary.get("repeats") if summary is not None else len(set(ids)) != len(ids)
            problems.append("not strictly increasing" + (" (repeats)" if repeats else ""))
        trained_for = self.keys.get("num_target_layers")
        if problems:
            also = (f"; the drafter says num_target_layers {trained_for}: it was made for another target"
                    if _is_int(trained_for) and _is_int(depth) and trained_for != depth else "")
            return [Finding("drafter.layer-ids-invalid", Status.FAIL,
                            f"{self.file}: target_layer_ids {listed(ids, count)} are {'; '.join(problems)}{also}",
                            detail="vLLM records the target's hidden state after each listed layer; an id the target "
                            "does not have is never recorded, the fc input comes up short, and the first forward "
                            "pass fails (vLLM 0.34: \"target_layer_ids reference layers that do not exist in the "
                            "target model\").",
                            evidence={"file": self.file, "target_layer_ids": ids[:MAX_LISTED], "count": count,
                                      "target_layers": depth},
                            remediation=(publisher,))]
        findings: list[Finding] = []
        if _is_int(trained_for) and _is_int(depth) and trained_for != depth:
            findings.append(Finding("drafter.target-depth-mismatch", Status.WARN,
                                    f"{self.file} says num_target_layers {trained_for}, the target has {depth} layers: "
                                    "this drafter was trained for another target",
                                    evidence={"file": self.file, "num_target_layers": trained_for, "target_layers": depth}))
        # The formula gives n ids for n draft layers, so only n = len(ids) can reproduce them (and the drafter's
        # num_hidden_layers, read from its config, must not size a list); floats stay exact below 2**53. Strictly
        # increasing ids below depth number at most depth, so the formula is never asked for more.
        if _is_int(depth) and 0 < depth < 2**53 and count == len(ids) <= depth and \
                ids == uniform_layer_ids(depth, len(ids)):
            findings.append(Finding(
                "drafter.layer-ids-heuristic", Status.WARN,
                f"{self.file}: target_layer_ids {listed(ids)} are exactly the uniform-spacing formula for a "
                f"{depth}-layer target: they look computed, not trained",
                detail=f"{UNIFORM_LAYER_HEURISTIC.value}. {UNIFORM_LAYER_HEURISTIC.note} Sources: "
                f"{UNIFORM_LAYER_HEURISTIC.source}.",
                evidence={"file": self.file, "target_layer_ids": ids[:MAX_LISTED]}, remediation=(publisher,)))
        if _marker(self.vllm, "layer_ids_plus_one") is False and self.vllm is not None and self.vllm.has_dflash:
            findings.append(Finding(
                "drafter.layer-ids-vllm-offset", Status.WARN,
                f"{self.label} passes target_layer_ids to the target as they are: every id reads the output of the "
                "layer before the one the drafter was trained on (fixed in vLLM 0.22.0); acceptance suffers",
                detail=LAYER_IDS_PLUS_ONE_MARKER.source,
                remediation=(Remediation(self.installer.install("vllm>=0.22.0"), "a vLLM that adds 1 to DFlash's layer ids"),)))
        self.ok.append(f"target_layer_ids {listed(ids, count, limit=16)}")
        return findings

    def hidden_sizes(self) -> list[Finding]:
        hidden, target_hidden = self.config.get("hidden_size"), self.target_config.get("hidden_size")
        findings: list[Finding] = []
        if "target_hidden_size" in self.keys and self.keys["target_hidden_size"] is None \
                and _marker(self.vllm, "target_hidden_size_null_ok") is not True:
            findings.append(Finding("drafter.target-hidden-size-null", Status.FAIL,
                                    f"{self.file} has \"target_hidden_size\": null: {self.label} multiplies it "
                                    "(None * n) when building fc and stops with a TypeError",
                                    detail=TARGET_HIDDEN_SIZE_NULL.source, evidence={"file": self.file},
                                    remediation=(Remediation(f"delete the target_hidden_size line from {quote(self.file)}",
                                                             "or set it to the target's hidden_size"),)))
        declared = self.keys.get("target_hidden_size")
        if _is_int(declared) and _is_int(target_hidden) and declared != target_hidden:
            findings.append(Finding("drafter.hidden-size-mismatch", Status.FAIL,
                                    f"{self.file}: target_hidden_size {declared}, but the target's hidden_size is "
                                    f"{target_hidden}", evidence={"file": self.file}))
        elif not _is_int(declared) and _is_int(hidden) and _is_int(target_hidden) and hidden != target_hidden:
            stored = (self.geometry or {}).get("hidden_size")
            if stored == target_hidden:
                findings.append(Finding(
                    "drafter.hidden-size-mismatch", Status.FAIL,
                    f"{self.file}: hidden_size {hidden} differs from the target's {target_hidden}, but the drafter's "
                    f"weights are {stored} wide ({(self.geometry or {})['from']['hidden_size']}): the config.json is "
                    "wrong, and every shape vLLM builds from it is too",
                    detail="The drafter embeds its queries with the target's embedding table and reads its hidden "
                    "states; both are the target's width, and so are these weights.",
                    evidence={"file": self.file, "hidden_size": hidden, "target_hidden_size": target_hidden,
                              "weights_hidden_size": stored},
                    remediation=(Remediation(f"set \"hidden_size\": {stored} in {quote(self.file)}",
                                             "the width of the weights and of the target"),)))
            else:
                findings.append(Finding("drafter.hidden-size-mismatch", Status.FAIL,
                                        f"{self.file}: hidden_size {hidden} differs from the target's {target_hidden} and "
                                        "no target_hidden_size says otherwise: this drafter belongs to another target",
                                        detail="The drafter embeds its queries with the target's embedding table and reads "
                                        "its hidden states; both are the target's width.",
                                        evidence={"file": self.file, "hidden_size": hidden,
                                                  "target_hidden_size": target_hidden}))
            if _is_int(stored) and stored != hidden:
                self.blamed["hidden_size"] = "drafter.hidden-size-mismatch"
        return findings

    def _corrected(self, keys: Iterable[str]) -> dict[str, Any]:
        """The drafter's text config with `keys` set to what its weights say."""
        geometry = self.geometry or {}
        corrected = dict(self.config)
        for key in keys:
            corrected[key] = geometry[key]
        return corrected

    def config_weights(self) -> list[Finding]:
        """config.json against the drafter's own weights: each geometry key the weights contradict, in one finding.
        A layer count above what the weights hold is said here once, never enumerated."""
        geometry = self.geometry
        if not geometry:
            return []
        wrong: dict[str, tuple[Any, Any]] = {}
        for key in GEOMETRY_KEYS:
            if key in self.blamed or key not in geometry:
                continue
            given = _head_dim(self.config) if key == "head_dim" else \
                self.config.get(key, self.config.get("num_attention_heads")) if key == "num_key_value_heads" else \
                self.config.get(key)
            if not _is_int(given) or given == geometry[key]:
                continue
            if key in ("head_dim", "num_key_value_heads") and key not in self.config:
                # Derived, not written: it is wrong only if it stays wrong once the written keys are corrected.
                corrected = self._corrected([*self.blamed, *wrong])
                derived = _head_dim(corrected) if key == "head_dim" else corrected.get("num_attention_heads")
                if derived == geometry[key]:
                    continue
            wrong[key] = (given, geometry[key])
        if not wrong:
            return []
        parts = []
        for key, (given, stored) in wrong.items():
            if key == "num_hidden_layers":
                held = geometry["layers"]
                listed = ", ".join(str(i) for i in held) + (", ..." if stored > len(held) else "")
                parts.append(f"num_hidden_layers {given}, but the weights hold {stored} layer(s)"
                             + (f" (layers {listed})" if held else ""))
            else:
                parts.append(f"{key} {given}, but the weights say {stored} ({geometry['from'][key]})")
        self.blamed.update(dict.fromkeys(wrong, "drafter.config-weights"))
        settings = ", ".join(f"\"{k}\": {stored}" for k, (_, stored) in wrong.items())
        return [Finding("drafter.config-weights", Status.FAIL,
                        f"{self.file} disagrees with the drafter's own weights: {'; '.join(parts)}",
                        detail="vLLM builds every parameter from config.json and the weight loader refuses a tensor "
                        "that is missing, unexpected or shaped otherwise; the shape findings below follow from these "
                        "keys. Either the config.json was written for another model or the weights are incomplete.",
                        evidence={"file": self.file, "config": {k: g for k, (g, _) in wrong.items()},
                                  "weights": {k: w for k, (_, w) in wrong.items()},
                                  "read_from": {k: geometry["from"].get(k) for k in wrong}},
                        remediation=(Remediation(f"set {settings} in {quote(self.file)}",
                                                 "what the weights were saved with; or take the publisher's config.json"),))]

    def fc(self) -> list[Finding]:
        if not self.dflash.get("use_aux_hidden_state", True):
            return []
        ids = self.dflash.get("target_layer_ids", self.dflash.get("layer_ids"))
        hidden, target_hidden = self.config.get("hidden_size"), self.target_config.get("hidden_size")
        declared = self.keys.get("target_hidden_size")
        width = declared if _is_int(declared) else hidden
        tensor = self.tensors.get("fc.weight")
        if not isinstance(ids, list) or not _is_int(width) or tensor is None:
            return []  # reported by layer_ids / tensors_match
        shape = list(tensor.get("shape") or [])
        n_ids = self.id_count if self.id_count is not None else len(ids)
        config_in = n_ids * width
        provided = n_ids * target_hidden if _is_int(target_hidden) else None
        where = f"{self.path}/{tensor.get('file')}"
        if shape != [hidden, config_in]:
            # Follows from a blamed hidden_size when the weights' width gives exactly the stored shape.
            fixed_hidden = (self.geometry or {}).get("hidden_size") if "hidden_size" in self.blamed else hidden
            fixed_width = declared if _is_int(declared) else fixed_hidden
            cause = self.blamed["hidden_size"] if "hidden_size" in self.blamed and _is_int(fixed_width) and \
                shape == [fixed_hidden, n_ids * fixed_width] else ""
            return [Finding("drafter.fc-width", Status.FAIL,
                            f"{where}: fc.weight is {shape}, but {self.file} makes vLLM build it as [{hidden}, "
                            f"{config_in}] = [hidden_size, {n_ids} target_layer_ids x {width}]",
                            detail=f"{FC_INPUT_RULE.value}. The weight loader refuses a shape that differs "
                            "(vLLM's default_weight_loader asserts equal shapes). "
                            + (f"It follows from hidden_size {hidden} ({cause})." if cause else
                               "Either target_layer_ids has the wrong length (taken from another drafter) or the "
                               "weights are from another model."),
                            evidence={"file": where, "shape": shape, "expected": [hidden, config_in],
                                      "target_layer_ids": ids[:MAX_LISTED], "target_layer_ids_count": n_ids},
                            remediation=() if cause else
                            (Remediation(f"compare {quote(self.file)} with the publisher's config.json",
                                         "the fc width fixes how many layer ids the drafter was trained on"),),
                            cause=cause)]
        if provided is not None and provided != config_in:
            cause = "drafter.hidden-size-mismatch" if "drafter.hidden-size-mismatch" in self.emitted else ""
            return [Finding("drafter.fc-width", Status.FAIL,
                            f"the target provides {n_ids} x {target_hidden} = {provided} features, fc.weight "
                            f"takes {config_in}", evidence={"file": where, "provided": provided, "expected": config_in},
                            cause=cause)]
        self.ok.append(f"fc.weight {shape} = {n_ids} x {width}")
        return []

    def tensors_match(self) -> list[Finding]:
        if not self.tensors and not self.weights.get("tensor_count"):
            return []  # no weights: model-files says so
        findings: list[Finding] = []
        names = self.names
        mask_hidden = [n for n in names.values() if MASK_HIDDEN_FORBIDDEN.value in n]
        if mask_hidden:
            findings.append(Finding("drafter.mask-hidden", Status.FAIL,
                                    f"{self.path} ships {mask_hidden[0]}: vLLM asserts \"DFlash should use mask_token_id "
                                    "to embed the padding hidden state\" while loading",
                                    detail=MASK_HIDDEN_FORBIDDEN.source, evidence={"tensors": mask_hidden[:MAX_LISTED], "count": len(mask_hidden)},
                                    remediation=(Remediation("use the publisher's DFlash checkpoint", "this one was "
                                                             "exported for another runtime"),)))
        prefixed = [n for n in names if n.startswith("model.")]
        if prefixed:
            findings.append(Finding("drafter.tensor-prefix", Status.FAIL,
                                    f"{self.path}: {len(prefixed)} tensors start with 'model.' (e.g. {prefixed[0]}); "
                                    "vLLM adds that prefix itself and finds no parameter 'model.model....'",
                                    evidence={"tensors": prefixed[:MAX_LISTED]},
                                    remediation=(Remediation("re-save the drafter without the 'model.' prefix",
                                                             "DFlash drafters name tensors layers.N..., fc, norm"),)))
        if self.quantized:
            self.ok.append("quantized weights (names and shapes not judged)")
            return findings
        expected = self._expected(())
        if expected is None:
            return findings
        # The same config with the blamed keys set to what the weights say, all together and one key at a time:
        # a mismatch that disappears under a correction follows from that key's finding.
        corrections = [(self.blamed[key], self._expected((key,))) for key in self.blamed]
        if len(self.blamed) > 1:
            corrections.append((next(iter(self.blamed.values())), self._expected(tuple(self.blamed))))

        def cause_of(explained: Callable[[dict[str, list[int]]], bool]) -> str:
            return next((cause for cause, fixed in corrections if fixed is not None and explained(fixed)), "")

        optional = {"embed_tokens.weight", "lm_head.weight", "d2t", "t2d"}
        missing = sorted(set(expected) - set(names))
        unexpected = sorted(n for n in names if n not in expected and n not in optional
                            and not n.startswith("model.") and MASK_HIDDEN_FORBIDDEN.value not in n
                            and (self.complete or not _beyond(n, LAYERS_KEPT)))
        wrong = [(n, names[n]) for n in sorted(set(expected) & set(names))
                 if list(self.tensors[names[n]].get("shape") or []) != expected[n]]
        for cause, group in _grouped(missing, lambda n: cause_of(lambda fixed: n not in fixed)):
            findings.append(Finding("drafter.tensor-missing", Status.FAIL,
                                    f"{self.path}: {len(group)} tensors the config implies are missing: "
                                    f"{', '.join(group[:6])}" + (" ..." if len(group) > 6 else ""),
                                    detail="vLLM stops with \"Following weights were not initialized from checkpoint\". "
                                    + (f"They follow from {cause}." if cause else "num_hidden_layers or attention_bias "
                                       "in config.json may not match the weights."),
                                    evidence={"missing": group[:MAX_LISTED], "count": len(group), "file": self.file},
                                    cause=cause))
        unread = (f"; {self.omitted} more of its {self.weights.get('tensor_count')} tensors are not in the facts "
                  "and were not judged by name") if self.omitted else ""
        for cause, group in _grouped(unexpected, lambda n: cause_of(lambda fixed: n in fixed)):
            findings.append(Finding("drafter.tensor-unexpected", Status.FAIL,
                                    f"{self.path}: {len(group)} tensors match no parameter of vLLM's DFlash drafter: "
                                    f"{', '.join(group[:6])}" + (" ..." if len(group) > 6 else "") + unread,
                                    detail="vLLM stops with \"There is no module or parameter named ...\". "
                                    + (f"They follow from {cause}." if cause else WEIGHT_LOADER_STRICT.source),
                                    evidence={"unexpected": group[:MAX_LISTED], "count": len(group),
                                              "not_judged": self.omitted}, cause=cause))
            unread = ""
        for name, stored in wrong[:MAX_LISTED]:
            if name == "fc.weight":
                continue  # the fc rule explains it better
            info = self.tensors[stored]
            shape = list(info.get("shape") or [])
            cause = cause_of(functools.partial(_shape_is, name, shape))
            findings.append(Finding("drafter.tensor-shape", Status.FAIL,
                                    f"{self.path}/{info.get('file')}: {stored} is {info.get('shape')}, {self.file} "
                                    f"implies {expected[name]}",
                                    detail="The weight loader asserts equal shapes; "
                                    + (f"this one follows from {cause}." if cause else "the config.json was likely "
                                       "written for another model (head_dim, heads, intermediate_size)."),
                                    evidence={"tensor": stored, "shape": info.get("shape"), "expected": expected[name]},
                                    cause=cause))
        if not (missing or unexpected or wrong):
            self.ok.append(f"{len(expected)} tensors match config.json"
                           + (f" ({self.omitted} more not judged by name)" if self.omitted else ""))
        return findings

    def _expected(self, corrected: Iterable[str]) -> dict[str, list[int]] | None:
        """expected_drafter_tensors for the config with `corrected` keys set to the weights' values, for at most
        as many layers as the weights reach: a config's num_hidden_layers never sizes the loop (config_weights
        reports a count the weights do not hold, once)."""
        config = self._corrected(corrected)
        present = layer_indices(self.names)
        reach = min(max(present) + 1 if present else 0, len(self.names))
        if not self.complete:
            reach = min(reach, LAYERS_KEPT)  # the facts keep every tensor of these layers, not of the others
        return expected_drafter_tensors(config, self.keys, max_layers=reach, id_count=self.id_count)

    def vocabulary(self) -> list[Finding]:
        if padded_vocab_v2(self) is not None:
            return []  # drafter.padded-vocab-v2 (the pairing rules) names what this vLLM does with it
        vocab, target_vocab = self.config.get("vocab_size"), self.target_config.get("vocab_size")
        draft_vocab = self.keys.get("draft_vocab_size")
        own_head = "d2t" in self.tensors and "lm_head.weight" in self.tensors
        if _is_int(draft_vocab) and _is_int(target_vocab) and draft_vocab != target_vocab and not own_head:
            return [Finding("drafter.vocab-mismatch", Status.FAIL,
                            f"{self.file}: draft_vocab_size {draft_vocab} differs from the target's {target_vocab} "
                            "but the drafter lacks its own lm_head and d2t mapping",
                            evidence={"file": self.file})]
        if _is_int(vocab) and _is_int(target_vocab) and vocab < target_vocab and "lm_head.weight" not in self.tensors:
            # A target vocabulary padded past the tokenizer's (MiMo 152576, its drafter 152064): vLLM shares the
            # target's embedding and lm_head, drafts ids below the drafter's vocab_size, and accepts as usual (vLLM
            # PR #46435, on par with V1); only 0.24's V2 runner breaks it (drafter.padded-vocab-v2).
            return [Finding("drafter.vocab-mismatch", Status.WARN,
                            f"{self.file}: vocab_size {vocab} is below the target's {target_vocab}: vLLM shares the "
                            f"target's embedding and lm_head and drafts only ids below {vocab}; right for a target "
                            "padded past its tokenizer (vLLM PR #46435), wrong for a drafter made for another "
                            "tokenizer",
                            evidence={"file": self.file, "vocab_size": vocab, "target_vocab_size": target_vocab})]
        if _is_int(vocab) and _is_int(target_vocab) and vocab != target_vocab:
            return [Finding("drafter.vocab-mismatch", Status.FAIL,
                            f"{self.file}: vocab_size {vocab} differs from the target's {target_vocab}: the drafter "
                            "shares the target's embedding and lm_head, so it was made for another tokenizer",
                            evidence={"file": self.file, "vocab_size": vocab, "target_vocab_size": target_vocab})]
        embed = self.tensors.get("embed_tokens.weight")
        if embed is not None and _is_int(vocab) and _is_int(self.config.get("hidden_size")) and \
                list(embed.get("shape") or []) != [vocab, self.config["hidden_size"]]:
            return [Finding("drafter.tensor-shape", Status.FAIL,
                            f"{self.path}: embed_tokens.weight is {embed.get('shape')}, config implies "
                            f"[{vocab}, {self.config['hidden_size']}]", evidence={"tensor": "embed_tokens.weight"})]
        if _is_int(vocab):
            self.ok.append(f"vocab {vocab}")
        return []

    def dtype(self) -> list[Finding]:
        stored = {FLOAT_DTYPES[d] for d in (self.weights.get("dtypes") or {}) if d in FLOAT_DTYPES}
        given = self.serve.fields.dtype if self.serve is not None else None
        wanted = given if given not in (None, "auto") else None
        target_dtype = self.target_config.get("torch_dtype") or self.target_config.get("dtype")
        serving = {"half": "float16", "float": "float32"}.get(str(wanted), wanted) or target_dtype
        if serving == "float32" and not wanted:
            serving = "bfloat16"  # --dtype auto downcasts float32 checkpoints (knowledge.dflash DTYPE_AUTO_DOWNCAST)
        if serving == "float16" and stored & {"bfloat16", "float32"}:
            return [Finding("drafter.dtype", Status.WARN,
                            f"{self.path} stores {', '.join(sorted(stored))} weights; vLLM serves the drafter in the "
                            "target's float16: values past float16's range overflow",
                            evidence={"stored": sorted(stored), "serving": serving})]
        if stored:
            self.ok.append(f"dtype {'/'.join(sorted(stored))} served as {serving or 'the target dtype'}")
        return []

    def block(self) -> list[Finding]:
        block = self.keys.get("block_size", self.dflash.get("block_size"))
        spec = _spec_value(self.serve)
        k = spec.get("num_speculative_tokens")
        if not _is_int(block):
            return []
        if _is_int(k) and k > block - 1:
            return [Finding("drafter.block-size", Status.WARN,
                            f"num_speculative_tokens {k} is above block_size - 1 = {block - 1} ({self.file}): the "
                            "drafter drafts past the block it was trained on",
                            detail=f"{SPEC_BLOCK.value}. {SPEC_BLOCK.note}",
                            evidence={"block_size": block, "num_speculative_tokens": k},
                            remediation=(Remediation(with_spec(list(self.serve.argv) if self.serve is not None else [],
                                                               {**spec, "num_speculative_tokens": block - 1}),
                                                     "one anchor plus block_size - 1 masks fill the trained block"),))]
        archs = self.keys.get("architectures") or ((self.drafter.get("dir") or {}).get("config") or {}).get(
            "architectures")
        dflash2 = isinstance(archs, list) and any("DFlash2" in str(a) for a in archs)
        if dflash2 and _is_int(k) and k < block - 1 and _marker(self.vllm, "dflash2_conv_block_from_k") is not False:
            return [Finding("drafter.dflash2-block-mismatch", Status.WARN,
                            f"num_speculative_tokens {k} is below block_size - 1 = {block - 1} ({self.file}): DFlash2's "
                            f"grouped convolution runs over blocks of 1 + k = {k + 1} positions, not the {block} it "
                            "was trained on, so every drafted position is mixed with the wrong neighbours",
                            detail=f"{DFLASH2_CONV_BLOCK.value}. Sources: {DFLASH2_CONV_BLOCK.source}.",
                            evidence={"block_size": block, "num_speculative_tokens": k},
                            remediation=(Remediation(with_spec(list(self.serve.argv) if self.serve is not None else [],
                                                               {**spec, "num_speculative_tokens": block - 1}),
                                                     "the convolution's block is then the trained one"),))]
        self.ok.append(f"block_size {block}" + (f" (k={k})" if _is_int(k) else f" (serve with k={block - 1})"))
        return []

    def attention_kinds(self) -> list[Finding]:
        findings: list[Finding] = []
        layer_types = self.config.get("layer_types") or []
        sliding = self.dflash.get("use_swa") or (isinstance(layer_types, list) and
                                                 value_count(self.drafter, "text.layer_types", layer_types, SLIDING) > 0)
        window = self.dflash.get("swa_window_size", self.config.get("sliding_window"))
        if sliding:
            required, reads = _marker(self.vllm, "sliding_window_required"), _marker(self.vllm, "reads_layer_types")
            if window is None and required is not False:
                findings.append(Finding("drafter.sliding-window-missing", Status.FAIL,
                                        f"{self.file}: sliding-attention layers but no window (dflash_config.swa_window_size "
                                        "or sliding_window): vLLM stops with \"DFlash sliding attention requires a "
                                        "window size\"", detail=SLIDING_WINDOW_MARKER.source, evidence={"file": self.file},
                                        remediation=(Remediation(f"set dflash_config.swa_window_size in {quote(self.file)}",
                                                                 "from the publisher's config"),)))
            elif reads is False:
                findings.append(Finding("drafter.sliding-ignored", Status.WARN,
                                        f"{self.label} ignores layer_types for DFlash drafters: the drafter's sliding-window "
                                        "layers run full attention, unlike training",
                                        detail=SLIDING_WINDOW_MARKER.source))
        if self.dflash.get("sample_from_anchor"):
            refused = _marker(self.vllm, "sample_from_anchor_refused")
            findings.append(Finding(
                "drafter.sample-from-anchor", Status.WARN if refused is False else Status.FAIL,
                f"{self.file}: dflash_config.sample_from_anchor is true: "
                + ("vLLM refuses it (\"sample_from_anchor=True is not supported for DFlash. DFlash uses a fixed 1+N "
                   "query layout where the anchor is the bonus token.\")" if refused is not False else
                   f"{self.label} ignores the key and drafts with the anchor as the bonus token"),
                detail=SAMPLE_FROM_ANCHOR_MARKER.source, evidence={"file": self.file}))
        return findings

    def target_kind(self) -> list[Finding]:
        supported = self.vllm.aux_supported_model_types if self.vllm else None
        model_type = self.target_config.get("model_type") or \
            (((self.target or {}).get("dir") or {}).get("config") or {}).get("model_type")
        if not supported or not isinstance(model_type, str):
            return []
        if any(s in model_type for s in supported):
            return []
        return [Finding("drafter.target-unsupported", Status.FAIL,
                        f"{self.label} runs DFlash only on targets whose model_type contains one of {supported}; this "
                        f"target's is {model_type!r}: \"dflash is only supported for ... models\"",
                        evidence={"model_type": model_type, "supported": supported})]


class DrafterCheck:
    id: ClassVar[str] = "drafter"
    layer: ClassVar[str] = "models"
    title: ClassVar[str] = "DFlash drafter against its target"
    codes: ClassVar[tuple[Code, ...]] = tuple(c for c in CODES if c.id.startswith("drafter."))
    needs: ClassVar[frozenset[str]] = frozenset({"models", "vllm_dflash", "serve_args", "target", "gpu"})
    after: ClassVar[frozenset[str]] = frozenset({"model-files"})
    requires_gpu: ClassVar[bool] = False

    def judge(self, facts: Facts) -> Iterable[Finding]:
        models = facts.section(Models)
        drafter, target = models.drafter, models.target
        if drafter is None:
            return _not_given(self.id, self.title, "drafter directory")
        if target is None:
            return _not_given(self.id, self.title, "target directory to compare the drafter with")
        blocked = _skip_if_broken(facts, self.title)
        if blocked is not None:
            return blocked
        vllm = facts.optional_section(VllmDflash)
        return _Drafter(drafter, target, vllm, as_served(facts.optional_section(ServeArgs), models.speculators_launch, vllm),
                        installer_for(facts), gpu_view(facts)["ccs"]).findings()
