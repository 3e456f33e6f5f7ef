"""GPU facts the doctor cannot read from the machine: how CUDA reads CUDA_VISIBLE_DEVICES, how MIG is
enumerated, what NVML's memory-health flags mean, and what vLLM does with visible devices and free memory.

The driver-version tables and the code-compatibility rules are in `knowledge.cuda`; this module holds the
rest of what the GPU layers judge by.
"""

from __future__ import annotations

from dflash_doctor.knowledge import Fact

__all__ = [
    "BF16_MIN_COMPUTE_CAPABILITY",
    "CUDA_DEVICE_ORDER_DEFAULT",
    "CUDA_VISIBLE_DEVICES_RULES",
    "DRIVER_TOO_OLD_MESSAGES",
    "KERNEL_UNSUPPORTED_MESSAGES",
    "MIG_SINGLE_DEVICE_PER_PROCESS",
    "RETIRED_PAGES_PENDING",
    "ROW_REMAPPING",
    "TORCH_CUDA_INDEXES",
    "VLLM_FREE_MEMORY_CHECK",
    "VLLM_UUID_VISIBLE_DEVICES_SINCE",
]

_PROG_GUIDE_ENV = (
    "NVIDIA CUDA C++ Programming Guide, 'CUDA Environment Variables' (CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER)"
)

CUDA_VISIBLE_DEVICES_RULES: Fact[str] = Fact(
    value="a comma-separated list of indices, GPU UUIDs (a unique prefix is enough) or MIG ids; devices are "
    "enumerated in list order; the first entry that names no device ends the list (later entries are "
    "ignored); a repeated entry hides every device; an empty value hides every device",
    source=f"{_PROG_GUIDE_ENV}: 'Only the devices whose index is present in the sequence are visible to CUDA "
    "applications and they are enumerated in the order of the sequence. If one of the indices is invalid, only "
    "the devices whose index precedes the invalid index are visible to CUDA applications. For example, setting "
    "CUDA_VISIBLE_DEVICES to 2,1 causes device 0 to be invisible and device 2 to be enumerated before device 1. "
    "Setting CUDA_VISIBLE_DEVICES to 0,2,-1,1 causes devices 0 and 2 to be visible and device 1 to be "
    "invisible.' UUID prefixes: 'specify enough digits from the beginning of the GPU UUID to uniquely identify "
    "that GPU'. torch/cuda/__init__.py _parse_visible_devices and _transform_uuid_to_ordinals mirror this "
    "(strtoul-like parsing of each entry, 'Repeated ordinal results in empty set', 'Negative value aborts the "
    "sequence', an ambiguous UUID prefix stops the list).",
    read_from="CUDA C++ Programming Guide 12.9; torch 2.13.0 torch/cuda/__init__.py",
    note="The doctor applies these rules to the GPUs NVML lists; torch.cuda.device_count() in the target "
    "checks the result.",
)

CUDA_DEVICE_ORDER_DEFAULT: Fact[str] = Fact(
    value="FASTEST_FIRST",
    source=f"{_PROG_GUIDE_ENV}: CUDA_DEVICE_ORDER 'FASTEST_FIRST, PCI_BUS_ID, (default is FASTEST_FIRST)'; "
    "'FASTEST_FIRST causes CUDA to enumerate the available devices in fastest to slowest order using a simple "
    "heuristic. PCI_BUS_ID orders devices by PCI bus ID in ascending order.' NVML (and nvidia-smi) number GPUs "
    "by PCI bus id. vLLM warns when GPU models differ and CUDA_DEVICE_ORDER is not PCI_BUS_ID "
    "(vllm/platforms/cuda.py, warn_if_different_devices).",
    read_from="CUDA C++ Programming Guide 12.9; vllm 0.20.1 vllm/platforms/cuda.py",
    note="With identical GPUs both orders agree; with mixed models an index in CUDA_VISIBLE_DEVICES may name "
    "another GPU than nvidia-smi's index of the same number.",
)

