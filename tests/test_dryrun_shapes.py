"""The dry-run facts (facts.fix.dryrun, a report's `dry_runs`) have their declared shape (facts.fix.dryrun_shapes).

The recorded dry runs (tests/fixtures/dry_runs: what pip 23.2.1 said on this project's CI machine) and a real
`dryrun.collect` run on a real venv (pip's own `install --dry-run --report` against a local wheel directory, an
uninstall and its leftover cleanup simulated from a real RECORD, a move, a failed resolution, a command naming
another interpreter, the build facts of this machine) load through `DryRuns`, and the shapes declare every key
they wrote with its value unchanged. A saved report whose `dry_runs` has a field of the wrong type is judged to
a clear `not-checked: the saved dry runs are malformed (FIELD: PROBLEM)` on its fixes, not a traceback.
"""

from __future__ import annotations

import copy
import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from conftest import Doctor
from realenv import Env, build_wheel, fa4_wheel, install
from test_fact_shapes import undeclared_or_changed
from test_fix import pip_venv, recorded

from dflash_doctor.checks.remedy import remove_leftovers
from dflash_doctor.facts.fix import dryrun
from dflash_doctor.facts.fix.dryrun_shapes import DryRuns
from dflash_doctor.facts.shape import section_json, undeclared_keys
from dflash_doctor.fix.verify import judge_item, mark_unchecked, unchecked_reason, verify_results
from dflash_doctor.model import CheckResult

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "dry_runs"


def shape_problems(written: Any) -> list[str]:
    """Where the dry-run facts lose or change a key or value when read through their shape."""
    loaded = DryRuns.from_json(written)
    assert DryRuns.from_json(loaded.to_json()) == loaded
    return undeclared_or_changed(written, loaded.to_json(), "dry_runs")


@pytest.mark.parametrize("name", ["seed-pip.json", "unmet-pin-pip.json"])
def test_the_recorded_dry_runs_load_through_their_shape_with_every_key_declared(name: str) -> None:
    written = json.loads((FIXTURES / name).read_text())["dry_runs"]
    assert shape_problems(written) == []
    loaded = DryRuns.from_json(written)
    assert loaded.items and all(s.status for i in loaded.items for s in i.segments)
    assert loaded.env_kind is None and loaded.build is None  # recorded before those keys: their defaults


def test_a_malformed_dry_run_item_leaves_the_fixes_unverified_and_says_which_field() -> None:
    data = recorded("seed-pip.json")
    checks = [CheckResult.from_dict(c) for c in data["checks"]]
    bad = copy.deepcopy(data["dry_runs"])
    bad["items"][0]["segments"][0]["install"][0] = "transformers"  # a string where an install entry belongs
    verified = verify_results(checks, bad)
    assert all(not r.verified for c in verified for f in c.findings for r in f.remediation)
    why = unchecked_reason(bad, "/env/bin/python")
    assert why == ("the saved dry runs are malformed (items[0].segments[0].install[0]: expected an object, found a "
                   "string); to check: dflash-doctor --python /env/bin/python --verify-fixes")
    shown = mark_unchecked(verified, why)
    assert {r.verified for c in shown for f in c.findings for r in f.remediation} >= {f"not-checked: {why}"}
    # what is not an object at all is "not asked", as it always was; a run's own stop says why it stopped
    assert unchecked_reason(["x"], "/p").startswith("the installer was not asked (no --verify-fixes)")
    assert unchecked_reason({"error": "OSError: boom"}, "/p").startswith("the dry runs stopped (OSError: boom)")
    assert verify_results(checks, ["x"]) == checks  # type: ignore[arg-type]


# --------------------------------------------------------------------------- a real collector run


def quote(path: Path | str) -> str:
    return shlex.quote(str(path))


@pytest.fixture(scope="module")
def small_env(tmp_path_factory: pytest.TempPathFactory) -> tuple[Env, Path]:
    """A pip venv holding alpha 2.0 (and a file of the user's in alpha/), beta 1.0, which requires alpha==1.0, and
    the real flash-attn-4 wheel without the torch it requires; alpha 1.0's wheel in a local directory, for the
    installer to resolve against without an index."""
    root = tmp_path_factory.mktemp("dryrun-shapes")
    env = pip_venv(root)
    wheels, links = root / "wheels", root / "links"
    install(env, build_wheel(wheels, "alpha", "2.0", {"alpha/__init__.py": "VERSION = '2.0'\n"}),
            build_wheel(wheels, "beta", "1.0", {"beta/__init__.py": ""}, requires=["alpha==1.0"]), fa4_wheel())
    build_wheel(links, "alpha", "1.0", {"alpha/__init__.py": "VERSION = '1.0'\n"})
    (env.site_packages / "alpha" / "notes.txt").write_text("the user's\n")
    return env, links


