"""Which all-reduce vLLM will pick for the group, by its own rules (custom_all_reduce.py), and the reported
hazard of its custom all-reduce over a GeForce PCIe peer path (knowledge.dflash_reports KNOWN_BAD)."""

from __future__ import annotations

from collections.abc import Sequence

from dflash_doctor.checks.argv import with_switch
from dflash_doctor.checks.fabric.codes import ALLREDUCE_CHOICE, CUSTOM_ALLREDUCE_GEFORCE_P2P
from dflash_doctor.checks.models.model_views import version_tuple
from dflash_doctor.facts.fabric.fabric_shapes import Fabric, NvmlPair
from dflash_doctor.facts.gpu.nvml_shapes import GpuDevice
from dflash_doctor.facts.serve.serve_shapes import VllmDflash
from dflash_doctor.knowledge.dflash_reports import KNOWN_BAD
from dflash_doctor.knowledge.fabric import CUSTOM_ALL_REDUCE_RULES
from dflash_doctor.model import Finding, Remediation, Status

__all__ = ["CUSTOM", "allreduce_choice", "custom_allreduce_on_geforce_p2p"]

CUSTOM = "vLLM's custom all-reduce (NCCL above its size limit)"
"""The choice where vLLM builds its own all-reduce on the peer path."""


def allreduce_choice(fabric: Fabric, tp: int, gpus: int, pairs: Sequence[NvmlPair],
                     argv: Sequence[str]) -> tuple[str, Finding]:
    """(the all-reduce vLLM will use, the finding that says so and why)."""
    rules = CUSTOM_ALL_REDUCE_RULES.value
    peer = fabric.peer.data.pairs if fabric.peer.data else []
    all_nvlink = bool(pairs) and all(p.p2p.nvlink == "ok" for p in pairs)
    if tp == 1:
        why, choice = "TP 1: one process, no all-reduce", "none"
    elif gpus < tp:
        why, choice = f"only {gpus} GPU(s) visible for TP {tp}: vLLM stops before it picks one", "not judged"
    elif "--disable-custom-all-reduce" in argv:
        why, choice = "--disable-custom-all-reduce is given", "NCCL"
    elif tp not in rules["world_sizes"]:  # type: ignore[operator]
        why, choice = f"custom all-reduce supports world sizes {rules['world_sizes']}", "NCCL"
    elif tp > rules["pcie_only_max"] and not all_nvlink:  # type: ignore[operator]
        why, choice = "custom all-reduce is off for more than two PCIe-only GPUs", "NCCL"
    elif peer and not all(p.can_access_peer for p in peer):
        why, choice = "a pair has no peer access", "NCCL"
    else:
        skip = fabric.host.setting("VLLM_SKIP_P2P_CHECK", "1") == "1"
        why = ("every pair " + ("on NVLink" if all_nvlink else "with peer access") + "; the peer test is "
               + ("skipped (VLLM_SKIP_P2P_CHECK=1, the default): the driver's answer is trusted" if skip
                  else "vLLM's own (VLLM_SKIP_P2P_CHECK=0)"))
        choice = CUSTOM
    return choice, ALLREDUCE_CHOICE.finding(Status.PASS, f"vLLM's all-reduce at TP {tp}: {choice} ({why})",
                                            detail=CUSTOM_ALL_REDUCE_RULES.source,
                                            evidence={"choice": choice, "why": why})


def custom_allreduce_on_geforce_p2p(choice: str, devices: Sequence[GpuDevice], group: Sequence[int],
                                    pairs: Sequence[NvmlPair], argv: list[str],
                                    vllm: VllmDflash | None) -> list[Finding]:
    """knowledge.dflash_reports.KNOWN_BAD's custom-allreduce-geforce-p2p, judged from the GPU and peer-path facts."""
    entry = next(e for e in KNOWN_BAD.value if e.condition == "geforce-pcie-p2p-custom-all-reduce")
    if choice != CUSTOM:
        return []
    version = (vllm.version or "") if vllm is not None and vllm.installed else ""
    if version and not (version_tuple(entry.first) <= version_tuple(version)
                        and (entry.last is None or version_tuple(version) <= version_tuple(entry.last))):
        return []
    members = [d for d in devices if d.index in group]
    arch = {f"{d.compute_capability[0]}.{d.compute_capability[1]}" for d in members if d.compute_capability}
    geforce = [d for d in members if "geforce" in (d.name or "").lower()]
    pcie_peers = [p for p in pairs if not p.nvlinks and p.p2p.read_ == "ok" and p.p2p.write == "ok"]
    if len(members) < 2 or len(geforce) < len(members) or not arch <= set(entry.arch) or not pcie_peers:
        return []
    names = ", ".join(sorted({d.name or "" for d in members}))
    return [CUSTOM_ALLREDUCE_GEFORCE_P2P.finding(
        Status.WARN,
        f"{entry.title}: TP {len(members)} over {names} (sm_{'/'.join(sorted(a.replace('.', '') for a in arch))}) "
        f"with PCIe peer access granted, and vLLM{' ' + version if version else ''} picks its custom all-reduce",
        detail=f"Reported in {entry.source}.",
        evidence={"id": entry.id, "gpus": [{"index": d.index, "name": d.name, "compute_capability":
                                            d.compute_capability} for d in members],
                  "pairs": [p.to_json() for p in pcie_peers], "vllm": version or None,
                  "versions": [entry.first, entry.last], "arch": list(entry.arch)},
        remediation=(Remediation(with_switch(argv, entry.remedy) if argv else f"vllm serve ... {entry.remedy}",
                                 "NCCL does the all-reduce, over the same peer path, with right values"),))]
