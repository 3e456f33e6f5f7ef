"""`dflash-doctor fleet --ray ADDRESS [run options...]`: the doctor on every alive node of a Ray cluster.

One task per node, pinned to it (node-affinity scheduling), with the node's GPUs visible to it; the
reports are gathered and merged as `dflash-doctor merge` does: hosts x checks, the findings that differ,
and drift of the stack across nodes, with the nodes that drifted singled out. The run options (--no-gpu,
--only, --profile, --baseline FILE, ...) apply on every node; --json/--markdown/--format are the merged
view's. Needs Ray here (the `fleet` extra: `pip install '.[fleet]'` from a clone) and dflash-doctor on every
node.

Exit codes as for merge: 0 every node passed and all agree; 1 a node failed, gave no report, or nodes
drifted (--allow-drift: drift alone does not fail); 2 the command line was wrong or Ray is missing.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from dflash_doctor.commands.merge import emit
from dflash_doctor.commands.options import (
    UsageError,
    check_count,
    check_number,
    parse_run_args,
    request_of,
    run_parser,
    tell,
)
from dflash_doctor.documents import writer
from dflash_doctor.fleet.merge import summarize, unreachable
from dflash_doctor.report import document as report_module

MAX_NODES = 100_000
"""--min-nodes at most this many: past it no Ray cluster answers, and the wait only ends at --wait."""


def parser() -> argparse.ArgumentParser:
    p = run_parser(prog="dflash-doctor fleet")
    p.description = (__doc__ or "").split("\n\n")[0]
    p.set_defaults(python=None)  # each node examines its own Ray worker interpreter unless --python is given
    group = p.add_argument_group("fleet")
    group.add_argument("--ray", metavar="ADDRESS", required=True,
                       help="the Ray cluster: host:port of the GCS (as `ray start --address` takes it), 'auto', or ray://")
    group.add_argument("--gpus", choices=("all", "none"), default="all",
                       help="ask Ray for each node's GPUs so they are visible to the doctor (default), or for none "
                       "(when vLLM already holds them)")
    group.add_argument("--node-timeout", type=float, default=300.0, metavar="S",
                       help="give up on a node after S seconds (default 300)")
    group.add_argument("--min-nodes", type=int, default=0, metavar="N",
                       help="wait (up to --wait seconds) until N nodes are alive; fewer is an error")
    group.add_argument("--wait", type=float, default=30.0, metavar="S", help="how long --min-nodes waits (default 30)")
    group.add_argument("--out-dir", metavar="DIR", help="also save each node's JSON report in DIR (to merge again later)")
    group.add_argument("--allow-drift", action="store_true", help="nodes that differ do not fail the fleet by themselves")
    return p


def main(argv: Sequence[str]) -> int:
    p = parser()
    try:
        args = parse_run_args(argv, p)
        check_number(args.node_timeout, "--node-timeout")
        check_number(args.wait, "--wait", allow_zero=True)
        check_count(args.min_nodes, "--min-nodes", 0, MAX_NODES)
        if args.junit:
            raise UsageError("--junit is per host; use --out-dir DIR and run `dflash-doctor judge` on a host's report")
        if args.out_dir:
            Path(args.out_dir).mkdir(parents=True, exist_ok=True)
    except UsageError as exc:
        tell(f"dflash-doctor fleet: error: {exc}")
        return 2
    except OSError as exc:
        tell(f"dflash-doctor fleet: error: --out-dir {args.out_dir}: {exc.strerror or exc}\n")
        return 2
    try:  # here, not at the top: Ray is an optional dependency (the `fleet` extra); its absence is said so
        from dflash_doctor.fleet import ray_fleet
    except ModuleNotFoundError as exc:
        tell(f"dflash-doctor fleet: error: Ray is not installed ({exc}); "
             f"install it with: {shlex.quote(sys.executable)} -m pip install 'ray[default]>=2.9'\n")
        return 2
    try:
        nodes, problems = ray_fleet.gather(args.ray, request_of(args), gpus=args.gpus, timeout_s=args.node_timeout,
                                           min_nodes=args.min_nodes, wait_s=args.wait)
    except ConnectionError as exc:
        tell(f"dflash-doctor fleet: error: cannot reach the Ray cluster: {exc}\n")
        return 2
    except UsageError as exc:
        tell(f"dflash-doctor fleet: error: {exc}")
        return 2
    for problem in problems:
        tell(f"dflash-doctor fleet: {problem}\n")
    hosts = []
    for node in nodes:
        label = ray_fleet.node_label(node)
        info = {"ray": {"node_id": node.node_id, "resources": ray_fleet._custom(node.resources), "head": node.is_head}}
        if node.report is None:
            hosts.append(unreachable(label, f"ray:{node.node_id}", node.error or "no report", info))
            continue
        try:  # a node with another dflash-doctor version may send another shape
            node_report = report_module.validate(node.report, f"the report of node {label}")
        except report_module.ReportError as exc:
            hosts.append(unreachable(label, f"ray:{node.node_id}", str(exc), info))
            continue
        host_name = (report_module.host_of(node_report) or {}).get("name", "")
        summary = summarize(node_report, f"ray:{node.node_id}", label=f"{host_name}/{label}" if host_name else label)
        summary.info.setdefault("ray", {}).update({"head": node.is_head})
        hosts.append(summary)
        if args.out_dir:
            path = Path(args.out_dir) / f"{label}.json"
            try:
                writer.replace(str(path), json.dumps(node.report, indent=1) + "\n", writer.JSON_DOCUMENT)
            except OSError as exc:
                problems = [*problems, f"cannot write {exc}"]
                tell(f"dflash-doctor fleet: cannot write {exc}\n")
    if not nodes:
        tell("dflash-doctor fleet: error: the cluster has no alive node\n")
        return 1
    code = emit(hosts, args)
    return max(code, 1) if problems else code
