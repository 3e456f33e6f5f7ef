"""Real serving-stack pieces for scenario tests, built once per machine and cached outside the repo.

- the real vLLM wheels from PyPI, installed with `pip --target` into a cached directory that a test
  venv adds to its path with a `.pth` file (the wheel is 250 MB; installing it per test would cost
  minutes); the doctor reads its source and metadata, nothing imports it;
- torch, the CPU build this machine's pip takes from disk, from the flash-attn builder venv;
- a flash-attn 2.8.3 wheel whose `flash_attn_2_cuda` extension is a real shared library with an
  undefined `c10` symbol: what a wheel built against another torch looks like to the loader;
- a venv where the real vLLM imports and runs its own config validation on this CPU-only machine.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from realenv import Env, _locked, _run, build_wheel, cache_dir, fa2_builder_python, fa2_wheel

UNDEFINED_C10_SYMBOL = "_ZN3c104cuda9SetDeviceEi"  # c10::cuda::SetDevice(int), from flash-attn#723


def add_to_path(env: Env, directory: Path, name: str = "zz-stack") -> None:
    """Put `directory` on the env's sys.path the way site does for any .pth line."""
    (env.site_packages / f"{name}.pth").write_text(f"{directory}\n")


def vllm_site(version: str) -> Path:
    """A directory holding the real vLLM `version` wheel installed with --no-deps."""
    target = cache_dir() / "vllm-site" / version
    marker = target / ".complete"
    with _locked(f"vllm-site-{version}"):
        if marker.exists():
            return target
        wheels = cache_dir() / "wheels"
        found = sorted(wheels.glob(f"vllm-{version}-*.whl"))
        if not found:
            # pip matches --platform exactly: name every manylinux tag vLLM's wheels have used.
            platforms = [f"--platform=manylinux_2_{n}_x86_64" for n in (35, 34, 31, 28, 17)]
            _run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", *platforms,
                  "--python-version", "3.11", "-q", "-d", wheels, f"vllm=={version}"], timeout=1800)
            found = sorted(wheels.glob(f"vllm-{version}-*.whl"))
        _run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-compile", "--no-index", "-q",
              "--target", target, found[0]], timeout=1800)
        marker.touch()
        return target


# Real kernel-package wheels from PyPI (cp311, manylinux_2_28_x86_64), pinned by the sha256 PyPI served.
KERNEL_WHEELS = {
    ("nvidia-cutlass-dsl-libs-base", "4.5.2"): (
        "nvidia_cutlass_dsl_libs_base-4.5.2-cp311-cp311-manylinux_2_28_x86_64.whl",
        "9117900cba53d3c21a8dacba6bbf3d6e5f269e427a526c320fb44707a0d57363"),
    ("nvidia-cutlass-dsl-libs-cu13", "4.5.2"): (
        "nvidia_cutlass_dsl_libs_cu13-4.5.2-cp311-cp311-manylinux_2_28_x86_64.whl",
        "df61430d6110eea872acb39257042814bf02dcbb1f8d55ea0c5681bb7ce5836a"),
    ("apache-tvm-ffi", "0.1.9"): (
        "apache_tvm_ffi-0.1.9-cp311-cp311-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl",
        "21365abd2a2a1a6d3b4e6e4f048309651125becfa795440c3607f3cc27d30ac7"),
    ("apache-tvm-ffi", "0.1.11"): (
        "apache_tvm_ffi-0.1.11-cp311-cp311-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl",
        "87f84e7c2393fadac340fd179a631a697effe54d7317b2543e0930452a0a673d"),
    # Distributions that install the same paths (distributions.shared-paths): tokenspeed's forks of flash-attn-4's
    # flash_attn/cute/ and of quack-kernels' quack/, beside the releases they fork (pure Python wheels).
    ("flash-attn-4", "4.0.0b40"): (
        "flash_attn_4-4.0.0b40-py3-none-any.whl",
        "7c7a374397808dfbb47620066db2ce152b8e2bb86e8b05c8876f4608b5f65152"),
    ("tokenspeed-fa4", "4.0.0.post20260923"): (
        "tokenspeed_fa4-4.0.0.post20260923-py3-none-any.whl",
        "cf429aa1d35ee5bacbeb671d6493e95a63c0f38783bd631281e4229a60bb791c"),
    ("quack-kernels", "0.6.5"): (
        "quack_kernels-0.6.5-py3-none-any.whl",
        "df1ddd31366c82eb9692fe087c671209189dcbde53c909c81a865d4ee66b158d"),
    ("tokenspeed-quack", "0.6.4.post20260923"): (
        "tokenspeed_quack-0.6.4.post20260923-py3-none-any.whl",
        "a14851249455c5333051172b0ec5fcbf14e711897e64a0966332bd3bd8f71683"),
    # apache-tvm-ffi's (and flash-attn-4's) one pure-Python requirement, for an install that resolves it offline
    ("typing-extensions", "4.16.0"): (
        "typing_extensions-4.16.0-py3-none-any.whl",
        "481caa481374e813c1b176ada14e97f1f67a4539ce9cfeb3f350d78d6370c2e8"),
}


