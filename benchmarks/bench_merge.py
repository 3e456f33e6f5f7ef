"""Time and peak memory of `dflash-doctor merge` on 1,000 synthetic host reports.

The hosts are made from one real report (the doctor run on this interpreter, or --report PATH from a real
serving box): each gets its own host name, and a few drift as fleets do: 2% run another version of a stack
distribution, 1% fail a check, 0.5% carry an extra distribution. The merge runs as a user runs it, in a
subprocess; its peak RSS is read from getrusage.

    PYTHONPATH=. python benchmarks/bench_merge.py [--hosts 1000] [--report PATH] [--keep DIR]

`--smoke` (CI): 20 hosts, `--jobs 1` only, made from a report recorded on an H200
(fixtures/h200/report-cold.json) unless --report names another, so no doctor run is needed first.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from dflash_doctor.facts.fingerprint import of_sections
from dflash_doctor.report.document import sections_of

SMOKE_REPORT = Path(__file__).resolve().parent.parent / "fixtures" / "h200" / "report-cold.json"


def real_report(python: str) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "dflash_doctor", "--python", python, "--no-gpu", "--json", "-"],
                          capture_output=True, text=True, timeout=600, check=True)
    report: dict[str, Any] = json.loads(proc.stdout)
    return report


def _dists(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [item for check in report["checks"] for item in (check.get("facts", {}).get("distributions") or {}).get("items", [])]


def synthesize(base: dict[str, Any], hosts: int, out: Path, seed: int = 7) -> tuple[int, dict[str, int]]:
    rng = random.Random(seed)
    text = json.dumps(base)
    counts = {"version-drift": 0, "failing": 0, "extra-dist": 0}
    total = 0
    stack_names = {d["name"] for d in _dists(base) if d.get("record", {}).get("integrity") is not None}
    target = min(stack_names) if stack_names else min(d["name"] for d in _dists(base))
    for i in range(hosts):
        report = json.loads(text)
        report["host"] = {"name": f"host-{i:04d}"}
        roll = rng.random()
        if roll < 0.02:
            counts["version-drift"] += 1
            for item in _dists(report):
                if item["name"] == target:
                    item["version"] = item["version"] + ".post1"
        elif roll < 0.03:
            counts["failing"] += 1
            check = report["checks"][0]
            check["status"] = "fail"
            check["findings"].append({"id": "distributions.requirement-missing", "status": "fail",
                                      "title": f"synthetic failure on host {i}", "detail": "", "evidence": {},
                                      "remediation": []})
            report["summary"]["exit_code"] = 1
        elif roll < 0.035:
            counts["extra-dist"] += 1
            for check in report["checks"]:
                items = (check.get("facts", {}).get("distributions") or {}).get("items")
                if items is not None:
                    items.append({**copy.deepcopy(items[0]), "name": "torch", "canonical": "torch", "version": "2.9.0"})
        report["fingerprint"] = of_sections(sections_of(report))  # what the doctor would have computed
        data = json.dumps(report)
        total += len(data)
        (out / f"host-{i:04d}.json").write_text(data)
    return total, counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--report", help="a real report to multiply (default: run the doctor on this interpreter)")
    parser.add_argument("--keep", help="keep the synthetic reports in this directory")
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2], help="merge --jobs values to time (default: 1 2)")
    parser.add_argument("--smoke", action="store_true", help="CI: 20 hosts, --jobs 1, a recorded report (docstring)")
    args = parser.parse_args()
    if args.smoke:
        args.hosts, args.jobs = min(args.hosts, 20), [1]
        args.report = args.report or str(SMOKE_REPORT)
        print(f"smoke: {args.hosts} hosts from {args.report}, --jobs 1 only")
    base = json.loads(Path(args.report).read_text()) if args.report else real_report(sys.executable)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="dfd-merge-"))
    work.mkdir(parents=True, exist_ok=True)
    reports = work / "reports"
    reports.mkdir(exist_ok=True)
    started = time.perf_counter()
    total, counts = synthesize(base, args.hosts, reports)
    made_s = time.perf_counter() - started
    view = work / "fleet.json"
    # The merge in a process of its own, which reports its own peak RSS and its workers' (the largest one).
    wrapper = ("import resource, sys; from dflash_doctor.cli import main; code = main(sys.argv[1:]); "
               "peak = lambda who: resource.getrusage(who).ru_maxrss; "
               "sys.stderr.write(f'@@peak_kib {peak(resource.RUSAGE_SELF)} {peak(resource.RUSAGE_CHILDREN)}\\n'); "
               "raise SystemExit(code)")
    print(f"hosts: {args.hosts}; one report {len(json.dumps(base)) / 1024:.0f} KiB, all {total / 2**20:.0f} MiB "
          f"(made in {made_s:.1f} s); drift planted: {counts}; CPUs {os.cpu_count()}, "
          f"load average {os.getloadavg()[0]:.1f}")
    for jobs in args.jobs:
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", wrapper, "merge", str(reports), "--json", str(view),
                               "--jobs", str(jobs)], capture_output=True, text=True, check=False)
        merge_s = time.perf_counter() - started
        own, workers = (int(v) for v in proc.stderr.rsplit("@@peak_kib ", 1)[1].split()[:2])
        memory = f"peak RSS {own / 1024:.0f} MiB" + (f" + {jobs} workers of at most {workers / 1024:.0f} MiB each"
                                                     if jobs > 1 else "")
        print(f"merge --jobs {jobs}: {merge_s:.2f} s wall, {memory}")
    merged = json.loads(view.read_text())
    print(f"found: {merged['summary']}; drift: "
          f"{[(d['what'], {v: len(h) for v, h in d['values'].items()}) for d in merged['drift']]}")
    print(f"exit {proc.returncode}; last lines:\n" + "\n".join(proc.stdout.splitlines()[-4:]))
    if not args.keep:
        shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
