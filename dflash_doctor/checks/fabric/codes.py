"""The fabric check's finding codes: one constant per id, with its title and explanation."""

from __future__ import annotations

from dflash_doctor.codes import Code

__all__ = [
    "ACS_REDIRECT", "ALLREDUCE_CHOICE", "BANDWIDTH_LOW", "CODES", "CUSTOM_ALLREDUCE_GEFORCE_P2P", "ENV",
    "ENV_SWITCHES", "GROUP", "IOMMU", "NCCL_FAILED", "NCCL_OK", "NCCL_P2P_BROKEN", "NCCL_SKIPPED",
    "NVML_UNAVAILABLE", "P2P_UNSUPPORTED", "PCIE_DEGRADED", "PEER_COPY_CORRUPT", "PEER_DENIED",
    "PEER_NOT_NEEDED", "PEER_OK", "PEER_PROBE_FAILED", "SHM", "SHM_SMALL", "SKIPPED",
]

SKIPPED = Code(
    "fabric.skipped", "The fabric was not checked",
    "No GPU is listed by NVML (the gpu check says why), or --no-gpu was given.")
GROUP = Code(
    "fabric.group", "The tensor-parallel group and its links",
    "The GPUs vLLM's TP group will use (the serve command's --tensor-parallel-size, else every visible GPU) "
    "and, per pair, the NVLinks between them or the PCIe path (same switch, several switches, host bridge, "
    "across sockets), from NVML. A warning when fewer GPUs are visible than the TP size.")
NVML_UNAVAILABLE = Code(
    "fabric.nvml-unavailable", "NVML's topology could not be read",
    "nvidia-ml-py is missing from the doctor's environment or NVML failed; the target's probes still run.")
PCIE_DEGRADED = Code(
    "fabric.pcie-degraded", "A GPU's PCIe link trained below its width",
    "NVML reports the link narrower now than at most (x8 of x16): a card or riser badly seated, or a slot "
    "wired narrower. Every transfer over it is slower. A lower generation at idle is power saving, not this.")
P2P_UNSUPPORTED = Code(
    "fabric.p2p-unsupported", "The driver reports no PCIe peer-to-peer for a pair",
    "nvmlDeviceGetP2PStatus answers other than OK for read or write (chipset or topology not supported, "
    "disabled by registry key). NCCL then moves data through host memory and vLLM's custom all-reduce is off: "
    "slower, but it works.")
PEER_NOT_NEEDED = Code(
    "fabric.peer-not-needed", "No peer access to check at TP 1",
    "A single-GPU group has no pair of GPUs; the peer checks are skipped with that reason.")
PEER_PROBE_FAILED = Code(
    "fabric.peer-probe-failed", "The peer-access probe did not finish",
    "torch did not import in the target, CUDA failed, or the probe timed out; its stderr is the evidence.")
PEER_DENIED = Code(
    "fabric.peer-denied", "CUDA denies peer access NVML reports",
    "torch.cuda.can_device_access_peer is False for a pair whose NVML P2P status is OK: the CUDA runtime and "
    "the driver disagree (an IOMMU or a virtual machine's settings).")
PEER_COPY_CORRUPT = Code(
    "fabric.peer-copy-corrupt", "Peer writes are lost although the driver allows them",
    "A pattern written from one GPU into another's memory came back wrong. This is what ACS redirecting peer "
    "traffic through a translating IOMMU does (vLLM RFC #51513; the A6000 TP=2 hangs of #14449 and #9920), "
    "and vLLM trusts the driver by default (VLLM_SKIP_P2P_CHECK=1), so it builds its custom all-reduce on the "
    "path and hangs. Fix: NCCL_P2P_DISABLE=1 and --disable-custom-all-reduce now; ACS off on the bridges "
    "(BIOS, or setpci) or the IOMMU in passthrough (iommu=pt) at the root.")
PEER_OK = Code(
    "fabric.peer-ok", "Peer copies arrive intact", "Each pair copied a pattern across and back, unchanged.")
NCCL_OK = Code(
    "fabric.nccl-ok", "NCCL all-reduce works over the TP group",
    "One process per GPU ran a real NCCL all-reduce through torch.distributed, as vLLM's group does; the 4-byte "
    "and 16 MiB results were right; the bus bandwidth at 16 MiB is given (and the control arm's).")
NCCL_SKIPPED = Code(
    "fabric.nccl-skipped", "NCCL all-reduce not run", "NVML lists no GPU, so no rank could be started.")
NCCL_P2P_BROKEN = Code(
    "fabric.nccl-p2p-broken", "NCCL hangs or fails with peer-to-peer, works without it",
    "The all-reduce over the TP group hung (killed at the timeout) or failed, and the same run with "
    "NCCL_P2P_DISABLE=1 passed: the peer path is broken. `vllm serve` hangs at start on this host. Fix: "
    "NCCL_P2P_DISABLE=1 and --disable-custom-all-reduce now; ACS/IOMMU settings at the root.")
