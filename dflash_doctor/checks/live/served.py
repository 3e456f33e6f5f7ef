"""The served config against what the serve command asked for: /v1/models' max_model_len against
--max-model-len (and the drafter's context that vLLM 0.33+ lowers it to), and the per-position counters'
positions against num_speculative_tokens. Nothing when the command is not known."""

from __future__ import annotations

from dflash_doctor.checks.live.codes import SERVED_CONFIG, SERVED_CONTEXT_SHORTER, SERVED_K_DIFFERS
from dflash_doctor.checks.live.metrics import count
from dflash_doctor.facts.live.live_shapes import Live, ModelConfig, SpeculativeConfig
from dflash_doctor.knowledge.dflash_reports import DRAFTER_CONTEXT_RAISED
from dflash_doctor.model import JSON, Finding, Remediation, Status

__all__ = ["served_findings"]


def _length(value: int | None) -> int | None:
    number = count(value)
    return int(number) if number is not None else None


def served_findings(live: Live) -> list[Finding]:
    """What the server serves against what its command asked for: max_model_len (/v1/models) and k (the
    per-position counters' positions)."""
    context = live.context
    models = live.models.data or []
    served_len = _length(models[0].max_model_len) if models else None
    requested_len = _length(context.requested_max_model_len)
    requested_k = (context.speculative_config or SpeculativeConfig()).k()
    per_pos = (live.metrics_after.counters.accepted_per_pos if live.metrics_after else None) or {}
    served_k = len(per_pos) if per_pos else None
    drafter = context.drafter or ModelConfig()
    evidence: dict[str, JSON] = {"served_max_model_len": served_len, "requested_max_model_len": requested_len,
                                 "served_k": served_k, "requested_k": requested_k}
    out: list[Finding] = []
    if served_len is not None and requested_len is not None and served_len < requested_len:
        drafter_len = drafter.context()
        if drafter_len is not None and drafter_len == served_len:
            cause = (f"the served length is the drafter's context ({drafter_len}, RoPE {drafter.rope_type or 'default'}): "
                     "vLLM 0.33+ lowers max_model_len to a drafter's whose RoPE cannot simply grow, with only a log line "
                     "(\"The draft model's max_model_len ... reducing max_model_len\")")
        else:
            cause = "vLLM lowered it when it started (its log says why), or the server runs another command"
        out.append(SERVED_CONTEXT_SHORTER.finding(
            Status.FAIL,
            f"the server serves max_model_len {served_len}, shorter than the requested --max-model-len "
            f"{requested_len}: requests longer than {served_len} tokens are refused; {cause}",
            detail=f"Source: {DRAFTER_CONTEXT_RAISED.source}.",
            evidence={**evidence, "drafter_max_position_embeddings": drafter_len, "drafter_rope": drafter.rope_type},
            remediation=(Remediation(f"serve a drafter made for {requested_len} tokens",
                                     "the served context is what the drafter can follow"),
                         Remediation(f"start the server with --max-model-len {served_len}",
                                     f"ask for the {served_len} tokens it serves, so that clients know the limit"))))
    elif served_len is not None and requested_len is None and context.serve_command_known:
        # No --max-model-len: the command asked for the target's own context. Only the drafter's length as the served
        # one tells that vLLM lowered it (a tokenizer cap or the RoPE rules may make the target's own shorter).
        drafter_len = drafter.context()
        target_len = (context.target or ModelConfig()).context()
        if drafter_len == served_len and target_len is not None and served_len < target_len:
            out.append(SERVED_CONTEXT_SHORTER.finding(
                Status.WARN,
                f"the server serves max_model_len {served_len}, the drafter's context (RoPE "
                f"{drafter.rope_type or 'default'}), below the target's max_position_embeddings {target_len}: vLLM "
                f"0.33+ lowers it to a drafter's whose RoPE cannot simply grow, with only a log line; requests longer "
                f"than {served_len} tokens are refused",
                detail=f"Source: {DRAFTER_CONTEXT_RAISED.source}.",
                evidence={**evidence, "drafter_max_position_embeddings": drafter_len,
                          "target_max_position_embeddings": target_len},
                remediation=(Remediation(f"serve a drafter made for {target_len} tokens",
                                         "the served context is what the drafter can follow"),
                             Remediation(f"start the server with --max-model-len {served_len}",
                                         "say the length it serves, so that clients know the limit"))))
    if served_k is not None and requested_k is not None and served_k != requested_k:
        out.append(SERVED_K_DIFFERS.finding(
            Status.WARN, f"the server drafts {served_k} tokens per step (vllm:spec_decode_num_accepted_tokens_per_pos "
            f"has positions 0-{served_k - 1}), not the requested num_speculative_tokens {requested_k}",
            evidence=evidence))
    if not out and (requested_len is not None or requested_k is not None) and (
            served_len is not None or served_k is not None):
        said = []
        if served_len is not None and requested_len is not None:
            said.append(f"max_model_len {served_len}")
        if served_k is not None and requested_k is not None:
            said.append(f"{served_k} speculative tokens")
        if said:
            out.append(SERVED_CONFIG.finding(Status.PASS, f"the server serves {' and '.join(said)}, as the command asked",
                                             evidence=evidence))
    return out
