"""Fill the test cache ahead of a test run: every download and build the tests use, in one command.

    python3 tests/warm_cache.py

The cache lives outside the repository, in ``$DFLASH_DOCTOR_TEST_CACHE`` (default
``~/.cache/dflash-doctor-tests``). Each artifact is fetched or built once, under a lock, exactly as
the tests fetch it on demand; running this first only moves the cost ahead and prints it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from realenv import _venv_with_pip_template, cache_dir, fa2_wheel, fa4_wheel
from stacks import (
    KERNEL_WHEELS,
    cudart12_library,
    fa2_wheel_with_foreign_extension,
    kernel_wheel,
    torch_site,
    vllm_python,
    vllm_site,
)
from vllm_release import MATRIX
from vllm_sources import pypi_sdist, vllm_source

from dflash_doctor.knowledge import vllm as vl

# The vLLM wheels the scenario tests install, and the sdists whose source the tests read.
VLLM_WHEELS = ("0.20.1", "0.24.0", "0.33.0")  # 0.33.0: `vllm download-kernels` (test_kernel_packages.py)
# 0.25.1, 0.27.1 and 0.28.0: the releases around the 0.24 V2 lm_head and the 0.28 RoPE-layout rules
# (tests/test_vllm_regressions.py).
VLLM_SOURCES = sorted({"0.20.1", "0.22.0", "0.24.0", "0.25.1", "0.27.1", "0.28.0", *MATRIX,
                       *(v for e in vl.ROTARY_FLASH_ATTN_GUARD.value for v in e[:2])})
# The releases whose own validation the tests run live: 0.20.1 (tests/test_vllm_validation.py), 0.33.0 and 0.34.0
# (tests/test_vllm_validation_newest.py: each venv took 3 to 5 minutes to build on a 2-core machine).
VLLM_PYTHONS = ("0.20.1", "0.33.0", "0.34.0")
FA2_SDISTS = ("2.8.3.post1", "2.8.3.post2")  # 2.8.3 comes with its wheel's build


def _steps() -> list[tuple[str, Callable[[], object]]]:
    steps: list[tuple[str, Callable[[], object]]] = [
        ("flash-attn-4 wheel", fa4_wheel),
        ("flash-attn 2.8.3 built from its sdist", fa2_wheel),
        ("flash-attn 2.8.3 with a foreign extension", fa2_wheel_with_foreign_extension),
        ("torch 2.13.0 (CPU) builder", torch_site),
        ("the venv with pip that tests copy", _venv_with_pip_template),
    ]
    steps += [(f"flash-attn {v} sdist", lambda v=v: pypi_sdist("flash-attn", v)) for v in FA2_SDISTS]
    steps += [(f"vLLM {v} wheel, installed", lambda v=v: vllm_site(v)) for v in VLLM_WHEELS]
    steps += [(f"{n} {v} wheel", lambda n=n, v=v: kernel_wheel(n, v)) for n, v in KERNEL_WHEELS]
    steps.append(("a library linked against libcudart.so.12", cudart12_library))
    steps += [(f"vLLM {v} source", lambda v=v: vllm_source(v)) for v in VLLM_SOURCES]
    steps += [(f"vLLM {v} importable venv (CPU platform)", lambda v=v: vllm_python(v)) for v in VLLM_PYTHONS]
    return steps


def main() -> int:
    started = time.perf_counter()
    for title, step in _steps():
        t0 = time.perf_counter()
        step()
        print(f"{title}: {time.perf_counter() - t0:.1f} s", flush=True)
    size = sum(p.stat().st_size for p in cache_dir().rglob("*") if p.is_file() and not p.is_symlink())
    print(f"cache {cache_dir()}: {size / 1e9:.1f} GB, filled in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
