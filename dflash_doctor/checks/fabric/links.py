"""The TP group's topology as NVML reports it: the group and its pairs, PCIe links trained below their width,
and pairs the driver gives no peer-to-peer."""

from __future__ import annotations

from collections.abc import Sequence

from dflash_doctor.checks.fabric.codes import GROUP, NVML_UNAVAILABLE, P2P_UNSUPPORTED, PCIE_DEGRADED
from dflash_doctor.facts.fabric.fabric_shapes import Fabric, NvmlPair
from dflash_doctor.model import Finding, Status

__all__ = ["group_finding", "group_pairs", "link_findings"]


def group_pairs(fabric: Fabric, group: Sequence[int]) -> list[NvmlPair]:
    """NVML's pairs between the GPUs of the group."""
    members = set(group)
    return [p for p in fabric.nvml.pairs if set(p.gpus) <= members]


def group_finding(fabric: Fabric, tp: int, group: Sequence[int], pairs: Sequence[NvmlPair]) -> Finding:
    links = ", ".join(f"{p.name}: " + (f"{p.nvlinks} NVLink(s)" if p.nvlinks else str(p.topology)) for p in pairs)
    title = (f"TP {tp} ({fabric.tp_source}) over GPU(s) {', '.join(map(str, group)) or 'none'}"
             + (f"; {links}" if links else ""))
    if len(group) < tp:
        return GROUP.finding(Status.WARN, title + f": only {len(group)} GPU(s) visible, the fabric was checked over "
                             "those (serve-resources judges the world size)", evidence={"tp": tp, "group": list(group)})
    return GROUP.finding(Status.PASS, title, evidence={"tp": tp, "group": list(group),
                                                       "pairs": [p.to_json() for p in pairs]})


def link_findings(fabric: Fabric, group: Sequence[int], pairs: Sequence[NvmlPair]) -> list[Finding]:
    nvml = fabric.nvml
    if not nvml.ok:
        return [NVML_UNAVAILABLE.finding(Status.WARN, f"NVML topology not read: {nvml.error}", evidence=nvml.to_json())]
    found: list[Finding] = []
    for device in nvml.devices:
        pcie = device.pcie
        if device.index in group and pcie.width_now is not None and pcie.width_max is not None \
                and pcie.width_now < pcie.width_max:
            found.append(PCIE_DEGRADED.finding(
                Status.WARN,
                f"GPU {device.index}: PCIe link x{pcie.width_now} of x{pcie.width_max} (gen {pcie.gen_now} now, "
                f"{pcie.gen_max} at most): a link trained below its width",
                detail="An idle GPU lowers its PCIe generation to save power (that is normal); a narrower width "
                "is not: reseat the card or riser, or check the slot's wiring in the board's manual.",
                evidence={"device": device.index, **pcie.to_json()}))
    for pair in pairs:
        if pair.nvlinks:
            continue
        bad = pair.p2p.bad()
        if bad:
            found.append(P2P_UNSUPPORTED.finding(
                Status.WARN,
                f"GPUs {pair.name} ({pair.topology}): the driver reports no PCIe peer-to-peer "
                f"({', '.join(f'{k} {v}' for k, v in bad.items())}): NCCL goes through host memory and vLLM's custom "
                "all-reduce is off",
                evidence=pair.to_json()))
    return found
