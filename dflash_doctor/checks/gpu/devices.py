"""Rules of the gpu check (GpuCheck in the package): the GPUs, through NVML: the driver, each GPU's health
flags, the memory other processes hold, MIG, and which physical GPUs CUDA_VISIBLE_DEVICES leaves vLLM.

Health (knowledge.health, after DCGM's health watches): memory errors (gpu.reset-pending,
gpu.row-remap-failure, gpu.ecc-uncorrected), clocks held down for power or heat (gpu.throttled), a power limit
below the board's default (gpu.power-capped), a PCIe link narrower or older than GPU and slot support
(gpu.pcie-link-degraded), and the machine's open-file and locked-memory limits (gpu.host-limits)."""

from __future__ import annotations

from collections.abc import Iterator

from dflash_doctor.checks.gpu.codes import (
    GPU_DEVICE_ORDER,
    GPU_DRIVER_LIBRARY_MISMATCH,
    GPU_DRIVER_NOT_LOADED,
    GPU_ECC_UNCORRECTED,
    GPU_HOST_LIMITS,
    GPU_MEMORY_HELD,
    GPU_MIG_ENABLED,
    GPU_MIG_PENDING,
    GPU_NO_DEVICES,
    GPU_NVML_FAILED,
    GPU_NVML_LIBRARY_MISSING,
    GPU_NVML_NO_PERMISSION,
    GPU_OK,
    GPU_PCIE_LINK_DEGRADED,
    GPU_POWER_CAPPED,
    GPU_RESET_PENDING,
    GPU_ROW_REMAP_FAILURE,
    GPU_THROTTLED,
    GPU_VISIBLE,
    GPU_VISIBLE_DUPLICATE,
    GPU_VISIBLE_MIG,
    GPU_VISIBLE_NONE,
    GPU_VISIBLE_UNKNOWN_DEVICE,
    GPU_VISIBLE_UUID_VLLM,
)
from dflash_doctor.checks.gpu.visible_devices import (
    GRAPHICS_NOTE_BYTES,
    UNATTRIBUTED_BYTES,
    Visible,
    sm,
    visible_of,
)
from dflash_doctor.checks.remedy import export, quote
from dflash_doctor.facts.gpu.nvml_shapes import Gpu, GpuDevice, GpuMachine, MachineLimits, NvmlError, Rlimit
from dflash_doctor.facts.python.envfacts import release
from dflash_doctor.knowledge.gpu import (
    CUDA_DEVICE_ORDER_DEFAULT,
    MIG_SINGLE_DEVICE_PER_PROCESS,
    RETIRED_PAGES_PENDING,
    ROW_REMAPPING,
    VLLM_FREE_MEMORY_CHECK,
    VLLM_UUID_VISIBLE_DEVICES_SINCE,
)
from dflash_doctor.knowledge.health import (
    CLOCK_EVENT_REASONS,
    ECC_VOLATILE_UNCORRECTED,
    MEMLOCK_FOR_RDMA,
    NOFILE_VLLM,
    PCIE_LINK,
    POWER_LIMIT,
    TEMPERATURE_SLOWDOWN,
    THROTTLE_REASONS_JUDGED,
)
from dflash_doctor.model import Finding, Remediation, Status
from dflash_doctor.units import gib as _gib

__all__ = ["gpu_findings", "machine_limits_finding", "no_driver_finding", "reason_names"]





