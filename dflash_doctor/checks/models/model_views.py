"""What the model, drafter and serve checks share: reading the model facts, the serving GPUs, and the
installer for remediation commands. Paths come from Context.options["model"] / ["drafter"] or the serve
command; with neither, each check says it was skipped."""

from __future__ import annotations

import math
from dataclasses import field, replace
from typing import Any, TypeGuard

from dflash_doctor.check import Facts
from dflash_doctor.checks.gpu.visible_devices import resolve_visible
from dflash_doctor.checks.models.codes import (
    DRAFTER_NOT_JUDGED,
)
from dflash_doctor.checks.remedy import Installer
from dflash_doctor.codes import Code
from dflash_doctor.facts.gpu.nvml_shapes import Gpu, GpuDevice, GpuMemory
from dflash_doctor.facts.models.models_shapes import (
    ConfigView,
    ListSummary,
    Model,
    Models,
    Tensor,
    Weights,
    is_int,
)
from dflash_doctor.facts.python.envfacts import version_tuple
from dflash_doctor.facts.serve.serve_shapes import (
    MAX_GPU_MEMORY_GIB,
    MAX_GPUS,
    ServeArgs,
    ServeAssumptions,
    VllmDflash,
)
from dflash_doctor.facts.shape import SectionFailure
from dflash_doctor.knowledge.archs import compute_capability
from dflash_doctor.knowledge.dflash import MAX_LEN_DERIVATION
from dflash_doctor.knowledge.dflash_reports import SPECULATORS_DFLASH
from dflash_doctor.model import CheckResult, Finding, Status
from dflash_doctor.shape import frozen_dataclass
from dflash_doctor.units import GIB

__all__ = [
    "DrafterView",
    "GpuView",
    "architectures",
    "derived_max_len",
    "dflash_config",
    "drafter_keys",
    "drafter_view",
    "gpu_view",
    "has_behaviour",
    "is_int",
    "list_length",
    "listed",
    "long_list",
    "not_given",
    "rope_entries",
    "served_max_len",
    "skip_if_broken",
    "source_marker",
    "spec_value",
    "speculators_keys",
    "text_config",
    "usable_length",
    "value_count",
    "version_tuple",
    "vllm_label",
    "yarn_already_scaled",
]


SLIDING = "sliding_attention"
FLOAT_DTYPES = {"F16": "float16", "BF16": "bfloat16", "F32": "float32"}
MAX_LISTED = 12


# ------------------------------------------------------------------------------------------- helpers



def text_config(model: Model | None) -> ConfigView:
    """The model's text config (empty without a readable config.json)."""
    return model.text if model is not None else ConfigView()


def long_list(model: Model | None, where: str) -> ListSummary | None:
    """The facts' summary of a config.json list longer than the facts keep (model_dir.list_summary), by its
    place: "text.layer_types", "drafter.dflash_config.target_layer_ids"; None when the list is kept whole."""
    config = model.config if model is not None else None
    return config.long_list(where) if config is not None else None


def list_length(model: Model | None, where: str, kept: list[Any]) -> int:
    """How many items the config's list had (the kept part is cut at model_dir.CONFIG_LIST_MAX)."""
    summary = long_list(model, where)
    return summary.count if summary is not None else len(kept)


def value_count(model: Model | None, where: str, kept: list[Any], value: str) -> int:
    """How often `value` occurs in the config's whole list (kept part, or the summary's counts)."""
    config = model.config if model is not None else None
    return config.value_count(where, kept, value) if config is not None else kept.count(value)


def listed(values: list[Any], count: int | None = None, limit: int = 8) -> str:
    """`[1, 2, 3]`, or the first `limit` items and how many there are: `[0, 1, ...] (7000000 in all)`."""
    count = len(values) if count is None else count
    if count <= limit and len(values) == count:
        return str(values)
    return f"[{', '.join(repr(v) for v in values[:limit])}, ...] ({count} in all)"


def architectures(model: Model | None) -> list[str]:
    """The names in a model's config.json "architectures" list; [] when it is absent or not a list (a
    hand-written config may hold anything there)."""
    return model.architectures if model is not None else []


def drafter_keys(model: Model, vllm: VllmDflash | None = None) -> ConfigView:
    """The drafter's config keys as vLLM sees them: a speculators-format config converted as vLLM converts it."""
    config = model.config
    return ConfigView(speculators_keys(config.drafter if config is not None else ConfigView(), vllm))


