"""GPU facts from NVML (nvidia-ml-py), in the doctor's own process.

NVML is the driver's management library: it answers without creating a CUDA context, whatever
CUDA_VISIBLE_DEVICES says, and with the physical GPU numbering nvidia-smi uses. Every query that the GPU
or driver does not support is recorded as unsupported rather than failing the collection; a missing
library or driver becomes facts (which one, and the NVML error), never an exception.

Process names come from /proc/PID/comm (the kernel's 15-character name), never from command lines,
which may carry tokens. A process that the doctor started (its probes) is marked `own`.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import resource
import stat
import threading
import time
from collections.abc import Callable, Mapping
from functools import partial
from importlib import metadata
from typing import Any

from dflash_doctor.context import Context
from dflash_doctor.facts.gpu.nvml_shapes import Gpu
from dflash_doctor.facts.shape import Collected, by_section

__all__ = ["collect", "nvml_facts"]

# VLLM_CONFIDENTIAL_COMPUTE overrides vLLM 0.34's NVML detection of Confidential Computing (platforms/cuda.py).
ENVIRON_NAMES = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES", "VLLM_CONFIDENTIAL_COMPUTE")
# NVML answers in milliseconds; a wedged driver can block nvmlInit for ever. Past this the facts say so.
NVML_TIMEOUT_S = 20.0
THP_ENABLED = "/sys/kernel/mm/transparent_hugepage/enabled"
# The file holds one line such as "always [madvise] never"; anything longer is not that file.
THP_READ_LIMIT = 4096


def collect(ctx: Context, _earlier: Mapping[str, object]) -> Collected:
    if ctx.no_gpu:
        # Other checks (arch coverage) read this section when present; under --no-gpu they judge
        # --target-arch instead, and NVML is not touched at all.
        return by_section(Gpu.collected({"skipped": "--no-gpu"}))
    return by_section(Gpu.collected(nvml_facts(timeout_s=min(ctx.timeout_s, NVML_TIMEOUT_S))))


def nvml_facts(timeout_s: float = NVML_TIMEOUT_S) -> dict[str, Any]:
    """All NVML facts, gathered in a daemon thread so that a hung driver cannot hang the doctor."""
    started = time.monotonic()
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["facts"] = _gather()
        except Exception as exc:  # noqa: BLE001 - NVML bindings raise many types; each becomes a fact
            box["facts"] = _failed("error", f"{type(exc).__name__}: {exc}")

    thread = threading.Thread(target=work, name="dflash-doctor-nvml", daemon=True)
    thread.start()
    thread.join(timeout_s)
    facts = box.get("facts") or _failed("timeout", f"NVML did not answer within {timeout_s:g} s")
    facts["host"] = _machine_facts()
    facts["environ"] = {name: os.environ.get(name) for name in ENVIRON_NAMES}
    facts["doctor_pid"] = os.getpid()
    facts["seconds"] = round(time.monotonic() - started, 3)
    return facts


def _failed(kind: str, message: str, code: int | None = None, name: str | None = None) -> dict[str, Any]:
    return {"nvml": {"ok": False, "error": {"kind": kind, "code": code, "name": name, "message": message}},
            "devices": []}


def _machine_facts() -> dict[str, Any]:
    """What the kernel says about the NVIDIA driver, independent of NVML (to tell the failures apart)."""
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8", errors="replace") as handle:
            kernel_module = handle.readline().strip() or None
    except OSError:
        kernel_module = None
    try:
        nodes = sorted(n for n in os.listdir("/dev") if n.startswith("nvidia"))
    except OSError:
        nodes = []
    return {"kernel_module": kernel_module, "dev_nodes": nodes, "limits": machine_limits()}


def machine_limits(thp_path: str = THP_ENABLED) -> dict[str, Any]:
    """RLIMIT_NOFILE and RLIMIT_MEMLOCK of this process (what vLLM started from here inherits) and the
    transparent huge page mode; each that cannot be read is None, with the reason in `errors`."""
    errors: dict[str, str] = {}
    limits: dict[str, Any] = {"errors": errors}
    for name, which in (("nofile", resource.RLIMIT_NOFILE), ("memlock", resource.RLIMIT_MEMLOCK)):
        try:
            soft, hard = resource.getrlimit(which)
        except (OSError, ValueError) as exc:
            limits[name] = None
            errors[name] = str(exc)
            continue
        limits[name] = {"soft": _rlim(soft), "hard": _rlim(hard)}
    limits["transparent_hugepage"], error = _thp_mode(thp_path)
    if error:
        errors["transparent_hugepage"] = error
    return limits


def _rlim(value: int) -> int:
    return -1 if value == resource.RLIM_INFINITY or value < 0 else int(value)


def _thp_mode(path: str) -> tuple[str | None, str | None]:
    """The bracketed mode of a sysfs THP file, read only if it is a regular file, at most THP_READ_LIMIT bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        return None, f"{path}: {exc.strerror or exc}"
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            return None, f"{path}: not a regular file: never read"
        data = os.read(fd, THP_READ_LIMIT)
    except OSError as exc:
        return None, f"{path}: {exc.strerror or exc}"
    finally:
        os.close(fd)
    text = data.decode("ascii", "replace")
    start, end = text.find("["), text.find("]")
    if start < 0 or end <= start:
        return None, f"{path}: no mode in brackets in {text.strip()[:80]!r}"
    return text[start + 1:end], None


