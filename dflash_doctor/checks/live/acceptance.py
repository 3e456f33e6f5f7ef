"""DFlash acceptance from the server's metrics: whether the counters can be read and are counts, then the
figures (checks.live.metrics) judged: accepted, low, or collapsed (with its likely causes), and against a saved
`--baseline` run of the same workload."""

from __future__ import annotations

import shlex

from dflash_doctor.checks.live.causes import collapse_causes
from dflash_doctor.checks.live.codes import (
    ACCEPTANCE,
    ACCEPTANCE_LOW,
    BASELINE,
    BASELINE_DIFFERENT_WORKLOAD,
    BASELINE_DROP,
    COLLAPSE,
    COUNTERS_BACKWARDS,
    COUNTERS_INVALID,
    METRICS_UNREADABLE,
    NO_DRAFTS,
    NO_SPEC_METRICS,
)
from dflash_doctor.checks.live.metrics import finite, invalid_counters, measure
from dflash_doctor.facts.live.live_shapes import Figures, Live, MetricsScrape
from dflash_doctor.knowledge.live import (
    BASELINE_DROP as BASELINE_DROP_FRACTION,
)
from dflash_doctor.knowledge.live import (
    COLLAPSE_LENGTH,
    COLLAPSE_POS0_RATE,
    LOW_LENGTH,
    MEAN_ACCEPTANCE_LENGTH,
)
from dflash_doctor.model import JSON, Finding, Remediation, Status

__all__ = ["acceptance_findings"]


def _curve(per_position: list[float]) -> str:
    shown = ", ".join(f"{v:.2f}" for v in per_position[:16])
    return f"[{shown}{', ...' if len(per_position) > 16 else ''}]"


def acceptance_findings(live: Live) -> list[Finding]:
    after = live.metrics_after or MetricsScrape()
    names = live.metric_names
    if after.error or after.status != 200 or not after.samples:
        why = after.error or (f"HTTP {after.status}" if after.status != 200 else
                              f"no Prometheus samples in {after.bytes} bytes")
        return [METRICS_UNREADABLE.finding(Status.WARN, f"/metrics could not be read: {why}",
                                           "Without the counters nothing can be said about speculation.",
                                           evidence={"metrics_after": after.without_counters()})]
    invalid = invalid_counters(live)
    if invalid:
        shown = "; ".join(f"{k} = {v}" for k, v in invalid.items())
        return [COUNTERS_INVALID.finding(
            Status.FAIL, f"the server's speculative-decoding counters are not counts: {shown}",
            "A Prometheus counter is a whole number that only grows from 0; NaN, an infinity, a negative or "
            "fractional value means the server's metrics are broken (or something in front of it rewrites them). "
            "Acceptance cannot be measured from them, so nothing is judged.",
            evidence={"invalid_counters": invalid, "metric_names": names.names})]
    if all(value is None for value in after.counters.spec().values()):
        return [NO_SPEC_METRICS.finding(
            Status.WARN, "the server exposes no speculative-decoding metrics: speculation is off, or the vLLM is "
            "older than its spec-decode counters",
            f"Looked for {', '.join(sorted(names.names.values()))} (names from {names.source}). vLLM registers "
            "them only when --speculative-config is given.",
            evidence={"metric_names": names.to_json()},
            remediation=(Remediation("vllm serve TARGET --speculative-config "
                                     "'{\"method\": \"dflash\", \"model\": \"DRAFTER\", \"num_speculative_tokens\": 15}'",
                                     "start the server with the DFlash drafter"),))]
    fig = measure(live)
    evidence: dict[str, JSON] = {"figures": fig.to_json(), "formula": MEAN_ACCEPTANCE_LENGTH.value,
                                 "metric_names": names.names}
    if fig.backwards:
        went = "; ".join(f"{k} {v[0]:g} -> {v[1]:g}" for k, v in list(fig.backwards.items())[:6])
        return [COUNTERS_BACKWARDS.finding(
            Status.WARN, f"the speculative-decoding counters went backwards during the workload: {went}",
            "A counter only grows while its server runs: one that is lower after the workload than before it means "
            "the server restarted in between, or more than one server answers at this address (a load balancer, "
            "each scrape from another replica). The differences are not the workload's, so nothing is judged.",
            evidence=evidence,
            remediation=(Remediation(f"dflash-doctor live {shlex.quote(str(live.url))}",
                                     "measure again, against one server's own address, while it is not "
                                     "restarting"),))]
    if not fig.drafts:
        return [NO_DRAFTS.finding(
            Status.WARN, "the workload ran but the drafter proposed nothing (the draft counters did not move)",
            "Speculation is configured but was not used for these requests (e.g. all of them were shorter than one "
            "step, or speculation is disabled for the batch).", evidence=evidence)]
    length = finite(fig.mean_acceptance_length) or 1.0
    pos = [p for p in fig.per_position or [] if p is not None]
    pos0 = pos[0] if pos else None
    summary = (f"mean acceptance length {length:.2f}, acceptance rate {finite(fig.acceptance_rate) or 0:.1%}, "
               f"{finite(fig.draft_tokens_per_step) or 0:g} draft tokens/step, per position {_curve(pos)}, "
               f"{fig.output_tokens_per_s} output tokens/s over {fig.wall_s} s")
    out: list[Finding] = []
    if length < COLLAPSE_LENGTH.value or (pos0 is not None and pos0 < COLLAPSE_POS0_RATE.value):
        out.append(_collapse(live, summary, evidence, pos0))
    elif length < LOW_LENGTH.value:
        out.append(ACCEPTANCE_LOW.finding(Status.WARN, f"low DFlash acceptance: {summary}",
                                          f"A mean acceptance length under {LOW_LENGTH.value} keeps little of what "
                                          f"speculation costs ({LOW_LENGTH.source}).", evidence=evidence))
    else:
        out.append(ACCEPTANCE.finding(Status.PASS, f"DFlash drafts are accepted: {summary}", evidence=evidence))
    out.extend(_baseline(live, fig))
    return out


