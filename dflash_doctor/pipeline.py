"""The doctor's one pipeline: a `Request` in, a `Run` out.

    collect -> judge (the golden baseline too: a check judged after the others) -> the fix verification (the
    installer's dry runs) -> finish (the redacted report, the exit code)

Every command that runs the doctor calls it: the default run, `serve`, `live`, `baseline save`, `fix`, and each
node of `fleet`; `judge` enters it with the facts of a saved report instead of collecting them. A failure of
the doctor itself, or SIGTERM/SIGINT (with `handle_signals`), still gives a (partial) run: the report is
written with what is certain and why the rest is not.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping
from dataclasses import field
from typing import Any

from dflash_doctor.check import Check
from dflash_doctor.facts.fix import baseline, dryrun
from dflash_doctor.facts.python.interpreter import InterpreterError
from dflash_doctor.fix.verify import mark_unchecked, unchecked_reason, verified_commands, verify_results
from dflash_doctor.model import CheckResult, Finding, Status, exit_code, interrupted_result
from dflash_doctor.registry import LOAD_TIMEOUT_S, load_checks
from dflash_doctor.report import document as report_module
from dflash_doctor.report import redact
from dflash_doctor.report.document import host_info
from dflash_doctor.request import Request, RequestError
from dflash_doctor.runner import ProgressFn, Signals, Stopped, judge, run_checks, select
from dflash_doctor.shape import frozen_dataclass, section_json

__all__ = ["Run", "judge_saved", "load_selected", "run"]


@frozen_dataclass(frozen=True)
class Run:
    """One run of the doctor: the report as it may leave the machine (redacted), the results rendered from
    it, the exit code, and the raw facts for in-process use only (never written out)."""

    report: dict[str, Any]
    results: list[CheckResult]
    exit_code: int
    sections: Mapping[str, object] = field(default_factory=dict, repr=False)
    lingering: bool = False
    """The run's worker thread was still busy when it ended (the caller should not wait for it)."""
    raw_results: list[CheckResult] = field(default_factory=list, repr=False)  # unredacted, for in-process use only


