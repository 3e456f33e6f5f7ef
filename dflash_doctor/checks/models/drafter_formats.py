"""Rules of the `drafter` check for DFlash-format drafts that the installed vLLM serves otherwise than they were
trained: a Domino draft's GRU head, which no vLLM release runs, and a draft whose causality (JetSpec drafts are
causal) vLLM resolves otherwise than the draft states it. Each reads the drafter's own config.json and
safetensors headers and what the installed vLLM's source says (facts.serve.vllm_pairing: `domino_runtime`,
`causality`); the hard-coded rest is in knowledge.dflash_formats."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from dflash_doctor.checks.models.codes import DRAFTER_CAUSALITY, DRAFTER_DOMINO_HEAD
from dflash_doctor.checks.models.drafter_pairing import pairing_facts
from dflash_doctor.checks.models.model_views import DrafterView
from dflash_doctor.checks.remedy import quote
from dflash_doctor.facts.models.models_shapes import ConfigView
from dflash_doctor.knowledge.dflash_formats import CAUSALITY_KEYS, DOMINO_HEAD, JETSPEC_CAUSAL
from dflash_doctor.model import Finding, Remediation, Status

__all__ = ["format_rules", "resolved_causality"]

SLIDING = "sliding_attention"
# A config may say num_hidden_layers 3e8: the layers resolved are counted up to this, never expanded past it.
LAYERS_RESOLVED = 256
# Tensor names a finding lists, and config strings the JetSpec marker looks through.
NAMES_LISTED = 8
STRINGS_READ = 512


def format_rules(d: DrafterView) -> tuple[Callable[[], list[Finding]], ...]:
    return (lambda: _domino(d), lambda: _causality(d))


# ------------------------------------------------------------------------------------------------ Domino


def domino_tensors(names: list[str]) -> list[str]:
    """The tensors of a Domino head: names whose module (after an optional `model.`) is one of its modules."""
    heads = set(DOMINO_HEAD.value)
    return [n for n in names if n.removeprefix("model.").split(".", 1)[0] in heads]


def _domino(d: DrafterView) -> list[Finding]:
    found = domino_tensors(sorted(d.tensors))
    projector = d.keys.view("dflash_config").value("projector_type")
    if not found and projector != "domino":
        return []
    runtime = pairing_facts(d.vllm).domino_runtime
    if runtime:
        d.ok.append(f"Domino head: {d.label}'s {runtime[0]} names prefix_gru")
        return []
    listed = ", ".join(found[:NAMES_LISTED]) + (f" and {len(found) - NAMES_LISTED} more" if len(found) > NAMES_LISTED
                                                else "")
    what = (f"a Domino draft: its weights carry the GRU correction head ({listed})" if found else
            "a Domino draft (dflash_config.projector_type \"domino\"), though its weights show no head tensors")
    release = d.label if runtime is not None else "vLLM (its source was not read)"
    first = found[0].removeprefix("model.").split(".", 1)[0] if found else DOMINO_HEAD.value[0]
    return [DRAFTER_DOMINO_HEAD.finding(Status.FAIL if found and runtime is not None else Status.WARN,
        f"{d.file}: {what}; {release} has no runtime for it: its DFlash loader has no module for the head's tensors "
        f"and stops (\"There is no module or parameter named '{first}'\", a KeyError before 0.26), and without them "
        "it serves the bare backbone, not the draft the head was trained to correct",
        detail=f"{DOMINO_HEAD.source}.",
        evidence={"file": d.file, "tensors": found[:64], "tensor_count": len(found), "projector_type": projector,
                  "vllm_files_naming_prefix_gru": runtime},
        remediation=(Remediation("serve the plain DFlash draft of this target (no Domino head)",
                                 "vLLM runs DFlash drafts; the Domino head runs in SGLang's DFlash V2 (sgl-project/sglang "
                                 "#36899)"),))]


# --------------------------------------------------------------------------------------------- causality


def resolved_causality(keys: list[str], config: ConfigView, layers: int,
                       layer_types: list[Any] | None = None) -> tuple[list[bool], str]:
    """Each layer's causality as vLLM resolves it, reading only `keys` (those the installed release reads, in
    knowledge.dflash_formats.CAUSALITY_KEYS' precedence), and the key that decided ("" none: non-causal).
    `config` holds is_causal and dflash_config, `layer_types` the text config's list (else config's own).
    Truthiness as vLLM's `bool(...)`: a JSON string "false" is causal."""
    count = max(0, min(layers, LAYERS_RESOLVED))
    for key in CAUSALITY_KEYS.value:
        if key not in keys:
            continue
        if key == "is_causal" and config.value("is_causal") is not None:
            return [bool(config.value("is_causal"))] * count, key
        if key == "dflash_config.causal" and config.view("dflash_config").value("causal") is not None:
            return [bool(config.view("dflash_config").value("causal"))] * count, key
        if key == "layer_types":
            types = layer_types if layer_types is not None else config.list("layer_types")
            if types:
                return [i < len(types) and types[i] == SLIDING for i in range(count)], key
    return [False] * count, ""


