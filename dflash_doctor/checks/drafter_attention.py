"""Layer: which attention backend the installed vLLM picks for the drafter's non-causal attention on this
GPU, from its own selection code (collectors.serve)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from dflash_doctor.check import Facts
from dflash_doctor.codes import Code
from dflash_doctor.facts.models_shapes import Models
from dflash_doctor.facts.serve_shapes import VllmDflash
from dflash_doctor.knowledge.dflash import (
    ATTENTION_FALLBACK,
    NON_CAUSAL_SCOPE,
)
from dflash_doctor.model import Finding, Remediation, Status

from .model_common import (
    _dflash_config,
    _drafter_keys,
    _head_dim,
    _marker,
    _not_given,
    _spec_value,
    _vllm_label,
    gpu_view,
    text_config,
)
from .serve_common import with_flag, with_spec
from .serve_speculators import as_served

__all__ = ["DrafterAttentionCheck", "choose_backend"]


CODES: tuple[Code, ...] = (
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


# --------------------------------------------------------------------------------- drafter-attention


def _needs_non_causal(dflash: Mapping[str, Any], vllm: VllmDflash | None) -> bool:
    """From 0.23 a drafter with dflash_config.causal true runs causal attention (v1/spec_decode/dflash.py)."""
    return not (_marker(vllm, "dflash_causal_key") and dflash.get("causal") is True)


def choose_backend(attention: Mapping[str, Any], cc: str, non_causal: bool, head_sizes: Sequence[int],
                   explicit: str | None) -> dict[str, Any]:
    """The backend vLLM's selection picks, evaluated from its source facts; reasons for the ones it skips."""
    row = (attention.get("priorities") or {}).get(cc) or {}
    order = row.get("non_causal" if non_causal else "causal")
    result: dict[str, Any] = {"cc": cc, "order": order, "chosen": None, "certain": True, "skipped": {},
                              "explicit": explicit}
    if not order:
        result["certain"] = False
        return result
    candidates = [explicit] if explicit else order
    for name in candidates:
        info = (attention.get("backends") or {}).get(name) or {}
        reasons: list[str] = []
        unknown = False
        cc_ok = (info.get("capability") or {}).get(cc)
        if cc_ok is False:
            reasons.append(f"compute capability {cc} not supported")
        unknown |= cc_ok is None
        if non_causal:
            if info.get("non_causal") is False:
                reasons.append("non-causal attention not supported")
            unknown |= info.get("non_causal") is None
        for size in head_sizes:
            ok = (info.get("head_size") or {}).get(str(size))
            if ok is False:
                reasons.append(f"head size {size} not supported")
            unknown |= ok is None
        if not info:
            reasons.append("not found in this vLLM")
        if reasons:
            result["skipped"][name] = reasons
            continue
        result["chosen"], result["certain"] = name, not unknown
        return result
    return result


class DrafterAttentionCheck:
    id: ClassVar[str] = "drafter-attention"
    layer: ClassVar[str] = "models"
    title: ClassVar[str] = "Attention backend for the drafter"
    needs: ClassVar[frozenset[str]] = frozenset({"models", "vllm_dflash", "serve_args", "gpu"})
    after: ClassVar[frozenset[str]] = frozenset()
    requires_gpu: ClassVar[bool] = False

    def judge(self, facts: Facts) -> Iterable[Finding]:
        models = facts.section(Models)
        drafter = models.drafter
        if drafter is None or not text_config(drafter):
            return _not_given(self.id, self.title, "readable drafter")
        vllm = facts.optional_section(VllmDflash)
        if vllm is None or not vllm.root:
            return [Finding("drafter-attention.no-vllm", Status.SKIP,
                            f"{self.title}: {_vllm_label(vllm)}: no vLLM source to read its backend selection from",
                            detail=f"Without it, the rule of thumb: {ATTENTION_FALLBACK.source}.")]
        gpus = gpu_view(facts)
        ccs = gpus["ccs"]
        if not ccs:
            return [Finding("drafter-attention.no-gpu-facts", Status.SKIP,
                            f"{self.title}: no compute capability known ({gpus['why'] or 'the GPUs report none'})",
                            detail="Run on the GPU host, or name the GPU with --target-arch (e.g. sm_86).")]
        keys = _drafter_keys(drafter, vllm)
        dflash = _dflash_config(keys)
        all_layers = _marker(vllm, "non_causal_all_layers") is True
        head_sizes = [h for h in {_head_dim(text_config(drafter)),
                                  _head_dim(text_config(models.target)) if all_layers else None} if h]
        serve = as_served(facts.optional("serve_args"), models.speculators_launch, vllm) or {}
        spec = _spec_value(serve)
        fields = serve.get("fields") or {}
        explicit = fields.get("attention_backend") if all_layers else spec.get("attention_backend")
        attention = vllm.attention
        non_causal = _needs_non_causal(dflash, vllm)
        scope = "every attention layer (target and drafter)" if all_layers else "the drafter's attention"
        findings: list[Finding] = []
        for cc in ccs:
            if cc not in (attention.get("priorities") or {}):
                findings.append(Finding("drafter-attention.unknown", Status.WARN,
                                        f"{_vllm_label(vllm)}: the backend choice for compute capability {cc} could not be "
                                        "read from its source", evidence={"cc": cc}))
                continue
            pick = choose_backend(attention, cc, non_causal, head_sizes, str(explicit) if explicit else None)
            evidence = {"cc": cc, "order": pick["order"], "skipped": pick["skipped"], "head_sizes": head_sizes,
                        "non_causal_scope": scope, "source": attention.get("source"), "explicit": explicit}
            sm = "sm_" + cc.replace(".", "")
            if pick["chosen"] is None:
                if explicit:
                    title = (f"{_vllm_label(vllm)} on {sm}: the selected attention backend {explicit} is not valid for "
                             f"{scope}: {'; '.join(pick['skipped'].get(str(explicit), ['unknown']))}")
                    code = "drafter-attention.selected-invalid"
                else:
                    title = f"{_vllm_label(vllm)} on {sm}: no attention backend supports {scope} with non-causal attention"
                    code = "drafter-attention.none-valid"
                argv = list(serve.get("argv") or []) or ["vllm", "serve", "MODEL"]
                fix = with_flag(argv, "--attention-backend", "FLASH_ATTN") if all_layers else \
                    with_spec(argv, {**spec, "attention_backend": "FLASH_ATTN"})
                findings.append(Finding(code, Status.FAIL, title, detail=NON_CAUSAL_SCOPE.source, evidence=evidence,
                                        remediation=(Remediation(fix, "FlashAttention supports non-causal attention "
                                                                 "from sm_80"),)))
                continue
            skipped = "; ".join(f"{n}: {', '.join(r)}" for n, r in pick["skipped"].items())
            findings.append(Finding(
                "drafter-attention.backend", Status.PASS if pick["certain"] else Status.WARN,
                f"{_vllm_label(vllm)} on {sm} picks {pick['chosen']} for {scope}"
                + (" (non-causal supported)" if non_causal else " (causal drafter)")
                + (f"; skipped {skipped}" if skipped else "")
                + ("" if pick["certain"] else "; some of its conditions could not be evaluated from source"),
                detail=f"{NON_CAUSAL_SCOPE.source} Order and support read from {vllm.root}.",
                evidence=evidence))
        return findings
