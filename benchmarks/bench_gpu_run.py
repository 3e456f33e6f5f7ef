"""The whole doctor on a GPU machine, cold and warm, against what any GPU program pays first.

In one command, in this order:
1. the doctor's first run on the machine (cold: nothing of torch, CUDA or Triton in the page cache);
2. then, interleaved, `--runs` times each: the warm doctor, and a floor program that does what the
   doctor's GPU layers cannot avoid: `import torch`, CUDA initialised on the GPU, and the first compile
   and launch of a small Triton kernel;
3. then `--cold-pairs` times: the floor program and the doctor, each after the files of this interpreter's
   sys.path, its prefix and the GPU driver's libraries are dropped from the page cache (`paired.evict`), so that
   each reads torch, Triton and CUDA from disk as a first run does;
and prints every wall time, the medians, and the median of the doctor's ratio to the floor, pair by pair (each
warm run against the floor run right after it; goal: at most 1.1; the cold pairs likewise, goal: at most 1.1),
with the machine's load, and the first cold run against 7 s. The doctor's reports go to --out (the last warm one is kept, its `timeline` printed: where each
collection step started and how long it took).

    python3 benchmarks/bench_gpu_run.py [--runs 5] [--cold-pairs 3] [--out DIR] [-- doctor args...]

`--smoke` (CI, no GPU needed): the doctor once with `--no-gpu` (and the doctor args), its report read back, and
the doctor's own package dropped from the page cache as the cold pairs drop the stack; the GPU runs, the warm
runs and the floor program are skipped, and it says so. No goal is judged.
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

from paired import evict, load

FLOOR = """
import torch, triton, triton.language as tl
torch.cuda.init()
x = torch.ones(1024, device="cuda")

@triton.jit
def double(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n) * 2, mask=offs < n)

