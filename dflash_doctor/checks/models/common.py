"""What the model, drafter and serve checks share: reading the model facts, the serving GPUs, and the
installer for remediation commands. Paths come from Context.options["model"] / ["drafter"] or the serve
command; with neither, each check says it was skipped."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypeGuard

from dflash_doctor.check import Facts
from dflash_doctor.facts.envfacts import version_tuple
from dflash_doctor.facts.models_shapes import Models
from dflash_doctor.facts.nvml_shapes import Gpu
from dflash_doctor.facts.serve_shapes import ServeArgs, ServeAssumptions, VllmDflash
from dflash_doctor.knowledge.archs import compute_capability
from dflash_doctor.knowledge.dflash import MAX_LEN_DERIVATION
from dflash_doctor.knowledge.dflash_reports import SPECULATORS_DFLASH
from dflash_doctor.model import CheckResult, Finding, Status
from dflash_doctor.units import GIB

__all__ = ["derived_max_len", "gpu_view", "list_length", "listed", "long_list", "text_config", "value_count",
           "version_tuple"]


SLIDING = "sliding_attention"
FLOAT_DTYPES = {"F16": "float16", "BF16": "bfloat16", "F32": "float32"}
MAX_LISTED = 12


# ------------------------------------------------------------------------------------------- helpers



def text_config(model: Mapping[str, Any] | None) -> dict[str, Any]:
    config = ((model or {}).get("dir") or {}).get("config") or {}
    return dict(config.get("text") or {})


def long_list(model: Mapping[str, Any] | None, where: str) -> dict[str, Any] | None:
    """The facts' summary of a config.json list longer than the facts keep (model_dir.list_summary: "count",
    "min", "max", "increasing", "repeats", "values"), by its place: "text.layer_types",
    "drafter.dflash_config.target_layer_ids"; None when the list is kept whole."""
    lists = (((model or {}).get("dir") or {}).get("config") or {}).get("lists")
    found = lists.get(where) if isinstance(lists, Mapping) else None
    return dict(found) if isinstance(found, Mapping) else None


def list_length(model: Mapping[str, Any] | None, where: str, kept: list[Any]) -> int:
    """How many items the config's list had (the kept part is cut at model_dir.CONFIG_LIST_MAX)."""
    summary = long_list(model, where)
    count = summary.get("count") if summary else None
    return count if _is_int(count) else len(kept)


def value_count(model: Mapping[str, Any] | None, where: str, kept: list[Any], value: str) -> int:
    """How often `value` occurs in the config's whole list (kept part, or the summary's counts)."""
    summary = long_list(model, where)
    if summary and isinstance(summary.get("values"), Mapping):
        n = summary["values"].get(value)
        return n if _is_int(n) else 0
    return kept.count(value)


def listed(values: list[Any], count: int | None = None, limit: int = 8) -> str:
    """`[1, 2, 3]`, or the first `limit` items and how many there are: `[0, 1, ...] (7000000 in all)`."""
    count = len(values) if count is None else count
    if count <= limit and len(values) == count:
        return str(values)
    return f"[{', '.join(repr(v) for v in values[:limit])}, ...] ({count} in all)"


