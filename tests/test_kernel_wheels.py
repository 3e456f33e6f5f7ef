"""The kernel packages vLLM and flash-attn-4 load at run time, on their real wheels from PyPI.

- The two halves of `nvidia-cutlass-dsl[cu13]` 4.5.2 (nvidia-cutlass-dsl-libs-base and -libs-cu13, 74 MB and
  78 MB) installed with --no-deps in both orders: the base last overwrites the cu13 files (fail), cu13 last is
  what vLLM's [cu13] pin needs (pass). The failing finding's first remediation is pasted into bash as it is,
  pip finding the wheel in the test cache (PIP_FIND_LINKS, PIP_NO_INDEX: the command stays the report's),
  and the doctor runs again.
- apache-tvm-ffi 0.1.9 (vLLM 0.24.0's pin) upgraded to 0.1.11 by flash-attn-4 4.0.0b36's requirement: the finding
  names flash-attn-4, installed after vLLM.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from conftest import Doctor, finding, findings_of
from realenv import Env, _clean_environ, build_wheel, fa4_wheel, install, make_venv, uv_bin
from stacks import add_to_path, kernel_wheel, pypi_wheels_dir, torch_site, vllm_site

BASE, CU13 = "nvidia-cutlass-dsl-libs-base", "nvidia-cutlass-dsl-libs-cu13"


def cutlass_env(tmp_path: Path, order: tuple[str, str], installer: str = "pip") -> Env:
    env = make_venv(tmp_path / "with space", "uv" if installer == "uv" else "venv", with_pip=installer == "pip")
    for name in order:  # one install each, in this order: the last one's files win
        install(env, kernel_wheel(name, "4.5.2"), installer=installer, compile_bytecode=False)  # type: ignore[arg-type]
    return env


def shell(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A pasted command line, run by bash; pip and uv find the wheels in the test cache, never the network."""
    environ = _clean_environ({"PIP_FIND_LINKS": str(pypi_wheels_dir()), "PIP_NO_INDEX": "1",
                              "UV_FIND_LINKS": str(pypi_wheels_dir()), "UV_NO_INDEX": "1"})
    environ["PATH"] = os.pathsep.join([str(uv_bin().parent), environ.get("PATH", "")])
    proc = subprocess.run(["bash", "-c", command], check=False, cwd=cwd, env=environ, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, f"{command}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    return proc


@pytest.mark.slow
@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_cutlass_dsl_base_installed_after_cu13_fails_and_the_pasted_reinstall_clears_it(
        doctor: Doctor, tmp_path: Path, installer: str) -> None:
    env = cutlass_env(tmp_path, (CU13, BASE), installer)
    report, proc = doctor.report("--python", str(env.python), "--only", "distributions")
    collision = finding(report, "distributions.file-collision")
    assert collision["status"] == "fail" and proc.returncode == 1
    # measured on the wheels: 180 shared paths, 99 with other bytes; the base's are on disk at all 99
    assert collision["title"] == (f"{CU13} 4.5.2: 99 of the 180 paths it shares with {BASE} 4.5.2 do not hold its "
                                  f"files (99 hold {BASE}'s, installed last): CuTe DSL kernels run the CUDA-12 base "
                                  "build")
    assert "mlir_global_dtors() missing 1 required positional argument: 'data'" in collision["detail"]
    assert "vllm-project/vllm #44949" in collision["detail"] and "ai-dynamo/dynamo #11775" in collision["detail"]
    evidence = collision["evidence"]
    assert evidence["shared"] == 180 and evidence["differing"] == 99 and evidence["installed_last"] == BASE
    fix = collision["remediation"][0]["command"]
    if installer == "pip":
        assert fix == f"'{env.python}' -m pip install --force-reinstall --no-deps '{CU13}==4.5.2'"
    else:
        assert fix == f"uv pip install --python '{env.python}' --reinstall --no-deps '{CU13}==4.5.2'"
    assert collision["remediation"][1]["command"].endswith("'vllm>=0.26.0'")
    # The shared paths are the collision's, not a record-mismatch of either half (whose fix would undo it).
    assert not [f for f in findings_of(report) if f["id"] == "distributions.record-mismatch"]

    shell(fix, env.root)
    report, proc = doctor.report("--python", str(env.python), "--only", "distributions")
    after = finding(report, "distributions.file-collision")
    assert after["status"] == "pass", after["title"]
    assert after["evidence"]["installed_last"] == CU13
    assert proc.returncode == 0, [(f["id"], f["title"]) for f in findings_of(report) if f["status"] == "fail"]


@pytest.mark.slow
def test_cutlass_dsl_cu13_installed_after_base_passes_quickly(doctor: Doctor, tmp_path: Path) -> None:
    env = cutlass_env(tmp_path, (BASE, CU13))
    start = time.perf_counter()
    report, proc = doctor.report("--python", str(env.python), "--only", "distributions")
    seconds = time.perf_counter() - start
    collision = finding(report, "distributions.file-collision")
    assert collision["status"] == "pass" and proc.returncode == 0
    assert collision["title"] == (f"{CU13} 4.5.2 and {BASE} 4.5.2 share 180 paths, 99 with different bytes: "
                                  f"{CU13}'s files are in place ({CU13} was installed last)")
    assert {d["name"]: d["holds"] for d in collision["evidence"]["distributions"]} == {BASE: 0, CU13: 99}
    assert not [f for f in findings_of(report) if f["status"] in ("fail", "warn")]
    # Hashing ~190 MB of the 99 differing paths is the run's cost; whole, it stays well under the probe timeout.
    assert seconds < 30, seconds


# ---------------------------------------------------------------- whose install broke the pin


def tvm_ffi_env(tmp_path: Path, *, with_fa4: bool) -> Env:
    env = make_venv(tmp_path / "env-root", with_pip=True)
    add_to_path(env, vllm_site("0.24.0"))  # vLLM 0.24.0 requires apache-tvm-ffi==0.1.9
    install(env, kernel_wheel("typing-extensions", "4.16.0"), compile_bytecode=False)  # tvm-ffi's requirement
    install(env, kernel_wheel("apache-tvm-ffi", "0.1.9"), compile_bytecode=False)
    time.sleep(0.05)  # RECORD times order the installs (the filesystem's resolution is finer than this)
    if with_fa4:  # what `pip install flash-attn-4` does: flash-attn-4 and the tvm-ffi it requires
        install(env, fa4_wheel(), compile_bytecode=False)
    install(env, kernel_wheel("apache-tvm-ffi", "0.1.11"), compile_bytecode=False)
    return env


@pytest.mark.slow
def test_flash_attn_4_upgrading_vllms_tvm_ffi_pin_is_named_as_the_install_that_broke_it(
        doctor: Doctor, tmp_path: Path) -> None:
    env = tvm_ffi_env(tmp_path, with_fa4=True)
    report, proc = doctor.report("--python", str(env.python), "--only", "distributions")
    broken = finding(report, "distributions.requirement-broken-by")
    assert broken["status"] == "fail" and proc.returncode == 1
    assert broken["title"] == ("vllm 0.24.0 requires apache-tvm-ffi==0.1.9, found 0.1.11: flash-attn-4 4.0.0b36 "
                               "requires apache-tvm-ffi<0.2,>=0.1.11 and was installed after vllm")
    assert "map_dataclass_to_tuple" in broken["detail"]
    assert broken["evidence"]["installed_after_requirer"] is True
    commands = [r["command"] for r in broken["remediation"]]
    assert commands == [f"{env.python} -m pip install 'apache-tvm-ffi==0.1.9'",
                        (f"{env.python} -m pip uninstall -y flash-attn-4 && {env.python} -m pip install "
                         "'apache-tvm-ffi==0.1.9'")]

    shell(commands[1], env.root)  # pasted as it is: flash-attn-4 goes, vLLM's pin comes back
    report, _ = doctor.report("--python", str(env.python), "--only", "distributions")
    assert "distributions.requirement-broken-by" not in {f["id"] for f in findings_of(report)}
    assert finding(report, "distributions.stack")["evidence"]["versions"]["flash-attn-4"] is None


@pytest.mark.slow
def test_a_tvm_ffi_no_installed_distribution_asks_for_is_said_to_be_installed_by_hand(
        doctor: Doctor, tmp_path: Path) -> None:
    env = tvm_ffi_env(tmp_path, with_fa4=False)
    report, _ = doctor.report("--python", str(env.python), "--only", "distributions")
    broken = finding(report, "distributions.requirement-broken-by")
    assert broken["title"] == ("vllm 0.24.0 requires apache-tvm-ffi==0.1.9, found 0.1.11: no installed distribution "
                               "requires 0.1.11: it was installed by hand")
    assert [r["command"] for r in broken["remediation"]] == [f"{env.python} -m pip install 'apache-tvm-ffi==0.1.9'"]


@pytest.mark.slow
def test_a_broken_torch_pin_of_the_stack_names_the_install_that_required_the_other_torch(
        doctor: Doctor, tmp_path: Path) -> None:
    """vLLM 0.24.0 and torch 2.13.0 (CPU) are the real ones; the install that asked for that torch is a hand-built
    wheel requiring torch>=2.13 (it stands for one such as vLLM 0.27's torch==2.13.0 pin, a 250 MB wheel)."""
    env = make_venv(tmp_path / "env-root")
    add_to_path(env, vllm_site("0.24.0"))
    add_to_path(env, torch_site(), "b-torch")
    install(env, build_wheel(tmp_path / "wheels", "needs-newer-torch", "1.0", {"needs_newer_torch.py": ""},
                             requires=["torch>=2.13"]), compile_bytecode=False)
    report, proc = doctor.report("--python", str(env.python), "--only", "distributions")
    (unmet,) = [f for f in findings_of(report)
                if f["id"] == "distributions.requirement-unmet" and f["evidence"]["requirement"] == "torch==2.11.0"]
    assert unmet["title"] == ("vllm 0.24.0 requires torch==2.11.0, found 2.13.0+cpu: needs-newer-torch 1.0 requires "
                              "torch>=2.13 and was installed after vllm")
    assert [r["name"] for r in unmet["evidence"]["required_by"]] == ["needs-newer-torch"]
    assert unmet["status"] == "fail" and proc.returncode == 1