# FlashInfer's two PyPI distributions out of step (vLLM 0.29 pins flashinfer-python 0.6.18, 0.33 0.7.2.post1;
# PyPI's flashinfer-cubin stops at 0.6.13: 458 MB, 1.9 GB installed), nvidia-cutlass-dsl 4.8.0 (its only file the .pth that makes `cutlass`
# importable), and the CUDA 12 runtime a JIT-cache library links against (tests/test_kernel_packages.py).
KERNEL_WHEELS.update({
    ("flashinfer-python", "0.6.18"): (
        "flashinfer_python-0.6.18-py3-none-any.whl",
        "d5d26edb48f8def0bf28b2c94415aef7f0754e2cd9e3cb3d6e7081262d068aad"),
    ("flashinfer-python", "0.7.2.post1"): (
        "flashinfer_python-0.7.2.post1-py3-none-any.whl",
        "bfdc18b9e1e4d8d0730fe4343dc0e284cd0c160086de80f99888bc4867922d49"),
    ("flashinfer-cubin", "0.6.13"): (
        "flashinfer_cubin-0.6.13-py3-none-any.whl",
        "41e4848c2d09d220e8394489b2fb6cfec6b6ad09f897b5ab8b39fc23055f6c24"),
    ("nvidia-cutlass-dsl", "4.8.0"): (
        "nvidia_cutlass_dsl-4.8.0-py3-none-any.whl",
        "24f996e0e5fa88c8b417f4893e615af135bdfdfdbdbed7e239faf36a88df711b"),
    ("nvidia-cuda-runtime-cu12", "12.8.90"): (
        "nvidia_cuda_runtime_cu12-12.8.90-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
        "adade8dcbd0edf427b7204d480d6066d33902cab2a4707dcfc48a2d0fd44ab90"),
})
# The platform tag pip is asked for, where a wheel has no manylinux_2_28 tag (pip matches --platform exactly).
KERNEL_WHEEL_PLATFORMS = {("nvidia-cuda-runtime-cu12", "12.8.90"): "manylinux2014_x86_64"}


def pypi_wheels_dir() -> Path:
    """Where the real PyPI wheels are cached (a `--find-links` directory for a pasted remediation too)."""
    return cache_dir() / "pypi"


