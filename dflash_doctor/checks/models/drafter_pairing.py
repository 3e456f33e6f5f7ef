"""Rules of the `drafter` check for the failures users reported since DFlash shipped: the drafter's context
against the served one (per model runner), its layer_types, the quantization of the pair, the target's
auxiliary-hidden-state interface in the installed vLLM, the target the drafter was made for, and the
weights files as vLLM's loader picks them. Each rule reads the installed vLLM's facts
(facts.serve.vllm_pairing) and the models' own files; the hard-coded rest is in knowledge.dflash_reports.

`pairing_rules(view)` gives the rules as callables for the drafter check's rule loop; each reads the drafter
through model_views.DrafterView."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import Any

from dflash_doctor.checks.argv import with_flag
from dflash_doctor.checks.models.codes import (
    DRAFTER_CONTEXT_LIMITS_SERVED,
    DRAFTER_CONTEXT_SHORTER_THAN_SERVED,
    DRAFTER_FP8_KERNEL,
    DRAFTER_LAYER_TYPES_LENGTH,
    DRAFTER_MADE_FOR,
    DRAFTER_PADDED_VOCAB_V2,
    DRAFTER_QUANTIZED_ACCEPTANCE,
    DRAFTER_QUANTIZED_ATTENTION,
    DRAFTER_ROPE_LAYOUT_FROM_TARGET,
    DRAFTER_TARGET_NO_AUX_HIDDEN_STATES,
    DRAFTER_WEIGHTS_FILE,
)
from dflash_doctor.checks.models.model_views import (
    SLIDING,
    DrafterView,
    architectures,
    has_behaviour,
    is_int,
    list_length,
    rope_entries,
    served_max_len,
    source_marker,
    value_count,
    version_tuple,
)
from dflash_doctor.checks.remedy import quote
from dflash_doctor.facts.models.models_shapes import ConfigView, Model
from dflash_doctor.facts.serve.serve_shapes import (
    Eagle3Arch,
    Eagle3Facts,
    Fp8Facts,
    RunnerFacts,
    Served,
    VllmDflash,
    VllmPairing,
)
from dflash_doctor.knowledge.dflash_reports import (
    DRAFTER_CONTEXT_RAISED,
    DRAFTER_CONTEXT_V2,
    EAGLE3_INTERFACE_RULE,
    FP8_KERNELS,
    FUSED_KV_RAW_WEIGHT,
    LAYER_TYPES_LENGTH,
    PADDED_VOCAB_V2,
    QUANTIZED_PAIR_ACCEPTANCE,
    ROPE_LAYOUT_FROM_TARGET,
    V2_DEFAULT_SINCE,
    WEIGHT_FILE_SELECTION,
)
from dflash_doctor.model import Finding, Remediation, Status
from dflash_doctor.shape import frozen_dataclass

__all__ = ["Quantization", "fused_kv_reads", "model_runner", "padded_vocab_v2", "pairing_facts", "pairing_rules", "quantization"]

ATTENTION_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "qkv_proj")
# The config keys vLLM counts experts by (model_arch_config_convertor.get_num_experts, 0.22.1-0.34.0).
MOE_KEYS = ("num_experts", "moe_num_experts", "n_routed_experts", "num_local_experts")
# A remediation lists at most this many layer types (a config may ask for 3e8 layers).
FIX_LISTED = 64


def pairing_rules(d: DrafterView, ccs: list[str]) -> tuple[Callable[[], list[Finding]], ...]:
    """The rules, in order; `ccs` are the serving GPUs' compute capabilities ("8.6"; model_common.gpu_view)."""
    return (lambda: _context(d), lambda: _layer_types(d), lambda: _target_interface(d),
            lambda: _quantization(d, ccs), lambda: _made_for(d), lambda: _weights_files(d),
            lambda: _rope_layout(d), lambda: _padded_vocab(d))


def pairing_facts(vllm: VllmDflash | None) -> VllmPairing:
    return vllm.pairing if vllm is not None else VllmPairing()


