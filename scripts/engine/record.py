"""Turn the driver's results (scenarios.py's RESULT_DIR) into fixtures/engine/NAME.json.

Usage: python3 scripts/engine/record.py RESULT_DIR [fixtures/engine]
The verdict's stop_finding is the first failing finding that follows from nothing else (the one the
doctor says to start with); edit a fixture's verdict by hand only to name a known limit.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


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


def main(results: Path, out: Path) -> None:
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
            "command": run["command"].replace(str(results.parent), "/tmp/g"),
            "target_python": f"/tmp/g/{run['venv']}/bin/python",
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
    """The README's table, from the recorded fixtures."""
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


if __name__ == "__main__":
    if sys.argv[1] == "--table":
        print(table(Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT / "fixtures" / "engine"))
    else:
        main(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT / "fixtures" / "engine")
