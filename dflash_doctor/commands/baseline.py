"""`dflash-doctor baseline save FILE`: record the expected state of an environment (golden baseline).

    dflash-doctor baseline save FILE [--driver-range SPEC] [--no-hashes] [run options...]
    dflash-doctor baseline save FILE --from-report REPORT.json     (no file hashes: a report has none)
    dflash-doctor baseline show FILE
    dflash-doctor baseline compare FILE [run options...]            (the same as `dflash-doctor --baseline FILE`)

`save` runs the doctor with the given options (--python, --no-gpu, --target-arch, --profile, ...), then
records the driver range, the GPUs' compute capabilities, the Python, every distribution with its exact
version, the sha256 of every file of the serving stack's distributions, and the arch coverage of their
compiled code, and writes FILE. Its exit code is the run's: a baseline of a failing environment is written,
and the save still fails.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from dflash_doctor import pipeline
from dflash_doctor.checks.fix import baseline
from dflash_doctor.commands import run as run_command
from dflash_doctor.commands.options import (
    Parser,
    UsageError,
    parse_run_args,
    request_of,
    run_parser,
    tell,
)
from dflash_doctor.commands.output import emit, live_progress
from dflash_doctor.documents.jsondoc import shown_path
from dflash_doctor.facts.envsummary import STACK
from dflash_doctor.facts.fix.baseline import BaselineError
from dflash_doctor.facts.fix.baseline import load as load_baseline
from dflash_doctor.facts.fix.baseline_shapes import Baseline, PythonState
from dflash_doctor.facts.fix.file_hashes import with_file_hashes
from dflash_doctor.report import document as report_module


def save_parser() -> argparse.ArgumentParser:
    parser = run_parser(prog="dflash-doctor baseline save")
    parser.description = "Run the doctor and record the environment's expected state in FILE."
    parser.add_argument("file", metavar="FILE", help="where to write the baseline (JSON)")
    parser.add_argument("--driver-range", metavar="SPEC",
                        help="NVIDIA driver versions the baseline accepts, as a version specifier "
                        "(default: the current driver's branch, e.g. ==570.*)")
    parser.add_argument("--no-hashes", action="store_true", help="do not hash the stack's files (versions only)")
    parser.add_argument("--from-report", metavar="REPORT.json",
                        help="take the facts from a saved report instead of running the doctor (no file hashes)")
    return parser


def describe(state: Baseline) -> list[str]:
    dists = state.distributions or {}
    hashed = {n: d.files for n, d in dists.items() if d.files is not None}
    files = sum(len(f) for f in hashed.values())
    drv, gpus, archs, python = state.driver, state.gpus, state.arch_coverage, state.python or PythonState()
    return [
        f"fingerprint:   {state.fingerprint}",
        f"python:        {python.label}",
        f"driver:        {drv.version} (accepts {drv.range})" if drv else "driver:        not collected",
        f"GPUs:          {', '.join(gpus.compute_capabilities) or 'none'}" if gpus else "GPUs:          not collected",
        (f"distributions: {len(dists)}, files of {len(hashed)} stack distributions hashed ({files} files: "
         f"{', '.join(sorted(hashed)) or 'none'})"),
        f"arch coverage: {len(archs)} libraries" if archs is not None else "arch coverage: not collected",
    ]


def _check_baseline_path(path: str) -> None:
    """Before the run: FILE must be a file name in a directory that exists."""
    target = Path(path).expanduser()
    try:
        if target.is_dir():
            raise UsageError(f"{shown_path(path)}: is a directory; give the baseline's file name")
        parent_ok = target.resolve().parent.is_dir()
    except (OSError, ValueError) as exc:
        raise UsageError(f"{shown_path(path)}: {getattr(exc, 'strerror', None) or exc}") from None
    if not parent_ok:
        raise UsageError(f"{shown_path(path)}: its directory does not exist")


def cmd_save(argv: Sequence[str]) -> int:
    parser = save_parser()
    try:
        args = parse_run_args(argv, parser)
        _check_baseline_path(args.file)
        if args.driver_range:
            try:
                SpecifierSet(args.driver_range)
            except InvalidSpecifier:
                raise UsageError(f"--driver-range {args.driver_range!r} is not a version specifier (e.g. '>=570,<580')")
        if args.from_report:
            try:
                saved = report_module.load(args.from_report)
            except report_module.ReportError as exc:
                raise UsageError(str(exc)) from exc
            sections: Mapping[str, object] = report_module.sections_of(saved)
            code = report_module.exit_code_of(saved)
            hash_names: Sequence[str] = ()
            archs = report_module.options_of(saved).get("target_archs") or []
        else:
            with live_progress(args) as on_event:
                run = pipeline.run(request_of(args), handle_signals=True, on_event=on_event)
            code = emit(run, args)
            if run.report.get("partial"):
                tell("dflash-doctor: the run did not finish; no baseline written\n")
                return max(code, 1)
            sections = run.sections
            hash_names = () if args.no_hashes else STACK
            archs = run.report["options"]["target_archs"]
    except UsageError as exc:
        tell(f"dflash-doctor: error: {exc}")
        return 2
    if hash_names:
        sections = with_file_hashes(sections, hash_names)
    state = baseline.current_state(sections, driver_range=args.driver_range, target_archs=archs)
    try:
        baseline.save(args.file, state)
    except OSError as exc:
        tell(f"dflash-doctor: cannot write the baseline to {shown_path(args.file)}: {exc.strerror or exc}\n")
        return 2
    out = sys.stderr if "-" in (args.json, args.junit, args.markdown) else sys.stdout  # stdout holds a report
    out.write(f"baseline written to {args.file}\n" + "".join(f"  {line}\n" for line in describe(state)))
    if code:
        out.write(f"note: the environment does not pass the doctor (exit {code}); "
                  "it was recorded as it is, and this save fails\n")
    return code


def cmd_show(argv: Sequence[str]) -> int:
    parser = Parser(prog="dflash-doctor baseline show", description="Summarize a baseline file.")
    parser.add_argument("file", metavar="FILE")
    parser.add_argument("--json", action="store_true", help="print the baseline without file hashes, as JSON")
    args = parser.parse_args(argv)
    try:
        state = load_baseline(args.file)
    except BaselineError as exc:
        tell(f"dflash-doctor: error: {exc}")
        return 2
    if args.json:
        slim = state.to_json()
        for entry in (slim.get("distributions") or {}).values():
            entry.pop("files", None)
        sys.stdout.write(json.dumps(slim, indent=1, sort_keys=True) + "\n")
        return 0
    sys.stdout.write(f"{args.file} (saved {state.created} by dflash-doctor {state.tool.version})\n")
    sys.stdout.write("".join(f"  {line}\n" for line in describe(state)))
    return 0


def main(argv: Sequence[str]) -> int:
    usage = ("usage: dflash-doctor baseline save FILE [options] | show FILE | compare FILE [options]\n"
             "  see `dflash-doctor baseline save --help`\n")
    if not argv:
        tell(usage)
        return 2
    if argv[0] in ("-h", "--help"):
        sys.stdout.write(__doc__ or usage)
        return 0
    action, rest = argv[0], list(argv[1:])
    if action == "save":
        return cmd_save(rest)
    if action == "show":
        return cmd_show(rest)
    if action == "compare":
        if not rest or rest[0].startswith("-"):
            tell("dflash-doctor baseline compare: error: the baseline FILE comes first\n")
            return 2
        return run_command.main([*rest[1:], "--baseline", rest[0]])
    tell(f"dflash-doctor baseline: error: unknown action {action!r}\n{usage}")
    return 2