def model_runner(vllm: VllmDflash | None, target_archs: list[str], environ: Mapping[str, Any] | None,
                 drafter_layer_types: object = None, target: Model | None = None,
                 resolved: Served | None = None) -> tuple[str | None, str]:
    """Which model runner the installed vLLM serves DFlash with ("v1", "v2" or None when it cannot be told),
    and why: the one vLLM's own validation resolved (`resolved`, where it ran), else VLLM_USE_V2_MODEL_RUNNER when
    set, else what the source shows, else the version (knowledge.dflash_reports.V2_DEFAULT_SINCE). A drafter that
    mixes sliding and full attention needs V2's several KV-cache groups, and the releases that know it (marker
    `multi_kv_group_v2`) pick V2 for it."""
    if resolved is not None and resolved.model_runner in ("v1", "v2"):
        return resolved.model_runner, (f"vLLM's own config resolved it ({resolved.model_runner_from or 'VllmConfig'})")
    runner = pairing_facts(vllm).runner or RunnerFacts()
    kind = runner.kind
    env = str((environ or {}).get("VLLM_USE_V2_MODEL_RUNNER") or "").strip().lower()
    if kind == "v2-only":
        return "v2", f"{runner.file} is its only GPU model runner"
    if env in ("1", "true"):
        return "v2", "VLLM_USE_V2_MODEL_RUNNER=1"
    if env in ("0", "false"):
        return "v1", "VLLM_USE_V2_MODEL_RUNNER=0"
    if kind == "v2-default":
        return "v2", f"V2 is the default runner ({runner.file}: use_v2_model_runner)"
    types = drafter_layer_types if isinstance(drafter_layer_types, list) else []
    sliding = sum(1 for t in types if t == SLIDING)
    if 0 < sliding < len(types) and source_marker(vllm, "multi_kv_group_v2"):
        return "v2", ("the drafter mixes sliding and full attention, which needs V2's several KV-cache groups "
                      "(config/vllm.py _dflash_needs_multi_kv_group)")
    if kind == "v2-for-archs":
        listed = [a for a in target_archs if a in (runner.default_archs or [])]
        moe, quantized = _moe(target), _quantized(target)
        if listed and source_marker(vllm, "v2_dense_unquantized_only") and (moe or quantized):
            return "v1", (f"{listed[0]} is in DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES, but only a dense, unquantized "
                          f"model runs V2 by default ({runner.file})")
        if listed:
            return "v2", f"{listed[0]} is in DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES ({runner.file})"
        if source_marker(vllm, "v2_dense_default") and target is not None and not moe:
            return "v2", f"a dense (not MoE) target runs V2 by default ({runner.file})"
        return "v1", f"the target's architectures are not in DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES ({runner.file})"
    if kind == "v1-default":
        return "v1", "V2 runs only with VLLM_USE_V2_MODEL_RUNNER=1 in this vLLM"
    version = version_tuple(str((vllm.version if vllm is not None else None) or ""))
    if version and version >= version_tuple(V2_DEFAULT_SINCE.value):
        return "v2", f"the default from vLLM {V2_DEFAULT_SINCE.value} ({V2_DEFAULT_SINCE.source.split(';')[0]})"
    return None, "the installed vLLM's source does not show which runner is the default"


def _moe(target: Model | None) -> bool:
    """vLLM's ModelConfig.is_moe: any of the experts-count keys is set (transformers_utils
    model_arch_config_convertor.get_num_experts)."""
    text = target.text if target is not None else ConfigView()
    return any(isinstance(text.value(k), (int, list)) and bool(text.value(k)) for k in MOE_KEYS)


def _quantized(target: Model | None) -> bool:
    """vLLM's ModelConfig.is_quantized: config.json has a quantization_config."""
    config = target.config if target is not None else None
    return config is not None and bool(config.quantization_config)


# ------------------------------------------------------------------------------------------ 1: context


