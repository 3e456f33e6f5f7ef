"""Layers: the GPUs (NVML), the CUDA stack (torch and Triton in the target) and the kernels.

Three checks over recorded facts:
- `gpu`: the driver and each GPU through NVML: health flags, memory other processes hold, MIG, and which
  physical GPUs CUDA_VISIBLE_DEVICES leaves vLLM, by CUDA's own reading rules.
- `cuda-stack`: torch's CUDA build against the driver and the GPUs (initialization, device count, the archs
  it was compiled for), and where Triton finds ptxas and libcuda.
- `kernels`: attention and rotary kernels run for real against an fp32 reference on the same GPU.

One module for the three because they share the reading of the GPU facts (visible devices, the finding that
explains why there is no GPU); each check is a small class at the end.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from dflash_doctor.archs import coverage, parse_arch
from dflash_doctor.check import Facts, SectionError
from dflash_doctor.envfacts import Distributions, version_tuple
from dflash_doctor.knowledge.cuda import MINOR_VERSION_COMPAT_DRIVER, min_driver_for_cuda
from dflash_doctor.knowledge.flash_attn import V2_SPEC
from dflash_doctor.knowledge.gpu import (
    CUDA_DEVICE_ORDER_DEFAULT,
    DRIVER_TOO_OLD_MESSAGES,
    KERNEL_UNSUPPORTED_MESSAGES,
    MIG_SINGLE_DEVICE_PER_PROCESS,
    RETIRED_PAGES_PENDING,
    ROW_REMAPPING,
    TORCH_CUDA_INDEXES,
    VLLM_FREE_MEMORY_CHECK,
    VLLM_UUID_VISIBLE_DEVICES_SINCE,
)
from dflash_doctor.model import CheckResult, Finding, Remediation, Status
from dflash_doctor.remedy import Installer

__all__ = ["CudaStackCheck", "GpuCheck", "KernelsCheck", "Visible", "resolve_visible"]

GIB = float(1 << 30)
# A graphics client (Xorg, a desktop) holding less than this is not worth a warning.
GRAPHICS_NOTE_BYTES = 256 << 20
# Memory in use that no listed process accounts for (another container's processes): worth a warning above this.
UNATTRIBUTED_BYTES = 1 << 30

# GPU findings after which there is no GPU for torch to use.
NO_GPU_FINDINGS = ("gpu.nvml-library-missing", "gpu.driver-not-loaded", "gpu.driver-library-mismatch",
                   "gpu.nvml-no-permission", "gpu.nvml-failed", "gpu.no-devices", "gpu.visible-none",
                   "gpu.visible-duplicate")
# CUDA-stack findings after which no kernel can run.
NO_CUDA_FINDINGS = ("cuda.probe-failed", "cuda.torch-absent", "cuda.torch-import-failed", "cuda.torch-cpu-build",
                    "cuda.driver-too-old", "cuda.init-failed")


def _gib(value: float | None) -> str:
    return "?" if value is None else f"{value / GIB:.1f} GiB"


def _sm(cc: Sequence[int] | None) -> str:
    return f"sm_{cc[0]}{cc[1]}" if cc else "sm_?"


def _blocking(prior: CheckResult | None, ids: Sequence[str]) -> Finding | None:
    if prior is None:
        return None
    return next((f for f in prior.findings if f.id in ids and f.status in (Status.FAIL, Status.ERROR)), None)


def _optional(facts: Facts, section: str) -> Any:
    """A section a check can do without (it only sharpens a remedy or a verdict)."""
    try:
        return facts[section]
    except (SectionError, KeyError):
        return None


def _installer(facts: Facts, python: Any = None) -> Installer:
    """Commands for the target: its environment facts, else the interpreter a probe ran in."""
    target = _optional(facts, "target")
    if isinstance(target, Mapping):
        return Installer.for_target(target)
    return Installer(str(python) if python else "python3")


# ------------------------------------------------------------------------------------ visible devices


@dataclass(frozen=True)
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


def resolve_visible(value: str | None, devices: Sequence[Mapping[str, Any]]) -> Visible:
    """Apply CUDA_VISIBLE_DEVICES to the GPUs NVML lists (knowledge.gpu CUDA_VISIBLE_DEVICES_RULES)."""
    count = len(devices)
    if value is None:
        return Visible(None, "unset", tuple(range(count)))
    if value.startswith("GPU-"):
        return _resolve_uuids(value, devices)
    if value.startswith("MIG-"):
        return _resolve_mig(value, devices)
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


def _resolve_uuids(value: str, devices: Sequence[Mapping[str, Any]]) -> Visible:
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
        matches = [d["index"] for d in devices if str(d.get("uuid") or "").startswith(raw)]
        if len(matches) != 1:
            stopped_at = raw
            reason = "no GPU has this UUID" if not matches else f"this prefix matches {len(matches)} GPUs"
            break
        if matches[0] in gpus:
            return Visible(value, "uuids", (), duplicate=raw)
        gpus.append(matches[0])
    return Visible(value, "uuids", tuple(gpus), tuple(candidates[:len(gpus)]), stopped_at, reason)


def _resolve_mig(value: str, devices: Sequence[Mapping[str, Any]]) -> Visible:
    parents: list[int] = []
    entries: list[str] = []
    stopped_at: str | None = None
    reason: str | None = None
    for raw in value.split(","):
        parent = None
        if raw.startswith("MIG-GPU-"):  # legacy MIG-GPU-<uuid>/<gi>/<ci>
            gpu_uuid = raw[len("MIG-"):].split("/")[0]
            parent = next((d["index"] for d in devices if d.get("uuid") == gpu_uuid), None)
        elif raw.startswith("MIG-"):
            parent = next((d["index"] for d in devices
                           for m in (d.get("mig") or {}).get("devices") or []
                           if str(m.get("uuid") or "").startswith(raw)), None)
        if parent is None:
            stopped_at, reason = raw, "no MIG device has this id"
            break
        entries.append(raw)
        if parent not in parents:
            parents.append(parent)
    return Visible(value, "mig", tuple(parents), tuple(entries), stopped_at, reason)


def _visible_of(gpu: Mapping[str, Any]) -> Visible:
    return resolve_visible((gpu.get("environ") or {}).get("CUDA_VISIBLE_DEVICES"), gpu.get("devices") or [])


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
        since = version_tuple(VLLM_UUID_VISIBLE_DEVICES_SINCE.value)
        whole = {str(devices[i].get("uuid")) for i in visible.gpus}
        partial = [e for e in visible.entries if e not in whole]
        if version_tuple(vllm_version) < since or partial:
            why = (f"vLLM {vllm_version} calls int() on each entry (UUIDs are accepted from "
                   f"{VLLM_UUID_VISIBLE_DEVICES_SINCE.value})" if version_tuple(vllm_version) < since else
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
        dists = _optional(facts, "distributions")
        vllm_version = Distributions(dists).version("vllm") if isinstance(dists, Mapping) else None
        findings = [_gpu_summary(gpu, visible), *_visible_findings(gpu, visible, vllm_version)]
        used = [d for d in devices if d["index"] in visible.gpus]
        for device in used:
            findings.extend(_health_findings(device))
            findings.extend(_memory_findings(device))
        return findings


# --------------------------------------------------------------------------------- cuda-stack check


def _exception_text(exc: Mapping[str, Any] | None) -> str:
    if not exc:
        return "unknown error"
    return f"{exc.get('type')}: {str(exc.get('message') or '').strip().splitlines()[0] if exc.get('message') else ''}"


def _torch_index_for(driver_cuda: str | None) -> str | None:
    """The newest PyTorch CUDA index not newer than what the driver supports."""
    have = version_tuple(driver_cuda)
    if not have:
        return None
    for cuda, url in TORCH_CUDA_INDEXES.value:
        if version_tuple(cuda) <= have:
            return url
    return None


def _driver_too_old(torch: Mapping[str, Any], cuda: Mapping[str, Any], driver_cuda: str | None,
                    driver: str | None, installer: Installer) -> Finding:
    torch_cuda = str(torch.get("cuda"))
    base = str(torch.get("version") or "").split("+")[0]
    needed = min_driver_for_cuda(torch_cuda)
    remedies = []
    index = _torch_index_for(driver_cuda)
    if index:
        remedies.append(Remediation(
            installer.install(f"torch=={base}", "--index-url", index),
            f"a torch built for CUDA {index.rsplit('cu', 1)[-1]} (the driver supports {driver_cuda}); vLLM pins "
            "torch, and its own wheel must be built for that CUDA too. If this index has no such torch, the "
            f"newest cu{(driver_cuda or '').split('.')[0]}x index also runs on this driver (CUDA minor version "
            f"compatibility, driver >= {MINOR_VERSION_COMPAT_DRIVER.value.get(version_tuple(driver_cuda)[0], '?')})"))
    remedies.append(Remediation(
        f"sudo apt-get install -y nvidia-driver-{(needed or '').split('.')[0] or 'NNN'}",
        f"or a newer driver: CUDA {torch_cuda} needs >= {needed or 'a newer one'} (Ubuntu's package; elsewhere the "
        "distribution's or NVIDIA's installer), then reboot"))
    said = cuda.get("init_error") or {}
    return Finding("cuda.driver-too-old", Status.FAIL,
                   f"torch {torch.get('version')} is built for CUDA {torch_cuda}, but driver {driver} supports CUDA "
                   f"{driver_cuda} at most: torch cannot initialize CUDA",
                   detail=said.get("message") or "\n".join(cuda.get("warnings") or []),
                   evidence={"torch_cuda": torch_cuda, "driver": driver, "driver_cuda": driver_cuda,
                             "min_driver": needed, "init_error": said or None, "warnings": cuda.get("warnings")},
                   remediation=tuple(remedies))


def _says_too_old(cuda: Mapping[str, Any]) -> bool:
    texts = [str((cuda.get("init_error") or {}).get("message") or ""), *map(str, cuda.get("warnings") or [])]
    return any(marker.lower() in text.lower() for text in texts for marker in DRIVER_TOO_OLD_MESSAGES.value)


def _arch_names(arch_list: Sequence[str]) -> tuple[list[str], list[str]]:
    sass: list[str] = []
    ptx: list[str] = []
    for name in arch_list:
        try:
            arch = parse_arch(name)
        except ValueError:
            continue
        (sass if arch.kind == "sm" else ptx if arch.kind == "compute" else []).append(name)
    return sass, ptx


def _triton_findings(triton: Mapping[str, Any], stack: Mapping[str, Any], archs: Sequence[Sequence[int]],
                     installer: Installer) -> tuple[list[Finding], str]:
    if not triton.get("installed"):
        return [Finding("cuda.triton-absent", Status.WARN, "Triton is not installed: torch.compile and vLLM's "
                        "Triton kernels cannot run", remediation=(Remediation(installer.install("triton"),
                                                                              "install the Triton torch requires"),))], ""
    if not triton.get("import_ok"):
        return [Finding("cuda.triton-import-failed", Status.FAIL,
                        f"`import triton` fails: {_exception_text(triton.get('exception'))}",
                        evidence={"exception": triton.get("exception")})], ""
    findings: list[Finding] = []
    version = triton.get("version")
    blackwell = any(cc[0] >= 10 for cc in archs) and "ptxas_blackwell" in triton
    tools = [("ptxas", triton.get("ptxas") or {})]
    if blackwell:
        tools.append(("ptxas-blackwell", triton.get("ptxas_blackwell") or {}))
    notes = []
    for name, tool in tools:
        if tool.get("path"):
            notes.append(f"{name} {tool.get('version')}")
            continue
        looked = "; ".join(f"{p['where']}: {p['path']} ({'found' if p.get('exists') else 'missing'})"
                           for p in tool.get("looked") or [])
        findings.append(Finding("cuda.triton-ptxas-missing", Status.FAIL,
                                f"Triton {version} cannot find {name}: looked at {looked}",
                                detail=str(tool.get("error") or ""), evidence={"tool": tool},
                                remediation=(Remediation(installer.install(f"triton=={version}", reinstall=True),
                                                         "put Triton's bundled ptxas back"),)))
    libcuda = triton.get("libcuda") or {}
    if libcuda.get("dirs"):
        notes.append(f"libcuda in {', '.join(libcuda['dirs'])}")
    else:
        places = libcuda.get("looked") or {}
        loaded = (stack.get("libcuda") or {}).get("path")
        remedies = [Remediation("sudo ldconfig", "refresh the linker cache Triton reads (ldconfig -p)")]
        if loaded:
            remedies.append(Remediation(f"export TRITON_LIBCUDA_PATH={loaded.rsplit('/', 1)[0]}",
                                        "or tell Triton where the dynamic loader found it"))
        findings.append(Finding(
            "cuda.triton-libcuda-missing", Status.FAIL,
            f"Triton {version} cannot find libcuda.so.1: TRITON_LIBCUDA_PATH "
            f"{places.get('TRITON_LIBCUDA_PATH') or 'unset'}, `ldconfig -p` lists "
            f"{', '.join(places.get('ldconfig') or []) or 'none'}, LD_LIBRARY_PATH "
            f"{':'.join(places.get('LD_LIBRARY_PATH') or []) or 'unset'}",
            detail=str(libcuda.get("error") or ""), evidence={"libcuda": libcuda, "loaded_by_ctypes": loaded},
            remediation=tuple(remedies)))
    return findings, f"Triton {version} ({', '.join(notes)})"


def _torch_devices(stack: Mapping[str, Any], gpu: Mapping[str, Any], visible: Visible) -> list[dict[str, Any]]:
    """torch's devices, each matched with its NVML GPU (by UUID, else by CUDA order)."""
    nvml = {str(d.get("uuid")): d for d in gpu.get("devices") or []}
    by_index = {d["index"]: d for d in gpu.get("devices") or []}
    matched = []
    for position, device in enumerate((stack.get("cuda") or {}).get("devices") or []):
        physical = nvml.get(str(device.get("uuid")))
        if physical is None and position < len(visible.gpus):
            physical = by_index.get(visible.gpus[position])
        matched.append({**device, "physical": physical.get("index") if physical else None})
    return matched


