"""The declared shape of the `fabric` section (facts.fabric.fabric): the group tested, NVML's view of each device and
pair, the machine around the GPUs (facts.fabric.machine), and the peer-copy and NCCL probe runs
(probes/fabric_peer.py, probes/fabric_nccl.py). Each part is typed to its leaves; every field has the default
an older report or a run that stopped early leaves it at."""

from __future__ import annotations

from dataclasses import field
from typing import ClassVar

from dflash_doctor.facts.python.environment_shapes import ProbeRun
from dflash_doctor.facts.shape import Shape, frozen_dataclass

__all__ = [
    "AcsBridge", "AcsFacts", "ContainerFacts", "DevicePcie", "Fabric", "FabricDevice", "FabricMachine", "FabricNvml",
    "IommuFacts", "IommuGroup", "NcclArm", "NcclArms", "NcclCheck", "NcclRank", "NcclRankData", "NcclTiming",
    "NvLinkState", "NvmlPair", "P2pStatus", "PeerCopy", "PeerData", "PeerFacts", "ShmFacts", "ShmMount",
]


# ------------------------------------------------------------------------------------------------- NVML


@frozen_dataclass(frozen=True)
class DevicePcie(Shape):
    """A GPU's PCIe link now and at most (None where NVML does not answer)."""

    gen_now: int | None = None
    gen_max: int | None = None
    gpu_gen_max: int | None = None
    width_now: int | None = None
    width_max: int | None = None


@frozen_dataclass(frozen=True)
class NvLinkState(Shape):
    link: int = 0
    up: bool = False
    version: int | None = None
    remote_bus_id: str | None = None


@frozen_dataclass(frozen=True)
class FabricDevice(Shape):
    index: int = 0
    pci_bus_id: str | None = None
    pcie: DevicePcie = field(default_factory=DevicePcie)
    nvlinks: list[NvLinkState] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)
    """The queries NVML refused, by name, with its error's name."""


@frozen_dataclass(frozen=True)
class P2pStatus(Shape):
    """nvmlDeviceGetP2PStatus for each capability: "ok", "chipset_not_supported", ... (the raw number when
    pynvml names no status for it), None when the query failed."""

    read_: str | int | None = field(default=None, metadata={"key": "read"})
    """The read capability's ("read" in the JSON; `read` is Shape's)."""
    write: str | int | None = None
    nvlink: str | int | None = None
    atomics: str | int | None = None

    def bad(self) -> dict[str, str | int]:
        """Read and write where the driver says other than ok."""
        return {k: v for k, v in (("read", self.read_), ("write", self.write)) if v not in ("ok", None)}


@frozen_dataclass(frozen=True)
class NvmlPair(Shape):
    gpus: list[int] = field(default_factory=list)
    topology: str | int | None = None
    """The common ancestor: "internal", "single_switch", ..., "system" (its number when unnamed)."""
    p2p: P2pStatus = field(default_factory=P2pStatus)
    nvlinks: int = 0
    """The NVLinks up between the two."""
    nvlink_version: int | None = None
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return "-".join(str(g) for g in self.gpus)


@frozen_dataclass(frozen=True)
class FabricNvml(Shape):
    ok: bool = False
    error: str | None = None
    devices: list[FabricDevice] = field(default_factory=list)
    pairs: list[NvmlPair] = field(default_factory=list)


# ------------------------------------------------------------------------ the machine (the section's key `host`)


@frozen_dataclass(frozen=True)
class ShmMount(Shape):
    fstype: str | None = None
    options: str = ""
    size_option: str | None = None
    size_option_bytes: int | None = None


@frozen_dataclass(frozen=True)
class ShmFacts(Shape):
    mount: ShmMount | None = None
    total_bytes: int | None = None
    free_bytes: int | None = None
    source: str | None = None
    error: str | None = None


@frozen_dataclass(frozen=True)
class ContainerFacts(Shape):
    markers: list[str] = field(default_factory=list)
    cgroup_runtimes: list[str] = field(default_factory=list)
    in_container: bool = False
    ipc_namespace: str | None = None
    host_ipc_namespace: bool | None = None


@frozen_dataclass(frozen=True)
class IommuGroup(Shape):
    group: str | None = None
    type: str | None = None
    """The IOMMU group's type: "DMA", "DMA-FQ" (translating), "identity" (passthrough)."""


@frozen_dataclass(frozen=True)
class IommuFacts(Shape):
    cmdline: dict[str, str] = field(default_factory=dict)
    units: list[str] | None = None
    groups: int | None = None
    gpus: dict[str, IommuGroup] = field(default_factory=dict)
    """By the GPU's sysfs address ("0000:1b:00.0")."""


@frozen_dataclass(frozen=True)
class AcsBridge(Shape):
    """A PCI device above a GPU and its ACS capability (facts.fabric.machine.parse_acs)."""

    readable: bool = False
    why: str | None = None
    bridge: bool | None = None
    acs: bool | None = None
    offset: int | None = None
    capability: int | None = None
    control: int | None = None
    extended_capabilities: list[int] = field(default_factory=list)
    enabled: list[str] = field(default_factory=list)
    """The ACS control bits set ("p2p_request_redirect", ...)."""