def _context(d: DrafterView) -> list[Finding]:
    # What was asked, not what vLLM resolved: the rule explains vLLM's own lowering of it to the drafter's length.
    given = d.serve.asked.max_model_len if d.serve is not None else None
    served, served_from = (given, f"--max-model-len {given}") if is_int(given) else served_max_len(d.target, d.vllm)
    drafter_len, drafter_from = served_max_len(Model(dir=d.drafter.dir), d.vllm)
    if not is_int(served) or not is_int(drafter_len) or drafter_len >= served:
        if is_int(drafter_len):
            d.ok.append(f"context {drafter_len} ({drafter_from})")
        return []
    runner, why = model_runner(d.vllm, architectures(d.target), d.serve.environ if d.serve is not None else None,
                               d.config.layer_types, d.target, d.serve.resolved if d.serve is not None else None)
    argv = list(d.serve.argv) if d.serve is not None else []
    raised, limited = _context_handling(d.vllm)
    where = f"served {served} ({served_from}), drafter {drafter_len} ({drafter_from})"
    rope_types = [str(e.rope_type or "default") for e in rope_entries(d.config)]
    cache_only = DRAFTER_CONTEXT_RAISED.value["cache_only_rope_types"]
    if raised and all(kind in cache_only for kind in rope_types):
        d.ok.append(f"context {drafter_len} raised by vLLM to the served {served} (RoPE {', '.join(rope_types) or 'default'})")
        return []
    if limited and runner == "v2":
        fix = Remediation(with_flag(argv, "--max-model-len", drafter_len), "say the served length the drafter allows") \
            if argv else None
        return [DRAFTER_CONTEXT_LIMITS_SERVED.finding(Status.WARN,
                        f"{d.file}: the drafter's context {drafter_len} is shorter than the served {served} and its "
                        f"RoPE ({', '.join(rope_types)}) cannot simply grow: vLLM {d.vllm.version if d.vllm else ''} "
                        f"lowers the served max_model_len to {drafter_len} with only a log line, and refuses longer "
                        "requests",
                        detail=f"Source: {DRAFTER_CONTEXT_RAISED.source}.",
                        evidence={"file": d.file, "served": served, "drafter": drafter_len, "rope_types": rope_types,
                                  "runner": runner, "why": why, "read": where},
                        remediation=tuple(f for f in (fix,) if f is not None)
                        + (Remediation(f"serve a drafter trained for {served} tokens, or accept {drafter_len}",
                                       "the served context is what the drafter can follow"),))]
    fixes = []
    if argv:
        fixes.append(Remediation(with_flag(argv, "--max-model-len", drafter_len),
                                 "serve no longer than the drafter's own context"))
    fixes.append(Remediation(f"set \"max_position_embeddings\": {served} in {quote(str(d.file))}",
                             "what vLLM PR #57964 does: size the drafter's rotary cache for the served length "
                             "(the drafter then runs past the context it was trained on)"))
    if runner == "v2":
        return [DRAFTER_CONTEXT_SHORTER_THAN_SERVED.finding(Status.FAIL,
                        f"{d.file}: the drafter's context {drafter_len} is shorter than the served {served}: on the V2 "
                        f"model runner ({why}) a request longer than {drafter_len} reads past the drafter's "
                        "rotary cache: far past it, the engine dies (CUDA illegal memory access); how far is up to "
                        "the requests, which the doctor cannot know",
                        detail=f"{DRAFTER_CONTEXT_V2.value}. {DRAFTER_CONTEXT_V2.note}. Sources: {DRAFTER_CONTEXT_V2.source}.",
                        evidence={"file": d.file, "served": served, "drafter": drafter_len, "runner": runner,
                                  "why": why, "read": where},
                        remediation=tuple(fixes))]
    return [DRAFTER_CONTEXT_SHORTER_THAN_SERVED.finding(Status.WARN,
                    f"{d.file}: the drafter's context {drafter_len} is shorter than the served {served}: "
                    + (f"the V1 model runner ({why}) stops drafting for longer requests, which then run without "
                       "DFlash" if runner == "v1" else f"{why}; on the V2 runner this kills the engine, on V1 "
                       "longer requests run without DFlash"),
                    detail=f"{DRAFTER_CONTEXT_V2.value}. Sources: {DRAFTER_CONTEXT_V2.source}.",
                    evidence={"file": d.file, "served": served, "drafter": drafter_len, "runner": runner, "why": why,
                              "read": where},
                    remediation=tuple(fixes))]


def _context_handling(vllm: VllmDflash | None) -> tuple[bool, bool]:
    """(raises a cache-only drafter's context, lowers the served length to a drafter's) in the installed
    vLLM: its own source (markers), else its version (DRAFTER_CONTEXT_RAISED), else the newest behaviour."""
    since = DRAFTER_CONTEXT_RAISED.value["since"]
    return has_behaviour(vllm, "draft_context_raised", since), has_behaviour(vllm, "limit_to_draft", since)


# -------------------------------------------------------------------------------------- 1: layer_types

LAYER_TYPES_KEY = '"layer_types": '