def _gather() -> dict[str, Any]:
    try:
        pynvml = importlib.import_module("pynvml")  # nvidia-ml-py: untyped, loaded only when NVML is asked
    except ImportError as exc:
        return _failed("pynvml-missing", f"nvidia-ml-py is not importable in the doctor's environment: {exc}")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        facts = _failed("init", str(exc), getattr(exc, "value", None), _error_name(pynvml, exc))
        if facts["nvml"]["error"]["name"] == "NVML_ERROR_LIBRARY_NOT_FOUND":
            facts["nvml"]["error"]["loader"] = _loader_error("libnvidia-ml.so.1")
        return facts
    try:
        return _gather_initialized(pynvml)
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


def _loader_error(library: str) -> str | None:
    """The dynamic loader's own words (pynvml reports only 'not found')."""

    try:
        ctypes.CDLL(library)
    except OSError as exc:
        return str(exc)
    return None


def _error_name(pynvml: Any, exc: Exception) -> str:
    code = getattr(exc, "value", None)
    for attr in dir(pynvml):
        if attr.startswith("NVML_ERROR_") and getattr(pynvml, attr) == code:
            return str(attr)
    return type(exc).__name__


class _Queries:
    """Runs NVML queries, keeping unsupported ones and failures apart from values."""

    def __init__(self, pynvml: Any) -> None:
        self.pynvml = pynvml
        self.unsupported: list[str] = []
        self.errors: dict[str, str] = {}

    def __call__(self, field: str, query: Callable[[], Any]) -> Any:
        try:
            return query()
        except self.pynvml.NVMLError as exc:
            name = _error_name(self.pynvml, exc)
            if name in ("NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_FUNCTION_NOT_FOUND"):
                self.unsupported.append(field)
            else:
                self.errors[field] = f"{name}: {exc}"
            return None


def _text(value: Any) -> Any:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _gather_initialized(pynvml: Any) -> dict[str, Any]:
    system = _Queries(pynvml)
    cuda_raw = system("cuda_driver_version", pynvml.nvmlSystemGetCudaDriverVersion_v2) if hasattr(
        pynvml, "nvmlSystemGetCudaDriverVersion_v2") else system("cuda_driver_version",
                                                                 pynvml.nvmlSystemGetCudaDriverVersion)
    count = system("device_count", pynvml.nvmlDeviceGetCount) or 0
    facts: dict[str, Any] = {
        "nvml": {"ok": True, "error": None, "library": _loaded_library("libnvidia-ml"),
                 "nvml_version": _text(system("nvml_version", pynvml.nvmlSystemGetNVMLVersion)),
                 "pynvml_version": _pynvml_version()},
        "driver_version": _text(system("driver_version", pynvml.nvmlSystemGetDriverVersion)),
        "cuda_driver_version_raw": cuda_raw,
        "cuda_driver_version": f"{cuda_raw // 1000}.{(cuda_raw % 1000) // 10}" if cuda_raw else None,
        "device_count": count,
        "devices": [_device(pynvml, index) for index in range(count)],
        "conf_compute": _conf_compute(pynvml, system),
    }
    facts["nvml"]["unsupported"] = system.unsupported
    facts["nvml"]["errors"] = system.errors
    return facts


