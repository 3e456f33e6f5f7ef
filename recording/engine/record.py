"""Turn the driver's results (scenarios.py's RESULT_DIR) into fixtures/engine/NAME.json.

Usage: python3 recording/engine/record.py RESULT_DIR [OUT_DIR] [--work-dir DIR]
       python3 recording/engine/record.py --table [FIXTURES_DIR]
OUT_DIR defaults to fixtures/engine; --work-dir is the RECORD_WORK the results were made under on the GPU
machine (default: $RECORD_WORK, else TMPDIR/dflash-record, as common.sh): a path under RESULT_DIR's parent in
a recorded command is written under it, so a fixture names the machine's paths, not where the results were
unpacked, and target_python is WORK/VENV/bin/python.
The verdict's stop_finding is the first failing finding that follows from nothing else (the one the
doctor says to start with); edit a fixture's verdict by hand only to name a known limit.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def default_work_dir() -> Path:
    return Path(os.environ.get("RECORD_WORK") or os.path.join(tempfile.gettempdir(), "dflash-record"))


def stop_finding(report: dict[str, Any]) -> str:
    roots = [f for c in report["checks"] for f in c["findings"]
             if f["status"] in ("fail", "error") and not f.get("cause")]
    return str(roots[0]["id"]) if roots else ""


def failing(report: dict[str, Any]) -> list[str]:
    return sorted({f["id"] for c in report["checks"] for f in c["findings"] if f["status"] in ("fail", "error")})


def fix_record(results: Path, run: dict[str, Any]) -> dict[str, Any]:
    """fix_scenario.py's run: the verdict before, the fix (plan, each step's outcome, its transcript's file)."""
    name = run["scenario"]
    before = json.loads((results / f"before-{name}.report.json").read_text())
    document = json.loads((results / f"{name}.fix.json").read_text())
    return {
        "before": {**run["before"], "failing": failing(before), "stop_finding": stop_finding(before)},
        **run["fix"],
        "transcript": f"{name}.fix.txt",
        "document": {k: v for k, v in document.items() if k != "report"},
    }


def main(results: Path, out: Path, work: Path | None = None) -> None:
    work_dir = str(work if work is not None else default_work_dir())
    out.mkdir(parents=True, exist_ok=True)
    device = (results / "device.txt").read_text().splitlines()[0] if (results / "device.txt").exists() else ""
    for path in sorted(results.glob("[0-9][0-9]-*.json")):
        if path.name.endswith((".report.json", ".fix.json")):
            continue
        run = json.loads(path.read_text())
        report = json.loads((results / f"{path.stem}.report.json").read_text())
        fails = failing(report)
        record = {
            "scenario": run["scenario"],
            "device": device,
            "vllm": "0.20.1",
            "command": run["command"].replace(str(results.parent), work_dir),
            "target_python": f"{work_dir}/{run['venv']}/bin/python",
            **{k: run[k] for k in ("remediation_applied", "remediation_exit") if k in run},
            **({"fix": fix_record(results, run)} if "fix" in run else {}),
            "doctor": {**run["doctor"], "failing": fails},
            "engine": run["engine"],
            "verdict": {"stop_finding": stop_finding(report) if run["engine"].get("answered") is False else "",
                        "known_limit": ""},
            "report": report,
        }
        (out / f"{path.stem}.json").write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
        print(path.stem, record["doctor"]["exit_code"], fails, run["engine"].get("started"),
              run["engine"].get("answered"), run["engine"].get("last_exception_line", "")[:160])


def table(fixtures: Path) -> str:
    """A table of the recorded fixtures (docs/engine-ground-truth.md has a fuller one, written by hand)."""
    head = "| scenario | doctor (exit, finding predicted to stop serve) | engine (vLLM 0.20.1, H200) | doctor s | vLLM s |"
    rows = [head, "|---|---|---|---|---|"]
    for path in sorted(fixtures.glob("[0-9][0-9]-*.json")):
        r = json.loads(path.read_text())
        e, d, v = r["engine"], r["doctor"], r["verdict"]
        verdict = f"exit {d['exit_code']}" + (f", `{v['stop_finding']}`" if v["stop_finding"] else "")
        if e.get("answered"):
            outcome, secs = "started, answered /v1/completions", e.get("seconds_to_ready")
        elif e.get("started"):
            outcome, secs = "started, did not answer", e.get("seconds_to_ready")
        else:
            line = e.get("last_exception_line") or e.get("first_error_line") or "?"
            outcome = f"died (exit {e.get('exit_status')}): `{line[:110]}`"
            secs = e.get("seconds_to_failure")
        rows.append(f"| {r['scenario']} | {verdict} | {outcome} | {d['seconds']} | {secs} |")
    return "\n".join(rows)


def cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--table", action="store_true", help="print the docs' table of the recorded fixtures")
    parser.add_argument("--work-dir", type=Path, help="RECORD_WORK on the GPU machine (default: $RECORD_WORK or TMPDIR/dflash-record)")
    parser.add_argument("paths", nargs="*", type=Path, help="RESULT_DIR [OUT_DIR], or with --table: [FIXTURES_DIR]")
    args = parser.parse_args(argv)
    if args.table:
        print(table(args.paths[0] if args.paths else ROOT / "fixtures" / "engine"))
        return 0
    if not args.paths or len(args.paths) > 2:
        parser.error("give RESULT_DIR [OUT_DIR]")
    main(args.paths[0], args.paths[1] if len(args.paths) > 1 else ROOT / "fixtures" / "engine", args.work_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(cli(sys.argv[1:]))
