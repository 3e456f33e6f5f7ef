"""What the compiled-arch coverage layer judges by, beyond the CUDA rules in `knowledge.cuda`: which of the
stack's libraries are loaded only on some GPUs, how flash-attn v2 chooses its architectures, which driver
can JIT which PTX, and what the runtime-library trap of flash-attn's release wheels is.
"""

from __future__ import annotations

from dflash_doctor.knowledge import Fact
from dflash_doctor.shape import frozen_dataclass

__all__ = [
    "ARCH_GATED_LIBRARIES",
    "FA2_ARCHS_ENV",
    "FA2_ARCHS_ENV_FIRST_RELEASE",
    "FA2_ARCH_VALUES",
    "FA2_MIN_COMPUTE_CAPABILITY",
    "FA2_UBUNTU_2204_WHEELS_FROM",
    "PTX_ISA_MIN_CUDA",
    "SASS_MIN_TOOLKIT",
    "TORCH_CU128_FIRST_RELEASE",
    "VLLM_RELEASE_ARCH_LIST",
    "LibraryGate",
]

_FA_TAGS = "flash-attention tags v2.7.0..v2.8.3.post1 (v2.8.3 = 060c9188) and HEAD 0251105a"
_VLLM = "vllm 0.20.1 and 0.24.0 (PyPI sdists and wheels)"


# ---------------------------------------------------------------------------------------------------------
# Libraries the stack loads only on some GPUs
# ---------------------------------------------------------------------------------------------------------


@frozen_dataclass(frozen=True)
class LibraryGate:
    """A library its owner uses only on some compute capabilities: no code for another GPU is by design."""

    distribution: str
    """Canonical distribution name."""
    path: str
    """fnmatch pattern of the file, relative to the distribution's location."""
    role: str
    """What it is, for a report: "vLLM's FlashAttention 3"."""
    used_on: str
    """Where its owner uses it, in words."""
    majors: tuple[int, ...] = ()
    """Used only on these major versions (empty: any)."""
    min_cc: tuple[int, int] = (0, 0)
    other_choice_on: tuple[int, ...] = ()
    """Majors where the owner picks another library by default (this one only as a fallback)."""
    optional: bool = False
    """Used only by some models or quantization methods: missing code is a warning, not a failure."""

    def used_on_cc(self, cc: tuple[int, int]) -> bool:
        if self.majors and cc[0] not in self.majors:
            return False
        if cc < self.min_cc:
            return False
        return cc[0] not in self.other_choice_on


ARCH_GATED_LIBRARIES: Fact[tuple[LibraryGate, ...]] = Fact(
    value=(
        LibraryGate(
            "vllm", "vllm/vllm_flash_attn/_vllm_fa3_C*.so", "vLLM's FlashAttention 3",
            "compute capability 9.x only", majors=(9,),
        ),
        LibraryGate(
            "vllm", "vllm/vllm_flash_attn/_vllm_fa2_C*.so", "vLLM's FlashAttention 2",
            "compute capability 8.0 and newer, by default everywhere but 9.x (FA3 there)",
            min_cc=(8, 0), other_choice_on=(9,),
        ),
        LibraryGate(
            "vllm", "vllm/_flashmla_C*.so", "vLLM's FlashMLA (MLA models only)",
            "compute capability 9.x (dense and sparse) and 10.x (sparse)", majors=(9, 10), optional=True,
        ),
        LibraryGate(
            "vllm", "vllm/_flashmla_extension_C*.so", "vLLM's FlashMLA extension (MLA models only)",
            "compute capability 9.x and 10.x", majors=(9, 10), optional=True,
        ),
        LibraryGate(
            "vllm", "vllm/_qutlass_C*.so", "vLLM's QuTLASS FP4 kernels (fp_quant / NVFP4 transforms only)",
            "compute capability 10.0 and newer", min_cc=(10, 0), optional=True,
        ),
    ),
    source="vllm/vllm_flash_attn/flash_attn_interface.py: _is_fa3_supported 'FA3 is only supported on devices "
    "with compute capability 9.x' (is_device_capability_family(90)), _is_fa2_supported 'FA2 is only supported "
    "on devices with compute capability >= 8'; vllm/v1/attention/backends/fa_utils.py get_flash_attn_version: "
    "'if device_capability.major == 9 and is_fa_version_supported(3): # Hopper (SM90): prefer FA3 ... else: "
    "# Fallback to FA2'; vllm/v1/attention/ops/flashmla.py: is_flashmla_dense_supported 'FlashMLA Dense is "
    "only supported on Hopper devices', is_flashmla_sparse_supported (families 90 and 100); "
    "vllm/model_executor/layers/quantization/fp_quant.py get_min_capability() -> 100 and "
    "cmake/external_projects/qutlass.cmake (built for 10.0f / 12.0f only).",
    read_from=_VLLM,
    note="Built with only sm_90a / sm_100f code (the real 0.20.1 and 0.24.0 wheels: _vllm_fa3_C sm_90a; "
    "_flashmla_C sm_90a+sm_100f; _qutlass_C sm_100f; _vllm_fa2_C sm_80 + compute_80 PTX). Every other library "
    "of the stack is judged strictly: code for each GPU or a failure. On 9.x FA2 runs only for ALiBi models "
    "or an explicit flash_attn_version=2, so its PTX-only coverage there is not a start-up cost. The 0.24.0 "
    "wheel builds QuTLASS for 10.0f only (qutlass.cmake picks SM100 when both are asked for), so fp_quant "
    "models cannot run on 12.x with it: an optional library, judged as a warning.",
)