NCCL_FAILED = Code(
    "fabric.nccl-failed", "NCCL all-reduce fails over the TP group",
    "The all-reduce hung, failed to initialise or returned wrong values, with the control arm failing too (or "
    "with one GPU, where there is no control arm): NCCL itself does not work here. NCCL_DEBUG=INFO says why.")
BANDWIDTH_LOW = Code(
    "fabric.bandwidth-low", "All-reduce bandwidth far below the link's rate",
    "The bus bandwidth of the 16 MiB all-reduce is below a tenth of the slowest link's rate in one direction "
    "(PCIe generation x width, or NVLinks x their rate): a link trained down, a path through host memory, a "
    "fabric that redirects. Tensor parallelism will be slow.")
SHM = Code(
    "fabric.shm", "/dev/shm is large enough",
    "The size of /dev/shm against what vLLM's multi-process executor maps there for this TP size (its message "
    "queues, from vLLM's source), and whether this is a container sharing the host's IPC namespace.")
SHM_SMALL = Code(
    "fabric.shm-small", "/dev/shm is too small for the TP group",
    "Docker gives a container 64 MB of /dev/shm unless it is started with --ipc=host or --shm-size; NCCL fails "
    "in ncclShmOpen (vLLM #1710) and vLLM's shared-memory queues need hundreds of MiB at TP 2. Start the "
    "container with --ipc=host, or --shm-size large enough.")
IOMMU = Code(
    "fabric.iommu", "IOMMU and ACS between the GPUs",
    "The IOMMU settings of the kernel command line, the IOMMU units, each GPU's IOMMU group type (DMA: "
    "translating; identity: passthrough), and no ACS peer redirect on the bridges above the GPUs.")
ACS_REDIRECT = Code(
    "fabric.acs-redirect", "ACS redirects peer traffic between the GPUs",
    "A PCIe bridge above the GPUs has ACS P2P Request Redirect on: peer traffic goes up to the root complex "
    "(slow) and, with a translating IOMMU, can be dropped. NCCL's troubleshooting guide: turn ACS off in the "
    "BIOS, or with setpci on each bridge until the next boot.")
ENV_SWITCHES = Code(
    "fabric.env-switches", "NCCL/vLLM settings switch a path off",
    "NCCL_P2P_DISABLE or NCCL_SHM_DISABLE is set: all-reduce takes the slower path. Right as a workaround for "
    "a broken fabric, wasteful on a sound one.")
ENV = Code(
    "fabric.env", "NCCL/vLLM settings in force", "The NCCL_*/VLLM_* settings that change the path taken.")
ALLREDUCE_CHOICE = Code(
    "fabric.allreduce-choice", "Which all-reduce vLLM will use",
    "vLLM's own rules (custom_all_reduce.py) applied to this group: world size 2, 4, 6 or 8; more than two "
    "GPUs need NVLink between all; every pair needs peer access; --disable-custom-all-reduce; else NCCL.")
CUSTOM_ALLREDUCE_GEFORCE_P2P = Code(
    "fabric.custom-allreduce-geforce-p2p", "vLLM's custom all-reduce would run over a GeForce PCIe peer path",
    "The TP group is GeForce cards of an arch it was reported on (RTX 3090, sm_86), joined over PCIe without "
    "NVLink, and the driver grants them peer access: what a patched driver (the tinygrad/aikitoria "
    "open-gpu-kernel-modules P2P branches) opens, since NVIDIA's stock driver gives GeForce cards none. vLLM then "
    "picks its custom all-reduce over that path, which hard-reset the host under sustained decode "
    "(noonghunna/club-3090 #1332, vLLM 0.29.0) and returned wrong data on two other rigs (club-3090 #922), while "
    "NCCL over the same link stayed right. Fix: --disable-custom-all-reduce (NCCL keeps using the peer path). "
    "The facts and versions are in knowledge/dflash_reports.py KNOWN_BAD (custom-allreduce-geforce-p2p).")

CODES: tuple[Code, ...] = (
    SKIPPED,
    GROUP,
    NVML_UNAVAILABLE,
    PCIE_DEGRADED,
    P2P_UNSUPPORTED,
    PEER_NOT_NEEDED,
    PEER_PROBE_FAILED,
    PEER_DENIED,
    PEER_COPY_CORRUPT,
    PEER_OK,
    NCCL_OK,
    NCCL_SKIPPED,
    NCCL_P2P_BROKEN,
    NCCL_FAILED,
    BANDWIDTH_LOW,
    SHM,
    SHM_SMALL,
    IOMMU,
    ACS_REDIRECT,
    ENV_SWITCHES,
    ENV,
    ALLREDUCE_CHOICE,
    CUSTOM_ALLREDUCE_GEFORCE_P2P,
)
