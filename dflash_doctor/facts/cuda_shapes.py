"""The shapes of the sections `facts.cuda` collects: cuda_stack and kernels.

Both come from probes run as forked children of the run's one target process (`facts.probes.TargetHost`);
`shared_process` says how that process went. The parts below a probe's top-level keys are declared as
objects; their fields are the probe's (facts/probes/cuda_stack.py, kernels.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from dflash_doctor.facts.environment_shapes import ProbeRun
from dflash_doctor.facts.shape import Shape

__all__ = ["CudaStack", "Kernels"]


@dataclass(frozen=True)
class CudaStack(Shape):
    """libcuda, torch's CUDA, the devices torch sees and Triton's tool chain, from inside the target."""

    SECTION: ClassVar[str] = "cuda_stack"

    shared_process: dict[str, Any] | None = None
    process: ProbeRun = field(default_factory=ProbeRun)
    python: str | None = None
    executable: str | None = None
    libcuda: dict[str, Any] | None = None
    torch: dict[str, Any] | None = None
    cuda: dict[str, Any] | None = None
    triton: dict[str, Any] | None = None
    seconds: float | None = None


@dataclass(frozen=True)
class Kernels(Shape):
    SECTION: ClassVar[str] = "kernels"

    problem: dict[str, Any] = field(default_factory=dict)
    families: list[dict[str, Any]] = field(default_factory=list)
    shared_process: dict[str, Any] | None = None
