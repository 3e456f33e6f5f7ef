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


def test_record_rebuilds_the_table_of_the_engine_fixtures() -> None:
    proc = subprocess.run([sys.executable, str(RECORDING / "engine" / "record.py"), "--table", str(FIXTURES / "engine")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if re.match(r"\| \d\d-", line)]
    scenarios = sorted(p.stem for p in (FIXTURES / "engine").glob("[0-9][0-9]-*.json"))
    assert [row.split(" | ")[0].lstrip("| ") for row in rows] == scenarios
    assert "| 13-flash-attn-4-fix-yes | exit 0 | started, answered /v1/completions |" in proc.stdout