def _layer_types(d: DrafterView) -> list[Finding]:
    types = d.config.layer_types
    layers = d.config.int("num_hidden_layers")
    if types is None or layers is None:
        return []
    # Counted, never expanded: num_hidden_layers is read from config.json and may say 3e8, and the facts keep
    # only the first model_dir.CONFIG_LIST_MAX entries of a longer list (its count is in the config's "lists").
    count = list_length(d.drafter, "text.layer_types", types)
    if count != layers:
        shown = max(0, min(layers, FIX_LISTED))
        fixed = (types[:shown] + [types[-1] if types else "full_attention"] * max(0, shown - len(types)))[:shown]
        more = f" (and {layers - shown} more)" if layers > shown else ""
        # A num_hidden_layers the weights contradict (drafter.config-weights) is the cause: layer_types may be right.
        cause = d.blamed.get("num_hidden_layers", "")
        return [DRAFTER_LAYER_TYPES_LENGTH.finding(Status.FAIL,
                        f"{d.file}: layer_types has {count} entries for num_hidden_layers {layers}: transformers "
                        f"refuses the config (\"`num_hidden_layers` ({layers}) must be equal to the number of layer "
                        f"types ({count})\") and vLLM never builds the drafter",
                        detail=f"{LAYER_TYPES_LENGTH.value}. {LAYER_TYPES_LENGTH.source}.",
                        evidence={"file": d.file, "layer_types": types[:FIX_LISTED], "layer_types_count": count,
                                  "num_hidden_layers": layers},
                        remediation=() if cause else
                        (Remediation(f"set {quote(LAYER_TYPES_KEY + json.dumps(fixed))}{more} in {quote(str(d.file))}",
                                     "one entry per layer; take them from the publisher's config.json"),),
                        cause=cause)]
    target_types = d.target_config.layer_types
    sliding = value_count(d.drafter, "text.layer_types", types, SLIDING)
    if target_types is not None and sliding:
        window = d.dflash.value("swa_window_size", d.config.value("sliding_window"))
        d.ok.append(f"layer_types {sliding} sliding (window {window}) + "
                    f"{value_count(d.drafter, 'text.layer_types', types, 'full_attention')} full; target "
                    f"{value_count(d.target, 'text.layer_types', target_types, SLIDING)} sliding of "
                    f"{list_length(d.target, 'text.layer_types', target_types)}")
    return []


# ------------------------------------------------------------------------------ 3: auxiliary hidden states


def _target_interface(d: DrafterView) -> list[Finding]:
    eagle3 = pairing_facts(d.vllm).eagle3 or Eagle3Facts()
    interface = eagle3.interface
    archs = architectures(d.target)
    if not interface or not archs:
        return []
    judged = [(a, eagle3.archs.get(a) or Eagle3Arch()) for a in archs]
    if any(info.implements for _, info in judged):
        arch, info = next((a, i) for a, i in judged if i.implements)
        d.ok.append(f"target {arch} implements {interface}")
        return []
    lacking = [(a, i) for a, i in judged if i.implements is False]
    if lacking:
        arch, info = lacking[0]
        return [DRAFTER_TARGET_NO_AUX_HIDDEN_STATES.finding(Status.FAIL,
                        f"{d.label}'s {info.cls} ({info.file}) does not implement {interface}: DFlash "
                        f"cannot read the target's hidden states and the engine stops at start with \"Model does not "
                        f"support EAGLE3 interface\"",
                        detail=f"{EAGLE3_INTERFACE_RULE.value}. Read from {eagle3.checked_in} and the model "
                        f"class's bases. {EAGLE3_INTERFACE_RULE.source}.",
                        evidence={"architectures": archs, "class": info.cls, "file": info.file,
                                  "interface": interface},
                        remediation=(Remediation(d.installer.install("vllm"), f"a vLLM whose {arch} implements "
                                                 f"{interface} (or a target architecture that does)"),))]
    # an arch not in the facts was never looked up: only a looked-up, unregistered one counts
    unregistered = [a for a, i in judged if a in eagle3.archs and not i.registered]
    if unregistered and len(unregistered) == len(judged):
        return [DRAFTER_TARGET_NO_AUX_HIDDEN_STATES.finding(Status.WARN,
                        f"{d.label} has no model class for the target's architectures {archs}: it would serve it "
                        f"through the Transformers backend, which does not implement {interface}",
                        detail=EAGLE3_INTERFACE_RULE.value, evidence={"architectures": archs, "interface": interface})]
    return []


# ------------------------------------------------------------------------------------- 2: quantization


@frozen_dataclass(frozen=True)
class Quantization:
    """What a model's quantization_config says, reduced (see `quantization`)."""

    method: str
    bits: Any
    """As the config says it (bits, w_bit or a group's num_bits)."""
    strategy: Any
    """"block", "tensor" (FP8 without weight_block_size), a group's strategy, or None."""
    attention_quantized: bool
    ignored: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"method": self.method, "bits": self.bits, "strategy": self.strategy,
                "attention_quantized": self.attention_quantized, "ignored": self.ignored}