def has_behaviour(vllm: VllmDflash | None, marker: str, since: str) -> bool:
    """Whether the installed vLLM behaves as a release from `since` on: its own source has `marker`, else its
    version is at least `since`; with no vLLM at all, the newest verified behaviour."""
    found = source_marker(vllm, marker)
    if found is not None:
        return found
    version = version_tuple(str((vllm.version if vllm is not None else None) or ""))
    return not version or version >= version_tuple(since)


def speculators_keys(keys: ConfigView, vllm: VllmDflash | None) -> dict[str, Any]:
    """A speculators-format DFlash drafter's keys (speculators_model_type dflash/dflash2, the dims under
    transformer_layer_config, aux_hidden_state_layer_ids, a top-level mask_token_id) as the installed vLLM turns
    them into a DFlash config (knowledge.dflash_reports.SPECULATORS_DFLASH); any other config as it is."""
    rule = SPECULATORS_DFLASH.value
    kind = keys.str("speculators_model_type")
    if kind is None or kind not in rule["types"]:
        return keys.raw()
    out = keys.raw()
    aux = keys.value("aux_hidden_state_layer_ids")
    out["architectures"] = [rule["types"][kind]]
    out["draft_vocab_size"] = keys.value("draft_vocab_size")
    out["eagle_aux_hidden_state_layer_ids"] = aux
    minus_one = has_behaviour(vllm, "speculators_aux_minus_one", rule["aux_minus_one_since"])
    ids = [i - 1 for i in aux] if minus_one and isinstance(aux, list) and all(is_int(i) for i in aux) else aux
    dflash: dict[str, Any] = {"mask_token_id": keys.value("mask_token_id"), "target_layer_ids": ids}
    if has_behaviour(vllm, "speculators_sample_from_anchor", rule["optional_keys"]["sample_from_anchor"][1]):
        dflash["sample_from_anchor"] = keys.value("sample_from_anchor", False)
    if has_behaviour(vllm, "speculators_causal", rule["optional_keys"]["causal"][1]):
        dflash["causal"] = not keys.value("sliding_window_non_causal", True)
    if kind == "dflash2":
        dflash.update({k: keys.value(k) for k in rule["dflash2_keys"] if keys.value(k) is not None})
    out["dflash_config"] = dflash
    out["speculators_format"] = kind
    return out


def vllm_label(vllm: VllmDflash | None) -> str:
    if vllm is None or not vllm.installed:
        return "vLLM (not installed in the target)"
    return f"vLLM {vllm.version or '?'}"


def source_marker(vllm: VllmDflash | None, name: str) -> bool | None:
    """Whether the installed vLLM's source has this marker; None when there is no source to read, or when the
    facts were recorded before the doctor looked for this marker (a saved report judged again)."""
    marker = vllm.markers.get(name) if vllm is not None and vllm.root else None
    if marker is None or not marker.readable:
        return None
    return marker.found


def spec_value(serve: ServeArgs | None) -> dict[str, Any]:
    return serve.speculative_config.keys if serve is not None else {}


def not_given(code: Code, check_title: str, what: str) -> list[Finding]:
    """The check's own "nothing given" finding (`code`: FILES_NOT_GIVEN, NOT_GIVEN, ATTENTION_NOT_GIVEN)."""
    return [code.finding(
        Status.SKIP, f"{check_title}: skipped, no {what} given",
        detail="Give the directories with `dflash-doctor serve -- vllm serve MODEL --speculative-config "
        "'{\"method\": \"dflash\", \"model\": DRAFTER, ...}'` (or the model/drafter options), and the model checks "
        "read their config.json and safetensors headers.",
    )]


def skip_if_broken(facts: Facts, title: str) -> list[Finding] | None:
    models = facts.section(Models)
    prior: CheckResult | None = facts.prior.get("model-files")
    # The model-files findings that stop judgement; the first is what this skip follows from.
    broken = [f for f in (prior.findings if prior else ()) if f.status is Status.FAIL
              and f.evidence.get("blocks_judgement")]
    cause = broken[0].id if broken else ""
    for role, model in (("drafter", models.drafter), ("target", models.target)):
        if model is None or model.config is None:
            return [DRAFTER_NOT_JUDGED.finding(Status.SKIP,
                            f"{title}: not judged, the {role} {model.name if model else None!r} could not be read "
                            "(see Model files)",
                            detail="The drafter is compared with its target from both config.json files and the "
                            "drafter's safetensors headers; without them nothing can be compared.", cause=cause)]
    if not broken:
        return None
    return [DRAFTER_NOT_JUDGED.finding(Status.SKIP,
                    f"{title}: not judged, the model files are broken ({broken[0].title})",
                    detail="Fix the model-files findings first; the drafter cannot be compared with its target "
                    "without a readable config.json and weights.",
                    evidence={"blocking": [f.id for f in broken]}, cause=cause)]