def _nvml_failure(gpu: Gpu) -> Finding:
    error = (gpu.nvml.error if gpu.nvml else None) or NvmlError()
    name, message = error.name, error.message
    machine = gpu.host or GpuMachine()
    evidence = {"nvml_error": error.to_json() if gpu.nvml and gpu.nvml.error else {},
                "kernel_module": machine.kernel_module, "dev_nodes": machine.dev_nodes if gpu.host else None}
    if name == "NVML_ERROR_LIBRARY_NOT_FOUND":
        where = ("the NVIDIA kernel module is loaded (" + machine.kernel_module + ") but its user-space libraries "
                 "are not visible here" if machine.kernel_module else
                 "and no NVIDIA kernel module is loaded (no /proc/driver/nvidia/version)")
        return GPU_NVML_LIBRARY_MISSING.finding(Status.FAIL,
                       f"no NVIDIA driver: libnvidia-ml.so.1 cannot be loaded, {where}",
                       detail=f"The dynamic loader says: {error.loader or message}. Without the driver "
                       "nothing can use a GPU here; in a container, start it with the GPUs (`--gpus all`). On a "
                       "machine without a GPU (a CI image build), run with --no-gpu.",
                       evidence=evidence)
    if name == "NVML_ERROR_DRIVER_NOT_LOADED":
        return GPU_DRIVER_NOT_LOADED.finding(Status.FAIL,
                       "the NVIDIA driver is not loaded: libnvidia-ml.so.1 is installed but the kernel module "
                       "is not running (NVML: Driver Not Loaded)",
                       detail="`dmesg | grep -i nvidia` says why the module did not load (Secure Boot, a kernel "
                       "update without a rebuilt module, a driver installed without a reboot).",
                       evidence=evidence,
                       remediation=(Remediation("sudo modprobe nvidia", "load the kernel module"),
                                    Remediation("sudo reboot", "or reboot, if the driver was just installed")))
    if name == "NVML_ERROR_LIB_RM_VERSION_MISMATCH":
        return GPU_DRIVER_LIBRARY_MISMATCH.finding(Status.FAIL,
                       f"driver/library version mismatch: the running kernel module "
                       f"({machine.kernel_module or 'unknown'}) is not the installed driver's",
                       detail="The driver was upgraded but the old kernel module still runs; every CUDA program "
                       "fails until it is replaced.",
                       evidence=evidence, remediation=(Remediation("sudo reboot", "load the installed driver's module"),))
    if name == "NVML_ERROR_NO_PERMISSION":
        return GPU_NVML_NO_PERMISSION.finding(Status.FAIL,
                       "no permission to open the GPU devices (/dev/nvidia*) as this user",
                       evidence=evidence,
                       remediation=(Remediation("sudo usermod -aG video \"$USER\"",
                                                "join the group that owns /dev/nvidia* (check with ls -l /dev/nvidia*), "
                                                "then log in again"),))
    return GPU_NVML_FAILED.finding(Status.FAIL,
                   f"NVML could not be queried: {message or error.kind}",
                   detail="`nvidia-smi` usually prints the same error.", evidence=evidence)


def no_driver_finding(gpu: Gpu) -> Finding | None:
    """The finding this check gives when NVML cannot be queried (no driver, no permission, ...); None when it
    can. Other checks name it as the cause of what follows from it (an extension that needs libcuda.so.1)."""
    if (gpu.nvml is not None and gpu.nvml.ok) or gpu.skipped:
        return None
    return _nvml_failure(gpu)


def _device_line(device: GpuDevice) -> str:
    memory = device.memory
    line = (f"GPU {device.index} {device.name} {sm(device.compute_capability)} "
            f"{_gib(memory.total if memory else None)}")
    if memory is not None:
        line += f" ({_gib(memory.free)} free)"
    if device.mig is not None and device.mig.current:
        line += " MIG"
    return line


def _gpu_summary(gpu: Gpu, visible: Visible) -> Finding:
    devices = gpu.devices
    hidden = [d for d in devices if d.index not in visible.gpus]
    title = "; ".join(_device_line(d) + (" (hidden by CUDA_VISIBLE_DEVICES)" if d in hidden else "") for d in devices)
    title += f" · driver {gpu.driver_version} (CUDA {gpu.cuda_driver_version})"
    return GPU_OK.finding(Status.PASS, title, evidence={
        "driver_version": gpu.driver_version, "cuda_driver_version": gpu.cuda_driver_version,
        "devices": [{"index": d.index, "name": d.name, "uuid": d.uuid, "pci_bus_id": d.pci_bus_id,
                     "compute_capability": d.compute_capability,
                     "memory": d.memory.to_json() if d.memory else None, "persistence_mode": d.persistence_mode,
                     "clock_event_reasons": (reason_names(d.clock_event_reasons)
                                             if d.clock_event_reasons is not None else None),
                     "temperature": d.temperature.to_json() if d.temperature else None,
                     "power": d.power.to_json() if d.power else None,
                     "pcie": d.pcie.to_json() if d.pcie else None}
                    for d in devices]})


