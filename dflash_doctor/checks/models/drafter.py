"""Layer: the DFlash drafter against its target and the installed vLLM: architecture in the installed
registry, `dflash_config.mask_token_id` inside the target's vocabulary, `target_layer_ids` present, in range,
increasing and not the uniform-spacing guess, the fc width the target provides, every tensor's shape against
the drafter's own config, vocabulary and dtype against the target's; the version-dependent rules (sliding
window, sample_from_anchor, how vLLM reads the ids) as the installed vLLM's source says."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from dflash_doctor.check import Facts
from dflash_doctor.checks.argv import with_spec
from dflash_doctor.checks.models.codes import (
    DRAFTER_ARCHITECTURE_UNKNOWN,
    DRAFTER_BLOCK_SIZE,
    DRAFTER_CHECKED,
    DRAFTER_CONFIG_WEIGHTS,
    DRAFTER_DFLASH2_BLOCK_MISMATCH,
    DRAFTER_DTYPE,
    DRAFTER_FC_WIDTH,
    DRAFTER_HIDDEN_SIZE_MISMATCH,
    DRAFTER_LAYER_IDS_HEURISTIC,
    DRAFTER_LAYER_IDS_INVALID,
    DRAFTER_LAYER_IDS_MISSING,
    DRAFTER_LAYER_IDS_VLLM_OFFSET,
    DRAFTER_MASK_HIDDEN,
    DRAFTER_MASK_TOKEN_INVALID,
    DRAFTER_MASK_TOKEN_MISSING,
    DRAFTER_MASK_TOKEN_OUT_OF_VOCAB,
    DRAFTER_MASK_TOKEN_TOP_LEVEL,
    DRAFTER_NOT_GIVEN,
    DRAFTER_OK,
    DRAFTER_SAMPLE_FROM_ANCHOR,
    DRAFTER_SLIDING_IGNORED,
    DRAFTER_SLIDING_WINDOW_MISSING,
    DRAFTER_TARGET_DEPTH_MISMATCH,
    DRAFTER_TARGET_HIDDEN_SIZE_NULL,
    DRAFTER_TARGET_UNSUPPORTED,
    DRAFTER_TENSOR_MISSING,
    DRAFTER_TENSOR_PREFIX,
    DRAFTER_TENSOR_SHAPE,
    DRAFTER_TENSOR_UNEXPECTED,
    DRAFTER_VLLM_WITHOUT_DFLASH,
    DRAFTER_VOCAB_MISMATCH,
)
from dflash_doctor.checks.models.drafter_formats import format_rules
from dflash_doctor.checks.models.drafter_pairing import padded_vocab_v2, pairing_rules
from dflash_doctor.checks.models.model_views import (
    FLOAT_DTYPES,
    MAX_LISTED,
    SLIDING,
    DrafterView,
    dflash_config,
    drafter_view,
    gpu_view,
    is_int,
    list_length,
    listed,
    long_list,
    not_given,
    skip_if_broken,
    source_marker,
    spec_value,
    value_count,
)
from dflash_doctor.checks.models.speculators import as_served
from dflash_doctor.checks.remedy import installer_for, quote
from dflash_doctor.facts.modelfiles.model_dir import LAYERS_KEPT
from dflash_doctor.facts.models.models_shapes import ConfigView, LayerCount, Models, Tensor
from dflash_doctor.facts.serve.serve_shapes import ServeArgs, VllmDflash
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
from dflash_doctor.shape import frozen_dataclass

__all__ = ["WeightsGeometry", "expected_drafter_tensors", "judge_drafter", "layer_indices", "weights_geometry"]





# ------------------------------------------------------------------------------------------- drafter


def expected_drafter_tensors(config: ConfigView, keys: ConfigView, *,
                             max_layers: int, id_count: int | None = None) -> dict[str, list[int]] | None:
    """The tensors vLLM's DFlashQwen3ForCausalLM loads, by name, with their shapes (knowledge.dflash), for its
    first min(num_hidden_layers, max_layers) layers. `max_layers` is the caller's bound from what the weights
    hold: num_hidden_layers is read from a file and may say 10**12. `id_count`: the length of
    target_layer_ids when the facts keep only its first items."""
    values = [config.int(k) for k in ("hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size")]
    values.append(config.int("num_key_value_heads") if "num_key_value_heads" in config
                  else config.int("num_attention_heads"))
    values.append(config.head_dim)
    hidden, heads, layers, inter, kv_heads, head_dim = values
    if hidden is None or heads is None or layers is None or inter is None or kv_heads is None or head_dim is None:
        return None
    dflash = dflash_config(keys)
    shapes: dict[str, list[int]] = {"hidden_norm.weight": [hidden], "norm.weight": [hidden]}
    if dflash.truthy("use_aux_hidden_state", True):
        ids = dflash.value("target_layer_ids", dflash.value("layer_ids"))
        count = (id_count if id_count is not None else len(ids)) if isinstance(ids, list) else layers
        declared = keys.int("target_hidden_size")
        width = declared if declared is not None else hidden
        shapes["fc.weight"] = [hidden, count * width]
    bias = config.truthy("attention_bias")
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


@frozen_dataclass(frozen=True)
class WeightsGeometry:
    """What the drafter's own tensors say its config.json should hold (weights_geometry)."""

    values: dict[str, int]
    """GEOMETRY_KEYS -> the value the tensors show; a key they do not show is absent."""
    read_from: dict[str, str]
    """The tensor (and its shape) each value was read from; the layer count has none."""
    layers: list[int]
    """The first layer numbers the names show."""

    def stored(self, key: str) -> int | None:
        """The value the tensors show for `key` (None: they do not show it)."""
        return self.values.get(key)


