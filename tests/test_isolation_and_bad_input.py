"""A segfault, a hang, broken metadata, a third-party plugin: each is a finding or a check, never a crash."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Doctor, finding, findings_of
from realenv import HANG_ON_IMPORT, SEGFAULT_ON_IMPORT, build_wheel, dist_info, install, make_venv

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent


def pip_target(wheel: Path, directory: Path) -> None:
    """Install a wheel where the doctor's own interpreter will find it through PYTHONPATH."""
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target",
                    str(directory), str(wheel)], check=True)


def env_with_module(tmp_path: Path, name: str, body: str):  # type: ignore[no-untyped-def]
    env = make_venv(tmp_path)
    wheel = build_wheel(tmp_path / "wheels", name.replace("_", "-"), "1.0", {f"{name}/__init__.py": body})
    install(env, wheel)
    return env


def test_a_flash_attn_that_segfaults_on_import_is_a_crash_finding(doctor: Doctor, tmp_path: Path) -> None:
    env = env_with_module(tmp_path, "flash_attn", SEGFAULT_ON_IMPORT)
    report, proc = doctor.report("--python", str(env.python), "--only", "imports")
    crash = finding(report, "imports.crashed")
    assert crash["status"] == "fail"
    assert "SIGSEGV" in crash["title"]
    assert crash["evidence"]["signal"] == "SIGSEGV"
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr


def test_a_flash_attn_that_hangs_on_import_is_a_timeout_finding(doctor: Doctor, tmp_path: Path) -> None:
    env = env_with_module(tmp_path, "flash_attn", HANG_ON_IMPORT)
    report, proc = doctor.report("--python", str(env.python), "--only", "imports", "--timeout", "3")
    hang = finding(report, "imports.timeout")
    assert hang["status"] == "fail"
    assert "timed out after 3 s" in hang["title"]
    assert proc.returncode == 1


def test_stderr_of_a_failing_import_is_kept_trimmed_as_evidence(doctor: Doctor, tmp_path: Path) -> None:
    env = env_with_module(tmp_path, "flash_attn", "import sys\nsys.stderr.write('x' * 100000)\nraise RuntimeError('boom')\n")
    report, _ = doctor.report("--python", str(env.python), "--only", "imports")
    result = report["checks"][0]["facts"]["rotary_import"]
    assert result["exception"]["type"] == "RuntimeError"
    assert len(result["process"]["stderr"]) < 5000 and "characters trimmed" in result["process"]["stderr"]


def test_binary_metadata_is_a_finding_naming_the_file(doctor: Doctor, tmp_path: Path) -> None:
    env = env_with_module(tmp_path, "flash_attn", "")
    metadata = dist_info(env, "flash-attn") / "METADATA"
    metadata.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe garbage")
    report, proc = doctor.report("--python", str(env.python), "--only", "distributions")
    broken = finding(report, "distributions.metadata-broken")
    assert broken["status"] == "fail"
    assert str(metadata) in broken["title"] and "not UTF-8" in broken["title"]
    assert broken["remediation"][0]["command"].startswith("rm -rf ")
    assert "Traceback" not in proc.stderr


def test_malformed_record_is_a_finding_naming_the_file(doctor: Doctor, tmp_path: Path) -> None:
    env = env_with_module(tmp_path, "flash_attn", "")
    record = dist_info(env, "flash-attn") / "RECORD"
    record.write_text('flash_attn/__init__.py,sha256=abc\n"unterminated,quote\n')
    report, _ = doctor.report("--python", str(env.python), "--only", "distributions")
    broken = finding(report, "distributions.record-broken")
    assert str(record) in broken["title"]


def test_two_dist_infos_of_one_name_are_reported(doctor: Doctor, tmp_path: Path) -> None:
    env = env_with_module(tmp_path, "flash_attn", "")
    other = make_venv(tmp_path, name="other")
    install(other, build_wheel(tmp_path / "w2", "flash-attn", "2.0", {"flash_attn/__init__.py": ""}))
    (env.site_packages / "zz-other.pth").write_text(f"{other.site_packages}\n")
    report, _ = doctor.report("--python", str(env.python), "--only", "distributions")
    duplicate = finding(report, "distributions.duplicate")
    assert duplicate["status"] == "fail"  # flash-attn is part of the stack
    assert "2 installed copies" in duplicate["title"]


def test_a_third_party_check_runs_through_the_same_entry_point_group(doctor: Doctor, tmp_path: Path) -> None:
    plugin_source = (
        "from dflash_doctor.model import Finding, Status\n"
        "class EnvKindCheck:\n"
        "    id = 'site-env-kind'\n    layer = 'site'\n    title = 'Our fleet uses venvs'\n"
        "    needs = frozenset({'target'})\n    after = frozenset()\n    requires_gpu = False\n"
        "    def judge(self, facts):\n"
        "        kind = facts['target']['env_kind']\n"
        "        yield Finding('site-env-kind.ok', Status.PASS if kind == 'venv' else Status.WARN, f'env kind {kind}')\n"
    )
    wheel = build_wheel(tmp_path / "wheels", "acme-doctor-checks", "0.1", {"acme_checks.py": plugin_source},
                        entry_points={"dflash_doctor.checks": {"site-env-kind": "acme_checks:EnvKindCheck"}})
    plugin_dir = tmp_path / "plugins"
    install_target = make_venv(tmp_path, name="target")
    pip_target(wheel, plugin_dir)
    env = {"PYTHONPATH": os.pathsep.join([str(plugin_dir), str(ROOT)])}  # this checkout's doctor, not an installed one
    listed = doctor("list", env=env)
    assert "site-env-kind" in listed.stdout and "[plugin: acme-doctor-checks]" in listed.stdout
    report, _ = doctor.report("--python", str(install_target.python), "--only", "site", env=env)
    assert finding(report, "site-env-kind.ok")["title"] == "env kind venv"
    off = doctor("list", env={**env, "DFLASH_DOCTOR_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert "site-env-kind" not in off.stdout


def test_a_broken_plugin_is_an_error_result_and_the_builtins_still_run(doctor: Doctor, tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path / "wheels", "broken-checks", "0.1", {"broken_checks.py": "raise ImportError('nope')\n"},
                        entry_points={"dflash_doctor.checks": {"broken": "broken_checks:Check"}})
    plugin_dir = tmp_path / "plugins"
    pip_target(wheel, plugin_dir)
    report, proc = doctor.report("--only", "distributions",
                                 env={"PYTHONPATH": os.pathsep.join([str(plugin_dir), str(ROOT)])})
    plugin = finding(report, "doctor.plugin-failed")
    assert "broken-checks" in plugin["title"] and "nope" in plugin["title"]
    assert any(c["id"] == "distributions" for c in report["checks"])
    assert proc.returncode == 1
    assert all(f["id"] != "doctor.check-crashed" for f in findings_of(report))