def quantization(model: Model | None) -> Quantization | None:
    """What a model's quantization_config says, reduced: method, bits, per-tensor or per-channel or block, and
    whether attention projections are quantized (None: cannot tell). None when it has none."""
    facts = model.config if model is not None else None
    if facts is None or not isinstance(facts.quantization_config, dict):
        return None
    config = facts.quantization
    method = str(config.value("quant_method") or config.value("format") or "unknown").lower()
    bits = config.value("bits", config.value("w_bit"))
    strategy = None
    if config.value("weight_block_size"):
        strategy = "block"
    groups = config.view("config_groups")
    ignored = [str(x) for x in (config.value("ignore") or config.value("modules_to_not_convert") or [])
               if isinstance(x, str)]
    targets: list[str] = []
    for name in groups:
        group = groups.view(name)
        if not group:
            continue
        weights = group.view("weights")
        strategy = strategy or weights.value("strategy")
        bits = bits if bits is not None else weights.value("num_bits")
        if weights.value("type") == "float" and weights.value("num_bits") == 8:
            method = "fp8" if method in ("compressed-tensors", "unknown") else method
        targets += [str(t) for t in group.list("targets") or [] if isinstance(t, str)]
    if method == "fp8" and strategy is None:
        strategy = "tensor"  # vLLM's fp8 config: per-tensor unless weight_block_size is given
    attention = not any(p in i for i in ignored for p in ("self_attn", *ATTENTION_PROJECTIONS))
    if targets and not any(t == "Linear" or any(p in t for p in ATTENTION_PROJECTIONS) for t in targets):
        attention = False
    return Quantization(method, bits, strategy, attention, ignored[:16])


def _quantization(d: DrafterView, ccs: list[str]) -> list[Finding]:
    drafter_q, target_q = quantization(d.drafter), quantization(d.target)
    findings: list[Finding] = []
    pairing = pairing_facts(d.vllm)
    if drafter_q is not None and drafter_q.attention_quantized:
        drafter_archs = [a for a in d.keys.list("architectures") or architectures(d.drafter) if isinstance(a, str)]
        raw, guarded = fused_kv_reads(pairing, drafter_archs)
        if raw:
            findings.append(DRAFTER_QUANTIZED_ATTENTION.finding(Status.FAIL,
                f"{d.file}: the drafter is quantized ({drafter_q.method}) including q/k/v, and {d.label}'s "
                f"{os.path.basename(raw[-1])} slices qkv_proj.weight raw for its fused context K/V, with no guard "
                "on the layers' quant method: the engine dies at the start-up profiling run (\"expected mat1 and mat2 "
                "to have the same dtype\" for FP8, an AttributeError or a shape error for packed 4-bit)",
                detail=f"{FUSED_KV_RAW_WEIGHT.source}.",
                evidence={"file": d.file, "quantization": drafter_q.to_json(), "vllm_files": raw},
                remediation=(Remediation("use the drafter's unquantized (BF16) checkpoint",
                                         "or quantize it with self_attn in the ignore list"),)))
        elif guarded:
            d.ok.append(f"quantized drafter ({drafter_q.method}): {d.label}'s {guarded} reads qkv_proj.weight raw "
                        "only for unquantized layers; q/k/v run through quant_method")
        elif raw is not None:
            d.ok.append(f"quantized drafter ({drafter_q.method}): {d.label} applies q/k/v through quant_method")
    if drafter_q is not None and drafter_q.method == "fp8" and drafter_q.strategy == "tensor":
        findings.append(DRAFTER_QUANTIZED_ACCEPTANCE.finding(Status.WARN,
                                f"{d.file}: a per-tensor FP8 drafter: its scales are dropped on the fused context-K/V "
                                "path and acceptance falls (0.0% in a reported case)",
                                detail=f"{QUANTIZED_PAIR_ACCEPTANCE.value}. Sources: {QUANTIZED_PAIR_ACCEPTANCE.source}.",
                                evidence={"file": d.file, "quantization": drafter_q.to_json()},
                                remediation=(Remediation("use the drafter's BF16 checkpoint", "the DFlash drafters "
                                                         "are small; quantizing them saves little"),)))
    if target_q is not None and target_q.method in ("awq", "awq_marlin"):
        findings.append(DRAFTER_QUANTIZED_ACCEPTANCE.finding(Status.WARN,
                                f"the target is AWQ-quantized ({target_q.bits}-bit): the drafter was trained on the "
                                "BF16 target's hidden states and reads shifted ones; acceptance falls, to near zero in "
                                "reports",
                                detail=f"{QUANTIZED_PAIR_ACCEPTANCE.value}. Sources: {QUANTIZED_PAIR_ACCEPTANCE.source}.",
                                evidence={"target_quantization": target_q.to_json()},
                                remediation=(Remediation("serve the BF16 or FP8 (block) target",
                                                         "measure acceptance before keeping the AWQ one"),)))
    findings += _fp8_on_gpu(d, drafter_q, target_q, ccs)
    return findings


