"""The shapes of the sections `facts.gpu.cuda` collects: cuda_stack and kernels.

Both come from probes run as forked children of the run's one target process (`facts.probes.SharedTargetProcess`);
`shared_process` says how that process went. The parts below a probe's top-level keys are declared as
objects; their fields are the probe's (facts/probes/cuda_stack.py, kernels.py).
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, ClassVar

from dflash_doctor.facts.python.environment_shapes import ProbeRun
from dflash_doctor.facts.shape import Shape, frozen_dataclass

__all__ = ["CudaRuntime", "CudaStack", "CudaTorch", "CudaTriton", "KernelCase", "KernelCuda", "KernelDevice", "KernelError", "KernelFamily",
           "KernelImport", "Kernels", "Libcuda", "ProbeException",
           "SharedProcess", "ToolLookup", "TorchDevice", "TritonLibcuda"]


@frozen_dataclass(frozen=True)
class ProbeException(Shape):
    """An exception as a GPU probe describes it."""

    type: str = ""
    mro: list[str] = field(default_factory=list)
    message: str = ""
    traceback: str = ""


@frozen_dataclass(frozen=True)
class SharedProcess(Shape):
    """The run's one target process that imported torch once; the probes are its forked children."""

    process: ProbeRun = field(default_factory=ProbeRun)
    forked: bool | None = None
    parallel: int | None = None
    preload: list[dict[str, Any]] = field(default_factory=list)
    preload_seconds: float | None = None
    jobs: int | None = None
    seconds: float | None = None
    fallback: Any = None
    """Why the probes ran one process each instead (the shared process died while importing)."""


@frozen_dataclass(frozen=True)
class Libcuda(Shape):
    """cuInit and cuDriverGetVersion from the libcuda.so.1 the target loads (a cuda-compat one included)."""

    loaded: bool = False
    error: str | None = None
    path: str | None = None
    driver_version_raw: int | None = None
    cuInit_seconds: float | None = None  # the probe's keys, after the CUDA call
    cuInit: int | None = None
    cuInit_name: str | None = None
    cuInit_message: str | None = None
    device_count: int | None = None


@frozen_dataclass(frozen=True)
class CudaTorch(Shape):
    """torch in the target: whether it imports, its version, CUDA build and the archs it was built for."""

    installed: bool = False
    import_ok: bool | None = None
    exception: ProbeException | None = None
    import_seconds: float | None = None
    version: str | None = None
    file: str | None = None
    cuda: str | None = None
    hip: str | None = None
    git: str | None = None
    arch_list: list[str] | None = None
    arch_list_error: ProbeException | None = None


@frozen_dataclass(frozen=True)
class TorchDevice(Shape):
    """A device as torch.cuda sees it (cuda:N, in CUDA order)."""

    index: int = 0
    name: str | None = None
    capability: list[int] | None = None
    total_memory: int | None = None
    multi_processor_count: int | None = None
    uuid: str | None = None
    uuid_raw: str | None = None
    pci_bus_id: str | None = None


@frozen_dataclass(frozen=True)
class CudaRuntime(Shape):
    """torch.cuda: whether it initializes, and why not."""

    available: bool = False
    is_available_error: ProbeException | None = None
    init_error: ProbeException | None = None
    warnings: list[str] = field(default_factory=list)
    seconds: float | None = None
    device_count: int | None = None
    devices: list[TorchDevice] = field(default_factory=list)
    devices_error: ProbeException | None = None


@frozen_dataclass(frozen=True)
class ToolPlace(Shape):
    """One place Triton looks for a tool: $TRITON_PTXAS_PATH, or its bundled copy."""

    where: str = ""
    path: str = ""
    exists: bool = False
    executable: bool = False


@frozen_dataclass(frozen=True)
class ToolLookup(Shape):
    """Where Triton looks for ptxas (or ptxas-blackwell), and what it found."""

    looked: list[ToolPlace] = field(default_factory=list)
    """In Triton's order."""
    path: str | None = None
    version: str | None = None
    error: str | None = None
    api: str | None = None


@frozen_dataclass(frozen=True)
class TritonLibcuda(Shape):
    """Where Triton looks for libcuda.so.1 (TRITON_LIBCUDA_PATH, `ldconfig -p`, LD_LIBRARY_PATH)."""

    looked: dict[str, Any] = field(default_factory=dict)
    """{"TRITON_LIBCUDA_PATH", "ldconfig", "LD_LIBRARY_PATH", "ldconfig_error"}: keyed by where Triton looks."""
    dirs: list[str] | None = None
    error: str | None = None

    @property
    def env_path(self) -> str | None:
        """TRITON_LIBCUDA_PATH (None: unset)."""
        value = self.looked.get("TRITON_LIBCUDA_PATH")
        return value if isinstance(value, str) else None

    @property
    def ldconfig(self) -> list[str]:
        """The libcuda.so.1 paths `ldconfig -p` lists."""
        return [str(path) for path in self.looked.get("ldconfig") or []]

    @property
    def ld_library_path(self) -> list[str]:
        """The directories of LD_LIBRARY_PATH."""
        return [str(path) for path in self.looked.get("LD_LIBRARY_PATH") or []]


