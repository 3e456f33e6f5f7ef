"""The live layer: a running server's metrics and served config, judged for speculative decoding's acceptance
(check `live`).

Judges the `live` facts (facts/live/live.py): how the server's start ended and its answers (`server`); the
speculative-decoding counters' differences over the doctor's fixed greedy workload (`metrics`) give the mean
acceptance length, the acceptance rate, the per-position curve and draft tokens per step, judged in
`acceptance`: a collapse (length near 1, or position 0 near 0) fails and names the likely causes in order
(`causes`, knowledge.live.COLLAPSE_CAUSES); a drop against a saved `--baseline` warns with both figures.
Counters that are not counts fail and counters that go backwards warn, with no figure derived from either. What
the server serves is held against what its command asked for (`served`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from dflash_doctor.check import Check, Facts
from dflash_doctor.checks.live.acceptance import acceptance_findings
from dflash_doctor.checks.live.codes import CODES, NOT_GIVEN
from dflash_doctor.checks.live.served import served_findings
from dflash_doctor.checks.live.server import (
    health_finding,
    malformed_findings,
    models_findings,
    start_findings,
    workload_findings,
)
from dflash_doctor.codes import Code
from dflash_doctor.facts.live.live_shapes import Live
from dflash_doctor.model import Finding, Remediation, Status

__all__ = ["CODES", "LiveCheck"]


class LiveCheck(Check):
    id: ClassVar[str] = "live"
    layer: ClassVar[str] = "live"
    title: ClassVar[str] = "Running server: health and DFlash acceptance"
    codes: ClassVar[tuple[Code, ...]] = CODES
    needs: ClassVar[frozenset[str]] = frozenset({"live"})
    on_request: ClassVar[bool] = True
    """Runs only when asked for (`dflash-doctor live URL`, `serve --exec --live`, `--only live`)."""

    def judge(self, facts: Facts) -> Iterable[Finding]:
        live = facts.section(Live)
        if not live.given:
            return [NOT_GIVEN.finding(Status.SKIP, "running server: skipped, no URL given",
                                      remediation=(Remediation("dflash-doctor live http://127.0.0.1:8000",
                                                               "check the server that `vllm serve` started"),))]
        stopped = start_findings(live)
        if stopped:
            return stopped
        findings = [health_finding(live), *models_findings(live), *served_findings(live), *malformed_findings(live),
                    *workload_findings(live)]
        # the acceptance verdict first: it is the headline of a running server
        return acceptance_findings(live) + findings
