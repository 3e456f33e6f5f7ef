"""One line per GPU for the top of the terminal report: arch, memory, torch's coverage, kernels.

Built from a report's saved facts (the `gpu`, `cuda_stack` and `kernels` sections), so it shows the same
on a fresh run and on `dflash-doctor judge REPORT.json`. Plain strings: the terminal reporter styles them.

    GPU 0  NVIDIA RTX A6000  sm_86  48.0 GiB, 47.4 free  torch: SASS sm_86  kernels: 10 ok
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dflash_doctor.facts.gpu.cuda_shapes import CudaStack, Kernels
from dflash_doctor.facts.gpu.nvml_shapes import Gpu
from dflash_doctor.knowledge.archs import coverage, parse_arch
from dflash_doctor.shape import section_of_json
from dflash_doctor.units import GIB, gib

__all__ = ["gpu_lines"]


def _sections(report: Mapping[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for check in report.get("checks") or []:
        facts = check.get("facts") if isinstance(check, Mapping) else None
        if isinstance(facts, Mapping):
            for name in ("gpu", "cuda_stack", "kernels"):
                value = section_of_json(name, facts.get(name))
                if isinstance(value, Mapping):  # a section that failed to collect is none
                    found[name] = value
    return found


def _coverage(arch_list: list[str], cc: tuple[int, int]) -> str:
    sass: list[str] = []
    ptx: list[str] = []
    for name in arch_list:
        try:
            kind = parse_arch(name).kind
        except ValueError:
            continue
        (sass if kind == "sm" else ptx).append(name)
    covered = coverage(sass, ptx, cc)
    return {"sass": f"SASS {covered['by']}", "ptx-jit": f"PTX JIT {covered['by']}"}.get(covered["status"], "NO KERNELS")


def _kernel_counts(kernels: Kernels | None, name: str) -> str:
    ok = bad = 0
    for family in kernels.families if kernels is not None else []:
        for device in family.devices or []:
            if device.name != name:
                continue
            if device.error:
                bad += 1  # the family could not even start on this GPU (e.g. out of memory)
            for case in device.cases:
                if case.status == "ok":
                    ok += 1
                elif case.status in ("mismatch", "error"):
                    bad += 1
    if not ok and not bad:
        return ""
    return f"kernels: {ok} ok" + (f", {bad} failing" if bad else "")


def gpu_lines(report: Mapping[str, Any]) -> list[str]:
    """A line per GPU NVML lists; empty when the report has no GPU facts (--no-gpu, no driver)."""
    sections = _sections(report)
    gpu = Gpu.read(sections.get("gpu"))
    stack = CudaStack.read(sections.get("cuda_stack"))
    arch_list = list(stack.torch.arch_list or []) if stack is not None and stack.torch is not None else []
    kernels = Kernels.read(sections.get("kernels"))
    lines = []
    for device in gpu.devices if gpu is not None else []:
        cc = device.compute_capability
        memory = device.memory
        parts = [f"GPU {device.index}", str(device.name), f"sm_{cc[0]}{cc[1]}" if cc else "sm_?"]
        if memory is not None and memory.total:
            parts.append(f"{gib(memory.total)}, {memory.free / GIB:.1f} free")
        if device.mig is not None and device.mig.current:
            parts.append("MIG on")
        if arch_list and cc:
            parts.append(f"torch: {_coverage(arch_list, (int(cc[0]), int(cc[1])))}")
        counts = _kernel_counts(kernels, str(device.name))
        if counts:
            parts.append(counts)
        lines.append("  ".join(parts))
    return lines