@frozen_dataclass(frozen=True)
class CudaTriton(Shape):
    installed: bool = False
    import_ok: bool | None = None
    exception: ProbeException | None = None
    version: str | None = None
    file: str | None = None
    ptxas: ToolLookup | None = None
    ptxas_blackwell: ToolLookup | None = None
    libcuda: TritonLibcuda | None = None
    cache_dir: str | None = None
    seconds: float | None = None


@frozen_dataclass(frozen=True)
class CudaStack(Shape):
    """libcuda, torch's CUDA, the devices torch sees and Triton's tool chain, from inside the target."""

    SECTION: ClassVar[str] = "cuda_stack"

    shared_process: SharedProcess | None = None
    process: ProbeRun = field(default_factory=ProbeRun)
    python: str | None = None
    executable: str | None = None
    libcuda: Libcuda | None = None
    torch: CudaTorch | None = None
    cuda: CudaRuntime | None = None
    """Only when torch is a CUDA build."""
    triton: CudaTriton | None = None
    probe_error: ProbeException | None = None
    """What escaped the probe's own guards (the facts before it are kept)."""
    seconds: float | None = None


@frozen_dataclass(frozen=True)
class KernelError(Shape):
    """An exception in a kernel probe (`oom`: CUDA ran out of memory; `warnings`: those it caught)."""

    type: str = ""
    message: str = ""
    oom: bool = False
    warnings: list[str] = field(default_factory=list)
    traceback: str = ""


@frozen_dataclass(frozen=True)
class KernelCase(Shape):
    """One kernel call on one GPU, compared with the fp32 reference."""

    kernel: str = ""
    dtype: str = ""
    head_dim: int | None = None
    variant: str | None = None
    elements: int | None = None
    status: str = ""
    """"ok", "mismatch", "error" or "not-run"."""
    reason: str | None = None
    tolerance: float | None = None
    scale: float | None = None
    first_ms: float | None = None
    warm_ms: float | None = None
    max_abs_err: float | None = None
    mean_abs_err: float | None = None
    nonfinite: bool | None = None
    unsupported: bool | None = None
    """The kernel declines this GPU or dtype by design."""
    context_lost: bool | None = None
    error: KernelError | None = None


@frozen_dataclass(frozen=True)
class KernelDevice(Shape):
    index: int | None = None
    """None for the CPU (the probe's own reference math, run on the CPU in tests)."""
    same_model: list[int] = field(default_factory=list)
    name: str | None = None
    capability: list[int] | None = None
    cases: list[KernelCase] = field(default_factory=list)
    error: KernelError | None = None
    """Why the family could not even start on this GPU."""
    seconds: float | None = None


@frozen_dataclass(frozen=True)
class KernelImport(Shape):
    """The import the family needs (`installed`: whether its package is there at all)."""

    statement: str | None = None
    installed: bool = True
    ok: bool = True
    exception: KernelError | None = None
    file: str | None = None
    version: str | None = None


@frozen_dataclass(frozen=True)
class KernelCuda(Shape):
    available: bool = False
    error: KernelError | None = None
    device_count: int | None = None


@frozen_dataclass(frozen=True)
class KernelFamily(Shape):
    """One family of kernels, run in a process of its own (a forked child of the run's target process)."""

    family: str = ""
    process: ProbeRun = field(default_factory=ProbeRun)
    settings: dict[str, Any] = field(default_factory=dict)
    import_: KernelImport | None = field(default=None, metadata={"key": "import"})
    timings: dict[str, float] = field(default_factory=dict)
    torch: dict[str, Any] | None = None
    cuda: KernelCuda | None = None
    vllm_selects_fa_version: Any = None
    devices: list[KernelDevice] | None = None
    """None: the probe never got as far as the GPUs (its process failed first)."""
    probe_error: KernelError | None = None
    seconds: float | None = None


@frozen_dataclass(frozen=True)
class Kernels(Shape):
    SECTION: ClassVar[str] = "kernels"

    problem: dict[str, Any] = field(default_factory=dict)
    """The problem every family runs (batch, sequence length, heads, head dims, dtypes, tolerance)."""
    families: list[KernelFamily] = field(default_factory=list)
    shared_process: SharedProcess | None = None