MIG_SINGLE_DEVICE_PER_PROCESS: Fact[str] = Fact(
    value="a CUDA process enumerates one MIG device, whatever CUDA_VISIBLE_DEVICES lists",
    source="NVIDIA Multi-Instance GPU User Guide, 'CUDA Device Enumeration': 'With CUDA 11/R450 and CUDA "
    "12/R525, only enumeration of a single MIG instance is supported. In other words, regardless of how many "
    "MIG devices are created (or made available to a container), a single CUDA process can only enumerate a "
    "single MIG device.' MIG devices are named MIG-<UUID> (R470+) or MIG-GPU-<UUID>/<GI>/<CI>.",
    read_from="docs.nvidia.com/datacenter/tesla/mig-user-guide (2025)",
    note="So vLLM sees at most one GPU per process on a MIG-enabled card: no tensor parallelism across MIG "
    "devices. Changing MIG mode takes effect after a GPU reset (pending != current until then).",
)

RETIRED_PAGES_PENDING: Fact[str] = Fact(
    value="pages are pending retirement: they are retired at the next reboot or driver reload",
    source="NVML API reference, nvmlDeviceGetRetiredPagesPendingStatus: 'Check if any pages are pending "
    "retirement and need a reboot to fully retire.' (dynamic page retirement, GPUs before Ampere)",
    read_from="NVML API reference (docs.nvidia.com/deploy/nvml-api), R580",
)

ROW_REMAPPING: Fact[str] = Fact(
    value="a pending row remapping takes effect at the next GPU reset; a remapping failure means the GPU "
    "has run out of spare rows",
    source="NVML API reference, nvmlDeviceGetRemappedRows: 'isPending indicates whether or not there are "
    "pending remappings. A reset will be required to actually remap the row. failureOccurred will be set if a "
    "row remapping ever failed in the past.' (Ampere and newer). NVIDIA 'GPU Memory Error Management', Error "
    "Recovery and Response Flags: 'Row-remapping pending flag: This flag indicates that row-remapping will "
    "happen at the next GPU reset'; for a reset, 'Terminate all GPU processes, reset the GPU using "
    "\"nvidia-smi -r\"'.",
    read_from="NVML API reference (R580); docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt",
    note="On MIG-enabled GPUs with active instances the query is not supported.",
)

VLLM_FREE_MEMORY_CHECK: Fact[float] = Fact(
    value=0.92,
    source="vllm/config/cache.py: `gpu_memory_utilization: float = Field(default=0.92, gt=0, le=1)`; "
    "vllm/v1/worker/utils.py request_memory(): `requested_memory = math.ceil(total_memory * "
    "gpu_memory_utilization)` and, when free memory at start-up is below it, `raise ValueError(\"Free memory on "
    "device ... on startup is less than desired GPU memory utilization ... Decrease GPU memory utilization or "
    "reduce GPU memory used by other processes.\")`",
    read_from="vllm 0.20.1 wheel; vllm 0.34.0 sdist (default 0.92 unless the extensible KV cache is on, "
    "which then sizes the cache from what is free and skips the raise)",
)

VLLM_UUID_VISIBLE_DEVICES_SINCE: Fact[str] = Fact(
    value="0.24.0",
    source="vllm/platforms/interface.py device_id_to_physical_device_id: up to 0.23.0 `return "
    "int(physical_device_id)` for each CUDA_VISIBLE_DEVICES entry (a UUID raises ValueError when vLLM first "
    "queries the device through NVML); from 0.24.0 NvmlCudaPlatform.device_control_id_to_physical_device_id "
    "falls back to `pynvml.nvmlDeviceGetHandleByUUID(device_id)` and nvmlDeviceGetIndex.",
    read_from="vllm sdists 0.21.0, 0.22.0, 0.23.0, 0.24.0 and 0.34.0 (vllm/platforms/cuda.py, interface.py); "
    "vllm 0.20.1 wheel",
    note="nvmlDeviceGetHandleByUUID takes a whole UUID: the UUID prefixes CUDA accepts fail there.",
)