class CudaStackCheck:
    id: ClassVar[str] = "cuda-stack"
    layer: ClassVar[str] = "gpu"
    title: ClassVar[str] = "CUDA stack (torch, Triton)"
    needs: ClassVar[frozenset[str]] = frozenset({"cuda_stack", "gpu", "target"})
    after: ClassVar[frozenset[str]] = frozenset({"gpu"})
    requires_gpu: ClassVar[bool] = True

    def judge(self, facts: Facts) -> Iterable[Finding]:
        blocking = _blocking(facts.prior.get("gpu"), NO_GPU_FINDINGS)
        if blocking is not None:
            return [Finding("cuda.no-gpu", Status.SKIP, f"no usable GPU ({blocking.id}): torch's CUDA was not checked",
                            evidence={"gpu_finding": blocking.id})]
        stack, gpu = facts["cuda_stack"], facts["gpu"]
        installer = _installer(facts, stack.get("executable"))
        process = stack.get("process") or {}
        torch = stack.get("torch")
        if torch is None or stack.get("probe_error"):
            said = (f"stopped: {_exception_text(stack['probe_error'])}" if stack.get("probe_error")
                    else process.get("error") or "reported nothing")
            return [Finding("cuda.probe-failed", Status.FAIL, f"the CUDA-stack probe in the target {said}",
                            detail=str(process.get("stderr") or "")[-1500:],
                            evidence={"process": process, "probe_error": stack.get("probe_error")})]
        if not torch.get("installed"):
            return [Finding("cuda.torch-absent", Status.SKIP, "torch is not installed in the target: nothing to check")]
        if not torch.get("import_ok"):
            return [Finding("cuda.torch-import-failed", Status.FAIL,
                            f"`import torch` fails: {_exception_text(torch.get('exception'))}",
                            evidence={"exception": torch.get("exception")})]
        if not torch.get("cuda"):
            kind = f"ROCm (HIP {torch.get('hip')})" if torch.get("hip") else "CPU-only"
            index = _torch_index_for(gpu.get("cuda_driver_version"))
            base = str(torch.get("version") or "").split("+")[0]
            return [Finding("cuda.torch-cpu-build", Status.FAIL,
                            f"torch {torch.get('version')} is a {kind} build: it cannot use the NVIDIA GPUs",
                            remediation=(Remediation(installer.install(f"torch=={base}", "--index-url", index),
                                                     f"a CUDA build the driver ({gpu.get('cuda_driver_version')}) "
                                                     "supports"),) if index else ())]
        cuda = stack.get("cuda") or {}
        driver_cuda, driver = gpu.get("cuda_driver_version"), gpu.get("driver_version")
        torch_major = version_tuple(torch.get("cuda"))[:1]
        major_too_new = bool(torch_major and driver_cuda and torch_major > version_tuple(driver_cuda)[:1])
        visible = _visible_of(gpu)
        if not cuda.get("available"):
            if _says_too_old(cuda) or major_too_new:
                return [_driver_too_old(torch, cuda, driver_cuda, driver, installer)]
            libcuda = stack.get("libcuda") or {}
            said = cuda.get("init_error") or cuda.get("is_available_error")
            return [Finding("cuda.init-failed", Status.FAIL,
                            f"torch {torch.get('version')} cannot initialize CUDA: "
                            f"{_exception_text(said) if said else '; '.join(cuda.get('warnings') or []) or 'no reason given'}",
                            detail=f"cuInit: {libcuda.get('cuInit_name') or libcuda.get('cuInit')} "
                            f"{libcuda.get('cuInit_message') or ''}".strip(),
                            evidence={"cuda": cuda, "libcuda": libcuda})]
        findings: list[Finding] = []
        devices = _torch_devices(stack, gpu, visible)
        migrated = any((d.get("mig") or {}).get("current") for d in gpu.get("devices") or [])
        if not migrated and visible.form != "mig" and len(devices) != len(visible.gpus):
            findings.append(Finding(
                "cuda.device-count-mismatch", Status.FAIL,
                f"torch sees {len(devices)} GPU(s) but NVML and CUDA_VISIBLE_DEVICES give {len(visible.gpus)}",
                evidence={"torch": [d.get("name") for d in devices], "expected": list(visible.gpus),
                          "CUDA_VISIBLE_DEVICES": visible.value}))
        sass, ptx = _arch_names(torch.get("arch_list") or [])
        coverage_notes = []
        for device in devices:
            cc = tuple(device.get("capability") or ())
            if len(cc) != 2:
                continue
            covered = coverage(sass, ptx, (int(cc[0]), int(cc[1])))
            label = f"cuda:{device['index']} {device.get('name')} {_sm(cc)}"
            if covered["status"] == "sass":
                coverage_notes.append(f"{label}: SASS {covered['by']}")
                continue
            evidence = {"device": device, "arch_list": torch.get("arch_list")}
            if covered["status"] == "ptx-jit":
                old_driver = version_tuple(driver_cuda) < version_tuple(torch.get("cuda"))
                findings.append(Finding(
                    "cuda.arch-ptx-only", Status.FAIL if old_driver else Status.WARN,
                    f"{label}: torch {torch.get('version')} has no SASS for it, only PTX {covered['by']} to JIT"
                    + (f", which driver {driver} (CUDA {driver_cuda}) cannot JIT: it is newer than the driver"
                       if old_driver else ": slow first launches"), evidence=evidence))
                coverage_notes.append(f"{label}: PTX {covered['by']}")
                continue
            findings.append(Finding(
                "cuda.arch-not-covered", Status.FAIL,
                f"{label}: torch {torch.get('version')} was built for {' '.join(torch.get('arch_list') or [])}, "
                f"nothing of which runs on {_sm(cc)}: 'no kernel image is available for execution on the device'",
                evidence=evidence))
        triton_findings, triton_note = _triton_findings(stack.get("triton") or {}, stack,
                                                        [d.get("capability") or (0, 0) for d in devices], installer)
        findings.extend(triton_findings)
        compat = ""
        if major_too_new:
            compat = f" via CUDA forward compatibility (libcuda {(stack.get('libcuda') or {}).get('path')})"
        elif version_tuple(driver_cuda) < version_tuple(torch.get("cuda")):
            compat = " via CUDA minor version compatibility"
        summary = (f"torch {torch.get('version')} (CUDA {torch.get('cuda')}; driver {driver} supports "
                   f"{driver_cuda}{compat}) · {len(devices)} GPU(s): {'; '.join(coverage_notes) or 'none covered'}"
                   + (f" · {triton_note}" if triton_note else ""))
        findings.insert(0, Finding("cuda.ok", Status.PASS, summary, evidence={
            "torch": {k: torch.get(k) for k in ("version", "cuda", "git", "arch_list", "file")},
            "devices": devices, "libcuda": stack.get("libcuda"), "triton": stack.get("triton")}))
        return findings


