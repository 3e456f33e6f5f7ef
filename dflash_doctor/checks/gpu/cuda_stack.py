"""Rules of the cuda-stack check (CudaStackCheck in the package): the CUDA stack in the target: torch's CUDA
build against the driver and the GPUs (initialization, device count, the archs it was compiled for), and where
Triton finds ptxas and libcuda."""

from __future__ import annotations

from collections.abc import Sequence

from dflash_doctor.checks.gpu.codes import (
    CUDA_STACK_ARCH_NOT_COVERED,
    CUDA_STACK_ARCH_PTX_ONLY,
    CUDA_STACK_DEVICE_COUNT_MISMATCH,
    CUDA_STACK_DRIVER_TOO_OLD,
    CUDA_STACK_INIT_FAILED,
    CUDA_STACK_OK,
    CUDA_STACK_PROBE_FAILED,
    CUDA_STACK_TORCH_ABSENT,
    CUDA_STACK_TORCH_CPU_BUILD,
    CUDA_STACK_TORCH_IMPORT_FAILED,
    CUDA_STACK_TRITON_ABSENT,
    CUDA_STACK_TRITON_IMPORT_FAILED,
    CUDA_STACK_TRITON_LIBCUDA_MISSING,
    CUDA_STACK_TRITON_PTXAS_MISSING,
)
from dflash_doctor.checks.gpu.visible_devices import (
    Visible,
    exception_text,
    sm,
    visible_of,
)
from dflash_doctor.checks.remedy import Installer, export
from dflash_doctor.facts.gpu.cuda_shapes import (
    CudaRuntime,
    CudaStack,
    CudaTorch,
    CudaTriton,
    Libcuda,
    ToolLookup,
    TorchDevice,
    TritonLibcuda,
)
from dflash_doctor.facts.gpu.nvml_shapes import Gpu
from dflash_doctor.facts.python.envfacts import version_tuple
from dflash_doctor.knowledge.archs import coverage, parse_arch
from dflash_doctor.knowledge.cuda import MINOR_VERSION_COMPAT_DRIVER, min_driver_for_cuda
from dflash_doctor.knowledge.gpu import (
    DRIVER_TOO_OLD_MESSAGES,
    TORCH_CUDA_INDEXES,
)
from dflash_doctor.model import JSON, Finding, Remediation, Status
from dflash_doctor.shape import frozen_dataclass

__all__ = ["cuda_stack_findings"]




def _torch_index_for(driver_cuda: str | None) -> str | None:
    """The newest PyTorch CUDA index not newer than what the driver supports."""
    have = version_tuple(driver_cuda)
    if not have:
        return None
    for cuda, url in TORCH_CUDA_INDEXES.value:
        if version_tuple(cuda) <= have:
            return url
    return None


def _driver_too_old(torch: CudaTorch, cuda: CudaRuntime, driver_cuda: str | None,
                    driver: str | None, installer: Installer) -> Finding:
    torch_cuda = str(torch.cuda)
    base = (torch.version or "").split("+")[0]
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
    said = cuda.init_error
    return CUDA_STACK_DRIVER_TOO_OLD.finding(Status.FAIL,
                   f"torch {torch.version} is built for CUDA {torch_cuda}, but driver {driver} supports CUDA "
                   f"{driver_cuda} at most: torch cannot initialize CUDA",
                   detail=(said.message if said else "") or "\n".join(cuda.warnings),
                   evidence={"torch_cuda": torch_cuda, "driver": driver, "driver_cuda": driver_cuda,
                             "min_driver": needed, "init_error": said.to_json() if said else None,
                             "warnings": cuda.warnings},
                   remediation=tuple(remedies))


def _says_too_old(cuda: CudaRuntime) -> bool:
    texts = [cuda.init_error.message if cuda.init_error else "", *cuda.warnings]
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