@frozen_dataclass(frozen=True)
class DrafterView:
    """The drafter and its target as the drafter rules read them (checks.models.drafter and drafter_pairing):
    the models' facts, the installed vLLM, the served command, and what the rules found so far (`ok`: what holds,
    `blamed`: config.json key -> the finding id that blames it, `emitted`: the ids emitted)."""

    drafter: Model
    target: Model
    vllm: VllmDflash | None
    serve: ServeArgs | None
    installer: Installer
    ccs: list[str]
    """The serving GPUs' compute capabilities ("8.6"; gpu_view)."""
    file: str
    """The drafter's config.json."""
    path: str | None
    label: str
    config: ConfigView
    """The drafter's text config."""
    keys: ConfigView
    """The drafter's own keys as vLLM sees them (speculators_keys)."""
    dflash: ConfigView
    """eagle_config, then dflash_config over it."""
    target_config: ConfigView
    weights: Weights
    tensors: dict[str, Tensor]
    ok: list[str] = field(default_factory=list)
    blamed: dict[str, str] = field(default_factory=dict)
    emitted: set[str] = field(default_factory=set)


def drafter_view(drafter: Model, target: Model, vllm: VllmDflash | None, serve: ServeArgs | None,
                 installer: Installer, ccs: list[str] | None = None) -> DrafterView:
    keys = drafter_keys(drafter, vllm)
    return DrafterView(drafter=drafter, target=target, vllm=vllm, serve=serve, installer=installer,
                       ccs=list(ccs or []), file=drafter.config_file, path=drafter.resolved.path,
                       label=vllm_label(vllm), config=drafter.text, keys=keys, dflash=dflash_config(keys),
                       target_config=target.text, weights=drafter.weights, tensors=dict(drafter.weights.tensors))


@frozen_dataclass(frozen=True)
class GpuView:
    """The GPUs vLLM will see (`gpu_view`)."""

    available: bool = False
    """False: neither NVML facts nor --gpus; `why` says which, and `ccs` holds --target-arch's, if given."""
    why: str | None = "no GPU facts were collected"
    devices: tuple[GpuDevice, ...] = ()
    """The visible GPUs, in CUDA order (--gpus: as many "assumed GPU"s, with --gpu-memory each)."""
    source: str | None = None
    """"nvml" or "assumed" (--gpus/--gpu-memory)."""
    cuda_visible_devices: str | None = None
    ccs: tuple[str, ...] = ()
    """The serving GPUs' compute capabilities ("8.6")."""


def gpu_view(facts: Facts) -> GpuView:
    """The GPUs vLLM will see.

    --gpus/--gpu-memory (a CI user's stand-in for the serving GPUs) win; else the NVML facts (section "gpu")
    filtered by CUDA_VISIBLE_DEVICES; else only the compute capabilities of --target-arch, without count or
    memory (`available` False)."""
    serve = facts.optional_section(ServeArgs)
    assume = serve.assume if serve is not None else ServeAssumptions()
    ccs: list[str] = []
    for arch in assume.target_archs:
        try:
            major, minor = compute_capability(arch)
        except ValueError:
            continue
        ccs.append(f"{major}.{minor}")
    failed = facts.raw(Gpu.SECTION)
    gpu = facts.optional_section(Gpu)
    view = GpuView()
    if isinstance(failed, SectionFailure):
        view = GpuView(why=f"the GPU facts could not be collected: {failed.reason}")
    elif gpu is None:
        pass  # not collected, or not of its shape: no GPU facts
    elif gpu.skipped:
        view = GpuView(why=f"GPUs not probed ({gpu.skipped}); pass --gpus N --gpu-memory GIB for the serving GPUs")
    elif gpu.nvml is None or not gpu.nvml.ok:
        error = gpu.nvml.error if gpu.nvml is not None else None
        view = GpuView(why=f"NVML is not usable here ({(error.name or error.kind) if error else None}: "
                           f"{error.message if error else None})")
    else:
        visible = resolve_visible(gpu.environ.get("CUDA_VISIBLE_DEVICES"), gpu.devices)
        by_index = {d.index: d for d in gpu.devices}
        view = GpuView(available=True, why=None, devices=tuple(by_index[i] for i in visible.gpus if i in by_index),
                       source="nvml", cuda_visible_devices=visible.value)
    count, memory = assume.gpus, assume.gpu_memory_gib
    if (count or 0) > MAX_GPUS or not 0 <= (memory or 0) <= MAX_GPU_MEMORY_GIB:  # a saved report edited by hand
        return GpuView(why=f"--gpus {count} --gpu-memory {memory}: more than one machine holds (at most {MAX_GPUS} "
                       f"GPUs of {MAX_GPU_MEMORY_GIB:g} GiB); not judged")
    if count or memory:
        n = int(count) if count else len(view.devices) or 1
        cc = [int(p) for p in ccs[0].split(".")] if ccs else (
            view.devices[0].compute_capability if view.devices else None)
        size = int(float(memory) * GIB) if memory else None
        view = GpuView(available=True, why=None, source="assumed", devices=tuple(
            GpuDevice(index=i, name="assumed GPU", compute_capability=cc,
                      memory=GpuMemory(total=size, used=0, free=size, reserved=0) if size else None)
            for i in range(n)))
    found = sorted({f"{d.compute_capability[0]}.{d.compute_capability[1]}"
                    for d in view.devices if d.compute_capability and len(d.compute_capability) == 2})
    return replace(view, ccs=tuple(found or ccs))


