"""The target's peer access and its write-and-verify copy between each directed pair of the group."""

from __future__ import annotations

from collections.abc import Sequence

from dflash_doctor.checks.fabric.codes import (
    PEER_COPY_CORRUPT,
    PEER_DENIED,
    PEER_NOT_NEEDED,
    PEER_OK,
    PEER_PROBE_FAILED,
)
from dflash_doctor.checks.fabric.fixes import p2p_fixes
from dflash_doctor.facts.fabric.fabric_shapes import Fabric, NvmlPair, PeerData
from dflash_doctor.knowledge.fabric import P2P_HANG_FIX, VLLM_SKIP_P2P_CHECK_DEFAULT
from dflash_doctor.model import Finding, Status
from dflash_doctor.units import MIB

__all__ = ["peer_findings"]


def peer_findings(fabric: Fabric, tp: int, pairs: Sequence[NvmlPair]) -> list[Finding]:
    peer = fabric.peer
    if peer.skipped:
        return [PEER_NOT_NEEDED.finding(Status.PASS, f"peer access not checked: {peer.skipped} (a single-GPU group has "
                                        "no peer traffic)")]
    data = peer.data or PeerData()
    if (peer.run and peer.run.error) or not data.ok:
        run = peer.run
        return [PEER_PROBE_FAILED.finding(
            Status.WARN, "the peer-access probe did not finish: "
            + str((run.error if run else None) or data.import_error or data.error),
            detail=run.stderr if run else "", evidence={"run": run.to_json() if run else {}})]
    if not data.pairs:
        return [PEER_NOT_NEEDED.finding(Status.PASS, f"peer access not checked: CUDA sees {data.device_count} GPU(s), "
                                        f"no pair of the TP {tp} group")]
    found: list[Finding] = []
    nvml_ok = {tuple(sorted(p.gpus)) for p in pairs if p.p2p.write == "ok"}
    for item in data.pairs:
        if item.can_access_peer is False:
            if tuple(sorted((item.src, item.dst))) in nvml_ok:
                found.append(PEER_DENIED.finding(Status.WARN, f"{item.name}: CUDA denies peer access that NVML "
                                                 "reports as supported", evidence=item.to_json()))
            continue
        if item.verified is False:
            found.append(PEER_COPY_CORRUPT.finding(
                Status.FAIL,
                f"{item.name}: the driver allows peer access, but a {(item.bytes or 0) // MIB} MiB pattern copied "
                f"across came back wrong ({item.mismatched_on_dst} words on the far GPU, {item.mismatched_back} back)"
                + (f": {item.error}" if item.error else ""),
                detail=f"{P2P_HANG_FIX.source}. vLLM trusts the driver's answer by default "
                f"(VLLM_SKIP_P2P_CHECK=1: {VLLM_SKIP_P2P_CHECK_DEFAULT.source}), so it would build its custom "
                "all-reduce on this path and hang or compute garbage.",
                evidence=item.to_json(), remediation=p2p_fixes(fabric)))
    if not found:
        copies = [i for i in data.pairs if i.verified]
        mib = (data.pairs[0].bytes or 0) // MIB
        found.append(PEER_OK.finding(Status.PASS, f"peer access: {len(copies)} of {len(data.pairs)} directed pair(s) "
                                     f"copied {mib} MiB across and back intact",
                                     evidence={"pairs": [p.to_json() for p in data.pairs]}))
    return found
