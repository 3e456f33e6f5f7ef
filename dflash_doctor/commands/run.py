"""The default command, `dflash-doctor [options]`: run the doctor, then write and render its report.

Exit codes: 0 no fail and no error; 1 any fail or error (with --strict, any warn too; a partial report
is an error: SIGTERM or SIGINT once stops the run and writes the partial report, with one line on stderr);
2 the command line or an input file was wrong (argparse's own convention), nothing judged; 128 + the
signal's number (143, 130) when a second SIGTERM/SIGINT ends the doctor before it wrote the report.

Every output (terminal, --json, --junit, --markdown, --format github) is made from one redacted report.
`run_doctor(args)` is the run itself, for commands that embed it (serve, fleet, baseline save).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from dflash_doctor.check import Check
from dflash_doctor.commands.options import UsageError, parse_run_args, split_names, usage_error
from dflash_doctor.context import Context
from dflash_doctor.model import CheckResult, Finding, Status, exit_code

__all__ = ["DoctorRun", "emit", "exit_if_lingering", "finish", "live_progress", "load_baseline", "load_selected", "main",
           "plugin_result", "run_doctor", "verify_fixes"]

OnEvent = Callable[[str, str, float], None]


def load_selected(only: list[str], skip: list[str], err: Any,
                  timeout_s: float | None = None) -> tuple[list[Check], list[Finding]]:
    from dflash_doctor.registry import LOAD_TIMEOUT_S, load_checks
    from dflash_doctor.runner import select

    loaded, errors = load_checks(timeout_s=LOAD_TIMEOUT_S if timeout_s is None else timeout_s)
    problems = [e.finding() for e in errors]
    checks = [lc.check for lc in loaded]
    known = {c.id for c in checks} | {c.layer for c in checks}
    unknown = [name for name in only + skip if name not in known]
    if unknown:
        err.write(f"dflash-doctor: error: unknown check or layer: {', '.join(unknown)} "
                  f"(known: {', '.join(sorted(known))})\n")
        raise SystemExit(2)
    return select(checks, only, skip), problems


def plugin_result(problems: list[Finding]) -> list[CheckResult]:
    if not problems:
        return []
    return [CheckResult("plugins", "doctor", "Check plugins", Status.ERROR, tuple(problems))]


@dataclass(frozen=True)
class DoctorRun:
    """One run of the doctor: the report as it may leave the machine (redacted), the results rendered from
    it, the exit code, and the raw facts for in-process use only (never written out)."""

    report: dict[str, Any]
    results: list[CheckResult]
    exit_code: int
    sections: Mapping[str, Any] = field(default_factory=dict, repr=False)
    lingering: bool = False
    raw_results: list[CheckResult] = field(default_factory=list, repr=False)  # unredacted, for in-process use only


def load_baseline(path: str | None) -> dict[str, Any] | None:
    if not path:
        return None
    from dflash_doctor.checks.fix import baseline

    try:
        return baseline.load(path)
    except baseline.BaselineError as exc:
        raise UsageError(str(exc)) from exc


def _verify_interpreter(args: argparse.Namespace) -> None:
    """The target interpreter answers the handshake, or the run is a usage error (one line, exit 2)."""
    from dflash_doctor.facts.interpreter import InterpreterError, absolute, verify

    if args.python is None:
        return
    args.python = absolute(args.python)
    if args.python == sys.executable:  # the doctor's own interpreter: it is running this very code
        return
    try:
        verify(args.python, args.timeout, cwd=os.getcwd())
    except InterpreterError as exc:
        raise UsageError(f"--python {exc}") from None


def finish(results: list[CheckResult], sections: Mapping[str, Any], python: str, args: argparse.Namespace,
            extra: dict[str, Any], host: Mapping[str, Any] | None, partial: bool,
            lingering: bool = False, secrets: Sequence[str] = ()) -> DoctorRun:
    from dflash_doctor.checks.fix.verify import mark_unchecked, unchecked_reason
    from dflash_doctor.render import report as report_module
    from dflash_doctor.render.redact import redact_report

    strict = bool(args.strict)
    if partial:
        extra["partial"] = True
    # Every fix in the report says whether the installer vouched for it; the run's own results stay as judged.
    shown = mark_unchecked(results, unchecked_reason(extra.get("dry_runs"), python))
    raw = report_module.build(shown, sections, python, strict, extra, host=host)
    report = redact_report(raw, keep_hosts=bool(args.keep_hosts), secrets=secrets)
    rendered = [CheckResult.from_dict(c) for c in report["checks"]]
    return DoctorRun(report, rendered, exit_code(results, strict), sections, lingering, list(results))


def _options(args: argparse.Namespace, target_archs: Sequence[str]) -> dict[str, Any]:
    return {"no_gpu": bool(getattr(args, "no_gpu", False)), "target_archs": list(target_archs),
            "only": split_names(args.only), "skip": split_names(args.skip), "strict": bool(args.strict),
            "profile": getattr(args, "profile_applied", None), "baseline": args.baseline}


def given_secrets(options: Mapping[str, Any] | None) -> list[str]:
    """The secrets in what the checks were given: the serve command's (`serve.argv`) and the live check's key
    (the variable its `api_key_env` names). Every output masks them by value (render.redact)."""
    from dflash_doctor.render import redact

    serve = (options or {}).get("serve")
    argv = serve.get("argv") if isinstance(serve, Mapping) else None
    live = (options or {}).get("live")
    return redact.given_secrets([str(w) for w in argv or []], getattr(live, "api_key_env", None))


def run_doctor(args: argparse.Namespace, *, options: Mapping[str, Any] | None = None,
               host: Mapping[str, Any] | None = None, handle_signals: bool = False,
               on_event: OnEvent | None = None, secrets: Sequence[str] = ()) -> DoctorRun:
    """Run the doctor as `dflash-doctor [options]` does, without rendering.

    `args` comes from `parse_run_args`; `options` reach the checks as `Context.options` (e.g. the serve
    command line); `host` is merged into the report's host record. A failure of the doctor itself, or
    SIGTERM/SIGINT with `handle_signals`, still returns a (partial) run. UsageError for a bad --baseline
    file; SystemExit(2) for an unknown --only/--skip name. `on_event` is told the run's progress
    (`runner.ProgressFn`; `live_progress` gives one that draws it). `secrets` (beside those in `options`,
    `given_secrets`) are masked by value in the report.
    """
    from dflash_doctor.render.report import host_info
    from dflash_doctor.runner import failure_result, run_checks

    started = time.monotonic()
    _verify_interpreter(args)
    expected = load_baseline(args.baseline)
    checks, problems = load_selected(split_names(args.only), split_names(args.skip), sys.stderr, args.timeout)
    # A check that runs only when asked for (the live server check): named in --only, or its options given.
    asked = set(split_names(args.only)) | set(options or {})
    checks = [c for c in checks if not getattr(c, "on_request", False) or c.id in asked or c.layer in asked]
    ctx = Context(
        python=args.python,
        cwd=os.getcwd(),
        no_gpu=args.no_gpu,
        target_archs=tuple(split_names(args.target_arch)),
        verify_hashes=args.verify_hashes,
        timeout_s=args.timeout,
        options=dict(options or {}),
    )
    outcome = run_checks(checks, ctx, handle_signals=handle_signals, on_event=on_event)
    results = plugin_result(problems) + outcome.results
    partial = outcome.partial
    if outcome.stopped is not None:
        results.append(outcome.stopped)
    elif expected is not None:
        from dflash_doctor.checks.fix import (
            baseline as baseline_module,  # only when asked: it is not cheap to import
        )
        from dflash_doctor.facts.file_hashes import with_file_hashes

        try:
            # The file hashes are facts like any other: collected first, then judged (and saved with the result).
            sections = with_file_hashes(outcome.sections, baseline_module.hashed_names(expected))
            results.append(baseline_module.judge(expected, sections, args.baseline))
        except Exception as exc:  # noqa: BLE001 - the report is still written, with the doctor's error
            results.append(failure_result(exc, "comparing with the baseline"))
            partial = True
    extra: dict[str, Any] = {"options": _options(args, ctx.target_archs)}
    if getattr(args, "verify_fixes", False) and outcome.stopped is None:
        results = verify_fixes(results, outcome.sections, extra, python=args.python, timeout_s=args.timeout,
                               target_archs=ctx.target_archs)
    extra["wall_s"] = round(time.monotonic() - started, 3)
    host_record = {**host_info(), **(host or {})}
    masked = [*secrets, *given_secrets(options)]
    try:
        return finish(results, outcome.sections, args.python, args, extra, host_record, partial, outcome.lingering,
                      masked)
    except Exception as exc:  # noqa: BLE001 - the facts broke the report: write what is certain, and why
        kept = [replace(r, facts={}) for r in results if r.id != "doctor"] + [failure_result(exc, "building the report")]
        return finish(kept, {}, args.python, args, extra, host_record, True, outcome.lingering, masked)


def verify_fixes(results: list[CheckResult], sections: Mapping[str, Any], extra: dict[str, Any], *, python: str,
                 timeout_s: float, target_archs: Sequence[str] = ()) -> list[CheckResult]:
    """Ask the target's installer what each failing finding's fixes would do (facts.dryrun), keep those facts in
    the report (`dry_runs`) and judge them onto the remediations (checks.verify)."""
    from dflash_doctor.checks.fix.verify import verified_commands, verify_results
    from dflash_doctor.facts import dryrun

    try:
        facts = dryrun.collect(verified_commands(results), sections, python=python, timeout_s=timeout_s,
                               cwd=os.getcwd(), target_archs=target_archs)
    except Exception as exc:  # noqa: BLE001 - the fixes stay as they were, unverified, and the report says why
        extra["dry_runs"] = {"error": f"{type(exc).__name__}: {exc}"}
        return results
    extra["dry_runs"] = facts
    return verify_results(results, facts)


def _progress_shown(args: argparse.Namespace) -> bool:
    """The terminal view goes to stdout, and stdout is a terminal."""
    outputs = (getattr(args, "json", None), getattr(args, "junit", None), getattr(args, "markdown", None))
    try:
        tty = sys.stdout.isatty()
    except (AttributeError, ValueError):
        tty = False
    return tty and "-" not in outputs and getattr(args, "format", "terminal") == "terminal"


@contextlib.contextmanager
def live_progress(args: argparse.Namespace) -> Iterator[OnEvent | None]:
    """A transient status line on the terminal while the block runs (the `on_event` for `run_doctor`), or
    None where nothing may be added to stdout: not a terminal, a report on stdout, `--format github`.
    The line is gone when the block ends, before the report is rendered."""
    if not _progress_shown(args):
        yield None
        return
    from dflash_doctor.render.plain import plain_output
    from dflash_doctor.render.progress import status_line

    dumb = os.environ.get("TERM", "") in ("dumb", "unknown")  # no cursor control there: the plain line
    with status_line(sys.stdout, plain=bool(args.no_color) or plain_output(sys.stdout) or dumb) as on_event:
        yield on_event


def _write(kind: str, path: str, write: Any, report: Mapping[str, Any]) -> bool:
    from dflash_doctor.documents.jsondoc import shown_path

    try:
        write(report, path)
    except BrokenPipeError:
        raise
    except OSError as exc:
        sys.stderr.write(f"dflash-doctor: cannot write the {kind} report to {shown_path(path)}: {exc.strerror or exc}\n")
        return False
    except Exception as exc:  # noqa: BLE001 - one broken output must not cost the others
        sys.stderr.write(f"dflash-doctor: internal error writing the {kind} report to {shown_path(path)}: "
                         f"{type(exc).__name__}: {exc}\n")
        return False
    if path != "-":  # say where: a profile (ticket) may have chosen the name
        sys.stderr.write(f"dflash-doctor: {kind} report written to {shown_path(os.path.abspath(path))}\n")
    return True


def emit(run: DoctorRun, args: argparse.Namespace) -> int:
    """Write the requested files and render the chosen view; returns the exit code (2 if an output failed)."""
    report, ok = run.report, True
    if args.json:
        from dflash_doctor.render import json_report

        ok &= _write("JSON", args.json, json_report.write, report)
    if args.junit:
        from dflash_doctor.render import junit

        ok &= _write("JUnit", args.junit, junit.write, report)
    if args.markdown:
        from dflash_doctor.render import markdown

        ok &= _write("Markdown", args.markdown, markdown.write, report)
    if "-" not in (args.json, args.junit, args.markdown):
        try:
            if args.format == "github":
                from dflash_doctor.render import github

                github.render(report, sys.stdout)
            else:
                from dflash_doctor.render.terminal import TerminalReporter, make_console, plain_output

                plain = args.no_color or plain_output(sys.stdout)
                TerminalReporter(make_console(sys.stdout, plain), plain, args.verbose).render(report, run.results)
            sys.stdout.flush()
        except BrokenPipeError:
            raise  # the reader went away: main() ends quietly
        except Exception as exc:  # noqa: BLE001
            sys.stderr.write(f"dflash-doctor: internal error rendering the report: {type(exc).__name__}: {exc}\n")
            ok = False
    return run.exit_code if ok else max(run.exit_code, 2)


def exit_if_lingering(run: DoctorRun, code: int) -> None:
    """A collector ignored the stop or its timeout: end the process now with `code`, its output
    flushed, rather than let Python's exit wait for that thread."""
    if run.lingering:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main(argv: Sequence[str]) -> int:
    try:
        args = parse_run_args(argv)
        with live_progress(args) as on_event:
            run = run_doctor(args, handle_signals=True, on_event=on_event)
    except UsageError as exc:
        return usage_error(exc)
    stop = next((f for r in run.results if r.id == "doctor" for f in r.findings if f.id == "doctor.interrupted"), None)
    code = emit(run, args)
    if stop is not None:
        sys.stderr.write(f"dflash-doctor: {stop.title} (exit {code})\n")
    exit_if_lingering(run, code)
    return code
