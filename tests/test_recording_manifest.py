"""recording/: the scripts that made the committed fixtures on the GPU machine, and the manifest that ties each
fixture to its command and machine. The scripts need a GPU machine and are not run here; what can be held
without one is: every fixture is in the manifest exactly once and every listed file exists, the scripts it
names exist, the scripts parse, name no path of one machine, and record.py rebuilds the docs' table from
the recorded engine fixtures."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
RECORDING = ROOT / "recording"
FIXTURES = ROOT / "fixtures"
FIELDS = ("id", "fixtures", "made_by", "command", "machine", "recorded", "commit")


def _manifest() -> list[dict[str, Any]]:
    recordings: list[dict[str, Any]] = json.loads((RECORDING / "manifest.json").read_text())["recordings"]
    return recordings


def test_every_fixture_is_listed_once_and_every_listed_file_exists() -> None:
    listed = [name for entry in _manifest() for name in entry["fixtures"]]
    on_disk = sorted(str(p.relative_to(ROOT)) for p in FIXTURES.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    assert sorted(set(listed)) == sorted(listed), "a fixture is listed twice"
    assert sorted(set(on_disk) - set(listed)) == [], "fixtures missing from recording/manifest.json"
    assert sorted(set(listed) - set(on_disk)) == [], "listed in recording/manifest.json, not in fixtures/"


def test_each_entry_says_what_made_it_where_and_when() -> None:
    ids = [entry["id"] for entry in _manifest()]
    assert len(ids) == len(set(ids))
    for entry in _manifest():
        for field in FIELDS:
            assert entry.get(field), (entry.get("id"), field)  # "unknown" where the record does not say, never empty
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", entry["recorded"]), entry["id"]
        for commit in entry["commit"].split(", "):
            known = subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=ROOT, capture_output=True,
                                   check=False)
            assert known.returncode == 0 or not (ROOT / ".git").exists(), (entry["id"], commit)
        for script in re.findall(r"\b((?:recording|benchmarks|fixtures)/[\w./-]+\.(?:py|sh))", entry["made_by"]):
            assert (ROOT / script).is_file(), (entry["id"], script)


def _scripts(*suffixes: str) -> list[Path]:
    return sorted(p for p in RECORDING.rglob("*") if p.suffix in suffixes and "__pycache__" not in p.parts)


def test_the_scripts_parse_and_name_no_path_of_one_machine() -> None:
    assert _scripts(".sh") and _scripts(".py")
    for script in _scripts(".sh"):
        proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, check=False)
        assert proc.returncode == 0, (script, proc.stderr)
    for script in _scripts(".py"):
        compile(script.read_text(), str(script), "exec")
    for script in _scripts(".sh", ".py"):
        for number, line in enumerate(script.read_text().splitlines(), 1):
            if re.search(r"(?<![\w$}])/(tmp|work|root|home)/", line):
                assert line.lstrip().startswith("#"), f"{script.relative_to(ROOT)}:{number}: {line.strip()}"


def test_record_rebuilds_the_table_of_the_engine_fixtures_with_a_column_per_release() -> None:
    proc = subprocess.run([sys.executable, str(RECORDING / "engine" / "record.py"), "--table", str(FIXTURES / "engine")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    head = proc.stdout.splitlines()[0]
    assert "vLLM 0.20.1: doctor | engine |" in head and "vLLM 0.26.0: doctor | engine |" in head, head
    rows = [line for line in proc.stdout.splitlines() if re.match(r"\| \d\d-", line)]
    engine = FIXTURES / "engine"
    scenarios = sorted({p.stem for p in [*engine.glob("[0-9][0-9]-*.json"), *engine.glob("vllm-*/[0-9][0-9]-*.json")]})
    assert [row.split(" | ")[0].lstrip("| ") for row in rows] == scenarios
    assert "| 13-flash-attn-4-fix-yes | exit 0 | started, answered /v1/completions | yes |" in proc.stdout
    if not list(engine.glob("vllm-0.26.0/*.json")):  # until it is recorded, its column says so
        assert all(" | not recorded yet | " in row for row in rows)


def test_record_writes_each_release_into_its_own_directory_and_names_it(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """record.py turns a driver's results into fixtures: a 0.26.0 record goes to vllm-0.26.0/ with its release named,
    a record made before the driver named its release is 0.20.1's, and --vllm refuses a record of another release."""
    monkeypatch.syspath_prepend(str(RECORDING / "engine"))
    import record
    healthy = json.loads((FIXTURES / "engine" / "01-healthy.json").read_text())
    results = tmp_path / "g" / "res"
    results.mkdir(parents=True)
    (results / "device.txt").write_text(healthy["device"] + "\n")
    for name, extra in (("01-healthy", {}), ("14-v1-model-runner", {"vllm_version": "0.26.0",
                                                                    "env": {"VLLM_USE_V2_MODEL_RUNNER": "0"}})):
        run = {"scenario": name, "venv": "v0", "command": healthy["command"], "doctor": healthy["doctor"],
               "engine": healthy["engine"], **extra}
        (results / f"{name}.json").write_text(json.dumps(run))
        (results / f"{name}.report.json").write_text(json.dumps(healthy["report"]))
    monkeypatch.setattr(record, "ENGINE", tmp_path / "engine")
    record.main(results, None, tmp_path / "w")
    old = json.loads((tmp_path / "engine" / "01-healthy.json").read_text())
    new = json.loads((tmp_path / "engine" / "vllm-0.26.0" / "14-v1-model-runner.json").read_text())
    assert (old["vllm_version"], new["vllm_version"]) == ("0.20.1", "0.26.0")
    assert new["env"] == {"VLLM_USE_V2_MODEL_RUNNER": "0"} and new["target_python"] == f"{tmp_path / 'w'}/v0/bin/python"
    table = record.table(tmp_path / "engine")
    assert "| 14-v1-model-runner | not recorded yet |  |  | exit 0 | started, answered /v1/completions | yes |" in table
    with pytest.raises(SystemExit, match="recorded on vLLM 0.26.0, not 0.20.1"):
        record.main(results, tmp_path / "out", None, "0.20.1")


