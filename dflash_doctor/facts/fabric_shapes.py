"""The declared shape of the `fabric` section (facts.fabric): the group tested, NVML's view of each pair,
the host around the GPUs, and the peer-copy and NCCL probe runs. The NVML, host and probe parts are
free-form maps (their keys follow the probes and readers in facts/fabric.py and facts/fabric_host.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from dflash_doctor.facts.shape import Shape

__all__ = ["Fabric"]


@dataclass(frozen=True)
class Fabric(Shape):
    SECTION: ClassVar[str] = "fabric"

    skipped: str | None = None
    """Why nothing was collected (--no-gpu)."""
    requested_tp: int = 1
    tp_source: str | None = None
    """Where the TP size came from: "serve command" or "visible GPUs"."""
    nvml: dict[str, Any] = field(default_factory=dict)
    host: dict[str, Any] = field(default_factory=dict)
    probes_skipped: str | None = None
    peer: dict[str, Any] = field(default_factory=dict)
    nccl_world: int | None = None
    nccl: dict[str, Any] = field(default_factory=dict)
    """Each NCCL arm ("p2p", "p2p_disabled"): {"world", "env", "seconds", "ranks": [...]}."""
    seconds: dict[str, float] = field(default_factory=dict)