def kernel_wheel(name: str, version: str) -> Path:
    """A real kernel-package wheel from PyPI (KERNEL_WHEELS), downloaded once into the test cache."""
    filename, sha256 = KERNEL_WHEELS[(name, version)]
    dest = pypi_wheels_dir()
    wheel = dest / filename
    with _locked(f"{name}-{version}"):
        if not wheel.exists():
            with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
                _run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                      "--platform", KERNEL_WHEEL_PLATFORMS.get((name, version), "manylinux_2_28_x86_64"),
                      "--python-version", "3.11", "-q", "-d", tmp,
                      f"{name}=={version}"], timeout=1800)
                dest.mkdir(exist_ok=True)
                os.replace(Path(tmp) / filename, wheel)
        digest = hashlib.sha256()
        with open(wheel, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        if digest.hexdigest() != sha256:
            raise RuntimeError(f"{wheel} does not have the sha256 PyPI published ({sha256}); delete it")
        return wheel


def cudart12_library() -> Path:
    """A shared library linked as FlashInfer's JIT links its kernels (`-L$cuda_home/lib64 -lcudart`), against the
    real libcudart.so.12 of the nvidia-cuda-runtime-cu12 12.8.90 wheel: its DT_NEEDED names libcudart.so.12."""
    dest = cache_dir() / "built-cudart12" / "sampling.so"
    with _locked("cudart12-library"):
        if dest.exists():
            return dest
        with tempfile.TemporaryDirectory() as tmp:
            with zipfile.ZipFile(kernel_wheel("nvidia-cuda-runtime-cu12", "12.8.90")) as wheel:
                wheel.extract("nvidia/cuda_runtime/lib/libcudart.so.12", tmp)
            source = Path(tmp) / "sampling.c"
            source.write_text("extern int cudaGetDeviceCount(int *);\n"
                              "int sampling_devices(void) { int n = 0; cudaGetDeviceCount(&n); return n; }\n")
            built = Path(tmp) / "sampling.so"
            _run(["cc", "-shared", "-fPIC", "-o", built, source, "-L", Path(tmp) / "nvidia/cuda_runtime/lib",
                  "-l:libcudart.so.12"])
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(built, dest)
        return dest


def torch_site() -> Path:
    """site-packages of the cached builder venv, which holds torch 2.13.0 (CPU)."""
    python = fa2_builder_python()
    return Path(_run([python, "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())


def fa2_wheel_with_foreign_extension() -> Path:
    """flash-attn 2.8.3 (real files) plus a flash_attn_2_cuda.so linked against a c10 it cannot find."""
    dest = cache_dir() / "built-foreign-ext"
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    wheel = dest / f"flash_attn-2.8.3-{tag}-{tag}-linux_x86_64.whl"
    with _locked("fa2-foreign-ext"):
        if wheel.exists():
            return wheel
        import sysconfig

        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        with tempfile.TemporaryDirectory() as tmp:
            source = Path(tmp) / "ext.c"
            source.write_text(
                f"extern void {UNDEFINED_C10_SYMBOL}(int);\n"
                f"void *PyInit_flash_attn_2_cuda(void) {{ {UNDEFINED_C10_SYMBOL}(0); return 0; }}\n"
            )
            library = Path(tmp) / f"flash_attn_2_cuda{suffix}"
            _run(["cc", "-shared", "-fPIC", "-o", library, source])
            with zipfile.ZipFile(fa2_wheel()) as real:
                files = {n: real.read(n) for n in real.namelist()
                         if not n.endswith("/") and ".dist-info/" not in n}
            files[library.name] = library.read_bytes()
            return build_wheel(dest, "flash_attn", "2.8.3", files, requires=["torch", "einops"],
                               tag=f"{tag}-{tag}-linux_x86_64")


# What `vllm_python` leaves out of vLLM's requirements: none of it is imported to build vLLM's parser and
# its engine config, and most of it is CUDA-only or large.
VLLM_REQUIREMENTS_LEFT_OUT = (
    "torch", "torchaudio", "torchvision",  # torch 2.13.0 (CPU, from this machine's disk) stands in for the
    # pinned CUDA build of 2.11.0 (several GB); vLLM's compiled kernels then fail to load, which vLLM
    # tolerates until a kernel runs, and the config path runs none
    "flashinfer-python", "flashinfer-cubin", "apache-tvm-ffi", "tilelang", "nvidia-cudnn-frontend",
    "nvidia-cutlass-dsl", "quack-kernels", "fastsafetensors", "numba",  # kernels and their compilers
    "outlines_core", "lm-format-enforcer",  # structured-output backends (xgrammar and llguidance stay: the
    # parser of 0.33 and later imports them, vllm/parser/abstract_parser.py)
    "mistral_common", "opencv-python-headless", "mcp", "anthropic", "model-hosting-container-standards",
    "opentelemetry-sdk", "opentelemetry-api", "opentelemetry-exporter-otlp",
    "opentelemetry-semantic-conventions-ai", "depyf", "ninja",
)

# vLLM chooses its platform through the `vllm.platform_plugins` entry points (vllm/platforms/__init__.py,
# resolve_current_platform_cls_qualname: one activated out-of-tree plugin wins). This one picks vLLM's own
# CPU platform, so that a CUDA build of vLLM builds its configs on a machine without a GPU.
CPU_PLATFORM_PLUGIN = "def activate():\n    return 'vllm.platforms.cpu.CpuPlatform'\n"


def vllm_python(version: str) -> Path:
    """A venv where the real vLLM `version` imports and validates its configs on this CPU-only machine.

    vLLM's wheel (--no-deps), its requirements but `VLLM_REQUIREMENTS_LEFT_OUT`, torch 2.13.0 (CPU), and a
    platform plugin that selects vLLM's CPU platform. vLLM's parser and `create_engine_config` then run
    as `vllm serve` runs them, but for what the CPU platform changes: give every limit whose default
    depends on the platform (max_num_seqs, max_num_batched_tokens) explicitly when comparing verdicts.
    """
    from packaging.requirements import Requirement

    key = f"vllm-python-{version}-py{sys.version_info[0]}{sys.version_info[1]}-torch2.13.0"
    root = cache_dir() / "builders" / key
    python = root / "bin" / "python"
    marker = root / ".realenv-complete"
    vllm_site(version)  # downloads the wheel once
    (wheel,) = sorted((cache_dir() / "wheels").glob(f"vllm-{version}-*.whl"))[:1]
    with _locked(key):
        if marker.exists() and python.exists():
            return python
        shutil.rmtree(root, ignore_errors=True)
        with zipfile.ZipFile(wheel) as zf:
            (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
            metadata = zf.read(name).decode()
        requirements = []
        for line in metadata.splitlines():
            if not line.startswith("Requires-Dist: "):
                continue
            requirement = Requirement(line.removeprefix("Requires-Dist: "))
            if requirement.marker is not None and "extra" in str(requirement.marker):
                continue
            if requirement.name not in VLLM_REQUIREMENTS_LEFT_OUT:
                requirements.append(str(requirement))
        plugin_dir = Path(tempfile.mkdtemp(prefix="vllm-cpu-platform-"))
        plugin = build_wheel(plugin_dir, "vllm-cpu-platform-for-tests", "1.0",
                             {"vllm_cpu_platform_for_tests.py": CPU_PLATFORM_PLUGIN},
                             entry_points={"vllm.platform_plugins": {"cpu": "vllm_cpu_platform_for_tests:activate"}})
        _run([sys.executable, "-m", "venv", "--without-pip", root])
        pip = [sys.executable, "-m", "pip", "--python", python, "install", "-q"]
        _run([*pip, "torch==2.13.0", *requirements], timeout=1800)
        _run([*pip, "--no-deps", wheel, plugin], timeout=1800)
        marker.write_text("\n".join(requirements) + "\n")
        shutil.rmtree(plugin_dir, ignore_errors=True)
        return python


# vLLM learns a model class's interface in an interpreter of its own (registry._run_in_subprocess) unless
# its cache under VLLM_CACHE_ROOT holds it; the doctor reads that cache and never writes it. As on a machine
# where vLLM has run before, a test module's runs share a cache that vLLM itself filled, once, with its own
# create_engine_config on its CPU platform (0.33 and later then stop for want of triton-cpu, after the cache is
# written: the caller checks what was cached).
WARM_UP = """
import sys
from vllm.engine.arg_utils import EngineArgs
target, drafter = sys.argv[1:3]
EngineArgs(model=target, max_model_len=32768, max_num_batched_tokens=32768, max_num_seqs=256,
           speculative_config={"method": "dflash", "model": drafter, "num_speculative_tokens": 15},
           ).create_engine_config()
"""


def warm_model_info_cache(version: str, target: Path, drafter: Path, root: Path) -> int:
    """vLLM `version` (vllm_python) fills the model-info cache under `root` for the toy target and drafter; its
    exit code. What it wrote is kept in the test cache, by release and by the toys' configs (vLLM keys each entry
    by its model class's module, not by the model's path), and copied to `root` by later runs: vLLM fills it once
    per cache, not once per test module and run (a minute of CPU for the three releases)."""
    configs = b"".join((model / "config.json").read_bytes() for model in (target, drafter))
    key = hashlib.sha256(configs + WARM_UP.encode()).hexdigest()[:16]
    kept = cache_dir() / "vllm-modelinfo" / f"{version}-{key}"
    with _locked(f"vllm-modelinfo-{version}-{key}"):
        if not (kept / "exit-code").is_file():
            scratch = Path(tempfile.mkdtemp(prefix="vllm-modelinfo-", dir=cache_dir()))
            env = {**os.environ, "VLLM_CACHE_ROOT": str(scratch / "root"), "HF_HUB_OFFLINE": "1",
                   "VLLM_NO_USAGE_STATS": "1"}
            code = subprocess.run([str(vllm_python(version)), "-c", WARM_UP, str(target), str(drafter)], env=env,
                                  check=False, capture_output=True, timeout=600).returncode
            if not any((scratch / "root" / "modelinfos").glob("*")):  # cached nothing: not kept, asked again next time
                shutil.rmtree(scratch, ignore_errors=True)
                return code
            (scratch / "exit-code").write_text(f"{code}\n")
            kept.parent.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(kept, ignore_errors=True)
            scratch.rename(kept)
    shutil.copytree(kept / "root", root, dirs_exist_ok=True)
    return int((kept / "exit-code").read_text())
