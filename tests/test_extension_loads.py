"""Extension load failures a user can act on, from real shared libraries built with cc.

- An extension that needs the NVIDIA driver's `libcuda.so.1`: under --no-gpu (a CI image build) it is not a
  failure, since the container runtime provides the library at run time; without --no-gpu, on a machine
  with no driver, it fails as a consequence of the gpu check's no-driver finding. A CUDA library the image
  must ship (libnvrtc.so.13) still fails under --no-gpu.
- An extension that links torch's libc10.so while torch is not installed: the fix is the torch the
  distribution requires (the distributions finding), not `ldconfig -p`.
- An extension file named for another Python (`_C.cpython-312-x86_64-linux-gnu.so` on 3.11): not a module
  of this interpreter, never named `_C.cpython-312-x86_64-linux-gnu`.

This machine's CUDA toolkit ships no libcuda stub, so the tests build their own tiny `libcuda.so.1` (soname
libcuda.so.1, a `cuInit`) to link against, and run where that library is absent, as on a GPU-less builder.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from conftest import Doctor, finding, findings_of
from realenv import build_wheel, install, make_venv
from stacks import add_to_path

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler (cc)"),
]

EXT_SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")
PLATFORM_TAG = f"cp{sys.version_info[0]}{sys.version_info[1]}-cp{sys.version_info[0]}{sys.version_info[1]}-linux_x86_64"
NEXT_MINOR = f"{sys.version_info[0]}{sys.version_info[1] + 1}"  # another CPython than the one running the tests

EXTENSION_SOURCE = """\
#define PY_SSIZE_T_CLEAN
#include <Python.h>
{declarations}
static struct PyModuleDef definition = {{PyModuleDef_HEAD_INIT, "{name}", NULL, -1, NULL}};
PyMODINIT_FUNC PyInit_{name}(void) {{
{calls}    return PyModule_Create(&definition);
}}
"""


def _driver_present() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


def stub_library(directory: Path, soname: str, function: str) -> Path:
    """A real shared library named `soname` (DT_SONAME too) that exports `int function(unsigned)`."""
    directory.mkdir(parents=True, exist_ok=True)
    source = directory / f"{soname}.c"
    source.write_text(f"int {function}(unsigned int flags) {{ return (int) flags; }}\n")
    library = directory / soname
    subprocess.run(["cc", "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", str(library), str(source)], check=True)
    return library


def extension(build: Path, name: str, needs: dict[str, str], file_name: str | None = None) -> bytes:
    """A real CPython extension module `name` whose init calls one function from each library in `needs`
    (soname -> function), so that each is a DT_NEEDED entry; the stubs it links against stay in `build`."""
    stubs = build / "stubs"
    build.mkdir(parents=True, exist_ok=True)
    for soname, function in needs.items():
        stub_library(stubs, soname, function)
    source = build / f"{name}.c"
    source.write_text(EXTENSION_SOURCE.format(
        name=name,
        declarations="".join(f"extern int {f}(unsigned int);\n" for f in needs.values()),
        calls="".join(f"    {f}(0);\n" for f in needs.values()),
    ))
    output = build / (file_name or f"{name}{EXT_SUFFIX}")
    subprocess.run(["cc", "-shared", "-fPIC", f"-I{sysconfig.get_paths()['include']}", "-o", str(output), str(source),
                    f"-L{stubs}", *(f"-l:{soname}" for soname in needs)], check=True)
    needed = subprocess.run(["readelf", "-d", str(output)], capture_output=True, text=True, check=True).stdout \
        if shutil.which("readelf") else ""
    assert not needed or all(f"[{soname}]" in needed for soname in needs), needed
    return output.read_bytes()


def first_detail_line(found: dict) -> str:  # type: ignore[type-arg]
    return str(found["detail"]).splitlines()[0]


# ----------------------------------------------------------------------------- the driver's libcuda.so.1


@pytest.mark.skipif(_driver_present(), reason="this machine has libcuda.so.1: a GPU-less builder cannot be shown")
def test_an_extension_needing_libcuda_does_not_fail_the_ci_gate_under_no_gpu_but_a_missing_libnvrtc_does(
        doctor: Doctor, tmp_path: Path) -> None:
    build = tmp_path / "build"
    env = make_venv(tmp_path)
    files = {
        "vllm/__init__.py": "",
        f"vllm/_C{EXT_SUFFIX}": extension(build, "_C", {"libcuda.so.1": "cuInit"}),
        f"vllm/cumem_allocator{EXT_SUFFIX}": extension(build, "cumem_allocator", {"libcuda.so.1": "cuInit"}),
        f"vllm/_plain{EXT_SUFFIX}": extension(build, "_plain", {}),
    }
    install(env, build_wheel(tmp_path / "wheels", "vllm", "0.20.1", files, tag=PLATFORM_TAG))

    # The CI gate: --no-gpu --strict. libcuda.so.1 is the driver's: provided at run time, not a failure.
    report, proc = doctor.report("--python", str(env.python), "--only", "extensions", "--no-gpu", "--strict")
    deferred = finding(report, "extensions.needs-driver")
    assert deferred["status"] == "skip"
    assert "libcuda.so.1" in deferred["title"] and "vllm._C" in deferred["title"]
    assert "vllm.cumem_allocator" in deferred["title"]
    assert first_detail_line(deferred) == "ImportError: libcuda.so.1: cannot open shared object file: No such file or directory"
    assert "NVIDIA container runtime" in deferred["detail"]
    assert finding(report, "extensions.ok")["title"].endswith("vllm._plain")
    assert not [f for f in findings_of(report) if f["status"] in ("fail", "warn")]
    assert proc.returncode == 0, proc.stderr

    # The same extensions load once the loader finds a libcuda.so.1: libcuda was the only thing missing.
    report, proc = doctor.report("--python", str(env.python), "--only", "extensions", "--no-gpu",
                                 env={"LD_LIBRARY_PATH": str(build / "stubs")})
    assert [f["id"] for f in findings_of(report, "extensions")] == ["extensions.ok"]
    assert "3 compiled extension(s) load" in findings_of(report, "extensions")[0]["title"]

    # libnvrtc.so.13 is the CUDA toolkit's: the image must ship it, so its absence fails even under --no-gpu.
    install(env, build_wheel(tmp_path / "wheels", "flashinfer-python", "0.5.0", {
        "flashinfer/__init__.py": "",
        f"flashinfer/_kernels{EXT_SUFFIX}": extension(build, "_kernels", {"libnvrtc.so.13": "nvrtcVersion"}),
    }, tag=PLATFORM_TAG))
    report, proc = doctor.report("--python", str(env.python), "--only", "extensions", "--no-gpu", "--strict")
    missing = finding(report, "extensions.library-not-found")
    assert missing["status"] == "fail"
    assert "flashinfer._kernels" in missing["title"] and "libnvrtc.so.13" in missing["title"]
    assert first_detail_line(missing) == ("ImportError: libnvrtc.so.13: cannot open shared object file: "
                                          "No such file or directory")
    assert finding(report, "extensions.needs-driver")["status"] == "skip"
    assert proc.returncode == 1


@pytest.mark.skipif(_driver_present(), reason="this machine has libcuda.so.1: a GPU-less builder cannot be shown")
def test_a_missing_image_library_after_libcuda_in_load_order_still_fails_under_no_gpu(
        doctor: Doctor, tmp_path: Path) -> None:
    # DT_NEEDED libcuda.so.1 first, then libnvrtc.so.13: the loader reports only libcuda.so.1 and stops.
    env = make_venv(tmp_path)
    install(env, build_wheel(tmp_path / "wheels", "vllm", "0.20.1", {
        "vllm/__init__.py": "",
        f"vllm/_C{EXT_SUFFIX}": extension(tmp_path / "build", "_C", {"libcuda.so.1": "cuInit",
                                                                     "libnvrtc.so.13": "nvrtcVersion"}),
    }, tag=PLATFORM_TAG))
    report, proc = doctor.report("--python", str(env.python), "--only", "extensions", "--no-gpu", "--strict")
    (failed,) = findings_of(report, "extensions")
    assert failed["id"] == "extensions.library-not-found" and failed["status"] == "fail"
    assert "cannot load libnvrtc.so.13" in failed["title"] and "stopped earlier at libcuda.so.1" in failed["title"]
    assert first_detail_line(failed) == "ImportError: libcuda.so.1: cannot open shared object file: No such file or directory"
    assert proc.returncode == 1


@pytest.mark.skipif(_driver_present(), reason="this machine has libcuda.so.1: a GPU-less builder cannot be shown")
def test_without_no_gpu_on_a_machine_without_a_driver_the_libcuda_failure_follows_from_the_gpu_finding(
        doctor: Doctor, tmp_path: Path) -> None:
    env = make_venv(tmp_path)
    install(env, build_wheel(tmp_path / "wheels", "vllm", "0.20.1", {
        "vllm/__init__.py": "",
        f"vllm/_C{EXT_SUFFIX}": extension(tmp_path / "build", "_C", {"libcuda.so.1": "cuInit"}),
    }, tag=PLATFORM_TAG))
    report, proc = doctor.report("--python", str(env.python), "--only", "extensions,gpu")
    (no_driver,) = [f for f in findings_of(report, "gpu") if f["status"] == "fail"]
    failed = finding(report, "extensions.driver-library-missing")
    assert failed["status"] == "fail"
    assert failed["cause"] == no_driver["id"]
    assert "vllm._C" in failed["title"] and "libcuda.so.1" in failed["title"]
    assert first_detail_line(failed) == "ImportError: libcuda.so.1: cannot open shared object file: No such file or directory"
    assert "--no-gpu" in failed["detail"]
    assert not failed["remediation"]  # the driver is the fix: the gpu finding says so
    assert proc.returncode == 1


# ----------------------------------------------------------------------------- torch's libraries, torch absent


def test_an_extension_linking_libc10_without_torch_points_at_the_missing_torch_not_ldconfig(
        doctor: Doctor, tmp_path: Path) -> None:
    env = make_venv(tmp_path)
    install(env, build_wheel(tmp_path / "wheels", "vllm", "0.20.1", {
        "vllm/__init__.py": "",
        f"vllm/_C{EXT_SUFFIX}": extension(tmp_path / "build", "_C", {"libc10.so": "c10_stub"}),
    }, requires=["torch==2.11.0"], tag=PLATFORM_TAG))
    report, proc = doctor.report("--python", str(env.python), "--only", "distributions,extensions", "--no-gpu")
    requirement = finding(report, "distributions.requirement-missing")
    (failed,) = [f for f in findings_of(report, "extensions") if f["status"] == "fail"]
    assert failed["id"] == "extensions.dependency-missing"
    assert failed["cause"] == "distributions.requirement-missing"
    assert "libc10.so" in failed["title"] and "torch is not installed" in failed["title"]
    assert first_detail_line(failed) == "ImportError: libc10.so: cannot open shared object file: No such file or directory"
    commands = [r["command"] for r in failed["remediation"]]
    assert commands == [f"{env.python} -m pip install 'torch==2.11.0'"]
    assert commands[0] == requirement["remediation"][0]["command"]
    assert not any("ldconfig" in r["command"] for f in findings_of(report) for r in f["remediation"])
    assert proc.returncode == 1


@pytest.mark.skipif(_driver_present(), reason="this machine has libcuda.so.1: a GPU-less builder cannot be shown")
def test_an_extension_needing_libcuda_then_libc10_without_torch_points_at_the_missing_torch(
        doctor: Doctor, tmp_path: Path) -> None:
    # DT_NEEDED libcuda.so.1 first (the loader stops there), then libc10.so, which only torch installs.
    env = make_venv(tmp_path)
    install(env, build_wheel(tmp_path / "wheels", "vllm", "0.20.1", {
        "vllm/__init__.py": "",
        f"vllm/cumem_allocator{EXT_SUFFIX}": extension(tmp_path / "build", "cumem_allocator",
                                                       {"libcuda.so.1": "cuInit", "libc10.so": "c10_stub"}),
    }, requires=["torch==2.11.0"], tag=PLATFORM_TAG))
    report, proc = doctor.report("--python", str(env.python), "--only", "distributions,extensions", "--no-gpu")
    (failed,) = [f for f in findings_of(report, "extensions") if f["status"] == "fail"]
    assert failed["id"] == "extensions.dependency-missing" and failed["cause"] == "distributions.requirement-missing"
    assert "libc10.so" in failed["title"] and "torch is not installed" in failed["title"]
    assert [r["command"] for r in failed["remediation"]] == [f"{env.python} -m pip install 'torch==2.11.0'"]
    assert not any("ldconfig" in r["command"] for f in findings_of(report) for r in f["remediation"])
    assert proc.returncode == 1


# ----------------------------------------------------------------------------- an extension for another Python


def test_an_extension_built_for_another_python_is_named_as_its_module_and_judged_by_the_wheel_it_came_from(
        doctor: Doctor, tmp_path: Path) -> None:
    other = f"cpython-{NEXT_MINOR}-x86_64-linux-gnu"
    other_label = f"CPython {sys.version_info[0]}.{sys.version_info[1] + 1}"
    here_label = f"CPython {sys.version_info[0]}.{sys.version_info[1]}"
    build = tmp_path / "build"
    env = make_venv(tmp_path)
    # vLLM 0.20.1's abi3 wheel really ships vllm/third_party/deep_gemm/_C.cpython-312-x86_64-linux-gnu.so.
    install(env, build_wheel(tmp_path / "wheels", "vllm", "0.20.1", {
        "vllm/__init__.py": "",
        "vllm/third_party/__init__.py": "",
        "vllm/third_party/deep_gemm/__init__.py": "from . import _C\n",
        f"vllm/third_party/deep_gemm/_C.{other}.so": extension(build, "_C", {}, file_name=f"_C.{other}.so"),
        "vllm/_moe_C.abi3.so": extension(build, "_moe_C", {}, file_name="_moe_C.abi3.so"),
    }, tag="cp38-abi3-linux_x86_64"))
    # A wheel built for the other Python, installed the way pip lets one: --target with --python-version.
    other_wheel = build_wheel(tmp_path / "wheels", "flashinfer-python", "0.5.0", {
        "flashinfer/__init__.py": "",
        f"flashinfer/_kernels.{other}.so": extension(build, "_kernels", {}, file_name=f"_kernels.{other}.so"),
    }, tag=f"cp{NEXT_MINOR}-cp{NEXT_MINOR}-linux_x86_64")
    target = tmp_path / "other-python-site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--no-compile",
                    "--target", str(target), "--python-version", f"{sys.version_info[0]}.{sys.version_info[1] + 1}",
                    "--only-binary", ":all:", str(other_wheel)], check=True)
    add_to_path(env, target)

    report, proc = doctor.report("--python", str(env.python), "--only", "extensions", "--no-gpu")
    found = {f["evidence"]["module"]: f for f in findings_of(report, "extensions") if f["id"] == "extensions.other-python"}
    assert sorted(found) == ["flashinfer._kernels", "vllm.third_party.deep_gemm._C"]

    shipped = found["vllm.third_party.deep_gemm._C"]
    assert shipped["status"] == "warn"
    # One statement, no contradiction: the wheel fits this Python, the one file in it does not.
    assert shipped["title"] == (f"vllm 0.20.1's wheel (cp38-abi3-linux_x86_64) fits {here_label} but ships "
                                f"vllm.third_party.deep_gemm._C only as _C.{other}.so, built for {other_label}: "
                                f"vllm.third_party.deep_gemm._C cannot be imported on {here_label}")
    assert "built for this interpreter" not in shipped["detail"]
    assert first_detail_line(shipped).startswith(
        f"`import vllm.third_party.deep_gemm._C` finds no module: _C.{other}.so is built for {other_label}, and "
        f"{here_label} loads extension modules only from files ending in {EXT_SUFFIX}")
    # Where it does load: that Python's environment; a vLLM that ships the file for this Python; DeepGEMM off.
    commands = [r["command"] for r in shipped["remediation"]]
    other_python = other_label.removeprefix("CPython ")
    assert commands[0] == (f"python{other_python} -m venv VENV && VENV/bin/python -m pip install 'vllm==0.20.1'")
    if here_label.removeprefix("CPython ") in ("3.10", "3.11", "3.12", "3.13", "3.14"):
        assert commands[1] == f"{env.python} -m pip install 'vllm==0.24.0'"
    assert commands[-1] == "export VLLM_USE_DEEP_GEMM=0"

    wrong_wheel = found["flashinfer._kernels"]
    assert wrong_wheel["status"] == "fail"
    assert wrong_wheel["title"].startswith(f"flashinfer-python 0.5.0 was installed from a wheel built for {other_label}")
    assert [r["command"] for r in wrong_wheel["remediation"]] == [
        f"{env.python} -m pip install --force-reinstall --no-deps 'flashinfer-python==0.5.0'"]

    # Never a dotted module with the ABI tag glued on, in the findings or in the facts.
    for stem in (f"_C.{other}", f"_kernels.{other}"):
        assert stem not in proc.stdout.replace(f"{stem}.so", "")
    loaded = finding(report, "extensions.ok")
    assert loaded["title"] == "1 compiled extension(s) load: vllm._moe_C"
    assert proc.returncode == 1


@pytest.mark.skipif(_driver_present(), reason="this machine has libcuda.so.1: a GPU-less builder cannot be shown")
def test_the_rotary_import_failing_only_on_libcuda_is_skipped_under_no_gpu_and_follows_from_no_driver_without(
        doctor: Doctor, tmp_path: Path) -> None:
    env = make_venv(tmp_path)
    install(env, build_wheel(tmp_path / "wheels", "flash-attn", "2.8.3", {
        "flash_attn/__init__.py": "import flash_attn_2_cuda\n",
        "flash_attn/ops/__init__.py": "",
        "flash_attn/ops/triton/__init__.py": "",
        "flash_attn/ops/triton/rotary.py": "def apply_rotary(*args, **kwargs):\n    pass\n",
        f"flash_attn_2_cuda{EXT_SUFFIX}": extension(tmp_path / "build", "flash_attn_2_cuda", {"libcuda.so.1": "cuInit"}),
    }, tag=PLATFORM_TAG))
    literal = "ImportError: libcuda.so.1: cannot open shared object file: No such file or directory"

    report, proc = doctor.report("--python", str(env.python), "--only", "imports", "--no-gpu", "--strict")
    deferred = finding(report, "imports.needs-driver")
    assert deferred["status"] == "skip" and "flash_attn.ops.triton.rotary" in deferred["title"]
    assert first_detail_line(deferred) == literal
    assert proc.returncode == 0, proc.stdout[-2000:]

    report, proc = doctor.report("--python", str(env.python), "--only", "imports,gpu")
    failed = finding(report, "imports.driver-library-missing")
    (no_driver,) = [f for f in findings_of(report, "gpu") if f["status"] == "fail"]
    assert failed["status"] == "fail" and failed["cause"] == no_driver["id"]
    assert first_detail_line(failed) == literal
    assert proc.returncode == 1
