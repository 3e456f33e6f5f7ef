"""The machine around a tensor-parallel group, read from the kernel's own files (section `fabric`, key `host`).

`/dev/shm` (its mount and size), whether this is a container and whether it shares the machine's
own IPC namespace (`--ipc=host`), the IOMMU (kernel command line, `/sys/class/iommu`, each GPU's IOMMU group type),
ACS on the PCIe bridges above each GPU (parsed from the bridge's PCI configuration space in sysfs), and the
NCCL_*/VLLM_* settings that switch a path off. Every reader takes `root` (default `/`), the seam the tests
use to read files copied from real machines; a file that is missing or unreadable is a fact (None, or the
error), never an exception. Reads are bounded: configuration space is 4096 bytes at most.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from dflash_doctor.knowledge.fabric import INIT_IPC_NAMESPACE_INODE, PATH_SWITCHES

__all__ = ["acs_facts", "container_facts", "iommu_facts", "machine_facts", "shm_facts", "switch_env", "sysfs_bdf"]

_CONFIG_MAX = 4096
_ACS_CAP_ID = 0x000D
# ACS control bits (PCIe Base Specification, "ACS Extended Capability"): the ones that send peer traffic up
# to the root complex instead of across the switch.
_ACS_BITS = {"source_validation": 0, "translation_blocking": 1, "p2p_request_redirect": 2,
             "p2p_completion_redirect": 3, "upstream_forwarding": 4, "p2p_egress_control": 5,
             "direct_translated_p2p": 6}
_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


def _read_text(path: Path, limit: int = 1 << 20) -> str | None:
    try:
        with open(path, "rb") as handle:
            return handle.read(limit).decode("utf-8", "replace")
    except OSError:
        return None


def sysfs_bdf(nvml_bus_id: str) -> str:
    """NVML's "00000000:1B:00.0" as sysfs names it: "0000:1b:00.0"."""
    parts = nvml_bus_id.strip().lower().split(":")
    domain = parts[0] if len(parts) == 3 else "0"
    return f"{int(domain, 16):04x}:{parts[-2]}:{parts[-1]}"


# ---------------------------------------------------------------------------------------------- /dev/shm


def shm_facts(root: Path = Path("/")) -> dict[str, Any]:
    """The /dev/shm mount (the last one listed wins, as the kernel stacks them) and its size and free space."""
    mount: dict[str, Any] | None = None
    for line in (_read_text(root / "proc/self/mountinfo") or "").splitlines():
        fields = line.split(" - ", 1)
        left = fields[0].split()
        if len(left) >= 5 and left[4] == "/dev/shm" and len(fields) == 2:
            right = fields[1].split()
            options = right[2] if len(right) > 2 else ""
            size = next((o[5:] for o in options.split(",") if o.startswith("size=")), None)
            mount = {"fstype": right[0] if right else None, "options": options, "size_option": size,
                     "size_option_bytes": _size_bytes(size)}
    facts: dict[str, Any] = {"mount": mount, "total_bytes": None, "free_bytes": None, "source": None}
    if root == Path("/"):
        try:
            stat = os.statvfs("/dev/shm")
            facts.update(total_bytes=stat.f_frsize * stat.f_blocks, free_bytes=stat.f_frsize * stat.f_bavail,
                         source="statvfs(/dev/shm)")
        except OSError as exc:
            facts["error"] = f"statvfs(/dev/shm): {exc.strerror or exc}"
    if facts["total_bytes"] is None and mount and mount["size_option_bytes"] is not None:
        facts.update(total_bytes=mount["size_option_bytes"], source="mountinfo size=")
    return facts


def _size_bytes(option: str | None) -> int | None:
    """tmpfs's size= (k, m, g suffixes; a % of RAM is not a size)."""
    if not option:
        return None
    match = re.fullmatch(r"(\d+)([kKmMgG]?)", option)
    if not match:
        return None
    return int(match.group(1)) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[match.group(2).lower()]


# --------------------------------------------------------------------------------------------- container


def container_facts(root: Path = Path("/")) -> dict[str, Any]:
    markers = [m for m in (".dockerenv", "run/.containerenv") if (root / m).exists()]
    cgroup = _read_text(root / "proc/1/cgroup", 1 << 16) or ""
    runtimes = sorted({w for w in ("docker", "kubepods", "containerd", "lxc", "libpod", "crio") if w in cgroup})
    try:
        ipc = os.readlink(root / "proc/self/ns/ipc")
    except OSError:
        ipc = None
    inode = re.fullmatch(r"ipc:\[(\d+)\]", ipc or "")
    init_ipc = int(inode.group(1)) == INIT_IPC_NAMESPACE_INODE.value if inode else None
    return {"markers": markers, "cgroup_runtimes": runtimes, "in_container": bool(markers or runtimes),
            "ipc_namespace": ipc, "host_ipc_namespace": init_ipc}


