"""FlashInfer's three distributions (flashinfer-python, flashinfer-cubin, flashinfer-jit-cache) and its JIT cache:
how `flashinfer/jit/env.py` compares their versions at import, where the kernel wheels come from, and where the JIT
writes the libraries it builds.

Every fact was read from the flashinfer-python wheels on PyPI (`pip download --no-deps`, 2026-12-04), from the
flashinfer-cubin 0.6.13 wheel, and from vLLM's own source (the sdists of the test cache).
"""

from __future__ import annotations

from dflash_doctor.knowledge import Fact
from dflash_doctor.shape import frozen_dataclass

__all__ = ["FLASHINFER_JIT_CACHE", "FLASHINFER_KERNEL_WHEELS", "FLASHINFER_VERSION_CHECK", "FlashinferJitCache",
           "FlashinferKernelWheels", "FlashinferVersionCheck"]


@frozen_dataclass(frozen=True)
class FlashinferVersionCheck:
    """What `import flashinfer` does when flashinfer-cubin or flashinfer-jit-cache is at another version."""

    cubin: str
    """The distribution whose version must equal flashinfer-python's, string for string."""
    jit_cache: str
    """The distribution whose version must start with flashinfer-python's (it carries a `+cuXYZ` local label)."""
    raises_through: str
    """The last flashinfer-python read that raises RuntimeError at import on a mismatch."""
    ignores_from: str
    """The first flashinfer-python read that logs 'Ignoring incompatible ...' and runs without the package."""
    jit_prefix_plus_from: str
    """From here the jit-cache version must be flashinfer's exactly or start with flashinfer's + '+'; before it,
    any string starting with flashinfer's version passes (0.6.18.post1+cu129 passes for 0.6.18)."""
    cubin_dir_first_from: str
    """From here FLASHINFER_CUBIN_DIR, when set, is used instead of the flashinfer-cubin package (no check)."""
    bypass: str
    """The variable that skips both checks when set to any non-empty value (`os.getenv(...)` is truthy: "0" too)."""
    cubin_dir: str
    unknown_version: str
    """flashinfer's version where its _build_meta.py is absent (editable/source installs): no check then."""
    symptoms: tuple[str, ...]
    """How the stale kernels fail once the bypass lets them load."""


@frozen_dataclass(frozen=True)
class FlashinferKernelWheels:
    """Where the kernel wheels that match a flashinfer-python come from."""

    index: str
    """FlashInfer's release index for flashinfer-cubin (its CLI: `pip install --upgrade --no-deps --index-url`)."""
    jit_cache_index: str
    """flashinfer-jit-cache's index, `{label}` the CUDA label (cu129, cu130)."""
    jit_cache_cuda: tuple[str, ...]
    """The CUDA versions FlashInfer publishes flashinfer-jit-cache for."""
    pypi_cubin_last: str
    """The newest flashinfer-cubin on PyPI: anything newer is on FlashInfer's index only."""
    download_kernels_from: str
    """The first vLLM release read whose CLI has `vllm download-kernels`."""
    download_kernels_absent_in: str


@frozen_dataclass(frozen=True)
class FlashinferJitCache:
    """Where FlashInfer's JIT builds and reads its libraries, and what a library built by another CUDA does."""

    base_variable: str
    """The variable that replaces the home directory as the cache's base."""
    relative: tuple[str, ...]
    """Under the base: the cache directory."""
    library_glob: str
    """Under `<cache>/<flashinfer version>/`: the libraries the JIT loads (`<archs>/cached_ops/<name>/<name>.so`)."""
    runtime_prefix: str
    """The DT_NEEDED of the CUDA runtime the JIT links (`-lcudart`): libcudart.so.<major>."""
    symptom: str


FLASHINFER_VERSION_CHECK: Fact[FlashinferVersionCheck] = Fact(
    value=FlashinferVersionCheck(
        cubin="flashinfer-cubin",
        jit_cache="flashinfer-jit-cache",
        raises_through="0.7.1",
        ignores_from="0.7.2",
        jit_prefix_plus_from="0.7.0",
        cubin_dir_first_from="0.6.18",
        bypass="FLASHINFER_DISABLE_VERSION_CHECK",
        cubin_dir="FLASHINFER_CUBIN_DIR",
        unknown_version="0.0.0+unknown",
        symptoms=("illegal memory access", "`init(): Expected 8 but got 9 arguments` (lightseekorg/tokenspeed #284)"),
    ),
    source="flashinfer/jit/env.py of the flashinfer-python wheels: 0.5.0 `_get_cubin_dir` raises RuntimeError "
    "'flashinfer-cubin version (...) does not match flashinfer version (...) ... Set FLASHINFER_DISABLE_VERSION_CHECK=1 "
    "to bypass this check.' when `not os.getenv('FLASHINFER_DISABLE_VERSION_CHECK') and flashinfer_version != "
    "flashinfer_cubin_version`, the package before FLASHINFER_CUBIN_DIR; `_get_aot_dir` raises the same for "
    "flashinfer-jit-cache when `not flashinfer_jit_cache_version.startswith(flashinfer_version)` ('the version of "
    "flashinfer-jit-cache contains the CUDA version suffix: e.g. 0.3.1+cu129'). 0.6.18 and 0.6.18.post1: the same, "
    "FLASHINFER_CUBIN_DIR read first, and no check where flashinfer_version is '0.0.0+unknown' (no _build_meta.py). "
    "0.7.0 and 0.7.1: `_check_jit_cache_version` wants `package_version == flashinfer_version or "
    "package_version.startswith(f'{flashinfer_version}+')`, still raising. 0.7.2, 0.7.2.post1 and 0.7.4: "
    "`_check_cubin_version` and `_check_jit_cache_version` are caught: 'Ignoring incompatible flashinfer-cubin package "
    "(cubins will be downloaded on demand to ...)', 'Ignoring incompatible flashinfer-jit-cache package (kernels will "
    "be JIT-compiled instead)'. Versions are flashinfer/_build_meta.py's __version__ (0.6.18, 0.7.2.post1) and "
    "flashinfer_cubin/_build_meta.py's (0.6.13), each equal to its wheel's METADATA Version. Symptoms with the "
    "bypass: lightseekorg/tokenspeed #284, vllm #49804, NVIDIA-NeMo/Export-Deploy #679 (research notes "
    "field-2026-12-c section 3)",
    read_from="flashinfer-python 0.5.0, 0.6.18, 0.6.18.post1, 0.7.0, 0.7.1, 0.7.2, 0.7.2.post1, 0.7.4 wheels; "
    "flashinfer-cubin 0.6.13 wheel (2026-12-04)",
    note="Between 0.5.0 and 0.6.18 the releases were not read: before 0.6.18 FLASHINFER_CUBIN_DIR is taken as not "
    "skipping the check (as in 0.5.0).",
)


