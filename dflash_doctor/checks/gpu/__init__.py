"""The GPU layer: NVML's devices, which archs the installed kernels were compiled for, the CUDA stack and the real
kernels run against a reference.

Each check reads its sections and hands typed views to its rules: devices.py (gpu), archs.py with archs_coverage,
archs_runtime and archs_symbols (arch-coverage), cuda_stack.py (cuda-stack), kernels.py (kernels);
visible_devices.py holds what they share (CUDA_VISIBLE_DEVICES read as CUDA reads it, the findings after which
there is no GPU), codes.py every finding's code.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from dflash_doctor.check import Check, Facts
from dflash_doctor.checks.gpu.archs import arch_coverage_findings
from dflash_doctor.checks.gpu.codes import CODES, CUDA_STACK_NO_GPU, KERNELS_NO_CUDA, KERNELS_NO_GPU
from dflash_doctor.checks.gpu.cuda_stack import cuda_stack_findings
from dflash_doctor.checks.gpu.devices import gpu_findings
from dflash_doctor.checks.gpu.kernels import kernel_findings
from dflash_doctor.checks.gpu.visible_devices import NO_CUDA_FINDINGS, NO_GPU_FINDINGS, blocking
from dflash_doctor.checks.remedy import Installer, installer_for
from dflash_doctor.codes import Code
from dflash_doctor.facts.gpu.archs_shapes import ArchCoverage
from dflash_doctor.facts.gpu.cuda_shapes import CudaStack, Kernels
from dflash_doctor.facts.gpu.nvml_shapes import Gpu
from dflash_doctor.facts.python.environment_shapes import Distributions, Target
from dflash_doctor.model import Finding, Status

__all__ = ["CODES", "ArchCoverageCheck", "CudaStackCheck", "GpuCheck", "KernelsCheck"]


def _codes_of(check_id: str) -> tuple[Code, ...]:
    return tuple(code for code in CODES if code.id.startswith(check_id + "."))


class GpuCheck(Check):
    """The GPUs, through NVML: the driver, each GPU's health flags, the memory other processes hold, MIG, and which
    physical GPUs CUDA_VISIBLE_DEVICES leaves vLLM.

    Health (knowledge.health, after DCGM's health watches): memory errors (gpu.reset-pending,
    gpu.row-remap-failure, gpu.ecc-uncorrected), clocks held down for power or heat (gpu.throttled), a power limit
    below the board's default (gpu.power-capped), a PCIe link narrower or older than GPU and slot support
    (gpu.pcie-link-degraded), and the machine's open-file and locked-memory limits (gpu.host-limits)."""

    id: ClassVar[str] = "gpu"
    layer: ClassVar[str] = "gpu"
    title: ClassVar[str] = "GPUs"
    codes: ClassVar[tuple[Code, ...]] = _codes_of("gpu")
    needs: ClassVar[frozenset[str]] = frozenset({"gpu", "distributions"})
    requires_gpu: ClassVar[bool] = True

    def judge(self, facts: Facts) -> Iterable[Finding]:
        dists = facts.optional_section(Distributions)
        return gpu_findings(facts.section(Gpu), dists.version("vllm") if dists is not None else None)


class ArchCoverageCheck(Check):
    """The stack's compiled GPU code, judged from its ELF files, with or without a GPU (see archs.py).

    Everything is judged from the `arch_coverage` facts (which also record the --target-arch list), so `judge` on a
    saved report gives the same answer on any machine."""

    id: ClassVar[str] = "arch-coverage"
    layer: ClassVar[str] = "gpu"
    title: ClassVar[str] = "Compiled GPU code"
    codes: ClassVar[tuple[Code, ...]] = _codes_of("arch-coverage")
    # "gpu" (NVML) is judged when present; without it the --target-arch list recorded in arch_coverage is.
    # "distributions" only sharpens a remedy (what an uninstall of flash-attn must take along and clean up).
    needs: ClassVar[frozenset[str]] = frozenset({"arch_coverage", "target", "gpu", "distributions"})

    def judge(self, facts: Facts) -> Iterable[Finding]:
        return arch_coverage_findings(facts.section(ArchCoverage), facts.optional_section(Gpu),
                                      facts.optional_section(Distributions), Installer.for_target(facts.section(Target)))


class CudaStackCheck(Check):
    """The CUDA stack in the target: torch's CUDA build against the driver and the GPUs (initialization, device
    count, the archs it was compiled for), and where Triton finds ptxas and libcuda."""

    id: ClassVar[str] = "cuda-stack"
    layer: ClassVar[str] = "gpu"
    title: ClassVar[str] = "CUDA stack (torch, Triton)"
    codes: ClassVar[tuple[Code, ...]] = _codes_of("cuda-stack")
    needs: ClassVar[frozenset[str]] = frozenset({"cuda_stack", "gpu", "target"})
    after: ClassVar[frozenset[str]] = frozenset({"gpu"})
    requires_gpu: ClassVar[bool] = True

    def judge(self, facts: Facts) -> Iterable[Finding]:
        blocker = blocking(facts.prior.get(GpuCheck.id), NO_GPU_FINDINGS)
        if blocker is not None:
            return [CUDA_STACK_NO_GPU.finding(Status.SKIP, f"no usable GPU ({blocker.id}): torch's CUDA was not checked",
                                              evidence={"gpu_finding": blocker.id})]
        stack = facts.section(CudaStack)
        return cuda_stack_findings(stack, facts.section(Gpu), installer_for(facts, stack.executable))


class KernelsCheck(Check):
    """Attention and rotary kernels run for real against an fp32 reference on the same GPU."""

    id: ClassVar[str] = "kernels"
    layer: ClassVar[str] = "kernels"
    title: ClassVar[str] = "GPU kernels"
    codes: ClassVar[tuple[Code, ...]] = _codes_of("kernels")
    needs: ClassVar[frozenset[str]] = frozenset({"kernels", "target"})
    after: ClassVar[frozenset[str]] = frozenset({"gpu", "cuda-stack"})
    requires_gpu: ClassVar[bool] = True

    def judge(self, facts: Facts) -> Iterable[Finding]:
        blocker = blocking(facts.prior.get(GpuCheck.id), NO_GPU_FINDINGS)
        if blocker is not None:
            return [KERNELS_NO_GPU.finding(Status.SKIP, f"no usable GPU ({blocker.id}): no kernel was run",
                                           evidence={"gpu_finding": blocker.id})]
        blocker = blocking(facts.prior.get(CudaStackCheck.id), NO_CUDA_FINDINGS)
        if blocker is not None:
            return [KERNELS_NO_CUDA.finding(Status.SKIP, f"torch cannot use CUDA here ({blocker.id}): no kernel "
                                            "was run", evidence={"cuda_finding": blocker.id})]
        return kernel_findings(facts.section(Kernels), facts.prior, installer_for(facts))