def load_selected(request: Request, timeout_s: float | None = None,
                  asked: set[str] | None = None) -> tuple[list[Check], list[Finding]]:
    """The checks the request selects (--only/--skip; a check that runs only when asked for, `on_request`, when
    it is `asked` for: by default `Request.asked`), and the findings of the plugins that could not be loaded; RequestError for
    a name that is no check and no layer."""

    loaded, errors = load_checks(timeout_s=LOAD_TIMEOUT_S if timeout_s is None else timeout_s)
    problems = [e.finding() for e in errors]
    checks = [lc.check for lc in loaded]
    known = {c.id for c in checks} | {c.layer for c in checks}
    unknown = [name for name in [*request.only, *request.skip] if name not in known]
    if unknown:
        raise RequestError(f"unknown check or layer: {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    asked = request.asked() if asked is None else asked
    wanted = [c for c in checks if not c.on_request or c.id in asked or c.layer in asked]
    extra = [c.id for c in wanted if c.on_request and c.id in asked]
    return select(wanted, [*request.only, *extra] if request.only else [], request.skip), problems


def _plugin_result(problems: list[Finding]) -> list[CheckResult]:
    if not problems:
        return []
    return [CheckResult("plugins", "doctor", "Check plugins", Status.ERROR, tuple(problems))]


def _given_secrets(request: Request, sections: Mapping[str, object] | None = None) -> list[str]:
    """The secrets in what the checks were given: the serve command's (`serve.argv`; in `sections`, what vLLM's
    own parser bound to a secret) and the live check's key (the variable its `api_key_env` names). Every output
    masks them by value (report.redact)."""

    serve = request.options.get("serve")
    argv = serve.get("argv") if isinstance(serve, Mapping) else None
    live = request.options.get("live")
    return [*request.secrets,
            *redact.given_secrets([str(w) for w in argv or []], getattr(live, "api_key_env", None), sections)]


def run(request: Request, *, handle_signals: bool = False, on_event: ProgressFn | None = None) -> Run:
    """Collect, judge (the baseline too, when asked), verify the fixes, and finish the report.

    RequestError (before anything is judged) for an interpreter that does not answer the handshake
    (`facts.collect`), an unusable baseline file or an unknown --only/--skip name. `on_event` is told the
    run's progress (`context.ProgressFn`)."""

    # From the doctor's start where the run had a head start (facts.head_start): the timeline shows its imports.
    started = request.head_start.started_at if request.head_start is not None else time.monotonic()
    request = dataclasses.replace(request, python=request.interpreter)
    checks, problems = load_selected(request, request.timeout_s)
    try:
        outcome = run_checks(checks, request.context, handle_signals=handle_signals, on_event=on_event)
    except InterpreterError as exc:
        raise RequestError(f"--python {exc}") from None
    if request.head_start is not None:
        for name, (began, ended) in request.head_start.spans().items():
            outcome.timeline.event("head-start-start", name, began)
            outcome.timeline.event("head-start-end", name, ended)
    results = _plugin_result(problems) + outcome.results
    if outcome.stopped is not None:
        results.append(outcome.stopped)
    # Where each collection step started, relative to the run's start, and how long it took: the critical path.
    extra: dict[str, Any] = {"options": request.recorded_options(), "timeline": outcome.timeline.steps(since=started)}
    partial = outcome.partial
    if request.verify_fixes and outcome.stopped is None:
        results, partial = _verify_fixes(results, outcome.sections, extra, request, handle_signals, started)
    extra["wall_s"] = round(time.monotonic() - started, 3)
    host_record = {**host_info(), **request.host}
    return _finish(request, results, outcome.sections, extra, host_record, partial, outcome.lingering)


def judge_saved(request: Request, saved: Mapping[str, Any], source: str) -> Run:
    """Judge the facts of a saved report (`source`) again with this version's checks, as `dflash-doctor judge`
    does: the checks it ran, with its options; its baseline file hashes and dry runs judged again, nothing of
    the environment read again. RequestError for an unusable baseline file or an unknown --only/--skip name."""

    # The checks the report ran, and the baseline when one is given now.
    asked = report_module.check_ids(saved) | request.asked()
    checks, problems = load_selected(request, asked=asked)
    checks = [c for c in checks if c.id in asked]
    sections = dict(report_module.sections_of(saved))
    if request.baseline:
        # The baseline given now, against the file hashes the report saved (a run given --baseline saves them;
        # a report without them has those parts reported as not compared). Nothing of the environment is read.

        try:
            sections["baseline"] = baseline.section(request.baseline)
        except baseline.BaselineError as exc:
            raise RequestError(str(exc)) from exc
    options = report_module.options_of(saved)
    python = report_module.target_python(saved)
    ctx = dataclasses.replace(request, python=python, no_gpu=bool(options.get("no_gpu")),
                              target_archs=tuple(options.get("target_archs") or ())).context
    results = _plugin_result(problems) + judge(checks, sections, ctx)
    partial = bool(saved.get("partial"))
    options.update({"strict": request.strict, "baseline": request.baseline})
    extra: dict[str, Any] = {"judged_from": source, "options": options}
    dry_runs = saved.get("dry_runs")
    if isinstance(dry_runs, dict) and dry_runs.get("items"):
        extra["dry_runs"] = dry_runs  # what the installer said then, judged again now
        results = verify_results(results, dry_runs)
    return _finish(dataclasses.replace(request, python=python, secrets=()), results, sections, extra,
                   report_module.host_of(saved), partial, given=False)


def _verify_fixes(results: list[CheckResult], sections: Mapping[str, object], extra: dict[str, Any],
                  request: Request, handle_signals: bool, started: float) -> tuple[list[CheckResult], bool]:
    """Ask the target's installer what each failing finding's fixes would do (facts.fix.dryrun), keep those facts in
    the report (`dry_runs`) and judge them onto the remediations (fix.verify). Stopped meanwhile
    (SIGTERM, Ctrl-C), the installers are stopped and the results stay as judged, with the stop (the run is then
    partial: the second value)."""

    signals = Signals(handle_signals)
    signals.install()
    try:
        facts = dryrun.collect(verified_commands(results), sections, python=request.python,
                               timeout_s=request.timeout_s, cwd=os.getcwd(), target_archs=request.target_archs)
    except (KeyboardInterrupt, Stopped) as exc:  # dryrun.collect stopped its installers and removed their files
        signals.stopped()
        name = exc.args[0] if isinstance(exc, Stopped) else "SIGINT"
        extra["dry_runs"] = {"error": f"stopped by {name}"}
        return [*results, interrupted_result(name, time.monotonic() - started, sections,
                                             "asking the installer about the fixes")], True
    except Exception as exc:  # noqa: BLE001 - the fixes stay as they were, unverified, and the report says why
        extra["dry_runs"] = {"error": f"{type(exc).__name__}: {exc}"}
        return results, False
    finally:
        signals.restore()
    extra["dry_runs"] = section_json(facts)  # the report's, as collected
    return verify_results(results, facts), False


def _finish(request: Request, results: list[CheckResult], sections: Mapping[str, object], extra: dict[str, Any],
            host: Mapping[str, Any] | None, partial: bool, lingering: bool = False, given: bool = True) -> Run:
    """The report (redacted) and the exit code; where the facts break the report, the report of what is
    certain, and why (`report.document.finish`)."""

    masked = _given_secrets(request, sections) if given else []
    if partial:
        extra["partial"] = True
    # Every fix in the report says whether the installer vouched for it; the run's own results stay as judged.
    shown = mark_unchecked(results, unchecked_reason(extra.get("dry_runs"), request.python))
    report, kept = report_module.finish(shown, sections, request.python, request.strict, extra, host,
                                        request.keep_hosts, masked)
    rendered = [CheckResult.from_dict(c) for c in report["checks"]]
    raw = list(results) if kept is None else kept
    return Run(report, rendered, exit_code(raw, request.strict), sections if kept is None else {}, lingering, raw)