def _collapse(live: Live, summary: str, evidence: dict[str, JSON], pos0: float | None) -> Finding:
    causes = collapse_causes(live)
    lines = [f"{i}. {c.cause}: {c.facts}" for i, c in enumerate(causes, 1)]
    return COLLAPSE.finding(
        Status.FAIL, f"DFlash acceptance collapsed: {summary}",
        f"Below a mean length of {COLLAPSE_LENGTH.value} (or position 0 under {COLLAPSE_POS0_RATE.value:.0%}) "
        "speculation is slower than none. Likely causes, in order:\n" + "\n".join(lines),
        evidence={**evidence, "position0_rate": pos0, "likely_causes": [c.evidence() for c in causes]},
        remediation=tuple(r for c in causes for r in c.remediation))


def _baseline(live: Live, fig: Figures) -> list[Finding]:
    base = live.baseline
    if base is None:
        return []
    then = finite(base.figures.mean_acceptance_length)
    now = finite(fig.mean_acceptance_length)
    where = base.path
    if base.digest != live.workload.digest:
        return [BASELINE_DIFFERENT_WORKLOAD.finding(
            Status.WARN, f"the baseline {where} ran other prompts or settings: not compared",
            "Acceptance depends on the prompts: compare runs of the same --prompts, --requests and token limit.",
            evidence={"baseline": base.to_json()})]
    if then is None or now is None:
        return []
    figures_text = f"mean acceptance length {now:.2f} now, {then:.2f} in {where}"
    if then > 0 and (then - now) / then > BASELINE_DROP_FRACTION.value:
        return [BASELINE_DROP.finding(
            Status.WARN, f"acceptance dropped against the baseline: {figures_text}",
            f"A drop of more than {BASELINE_DROP_FRACTION.value:.0%} with the same prompts: something changed in the "
            "drafter, its config, the vLLM version or the serve flags.",
            evidence={"now": fig.to_json(), "baseline": base.to_json()})]
    return [BASELINE.finding(Status.PASS, f"acceptance holds against the baseline: {figures_text}",
                             evidence={"baseline": base.to_json()})]