def fused_kv_reads(pairing: VllmPairing, drafter_archs: list[str]) -> tuple[list[str] | None, str]:
    """The installed vLLM's files that would slice the drafter's `qkv_proj.weight` raw with no guard ([] none,
    None: cannot be told), and where a guard keeps it off ("qwen3_dflash.py line 567, under `if ...`"; "" none).

    The file is the one vLLM's registry names for the drafter's architecture as EAGLEConfig renames it
    (`DFlash{arch}` unless it starts or ends with DFlash); a report recorded before the guard was read
    (`fused_kv` absent) has only the list of files that slice it."""
    fused = pairing.fused_kv
    if fused is None:
        return pairing.fused_kv_raw_weight, ""
    names = [a if a.startswith("DFlash") or a.endswith("DFlash") else f"DFlash{a}" for a in drafter_archs]
    served = sorted({fused.archs[a] for a in names if a in fused.archs})
    if not served:  # an architecture the registry does not serve: the drafter check names it
        return [], ""
    if any(f in fused.unread for f in served):
        return None, ""
    raw = [f for f in served if any(s.guard is None for s in fused.files.get(f, []))]
    guards = [f"{os.path.basename(f)} line {s.line}, under `if {s.guard}`" for f in served
              for s in fused.files.get(f, []) if s.guard is not None]
    return raw, guards[0] if guards else ""


def _fp8_on_gpu(d: DrafterView, drafter_q: Quantization | None, target_q: Quantization | None,
                ccs: list[str]) -> list[Finding]:
    fp8 = [role for role, q in (("target", target_q), ("drafter", drafter_q)) if q and q.method == "fp8"]
    if not fp8:
        return []
    facts = pairing_facts(d.vllm).fp8 or Fp8Facts()
    native = facts.native_from or FP8_KERNELS.value["native_from"]
    minimum = facts.min_capability or FP8_KERNELS.value["min_capability"]
    marlin = facts.marlin_fallback
    findings: list[Finding] = []
    for cc in ccs:
        number = int(cc.replace(".", ""))
        sm = f"sm_{number}"
        if number < minimum:
            findings.append(DRAFTER_FP8_KERNEL.finding(Status.FAIL,
                                    f"{' and '.join(fp8)} FP8 on {sm}: {d.label}'s FP8 method needs compute capability "
                                    f"{minimum // 10}.{minimum % 10} or more and refuses to start here",
                                    detail=FP8_KERNELS.source, evidence={"cc": cc, "models": fp8, "min": minimum}))
        elif number < native:
            findings.append(DRAFTER_FP8_KERNEL.finding(Status.WARN,
                                    f"{' and '.join(fp8)} FP8 on {sm}: no FP8 tensor cores below sm_{native}; "
                                    + (f"{d.label} runs FP8 weights through its Marlin weight-only kernel (W8A16), "
                                       "slower than native FP8 and unlike what the pair was measured with"
                                       if marlin else f"{d.label}'s source names no fallback kernel"),
                                    detail=FP8_KERNELS.source, evidence={"cc": cc, "models": fp8, "native_from": native,
                                                                         "marlin_fallback": marlin}))
    return findings


# ------------------------------------------------------------------------------------- 4: made for