y = torch.empty_like(x)
double[(1,)](x, y, x.numel(), BLOCK=1024)
torch.cuda.synchronize()
assert float(y.sum()) == 2048.0
"""
GOAL_WARM_RATIO = 1.1
GOAL_COLD_RATIO = 1.1
DRIVER_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/local/nvidia/lib64", "/usr/local/cuda/lib64")
GOAL_COLD_S = 7.0


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, int]:
    start = time.perf_counter()
    proc = subprocess.run(argv, check=False, capture_output=True, text=True, env=env)
    return time.perf_counter() - start, proc.returncode


def smoke(doctor: list[str], out: Path, env: dict[str, str]) -> int:
    """What runs without a GPU: the doctor's run and its report, as the benchmark makes them."""
    report = out / "report-smoke.json"
    seconds, code = timed([*doctor, "--no-gpu", "--json", str(report)], env)
    checks = json.loads(report.read_text())["checks"] if report.is_file() else []
    print(f"smoke: doctor --no-gpu {seconds:.2f} s (exit {code}), {len(checks)} checks in its report")
    files, size = evict([str(Path(__file__).resolve().parent.parent / "dflash_doctor")])
    print(f"smoke: dropped {files} files ({size >> 10} KiB) of the doctor from the page cache")
    print("smoke: skipped the GPU run (cold and warm) and the floor program (import torch, CUDA init, first Triton "
          "compile): they need a GPU; no goal judged")
    return 0 if code in (0, 1) and checks else 1


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cold-pairs", type=int, default=3)
    parser.add_argument("--out", default=None)
    parser.add_argument("--smoke", action="store_true", help="CI: only what runs without a GPU (see the docstring)")
    parser.add_argument("doctor_args", nargs="*")
    args = parser.parse_args()
    out = Path(args.out or tempfile.mkdtemp())
    out.mkdir(parents=True, exist_ok=True)
    if args.smoke:
        return smoke([sys.executable, "-m", "dflash_doctor", *args.doctor_args], out, dict(os.environ))
    # Triton's on-disk cache would turn a compile into a cache hit: every run, the doctor's and the floor's,
    # gets a fresh one, so each pays the first compile of its kernel, as on a machine seen for the first time.
    env = dict(os.environ)
    doctor = [sys.executable, "-m", "dflash_doctor", *args.doctor_args]
    with tempfile.TemporaryDirectory() as cache:
        cold, code = timed([*doctor, "--json", str(out / "report-cold.json")], {**env, "TRITON_CACHE_DIR": cache})
    print(f"cold doctor: {cold:.2f} s (exit {code})", flush=True)
    warm: list[float] = []
    floor: list[float] = []
    floor_file = out / "floor.py"  # Triton reads a kernel's source with inspect: it must be in a file
    floor_file.write_text(FLOOR)
    for i in range(args.runs):
        with tempfile.TemporaryDirectory() as cache:
            seconds, code = timed([*doctor, "--json", str(out / "report-warm.json")], {**env, "TRITON_CACHE_DIR": cache})
        warm.append(seconds)
        with tempfile.TemporaryDirectory() as cache:
            seconds_floor, floor_code = timed([sys.executable, str(floor_file)], {**env, "TRITON_CACHE_DIR": cache})
        floor.append(seconds_floor)
        print(f"warm {i + 1}: doctor {warm[-1]:.2f} s (exit {code}), floor {seconds_floor:.2f} s (exit {floor_code})",
              flush=True)
    ratios = [w / f for w, f in zip(warm, floor) if f > 0]
    ratio = statistics.median(ratios)
    print(f"medians: doctor {statistics.median(warm):.2f} s, floor (import torch + CUDA init + first Triton "
          f"compile) {statistics.median(floor):.2f} s; paired ratio {ratio:.2f} over {len(ratios)} pairs (min "
          f"{min(ratios):.2f}, max {max(ratios):.2f}; goal <= {GOAL_WARM_RATIO}); cold {cold:.2f} s (goal < "
          f"{GOAL_COLD_S:g} s); {load()}")
    cold_ratios: list[float] = []
    for i in range(args.cold_pairs):
        with tempfile.TemporaryDirectory() as cache:
            evict(_stack_roots())
            seconds_floor, floor_code = timed([sys.executable, str(floor_file)], {**env, "TRITON_CACHE_DIR": cache})
        with tempfile.TemporaryDirectory() as cache:
            evict(_stack_roots())
            seconds, code = timed([*doctor, "--json", str(out / "report-cold-pair.json")],
                                  {**env, "TRITON_CACHE_DIR": cache})
        cold_ratios.append(seconds / seconds_floor)
        print(f"cold pair {i + 1}: doctor {seconds:.2f} s (exit {code}), floor {seconds_floor:.2f} s (exit "
              f"{floor_code}), ratio {cold_ratios[-1]:.2f}", flush=True)
    if cold_ratios:
        print(f"cold pairs: paired ratio {statistics.median(cold_ratios):.2f} over {len(cold_ratios)} (goal <= "
              f"{GOAL_COLD_RATIO})")
    last = out / "report-warm.json"
    steps = json.loads(last.read_text()).get("timeline", []) if last.is_file() else []
    print("timeline, last warm run (start + duration, s): " + ", ".join(
        f"{step['name']}{' (head start)' if step.get('kind') == 'head-start' else ''} {step['start_s']:.2f}+{step['duration_s'] or 0:.2f}" for step in steps))
    cold_ok = not cold_ratios or statistics.median(cold_ratios) <= GOAL_COLD_RATIO
    return 0 if ratio <= GOAL_WARM_RATIO and cold < GOAL_COLD_S and cold_ok else 1


def _stack_roots() -> list[str]:
    """What a GPU program reads from disk on its first run: this interpreter's sys.path (torch, Triton, the
    nvidia-* libraries, the doctor on PYTHONPATH), its prefix (the standard library) and the driver's libraries."""
    roots = {p for p in sys.path if p and os.path.isdir(p)} | {sys.prefix, sys.base_prefix}
    roots |= {d for d in DRIVER_DIRS if os.path.isdir(d)}
    return sorted(roots)


if __name__ == "__main__":
    raise SystemExit(main())
