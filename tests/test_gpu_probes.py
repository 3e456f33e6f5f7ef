"""The GPU-layer probes and collectors, run for real on this machine (no GPU, no NVIDIA driver).

NVML is asked in-process, the CUDA-stack and kernel probes run as subprocesses in real interpreters: one
without torch (the doctor's own), and the cached builder venv holding torch 2.13.0 (the CPU wheel), where
the kernel probe's reference math runs on the CPU.
"""

from __future__ import annotations

import ctypes
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from dflash_doctor.check import Context
from dflash_doctor.checks.gpu import CudaStackCheck, GpuCheck, KernelsCheck
from dflash_doctor.facts.gpu import cuda as cuda_collectors
from dflash_doctor.facts.gpu.nvml import machine_limits, nvml_facts
from dflash_doctor.facts.probes import run_probe
from dflash_doctor.facts.shape import section_json
from dflash_doctor.model import Status
from dflash_doctor.runner import judge, run

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "gpu"


def _has_nvml() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


no_driver = pytest.mark.skipif(_has_nvml(), reason="this machine has an NVIDIA driver")


@pytest.fixture(scope="module")
def torch_python() -> Path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from realenv import fa2_builder_python  # a cached venv with torch 2.13.0 (CPU), built once per machine

    return fa2_builder_python()


def stack_facts(ctx: Context) -> dict[str, Any]:
    """The cuda_stack section as the report saves it."""
    collected = cuda_collectors.collect(ctx, {}, wanted=frozenset({"cuda_stack"}))
    facts: dict[str, Any] = section_json(collected["cuda_stack"])
    return facts


def h200_gpu_section() -> dict[str, Any]:
    section: dict[str, Any] = json.loads((FIXTURES / "h200-facts.json").read_text())["sections"]["gpu"]
    return section


# ------------------------------------------------------------------------------------ NVML, in-process


@no_driver
def test_nvml_without_a_driver_records_which_library_the_loader_could_not_find() -> None:
    facts = nvml_facts()
    error = facts["nvml"]["error"]
    assert facts["nvml"]["ok"] is False and facts["devices"] == []
    assert error["name"] == "NVML_ERROR_LIBRARY_NOT_FOUND"
    assert error["loader"].startswith("libnvidia-ml.so.1: cannot open shared object file")
    assert facts["host"] == {"kernel_module": None, "dev_nodes": [], "limits": machine_limits()}
    assert facts["doctor_pid"] > 0 and facts["seconds"] < 5


@no_driver
def test_without_no_gpu_the_doctor_fails_saying_there_is_no_driver() -> None:
    checks = [GpuCheck(), CudaStackCheck(), KernelsCheck()]
    results, sections, _ = run(checks, Context(python=sys.executable, cwd=".", timeout_s=60))
    by_id = {r.id: r for r in results}
    gpu = by_id["gpu"].findings[0]
    assert (gpu.id, gpu.status) == ("gpu.nvml-library-missing", Status.FAIL)
    assert gpu.title == ("no NVIDIA driver: libnvidia-ml.so.1 cannot be loaded, and no NVIDIA kernel module is "
                         "loaded (no /proc/driver/nvidia/version)")
    assert "--no-gpu" in gpu.detail
    assert by_id["cuda-stack"].findings[0].id == "cuda-stack.no-gpu"
    assert by_id["kernels"].findings[0].id == "kernels.no-gpu"
    assert by_id["cuda-stack"].status is by_id["kernels"].status is Status.SKIP
    # The facts are in the report for a later `judge`: the probes still said what they saw.
    assert section_json(sections["cuda_stack"])["torch"] == {"installed": False}


def test_with_no_gpu_every_gpu_check_skips_and_nothing_gpu_is_collected() -> None:
    checks = [GpuCheck(), CudaStackCheck(), KernelsCheck()]
    results, sections, _ = run(checks, Context(python=sys.executable, cwd=".", no_gpu=True))
    assert [(r.id, r.status, r.findings[0].id) for r in results] == [
        ("gpu", Status.SKIP, "doctor.skipped-no-gpu"), ("cuda-stack", Status.SKIP, "doctor.skipped-no-gpu"),
        ("kernels", Status.SKIP, "doctor.skipped-no-gpu")]
    assert not {"gpu", "cuda_stack", "kernels"} & set(sections)


