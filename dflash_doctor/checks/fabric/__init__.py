"""The fabric layer: peer-to-peer and NCCL between the GPUs a tensor-parallel serve spans (check `fabric`).

Judges the `fabric` facts against the serve command's TP size: the NVML topology and P2P status of each pair
in the group and PCIe links trained below their width (`links`), the target's peer access and write-and-verify
copy (`peer`), the NCCL all-reduce (values, hang, bus bandwidth against the link's rate) with its
NCCL_P2P_DISABLE=1 control arm (`nccl`), /dev/shm against what vLLM maps for that TP size, the container's IPC
namespace, IOMMU and ACS, the NCCL_*/VLLM_* settings that switch paths off (`machine`), and which all-reduce vLLM
will pick by its own rules (`allreduce`). The sources are in knowledge.fabric.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from dflash_doctor.check import Check, Facts
from dflash_doctor.checks.fabric.allreduce import allreduce_choice, custom_allreduce_on_geforce_p2p
from dflash_doctor.checks.fabric.codes import CODES, SKIPPED
from dflash_doctor.checks.fabric.links import group_finding, group_pairs, link_findings
from dflash_doctor.checks.fabric.machine import machine_findings
from dflash_doctor.checks.fabric.nccl import nccl_findings
from dflash_doctor.checks.fabric.peer import peer_findings
from dflash_doctor.checks.gpu.visible_devices import visible_of
from dflash_doctor.codes import Code
from dflash_doctor.facts.fabric.fabric_shapes import Fabric
from dflash_doctor.facts.gpu.nvml_shapes import Gpu
from dflash_doctor.facts.serve.serve_shapes import ServeArgs, VllmDflash
from dflash_doctor.model import Finding, Status

__all__ = ["CODES", "FabricCheck"]


class FabricCheck(Check):
    id: ClassVar[str] = "fabric"
    layer: ClassVar[str] = "gpu"
    title: ClassVar[str] = "Multi-GPU fabric for tensor parallelism"
    codes: ClassVar[tuple[Code, ...]] = CODES
    needs: ClassVar[frozenset[str]] = frozenset({"fabric", "gpu", "serve_args"})
    wants: ClassVar[frozenset[str]] = frozenset({"vllm_dflash"})
    """Which vLLM: whether its custom all-reduce is the one that hangs on GeForce P2P."""
    requires_gpu: ClassVar[bool] = True

    def judge(self, facts: Facts) -> Iterable[Finding]:
        fabric = facts.section(Fabric)
        if fabric.skipped:
            return [SKIPPED.finding(Status.SKIP, f"fabric not checked ({fabric.skipped})")]
        gpu = facts.section(Gpu)
        devices = gpu.devices
        serve = facts.optional_section(ServeArgs)
        argv = list(serve.argv) if serve is not None else []
        tp = fabric.requested_tp or 1
        if not devices:
            return [SKIPPED.finding(Status.SKIP, "fabric not checked: NVML lists no GPU (see the gpu check)")]
        group = list(visible_of(gpu).gpus[:tp])
        pairs = group_pairs(fabric, group)
        findings = [group_finding(fabric, tp, group, pairs), *link_findings(fabric, group, pairs),
                    *peer_findings(fabric, tp, pairs), *nccl_findings(fabric, pairs),
                    *machine_findings(fabric, tp, group, devices)]
        choice, said = allreduce_choice(fabric, tp, len(group), pairs, argv)
        findings.append(said)
        findings += custom_allreduce_on_geforce_p2p(choice, devices, group, pairs, argv, facts.optional_section(VllmDflash))
        return findings