def _visible_findings(gpu: Gpu, visible: Visible, vllm_version: str | None) -> Iterator[Finding]:
    devices = {d.index: d for d in gpu.devices}
    value = visible.value
    order = [f"cuda:{n} = GPU {i} ({devices[i].name})" for n, i in enumerate(visible.gpus)]
    evidence = {"CUDA_VISIBLE_DEVICES": value, "form": visible.form, "visible": list(visible.gpus),
                "stopped_at": visible.stopped_at, "reason": visible.stop_reason}
    by_index = ",".join(str(i) for i in visible.gpus)
    if visible.duplicate is not None:
        yield GPU_VISIBLE_DUPLICATE.finding(Status.FAIL,
                      f"CUDA_VISIBLE_DEVICES={value!r} repeats {visible.duplicate!r}: CUDA then sees no GPU at all",
                      evidence=evidence)
        return
    if not visible.gpus and value is not None:
        why = "it is empty" if not value.strip() else f"its first entry {visible.stopped_at!r} is {visible.stop_reason}"
        yield GPU_VISIBLE_NONE.finding(Status.FAIL,
                      f"CUDA_VISIBLE_DEVICES={value!r} leaves no GPU visible: {why}; vLLM will see none",
                      evidence=evidence,
                      remediation=(Remediation("unset CUDA_VISIBLE_DEVICES", "to use every GPU"),))
        return
    if visible.stopped_at is not None:
        yield GPU_VISIBLE_UNKNOWN_DEVICE.finding(Status.FAIL,
                      f"CUDA_VISIBLE_DEVICES={value!r}: {visible.stopped_at!r} names no GPU here "
                      f"({visible.stop_reason}); CUDA stops reading there, so vLLM sees only "
                      f"{len(visible.gpus)}: {', '.join(order)}",
                      evidence=evidence,
                      remediation=(Remediation(export("CUDA_VISIBLE_DEVICES", by_index),
                                               "what CUDA makes of it now; list the GPUs you meant instead"),))
    if visible.form == "mig":
        yield GPU_VISIBLE_MIG.finding(Status.WARN,
                      f"CUDA_VISIBLE_DEVICES names MIG devices ({', '.join(visible.entries)}): a CUDA process "
                      "enumerates only one MIG device, so vLLM runs on one slice",
                      detail=MIG_SINGLE_DEVICE_PER_PROCESS.note, evidence=evidence)
    if visible.form == "uuids" and vllm_version is not None:
        since, installed = release(VLLM_UUID_VISIBLE_DEVICES_SINCE.value), release(vllm_version)
        older = installed is not None and since is not None and installed < since
        whole = {str(devices[i].uuid) for i in visible.gpus}
        partial = [e for e in visible.entries if e not in whole]
        if older or partial:
            why = (f"vLLM {vllm_version} calls int() on each entry (UUIDs are accepted from "
                   f"{VLLM_UUID_VISIBLE_DEVICES_SINCE.value})" if older else
                   f"vLLM {vllm_version} looks UUIDs up whole, and {', '.join(partial)} is a prefix")
            yield GPU_VISIBLE_UUID_VLLM.finding(Status.FAIL,
                          f"CUDA_VISIBLE_DEVICES={value!r}: CUDA accepts it but {why}: `vllm serve` fails at start",
                          evidence={**evidence, "vllm": vllm_version},
                          remediation=(Remediation(export("CUDA_VISIBLE_DEVICES", by_index),
                                                   "the same GPUs by index"),))
    names = {str(d.name) for d in devices.values()}
    order_env = gpu.cuda_device_order
    if visible.form == "indices" and len(names) > 1 and order_env != "PCI_BUS_ID":
        yield GPU_DEVICE_ORDER.finding(Status.WARN,
                      f"GPUs of different models ({', '.join(sorted(names))}) and CUDA_DEVICE_ORDER is not PCI_BUS_ID: "
                      f"CUDA_VISIBLE_DEVICES={value!r} counts them fastest-first, not as nvidia-smi numbers them",
                      detail=CUDA_DEVICE_ORDER_DEFAULT.note, evidence={**evidence, "CUDA_DEVICE_ORDER": order_env},
                      remediation=(Remediation("export CUDA_DEVICE_ORDER=PCI_BUS_ID",
                                               "number GPUs as nvidia-smi does"),))
    if value is not None and visible.gpus and visible.stopped_at is None:
        yield GPU_VISIBLE.finding(Status.PASS,
                      f"CUDA_VISIBLE_DEVICES={value!r}: vLLM will see {len(visible.gpus)} GPU(s): {', '.join(order)}",
                      evidence=evidence)


