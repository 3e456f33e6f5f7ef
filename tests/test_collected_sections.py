"""A section as a run holds it: typed by its collector (an instance of its shape, `Shape.collected`), or the
collector's `SectionFailure`; its JSON is made only where a report (or a plugin's request) is written, and read
back only where one is read (`shape.section_json`, `shape.section_of_json`): a saved report keeps its bytes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from test_fact_shapes import saved_sections

from dflash_doctor.check import Context, Facts, SectionError
from dflash_doctor.checks.python import DistributionsCheck
from dflash_doctor.facts.collect import collect
from dflash_doctor.facts.gpu.nvml_shapes import Gpu
from dflash_doctor.facts.python.environment_shapes import Distributions, Target
from dflash_doctor.facts.sections import Collector
from dflash_doctor.model import CheckResult, Status
from dflash_doctor.report import document as report_module
from dflash_doctor.runner import judge
from dflash_doctor.shape import SectionFailure, section_json, section_of_json, undeclared_keys

ROOT = Path(__file__).resolve().parent.parent


def toy_sections() -> dict[str, Any]:
    _, sections = next(s for s in saved_sections() if s[0].endswith("report-serve-toy.json"))
    return sections


def test_a_failed_section_is_written_as_its_marker_and_read_back_as_its_failure() -> None:
    failed = SectionFailure("gpu", "RuntimeError: NVML hung", "Traceback (most recent call last): ...")
    assert section_json(failed) == {"_error": "RuntimeError: NVML hung",
                                    "_traceback": "Traceback (most recent call last): ..."}
    assert section_json(SectionFailure("gpu", "why")) == {"_error": "why"}  # no traceback: none written
    assert section_of_json("gpu", section_json(failed)) == failed
    assert section_of_json("gpu", {"_error": "why"}) == SectionFailure("gpu", "why")
    assert section_of_json("gpu", {"skipped": "--no-gpu"}) == {"skipped": "--no-gpu"}  # JSON stays JSON
    assert Gpu.read(failed) is None and Gpu.read({"_error": "why"}) is None


def test_a_collected_section_is_written_back_as_collected_not_with_its_shapes_defaults_or_order() -> None:
    written = toy_sections()["target"]
    shuffled = dict(reversed(list(written.items())))
    del shuffled["probe"]
    target = Target.collected(shuffled)
    assert json.dumps(section_json(target)) == json.dumps(shuffled)  # its keys, in the collector's order
    assert list(target.to_json()) != list(shuffled) and "probe" in target.to_json()  # the shape's own form
    assert target == Target.from_json(shuffled)  # equal as facts whatever the keys it was given
    # A key the shape does not declare (a probe newer than its shape) is written back, and named.
    newer = Target.collected({**written, "added_later": {"x": [1, 2]}})
    assert section_json(newer)["added_later"] == {"x": [1, 2]} and undeclared_keys(newer) == ["added_later"]
    assert undeclared_keys(Distributions.collected(toy_sections()["distributions"])) == []


def test_a_saved_reports_facts_are_written_again_byte_for_byte() -> None:
    report = json.loads((ROOT / "fixtures" / "h200" / "report-serve-toy.json").read_text())
    sections = report_module.sections_of(report)
    sections["gpu"] = section_of_json("gpu", {"_error": "collector nvml gave no facts"})
    facts = Facts(sections)
    [result] = judge([DistributionsCheck()], sections, Context(python=sys.executable, cwd="/"))
    saved = result.to_dict()["facts"]
    assert json.dumps(saved) == json.dumps({name: report_module.sections_of(report)[name] for name in saved})
    assert section_json(facts.raw("gpu")) == {"_error": "collector nvml gave no facts"}
    assert isinstance(facts.raw("gpu"), SectionFailure)


def _plain(_ctx: Context, _earlier: object) -> dict[str, Any]:
    return {"plugin_facts": {"answer": 42}, "gpu": {"skipped": "--no-gpu"}, "marked": {"_error": "no server"},
            "target": {"executable": 7}}


def _not_a_mapping(_ctx: Context, _earlier: object) -> list[str]:
    return ["plugin_other"]


def _reads_earlier(_ctx: Context, earlier: dict[str, Any]) -> dict[str, Any]:
    return {"plugin_seen": {"earlier": earlier}}


def test_a_third_party_collectors_plain_json_is_read_where_the_run_takes_it(tmp_path: Path) -> None:
    plugin = Collector("plugin", ("plugin_facts", "gpu", "marked", "target", "unsaid"), _plain)
    other = Collector("other", ("plugin_other",), _not_a_mapping)
    reader = Collector("reader", ("plugin_seen",), _reads_earlier, requires=("gpu", "marked"))
    sections, _ = collect(Context(python=sys.executable, cwd=str(tmp_path)),
                          {"plugin_facts", "gpu", "marked", "target", "unsaid", "plugin_other", "plugin_seen"},
                          [plugin, other, reader])
    # What it requires, a third party's collector is given as JSON, as it always was.
    assert sections["plugin_seen"] == {"earlier": {"gpu": {"skipped": "--no-gpu"}, "marked": {"_error": "no server"}}}
    assert sections["plugin_facts"] == {"answer": 42}  # a section of its own: JSON as it gave it
    assert sections["gpu"] == Gpu(skipped="--no-gpu")  # a built-in section: read into its shape
    assert sections["marked"] == SectionFailure("marked", "no server")
    target = sections["target"]
    assert isinstance(target, SectionFailure) and "executable: expected a string, found a number" in target.reason
    assert sections["unsaid"] == SectionFailure("unsaid", "collector plugin gave no facts")
    other_failed = sections["plugin_other"]
    assert isinstance(other_failed, SectionFailure) and "gave list, not its sections" in other_failed.reason
    facts = Facts(sections)
    with pytest.raises(SectionError, match=r"facts 'target' could not be collected: .*executable"):
        facts.section(Target)
    assert facts.section(Gpu) is sections["gpu"]  # read as collected, not again
    result = CheckResult("plugin", "plugin", "Plugin", Status.ERROR, (), {"marked": sections["marked"]})
    assert json.dumps(result.to_dict()["facts"]) == json.dumps({"marked": {"_error": "no server"}})
