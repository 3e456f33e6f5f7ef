"""How fast is the doctor where users run it: an environment with torch, vLLM and flash-attn installed?

Builds a venv that sees torch 2.13.0 (CPU), the real vLLM 0.20.1 wheel with its requirements (the
cached venv of tests/stacks.py's vllm_python, added to the new venv's path with a .pth file) and
flash-attn 2.8.3 built from its sdist (installed into the venv itself), then times, in turn (A B C A B C ...,
after one round not counted), in fresh processes:
- `ENV/bin/python -c "import torch"`: the floor any probe that needs torch pays once;
- `pip --python ENV check`: what users compare a packaging check with;
- `dflash-doctor --python ENV --no-gpu`: the whole doctor, as in a CI image build.
Prints each one's median, the median of the doctor's ratio to the torch import round by round (goal: at most
1.3) and to `pip check`, with their spread and the machine's load, and, from the doctor's last JSON report,
its timeline (where each collection step started and how long it took: the critical path).

    python benchmarks/bench_serving_env.py [--runs 7] [--doctor-path DIR]

`--doctor-path`: a directory holding the `dflash_doctor` package to time, so that a checkout can be timed against
another. By default the checkout this script is in is installed with `pip install --no-deps --target` into a
temporary directory first: timed as users run it, with the bytecode pip compiles at install (an editable checkout
under PYTHONDONTWRITEBYTECODE compiles its modules again at every start: 0.25 s of CPU a run).

`--smoke` (CI): one run of each arm in a fresh, empty venv; the torch + vLLM stack and flash-attn are skipped
(building them takes minutes), so is the `import torch` arm and the ratio, and it says so.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from paired import run_paired, timed
from realenv import fa2_wheel, install, make_venv
from stacks import add_to_path, vllm_python

GOAL_RATIO = 1.3
DOCTOR = "dflash-doctor --no-gpu"


def _site_of(python: Path) -> Path:
    out = subprocess.run([str(python), "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--doctor-python", default=sys.executable)
    parser.add_argument("--doctor-path", default=None)
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
        doctor_env = dict(os.environ)
        if not args.doctor_path:
            args.doctor_path = str(Path(tmp) / "doctor")
            subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-cache-dir",
                            "--disable-pip-version-check", "--target", args.doctor_path,
                            str(Path(__file__).resolve().parent.parent)], check=True)
        doctor_env["PYTHONPATH"] = os.pathsep.join(p for p in (args.doctor_path, os.environ.get("PYTHONPATH")) if p)
        commands = {
            **({} if args.smoke else {"import torch": ([str(env.python), "-c", "import torch"], None)}),
            "pip check": ([sys.executable, "-m", "pip", "--python", str(env.python), "check"], None),
            DOCTOR: ([args.doctor_python, "-m", "dflash_doctor", "--python", str(env.python), "--no-gpu", "--json",
                      str(report)], doctor_env),
        }
        arms = {name: (lambda argv=argv, e=e: timed(argv, e, cwd=tmp)[0]) for name, (argv, e) in commands.items()}
        paired = run_paired(arms, args.runs, warmup=0 if args.smoke else 1)
        print(f"environment: {count} distributions" + (" (an empty venv: smoke)" if args.smoke else
                                                        " (torch 2.13.0 CPU, vLLM 0.20.1, flash-attn 2.8.3)"))
        pairs = [] if args.smoke else [(DOCTOR, "import torch"), (DOCTOR, "pip check")]
        for line in paired.lines(pairs):
            print(line)
        saved = json.loads(report.read_text())
        checks = saved["checks"]
        if args.smoke:
            print(f"smoke: the doctor's report has {len(checks)} checks; no goal judged")
            return 0
        ratio = paired.ratio(DOCTOR, "import torch")
        print(f"doctor / import torch, paired: {ratio:.2f} (goal <= {GOAL_RATIO})")
        print("timeline, last run (start + duration, s): " + ", ".join(
            f"{step['name']}{' (head start)' if step.get('kind') == 'head-start' else ''} {step['start_s']:.2f}+{step['duration_s'] or 0:.2f}" for step in saved.get("timeline", [])))
        return 0 if ratio <= GOAL_RATIO else 1


if __name__ == "__main__":
    raise SystemExit(main())
