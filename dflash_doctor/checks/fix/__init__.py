"""The fix layer: the golden baseline a run is compared with (`BaselineCheck`), what the target's installer says a
remediation would do (`dflash_doctor.fix.verify`), and a source build's prerequisites (`build_prereqs`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from dflash_doctor.check import Check, Facts
from dflash_doctor.checks.fix.baseline import judge_baseline
from dflash_doctor.checks.fix.codes import BASELINE_CODES, BUILD_CODES, CODES, FLEET_CODES
from dflash_doctor.codes import Code
from dflash_doctor.model import Finding

__all__ = ["BASELINE_CODES", "BUILD_CODES", "CODES", "FLEET_CODES", "BaselineCheck"]


class BaselineCheck(Check):
    """The environment against a golden baseline (`--baseline FILE`): judged after the other checks, on the
    sections they had collected, so the GPU and arch layers are compared where the run read them."""

    id: ClassVar[str] = "baseline"
    layer: ClassVar[str] = "baseline"
    title: ClassVar[str] = "Golden baseline"
    codes: ClassVar[tuple[Code, ...]] = BASELINE_CODES
    needs: ClassVar[frozenset[str]] = frozenset({"baseline", "file_hashes", "target", "distributions"})
    on_request: ClassVar[bool] = True
    """Runs when a baseline is given (`Request.baseline`), or named in --only."""

    def judge(self, facts: Facts) -> Iterable[Finding]:
        return judge_baseline(facts)