def _made_for(d: DrafterView) -> list[Finding]:
    card = d.drafter.dir.card if d.drafter.dir is not None else None
    named = [n for n in card.base_model if n] if card is not None else []
    mismatches = [i for i in ("drafter.layer-ids-invalid", "drafter.target-depth-mismatch", "drafter.fc-width",
                              "drafter.hidden-size-mismatch", "drafter.vocab-mismatch") if i in d.emitted]
    trained_for = d.keys.int("num_target_layers")
    if not named or card is None:
        return []
    target_name = os.path.basename(d.target.name.rstrip("/"))
    where = f"{card.file} base_model"
    if not mismatches:
        d.ok.append(f"made for {named[0]} ({where})")
        return []
    depth = d.target_config.value("num_hidden_layers")
    return [DRAFTER_MADE_FOR.finding(Status.FAIL,
                    f"this drafter was made for {named[0]} ({where}"
                    + (f", {trained_for} layers" if trained_for is not None else "")
                    + f"); the target {target_name or '?'} has {depth} layers and hidden size "
                    f"{d.target_config.value('hidden_size')}: vLLM fails late, at the first forward pass (\"mat1 and mat2 "
                    "shapes cannot be multiplied\", vLLM PR #48113) or silently drafts badly",
                    detail="The drafter's fc reads len(target_layer_ids) x hidden_size features recorded from the "
                    "target it was trained on; another target gives other layers and widths.",
                    evidence={"made_for": named, "from": where, "target": d.target.name,
                              "follows": mismatches},
                    remediation=(Remediation(f"serve {quote(str(named[0]))} as the target, or take the DFlash drafter "
                                             f"made for {quote(target_name) if target_name else 'this target'}",
                                             "a drafter fits one target"),),
                    cause=mismatches[0])]


# ------------------------------------------------------------------------------------ 6: weights files


def _weights_files(d: DrafterView) -> list[Finding]:
    weights = d.weights
    files = [f.file for f in weights.files]
    unlisted = list(weights.unlisted_files)
    shards = weights.index.shards if weights.index is not None else []
    consolidated = [f for f in files + unlisted if os.path.basename(f).startswith("consolidated")]
    path = d.path or "DRAFTER_DIR"
    if consolidated and len(consolidated) < len(set(files + unlisted)):
        others = sorted(set(files + unlisted) - set(consolidated))
        return [DRAFTER_WEIGHTS_FILE.finding(Status.FAIL,
                        f"{path}: {consolidated[0]} makes vLLM read the directory as Mistral format and load only "
                        f"consolidated*.safetensors; {', '.join(others[:4])} would be ignored",
                        detail=f"{WEIGHT_FILE_SELECTION.value}. {WEIGHT_FILE_SELECTION.source}.",
                        evidence={"consolidated": consolidated, "ignored": others},
                        remediation=(Remediation(f"mv -- {quote(f'{path}/{consolidated[0]}')} {quote(f'{path}/{consolidated[0]}.bak')}",
                                                 "keep one copy of the weights, not named consolidated*"),))]
    if unlisted and shards:
        missing = [s for s in shards if s not in files]
        fix = (f"mv -- {quote(f'{path}/{unlisted[0]}')} {quote(f'{path}/{missing[0]}')}"
               if len(unlisted) == 1 and len(missing) == 1 else f"rm -- {quote(f'{path}/model.safetensors.index.json')}")
        return [DRAFTER_WEIGHTS_FILE.finding(Status.FAIL,
                        f"{path}: model.safetensors.index.json does not list {', '.join(unlisted[:4])}: vLLM loads only "
                        "the files the index names" + (f" ({', '.join(missing[:4])}, which are not there)" if missing
                                                       else "") + ", so these weights are never read",
                        detail=f"{WEIGHT_FILE_SELECTION.value}. {WEIGHT_FILE_SELECTION.source}.",
                        evidence={"unlisted": unlisted, "index_shards": shards, "missing": missing},
                        remediation=(Remediation(fix, "the name the index gives it" if missing else
                                                 "without an index vLLM loads every *.safetensors"),))]
    if files and weights.layout != "sharded":
        d.ok.append(f"vLLM loads {', '.join(files[:3])} (any *.safetensors name; no renaming needed)")
    return []


# -------------------------------------------------------------------------- 4: RoPE layout taken from the target


def _in_releases(vllm: VllmDflash | None, marker: str, releases: tuple[str, ...]) -> bool:
    """Whether the installed vLLM has a behaviour of only some release lines: its source's marker, else its
    version's line ("0.28" for 0.28.x), else False (the newest release has none of these)."""
    found = source_marker(vllm, marker)
    if found is not None:
        return found
    version = version_tuple(str((vllm.version if vllm is not None else None) or ""))
    return bool(version) and any(version[:len(version_tuple(r))] == version_tuple(r) for r in releases)