BF16_MIN_COMPUTE_CAPABILITY: Fact[tuple[int, int]] = Fact(
    value=(8, 0),
    source="torch/cuda/__init__.py is_bf16_supported: `if torch.cuda.get_device_properties(device).major >= 8: "
    "return True` (below that only emulation); flash-attention csrc/flash_attn/flash_api.cpp: "
    "'FlashAttention only supports Ampere GPUs or newer.'",
    read_from="torch 2.13.0; flash-attention v2.8.3",
    note="vLLM serves fp16 on compute capability 7.5; the kernel layer runs its bf16 cases only from 8.0.",
)

KERNEL_UNSUPPORTED_MESSAGES: Fact[tuple[str, ...]] = Fact(
    value=(
        "No available kernel. Aborting execution.",
        "FlashAttention only supports Ampere GPUs or newer",
        "only supported on devices with compute capability",
        "Unsupported compute capability. Supported:",
    ),
    source="torch aten/src/ATen/native/transformers/cuda/sdp_utils.cpp select_sdp_backend: after "
    "TORCH_WARN('Flash attention kernel not used because:') and the reasons, "
    "TORCH_CHECK(!print_debug, \"No available kernel. Aborting execution.\"); flash-attention "
    "csrc/flash_attn/flash_api.cpp TORCH_CHECK(is_sm8x_min, \"FlashAttention only supports Ampere GPUs or "
    "newer.\"); vllm/vllm_flash_attn/flash_attn_interface.py _is_fa2_supported: 'FA2 is only supported on "
    "devices with compute capability >= 8'; flash-attn-4 flash_attn/cute/interface.py:845 _flash_attn_fwd: "
    "`assert arch // 10 in [8, 9, 10, 11, 12], \"Unsupported compute capability. Supported: 8.x, 9.x, 10.x, "
    "11.x, 12.x\"`",
    read_from="torch 2.11 (sdp_utils.cpp); flash-attention v2.8.3; vllm 0.34.0; flash-attn-4 4.0.0b36",
    note="A kernel that declines this GPU or dtype by design: reported as not applicable, not as broken.",
)

TORCH_CUDA_INDEXES: Fact[tuple[tuple[str, str], ...]] = Fact(
    # (CUDA major.minor of the build, PyTorch wheel index)
    value=(
        ("13.0", "https://download.pytorch.org/whl/cu130"),
        ("12.9", "https://download.pytorch.org/whl/cu129"),
        ("12.8", "https://download.pytorch.org/whl/cu128"),
        ("12.6", "https://download.pytorch.org/whl/cu126"),
        ("12.4", "https://download.pytorch.org/whl/cu124"),
        ("12.1", "https://download.pytorch.org/whl/cu121"),
        ("11.8", "https://download.pytorch.org/whl/cu118"),
    ),
    source="PyTorch 'Get Started' and 'Previous PyTorch Versions' install commands: CUDA builds come from "
    "https://download.pytorch.org/whl/cuXYZ, one index per CUDA version (2.9-2.11: cu126, cu128, cu130; "
    "earlier releases cu118-cu124, cu129 for 2.8)",
    read_from="pytorch.org/get-started (2025-2026); uv and pydevtools guides listing cu118, cu126, cu128, cu130",
    note="Which torch versions an index carries varies; pip reports 'No matching distribution' when this one "
    "has none, and vLLM pins one torch version exactly.",
)

DRIVER_TOO_OLD_MESSAGES: Fact[tuple[str, ...]] = Fact(
    value=(
        "The NVIDIA driver on your system is too old",
        "CUDA driver version is insufficient for CUDA runtime version",
        "cudaErrorInsufficientDriver",
    ),
    source="torch c10/cuda/CUDAFunctions.cpp (device_count_impl): 'The NVIDIA driver on your system is too old "
    "(found version %d). Please update your GPU driver ... Alternatively, go to: https://pytorch.org to install a "
    "PyTorch version that has been compiled with your version of the CUDA driver.', raised by _cuda_init and "
    "warned by is_available() ('CUDA initialization: ...'); cuda_runtime_api.h cudaGetErrorString("
    "cudaErrorInsufficientDriver) = 'CUDA driver version is insufficient for CUDA runtime version'",
    read_from="torch 2.8-2.11 (message as printed by torch/cuda/__init__.py:180 in user reports); CUDA 13.0 headers",
)
