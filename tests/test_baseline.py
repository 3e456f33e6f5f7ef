"""The golden baseline: `baseline save`, then `--baseline FILE` fails on any drift and shows it as a diff.

Real venvs, the real flash-attn-4 wheel, real installers; drift is made the way it happens in an image
pipeline: an installed file edited after install, a different version installed, a distribution added.
The lost GPU arch comes from recorded scans of two real nvcc builds (tests/fixtures/baseline/).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
from conftest import Doctor, finding, findings_of, validate_report
from realenv import Env, build_wheel, fa4_wheel, install, make_venv, uninstall, wheel_files

ROOT = Path(__file__).resolve().parent.parent
BASELINE_SCHEMA = json.loads((ROOT / "dflash_doctor" / "documents" / "schema" / "baseline-v1.json").read_text())
FIXTURES = Path(__file__).parent / "fixtures" / "baseline"
ARCH_SCANS = json.loads((FIXTURES / "arch_scans.json").read_text())["scans"]
H200 = json.loads((FIXTURES / "nvml_h200.json").read_text())
# --skip distributions: flash-attn-4 without torch fails that check; the baseline is about drift, not that.
RUN = ("--no-gpu", "--skip", "distributions")
LIBRARY = "flash_attn/cute/_kernels.cpython-311-x86_64-linux-gnu.so"


@pytest.fixture
def env(tmp_path: Path) -> Env:
    env = make_venv(tmp_path)
    install(env, fa4_wheel())
    return env


def save(doctor: Doctor, env: Env, path: Path, *extra: str) -> dict:
    proc = doctor("baseline", "save", str(path), "--python", str(env.python), *RUN, *extra)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"baseline written to {path}" in proc.stdout
    data = json.loads(path.read_text())
    jsonschema.validate(data, BASELINE_SCHEMA)
    return data


def compare(doctor: Doctor, env: Env, path: Path) -> tuple[dict, int]:
    report, proc = doctor.report("--python", str(env.python), *RUN, "--baseline", str(path))
    assert "Traceback" not in proc.stderr
    return report, proc.returncode


def test_save_then_compare_round_trips_with_every_file_hashed(doctor: Doctor, env: Env, tmp_path: Path) -> None:
    golden = tmp_path / "golden.json"
    data = save(doctor, env, golden)
    fa4 = data["distributions"]["flash-attn-4"]
    assert fa4["version"] == "4.0.0b36"
    installed = [n for n in wheel_files(fa4_wheel()) if not n.endswith(".dist-info/RECORD")]
    assert set(fa4["files"]) >= set(installed)
    assert all(h and h.startswith("sha256=") for h in fa4["files"].values())
    assert data["driver"] is None and data["gpus"] is None  # --no-gpu: not collected, recorded as such
    report, code = compare(doctor, env, golden)
    assert code == 0
    match = finding(report, "baseline.match")
    assert f"{len(fa4['files'])} files" in match["title"]
    assert report["options"]["baseline"] == str(golden)
    shown = doctor("baseline", "show", str(golden))
    assert shown.returncode == 0 and "flash-attn-4" in shown.stdout


def test_a_changed_file_hash_fails_with_a_diff_and_a_reinstall(doctor: Doctor, env: Env, tmp_path: Path) -> None:
    golden = tmp_path / "golden.json"
    expected = save(doctor, env, golden)["distributions"]["flash-attn-4"]["files"]
    edited = env.site_packages / "flash_attn" / "cute" / "__init__.py"
    edited.write_text(edited.read_text() + "\n# patched in the Dockerfile\n")
    (env.site_packages / "flash_attn" / "cute" / "utils.py").unlink()
    report, code = compare(doctor, env, golden)
    assert code == 1
    drift = finding(report, "baseline.file-drift")
    assert drift["status"] == "fail"
    assert drift["title"] == "flash-attn-4 4.0.0b36: files differ from the baseline (1 changed, 1 missing)"
    lines = drift["detail"].splitlines()
    assert lines[0] == f"--- expected ({golden})" and lines[1] == "+++ found"
    old = expected["flash_attn/cute/__init__.py"]
    assert f"- flash_attn/cute/__init__.py  {old}" in lines
    assert any(line.startswith("+ flash_attn/cute/__init__.py  sha256=") and old not in line for line in lines)
    assert f"- flash_attn/cute/utils.py  {expected['flash_attn/cute/utils.py']}" in lines
    commands = [r["command"] for r in drift["remediation"]]
    assert commands[0] == f"{env.python} -m pip install --force-reinstall --no-deps 'flash-attn-4==4.0.0b36'"


def test_a_changed_version_and_an_added_distribution_fail(doctor: Doctor, env: Env, tmp_path: Path) -> None:
    golden = tmp_path / "golden.json"
    save(doctor, env, golden)
    uninstall(env, "flash-attn-4")
    wheels = tmp_path / "wheels"
    install(env, build_wheel(wheels, "flash-attn-4", "4.0.0b37", {"flash_attn/cute/__init__.py": ""}))
    install(env, build_wheel(wheels, "sneaky-extra", "1.0", {"sneaky_extra.py": ""}))
    report, code = compare(doctor, env, golden)
    assert code == 1
    titles = {f["title"]: f for f in findings_of(report, "baseline") if f["id"] == "baseline.version-drift"}
    changed = titles["flash-attn-4: 4.0.0b36 expected, 4.0.0b37 installed"]
    assert changed["detail"].splitlines()[2:] == ["- flash-attn-4 4.0.0b36", "+ flash-attn-4 4.0.0b37"]
    assert changed["remediation"][0]["command"] == f"{env.python} -m pip install 'flash-attn-4==4.0.0b36'"
    added = titles["sneaky-extra 1.0 is installed but not in the baseline"]
    assert added["remediation"][0]["command"] == f"{env.python} -m pip uninstall -y sneaky-extra"
    assert not [f for f in findings_of(report, "baseline") if f["id"] == "baseline.file-drift"]  # the version says it


def with_arch_facts(report: dict, scan: str, site: str) -> dict:
    """The report with an arch-coverage result holding a recorded scan (the arch layer's section shape)."""
    out = copy.deepcopy(report)
    section = {"no_gpu": True, "target_archs": ["sm_90"], "libraries": [{
        "distribution": "flash-attn-4", "canonical": "flash-attn-4", "version": "4.0.0b36", "path": LIBRARY,
        "file": f"{site}/{LIBRARY}", "kind": "library", "fatbin": ARCH_SCANS[scan]["fatbin"]}]}
    out["checks"].append({"id": "arch-coverage", "layer": "gpu", "title": "Compiled GPU code", "status": "pass",
                          "duration_s": 0.0, "facts": {"arch_coverage": section},
                          "findings": [{"id": "arch.recorded", "status": "pass", "title": f"recorded scan {scan}",
                                        "detail": "", "evidence": {}, "remediation": []}]})
    return validate_report(out)


def with_gpu_facts(report: dict) -> dict:
    """The report with a GPU result holding NVML facts recorded on an H200 box (the gpu layer's section)."""
    out = copy.deepcopy(report)
    out["checks"].append({"id": "gpu", "layer": "gpu", "title": "GPUs", "status": "pass", "duration_s": 0.0,
                          "facts": {"gpu": H200},
                          "findings": [{"id": "gpu.recorded", "status": "pass", "title": "recorded on an H200",
                                        "detail": "", "evidence": {}, "remediation": []}]})
    return validate_report(out)


def test_driver_range_and_gpus_from_real_nvml_facts(doctor: Doctor, env: Env, tmp_path: Path) -> None:
    report, _ = doctor.report("--python", str(env.python), *RUN)
    saved = tmp_path / "h200.json"
    saved.write_text(json.dumps(with_gpu_facts(report)))
    golden, narrow = tmp_path / "golden.json", tmp_path / "narrow.json"
    assert doctor("baseline", "save", str(golden), "--from-report", str(saved)).returncode == 0
    data = json.loads(golden.read_text())
    assert data["driver"] == {"version": "580.159.04", "cuda": "13.0", "range": "==580.*"}
    assert data["gpus"] == {"compute_capabilities": ["9.0"], "names": ["NVIDIA H200"]}
    judged, proc = doctor.report("judge", str(saved), "--only", "namespaces", "--baseline", str(golden))
    assert proc.returncode == 0 and finding(judged, "baseline.match")
    # A baseline that allows only newer drivers: the same box has drifted out of it.
    assert doctor("baseline", "save", str(narrow), "--from-report", str(saved), "--driver-range", ">=590").returncode == 0
    judged, proc = doctor.report("judge", str(saved), "--only", "namespaces", "--baseline", str(narrow))
    assert proc.returncode == 1
    drift = finding(judged, "baseline.gpu-drift")
    assert drift["title"] == "NVIDIA driver 580.159.04 is outside the baseline's range >=590"
    # A run without GPU facts (--no-gpu) cannot compare them: said, not failed.
    judged, proc = doctor.report("--python", str(env.python), *RUN, "--baseline", str(golden))
    skipped = finding(judged, "baseline.not-compared")
    assert "driver, GPUs" in skipped["title"]
    bad = doctor("baseline", "save", str(narrow), "--from-report", str(saved), "--driver-range", "five-eighty")
    assert bad.returncode == 2 and "is not a version specifier" in bad.stderr


def test_a_missing_arch_fails_with_the_lost_arch_named(doctor: Doctor, env: Env, tmp_path: Path) -> None:
    report, _ = doctor.report("--python", str(env.python), *RUN)
    site = str(env.site_packages)
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(with_arch_facts(report, "sm80-sm90a-ptx90", site)))
    bad.write_text(json.dumps(with_arch_facts(report, "sm80-ptx90", site)))
    golden = tmp_path / "golden.json"
    proc = doctor("baseline", "save", str(golden), "--from-report", str(good))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(golden.read_text())
    jsonschema.validate(data, BASELINE_SCHEMA)
    assert data["arch_coverage"] == {LIBRARY: {"sass": ["sm_80", "sm_90a"], "ptx": ["compute_90"]}}
    same, proc = doctor.report("judge", str(good), "--only", "namespaces", "--baseline", str(golden))
    assert proc.returncode == 0 and finding(same, "baseline.match")
    judged, proc = doctor.report("judge", str(bad), "--only", "namespaces", "--baseline", str(golden))
    assert proc.returncode == 1
    drift = finding(judged, "baseline.arch-drift")
    assert drift["title"] == f"{LIBRARY}: no longer carries sm_90a"
    assert drift["evidence"]["missing"] == ["sm_90a"]
    assert drift["detail"].splitlines()[2:] == [f"- {LIBRARY}  sm_80 sm_90a compute_90", f"+ {LIBRARY}  sm_80 compute_90"]