def _rope_layout(d: DrafterView) -> list[Finding]:
    """vLLM 0.28.0 rotates the drafter's Q/K the target's way (ROPE_LAYOUT_FROM_TARGET); a drafter distilled the
    other way accepts about one token per step."""
    rule = ROPE_LAYOUT_FROM_TARGET.value
    if not _in_releases(d.vllm, "rope_layout_from_target", rule["releases"]):
        return []
    layouts = pairing_facts(d.vllm).rope_layouts
    target = next(((arch, layouts[arch]) for arch in architectures(d.target)
                   if arch in layouts and layouts[arch].layout), None)
    if target is None:
        return []
    arch, found = target
    declared = d.keys.value(rule["drafter_key"], True)
    drafter_layout = "interleaved" if declared is False else "neox"
    if found.layout == drafter_layout:
        d.ok.append(f"RoPE layout {drafter_layout}, as the target's")
        return []
    said = (f"says \"{rule['drafter_key']}\": false" if declared is False
            else f"does not set \"{rule['drafter_key']}\": false")
    return [DRAFTER_ROPE_LAYOUT_FROM_TARGET.finding(Status.FAIL,
                    f"{d.file} {said} (distilled {drafter_layout}), but {d.label} rotates the drafter's Q/K the way its "
                    f"target {arch} does ({found.layout}, {found.file}): acceptance collapses to about one "
                    "token per step, silently (vllm #53063: 1.03 against 7.78)",
                    detail=f"Source: {ROPE_LAYOUT_FROM_TARGET.source}.",
                    evidence={"file": d.file, "target_arch": arch, "target_layout": found.layout,
                              "target_file": found.file, "drafter_layout": drafter_layout,
                              "vllm": d.vllm.version if d.vllm else None},
                    remediation=(Remediation(d.installer.install(f"vllm>={rule['fixed_in']}"),
                                             f"vLLM {rule['fixed_in']} takes the layout from the drafter's own config "
                                             "(PR #54373)"),))]


# ------------------------------------------------------------------------- 5: padded target vocabulary on V2


def padded_vocab_v2(d: DrafterView) -> dict[str, Any] | None:
    """The facts of PADDED_VOCAB_V2 when they hold: a drafter whose vocabulary differs from the target's, without
    its own lm_head, on the V2 runner of a vLLM that then keeps the drafter's unloaded head; else None."""
    drafter_vocab = d.keys.int("draft_vocab_size")
    drafter_vocab = drafter_vocab if drafter_vocab is not None else d.config.int("vocab_size")
    target_vocab = d.target_config.int("vocab_size")
    if drafter_vocab is None or target_vocab is None or drafter_vocab == target_vocab \
            or "lm_head.weight" in d.tensors:
        return None
    if not _in_releases(d.vllm, "v2_lm_head_kept_for_vocab_remap", PADDED_VOCAB_V2.value["releases"]):
        return None
    runner, why = model_runner(d.vllm, architectures(d.target), d.serve.environ if d.serve is not None else None,
                               d.config.layer_types, d.target, d.serve.resolved if d.serve is not None else None)
    if runner != "v2":
        return None
    return {"drafter_vocab": drafter_vocab, "target_vocab": target_vocab, "runner": runner, "why": why}


def _padded_vocab(d: DrafterView) -> list[Finding]:
    facts = padded_vocab_v2(d)
    if facts is None:
        return []
    fixed = PADDED_VOCAB_V2.value["fixed_in"]
    padded = facts["target_vocab"] > facts["drafter_vocab"]
    return [DRAFTER_PADDED_VOCAB_V2.finding(Status.FAIL,
                    f"{d.file}: the target's vocabulary ({facts['target_vocab']}) "
                    + ("is padded past" if padded else "differs from") + f" the drafter's ({facts['drafter_vocab']}) "
                    f"and the drafter has no lm_head: on the V2 model runner ({facts['why']}) {d.label} keeps the "
                    "drafter's own, never-loaded lm_head instead of the target's, and accepts nothing (0%)",
                    detail=f"Source: {PADDED_VOCAB_V2.source}.",
                    evidence={"file": d.file, **facts},
                    remediation=(Remediation(d.installer.install(f"vllm>={fixed}"),
                                             f"vLLM {fixed} shares the target's lm_head on V2 too (PR #46435)"),
                                 *v1_runner_fix(d.vllm, "serve on the V1 runner, which shares the target's lm_head")))]


def v1_runner_fix(vllm: VllmDflash | None, why: str) -> tuple[Remediation, ...]:
    """`export VLLM_USE_V2_MODEL_RUNNER=0`, where the installed release takes it: never on one whose own
    validate_environ refuses it (0.34.0: "Model Runner V1 has been removed"), read from its source."""
    rules = vllm.environ if vllm is not None else None
    if rules is not None and rules.refuses("VLLM_USE_V2_MODEL_RUNNER", "0"):
        return ()
    return (Remediation("export VLLM_USE_V2_MODEL_RUNNER=0", why),)
