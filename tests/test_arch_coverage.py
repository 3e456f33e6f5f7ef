"""Compiled-arch coverage judged on real shared libraries.

CUDA kernels are compiled here with nvcc for known architectures, packed into real wheels named like the
stack's distributions, installed with pip into real venvs that have the real torch 2.13.0 (CPU build) on
their path, then scanned by the arch_coverage collector and judged by the arch-coverage check. The real
vLLM 0.24.0 wheel and a GPU recording from a real H200 stand in for a production stack. Only the GPU is
missing: --target-arch stands in for it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from conftest import Doctor, findings_of
from realenv import Env, build_wheel, install, make_venv, nvcc_builds
from stacks import add_to_path, torch_site, vllm_site

from dflash_doctor.check import Context
from dflash_doctor.checks.gpu import ArchCoverageCheck
from dflash_doctor.facts.gpu import archs as archs_collector
from dflash_doctor.facts.python import environment
from dflash_doctor.facts.shape import section_json
from dflash_doctor.knowledge.archs_advice import PTX_ISA_MIN_CUDA
from dflash_doctor.model import CheckResult, Finding, Status
from dflash_doctor.report import document as report_module
from dflash_doctor.runner import judge

NVCC = shutil.which("nvcc")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(NVCC is None, reason="nvcc not on PATH")]

REPO = Path(__file__).resolve().parent.parent
H200 = REPO / "fixtures" / "gpu" / "h200-facts.json"

# Host code that needs torch symbols, as a real extension does: one that every torch exports
# (c10::UndefinedTensorImpl::_singleton) and, for a build against another torch, one the CPU build lacks
# (c10::cuda::SetDevice(int), the symbol of flash-attn#723).
KERNEL = """
namespace c10 {
struct UndefinedTensorImpl { static UndefinedTensorImpl _singleton; };
#ifdef FOREIGN_TORCH
namespace cuda { void SetDevice(int device); }
#endif
}
__global__ void add(float* a, const float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] += b[i];
}
extern "C" void* launch(float* a, const float* b, int n) {
#ifdef FOREIGN_TORCH
    c10::cuda::SetDevice(0);
#endif
    add<<<(n + 255) / 256, 256>>>(a, b, n);
    return &c10::UndefinedTensorImpl::_singleton;
}
"""

BUILDS: dict[str, list[str]] = {
    # flash-attn's own default set for 8.x and 9.0: SASS only, no PTX (setup.py FLASH_ATTN_CUDA_ARCHS)
    "sass_80_90": ["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90"],
    "ptx_80": ["-gencode", "arch=compute_80,code=compute_80"],
    "sass_90a": ["-gencode", "arch=compute_90a,code=sm_90a"],
    "foreign_torch": ["-DFOREIGN_TORCH", "-gencode", "arch=compute_80,code=sm_80"],
}

# The C and C++ runtime of Ubuntu 20.04 (focal): libc6 2.31-0ubuntu9, libstdc++6 from GCC 10
# (GLIBCXX_3.4.28, CXXABI_1.3.12): the host of flash-attn#1708 and #2225, as machine_runtime_versions() reports it.
UBUNTU_2004_RUNTIME = {
    "provides": {"GLIBC": "2.31", "GLIBCXX": "3.4.28", "CXXABI": "1.3.12"},
    "glibc": {"version": "2.31", "read_from": "os.confstr(CS_GNU_LIBC_VERSION)"},
    "libstdcxx": {"path": "/usr/lib/x86_64-linux-gnu/libstdc++.so.6", "found_by": "ldconfig -p"},
    "errors": [],
}

EXT_SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")
PY_TAG = f"cp{sys.version_info[0]}{sys.version_info[1]}"
WHEEL_TAG = f"{PY_TAG}-{PY_TAG}-linux_x86_64"
# An extension for another Python: vLLM ships deep_gemm's _C for five of them, only one is ever loaded.
OTHER_PY_SUFFIX = EXT_SUFFIX.replace(f"-{sys.version_info[0]}{sys.version_info[1]}", f"-{sys.version_info[0]}{sys.version_info[1] - 1}")


@pytest.fixture(scope="session")
def kernels() -> dict[str, Path]:
    """The four builds, compiled in parallel (CI has two cores), once per machine and nvcc in the test cache
    (`realenv.nvcc_builds`); the tests read them and never write there."""
    return nvcc_builds(str(NVCC), KERNEL, {name: ["-shared", "-Xcompiler", "-fPIC", *args] for name, args in BUILDS.items()})


def _flash_attn_env(root: Path, name: str, library: Path, extra: Mapping[str, bytes] | None = None) -> Env:
    """A venv with a flash-attn 2.8.3 wheel whose flash_attn_2_cuda is `library`, and the real torch on its path."""
    files: dict[str, str | bytes] = {
        "flash_attn/__init__.py": '__version__ = "2.8.3"\n',
        f"flash_attn_2_cuda{EXT_SUFFIX}": library.read_bytes(),
        **(extra or {}),
    }
    wheel = build_wheel(root / f"wheels-{name}", "flash_attn", "2.8.3", files, requires=["torch", "einops"],
                        tag=WHEEL_TAG)
    env = make_venv(root, name=name)
    install(env, wheel, installer="uv")  # pip takes seconds per install, uv a fraction
    add_to_path(env, torch_site(), "zz-torch")
    return env


@pytest.fixture(scope="session")
def envs(kernels: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Env]:
    root = tmp_path_factory.mktemp("arch-envs")
    made = {
        # The sm_90a build, named for another Python, rides along: if it were judged, sm_86 would fail.
        "sass_80_90": _flash_attn_env(root, "sass_80_90", kernels["sass_80_90"],
                                      {f"flash_attn_2_cuda{OTHER_PY_SUFFIX}": kernels["sass_90a"].read_bytes()}),
        "ptx_80": _flash_attn_env(root, "ptx_80", kernels["ptx_80"]),
        "sass_90a": _flash_attn_env(root, "sass_90a", kernels["sass_90a"]),
        "foreign_torch": _flash_attn_env(root, "foreign_torch", kernels["foreign_torch"]),
    }
    # A distribution named torch whose libtorch_cuda is the sm_80+sm_90 build, with the real CPU libc10 to
    # export symbols, and the version.py of a CUDA 12.6 build (torch.version.cuda is read from it).
    libc10 = torch_site() / "torch" / "lib" / "libc10.so"
    torch_wheel = build_wheel(root / "wheels-torch", "torch", "2.8.0", {
        "torch/__init__.py": "",
        "torch/version.py": "from typing import Optional\n__version__ = '2.8.0+cu126'\ncuda: Optional[str] = '12.6'\n",
        "torch/lib/libtorch_cuda.so": kernels["sass_80_90"].read_bytes(),
        "torch/lib/libc10.so": libc10.read_bytes(),
    }, tag=WHEEL_TAG)
    made["torch"] = make_venv(root, name="torch")
    install(made["torch"], torch_wheel, installer="uv")
    return made


_environment_cache: dict[str, Mapping[str, object]] = {}


def collect(env: Env, *target_archs: str, no_gpu: bool = True) -> dict[str, Any]:
    """The sections the check needs: the environment probe (once per env), then the arch collector; in their JSON
    form (as the report saves them)."""
    ctx = Context(python=str(env.python), cwd=str(env.root), no_gpu=no_gpu, target_archs=target_archs)
    key = str(env.python)
    if key not in _environment_cache:
        _environment_cache[key] = environment.collect(ctx, {})
    earlier = _environment_cache[key]
    return {name: section_json(value) for name, value in {**earlier, **archs_collector.collect(ctx, earlier)}.items()}


def run_check(sections: Mapping[str, Any], ctx: Context | None = None) -> CheckResult:
    [result] = judge([ArchCoverageCheck()], sections, ctx)
    return result


def only(result: CheckResult, finding_id: str) -> Finding:
    found = [f for f in result.findings if f.id == finding_id]
    assert len(found) == 1, f"{finding_id}: {[(f.id, f.title) for f in result.findings]}"
    return found[0]


def ids(result: CheckResult) -> list[str]:
    return [f.id for f in result.findings]


# ---------------------------------------------------------------------------------------------------------
# The facts
# ---------------------------------------------------------------------------------------------------------


def test_collector_records_each_extension_its_archs_and_the_target_archs(envs: dict[str, Env]) -> None:
    facts = collect(envs["sass_80_90"], "sm_86", "9.0")["arch_coverage"]
    assert facts["target_archs"] == ["sm_86", "sm_90"] and facts["no_gpu"] is True
    [lib] = facts["libraries"]
    assert lib["module"] == "flash_attn_2_cuda" and lib["distribution"] == "flash_attn"
    assert (lib["fatbin"]["sass"], lib["fatbin"]["ptx"]) == (["sm_80", "sm_90"], [])
    assert lib["seconds"] >= 0 and lib["error"] is None
    assert [s["path"] for s in facts["skipped"]] == [f"flash_attn_2_cuda{OTHER_PY_SUFFIX}"]
    assert facts["torch"]["version"] == "2.13.0+cpu" and facts["torch"]["cpu_build"] is True
    assert json.loads(json.dumps(facts)) == facts


def test_ptx_isa_of_this_nvcc_maps_to_its_own_cuda_release(envs: dict[str, Env]) -> None:
    [lib] = collect(envs["ptx_80"])["arch_coverage"]["libraries"]
    [isa] = lib["fatbin"]["ptx_isa"]
    release = re.search(r"release (\d+\.\d+)", subprocess.run([str(NVCC), "--version"], capture_output=True,
                                                               text=True, check=True).stdout)
    assert release is not None and PTX_ISA_MIN_CUDA.value[isa] == release.group(1)


# ---------------------------------------------------------------------------------------------------------
# Coverage
# ---------------------------------------------------------------------------------------------------------


def test_sm80_sass_covers_an_sm86_target(envs: dict[str, Env]) -> None:
    result = run_check(collect(envs["sass_80_90"], "sm_86"))
    assert result.status is Status.PASS
    covered = only(result, "arch-coverage.covered")
    assert covered.title == "sm_86 (target): 1 library covered by SASS"
    assert covered.evidence["libraries"] == {"flash_attn_2_cuda (flash_attn 2.8.3)": "SASS sm_80, sm_90; PTX none"}


def test_sm80_sm90_build_has_no_kernel_image_for_turing_and_flash_attn_2_cannot_run_there(
    envs: dict[str, Env],
) -> None:
    result = run_check(collect(envs["sass_80_90"], "sm_75"))
    assert result.status is Status.FAIL
    missing = only(result, "arch-coverage.no-kernel-image")
    assert missing.title == ("flash_attn_2_cuda (flash_attn 2.8.3) has no kernel image for sm_75 (target): "
                             "SASS sm_80, sm_90; PTX none")
    assert "no kernel image is available" in missing.detail
    [remedy] = missing.remediation
    # and what pip's uninstall leaves of flash_attn/ (an empty directory would be a namespace package)
    leftover = envs["sass_80_90"].site_packages / "flash_attn"
    assert remedy.command == (f"{envs['sass_80_90'].python} -m pip uninstall -y flash-attn && if [ -d {leftover} ]; "
                              f"then find {leftover} -depth \\( -type f -path '*/__pycache__/*.pyc' -o -type d "
                              "-empty \\) -delete; fi")
    assert "arch-coverage.covered" not in ids(result)


def test_blackwell_target_gets_a_rebuild_with_flash_attn_cuda_archs_for_every_target(envs: dict[str, Env]) -> None:
    result = run_check(collect(envs["sass_80_90"], "sm_86", "sm_120"))
    missing = only(result, "arch-coverage.no-kernel-image")
    assert missing.evidence["targets"] == ["sm_120 (target)"]
    [remedy] = missing.remediation
    # '80' serves the 8.6 target too; a value like '86' would build nothing (setup.py matches exact values).
    assert remedy.command == (
        f"FLASH_ATTN_CUDA_ARCHS='80;120' FLASH_ATTENTION_FORCE_BUILD=TRUE MAX_JOBS=4 {envs['sass_80_90'].python} "
        "-m pip install --force-reinstall --no-deps --no-build-isolation 'flash-attn==2.8.3'")
    assert "nvcc 12.8+" in remedy.why
    assert only(result, "arch-coverage.covered").title == "sm_86 (target): 1 library covered by SASS"


def test_compute_80_ptx_only_runs_on_sm86_through_jit_with_a_warning(envs: dict[str, Env]) -> None:
    result = run_check(collect(envs["ptx_80"], "sm_86"))
    assert result.status is Status.WARN
    jit = only(result, "arch-coverage.ptx-jit-only")
    assert jit.title == ("flash_attn_2_cuda (flash_attn 2.8.3) runs on sm_86 (target) only through PTX JIT of "
                         "compute_80: slow first start")
    assert jit.evidence["jit_from"] == ["compute_80"]
    assert only(result, "arch-coverage.covered").title == "sm_86 (target): 0 libraries covered by SASS, 1 by PTX JIT"


def test_compute_80_ptx_cannot_serve_an_older_gpu(envs: dict[str, Env]) -> None:
    assert only(run_check(collect(envs["ptx_80"], "sm_75")), "arch-coverage.no-kernel-image").status is Status.FAIL


def test_sm90a_code_runs_on_exactly_9_0(envs: dict[str, Env]) -> None:
    on_hopper = run_check(collect(envs["sass_90a"], "sm_90"))
    assert on_hopper.status is Status.PASS
    assert only(on_hopper, "arch-coverage.covered").title == "sm_90 (target): 1 library covered by SASS"
    on_blackwell = run_check(collect(envs["sass_90a"], "sm_100"))
    assert on_blackwell.status is Status.FAIL
    missing = only(on_blackwell, "arch-coverage.no-kernel-image")
    assert "sm_100 (target)" in missing.title and "SASS sm_90a; PTX none" in missing.title
    assert "FLASH_ATTN_CUDA_ARCHS=100 " in missing.remediation[0].command


def test_torch_libtorch_cuda_is_judged_with_a_cuda_12_8_torch_for_blackwell(envs: dict[str, Env]) -> None:
    sections = collect(envs["torch"], "sm_120")
    facts = sections["arch_coverage"]
    assert [lib["path"] for lib in facts["libraries"]] == ["torch/lib/libtorch_cuda.so"]  # not libc10.so
    assert facts["torch"]["cuda"] == "12.6"
    assert facts["torch"]["exporters"] == ["torch/lib/libc10.so", "torch/lib/libtorch_cuda.so"]
    missing = only(run_check(sections), "arch-coverage.no-kernel-image")
    assert missing.title.startswith("libtorch_cuda.so (torch 2.8.0) has no kernel image for sm_120 (target)")
    show, reinstall = missing.remediation
    assert "_cuda_getArchFlags" in show.command
    python = envs["torch"].python
    assert reinstall.command == (f"{python} -m pip install --force-reinstall 'torch==2.8.0' "
                                 "--index-url https://download.pytorch.org/whl/cu128")
    assert run_check(collect(envs["torch"], "sm_86")).status is Status.PASS


# ---------------------------------------------------------------------------------------------------------
# No target, a bad target, and judging a saved report
# ---------------------------------------------------------------------------------------------------------


def test_no_gpu_without_target_arch_skips_and_says_to_pass_target_arch(envs: dict[str, Env]) -> None:
    result = run_check(collect(envs["sass_80_90"]))
    assert result.status is Status.SKIP  # never a fail: nothing is known to be wrong
    skipped = only(result, "arch-coverage.no-target")
    assert "--target-arch" in skipped.title and "--no-gpu" in skipped.title
    assert "arch-coverage.runtime-ok" in ids(result)  # the runtime is judged all the same


def test_unreadable_target_arch_fails_naming_the_value(envs: dict[str, Env]) -> None:
    result = run_check(collect(envs["sass_80_90"], "sm86"))
    bad = only(result, "arch-coverage.target-arch-invalid")
    assert bad.status is Status.FAIL and "'sm86'" in bad.title


def test_judging_a_saved_report_uses_the_recorded_target_archs_not_the_new_context(
    envs: dict[str, Env], tmp_path: Path,
) -> None:
    sections = collect(envs["sass_80_90"], "sm_75")
    first = run_check(sections)
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report_module.build([first], sections, str(envs["sass_80_90"].python))))
    saved = report_module.sections_of(report_module.load(str(path)))
    again = run_check(saved, Context(python="elsewhere", cwd=str(tmp_path), target_archs=("sm_86",)))
    assert [f.to_dict() for f in again.findings] == [f.to_dict() for f in first.findings]
    assert again.status is Status.FAIL


# ---------------------------------------------------------------------------------------------------------
# GPUs from NVML: a real H200 recording, and the real vLLM 0.24.0 wheel
# ---------------------------------------------------------------------------------------------------------


def _h200() -> dict[str, Any]:
    gpu: dict[str, Any] = json.loads(H200.read_text())["sections"]["gpu"]
    return gpu


@pytest.fixture(scope="module")
def vllm_env(tmp_path_factory: pytest.TempPathFactory) -> Env:
    env = make_venv(tmp_path_factory.mktemp("vllm-arch"))
    add_to_path(env, torch_site(), "a-torch")
    add_to_path(env, vllm_site("0.24.0"), "b-vllm")
    return env


def test_real_vllm_on_a_recorded_h200_is_covered_by_sass_and_fa3_is_counted_for_hopper(vllm_env: Env) -> None:
    sections = {**collect(vllm_env, no_gpu=False), "gpu": _h200()}
    result = run_check(sections)
    covered = only(result, "arch-coverage.covered")
    # _C_stable_libtorch, _moe_C_stable_libtorch, _vllm_fa3_C, _flashmla_C, _flashmla_extension_C; FA2 is
    # not vLLM's choice on 9.x, QuTLASS needs 10.0+.
    assert covered.title == "GPU0 NVIDIA H200 sm_90, 140 GiB: 5 libraries covered by SASS (2 used only on other GPUs)"
    assert covered.evidence["targets"][0]["gpus"] == [0]
    assert "arch-coverage.ptx-jit-only" not in ids(result) and "arch-coverage.no-kernel-image" not in ids(result)
    skipped = sections["arch_coverage"]["skipped"]
    assert len([s for s in skipped if "deep_gemm" in s["path"]]) == 4  # the other Pythons' builds


def test_real_vllm_fa2_reaches_sm120_only_through_jit_and_qutlass_has_no_code_there(vllm_env: Env) -> None:
    result = run_check(collect(vllm_env, "sm_120"))
    jit = only(result, "arch-coverage.ptx-jit-only")
    assert jit.title.startswith("vllm.vllm_flash_attn._vllm_fa2_C (vllm 0.24.0) runs on sm_120 (target) only "
                                "through PTX JIT of compute_80")
    optional = only(result, "arch-coverage.optional-no-kernel-image")
    assert optional.status is Status.WARN and "vllm._qutlass_C" in optional.title
    assert "arch-coverage.no-kernel-image" not in ids(result)


def test_real_vllm_against_a_cpu_torch_fails_its_torch_symbols_with_the_pinned_torch_as_fix(vllm_env: Env) -> None:
    result = run_check(collect(vllm_env, "sm_90"))
    symbols = only(result, "arch-coverage.undefined-symbol")
    assert symbols.title.startswith("vllm 0.24.0: 6 libraries")
    assert "torch 2.13.0+cpu does not export" in symbols.title
    assert "CPU build" in symbols.detail
    [remedy] = symbols.remediation
    assert remedy.command == f"{vllm_env.python} -m pip install 'torch==2.11.0'"


def test_ptx_built_by_nvcc_13_jit_compiles_on_the_recorded_h200_whose_driver_is_cuda_13(envs: dict[str, Env]) -> None:
    sections = {**collect(envs["ptx_80"], no_gpu=False), "gpu": _h200()}
    jit = only(run_check(sections), "arch-coverage.ptx-jit-only")
    assert "GPU0 NVIDIA H200 sm_90, 140 GiB" in jit.title
    isa = jit.evidence["ptx_isa"][0]
    assert f"driver for CUDA {PTX_ISA_MIN_CUDA.value[isa]} or newer" in jit.detail


def test_no_gpu_ignores_recorded_gpus_and_judges_the_target_archs(vllm_env: Env) -> None:
    sections = {**collect(vllm_env, "sm_86", no_gpu=True), "gpu": _h200()}
    covered = only(run_check(sections), "arch-coverage.covered")
    assert covered.title.startswith("sm_86 (target): ") and "GPU0" not in covered.title


# ---------------------------------------------------------------------------------------------------------
# A real H200 with the real torch 2.11.0+cu130, recorded (fixtures/archs)
# ---------------------------------------------------------------------------------------------------------

RECORDED = REPO / "fixtures" / "archs" / "h200-torch-2.11-cu130.json"


def _recorded(*target_archs: str) -> dict[str, Any]:
    """The recorded sections; target_archs as --target-arch would have recorded them (user input, not a reading)."""
    sections: dict[str, Any] = json.loads(RECORDED.read_text())["sections"]
    if target_archs:
        sections["arch_coverage"] = {**sections["arch_coverage"], "target_archs": list(target_archs)}
    return sections


@pytest.mark.parametrize("build", ["torch/lib/libtorch_cuda.so", "torch/lib/libtorch_cuda_linalg.so"])
def test_recorded_fatbin_lists_equal_cuobjdump_on_the_real_torch_libraries(build: str) -> None:
    recorded = json.loads(RECORDED.read_text())
    [lib] = [lib for lib in recorded["sections"]["arch_coverage"]["libraries"] if lib["path"] == build]
    cuobjdump = recorded["recorded"]["cuobjdump"][build]  # cuobjdump 13.0 --list-elf / --list-ptx, same file
    assert sorted(lib["fatbin"]["sass"]) == sorted(cuobjdump["cuobjdump_sass"])
    assert sorted(lib["fatbin"]["ptx"]) == sorted(cuobjdump["cuobjdump_ptx"])


def test_recorded_h200_is_covered_by_torch_2_11_cu130() -> None:
    result = run_check(_recorded())
    assert result.status is Status.PASS
    assert only(result, "arch-coverage.covered").title == "GPU0 NVIDIA H200 sm_90, 140 GiB: 2 libraries covered by SASS"
    assert only(result, "arch-coverage.symbols-ok").title == "the torch symbols of 2 libraries all resolve against torch 2.11.0"


@pytest.mark.parametrize(("arch", "covered"), [("sm_103", True), ("sm_121", True), ("sm_110", False),
                                               ("sm_70", False)])
def test_torch_2_11_cu130_covers_b300_and_gb10_but_not_thor_or_volta(arch: str, covered: bool) -> None:
    # libtorch_cuda carries sm_75..sm_90a, sm_100/100a/103a, sm_120/120a/121a; linalg sm_80..sm_120
    result = run_check(_recorded(arch))
    if covered:
        assert f"{arch} (target): 2 libraries covered by SASS" in only(result, "arch-coverage.covered").title
    else:
        missing = [f for f in result.findings if f.id == "arch-coverage.no-kernel-image"]
        assert sorted(f.title.split(" ", 1)[0] for f in missing) == ["libtorch_cuda.so", "libtorch_cuda_linalg.so"]
        assert all(f"{arch} (target)" in f.title and "_cuda_getArchFlags" in f.remediation[0].command for f in missing)
        assert result.status is Status.FAIL


# ---------------------------------------------------------------------------------------------------------
# The C and C++ runtime, and torch symbols
# ---------------------------------------------------------------------------------------------------------


def test_runtime_requirements_are_read_from_the_real_library_and_this_host_meets_them(envs: dict[str, Env]) -> None:
    sections = collect(envs["sass_80_90"], "sm_86")
    [lib] = sections["arch_coverage"]["libraries"]
    assert "GLIBC" in lib["needs_versions"]  # cudart is linked in statically
    ok = only(run_check(sections), "arch-coverage.runtime-ok")
    assert f"GLIBC {lib['needs_versions']['GLIBC']}" in ok.title


def test_a_library_built_on_a_newer_glibc_fails_on_an_ubuntu_20_04_runtime(envs: dict[str, Env]) -> None:
    sections = collect(envs["sass_80_90"], "sm_86")
    needs = sections["arch_coverage"]["libraries"][0]["needs_versions"]["GLIBC"]
    if tuple(map(int, needs.split("."))) <= (2, 31):
        pytest.skip(f"this host's nvcc output needs only GLIBC {needs}")
    sections["arch_coverage"] = {**sections["arch_coverage"], "host": UBUNTU_2004_RUNTIME}
    result = run_check(sections)
    too_old = only(result, "arch-coverage.runtime-too-old")
    assert too_old.status is Status.FAIL
    assert too_old.title.startswith(f"flash_attn_2_cuda (flash_attn 2.8.3) needs GLIBC_{needs}")
    assert "this host provides GLIBC 2.31" in too_old.title
    assert f"version `GLIBC_{needs}' not found" in too_old.detail and "#1708" in too_old.detail
    assert "FLASH_ATTENTION_FORCE_BUILD=TRUE" in too_old.remediation[0].command


def test_a_torch_symbol_the_installed_torch_lacks_fails_before_any_import(envs: dict[str, Env]) -> None:
    result = run_check(collect(envs["foreign_torch"], "sm_86"))
    symbols = only(result, "arch-coverage.undefined-symbol")
    readable = "c10::cuda::SetDevice(int)" if shutil.which("c++filt") else "_ZN3c104cuda9SetDeviceEi"
    assert symbols.title == (f"flash_attn_2_cuda (flash_attn 2.8.3) needs {readable}, which torch 2.13.0+cpu does "
                             "not export: `import flash_attn_2_cuda` would fail with undefined symbol")
    assert symbols.evidence["libraries"][0]["missing"] == ["_ZN3c104cuda9SetDeviceEi"]
    uninstall, reinstall = symbols.remediation  # a CPU torch: the CUDA build is the fix, not a rebuild
    assert uninstall.command.endswith("pip uninstall -y torch")
    assert reinstall.command.endswith("pip install 'torch==2.13.0'")


def test_torch_symbols_that_resolve_pass(envs: dict[str, Env]) -> None:
    result = run_check(collect(envs["sass_80_90"], "sm_86"))
    assert only(result, "arch-coverage.symbols-ok").title == "the torch symbols of 1 library all resolve against torch 2.13.0+cpu"


# ---------------------------------------------------------------------------------------------------------
# The whole CLI (needs the check and collector registered)
# ---------------------------------------------------------------------------------------------------------


def test_cli_no_gpu_ci_build_passes_for_its_target_arch_and_fails_for_one_it_lacks(
    envs: dict[str, Env], doctor: Doctor,
) -> None:
    python = str(envs["sass_80_90"].python)
    report, proc = doctor.report("--python", python, "--no-gpu", "--target-arch", "sm_86", "--only", "arch-coverage")
    assert proc.returncode == 0, proc.stderr
    [check] = report["checks"]
    assert (check["id"], check["status"]) == ("arch-coverage", "pass")
    titles = {f["id"]: f["title"] for f in findings_of(report, "arch-coverage")}
    assert titles["arch-coverage.covered"] == "sm_86 (target): 1 library covered by SASS"
    assert check["facts"]["arch_coverage"]["target_archs"] == ["sm_86"]

    report, proc = doctor.report("--python", python, "--no-gpu", "--target-arch", "sm_86,sm_75",
                                 "--only", "arch-coverage")
    assert proc.returncode == 1
    assert [f["id"] for f in findings_of(report, "arch-coverage") if f["status"] == "fail"] == ["arch-coverage.no-kernel-image"]