def _conf_compute(pynvml: Any, q: _Queries) -> dict[str, Any] | None:
    """NVIDIA Confidential Computing, as vLLM 0.34 reads it (platforms/cuda.py: nvmlSystemGetConfComputeState,
    `ccFeature != 0` is on): the system state's three fields; None where NVML or the bindings lack the query."""
    if not hasattr(pynvml, "nvmlSystemGetConfComputeState"):
        q.unsupported.append("conf_compute")
        return None
    state = q("conf_compute", pynvml.nvmlSystemGetConfComputeState)
    if state is None:
        return None
    return {"cc_feature": int(state.ccFeature), "environment": int(state.environment),
            "dev_tools_mode": int(state.devToolsMode)}


def _device(pynvml: Any, index: int) -> dict[str, Any]:
    q = _Queries(pynvml)
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    cc = q("compute_capability", lambda: pynvml.nvmlDeviceGetCudaComputeCapability(handle))
    device: dict[str, Any] = {
        "index": index,
        "name": _text(q("name", lambda: pynvml.nvmlDeviceGetName(handle))),
        "uuid": _text(q("uuid", lambda: pynvml.nvmlDeviceGetUUID(handle))),
        "pci_bus_id": _text(q("pci_bus_id", lambda: pynvml.nvmlDeviceGetPciInfo(handle).busId)),
        "compute_capability": list(cc) if cc else None,
        "memory": _memory(pynvml, q, handle),
        "persistence_mode": _enabled(pynvml, q("persistence_mode", lambda: pynvml.nvmlDeviceGetPersistenceMode(handle))),
        "mig": _mig(pynvml, q, handle),
        "ecc": _ecc(pynvml, q, handle),
        "retired_pages_pending": _enabled(pynvml, q(
            "retired_pages_pending", lambda: pynvml.nvmlDeviceGetRetiredPagesPendingStatus(handle))),
        "remapped_rows": _remapped_rows(q, pynvml, handle),
        "clock_event_reasons": _clock_event_reasons(pynvml, q, handle),
        "power": _power(pynvml, q, handle),
        "temperature": _temperature(pynvml, q, handle),
        "pcie": _pcie(pynvml, q, handle),
        "nvlinks": _nvlinks(pynvml, q, handle),
        "processes": _processes(pynvml, q, handle),
    }
    device["unsupported"] = q.unsupported
    device["errors"] = q.errors
    return device


def _enabled(pynvml: Any, value: Any) -> bool | None:
    if value is None:
        return None
    return bool(value == pynvml.NVML_FEATURE_ENABLED)


def _memory(pynvml: Any, q: _Queries, handle: Any) -> dict[str, Any] | None:
    def v2() -> Any:
        return pynvml.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2)

    info = q("memory_v2", v2) if hasattr(pynvml, "nvmlMemory_v2") else None
    if info is None:
        info = q("memory", lambda: pynvml.nvmlDeviceGetMemoryInfo(handle))
    if info is None:
        return None
    return {"total": int(info.total), "used": int(info.used), "free": int(info.free),
            "reserved": int(getattr(info, "reserved", 0)) if hasattr(info, "reserved") else None}


def _mig(pynvml: Any, q: _Queries, handle: Any) -> dict[str, Any] | None:
    modes = q("mig_mode", lambda: pynvml.nvmlDeviceGetMigMode(handle))
    if modes is None:
        return None
    current, pending = (bool(m == pynvml.NVML_DEVICE_MIG_ENABLE) for m in modes)
    devices: list[dict[str, Any]] = []
    if current:
        slots = q("mig_device_count", lambda: pynvml.nvmlDeviceGetMaxMigDeviceCount(handle)) or 0
        for slot in range(slots):
            try:
                mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
            except pynvml.NVMLError:
                continue  # an empty slot
            memory = q("mig_memory", partial(pynvml.nvmlDeviceGetMemoryInfo, mig))
            devices.append({"slot": slot, "uuid": _text(q("mig_uuid", partial(pynvml.nvmlDeviceGetUUID, mig))),
                            "memory_total": int(memory.total) if memory is not None else None})
    return {"current": current, "pending": pending, "devices": devices}


def _ecc(pynvml: Any, q: _Queries, handle: Any) -> dict[str, Any] | None:
    modes = q("ecc_mode", lambda: pynvml.nvmlDeviceGetEccMode(handle))
    if modes is None:
        return None
    current = bool(modes[0] == pynvml.NVML_FEATURE_ENABLED)
    volatile = q("ecc_volatile_uncorrected", lambda: pynvml.nvmlDeviceGetTotalEccErrors(
        handle, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC)) if current else None
    aggregate = q("ecc_aggregate_uncorrected", lambda: pynvml.nvmlDeviceGetTotalEccErrors(
        handle, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_AGGREGATE_ECC)) if current else None
    return {"enabled": current, "pending": bool(modes[1] == pynvml.NVML_FEATURE_ENABLED),
            "volatile_uncorrected": int(volatile) if volatile is not None else None,
            "aggregate_uncorrected": int(aggregate) if aggregate is not None else None}


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int) else None


def _query(pynvml: Any, q: _Queries, field: str, names: tuple[str, ...], *args: Any) -> Any:
    """The first of `names` that these bindings have (older ones lack the newer names), else unsupported."""
    for name in names:
        function = getattr(pynvml, name, None)
        if function is not None:
            return q(field, partial(function, *args))
    q.unsupported.append(field)
    return None


def _clock_event_reasons(pynvml: Any, q: _Queries, handle: Any) -> int | None:
    return _int(_query(pynvml, q, "clock_event_reasons", ("nvmlDeviceGetCurrentClocksEventReasons",
                                                          "nvmlDeviceGetCurrentClocksThrottleReasons"), handle))


def _power(pynvml: Any, q: _Queries, handle: Any) -> dict[str, Any] | None:
    power = {"limit_mw": _int(_query(pynvml, q, "power_limit", ("nvmlDeviceGetPowerManagementLimit",), handle)),
             "default_limit_mw": _int(_query(pynvml, q, "power_default_limit",
                                             ("nvmlDeviceGetPowerManagementDefaultLimit",), handle)),
             "enforced_limit_mw": _int(_query(pynvml, q, "power_enforced_limit",
                                              ("nvmlDeviceGetEnforcedPowerLimit",), handle))}
    return power if any(v is not None for v in power.values()) else None


def _temperature(pynvml: Any, q: _Queries, handle: Any) -> dict[str, Any] | None:
    temperature = {
        "gpu_c": _int(_query(pynvml, q, "temperature", ("nvmlDeviceGetTemperature",), handle,
                             pynvml.NVML_TEMPERATURE_GPU)),
        "slowdown_c": _int(_query(pynvml, q, "temperature_slowdown", ("nvmlDeviceGetTemperatureThreshold",),
                                  handle, pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN)),
        "shutdown_c": _int(_query(pynvml, q, "temperature_shutdown", ("nvmlDeviceGetTemperatureThreshold",),
                                  handle, pynvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN))}
    return temperature if any(v is not None for v in temperature.values()) else None


def _pcie(pynvml: Any, q: _Queries, handle: Any) -> dict[str, Any] | None:
    link = {"generation": ("pcie_generation", "nvmlDeviceGetCurrPcieLinkGeneration"),
            "max_generation": ("pcie_max_generation", "nvmlDeviceGetMaxPcieLinkGeneration"),
            "gpu_max_generation": ("pcie_gpu_max_generation", "nvmlDeviceGetGpuMaxPcieLinkGeneration"),
            "width": ("pcie_width", "nvmlDeviceGetCurrPcieLinkWidth"),
            "max_width": ("pcie_max_width", "nvmlDeviceGetMaxPcieLinkWidth"),
            "replay_counter": ("pcie_replay_counter", "nvmlDeviceGetPcieReplayCounter")}
    pcie = {key: _int(_query(pynvml, q, field, (name,), handle)) for key, (field, name) in link.items()}
    return pcie if any(v is not None for v in pcie.values()) else None


