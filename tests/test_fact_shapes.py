"""Every fact section has one declared shape (facts/*_shapes.py, named in facts.sections.SECTION_SHAPES).

What each collector and probe writes, on a real environment (torch CPU, the real vLLM 0.20.1 wheel's
files, flash-attn 2.8.3 built from its sdist, toy models on disk and a serve command), loads through its
shape, and the shape declares every key it wrote; every section of every saved report and recording under
fixtures/ loads too, and judges to the same findings as it did before the checks read facts through the
shapes (fixtures/judged.json, recorded then); a section that does not have its shape is a finding naming
the section and the field, not a traceback.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest
from realenv import Env, fa2_wheel, install, make_venv
from stacks import add_to_path, torch_site, vllm_site
from toymodels import write_toy_drafter, write_toy_target

from dflash_doctor.check import Context, Facts, SectionError
from dflash_doctor.codes.aliases import current_id
from dflash_doctor.facts.collect import collect
from dflash_doctor.facts.python.environment_shapes import Distributions, Target
from dflash_doctor.facts.sections import BUILTIN_COLLECTORS, SECTION_SHAPES, shape_of
from dflash_doctor.facts.shape import ShapeError, section_json, undeclared_keys
from dflash_doctor.model import CheckResult
from dflash_doctor.registry import BUILTIN_CHECKS
from dflash_doctor.report import document as report_module
from dflash_doctor.runner import judge

ROOT = Path(__file__).resolve().parent.parent
JUDGED = Path(__file__).resolve().parent / "fixtures" / "judged.json"


def undeclared_or_changed(written: Any, read_back: Any, where: str = "") -> list[str]:
    """Where `read_back` (a shape's to_json) loses or changes what a collector wrote: a key its shape does
    not declare, a value that does not come back as it was."""
    if isinstance(written, dict):
        if not isinstance(read_back, dict):
            return [f"{where}: an object became {read_back!r}"]
        problems = []
        for key, value in written.items():
            if key not in read_back:
                problems.append(f"{where}.{key}: not declared")
            else:
                problems += undeclared_or_changed(value, read_back[key], f"{where}.{key}")
        return problems
    if isinstance(written, list):
        if not isinstance(read_back, list) or len(read_back) != len(written):
            return [f"{where}: a list became {read_back!r}"]
        return [p for i, (a, b) in enumerate(zip(written, read_back)) for p in undeclared_or_changed(a, b, f"{where}[{i}]")]
    if type(written) is not type(read_back) or written != read_back:
        return [f"{where}: {written!r} came back as {read_back!r}"]
    return []


def assert_has_its_shape(section: str, data: Any, source: str) -> None:
    shape = shape_of(section)
    assert shape is not None, f"{section} has no declared shape"
    loaded = shape.from_json(data)
    assert shape.from_json(loaded.to_json()) == loaded, (source, section)
    problems = undeclared_or_changed(data, loaded.to_json(), section)
    assert not problems, f"{source}: {problems[:10]}"


def test_every_builtin_section_declares_a_shape() -> None:
    provided = {section for collector in BUILTIN_COLLECTORS for section in collector.provides}
    assert provided == set(SECTION_SHAPES)
    for section in provided:
        shape = shape_of(section)
        assert shape is not None and shape.SECTION == section


@pytest.fixture(scope="module")
def served_env(tmp_path_factory: pytest.TempPathFactory) -> tuple[Env, Path, list[str]]:
    """torch 2.13 (CPU), vLLM 0.20.1's files and flash-attn 2.8.3 (no CUDA extension), toy models, a serve
    command: what every collector has something to say about (all from the test cache)."""
    base = tmp_path_factory.mktemp("shapes")
    env = make_venv(base)
    add_to_path(env, vllm_site("0.20.1"), "a-vllm")
    add_to_path(env, torch_site(), "b-torch")
    install(env, fa2_wheel())
    target, drafter = base / "target", base / "drafter"
    write_toy_target(target)
    write_toy_drafter(drafter)
    argv = ["vllm", "serve", str(target), "--max-model-len", "4096", "--speculative-config",
            json.dumps({"method": "dflash", "model": str(drafter), "num_speculative_tokens": 15})]
    return env, base, argv


@pytest.mark.slow
def test_every_collector_and_probe_writes_its_declared_shape_on_a_real_env(
        served_env: tuple[Env, Path, list[str]]) -> None:
    env, base, argv = served_env
    ctx = Context(python=str(env.python), cwd=str(base), no_gpu=True, timeout_s=120,
                  options={"serve": {"argv": argv, "gpus": 1, "gpu_memory_gib": 80}})
    sections, _ = collect(ctx, set(SECTION_SHAPES))
    assert set(sections) == set(SECTION_SHAPES)
    for name, value in sections.items():
        # Each collector returns its section typed, as its shape read what it wrote: every key declared.
        assert isinstance(value, SECTION_SHAPES[name]), (name, value)
        assert undeclared_keys(value) == [], (name, undeclared_keys(value)[:10])
        assert_has_its_shape(name, section_json(value), "real env")
    # The facts are real: what the checks read, through the shapes.
    facts = Facts(sections)
    by_name = {d.canonical: d for d in facts.section(Distributions).items}
    assert by_name["flash-attn"].version == "2.8.3" and by_name["vllm"].version == "0.20.1"
    assert facts.section(Target).executable and os.path.isabs(facts.section(Target).executable)


def saved_sections() -> list[tuple[str, dict[str, Any]]]:
    """Every report and fact recording under fixtures/: its fact sections."""
    found = []
    for path in sorted((ROOT / "fixtures").glob("*/*.json")):
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            continue  # a recording of something else (the HTTP exchanges of fixtures/live/)
        if isinstance(data.get("report"), dict):
            data = data["report"]
        if data.get("schema") == report_module.SCHEMA:
            found.append((str(path.relative_to(ROOT)), report_module.sections_of(data)))
        elif isinstance(data.get("sections"), dict):
            found.append((str(path.relative_to(ROOT)), data["sections"]))
    return found


def test_every_section_of_every_saved_report_and_recording_has_its_shape() -> None:
    saved = saved_sections()
    assert len(saved) >= 25
    for source, sections in saved:
        for name, data in sections.items():
            if isinstance(data, dict):  # a failed one is its SectionFailure (report_module.sections_of)
                assert_has_its_shape(name, data, source)


def _checks() -> list[Any]:
    return [check() for check in BUILTIN_CHECKS]


def judged(source: str) -> list[list[Any]]:
    """The findings (id, status) of each check, as `judge REPORT.json` judges a saved report (a fact
    recording: the checks whose sections it holds)."""
    data = json.loads((ROOT / source).read_text())
    if isinstance(data.get("report"), dict):
        data = data["report"]
    checks = _checks()
    if data.get("schema") == report_module.SCHEMA:
        report = report_module.validate(data, source)
        sections = report_module.sections_of(report)
        options = report_module.options_of(report)
        ctx = Context(python=report_module.target_python(report), cwd="/", no_gpu=bool(options.get("no_gpu")),
                      target_archs=tuple(options.get("target_archs") or ()))
        results: list[CheckResult] = judge([c for c in checks if c.id in report_module.check_ids(report)],
                                           sections, ctx)
    else:
        sections = data["sections"]
        results = judge([c for c in checks if c.needs <= set(sections)], sections,
                        Context(python="/x/bin/python", cwd="/"))
    return [[r.id, r.status.value, [[f.id, f.status.value] for f in r.findings]] for r in results]


# Findings of rules added after judged.json was recorded, by saved report and check, and where they go
# in the check's findings: the drafter's context against --max-model-len (scenario 10 serves 65,536
# tokens with a toy drafter of 40,960 positions; vLLM 0.20.1 runs DFlash on the V1 runner, so a warn).
LATER_RULES: dict[str, dict[str, list[tuple[int, list[str]]]]] = {
    "fixtures/engine/10-max-model-len-above-target.json": {
        "drafter": [(1, ["drafter.context-shorter-than-served", "warn"])]},
}


# Findings whose status a later rule changed, by recording: the engine scenarios' one missing vLLM requirement
# is flashinfer-python, which vllm serve only looks for before using (knowledge.stack.OPTIONAL_AT_SERVE): a
# warning now (test_the_engine_recordings_missing_requirement_is_flashinfer checks that it is that one).
# (Scenario 01 was recorded again after the doctor's false alarms on it were mended: it has no judged.json entry.)
LATER_STATUS: dict[str, dict[str, str]] = {
    str(path.relative_to(ROOT)): {"distributions.requirement-missing": "warn"}
    for path in sorted((ROOT / "fixtures" / "engine").glob("[0-9][0-9]-*.json"))
    if str(path.relative_to(ROOT)) in json.loads(JUDGED.read_text())
}


SERVE_NOT_JUDGED = ("serve-command.not-given", "serve-command.not-a-serve-command")


def recorded(source: str) -> list[list[Any]]:
    """judged.json's findings for `source` (recorded with the v1 ids) under today's ids, plus the findings
    of LATER_RULES, with the statuses of LATER_STATUS."""
    out = []
    later = LATER_STATUS.get(source, {})
    for check, status, findings in json.loads(JUDGED.read_text())[source]:
        now = [[current_id(finding, check), finding_status] for finding, finding_status in findings]
        now = [[finding, later.get(finding, finding_status)] for finding, finding_status in now]
        for at, added in LATER_RULES.get(source, {}).get(check, []):
            now.insert(at, added)
        if check == "serve-command" and now and now[0][0] not in SERVE_NOT_JUDGED:
            now.append(["serve-command.judged-by", "pass"])  # added later: which verdicts are vLLM's, which rules'
        out.append([check, status, now])
    return out


@pytest.mark.parametrize("source", sorted(json.loads(JUDGED.read_text())))
def test_a_saved_report_judges_as_it_did_before_facts_had_shapes(source: str) -> None:
    assert judged(source) == recorded(source)


def test_the_engine_recordings_missing_requirement_is_flashinfer() -> None:
    for source in LATER_STATUS:
        report = json.loads((ROOT / source).read_text())["report"]
        titles = [f["title"] for c in report["checks"] for f in c["findings"]
                  if current_id(f["id"], c["id"]) == "distributions.requirement-missing"]
        assert all("requires flashinfer-python" in t for t in titles), (source, titles)


def test_a_section_without_its_shape_is_an_error_finding_naming_the_section_and_field() -> None:
    _, sections = next(s for s in saved_sections() if s[0].endswith("report-serve-toy.json"))
    broken = copy.deepcopy(sections)
    broken["distributions"]["items"][0]["version"] = 5
    with pytest.raises(ShapeError, match=r"facts 'distributions' are malformed: items\[0\]\.version: expected "):
        Distributions.from_json(broken["distributions"])
    with pytest.raises(SectionError, match=r"items\[0\]\.version"):
        Facts(broken).section(Distributions)
    [result] = judge([c for c in _checks() if c.id == "distributions"], broken)
    [finding] = result.findings
    assert finding.id == "doctor.facts-unavailable" and result.status.value == "error"
    assert finding.title.endswith("facts 'distributions' do not have their declared shape")
    assert "items[0].version: expected a string or null, found a number (5)" in finding.detail


def test_a_newer_reports_extra_keys_are_ignored_and_an_older_ones_absent_keys_take_defaults() -> None:
    _, sections = next(s for s in saved_sections() if s[0].endswith("report-serve-toy.json"))
    item = dict(sections["distributions"]["items"][0], added_by_a_newer_doctor={"x": 1})
    del item["record"], item["installer"]
    loaded = Distributions.from_json({"items": [item]})
    assert loaded.items[0].name == item["name"] and loaded.items[0].installer is None
    assert not loaded.items[0].record.present and "added_by_a_newer_doctor" not in loaded.items[0].to_json()
