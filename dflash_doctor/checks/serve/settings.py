"""What the two `vllm serve` checks share: reading the command's fields as vLLM will see them.

The flag values with vLLM's defaults filled in (which depend on the GPU's memory tier and the vLLM
version), the target's derived maximum length, and the user's own command with one flag changed (every
remediation is that command, not a generic one).
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
from functools import partial
from typing import Any

from dflash_doctor.checks.models.model_views import (
    derived_max_len,
    has_behaviour,
    is_int,
    served_max_len,
    source_marker,
    text_config,
    usable_length,
)
from dflash_doctor.codes import Code
from dflash_doctor.documents.jsondoc import parse_json
from dflash_doctor.facts.gpu.nvml_shapes import GpuDevice
from dflash_doctor.facts.models.models_shapes import Model
from dflash_doctor.facts.pysource import parse_expression
from dflash_doctor.facts.python.envfacts import version_tuple
from dflash_doctor.facts.serve.serve_shapes import ServeFields, VllmDflash
from dflash_doctor.knowledge.dflash import (
    BATCH_DEFAULTS,
    SPEC_BUDGET_RULES,
)
from dflash_doctor.model import JSON, Finding, Status
from dflash_doctor.shape import frozen_dataclass
from dflash_doctor.units import GIB, gib

__all__ = ["Settings", "TokenBudget", "effective_settings", "gpu_tier", "int_or", "not_given", "repair_spec",
           "scheduler_refusal", "size_gib",
           "spec_token_budget"]

DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "half": 2, "float": 4}
STORED_FLOAT = {"F16", "BF16", "F32", "F64"}
MULTIMODAL_PREFIX_WORDS = ("visual", "vision", "image", "audio", "mm_projector", "multi_modal")


def int_or(value: Any, default: int) -> int:
    return int(value) if is_int(value) else default


size_gib = partial(gib, digits=2)  # sizes of weights and KV cache, to the hundredth



_BARE = re.compile(r"""([{\[,:]\s*)([^\s"'{}\[\],:][^{}\[\],:"']*?)(\s*)(?=[,:}\]])""")
_JSON_WORD = re.compile(r"-?\d+(\.\d+)?([eE][+-]?\d+)?|true|false|null")


def repair_spec(raw: Any) -> dict[str, Any] | None:
    """What a --speculative-config that is not JSON most likely meant, as a dict; None if it cannot be told.

    Two mistakes cover what shells and hands make of it: Python's syntax (single quotes, True/None), and bare
    words where the double quotes were eaten by the shell (`{method: dflash, model: /models/d}`)."""
    if not isinstance(raw, str) or len(raw) > 65536:
        return None
    try:
        value = ast.literal_eval(parse_expression(raw.lstrip(" \t")))
    except (ValueError, TypeError, MemoryError, RecursionError):  # SourceError is a ValueError
        value = None
    if not isinstance(value, dict):
        def quoted(match: re.Match[str]) -> str:
            word = match.group(2).strip()
            return match.group(1) + (word if _JSON_WORD.fullmatch(word) else json.dumps(word)) + match.group(3)

        try:
            value = parse_json(_BARE.sub(quoted, raw.strip()))
        except ValueError:
            return None
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        return None
    try:  # JSON, and as bounded as any JSON the doctor reads: nested at most jsondoc.MAX_DEPTH deep
        bounded = parse_json(json.dumps(value))
    except (TypeError, ValueError, RecursionError):
        return None
    return bounded if isinstance(bounded, dict) else None


def not_given(code: Code) -> list[Finding]:
    """The one finding of a serve check when no command was given (`code`: that check's not-given code)."""
    return [code.finding(Status.SKIP, "serve command: skipped, none given",
                         detail="Run `dflash-doctor serve -- vllm serve MODEL [flags]` with the exact command to judge it.")]


# ---------------------------------------------------------------------------------- effective values



def max_len_refused(model: Model | None, vllm: VllmDflash | None, given: int) -> tuple[bool, float | None, str]:
    """Whether vLLM refuses --max-model-len `given` for this model (without VLLM_ALLOW_LONG_MAX_MODEL_LEN):
    over the derived length and over the config's own model_max_length, when it has one."""
    derived, key = derived_max_len(model, vllm)
    if derived is None or given <= derived:
        return False, derived, key
    own = text_config(model).value("model_max_length")
    return (not usable_length(own) or given > own), derived, key


def gpu_tier(device: GpuDevice | None, vllm: VllmDflash | None) -> str:
    """Which of vLLM's default tiers the first GPU falls in, by the total torch reports (NVML's total less
    the driver's reservation)."""
    memory = device.memory if device is not None else None
    name = str(device.name or "").lower() if device is not None else ""
    if memory is None or memory.total <= 0:
        return "unknown"
    gib = (memory.total - (memory.reserved or 0)) / GIB
    tiers = BATCH_DEFAULTS.value
    if gib >= tiers["huge"]["min_gib"] and source_marker(vllm, "batch_huge_tier"):
        return "huge"
    if gib >= tiers["large"]["min_gib"] and "a100" not in name:
        return "large"
    return "small"


@frozen_dataclass(frozen=True)
class Settings:
    """The scheduler values vLLM ends up with for one GPU tier, and which of them are its defaults."""

    tier: str
    max_model_len: int | None
    max_num_seqs: int
    max_num_batched_tokens: int
    batched_defaulted: bool
    seqs_defaulted: bool
    chunked_prefill: bool

    def evidence(self) -> dict[str, JSON]:
        return {"tier": self.tier, "max_model_len": self.max_model_len, "max_num_seqs": self.max_num_seqs,
                "max_num_batched_tokens": self.max_num_batched_tokens, "batched_defaulted": self.batched_defaulted,
                "seqs_defaulted": self.seqs_defaulted, "chunked_prefill": self.chunked_prefill}


def effective_settings(fields: ServeFields, target: Model | None, tier: str,
                       vllm: VllmDflash | None = None) -> Settings:
    """The scheduler values vLLM ends up with for one GPU tier ("small", "large", "huge")
    (engine/arg_utils.py _set_default_max_num_seqs_and_batched_tokens_args)."""
    defaults = BATCH_DEFAULTS.value[tier]
    derived, _ = served_max_len(target, vllm)
    given_len, given_seqs, given_tokens = fields.max_model_len, fields.max_num_seqs, fields.max_num_batched_tokens
    max_model_len = given_len if given_len is not None else derived
    chunked = True if fields.enable_chunked_prefill is None else fields.enable_chunked_prefill
    seqs = given_seqs if given_seqs is not None else defaults["max_num_seqs"]
    if given_tokens is not None:
        tokens = given_tokens
    else:
        tokens = defaults["max_num_batched_tokens"]
        if not chunked and max_model_len is not None:
            tokens = max(max_model_len, tokens)
        if max_model_len is not None:
            tokens = min(seqs * max_model_len, tokens)
    return Settings(tier=tier, max_model_len=max_model_len, max_num_seqs=seqs, max_num_batched_tokens=tokens,
                    batched_defaulted=given_tokens is None, seqs_defaulted=given_seqs is None, chunked_prefill=chunked)


# ------------------------------------------------------------------------------------ serve-command


@frozen_dataclass(frozen=True)
class TokenBudget:
    """What vLLM's VllmConfig._set_max_num_scheduled_tokens makes of a DFlash serve (spec_token_budget)."""

    rule: str
    """Which of knowledge.dflash.SPEC_BUDGET_RULES' rules ("0.20-0.27", "0.28-0.32", "0.33")."""
    slots_per_request: int
    max_num_scheduled_tokens: int
    warns: bool
    """vLLM warns that fewer than SPEC_BUDGET_RULES' warn_below tokens are left to schedule."""
    error: str | None = None
    """vLLM's error message, word for word."""
    max_num_active_seqs: int | None = None
    """Where vLLM lowers the running sequences to fit the draft pass."""
    draft_slots: int | None = None
    """The draft slots reserved out of max_num_batched_tokens (the oldest rule only)."""

    def evidence(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {"error": self.error, "max_num_active_seqs": self.max_num_active_seqs,
                                "rule": self.rule, "slots_per_request": self.slots_per_request}
        if self.draft_slots is not None:
            out["draft_slots"] = self.draft_slots
        out.update(max_num_scheduled_tokens=self.max_num_scheduled_tokens, warns=self.warns)
        return out


def spec_token_budget(vllm: VllmDflash | None, k: int, batched: int, seqs: int,
                      rule: str | None = None) -> TokenBudget:
    """What the installed vLLM's VllmConfig._set_max_num_scheduled_tokens makes of a DFlash serve with k
    speculative tokens (knowledge.dflash.SPEC_BUDGET_RULES): the rule, vLLM's error message or None,
    max_num_scheduled_tokens, max_num_active_seqs where vLLM lowers it, whether it warns that fewer than 8192
    tokens are left, and the draft slots reserved per request. `rule` names one instead of the installed vLLM's."""
    rules = SPEC_BUDGET_RULES.value
    names = rules["rule_names"]
    if rule is not None:
        draft_seqs, subtracts = rule == names["draft_seqs"], rule == names["subtracts"]
    else:
        draft_seqs = has_behaviour(vllm, "spec_budget_draft_seqs", rules["draft_seqs_since"])
        subtracts = not draft_seqs and _subtracts(vllm, rules["no_subtraction_since"])
    if subtracts:
        slots = k - 1
        scheduled = batched - slots * seqs
        error = None if scheduled > 0 else (
            f"max_num_scheduled_tokens is set to {scheduled} based on the speculative decoding settings, which does "
            "not allow any tokens to be scheduled. Increase max_num_batched_tokens to accommodate the additional "
            "draft token slots, or decrease num_speculative_tokens or max_num_seqs.")
        return TokenBudget(rule=names["subtracts"], slots_per_request=slots, draft_slots=slots * seqs,
                           max_num_scheduled_tokens=scheduled, warns=0 < scheduled < rules["warn_below"], error=error)
    slots = k + 1 if draft_seqs else k
    budget = TokenBudget(rule=names["draft_seqs"] if draft_seqs else names["no_subtraction"], slots_per_request=slots,
                         max_num_scheduled_tokens=batched, warns=batched < rules["warn_below"])
    if batched <= slots:
        named = f"num_lookahead_tokens={slots}" if draft_seqs else f"scheduled_token_delta={slots}"
        return dataclasses.replace(budget, error=(
            "VllmConfig does not have enough slots to schedule a token and support the speculative decoding "
            f"settings. Got max_num_batched_tokens={batched} and {named}."))
    if draft_seqs and batched // slots < seqs:
        return dataclasses.replace(budget, max_num_active_seqs=batched // slots)
    return budget


def _subtracts(vllm: VllmDflash | None, until: str) -> bool:
    """The old rule, unlike the newer ones, is known by its marker's presence; where the source is unread, by a
    version before `until`."""
    found = source_marker(vllm, "spec_budget_subtracts")
    if found is not None:
        return found
    version = version_tuple(str((vllm.version if vllm is not None else None) or ""))
    return bool(version) and version < version_tuple(until)


def scheduler_refusal(batched: int, seqs: int, max_model_len: int | None, chunked_prefill: bool) -> str | None:
    """SchedulerConfig.verify_max_model_len's refusal (the same in 0.20 through 0.34), in vLLM's words, or None."""
    if max_model_len is not None and batched < max_model_len and not chunked_prefill:
        return (f"max_num_batched_tokens ({batched}) is smaller than max_model_len ({max_model_len}). This effectively "
                "limits the maximum sequence length to max_num_batched_tokens and makes vLLM reject longer sequences. "
                "Please increase max_num_batched_tokens or decrease max_model_len.")
    if batched < seqs:
        return f"max_num_batched_tokens ({batched}) must be greater than or equal to max_num_seqs ({seqs})."
    return None
