"""`dflash-doctor judge REPORT.json`: judge the facts of a saved report again with this version's checks."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from dflash_doctor.commands.options import (
    Parser,
    UsageError,
    add_render_options,
    check_output_paths,
    split_names,
    usage_error,
)
from dflash_doctor.commands.run import emit, finish, load_baseline, load_selected, plugin_result
from dflash_doctor.context import Context

__all__ = ["judge_parser", "main"]


def judge_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="dflash-doctor judge",
                                     description="Judge the facts of a saved JSON report again with this version's checks.")
    parser.add_argument("report", metavar="REPORT.json")
    add_render_options(parser)
    return parser


def main(argv: Sequence[str]) -> int:
    args = judge_parser().parse_args(argv)
    from dflash_doctor.checks.fix import baseline as baseline_module
    from dflash_doctor.render import report as report_module
    from dflash_doctor.runner import failure_result, judge

    try:
        check_output_paths(args)
        saved = report_module.load(args.report)
        expected = load_baseline(args.baseline)
    except report_module.ReportError as exc:
        sys.stderr.write(f"dflash-doctor: {exc}\n")
        return 2
    except UsageError as exc:
        return usage_error(exc)
    checks, problems = load_selected(split_names(args.only), split_names(args.skip), sys.stderr)
    saved_ids = report_module.check_ids(saved)
    checks = [c for c in checks if c.id in saved_ids]
    sections = report_module.sections_of(saved)
    options = report_module.options_of(saved)
    python = report_module.target_python(saved)
    ctx = Context(python=python, cwd=os.getcwd(), no_gpu=bool(options.get("no_gpu")),
                  target_archs=tuple(options.get("target_archs") or ()))
    results = plugin_result(problems) + judge(checks, sections, ctx)
    partial = bool(saved.get("partial"))
    if expected is not None:
        # The file hashes are those the report saved (a run given --baseline saves them); a report without
        # them has those parts reported as not compared. Nothing of the environment is read again.
        try:
            results.append(baseline_module.judge(expected, sections, args.baseline))
        except Exception as exc:  # noqa: BLE001 - facts the comparison cannot read: an error result, not a crash
            results.append(failure_result(exc, "comparing with the baseline"))
            partial = True
    options.update({"strict": bool(args.strict), "baseline": args.baseline})
    extra = {"judged_from": args.report, "options": options}
    if isinstance(saved.get("dry_runs"), dict) and saved["dry_runs"].get("items"):
        from dflash_doctor.checks.fix.verify import verify_results

        extra["dry_runs"] = saved["dry_runs"]  # what the installer said then, judged again now
        results = verify_results(results, saved["dry_runs"])
    run = finish(results, sections, python, args, extra, report_module.host_of(saved), partial)
    return emit(run, args)