def weights_geometry(tensors: Mapping[str, Tensor], layers: LayerCount | None = None) -> WeightsGeometry:
    """What the drafter's own tensors say its config.json should hold: the layer count, and hidden size, head_dim,
    heads, KV heads and intermediate size read from the lowest layer's shapes. A value the tensors do not show is
    left out; `read_from` names the tensor each value was read from. `layers`: the weights facts' count of every
    layer the names show, when the facts keep only some of the tensors."""
    def shape(name: str) -> list[int]:
        info = tensors.get(name)
        return (info.full_shape or []) if info is not None else []

    indices = layer_indices(tensors)
    values = {"num_hidden_layers": len(indices) if layers is None else layers.count}
    held = sorted(indices)[:MAX_LISTED] if layers is None else layers.first[:MAX_LISTED]
    read_from: dict[str, str] = {}
    first = f"layers.{min(indices)}" if indices else None
    for key, names in (("hidden_size", ["norm.weight", "hidden_norm.weight"]
                        + ([f"{first}.input_layernorm.weight"] if first else [])),
                       ("head_dim", [f"{first}.self_attn.q_norm.weight"] if first else [])):
        for name in names:
            if len(shape(name)) == 1:
                values[key], read_from[key] = shape(name)[0], f"{name} {shape(name)}"
                break
    head_dim = values.get("head_dim")
    if first:
        for key, name in (("num_attention_heads", "self_attn.q_proj.weight"),
                          ("num_key_value_heads", "self_attn.k_proj.weight")):
            rows = shape(f"{first}.{name}")
            if len(rows) == 2 and head_dim and rows[0] % head_dim == 0:
                values[key], read_from[key] = rows[0] // head_dim, f"{first}.{name} {rows}"
        gate = shape(f"{first}.mlp.gate_proj.weight")
        if len(gate) == 2:
            values["intermediate_size"] = gate[0]
            read_from["intermediate_size"] = f"{first}.mlp.gate_proj.weight {gate}"
    return WeightsGeometry(values, read_from, held)