def sections_of(doctor: Doctor, env: Env) -> dict[str, Any]:
    report, _ = doctor.report("--python", str(env.python), "--no-gpu", "--only", "distributions")
    sections: dict[str, Any] = report["checks"][0]["facts"]
    return sections


@pytest.mark.slow
def test_a_real_collector_run_loads_through_the_shapes_with_every_key_declared(
    small_env: tuple[Env, Path], doctor: Doctor, tmp_path: Path
) -> None:
    env, links = small_env
    sections = sections_of(doctor, env)
    sections["target"] = {**sections["target"], "environment_roots": [str(env.site_packages), str(env.root)]}
    python, site = str(env.python), env.site_packages
    commands = {
        "downgrade": f"{quote(python)} -m pip install --no-index --find-links {quote(links)} 'alpha==1.0'",
        "uninstall": f"{quote(python)} -m pip uninstall -y alpha && {remove_leftovers([str(site / 'alpha')])}",
        "move": f"mv {quote(site / 'beta')} {quote(str(site / 'beta') + '.disabled')}",
        "no-match": f"{quote(python)} -m pip install --no-index 'nosuch==1.0'",
        "other": "/elsewhere/bin/python -m pip install alpha",
    }
    collected = dryrun.collect(commands.values(), sections, python=python, timeout_s=120, cwd=str(tmp_path))
    assert undeclared_keys(collected) == []
    written = section_json(collected)  # as the report holds them
    assert shape_problems(written) == []
    assert shape_problems(json.loads(json.dumps(written))) == []  # as a saved report holds them
    facts = DryRuns.from_json(written)
    said = {(s.kind, s.status) for item in facts.items for s in item.segments}
    assert said >= {("install", "resolved"), ("uninstall", "simulated"), ("cleanup", "simulated"),
                    ("move", "simulated"), ("install", "failed"), ("?", "not-checked")}, said
    assert facts.build is not None and facts.build.cores  # an install was asked about: the build facts come too
    assert {d.name for d in facts.installed} >= {"alpha", "beta"}
    by_command = {item.command: judge_item(item, facts.installed, facts.marker_environment) for item in facts.items}
    assert by_command[commands["downgrade"]] == ("resolves", ("downgrade alpha 2.0 -> 1.0 (wheel)",))
    verified, changes = by_command[commands["uninstall"]]
    assert verified.startswith(f"fails: {site / 'alpha'}/ stays behind holding 1 file(s) no distribution owns: "
                               "notes.txt"), verified
    assert changes[0].startswith("remove alpha 2.0 (") and changes[0].endswith(" files)"), changes  # its RECORD
    assert by_command[commands["move"]] == ("resolves", (f"move {site / 'beta'} to {site / 'beta'}.disabled",))
    assert by_command[commands["no-match"]][0].startswith("fails: ERROR: No matching distribution found for nosuch")
    assert by_command[commands["other"]][0] == "not-checked: it names another interpreter than the target"


@pytest.mark.slow
def test_judging_a_saved_report_whose_dry_runs_are_malformed_is_a_clear_result_not_a_traceback(
    small_env: tuple[Env, Path], doctor: Doctor, tmp_path: Path
) -> None:
    env, _ = small_env
    saved = tmp_path / "report.json"
    proc = doctor("--python", str(env.python), "--no-gpu", "--only", "distributions", "--json", str(saved))
    assert proc.returncode == 1, proc.stderr  # flash-attn-4 requires torch, which is not installed
    report = json.loads(saved.read_text())
    command = next(r["command"] for c in report["checks"] for f in c["findings"] if f["status"] == "fail"
                   for r in f["remediation"])
    report["dry_runs"] = {"python": str(env.python), "installed": [], "marker_environment": {}, "items": [
        {"command": command, "segments": [{"kind": "install", "tool": "pip", "status": "resolved",
                                           "install": ["torch"]}]}]}
    saved.write_text(json.dumps(report))
    again, proc = doctor.report("judge", str(saved))
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 1, proc.stderr
    (verified,) = [r["verified"] for c in again["checks"] for f in c["findings"] for r in f["remediation"]
                   if r["command"] == command]
    assert verified == (f"not-checked: the saved dry runs are malformed (items[0].segments[0].install[0]: expected "
                        f"an object, found a string); to check: dflash-doctor --python {env.python} --verify-fixes")
