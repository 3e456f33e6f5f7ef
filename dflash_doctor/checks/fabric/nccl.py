"""The NCCL all-reduce over the group (values, hang, bus bandwidth against the slowest link's rate), with its
NCCL_P2P_DISABLE=1 control arm."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

from dflash_doctor.checks.fabric.codes import (
    BANDWIDTH_LOW,
    NCCL_FAILED,
    NCCL_OK,
    NCCL_P2P_BROKEN,
    NCCL_SKIPPED,
)
from dflash_doctor.checks.fabric.fixes import p2p_fixes
from dflash_doctor.facts.fabric.fabric_shapes import DevicePcie, Fabric, NcclArm, NcclRankData, NvmlPair
from dflash_doctor.knowledge.fabric import (
    LINK_FLOOR_FRACTION,
    NVLINK_GBPS_PER_LINK,
    P2P_HANG_FIX,
    PCIE_GBPS_PER_LANE,
)
from dflash_doctor.model import JSON, Finding, Remediation, Status
from dflash_doctor.shape import frozen_dataclass

__all__ = ["ArmSummary", "link_rate", "nccl_findings", "summarize"]


@frozen_dataclass(frozen=True)
class ArmSummary:
    """One all-reduce arm, summed up: ok, what went wrong, the bandwidths (rank 0's)."""

    ok: bool
    what: str
    hung_ranks: list[int]
    busbw: float | None
    algbw: float | None
    nccl: str | None
    stderr: str

    def evidence(self) -> dict[str, JSON]:
        return asdict(self)


def summarize(arm: NcclArm | None) -> ArmSummary:
    ranks = arm.ranks if arm else []
    hung = [i for i, r in enumerate(ranks) if r.run.timed_out]
    datas = [r.data or NcclRankData() for r in ranks]
    wrong = [c for d in datas for c in d.checks if c.mismatched]
    errors = [d.error or r.run.error for r, d in zip(ranks, datas) if d.error or r.run.error]
    stderr = "\n".join(r.run.stderr[-800:] for r in ranks)
    if not ranks:
        what = "did not run"
    elif hung:
        stages = sorted({line.rsplit(": ", 1)[-1] for r in ranks for line in r.run.stderr.splitlines()
                         if line.startswith("fabric-nccl")})
        what = f"hung: rank(s) {', '.join(map(str, hung))} killed at the timeout" + (
            f" (last stage: {stages[-1]})" if stages else "")
    elif wrong:
        what = f"returned wrong values ({wrong[0].mismatched} of {wrong[0].bytes // 4} at {wrong[0].bytes} B)"
    elif errors:
        what = f"failed: {errors[0]}"
    else:
        what = "ok"
    timing = datas[0].timing if datas else None
    return ArmSummary(ok=what == "ok", what=what, hung_ranks=hung, busbw=timing.busbw_gbps if timing else None,
                      algbw=timing.algbw_gbps if timing else None,
                      nccl=datas[0].nccl_version if datas else None, stderr=stderr)


def nccl_findings(fabric: Fabric, pairs: Sequence[NvmlPair]) -> list[Finding]:
    arms = fabric.nccl
    if arms.p2p is None and arms.p2p_disabled is None:
        return [NCCL_SKIPPED.finding(Status.SKIP, f"NCCL all-reduce not run: {fabric.probes_skipped or 'no facts'}")]
    main = summarize(arms.p2p)
    control = summarize(arms.p2p_disabled) if arms.p2p_disabled else None
    world = (arms.p2p.world if arms.p2p else 0) or 1
    evidence: dict[str, JSON] = {"p2p": main.evidence(), "p2p_disabled": control.evidence() if control else None}
    if main.ok:
        busbw = main.busbw
        title = (f"NCCL {main.nccl or ''} all-reduce over {world} rank(s): 4 B and 16 MiB values right"
                 + (f", bus bandwidth {busbw:.1f} GB/s at 16 MiB" if busbw and world > 1
                    else f", {main.algbw:.1f} GB/s through one rank (no peer traffic)" if main.algbw else "")
                 + (f"; NCCL_P2P_DISABLE=1: {control.busbw:.1f} GB/s" if control and control.ok and control.busbw
                    else ""))
        return [NCCL_OK.finding(Status.PASS, title, evidence=evidence), *_bandwidth(fabric, pairs, main, world)]
    if control is not None and control.ok:
        return [NCCL_P2P_BROKEN.finding(
            Status.FAIL,
            f"NCCL all-reduce over {world} GPUs {main.what} with peer-to-peer, and works with NCCL_P2P_DISABLE=1 "
            f"({control.busbw or 0:.1f} GB/s): the multi-GPU A6000 hang, `vllm serve` would hang at start",
            detail=P2P_HANG_FIX.source, evidence=evidence, remediation=p2p_fixes(fabric))]
    return [NCCL_FAILED.finding(
        Status.FAIL,
        f"NCCL all-reduce over {world} rank(s) {main.what}"
        + (f"; the control arm (NCCL_P2P_DISABLE=1) {control.what} too" if control is not None else ""),
        detail=main.stderr, evidence=evidence,
        remediation=(Remediation("NCCL_DEBUG=INFO NCCL_NVLS_ENABLE=0 dflash-doctor --only fabric",
                                 "see where NCCL stops"),))]


def _bandwidth(fabric: Fabric, pairs: Sequence[NvmlPair], main: ArmSummary, world: int) -> list[Finding]:
    busbw = main.busbw
    if world < 2 or not busbw:
        return []
    rates = [r for r in (link_rate(fabric, p) for p in pairs) if r]
    if not rates:
        return []
    slowest = min(rates, key=lambda r: r[0])
    if busbw >= slowest[0] * LINK_FLOOR_FRACTION.value:
        return []
    return [BANDWIDTH_LOW.finding(
        Status.WARN, f"NCCL all-reduce bus bandwidth {busbw:.1f} GB/s is below a tenth of the slowest link's "
        f"{slowest[0]:.0f} GB/s ({slowest[1]})",
        detail=f"{LINK_FLOOR_FRACTION.source}. {PCIE_GBPS_PER_LANE.source}. {NVLINK_GBPS_PER_LINK.source}",
        evidence={"busbw_gbps": busbw, "link_gbps": slowest[0], "link": slowest[1]})]


def link_rate(fabric: Fabric, pair: NvmlPair) -> tuple[float, str] | None:
    """The pair's link rate in one direction, GB/s (NVLinks x their rate, else the slower GPU's PCIe link)."""
    if pair.nvlinks:
        per = NVLINK_GBPS_PER_LINK.value.get(int(pair.nvlink_version or 0))
        return (per * pair.nvlinks, f"{pair.nvlinks} NVLink(s)") if per else None
    devices = fabric.devices()
    rates = []
    for index in pair.gpus:
        device = devices.get(index)
        pcie = device.pcie if device else DevicePcie()
        per = PCIE_GBPS_PER_LANE.value.get(pcie.gen_max or 0)
        if per and pcie.width_now is not None:
            rates.append((per * pcie.width_now, f"PCIe gen {pcie.gen_max} x{pcie.width_now}"))
    return min(rates, key=lambda r: r[0]) if rates else None
