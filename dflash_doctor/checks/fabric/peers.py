"""Layer: the multi-GPU fabric of the tensor-parallel group and the host around it (check `fabric`).

Judges the `fabric` facts against the serve command's TP size: the NVML topology and P2P status of each pair
in the group, PCIe links trained below their width, the target's peer access and write-and-verify copy, the
NCCL all-reduce (values, hang, bus bandwidth against the link's rate) with its NCCL_P2P_DISABLE=1 control
arm, /dev/shm against what vLLM maps for that TP size, the container's IPC namespace, IOMMU and ACS, the
NCCL_*/VLLM_* settings that switch paths off, and which all-reduce vLLM will pick by its own rules.
The sources are in knowledge.fabric.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from dflash_doctor.check import Facts
from dflash_doctor.checks.argv import with_switch
from dflash_doctor.checks.gpu.common import visible_of as _visible_of
from dflash_doctor.checks.models.common import version_tuple
from dflash_doctor.checks.remedy import quote
from dflash_doctor.codes import Code
from dflash_doctor.facts.fabric_host import sysfs_bdf
from dflash_doctor.facts.fabric_shapes import Fabric
from dflash_doctor.facts.nvml_shapes import Gpu, GpuDevice
from dflash_doctor.knowledge.dflash_reports import KNOWN_BAD
from dflash_doctor.knowledge.fabric import (
    ACS_REDIRECT,
    CUSTOM_ALL_REDUCE_RULES,
    DOCKER_SHM_DEFAULT,
    LINK_FLOOR_FRACTION,
    NVLINK_GBPS_PER_LINK,
    P2P_HANG_FIX,
    PATH_SWITCHES,
    PCIE_GBPS_PER_LANE,
    VLLM_SHM_RINGS,
    VLLM_SKIP_P2P_CHECK_DEFAULT,
)
from dflash_doctor.model import Finding, Remediation, Status
from dflash_doctor.units import GIB, MIB

__all__ = ["FabricCheck", "vllm_shm_need"]


CODES: tuple[Code, ...] = (
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
    Code("fabric.custom-allreduce-geforce-p2p", "vLLM's custom all-reduce would run over a GeForce PCIe peer path",
         "The TP group is GeForce cards of an arch it was reported on (RTX 3090, sm_86), joined over PCIe without "
         "NVLink, and the driver grants them peer access: what a patched driver (the tinygrad/aikitoria "
         "open-gpu-kernel-modules P2P branches) opens, since NVIDIA's stock driver gives GeForce cards none. vLLM then "
         "picks its custom all-reduce over that path, which hard-reset the host under sustained decode "
         "(noonghunna/club-3090 #1332, vLLM 0.29.0) and returned wrong data on two other rigs (club-3090 #922), while "
         "NCCL over the same link stayed right. Fix: --disable-custom-all-reduce (NCCL keeps using the peer path). "
         "The facts and versions are in knowledge/dflash_reports.py KNOWN_BAD (custom-allreduce-geforce-p2p)."),
)


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


class FabricCheck:
    id: ClassVar[str] = "fabric"
    layer: ClassVar[str] = "gpu"
    title: ClassVar[str] = "Multi-GPU fabric for tensor parallelism"
    codes: ClassVar[tuple[Code, ...]] = tuple(c for c in CODES if c.id.startswith("fabric."))
    needs: ClassVar[frozenset[str]] = frozenset({"fabric", "gpu", "serve_args"})
    after: ClassVar[frozenset[str]] = frozenset()
    requires_gpu: ClassVar[bool] = True

    def judge(self, facts: Facts) -> Iterable[Finding]:
        fabric = facts.section(Fabric)
        if fabric.skipped:
            return [Finding("fabric.skipped", Status.SKIP, f"fabric not checked ({fabric.skipped})")]
        gpu = facts.section(Gpu)
        devices = gpu.devices
        serve = facts.optional("serve_args") or {}
        argv = [str(a) for a in serve.get("argv") or []]
        tp = int(fabric.requested_tp or 1)
        findings: list[Finding] = []
        if not devices:
            return [Finding("fabric.skipped", Status.SKIP, "fabric not checked: NVML lists no GPU (see the gpu check)")]
        group = list(_visible_of(gpu).gpus[:tp])
        pairs = self._pairs(fabric, group)
        findings.append(self._group(fabric, tp, group, pairs))
        findings += self._links(fabric, group, pairs)
        findings += self._peer(fabric, tp, pairs)
        findings += self._nccl(fabric, pairs)
        findings += self._host(fabric, tp, group, devices)
        findings.append(self._allreduce_choice(fabric, tp, len(group), pairs, argv))
        findings += _custom_allreduce_on_geforce_p2p(findings[-1], devices, group, pairs, argv,
                                                     facts.optional("vllm_dflash"))
        return findings

    # --------------------------------------------------------------------------------------- topology

    def _pairs(self, fabric: Fabric, group: Sequence[int]) -> list[Mapping[str, Any]]:
        members = set(group)
        return [p for p in (fabric.nvml or {}).get("pairs") or [] if set(p.get("gpus") or []) <= members]

    def _group(self, fabric: Fabric, tp: int, group: Sequence[int],
               pairs: Sequence[Mapping[str, Any]]) -> Finding:
        links = ", ".join(f"{p['gpus'][0]}-{p['gpus'][1]}: " + (f"{p['nvlinks']} NVLink(s)" if p.get("nvlinks")
                                                                else str(p.get("topology")))
                          for p in pairs)
        where = fabric.tp_source
        title = (f"TP {tp} ({where}) over GPU(s) {', '.join(map(str, group)) or 'none'}"
                 + (f"; {links}" if links else ""))
        if len(group) < tp:
            return Finding("fabric.group", Status.WARN, title + f": only {len(group)} GPU(s) visible, the fabric "
                           "was checked over those (serve-resources judges the world size)",
                           evidence={"tp": tp, "group": list(group)})
        return Finding("fabric.group", Status.PASS, title, evidence={"tp": tp, "group": list(group),
                                                                      "pairs": [dict(p) for p in pairs]})

    def _links(self, fabric: Fabric, group: Sequence[int],
               pairs: Sequence[Mapping[str, Any]]) -> list[Finding]:
        found: list[Finding] = []
        nvml = fabric.nvml or {}
        if not nvml.get("ok"):
            return [Finding("fabric.nvml-unavailable", Status.WARN,
                            f"NVML topology not read: {nvml.get('error')}", evidence=dict(nvml))]
        for device in nvml.get("devices") or []:
            pcie = device.get("pcie") or {}
            if device.get("index") in group and isinstance(pcie.get("width_now"), int) and \
                    isinstance(pcie.get("width_max"), int) and pcie["width_now"] < pcie["width_max"]:
                found.append(Finding(
                    "fabric.pcie-degraded", Status.WARN,
                    f"GPU {device['index']}: PCIe link x{pcie['width_now']} of x{pcie['width_max']} (gen "
                    f"{pcie.get('gen_now')} now, {pcie.get('gen_max')} at most): a link trained below its width",
                    detail="An idle GPU lowers its PCIe generation to save power (that is normal); a narrower width "
                    "is not: reseat the card or riser, or check the slot's wiring in the board's manual.",
                    evidence={"device": device["index"], **pcie}))
        for pair in pairs:
            p2p = pair.get("p2p") or {}
            if pair.get("nvlinks"):
                continue
            bad = {k: v for k, v in p2p.items() if k in ("read", "write") and v not in ("ok", None)}
            if bad:
                found.append(Finding(
                    "fabric.p2p-unsupported", Status.WARN,
                    f"GPUs {pair['gpus'][0]}-{pair['gpus'][1]} ({pair.get('topology')}): the driver reports no PCIe "
                    f"peer-to-peer ({', '.join(f'{k} {v}' for k, v in bad.items())}): NCCL goes through host memory "
                    "and vLLM's custom all-reduce is off",
                    evidence=dict(pair)))
        return found

    # ------------------------------------------------------------------------------------------- peer

    def _peer(self, fabric: Fabric, tp: int, pairs: Sequence[Mapping[str, Any]]) -> list[Finding]:
        peer = fabric.peer or {}
        if peer.get("skipped"):
            return [Finding("fabric.peer-not-needed", Status.PASS,
                            f"peer access not checked: {peer['skipped']} (a single-GPU group has no peer traffic)")]
        run, data = peer.get("run") or {}, peer.get("data") or {}
        if run.get("error") or not data.get("ok"):
            return [Finding("fabric.peer-probe-failed", Status.WARN,
                            "the peer-access probe did not finish: "
                            + str(run.get("error") or data.get("import_error") or data.get("error")),
                            detail=str(run.get("stderr") or ""), evidence={"run": dict(run)})]
        if not data.get("pairs"):
            return [Finding("fabric.peer-not-needed", Status.PASS,
                            f"peer access not checked: CUDA sees {data.get('device_count')} GPU(s), no pair of the "
                            f"TP {tp} group")]
        found: list[Finding] = []
        nvml_ok = {tuple(sorted(p["gpus"])): (p.get("p2p") or {}).get("write") == "ok" for p in pairs}
        for item in data.get("pairs") or []:
            name = f"cuda:{item['src']} -> cuda:{item['dst']}"
            if item.get("can_access_peer") is False:
                if nvml_ok.get(tuple(sorted((item["src"], item["dst"])))):
                    found.append(Finding("fabric.peer-denied", Status.WARN,
                                         f"{name}: CUDA denies peer access that NVML reports as supported",
                                         evidence=dict(item)))
                continue
            if item.get("verified") is False:
                found.append(Finding(
                    "fabric.peer-copy-corrupt", Status.FAIL,
                    f"{name}: the driver allows peer access, but a {item.get('bytes', 0) // MIB} MiB pattern copied "
                    f"across came back wrong ({item.get('mismatched_on_dst')} words on the far GPU, "
                    f"{item.get('mismatched_back')} back)" + (f": {item['error']}" if item.get("error") else ""),
                    detail=f"{P2P_HANG_FIX.source}. vLLM trusts the driver's answer by default "
                    f"(VLLM_SKIP_P2P_CHECK=1: {VLLM_SKIP_P2P_CHECK_DEFAULT.source}), so it would build its custom "
                    "all-reduce on this path and hang or compute garbage.",
                    evidence=dict(item), remediation=self._p2p_fixes(fabric)))
        if not found:
            copies = [i for i in data.get("pairs") or [] if i.get("verified")]
            found.append(Finding("fabric.peer-ok", Status.PASS,
                                 f"peer access: {len(copies)} of {len(data.get('pairs') or [])} directed pair(s) "
                                 f"copied {_peer_mib(data)} MiB across and back intact",
                                 evidence={"pairs": data.get("pairs")}))
        return found

    def _p2p_fixes(self, fabric: Fabric) -> tuple[Remediation, ...]:
        bridges = [b for b, a in ((fabric.host or {}).get("acs") or {}).get("bridges", {}).items()
                   if "p2p_request_redirect" in (a.get("enabled") or [])]
        fixes = [Remediation("export NCCL_P2P_DISABLE=1", "NCCL stops using the peer path (the control arm's setting)"),
                 Remediation("vllm serve ... --disable-custom-all-reduce", "vLLM's own all-reduce stops using it too")]
        fixes += [Remediation(f"sudo setpci -s {quote(str(b))} ECAP_ACS+0x6.w=0000", f"ACS redirect off on bridge {b} until "
                              f"the next boot ({ACS_REDIRECT.source.split(':')[0]}); for good: the BIOS's ACS setting")
                  for b in bridges]
        fixes.append(Remediation("add iommu=pt to the kernel command line and reboot",
                                 "or keep the IOMMU from translating peer traffic"))
        return tuple(fixes)

    # ------------------------------------------------------------------------------------------- NCCL

    def _nccl(self, fabric: Fabric, pairs: Sequence[Mapping[str, Any]]) -> list[Finding]:
        arms = fabric.nccl or {}
        if not arms:
            return [Finding("fabric.nccl-skipped", Status.SKIP,
                            f"NCCL all-reduce not run: {fabric.probes_skipped or 'no facts'}")]
        main, control = _arm(arms.get("p2p")), _arm(arms.get("p2p_disabled")) if arms.get("p2p_disabled") else None
        world = int((arms.get("p2p") or {}).get("world") or 1)
        found: list[Finding] = []
        if main["ok"]:
            busbw = main["busbw"]
            title = (f"NCCL {main['nccl'] or ''} all-reduce over {world} rank(s): 4 B and 16 MiB values right"
                     + (f", bus bandwidth {busbw:.1f} GB/s at 16 MiB" if busbw and world > 1
                        else f", {main['algbw']:.1f} GB/s through one rank (no peer traffic)" if main["algbw"] else "")
                     + (f"; NCCL_P2P_DISABLE=1: {control['busbw']:.1f} GB/s" if control and control["ok"]
                        and control["busbw"] else ""))
            found.append(Finding("fabric.nccl-ok", Status.PASS, title,
                                 evidence={"p2p": main, "p2p_disabled": control}))
            found += self._bandwidth(fabric, pairs, main, world)
            return found
        what = main["what"]
        if control is not None and control["ok"]:
            return [Finding(
                "fabric.nccl-p2p-broken", Status.FAIL,
                f"NCCL all-reduce over {world} GPUs {what} with peer-to-peer, and works with NCCL_P2P_DISABLE=1 "
                f"({control['busbw'] or 0:.1f} GB/s): the multi-GPU A6000 hang, `vllm serve` would hang at start",
                detail=P2P_HANG_FIX.source, evidence={"p2p": main, "p2p_disabled": control},
                remediation=self._p2p_fixes(fabric))]
        return [Finding(
            "fabric.nccl-failed", Status.FAIL,
            f"NCCL all-reduce over {world} rank(s) {what}"
            + (f"; the control arm (NCCL_P2P_DISABLE=1) {control['what']} too" if control is not None else ""),
            detail=main["stderr"], evidence={"p2p": main, "p2p_disabled": control},
            remediation=(Remediation("NCCL_DEBUG=INFO NCCL_NVLS_ENABLE=0 dflash-doctor --only fabric",
                                     "see where NCCL stops"),))]

    def _bandwidth(self, fabric: Fabric, pairs: Sequence[Mapping[str, Any]], main: Mapping[str, Any],
                   world: int) -> list[Finding]:
        busbw = main.get("busbw")
        if world < 2 or not busbw:
            return []
        rates = [r for r in (_link_rate(fabric, p) for p in pairs) if r]
        if not rates:
            return []
        slowest = min(rates, key=lambda r: r[0])
        floor = slowest[0] * LINK_FLOOR_FRACTION.value
        if busbw >= floor:
            return []
        return [Finding("fabric.bandwidth-low", Status.WARN,
                        f"NCCL all-reduce bus bandwidth {busbw:.1f} GB/s is below a tenth of the slowest link's "
                        f"{slowest[0]:.0f} GB/s ({slowest[1]})",
                        detail=f"{LINK_FLOOR_FRACTION.source}. {PCIE_GBPS_PER_LANE.source}. {NVLINK_GBPS_PER_LINK.source}",
                        evidence={"busbw_gbps": busbw, "link_gbps": slowest[0], "link": slowest[1]})]

    # ------------------------------------------------------------------------------------------- host

    def _host(self, fabric: Fabric, tp: int, group: Sequence[int],
              devices: Sequence[GpuDevice]) -> list[Finding]:
        host = fabric.host or {}
        found: list[Finding] = []
        shm, container = host.get("shm") or {}, host.get("container") or {}
        total = shm.get("total_bytes")
        need = vllm_shm_need(tp)
        where = ("a container" + (" sharing the host's IPC namespace (--ipc=host)" if container.get("host_ipc_namespace")
                                  else " with its own IPC namespace") if container.get("in_container") else "the host")
        fixes = (Remediation("docker run --ipc=host ...", "share the host's /dev/shm"),
                 Remediation(f"docker run --shm-size={max(1, -(-need // GIB))}g ...", "or give the container enough"))
        if not isinstance(total, int):
            found.append(Finding("fabric.shm", Status.WARN if tp > 1 else Status.PASS,
                                 f"/dev/shm: size not known ({shm.get('error') or 'not mounted'}), in {where}",
                                 evidence={"shm": shm, "container": container}))
        elif tp > 1 and total <= DOCKER_SHM_DEFAULT.value:
            found.append(Finding("fabric.shm-small", Status.FAIL,
                                 f"/dev/shm is {_mib(total)} (Docker's default) in {where}; vLLM at TP {tp} maps up to "
                                 f"{_mib(need)} there and NCCL its own buffers: `ncclShmOpen` fails or a worker dies "
                                 "of SIGBUS", detail=f"{DOCKER_SHM_DEFAULT.source}. {VLLM_SHM_RINGS.source}",
                                 evidence={"shm": shm, "container": container, "need_bytes": need}, remediation=fixes))
        elif total < need:
            found.append(Finding("fabric.shm-small", Status.WARN,
                                 f"/dev/shm is {_mib(total)} in {where}, below the {_mib(need)} vLLM maps at TP {tp}",
                                 detail=f"{VLLM_SHM_RINGS.source} ({VLLM_SHM_RINGS.read_from}); {VLLM_SHM_RINGS.note}",
                                 evidence={"shm": shm, "container": container, "need_bytes": need}, remediation=fixes))
        else:
            found.append(Finding("fabric.shm", Status.PASS,
                                 f"/dev/shm: {_mib(total)} ({_mib(shm.get('free_bytes') or 0)} free), in {where}; vLLM "
                                 f"maps up to {_mib(need)} at TP {tp}" + (" (one process: none)" if tp == 1 else ""),
                                 detail=f"{VLLM_SHM_RINGS.source} ({VLLM_SHM_RINGS.read_from})",
                                 evidence={"shm": shm, "container": container, "need_bytes": need}))
        found += self._iommu_acs(host, group, devices)
        env = host.get("env") or {}
        switched = {k: v for k, v in env.items() if k != "CUDA_VISIBLE_DEVICES"}
        if switched.get("NCCL_P2P_DISABLE") not in (None, "0") or switched.get("NCCL_SHM_DISABLE") not in (None, "0"):
            found.append(Finding("fabric.env-switches", Status.WARN,
                                 "paths switched off: " + ", ".join(f"{k}={v}" for k, v in switched.items())
                                 + ": all-reduce goes the slower way (fine as a workaround, not as a default)",
                                 detail="; ".join(f"{k}: {PATH_SWITCHES.value[k]}" for k in switched),
                                 evidence={"env": env}))
        elif switched:
            found.append(Finding("fabric.env", Status.PASS, "NCCL/vLLM settings: "
                                 + ", ".join(f"{k}={v}" for k, v in switched.items()), evidence={"env": env}))
        return found

    def _iommu_acs(self, host: Mapping[str, Any], group: Sequence[int],
                   devices: Sequence[GpuDevice]) -> list[Finding]:
        iommu, acs = host.get("iommu") or {}, host.get("acs") or {}
        bdfs = [sysfs_bdf(d.pci_bus_id) for d in devices if d.index in group and d.pci_bus_id]
        types = {b: ((iommu.get("gpus") or {}).get(b) or {}).get("type") for b in bdfs}
        translating = sorted(b for b, t in types.items() if t and t.startswith("DMA"))
        redirecting = sorted({br for b in bdfs for br in ((acs.get("paths") or {}).get(b) or [])
                              if "p2p_request_redirect" in (((acs.get("bridges") or {}).get(br) or {}).get("enabled") or [])})
        summary = (f"IOMMU: {', '.join(f'{k}={v}' for k, v in (iommu.get('cmdline') or {}).items()) or 'nothing on the kernel command line'}"
                   f", IOMMU units {', '.join(iommu.get('units') or []) or 'none'}, GPU "
                   + (", ".join(f"{b} in a {t} group" if t else f"{b} in no IOMMU group" for b, t in types.items())
                      or "none"))
        if len(group) >= 2 and redirecting:
            return [Finding("fabric.acs-redirect", Status.WARN,
                            f"ACS redirects peer traffic on bridge(s) {', '.join(redirecting)} between the GPUs"
                            + (" and the IOMMU translates for them: peer writes can be dropped" if translating else
                               ": peer traffic goes up to the root complex"),
                            detail=f"{ACS_REDIRECT.source}. {P2P_HANG_FIX.source}. {summary}",
                            evidence={"iommu": dict(iommu), "acs": dict(acs)},
                            remediation=tuple(Remediation(f"sudo setpci -s {quote(str(b))} ECAP_ACS+0x6.w=0000",
                                                          "ACS redirect off until the next boot (BIOS for good)")
                                              for b in redirecting))]
        return [Finding("fabric.iommu", Status.PASS, summary + ("; no ACS redirect above the GPUs"
                                                                 if len(group) >= 2 else ""),
                        evidence={"iommu": dict(iommu), "acs": dict(acs)})]

    # -------------------------------------------------------------------------------- vLLM's choice

    def _allreduce_choice(self, fabric: Fabric, tp: int, gpus: int, pairs: Sequence[Mapping[str, Any]],
                          argv: list[str]) -> Finding:
        rules = CUSTOM_ALL_REDUCE_RULES.value
        env = (fabric.host or {}).get("env") or {}
        peer = ((fabric.peer or {}).get("data") or {}).get("pairs") or []
        all_nvlink = bool(pairs) and all(p.get("p2p", {}).get("nvlink") == "ok" for p in pairs)
        if tp == 1:
            why = "TP 1: one process, no all-reduce"
            choice = "none"
        elif gpus < tp:
            why, choice = f"only {gpus} GPU(s) visible for TP {tp}: vLLM stops before it picks one", "not judged"
        elif "--disable-custom-all-reduce" in argv:
            why, choice = "--disable-custom-all-reduce is given", "NCCL"
        elif tp not in rules["world_sizes"]:  # type: ignore[operator]
            why, choice = f"custom all-reduce supports world sizes {rules['world_sizes']}", "NCCL"
        elif tp > rules["pcie_only_max"] and not all_nvlink:  # type: ignore[operator]
            why, choice = "custom all-reduce is off for more than two PCIe-only GPUs", "NCCL"
        elif peer and not all(p.get("can_access_peer") for p in peer):
            why, choice = "a pair has no peer access", "NCCL"
        else:
            skip = env.get("VLLM_SKIP_P2P_CHECK", "1") == "1"
            why = ("every pair " + ("on NVLink" if all_nvlink else "with peer access") + "; the peer test is "
                   + ("skipped (VLLM_SKIP_P2P_CHECK=1, the default): the driver's answer is trusted" if skip
                      else "vLLM's own (VLLM_SKIP_P2P_CHECK=0)"))
            choice = "vLLM's custom all-reduce (NCCL above its size limit)"
        return Finding("fabric.allreduce-choice", Status.PASS, f"vLLM's all-reduce at TP {tp}: {choice} ({why})",
                       detail=CUSTOM_ALL_REDUCE_RULES.source, evidence={"choice": choice, "why": why})


def _custom_allreduce_on_geforce_p2p(choice: Finding, devices: Sequence[GpuDevice], group: Sequence[int],
                                     pairs: Sequence[Mapping[str, Any]], argv: list[str],
                                     vllm: Mapping[str, Any] | None) -> list[Finding]:
    """knowledge.dflash_reports.KNOWN_BAD's custom-allreduce-geforce-p2p, judged from the GPU and peer-path facts."""
    entry = next(e for e in KNOWN_BAD.value if e.condition == "geforce-pcie-p2p-custom-all-reduce")
    if not str(choice.evidence.get("choice") or "").startswith("vLLM's custom all-reduce"):
        return []
    version = str(vllm.get("version") or "") if vllm and vllm.get("installed") else ""
    if version and not (version_tuple(entry.first) <= version_tuple(version)
                        and (entry.last is None or version_tuple(version) <= version_tuple(entry.last))):
        return []
    members = [d for d in devices if d.index in group]
    arch = {f"{d.compute_capability[0]}.{d.compute_capability[1]}" for d in members if d.compute_capability}
    geforce = [d for d in members if "geforce" in (d.name or "").lower()]
    pcie_peers = [p for p in pairs if not p.get("nvlinks")
                  and all((p.get("p2p") or {}).get(k) == "ok" for k in ("read", "write"))]
    if len(members) < 2 or len(geforce) < len(members) or not arch <= set(entry.arch) or not pcie_peers:
        return []
    names = ", ".join(sorted({d.name or "" for d in members}))
    return [Finding(
        "fabric.custom-allreduce-geforce-p2p", Status.WARN,
        f"{entry.title}: TP {len(members)} over {names} (sm_{'/'.join(sorted(a.replace('.', '') for a in arch))}) "
        f"with PCIe peer access granted, and vLLM{' ' + version if version else ''} picks its custom all-reduce",
        detail=f"Reported in {entry.source}.",
        evidence={"id": entry.id, "gpus": [{"index": d.index, "name": d.name, "compute_capability":
                                            d.compute_capability} for d in members],
                  "pairs": [dict(p) for p in pcie_peers], "vllm": version or None,
                  "versions": [entry.first, entry.last], "arch": list(entry.arch)},
        remediation=(Remediation(with_switch(argv, entry.remedy) if argv else f"vllm serve ... {entry.remedy}",
                                 "NCCL does the all-reduce, over the same peer path, with right values"),))]