def test_each_release_dependency_list_pins_every_package_and_matches_its_evidence() -> None:
    """engine/deps-VERSION.txt is what engine_transfer.py --vllm VERSION carries: exact pins only; where
    serve_deps.py's reading was kept beside it (deps-VERSION.json), the list is that reading's, and every
    requirement it left out is named in the list's header with its evidence."""
    lists = sorted((RECORDING / "engine").glob("deps-*.txt"))
    assert {p.stem.removeprefix("deps-") for p in lists} >= {"0.20.1", "0.26.0"}
    for path in lists:
        pins = [ln for ln in path.read_text().splitlines() if ln and not ln.startswith("#")]
        assert pins and all(re.fullmatch(r"[A-Za-z0-9_.-]+==[A-Za-z0-9_.+-]+", p) for p in pins), path.name
        evidence = path.with_suffix(".json")
        if evidence.exists():
            reading = json.loads(evidence.read_text())
            assert reading["dependencies"] == pins, path.name
            header = path.read_text()
            assert all(f"{x['package']} {x['version']}: " in header and x["why"] in header
                       for x in reading["left_out"]), path.name


def test_the_device_plan_names_only_scenarios_the_driver_has_and_all_of_0_26_0s() -> None:
    """recording/README.md's device plan splits 0.26.0's scenarios over two calls with ONLY=...: every key it
    names is one of scenarios.py's, and together with the fix and live calls they cover every scenario
    (02 runs 03 after it; 13 is fix_go.sh's)."""
    driver = (RECORDING / "engine" / "scenarios.py").read_text()
    keys = set(re.findall(r'^\s+"(\d\d(?:-[\w-]+)?)": ', driver, re.MULTILINE))
    assert {"01-healthy", "02", "12-kv-cache-fp8-bfloat16", "14-v1-model-runner", "19-padded-vocab-shared-lm-head"} <= keys
    plan = (RECORDING / "README.md").read_text().split("### Device plan: vLLM 0.26.0", 1)[1]
    named = [k for only in re.findall(r"ONLY=([\w,-]+)", plan) for k in only.split(",")]
    assert named and set(named) <= keys, sorted(set(named) - keys)
    assert sorted(named) == sorted(keys), sorted(keys - set(named))
