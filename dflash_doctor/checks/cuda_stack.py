"""Layer: the CUDA stack in the target: torch's CUDA build against the driver and the GPUs (initialization,
device count, the archs it was compiled for), and where Triton finds ptxas and libcuda."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from dflash_doctor.check import Facts
from dflash_doctor.checks.remedy import Installer
from dflash_doctor.facts.envfacts import version_tuple
from dflash_doctor.knowledge.archs import coverage, parse_arch
from dflash_doctor.knowledge.cuda import MINOR_VERSION_COMPAT_DRIVER, min_driver_for_cuda
from dflash_doctor.knowledge.gpu import (
    DRIVER_TOO_OLD_MESSAGES,
    TORCH_CUDA_INDEXES,
)
from dflash_doctor.model import Finding, Remediation, Status

from .gpu_common import NO_GPU_FINDINGS, Visible, _blocking, _exception_text, _installer, _sm, _visible_of

__all__ = ["CudaStackCheck"]


# --------------------------------------------------------------------------------- cuda-stack check


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
    return Finding("cuda-stack.driver-too-old", Status.FAIL,
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
        return [Finding("cuda-stack.triton-absent", Status.WARN, "Triton is not installed: torch.compile and vLLM's "
                        "Triton kernels cannot run", remediation=(Remediation(installer.install("triton"),
                                                                              "install the Triton torch requires"),))], ""
    if not triton.get("import_ok"):
        return [Finding("cuda-stack.triton-import-failed", Status.FAIL,
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
        findings.append(Finding("cuda-stack.triton-ptxas-missing", Status.FAIL,
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
            "cuda-stack.triton-libcuda-missing", Status.FAIL,
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
            return [Finding("cuda-stack.no-gpu", Status.SKIP, f"no usable GPU ({blocking.id}): torch's CUDA was not checked",
                            evidence={"gpu_finding": blocking.id})]
        stack, gpu = facts["cuda_stack"], facts["gpu"]
        installer = _installer(facts, stack.get("executable"))
        process = stack.get("process") or {}
        torch = stack.get("torch")
        if torch is None or stack.get("probe_error"):
            said = (f"stopped: {_exception_text(stack['probe_error'])}" if stack.get("probe_error")
                    else process.get("error") or "reported nothing")
            return [Finding("cuda-stack.probe-failed", Status.FAIL, f"the CUDA-stack probe in the target {said}",
                            detail=str(process.get("stderr") or "")[-1500:],
                            evidence={"process": process, "probe_error": stack.get("probe_error")})]
        if not torch.get("installed"):
            return [Finding("cuda-stack.torch-absent", Status.SKIP, "torch is not installed in the target: nothing to check")]
        if not torch.get("import_ok"):
            return [Finding("cuda-stack.torch-import-failed", Status.FAIL,
                            f"`import torch` fails: {_exception_text(torch.get('exception'))}",
                            evidence={"exception": torch.get("exception")})]
        if not torch.get("cuda"):
            kind = f"ROCm (HIP {torch.get('hip')})" if torch.get("hip") else "CPU-only"
            index = _torch_index_for(gpu.get("cuda_driver_version"))
            base = str(torch.get("version") or "").split("+")[0]
            return [Finding("cuda-stack.torch-cpu-build", Status.FAIL,
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
            return [Finding("cuda-stack.init-failed", Status.FAIL,
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
                "cuda-stack.device-count-mismatch", Status.FAIL,
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
                    "cuda-stack.arch-ptx-only", Status.FAIL if old_driver else Status.WARN,
                    f"{label}: torch {torch.get('version')} has no SASS for it, only PTX {covered['by']} to JIT"
                    + (f", which driver {driver} (CUDA {driver_cuda}) cannot JIT: it is newer than the driver"
                       if old_driver else ": slow first launches"), evidence=evidence))
                coverage_notes.append(f"{label}: PTX {covered['by']}")
                continue
            findings.append(Finding(
                "cuda-stack.arch-not-covered", Status.FAIL,
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
        findings.insert(0, Finding("cuda-stack.ok", Status.PASS, summary, evidence={
            "torch": {k: torch.get(k) for k in ("version", "cuda", "git", "arch_list", "file")},
            "devices": devices, "libcuda": stack.get("libcuda"), "triton": stack.get("triton")}))
        return findings
