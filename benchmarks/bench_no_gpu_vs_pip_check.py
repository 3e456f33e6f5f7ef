"""`dflash-doctor --no-gpu` against `pip check` and `import torch`, in the interpreter this runs under.

Meant for an interpreter with torch but neither flash-attn nor vLLM (the GPU machine's own python3):
there the Python layers have nothing that loads torch, so the doctor should not pay `import torch`
and should finish within `pip check`'s time (goal: at most 0.75 of it). Runs the commands in turn (A B C A B C
...), after one warm-up each, from the temporary directory, and prints each one's runs and median wall seconds,
then each doctor's ratio to `pip check` and to `import torch`, round by round: their medians and spread, with the
machine's load.

    python3 benchmarks/bench_no_gpu_vs_pip_check.py [--runs 7] [--doctor-path DIR ...]

Each --doctor-path is a directory holding a `dflash_doctor` package to time (default: this checkout),
so that two versions of the doctor can be compared in one run. `--smoke` (CI): one run of each, no warm-up.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from paired import run_paired, timed

ROOT = Path(__file__).resolve().parent.parent
GOAL_VS_PIP_CHECK = 0.75


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
    first: dict[str, float] = {}
    for name, (argv, env) in commands.items():  # the warm-up, which a smoke run counts
        first[name], code = timed(argv, env, cwd=tempfile.gettempdir())
        print(f"{name}: exit {code}" + (" (smoke: no warm-up, this run is the one timed)" if args.smoke else ""))
    arms = {name: (lambda argv=argv, env=env: timed(argv, env, cwd=tempfile.gettempdir())[0])
            for name, (argv, env) in commands.items()}
    paired = run_paired(arms, 0 if args.smoke else args.runs, warmup=0)
    if args.smoke:
        paired.samples = {name: [seconds] for name, seconds in first.items()}
    medians = {name: round(paired.median(name), 3) for name in commands}
    for name, values in paired.samples.items():
        print(f"{name}: median {medians[name]:.2f} s, runs {[round(v, 2) for v in values]}")
    doctors = [name for name in commands if name.startswith("doctor ")]
    for line in paired.lines([(d, other) for d in doctors for other in ("pip check", "import torch")])[len(commands):]:
        print(line)
    if not args.smoke:
        print(f"goal: doctor / pip check, paired, at most {GOAL_VS_PIP_CHECK}")
    print(json.dumps(medians))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
