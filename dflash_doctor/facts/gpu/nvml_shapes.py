"""The shape of the `gpu` section (`facts.gpu.nvml`): what NVML says about the driver and each device.

A query NVML does not support or that failed leaves its value None and is named in the device's (or the
system's) `unsupported` or `errors`; the section under --no-gpu is only `{"skipped": "--no-gpu"}`.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, ClassVar

from dflash_doctor.facts.shape import Shape, frozen_dataclass

__all__ = ["Ecc", "Gpu", "GpuDevice", "GpuMachine", "GpuMemory", "GpuPower", "GpuProcess", "GpuTemperature",
           "MachineLimits", "Mig", "MigDevice", "NvLink", "Nvml", "NvmlError", "PcieLink", "RemappedRows", "Rlimit"]


@frozen_dataclass(frozen=True)
class NvmlError(Shape):
    kind: str = ""
    """"init", "error" or "timeout"."""
    code: int | None = None
    name: str | None = None
    message: str = ""
    loader: Any = None
    """The dynamic loader's own words when libnvidia-ml could not be found."""


@frozen_dataclass(frozen=True)
class Nvml(Shape):
    ok: bool = False
    error: NvmlError | None = None
    library: str | None = None
    nvml_version: str | None = None
    pynvml_version: str | None = None
    unsupported: list[str] = field(default_factory=list)
    errors: dict[str, Any] = field(default_factory=dict)


@frozen_dataclass(frozen=True)
class GpuMemory(Shape):
    total: int = 0
    used: int = 0
    free: int = 0
    reserved: int | None = None


@frozen_dataclass(frozen=True)
class MigDevice(Shape):
    slot: int = 0
    uuid: str | None = None
    memory_total: int | None = None


@frozen_dataclass(frozen=True)
class Mig(Shape):
    current: bool | None = None
    pending: bool | None = None
    devices: list[MigDevice] = field(default_factory=list)


@frozen_dataclass(frozen=True)
class Ecc(Shape):
    enabled: bool | None = None
    pending: bool | None = None
    volatile_uncorrected: int | None = None
    aggregate_uncorrected: int | None = None
    """Uncorrected ECC errors over the GPU's lifetime (persist across reboots); None in older reports."""


@frozen_dataclass(frozen=True)
class RemappedRows(Shape):
    correctable: int = 0
    uncorrectable: int = 0
    pending: bool = False
    failure: bool = False


@frozen_dataclass(frozen=True)
class GpuPower(Shape):
    """Power limits in milliwatts, as NVML gives them."""

    limit_mw: int | None = None
    """The power management limit now (`nvidia-smi -pl` sets it)."""
    default_limit_mw: int | None = None
    """The limit the board boots with."""
    enforced_limit_mw: int | None = None
    """The limit the driver enforces after every limiter."""


@frozen_dataclass(frozen=True)
class GpuTemperature(Shape):
    """Degrees C: the GPU die now, and the GPU's own slowdown and shutdown thresholds."""

    gpu_c: int | None = None
    slowdown_c: int | None = None
    shutdown_c: int | None = None


@frozen_dataclass(frozen=True)
class PcieLink(Shape):
    """The PCIe link now and the most it can be: `max_*` for this GPU in this slot, `gpu_max_generation` for
    the GPU alone."""

    generation: int | None = None
    max_generation: int | None = None
    gpu_max_generation: int | None = None
    width: int | None = None
    max_width: int | None = None
    replay_counter: int | None = None


@frozen_dataclass(frozen=True)
class NvLink(Shape):
    """One NVLink that NVML lists, with its error counters (None where the query is not supported)."""

    link: int = 0
    active: bool = False
    replay: int | None = None
    recovery: int | None = None
    crc_flit: int | None = None
    crc_data: int | None = None


@frozen_dataclass(frozen=True)
class GpuProcess(Shape):
    """A process holding memory on the device (`own`: the doctor or one of its probes)."""

    pid: int = 0
    kind: str = ""
    name: str | None = None
    used_bytes: int | None = None
    own: bool = False


@frozen_dataclass(frozen=True)
class GpuDevice(Shape):
    index: int = 0
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    compute_capability: list[int] | None = None
    memory: GpuMemory | None = None
    persistence_mode: bool | None = None
    mig: Mig | None = None
    ecc: Ecc | None = None
    retired_pages_pending: bool | None = None
    remapped_rows: RemappedRows | None = None
    clock_event_reasons: int | None = None
    """NVML's bit mask of why the clocks are held down now (knowledge.health.CLOCK_EVENT_REASONS)."""
    power: GpuPower | None = None
    temperature: GpuTemperature | None = None
    pcie: PcieLink | None = None
    nvlinks: list[NvLink] = field(default_factory=list)
    processes: list[GpuProcess] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)
    errors: dict[str, Any] = field(default_factory=dict)


@frozen_dataclass(frozen=True)
class Rlimit(Shape):
    """A resource limit of the doctor's process (inherited by what it starts); -1 is unlimited."""

    soft: int | None = None
    hard: int | None = None


@frozen_dataclass(frozen=True)
class MachineLimits(Shape):
    """The machine's limits that vLLM and NCCL run into; None where they could not be read."""

    nofile: Rlimit | None = None
    memlock: Rlimit | None = None
    """Bytes."""
    transparent_hugepage: str | None = None
    """The mode in effect ("always", "madvise", "never"), from /sys/kernel/mm/transparent_hugepage/enabled."""
    errors: dict[str, str] = field(default_factory=dict)


@frozen_dataclass(frozen=True)
class GpuMachine(Shape):
    """What the kernel says about the driver, independent of NVML, and the machine's limits."""

    kernel_module: str | None = None
    dev_nodes: list[str] = field(default_factory=list)
    limits: MachineLimits | None = None
    """None in reports from before the doctor read them."""


@frozen_dataclass(frozen=True)
class ConfCompute(Shape):
    """nvmlSystemGetConfComputeState: ccFeature (0 off; vLLM 0.34 counts any other value as on), environment,
    devToolsMode, as NVML's enums number them."""

    cc_feature: int | None = None
    environment: int | None = None
    dev_tools_mode: int | None = None

    @property
    def on(self) -> bool | None:
        return None if self.cc_feature is None else self.cc_feature != 0


@frozen_dataclass(frozen=True)
class Gpu(Shape):
    SECTION: ClassVar[str] = "gpu"

    skipped: str | None = None
    """Why no GPU facts were gathered ("--no-gpu")."""
    nvml: Nvml | None = None
    driver_version: str | None = None
    cuda_driver_version_raw: int | None = None
    cuda_driver_version: str | None = None
    device_count: int | None = None
    devices: list[GpuDevice] = field(default_factory=list)
    conf_compute: ConfCompute | None = None
    """NVIDIA Confidential Computing (None: not asked, an older report, or NVML lacks the query)."""
    host: GpuMachine | None = None
    environ: dict[str, str | None] = field(default_factory=dict)
    """CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER, NVIDIA_VISIBLE_DEVICES, VLLM_CONFIDENTIAL_COMPUTE as the doctor
    saw them."""
    doctor_pid: int | None = None
    seconds: float | None = None

    @property
    def cuda_visible_devices(self) -> str | None:
        """CUDA_VISIBLE_DEVICES as the doctor saw it (None: unset)."""
        return self.environ.get("CUDA_VISIBLE_DEVICES")

    @property
    def cuda_device_order(self) -> str | None:
        """CUDA_DEVICE_ORDER as the doctor saw it (None: unset, CUDA's fastest-first order)."""
        return self.environ.get("CUDA_DEVICE_ORDER")