def _triton_findings(triton: CudaTriton, stack: CudaStack, archs: Sequence[Sequence[int]],
                     installer: Installer) -> tuple[list[Finding], str]:
    if not triton.installed:
        return [CUDA_STACK_TRITON_ABSENT.finding(Status.WARN, "Triton is not installed: torch.compile and vLLM's "
                        "Triton kernels cannot run", remediation=(Remediation(installer.install("triton"),
                                                                              "install the Triton torch requires"),))], ""
    if not triton.import_ok:
        return [CUDA_STACK_TRITON_IMPORT_FAILED.finding(Status.FAIL,
                        f"`import triton` fails: {exception_text(triton.exception)}",
                        evidence={"exception": triton.exception.to_json() if triton.exception else None})], ""
    findings: list[Finding] = []
    version = triton.version
    blackwell = any(cc[0] >= 10 for cc in archs) and triton.ptxas_blackwell is not None
    tools = [("ptxas", triton.ptxas or ToolLookup())]
    if blackwell:
        tools.append(("ptxas-blackwell", triton.ptxas_blackwell or ToolLookup()))
    notes = []
    for name, tool in tools:
        if tool.path:
            notes.append(f"{name} {tool.version}")
            continue
        looked = "; ".join(f"{p.where}: {p.path} ({'found' if p.exists else 'missing'})" for p in tool.looked)
        findings.append(CUDA_STACK_TRITON_PTXAS_MISSING.finding(Status.FAIL,
                                f"Triton {version} cannot find {name}: looked at {looked}",
                                detail=tool.error or "", evidence={"tool": tool.to_json()},
                                remediation=(Remediation(installer.install(f"triton=={version}", reinstall=True),
                                                         "put Triton's bundled ptxas back"),)))
    libcuda = triton.libcuda or TritonLibcuda()
    if libcuda.dirs:
        notes.append(f"libcuda in {', '.join(libcuda.dirs)}")
    else:
        loaded = stack.libcuda.path if stack.libcuda else None
        remedies = [Remediation("sudo ldconfig", "refresh the linker cache Triton reads (ldconfig -p)")]
        if loaded:
            remedies.append(Remediation(export("TRITON_LIBCUDA_PATH", loaded.rsplit('/', 1)[0]),
                                        "or tell Triton where the dynamic loader found it"))
        findings.append(CUDA_STACK_TRITON_LIBCUDA_MISSING.finding(
            Status.FAIL,
            f"Triton {version} cannot find libcuda.so.1: TRITON_LIBCUDA_PATH "
            f"{libcuda.env_path or 'unset'}, `ldconfig -p` lists {', '.join(libcuda.ldconfig) or 'none'}, "
            f"LD_LIBRARY_PATH {':'.join(libcuda.ld_library_path) or 'unset'}",
            detail=libcuda.error or "", evidence={"libcuda": libcuda.to_json() if triton.libcuda else {},
                                                  "loaded_by_ctypes": loaded},
            remediation=tuple(remedies)))
    return findings, f"Triton {version} ({', '.join(notes)})"


@frozen_dataclass(frozen=True)
class MatchedDevice:
    """A device torch sees (cuda:N), with the NVML index of the physical GPU it is (None: not matched)."""

    device: TorchDevice
    physical: int | None

    def evidence(self) -> dict[str, JSON]:
        return {**self.device.to_json(), "physical": self.physical}


def _torch_devices(stack: CudaStack, gpu: Gpu, visible: Visible) -> list[MatchedDevice]:
    """torch's devices, each matched with its NVML GPU (by UUID, else by CUDA order)."""
    nvml = {str(d.uuid): d for d in gpu.devices}
    by_index = {d.index: d for d in gpu.devices}
    matched = []
    for position, device in enumerate(stack.cuda.devices if stack.cuda else []):
        physical = nvml.get(str(device.uuid))
        if physical is None and position < len(visible.gpus):
            physical = by_index.get(visible.gpus[position])
        matched.append(MatchedDevice(device, physical.index if physical else None))
    return matched


