"""Command line: `dflash-doctor [options]`, `judge REPORT.json`, `list`, `explain ID`, `profiles`, and the
module commands `serve`, `baseline`, `merge`, `fleet` (dflash_doctor/commands/).

Exit codes: 0 no fail and no error; 1 any fail or error (with --strict, any warn too; a partial report
is an error: SIGTERM or SIGINT once stops the run and writes the partial report, with one line on stderr);
2 the command line or an input file was wrong (argparse's own convention), nothing judged; 128 + the
signal's number (143, 130) when a second SIGTERM/SIGINT ends the doctor before it wrote the report.

Every output (terminal, --json, --junit, --markdown, --format github) is made from one redacted report.
`run_doctor(args)` is the run itself, for commands that embed it (serve, fleet, baseline save).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dflash_doctor import __version__
from dflash_doctor.check import Check, Context
from dflash_doctor.model import CheckResult, Finding, Status, exit_code

__all__ = ["DoctorRun", "UsageError", "check_count", "check_number", "emit", "main", "parse_run_args", "run_doctor",
           "run_parser"]

# Subcommands that live in their own modules: dflash_doctor.commands.<name>.main(argv) -> exit code.
MODULE_COMMANDS = ("serve", "baseline", "merge", "fleet")
SUBCOMMANDS = ("judge", "list", "explain", "profiles", *MODULE_COMMANDS)
OUTPUT_OPTIONS = ("json", "junit", "markdown")
MAX_TIMEOUT_S = 86_400.0  # a day: past this a per-probe timeout means "never", which is not a timeout


class UsageError(Exception):
    """Wrong command line or unusable input file: reported on stderr, exit 2."""


def _split(values: Sequence[str] | None) -> list[str]:
    return [part.strip() for value in values or () for part in value.split(",") if part.strip()]


def _add_render_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", metavar="PATH", help="write the JSON report to PATH ('-': stdout, and nothing else there)")
    parser.add_argument("-v", "--verbose", action="store_true", help="show passing findings, evidence and facts")
    parser.add_argument("--strict", action="store_true", help="exit 1 on warnings too")
    parser.add_argument("--only", action="append", metavar="IDS", help="only these check ids or layers (comma-separated)")
    parser.add_argument("--skip", action="append", metavar="IDS", help="skip these check ids or layers (comma-separated)")
    parser.add_argument("--no-color", action="store_true", help="plain ASCII output (also when NO_COLOR is set or not a TTY)")
    parser.add_argument("--junit", metavar="PATH", help="also write JUnit XML (one testcase per check) to PATH")
    parser.add_argument("--markdown", metavar="PATH", help="also write a Markdown report for a bug ticket to PATH")
    parser.add_argument("--format", choices=("terminal", "github"), default="terminal",
                        help="github: workflow annotations (::error ...) for GitHub Actions instead of the terminal view")
    parser.add_argument("--keep-hosts", action="store_true", help="do not redact hostnames and IP addresses in reports")
    parser.add_argument("--baseline", metavar="FILE",
                        help="compare with a golden baseline (from `dflash-doctor baseline save FILE`); any drift fails")


def run_parser(prog: str = "dflash-doctor") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Finds what would break `vllm serve` with DFlash speculative decoding, before it runs. "
        f"Subcommands: {', '.join(SUBCOMMANDS)} (see `dflash-doctor SUBCOMMAND --help`).",
    )
    parser.add_argument("--version", action="version", version=f"dflash-doctor {__version__}")
    parser.add_argument("--python", metavar="PATH", default=sys.executable,
                        help="the interpreter whose environment to inspect (default: this one)")
    parser.add_argument("--no-gpu", action="store_true", help="skip the checks that need a GPU (CI image builds)")
    parser.add_argument("--target-arch", action="append", metavar="ARCHS",
                        help="GPU archs to judge compiled code against without a GPU, e.g. sm_86,sm_90")
    parser.add_argument("--verify-hashes", action="store_true", help="compare every stack file's sha256 with RECORD")
    parser.add_argument("--timeout", type=float, default=60.0, metavar="S", help="per-probe timeout in seconds (default 60)")
    parser.add_argument("--profile", metavar="NAME",
                        help="a named set of options, e.g. ci (--no-gpu --strict, --target-arch required); "
                        "see `dflash-doctor profiles`")
    parser.add_argument("--config", metavar="FILE",
                        help="a TOML file with [profiles.NAME] tables (pyproject.toml's [tool.dflash-doctor] is read too)")
    _add_render_options(parser)
    return parser


def judge_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dflash-doctor judge",
                                     description="Judge the facts of a saved JSON report again with this version's checks.")
    parser.add_argument("report", metavar="REPORT.json")
    _add_render_options(parser)
    return parser


def check_number(value: Any, flag: str, *, unit: str = "seconds", allow_zero: bool = False,
                 most: float = MAX_TIMEOUT_S) -> float:
    """A number (of seconds) from the command line or a profile: finite, > 0 (or >= 0), at most `most`."""
    low = "0 or more" if allow_zero else "more than 0"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < 0 or (value == 0 and not allow_zero) or value > most:
        raise UsageError(f"{flag} {value}: give a number of {unit}, {low} and at most {most:g}")
    return float(value)


def check_count(value: Any, flag: str, least: int) -> int | None:
    """A count from the command line (None: not given): an integer of at least `least`."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise UsageError(f"{flag} {value}: give a whole number, at least {least}")
    return value