def test_parts_not_collected_now_are_reported_as_not_compared(doctor: Doctor, env: Env, tmp_path: Path) -> None:
    golden = tmp_path / "golden.json"
    save(doctor, env, golden)
    saved = tmp_path / "report.json"
    doctor("--python", str(env.python), *RUN, "--json", str(saved))
    judged, proc = doctor.report("judge", str(saved), "--baseline", str(golden))
    assert proc.returncode == 0
    skipped = finding(judged, "baseline.not-compared")
    assert skipped["status"] == "skip" and "file hashes (1 distributions)" in skipped["title"]


def test_a_saved_report_is_judged_against_the_baseline_on_the_hashes_its_run_read(
        doctor: Doctor, env: Env, tmp_path: Path) -> None:
    golden = tmp_path / "golden.json"
    save(doctor, env, golden)
    edited = env.site_packages / "flash_attn" / "cute" / "__init__.py"
    original = edited.read_bytes()
    edited.write_bytes(original + b"\n# patched in the Dockerfile\n")
    saved = tmp_path / "report.json"
    proc = doctor("--python", str(env.python), *RUN, "--baseline", str(golden), "--json", str(saved))
    assert proc.returncode == 1
    live = finding(json.loads(saved.read_text()), "baseline.file-drift")
    edited.write_bytes(original)  # the box is repaired; the report still holds what its run read
    judged, proc = doctor.report("judge", str(saved), "--baseline", str(golden))
    assert proc.returncode == 1
    again = finding(judged, "baseline.file-drift")
    assert again["title"] == live["title"] == "flash-attn-4 4.0.0b36: files differ from the baseline (1 changed)"
    assert again["detail"] == live["detail"]
    assert not [f for f in findings_of(judged, "baseline") if f["id"] == "baseline.not-compared"]