# ------------------------------------------------------------------------------------ kernels check

FAMILY_TITLES = {
    "sdpa": "torch SDPA (flash, memory-efficient)",
    "triton": "Triton (the doctor's own kernel)",
    "flash_attn": "flash_attn.flash_attn_func",
    "flash_attn_rotary": "flash_attn apply_rotary",
    "vllm_flash_attn": "vLLM's bundled flash-attention",
    "vllm_rotary": "vLLM's bundled rotary",
}
# Which import check explains a family that does not import (by the check's id), in order.
IMPORT_CHECKS = {"flash_attn": ("imports", "namespaces", "extensions"),
                 "flash_attn_rotary": ("imports", "namespaces", "extensions"),
                 "vllm_flash_attn": ("import-surface", "extensions"),
                 "vllm_rotary": ("import-surface", "extensions")}


def _declined(case: Mapping[str, Any]) -> bool:
    """A kernel that refuses this GPU or dtype by design (or a case the doctor does not run here)."""
    if case.get("unsupported") or (case.get("status") == "not-run" and "earlier case" not in str(case.get("reason"))):
        return True
    message = str((case.get("error") or {}).get("message") or "")
    return case.get("status") == "error" and any(m in message for m in KERNEL_UNSUPPORTED_MESSAGES.value)