def _stated(config: ConfigView) -> list[tuple[str, Any]]:
    """The causality the draft states: its is_causal and dflash_config.causal, where set."""
    stated = [("is_causal", config.value("is_causal")),
              ("dflash_config.causal", config.view("dflash_config").value("causal"))]
    return [(key, value) for key, value in stated if value is not None]


def _names_jetspec(config: ConfigView) -> str:
    """The first string of the config (top level, one level down, lists of strings) that names JetSpec."""
    seen = 0
    pending: list[Any] = [config.raw()]
    while pending and seen < STRINGS_READ:
        value = pending.pop(0)
        if isinstance(value, dict):
            pending += [k for k in list(value)[:64]] + list(value.values())[:64]
        elif isinstance(value, list):
            pending += value[:64]
        elif isinstance(value, str):
            seen += 1
            if JETSPEC_CAUSAL.value in value.lower():
                return value[:120]
    return ""


def _describe(layers: list[bool]) -> str:
    causal = sum(layers)
    if causal == len(layers):
        return "every layer causal"
    return "every layer non-causal" if not causal else f"{causal} of {len(layers)} layers causal"


def _causality(d: DrafterView) -> list[Finding]:
    facts = pairing_facts(d.vllm).causality
    if facts is None or facts.keys is None:
        return []
    config = d.keys
    types = d.config.list("layer_types")
    layers = d.config.int("num_hidden_layers") or len(types or []) or 1
    resolved, decided = resolved_causality(facts.keys, config, layers, types)
    where = f"{facts.file} {facts.function}" if facts.file else "no causality key (every DFlash layer non-causal)"
    by = f"decided by {decided}" if decided else "no key it reads is set: non-causal"
    stated = _stated(config)
    setting = quote('"dflash_config": {"causal": true}')
    fix = Remediation(f"set {setting} in {quote(str(d.file))} and remove a "
                      "top-level is_causal that says otherwise",
                      "only for a draft trained causal (JetSpec); a DFlash draft is trained non-causal")
    differing = [(key, value) for key, value in stated if any(bool(value) != r for r in resolved)]
    if differing:
        key, value = differing[0]
        unread = [k for k, _ in stated if k not in facts.keys]
        why = (f"it does not read {', '.join(unread)}" if unread else
               f"it reads {decided} first" if decided and decided != key else by)
        return [DRAFTER_CAUSALITY.finding(Status.WARN,
            f"{d.file} states {key} {json.dumps(value)}, but {d.label} resolves {_describe(resolved)} ({why}; "
            f"read from {where}): the draft is served with other attention than it was trained with, and "
            "acceptance falls",
            detail=f"{CAUSALITY_KEYS.source}. {JETSPEC_CAUSAL.source}. {JETSPEC_CAUSAL.note}",
            evidence={"file": d.file, "stated": {k: v for k, v in stated}, "keys_read": facts.keys,
                      "decided_by": decided or None, "resolved_causal_layers": sum(resolved), "layers": len(resolved)},
            remediation=(fix,))]
    named = _names_jetspec(config) or _names_jetspec(d.config)
    if named and not all(resolved):
        return [DRAFTER_CAUSALITY.finding(Status.WARN,
            f"{d.file} names JetSpec ({named!r}), a draft trained with causal in-block attention, but states no "
            f"causality and {d.label} resolves {_describe(resolved)} ({by}; read from {where})",
            detail=f"{JETSPEC_CAUSAL.source}. {JETSPEC_CAUSAL.note}",
            evidence={"file": d.file, "named": named, "keys_read": facts.keys, "layers": len(resolved)},
            remediation=(fix,))]
    if stated:
        d.ok.append(f"causality: {d.label} resolves {_describe(resolved)}, as {stated[0][0]} states")
    return []
