"""Judgement of the GPU layers (gpu, cuda-stack, kernels) on facts recorded on a real H200.

fixtures/gpu/ holds what the doctor recorded on the device tool's H200 (a whole cold run, a warm run,
CUDA_VISIBLE_DEVICES variants, another process holding memory, torch's SDPA refusals) and, labelled as
such, facts for an RTX A6000 pair (SM86), a T4 (SM75) and a B200 (SM100) derived from that recording by
swapping the hardware in (fixtures/gpu/derive.py). Each test that changes a recorded fact more says so in
its name and its first lines.
"""

from __future__ import annotations

import copy
import importlib.util
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from dflash_doctor.check import Check, Context
from dflash_doctor.checks.gpu import CudaStackCheck, GpuCheck, KernelsCheck
from dflash_doctor.checks.gpu.visible_devices import resolve_visible
from dflash_doctor.registry import CODES
from dflash_doctor.model import CheckResult, Finding, Status
from dflash_doctor.render.gpu_summary import gpu_lines
from dflash_doctor.runner import judge

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "gpu"


def recorded(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    assert doc["label"], name
    return doc


def sections_of(name: str, change: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    sections: dict[str, Any] = copy.deepcopy(recorded(name)["sections"])
    if change is not None:
        change(sections)
    return sections


def run(sections: Mapping[str, Any], prior: list[CheckResult] | None = None,
        no_gpu: bool = False) -> dict[str, CheckResult]:
    checks: list[Any] = [c for c in (GpuCheck(), CudaStackCheck(), KernelsCheck())
                         if c.needs - {"target", "distributions"} <= set(sections)]
    if prior:
        # A check that ran before (an import check) goes through judge() like any other.
        class Replay(Check):
            def __init__(self, result: CheckResult) -> None:
                self.result = result
                self.id, self.layer, self.title = result.id, result.layer, result.title  # type: ignore[misc]

            needs = frozenset()

            def judge(self, facts: Any) -> tuple[Finding, ...]:
                return self.result.findings

        checks = [Replay(p) for p in prior] + checks
    ctx = Context(python="python3", cwd=".", no_gpu=no_gpu)
    results = judge(checks, sections, ctx)
    for result in results:
        for finding in result.findings:
            assert finding.id in CODES, finding.id
    return {r.id: r for r in results}


def ids(result: CheckResult, status: Status | None = None) -> list[str]:
    return [f.id for f in result.findings if status is None or f.status is status]


def one(result: CheckResult, finding_id: str) -> Finding:
    found = [f for f in result.findings if f.id == finding_id]
    assert found, f"no {finding_id} in {ids(result)}"
    return found[0]


# ------------------------------------------------------------------------------- recorded on the H200


def test_h200_recording_passes_gpu_cuda_stack_and_kernels() -> None:
    results = run(sections_of("h200-facts.json"))
    assert {k: r.status for k, r in results.items()} == {"gpu": Status.PASS, "cuda-stack": Status.PASS,
                                                          "kernels": Status.PASS}
    assert one(results["gpu"], "gpu.ok").title.startswith("GPU 0 NVIDIA H200 sm_90 140.4 GiB (139.8 GiB free)")
    cuda = one(results["cuda-stack"], "cuda-stack.ok").title
    assert "torch 2.11.0+cu130 (CUDA 13.0; driver 580.159.04 supports 13.0)" in cuda
    assert "cuda:0 NVIDIA H200 sm_90: SASS sm_90" in cuda and "Triton 3.6.0 (ptxas 12.8" in cuda
    kernels = results["kernels"]
    assert kernels.findings[0].id == "kernels.ok"  # the headline the terminal shows
    assert kernels.findings[0].title.startswith("10 case(s) within tolerance on NVIDIA H200")
    assert ids(kernels, Status.PASS).count("kernels.family-ok") == 2


def test_h200_flash_attn_absent_is_reported_with_the_v2_install_for_the_target() -> None:
    kernels = run(sections_of("h200-facts.json"))["kernels"]
    absent = [f for f in kernels.findings if f.id == "kernels.not-installed"]
    assert [f.title for f in absent][:2] == ["flash_attn.flash_attn_func: flash-attn is not installed, not run",
                                             "flash_attn apply_rotary: flash-attn is not installed, not run"]
    assert absent[0].remediation[0].command == (
        "uv pip install --python /opt/torch/.venv/bin/python3 --no-build-isolation 'flash-attn<3'")
    assert all(f.status is Status.PASS for f in absent)


def test_h200_kernel_cases_state_their_tolerance_and_stay_well_inside_it() -> None:
    eps = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}
    for name in ("h200-facts.json", "h200-warm-facts.json"):
        families = {f["family"]: f for f in recorded(name)["sections"]["kernels"]["families"]}
        cases = [c for fam in ("sdpa", "triton") for c in families[fam]["devices"][0]["cases"]]
        assert len(cases) == 10
        for case in cases:
            assert case["status"] == "ok"
            assert case["tolerance"] == pytest.approx(2 * eps[case["dtype"]] * case["scale"])
            assert case["max_abs_err"] <= 0.25 * case["tolerance"]
            assert case["warm_ms"] < 1.0


def test_h200_runs_stay_inside_the_time_budget() -> None:
    timings = recorded("h200-timings.json")
    runs = timings["runs"]
    assert len([r for r in runs if r["run"] == "cold"]) == 4
    for run_ in runs:
        # The kernel families run beside the CUDA-stack probe: the layer costs what outlasts it.
        assert run_["kernel_layer_over_cuda_stack_s"] < 3, run_
        if run_["run"] == "warm":
            assert run_["report_wall_s"] < 7
    # Whole cold runs from the shell: 8.2, 9.7, 9.3 s, and 12.2 s on the machine whose cold
    # `import torch` took 6.1 s in the CUDA-stack probe (not the ~4.5 s expected there).
    colds = sorted(m["cold"] for m in timings["shell_wall_s"].values())
    assert colds == pytest.approx([8.2, 9.3, 9.7, 12.2], abs=0.05)
    slow = next(r for r in runs if r["run"] == "cold" and r["report_wall_s"] > 10)
    assert slow["cuda_stack_torch_import_s"] > 6


def test_terminal_gpu_lines_show_arch_memory_coverage_and_kernels() -> None:
    report = {"checks": [{"id": "x", "facts": sections_of("h200-facts.json")}]}
    assert gpu_lines(report) == [
        "GPU 0  NVIDIA H200  sm_90  140.4 GiB, 139.8 free  torch: SASS sm_90  kernels: 10 ok"]
    pair = {"checks": [{"id": "x", "facts": sections_of("sm86-derived-from-h200.json")}]}
    assert [line.split("  ")[:3] for line in gpu_lines(pair)] == [["GPU 0", "NVIDIA RTX A6000", "sm_86"],
                                                                   ["GPU 1", "NVIDIA RTX A6000", "sm_86"]]
    assert gpu_lines({"checks": []}) == []


# ------------------------------------------------------------------------ derived for other archs


def test_derived_fixtures_are_what_derive_py_makes_from_the_recording() -> None:
    spec = importlib.util.spec_from_file_location("derive", FIXTURES / "derive.py")
    assert spec is not None and spec.loader is not None
    derive = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(derive)
    for name, doc in derive.derive_all().items():
        assert json.loads((FIXTURES / name).read_text()) == json.loads(json.dumps(doc)), name
        assert doc["label"].startswith("DERIVED from h200-facts.json")


def test_sm86_pair_derived_from_h200_passes_with_both_a6000s_visible() -> None:
    results = run(sections_of("sm86-derived-from-h200.json"))
    assert all(r.status is Status.PASS for r in results.values())
    cuda = one(results["cuda-stack"], "cuda-stack.ok").title
    assert "2 GPU(s): cuda:0 NVIDIA RTX A6000 sm_86: SASS sm_86; cuda:1 NVIDIA RTX A6000 sm_86: SASS sm_86" in cuda


def test_sm75_derived_runs_fp16_and_calls_bf16_and_sdpa_flash_not_applicable() -> None:
    results = run(sections_of("sm75-derived-from-h200.json"))
    kernels = results["kernels"]
    assert kernels.status is Status.PASS
    summary = kernels.findings[0]
    assert summary.title.startswith("3 case(s) within tolerance on Tesla T4")
    assert summary.title.endswith("not applicable here: 7 case(s)")
    declined = summary.evidence["declined"]
    assert sum("bfloat16 needs compute capability 8.0 or newer" in d for d in declined) == 5
    assert sum(d.startswith("sdpa-flash float16") and "No available kernel" in d for d in declined) == 2


def test_sm100_derived_uses_tritons_blackwell_ptxas() -> None:
    cuda = run(sections_of("sm100-derived-from-h200.json"))["cuda-stack"]
    assert cuda.status is Status.PASS
    assert "NVIDIA B200 sm_100: SASS sm_100" in cuda.findings[0].title
    assert "ptxas-blackwell 12.9" in cuda.findings[0].title


def test_torch_built_without_sm86_fails_on_the_a6000_pair() -> None:
    # Derived: the A6000 pair, with torch's arch list as a Hopper/Blackwell-only build would have it.
    def hopper_only_torch(s: dict[str, Any]) -> None:
        s["cuda_stack"]["torch"]["arch_list"] = ["sm_90", "sm_100", "sm_120"]

    cuda = run(sections_of("sm86-derived-from-h200.json", hopper_only_torch))["cuda-stack"]
    assert cuda.status is Status.FAIL
    missing = [f for f in cuda.findings if f.id == "cuda-stack.arch-not-covered"]
    assert len(missing) == 2
    assert "built for sm_90 sm_100 sm_120, nothing of which runs on sm_86" in missing[0].title


@pytest.mark.parametrize(("driver_cuda", "status"), [("13.0", Status.WARN), ("12.8", Status.FAIL)])
def test_ptx_only_coverage_warns_and_fails_when_the_driver_cannot_jit_it(driver_cuda: str, status: Status) -> None:
    # Derived: torch's arch list holds only sm_80 SASS and compute_80 PTX; the H200 (9.0) needs the PTX JIT.
    def ptx_only(s: dict[str, Any]) -> None:
        s["cuda_stack"]["torch"]["arch_list"] = ["sm_80", "compute_80"]
        s["gpu"]["cuda_driver_version"] = driver_cuda

    finding = one(run(sections_of("h200-facts.json", ptx_only))["cuda-stack"], "cuda-stack.arch-ptx-only")
    assert finding.status is status
    assert "only PTX compute_80 to JIT" in finding.title


def test_driver_too_old_for_torch_cuda_fails_with_both_remedies() -> None:
    # Derived: a 570 driver (CUDA 12.8) under torch cu130; torch's probe then sees no CUDA, with torch's warning.
    def old_driver(s: dict[str, Any]) -> None:
        s["gpu"]["driver_version"], s["gpu"]["cuda_driver_version"] = "570.124.06", "12.8"
        warning = ("CUDA initialization: The NVIDIA driver on your system is too old (found version 12080). Please "
                   "update your GPU driver by downloading and installing a new version from the URL: "
                   "http://www.nvidia.com/Download/index.aspx")
        s["cuda_stack"]["cuda"] = {"available": False, "warnings": [warning], "init_error": {
            "type": "RuntimeError", "message": "The NVIDIA driver on your system is too old (found version 12080)."}}

    results = run(sections_of("sm86-derived-from-h200.json", old_driver))
    finding = one(results["cuda-stack"], "cuda-stack.driver-too-old")
    assert finding.status is Status.FAIL
    assert finding.title == ("torch 2.11.0+cu130 is built for CUDA 13.0, but driver 570.124.06 supports CUDA 12.8 at "
                             "most: torch cannot initialize CUDA")
    torch_fix, driver_fix = finding.remediation
    assert torch_fix.command == ("uv pip install --python /opt/torch/.venv/bin/python3 'torch==2.11.0' --index-url "
                                 "https://download.pytorch.org/whl/cu128")
    assert "580.65.06" in driver_fix.why and "nvidia-driver-580" in driver_fix.command
    assert one(results["kernels"], "kernels.no-cuda").title.startswith("torch cannot use CUDA here (cuda-stack.driver-too-old)")


def test_forward_compatible_libcuda_passes_and_says_so() -> None:
    # Derived: NVML's kernel driver supports 12.8 but the libcuda loaded (cuda-compat) initialized torch cu130.
    def compat(s: dict[str, Any]) -> None:
        s["gpu"]["cuda_driver_version"] = "12.8"

    cuda = run(sections_of("h200-facts.json", compat))["cuda-stack"]
    assert cuda.status is Status.PASS
    assert "via CUDA forward compatibility" in cuda.findings[0].title


def test_cpu_only_torch_fails_with_a_cuda_build_for_this_driver() -> None:
    # Derived: torch as the CPU wheel reports itself (torch.version.cuda None); the probe then skips CUDA.
    def cpu_torch(s: dict[str, Any]) -> None:
        s["cuda_stack"]["torch"].update(version="2.11.0+cpu", cuda=None, arch_list=[])
        del s["cuda_stack"]["cuda"]

    results = run(sections_of("h200-facts.json", cpu_torch))
    finding = one(results["cuda-stack"], "cuda-stack.torch-cpu-build")
    assert "cu130" in finding.remediation[0].command and "torch==2.11.0" in finding.remediation[0].command
    assert results["kernels"].findings[0].id == "kernels.no-cuda"


def test_torch_seeing_fewer_gpus_than_nvml_fails() -> None:
    # Derived: the A6000 pair, with torch seeing only the first one (a GPU hidden by the container's cgroup).
    def one_hidden(s: dict[str, Any]) -> None:
        s["cuda_stack"]["cuda"]["devices"] = s["cuda_stack"]["cuda"]["devices"][:1]

    finding = one(run(sections_of("sm86-derived-from-h200.json", one_hidden))["cuda-stack"],
                  "cuda-stack.device-count-mismatch")
    assert finding.title == "torch sees 1 GPU(s) but NVML and CUDA_VISIBLE_DEVICES give 2"


def test_triton_without_ptxas_says_where_it_looked() -> None:
    # Derived: Triton's bundled ptxas gone (the recorded lookup, with the file missing and no tool found).
    def no_ptxas(s: dict[str, Any]) -> None:
        ptxas = s["cuda_stack"]["triton"]["ptxas"]
        ptxas.update(path=None, version=None, error="RuntimeError: Cannot find ptxas")
        ptxas["looked"][0].update(exists=False, executable=False)

    finding = one(run(sections_of("h200-facts.json", no_ptxas))["cuda-stack"], "cuda-stack.triton-ptxas-missing")
    assert finding.title == ("Triton 3.6.0 cannot find ptxas: looked at bundled with triton: "
                             "/opt/torch/.venv/lib/python3.12/site-packages/triton/backends/nvidia/bin/ptxas (missing)")
    assert "triton==3.6.0" in finding.remediation[0].command


@pytest.mark.parametrize("message", ["\n", "   ", ""])
def test_an_exception_whose_message_is_blank_is_judged_not_crashed_on(message: str) -> None:
    # Derived: `import triton` failing with a message of white space only (the recorded Triton, made to fail).
    def blank(s: dict[str, Any]) -> None:
        s["cuda_stack"]["triton"].update(import_ok=False, exception={"type": "ImportError", "message": message})

    finding = one(run(sections_of("h200-facts.json", blank))["cuda-stack"], "cuda-stack.triton-import-failed")
    assert finding.title == "`import triton` fails: ImportError: "


def test_triton_without_libcuda_points_at_where_the_loader_found_it() -> None:
    # Derived: `ldconfig -p` without libcuda and LD_LIBRARY_PATH unset, so Triton's libcuda_dirs() asserts.
    def no_libcuda(s: dict[str, Any]) -> None:
        s["cuda_stack"]["triton"]["libcuda"] = {
            "looked": {"TRITON_LIBCUDA_PATH": None, "LD_LIBRARY_PATH": [], "ldconfig": []}, "dirs": None,
            "error": "AssertionError: libcuda.so cannot found!"}

    finding = one(run(sections_of("h200-facts.json", no_libcuda))["cuda-stack"], "cuda-stack.triton-libcuda-missing")
    assert "`ldconfig -p` lists none" in finding.title
    assert [r.command for r in finding.remediation] == ["sudo ldconfig",
                                                        "export TRITON_LIBCUDA_PATH=/usr/local/nvidia/lib64"]


# ----------------------------------------------------------------------------------- the GPUs


def test_another_process_holding_memory_warns_with_its_name_and_size() -> None:
    gpu = run(sections_of("h200-memory-held.json"))["gpu"]
    held = one(gpu, "gpu.memory-held")
    assert held.status is Status.WARN
    assert held.title == "GPU 0 (NVIDIA H200): 1 other process(es) hold memory: python3 (pid 971, 3.5 GiB)"
    assert held.detail.endswith("vLLM's default --gpu-memory-utilization 0.92 (129.2 GiB) still fits.")


def test_memory_held_past_vllms_default_utilization_says_vllm_will_refuse() -> None:
    # Derived: the other process holding 20 GiB instead of 3.5 (free and used moved by the difference).
    def bigger(s: dict[str, Any]) -> None:
        device = s["gpu"]["devices"][0]
        extra = (20 << 30) - device["processes"][0]["used_bytes"]
        device["processes"][0]["used_bytes"] += extra
        device["memory"]["used"] += extra
        device["memory"]["free"] -= extra

    held = one(run(sections_of("h200-memory-held.json", bigger))["gpu"], "gpu.memory-held")
    assert "does not fit: it refuses to start" in held.detail


def test_the_doctors_own_probe_processes_do_not_count_as_holding_memory() -> None:
    # Derived: the recorded holder marked as a child of the doctor (what a kernel probe would be).
    def own(s: dict[str, Any]) -> None:
        s["gpu"]["devices"][0]["processes"][0]["own"] = True

    assert run(sections_of("h200-memory-held.json", own))["gpu"].status is Status.PASS


def test_pending_row_remap_fails_with_the_reset_command_and_a_failed_remap_fails_too() -> None:
    # Derived: NVML's remapped-rows flags set (the H200 reports them; they were clear).
    def remap(s: dict[str, Any]) -> None:
        s["gpu"]["devices"][0]["remapped_rows"].update(uncorrectable=2, pending=True, failure=True)

    gpu = run(sections_of("h200-facts.json", remap))["gpu"]
    pending = one(gpu, "gpu.reset-pending")
    assert pending.status is Status.FAIL and "row remapping is pending" in pending.title
    assert pending.remediation[0].command == "sudo nvidia-smi -r -i 0"
    assert one(gpu, "gpu.row-remap-failure").status is Status.FAIL


def test_uncorrected_ecc_errors_fail_as_dcgm_does() -> None:
    def ecc(s: dict[str, Any]) -> None:  # derived: a volatile uncorrected count of 3
        s["gpu"]["devices"][0]["ecc"]["volatile_uncorrected"] = 3

    assert one(run(sections_of("h200-facts.json", ecc))["gpu"], "gpu.ecc-uncorrected").status is Status.FAIL


def test_mig_enabled_warns_and_a_pending_mig_change_asks_for_a_reset() -> None:
    # Derived: MIG on, with one MIG device, then MIG on but pending off.
    def mig(s: dict[str, Any]) -> None:
        s["gpu"]["devices"][0]["mig"] = {"current": True, "pending": False, "devices": [
            {"slot": 0, "uuid": "MIG-4c3c7f0e-5b5a-5f0e-9d5d-0f0e5c3c7f0e", "memory_total": 35433480192}]}

    gpu = run(sections_of("h200-facts.json", mig))["gpu"]
    assert gpu.status is Status.WARN
    assert one(gpu, "gpu.mig-enabled").remediation[0].command == "sudo nvidia-smi -i 0 -mig 0"
    assert "MIG will be disabled at the next GPU reset" in one(gpu, "gpu.mig-pending").title


def test_cuda_visible_devices_naming_a_missing_gpu_fails_and_torch_agrees() -> None:
    results = run(sections_of("h200-cvd-0-7.json"))
    finding = one(results["gpu"], "gpu.visible-unknown-device")
    assert finding.title == ("CUDA_VISIBLE_DEVICES='0,7': '7' names no GPU here (there is no GPU 7: the only GPU is 0); "
                             "CUDA stops reading there, so vLLM sees only 1: cuda:0 = GPU 0 (NVIDIA H200)")
    assert finding.remediation[0].command == "export CUDA_VISIBLE_DEVICES=0"
    # Recorded: torch in the target saw exactly the one GPU CUDA's rules leave.
    assert results["cuda-stack"].status is Status.PASS


def test_empty_cuda_visible_devices_hides_every_gpu_and_the_torch_layers_skip() -> None:
    results = run(sections_of("h200-cvd-empty.json"))
    assert one(results["gpu"], "gpu.visible-none").status is Status.FAIL
    assert "(hidden by CUDA_VISIBLE_DEVICES)" in one(results["gpu"], "gpu.ok").title
    assert results["cuda-stack"].findings[0].id == "cuda-stack.no-gpu"
    assert "gpu.visible-none" in results["cuda-stack"].findings[0].title


def _with_vllm(version: str) -> Callable[[dict[str, Any]], None]:
    def add(s: dict[str, Any]) -> None:  # derived: a vLLM distribution entry beside the recorded stack
        s["distributions"]["items"].append({"name": "vllm", "canonical": "vllm", "version": version})
    return add


@pytest.mark.parametrize(("vllm", "value", "fails"), [
    ("0.20.1", "GPU-2fe764c6", True),                               # recorded prefix: int() fails in 0.20
    ("0.24.0", "GPU-2fe764c6", True),                               # 0.24 looks UUIDs up whole
    ("0.24.0", "GPU-2fe764c6-cabd-b5a4-4bb3-29aa3ced5992", False),  # the whole UUID works from 0.24
    ("0.23.0", "GPU-2fe764c6-cabd-b5a4-4bb3-29aa3ced5992", True),
    ("0.24.0rc1", "GPU-2fe764c6-cabd-b5a4-4bb3-29aa3ced5992", False),  # a candidate of 0.24 holds what 0.24 holds
    ("0.23.0+cu129", "GPU-2fe764c6-cabd-b5a4-4bb3-29aa3ced5992", True),
])
def test_uuid_cuda_visible_devices_is_judged_against_the_installed_vllm(vllm: str, value: str, fails: bool) -> None:
    def setting(s: dict[str, Any]) -> None:
        _with_vllm(vllm)(s)
        s["gpu"]["environ"]["CUDA_VISIBLE_DEVICES"] = value

    gpu = run(sections_of("h200-cvd-uuid-prefix.json", setting))["gpu"]
    assert ("gpu.visible-uuid-vllm" in ids(gpu, Status.FAIL)) is fails
    if fails:
        assert one(gpu, "gpu.visible-uuid-vllm").remediation[0].command == "export CUDA_VISIBLE_DEVICES=0"


def test_recorded_uuid_prefix_without_vllm_is_simply_the_visible_gpu() -> None:
    gpu = run(sections_of("h200-cvd-uuid-prefix.json"))["gpu"]
    assert gpu.status is Status.PASS
    assert one(gpu, "gpu.visible").title == ("CUDA_VISIBLE_DEVICES='GPU-2fe764c6': vLLM will see 1 GPU(s): "
                                            "cuda:0 = GPU 0 (NVIDIA H200)")


def test_mixed_gpu_models_with_indices_warn_about_device_order() -> None:
    # Derived: the A6000 pair with its second GPU renamed to an RTX A4000, and CUDA_VISIBLE_DEVICES=1.
    def mixed(s: dict[str, Any]) -> None:
        s["gpu"]["devices"][1]["name"] = "NVIDIA RTX A4000"
        s["gpu"]["environ"]["CUDA_VISIBLE_DEVICES"] = "1"

    finding = one(run(sections_of("sm86-derived-from-h200.json", mixed))["gpu"], "gpu.device-order")
    assert finding.remediation[0].command == "export CUDA_DEVICE_ORDER=PCI_BUS_ID"


# Four GPUs as NVML lists them: the recorded H200's UUID scheme, indices 0-3 (derived).
FOUR = [{"index": i, "uuid": f"GPU-2fe764c{i}-cabd-b5a4-4bb3-29aa3ced599{i}"} for i in range(4)]


@pytest.mark.parametrize(("value", "gpus", "stopped_at", "duplicate"), [
    (None, (0, 1, 2, 3), None, None),
    ("", (), "", None),
    ("1,0", (1, 0), None, None),
    ("0,2,-1,1", (0, 2), "-1", None),       # the CUDA guide's own example
    ("1gpu2,3", (1, 3), None, None),       # strtoul: `1gpu2` reads as 1
    ("0,0", (), None, "0"),                # a repeat hides everything
    ("3,9,1", (3,), "9", None),
    (" 2 , 1", (2, 1), None, None),
    ("NoDevFiles", (), "NoDevFiles", None),
    ("GPU-2fe764c2", (2,), None, None),     # a unique prefix
    ("GPU-2fe764c", (), "GPU-2fe764c", None),  # ambiguous: matches all four
    ("GPU-2fe764c1,0", (1,), "0", None),    # a UUID list must go on with UUIDs
])
def test_cuda_visible_devices_is_read_as_cuda_reads_it(value: str | None, gpus: tuple[int, ...],
                                                       stopped_at: str | None, duplicate: str | None) -> None:
    visible = resolve_visible(value, FOUR)
    assert (visible.gpus, visible.stopped_at, visible.duplicate) == (gpus, stopped_at, duplicate)


def test_no_gpu_flag_skips_all_three_checks() -> None:
    results = run(sections_of("h200-facts.json"), no_gpu=True)
    assert {r.status for r in results.values()} == {Status.SKIP}
    assert {r.findings[0].id for r in results.values()} == {"doctor.skipped-no-gpu"}


# --------------------------------------------------------------------------------- the kernels


def test_a_kernel_off_by_more_than_its_tolerance_fails() -> None:
    # Derived: one recorded SDPA case with its error set to 3x its tolerance, as a wrong kernel would give.
    def wrong(s: dict[str, Any]) -> None:
        case = s["kernels"]["families"][0]["devices"][0]["cases"][0]
        case.update(status="mismatch", max_abs_err=3 * case["tolerance"])

    kernels = run(sections_of("h200-facts.json", wrong))["kernels"]
    assert kernels.status is Status.FAIL
    finding = one(kernels, "kernels.wrong-result")
    assert finding.title.startswith("torch SDPA (flash, memory-efficient) on NVIDIA H200 (sm_90): sdpa-flash float16 d128 is off by")
    assert "kernels.ok" not in ids(kernels)


def test_a_cuda_out_of_memory_fails_as_such() -> None:
    # Derived: the Triton case failing as torch reports a full GPU.
    def oom(s: dict[str, Any]) -> None:
        case = s["kernels"]["families"][1]["devices"][0]["cases"][0]
        case.update(status="error", error={"type": "OutOfMemoryError", "oom": True, "warnings": [], "traceback": "",
                                           "message": "CUDA out of memory. Tried to allocate 2.00 MiB. GPU 0 has a total "
                                                      "capacity of 139.81 GiB of which 1.19 MiB is free."})

    finding = one(run(sections_of("h200-facts.json", oom))["kernels"], "kernels.out-of-memory")
    assert "triton-axpy float16 fails: OutOfMemoryError: CUDA out of memory" in finding.title


def test_a_no_kernel_image_error_fails_rather_than_counting_as_declined() -> None:
    # Derived: an SDPA case raising the CUDA error a build without this arch gives.
    def no_image(s: dict[str, Any]) -> None:
        case = s["kernels"]["families"][0]["devices"][0]["cases"][4]
        case.update(status="error", error={"type": "AcceleratorError", "oom": False, "warnings": [], "traceback": "",
                                           "message": "CUDA error: no kernel image is available for execution on the device"})

    finding = one(run(sections_of("h200-facts.json", no_image))["kernels"], "kernels.error")
    assert finding.status is Status.FAIL and "no kernel image is available" in finding.title


def test_a_full_gpu_makes_each_family_fail_out_of_memory_and_vllm_refuse_to_start() -> None:
    results = run(sections_of("h200-gpu-full.json"))
    held = one(results["gpu"], "gpu.memory-held")
    assert held.title == "GPU 0 (NVIDIA H200): 1 other process(es) hold memory: python3 (pid 538, 139.5 GiB)"
    assert held.detail.endswith("does not fit: it refuses to start.")
    oom = [f for f in results["kernels"].findings if f.id == "kernels.out-of-memory"]
    assert [f.title for f in oom] == [
        "torch SDPA (flash, memory-efficient) on NVIDIA H200: AcceleratorError: CUDA error: out of memory",
        "Triton (the doctor's own kernel) on NVIDIA H200: AcceleratorError: CUDA error: out of memory"]


def test_a_kernel_probe_that_dies_without_facts_is_a_finding_with_its_traceback() -> None:
    kernels = run(sections_of("h200-gpu-full-probe-crash.json"))["kernels"]
    crashed = [f for f in kernels.findings if f.id == "kernels.crashed"]
    assert [f.title for f in crashed] == [
        "torch SDPA (flash, memory-efficient): the probe process exited with code 1 without reporting facts",
        "Triton (the doctor's own kernel): the probe process exited with code 1 without reporting facts"]
    assert "torch.AcceleratorError: CUDA error: out of memory" in crashed[0].detail


def test_a_kernel_probe_killed_by_a_signal_is_a_finding_for_that_family_only() -> None:
    # Derived: the Triton family's process record as run_probe writes it for a segfault.
    def crashed(s: dict[str, Any]) -> None:
        family = s["kernels"]["families"][1]
        for key in ("devices", "timings", "torch", "cuda", "import", "settings", "seconds"):
            family.pop(key, None)
        family["process"].update(returncode=-11, signal="SIGSEGV", error="killed by SIGSEGV",
                                 stderr="Fatal Python error: Segmentation fault")

    kernels = run(sections_of("h200-facts.json", crashed))["kernels"]
    assert one(kernels, "kernels.crashed").title == "Triton (the doctor's own kernel): the probe process killed by SIGSEGV"
    assert "kernels.family-ok" in ids(kernels, Status.PASS)  # SDPA still judged


def test_flash_attn_installed_but_not_importable_skips_naming_the_import_finding() -> None:
    # Derived: flash-attn-4 alone (a namespace flash_attn), as the kernel probe reports the failed import.
    def namespace_only(s: dict[str, Any]) -> None:
        for family in s["kernels"]["families"][2:4]:
            family["import"].update(installed=True, ok=False, exception={
                "type": "ModuleNotFoundError", "message": "No module named 'flash_attn.ops'"})

    imports = CheckResult("imports", "python", "flash_attn rotary import", Status.FAIL, (
        Finding("imports.namespace-package", Status.FAIL,
                "`from flash_attn.ops.triton.rotary import apply_rotary` fails: flash_attn is a namespace package"),))
    kernels = run(sections_of("h200-facts.json", namespace_only), prior=[imports])["kernels"]
    skipped = [f for f in kernels.findings if f.id == "kernels.not-importable"]
    assert len(skipped) == 2 and all(f.status is Status.SKIP for f in skipped)
    assert "(see imports.namespace-package:" in skipped[1].title
    assert skipped[1].evidence["import_finding"] == "imports.namespace-package"


def test_vllm_fa3_declined_on_sm86_is_not_applicable_while_fa2_passes() -> None:
    # Derived: vLLM's family on the A6000 pair as its probe reports it there: FA3 declined with vLLM's own
    # reason, FA2 cases as the recorded SDPA flash cases (errors and times are the H200's).
    def vllm_family(s: dict[str, Any]) -> None:
        families = s["kernels"]["families"]
        sdpa = families[0]["devices"][0]
        fa2 = [{**c, "kernel": "vllm_flash_attn-fa2"} for c in sdpa["cases"] if c["kernel"] == "sdpa-flash"]
        fa3 = [{"kernel": "vllm_flash_attn-fa3", "head_dim": None, "dtype": d, "status": "not-run", "unsupported": True,
                "reason": "vLLM says: FA3 is only supported on devices with compute capability 9.x"}
               for d in ("float16", "bfloat16")]
        families[4].update({"import": {"statement": "from vllm.vllm_flash_attn import flash_attn_varlen_func",
                                       "installed": True, "ok": True, "version": "0.20.1"},
                            "devices": [{**sdpa, "cases": fa3 + fa2}]})

    kernels = run(sections_of("sm86-derived-from-h200.json", vllm_family))["kernels"]
    assert kernels.status is Status.PASS
    assert kernels.findings[0].title.startswith("14 case(s) within tolerance on NVIDIA RTX A6000")
    assert any(f.title.startswith("vLLM's bundled flash-attention: 4 case(s) within tolerance")
               for f in kernels.findings)


def test_every_gpu_finding_id_has_a_code_table_entry() -> None:
    for check in (GpuCheck, CudaStackCheck, KernelsCheck):
        check_id = check.id
        for code in check.codes:
            assert code.id.split(".")[0] == check_id
            assert CODES[code.id] == code
            assert len(code.explanation) > 80, code.id
