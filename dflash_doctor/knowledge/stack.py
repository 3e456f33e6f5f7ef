"""Which distributions make up the serving stack, and which import names the flash-attention family
installs (derived from the flash-attention facts, so each fact is stated once)."""

from __future__ import annotations

from dflash_doctor.knowledge import Fact
from dflash_doctor.knowledge import flash_attn as fa

STACK_DISTRIBUTIONS: Fact[tuple[str, ...]] = Fact(
    value=(
        "torch",
        "triton",
        "vllm",
        *fa.DISTRIBUTIONS.value,
        "flashinfer-python",
        "transformers",
        "nvidia-ml-py",
    ),
    source="The packages `vllm serve` with DFlash loads on CUDA: vllm's wheel METADATA Requires-Dist "
    "(torch, triton via torch, flashinfer-python, transformers, nvidia-ml-py) plus the flash-attention "
    "family that vLLM imports optionally (vllm/model_executor/layers/rotary_embedding/common.py).",
    read_from="vllm 0.20.1 and 0.24.0 wheels",
)

FLASH_ATTN_FAMILY: Fact[tuple[str, ...]] = Fact(
    value=tuple(fa.DISTRIBUTIONS.value),
    source=fa.DISTRIBUTIONS.source,
    read_from=fa.DISTRIBUTIONS.read_from,
)

WATCHED_TOP_LEVELS: Fact[tuple[str, ...]] = Fact(
    value=tuple(dict.fromkeys([
        *fa.FA2_TOP_LEVELS.value,
        *(name for names in fa.FA3_TOP_LEVELS.value.values() for name in names),
        *fa.FLASH_ATTN_CUTE_TOP_LEVELS.value,
    ])),
    source=f"{fa.FA2_TOP_LEVELS.source} | {fa.FA3_TOP_LEVELS.source} | {fa.FLASH_ATTN_CUTE_TOP_LEVELS.source}",
    read_from=f"{fa.FA2_TOP_LEVELS.read_from}; {fa.FA3_TOP_LEVELS.read_from}",
)

STACK_EXTENSION_MODULES: Fact[dict[str, str]] = Fact(
    value={
        **{name: "flash-attn" for name in fa.FA2_TOP_LEVELS.value if name.endswith("_cuda")},
        "flash_attn_3._C": "flash-attn-3",
        "vllm._C": "vllm",
        "vllm._C_stable_libtorch": "vllm",
        "vllm._moe_C": "vllm",
        "vllm._moe_C_stable_libtorch": "vllm",
        "vllm.cumem_allocator": "vllm",
        "vllm._flashmla_C": "vllm",
        "vllm._flashmla_extension_C": "vllm",
        "vllm._qutlass_C": "vllm",
        "vllm.vllm_flash_attn._vllm_fa2_C": "vllm",
        "vllm.vllm_flash_attn._vllm_fa3_C": "vllm",
    },
    source="Compiled extension module -> the distribution that builds it. flash_attn_2_cuda: "
    "flash-attn setup.py CUDAExtension(name='flash_attn_2_cuda'); "
    "flash_attn_3._C: hopper/setup.py CUDAExtension(name=f'{PACKAGE_NAME}._C'); vLLM: setup.py "
    "ext_modules.append(CMakeExtension(name='vllm._C' / 'vllm._moe_C' / 'vllm.cumem_allocator' / "
    "'vllm.vllm_flash_attn._vllm_fa2_C' / '..._vllm_fa3_C')), and the .abi3.so files of the 0.24.0 wheel "
    "(vllm/_C_stable_libtorch, _moe_C_stable_libtorch, cumem_allocator, _flashmla_C, _flashmla_extension_C, "
    "_qutlass_C, vllm_flash_attn/_vllm_fa2_C and _vllm_fa3_C)",
    read_from="flash-attn 2.8.3 sdist; flash-attention v2.8.3 hopper/setup.py; vllm 0.24.0 wheel "
    "(vllm-0.24.0-cp38-abi3-manylinux_2_28_x86_64.whl) and vLLM setup.py of the 0.1x releases (vllm._C, _moe_C)",
    note="The names the doctor asks the import system for without importing: a source build, `pip install -e`, "
    "`setup.py develop` or a copied build puts these where no RECORD lists them. The extension modules the "
    "installed RECORDs list are asked for too, so a release that renames one is still covered.",
)


TORCH_USERS: Fact[tuple[str, ...]] = Fact(
    value=tuple(dict.fromkeys([
        "vllm",
        "flashinfer",
        *WATCHED_TOP_LEVELS.value,
        *(module.split(".", 1)[0] for module in STACK_EXTENSION_MODULES.value),
    ])),
    source="Import names of the stack whose import loads torch first: vllm/__init__ and flashinfer/__init__ "
    "import torch; flash_attn/__init__ (v2) imports flash_attn_interface, which imports torch and "
    "flash_attn_2_cuda; flash_attn.cute (v4) imports torch; every compiled extension of the stack is a "
    "torch.utils.cpp_extension build that needs libtorch loaded. "
    f"Extension modules: {STACK_EXTENSION_MODULES.source}",
    read_from="vllm 0.20.1 and 0.24.0 wheels; flash-attn 2.8.3 sdist; flash-attn-4 4.0.0b36 wheel",
    note="The Python layers' probes (the rotary import, vLLM's import surface, the stack's extensions) import "
    "torch once, in the run's shared target process, only when one of these is installed: with none of them "
    "the imports they test cannot reach torch, and a cold `import torch` costs seconds.",
)


