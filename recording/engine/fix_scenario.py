"""`dflash-doctor fix --yes` on the flash-attn-4-only env, then the real `vllm serve`, run ON the GPU machine.

Usage: python3 fix_scenario.py PAYLOAD_DIR RESULT_DIR   (after setup.sh; standard library only)

The env is scenario 02's (RECORD_WORK/v2: vLLM 0.20.1 + the real flash-attn-4 wheel only). In order:
1. `dflash-doctor serve --skip distributions` on it (the verdict before: RESULT_DIR/before-NAME.report.json);
2. `dflash-doctor fix --python RECORD_WORK/v2/bin/python --skip distributions --yes --json`, stdin not a terminal,
   its terminal output kept as it is (NAME.fix.txt, NAME.fix.json);
3. `dflash-doctor serve --skip distributions` again (NAME.report.json, NAME.doctor.txt: the verdict after);
4. the same `vllm serve` command for real (scenarios.py's serve(): /health, one /v1/completions, NAME.log).
`--skip distributions` because the carried vLLM lacks requirements (flashinfer-python, anthropic, mcp, ...)
that the serve path never imports (fixtures/engine/01-healthy.json, known limit): without it the doctor
would plan installs for them, which the device machine, with no index, cannot resolve.
Results: RESULT_DIR/NAME.json (scenarios.py's record, plus "fix"), read by record.py.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scenarios  # after the path insert; reads PAYLOAD_DIR and RESULT_DIR from sys.argv, as this script does

NAME = "13-flash-attn-4-fix-yes"
VENV = "v2"
PY = scenarios.venv_python(VENV)
PORT = 8113
OPTIONS = ["--skip", "distributions", "--timeout", "180", "--no-color"]


def doctor(argv: list[str], transcript: Path) -> dict[str, object]:
    started = time.monotonic()
    proc = subprocess.run([*scenarios.DOCTOR, *argv], env=scenarios.venv_env(VENV), cwd=scenarios.CWD,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=400, check=False)
    transcript.write_text(proc.stdout + ("\n--- stderr ---\n" + proc.stderr if proc.stderr else ""))
    return {"argv": ["dflash-doctor", *argv], "exit_code": proc.returncode,
            "seconds": round(time.monotonic() - started, 2)}


def main() -> None:
    results = scenarios.RESULTS
    results.mkdir(parents=True, exist_ok=True)
    argv = scenarios.serve_argv(PORT)
    record: dict[str, object] = {"scenario": NAME, "venv": VENV, "command": shlex.join(argv)}
    try:
        before = doctor(["serve", "--python", PY, "--json", str(results / f"before-{NAME}.report.json"), *OPTIONS,
                         "--", *argv], results / f"before-{NAME}.doctor.txt")
        print("before", json.dumps(before), flush=True)
        fix = doctor(["fix", "--python", PY, "--yes", "--json", str(results / f"{NAME}.fix.json"),
                      "--snapshots", str(scenarios.WORK / "snapshots"), *OPTIONS], results / f"{NAME}.fix.txt")
        print("fix", json.dumps(fix), flush=True)
        print((results / f"{NAME}.fix.txt").read_text(), flush=True)
        after = doctor(["serve", "--python", PY, "--json", str(results / f"{NAME}.report.json"), *OPTIONS,
                        "--", *argv], results / f"{NAME}.doctor.txt")
        print("after", json.dumps(after), flush=True)
        record.update({"before": before, "fix": fix, "doctor": after})
        record["engine"] = scenarios.serve(NAME, VENV, argv, PORT)
        print("engine", json.dumps({k: v for k, v in record["engine"].items() if k != "log_excerpt"})[:800],
              flush=True)
    except Exception as exc:  # noqa: BLE001 - the record says what broke
        record["driver_error"] = repr(exc)
        print("driver_error", repr(exc), flush=True)
    (results / f"{NAME}.json").write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
