"""The fix layer: the baseline a run is compared with, what the target's installer says a remediation would do, and a source build's prerequisites."""

from __future__ import annotations

__all__ = []
