"""Command line: `dflash-doctor [options]`, `judge REPORT.json`, `list`, `explain ID`.

Exit codes: 0 no fail and no error; 1 any fail or error (with --strict, any warn too); 2 the command
line was wrong (argparse's own convention).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from dflash_doctor import __version__
from dflash_doctor.check import Check, Context
from dflash_doctor.model import CheckResult, Finding, Status, exit_code

SUBCOMMANDS = ("judge", "list", "explain")


def _split(values: Sequence[str] | None) -> list[str]:
    return [part.strip() for value in values or () for part in value.split(",") if part.strip()]


def _add_render_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", metavar="PATH", help="write the JSON report to PATH ('-': stdout, and nothing else there)")
    parser.add_argument("-v", "--verbose", action="store_true", help="show passing findings, evidence and facts")
    parser.add_argument("--strict", action="store_true", help="exit 1 on warnings too")
    parser.add_argument("--only", action="append", metavar="IDS", help="only these check ids or layers (comma-separated)")
    parser.add_argument("--skip", action="append", metavar="IDS", help="skip these check ids or layers (comma-separated)")
    parser.add_argument("--no-color", action="store_true", help="plain ASCII output (also when NO_COLOR is set or not a TTY)")


def run_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dflash-doctor",
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
    _add_render_options(parser)
    return parser


def judge_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dflash-doctor judge",
                                     description="Judge the facts of a saved JSON report again with this version's checks.")
    parser.add_argument("report", metavar="REPORT.json")
    _add_render_options(parser)
    return parser


def load_selected(only: list[str], skip: list[str], err: Any) -> tuple[list[Check], list[Finding]]:
    from dflash_doctor.registry import load_checks
    from dflash_doctor.runner import select

    loaded, errors = load_checks()
    problems = [
        Finding(id="doctor.plugin-failed", status=Status.ERROR,
                title=f"check plugin {e.name!r} from {e.origin} could not be loaded: {e.reason}",
                evidence={"plugin": e.name, "origin": e.origin})
        for e in errors
    ]
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


def render(report: dict[str, Any], results: list[CheckResult], args: argparse.Namespace) -> None:
    if args.json:
        from dflash_doctor.reporters import json_report

        json_report.write(report, args.json)
    if args.json != "-":
        from dflash_doctor.reporters.terminal import TerminalReporter, make_console, plain_output

        plain = args.no_color or plain_output(sys.stdout)
        TerminalReporter(make_console(sys.stdout, plain), plain, args.verbose).render(report, results)


def cmd_run(argv: Sequence[str]) -> int:
    args = run_parser().parse_args(argv)
    from dflash_doctor import report as report_module
    from dflash_doctor.runner import run

    started = time.monotonic()
    checks, problems = load_selected(_split(args.only), _split(args.skip), sys.stderr)
    ctx = Context(
        python=args.python,
        cwd=os.getcwd(),
        no_gpu=args.no_gpu,
        target_archs=tuple(_split(args.target_arch)),
        verify_hashes=args.verify_hashes,
        timeout_s=args.timeout,
    )
    results, sections, _ = run(checks, ctx)
    results = _plugin_result(problems) + results
    report = report_module.build(results, sections, args.python, args.strict,
                                 {"wall_s": round(time.monotonic() - started, 3),
                                  "options": {"no_gpu": args.no_gpu, "target_archs": list(ctx.target_archs),
                                              "only": _split(args.only), "skip": _split(args.skip)}})
    render(report, results, args)
    return exit_code(results, args.strict)


def cmd_judge(argv: Sequence[str]) -> int:
    args = judge_parser().parse_args(argv)
    from dflash_doctor import report as report_module
    from dflash_doctor.runner import judge

    try:
        saved = report_module.load(args.report)
    except report_module.ReportError as exc:
        sys.stderr.write(f"dflash-doctor: {exc}\n")
        return 2
    checks, problems = load_selected(_split(args.only), _split(args.skip), sys.stderr)
    saved_ids = {c.get("id") for c in saved["checks"] if isinstance(c, dict)}
    checks = [c for c in checks if c.id in saved_ids]
    sections = report_module.sections_of(saved)
    options = saved.get("options") or {}
    ctx = Context(python=str((saved.get("target") or {}).get("python")), cwd=os.getcwd(),
                  no_gpu=bool(options.get("no_gpu")), target_archs=tuple(options.get("target_archs") or ()))
    results = _plugin_result(problems) + judge(checks, sections, ctx)
    python = str((saved.get("target") or {}).get("python"))
    report = report_module.build(results, sections, python, args.strict,
                                 {"judged_from": args.report, "options": options})
    render(report, results, args)
    return exit_code(results, args.strict)


def cmd_list(argv: Sequence[str]) -> int:
    argparse.ArgumentParser(prog="dflash-doctor list", description="List the checks.").parse_args(argv)
    from dflash_doctor.registry import load_checks

    loaded, errors = load_checks()
    width = max((len(lc.check.id) for lc in loaded), default=10)
    for lc in loaded:
        check = lc.check
        gpu = " (GPU)" if getattr(check, "requires_gpu", False) else ""
        origin = "" if lc.origin == "builtin" else f"  [plugin: {lc.origin}]"
        sys.stdout.write(f"{check.id:<{width}}  {check.layer:<8}  {check.title}{gpu}{origin}\n")
    for error in errors:
        sys.stdout.write(f"{error.name:<{width}}  (failed to load from {error.origin}: {error.reason})\n")
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
    code = CODES.get(args.id)
    if code is None:
        close = [c for c in CODES if args.id in c]
        sys.stderr.write(f"dflash-doctor: unknown finding id {args.id!r}"
                         + (f"; did you mean: {', '.join(close[:5])}" if close else "") + "\n")
        return 2
    sys.stdout.write(f"{code.id}: {code.title}\n\n{code.explanation}\n\n(since {code.since})\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = {"judge": cmd_judge, "list": cmd_list, "explain": cmd_explain}
    if argv and argv[0] in commands:
        return commands[argv[0]](argv[1:])
    return cmd_run(argv)


if __name__ == "__main__":
    raise SystemExit(main())