def _memory_findings(device: GpuDevice) -> Iterator[Finding]:
    memory = device.memory
    total, free, used = (memory.total, memory.free, memory.used) if memory else (None, None, None)
    others = [p for p in device.processes if not p.own]
    compute = [p for p in others if p.kind == "compute"]
    graphics_bytes = sum(p.used_bytes or 0 for p in others if p.kind == "graphics")
    own_bytes = sum(p.used_bytes or 0 for p in device.processes if p.own)
    listed = sum(p.used_bytes or 0 for p in others)
    unattributed = (used or 0) - own_bytes - listed if used is not None else 0
    if not compute and graphics_bytes < GRAPHICS_NOTE_BYTES and unattributed < UNATTRIBUTED_BYTES:
        return
    label = f"GPU {device.index} ({device.name})"
    holders = ", ".join(f"{p.name or '?'} (pid {p.pid}, {_gib(p.used_bytes)})" for p in others[:5])
    parts = []
    if others:
        parts.append(f"{len(others)} other process(es) hold memory: {holders}")
    if unattributed >= UNATTRIBUTED_BYTES:
        parts.append(f"{_gib(unattributed)} is used by processes NVML does not list here (another container?)")
    fraction = VLLM_FREE_MEMORY_CHECK.value
    detail = ""
    if total and free is not None:
        needed = total * fraction
        verdict = ("so vLLM's default --gpu-memory-utilization " f"{fraction} ({_gib(needed)}) does not fit: "
                   "it refuses to start" if free < needed else
                   f"vLLM's default --gpu-memory-utilization {fraction} ({_gib(needed)}) still fits")
        detail = f"{_gib(free)} of {_gib(total)} is free; {verdict}."
    yield GPU_MEMORY_HELD.finding(Status.WARN, f"{label}: " + "; ".join(parts), detail=detail,
                  evidence={"gpu": device.index, "memory": memory.to_json() if memory else {},
                            "processes": [p.to_json() for p in others], "unattributed_bytes": max(unattributed, 0)})


def reason_names(mask: int) -> list[str]:
    """NVML's clock event reason bits, by name (an unknown bit as its hex value)."""
    names = [name for bit, name, _ in CLOCK_EVENT_REASONS.value if mask & bit]
    known = sum(bit for bit, _, _ in CLOCK_EVENT_REASONS.value)
    names += [hex(1 << b) for b in range(64) if mask & ~known & (1 << b)]
    return names


def _throttle_findings(device: GpuDevice, label: str) -> Iterator[Finding]:
    mask = device.clock_event_reasons
    judged = mask & THROTTLE_REASONS_JUDGED.value if mask is not None else 0
    temperature = device.temperature
    hot = (temperature is not None and temperature.gpu_c is not None and temperature.slowdown_c is not None
           and temperature.slowdown_c > 0 and temperature.gpu_c >= temperature.slowdown_c)
    if not judged and not hot:
        return
    meaning = {name: what for _, name, what in CLOCK_EVENT_REASONS.value}
    parts = []
    if judged:
        parts.append("clocks held down: " + ", ".join(reason_names(judged)))
    if hot and temperature is not None:
        parts.append(f"{temperature.gpu_c} C, at or above its slowdown threshold {temperature.slowdown_c} C")
    detail = "; ".join(f"{name}: {meaning[name]}" for name in reason_names(judged) if name in meaning)
    detail = (detail + ". " if detail else "") + THROTTLE_REASONS_JUDGED.note
    if hot:
        detail += " " + TEMPERATURE_SLOWDOWN.note
    yield GPU_THROTTLED.finding(Status.WARN, f"{label}: " + "; ".join(parts), detail=detail,
                  evidence={"gpu": device.index, "clock_event_reasons": mask,
                            "reasons": reason_names(mask) if mask is not None else None,
                            "temperature": temperature.to_json() if temperature else None},
                  remediation=(Remediation(f"nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER -i {device.index}",
                                           "see which limit is active and how close the GPU is to it"),))