def _peer_mib(data: Mapping[str, Any]) -> int:
    pairs = data.get("pairs") or []
    return int((pairs[0].get("bytes") or 0) // MIB) if pairs else 0


def _arm(arm: Mapping[str, Any] | None) -> dict[str, Any]:
    """One all-reduce arm, summed up: ok, what went wrong, the bandwidths (rank 0's)."""
    ranks = list((arm or {}).get("ranks") or [])
    hung = [i for i, r in enumerate(ranks) if (r.get("run") or {}).get("timed_out")]
    datas = [r.get("data") or {} for r in ranks]
    wrong = [c for d in datas for c in d.get("checks") or [] if c.get("mismatched")]
    errors = [d.get("error") or (r.get("run") or {}).get("error") for r, d in zip(ranks, datas)
              if d.get("error") or (r.get("run") or {}).get("error")]
    stderr = "\n".join(str((r.get("run") or {}).get("stderr") or "")[-800:] for r in ranks)
    if not ranks:
        what = "did not run"
    elif hung:
        stages = sorted({line.rsplit(": ", 1)[-1] for r in ranks for line in
                         str((r.get("run") or {}).get("stderr") or "").splitlines() if line.startswith("fabric-nccl")})
        what = f"hung: rank(s) {', '.join(map(str, hung))} killed at the timeout" + (
            f" (last stage: {stages[-1]})" if stages else "")
    elif wrong:
        what = f"returned wrong values ({wrong[0]['mismatched']} of {wrong[0]['bytes'] // 4} at {wrong[0]['bytes']} B)"
    elif errors:
        what = f"failed: {errors[0]}"
    else:
        what = "ok"
    timing = datas[0].get("timing") if datas else None
    return {"ok": what == "ok", "what": what, "hung_ranks": hung,
            "busbw": (timing or {}).get("busbw_gbps"), "algbw": (timing or {}).get("algbw_gbps"),
            "nccl": datas[0].get("nccl_version") if datas else None, "stderr": stderr}


def _link_rate(fabric: Fabric, pair: Mapping[str, Any]) -> tuple[float, str] | None:
    if pair.get("nvlinks"):
        per = NVLINK_GBPS_PER_LINK.value.get(int(pair.get("nvlink_version") or 0))
        return (per * int(pair["nvlinks"]), f"{pair['nvlinks']} NVLink(s)") if per else None
    devices = {d.get("index"): d.get("pcie") or {} for d in (fabric.nvml or {}).get("devices") or []}
    rates = []
    for index in pair.get("gpus") or []:
        pcie = devices.get(index) or {}
        per = PCIE_GBPS_PER_LANE.value.get(pcie.get("gen_max") or 0)
        if per and isinstance(pcie.get("width_now"), int):
            rates.append((per * pcie["width_now"], f"PCIe gen {pcie['gen_max']} x{pcie['width_now']}"))
    return min(rates, key=lambda r: r[0]) if rates else None
