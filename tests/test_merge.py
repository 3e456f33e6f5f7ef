"""`dflash-doctor merge`: many hosts' reports in one view, drift singled out.

The per-host reports are real: the doctor run on real venvs (one of them with the real flash-attn-4 wheel),
saved as any collection method (ssh, Slurm, a DaemonSet) would save them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest
from conftest import Doctor
from realenv import fa4_wheel, install, make_venv
from test_ci_gate import parse_workflow_command

FLEET_SCHEMA = json.loads((Path(__file__).resolve().parent.parent / "dflash_doctor" / "documents" / "schema" / "fleet-v1.json").read_text())


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """gpu-a1, gpu-a2: a clean env; gpu-b: the same plus flash-attn-4 (the drifted host). Also the
    --skip distributions variants (no failing check), for drift without failure."""
    from conftest import Doctor as Runner

    base = tmp_path_factory.mktemp("hosts")
    clean = make_venv(base, name="clean")
    drifted = make_venv(base, name="drifted")
    install(drifted, fa4_wheel())
    doctor = Runner(base)
    out = {}
    for name, env, extra in (("gpu-a1", clean, ()), ("gpu-a2", clean, ()), ("gpu-b", drifted, ()),
                             ("quiet-a", clean, ("--skip", "distributions")), ("quiet-b", drifted, ("--skip", "distributions"))):
        path = base / f"{name}.json"
        doctor("--python", str(env.python), "--no-gpu", *extra, "--json", str(path))
        out[name] = path
    return out


def merged(doctor: Doctor, tmp_path: Path, *paths: Path | str, extra: tuple[str, ...] = ()) -> tuple[dict, str, int]:
    view_path = tmp_path / "fleet.json"
    proc = doctor("merge", *map(str, paths), "--json", str(view_path), *extra)
    assert "Traceback" not in proc.stderr, proc.stderr
    view = json.loads(view_path.read_text())
    jsonschema.validate(view, FLEET_SCHEMA)
    return view, proc.stdout, proc.returncode


def test_the_drifted_host_is_singled_out_with_its_stack_drift_and_findings(
        doctor: Doctor, tmp_path: Path, reports: dict[str, Path]) -> None:
    view, text, code = merged(doctor, tmp_path, reports["gpu-a1"], reports["gpu-a2"], reports["gpu-b"])
    assert code == 1
    labels = [h["label"] for h in view["hosts"]]
    assert len(set(labels)) == 3 and all(label.startswith("host-") for label in labels)  # redacted, still distinct
    by_source = {Path(h["source"]).stem: h for h in view["hosts"]}
    assert [name for name, h in by_source.items() if h["drifted"]] == ["gpu-b"]
    drift = {d["what"]: d for d in view["drift"]}
    assert drift["flash-attn-4"]["majority"] == "absent"
    assert drift["flash-attn-4"]["values"]["4.0.0b36"] == [by_source["gpu-b"]["label"]]
    differing = {(d["check"], d["finding"]): d for d in view["differing_findings"]}
    namespace = differing[("namespaces", "namespaces.v4-without-v2")]
    assert namespace["statuses"] == {"absent": [by_source["gpu-a1"]["label"], by_source["gpu-a2"]["label"]],
                                     "warn": [by_source["gpu-b"]["label"]]}
    assert "flash-attn-4 4.0.0b36 installs flash_attn/cute only" in namespace["titles"]["warn"]
    assert [fp["majority"] for fp in view["fingerprints"]] == [True, False]
    assert view["fingerprints"][1]["hosts"] == [by_source["gpu-b"]["label"]]
    # The text view: one row per host, the drifted one marked, then the drift and the differing findings.
    assert f"{by_source['gpu-b']['label']} *" in text
    assert "flash-attn-4: absent on 2 hosts" in text and "4.0.0b36 on 1 host" in text
    assert "namespaces / namespaces.v4-without-v2: absent on 2 hosts" in text
    assert f"Drifted from the rest (1):\n  {by_source['gpu-b']['label']}: flash-attn-4 4.0.0b36 (fleet: absent)" in text


def test_identical_hosts_merge_clean(doctor: Doctor, tmp_path: Path, reports: dict[str, Path]) -> None:
    view, _, code = merged(doctor, tmp_path, reports["gpu-a1"], reports["gpu-a2"])
    assert code == 0
    assert view["summary"] == {**view["summary"], "hosts": 2, "failing": 0, "drifted": 0, "fingerprints": 1}
    assert view["drift"] == [] and view["differing_findings"] == []


def test_allow_drift_fails_only_on_failing_hosts(doctor: Doctor, tmp_path: Path, reports: dict[str, Path]) -> None:
    _, _, code = merged(doctor, tmp_path, reports["quiet-a"], reports["quiet-b"])
    assert code == 1  # quiet-b only warns, but it drifted
    view, _, code = merged(doctor, tmp_path, reports["quiet-a"], reports["quiet-b"], extra=("--allow-drift",))
    assert code == 0 and view["summary"]["drifted"] == 1
    _, _, code = merged(doctor, tmp_path, reports["gpu-a1"], reports["gpu-b"], extra=("--allow-drift",))
    assert code == 1  # gpu-b fails its own checks


def test_a_broken_report_is_a_host_without_a_report_named_by_its_file(
        doctor: Doctor, tmp_path: Path, reports: dict[str, Path]) -> None:
    broken = tmp_path / "gpu-c.json"
    broken.write_text('{"schema": "dflash-doctor/report/v1", "checks": [')
    view, text, code = merged(doctor, tmp_path, reports["gpu-a1"], broken)
    assert code == 1
    host = next(h for h in view["hosts"] if h.get("error"))
    assert host["label"] == "gpu-c" and f"{broken}: not valid JSON" in host["error"]
    assert set(host["checks"].values()) == {"no report"}
    assert "Hosts without a report:" in text
    missing = doctor("merge", str(tmp_path / "nope.json"))
    assert missing.returncode == 2 and "no such file" in missing.stderr


def test_a_directory_of_reports_and_markdown_and_github_outputs(doctor: Doctor, tmp_path: Path,
                                                                reports: dict[str, Path]) -> None:
    collected = tmp_path / "collected"
    collected.mkdir()
    for name in ("gpu-a1", "gpu-a2", "gpu-b"):
        shutil.copy(reports[name], collected / f"{name}.json")
    md = tmp_path / "fleet.md"
    proc = doctor("merge", str(collected), "--markdown", str(md), "--format", "github")
    assert proc.returncode == 1
    text = md.read_text()
    assert text.startswith("### dflash-doctor fleet: FAIL (exit 1)")
    assert "| flash-attn-4 | absent | 4.0.0b36: 1 host (" in text
    commands = [parse_workflow_command(line) for line in proc.stdout.splitlines()[:-1]]
    assert all(c is not None and c[0] == "error" for c in commands)
    titles = [c[1]["title"] for c in commands if c]
    assert "dflash-doctor fleet: flash-attn-4 differs [fleet.stack-drift]" in titles
    assert proc.stdout.splitlines()[-1].startswith("dflash-doctor fleet: 3 hosts")


def test_a_large_fleet_is_shown_as_groups_of_identical_hosts(doctor: Doctor, tmp_path: Path,
                                                             reports: dict[str, Path]) -> None:
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    for i in range(60):
        shutil.copy(reports["gpu-a1"], fleet / f"node{i:02}.json")
    shutil.copy(reports["gpu-b"], fleet / "node99.json")
    view, text, code = merged(doctor, tmp_path, fleet)
    assert code == 1 and view["summary"]["hosts"] == 61
    assert "60 hosts: " in text
    assert len(text.splitlines()) < 40