def _check_target_archs(values: Sequence[str] | None) -> None:
    from dflash_doctor.archs import parse_target_archs

    for value in values or ():
        try:
            parse_target_archs(value)
        except ValueError as exc:
            raise UsageError(f"--target-arch {value!r}: {exc}") from None


def _check_run_options(args: argparse.Namespace) -> None:
    """The options a run takes, whether from the command line or a profile: wrong ones are usage errors,
    before anything runs (not findings after it)."""
    args.timeout = check_number(args.timeout, "--timeout")
    _check_target_archs(args.target_arch)
    if getattr(args, "python", None) is not None:
        from dflash_doctor.interpreter import absolute

        if not args.python:
            raise UsageError("--python: give the path of an interpreter")
        args.python = absolute(args.python)


def _check_output_paths(args: argparse.Namespace) -> None:
    """Fail before a long run, not after it, when an output cannot be written."""
    from dflash_doctor.jsondoc import shown_path

    for option in OUTPUT_OPTIONS:
        path = getattr(args, option, None)
        if not path or path == "-":
            continue
        shown = shown_path(path)
        try:
            parent = Path(path).expanduser().resolve().parent
            if Path(path).expanduser().is_dir():
                raise UsageError(f"--{option} {shown}: is a directory; give a file name")
            parent_is_dir = parent.is_dir()
        except (OSError, ValueError) as exc:
            raise UsageError(f"--{option} {shown}: {getattr(exc, 'strerror', None) or exc}") from None
        if not parent_is_dir:
            raise UsageError(f"--{option} {shown}: directory {shown_path(str(parent))} does not exist")
        if not os.access(parent, os.W_OK):
            raise UsageError(f"--{option} {shown}: directory {shown_path(str(parent))} is not writable")
    if args.json == "-" and "-" in (getattr(args, "junit", None), getattr(args, "markdown", None)):
        raise UsageError("only one of --json, --junit, --markdown can write to stdout ('-')")


def parse_run_args(argv: Sequence[str], parser: argparse.ArgumentParser | None = None) -> argparse.Namespace:
    """Parse a run's options and apply --profile; UsageError for a bad profile, config or output path."""
    from dflash_doctor.profiles import ProfileError, apply, load_profiles

    parser = parser or run_parser()
    args = parser.parse_args(list(argv))
    args.profile_applied = None
    if args.profile is not None or args.config is not None:
        try:
            profiles = load_profiles(parser, args.config)
        except ProfileError as exc:
            raise UsageError(str(exc)) from exc
        if args.profile is not None:
            profile = profiles.get(args.profile)
            if profile is None:
                raise UsageError(f"unknown profile {args.profile!r} (known: {', '.join(sorted(profiles))}; "
                                 "see `dflash-doctor profiles`)")
            missing = apply(profile, args, parser)
            if missing:
                flags = ", ".join("--" + m.replace("_", "-") for m in missing)
                example = " (e.g. --target-arch sm_86)" if "target_arch" in missing else ""
                raise UsageError(f"profile {profile.name!r} requires {flags}{example}")
            args.profile_applied = profile.name
    _check_run_options(args)
    _check_output_paths(args)
    return args


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


