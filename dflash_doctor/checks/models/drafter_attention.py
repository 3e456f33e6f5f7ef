"""Layer: which attention backend the installed vLLM picks for the drafter's non-causal attention on this
GPU, from its own selection code (collectors.serve)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from dflash_doctor.check import Facts
from dflash_doctor.checks.argv import with_spec, without_flag
from dflash_doctor.checks.models.codes import (
    ATTENTION_BACKEND,
    ATTENTION_NO_GPU_FACTS,
    ATTENTION_NO_VLLM,
    ATTENTION_NONE_VALID,
    ATTENTION_NOT_GIVEN,
    ATTENTION_SELECTED_INVALID,
    ATTENTION_UNKNOWN,
)
from dflash_doctor.checks.models.model_views import (
    dflash_config,
    drafter_keys,
    gpu_view,
    has_behaviour,
    not_given,
    source_marker,
    spec_value,
    text_config,
    vllm_label,
)
from dflash_doctor.checks.models.speculators import as_served
from dflash_doctor.facts.models.models_shapes import ConfigView, Models
from dflash_doctor.facts.serve.serve_shapes import (
    BackendSupport,
    FlashAttnBuilds,
    Priorities,
    ServeArgs,
    VllmAttentionTable,
    VllmDflash,
)
from dflash_doctor.knowledge.dflash import (
    ATTENTION_FALLBACK,
    FLASH_ATTN_QUANTIZED_KV,
    NON_CAUSAL_SCOPE,
)
from dflash_doctor.model import Finding, Remediation, Status

__all__ = ["choose_backend", "judge_drafter_attention"]




# --------------------------------------------------------------------------------- drafter-attention


def _needs_non_causal(dflash: ConfigView, vllm: VllmDflash | None) -> bool:
    """From 0.23 a drafter with dflash_config.causal true runs causal attention (v1/spec_decode/dflash.py)."""
    return not (source_marker(vllm, "dflash_causal_key") and dflash.value("causal") is True)


def _kv_supported(info: BackendSupport, kv_cache_dtype: str, cc: str, vllm: VllmDflash | None,
                  builds: FlashAttnBuilds | None = None) -> bool | None:
    """The backend's supports_kv_cache_dtype: as evaluated from the installed source, else (FlashAttention's
    quantized KV cache, which asks the FlashAttention build) knowledge.dflash's rule for this GPU and the
    FlashAttention versions this vLLM carries (`builds`; None: all, as vLLM's CUDA wheels)."""
    if not info.kv_cache_dtype:  # facts saved before the doctor read it: every backend takes "auto"
        return True if kv_cache_dtype == "auto" else None
    evaluated = info.kv_cache_dtype.get(kv_cache_dtype)
    if evaluated is not None:
        return bool(evaluated)
    rule = FLASH_ATTN_QUANTIZED_KV.value
    if not kv_cache_dtype.startswith(rule["quantized_prefixes"]):
        return True
    major = int(cc.split(".")[0])
    carried = builds or FlashAttnBuilds(fa2=True, fa3=True, fa4=True)
    return (major == rule["fa3_major"] and carried.fa3) or (
        major == rule["fa4_major"] and carried.fa4 and has_behaviour(vllm, "fa4_fp8_kv", rule["fa4_since"]))


def choose_backend(attention: VllmAttentionTable, cc: str, non_causal: bool, head_sizes: Sequence[int],
                   explicit: str | None, kv_cache_dtype: str = "auto",
                   vllm: VllmDflash | None = None) -> dict[str, Any]:
    """The backend vLLM's selection picks, evaluated from its source facts, with the reasons it gives, in its
    words and order (AttentionBackend.validate_configuration), for each one it skips."""
    words = FLASH_ATTN_QUANTIZED_KV.value["reasons"]
    row = attention.priorities.get(cc) or Priorities()
    order = row.non_causal if non_causal else row.causal
    result: dict[str, Any] = {"cc": cc, "order": order, "chosen": None, "certain": True, "skipped": {},
                              "explicit": explicit, "kv_cache_dtype": kv_cache_dtype, "message": None}
    if not order:
        result["certain"] = False
        return result
    candidates = [explicit] if explicit else order
    quantized = kv_cache_dtype.startswith(FLASH_ATTN_QUANTIZED_KV.value["quantized_prefixes"])
    for name in candidates:
        found = attention.backends.get(name)
        info = found or BackendSupport()
        reasons: list[str] = []
        unknown = False
        for size in head_sizes:
            ok = info.head_size.get(str(size))
            if ok is False and words["head_size"] not in reasons:
                reasons.append(words["head_size"])
            unknown |= ok is None
        kv_ok = _kv_supported(info, kv_cache_dtype, cc, vllm, attention.flash_attn_builds) if found else None
        if kv_ok is False:
            reasons.append(words["kv_cache_dtype"])
        unknown |= kv_ok is None
        cc_ok = info.capability.get(cc)
        if cc_ok is False:
            reasons.append(words["capability"])
        unknown |= cc_ok is None
        if non_causal:
            if info.non_causal is False:
                reasons.append(words["non_causal"])
            unknown |= info.non_causal is None
        if quantized and kv_ok is False and info.kv_combination_reason:
            reasons.append(info.kv_combination_reason)  # its supports_combination, in its words
        if found is None:
            reasons.append("not found in this vLLM")
        if reasons:
            result["skipped"][name] = reasons
            continue
        result["chosen"], result["certain"] = name, not unknown
        return result
    skipped = result["skipped"]
    if explicit:
        result["message"] = (f"Selected backend AttentionBackendEnum.{explicit} is not valid for this configuration. "
                             f"Reason: {skipped.get(explicit, [])!r}")
    else:
        result["message"] = ("No valid attention backend found for cuda with kv_cache_dtype=" + kv_cache_dtype
                             + ". Reasons: {" + ", ".join(f"{n}: [{', '.join(r)}]" for n, r in skipped.items())
                             + "}.")
    return result


def judge_drafter_attention(facts: Facts, title: str) -> list[Finding]:
    """The drafter-attention check: the attention backend the installed vLLM picks for the drafter on each
    serving GPU."""
    models = facts.section(Models)
    drafter = models.drafter
    if drafter is None or not drafter.text:
        return not_given(ATTENTION_NOT_GIVEN, title, "readable drafter")
    vllm = facts.optional_section(VllmDflash)
    if vllm is None or not vllm.root:
        return [ATTENTION_NO_VLLM.finding(Status.SKIP,
                        f"{title}: {vllm_label(vllm)}: no vLLM source to read its backend selection from",
                        detail=f"Without it, the rule of thumb: {ATTENTION_FALLBACK.source}.")]
    gpus = gpu_view(facts)
    ccs = list(gpus.ccs)
    if not ccs:
        return [ATTENTION_NO_GPU_FACTS.finding(Status.SKIP,
                        f"{title}: no compute capability known ({gpus.why or 'the GPUs report none'})",
                        detail="Run on the GPU host, or name the GPU with --target-arch (e.g. sm_86).")]
    keys = drafter_keys(drafter, vllm)
    dflash = dflash_config(keys)
    all_layers = source_marker(vllm, "non_causal_all_layers") is True
    head_sizes = [h for h in {drafter.text.head_dim,
                              text_config(models.target).head_dim if all_layers else None} if h]
    serve = as_served(facts.optional_section(ServeArgs), models.speculators_launch, vllm) or ServeArgs()
    spec = spec_value(serve)
    fields = serve.fields
    explicit = fields.attention_backend if all_layers else spec.get("attention_backend")
    # the drafter's KV cache: the speculative config's kv_cache_dtype where it sets one (0.34's DFlash loader
    # replaces the cache dtype with it), else --kv-cache-dtype, else vLLM's default "auto"
    kv = str((None if all_layers else spec.get("kv_cache_dtype")) or fields.kv_cache_dtype or "auto")
    attention = vllm.attention or VllmAttentionTable()
    non_causal = _needs_non_causal(dflash, vllm)
    scope = "every attention layer (target and drafter)" if all_layers else "the drafter's attention"
    findings: list[Finding] = []
    for cc in ccs:
        if cc not in attention.priorities:
            findings.append(ATTENTION_UNKNOWN.finding(Status.WARN,
                                    f"{vllm_label(vllm)}: the backend choice for compute capability {cc} could not be "
                                    "read from its source", evidence={"cc": cc}))
            continue
        pick = choose_backend(attention, cc, non_causal, head_sizes, str(explicit) if explicit else None,
                              kv_cache_dtype=kv, vllm=vllm)
        evidence = {"cc": cc, "order": pick["order"], "skipped": pick["skipped"], "head_sizes": head_sizes,
                    "non_causal_scope": scope, "source": attention.source, "explicit": explicit,
                    "kv_cache_dtype": kv, "vllm_message": pick["message"]}
        sm = "sm_" + cc.replace(".", "")
        if pick["chosen"] is None:
            if explicit:
                title = (f"{vllm_label(vllm)} on {sm}: the selected attention backend {explicit} is not valid for "
                         f"{scope} with kv_cache_dtype={kv}: {'; '.join(pick['skipped'].get(str(explicit), ['unknown']))}")
                code = ATTENTION_SELECTED_INVALID
            else:
                title = (f"{vllm_label(vllm)} on {sm}: no attention backend supports {scope} with non-causal "
                         f"attention and kv_cache_dtype={kv}")
                code = ATTENTION_NONE_VALID
            findings.append(code.finding(Status.FAIL, title,
                                    detail=f"vLLM stops with \"{pick['message']}\" {NON_CAUSAL_SCOPE.source}",
                                    evidence=evidence, remediation=_fixes(
                                        attention, cc, non_causal, head_sizes, kv, vllm, serve, spec, all_layers)))
            continue
        skipped = "; ".join(f"{n}: {', '.join(r)}" for n, r in pick["skipped"].items())
        findings.append(ATTENTION_BACKEND.finding(Status.PASS if pick["certain"] else Status.WARN,
            f"{vllm_label(vllm)} on {sm} picks {pick['chosen']} for {scope}"
            + (f" with kv_cache_dtype={kv}" if kv != "auto" else "")
            + (" (non-causal supported)" if non_causal else " (causal drafter)")
            + (f"; skipped {skipped}" if skipped else "")
            + ("" if pick["certain"] else "; some of its conditions could not be evaluated from source"),
            detail=f"{NON_CAUSAL_SCOPE.source} Order and support read from {vllm.root}.",
            evidence=evidence))
    return findings


def _fixes(attention: VllmAttentionTable, cc: str, non_causal: bool, head_sizes: Sequence[int], kv: str,
           vllm: VllmDflash, serve: ServeArgs, spec: Mapping[str, Any],
           all_layers: bool) -> tuple[Remediation, ...]:
    """Commands the same evaluation accepts: the backend vLLM would pick itself selected instead, else the
    default KV cache dtype with the selection (or, that failing too, without it)."""
    argv = list(serve.argv) or ["vllm", "serve", "MODEL"]

    def selecting(words: list[str], name: str | None) -> list[str]:
        """`words` with the attention backend selection set to `name` (None: no selection)."""
        if all_layers:
            words = without_flag(words, "--attention-backend", takes_value=True)
            return [*words, "--attention-backend", name] if name else words
        rest = {k: v for k, v in spec.items() if k != "attention_backend"}
        return shlex.split(with_spec(words, {**rest, "attention_backend": name} if name else rest))

    def kv_auto(words: list[str]) -> list[str]:
        if not all_layers and spec.get("kv_cache_dtype"):
            words = shlex.split(with_spec(words, {k: v for k, v in spec.items() if k != "kv_cache_dtype"}))
        return without_flag(words, "--kv-cache-dtype", takes_value=True)

    explicit = spec.get("attention_backend") if not all_layers else serve.fields.attention_backend
    fixes: list[Remediation] = []
    if explicit:
        auto = choose_backend(attention, cc, non_causal, head_sizes, None, kv_cache_dtype=kv, vllm=vllm)
        if auto["chosen"]:
            fixes.append(Remediation(shlex.join(selecting(argv, auto["chosen"])),
                                     f"{auto['chosen']}, the backend vLLM picks itself here, supports this GPU, "
                                     f"head size and kv_cache_dtype={kv}"))
    if kv != "auto":
        for selection in ([str(explicit)] if explicit else []) + [None]:
            plain = choose_backend(attention, cc, non_causal, head_sizes, selection, kv_cache_dtype="auto", vllm=vllm)
            if plain["chosen"]:
                words = kv_auto(argv) if selection else selecting(kv_auto(argv), None if not explicit
                                                                  else plain["chosen"])
                fixes.append(Remediation(shlex.join(words), f"with the default KV cache dtype (auto), {plain['chosen']} "
                                                "runs the drafter's non-causal attention here"))
                break
    return tuple(fixes)