# ---------------------------------------------------------------------------------------------------------
# flash-attn v2's build
# ---------------------------------------------------------------------------------------------------------

FA2_ARCHS_ENV: Fact[str] = Fact(
    value="FLASH_ATTN_CUDA_ARCHS",
    source="setup.py: `def cuda_archs(): return os.getenv(\"FLASH_ATTN_CUDA_ARCHS\", "
    "\"80;90;100;120\").split(\";\")`, then `if \"80\" in cuda_archs(): -gencode arch=compute_80,code=sm_80`, "
    "`\"90\"` -> sm_90 (nvcc >= 11.8), `\"100\"` -> sm_100 and `\"120\"` -> sm_120 (nvcc >= 12.8). SASS only, "
    "no PTX. Any other value (e.g. \"86\") matches nothing and adds no -gencode at all.",
    read_from=_FA_TAGS,
    note="The release wheels on GitHub are built with the default, so they carry sm_80, sm_90, sm_100 and "
    "sm_120 SASS. HEAD adds \"110\" (Thor), family targets (compute_100f) and PTX of the newest arch; no "
    "release has that yet. FLASH_ATTENTION_FORCE_BUILD=TRUE makes setup.py build instead of downloading a "
    "release wheel.",
)

FA2_ARCHS_ENV_FIRST_RELEASE: Fact[str] = Fact(
    value="2.7.3",
    source="setup.py of v2.7.0-v2.7.2 hard-codes `arch=compute_80,code=sm_80` and (nvcc >= 11.8) "
    "`arch=compute_90,code=sm_90`; v2.7.3 (89c5a7dd, 2025-01-10) introduces cuda_archs() and "
    "FLASH_ATTN_CUDA_ARCHS.",
    read_from=_FA_TAGS,
)

FA2_ARCH_VALUES: Fact[dict[int, str]] = Fact(
    value={8: "80", 9: "90", 10: "100", 12: "120"},
    source="setup.py (v2.7.3..v2.8.3.post1) accepts exactly '80', '90', '100', '120' in FLASH_ATTN_CUDA_ARCHS, "
    "each building plain sm_X0 SASS, which runs on every X.Y of that major (knowledge.cuda SASS_WITHIN_MAJOR).",
    read_from=_FA_TAGS,
    note="Compute capability 8.6 or 8.9 is served by \"80\"; there is no value for 11.x in a release.",
)

FA2_MIN_COMPUTE_CAPABILITY: Fact[tuple[int, int]] = Fact(
    value=(8, 0),
    source="README 'Requirements': 'Ampere, Ada, or Hopper GPUs (e.g., A100, RTX 3090, RTX 4090, H100). Support "
    "for Turing GPUs (T4, RTX 2080) is coming soon, please use FlashAttention 1.x for Turing GPUs for now.'",
    read_from="flash-attention v2.8.3 (060c9188) README.md",
)

FA2_UBUNTU_2204_WHEELS_FROM: Fact[str] = Fact(
    value="2.8.0.post1",
    source=".github/workflows/publish.yml `os: [ubuntu-20.04]` up to v2.8.0 ('Using ubuntu-20.04 instead of "
    "22.04 for more compatibility (glibc)'), `os: [ubuntu-22.04]` from v2.8.0.post1 on. Wheels built on Ubuntu "
    "22.04 need GLIBC_2.32: flash-attn#1708 ('version `GLIBC_2.32' not found' with v2.8.0.post2), #1762, #2225 "
    "(2.8.2+cu128torch2.8 on Ubuntu 20.04).",
    read_from=f"{_FA_TAGS}; Dao-AILab/flash-attention issues #1708, #1762, #2225",
    note="Value: the first release whose wheels are built on Ubuntu 22.04. Earlier wheels were built on Ubuntu "
    "20.04 (GLIBC 2.31); #1708 and its downstream reports name 2.7.4.post1 as the one that works there. "
    "Building from source on the host avoids the question.",
)


