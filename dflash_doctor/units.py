"""Units the doctor shows sizes in: one GiB, one way to print it."""

from __future__ import annotations

__all__ = ["GIB", "MIB", "gib"]

MIB = 1 << 20
GIB = 1 << 30
"""Bytes in a GiB: NVML, torch and vLLM all report GPU memory in bytes and speak of it in GiB."""


def gib(size: float | None, digits: int = 1) -> str:
    """`size` bytes in GiB (`80.0 GiB`), with `digits` after the point; "?" when the size is unknown."""
    return "?" if size is None else f"{size / GIB:.{digits}f} GiB"