def test_the_baseline_is_a_check_whose_report_judges_again_without_the_file(
        doctor: Doctor, env: Env, tmp_path: Path) -> None:
    """The baseline is facts like the others: the report holds the document it was compared with and the hashes
    the run read, so `judge REPORT.json` compares again with the file gone; `--only` another check keeps it."""
    golden = tmp_path / "golden.json"
    save(doctor, env, golden)
    edited = env.site_packages / "flash_attn" / "cute" / "__init__.py"
    edited.write_bytes(edited.read_bytes() + b"\n# patched in the Dockerfile\n")
    saved = tmp_path / "report.json"
    proc = doctor("--python", str(env.python), *RUN, "--only", "namespaces", "--baseline", str(golden),
                  "--json", str(saved))
    assert proc.returncode == 1, proc.stderr
    report = json.loads(saved.read_text())
    assert [c["id"] for c in report["checks"]] == ["namespaces", "baseline"]
    (result,) = [c for c in report["checks"] if c["id"] == "baseline"]
    assert result["facts"]["baseline"]["file"] == str(golden) and result["facts"]["file_hashes"]["distributions"]
    live = finding(report, "baseline.file-drift")
    golden.unlink()
    judged, proc = doctor.report("judge", str(saved))
    assert proc.returncode == 1
    assert finding(judged, "baseline.file-drift")["detail"] == live["detail"]


@pytest.mark.parametrize("content, message", [
    ('{"schema": "dflash-doctor/baseline/v1", ', "not valid JSON (line 1"),
    ('{"schema": "dflash-doctor/report/v1", "checks": []}', "not a dflash-doctor baseline"),
    (None, "cannot read the baseline"),
])
def test_an_unusable_baseline_is_named_and_nothing_runs(doctor: Doctor, tmp_path: Path, content: str | None,
                                                        message: str) -> None:
    golden = tmp_path / "golden.json"
    if content is not None:
        golden.write_text(content)
    proc = doctor("--no-gpu", "--baseline", str(golden))
    assert proc.returncode == 2
    assert f"{golden}: {message}" in proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr
