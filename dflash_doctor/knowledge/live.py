"""What a running vLLM server tells about its speculative decoding, and what a collapse of it means.

The metric names are read from the installed vLLM's own source where the doctor runs beside it
(`dflash_doctor.facts.live.live`); the names below are the fallback, and they are also how a name the server
exposes is recognised. The causes of a collapse are the known ones, each with its source.
"""

from __future__ import annotations

from dflash_doctor.knowledge import Fact

__all__ = [
           "BASELINE_DROP",
           "COLLAPSE_CAUSES",
           "COLLAPSE_LENGTH",
           "COLLAPSE_POS0_RATE",
           "LOW_LENGTH",
           "MEAN_ACCEPTANCE_LENGTH",
           "METRICS_FILE",
           "SPEC_DECODE_METRICS",
]

METRICS_FILE: Fact[str] = Fact(
    value="vllm/v1/spec_decode/metrics.py",
    source="vllm/v1/spec_decode/metrics.py class SpecDecodingProm: the four prometheus_client.Counter(name=...) "
    "calls; prometheus_client exposes a counter NAME as NAME_total",
    read_from="vllm 0.20.1 wheel (vllm-0.20.1-1-cp38-abi3-manylinux_2_35_x86_64.whl)",
)

SPEC_DECODE_METRICS: Fact[dict[str, str]] = Fact(
    value={
        "drafts": "vllm:spec_decode_num_drafts",
        "draft_tokens": "vllm:spec_decode_num_draft_tokens",
        "accepted_tokens": "vllm:spec_decode_num_accepted_tokens",
        "accepted_per_pos": "vllm:spec_decode_num_accepted_tokens_per_pos",
    },
    source="vllm/v1/spec_decode/metrics.py SpecDecodingProm.__init__: `name=\"vllm:spec_decode_num_drafts\"`, "
    "`\"vllm:spec_decode_num_draft_tokens\"`, `\"vllm:spec_decode_num_accepted_tokens\"`, "
    "`\"vllm:spec_decode_num_accepted_tokens_per_pos\"` (label `position`, one per speculative token); the class "
    "is only active when the server has a speculative config (`spec_decoding_enabled = speculative_config is not "
    "None`)",
    read_from="vllm 0.20.1 wheel",
    note="Roles are assigned by the name's ending, so a renamed prefix in a later vLLM is still read.",
)

MEAN_ACCEPTANCE_LENGTH: Fact[str] = Fact(
    value="1 + accepted_tokens / drafts",
    source="vllm/v1/spec_decode/metrics.py SpecDecodingProm docstring: \"The mean acceptance length "
    "(conventionally including bonus tokens) can be calculated using: 1 + (rate(accepted_tokens_total) / "
    "rate(num_drafts))\"; acceptance rate = accepted_tokens / draft_tokens; per-position rate = "
    "accepted_tokens_per_pos / num_drafts",
    read_from="vllm 0.20.1 wheel",
)

COLLAPSE_LENGTH: Fact[float] = Fact(
    value=1.2,
    source="the doctor's threshold: a mean acceptance length of 1.0 means no draft token is ever accepted; DFlash "
    "drafters report mean lengths of about 3 to 7 (z-lab/dflash README); z-lab/dflash#52 reports 1.5 for a "
    "quantized pair and 0.0% accepted for an FP8 drafter",
    read_from="z-lab/dflash README and issue #52",
    note="Below this, speculation costs more than it saves: each step pays for k draft tokens and keeps ~1.",
)

COLLAPSE_POS0_RATE: Fact[float] = Fact(
    value=0.1,
    source="the doctor's threshold on vllm:spec_decode_num_accepted_tokens_per_pos{position=\"0\"} / num_drafts: "
    "the first draft token is the easiest to accept; below 10% the drafter does not track the target at all",
    read_from="vllm 0.20.1 metrics.py (per-position counter)",
)

LOW_LENGTH: Fact[float] = Fact(
    value=1.6,
    source="z-lab/dflash#52: mean acceptance 1.5 with a quantized target, against 3+ for the same drafter unquantized",
    read_from="z-lab/dflash issue #52",
)

BASELINE_DROP: Fact[float] = Fact(
    value=0.10,
    source="the doctor's threshold: a relative drop of the mean acceptance length of more than 10% against a saved "
    "run with the same prompts is more than the run-to-run spread of greedy decoding (which is exact)",
    read_from="dflash-doctor",
)

COLLAPSE_CAUSES: Fact[tuple[tuple[str, str], ...]] = Fact(
    value=(
        ("layer-ids", ("target_layer_ids read with the other vLLM version's offset (vLLM PRs #40727, #42704) or taken "
         "from the uniform-spacing fallback (sglang #37475)")),
        ("quantization", "a quantized target or drafter (z-lab/dflash#52: mean acceptance 1.5; an FP8 drafter at 0.0%)"),
        ("attention-backend", "FlashInfer drafts non-causal attention wrongly under CUDA graphs (vLLM PR #48167)"),
        ("long-context", "long contexts lower acceptance (vLLM #54691)"),
    ),
    source="vLLM PRs #40727 and #42704 (target_layer_ids + 1 from 0.22.0), sglang #37475 (layer-id fallback), "
    "z-lab/dflash#52 (quantization), vLLM PR #48167 (FlashInfer non-causal under CUDA graphs), vLLM #54691 "
    "(long contexts)",
    read_from="issue threads as cited; the offset rule itself is knowledge.dflash.LAYER_IDS_PLUS_ONE_MARKER",
    note="In the order the doctor names them: the first is silent and common, the last the least specific.",
)