def _power_findings(device: GpuDevice, label: str) -> Iterator[Finding]:
    power = device.power
    if power is None or not power.default_limit_mw:
        return
    limits = [v for v in (power.limit_mw, power.enforced_limit_mw) if v is not None]
    if not limits or min(limits) >= power.default_limit_mw:
        return
    low = min(limits)
    which = "enforced" if low == power.enforced_limit_mw and low != power.limit_mw else "set"
    yield GPU_POWER_CAPPED.finding(Status.WARN,
                  f"{label}: power limit {which} to {low / 1000:g} W, below the board's default "
                  f"{power.default_limit_mw / 1000:g} W: clocks are held lower under load",
                  detail=POWER_LIMIT.note, evidence={"gpu": device.index, "power": power.to_json()},
                  remediation=(Remediation(f"sudo nvidia-smi -i {device.index} -pl {power.default_limit_mw / 1000:g}",
                                           "restore the default limit, if the lower one is not intended"),))


def _pcie_findings(device: GpuDevice, label: str) -> Iterator[Finding]:
    pcie = device.pcie
    if pcie is None:
        return
    parts = []
    if pcie.width is not None and pcie.max_width and 0 < pcie.width < pcie.max_width:
        parts.append(f"link x{pcie.width} where x{pcie.max_width} is possible")
    if pcie.max_generation and pcie.gpu_max_generation and pcie.max_generation < pcie.gpu_max_generation:
        parts.append(f"the slot allows PCIe Gen{pcie.max_generation}, the GPU Gen{pcie.gpu_max_generation}")
    if not parts:
        return
    yield GPU_PCIE_LINK_DEGRADED.finding(Status.WARN,
                  f"{label}: PCIe {'; '.join(parts)}: host-to-GPU and PCIe peer-to-peer bandwidth is lower",
                  detail=PCIE_LINK.note, evidence={"gpu": device.index, "pci_bus_id": device.pci_bus_id,
                                                   "pcie": pcie.to_json()})


def _limit_text(limit: Rlimit | None, unit: float = 1) -> str:
    if limit is None:
        return "unknown"

    def one(value: int | None) -> str:
        if value is None:
            return "?"
        return "unlimited" if value < 0 else (f"{value / unit:g}" if unit != 1 else str(value))

    return f"{one(limit.soft)} (hard {one(limit.hard)})"


def machine_limits_finding(limits: MachineLimits) -> Finding:
    """gpu.host-limits: a hard open-file limit vLLM cannot raise its soft one to warns; memlock and THP are
    reported (knowledge.health)."""
    nofile, memlock = limits.nofile, limits.memlock
    need = NOFILE_VLLM.value
    low_hard = nofile is not None and nofile.hard is not None and 0 <= nofile.hard < need
    memlock_unlimited = memlock is not None and memlock.soft is not None and memlock.soft < 0
    text = (f"open files {_limit_text(nofile)}, locked memory "
            f"{_limit_text(memlock, 1 << 20)}{'' if memlock_unlimited or memlock is None else ' MiB'}, "
            f"transparent huge pages {limits.transparent_hugepage or 'unknown'}")
    evidence = {**limits.to_json(), "nofile_needed_by_vllm": need}
    memlock_note = ("" if memlock_unlimited else
                    " Locked memory is limited: fine on one host; multi-node NCCL over InfiniBand/RoCE needs it "
                    f"{MEMLOCK_FOR_RDMA.value} (`ulimit -l unlimited`, or `--ulimit memlock=-1` for a container).")
    if low_hard:
        return GPU_HOST_LIMITS.finding(Status.WARN,
                       f"the hard open-file limit {nofile.hard if nofile else '?'} is below the {need} vLLM "
                       f"raises its soft limit to: it cannot, and many connections fail with 'Too many open "
                       f"files' ({text})",
                       detail=NOFILE_VLLM.note + memlock_note, evidence=evidence,
                       remediation=(Remediation(f"ulimit -Hn {need}; ulimit -n {need}",
                                                "as root, in the shell that starts vLLM (or LimitNOFILE= in its "
                                                "systemd unit, --ulimit nofile= for a container)"),))
    return GPU_HOST_LIMITS.finding(Status.PASS, f"host limits: {text}",
                   detail=(NOFILE_VLLM.note + memlock_note).strip(), evidence=evidence)


