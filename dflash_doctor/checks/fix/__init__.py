"""The fix layer: the baseline a run is compared with, what the target's installer says a remediation would do,
and a source build's prerequisites."""

from __future__ import annotations

from dflash_doctor.checks.fix.codes import BASELINE_CODES, BUILD_CODES, CODES, FLEET_CODES

__all__ = ["BASELINE_CODES", "BUILD_CODES", "CODES", "FLEET_CODES"]
