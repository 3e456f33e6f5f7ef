"""Codes of the multi-GPU fabric: the tensor-parallel group's links, peer access, NCCL and the host."""

from dflash_doctor.codes import Code

CODES = (
    Code("fabric.skipped", "The fabric was not checked",
         "No GPU is listed by NVML (the gpu check says why), or --no-gpu was given."),
    Code("fabric.group", "The tensor-parallel group and its links",
         "The GPUs vLLM's TP group will use (the serve command's --tensor-parallel-size, else every visible GPU) "
         "and, per pair, the NVLinks between them or the PCIe path (same switch, several switches, host bridge, "
         "across sockets), from NVML. A warning when fewer GPUs are visible than the TP size."),
    Code("fabric.nvml-unavailable", "NVML's topology could not be read",
         "nvidia-ml-py is missing from the doctor's environment or NVML failed; the target's probes still run."),
    Code("fabric.pcie-degraded", "A GPU's PCIe link trained below its width",
         "NVML reports the link narrower now than at most (x8 of x16): a card or riser badly seated, or a slot "
         "wired narrower. Every transfer over it is slower. A lower generation at idle is power saving, not this."),
    Code("fabric.p2p-unsupported", "The driver reports no PCIe peer-to-peer for a pair",
         "nvmlDeviceGetP2PStatus answers other than OK for read or write (chipset or topology not supported, "
         "disabled by registry key). NCCL then moves data through host memory and vLLM's custom all-reduce is off: "
         "slower, but it works."),
    Code("fabric.peer-not-needed", "No peer access to check at TP 1",
         "A single-GPU group has no pair of GPUs; the peer checks are skipped with that reason."),
    Code("fabric.peer-probe-failed", "The peer-access probe did not finish",
         "torch did not import in the target, CUDA failed, or the probe timed out; its stderr is the evidence."),
    Code("fabric.peer-denied", "CUDA denies peer access NVML reports",
         "torch.cuda.can_device_access_peer is False for a pair whose NVML P2P status is OK: the CUDA runtime and "
         "the driver disagree (an IOMMU or a virtual machine's settings)."),
    Code("fabric.peer-copy-corrupt", "Peer writes are lost although the driver allows them",
         "A pattern written from one GPU into another's memory came back wrong. This is what ACS redirecting peer "
         "traffic through a translating IOMMU does (vLLM RFC #51513; the A6000 TP=2 hangs of #14449 and #9920), "
         "and vLLM trusts the driver by default (VLLM_SKIP_P2P_CHECK=1), so it builds its custom all-reduce on the "
         "path and hangs. Fix: NCCL_P2P_DISABLE=1 and --disable-custom-all-reduce now; ACS off on the bridges "
         "(BIOS, or setpci) or the IOMMU in passthrough (iommu=pt) at the root."),
    Code("fabric.peer-ok", "Peer copies arrive intact", "Each pair copied a pattern across and back, unchanged."),
    Code("fabric.nccl-ok", "NCCL all-reduce works over the TP group",
         "One process per GPU ran a real NCCL all-reduce through torch.distributed, as vLLM's group does; the 4-byte "
         "and 16 MiB results were right; the bus bandwidth at 16 MiB is given (and the control arm's)."),
    Code("fabric.nccl-skipped", "NCCL all-reduce not run", "NVML lists no GPU, so no rank could be started."),
    Code("fabric.nccl-p2p-broken", "NCCL hangs or fails with peer-to-peer, works without it",
         "The all-reduce over the TP group hung (killed at the timeout) or failed, and the same run with "
         "NCCL_P2P_DISABLE=1 passed: the peer path is broken. `vllm serve` hangs at start on this host. Fix: "
         "NCCL_P2P_DISABLE=1 and --disable-custom-all-reduce now; ACS/IOMMU settings at the root."),
    Code("fabric.nccl-failed", "NCCL all-reduce fails over the TP group",
         "The all-reduce hung, failed to initialise or returned wrong values, with the control arm failing too (or "
         "with one GPU, where there is no control arm): NCCL itself does not work here. NCCL_DEBUG=INFO says why."),
    Code("fabric.bandwidth-low", "All-reduce bandwidth far below the link's rate",
         "The bus bandwidth of the 16 MiB all-reduce is below a tenth of the slowest link's rate in one direction "
         "(PCIe generation x width, or NVLinks x their rate): a link trained down, a path through host memory, a "
         "fabric that redirects. Tensor parallelism will be slow."),
    Code("fabric.shm", "/dev/shm is large enough",
         "The size of /dev/shm against what vLLM's multi-process executor maps there for this TP size (its message "
         "queues, from vLLM's source), and whether this is a container sharing the host's IPC namespace."),
    Code("fabric.shm-small", "/dev/shm is too small for the TP group",
         "Docker gives a container 64 MB of /dev/shm unless it is started with --ipc=host or --shm-size; NCCL fails "
         "in ncclShmOpen (vLLM #1710) and vLLM's shared-memory queues need hundreds of MiB at TP 2. Start the "
         "container with --ipc=host, or --shm-size large enough."),
    Code("fabric.iommu", "IOMMU and ACS between the GPUs",
         "The IOMMU settings of the kernel command line, the IOMMU units, each GPU's IOMMU group type (DMA: "
         "translating; identity: passthrough), and no ACS peer redirect on the bridges above the GPUs."),
    Code("fabric.acs-redirect", "ACS redirects peer traffic between the GPUs",
         "A PCIe bridge above the GPUs has ACS P2P Request Redirect on: peer traffic goes up to the root complex "
         "(slow) and, with a translating IOMMU, can be dropped. NCCL's troubleshooting guide: turn ACS off in the "
         "BIOS, or with setpci on each bridge until the next boot."),
    Code("fabric.env-switches", "NCCL/vLLM settings switch a path off",
         "NCCL_P2P_DISABLE or NCCL_SHM_DISABLE is set: all-reduce takes the slower path. Right as a workaround for "
         "a broken fabric, wasteful on a sound one."),
    Code("fabric.env", "NCCL/vLLM settings in force", "The NCCL_*/VLLM_* settings that change the path taken."),
    Code("fabric.allreduce-choice", "Which all-reduce vLLM will use",
         "vLLM's own rules (custom_all_reduce.py) applied to this group: world size 2, 4, 6 or 8; more than two "
         "GPUs need NVLink between all; every pair needs peer access; --disable-custom-all-reduce; else NCCL."),
)