def _plugin_result(problems: list[Finding]) -> list[CheckResult]:
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


def _load_baseline(path: str | None) -> dict[str, Any] | None:
    if not path:
        return None
    from dflash_doctor import baseline

    try:
        return baseline.load(path)
    except baseline.BaselineError as exc:
        raise UsageError(str(exc)) from exc


def _verify_interpreter(args: argparse.Namespace) -> None:
    """The target interpreter answers the handshake, or the run is a usage error (one line, exit 2)."""
    from dflash_doctor.interpreter import InterpreterError, absolute, verify

    if args.python is None:
        return
    args.python = absolute(args.python)
    if args.python == sys.executable:  # the doctor's own interpreter: it is running this very code
        return
    try:
        verify(args.python, args.timeout, cwd=os.getcwd())
    except InterpreterError as exc:
        raise UsageError(f"--python {exc}") from None


def _finish(results: list[CheckResult], sections: Mapping[str, Any], python: str, args: argparse.Namespace,
            extra: dict[str, Any], host: Mapping[str, Any] | None, partial: bool,
            lingering: bool = False) -> DoctorRun:
    from dflash_doctor import report as report_module
    from dflash_doctor.redact import redact_report

    strict = bool(args.strict)
    if partial:
        extra["partial"] = True
    raw = report_module.build(results, sections, python, strict, extra, host=host)
    report = redact_report(raw, keep_hosts=bool(args.keep_hosts))
    rendered = [CheckResult.from_dict(c) for c in report["checks"]]
    return DoctorRun(report, rendered, exit_code(results, strict), sections, lingering)


def _options(args: argparse.Namespace, target_archs: Sequence[str]) -> dict[str, Any]:
    return {"no_gpu": bool(getattr(args, "no_gpu", False)), "target_archs": list(target_archs),
            "only": _split(args.only), "skip": _split(args.skip), "strict": bool(args.strict),
            "profile": getattr(args, "profile_applied", None), "baseline": args.baseline}


def run_doctor(args: argparse.Namespace, *, options: Mapping[str, Any] | None = None,
               host: Mapping[str, Any] | None = None, handle_signals: bool = False) -> DoctorRun:
    """Run the doctor as `dflash-doctor [options]` does, without rendering.

    `args` comes from `parse_run_args`; `options` reach the checks as `Context.options` (e.g. the serve
    command line); `host` is merged into the report's host record. A failure of the doctor itself, or
    SIGTERM/SIGINT with `handle_signals`, still returns a (partial) run. UsageError for a bad --baseline
    file; SystemExit(2) for an unknown --only/--skip name.
    """
    from dflash_doctor.report import host_info
    from dflash_doctor.supervise import failure_result, run_checks

    started = time.monotonic()
    _verify_interpreter(args)
    expected = _load_baseline(args.baseline)
    checks, problems = load_selected(_split(args.only), _split(args.skip), sys.stderr, args.timeout)
    ctx = Context(
        python=args.python,
        cwd=os.getcwd(),
        no_gpu=args.no_gpu,
        target_archs=tuple(_split(args.target_arch)),
        verify_hashes=args.verify_hashes,
        timeout_s=args.timeout,
        options=dict(options or {}),
    )
    outcome = run_checks(checks, ctx, handle_signals=handle_signals)
    results = _plugin_result(problems) + outcome.results
    partial = outcome.partial
    if outcome.stopped is not None:
        results.append(outcome.stopped)
    elif expected is not None:
        from dflash_doctor import baseline as baseline_module  # only when asked: it is not cheap to import

        try:
            results.append(baseline_module.judge(expected, outcome.sections, args.baseline))
        except Exception as exc:  # noqa: BLE001 - the report is still written, with the doctor's error
            results.append(failure_result(exc, "comparing with the baseline"))
            partial = True
    extra = {"wall_s": round(time.monotonic() - started, 3), "options": _options(args, ctx.target_archs)}
    host_record = {**host_info(), **(host or {})}
    try:
        return _finish(results, outcome.sections, args.python, args, extra, host_record, partial, outcome.lingering)
    except Exception as exc:  # noqa: BLE001 - the facts broke the report: write what is certain, and why
        kept = [replace(r, facts={}) for r in results if r.id != "doctor"] + [failure_result(exc, "building the report")]
        return _finish(kept, {}, args.python, args, extra, host_record, True, outcome.lingering)


