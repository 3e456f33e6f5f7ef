"""What the live run measured: the speculative-decoding counters' differences over the doctor's workload and
the figures derived from them (mean acceptance length 1 + accepted / drafts, acceptance rate accepted / draft
tokens, the per-position curve accepted at position i / drafts, draft tokens per step), and the counters that
are not counts."""

from __future__ import annotations

import json
import math

from dflash_doctor.facts.live.live_shapes import MAX_COUNT, Counters, Figures, Live
from dflash_doctor.model import JSON

__all__ = ["SPEC_ROLES", "count", "figures", "finite", "invalid_counters", "measure", "whole"]

SPEC_ROLES = ("drafts", "draft_tokens", "accepted_tokens")


def finite(value: float | None) -> float | None:
    """A finite number, else None (a saved report's number may be beyond any float)."""
    if value is None:
        return None
    try:
        number = float(value)
    except OverflowError:  # an int beyond any float
        return None
    return number if math.isfinite(number) else None


def count(value: float | None) -> float | None:
    """A counter's value: a whole number from 0 to MAX_COUNT, else None."""
    number = finite(value)
    return number if number is not None and 0 <= number <= MAX_COUNT and number.is_integer() else None


def whole(value: int | None) -> int:
    """A count of the facts (requests, tokens) as a whole number from 0 to MAX_COUNT; 0 for anything else."""
    number = count(value)
    return int(number) if number is not None else 0


def _position(key: str) -> int:
    return int(key) if key.isascii() and key.isdigit() and len(key) < 10 else 1 << 30


def _figure(value: float, digits: int) -> float | None:
    return round(value, digits) if math.isfinite(value) else None


def invalid_counters(live: Live) -> dict[str, str]:
    """The spec-decode counters of either scrape that are not counts: those the collector found so (NaN, an
    infinity, a negative or fractional value, out of range; facts.live.live.tally) and any in the counters that is
    not a whole number (a report's facts edited by hand). Keys say which scrape: "drafts (before)". (The token
    counters, vllm:generation_tokens and vllm:prompt_tokens, only add a figure: one that is not a count is left
    out.)"""
    out: dict[str, str] = {}
    for when, scrape in (("before", live.metrics_before), ("after", live.metrics_after)):
        if scrape is None:
            continue
        for name, value in scrape.invalid_counters.items():
            if name in SPEC_ROLES or name.startswith("accepted_per_pos"):
                out[f"{name} ({when})"] = value[:80]
        for role, number in scrape.counters.spec().items():
            if number is not None and count(number) is None:
                out[f"{role} ({when})"] = json.dumps(number)[:80]
        for pos, number in (scrape.counters.accepted_per_pos or {}).items():
            if count(number) is None:
                out[f"accepted_per_pos[{pos}] ({when})"] = json.dumps(number)[:80]
    return dict(list(out.items())[:16])


def measure(live: Live) -> Figures:
    """The figures of a live run (from the counters before and after its workload). A counter that is lower
    after the workload than before it is in `backwards` ([before, after]), and no figure is derived from it; a
    counter that is not a count reads as absent (see `invalid_counters`)."""
    before = live.metrics_before.counters if live.metrics_before else Counters()
    after = live.metrics_after.counters if live.metrics_after else Counters()
    backwards: dict[str, list[float]] = {}

    def diff(role: str, now: float | None, then: float | None) -> float | None:
        a, b = count(now), count(then)
        if a is None:
            return None
        if b is not None and a < b:
            backwards[role] = [b, a]
            return None
        return a - (b or 0.0)

    drafts = diff("drafts", after.drafts, before.drafts)
    draft_tokens = diff("draft_tokens", after.draft_tokens, before.draft_tokens)
    accepted = diff("accepted_tokens", after.accepted_tokens, before.accepted_tokens)
    pos_after, pos_before = after.accepted_per_pos or {}, before.accepted_per_pos or {}
    per_pos = [diff(f"accepted_per_pos[{p}]", pos_after[p], pos_before.get(p)) for p in sorted(pos_after, key=_position)]
    work = live.workload
    wall = finite(work.wall_s)
    tokens = count(work.completion_tokens)
    gen = diff("vllm:generation_tokens", after.generation_tokens, before.generation_tokens)
    return Figures(
        drafts=drafts, draft_tokens=draft_tokens, accepted_tokens=accepted,
        mean_acceptance_length=_figure(1.0 + (accepted or 0.0) / drafts, 4) if drafts else None,
        draft_tokens_per_step=_figure((draft_tokens or 0.0) / drafts, 4) if drafts else None,
        per_position=[_figure((v or 0.0) / drafts, 4) for v in per_pos] if drafts and per_pos else None,
        acceptance_rate=_figure((accepted or 0.0) / draft_tokens, 4) if draft_tokens else None,
        output_tokens_per_s=_figure(tokens / wall, 2) if wall and wall > 0 and tokens is not None else None,
        wall_s=wall, generation_tokens=gen, backwards=backwards or None)


def figures(live: Live) -> dict[str, JSON]:
    """`measure`'s figures as JSON (what a --baseline report's run measured)."""
    return measure(live).to_json()
