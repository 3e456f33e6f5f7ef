"""`dflash-doctor merge REPORT.json...`: one view of many hosts' reports.

A table of hosts x checks, the findings that differ between hosts, and drift of the serving stack (and of
Python, driver, GPUs) across hosts, with the hosts that drifted from the rest singled out. Works on reports
collected by any means: ssh, Slurm, a Kubernetes DaemonSet. Reports are read one at a time.

Exit codes: 0 every host passed and all agree; 1 a host failed, gave no readable report, or hosts drifted
(with --allow-drift, drift alone does not fail); 2 the command line was wrong.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dflash_doctor.commands.options import Parser, UsageError, check_count, tell
from dflash_doctor.documents import writer
from dflash_doctor.documents.jsondoc import shown_path
from dflash_doctor.fleet.merge import HostSummary, merge, summarize_files, write_json
from dflash_doctor.render import fleet as fleet_view
from dflash_doctor.report.redact import Redactor

MAX_PARSE_JOBS = 64
"""merge --jobs at most this many: each one is a process."""


def add_output_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", metavar="PATH", help="write the merged view (schema dflash-doctor/fleet/v1) to PATH ('-': stdout)")
    parser.add_argument("--markdown", metavar="PATH", help="also write the merged view as Markdown to PATH")
    parser.add_argument("--format", choices=("terminal", "github"), default="terminal",
                        help="github: workflow annotations for drift and failing hosts")
    parser.add_argument("--allow-drift", action="store_true", help="hosts that differ do not fail the merge by themselves")
    if "--keep-hosts" not in parser._option_string_actions:  # the fleet command has it from the run options
        parser.add_argument("--keep-hosts", action="store_true",
                            help="do not redact host names and IP addresses (report paths are always redacted)")


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="dflash-doctor merge", description=__doc__.split("\n\n")[0])
    p.add_argument("reports", nargs="+", metavar="REPORT.json",
                   help="per-host JSON reports (from `dflash-doctor --json FILE`); a directory means its *.json")
    add_output_options(p)
    p.add_argument("--jobs", type=int, metavar="N", help="processes that parse reports (default: the CPU count, up to 8)")
    return p


def _is(test: str, path: str) -> bool:
    try:
        return bool(getattr(Path(path), test)())
    except (OSError, ValueError):  # a name too long, a NUL in it: no such file, read_text says why
        return False


def expand(paths: Sequence[str]) -> list[str]:
    out: list[str] = []
    for path in paths:
        out += sorted(str(c) for c in Path(path).glob("*.json")) if _is("is_dir", path) else [path]
    return out


def emit(hosts: Sequence[HostSummary], args: argparse.Namespace) -> int:
    # The reports are redacted where they were made; what this machine adds (their paths) is redacted here.
    view = Redactor.for_this_machine(keep_hosts=args.keep_hosts).tree(merge(hosts, allow_drift=args.allow_drift))
    ok = True
    try:
        if args.json:
            write_json(view, args.json)
        if args.markdown:
            writer.replace(args.markdown, fleet_view.markdown(view), writer.MARKDOWN)
    except OSError as exc:
        tell(f"dflash-doctor: cannot write {exc.filename}: {exc.strerror}\n")
        ok = False
    if args.json != "-":
        if args.format == "github":
            for line in fleet_view.github_lines(view):
                sys.stdout.write(line + "\n")
        else:
            fleet_view.render_text(view, sys.stdout)
    code: int = view["summary"]["exit_code"]
    return code if ok else max(code, 2)


def main(argv: Sequence[str]) -> int:
    args = parser().parse_args(argv)
    try:
        check_count(args.jobs, "--jobs", 1, MAX_PARSE_JOBS)  # each one a process
    except UsageError as exc:
        tell(f"dflash-doctor merge: error: {exc}")
        return 2
    paths = expand(args.reports)
    if not paths:
        tell("dflash-doctor merge: error: no report files found\n")
        return 2
    missing = [p for p in paths if not _is("exists", p)]
    if missing:
        tell(f"dflash-doctor merge: error: no such file: {', '.join(map(shown_path, missing))}\n")
        return 2
    hosts: list[Any] = []
    for host in summarize_files(paths, args.jobs):
        if host.error is not None:
            tell(f"dflash-doctor merge: {host.error}")
        hosts.append(host)
    return emit(hosts, args)
