"""Documents the doctor reads (reports, baselines, profiles, a serve command's JSON) are checked at the door.

A real report and a real baseline (from real doctor runs on a real venv with the real flash-attn-4 wheel,
and the report recorded on an H200) are mutated node by node: each node replaced by each of a few values
of the wrong type. Every mutation must give a clean outcome: rejected with one line naming the file
(exit 2), or, when it still follows the schema, judged as any report is. Never a traceback. The
doctor's own validator (dflash_doctor.documents.docschema) must agree with jsonschema on every one of them.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import traceback
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from conftest import Doctor, validate_report
from realenv import Env, fa4_wheel, install, make_venv

from dflash_doctor import cli
from dflash_doctor.check import Facts
from dflash_doctor.checks.fix.baseline import judge_baseline
from dflash_doctor.commands import baseline as baseline_command
from dflash_doctor.documents import docschema
from dflash_doctor.documents.jsondoc import MAX_DEPTH
from dflash_doctor.facts.fix import baseline as baseline_module
from dflash_doctor.facts.fix.baseline_shapes import Baseline, BaselineFacts
from dflash_doctor.fleet.merge import summarize
from dflash_doctor.report import document as report_module

ROOT = Path(__file__).resolve().parent.parent
H200_REPORT = ROOT / "fixtures" / "h200" / "report-serve-toy.json"
REPORT_SCHEMA = docschema.load_schema("report-v1")
BASELINE_SCHEMA = docschema.load_schema("baseline-v1")
DEEP: Any = 0
for _ in range(MAX_DEPTH + 5):
    DEEP = [DEEP]
WRONG: tuple[Any, ...] = (None, 1, "x", [], {}, [1], True, 1.5)
Path_ = tuple[Any, ...]


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A report and a baseline with hashed files and arch facts, from real runs on a flash-attn-4 venv."""
    base = tmp_path_factory.mktemp("documents")
    env: Env = make_venv(base)
    install(env, fa4_wheel())
    doctor = Doctor(base)
    report_path, baseline_path = base / "report.json", base / "golden.json"
    doctor("--python", str(env.python), "--no-gpu", "--skip", "distributions", "--json", str(report_path))
    saved = doctor("baseline", "save", str(baseline_path), "--python", str(env.python), "--no-gpu", "--skip",
                   "distributions")
    assert saved.returncode == 0, saved.stdout + saved.stderr
    return {"report": json.loads(report_path.read_text()), "baseline": json.loads(baseline_path.read_text()),
            "dir": base}


def nodes(value: Any, path: Path_ = ()) -> Iterator[Path_]:
    yield path
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        yield from nodes(child, (*path, key))


def kinds(paths: Iterable[Path_], first: int = 3) -> list[Path_]:
    """One path of each kind of node: the first `first` elements of every list, then one element standing for
    the rest (a reader takes the 4th finding or file the way it takes the 3rd). Keeps the mutation tests to the
    nodes that can differ, about half of a real report's."""
    seen: set[Path_] = set()
    kept = []
    for path in paths:
        kind = tuple("*" if isinstance(key, int) and key >= first - 1 else key for key in path)
        if kind not in seen:
            seen.add(kind)
            kept.append(path)
    return kept


def replaced(document: Any, path: Path_, value: Any) -> Any:
    """`document` with the node at `path` replaced: the containers on the path are copied, the rest shared."""
    if not path:
        return value
    out = copy.copy(document)
    out[path[0]] = replaced(document[path[0]], path[1:], value)
    return out


def in_process(argv: list[str]) -> tuple[int, str, str]:
    """The command line run in this process (thousands of runs), with any escaping exception shown."""
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(argv)
    except BaseException:  # noqa: BLE001 - the point: nothing may escape
        pytest.fail(f"{argv}: escaped the command line:\n{traceback.format_exc()}")
    return code, out.getvalue(), err.getvalue()


def agrees_with_jsonschema(document: Any, schema: dict[str, Any]) -> bool:
    ours = docschema.first_error(document, schema) is None
    theirs = jsonschema.Draft202012Validator(schema).is_valid(document)
    assert ours == theirs, f"docschema says {docschema.first_error(document, schema)!r}, jsonschema {theirs}"
    return ours


def outside_facts(path: Path_) -> bool:
    return not (len(path) > 3 and path[0] == "checks" and path[2] == "facts")


def assert_clean_rejection(code: int, err: str, path: Path) -> None:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0], err


# ------------------------------------------------------------------------------------------------ reports


