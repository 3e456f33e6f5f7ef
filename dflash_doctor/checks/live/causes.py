"""The known causes of an acceptance collapse, in knowledge.live's order, each with what the facts say about
it (the drafter's layer ids against the vLLM version's offset rule, quantization, the attention backend under
CUDA graphs, long contexts) and its fixes."""

from __future__ import annotations

import shlex

from dflash_doctor.checks.live.metrics import whole
from dflash_doctor.facts.live.live_shapes import Live, ModelConfig
from dflash_doctor.knowledge.live import COLLAPSE_CAUSES
from dflash_doctor.model import JSON, Remediation
from dflash_doctor.shape import frozen_dataclass

__all__ = ["Cause", "collapse_causes"]


@frozen_dataclass(frozen=True)
class Cause:
    cause: str
    about: str
    facts: str
    """What this run's facts say about it."""
    remediation: tuple[Remediation, ...] = ()

    def evidence(self) -> dict[str, JSON]:
        return {"cause": self.cause, "about": self.about, "facts": self.facts}


UNKNOWN = "not known here: run it as `dflash-doctor serve --exec --live -- vllm serve ...` to judge it"


def collapse_causes(live: Live) -> list[Cause]:
    """The known causes of a collapse, in knowledge.live's order, each with what the facts say about it."""
    text = dict(COLLAPSE_CAUSES.value)
    return [Cause("layer-ids", text["layer-ids"], *_layer_ids(live)),
            Cause("quantization", text["quantization"], *_quantization(live)),
            Cause("attention-backend", text["attention-backend"], *_attention_backend(live)),
            Cause("long-context", text["long-context"], _long_context(live))]


def _layer_ids(live: Live) -> tuple[str, tuple[Remediation, ...]]:
    """The drafter's target_layer_ids and the vLLM version's offset rule."""
    drafter = live.context.drafter or ModelConfig()
    target = live.context.target or ModelConfig()
    ids = drafter.layer_ids()
    if ids is None:
        if not live.context.serve_command_known:
            return UNKNOWN, ()
        return f"the drafter's target_layer_ids could not be read ({drafter.path or 'no drafter path'})", ()
    plus_one = live.vllm.layer_ids_plus_one
    rule = ("adds 1 to each id (the id is the layer whose output is read)" if plus_one else
            "passes the ids as they are (id i reads the output of layer i - 1)" if plus_one is False else
            "rule unknown (vLLM's source was not readable here)")
    facts_text = f"drafter target_layer_ids {ids}; vLLM {live.vllm.version or '?'} {rule}"
    if target.layers_text():
        facts_text += f"; target has {target.layers_text()} layers"
    layers = target.layers()
    config_file = shlex.quote(f"{drafter.path}/config.json")  # a path: pasted, it stays one word
    rem: list[Remediation] = []
    if plus_one is False:
        shifted = [i + 1 for i in ids]
        if layers is None or max(shifted) < layers:
            rem.append(Remediation(f"set dflash_config.target_layer_ids to {shifted} in "
                                   f"{config_file} (or upgrade vLLM to 0.22.0 or later)",
                                   "this vLLM reads id i as the output of layer i - 1; a drafter trained on the "
                                   f"output of layers {ids} needs {shifted} here (vLLM PRs #40727, #42704)"))
    elif plus_one:
        shifted = [i - 1 for i in ids]
        if min(shifted) >= 0:
            rem.append(Remediation(f"try dflash_config.target_layer_ids {shifted} in {config_file}",
                                   "if the ids were written for vLLM 0.20-0.21 (ids read one layer early), this "
                                   "vLLM (0.22+) adds 1 itself"))
    rem.append(Remediation(f"copy dflash_config.target_layer_ids from the drafter publisher's config.json into "
                           f"{config_file}", "the ids the drafter was trained with"))
    return facts_text, tuple(rem)


def _quantization(live: Live) -> tuple[str, tuple[Remediation, ...]]:
    ctx = live.context
    kv_cache = ctx.kv_cache_dtype if (ctx.kv_cache_dtype or "auto") != "auto" else None
    seen = {k: v for k, v in (("target quantization_config", ctx.target.quantization() if ctx.target else None),
                              ("drafter quantization_config", ctx.drafter.quantization() if ctx.drafter else None),
                              ("--quantization", ctx.quantization), ("--kv-cache-dtype", kv_cache)) if v}
    if seen:
        return "; ".join(f"{k}: {v}" for k, v in seen.items()), (Remediation(
            "serve an unquantized (bf16) drafter, and compare with the unquantized target",
            "z-lab/dflash#52: quantized pairs fall to a mean length of 1.5, an FP8 drafter to 0%"),)
    if ctx.serve_command_known or ctx.target is not None:
        return "no quantization seen in the target's or drafter's config or the serve flags", ()
    return UNKNOWN, ()


def _attention_backend(live: Live) -> tuple[str, tuple[Remediation, ...]]:
    ctx = live.context
    if not ctx.serve_command_known:
        return UNKNOWN, (Remediation("add --enforce-eager to the serve command and measure again",
                                     "rules out CUDA-graph capture of the drafter's attention (vLLM PR #48167)"),)
    text = (f"--attention-backend {ctx.attention_backend or '(vLLM picks)'}; "
            f"{'--enforce-eager (no CUDA graphs)' if ctx.enforce_eager else 'CUDA graphs on (no --enforce-eager)'}")
    if ctx.enforce_eager:
        return text, ()
    return text, (Remediation("add --enforce-eager to the serve command",
                              "rules out CUDA-graph capture of the drafter's non-causal attention"),
                  Remediation("add --attention-backend FLASH_ATTN to the serve command",
                              "avoids FlashInfer's non-causal drafts under CUDA graphs (vLLM PR #48167)"))


def _long_context(live: Live) -> str:
    sent = whole(live.workload.ok)
    avg_prompt = round(whole(live.workload.prompt_tokens) / sent, 1) if sent else None
    if avg_prompt is not None and avg_prompt < 2048:
        return f"the workload's prompts average {avg_prompt} tokens, so a collapse here is not from long contexts"
    return f"prompts average {avg_prompt} tokens"