def cuda_stack_findings(stack: CudaStack, gpu: Gpu, installer: Installer) -> list[Finding]:
    """The cuda-stack check's judgement of what the probe in the target saw, against NVML's GPUs."""
    process = stack.process
    torch = stack.torch
    if torch is None or stack.probe_error:
        said = (f"stopped: {exception_text(stack.probe_error)}" if stack.probe_error
                else process.error or "reported nothing")
        return [CUDA_STACK_PROBE_FAILED.finding(Status.FAIL, f"the CUDA-stack probe in the target {said}",
                        detail=process.stderr[-1500:],
                        evidence={"process": process.to_json(),
                                  "probe_error": stack.probe_error.to_json() if stack.probe_error else None})]
    if not torch.installed:
        return [CUDA_STACK_TORCH_ABSENT.finding(Status.SKIP, "torch is not installed in the target: nothing to check")]
    if not torch.import_ok:
        return [CUDA_STACK_TORCH_IMPORT_FAILED.finding(Status.FAIL,
                        f"`import torch` fails: {exception_text(torch.exception)}",
                        evidence={"exception": torch.exception.to_json() if torch.exception else None})]
    if not torch.cuda:
        kind = f"ROCm (HIP {torch.hip})" if torch.hip else "CPU-only"
        index = _torch_index_for(gpu.cuda_driver_version)
        base = (torch.version or "").split("+")[0]
        return [CUDA_STACK_TORCH_CPU_BUILD.finding(Status.FAIL,
                        f"torch {torch.version} is a {kind} build: it cannot use the NVIDIA GPUs",
                        remediation=(Remediation(installer.install(f"torch=={base}", "--index-url", index),
                                                 f"a CUDA build the driver ({gpu.cuda_driver_version}) "
                                                 "supports"),) if index else ())]
    cuda = stack.cuda or CudaRuntime()
    driver_cuda, driver = gpu.cuda_driver_version, gpu.driver_version
    torch_major = version_tuple(torch.cuda)[:1]
    major_too_new = bool(torch_major and driver_cuda and torch_major > version_tuple(driver_cuda)[:1])
    visible = visible_of(gpu)
    if not cuda.available:
        if _says_too_old(cuda) or major_too_new:
            return [_driver_too_old(torch, cuda, driver_cuda, driver, installer)]
        libcuda = stack.libcuda or Libcuda()
        error = cuda.init_error or cuda.is_available_error
        return [CUDA_STACK_INIT_FAILED.finding(Status.FAIL,
                        f"torch {torch.version} cannot initialize CUDA: "
                        f"{exception_text(error) if error else '; '.join(cuda.warnings) or 'no reason given'}",
                        detail=f"cuInit: {libcuda.cuInit_name or libcuda.cuInit} "
                        f"{libcuda.cuInit_message or ''}".strip(),
                        evidence={"cuda": stack.cuda.to_json() if stack.cuda else {},
                                  "libcuda": stack.libcuda.to_json() if stack.libcuda else {}})]
    findings: list[Finding] = []
    devices = _torch_devices(stack, gpu, visible)
    migrated = any(d.mig is not None and d.mig.current for d in gpu.devices)
    if not migrated and visible.form != "mig" and len(devices) != len(visible.gpus):
        findings.append(CUDA_STACK_DEVICE_COUNT_MISMATCH.finding(
            Status.FAIL,
            f"torch sees {len(devices)} GPU(s) but NVML and CUDA_VISIBLE_DEVICES give {len(visible.gpus)}",
            evidence={"torch": [d.device.name for d in devices], "expected": list(visible.gpus),
                      "CUDA_VISIBLE_DEVICES": visible.value}))
    sass, ptx = _arch_names(torch.arch_list or [])
    coverage_notes = []
    for matched in devices:
        device = matched.device
        cc = tuple(device.capability or ())
        if len(cc) != 2:
            continue
        covered = coverage(sass, ptx, (int(cc[0]), int(cc[1])))
        label = f"cuda:{device.index} {device.name} {sm(cc)}"
        if covered["status"] == "sass":
            coverage_notes.append(f"{label}: SASS {covered['by']}")
            continue
        evidence = {"device": matched.evidence(), "arch_list": torch.arch_list}
        if covered["status"] == "ptx-jit":
            old_driver = version_tuple(driver_cuda) < version_tuple(torch.cuda)
            findings.append(CUDA_STACK_ARCH_PTX_ONLY.finding(
                Status.FAIL if old_driver else Status.WARN,
                f"{label}: torch {torch.version} has no SASS for it, only PTX {covered['by']} to JIT"
                + (f", which driver {driver} (CUDA {driver_cuda}) cannot JIT: it is newer than the driver"
                   if old_driver else ": slow first launches"), evidence=evidence))
            coverage_notes.append(f"{label}: PTX {covered['by']}")
            continue
        findings.append(CUDA_STACK_ARCH_NOT_COVERED.finding(
            Status.FAIL,
            f"{label}: torch {torch.version} was built for {' '.join(torch.arch_list or [])}, "
            f"nothing of which runs on {sm(cc)}: 'no kernel image is available for execution on the device'",
            evidence=evidence))
    triton_findings, triton_note = _triton_findings(stack.triton or CudaTriton(), stack,
                                                    [d.device.capability or (0, 0) for d in devices], installer)
    findings.extend(triton_findings)
    compat = ""
    if major_too_new:
        compat = f" via CUDA forward compatibility (libcuda {stack.libcuda.path if stack.libcuda else None})"
    elif version_tuple(driver_cuda) < version_tuple(torch.cuda):
        compat = " via CUDA minor version compatibility"
    summary = (f"torch {torch.version} (CUDA {torch.cuda}; driver {driver} supports "
               f"{driver_cuda}{compat}) · {len(devices)} GPU(s): {'; '.join(coverage_notes) or 'none covered'}"
               + (f" · {triton_note}" if triton_note else ""))
    findings.insert(0, CUDA_STACK_OK.finding(Status.PASS, summary, evidence={
        "torch": {"version": torch.version, "cuda": torch.cuda, "git": torch.git, "arch_list": torch.arch_list,
                  "file": torch.file},
        "devices": [d.evidence() for d in devices], "libcuda": stack.libcuda.to_json() if stack.libcuda else None,
        "triton": stack.triton.to_json() if stack.triton else None}))
    return findings
