"""Layer: the GPUs, through NVML: the driver, each GPU's health flags, the memory other processes hold,
MIG, and which physical GPUs CUDA_VISIBLE_DEVICES leaves vLLM."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, ClassVar

from dflash_doctor.check import Facts
from dflash_doctor.facts.envfacts import Distributions, release
from dflash_doctor.knowledge.gpu import (
    CUDA_DEVICE_ORDER_DEFAULT,
    MIG_SINGLE_DEVICE_PER_PROCESS,
    RETIRED_PAGES_PENDING,
    ROW_REMAPPING,
    VLLM_FREE_MEMORY_CHECK,
    VLLM_UUID_VISIBLE_DEVICES_SINCE,
)
from dflash_doctor.model import Finding, Remediation, Status
from dflash_doctor.units import gib as _gib

from .gpu_common import (
    GRAPHICS_NOTE_BYTES,
    UNATTRIBUTED_BYTES,
    Visible,
    _sm,
    _visible_of,
    resolve_visible,
)

__all__ = ["GpuCheck", "Visible", "no_driver_finding", "resolve_visible"]


# ---------------------------------------------------------------------------------------- gpu check


def _nvml_failure(gpu: Mapping[str, Any]) -> Finding:
    error = (gpu.get("nvml") or {}).get("error") or {}
    name, message = error.get("name"), error.get("message")
    host = gpu.get("host") or {}
    evidence = {"nvml_error": error, "kernel_module": host.get("kernel_module"), "dev_nodes": host.get("dev_nodes")}
    if name == "NVML_ERROR_LIBRARY_NOT_FOUND":
        where = ("the NVIDIA kernel module is loaded (" + host["kernel_module"] + ") but its user-space libraries "
                 "are not visible here" if host.get("kernel_module") else
                 "and no NVIDIA kernel module is loaded (no /proc/driver/nvidia/version)")
        return Finding("gpu.nvml-library-missing", Status.FAIL,
                       f"no NVIDIA driver: libnvidia-ml.so.1 cannot be loaded, {where}",
                       detail=f"The dynamic loader says: {error.get('loader') or message}. Without the driver "
                       "nothing can use a GPU here; in a container, start it with the GPUs (`--gpus all`). On a "
                       "machine without a GPU (a CI image build), run with --no-gpu.",
                       evidence=evidence)
    if name == "NVML_ERROR_DRIVER_NOT_LOADED":
        return Finding("gpu.driver-not-loaded", Status.FAIL,
                       "the NVIDIA driver is not loaded: libnvidia-ml.so.1 is installed but the kernel module "
                       "is not running (NVML: Driver Not Loaded)",
                       detail="`dmesg | grep -i nvidia` says why the module did not load (Secure Boot, a kernel "
                       "update without a rebuilt module, a driver installed without a reboot).",
                       evidence=evidence,
                       remediation=(Remediation("sudo modprobe nvidia", "load the kernel module"),
                                    Remediation("sudo reboot", "or reboot, if the driver was just installed")))
    if name == "NVML_ERROR_LIB_RM_VERSION_MISMATCH":
        return Finding("gpu.driver-library-mismatch", Status.FAIL,
                       f"driver/library version mismatch: the running kernel module "
                       f"({host.get('kernel_module') or 'unknown'}) is not the installed driver's",
                       detail="The driver was upgraded but the old kernel module still runs; every CUDA program "
                       "fails until it is replaced.",
                       evidence=evidence, remediation=(Remediation("sudo reboot", "load the installed driver's module"),))
    if name == "NVML_ERROR_NO_PERMISSION":
        return Finding("gpu.nvml-no-permission", Status.FAIL,
                       "no permission to open the GPU devices (/dev/nvidia*) as this user",
                       evidence=evidence,
                       remediation=(Remediation("sudo usermod -aG video \"$USER\"",
                                                "join the group that owns /dev/nvidia* (check with ls -l /dev/nvidia*), "
                                                "then log in again"),))
    return Finding("gpu.nvml-failed", Status.FAIL,
                   f"NVML could not be queried: {message or error.get('kind')}",
                   detail="`nvidia-smi` usually prints the same error.", evidence=evidence)


def no_driver_finding(gpu: Mapping[str, Any]) -> Finding | None:
    """The finding this check gives when NVML cannot be queried (no driver, no permission, ...); None when it
    can. Other checks name it as the cause of what follows from it (an extension that needs libcuda.so.1)."""
    if (gpu.get("nvml") or {}).get("ok") or gpu.get("skipped"):
        return None
    return _nvml_failure(gpu)


def _device_line(device: Mapping[str, Any]) -> str:
    memory = device.get("memory") or {}
    line = (f"GPU {device.get('index')} {device.get('name')} {_sm(device.get('compute_capability'))} "
            f"{_gib(memory.get('total'))}")
    if memory.get("free") is not None:
        line += f" ({_gib(memory.get('free'))} free)"
    if (device.get("mig") or {}).get("current"):
        line += " MIG"
    return line


def _gpu_summary(gpu: Mapping[str, Any], visible: Visible) -> Finding:
    devices = gpu.get("devices") or []
    hidden = [d for d in devices if d["index"] not in visible.gpus]
    title = "; ".join(_device_line(d) + (" (hidden by CUDA_VISIBLE_DEVICES)" if d in hidden else "") for d in devices)
    title += f" · driver {gpu.get('driver_version')} (CUDA {gpu.get('cuda_driver_version')})"
    return Finding("gpu.ok", Status.PASS, title, evidence={
        "driver_version": gpu.get("driver_version"), "cuda_driver_version": gpu.get("cuda_driver_version"),
        "devices": [{k: d.get(k) for k in ("index", "name", "uuid", "pci_bus_id", "compute_capability", "memory",
                                           "persistence_mode")} for d in devices]})


def _visible_findings(gpu: Mapping[str, Any], visible: Visible, vllm_version: str | None) -> Iterator[Finding]:
    devices = {d["index"]: d for d in gpu.get("devices") or []}
    value = visible.value
    order = [f"cuda:{n} = GPU {i} ({devices[i].get('name')})" for n, i in enumerate(visible.gpus)]
    evidence = {"CUDA_VISIBLE_DEVICES": value, "form": visible.form, "visible": list(visible.gpus),
                "stopped_at": visible.stopped_at, "reason": visible.stop_reason}
    by_index = ",".join(str(i) for i in visible.gpus)
    if visible.duplicate is not None:
        yield Finding("gpu.visible-duplicate", Status.FAIL,
                      f"CUDA_VISIBLE_DEVICES={value!r} repeats {visible.duplicate!r}: CUDA then sees no GPU at all",
                      evidence=evidence)
        return
    if not visible.gpus and value is not None:
        why = "it is empty" if not value.strip() else f"its first entry {visible.stopped_at!r} is {visible.stop_reason}"
        yield Finding("gpu.visible-none", Status.FAIL,
                      f"CUDA_VISIBLE_DEVICES={value!r} leaves no GPU visible: {why}; vLLM will see none",
                      evidence=evidence,
                      remediation=(Remediation("unset CUDA_VISIBLE_DEVICES", "to use every GPU"),))
        return
    if visible.stopped_at is not None:
        yield Finding("gpu.visible-unknown-device", Status.FAIL,
                      f"CUDA_VISIBLE_DEVICES={value!r}: {visible.stopped_at!r} names no GPU here "
                      f"({visible.stop_reason}); CUDA stops reading there, so vLLM sees only "
                      f"{len(visible.gpus)}: {', '.join(order)}",
                      evidence=evidence,
                      remediation=(Remediation(f"export CUDA_VISIBLE_DEVICES={by_index}",
                                               "what CUDA makes of it now; list the GPUs you meant instead"),))
    if visible.form == "mig":
        yield Finding("gpu.visible-mig", Status.WARN,
                      f"CUDA_VISIBLE_DEVICES names MIG devices ({', '.join(visible.entries)}): a CUDA process "
                      "enumerates only one MIG device, so vLLM runs on one slice",
                      detail=MIG_SINGLE_DEVICE_PER_PROCESS.note, evidence=evidence)
    if visible.form == "uuids" and vllm_version is not None:
        since, installed = release(VLLM_UUID_VISIBLE_DEVICES_SINCE.value), release(vllm_version)
        older = installed is not None and since is not None and installed < since
        whole = {str(devices[i].get("uuid")) for i in visible.gpus}
        partial = [e for e in visible.entries if e not in whole]
        if older or partial:
            why = (f"vLLM {vllm_version} calls int() on each entry (UUIDs are accepted from "
                   f"{VLLM_UUID_VISIBLE_DEVICES_SINCE.value})" if older else
                   f"vLLM {vllm_version} looks UUIDs up whole, and {', '.join(partial)} is a prefix")
            yield Finding("gpu.visible-uuid-vllm", Status.FAIL,
                          f"CUDA_VISIBLE_DEVICES={value!r}: CUDA accepts it but {why}: `vllm serve` fails at start",
                          evidence={**evidence, "vllm": vllm_version},
                          remediation=(Remediation(f"export CUDA_VISIBLE_DEVICES={by_index}",
                                                   "the same GPUs by index"),))
    names = {str(d.get("name")) for d in devices.values()}
    order_env = (gpu.get("environ") or {}).get("CUDA_DEVICE_ORDER")
    if visible.form == "indices" and len(names) > 1 and order_env != "PCI_BUS_ID":
        yield Finding("gpu.device-order", Status.WARN,
                      f"GPUs of different models ({', '.join(sorted(names))}) and CUDA_DEVICE_ORDER is not PCI_BUS_ID: "
                      f"CUDA_VISIBLE_DEVICES={value!r} counts them fastest-first, not as nvidia-smi numbers them",
                      detail=CUDA_DEVICE_ORDER_DEFAULT.note, evidence={**evidence, "CUDA_DEVICE_ORDER": order_env},
                      remediation=(Remediation("export CUDA_DEVICE_ORDER=PCI_BUS_ID",
                                               "number GPUs as nvidia-smi does"),))
    if value is not None and visible.gpus and visible.stopped_at is None:
        yield Finding("gpu.visible", Status.PASS,
                      f"CUDA_VISIBLE_DEVICES={value!r}: vLLM will see {len(visible.gpus)} GPU(s): {', '.join(order)}",
                      evidence=evidence)


def _memory_findings(device: Mapping[str, Any]) -> Iterator[Finding]:
    memory = device.get("memory") or {}
    total, free, used = memory.get("total"), memory.get("free"), memory.get("used")
    others = [p for p in device.get("processes") or [] if not p.get("own")]
    compute = [p for p in others if p.get("kind") == "compute"]
    graphics_bytes = sum(p.get("used_bytes") or 0 for p in others if p.get("kind") == "graphics")
    own_bytes = sum(p.get("used_bytes") or 0 for p in device.get("processes") or [] if p.get("own"))
    listed = sum(p.get("used_bytes") or 0 for p in others)
    unattributed = (used or 0) - own_bytes - listed if used is not None else 0
    if not compute and graphics_bytes < GRAPHICS_NOTE_BYTES and unattributed < UNATTRIBUTED_BYTES:
        return
    label = f"GPU {device.get('index')} ({device.get('name')})"
    holders = ", ".join(f"{p.get('name') or '?'} (pid {p['pid']}, {_gib(p.get('used_bytes'))})" for p in others[:5])
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
    yield Finding("gpu.memory-held", Status.WARN, f"{label}: " + "; ".join(parts), detail=detail,
                  evidence={"gpu": device.get("index"), "memory": memory, "processes": others,
                            "unattributed_bytes": max(unattributed, 0)})


def _health_findings(device: Mapping[str, Any]) -> Iterator[Finding]:
    label = f"GPU {device.get('index')} ({device.get('name')})"
    reset = Remediation(f"sudo nvidia-smi -r -i {device.get('index')}",
                        "stop every process on the GPU first; or reboot")
    rows = device.get("remapped_rows") or {}
    if device.get("retired_pages_pending") or rows.get("pending"):
        what = "row remapping" if rows.get("pending") else "page retirement"
        yield Finding("gpu.reset-pending", Status.FAIL,
                      f"{label}: a memory {what} is pending: the GPU needs a reset to stop using bad memory",
                      detail=(ROW_REMAPPING if rows.get("pending") else RETIRED_PAGES_PENDING).value + ".",
                      evidence={"gpu": device.get("index"), "retired_pages_pending": device.get("retired_pages_pending"),
                                "remapped_rows": rows or None},
                      remediation=(reset,))
    if rows.get("failure"):
        yield Finding("gpu.row-remap-failure", Status.FAIL,
                      f"{label}: row remapping has failed: the GPU has run out of spare memory rows",
                      detail=ROW_REMAPPING.value + ".",
                      evidence={"gpu": device.get("index"), "remapped_rows": rows})
    ecc = device.get("ecc") or {}
    if ecc.get("volatile_uncorrected"):
        yield Finding("gpu.ecc-uncorrected", Status.WARN,
                      f"{label}: {ecc['volatile_uncorrected']} uncorrected ECC error(s) since the driver loaded",
                      evidence={"gpu": device.get("index"), "ecc": ecc})
    mig = device.get("mig") or {}
    if mig.get("current"):
        yield Finding("gpu.mig-enabled", Status.WARN,
                      f"{label}: MIG is enabled ({len(mig.get('devices') or [])} MIG device(s)): vLLM can use only "
                      "one MIG slice per process, and no tensor parallelism across slices",
                      detail=MIG_SINGLE_DEVICE_PER_PROCESS.note,
                      evidence={"gpu": device.get("index"), "mig": mig},
                      remediation=(Remediation(f"sudo nvidia-smi -i {device.get('index')} -mig 0",
                                               "disable MIG, then reset the GPU"),))
    if mig and mig.get("current") != mig.get("pending"):
        yield Finding("gpu.mig-pending", Status.WARN,
                      f"{label}: MIG will be {'enabled' if mig.get('pending') else 'disabled'} at the next GPU reset",
                      evidence={"gpu": device.get("index"), "mig": mig}, remediation=(reset,))


class GpuCheck:
    id: ClassVar[str] = "gpu"
    layer: ClassVar[str] = "gpu"
    title: ClassVar[str] = "GPUs"
    needs: ClassVar[frozenset[str]] = frozenset({"gpu", "distributions"})
    after: ClassVar[frozenset[str]] = frozenset()
    requires_gpu: ClassVar[bool] = True

    def judge(self, facts: Facts) -> Iterable[Finding]:
        gpu = facts["gpu"]
        if not (gpu.get("nvml") or {}).get("ok"):
            return [_nvml_failure(gpu)]
        devices = gpu.get("devices") or []
        if not devices:
            return [Finding("gpu.no-devices", Status.FAIL,
                            f"the NVIDIA driver {gpu.get('driver_version')} is loaded but lists no GPU",
                            evidence={"host": gpu.get("host")})]
        visible = _visible_of(gpu)
        dists = facts.optional("distributions")
        vllm_version = Distributions(dists).version("vllm") if isinstance(dists, Mapping) else None
        findings = [_gpu_summary(gpu, visible), *_visible_findings(gpu, visible, vllm_version)]
        used = [d for d in devices if d["index"] in visible.gpus]
        for device in used:
            findings.extend(_health_findings(device))
            findings.extend(_memory_findings(device))
        return findings