def dflash_config(keys: ConfigView) -> ConfigView:
    """vLLM merges eagle_config, then dflash_config over it (qwen3_dflash.py DFlashQwen3Model.__init__)."""
    merged: dict[str, Any] = {}
    for key in ("eagle_config", "dflash_config"):
        merged.update(keys.view(key).raw())
    return ConfigView(merged)


def usable_length(value: object) -> TypeGuard[float]:
    """A usable length from a config: a positive number a float holds exactly (a hand-written config may say
    10**400, which no float holds)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 2**53


def yarn_already_scaled(vllm: VllmDflash | None) -> bool:
    """Whether the installed vLLM takes a YaRN model's max_position_embeddings as already scaled: its own
    source says so (marker), else its version; with no vLLM at all, the newest verified behaviour."""
    return has_behaviour(vllm, "yarn_already_scaled", MAX_LEN_DERIVATION.value["yarn_already_scaled_since"])


def rope_entries(text: ConfigView) -> list[ConfigView]:
    return text.rope_entries(list(MAX_LEN_DERIVATION.value["layer_types"]))


def derived_max_len(model: Model | None, vllm: VllmDflash | None) -> tuple[float | None, str]:
    """The length vLLM derives from a model's config (knowledge.dflash.MAX_LEN_DERIVATION, per release):
    the smallest length key, capped by tokenizer_config's model_max_length, times the RoPE factor."""
    rule = MAX_LEN_DERIVATION.value
    text = text_config(model)
    base, key = math.inf, ""
    for name in rule["length_keys"]:
        value = text.value(name)
        if usable_length(value) and value < base:
            base, key = float(value), f"{name}={value}"
    own = text.value("model_max_length")
    if usable_length(own):
        base, key = float(own), f"model_max_length={own}"
    if base == math.inf:
        return None, "no max_position_embeddings"
    tokenizer = model.tokenizer_config if model is not None else None
    limit = tokenizer.model_max_length if tokenizer is not None else None
    if usable_length(limit) and limit < base:
        base, key = float(limit), f"tokenizer_config model_max_length={limit}"
    config = model.config if model is not None else None
    model_type = config.model_type_raw if config is not None else None
    entries = rope_entries(text)
    if entries and rule["already_scaled_model_type"] not in str(model_type or text.value("model_type") or ""):
        excluded = tuple(rule["unscaled_rope_types"])
        scaled = yarn_already_scaled(vllm)
        if scaled:
            excluded += tuple(rule["already_scaled_rope_types"])
        factor: Any = 1.0
        kind = None
        for entry in entries:
            kind = entry.rope_type
            if kind in excluded:
                continue
            factor = entry.value("factor", factor)
            if kind == "yarn" and not scaled:
                original = entry.value("original_max_position_embeddings")
                if not usable_length(original):
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


def served_max_len(model: Model | None, vllm: VllmDflash | None = None) -> tuple[int | None, str]:
    """The length vLLM serves a model at when --max-model-len is not given (a longrope model: its
    original_max_position_embeddings), and what it came from."""
    derived, key = derived_max_len(model, vllm)
    if derived is None:
        return None, key
    text = text_config(model)
    if any(e.rope_type == "longrope" for e in rope_entries(text)):
        original = text.value("original_max_position_embeddings")
        if usable_length(original):
            return int(original), f"original_max_position_embeddings={original} (longrope)"
    return int(derived), key