FLASHINFER_KERNEL_WHEELS: Fact[FlashinferKernelWheels] = Fact(
    value=FlashinferKernelWheels(
        index="https://flashinfer.ai/whl",
        jit_cache_index="https://flashinfer.ai/whl/{label}",
        jit_cache_cuda=("12.9", "13.0", "13.4"),
        pypi_cubin_last="0.6.13",
        download_kernels_from="0.33.0",
        download_kernels_absent_in="0.30.0",
    ),
    source="flashinfer/__main__.py of flashinfer-python 0.6.18: `_build_cubin_index_url` 'https://flashinfer.ai/whl', "
    "`_build_jit_cache_index_url` f'{base_url}/{cuda_index_label}' (cu129), `_build_jit_cache_requirement` "
    "f'flashinfer-jit-cache=={public_version}+{cuda_index_label}', `_build_pip_install_cmd` 'pip install --upgrade "
    "--no-deps --index-url'; _SUPPORTED_JIT_CACHE_CUDA_VERSIONS 12.9, 13.0, 13.4 (0.6.18 and 0.7.4). `pip index "
    "versions flashinfer-cubin` on PyPI: 0.6.13 the newest; flashinfer-jit-cache: no matching distribution. vLLM's "
    "requirements/cuda.txt 0.26.0-0.30.0: '# flashinfer-cubin is not on PyPI since 0.6.14; setup.py excludes it from "
    "install_requires', `--extra-index-url https://flashinfer.ai/whl/`, flashinfer-cubin pinned beside "
    "flashinfer-python (0.29.0: both ==0.6.18); 0.24.0 and 0.25.1 pin both (0.6.12, 0.6.13); 0.33.0 and 0.34.0 pin "
    "flashinfer-python only. vllm/entrypoints/cli/download_kernels.py (0.33.0, 0.34.0) runs `python -m flashinfer "
    "download-kernels` (or `install-cubin-wheel` below CUDA 12.9) with FLASHINFER_DISABLE_VERSION_CHECK=1; 0.30.0 "
    "has no such command",
    read_from="flashinfer-python 0.6.18 and 0.7.4 wheels; PyPI (2026-12-04); vLLM 0.24.0-0.34.0 sdists",
)


FLASHINFER_JIT_CACHE: Fact[FlashinferJitCache] = Fact(
    value=FlashinferJitCache(
        base_variable="FLASHINFER_WORKSPACE_BASE",
        relative=(".cache", "flashinfer"),
        library_glob="*/cached_ops/*/*.so",
        runtime_prefix="libcudart.so.",
        symptom="cudaErrorInsufficientDriver (35) in the sampler (flashinfer #5145, #3229)",
    ),
    source="flashinfer/jit/env.py (0.5.0-0.7.4): FLASHINFER_BASE_DIR = os.getenv('FLASHINFER_WORKSPACE_BASE', "
    "pathlib.Path.home()), FLASHINFER_CACHE_DIR = base / '.cache' / 'flashinfer', FLASHINFER_WORKSPACE_DIR = "
    "FLASHINFER_CACHE_DIR / flashinfer_version / '<archs>', FLASHINFER_JIT_DIR = workspace / 'cached_ops'; "
    "flashinfer/jit/core.py (0.6.18) jit_library_path = FLASHINFER_JIT_DIR / name / f'{name}.so'; "
    "flashinfer/jit/cpp_ext.py (0.6.18) links every JIT library with '-L$cuda_home/lib64', '-lcudart', '-lcuda' "
    "(the toolkit nvcc comes from); the symptom from flashinfer #5145 and #3229 (research notes field-2026-12-c)",
    read_from="flashinfer-python 0.5.0, 0.6.18, 0.7.2, 0.7.4 wheels (2026-12-04)",
)
