"""`dflash-doctor --no-gpu` against `pip check` and `import torch`, in the interpreter this runs under.

Meant for an interpreter with torch but neither flash-attn nor vLLM (the GPU machine's own python3):
there the Python layers have nothing that loads torch, so the doctor should not pay `import torch`
and should finish within `pip check`'s time. Runs the three commands interleaved, after one warm-up
each, from the temporary directory, and prints each one's runs and median wall seconds.

    python3 benchmarks/bench_no_gpu_vs_pip_check.py [--runs 7] [--doctor-path DIR ...]

Each --doctor-path is a directory holding a `dflash_doctor` package to time (default: this checkout),
so that two versions of the doctor can be compared in one run. `--smoke` (CI): one run of each, no warm-up.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.monotonic()
    proc = subprocess.run(argv, check=False, capture_output=True, text=True, env=env, cwd=tempfile.gettempdir())
    return time.monotonic() - started, proc


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--doctor-path", action="append", default=[])
    parser.add_argument("--smoke", action="store_true", help="CI: one run of each command, no warm-up")
    args = parser.parse_args()
    if args.smoke:
        args.runs = 1
    python = sys.executable
    commands: dict[str, tuple[list[str], dict[str, str]]] = {}
    extra = os.environ.get("PYTHONPATH", "")
    for path in args.doctor_path or [str(ROOT)]:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (path, extra) if p)}
        commands[f"doctor {path}"] = ([python, "-m", "dflash_doctor", "--no-gpu"], env)
    commands["pip check"] = ([python, "-m", "pip", "check"], dict(os.environ))
    commands["import torch"] = ([python, "-c", "import torch"], dict(os.environ))
    times: dict[str, list[float]] = {name: [] for name in commands}
    for name, (argv, env) in commands.items():
        seconds, proc = _timed(argv, env)
        print(f"{name}: exit {proc.returncode}" + (" (smoke: no warm-up, this run is the one timed)" if args.smoke else ""))
        if args.smoke:
            times[name].append(seconds)
    for _ in range(0 if args.smoke else args.runs):
        for name, (argv, env) in commands.items():
            times[name].append(_timed(argv, env)[0])
    medians = {name: round(statistics.median(values), 3) for name, values in times.items()}
    for name, values in times.items():
        print(f"{name}: median {medians[name]:.2f} s, runs {[round(v, 2) for v in values]}")
    print(json.dumps(medians))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
