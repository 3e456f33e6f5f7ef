"""The GPU layer: NVML's devices, which archs the installed kernels were compiled for, the CUDA stack and the real kernels run against a reference."""

from __future__ import annotations

from dflash_doctor.checks.gpu.archs import CODES as _archs_codes
from dflash_doctor.checks.gpu.archs import ArchCoverageCheck
from dflash_doctor.checks.gpu.cuda_stack import CODES as _cuda_stack_codes
from dflash_doctor.checks.gpu.cuda_stack import CudaStackCheck
from dflash_doctor.checks.gpu.devices import CODES as _devices_codes
from dflash_doctor.checks.gpu.devices import GpuCheck
from dflash_doctor.checks.gpu.kernels import CODES as _kernels_codes
from dflash_doctor.checks.gpu.kernels import KernelsCheck
from dflash_doctor.codes import Code

__all__ = ["CODES", "ArchCoverageCheck", "CudaStackCheck", "GpuCheck", "KernelsCheck"]

CODES: tuple[Code, ...] = (*_archs_codes, *_cuda_stack_codes, *_devices_codes, *_kernels_codes)
