"""Each benchmark of benchmarks/ runs in its smoke mode (`--smoke`: tiny sizes, one repetition), as a user runs
it, in a subprocess, and prints its figures. The smoke runs hold the benchmarks' code working (their imports,
the environments they build, the doctor's arguments and JSON they read); their figures are not judged.
What needs a GPU, or minutes of building, is skipped by the benchmark itself, which says so: never faked."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SECONDS = r"\d+\.\d+ s"

# benchmark, its smoke arguments, what its output must say (each a regex, in order)
SMOKE = {
    "bench_model_headers": ([], [r"synthetic target: 4 layers, 47 tensors, \d+ shards",
                                 r"warm full \(keep_tensors=True\)\s+median of 1:\s+\d+\.\d ms",
                                 r"\(smoke: not judged\)"]),
    "bench_merge": ([], [r"smoke: 20 hosts from .*fixtures/h200/report-cold\.json",
                         rf"merge --jobs 1: {SECONDS} wall, peak RSS \d+ MiB",
                         r"found: \{'hosts': 20, 'reported': 20,"]),
    "bench_static_layers": ([], [r"skipped the flash-attn 2\.8\.3 and flash-attn-4 wheels",
                                 r"environment: 5 distributions installed",
                                 r"start-up, dflash-doctor list:\s+median \d+ ms",
                                 r"static layers over 5 dists:\s+median \d+ ms \(min \d+\), exit [01]",
                                 r"smoke: goals not judged"]),
    "bench_serving_env": ([], [r"smoke: skipped the torch 2\.13 \+ vLLM 0\.20\.1 stack",
                               rf"pip check\s+median\s+{SECONDS}",
                               rf"dflash-doctor --no-gpu\s+median\s+{SECONDS}",
                               r"smoke: the doctor's report has \d+ checks; no goal judged"]),
    "bench_no_gpu_vs_pip_check": ([], [r"doctor .*: exit [01] \(smoke",
                                       rf"pip check: median {SECONDS}",
                                       r'\{"doctor .*": \d+\.\d+, "pip check": \d+\.\d+, "import torch": \d+\.\d+\}']),
    # no GPU here: the doctor's run and report only, the GPU runs and the floor program skipped (it says so)
    "bench_gpu_run": (["--", "--only", "namespaces"], [rf"smoke: doctor --no-gpu {SECONDS} \(exit [01]\), 1 checks",
                                                        r"smoke: dropped [1-9]\d* files \(\d+ KiB\) of the doctor",
                                                        r"skipped the GPU run .* and the floor program"]),
}


def test_every_benchmark_has_a_smoke_run() -> None:
    assert sorted(SMOKE) == sorted(p.stem for p in (ROOT / "benchmarks").glob("bench_*.py"))


@pytest.mark.parametrize("name", sorted(SMOKE))
def test_benchmark_smoke_run(name: str, tmp_path: Path) -> None:
    extra, expected = SMOKE[name]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
           "TMPDIR": str(tmp_path)}
    extra = ["--out", str(tmp_path / "out"), *extra] if name == "bench_gpu_run" else extra
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / f"{name}.py"), "--smoke", *extra],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    position = 0
    for pattern in expected:
        match = re.compile(pattern).search(proc.stdout, position)
        assert match, f"{pattern!r} not in (after offset {position}):\n{proc.stdout}"
        position = match.end()