# --------------------------------------------------------------------------- the CUDA-stack probe


def test_cuda_stack_probe_without_torch_is_a_finding_not_a_traceback() -> None:
    facts = stack_facts(Context(python=sys.executable, cwd=".", timeout_s=60))
    assert facts["process"]["error"] is None and "Traceback" not in facts["process"]["stderr"]
    assert facts["torch"] == {"installed": False}
    if not _has_nvml():
        assert facts["libcuda"]["loaded"] is False and "libcuda.so.1" in facts["libcuda"]["error"]
    # Judged against the H200's GPU facts, so that the no-GPU gate does not hide it.
    (result,) = judge([CudaStackCheck()], {"cuda_stack": facts, "gpu": h200_gpu_section()})
    assert (result.status, result.findings[0].id) == (Status.SKIP, "cuda-stack.torch-absent")


def test_cuda_stack_probe_in_an_interpreter_that_does_not_start_is_a_failure_finding(tmp_path: Path) -> None:
    ctx = Context(python=str(tmp_path / "no" / "python3"), cwd=".", timeout_s=10)
    facts = stack_facts(ctx)
    (result,) = judge([CudaStackCheck()], {"cuda_stack": facts, "gpu": h200_gpu_section()})
    finding = result.findings[0]
    assert (finding.id, finding.status) == ("cuda-stack.probe-failed", Status.FAIL)
    assert "cannot start" in finding.title


@pytest.mark.slow
def test_cuda_stack_probe_with_cpu_torch_reports_a_cpu_build(torch_python: Path) -> None:
    facts = stack_facts(Context(python=str(torch_python), cwd=".", timeout_s=120))
    torch = facts["torch"]
    assert torch["import_ok"] and torch["version"] == "2.13.0+cpu" and torch["cuda"] is None
    assert torch["arch_list"] == [] and "cuda" not in facts
    (result,) = judge([CudaStackCheck()], {"cuda_stack": facts, "gpu": h200_gpu_section()})
    finding = result.findings[0]
    assert finding.id == "cuda-stack.torch-cpu-build"
    assert finding.title == "torch 2.13.0+cpu is a CPU-only build: it cannot use the NVIDIA GPUs"
    # The recorded H200 driver supports CUDA 13.0: the fix takes the cu130 index, for this interpreter.
    assert finding.remediation[0].command.endswith("--index-url https://download.pytorch.org/whl/cu130")
    assert str(torch_python) in finding.remediation[0].command


@pytest.mark.slow
def test_the_stack_and_kernel_probes_share_one_torch_import(torch_python: Path) -> None:
    ctx = Context(python=str(torch_python), cwd=".", timeout_s=120)
    collected = cuda_collectors.collect(ctx, {}, wanted=frozenset({"cuda_stack", "kernels"}))
    sections = {name: section_json(value) for name, value in collected.items()}
    shared = sections["cuda_stack"]["shared_process"]
    (torch,) = shared["preload"]
    assert shared["forked"] is True and torch["module"] == "torch" and torch["imported"] is True
    # The children found torch loaded: the stack probe's own import is a dictionary lookup.
    assert sections["cuda_stack"]["torch"]["import_seconds"] < 0.05 < torch["seconds"]
    families = {f["family"]: f for f in sections["kernels"]["families"]}
    assert list(families) == list(cuda_collectors.KERNEL_FAMILIES)
    assert all(f["process"]["error"] is None for f in families.values())
    assert families["sdpa"]["torch"]["version"] == "2.13.0+cpu"


def test_only_the_wanted_sections_are_collected() -> None:
    ctx = Context(python=sys.executable, cwd=".", timeout_s=60)
    assert set(cuda_collectors.collect(ctx, {}, wanted=frozenset({"kernels"}))) == {"kernels"}


# ---------------------------------------------------------------------------------- the kernel probe


def _kernels(python: str, family: str, timeout_s: float = 120, **extra: Any) -> Mapping[str, Any]:
    args = dict(cuda_collectors.KERNEL_PROBLEM, family=family, **extra)
    outcome = run_probe(python, "kernels", args, timeout_s=timeout_s)
    facts: dict[str, Any] = {"family": family, "process": outcome.as_facts()}
    facts.update(outcome.data or {})
    return facts