def architectures(model: Mapping[str, Any] | None) -> list[str]:
    """The names in a model's config.json "architectures" list; [] when it is absent or not a list (a
    hand-written config may hold anything there)."""
    archs = (((model or {}).get("dir") or {}).get("config") or {}).get("architectures")
    return [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else []


def _config_file(model: Mapping[str, Any]) -> str:
    config = ((model.get("dir") or {}).get("config") or {})
    return str(config.get("file") or f"{(model.get('resolved') or {}).get('path') or model.get('name')}/config.json")


def _drafter_keys(model: Mapping[str, Any], vllm: VllmDflash | None = None) -> dict[str, Any]:
    """The drafter's config keys as vLLM sees them: a speculators-format config converted as vLLM converts it."""
    return speculators_keys(dict((((model.get("dir") or {}).get("config") or {}).get("drafter")) or {}), vllm)


def has_behaviour(vllm: VllmDflash | None, marker: str, since: str) -> bool:
    """Whether the installed vLLM behaves as a release from `since` on: its own source has `marker`, else its
    version is at least `since`; with no vLLM at all, the newest verified behaviour."""
    found = _marker(vllm, marker)
    if found is not None:
        return found
    version = version_tuple(str((vllm.version if vllm is not None else None) or ""))
    return not version or version >= version_tuple(since)


def speculators_keys(keys: Mapping[str, Any], vllm: VllmDflash | None) -> dict[str, Any]:
    """A speculators-format DFlash drafter's keys (speculators_model_type dflash/dflash2, the dims under
    transformer_layer_config, aux_hidden_state_layer_ids, a top-level mask_token_id) as the installed vLLM turns
    them into a DFlash config (knowledge.dflash_reports.SPECULATORS_DFLASH); any other config as it is."""
    rule = SPECULATORS_DFLASH.value
    kind = keys.get("speculators_model_type")
    if not isinstance(kind, str) or kind not in rule["types"]:
        return dict(keys)
    out = dict(keys)
    aux = keys.get("aux_hidden_state_layer_ids")
    out["architectures"] = [rule["types"][kind]]
    out["draft_vocab_size"] = keys.get("draft_vocab_size")
    out["eagle_aux_hidden_state_layer_ids"] = aux
    minus_one = has_behaviour(vllm, "speculators_aux_minus_one", rule["aux_minus_one_since"])
    ids = [i - 1 for i in aux] if minus_one and isinstance(aux, list) and all(_is_int(i) for i in aux) else aux
    dflash: dict[str, Any] = {"mask_token_id": keys.get("mask_token_id"), "target_layer_ids": ids}
    if has_behaviour(vllm, "speculators_sample_from_anchor", rule["optional_keys"]["sample_from_anchor"][1]):
        dflash["sample_from_anchor"] = keys.get("sample_from_anchor", False)
    if has_behaviour(vllm, "speculators_causal", rule["optional_keys"]["causal"][1]):
        dflash["causal"] = not keys.get("sliding_window_non_causal", True)
    if kind == "dflash2":
        dflash.update({k: keys[k] for k in rule["dflash2_keys"] if keys.get(k) is not None})
    out["dflash_config"] = dflash
    out["speculators_format"] = kind
    return out


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _vllm_label(vllm: VllmDflash | None) -> str:
    if vllm is None or not vllm.installed:
        return "vLLM (not installed in the target)"
    return f"vLLM {vllm.version or '?'}"


def _marker(vllm: VllmDflash | None, name: str) -> bool | None:
    """Whether the installed vLLM's source has this marker; None when there is no source to read, or when the
    facts were recorded before the doctor looked for this marker (a saved report judged again)."""
    marker = vllm.markers.get(name) if vllm is not None and vllm.root else None
    if marker is None or not marker.readable:
        return None
    return marker.found


def _head_dim(text: Mapping[str, Any]) -> int | None:
    head_dim, hidden, heads = text.get("head_dim"), text.get("hidden_size"), text.get("num_attention_heads")
    if _is_int(head_dim):
        return int(head_dim)
    if _is_int(hidden) and _is_int(heads) and heads > 0:
        return int(hidden) // int(heads)
    return None


def _spec_value(serve: ServeArgs | None) -> dict[str, Any]:
    return serve.speculative_config.keys if serve is not None else {}


def _not_given(check_id: str, check_title: str, what: str) -> list[Finding]:
    return [Finding(
        f"{check_id}.not-given", Status.SKIP, f"{check_title}: skipped, no {what} given",
        detail="Give the directories with `dflash-doctor serve -- vllm serve MODEL --speculative-config "
        "'{\"method\": \"dflash\", \"model\": DRAFTER, ...}'` (or the model/drafter options), and the model checks "
        "read their config.json and safetensors headers.",
    )]


def _skip_if_broken(facts: Facts, title: str) -> list[Finding] | None:
    models = facts.section(Models)
    prior: CheckResult | None = facts.prior.get("model-files")
    # The model-files findings that stop judgement; the first is what this skip follows from.
    broken = [f for f in (prior.findings if prior else ()) if f.status is Status.FAIL
              and f.evidence.get("blocks_judgement")]
    cause = broken[0].id if broken else ""
    for role, described in (("drafter", models.drafter), ("target", models.target)):
        model = described or {}
        if not (model.get("dir") or {}).get("config"):
            return [Finding("drafter.not-judged", Status.SKIP,
                            f"{title}: not judged, the {role} {model.get('name')!r} could not be read (see Model files)",
                            detail="The drafter is compared with its target from both config.json files and the "
                            "drafter's safetensors headers; without them nothing can be compared.", cause=cause)]
    if not broken:
        return None
    return [Finding("drafter.not-judged", Status.SKIP,
                    f"{title}: not judged, the model files are broken ({broken[0].title})",
                    detail="Fix the model-files findings first; the drafter cannot be compared with its target "
                    "without a readable config.json and weights.",
                    evidence={"blocking": [f.id for f in broken]}, cause=cause)]


def gpu_view(facts: Facts) -> dict[str, Any]:
    """The GPUs vLLM will see: {"available", "why", "devices" (visible, in CUDA order), "ccs", "source"}.

    --gpus/--gpu-memory (a CI user's stand-in for the serving GPUs) win; else the NVML facts (section "gpu")
    filtered by CUDA_VISIBLE_DEVICES; else only the compute capabilities of --target-arch, without count or
    memory ("available" False)."""
    serve = facts.optional_section(ServeArgs)
    assume = serve.assume if serve is not None else ServeAssumptions()
    ccs: list[str] = []
    for arch in assume.target_archs:
        try:
            major, minor = compute_capability(arch)
        except ValueError:
            continue
        ccs.append(f"{major}.{minor}")
    raw = facts.raw("gpu")
    gpu = facts.optional_section(Gpu)
    nvml_devices: list[Mapping[str, Any]] | None = None
    view: dict[str, Any] = {"available": False, "why": "no GPU facts were collected", "devices": [], "source": None}
    if isinstance(raw, Mapping) and "_error" in raw:
        view["why"] = f"the GPU facts could not be collected: {raw['_error']}"
    elif gpu is None:
        pass  # not collected, or not of its shape: no GPU facts
    elif gpu.skipped:
        view["why"] = f"GPUs not probed ({gpu.skipped}); pass --gpus N --gpu-memory GIB for the serving GPUs"
    elif gpu.nvml is None or not gpu.nvml.ok:
        error = gpu.nvml.error if gpu.nvml is not None else None
        view["why"] = (f"NVML is not usable here ({(error.name or error.kind) if error else None}: "
                       f"{error.message if error else None})")
    else:
        from dflash_doctor.checks.gpu.common import resolve_visible  # type: ignore[import-not-found,unused-ignore]

        visible = resolve_visible(gpu.environ.get("CUDA_VISIBLE_DEVICES"), gpu.devices)
        by_index = {d.index: d for d in gpu.devices}
        nvml_devices = [by_index[i].to_json() for i in visible.gpus if i in by_index]
        view = {"available": True, "why": None, "devices": nvml_devices, "source": "nvml",
                "cuda_visible_devices": visible.value}
    count, memory = assume.gpus, assume.gpu_memory_gib
    if count or memory:
        n = int(count) if count else len(nvml_devices or []) or 1
        cc = [int(p) for p in ccs[0].split(".")] if ccs else (
            (nvml_devices or [{}])[0].get("compute_capability") if nvml_devices else None)
        size = int(float(memory) * GIB) if memory else None
        view = {"available": True, "why": None, "source": "assumed",
                "assumed": {"gpus": count, "gpu_memory_gib": memory, "target_archs": assume.target_archs},
                "devices": [{"index": i, "name": "assumed GPU", "compute_capability": cc,
                             "memory": {"total": size, "used": 0, "free": size, "reserved": 0} if size else None,
                             "processes": []} for i in range(n)]}
    view["ccs"] = sorted({f"{d['compute_capability'][0]}.{d['compute_capability'][1]}"
                          for d in view["devices"] if d.get("compute_capability")}) or ccs
    return view


def _dflash_config(keys: Mapping[str, Any]) -> dict[str, Any]:
    """vLLM merges eagle_config, then dflash_config over it (qwen3_dflash.py DFlashQwen3Model.__init__)."""
    merged: dict[str, Any] = {}
    for key in ("eagle_config", "dflash_config"):
        value = keys.get(key)
        if isinstance(value, dict):
            merged.update(value)
    return merged


def _length(value: object) -> TypeGuard[float]:
    """A usable length from a config: a positive number a float holds exactly (a hand-written config may say
    10**400, which no float holds)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 2**53


def yarn_already_scaled(vllm: VllmDflash | None) -> bool:
    """Whether the installed vLLM takes a YaRN model's max_position_embeddings as already scaled: its own
    source says so (marker), else its version; with no vLLM at all, the newest verified behaviour."""
    return has_behaviour(vllm, "yarn_already_scaled", MAX_LEN_DERIVATION.value["yarn_already_scaled_since"])


def _rope_entries(text: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    rope = text.get("rope_parameters") or text.get("rope_scaling")
    if not isinstance(rope, dict) or not rope:
        return []
    if set(rope) <= set(MAX_LEN_DERIVATION.value["layer_types"]):
        return [entry for entry in rope.values() if isinstance(entry, dict) and entry]
    return [rope]


def derived_max_len(model: Mapping[str, Any] | None, vllm: VllmDflash | None) -> tuple[float | None, str]:
    """The length vLLM derives from a model's config (knowledge.dflash.MAX_LEN_DERIVATION, per release):
    the smallest length key, capped by tokenizer_config's model_max_length, times the RoPE factor."""
    rule = MAX_LEN_DERIVATION.value
    text = text_config(model)
    base, key = math.inf, ""
    for name in rule["length_keys"]:
        value = text.get(name)
        if _length(value) and value < base:
            base, key = float(value), f"{name}={value}"
    if _length(text.get("model_max_length")):
        base, key = float(text["model_max_length"]), f"model_max_length={text['model_max_length']}"
    if base == math.inf:
        return None, "no max_position_embeddings"
    tokenizer = (model or {}).get("tokenizer_config") or {}
    limit = tokenizer.get("model_max_length") if isinstance(tokenizer, Mapping) else None
    if _length(limit) and limit < base:
        base, key = float(limit), f"tokenizer_config model_max_length={limit}"
    model_type = ((model or {}).get("dir") or {}).get("config") or {}
    model_type = model_type.get("model_type") if isinstance(model_type, Mapping) else None
    entries = _rope_entries(text)
    if entries and rule["already_scaled_model_type"] not in str(model_type or text.get("model_type") or ""):
        excluded = tuple(rule["unscaled_rope_types"])
        scaled = yarn_already_scaled(vllm)
        if scaled:
            excluded += tuple(rule["already_scaled_rope_types"])
        factor: Any = 1.0
        kind = None
        for entry in entries:
            kind = entry.get("rope_type") or entry.get("type")
            if kind in excluded:
                continue
            factor = entry.get("factor", factor)
            if kind == "yarn" and not scaled:
                original = entry.get("original_max_position_embeddings")
                if not _length(original):
                    return None, "a yarn rope entry without original_max_position_embeddings"
                base, key = float(original), f"original_max_position_embeddings={original}"
        if factor is None:
            factor = 1.0
        if not isinstance(factor, (int, float)) or isinstance(factor, bool) or not math.isfinite(factor):
            return None, f"{key} with a RoPE factor {factor!r} that is no number"
        if factor != 1.0:
            base, key = base * float(factor), f"{key} x {kind} factor {factor}"
    if not math.isfinite(base) or base >= 2**63:
        return None, f"{key} is not a usable length"
    return base, key


def _derived_max_len(model: Mapping[str, Any] | None, vllm: VllmDflash | None = None) -> tuple[int | None, str]:
    """The length vLLM serves a model at when --max-model-len is not given (a longrope model: its
    original_max_position_embeddings), and what it came from."""
    derived, key = derived_max_len(model, vllm)
    if derived is None:
        return None, key
    if any((e.get("rope_type") or e.get("type")) == "longrope" for e in _rope_entries(text_config(model))):
        original = text_config(model).get("original_max_position_embeddings")
        if _length(original):
            return int(original), f"original_max_position_embeddings={original} (longrope)"
    return int(derived), key