class _Drafter:
    """The drafter judged against its target and the installed vLLM; one method per rule."""

    def __init__(self, view: DrafterView) -> None:
        self.view = view
        self.ccs = view.ccs
        self.drafter, self.target, self.vllm, self.serve = view.drafter, view.target, view.vllm, view.serve
        self.installer = view.installer
        self.file, self.path, self.label = view.file, view.path, view.label
        self.config, self.keys, self.dflash, self.target_config = view.config, view.keys, view.dflash, view.target_config
        self.weights, self.tensors = view.weights, view.tensors
        # config.json key -> the id of the finding that blames it; a consequence of that key names the finding.
        self.blamed, self.emitted, self.ok = view.blamed, view.emitted, view.ok
        # tensor name as vLLM's loader sees it (an EAGLE-style `midlayer.` is layer 0) -> name in the file
        self.names = {n.replace("midlayer.", "layers.0.", 1) if n.startswith("midlayer.") else n: n for n in self.tensors}
        config = self.drafter.config
        self.quantized = config is not None and "quantization_config" in config.keys
        # What the weights themselves say of the geometry (None: no tensors, or packed quantized ones).
        # Past model_dir.MAX_TENSORS_KEPT the facts keep the tensors these rules read by name (fc, norms, the layers
        # below LAYERS_KEPT) and count the rest: names are judged on what is kept, counts on the whole.
        self.complete = self.weights.tensors_complete
        self.omitted = max(0, self.weights.tensor_count - len(self.tensors)) if not self.complete else 0
        self.geometry = None if self.quantized or not self.tensors else \
            weights_geometry({n: self.tensors[stored] for n, stored in self.names.items()},
                             self.weights.layers if not self.complete else None)
        self.id_key, _, self.id_count = self._layer_ids()

    def _layer_ids(self) -> tuple[str, Any, int | None]:
        """(where, value, length) of the target_layer_ids vLLM reads (dflash_config over eagle_config; "layer_ids"
        when the former is absent); the length counts a list the facts keep only the start of."""
        for key in ("target_layer_ids", "layer_ids"):
            for source in ("dflash_config", "eagle_config"):
                block = self.keys.view(source)
                if key in block:
                    value = block.value(key)
                    where = f"drafter.{source}.{key}"
                    return where, value, list_length(self.drafter, where, value) if isinstance(value, list) else None
        return "", None, None

    def findings(self) -> list[Finding]:
        out: list[Finding] = []
        # Causes before their consequences: hidden_sizes and config_weights blame config.json keys, which fc and
        # tensors_match then name as the cause of each shape that follows from them.
        for rule in (self.architecture, self.mask_token, self.layer_ids, self.hidden_sizes, self.config_weights,
                     self.fc, self.tensors_match, self.vocabulary, self.dtype, self.block, self.attention_kinds,
                     self.target_kind, *pairing_rules(self.view, self.ccs), *format_rules(self.view)):
            found = rule()
            self.emitted.update(f.id for f in found)
            out.extend(found)
        if not any(f.status in (Status.FAIL, Status.WARN) for f in out):
            out.insert(0, DRAFTER_OK.finding(Status.PASS,
                                  f"drafter {self.path} fits target {self.target.name} for {self.label}: "
                                  + "; ".join(self.ok)))
        elif self.ok:
            out.append(DRAFTER_CHECKED.finding(Status.PASS, "what holds: " + "; ".join(self.ok)))
        return out

    # -- rules ------------------------------------------------------------------------------------

    def architecture(self) -> list[Finding]:
        archs = self.keys.list("architectures") or self.drafter.architectures
        if not archs:
            return [DRAFTER_ARCHITECTURE_UNKNOWN.finding(Status.FAIL, f"{self.file} has no \"architectures\" list",
                            detail=f"vLLM looks the drafter up by architecture; DFlash drafters say "
                            f"[\"{DRAFTER_REGISTRY_ARCH.value}\"].",
                            evidence={"file": self.file})]
        renamed = [a if str(a).startswith("DFlash") or str(a).endswith("DFlash") else f"DFlash{a}" for a in archs]
        vllm = self.vllm or VllmDflash()
        if vllm.root and not vllm.has_dflash:
            return [DRAFTER_VLLM_WITHOUT_DFLASH.finding(Status.FAIL,
                            f"{self.label} has no DFlash support (no qwen3_dflash.py): DFlash first shipped in vLLM 0.20.0",
                            evidence={"vllm_root": vllm.root},
                            remediation=(Remediation(self.installer.install("vllm>=0.20.1"), "upgrade vLLM in the serving env"),))]
        known = vllm.dflash_archs if vllm.registry_readable else [DRAFTER_REGISTRY_ARCH.value]
        if not any(a in (known or []) for a in renamed):
            return [DRAFTER_ARCHITECTURE_UNKNOWN.finding(Status.FAIL,
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
        mask = self.dflash.value("mask_token_id")
        vocab = self.target_config.int("vocab_size")
        fix = Remediation(f"add \"dflash_config\": {{\"mask_token_id\": ID, ...}} to {quote(self.file)}",
                          "take ID from the drafter publisher's config.json (the target tokenizer's mask token)")
        if "mask_token_id" not in self.dflash:
            top = self.keys.value("mask_token_id")
            accepts_top = source_marker(self.vllm, "mask_top_level")
            if top is not None and accepts_top:
                return [DRAFTER_MASK_TOKEN_TOP_LEVEL.finding(Status.WARN,
                                f"{self.file} gives mask_token_id at the top level, not in dflash_config: {self.label} "
                                "accepts that, vLLM 0.20-0.24 do not",
                                evidence={"file": self.file, "mask_token_id": top}, remediation=(fix,))]
            found = f" (a top-level mask_token_id {top} is there, which {self.label} does not read)" if top is not None else ""
            return [DRAFTER_MASK_TOKEN_MISSING.finding(Status.FAIL,
                            f"{self.file} has no dflash_config.mask_token_id{found}: vLLM stops at start with "
                            "\"the draft model config must have `pard_token`, `ptd_token_id`, or "
                            "`dflash_config.mask_token_id` specified in its config.json\"",
                            detail=MASK_TOKEN_RULE.source, evidence={"file": self.file}, remediation=(fix,))]
        if not is_int(mask):
            return [DRAFTER_MASK_TOKEN_INVALID.finding(Status.FAIL,
                            f"{self.file}: dflash_config.mask_token_id is {mask!r}, not an integer token id",
                            evidence={"file": self.file}, remediation=(fix,))]
        if vocab is not None and not 0 <= mask < vocab:
            return [DRAFTER_MASK_TOKEN_OUT_OF_VOCAB.finding(Status.FAIL,
                            f"{self.file}: dflash_config.mask_token_id {mask} is outside the target's vocabulary "
                            f"(vocab_size {vocab}): the mask embedding lookup indexes past the table",
                            detail=MASK_TOKEN_RULE.note,
                            evidence={"file": self.file, "mask_token_id": mask, "target_vocab_size": vocab},
                            remediation=(fix,))]
        self.ok.append(f"mask_token_id {mask}")
        return []

    def layer_ids(self) -> list[Finding]:
        ids = self.dflash.value("target_layer_ids")
        depth = self.target_config.int("num_hidden_layers")
        publisher = Remediation(f"copy dflash_config.target_layer_ids from the drafter publisher's own config.json "
                                f"into {quote(self.file)}", "the ids the drafter was trained on; never recompute them")
        if ids is None:
            elsewhere = [k for k in ("layer_ids",) if k in self.dflash] + \
                [k for k in ("target_layer_ids",) if k in self.keys]
            hint = f" ({' and '.join(elsewhere)} found elsewhere: vLLM's target side does not read them)" if elsewhere else ""
            return [DRAFTER_LAYER_IDS_MISSING.finding(Status.FAIL,
                            f"{self.file} has no dflash_config.target_layer_ids{hint}: vLLM would fall back to "
                            "EAGLE-3's default layers, which no DFlash drafter was trained on",
                            detail=TARGET_LAYER_IDS_REQUIRED.value + ". " + TARGET_LAYER_IDS_REQUIRED.source,
                            evidence={"file": self.file}, remediation=(publisher,))]
        summary = long_list(self.drafter, self.id_key) if self.id_key else None
        count = self.id_count if self.id_count is not None else (len(ids) if isinstance(ids, list) else 0)
        all_ints = isinstance(ids, list) and all(is_int(i) for i in ids) and (summary is None or summary.ints)
        if not isinstance(ids, list) or not ids or not all_ints:
            shown = listed(ids, count) if isinstance(ids, list) else repr(ids)[:200]
            return [DRAFTER_LAYER_IDS_INVALID.finding(Status.FAIL,
                            f"{self.file}: dflash_config.target_layer_ids is {shown}, not a list of integers",
                            evidence={"file": self.file}, remediation=(publisher,))]
        problems: list[str] = []
        if depth is not None:
            outside = [i for i in ids if not 0 <= i < depth]
            if summary is not None and ((summary.min or 0) < 0 or (summary.max or 0) >= depth):
                problems.append(f"{listed(outside) if outside else 'ids'} (from {summary.min} to "
                                f"{summary.max}) outside [0, {depth}) for a {depth}-layer target")
            elif outside:
                problems.append(f"{listed(outside)} outside [0, {depth}) for a {depth}-layer target")
        increasing = summary.increasing if summary is not None else \
            not any(b <= a for a, b in itertools.pairwise(ids))
        if not increasing:
            repeats = summary.repeats if summary is not None else len(set(ids)) != len(ids)
            problems.append("not strictly increasing" + (" (repeats)" if repeats else ""))
        trained_for = self.keys.int("num_target_layers")
        if problems:
            also = (f"; the drafter says num_target_layers {trained_for}: it was made for another target"
                    if trained_for is not None and depth is not None and trained_for != depth else "")
            return [DRAFTER_LAYER_IDS_INVALID.finding(Status.FAIL,
                            f"{self.file}: target_layer_ids {listed(ids, count)} are {'; '.join(problems)}{also}",
                            detail="vLLM records the target's hidden state after each listed layer; an id the target "
                            "does not have is never recorded, the fc input comes up short, and the first forward "
                            "pass fails (vLLM 0.34: \"target_layer_ids reference layers that do not exist in the "
                            "target model\").",
                            evidence={"file": self.file, "target_layer_ids": ids[:MAX_LISTED], "count": count,
                                      "target_layers": depth},
                            remediation=(publisher,))]
        findings: list[Finding] = []
        if trained_for is not None and depth is not None and trained_for != depth:
            findings.append(DRAFTER_TARGET_DEPTH_MISMATCH.finding(Status.WARN,
                                    f"{self.file} says num_target_layers {trained_for}, the target has {depth} layers: "
                                    "this drafter was trained for another target",
                                    evidence={"file": self.file, "num_target_layers": trained_for, "target_layers": depth}))
        # The formula gives n ids for n draft layers, so only n = len(ids) can reproduce them (and the drafter's
        # num_hidden_layers, read from its config, must not size a list); floats stay exact below 2**53. Strictly
        # increasing ids below depth number at most depth, so the formula is never asked for more.
        if depth is not None and 0 < depth < 2**53 and count == len(ids) <= depth and \
                ids == uniform_layer_ids(depth, len(ids)):
            findings.append(DRAFTER_LAYER_IDS_HEURISTIC.finding(Status.WARN,
                f"{self.file}: target_layer_ids {listed(ids)} are exactly the uniform-spacing formula for a "
                f"{depth}-layer target: they look computed, not trained",
                detail=f"{UNIFORM_LAYER_HEURISTIC.value}. {UNIFORM_LAYER_HEURISTIC.note} Sources: "
                f"{UNIFORM_LAYER_HEURISTIC.source}.",
                evidence={"file": self.file, "target_layer_ids": ids[:MAX_LISTED]}, remediation=(publisher,)))
        if source_marker(self.vllm, "layer_ids_plus_one") is False and self.vllm is not None and self.vllm.has_dflash:
            findings.append(DRAFTER_LAYER_IDS_VLLM_OFFSET.finding(Status.WARN,
                f"{self.label} passes target_layer_ids to the target as they are: every id reads the output of the "
                "layer before the one the drafter was trained on (fixed in vLLM 0.22.0); acceptance suffers",
                detail=LAYER_IDS_PLUS_ONE_MARKER.source,
                remediation=(Remediation(self.installer.install("vllm>=0.22.0"), "a vLLM that adds 1 to DFlash's layer ids"),)))
        self.ok.append(f"target_layer_ids {listed(ids, count, limit=16)}")
        return findings

    def hidden_sizes(self) -> list[Finding]:
        hidden, target_hidden = self.config.int("hidden_size"), self.target_config.int("hidden_size")
        findings: list[Finding] = []
        if "target_hidden_size" in self.keys and self.keys.value("target_hidden_size") is None \
                and source_marker(self.vllm, "target_hidden_size_null_ok") is not True:
            findings.append(DRAFTER_TARGET_HIDDEN_SIZE_NULL.finding(Status.FAIL,
                                    f"{self.file} has \"target_hidden_size\": null: {self.label} multiplies it "
                                    "(None * n) when building fc and stops with a TypeError",
                                    detail=TARGET_HIDDEN_SIZE_NULL.source, evidence={"file": self.file},
                                    remediation=(Remediation(f"delete the target_hidden_size line from {quote(self.file)}",
                                                             "or set it to the target's hidden_size"),)))
        declared = self.keys.int("target_hidden_size")
        if declared is not None and target_hidden is not None and declared != target_hidden:
            findings.append(DRAFTER_HIDDEN_SIZE_MISMATCH.finding(Status.FAIL,
                                    f"{self.file}: target_hidden_size {declared}, but the target's hidden_size is "
                                    f"{target_hidden}", evidence={"file": self.file}))
        elif declared is None and hidden is not None and target_hidden is not None and hidden != target_hidden:
            stored = self.geometry.stored("hidden_size") if self.geometry is not None else None
            if stored == target_hidden:
                findings.append(DRAFTER_HIDDEN_SIZE_MISMATCH.finding(Status.FAIL,
                    f"{self.file}: hidden_size {hidden} differs from the target's {target_hidden}, but the drafter's "
                    f"weights are {stored} wide ({self.geometry.read_from['hidden_size'] if self.geometry else ''}): the config.json is "
                    "wrong, and every shape vLLM builds from it is too",
                    detail="The drafter embeds its queries with the target's embedding table and reads its hidden "
                    "states; both are the target's width, and so are these weights.",
                    evidence={"file": self.file, "hidden_size": hidden, "target_hidden_size": target_hidden,
                              "weights_hidden_size": stored},
                    remediation=(Remediation(f"set \"hidden_size\": {stored} in {quote(self.file)}",
                                             "the width of the weights and of the target"),)))
            else:
                findings.append(DRAFTER_HIDDEN_SIZE_MISMATCH.finding(Status.FAIL,
                                        f"{self.file}: hidden_size {hidden} differs from the target's {target_hidden} and "
                                        "no target_hidden_size says otherwise: this drafter belongs to another target",
                                        detail="The drafter embeds its queries with the target's embedding table and reads "
                                        "its hidden states; both are the target's width.",
                                        evidence={"file": self.file, "hidden_size": hidden,
                                                  "target_hidden_size": target_hidden}))
            if is_int(stored) and stored != hidden:
                self.blamed["hidden_size"] = "drafter.hidden-size-mismatch"
        return findings

    def _corrected(self, keys: Iterable[str]) -> ConfigView:
        """The drafter's text config with `keys` set to what its weights say."""
        stored = self.geometry.values if self.geometry is not None else {}
        corrected = self.config.raw()
        for key in keys:
            corrected[key] = stored[key]
        return ConfigView(corrected)

    def config_weights(self) -> list[Finding]:
        """config.json against the drafter's own weights: each geometry key the weights contradict, in one finding.
        A layer count above what the weights hold is said here once, never enumerated."""
        geometry = self.geometry
        if not geometry:
            return []
        wrong: dict[str, tuple[Any, Any]] = {}
        for key in GEOMETRY_KEYS:
            if key in self.blamed or key not in geometry.values:
                continue
            given = self.config.head_dim if key == "head_dim" else \
                self.config.int("num_attention_heads") if key == "num_key_value_heads" and key not in self.config else \
                self.config.int(key)
            if given is None or given == geometry.values[key]:
                continue
            if key in ("head_dim", "num_key_value_heads") and key not in self.config:
                # Derived, not written: it is wrong only if it stays wrong once the written keys are corrected.
                corrected = self._corrected([*self.blamed, *wrong])
                derived = corrected.head_dim if key == "head_dim" else corrected.int("num_attention_heads")
                if derived == geometry.values[key]:
                    continue
            wrong[key] = (given, geometry.values[key])
        if not wrong:
            return []
        parts = []
        for key, (given, stored) in wrong.items():
            if key == "num_hidden_layers":
                held = geometry.layers
                listed = ", ".join(str(i) for i in held) + (", ..." if stored > len(held) else "")
                parts.append(f"num_hidden_layers {given}, but the weights hold {stored} layer(s)"
                             + (f" (layers {listed})" if held else ""))
            else:
                parts.append(f"{key} {given}, but the weights say {stored} ({geometry.read_from[key]})")
        self.blamed.update(dict.fromkeys(wrong, "drafter.config-weights"))
        settings = ", ".join(f"\"{k}\": {stored}" for k, (_, stored) in wrong.items())
        return [DRAFTER_CONFIG_WEIGHTS.finding(Status.FAIL,
                        f"{self.file} disagrees with the drafter's own weights: {'; '.join(parts)}",
                        detail="vLLM builds every parameter from config.json and the weight loader refuses a tensor "
                        "that is missing, unexpected or shaped otherwise; the shape findings below follow from these "
                        "keys. Either the config.json was written for another model or the weights are incomplete.",
                        evidence={"file": self.file, "config": {k: g for k, (g, _) in wrong.items()},
                                  "weights": {k: w for k, (_, w) in wrong.items()},
                                  "read_from": {k: geometry.read_from.get(k) for k in wrong}},
                        remediation=(Remediation(f"set {settings} in {quote(self.file)}",
                                                 "what the weights were saved with; or take the publisher's config.json"),))]

    def fc(self) -> list[Finding]:
        if not self.dflash.truthy("use_aux_hidden_state", True):
            return []
        ids = self.dflash.value("target_layer_ids", self.dflash.value("layer_ids"))
        hidden, target_hidden = self.config.int("hidden_size"), self.target_config.int("hidden_size")
        declared = self.keys.int("target_hidden_size")
        width = declared if declared is not None else hidden
        tensor = self.tensors.get("fc.weight")
        if not isinstance(ids, list) or width is None or tensor is None:
            return []  # reported by layer_ids / tensors_match
        shape = list(tensor.shape)
        n_ids = self.id_count if self.id_count is not None else len(ids)
        config_in = n_ids * width
        provided = n_ids * target_hidden if target_hidden is not None else None
        where = f"{self.path}/{tensor.file}"
        if shape != [hidden, config_in]:
            # Follows from a blamed hidden_size when the weights' width gives exactly the stored shape.
            fixed_hidden = self.geometry.stored("hidden_size") if "hidden_size" in self.blamed and self.geometry else hidden
            fixed_width = declared if declared is not None else fixed_hidden
            cause = self.blamed["hidden_size"] if "hidden_size" in self.blamed and is_int(fixed_width) and \
                shape == [fixed_hidden, n_ids * fixed_width] else ""
            return [DRAFTER_FC_WIDTH.finding(Status.FAIL,
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
            return [DRAFTER_FC_WIDTH.finding(Status.FAIL,
                            f"the target provides {n_ids} x {target_hidden} = {provided} features, fc.weight "
                            f"takes {config_in}", evidence={"file": where, "provided": provided, "expected": config_in},
                            cause=cause)]
        self.ok.append(f"fc.weight {shape} = {n_ids} x {width}")
        return []

    def tensors_match(self) -> list[Finding]:
        if not self.tensors and not self.weights.tensor_count:
            return []  # no weights: model-files says so
        findings: list[Finding] = []
        names = self.names
        mask_hidden = [n for n in names.values() if MASK_HIDDEN_FORBIDDEN.value in n]
        if mask_hidden:
            findings.append(DRAFTER_MASK_HIDDEN.finding(Status.FAIL,
                                    f"{self.path} ships {mask_hidden[0]}: vLLM asserts \"DFlash should use mask_token_id "
                                    "to embed the padding hidden state\" while loading",
                                    detail=MASK_HIDDEN_FORBIDDEN.source, evidence={"tensors": mask_hidden[:MAX_LISTED], "count": len(mask_hidden)},
                                    remediation=(Remediation("use the publisher's DFlash checkpoint", "this one was "
                                                             "exported for another runtime"),)))
        prefixed = [n for n in names if n.startswith("model.")]
        if prefixed:
            findings.append(DRAFTER_TENSOR_PREFIX.finding(Status.FAIL,
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
                 if self.tensors[names[n]].shape != expected[n]]
        for cause, group in _grouped(missing, lambda n: cause_of(lambda fixed: n not in fixed)):
            findings.append(DRAFTER_TENSOR_MISSING.finding(Status.FAIL,
                                    f"{self.path}: {len(group)} tensors the config implies are missing: "
                                    f"{', '.join(group[:6])}" + (" ..." if len(group) > 6 else ""),
                                    detail="vLLM stops with \"Following weights were not initialized from checkpoint\". "
                                    + (f"They follow from {cause}." if cause else "num_hidden_layers or attention_bias "
                                       "in config.json may not match the weights."),
                                    evidence={"missing": group[:MAX_LISTED], "count": len(group), "file": self.file},
                                    cause=cause))
        unread = (f"; {self.omitted} more of its {self.weights.tensor_count} tensors are not in the facts "
                  "and were not judged by name") if self.omitted else ""
        for cause, group in _grouped(unexpected, lambda n: cause_of(lambda fixed: n in fixed)):
            findings.append(DRAFTER_TENSOR_UNEXPECTED.finding(Status.FAIL,
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
            shape = list(info.shape)
            cause = cause_of(functools.partial(_shape_is, name, shape))
            findings.append(DRAFTER_TENSOR_SHAPE.finding(Status.FAIL,
                                    f"{self.path}/{info.file}: {stored} is {info.shape}, {self.file} "
                                    f"implies {expected[name]}",
                                    detail="The weight loader asserts equal shapes; "
                                    + (f"this one follows from {cause}." if cause else "the config.json was likely "
                                       "written for another model (head_dim, heads, intermediate_size)."),
                                    evidence={"tensor": stored, "shape": info.shape, "expected": expected[name]},
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
        if padded_vocab_v2(self.view) is not None:
            return []  # drafter.padded-vocab-v2 (the pairing rules) names what this vLLM does with it
        vocab, target_vocab = self.config.int("vocab_size"), self.target_config.int("vocab_size")
        draft_vocab = self.keys.int("draft_vocab_size")
        own_head = "d2t" in self.tensors and "lm_head.weight" in self.tensors
        if draft_vocab is not None and target_vocab is not None and draft_vocab != target_vocab and not own_head:
            return [DRAFTER_VOCAB_MISMATCH.finding(Status.FAIL,
                            f"{self.file}: draft_vocab_size {draft_vocab} differs from the target's {target_vocab} "
                            "but the drafter lacks its own lm_head and d2t mapping",
                            evidence={"file": self.file})]
        if vocab is not None and target_vocab is not None and vocab < target_vocab and "lm_head.weight" not in self.tensors:
            # A target vocabulary padded past the tokenizer's (MiMo 152576, its drafter 152064): vLLM shares the
            # target's embedding and lm_head, drafts ids below the drafter's vocab_size, and accepts as usual (vLLM
            # PR #46435, on par with V1); only 0.24's V2 runner breaks it (drafter.padded-vocab-v2).
            return [DRAFTER_VOCAB_MISMATCH.finding(Status.WARN,
                            f"{self.file}: vocab_size {vocab} is below the target's {target_vocab}: vLLM shares the "
                            f"target's embedding and lm_head and drafts only ids below {vocab}; right for a target "
                            "padded past its tokenizer (vLLM PR #46435), wrong for a drafter made for another "
                            "tokenizer",
                            evidence={"file": self.file, "vocab_size": vocab, "target_vocab_size": target_vocab})]
        if vocab is not None and target_vocab is not None and vocab != target_vocab:
            return [DRAFTER_VOCAB_MISMATCH.finding(Status.FAIL,
                            f"{self.file}: vocab_size {vocab} differs from the target's {target_vocab}: the drafter "
                            "shares the target's embedding and lm_head, so it was made for another tokenizer",
                            evidence={"file": self.file, "vocab_size": vocab, "target_vocab_size": target_vocab})]
        embed = self.tensors.get("embed_tokens.weight")
        hidden = self.config.int("hidden_size")
        if embed is not None and vocab is not None and hidden is not None and embed.shape != [vocab, hidden]:
            return [DRAFTER_TENSOR_SHAPE.finding(Status.FAIL,
                            f"{self.path}: embed_tokens.weight is {embed.shape}, config implies "
                            f"[{vocab}, {hidden}]", evidence={"tensor": "embed_tokens.weight"})]
        if vocab is not None:
            self.ok.append(f"vocab {vocab}")
        return []

    def dtype(self) -> list[Finding]:
        stored = {FLOAT_DTYPES[d] for d in self.weights.dtypes if d in FLOAT_DTYPES}
        given = self.serve.fields.dtype if self.serve is not None else None
        wanted = given if given not in (None, "auto") else None
        target_dtype = self.target_config.torch_dtype
        serving = {"half": "float16", "float": "float32"}.get(str(wanted), wanted) or target_dtype
        if serving == "float32" and not wanted:
            serving = "bfloat16"  # --dtype auto downcasts float32 checkpoints (knowledge.dflash DTYPE_AUTO_DOWNCAST)
        if serving == "float16" and stored & {"bfloat16", "float32"}:
            return [DRAFTER_DTYPE.finding(Status.WARN,
                            f"{self.path} stores {', '.join(sorted(stored))} weights; vLLM serves the drafter in the "
                            "target's float16: values past float16's range overflow",
                            evidence={"stored": sorted(stored), "serving": serving})]
        if stored:
            self.ok.append(f"dtype {'/'.join(sorted(stored))} served as {serving or 'the target dtype'}")
        return []

    def block(self) -> list[Finding]:
        block = self.keys.int("block_size") if "block_size" in self.keys else self.dflash.int("block_size")
        spec = spec_value(self.serve)
        k = spec.get("num_speculative_tokens")
        if block is None:
            return []
        if is_int(k) and k > block - 1:
            return [DRAFTER_BLOCK_SIZE.finding(Status.WARN,
                            f"num_speculative_tokens {k} is above block_size - 1 = {block - 1} ({self.file}): the "
                            "drafter drafts past the block it was trained on",
                            detail=f"{SPEC_BLOCK.value}. {SPEC_BLOCK.note}",
                            evidence={"block_size": block, "num_speculative_tokens": k},
                            remediation=(Remediation(with_spec(list(self.serve.argv) if self.serve is not None else [],
                                                               {**spec, "num_speculative_tokens": block - 1}),
                                                     "one anchor plus block_size - 1 masks fill the trained block"),))]
        archs = self.keys.list("architectures") or self.drafter.architectures
        dflash2 = any("DFlash2" in str(a) for a in archs)
        if dflash2 and is_int(k) and k < block - 1 and source_marker(self.vllm, "dflash2_conv_block_from_k") is not False:
            return [DRAFTER_DFLASH2_BLOCK_MISMATCH.finding(Status.WARN,
                            f"num_speculative_tokens {k} is below block_size - 1 = {block - 1} ({self.file}): DFlash2's "
                            f"grouped convolution runs over blocks of 1 + k = {k + 1} positions, not the {block} it "
                            "was trained on, so every drafted position is mixed with the wrong neighbours",
                            detail=f"{DFLASH2_CONV_BLOCK.value}. Sources: {DFLASH2_CONV_BLOCK.source}.",
                            evidence={"block_size": block, "num_speculative_tokens": k},
                            remediation=(Remediation(with_spec(list(self.serve.argv) if self.serve is not None else [],
                                                               {**spec, "num_speculative_tokens": block - 1}),
                                                     "the convolution's block is then the trained one"),))]
        self.ok.append(f"block_size {block}" + (f" (k={k})" if is_int(k) else f" (serve with k={block - 1})"))
        return []

    def attention_kinds(self) -> list[Finding]:
        findings: list[Finding] = []
        layer_types = self.config.layer_types or []
        sliding = self.dflash.value("use_swa") or value_count(self.drafter, "text.layer_types", layer_types, SLIDING) > 0
        window = self.dflash.value("swa_window_size", self.config.value("sliding_window"))
        if sliding:
            required, reads = source_marker(self.vllm, "sliding_window_required"), source_marker(self.vllm, "reads_layer_types")
            if window is None and required is not False:
                findings.append(DRAFTER_SLIDING_WINDOW_MISSING.finding(Status.FAIL,
                                        f"{self.file}: sliding-attention layers but no window (dflash_config.swa_window_size "
                                        "or sliding_window): vLLM stops with \"DFlash sliding attention requires a "
                                        "window size\"", detail=SLIDING_WINDOW_MARKER.source, evidence={"file": self.file},
                                        remediation=(Remediation(f"set dflash_config.swa_window_size in {quote(self.file)}",
                                                                 "from the publisher's config"),)))
            elif reads is False:
                findings.append(DRAFTER_SLIDING_IGNORED.finding(Status.WARN,
                                        f"{self.label} ignores layer_types for DFlash drafters: the drafter's sliding-window "
                                        "layers run full attention, unlike training",
                                        detail=SLIDING_WINDOW_MARKER.source))
        if self.dflash.truthy("sample_from_anchor"):
            refused = source_marker(self.vllm, "sample_from_anchor_refused")
            findings.append(DRAFTER_SAMPLE_FROM_ANCHOR.finding(Status.WARN if refused is False else Status.FAIL,
                f"{self.file}: dflash_config.sample_from_anchor is true: "
                + ("vLLM refuses it (\"sample_from_anchor=True is not supported for DFlash. DFlash uses a fixed 1+N "
                   "query layout where the anchor is the bonus token.\")" if refused is not False else
                   f"{self.label} ignores the key and drafts with the anchor as the bonus token"),
                detail=SAMPLE_FROM_ANCHOR_MARKER.source, evidence={"file": self.file}))
        return findings

    def target_kind(self) -> list[Finding]:
        supported = self.vllm.aux_supported_model_types if self.vllm else None
        config = self.target.config
        model_type = self.target_config.value("model_type") or (config.model_type_raw if config is not None else None)
        if not supported or not isinstance(model_type, str):
            return []
        if any(s in model_type for s in supported):
            return []
        return [DRAFTER_TARGET_UNSUPPORTED.finding(Status.FAIL,
                        f"{self.label} runs DFlash only on targets whose model_type contains one of {supported}; this "
                        f"target's is {model_type!r}: \"dflash is only supported for ... models\"",
                        evidence={"model_type": model_type, "supported": supported})]


def judge_drafter(facts: Facts, title: str) -> list[Finding]:
    """The drafter check: the drafter against its target and the installed vLLM, rule by rule."""
    models = facts.section(Models)
    drafter, target = models.drafter, models.target
    if drafter is None:
        return not_given(DRAFTER_NOT_GIVEN, title, "drafter directory")
    if target is None:
        return not_given(DRAFTER_NOT_GIVEN, title, "target directory to compare the drafter with")
    blocked = skip_if_broken(facts, title)
    if blocked is not None:
        return blocked
    vllm = facts.optional_section(VllmDflash)
    serve = as_served(facts.optional_section(ServeArgs), models.speculators_launch, vllm)
    return _Drafter(drafter_view(drafter, target, vllm, serve, installer_for(facts), list(gpu_view(facts).ccs))).findings()