_NVLINK_COUNTERS = (("replay", "NVML_NVLINK_ERROR_DL_REPLAY"), ("recovery", "NVML_NVLINK_ERROR_DL_RECOVERY"),
                    ("crc_flit", "NVML_NVLINK_ERROR_DL_CRC_FLIT"), ("crc_data", "NVML_NVLINK_ERROR_DL_CRC_DATA"))


def _nvlinks(pynvml: Any, q: _Queries, handle: Any) -> list[dict[str, Any]]:
    """Each NVLink NVML lists and its error counters. A GPU without NVLink answers the first query
    unsupported (recorded once); a link number past the GPU's last is an invalid argument and ends the list;
    a link the GPU lacks in between is skipped."""
    if not hasattr(pynvml, "nvmlDeviceGetNvLinkState"):
        q.unsupported.append("nvlink_state")
        return []
    links: list[dict[str, Any]] = []
    for link in range(int(getattr(pynvml, "NVML_NVLINK_MAX_LINKS", 18))):
        try:
            state = pynvml.nvmlDeviceGetNvLinkState(handle, link)
        except pynvml.NVMLError as exc:
            name = _error_name(pynvml, exc)
            if link == 0 and name in ("NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_FUNCTION_NOT_FOUND"):
                q.unsupported.append("nvlink_state")
                break
            if name == "NVML_ERROR_INVALID_ARGUMENT":
                break
            if name != "NVML_ERROR_NOT_SUPPORTED":
                q.errors[f"nvlink_state[{link}]"] = f"{name}: {exc}"
            continue
        active = bool(state == pynvml.NVML_FEATURE_ENABLED)
        entry: dict[str, Any] = {"link": link, "active": active}
        for key, constant in _NVLINK_COUNTERS:
            counter = getattr(pynvml, constant, None)
            entry[key] = _int(q(f"nvlink_{key}", partial(pynvml.nvmlDeviceGetNvLinkErrorCounter, handle, link,
                                                         counter))) if counter is not None and active else None
        links.append(entry)
    return links


def _remapped_rows(q: _Queries, pynvml: Any, handle: Any) -> dict[str, Any] | None:
    rows = q("remapped_rows", lambda: pynvml.nvmlDeviceGetRemappedRows(handle))
    if rows is None:
        return None
    correctable, uncorrectable, pending, failure = rows
    return {"correctable": int(correctable), "uncorrectable": int(uncorrectable),
            "pending": bool(pending), "failure": bool(failure)}


def _processes(pynvml: Any, q: _Queries, handle: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for kind, query in (("compute", "nvmlDeviceGetComputeRunningProcesses"),
                        ("graphics", "nvmlDeviceGetGraphicsRunningProcesses")):
        if not hasattr(pynvml, query):
            continue
        for proc in q(f"{kind}_processes", partial(getattr(pynvml, query), handle)) or []:
            pid = int(proc.pid)
            used = getattr(proc, "usedGpuMemory", None)
            found.append({"pid": pid, "kind": kind, "name": _comm(pid),
                          "used_bytes": int(used) if isinstance(used, int) else None, "own": _is_own(pid)})
    return found


def _comm(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as handle:
            return handle.read().strip() or None
    except OSError:
        return None  # another PID namespace (a container) or already gone


def _is_own(pid: int) -> bool:
    """The doctor itself or one of its probes (children of this process)."""
    if pid == os.getpid():
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            stat = handle.read()
    except OSError:
        return False
    # pid (comm) state ppid ...: comm may hold spaces or parentheses, so split after the last ')'.
    fields = stat.rpartition(")")[2].split()
    return len(fields) > 1 and fields[1] == str(os.getpid())


def _loaded_library(stem: str) -> str | None:
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                path = line.rsplit(None, 1)[-1] if "/" in line else ""
                if stem in os.path.basename(path):
                    return path
    except OSError:
        pass
    return None


def _pynvml_version() -> str | None:
    try:
        return metadata.version("nvidia-ml-py")
    except metadata.PackageNotFoundError:
        return None