def test_a_family_whose_package_is_absent_answers_without_importing_torch() -> None:
    for family in ("flash_attn", "flash_attn_cute", "flash_attn_rotary", "vllm_flash_attn", "vllm_rotary"):
        facts = _kernels(sys.executable, family)
        assert facts["import"]["installed"] is False, family
        assert "torch" not in facts and facts["seconds"] < 1


@pytest.mark.slow
def test_flash_attn_4_without_its_cutlass_dsl_is_not_importable_naming_the_missing_module(tmp_path: Path) -> None:
    # The real flash-attn-4 wheel installed without its dependencies, beside torch 2.13.0 (CPU).
    from realenv import fa4_wheel, install, make_venv
    from stacks import add_to_path, torch_site

    env = make_venv(tmp_path)
    install(env, fa4_wheel())
    add_to_path(env, torch_site())
    facts = _kernels(str(env.python), "flash_attn_cute", device="cpu")
    assert facts["import"]["installed"] is True and facts["import"]["ok"] is False
    assert facts["import"]["exception"]["type"] == "ModuleNotFoundError"
    assert "cutlass" in facts["import"]["exception"]["message"]
    # flash-attn v2's family sees the same tree as a namespace package without flash_attn_func.
    assert _kernels(str(env.python), "flash_attn", device="cpu")["import"]["exception"]["type"] == "ImportError"
    (result,) = judge([KernelsCheck()], {"kernels": {"problem": cuda_collectors.KERNEL_PROBLEM, "families": [facts]}})
    finding = result.findings[0]
    assert (finding.id, finding.status) == ("kernels.not-importable", Status.SKIP)
    assert finding.title.startswith("flash-attn-4 (flash_attn.cute.flash_attn_func): not run, "
                                    "`from flash_attn.cute import flash_attn_func` fails (ModuleNotFoundError")


@pytest.mark.slow
def test_kernel_probe_reference_math_on_the_cpu_stays_within_the_stated_tolerance(torch_python: Path) -> None:
    # torch's CPU flash SDPA against the probe's own fp32 reference: the same code the GPU runs.
    facts = _kernels(str(torch_python), "sdpa", device="cpu", sdpa_backends=["flash"])
    assert facts["process"]["error"] is None
    cases = facts["devices"][0]["cases"]
    assert [(c["kernel"], c["dtype"], c["head_dim"]) for c in cases] == [
        ("sdpa-flash", "float16", 128), ("sdpa-flash", "bfloat16", 128),
        ("sdpa-flash", "float16", 64), ("sdpa-flash", "bfloat16", 64)]
    eps = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}
    for case in cases:
        assert case["status"] == "ok"
        assert case["tolerance"] == pytest.approx(2 * eps[case["dtype"]] * case["scale"])
        assert 0 < case["max_abs_err"] < case["tolerance"] / 4
    (result,) = judge([KernelsCheck()], {"kernels": {"problem": cuda_collectors.KERNEL_PROBLEM, "families": [facts]}})
    assert result.status is Status.PASS
    assert result.findings[0].title.startswith("4 case(s) within tolerance on cpu: torch SDPA")


@pytest.mark.slow
def test_a_kernel_probe_that_hangs_past_its_timeout_is_a_finding_for_its_family(torch_python: Path) -> None:
    facts = _kernels(str(torch_python), "sdpa", timeout_s=0.5, device="cpu")
    assert facts["process"]["timed_out"] is True
    (result,) = judge([KernelsCheck()], {"kernels": {"problem": cuda_collectors.KERNEL_PROBLEM, "families": [facts]}})
    finding = result.findings[0]
    assert (finding.id, finding.status) == ("kernels.crashed", Status.FAIL)
    assert finding.title == "torch SDPA (flash, memory-efficient): the probe process timed out after 0.5 s"


@pytest.mark.slow
def test_the_triton_family_without_triton_says_it_is_not_installed(torch_python: Path) -> None:
    facts = _kernels(str(torch_python), "triton")
    assert facts["import"] == {"statement": "import triton", "installed": False, "ok": False}
    (result,) = judge([KernelsCheck()], {"kernels": {"problem": cuda_collectors.KERNEL_PROBLEM, "families": [facts]}})
    assert result.findings[0].title == "Triton (the doctor's own kernel): Triton is not installed, not run"
