"""What the fabric check judges by: how vLLM picks its all-reduce, what it maps in /dev/shm, what the kernel
and the PCIe fabric do to peer traffic, and the link rates a measured bandwidth is held against."""

from __future__ import annotations

from dflash_doctor.knowledge import Fact

__all__ = [
    "ACS_REDIRECT", "CUSTOM_ALL_REDUCE_RULES", "DOCKER_SHM_DEFAULT", "INIT_IPC_NAMESPACE_INODE",
    "LINK_FLOOR_FRACTION", "NVLINK_GBPS_PER_LINK", "P2P_HANG_FIX", "PATH_SWITCHES", "PCIE_GBPS_PER_LANE",
    "VLLM_SHM_RINGS", "VLLM_SKIP_P2P_CHECK_DEFAULT",
]

_CAR = "vllm/distributed/device_communicators/custom_all_reduce.py"

CUSTOM_ALL_REDUCE_RULES: Fact[dict[str, object]] = Fact(
    value={"world_sizes": (2, 4, 6, 8), "pcie_only_max": 2},
    source=f"{_CAR}: `_SUPPORTED_WORLD_SIZES = [2, 4, 6, 8]`; 'Custom allreduce is disabled because it's not "
    "supported on more than two PCIe-only GPUs' when `world_size > 2 and not fully_connected` (fully connected: "
    "vllm/platforms/cuda.py is_fully_connected, every pair NVML_P2P_STATUS_OK for NVML_P2P_CAPS_INDEX_NVLINK); "
    "then `_can_p2p` (torch.cuda.can_device_access_peer when VLLM_SKIP_P2P_CHECK, else vLLM's own "
    "gpu_p2p_access_check): 'Custom allreduce is disabled because your platform lacks GPU P2P capability or P2P "
    "test failed'; world size 1: disabled; `--disable-custom-all-reduce` turns it off. Where it is off, vLLM "
    "all-reduces with NCCL (PyNcclCommunicator).",
    read_from="vLLM 0.18.0 to 0.24.0 (the same rules; 0.34.0 adds world size 16)",
)

VLLM_SKIP_P2P_CHECK_DEFAULT: Fact[bool] = Fact(
    value=True,
    source="vllm/envs.py: `\"VLLM_SKIP_P2P_CHECK\": lambda: os.getenv(\"VLLM_SKIP_P2P_CHECK\", \"1\") == \"1\"`: "
    "by default vLLM trusts the driver's can_device_access_peer and does not test a peer copy itself",
    read_from="vLLM 0.18.0, 0.19.1, 0.20.1, 0.22.0, 0.23.0, 0.24.0, 0.34.0 (sdists)",
)

VLLM_SHM_RINGS: Fact[dict[str, int]] = Fact(
    value={"rpc_chunk_bytes": 16 << 20, "rpc_chunks": 10, "response_chunk_bytes": 24 << 20, "response_chunks": 10,
           "group_chunk_bytes": 1 << 22, "group_chunks": 6},
    source="vllm/v1/executor/multiproc_executor.py: the scheduler-to-workers `MessageQueue(world_size, ..., "
    "max_chunk_bytes=VLLM_MQ_MAX_CHUNK_BYTES_MB (16) MiB)` and one `MessageQueue(1, 1)` per worker for its "
    "responses (shm_broadcast.py defaults: max_chunk_bytes=24 MiB, max_chunks=10); "
    "vllm/distributed/parallel_state.py: the group's `create_from_process_group(cpu_group, 1 << 22, 6)`; "
    "shm_broadcast.py ShmRingBuffer: `(max_chunk_bytes + metadata_size) * max_chunks` bytes of shared memory, "
    "metadata_size = 1 + readers. Only a multi-process run (world size > 1) maps them.",
    read_from="vLLM 0.24.0 (sdist)",
    note="tmpfs allocates pages as they are written, so this is what vLLM may use, not what it uses at once; a "
    "write past the mount's size is SIGBUS in the worker",
)

DOCKER_SHM_DEFAULT: Fact[int] = Fact(
    value=64 << 20,
    source="Docker `docker run --shm-size`: 'Size of /dev/shm ... default 64MB'; vLLM issue #1710 (NCCL "
    "`ncclShmOpen` failing in Docker) and PR #1125 (the docs' `--ipc=host` / `--shm-size`)",
    read_from="docs.docker.com docker run reference; vllm-project/vllm #1710, #1125",
)

INIT_IPC_NAMESPACE_INODE: Fact[int] = Fact(
    value=0xEFFFFFFF,
    source="linux include/linux/proc_ns.h: `PROC_IPC_INIT_INO = 0xEFFFFFFFU`, the initial (host's) IPC "
    "namespace; /proc/self/ns/ipc reads `ipc:[4026531839]` there, and in a container started with --ipc=host",
    read_from="Linux 6.x",
)