@pytest.mark.slow
def test_every_wrong_typed_node_of_a_real_report_is_rejected_or_judged_never_a_traceback(
        real: dict[str, Any], tmp_path: Path) -> None:
    report = real["report"]
    target = tmp_path / "mutated.json"
    counts = {"rejected": 0, "judged": 0}
    for path in kinds(filter(outside_facts, nodes(report))):
        for value in (*WRONG, DEEP):
            mutated = replaced(report, path, value)
            target.write_text(json.dumps(mutated))
            valid = value is not DEEP and agrees_with_jsonschema(mutated, REPORT_SCHEMA)
            code, out, err = in_process(["judge", str(target), "--json", "-"])
            if not valid:
                assert_clean_rejection(code, err, target)
                counts["rejected"] += 1
                continue
            assert code in (0, 1), (path, value, err)
            validate_report(json.loads(out))
            counts["judged"] += 1
    assert counts["rejected"] > 500 and counts["judged"] > 100, counts


@pytest.mark.slow
def test_fact_sections_of_any_shape_are_judged_merged_and_compared_without_a_crash(real: dict[str, Any]) -> None:
    """Facts are free-form in the schema: every reader of them (the checks, the merge, the baseline
    comparison, the fingerprint) must take any shape. Mutated to three levels inside each section."""
    report = json.loads(H200_REPORT.read_text())
    expected = real["baseline"]
    paths = kinds(p for p in nodes(report) if not outside_facts(p) and len(p) <= 6)
    assert len(paths) > 300
    for path in paths:
        for value in (None, "x", [1], {}, 1):
            mutated = replaced(report, path, value)
            sections = report_module.sections_of(mutated)
            summarize(mutated, "mutated.json")
            assert compared(Baseline.from_json(expected), sections, "golden.json")


def test_a_report_through_judge_on_the_real_cli(doctor: Doctor, real: dict[str, Any], tmp_path: Path) -> None:
    report = real["report"]
    for name, path, value in (("checks-id", ("checks", 0, "id"), []), ("options", ("options",), 1),
                              ("target", ("target",), "x"), ("host", ("host",), [1]),
                              ("finding", ("checks", 0, "findings", 0), {"id": 1})):
        bad = tmp_path / f"{name}.json"
        bad.write_text(json.dumps(replaced(report, path, value)))
        proc = doctor("judge", str(bad))
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.startswith(f"dflash-doctor: {bad}: not a valid dflash-doctor report: ")
        assert proc.stdout == ""
    good = tmp_path / "good.json"
    good.write_text(json.dumps(report))
    assert doctor("judge", str(good)).returncode in (0, 1)


# ---------------------------------------------------------------------------------------------- baselines


def compared(expected: Baseline, sections: Any, source: str) -> list[Any]:
    """The baseline check's findings on `sections` with `expected` as the run's baseline section."""
    return judge_baseline(Facts({**sections, "baseline": BaselineFacts(file=source, expected=expected).to_json()}))


def test_every_wrong_typed_node_of_a_real_baseline_is_rejected_or_compared(real: dict[str, Any], tmp_path: Path) -> None:
    golden = real["baseline"]
    assert any(d.get("files") for d in golden["distributions"].values())  # real hashes to mutate
    sections = report_module.sections_of(real["report"])
    target = tmp_path / "golden.json"
    counts = {"rejected": 0, "compared": 0}
    for path in nodes(golden):
        for value in (*WRONG, DEEP):
            mutated = replaced(golden, path, value)
            target.write_text(json.dumps(mutated))
            valid = value is not DEEP and agrees_with_jsonschema(mutated, BASELINE_SCHEMA)
            code, _out, err = in_process(["baseline", "show", str(target)])
            if not valid:
                assert_clean_rejection(code, err, target)
                with pytest.raises(baseline_module.BaselineError, match="golden.json"):
                    baseline_module.load(str(target))
                counts["rejected"] += 1
                continue
            assert code == 0, err
            assert in_process(["baseline", "show", "--json", str(target)])[0] == 0
            loaded = baseline_module.load(str(target))
            assert compared(loaded, sections, str(target))
            counts["compared"] += 1
    assert counts["rejected"] > 500 and counts["compared"] > 50, counts


def test_a_baseline_of_the_wrong_shape_through_the_real_cli(doctor: Doctor, real: dict[str, Any], tmp_path: Path) -> None:
    golden = real["baseline"]
    report = tmp_path / "report.json"
    report.write_text(json.dumps(real["report"]))
    name = next(n for n, d in golden["distributions"].items() if d.get("files"))
    for label, path, value in (("files", ("distributions", name, "files"), [1]), ("tool", ("tool",), [1]),
                               ("sass", ("arch_coverage",), {"lib.so": {"sass": "sm_90", "ptx": []}}),
                               ("python", ("python",), {"version": [3, 11]})):
        bad = tmp_path / f"{label}.json"
        bad.write_text(json.dumps(replaced(golden, path, value)))
        for argv in (("baseline", "show", str(bad)), ("judge", str(report), "--baseline", str(bad))):
            proc = doctor(*argv)
            assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
            assert f"{bad}: not a valid dflash-doctor baseline: " in proc.stderr and proc.stdout == ""