def _write(kind: str, path: str, write: Any, report: Mapping[str, Any]) -> bool:
    from dflash_doctor.jsondoc import shown_path

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
        from dflash_doctor.reporters import json_report

        ok &= _write("JSON", args.json, json_report.write, report)
    if args.junit:
        from dflash_doctor.reporters import junit

        ok &= _write("JUnit", args.junit, junit.write, report)
    if args.markdown:
        from dflash_doctor.reporters import markdown

        ok &= _write("Markdown", args.markdown, markdown.write, report)
    if "-" not in (args.json, args.junit, args.markdown):
        try:
            if args.format == "github":
                from dflash_doctor.reporters import github

                github.render(report, sys.stdout)
            else:
                from dflash_doctor.reporters.terminal import TerminalReporter, make_console, plain_output

                plain = args.no_color or plain_output(sys.stdout)
                TerminalReporter(make_console(sys.stdout, plain), plain, args.verbose).render(report, run.results)
            sys.stdout.flush()
        except BrokenPipeError:
            raise  # the reader went away: main() ends quietly
        except Exception as exc:  # noqa: BLE001
            sys.stderr.write(f"dflash-doctor: internal error rendering the report: {type(exc).__name__}: {exc}\n")
            ok = False
    return run.exit_code if ok else max(run.exit_code, 2)


def _usage_error(exc: UsageError) -> int:
    sys.stderr.write(f"dflash-doctor: error: {exc}\n")
    return 2


def cmd_run(argv: Sequence[str]) -> int:
    try:
        args = parse_run_args(argv)
        run = run_doctor(args, handle_signals=True)
    except UsageError as exc:
        return _usage_error(exc)
    stop = next((f for r in run.results if r.id == "doctor" for f in r.findings if f.id == "doctor.interrupted"), None)
    code = emit(run, args)
    if stop is not None:
        sys.stderr.write(f"dflash-doctor: {stop.title} (exit {code})\n")
    if run.lingering:  # a collector or a plugin ignored the stop or its timeout; do not wait for it
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def cmd_judge(argv: Sequence[str]) -> int:
    args = judge_parser().parse_args(argv)
    from dflash_doctor import baseline as baseline_module
    from dflash_doctor import report as report_module
    from dflash_doctor.runner import judge
    from dflash_doctor.supervise import failure_result

    try:
        _check_output_paths(args)
        saved = report_module.load(args.report)
        expected = _load_baseline(args.baseline)
    except report_module.ReportError as exc:
        sys.stderr.write(f"dflash-doctor: {exc}\n")
        return 2
    except UsageError as exc:
        return _usage_error(exc)
    checks, problems = load_selected(_split(args.only), _split(args.skip), sys.stderr)
    saved_ids = report_module.check_ids(saved)
    checks = [c for c in checks if c.id in saved_ids]
    sections = report_module.sections_of(saved)
    options = report_module.options_of(saved)
    python = report_module.target_python(saved)
    ctx = Context(python=python, cwd=os.getcwd(), no_gpu=bool(options.get("no_gpu")),
                  target_archs=tuple(options.get("target_archs") or ()))
    results = _plugin_result(problems) + judge(checks, sections, ctx)
    partial = bool(saved.get("partial"))
    if expected is not None:
        # A saved report has no file hashes: those parts are reported as not compared.
        try:
            results.append(baseline_module.judge(expected, sections, args.baseline, hash_files_now=False))
        except Exception as exc:  # noqa: BLE001 - facts the comparison cannot read: an error result, not a crash
            results.append(failure_result(exc, "comparing with the baseline"))
            partial = True
    options.update({"strict": bool(args.strict), "baseline": args.baseline})
    extra = {"judged_from": args.report, "options": options}
    run = _finish(results, sections, python, args, extra, report_module.host_of(saved), partial)
    return emit(run, args)


