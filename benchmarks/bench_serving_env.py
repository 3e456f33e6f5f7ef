"""How fast is the doctor where users run it: an environment with torch, vLLM and flash-attn installed?

Builds a venv that sees torch 2.13.0 (CPU), the real vLLM 0.20.1 wheel with its requirements (the
cached venv of tests/stacks.py's vllm_python, added to the new venv's path with a .pth file) and
flash-attn 2.8.3 built from its sdist (installed into the venv itself), then times, interleaved, in
fresh processes:
- `ENV/bin/python -c "import torch"`: the floor any probe that needs torch pays once;
- `pip --python ENV check`: what users compare a packaging check with;
- `dflash-doctor --python ENV --no-gpu`: the whole doctor, as in a CI image build.
Prints the medians, the doctor's ratio to the torch import (goal: at most 1.5) and, from the doctor's
last JSON report, each check's duration.

    python benchmarks/bench_serving_env.py [--runs 5]

`--smoke` (CI): one run of each arm in a fresh, empty venv; the torch + vLLM stack and flash-attn are skipped
(building them takes minutes), so is the `import torch` arm and the ratio, and it says so.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from realenv import fa2_wheel, install, make_venv
from stacks import add_to_path, vllm_python

GOAL_RATIO = 1.5


def _site_of(python: Path) -> Path:
    out = subprocess.run([str(python), "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--doctor-python", default=sys.executable)
    parser.add_argument("--smoke", action="store_true", help="CI: an empty venv, one run (see the docstring)")
    args = parser.parse_args()
    if args.smoke:
        args.runs = 1
        print("smoke: skipped the torch 2.13 + vLLM 0.20.1 stack, flash-attn 2.8.3, the import torch arm and the "
              "ratio; an empty venv instead")
    stack = None if args.smoke else vllm_python("0.20.1")
    with tempfile.TemporaryDirectory() as tmp:
        env = make_venv(Path(tmp))
        if stack is not None:
            add_to_path(env, _site_of(stack))
            install(env, fa2_wheel())
        count = len(list(env.site_packages.glob("*.dist-info"))) + (
            len(list(_site_of(stack).glob("*.dist-info"))) if stack is not None else 0)
        report = Path(tmp) / "report.json"
        arms = {
            **({} if args.smoke else {"import torch": [str(env.python), "-c", "import torch"]}),
            "pip check": [sys.executable, "-m", "pip", "--python", str(env.python), "check"],
            "dflash-doctor --no-gpu": [args.doctor_python, "-m", "dflash_doctor", "--python", str(env.python),
                                       "--no-gpu", "--json", str(report)],
        }
        samples: dict[str, list[float]] = {name: [] for name in arms}
        for _ in range(args.runs):
            for name, argv in arms.items():
                start = time.perf_counter()
                subprocess.run(argv, check=False, capture_output=True, text=True, cwd=tmp)
                samples[name].append(time.perf_counter() - start)
        print(f"environment: {count} distributions" + (" (an empty venv: smoke)" if args.smoke else
                                                        " (torch 2.13.0 CPU, vLLM 0.20.1, flash-attn 2.8.3)"))
        medians = {name: statistics.median(s) for name, s in samples.items()}
        for name, median in medians.items():
            runs = ", ".join(f"{s:.2f}" for s in samples[name])
            print(f"{name:24s} median {median:6.2f} s   ({runs})")
        checks = json.loads(report.read_text())["checks"]
        if args.smoke:
            print(f"smoke: the doctor's report has {len(checks)} checks; no goal judged")
            return 0
        ratio = medians["dflash-doctor --no-gpu"] / medians["import torch"]
        print(f"doctor / import torch: {ratio:.2f} (goal <= {GOAL_RATIO});"
              f" doctor / pip check: {medians['dflash-doctor --no-gpu'] / medians['pip check']:.1f}")
        print("per check, last run: " + ", ".join(
            f"{c['id']} {c['duration_s']:.2f} s" for c in sorted(checks, key=lambda c: -c["duration_s"])
            if c["duration_s"] >= 0.05))
        return 0 if ratio <= GOAL_RATIO else 1


if __name__ == "__main__":
    raise SystemExit(main())
