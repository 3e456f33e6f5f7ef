"""The shape of the `gpu` section (`facts.nvml`): what NVML says about the driver and each device.

A query NVML does not support or that failed leaves its value None and is named in the device's (or the
system's) `unsupported` or `errors`; the section under --no-gpu is only `{"skipped": "--no-gpu"}`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from dflash_doctor.facts.shape import Shape

__all__ = ["Ecc", "Gpu", "GpuDevice", "GpuHost", "GpuMemory", "GpuProcess", "Mig", "MigDevice", "Nvml",
           "NvmlError", "RemappedRows"]


@dataclass(frozen=True)
class NvmlError(Shape):
    kind: str = ""
    """"init", "error" or "timeout"."""
    code: int | None = None
    name: str | None = None
    message: str = ""
    loader: Any = None
    """The dynamic loader's own words when libnvidia-ml could not be found."""


@dataclass(frozen=True)
class Nvml(Shape):
    ok: bool = False
    error: NvmlError | None = None
    library: str | None = None
    nvml_version: str | None = None
    pynvml_version: str | None = None
    unsupported: list[str] = field(default_factory=list)
    errors: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class GpuMemory(Shape):
    total: int = 0
    used: int = 0
    free: int = 0
    reserved: int | None = None


@dataclass(frozen=True)
class MigDevice(Shape):
    slot: int = 0
    uuid: str | None = None
    memory_total: int | None = None


@dataclass(frozen=True)
class Mig(Shape):
    current: bool | None = None
    pending: bool | None = None
    devices: list[MigDevice] = field(default_factory=list)


@dataclass(frozen=True)
class Ecc(Shape):
    enabled: bool | None = None
    pending: bool | None = None
    volatile_uncorrected: int | None = None


@dataclass(frozen=True)
class RemappedRows(Shape):
    correctable: int = 0
    uncorrectable: int = 0
    pending: bool = False
    failure: bool = False


@dataclass(frozen=True)
class GpuProcess(Shape):
    """A process holding memory on the device (`own`: the doctor or one of its probes)."""

    pid: int = 0
    kind: str = ""
    name: str | None = None
    used_bytes: int | None = None
    own: bool = False


@dataclass(frozen=True)
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
    processes: list[GpuProcess] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)
    errors: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class GpuHost(Shape):
    """What the kernel says about the driver, independent of NVML."""

    kernel_module: str | None = None
    dev_nodes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
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
    host: GpuHost | None = None
    environ: dict[str, str | None] = field(default_factory=dict)
    """CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER, NVIDIA_VISIBLE_DEVICES as the doctor saw them."""
    doctor_pid: int | None = None
    seconds: float | None = None