def cmd_list(argv: Sequence[str]) -> int:
    argparse.ArgumentParser(prog="dflash-doctor list", description="List the checks.").parse_args(argv)
    from dflash_doctor.registry import load_checks
    from dflash_doctor.reporters.plain import plain_output, to_ascii

    loaded, errors = load_checks()
    write = (lambda text: sys.stdout.write(to_ascii(text))) if plain_output(sys.stdout) else sys.stdout.write
    width = max((len(lc.check.id) for lc in loaded), default=10)
    for lc in loaded:
        check = lc.check
        gpu = " (GPU)" if getattr(check, "requires_gpu", False) else ""
        origin = "" if lc.origin == "builtin" else f"  [plugin: {lc.origin}]"
        write(f"{check.id:<{width}}  {check.layer:<8}  {check.title}{gpu}{origin}\n")
    for error in errors:
        state = "invalid" if error.invalid else "failed to load"
        write(f"{error.name:<{width}}  ({state}, {error.entry_point or '?'} from {error.origin}: {error.reason})\n")
    return 0


def cmd_explain(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="dflash-doctor explain", description="Explain a finding id.")
    parser.add_argument("id", nargs="?", help="a finding id, e.g. namespace.v4-without-v2 (none: list them all)")
    args = parser.parse_args(argv)
    from dflash_doctor.codes import CODES

    if args.id is None:
        for code in CODES.values():
            sys.stdout.write(f"{code.id:<34} {code.title}\n")
        return 0
    entry = CODES.get(args.id)
    if entry is None:
        close = [c for c in CODES if args.id in c]
        sys.stderr.write(f"dflash-doctor: unknown finding id {args.id!r}"
                         + (f"; did you mean: {', '.join(close[:5])}" if close else "") + "\n")
        return 2
    sys.stdout.write(f"{entry.id}: {entry.title}\n\n{entry.explanation}\n\n(since {entry.since})\n")
    return 0


def cmd_profiles(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="dflash-doctor profiles",
        description="List the profiles: built-in, from pyproject.toml's [tool.dflash-doctor.profiles.*], "
        "and from --config FILE.")
    parser.add_argument("--config", metavar="FILE", help="also read [profiles.NAME] tables from this TOML file")
    args = parser.parse_args(argv)
    from dflash_doctor.profiles import ProfileError, load_profiles

    try:
        profiles = load_profiles(run_parser(), args.config)
    except ProfileError as exc:
        return _usage_error(UsageError(str(exc)))
    for profile in profiles.values():
        sys.stdout.write(f"{profile.name}  [{profile.origin}]\n    {profile.description}\n    {profile.as_flags()}\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _dispatch(list(sys.argv[1:] if argv is None else argv))
    except BrokenPipeError:
        # The reader went away (`dflash-doctor ... | head`): not an error of the doctor's; say nothing more.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


def _dispatch(argv: list[str]) -> int:
    commands = {"judge": cmd_judge, "list": cmd_list, "explain": cmd_explain, "profiles": cmd_profiles}
    if argv and argv[0] in commands:
        return commands[argv[0]](argv[1:])
    if argv and argv[0] in MODULE_COMMANDS:
        module = __import__(f"dflash_doctor.commands.{argv[0]}", fromlist=["main"])
        code: int = module.main(argv[1:])
        return code
    return cmd_run(argv)


if __name__ == "__main__":
    raise SystemExit(main())