PATH_SWITCHES: Fact[dict[str, str]] = Fact(
    value={
        "NCCL_P2P_DISABLE": "NCCL does not use GPU peer-to-peer (NVLink or PCIe): traffic goes through host memory",
        "NCCL_P2P_LEVEL": "the farthest topology distance at which NCCL still uses peer-to-peer",
        "NCCL_SHM_DISABLE": "NCCL does not use shared host memory between processes",
        "NCCL_NVLS_ENABLE": "NVLink SHARP (multicast) on or off",
        "NCCL_CUMEM_ENABLE": "NCCL's cuMem allocations (peer mappings) on or off",
        "NCCL_IB_DISABLE": "NCCL does not use InfiniBand/RoCE",
        "NCCL_ALGO": "NCCL's algorithm choice forced",
        "NCCL_PROTO": "NCCL's protocol choice forced",
        "VLLM_SKIP_P2P_CHECK": "vLLM trusts the driver's peer report (1, the default) or tests a peer copy (0)",
        "VLLM_DISABLE_PYNCCL": "vLLM does not use its own NCCL wrapper",
        "VLLM_ALLREDUCE_USE_SYMM_MEM": "vLLM's symmetric-memory all-reduce",
        "VLLM_MQ_MAX_CHUNK_BYTES_MB": "size of vLLM's scheduler message queue chunks in /dev/shm",
        "CUDA_VISIBLE_DEVICES": "which GPUs the group is made of",
    },
    source="NCCL User Guide, 'Environment Variables' (docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html); "
    "vllm/envs.py",
    read_from="NCCL 2.2x docs; vLLM 0.24.0",
)

P2P_HANG_FIX: Fact[str] = Fact(
    value="NCCL_P2P_DISABLE=1 or --disable-custom-all-reduce; at the root, ACS off on the bridges (or the IOMMU "
    "in passthrough: iommu=pt)",
    source="vLLM issue #14449 (2x RTX A6000, TP=2 hangs; fixed by NCCL_P2P_DISABLE=1 or "
    "--disable-custom-all-reduce); #9920 (Ada A6000 x2, fixed by turning off ACS/IOMMU); RFC #51513 (ACS with a "
    "translating IOMMU drops peer writes the driver reports as allowed)",
    read_from="vllm-project/vllm issues, 2025-2026",
)

ACS_REDIRECT: Fact[str] = Fact(
    value="setpci -s BDF ECAP_ACS+0x6.w=0000",
    source="NCCL User Guide, Troubleshooting, 'PCI Access Control Services (ACS)': with ACS redirecting "
    "peer-to-peer traffic to the root complex, P2P is slow or hangs; disable it on the PCI bridges (BIOS, or "
    "`setpci -s BDF ECAP_ACS+0x6.w=0000` on each, until the next boot) "
    "(docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html#pci-access-control-services-acs); "
    "the ACS control register and its bits: PCI Express Base Specification, 'ACS Extended Capability'",
    read_from="NCCL 2.2x docs",
)

PCIE_GBPS_PER_LANE: Fact[dict[int, float]] = Fact(
    value={1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563},
    source="PCI-SIG: 2.5, 5, 8, 16, 32, 64 GT/s per lane; 8b/10b for gen 1-2, 128b/130b for gen 3-5, FLIT for "
    "gen 6: GB/s per lane per direction",
    read_from="PCI Express Base Specifications 1.0 to 6.0",
)

NVLINK_GBPS_PER_LINK: Fact[dict[int, float]] = Fact(
    value={1: 20.0, 2: 25.0, 3: 25.0, 4: 25.0, 5: 25.0, 6: 25.0, 7: 50.0},
    source="NVML's nvmlDeviceGetNvLinkVersion values (nvml.h NVML_NVLINK_VERSION_1_0 = 1 ... 5_0 = 7) mapped to "
    "NVIDIA's per-GPU figures: NVLink 1 (P100) 160 GB/s over 4 links, 2 (V100) 300 GB/s over 6, 3 (A100) 600 GB/s "
    "over 12, 4 (H100/H200) 900 GB/s over 18, 5 (B200) 1.8 TB/s over 18: both directions together, so per link and "
    "direction 20, 25, 25, 25, 50 GB/s (nvidia.com/en-us/data-center/nvlink)",
    read_from="nvidia-ml-py 13 pynvml.py; NVIDIA NVLink product page",
)

LINK_FLOOR_FRACTION: Fact[float] = Fact(
    value=0.1,
    source="the doctor's own threshold: a 16 MiB all-reduce does not reach a link's peak (nccl-tests reach it "
    "from hundreds of MiB), so the check warns only when the bus bandwidth is below a tenth of the link's rate "
    "in one direction: a link that trained down, a path through host memory, a fabric that redirects",
    read_from="dflash-doctor",
)
