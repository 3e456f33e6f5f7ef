"""The server itself: how the start by `serve --exec --live` ended, /health, the models /v1/models lists, the
fields of its answers of the wrong type, and the doctor's workload requests."""

from __future__ import annotations

import shlex

from dflash_doctor.checks.live.codes import (
    ANSWER_MALFORMED,
    HEALTHY,
    MODELS,
    MODELS_UNREADABLE,
    SERVER_DIED,
    SERVER_NOT_READY,
    UNHEALTHY,
    UNREACHABLE,
    WORKLOAD_FAILED,
)
from dflash_doctor.checks.live.metrics import whole
from dflash_doctor.facts.live.live_shapes import Live
from dflash_doctor.model import Finding, Remediation, Status

__all__ = ["health_finding", "malformed_findings", "models_findings", "start_findings", "workload_findings"]


def start_findings(live: Live) -> list[Finding]:
    """Why nothing can be measured: the started server died or never became healthy, or /health did not answer."""
    url = str(live.url)
    server, health = live.server, live.health
    if server is not None and server.exit_status is not None:
        return [SERVER_DIED.finding(Status.FAIL, f"`vllm serve` exited with status {server.exit_status} after "
                                    f"{server.seconds} s, before /health answered",
                                    f"last lines of {server.log}:\n" + "\n".join(server.log_tail),
                                    evidence={"server": server.to_json()})]
    if health.error and server is not None and server.ready is False:
        return [SERVER_NOT_READY.finding(
            Status.FAIL, f"`vllm serve` (PID {server.pid}) did not answer /health within {server.seconds} s; it is "
            f"left running: {health.error}", "last lines of its log:\n" + "\n".join(server.log_tail),
            evidence={"server": server.to_json(), "health": health.to_json()},
            remediation=(Remediation(f"tail -f {shlex.quote(str(server.log))}",
                                     f"watch it start; stop it with kill {server.pid}"),))]
    if health.error:
        return [UNREACHABLE.finding(Status.FAIL, f"{url}/health: {health.error}",
                                    "Nothing was measured: the server did not answer its health endpoint.",
                                    evidence={"url": url, "health": health.to_json()},
                                    remediation=(Remediation(f"curl -sS -m 10 {shlex.quote(url + '/health')}",
                                                             "see what answers there (is `vllm serve` up, on this "
                                                             "port?)"),))]
    return []


def health_finding(live: Live) -> Finding:
    url, health = str(live.url), live.health
    if health.status != 200:
        return UNHEALTHY.finding(Status.FAIL, f"{url}/health answered HTTP {health.status}",
                                 "vLLM answers 200 while its engine is alive; anything else means the engine died or a "
                                 "proxy in front of it refuses.", evidence={"health": health.to_json()})
    return HEALTHY.finding(Status.PASS, f"{url}/health answered 200 in {health.seconds} s",
                           evidence={"health": health.to_json()})


def models_findings(live: Live) -> list[Finding]:
    models = live.models
    data = models.data or []
    if not data:
        why = models.error or f"HTTP {models.status}"
        hint = " (a 401: give the key's variable with --api-key-env)" if models.status == 401 else ""
        return [MODELS_UNREADABLE.finding(Status.WARN, f"/v1/models did not list a model: {why}{hint}",
                                          evidence={"models": models.to_json()})]
    names = ", ".join(f"{m.id} ({m.root})" if m.root not in (None, m.id) else str(m.id) for m in data)
    return [MODELS.finding(Status.PASS, f"serves {names}",
                           "vLLM's /v1/models lists the served model, not the drafter; the drafter is known from the "
                           "serve command (`dflash-doctor serve --exec --live -- vllm serve ...`).",
                           evidence={"models": [m.to_json() for m in data]})]


def malformed_findings(live: Live) -> list[Finding]:
    wrong = live.malformed
    if not wrong:
        return []
    named = "; ".join(f"{m.answer} {m.field}: {m.found}, not {m.expected}" for m in wrong[:6])
    return [ANSWER_MALFORMED.finding(
        Status.WARN, f"the server answered fields of the wrong type: {named}{'; ...' if len(wrong) > 6 else ''}",
        "vLLM's OpenAI server answers these fields with the types named; the doctor read each wrong one as absent, so "
        "the figures that use it (the model sent, the token counts, throughput) may be missing. Something that is "
        "not vLLM, or a proxy that rewrites the answers, may be answering at this address.",
        evidence={"malformed": [m.to_json() for m in wrong]})]


def workload_findings(live: Live) -> list[Finding]:
    work = live.workload
    if work.skipped:
        return [WORKLOAD_FAILED.finding(Status.FAIL, f"no workload sent: {work.skipped}",
                                        evidence={"workload": work.to_json()})]
    sent, ok = whole(work.sent), whole(work.ok)
    if ok == 0:
        errors = "; ".join(work.errors) or "none sent"
        return [WORKLOAD_FAILED.finding(Status.FAIL, f"none of {sent} /v1/completions requests succeeded: {errors}",
                                        evidence={"workload": work.to_json()})]
    if ok < sent:
        return [WORKLOAD_FAILED.finding(Status.WARN, f"{sent - ok} of {sent} /v1/completions requests failed: "
                                        f"{'; '.join(work.errors)}", evidence={"workload": work.to_json()})]
    return []