# ---------------------------------------------------------------------------------------------------------
# Toolkits, drivers and torch builds
# ---------------------------------------------------------------------------------------------------------

PTX_ISA_MIN_CUDA: Fact[dict[str, str]] = Fact(
    value={
        "7.0": "11.0", "7.1": "11.1", "7.2": "11.2", "7.3": "11.3", "7.4": "11.4", "7.5": "11.5",
        "7.6": "11.6", "7.7": "11.7", "7.8": "11.8", "8.0": "12.0", "8.1": "12.1", "8.2": "12.2",
        "8.3": "12.3", "8.4": "12.4", "8.5": "12.5", "8.6": "12.7", "8.7": "12.8", "8.8": "12.9",
        "9.0": "13.0", "9.1": "13.1",
    },
    source="PTX ISA, 'Release Notes' > PTX release history (PTX ISA version per CUDA release); NVIDIA "
    "cuda-python cuda/bindings/utils/_ptx_utils.py `_ptx_to_cuda` ('Mapping based on the official PTX ISA <-> "
    "CUDA Release table'), get_minimal_required_cuda_ver_from_ptx_ver: 'the minimal CUDA driver ... version "
    "that is needed to load a PTX of the given ISA version'.",
    read_from="cuda-python 13.x _ptx_utils.py; nvcc 13.0.88 writes PTX ISA 9.0 (tests/test_elf.py)",
    note="A driver older than that CUDA version fails the JIT with CUDA_ERROR_UNSUPPORTED_PTX_VERSION; the "
    "GPU facts give the driver's CUDA version (nvmlSystemGetCudaDriverVersion).",
)

SASS_MIN_TOOLKIT: Fact[dict[int, str]] = Fact(
    value={9: "11.8", 10: "12.8", 12: "12.8"},
    source="flash-attention setup.py gates its -gencode flags on the nvcc version: 'Hopper 9.0 needs >= 11.8', "
    "'Blackwell 10.x requires >= 12.8', 'sm_120 is supported in CUDA 12.8/12.9+ toolkits' (HEAD "
    "add_cuda_gencodes; v2.8.3 the same numbers).",
    read_from=_FA_TAGS,
    note="Key: compute capability major. A library built with an older toolkit cannot carry SASS for it.",
)

TORCH_CU128_FIRST_RELEASE: Fact[str] = Fact(
    value="2.7.0",
    source="PyTorch 2.7 release blog: 'Support for NVIDIA Blackwell GPU architecture and pre-built wheels for "
    "CUDA 12.8 across Linux x86 and arm64 architectures.' Index: https://download.pytorch.org/whl/cu128",
    read_from="pytorch.org/blog/pytorch-2-7 (April 2025)",
    note="torch 2.8.0+cu128's libtorch_cuda.so carries sm_70..sm_120 (read with the fatbin reader); "
    "`torch.cuda.get_arch_list()` returns [] without a usable GPU in older torch (`if not is_available(): "
    "return []`; torch 2.13.0 checks only `_is_compiled()`), `torch._C._cuda_getArchFlags()` answers on any "
    "CUDA build.",
)

VLLM_RELEASE_ARCH_LIST: Fact[str] = Fact(
    value="7.5 8.0 8.6 8.9 9.0 10.0 11.0 12.0+PTX",
    source="docker/Dockerfile: `ARG torch_cuda_arch_list='7.5 8.0 8.6 8.9 9.0 10.0 11.0 12.0+PTX'` / `ENV "
    "TORCH_CUDA_ARCH_LIST=${torch_cuda_arch_list}` ('From versions.json: .torch.cuda_arch_list'); "
    "docs/getting_started/installation/gpu.cuda.inc.md builds images for other GPUs with `--build-arg "
    "torch_cuda_arch_list=...`. CMakeLists.txt intersects torch's CUDA_ARCH_FLAGS (from TORCH_CUDA_ARCH_LIST) "
    "with CUDA_SUPPORTED_ARCHS ('7.5;8.0;8.6;8.7;8.9;9.0;10.0;11.0;12.0' on CUDA 13).",
    read_from="vllm 0.20.1 sdist",
    note="Kernels with arch-specific code (FA3, FlashMLA, CUTLASS sm90a/sm100a GEMMs) take their own subsets.",
)