# ------------------------------------------------------------------------------------------------- IOMMU


_IOMMU_WORDS = ("intel_iommu", "amd_iommu", "iommu", "iommu.passthrough", "iommu.strict")


def iommu_facts(bdfs: Iterable[str] = (), root: Path = Path("/")) -> dict[str, Any]:
    cmdline = (_read_text(root / "proc/cmdline", 1 << 16) or "").split(" -- ")[0].split()
    settings = {k: v for k, _, v in (w.partition("=") for w in cmdline) if k in _IOMMU_WORDS}
    try:
        units = sorted(n for n in os.listdir(root / "sys/class/iommu") if not n.startswith("."))
    except OSError:
        units = None
    try:
        groups = len(os.listdir(root / "sys/kernel/iommu_groups"))
    except OSError:
        groups = None
    per_gpu: dict[str, Any] = {}
    for bdf in bdfs:
        device = root / "sys/bus/pci/devices" / bdf
        group_type = _read_text(device / "iommu_group/type", 256)
        try:
            group = os.path.basename(os.readlink(device / "iommu_group"))
        except OSError:
            group = None
        per_gpu[bdf] = {"group": group, "type": group_type.strip() if group_type else None}
    return {"cmdline": settings, "units": units, "groups": groups, "gpus": per_gpu}


# --------------------------------------------------------------------------------------------------- ACS


def _upstream_bridges(bdf: str, root: Path) -> list[str] | None:
    """The PCI devices above a GPU, nearest first, from its resolved sysfs path."""
    try:
        resolved = os.path.realpath(root / "sys/bus/pci/devices" / bdf)
    except OSError:
        return None
    if not os.path.exists(resolved):
        return None
    parts = [p for p in resolved.split(os.sep) if _BDF.match(p)]
    return list(reversed(parts[:-1])) if parts and parts[-1] == bdf else None


def parse_acs(config: bytes) -> dict[str, Any]:
    """The ACS capability and control bits from a device's configuration space (extended space from 0x100)."""
    if len(config) < 0x40:
        return {"readable": False, "why": "no configuration space"}
    is_bridge = (config[0x0E] & 0x7F) == 1
    if len(config) <= 0x100:
        return {"readable": False, "bridge": is_bridge,
                "why": f"{len(config)} bytes of configuration space: no extended space (a conventional PCI device, "
                "or read without root)"}
    offset = 0x100
    walked: list[int] = []
    while 0x100 <= offset <= len(config) - 8 and len(walked) < 64:
        header = struct.unpack_from("<I", config, offset)[0]
        if header in (0, 0xFFFFFFFF):
            break
        walked.append(header & 0xFFFF)
        if header & 0xFFFF == _ACS_CAP_ID:
            capability, control = struct.unpack_from("<HH", config, offset + 4)
            return {"readable": True, "bridge": is_bridge, "acs": True, "offset": offset,
                    "capability": capability, "control": control, "extended_capabilities": walked,
                    "enabled": sorted(n for n, bit in _ACS_BITS.items() if control >> bit & 1)}
        offset = header >> 20
    return {"readable": True, "bridge": is_bridge, "acs": False, "extended_capabilities": walked}


def acs_facts(bdfs: Iterable[str], root: Path = Path("/")) -> dict[str, Any]:
    """For each GPU, the devices above it and the ACS state of each (each bridge read once)."""
    paths: dict[str, Any] = {}
    bridges: dict[str, Any] = {}
    for bdf in bdfs:
        upstream = _upstream_bridges(bdf, root)
        paths[bdf] = upstream
        for bridge in upstream or ():
            if bridge not in bridges:
                try:
                    with open(root / "sys/bus/pci/devices" / bridge / "config", "rb") as handle:
                        bridges[bridge] = parse_acs(handle.read(_CONFIG_MAX))
                except OSError as exc:
                    bridges[bridge] = {"readable": False, "why": exc.strerror or str(exc)}
    return {"paths": paths, "bridges": bridges}


# ----------------------------------------------------------------------------------------- the settings


def switch_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The NCCL_*/VLLM_* settings known to switch a path off or change which one is taken (values only of
    those: other variables of these prefixes may hold anything)."""
    return {name: environ[name] for name in sorted(PATH_SWITCHES.value) if name in environ}


def machine_facts(bdfs: Iterable[str], environ: Mapping[str, str], root: Path = Path("/")) -> dict[str, Any]:
    bdfs = list(bdfs)
    return {"shm": shm_facts(root), "container": container_facts(root), "iommu": iommu_facts(bdfs, root),
            "acs": acs_facts(bdfs, root), "env": switch_env(environ)}
