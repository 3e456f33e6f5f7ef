"""The kernel-packages check on real artifacts: FlashInfer's PyPI wheels out of step (flashinfer-python 0.6.18, the
release vLLM 0.29 pins, beside PyPI's last flashinfer-cubin, 0.6.13), FLASHINFER_DISABLE_VERSION_CHECK hiding it,
FlashInfer's JIT cache holding a library linked against another CUDA runtime, and nvidia-cutlass-dsl installed
where Python never reads its `.pth`. Each failure's remediation is taken from the report and run by `bash -c` as a
user pastes it, on a venv made by pip or by uv, and the doctor runs again: the failure is gone.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import Doctor, finding, findings_of
from realenv import Env, install, make_venv
from stacks import add_to_path, cudart12_library, kernel_wheel, vllm_site
from test_kernel_wheels import shell

from dflash_doctor.checks.python import KernelPackagesCheck
from dflash_doctor.checks.python.flashinfer import _accepts, jit_cache_findings
from dflash_doctor.context import Context
from dflash_doctor.facts.gpu.nvml_shapes import Gpu
from dflash_doctor.facts.python import environment, kernel_files
from dflash_doctor.facts.python.kernel_files_shapes import KernelFiles
from dflash_doctor.facts.shape import section_json
from dflash_doctor.knowledge.flashinfer import FLASHINFER_KERNEL_WHEELS, FLASHINFER_VERSION_CHECK
from dflash_doctor.model import Status
from dflash_doctor.runner import judge

ROOT = Path(__file__).resolve().parent.parent
# Recorded on a real H200: the machine's own torch 2.11.0+cu130 and its driver (CUDA 13.0), NVML.
H200 = json.loads((ROOT / "fixtures" / "archs" / "h200-torch-2.11-cu130.json").read_text())["sections"]
CHECK = "kernel-packages"


def statuses(report: dict[str, Any], prefix: str = CHECK) -> dict[str, str]:
    return {f["id"]: f["status"] for f in findings_of(report, CHECK) if f["id"].startswith(prefix)}


def flashinfer(report: dict[str, Any]) -> dict[str, str]:
    """The FlashInfer findings alone (a venv made with pip also holds setuptools' distutils-precedence.pth)."""
    return statuses(report, "kernel-packages.flashinfer")


def sections_of(env: Env, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The environment probe's sections and the kernel-files collector's, in this process (as a run collects
    them), in their JSON form (as the report saves them)."""
    ctx = Context(python=str(env.python), cwd=str(env.root), no_gpu=True)
    earlier: dict[str, object] = dict(environment.collect(ctx, {}))
    earlier.update(kernel_files.collect(ctx, earlier))
    return {name: section_json(value) for name, value in earlier.items()}


# ---------------------------------------------------------------------------------------------------------
# FlashInfer's distributions out of step
# ---------------------------------------------------------------------------------------------------------


def test_the_version_rule_is_the_one_in_flashinfer_python_0_6_18s_own_env_py() -> None:
    with zipfile.ZipFile(kernel_wheel("flashinfer-python", "0.6.18")) as wheel:
        env_py = wheel.read("flashinfer/jit/env.py").decode()
        build_meta = wheel.read("flashinfer/_build_meta.py").decode()
    rule = FLASHINFER_VERSION_CHECK.value
    assert "and flashinfer_version != flashinfer_cubin_version" in env_py
    assert "and not flashinfer_jit_cache_version.startswith(flashinfer_version)" in env_py
    assert f'not os.getenv("{rule.bypass}")' in env_py and f'os.getenv("{rule.cubin_dir}")' in env_py
    assert f'flashinfer_version != "{rule.unknown_version}"' in env_py
    assert '__version__ = "0.6.18"' in build_meta  # the module's version is the distribution's
    # cubin: string for string; jit-cache: by prefix up to 0.6.18.post1, then the version and a "+" label
    assert not _accepts(rule.cubin, "0.6.13", "0.6.18") and _accepts(rule.cubin, "0.6.18", "0.6.18")
    assert _accepts(rule.jit_cache, "0.6.18+cu129", "0.6.18")
    assert _accepts(rule.jit_cache, "0.6.18.post1+cu129", "0.6.18")  # the prefix 0.6.18 lets it pass
    assert not _accepts(rule.jit_cache, "0.7.1.post1+cu129", "0.7.1")  # 0.7.0 and later want "0.7.1+"
    assert not _accepts(rule.jit_cache, "0.6.13+cu129", "0.6.18")


def _flashinfer_env(tmp_path: Path, installer: str) -> Env:
    env = make_venv(tmp_path / "with space", "uv" if installer == "uv" else "venv", with_pip=installer == "pip")
    install(env, kernel_wheel("flashinfer-python", "0.6.18"), kernel_wheel("flashinfer-cubin", "0.6.13"),
            installer=installer, compile_bytecode=False)  # type: ignore[arg-type]
    return env


@pytest.mark.slow
@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_pypi_flashinfer_cubin_fails_beside_python_0_6_18_warns_beside_0_7_2_post1_and_its_pasted_uninstall_passes(
    doctor: Doctor, tmp_path: Path, installer: str,
) -> None:
    env = _flashinfer_env(tmp_path, installer)
    report, _ = doctor.report("--python", str(env.python), "--only", CHECK, "--no-gpu")
    skew = finding(report, "kernel-packages.flashinfer-skew")
    assert skew["status"] == "fail"
    assert skew["title"] == ("flashinfer-cubin 0.6.13 beside flashinfer-python 0.6.18: `import flashinfer` raises "
                             "RuntimeError")
    commands = [r["command"] for r in skew["remediation"]]
    # PyPI has no flashinfer-cubin 0.6.18: the matching one is named with FlashInfer's index
    index = FLASHINFER_KERNEL_WHEELS.value.index
    assert f"--index-url {index} 'flashinfer-cubin==0.6.18'" in commands[0] and "--no-deps" in commands[0]
    assert "uninstall" in commands[-1] and "flashinfer-cubin" in commands[-1]

    # The bypass hides the error and loads the stale cubins: a failure of its own ("0" is set too).
    for value in ("1", "0"):
        bypassed, _ = doctor.report("--python", str(env.python), "--only", CHECK, "--no-gpu",
                                    env={"FLASHINFER_DISABLE_VERSION_CHECK": value})
        assert flashinfer(bypassed) == {"kernel-packages.flashinfer-check-bypassed": "fail"}
    # FLASHINFER_CUBIN_DIR (read first from 0.6.18) leaves the package unread: nothing to compare.
    cubin_dir, _ = doctor.report("--python", str(env.python), "--only", CHECK, "--no-gpu",
                                 env={"FLASHINFER_CUBIN_DIR": str(tmp_path)})
    assert flashinfer(cubin_dir) == {"kernel-packages.flashinfer-aligned": "pass"}

    assert not any("download-kernels" in c for c in commands)  # no vLLM here

    # The other side of the range: flashinfer-python 0.7.2.post1 (vLLM 0.33's pin) ignores the stale cubin, with a
    # warning, and downloads cubins on demand; beside the real vLLM 0.33.0, whose CLI has `download-kernels`.
    install(env, kernel_wheel("flashinfer-python", "0.7.2.post1"), installer=installer,  # type: ignore[arg-type]
            compile_bytecode=False)
    add_to_path(env, vllm_site("0.33.0"))
    later, _ = doctor.report("--python", str(env.python), "--only", CHECK, "--no-gpu")
    ignored = finding(later, "kernel-packages.flashinfer-skew")
    assert ignored["status"] == "warn" and ignored["title"] == (
        "flashinfer-cubin 0.6.13 beside flashinfer-python 0.7.2.post1: flashinfer ignores it with a warning")
    assert "'flashinfer-cubin==0.7.2.post1'" in ignored["remediation"][0]["command"]
    commands = [r["command"] for r in ignored["remediation"]]
    assert commands[1] == f"{shlex.quote(str(env.python))} -m vllm.entrypoints.cli.main download-kernels"
    assert (vllm_site("0.33.0") / "vllm" / "entrypoints" / "cli" / "download_kernels.py").is_file()

    shell(commands[-1], tmp_path)
    fixed, _ = doctor.report("--python", str(env.python), "--only", CHECK, "--no-gpu",
                             env={"FLASHINFER_DISABLE_VERSION_CHECK": "1"})
    aligned = finding(fixed, "kernel-packages.flashinfer-aligned")
    assert aligned["status"] == "pass" and flashinfer(fixed) == {"kernel-packages.flashinfer-aligned": "pass"}
    assert aligned["title"] == "flashinfer-python 0.7.2.post1 with no flashinfer-cubin or flashinfer-jit-cache"


# ---------------------------------------------------------------------------------------------------------
# FlashInfer's JIT cache
# ---------------------------------------------------------------------------------------------------------


def _jit_cache(base: Path, version: str, libraries: Mapping[str, Path]) -> Path:
    """`<base>/.cache/flashinfer/<version>/90/cached_ops/<name>/<name>.so`, as flashinfer's JIT writes them."""
    for name, library in libraries.items():
        where = base / ".cache" / "flashinfer" / version / "90" / "cached_ops" / name
        where.mkdir(parents=True)
        shutil.copyfile(library, where / f"{name}.so")
    return base / ".cache" / "flashinfer" / version


def _judge_on_h200(sections: dict[str, Any]) -> dict[str, tuple[Status, str]]:
    """Judged with the torch CUDA and the driver recorded on a real H200 (torch 2.11.0+cu130, driver CUDA 13.0)."""
    files = KernelFiles.from_json(sections["kernel_files"])
    assert files.flashinfer_cache is not None
    cache = replace(files.flashinfer_cache, torch_cuda=H200["arch_coverage"]["torch"]["cuda"])
    gpu = Gpu.from_json(H200["gpu"])
    return {f.id: (f.status, f.title) for f in jit_cache_findings(cache, gpu)}


@pytest.mark.slow
def test_a_jit_cache_library_linked_against_cuda_12_warns_beside_cuda_13_torch_and_its_pasted_removal_clears_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = make_venv(tmp_path / "with space")
    install(env, kernel_wheel("flashinfer-python", "0.6.18"), compile_bytecode=False)
    base = tmp_path / "work space"
    monkeypatch.setenv("FLASHINFER_WORKSPACE_BASE", str(base))
    # a real CUDA 13 build (vLLM 0.20.1's FlashMLA extension) and one linked against the CUDA 12 runtime
    version_dir = _jit_cache(base, "0.6.18", {
        "sampling": cudart12_library(),
        "norm": vllm_site("0.20.1") / "vllm" / "_flashmla_extension_C.abi3.so",
    })
    _jit_cache(base, "0.6.13", {"sampling": cudart12_library()})  # another version's cache: never read
    sections = sections_of(env)
    cache = sections["kernel_files"]["flashinfer_cache"]
    assert cache["version_dir"] == str(version_dir) and cache["base_from"] == "FLASHINFER_WORKSPACE_BASE"
    assert sorted((Path(lib["path"]).name, lib["cudart"]) for lib in cache["libraries"]) == [
        ("norm.so", ["libcudart.so.13"]), ("sampling.so", ["libcudart.so.12"])]
    judged = _judge_on_h200(sections)
    status, title = judged["kernel-packages.jit-cache-cuda"]
    assert status is Status.WARN
    assert title.startswith("1 libraries in FlashInfer's JIT cache need libcudart.so.12: torch is CUDA 13.0")

    with_torch = {**sections["kernel_files"]["flashinfer_cache"], "torch_cuda": H200["arch_coverage"]["torch"]["cuda"]}
    [result] = judge([KernelPackagesCheck()], {**sections, "gpu": H200["gpu"],
                                               "kernel_files": {**sections["kernel_files"], "flashinfer_cache": with_torch}})
    [jit] = [f for f in result.findings if f.id == "kernel-packages.jit-cache-cuda"]
    shell(jit.remediation[0].command, tmp_path)
    assert not version_dir.exists() and (base / ".cache" / "flashinfer" / "0.6.13").exists()
    assert "kernel-packages.jit-cache-cuda" not in _judge_on_h200(sections_of(env))


def test_a_jit_cache_of_torchs_cuda_major_passes_on_the_recorded_h200(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    env = make_venv(tmp_path / "env")
    install(env, kernel_wheel("flashinfer-python", "0.6.18"), compile_bytecode=False)
    monkeypatch.setenv("FLASHINFER_WORKSPACE_BASE", str(tmp_path))
    _jit_cache(tmp_path, "0.6.18", {"norm": vllm_site("0.20.1") / "vllm" / "_flashmla_extension_C.abi3.so"})
    (tmp_path / ".cache" / "flashinfer" / "0.6.18" / "90" / "cached_ops" / "fifo").mkdir()
    subprocess.run(["mkfifo", str(tmp_path / ".cache" / "flashinfer" / "0.6.18" / "90" / "cached_ops" / "fifo" /
                                 "fifo.so")], check=True)
    sections = sections_of(env)
    cache = sections["kernel_files"]["flashinfer_cache"]
    assert cache["found"] == 2 and len(cache["libraries"]) == 1
    assert cache["skipped"] == [(f"{tmp_path}/.cache/flashinfer/0.6.18/90/cached_ops/fifo/fifo.so: not a regular "
                                 "file: never read")]
    status, title = _judge_on_h200(sections)["kernel-packages.jit-cache-cuda"]
    assert status is Status.PASS and "CUDA runtime 13, torch's CUDA major (13.0)" in title


# ---------------------------------------------------------------------------------------------------------
# .pth files Python never reads
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_cutlass_dsl_installed_with_pip_target_on_pythonpath_has_no_cutlass_and_its_pasted_install_fixes_it(
    doctor: Doctor, tmp_path: Path, installer: str,
) -> None:
    layer = tmp_path / "layer dir"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--no-compile",
                    "--target", str(layer), str(kernel_wheel("nvidia-cutlass-dsl-libs-base", "4.5.2")),
                    str(kernel_wheel("nvidia-cutlass-dsl", "4.8.0"))], check=True, capture_output=True)
    env = make_venv(tmp_path / "with space", "uv" if installer == "uv" else "venv", with_pip=installer == "pip")
    # the layer first; the doctor's own checkout after it, as the test run has it
    on_path = {"PYTHONPATH": os.pathsep.join(p for p in (str(layer), os.environ.get("PYTHONPATH", "")) if p)}
    report, _ = doctor.report("--python", str(env.python), "--only", CHECK, "--no-gpu", env=on_path)
    unread = [f for f in findings_of(report, CHECK) if f["id"] == "kernel-packages.pth-not-read"]
    assert sorted((f["status"], f["evidence"]["file"].rsplit("/", 1)[1]) for f in unread) == [
        ("fail", "nvidia_cutlass_dsl.pth"), ("fail", "nvidia_cutlass_dsl_packages.pth")]
    base = next(f for f in unread if f["evidence"]["distribution"] == "nvidia-cutlass-dsl-libs-base")
    assert base["title"] == (f"nvidia-cutlass-dsl-libs-base 4.5.2 is installed in a PYTHONPATH directory ({layer}), "
                             "where Python never reads its nvidia_cutlass_dsl.pth: `import cutlass` fails: No module "
                             "named 'cutlass'")
    assert base["evidence"]["paths_not_on_sys_path"] == [f"{layer}/nvidia_cutlass_dsl/python_packages"]
    top = next(f for f in unread if f["evidence"]["distribution"] == "nvidia-cutlass-dsl")
    assert top["evidence"]["import_lines"][0].startswith("import sys, os, nvidia_cutlass_dsl;")

    # pasted where the serve is launched: PYTHONPATH still names the layer
    shell(f"export PYTHONPATH={shlex.quote(str(layer))}; {base['remediation'][0]['command']}", tmp_path)
    fixed, _ = doctor.report("--python", str(env.python), "--only", CHECK, "--no-gpu", env=on_path)
    assert "fail" not in statuses(fixed).values(), statuses(fixed)
    resolved = subprocess.run([str(env.python), "-c", "import importlib.util as u; print(u.find_spec('cutlass').origin)"],
                              env={"PYTHONPATH": str(layer)}, capture_output=True, text=True, check=True)
    assert "/site-packages/nvidia_cutlass_dsl/python_packages/cutlass/__init__.py" in resolved.stdout


@pytest.mark.slow
def test_cutlass_dsl_installed_into_the_venv_reads_its_pth_and_passes(doctor: Doctor, tmp_path: Path) -> None:
    env = make_venv(tmp_path / "env")
    install(env, kernel_wheel("nvidia-cutlass-dsl-libs-base", "4.5.2"), compile_bytecode=False)
    report, _ = doctor.report("--python", str(env.python), "--only", CHECK, "--no-gpu")
    assert statuses(report) == {"kernel-packages.pth-not-read": "pass"}
    assert finding(report, "kernel-packages.pth-not-read")["title"] == (
        "1 .pth files of installed distributions, each in a site directory")



def test_the_jit_cache_is_read_up_to_its_count_and_the_rest_is_named(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    env = make_venv(tmp_path / "env")
    install(env, kernel_wheel("flashinfer-python", "0.6.18"), compile_bytecode=False)
    monkeypatch.setenv("FLASHINFER_WORKSPACE_BASE", str(tmp_path))
    monkeypatch.setattr(kernel_files, "MAX_LIBRARIES", 1)
    _jit_cache(tmp_path, "0.6.18", {"a_norm": vllm_site("0.20.1") / "vllm" / "_flashmla_extension_C.abi3.so",
                                    "b_sampling": cudart12_library()})
    cache = sections_of(env)["kernel_files"]["flashinfer_cache"]
    assert [Path(lib["path"]).name for lib in cache["libraries"]] == ["a_norm.so"]
    assert cache["found"] == 2 and cache["skipped"] == ["1 more libraries: only 1 read"]
