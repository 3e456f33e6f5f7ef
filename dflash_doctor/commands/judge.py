"""`dflash-doctor judge REPORT.json`: judge the facts of a saved report again with this version's checks."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from dflash_doctor import pipeline
from dflash_doctor.commands.options import (
    Parser,
    UsageError,
    add_render_options,
    check_output_paths,
    split_names,
    tell,
    usage_error,
)
from dflash_doctor.commands.output import emit
from dflash_doctor.report import document as report_module
from dflash_doctor.request import Request

__all__ = ["judge_parser", "main"]


def judge_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="dflash-doctor judge",
                                     description="Judge the facts of a saved JSON report again with this version's checks.")
    parser.add_argument("report", metavar="REPORT.json")
    add_render_options(parser)
    return parser


def main(argv: Sequence[str]) -> int:
    args = judge_parser().parse_args(argv)
    try:
        check_output_paths(args)
        saved = report_module.load(args.report)
        # The saved report's own target and options; what the command line adds: which checks, strict, baseline.
        request = Request(python="", cwd=os.getcwd(), only=tuple(split_names(args.only)),
                          skip=tuple(split_names(args.skip)), strict=bool(args.strict), keep_hosts=bool(args.keep_hosts),
                          baseline=args.baseline)
        run = pipeline.judge_saved(request, saved, args.report)
    except report_module.ReportError as exc:
        tell(f"dflash-doctor: {exc}")
        return 2
    except UsageError as exc:
        return usage_error(exc)
    return emit(run, args)
