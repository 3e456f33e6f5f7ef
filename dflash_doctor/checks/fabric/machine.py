"""The machine around the group: /dev/shm against what vLLM maps there for the TP size, the container's IPC
namespace, IOMMU and ACS above the GPUs, and the NCCL_*/VLLM_* settings that switch a path off."""

from __future__ import annotations

from collections.abc import Sequence

from dflash_doctor.checks.fabric.codes import ACS_REDIRECT as ACS_REDIRECT_CODE
from dflash_doctor.checks.fabric.codes import ENV, ENV_SWITCHES, IOMMU, SHM, SHM_SMALL
from dflash_doctor.checks.remedy import quote
from dflash_doctor.facts.fabric.fabric_shapes import Fabric, FabricMachine
from dflash_doctor.facts.fabric.machine import sysfs_bdf
from dflash_doctor.facts.gpu.nvml_shapes import GpuDevice
from dflash_doctor.knowledge.fabric import (
    ACS_REDIRECT,
    DOCKER_SHM_DEFAULT,
    P2P_HANG_FIX,
    PATH_SWITCHES,
    VLLM_SHM_RINGS,
)
from dflash_doctor.model import Finding, Remediation, Status
from dflash_doctor.units import GIB, MIB

__all__ = ["machine_findings", "vllm_shm_need"]


def vllm_shm_need(world: int) -> int:
    """Bytes of /dev/shm vLLM's multi-process executor maps for a TP group of `world` (0 for one process)."""
    if world <= 1:
        return 0
    r = VLLM_SHM_RINGS.value
    rpc = (r["rpc_chunk_bytes"] + 1 + world) * r["rpc_chunks"]
    responses = world * (r["response_chunk_bytes"] + 2) * r["response_chunks"]
    group = (r["group_chunk_bytes"] + world) * r["group_chunks"]
    return rpc + responses + group


def _mib(value: float) -> str:
    return f"{value / MIB:,.0f} MiB"


def machine_findings(fabric: Fabric, tp: int, group: Sequence[int], devices: Sequence[GpuDevice]) -> list[Finding]:
    machine = fabric.host
    return [_shm(machine, tp), *_iommu_acs(machine, group, devices), *_env(machine)]


def _shm(machine: FabricMachine, tp: int) -> Finding:
    shm, container = machine.shm, machine.container
    total = shm.total_bytes
    need = vllm_shm_need(tp)
    where = ("a container" + (" sharing the host's IPC namespace (--ipc=host)" if container.host_ipc_namespace
                              else " with its own IPC namespace") if container.in_container else "the host")
    fixes = (Remediation("docker run --ipc=host ...", "share the host's /dev/shm"),
             Remediation(f"docker run --shm-size={max(1, -(-need // GIB))}g ...", "or give the container enough"))
    seen = {"shm": shm.to_json(), "container": container.to_json()}
    if total is None:
        return SHM.finding(Status.WARN if tp > 1 else Status.PASS,
                           f"/dev/shm: size not known ({shm.error or 'not mounted'}), in {where}", evidence=seen)
    if tp > 1 and total <= DOCKER_SHM_DEFAULT.value:
        return SHM_SMALL.finding(Status.FAIL, f"/dev/shm is {_mib(total)} (Docker's default) in {where}; vLLM at TP {tp} "
                                 f"maps up to {_mib(need)} there and NCCL its own buffers: `ncclShmOpen` fails or a "
                                 "worker dies of SIGBUS", detail=f"{DOCKER_SHM_DEFAULT.source}. {VLLM_SHM_RINGS.source}",
                                 evidence={**seen, "need_bytes": need}, remediation=fixes)
    if total < need:
        return SHM_SMALL.finding(Status.WARN, f"/dev/shm is {_mib(total)} in {where}, below the {_mib(need)} vLLM maps "
                                 f"at TP {tp}",
                                 detail=f"{VLLM_SHM_RINGS.source} ({VLLM_SHM_RINGS.read_from}); {VLLM_SHM_RINGS.note}",
                                 evidence={**seen, "need_bytes": need}, remediation=fixes)
    return SHM.finding(Status.PASS, f"/dev/shm: {_mib(total)} ({_mib(shm.free_bytes or 0)} free), in {where}; vLLM "
                       f"maps up to {_mib(need)} at TP {tp}" + (" (one process: none)" if tp == 1 else ""),
                       detail=f"{VLLM_SHM_RINGS.source} ({VLLM_SHM_RINGS.read_from})",
                       evidence={**seen, "need_bytes": need})


def _iommu_acs(machine: FabricMachine, group: Sequence[int], devices: Sequence[GpuDevice]) -> list[Finding]:
    iommu, acs = machine.iommu, machine.acs
    bdfs = [sysfs_bdf(d.pci_bus_id) for d in devices if d.index in group and d.pci_bus_id]
    types = {b: iommu.gpus[b].type if b in iommu.gpus else None for b in bdfs}
    translating = sorted(b for b, t in types.items() if t and t.startswith("DMA"))
    redirecting = acs.redirecting(bdfs)
    settings = ", ".join(f"{k}={v}" for k, v in iommu.cmdline.items()) or "nothing on the kernel command line"
    summary = (f"IOMMU: {settings}, IOMMU units {', '.join(iommu.units or []) or 'none'}, GPU "
               + (", ".join(f"{b} in a {t} group" if t else f"{b} in no IOMMU group" for b, t in types.items())
                  or "none"))
    evidence = {"iommu": iommu.to_json(), "acs": acs.to_json()}
    if len(group) >= 2 and redirecting:
        return [ACS_REDIRECT_CODE.finding(
            Status.WARN, f"ACS redirects peer traffic on bridge(s) {', '.join(redirecting)} between the GPUs"
            + (" and the IOMMU translates for them: peer writes can be dropped" if translating else
               ": peer traffic goes up to the root complex"),
            detail=f"{ACS_REDIRECT.source}. {P2P_HANG_FIX.source}. {summary}", evidence=evidence,
            remediation=tuple(Remediation(f"sudo setpci -s {quote(str(b))} ECAP_ACS+0x6.w=0000",
                                          "ACS redirect off until the next boot (BIOS for good)") for b in redirecting))]
    return [IOMMU.finding(Status.PASS, summary + ("; no ACS redirect above the GPUs" if len(group) >= 2 else ""),
                          evidence=evidence)]


def _env(machine: FabricMachine) -> list[Finding]:
    switched = {k: v for k, v in machine.env.items() if k != "CUDA_VISIBLE_DEVICES"}
    shown = ", ".join(f"{k}={v}" for k, v in switched.items())
    if any(machine.setting(name) not in (None, "0") for name in ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE")):
        return [ENV_SWITCHES.finding(Status.WARN, f"paths switched off: {shown}: all-reduce goes the slower way (fine "
                                     "as a workaround, not as a default)",
                                     detail="; ".join(f"{k}: {PATH_SWITCHES.value[k]}" for k in switched),
                                     evidence={"env": machine.env})]
    if switched:
        return [ENV.finding(Status.PASS, f"NCCL/vLLM settings: {shown}", evidence={"env": machine.env})]
    return []