@frozen_dataclass(frozen=True)
class AcsFacts(Shape):
    paths: dict[str, list[str] | None] = field(default_factory=dict)
    """Each GPU's devices above it, nearest first (None when its sysfs path was not found)."""
    bridges: dict[str, AcsBridge] = field(default_factory=dict)

    def redirecting(self, bdfs: list[str] | None = None) -> list[str]:
        """The bridges with ACS P2P Request Redirect on: those above the GPUs `bdfs` (sorted), or every one (as
        listed)."""
        if bdfs is None:
            return [b for b, bridge in self.bridges.items() if "p2p_request_redirect" in bridge.enabled]
        above = {b for gpu in bdfs for b in self.paths.get(gpu) or []}
        return sorted(b for b in above if b in self.bridges and "p2p_request_redirect" in self.bridges[b].enabled)


@frozen_dataclass(frozen=True)
class FabricMachine(Shape):
    shm: ShmFacts = field(default_factory=ShmFacts)
    container: ContainerFacts = field(default_factory=ContainerFacts)
    iommu: IommuFacts = field(default_factory=IommuFacts)
    acs: AcsFacts = field(default_factory=AcsFacts)
    env: dict[str, str] = field(default_factory=dict)
    """The NCCL_*/VLLM_* settings that switch a path off (knowledge.fabric.PATH_SWITCHES)."""

    def setting(self, name: str, default: str | None = None) -> str | None:
        """One of those settings, `default` where it is not set."""
        return self.env.get(name, default)


# ------------------------------------------------------------------------------------------------- peer


@frozen_dataclass(frozen=True)
class PeerCopy(Shape):
    """One directed pair of the peer probe: access, and the write-and-verify copy."""

    src: int = 0
    dst: int = 0
    can_access_peer: bool | None = None
    bytes: int | None = None
    mismatched_on_dst: int | None = None
    mismatched_back: int | None = None
    verified: bool | None = None
    seconds: float | None = None
    error: str | None = None

    @property
    def name(self) -> str:
        return f"cuda:{self.src} -> cuda:{self.dst}"


@frozen_dataclass(frozen=True)
class PeerData(Shape):
    ok: bool = False
    torch: str | None = None
    device_count: int | None = None
    world: int | None = None
    pairs: list[PeerCopy] = field(default_factory=list)
    import_error: str | None = None
    error: str | None = None


@frozen_dataclass(frozen=True)
class PeerFacts(Shape):
    skipped: str | None = None
    """Why no probe ran ("TP 1: no pair of GPUs")."""
    run: ProbeRun | None = None
    data: PeerData | None = None


# ------------------------------------------------------------------------------------------------- NCCL


@frozen_dataclass(frozen=True)
class NcclCheck(Shape):
    """One all-reduce's values: each rank contributed rank + 1."""

    bytes: int = 0
    expected: float = 0.0
    mismatched: int = 0
    first: float | None = None


@frozen_dataclass(frozen=True)
class NcclTiming(Shape):
    bytes: int = 0
    iterations: int = 0
    seconds: float = 0.0
    algbw_gbps: float | None = None
    busbw_gbps: float | None = None
    """nccl-tests' bus bandwidth: bytes x 2(n-1)/n / seconds."""


@frozen_dataclass(frozen=True)
class NcclRankData(Shape):
    rank: int = 0
    world: int = 1
    ok: bool = False
    stage: str = ""
    env: dict[str, str] = field(default_factory=dict)
    torch: str | None = None
    nccl_version: str | None = None
    init_s: float | None = None
    checks: list[NcclCheck] = field(default_factory=list)
    timing: NcclTiming | None = None
    seconds: float | None = None
    error: str | None = None
    traceback: str | None = None


@frozen_dataclass(frozen=True)
class NcclRank(Shape):
    run: ProbeRun = field(default_factory=ProbeRun)
    data: NcclRankData | None = None


@frozen_dataclass(frozen=True)
class NcclArm(Shape):
    """One all-reduce over the group, one probe process per rank."""

    world: int = 1
    env: dict[str, str] = field(default_factory=dict)
    seconds: float | None = None
    ranks: list[NcclRank] = field(default_factory=list)


@frozen_dataclass(frozen=True)
class NcclArms(Shape):
    p2p: NcclArm | None = None
    """As vLLM will run it."""
    p2p_disabled: NcclArm | None = None
    """The control arm: NCCL_P2P_DISABLE=1 (only for a group of two or more)."""


# ----------------------------------------------------------------------------------------------- section


@frozen_dataclass(frozen=True)
class Fabric(Shape):
    SECTION: ClassVar[str] = "fabric"

    skipped: str | None = None
    """Why nothing was collected (--no-gpu)."""
    requested_tp: int = 1
    tp_source: str | None = None
    """Where the TP size came from: "serve command" or "visible GPUs"."""
    nvml: FabricNvml = field(default_factory=FabricNvml)
    host: FabricMachine = field(default_factory=FabricMachine)
    probes_skipped: str | None = None
    peer: PeerFacts = field(default_factory=PeerFacts)
    nccl_world: int | None = None
    nccl: NcclArms = field(default_factory=NcclArms)
    seconds: dict[str, float] = field(default_factory=dict)

    def devices(self) -> dict[int, FabricDevice]:
        return {d.index: d for d in self.nvml.devices}