OPTIONAL_AT_SERVE: Fact[dict[str, tuple[str, str]]] = Fact(
    value={
        "flashinfer-python": ("flashinfer", ("the FlashInfer attention backends (--attention-backend FLASHINFER), "
                                             "the FlashInfer sampler and FlashInfer's fused kernels")),
    },
    source="vllm/utils/flashinfer.py has_flashinfer(): importlib.util.find_spec(\"flashinfer\") before any import "
    "(\"Return True if flashinfer-python package is available\"); vllm/v1/attention/backends/flashinfer.py imports "
    "it at module level, and is imported only when that backend is chosen. The engine run of "
    "fixtures/engine/01-healthy.json: vLLM 0.20.1 served a Qwen3 target with a DFlash drafter on an H200 with "
    "flashinfer-python not installed. nvidia-ml-py is not optional: vllm/platforms/__init__.py calls "
    "import_pynvml() at import",
    read_from="vllm 0.20.1 and 0.34.0 sdists; fixtures/engine/01-healthy.json",
    note="Used only to judge a report saved without the scan of what `vllm serve` imports (the vllm_serve_imports "
    "section, facts.python.vllm_serve_path): the engine recordings of fixtures/engine/. Where the scan is there it "
    "decides, for every requirement of vLLM; its verdict on the real vLLM 0.20.1 wheel agrees with this entry "
    "(tests/test_serve_imports.py).",
)


TORCH_LIBRARIES: Fact[tuple[str, ...]] = Fact(
    # Name prefixes: libtorch covers libtorch.so, libtorch_cpu.so, libtorch_cuda.so, libtorch_python.so.
    value=("libtorch", "libc10", "libshm.so", "libcaffe2_nvrtc.so"),
    source="The shared libraries torch's wheels install in torch/lib/: libc10.so, libtorch.so, libtorch_cpu.so, "
    "libtorch_python.so, libtorch_global_deps.so, libshm.so (every build); libc10_cuda.so, libtorch_cuda.so, "
    "libcaffe2_nvrtc.so (CUDA builds). Extensions built with torch.utils.cpp_extension link them by name "
    "(vLLM 0.20.1's vllm/_C.abi3.so: DT_NEEDED libtorch.so, libtorch_cpu.so, libtorch_cuda.so, libc10_cuda.so, "
    "libc10.so) and find them because `import torch` loaded them first.",
    read_from="torch 2.13.0 (CPU) torch/lib; vllm 0.20.1 wheel (readelf -d vllm/_C.abi3.so)",
)


def is_torch_library(name: str) -> bool:
    """Whether a library name (`libc10.so`, a path to one) is one that torch's wheel installs."""
    base = name.rsplit("/", 1)[-1]
    return any(base.startswith(prefix) for prefix in TORCH_LIBRARIES.value)


TORCH_CUDA_WHEELS: Fact[tuple[str, ...]] = Fact(
    # Name prefixes of canonical distribution names: nvidia-cublas covers nvidia-cublas-cu12 and nvidia-cublas.
    value=("nvidia-cublas", "nvidia-cudnn-cu", "nvidia-cuda-runtime", "nvidia-nccl", "nvidia-cufft",
           "nvidia-cusolver", "nvidia-cusparse"),
    source="pip's dry runs of `pip install 'torch==2.11.0'` and `pip install torch` against PyPI on Linux x86_64 "
    "(tests/fixtures/dry_runs/seed-pip.json): torch's wheel brings the CUDA libraries as wheels of their own, "
    "nvidia-cublas, nvidia-cudnn-cu13, nvidia-cuda-runtime, nvidia-nccl-cu13, nvidia-cufft, nvidia-cusolver, "
    "nvidia-cusparse (torch's METADATA: `Requires-Dist: nvidia-... ; platform_system == \"Linux\"`). PyTorch's "
    "CPU-only build is the `+cpu` wheel of https://download.pytorch.org/whl/cpu, which needs none of them.",
    read_from="torch 2.11.0 and 2.14.1 as PyPI resolved them for pip 23.2.1 on this project's CI machine "
    "(2026-12-03); torch 2.13.0+cpu from the CPU index",
    note="A resolution that installs one of these is a CUDA build of torch: several GB, useful only where a GPU "
    "will run the environment.",
)

TORCH_PYPI_IS_CUDA_ON: Fact[tuple[tuple[str, str], ...]] = Fact(
    value=(("Linux", "x86_64"),),
    source="The same dry runs: on Linux x86_64 torch from PyPI (no --index-url) resolves with the CUDA wheels of "
    "TORCH_CUDA_WHEELS; its METADATA gates them on platform_system == \"Linux\" only where a CUDA wheel exists",
    read_from="torch 2.11.0 and 2.14.1 from PyPI, pip 23.2.1, 2026-12-03",
    note="(platform_system, platform_machine) pairs of the target's marker environment where an install of torch "
    "from the default index is a CUDA build, when the installer's own answer is not there to say it.",
)
