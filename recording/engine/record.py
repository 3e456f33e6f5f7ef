"""Turn the driver's results (scenarios.py's RESULT_DIR) into fixtures/engine/NAME.json.

Usage: python3 recording/engine/record.py RESULT_DIR [OUT_DIR] [--work-dir DIR] [--vllm VERSION]
       python3 recording/engine/record.py --table [FIXTURES_DIR]
Each fixture names its release (`vllm_version`: the driver's record says it; results made before it did were all
0.20.1, else --vllm). OUT_DIR defaults to the release's directory: fixtures/engine for 0.20.1 (the first
release recorded), fixtures/engine/vllm-VERSION for any other. --work-dir is the RECORD_WORK the results were made under on the GPU
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
ENGINE = ROOT / "fixtures" / "engine"
FIRST_RELEASE = "0.20.1"  # its fixtures sit in fixtures/engine itself
# The releases the table has a column for, in order; one with no fixture yet says so in its column.
RELEASES = ("0.20.1", "0.26.0")


def release_dir(fixtures: Path, version: str) -> Path:
    return fixtures if version == FIRST_RELEASE else fixtures / f"vllm-{version}"


def records(fixtures: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """release -> scenario -> fixture, for every release with a directory (or RELEASES)."""
    found = {p.name.removeprefix("vllm-") for p in fixtures.glob("vllm-*") if p.is_dir()}
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for version in sorted({*RELEASES, *found}, key=lambda v: tuple(int(x) for x in v.split(".") if x.isdigit())):
        directory = release_dir(fixtures, version)
        out[version] = {p.stem: json.loads(p.read_text()) for p in sorted(directory.glob("[0-9][0-9]-*.json"))}
    return out


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


def main(results: Path, out: Path | None, work: Path | None = None, vllm: str | None = None) -> None:
    work_dir = str(work if work is not None else default_work_dir())
    device = (results / "device.txt").read_text().splitlines()[0] if (results / "device.txt").exists() else ""
    for path in sorted(results.glob("[0-9][0-9]-*.json")):
        if path.name.endswith((".report.json", ".fix.json")):
            continue
        run = json.loads(path.read_text())
        report = json.loads((results / f"{path.stem}.report.json").read_text())
        fails = failing(report)
        version = run.get("vllm_version") or vllm or FIRST_RELEASE
        if vllm and version != vllm:
            raise SystemExit(f"{path.name} was recorded on vLLM {version}, not {vllm}")
        record = {
            "scenario": run["scenario"],
            "device": device,
            "vllm_version": version,
            "command": run["command"].replace(str(results.parent), work_dir),
            **({"env": run["env"]} if run.get("env") else {}),
            "target_python": f"{work_dir}/{run['venv']}/bin/python",
            **{k: run[k] for k in ("remediation_applied", "remediation_exit") if k in run},
            **({"fix": fix_record(results, run)} if "fix" in run else {}),
            "doctor": {**run["doctor"], "failing": fails},
            "engine": run["engine"],
            "verdict": {"stop_finding": stop_finding(report) if run["engine"].get("answered") is False else "",
                        "known_limit": ""},
            "report": report,
        }
        target = out if out is not None else release_dir(ENGINE, version)
        target.mkdir(parents=True, exist_ok=True)
        (target / f"{path.stem}.json").write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
        print(path.stem, record["doctor"]["exit_code"], fails, run["engine"].get("started"),
              run["engine"].get("answered"), run["engine"].get("last_exception_line", "")[:160])


def outcome(r: dict[str, Any]) -> tuple[str, str, str]:
    """(the doctor's verdict, the engine's outcome, whether they agree) of one fixture."""
    e, d, v = r["engine"], r["doctor"], r["verdict"]
    verdict = f"exit {d['exit_code']}" + (f", `{v['stop_finding']}`" if v["stop_finding"] else "")
    if e.get("answered"):
        engine = "started, answered /v1/completions"
    elif e.get("started"):
        engine = "started, did not answer"
    else:
        line = e.get("last_exception_line") or e.get("first_error_line") or "?"
        engine = f"died (exit {e.get('exit_status')}): `{line[:110]}`"
    agree = (d["exit_code"] == 0) == bool(e.get("started") and e.get("answered"))
    return verdict, engine, "yes" if agree else ("no, known limit" if v.get("known_limit") else "no")


def table(fixtures: Path) -> str:
    """Scenario x release: the doctor, the engine, whether they agree (docs/engine-ground-truth.md has a fuller
    table, written by hand). A release with no fixture for a scenario says `not recorded yet`."""
    by_release = records(fixtures)
    head = "| scenario | " + " | ".join(f"vLLM {v}: doctor | engine | agreed when recorded" for v in by_release) + " |"
    rows = [head, "|---|" + "---|---|---|" * len(by_release)]
    for name in sorted({n for recs in by_release.values() for n in recs}):
        cells = []
        for recs in by_release.values():
            cells.extend(outcome(recs[name]) if name in recs else ("not recorded yet", "", ""))
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--table", action="store_true", help="print the docs' table of the recorded fixtures")
    parser.add_argument("--work-dir", type=Path, help="RECORD_WORK on the GPU machine (default: $RECORD_WORK or TMPDIR/dflash-record)")
    parser.add_argument("--vllm", help="the release of results whose records do not name it (default: "
                        f"{FIRST_RELEASE}); with a record that names another, refuse")
    parser.add_argument("paths", nargs="*", type=Path, help="RESULT_DIR [OUT_DIR], or with --table: [FIXTURES_DIR]")
    args = parser.parse_args(argv)
    if args.table:
        print(table(args.paths[0] if args.paths else ENGINE))
        return 0
    if not args.paths or len(args.paths) > 2:
        parser.error("give RESULT_DIR [OUT_DIR]")
    main(args.paths[0], args.paths[1] if len(args.paths) > 1 else None, args.work_dir, args.vllm)
    return 0


if __name__ == "__main__":
    raise SystemExit(cli(sys.argv[1:]))
