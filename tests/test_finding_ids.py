"""Finding ids are `<check-id>.<name>`; the v1 ids of saved documents are mapped to them.

The recorded documents under fixtures/ are v1 reports (`namespace.v4-without-v2`, `import.namespace-package`):
they are read as recorded, and `explain`, `judge` and `merge` speak of them by their current ids.
This file names v1 ids on purpose (rename-finding-ids: skip).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import Doctor

from dflash_doctor.codes.aliases import V1_ALIASES, current_id
from dflash_doctor.registry import BUILTIN_CHECKS, CODES

ROOT = Path(__file__).resolve().parent.parent
V1_REPORT = ROOT / "fixtures" / "h200" / "report-flash-attn-4.json"
SCRIPT = ROOT / "tools" / "rename_finding_ids.py"
NOT_CHECKS = {"doctor", "fleet", "build-prerequisites"}  # the runner, the fleet merge, the source-build
# prerequisites of a fix that builds (a result of the fix verification)


def test_every_finding_id_begins_with_the_id_of_the_check_that_emits_it() -> None:
    checks = {check.id for check in BUILTIN_CHECKS}
    prefixes = {code_id.split(".", 1)[0] for code_id in CODES}
    assert prefixes - checks - NOT_CHECKS == set()


def test_every_v1_id_maps_to_current_ids_of_the_table_and_no_longer_is_one() -> None:
    assert len(V1_ALIASES) == 112
    for old, new in V1_ALIASES.items():
        assert old not in CODES, old
        assert new and all(n in CODES for n in new), (old, new)
        assert all(CODES[n].explanation == CODES[new[0]].explanation for n in new)
    # one v1 id the helpers emitted for several checks becomes, under each check, that check's own id
    assert current_id("import.undefined-symbol", "extensions") == "extensions.undefined-symbol"
    assert current_id("import.undefined-symbol", "imports") == "imports.undefined-symbol"
    assert current_id("serve.not-given", "serve-resources") == "serve-resources.not-given"
    assert current_id("gpu.ok", "gpu") == "gpu.ok" and current_id("imports.failed") == "imports.failed"


def test_the_rename_script_rewrites_whole_ids_only_and_a_second_run_changes_nothing(tmp_path: Path) -> None:
    text = ('Finding("surface.ok"), `import-surface.ok`, dist.record-broken and dist.record-brokenx, '
            "models.not-given. x.namespace.ok namespace.ok-ish import.timeout\n")
    source = tmp_path / "check.py"
    source.write_text(text)
    table = tmp_path / "fixtures" / "v1.json"
    table.parent.mkdir()
    table.write_text('{"id": "surface.ok"}')
    first = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True, check=True)
    assert first.stdout == f"renamed ids in {source}\n"
    assert source.read_text() == ('Finding("import-surface.ok"), `import-surface.ok`, distributions.record-broken '
                                  "and dist.record-brokenx, model-files.not-given. x.namespace.ok namespace.ok-ish "
                                  "imports.timeout\n")
    assert table.read_text() == '{"id": "surface.ok"}'  # recorded documents stay as recorded
    again = subprocess.run([sys.executable, str(SCRIPT), "--check", str(tmp_path)], capture_output=True, text=True,
                           check=False)
    assert (again.returncode, again.stdout) == (0, "")


def test_the_package_and_its_tests_speak_current_ids_only() -> None:
    again = subprocess.run([sys.executable, str(SCRIPT), "--check", "dflash_doctor", "tests", "README.md", "docs", "recording",
                            "tools", "benchmarks"],
                           cwd=ROOT, capture_output=True, text=True, check=False)
    assert (again.returncode, again.stdout) == (0, "")


def test_explain_takes_a_v1_id_and_explains_each_id_it_became(doctor: Doctor) -> None:
    proc = doctor("explain", "import.undefined-symbol")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("import.undefined-symbol is a v1 finding id; it is now "
                                  "imports.undefined-symbol or extensions.undefined-symbol.")
    assert "\nextensions.undefined-symbol: A compiled extension was built against another torch\n" in proc.stdout


def test_a_recorded_v1_report_merges_with_its_judgement_today_without_finding_drift(
        doctor: Doctor, tmp_path: Path) -> None:
    assert '"namespace.v4-without-v2"' in V1_REPORT.read_text()  # recorded with the v1 ids
    judged = tmp_path / "judged.json"
    assert doctor("judge", str(V1_REPORT), "--json", str(judged)).returncode == 0
    assert '"namespaces.v4-without-v2"' in judged.read_text()
    merged = tmp_path / "fleet.json"
    proc = doctor("merge", str(V1_REPORT), str(judged), "--json", str(merged))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(merged.read_text())["differing_findings"] == []