def _health_findings(device: GpuDevice) -> Iterator[Finding]:
    label = f"GPU {device.index} ({device.name})"
    reset = Remediation(f"sudo nvidia-smi -r -i {quote(str(device.index))}", "stop every process on the GPU first; or reboot")
    rows = device.remapped_rows
    if device.retired_pages_pending or (rows and rows.pending):
        what = "row remapping" if rows and rows.pending else "page retirement"
        yield GPU_RESET_PENDING.finding(Status.FAIL,
                      f"{label}: a memory {what} is pending: the GPU needs a reset to stop using bad memory",
                      detail=(ROW_REMAPPING if rows and rows.pending else RETIRED_PAGES_PENDING).value + ".",
                      evidence={"gpu": device.index, "retired_pages_pending": device.retired_pages_pending,
                                "remapped_rows": rows.to_json() if rows else None},
                      remediation=(reset,))
    if rows and rows.failure:
        yield GPU_ROW_REMAP_FAILURE.finding(Status.FAIL,
                      f"{label}: row remapping has failed: the GPU has run out of spare memory rows",
                      detail=ROW_REMAPPING.value + ".",
                      evidence={"gpu": device.index, "remapped_rows": rows.to_json()})
    ecc = device.ecc
    if ecc and ecc.volatile_uncorrected:
        lifetime = (f" ({ecc.aggregate_uncorrected} over the GPU's lifetime)"
                    if ecc.aggregate_uncorrected is not None else "")
        yield GPU_ECC_UNCORRECTED.finding(Status.FAIL,
                      f"{label}: {ecc.volatile_uncorrected} uncorrected ECC error(s) since the driver loaded"
                      f"{lifetime}",
                      detail=ECC_VOLATILE_UNCORRECTED.value + " (DCGM's health watch); work that touched that "
                      "memory may have been corrupted.",
                      evidence={"gpu": device.index, "ecc": ecc.to_json(),
                                "remapped_rows": rows.to_json() if rows else None},
                      remediation=(reset,))
    yield from _throttle_findings(device, label)
    yield from _power_findings(device, label)
    yield from _pcie_findings(device, label)
    mig = device.mig
    if mig and mig.current:
        yield GPU_MIG_ENABLED.finding(Status.WARN,
                      f"{label}: MIG is enabled ({len(mig.devices)} MIG device(s)): vLLM can use only "
                      "one MIG slice per process, and no tensor parallelism across slices",
                      detail=MIG_SINGLE_DEVICE_PER_PROCESS.note,
                      evidence={"gpu": device.index, "mig": mig.to_json()},
                      remediation=(Remediation(f"sudo nvidia-smi -i {quote(str(device.index))} -mig 0",
                                               "disable MIG, then reset the GPU"),))
    if mig and mig.current != mig.pending:
        yield GPU_MIG_PENDING.finding(Status.WARN,
                      f"{label}: MIG will be {'enabled' if mig.pending else 'disabled'} at the next GPU reset",
                      evidence={"gpu": device.index, "mig": mig.to_json()}, remediation=(reset,))


def gpu_findings(gpu: Gpu, vllm_version: str | None) -> list[Finding]:
    """The gpu check's judgement of NVML's facts; `vllm_version` is the installed vLLM's (which CUDA_VISIBLE_DEVICES
    forms it reads), None when vLLM is not installed or the distributions were not collected."""
    if gpu.nvml is None or not gpu.nvml.ok:
        return [_nvml_failure(gpu)]
    devices = gpu.devices
    if not devices:
        return [GPU_NO_DEVICES.finding(Status.FAIL,
                        f"the NVIDIA driver {gpu.driver_version} is loaded but lists no GPU",
                        evidence={"host": gpu.host.to_json() if gpu.host else None})]
    visible = visible_of(gpu)
    findings = [_gpu_summary(gpu, visible), *_visible_findings(gpu, visible, vllm_version)]
    used = [d for d in devices if d.index in visible.gpus]
    for device in used:
        findings.extend(_health_findings(device))
        findings.extend(_memory_findings(device))
    if gpu.host is not None and gpu.host.limits is not None:
        findings.append(machine_limits_finding(gpu.host.limits))
    return findings
