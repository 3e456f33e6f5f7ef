"""What the GPU, CUDA-stack and kernels checks share: reading the GPU facts, which physical GPUs
CUDA_VISIBLE_DEVICES leaves a process (by CUDA's own rules), and the findings after which there is no GPU."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dflash_doctor.checks.gpu.codes import (
    CUDA_STACK_DRIVER_TOO_OLD,
    CUDA_STACK_INIT_FAILED,
    CUDA_STACK_PROBE_FAILED,
    CUDA_STACK_TORCH_ABSENT,
    CUDA_STACK_TORCH_CPU_BUILD,
    CUDA_STACK_TORCH_IMPORT_FAILED,
    GPU_DRIVER_LIBRARY_MISMATCH,
    GPU_DRIVER_NOT_LOADED,
    GPU_NO_DEVICES,
    GPU_NVML_FAILED,
    GPU_NVML_LIBRARY_MISSING,
    GPU_NVML_NO_PERMISSION,
    GPU_VISIBLE_DUPLICATE,
    GPU_VISIBLE_NONE,
)
from dflash_doctor.codes import Code
from dflash_doctor.facts.gpu.cuda_shapes import KernelError, ProbeException
from dflash_doctor.facts.gpu.nvml_shapes import Gpu, GpuDevice
from dflash_doctor.model import CheckResult, Finding, Status
from dflash_doctor.shape import frozen_dataclass
from dflash_doctor.units import GIB

__all__ = ["NO_CUDA_FINDINGS", "NO_GPU_FINDINGS", "Visible", "blocking", "exception_text", "resolve_visible", "sm",
           "visible_of"]

# A graphics client (Xorg, a desktop) holding less than this is not worth a warning.
GRAPHICS_NOTE_BYTES = 256 << 20
# Memory in use that no listed process accounts for (another container's processes): worth a warning above this.
UNATTRIBUTED_BYTES = GIB

# GPU findings after which there is no GPU for torch to use.
NO_GPU_FINDINGS: tuple[Code, ...] = (GPU_NVML_LIBRARY_MISSING, GPU_DRIVER_NOT_LOADED, GPU_DRIVER_LIBRARY_MISMATCH,
                                     GPU_NVML_NO_PERMISSION, GPU_NVML_FAILED, GPU_NO_DEVICES, GPU_VISIBLE_NONE,
                                     GPU_VISIBLE_DUPLICATE)
# CUDA-stack findings after which no kernel can run.
NO_CUDA_FINDINGS: tuple[Code, ...] = (CUDA_STACK_PROBE_FAILED, CUDA_STACK_TORCH_ABSENT, CUDA_STACK_TORCH_IMPORT_FAILED,
                                      CUDA_STACK_TORCH_CPU_BUILD, CUDA_STACK_DRIVER_TOO_OLD, CUDA_STACK_INIT_FAILED)


def sm(cc: Sequence[int] | None) -> str:
    """`sm_90` for compute capability (9, 0); `sm_?` when it is unknown."""
    return f"sm_{cc[0]}{cc[1]}" if cc else "sm_?"


def blocking(prior: CheckResult | None, codes: Sequence[Code]) -> Finding | None:
    """The first failed (or errored) finding of an earlier check's result among `ids`: after it there is nothing
    for this check to run on."""
    if prior is None:
        return None
    ids = {code.id for code in codes}
    return next((f for f in prior.findings if f.id in ids and f.status in (Status.FAIL, Status.ERROR)), None)


# ------------------------------------------------------------------------------------ visible devices


@frozen_dataclass(frozen=True)
class Visible:
    """The GPUs a CUDA process will see, read from CUDA_VISIBLE_DEVICES as CUDA reads it."""

    value: str | None
    form: str
    """"unset", "indices", "uuids" or "mig"."""
    gpus: tuple[int, ...]
    """NVML indices of the visible GPUs, in CUDA order (cuda:0 first); for MIG, the parent GPUs."""
    entries: tuple[str, ...] = ()
    """The entries that resolved."""
    stopped_at: str | None = None
    """The entry that ended the list, and everything after it was ignored."""
    stop_reason: str | None = None
    duplicate: str | None = None
    """A repeated entry: CUDA then sees no device at all."""


def _strtoul(text: str) -> int:
    """CUDA reads each index like strtoul: `1gpu2` is 1, `abc` is not a number (-1)."""
    end = 0
    for position, char in enumerate(text):
        if not (char.isdigit() or (position == 0 and char in "+-")):
            break
        end = position + 1
    try:
        return int(text[:end]) if end else -1
    except ValueError:
        return -1


def resolve_visible(value: str | None, devices: Sequence[GpuDevice | Mapping[str, Any]]) -> Visible:
    """Apply CUDA_VISIBLE_DEVICES to the GPUs NVML lists (knowledge.gpu CUDA_VISIBLE_DEVICES_RULES): the `gpu`
    section's devices (or such devices as NVML's facts give them)."""
    listed = [d if isinstance(d, GpuDevice) else GpuDevice.from_json(d, "gpu") for d in devices]
    count = len(listed)
    if value is None:
        return Visible(None, "unset", tuple(range(count)))
    if value.startswith("GPU-"):
        return _resolve_uuids(value, listed)
    if value.startswith("MIG-"):
        return _resolve_mig(value, listed)
    numbers: list[int] = []
    entries: list[str] = []
    stopped_at: str | None = None
    reason: str | None = None
    for raw in value.split(","):
        number = _strtoul(raw.strip())
        if number in numbers:
            return Visible(value, "indices", (), duplicate=raw)
        if number < 0:
            stopped_at, reason = raw, ("an empty entry" if not raw.strip() else "not a GPU index")
            break
        numbers.append(number)
        entries.append(raw)
    gpus: list[int] = []
    for raw, number in zip(entries, numbers):
        if number >= count:
            span = "the only GPU is 0" if count == 1 else f"the GPUs are 0-{count - 1}"
            stopped_at, reason = raw, f"there is no GPU {number}: {span}" if count else "there is no GPU"
            break
        gpus.append(number)
    return Visible(value, "indices", tuple(gpus), tuple(entries[:len(gpus)]), stopped_at, reason)


def _resolve_uuids(value: str, devices: Sequence[GpuDevice]) -> Visible:
    candidates: list[str] = []
    stopped_at: str | None = None
    reason: str | None = None
    for raw in value.split(","):
        if raw in candidates:
            return Visible(value, "uuids", (), duplicate=raw)
        if not raw.startswith("GPU-"):
            stopped_at, reason = raw, "not a GPU UUID (a list that starts with UUIDs must go on with them)"
            break
        candidates.append(raw)
    gpus: list[int] = []
    for raw in candidates:
        matches = [d.index for d in devices if (d.uuid or "").startswith(raw)]
        if len(matches) != 1:
            stopped_at = raw
            reason = "no GPU has this UUID" if not matches else f"this prefix matches {len(matches)} GPUs"
            break
        if matches[0] in gpus:
            return Visible(value, "uuids", (), duplicate=raw)
        gpus.append(matches[0])
    return Visible(value, "uuids", tuple(gpus), tuple(candidates[:len(gpus)]), stopped_at, reason)


def _resolve_mig(value: str, devices: Sequence[GpuDevice]) -> Visible:
    parents: list[int] = []
    entries: list[str] = []
    stopped_at: str | None = None
    reason: str | None = None
    for raw in value.split(","):
        parent = None
        if raw.startswith("MIG-GPU-"):  # legacy MIG-GPU-<uuid>/<gi>/<ci>
            gpu_uuid = raw[len("MIG-"):].split("/")[0]
            parent = next((d.index for d in devices if d.uuid == gpu_uuid), None)
        elif raw.startswith("MIG-"):
            parent = next((d.index for d in devices for m in (d.mig.devices if d.mig else [])
                           if (m.uuid or "").startswith(raw)), None)
        if parent is None:
            stopped_at, reason = raw, "no MIG device has this id"
            break
        entries.append(raw)
        if parent not in parents:
            parents.append(parent)
    return Visible(value, "mig", tuple(parents), tuple(entries), stopped_at, reason)


def visible_of(gpu: Gpu) -> Visible:
    """The GPUs the target's CUDA_VISIBLE_DEVICES (as the gpu section recorded it) leaves a CUDA process."""
    return resolve_visible(gpu.cuda_visible_devices, gpu.devices)


def exception_text(exc: ProbeException | KernelError | None) -> str:
    """A probe's exception as Python prints its last line (the first line of the message)."""
    if exc is None:
        return "unknown error"
    message = exc.message.strip()
    return f"{exc.type}: {message.splitlines()[0] if message else ''}"
