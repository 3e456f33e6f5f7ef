"""Layer: the running server (check `live`): health, and whether DFlash's drafts are accepted.

Judges the `live` facts (facts/live.py): the speculative-decoding counters' differences over the doctor's
fixed greedy workload give the mean acceptance length (1 + accepted / drafts), the acceptance rate (accepted /
draft tokens), the per-position curve (accepted at position i / drafts) and draft tokens per step. A collapse
(length near 1, or position 0 near 0) fails and names the likely causes in order, each with the facts that
point at it (knowledge.live.COLLAPSE_CAUSES); a drop against a saved `--baseline` warns with both figures.
Counters that are not counts (NaN, infinities, negative or fractional values) fail and counters that go backwards
warn, with no figure derived from either; every fact is read defensively, as a saved report may hold anything.
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from dflash_doctor.check import Facts
from dflash_doctor.codes import Code
from dflash_doctor.facts.live import MAX_COUNT
from dflash_doctor.facts.live_shapes import Live
from dflash_doctor.knowledge.dflash_reports import DRAFTER_CONTEXT_RAISED
from dflash_doctor.knowledge.live import (
    BASELINE_DROP,
    COLLAPSE_CAUSES,
    COLLAPSE_LENGTH,
    COLLAPSE_POS0_RATE,
    LOW_LENGTH,
    MEAN_ACCEPTANCE_LENGTH,
)
from dflash_doctor.model import Finding, Remediation, Status

__all__ = ["LiveCheck", "figures", "invalid_counters"]


CODES: tuple[Code, ...] = (
    Code("live.not-given", "No running server to check",
         "The live check runs against a server: `dflash-doctor live http://HOST:PORT`, or `dflash-doctor serve --exec "
         "--live -- vllm serve ...`, which starts the server and checks it."),
    Code("live.unreachable", "The server did not answer /health",
         "The connection was refused, timed out, or what answered was not HTTP. Nothing else was measured. Check the "
         "host and port (vllm serve's --host/--port, default 8000) and that the server finished starting."),
    Code("live.unhealthy", "/health answered but not 200",
         "vLLM's /health answers 200 while its engine runs; an error status means the engine died or a proxy in front "
         "refuses the request."),
    Code("live.healthy", "/health answered 200",
         "The server is up and its engine alive (vLLM answers /health with 200 only while the engine runs)."),
    Code("live.models", "The models the server lists",
         "/v1/models: the served model's id and root. vLLM does not list the drafter there; the drafter comes from the "
         "serve command when the doctor started the server (`serve --exec --live`)."),
    Code("live.models-unreadable", "/v1/models listed no model",
         "Without a model id the doctor cannot send its workload. A 401 means the server wants an API key: name the "
         "environment variable that holds it with --api-key-env (the key itself is never printed or stored)."),
    Code("live.workload-failed", "The doctor's workload requests failed",
         "The fixed greedy /v1/completions requests returned errors or timed out; the counters then say little. The "
         "finding quotes the errors."),
    Code("live.metrics-unreadable", "/metrics could not be read",
         "vLLM serves Prometheus metrics at /metrics; without them the doctor cannot measure speculation. A proxy may "
         "hide the path, or the answer was not Prometheus text."),
    Code("live.no-spec-metrics", "The server exposes no speculative-decoding metrics",
         "vLLM registers vllm:spec_decode_num_drafts, _num_draft_tokens, _num_accepted_tokens and "
         "_num_accepted_tokens_per_pos only when a speculative config is given (vllm/v1/spec_decode/metrics.py): "
         "speculation is off, or the vLLM is older than these counters."),
    Code("live.no-drafts", "The drafter proposed nothing during the workload",
         "The spec-decode counters did not move while the doctor's requests ran: speculation is configured but was "
         "not used."),
    Code("live.answer-malformed", "The server answered fields of the wrong type",
         "A field of /v1/models (data, id, root, parent, max_model_len) or of a /v1/completions answer (usage, "
         "usage.completion_tokens, usage.prompt_tokens) did not have the type vLLM's OpenAI server gives it. The "
         "finding names each field, what was expected and what came; the doctor read those fields as absent, so "
         "the figures that use them may be missing. Something other than vLLM, or a proxy that rewrites answers, "
         "is answering."),
    Code("live.counters-invalid", "The speculative-decoding counters are not counts",
         "A Prometheus counter is a whole number that only grows from 0. NaN, +Inf/-Inf, a negative or fractional "
         "value (or a sum of samples out of range) in /metrics means the server's metrics are broken or rewritten "
         "on the way; acceptance cannot be measured from them, and the doctor fails rather than pass a number "
         "computed from NaN. The finding names each counter and its value."),
    Code("live.counters-backwards", "The speculative-decoding counters went backwards",
         "A counter was lower in /metrics after the workload than before it: the server restarted in between, or "
         "several servers answer at one address (a load balancer, each scrape from another replica). The "
         "differences are not the workload's, so acceptance is not judged; measure again against one server."),
    Code("live.acceptance", "DFlash drafts are accepted",
         "Mean acceptance length = 1 + accepted / drafts (vLLM's metrics.py docstring), acceptance rate = accepted / "
         "draft tokens, the per-position curve = accepted at position i / drafts, over the doctor's fixed greedy "
         "workload."),
    Code("live.acceptance-low", "DFlash acceptance is low",
         "A mean acceptance length under 1.6: speculation keeps little of what it costs. z-lab/dflash#52 reports 1.5 "
         "for a quantized pair against 3+ unquantized."),
    Code("live.collapse", "DFlash acceptance collapsed",
         "A mean acceptance length near 1 (under 1.2) or position 0 accepted under 10% of the time: the drafter does "
         "not track the target, and serving is slower than without speculation, silently. Known causes, in the order "
         "named: target_layer_ids read with the other vLLM version's offset (vLLM PRs #40727, #42704; sglang #37475), "
         "a quantized target or drafter (z-lab/dflash#52), FlashInfer non-causal drafts under CUDA graphs (vLLM PR "
         "#48167), long contexts (vLLM #54691). The finding lists the facts that point at each, and the fixes."),
    Code("live.baseline", "Acceptance holds against the baseline",
         "The mean acceptance length is within 10% of the saved run given with --baseline (same prompts)."),
    Code("live.baseline-drop", "Acceptance dropped against the baseline",
         "More than 10% lower mean acceptance length than the saved run (same prompts, greedy): the drafter, its "
         "config, the vLLM version or the serve flags changed. Both figures are in the finding."),
    Code("live.baseline-different-workload", "The baseline ran another workload",
         "The --baseline report's prompts, request count or token limit differ from this run's: acceptance depends "
         "on the prompts, so the figures are not compared."),
    Code("live.served-config", "The server serves what the command asked for",
         "/v1/models' max_model_len (vLLM's ModelCard, the engine's model_config.max_model_len) equals the requested "
         "--max-model-len, and the speculative-decoding counters have one position per requested "
         "num_speculative_tokens (vLLM labels vllm:spec_decode_num_accepted_tokens_per_pos with positions 0..k-1). "
         "The requested values come from the serve command: `serve --exec --live`, or `live URL -- vllm serve ...`."),
    Code("live.served-context-shorter", "The server serves a shorter context than was asked for",
         "/v1/models says max_model_len is below the requested --max-model-len: requests longer than it are refused "
         "(\"maximum context length is ... tokens\"). vLLM 0.33+ lowers the served length to a drafter's whose RoPE "
         "cannot grow (YaRN, longrope...) on the V2 runner, with only a log line (VllmConfig."
         "_limit_max_model_len_to_draft). Serve a drafter made for the requested context, or ask for the served "
         "length explicitly so that clients know it."),
    Code("live.served-k-differs", "The server drafts another number of tokens than was asked for",
         "The per-position acceptance counters have another number of positions than the requested "
         "num_speculative_tokens: vLLM took k from somewhere else (a speculators drafter served as `vllm serve "
         "DIR` before vLLM 0.29 drops the --speculative-config given beside it and uses the checkpoint's "
         "speculative_tokens), or the server was started with another command."),
    Code("live.server-died", "The server started by serve --exec --live died",
         "`vllm serve` exited before /health answered; the finding quotes the last lines of its log."),
    Code("live.server-not-ready", "The server started by serve --exec --live did not become healthy in time",
         "/health did not answer 200 within --live-wait seconds; the server is left running (its PID is stated)."),
)


def _num(value: Any) -> float | None:
    """A finite number, else None (a report's facts may hold anything of any type)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            number = float(value)
        except OverflowError:  # an int beyond any float
            return None
        return number if math.isfinite(number) else None
    return None


def _count(value: Any) -> float | None:
    """A counter's value: a whole number from 0 to MAX_COUNT, else None."""
    number = _num(value)
    return number if number is not None and 0 <= number <= MAX_COUNT and number.is_integer() else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _whole(value: Any) -> int:
    count = _count(value)
    return int(count) if count is not None else 0


def _position(key: Any) -> int:
    text = str(key)
    return int(text) if text.isascii() and text.isdigit() and len(text) < 10 else 1 << 30


def _figure(value: float, digits: int) -> float | None:
    return round(value, digits) if math.isfinite(value) else None


SPEC_ROLES = ("drafts", "draft_tokens", "accepted_tokens")


def invalid_counters(live: Live) -> dict[str, str]:
    """The spec-decode counters of either scrape that are not counts: those the collector found so (NaN, an
    infinity, a negative or fractional value, out of range; facts.live.tally) and any in the counters that is
    not a whole number (a report's facts edited by hand). Keys say which scrape: "drafts (before)". (The token
    counters, vllm:generation_tokens and vllm:prompt_tokens, only add a figure: one that is not a count is left
    out.)"""
    out: dict[str, str] = {}
    for when, scrape in (("before", live.metrics_before), ("after", live.metrics_after)):
        scrape = _dict(scrape)
        for name, value in _dict(scrape.get("invalid_counters")).items():
            if name in SPEC_ROLES or name.startswith("accepted_per_pos"):
                out[f"{name} ({when})"] = str(value)[:80]
        counters = _dict(scrape.get("counters"))
        for role in SPEC_ROLES:
            if role in counters and _count(counters[role]) is None:
                out[f"{role} ({when})"] = json.dumps(counters[role], default=str)[:80]
        per_pos = counters.get("accepted_per_pos")
        if per_pos is not None and not isinstance(per_pos, dict):
            out[f"accepted_per_pos ({when})"] = json.dumps(per_pos, default=str)[:80]
        for pos, value in _dict(per_pos).items():
            if _count(value) is None:
                out[f"accepted_per_pos[{pos}] ({when})"] = json.dumps(value, default=str)[:80]
    return dict(list(out.items())[:16])


def figures(live: Live) -> dict[str, Any]:
    """The derived figures of a live run (from the counters before and after its workload). A counter that is
    lower after the workload than before it is in "backwards" ([before, after]), and no figure is derived from
    it; a counter that is not a count reads as absent (see `invalid_counters`)."""
    before = _dict(_dict(live.metrics_before).get("counters"))
    after = _dict(_dict(live.metrics_after).get("counters"))
    out: dict[str, Any] = {}
    backwards: dict[str, list[float]] = {}

    def diff(role: str, now: Any, then: Any) -> float | None:
        a, b = _count(now), _count(then)
        if a is None:
            return None
        if b is not None and a < b:
            backwards[role] = [b, a]
            return None
        return a - (b or 0.0)

    drafts = diff("drafts", after.get("drafts"), before.get("drafts"))
    draft_tokens = diff("draft_tokens", after.get("draft_tokens"), before.get("draft_tokens"))
    accepted = diff("accepted_tokens", after.get("accepted_tokens"), before.get("accepted_tokens"))
    out.update({"drafts": drafts, "draft_tokens": draft_tokens, "accepted_tokens": accepted})
    pos_after, pos_before = _dict(after.get("accepted_per_pos")), _dict(before.get("accepted_per_pos"))
    per_pos = {p: diff(f"accepted_per_pos[{p}]", pos_after[p], pos_before.get(p))
               for p in sorted(pos_after, key=_position)}
    if drafts:
        out["mean_acceptance_length"] = _figure(1.0 + (accepted or 0.0) / drafts, 4)
        out["draft_tokens_per_step"] = _figure((draft_tokens or 0.0) / drafts, 4)
        if per_pos:
            out["per_position"] = [_figure((v or 0.0) / drafts, 4) for v in per_pos.values()]
    if draft_tokens:
        out["acceptance_rate"] = _figure((accepted or 0.0) / draft_tokens, 4)
    work = _dict(live.workload)
    wall = _num(work.get("wall_s"))
    tokens = _count(work.get("completion_tokens"))
    if wall and wall > 0 and tokens is not None:
        out["output_tokens_per_s"] = _figure(tokens / wall, 2)
    out["wall_s"] = wall
    gen = diff("vllm:generation_tokens", after.get("vllm:generation_tokens"), before.get("vllm:generation_tokens"))
    if gen is not None:
        out["generation_tokens"] = gen
    if backwards:
        out["backwards"] = backwards
    return out


def _curve(per_position: list[float]) -> str:
    shown = ", ".join(f"{v:.2f}" for v in per_position[:16])
    return f"[{shown}{', ...' if len(per_position) > 16 else ''}]"


class LiveCheck:
    id: ClassVar[str] = "live"
    layer: ClassVar[str] = "live"
    title: ClassVar[str] = "Running server: health and DFlash acceptance"
    codes: ClassVar[tuple[Code, ...]] = tuple(c for c in CODES if c.id.startswith("live."))
    needs: ClassVar[frozenset[str]] = frozenset({"live"})
    after: ClassVar[frozenset[str]] = frozenset()
    requires_gpu: ClassVar[bool] = False
    on_request: ClassVar[bool] = True
    """Runs only when asked for (`dflash-doctor live URL`, `serve --exec --live`, `--only live`)."""

    def judge(self, facts: Facts) -> Iterable[Finding]:
        live = facts.section(Live)
        if not live.given:
            return [Finding("live.not-given", Status.SKIP, "running server: skipped, no URL given",
                            remediation=(Remediation("dflash-doctor live http://127.0.0.1:8000",
                                                     "check the server that `vllm serve` started"),))]
        url = str(live.url)
        server = _dict(live.server)
        if server.get("exit_status") is not None:
            tail = "\n".join(str(line) for line in _list(server.get("log_tail")))
            return [Finding("live.server-died", Status.FAIL,
                            f"`vllm serve` exited with status {server['exit_status']} after {server.get('seconds')} s, "
                            "before /health answered",
                            f"last lines of {server.get('log')}:\n{tail}", evidence={"server": server})]
        health = live.health
        if health.get("error") and server.get("ready") is False:
            return [Finding("live.server-not-ready", Status.FAIL,
                            f"`vllm serve` (PID {server.get('pid')}) did not answer /health within {server.get('seconds')} "
                            f"s; it is left running: {health['error']}",
                            "last lines of its log:\n" + "\n".join(str(line) for line in _list(server.get("log_tail"))),
                            evidence={"server": server, "health": health},
                            remediation=(Remediation(f"tail -f {shlex.quote(str(server.get('log')))}",
                                                     "watch it start; stop it with kill "
                                                     f"{server.get('pid')}"),))]
        if health.get("error"):
            return [Finding("live.unreachable", Status.FAIL, f"{url}/health: {health['error']}",
                            "Nothing was measured: the server did not answer its health endpoint.",
                            evidence={"url": url, "health": health},
                            remediation=(Remediation(f"curl -sS -m 10 {shlex.quote(url + '/health')}",
                                                     "see what answers there (is `vllm serve` up, on this port?)"),))]
        findings: list[Finding] = []
        if health.get("status") != 200:
            findings.append(Finding("live.unhealthy", Status.FAIL, f"{url}/health answered HTTP {health.get('status')}",
                                    "vLLM answers 200 while its engine is alive; anything else means the engine died "
                                    "or a proxy in front of it refuses.", evidence={"health": health}))
        else:
            findings.append(Finding("live.healthy", Status.PASS, f"{url}/health answered 200 in {health.get('seconds')} s",
                                    evidence={"health": health}))
        findings.extend(self._models(live))
        findings.extend(_served(live))
        findings.extend(self._malformed(live))
        findings.extend(self._workload(live))
        # the acceptance verdict first: it is the headline of a running server
        return self._acceptance(live) + findings

    def _models(self, live: Live) -> list[Finding]:
        models = live.models
        data = [m for m in _list(models.get("data")) if isinstance(m, dict)]
        if not data:
            why = models.get("error") or f"HTTP {models.get('status')}"
            hint = " (a 401: give the key's variable with --api-key-env)" if models.get("status") == 401 else ""
            return [Finding("live.models-unreadable", Status.WARN, f"/v1/models did not list a model: {why}{hint}",
                            evidence={"models": models})]
        names = ", ".join(f"{m.get('id')} ({m.get('root')})" if m.get("root") not in (None, m.get("id"))
                          else str(m.get("id")) for m in data)
        return [Finding("live.models", Status.PASS, f"serves {names}",
                        "vLLM's /v1/models lists the served model, not the drafter; the drafter is known from the "
                        "serve command (`dflash-doctor serve --exec --live -- vllm serve ...`).",
                        evidence={"models": data})]

    def _malformed(self, live: Live) -> list[Finding]:
        wrong = [m for m in live.malformed if isinstance(m, dict)]
        if not wrong:
            return []
        named = "; ".join(f"{m.get('answer')} {m.get('field')}: {m.get('found')}, not {m.get('expected')}"
                          for m in wrong[:6])
        return [Finding("live.answer-malformed", Status.WARN,
                        f"the server answered fields of the wrong type: {named}{'; ...' if len(wrong) > 6 else ''}",
                        "vLLM's OpenAI server answers these fields with the types named; the doctor read each wrong "
                        "one as absent, so the figures that use it (the model sent, the token counts, throughput) "
                        "may be missing. Something that is not vLLM, or a proxy that rewrites the answers, may be "
                        "answering at this address.", evidence={"malformed": wrong})]

    def _workload(self, live: Live) -> list[Finding]:
        work = live.workload
        if work.get("skipped"):
            return [Finding("live.workload-failed", Status.FAIL, f"no workload sent: {work['skipped']}",
                            evidence={"workload": work})]
        sent, ok = _whole(work.get("sent")), _whole(work.get("ok"))
        if ok == 0:
            errors = "; ".join(str(e) for e in _list(work.get("errors"))) or "none sent"
            return [Finding("live.workload-failed", Status.FAIL,
                            f"none of {sent} /v1/completions requests succeeded: {errors}", evidence={"workload": work})]
        if ok < sent:
            return [Finding("live.workload-failed", Status.WARN,
                            f"{sent - ok} of {sent} /v1/completions requests failed: "
                            f"{'; '.join(str(e) for e in _list(work.get('errors')))}",
                            evidence={"workload": work})]
        return []

    def _acceptance(self, live: Live) -> list[Finding]:
        after = _dict(live.metrics_after)
        names = live.metric_names
        if after.get("error") or after.get("status") != 200 or not after.get("samples"):
            why = after.get("error") or (f"HTTP {after.get('status')}" if after.get("status") != 200 else
                                         f"no Prometheus samples in {after.get('bytes')} bytes")
            return [Finding("live.metrics-unreadable", Status.WARN, f"/metrics could not be read: {why}",
                            "Without the counters nothing can be said about speculation.",
                            evidence={"metrics_after": {k: v for k, v in after.items() if k != "counters"}})]
        invalid = invalid_counters(live)
        if invalid:
            shown = "; ".join(f"{k} = {v}" for k, v in invalid.items())
            return [Finding("live.counters-invalid", Status.FAIL,
                            f"the server's speculative-decoding counters are not counts: {shown}",
                            "A Prometheus counter is a whole number that only grows from 0; NaN, an infinity, a "
                            "negative or fractional value means the server's metrics are broken (or something in "
                            "front of it rewrites them). Acceptance cannot be measured from them, so nothing is "
                            "judged.", evidence={"invalid_counters": invalid, "metric_names": names.get("names")})]
        counters = _dict(after.get("counters"))
        if not any(k in counters for k in ("drafts", "draft_tokens", "accepted_tokens")):
            return [Finding("live.no-spec-metrics", Status.WARN,
                            "the server exposes no speculative-decoding metrics: speculation is off, or the vLLM is "
                            "older than its spec-decode counters",
                            f"Looked for {', '.join(sorted(str(n) for n in _dict(names.get('names')).values()))} (names from "
                            f"{names.get('from')}). vLLM registers them only when --speculative-config is given.",
                            evidence={"metric_names": names},
                            remediation=(Remediation("vllm serve TARGET --speculative-config "
                                                     "'{\"method\": \"dflash\", \"model\": \"DRAFTER\", "
                                                     "\"num_speculative_tokens\": 15}'",
                                                     "start the server with the DFlash drafter"),))]
        fig = figures(live)
        evidence = {"figures": fig, "formula": MEAN_ACCEPTANCE_LENGTH.value, "metric_names": names.get("names")}
        if fig.get("backwards"):
            went = "; ".join(f"{k} {v[0]:g} -> {v[1]:g}" for k, v in list(fig["backwards"].items())[:6])
            return [Finding("live.counters-backwards", Status.WARN,
                            f"the speculative-decoding counters went backwards during the workload: {went}",
                            "A counter only grows while its server runs: one that is lower after the workload than "
                            "before it means the server restarted in between, or more than one server answers at "
                            "this address (a load balancer, each scrape from another replica). The differences are "
                            "not the workload's, so nothing is judged.", evidence=evidence,
                            remediation=(Remediation(f"dflash-doctor live {shlex.quote(str(live.url))}",
                                                     "measure again, against one server's own address, while "
                                                     "it is not restarting"),))]
        if not fig.get("drafts"):
            return [Finding("live.no-drafts", Status.WARN,
                            "the workload ran but the drafter proposed nothing (the draft counters did not move)",
                            "Speculation is configured but was not used for these requests (e.g. all of them were "
                            "shorter than one step, or speculation is disabled for the batch).", evidence=evidence)]
        length = _num(fig.get("mean_acceptance_length")) or 1.0
        pos = [p for p in _list(fig.get("per_position")) if isinstance(p, float)]
        pos0 = pos[0] if pos else None
        summary = (f"mean acceptance length {length:.2f}, acceptance rate {_num(fig.get('acceptance_rate')) or 0:.1%}, "
                   f"{_num(fig.get('draft_tokens_per_step')) or 0:g} draft tokens/step, per position {_curve(pos)}, "
                   f"{fig.get('output_tokens_per_s')} output tokens/s over {fig.get('wall_s')} s")
        out: list[Finding] = []
        if length < COLLAPSE_LENGTH.value or (pos0 is not None and pos0 < COLLAPSE_POS0_RATE.value):
            out.append(self._collapse(live, summary, evidence, pos0))
        elif length < LOW_LENGTH.value:
            out.append(Finding("live.acceptance-low", Status.WARN, f"low DFlash acceptance: {summary}",
                               f"A mean acceptance length under {LOW_LENGTH.value} keeps little of what speculation "
                               f"costs ({LOW_LENGTH.source}).", evidence=evidence))
        else:
            out.append(Finding("live.acceptance", Status.PASS, f"DFlash drafts are accepted: {summary}",
                               evidence=evidence))
        out.extend(self._baseline(live, fig))
        return out

    def _collapse(self, live: Live, summary: str, evidence: dict[str, Any], pos0: float | None) -> Finding:
        causes = _causes(live)
        lines = [f"{i}. {c['cause']}: {c['facts']}" for i, c in enumerate(causes, 1)]
        remediation = tuple(r for c in causes for r in c["remediation"])
        return Finding("live.collapse", Status.FAIL,
                       f"DFlash acceptance collapsed: {summary}",
                       f"Below a mean length of {COLLAPSE_LENGTH.value} (or position 0 under "
                       f"{COLLAPSE_POS0_RATE.value:.0%}) speculation is slower than none. Likely causes, in order:\n"
                       + "\n".join(lines),
                       evidence={**evidence, "position0_rate": pos0, "likely_causes":
                                 [{k: v for k, v in c.items() if k != "remediation"} for c in causes]},
                       remediation=remediation)

    def _baseline(self, live: Live, fig: Mapping[str, Any]) -> list[Finding]:
        base = live.baseline
        if not isinstance(base, dict):
            return []
        then = _num(_dict(base.get("figures")).get("mean_acceptance_length"))
        now = _num(fig.get("mean_acceptance_length"))
        where = base.get("path")
        if base.get("digest") != live.workload.get("digest"):
            return [Finding("live.baseline-different-workload", Status.WARN,
                            f"the baseline {where} ran other prompts or settings: not compared",
                            "Acceptance depends on the prompts: compare runs of the same --prompts, --requests and "
                            "token limit.", evidence={"baseline": base})]
        if then is None or now is None:
            return []
        figures_text = f"mean acceptance length {now:.2f} now, {then:.2f} in {where}"
        if then > 0 and (then - now) / then > BASELINE_DROP.value:
            return [Finding("live.baseline-drop", Status.WARN, f"acceptance dropped against the baseline: {figures_text}",
                            f"A drop of more than {BASELINE_DROP.value:.0%} with the same prompts: something changed in "
                            "the drafter, its config, the vLLM version or the serve flags.",
                            evidence={"now": dict(fig), "baseline": base})]
        return [Finding("live.baseline", Status.PASS, f"acceptance holds against the baseline: {figures_text}",
                        evidence={"baseline": base})]


def _causes(live: Live) -> list[dict[str, Any]]:
    """The known causes of a collapse, in knowledge.live's order, each with what the facts say about it."""
    ctx = live.context
    vllm = live.vllm
    drafter = _dict(ctx.get("drafter"))
    target = _dict(ctx.get("target"))
    known = bool(ctx.get("serve_command_known"))
    unknown = "not known here: run it as `dflash-doctor serve --exec --live -- vllm serve ...` to judge it"
    out: list[dict[str, Any]] = []
    text = dict(COLLAPSE_CAUSES.value)
    # 1. layer ids and the vLLM version's offset rule
    ids = drafter.get("target_layer_ids")
    plus_one = vllm.get("layer_ids_plus_one")
    layers = target.get("num_hidden_layers")
    rem: list[Remediation] = []
    if isinstance(ids, list) and ids and all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        rule = ("adds 1 to each id (the id is the layer whose output is read)" if plus_one else
                "passes the ids as they are (id i reads the output of layer i - 1)" if plus_one is False else
                "rule unknown (vLLM's source was not readable here)")
        facts_text = f"drafter target_layer_ids {ids}; vLLM {vllm.get('version') or '?'} {rule}"
        if layers:
            facts_text += f"; target has {layers} layers"
        layers = layers if isinstance(layers, int) and not isinstance(layers, bool) else None
        config_file = shlex.quote(f"{drafter.get('path')}/config.json")  # a path: pasted, it stays one word
        if plus_one is False:
            shifted = [i + 1 for i in ids]
            if layers is None or max(shifted) < layers:
                rem.append(Remediation(f"set dflash_config.target_layer_ids to {shifted} in "
                                       f"{config_file} (or upgrade vLLM to 0.22.0 or later)",
                                       "this vLLM reads id i as the output of layer i - 1; a drafter trained on the "
                                       f"output of layers {ids} needs {shifted} here (vLLM PRs #40727, "
                                       "#42704)"))
        elif plus_one:
            shifted = [i - 1 for i in ids]
            if min(shifted) >= 0:
                rem.append(Remediation(f"try dflash_config.target_layer_ids {shifted} in {config_file}",
                                       "if the ids were written for vLLM 0.20-0.21 (ids read one layer early), this "
                                       "vLLM (0.22+) adds 1 itself"))
        rem.append(Remediation(f"copy dflash_config.target_layer_ids from the drafter publisher's config.json into "
                               f"{config_file}", "the ids the drafter was trained with"))
    else:
        facts_text = unknown if not known else f"the drafter's target_layer_ids could not be read ({drafter.get('path') or 'no drafter path'})"
    out.append({"cause": "layer-ids", "about": text["layer-ids"], "facts": facts_text, "remediation": rem})
    # 2. quantization
    quant = {k: v for k, v in (("target quantization_config", (target.get("quantization_config") or {}).get("quant_method")
                                if isinstance(target.get("quantization_config"), dict) else target.get("quantization_config")),
                               ("drafter quantization_config", (drafter.get("quantization_config") or {}).get("quant_method")
                                if isinstance(drafter.get("quantization_config"), dict) else drafter.get("quantization_config")),
                               ("--quantization", ctx.get("quantization")),
                               ("--kv-cache-dtype", ctx.get("kv_cache_dtype") if str(ctx.get("kv_cache_dtype") or "auto") != "auto" else None))
             if v}
    if quant:
        qtext = "; ".join(f"{k}: {v}" for k, v in quant.items())
        qrem = [Remediation("serve an unquantized (bf16) drafter, and compare with the unquantized target",
                            "z-lab/dflash#52: quantized pairs fall to a mean length of 1.5, an FP8 drafter to 0%")]
    else:
        qtext = "no quantization seen in the target's or drafter's config or the serve flags" if (known or target) else unknown
        qrem = []
    out.append({"cause": "quantization", "about": text["quantization"], "facts": qtext, "remediation": qrem})
    # 3. attention backend under CUDA graphs
    backend = ctx.get("attention_backend")
    eager = ctx.get("enforce_eager")
    if known:
        btext = (f"--attention-backend {backend or '(vLLM picks)'}; "
                 f"{'--enforce-eager (no CUDA graphs)' if eager else 'CUDA graphs on (no --enforce-eager)'}")
        brem = [] if eager else [Remediation("add --enforce-eager to the serve command",
                                             "rules out CUDA-graph capture of the drafter's non-causal attention"),
                                 Remediation("add --attention-backend FLASH_ATTN to the serve command",
                                             "avoids FlashInfer's non-causal drafts under CUDA graphs (vLLM PR #48167)")]
    else:
        btext, brem = unknown, [Remediation("add --enforce-eager to the serve command and measure again",
                                            "rules out CUDA-graph capture of the drafter's attention (vLLM PR #48167)")]
    out.append({"cause": "attention-backend", "about": text["attention-backend"], "facts": btext, "remediation": brem})
    # 4. long contexts
    work = live.workload
    sent = _whole(work.get("ok"))
    avg_prompt = round(_whole(work.get("prompt_tokens")) / sent, 1) if sent else None
    out.append({"cause": "long-context", "about": text["long-context"],
                "facts": f"the workload's prompts average {avg_prompt} tokens, so a collapse here is not from long "
                         "contexts" if avg_prompt is not None and avg_prompt < 2048 else f"prompts average {avg_prompt} tokens",
                "remediation": []})
    return out


def _served(live: Live) -> list[Finding]:
    """What the server serves against what its command asked for: max_model_len (/v1/models) and k (the
    per-position counters' positions). Nothing when the command is not known."""
    context = _dict(live.context)
    models = [m for m in _list(live.models.get("data")) if isinstance(m, dict)]
    served_len = _count(models[0].get("max_model_len")) if models else None
    requested_len = _count(context.get("requested_max_model_len"))
    spec = _dict(context.get("speculative_config"))
    requested_k = _count(spec.get("num_speculative_tokens"))
    per_pos = _dict(_dict(_dict(live.metrics_after).get("counters")).get("accepted_per_pos"))
    served_k = len(per_pos) if per_pos else None
    evidence = {"served_max_model_len": served_len, "requested_max_model_len": requested_len,
                "served_k": served_k, "requested_k": requested_k}
    out: list[Finding] = []
    if served_len is not None and requested_len is not None and served_len < requested_len:
        drafter = _dict(context.get("drafter"))
        drafter_len = _count(drafter.get("max_position_embeddings"))
        rope = drafter.get("rope_type")
        if drafter_len is not None and drafter_len == served_len:
            cause = (f"the served length is the drafter's context ({int(drafter_len)}, RoPE {rope or 'default'}): vLLM "
                     "0.33+ lowers max_model_len to a drafter's whose RoPE cannot simply grow, with only a log line "
                     "(\"The draft model's max_model_len ... reducing max_model_len\")")
        else:
            cause = "vLLM lowered it when it started (its log says why), or the server runs another command"
        fixes = [Remediation(f"serve a drafter made for {int(requested_len)} tokens",
                             "the served context is what the drafter can follow")]
        fixes.append(Remediation(f"start the server with --max-model-len {int(served_len)}",
                                 f"ask for the {int(served_len)} tokens it serves, so that clients know the limit"))
        out.append(Finding("live.served-context-shorter", Status.FAIL,
                           f"the server serves max_model_len {int(served_len)}, shorter than the requested "
                           f"--max-model-len {int(requested_len)}: requests longer than {int(served_len)} tokens are "
                           f"refused; {cause}",
                           detail=f"Source: {DRAFTER_CONTEXT_RAISED.source}.",
                           evidence={**evidence, "drafter_max_position_embeddings": drafter_len, "drafter_rope": rope},
                           remediation=tuple(fixes)))
    elif served_len is not None and requested_len is None and context.get("serve_command_known"):
        # No --max-model-len: the command asked for the target's own context. Only the drafter's length as the served
        # one tells that vLLM lowered it (a tokenizer cap or the RoPE rules may make the target's own shorter).
        drafter = _dict(context.get("drafter"))
        drafter_len = _count(drafter.get("max_position_embeddings"))
        target_len = _count(_dict(context.get("target")).get("max_position_embeddings"))
        if drafter_len == served_len and target_len is not None and served_len < target_len:
            out.append(Finding(
                "live.served-context-shorter", Status.WARN,
                f"the server serves max_model_len {int(served_len)}, the drafter's context (RoPE "
                f"{drafter.get('rope_type') or 'default'}), below the target's max_position_embeddings "
                f"{int(target_len)}: vLLM 0.33+ lowers it to a drafter's whose RoPE cannot simply grow, with only a "
                f"log line; requests longer than {int(served_len)} tokens are refused",
                detail=f"Source: {DRAFTER_CONTEXT_RAISED.source}.",
                evidence={**evidence, "drafter_max_position_embeddings": drafter_len,
                          "target_max_position_embeddings": target_len},
                remediation=(Remediation(f"serve a drafter made for {int(target_len)} tokens",
                                         "the served context is what the drafter can follow"),
                             Remediation(f"start the server with --max-model-len {int(served_len)}",
                                         "say the length it serves, so that clients know the limit"))))
    if served_k is not None and requested_k is not None and served_k != requested_k:
        out.append(Finding("live.served-k-differs", Status.WARN,
                           f"the server drafts {served_k} tokens per step (vllm:spec_decode_num_accepted_tokens_per_pos "
                           f"has positions 0-{served_k - 1}), not the requested num_speculative_tokens "
                           f"{int(requested_k)}",
                           evidence=evidence))
    if not out and (requested_len is not None or requested_k is not None) and (
            served_len is not None or served_k is not None):
        said = []
        if served_len is not None and requested_len is not None:
            said.append(f"max_model_len {int(served_len)}")
        if served_k is not None and requested_k is not None:
            said.append(f"{served_k} speculative tokens")
        if said:
            out.append(Finding("live.served-config", Status.PASS,
                               f"the server serves {' and '.join(said)}, as the command asked", evidence=evidence))
    return out