def _case_label(case: Mapping[str, Any]) -> str:
    parts = [str(case.get("kernel")), str(case.get("dtype"))]
    if case.get("head_dim"):
        parts.append(f"d{case['head_dim']}")
    if case.get("variant"):
        parts.append(str(case["variant"]))
    return " ".join(parts)


def _case_row(case: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("kernel", "dtype", "head_dim", "variant", "status", "max_abs_err", "tolerance", "first_ms", "warm_ms")
    return {k: case.get(k) for k in keys if case.get(k) is not None}


def _import_explanation(family: str, prior: Mapping[str, CheckResult]) -> Finding | None:
    for check_id in IMPORT_CHECKS.get(family, ()):
        result = prior.get(check_id)
        if result is None:
            continue
        bad = next((f for f in result.findings if f.status in (Status.FAIL, Status.WARN, Status.ERROR)), None)
        if bad is not None:
            return bad
    return None


@dataclass
class _Tally:
    ok: list[tuple[str, Mapping[str, Any], str]]
    declined: list[str]


def _family_findings(result: Mapping[str, Any], prior: Mapping[str, CheckResult], installer: Installer,
                     tally: _Tally) -> Iterator[Finding]:
    family = str(result.get("family"))
    title = FAMILY_TITLES.get(family, family)
    process = result.get("process") or {}
    imported = result.get("import") or {}
    if process.get("error") and "devices" not in result:
        yield Finding("kernels.crashed", Status.FAIL, f"{title}: the probe process {process['error']}",
                      detail=str(process.get("stderr") or "")[-1500:], evidence={"family": family, "process": process})
        return
    if result.get("probe_error"):
        error = result["probe_error"]
        yield Finding("kernels.out-of-memory" if error.get("oom") else "kernels.error", Status.FAIL,
                      f"{title}: the probe stopped: {_exception_text(error)}", detail=str(error.get("traceback") or ""),
                      evidence={"family": family, "error": error})
        return
    if not imported.get("installed", True):
        remedies: tuple[Remediation, ...] = ()
        if family.startswith("flash_attn"):
            remedies = (Remediation(installer.install(V2_SPEC.value, no_build_isolation=True),
                                    "optional: vLLM does not need flash-attn on CUDA; install v2, built against this "
                                    "torch, to have its kernels run here"),)
        package = {"triton": "Triton", "vllm_flash_attn": "vLLM", "vllm_rotary": "vLLM"}.get(family, "flash-attn")
        yield Finding("kernels.not-installed", Status.PASS, f"{title}: {package} is not installed, not run",
                      evidence={"family": family, "statement": imported.get("statement")}, remediation=remedies)
        return
    if not imported.get("ok", True):
        explained = _import_explanation(family, prior)
        why = (f"see {explained.id}: {explained.title}" if explained is not None
               else _exception_text(imported.get("exception")))
        yield Finding("kernels.not-importable", Status.SKIP,
                      f"{title}: not run, `{imported.get('statement')}` fails ({why})",
                      evidence={"family": family, "import_finding": explained.id if explained else None,
                                "exception": imported.get("exception")})
        return
    cuda = result.get("cuda") or {}
    if cuda and not cuda.get("available"):
        yield Finding("kernels.error", Status.FAIL,
                      f"{title}: torch in the probe could not use CUDA: "
                      + (_exception_text(cuda.get("error")) if cuda.get("error") else "torch.cuda.is_available() is False"),
                      evidence={"family": family, "cuda": cuda})
        return
    cases = [(device, case) for device in result.get("devices") or [] for case in device.get("cases") or []]
    failed_setup = [d for d in result.get("devices") or [] if d.get("error")]
    for device in failed_setup:
        error = device["error"]
        yield Finding("kernels.out-of-memory" if error.get("oom") else "kernels.error", Status.FAIL,
                      f"{title} on {device.get('name')}: {_exception_text(error)}",
                      evidence={"family": family, "error": error})
    wrong = [(d, c) for d, c in cases if c.get("status") == "mismatch"]
    errors = [(d, c) for d, c in cases if c.get("status") in ("error", "not-run") and not _declined(c)]
    declined = [(d, c) for d, c in cases if _declined(c)]
    ok = [(d, c) for d, c in cases if c.get("status") == "ok"]
    for device, case in wrong:
        yield Finding("kernels.wrong-result", Status.FAIL,
                      f"{title} on {device.get('name')} ({_sm(device.get('capability'))}): {_case_label(case)} is off "
                      f"by {case.get('max_abs_err')} against the fp32 reference (tolerance {case.get('tolerance'):.3g})"
                      + (", and not finite" if case.get("nonfinite") else ""),
                      evidence={"family": family, "case": dict(case)})
    for device, case in errors:
        error = case.get("error") or {}
        oom = bool(error.get("oom"))
        yield Finding("kernels.out-of-memory" if oom else "kernels.error", Status.FAIL,
                      f"{title} on {device.get('name')} ({_sm(device.get('capability'))}): {_case_label(case)} fails: "
                      + (_exception_text(error) if error else str(case.get("reason"))),
                      detail=str(error.get("traceback") or ""), evidence={"family": family, "case": dict(case)})
    for device, case in declined:
        reason = case.get("reason") or _exception_text(case.get("error"))
        tally.declined.append(f"{_case_label(case)} ({reason})")
    for device, case in ok:
        tally.ok.append((family, case, str(device.get("name"))))
    if ok and not wrong and not errors and not failed_setup:
        worst = max(ok, key=lambda dc: (dc[1].get("max_abs_err") or 0) / (dc[1].get("tolerance") or 1))[1]
        yield Finding("kernels.family-ok", Status.PASS,
                      f"{title}: {len(ok)} case(s) within tolerance (worst {_case_label(worst)}: "
                      f"{worst.get('max_abs_err'):.3g} <= {worst.get('tolerance'):.3g}); first run "
                      f"{max(c.get('first_ms') or 0 for _, c in ok):.0f} ms, warm "
                      f"{max(c.get('warm_ms') or 0 for _, c in ok):.3f} ms",
                      evidence={"family": family, "version": imported.get("version"),
                                "timings": result.get("timings"), "process_s": process.get("duration_s"),
                                "cases": [_case_row(c) for _, c in cases]})
    elif declined and not ok and not wrong and not errors:
        yield Finding("kernels.unsupported", Status.SKIP,
                      f"{title}: declines this GPU: {tally.declined[-1]}",
                      evidence={"family": family, "cases": [_case_row(c) | {"reason": c.get("reason") or
                                                                               _exception_text(c.get("error"))}
                                                            for _, c in declined]})


class KernelsCheck:
    id: ClassVar[str] = "kernels"
    layer: ClassVar[str] = "kernels"
    title: ClassVar[str] = "GPU kernels"
    needs: ClassVar[frozenset[str]] = frozenset({"kernels", "target"})
    after: ClassVar[frozenset[str]] = frozenset({"gpu", "cuda-stack"})
    requires_gpu: ClassVar[bool] = True

    def judge(self, facts: Facts) -> Iterable[Finding]:
        blocking = _blocking(facts.prior.get("gpu"), NO_GPU_FINDINGS)
        if blocking is not None:
            return [Finding("kernels.no-gpu", Status.SKIP, f"no usable GPU ({blocking.id}): no kernel was run",
                            evidence={"gpu_finding": blocking.id})]
        blocking = _blocking(facts.prior.get("cuda-stack"), NO_CUDA_FINDINGS)
        if blocking is not None:
            return [Finding("kernels.no-cuda", Status.SKIP, f"torch cannot use CUDA here ({blocking.id}): no kernel "
                            "was run", evidence={"cuda_finding": blocking.id})]
        kernels = facts["kernels"]
        installer = _installer(facts)
        tally = _Tally([], [])
        findings: list[Finding] = []
        for result in kernels.get("families") or []:
            findings.extend(_family_findings(result, facts.prior, installer, tally))
        if tally.ok and not any(f.status in (Status.FAIL, Status.ERROR) for f in findings):
            findings.insert(0, _kernels_summary(kernels, tally))
        if not findings:
            findings.append(Finding("kernels.no-cuda", Status.SKIP, "no kernel family reported any case"))
        return findings


def _kernels_summary(kernels: Mapping[str, Any], tally: _Tally) -> Finding:
    families = list(dict.fromkeys(FAMILY_TITLES.get(f, f) for f, _, _ in tally.ok))
    gpus = sorted({name for _, _, name in tally.ok})
    worst = max(tally.ok, key=lambda item: (item[1].get("max_abs_err") or 0) / (item[1].get("tolerance") or 1))
    ratio = (worst[1].get("max_abs_err") or 0) / (worst[1].get("tolerance") or 1)
    wall = max(((r.get("process") or {}).get("duration_s") or 0) for r in kernels.get("families") or [])
    title = (f"{len(tally.ok)} case(s) within tolerance on {', '.join(gpus)}: {', '.join(families)}; worst error "
             f"{ratio:.2f}x tolerance ({_case_label(worst[1])}); slowest family {wall:.1f} s")
    if tally.declined:
        title += f"; not applicable here: {len(tally.declined)} case(s)"
    return Finding("kernels.ok", Status.PASS, title, evidence={
        "problem": kernels.get("problem"), "declined": tally.declined,
        "process_s": {r.get("family"): (r.get("process") or {}).get("duration_s") for r in kernels.get("families") or []}})