def test_describe_shows_a_saved_baseline(real: dict[str, Any]) -> None:
    assert baseline_command.describe(Baseline.from_json(real["baseline"]))[0].startswith("fingerprint:")


# ------------------------------------------------------------------------------- any JSON: depth and digits


def deep_json(levels: int) -> str:
    return "[" * levels + "]" * levels


@pytest.mark.parametrize("text, why", [
    (deep_json(100_000), f"nested deeper than {MAX_DEPTH} levels"),
    (deep_json(MAX_DEPTH + 1), f"nested deeper than {MAX_DEPTH} levels"),
    ('{"schema": "dflash-doctor/report/v1", "n": ' + "7" * 5000 + "}", "an integer of 5000 digits"),
    ('{"schema": "dflash-doctor/report/v1", "n": NaN}', "NaN is not JSON"),
    ('{"schema": "dflash-doctor/report/v1", "n": 1e999}', "out of range"),
], ids=["100000-deep", "65-deep", "5000-digits", "nan", "1e999"])
def test_deep_nesting_and_huge_numbers_are_a_clear_error_in_every_json_input(
        doctor: Doctor, tmp_path: Path, text: str, why: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    judged = doctor("judge", str(bad))
    shown = doctor("baseline", "show", str(bad))
    compared = doctor("--no-gpu", "--only", "namespaces", "--baseline", str(bad))
    merged = doctor("merge", str(bad), "--json", str(tmp_path / "fleet.json"))
    for proc in (judged, shown, compared):
        assert proc.returncode == 2 and why in proc.stderr and str(bad) in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr and proc.stdout == ""
    # merge: a host whose report cannot be read, named by its file (exit 1, as for any unreadable report)
    assert merged.returncode == 1 and why in merged.stderr and "Traceback" not in merged.stderr


@pytest.mark.parametrize("content, why", [
    ("a = " + "[" * 100_000 + "]" * 100_000 + "\n", "nested too deeply"),
    ("[profiles.x]\ntimeout = " + "9" * 5000 + "\n", "not usable TOML"),
], ids=["100000-deep", "5000-digits"])
def test_deep_or_huge_toml_in_a_config_file_is_a_clear_error(doctor: Doctor, tmp_path: Path, content: str,
                                                             why: str) -> None:
    config = tmp_path / "profiles.toml"
    config.write_text(content)
    proc = doctor("--config", str(config), "--profile", "x")
    assert proc.returncode == 2 and why in proc.stderr and str(config) in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_deep_or_huge_speculative_config_is_a_finding_not_a_crash(doctor: Doctor) -> None:
    # 50,000 levels: 100,000 characters, within what one argument of a command line may hold (128 KiB)
    for spec in (deep_json(50_000), '{"method": "dflash", "num_speculative_tokens": ' + "9" * 5000 + "}"):
        proc = doctor("serve", "--no-gpu", "--only", "serve-command", "--no-vllm-parser", "--json", "-", "--",
                      "vllm", "serve", "/models/none", "--speculative-config", spec)
        assert "Traceback" not in proc.stderr and proc.returncode == 1
        report = validate_report(json.loads(proc.stdout))
        titles = [f["title"] for c in report["checks"] for f in c["findings"]]
        assert any("--speculative-config" in t for t in titles), titles


# ------------------------------------------------------------------------------------------- the validator


def test_the_shipped_schemas_use_only_what_the_validator_implements() -> None:
    for name in ("report-v1", "baseline-v1", "fleet-v1"):
        schema = docschema.load_schema(name)  # check_schema runs on load
        jsonschema.Draft202012Validator.check_schema(schema)
    with pytest.raises(docschema.SchemaError, match="oneOf"):
        docschema.check_schema({"properties": {"a": {"items": {"oneOf": []}}}})


def test_a_real_fleet_view_validates_with_both_validators(doctor: Doctor, real: dict[str, Any], tmp_path: Path) -> None:
    report = tmp_path / "host.json"
    report.write_text(json.dumps(real["report"]))
    proc = doctor("merge", str(report), str(report), "--json", str(tmp_path / "fleet.json"))
    assert "Traceback" not in proc.stderr
    view = json.loads((tmp_path / "fleet.json").read_text())
    assert agrees_with_jsonschema(view, docschema.load_schema("fleet-v1"))
