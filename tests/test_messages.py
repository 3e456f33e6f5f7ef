"""What the doctor says, where it said something untrue, contradictory or unhelpful: usage errors, the
wording of findings on an environment without vLLM, a wheel that ships one file for another Python, metadata
the system package manager owns, `explain` on a narrow terminal, and a check whose findings all follow from
another. Real runs of the CLI, on real venvs and this machine's own interpreters."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import Doctor, finding, findings_of, validate_report
from realenv import build_wheel, dist_info, install, make_venv
from test_cli import one_line_usage_error

from dflash_doctor.commands import COMMANDS
from dflash_doctor.facts.probes import probe_source

# ----------------------------------------------------------------------------- usage errors


@pytest.mark.parametrize("argv, says", [
    (["--no-gpuu"], ["dflash-doctor: error: unrecognized arguments: --no-gpuu; did you mean --no-gpu?",
                     "(try 'dflash-doctor --help')"]),
    (["--timeout"], ["argument --timeout: expected one argument", "(try 'dflash-doctor --help')"]),
    (["serve", "--no-gpuu", "--", "vllm", "serve", "m"],
     ["dflash-doctor serve: error: unrecognized arguments: --no-gpuu; did you mean --no-gpu?",
      "(try 'dflash-doctor serve --help')"]),
    (["explain", "--nope"], ["dflash-doctor explain: error: unrecognized arguments: --nope",
                             "(try 'dflash-doctor explain --help')"]),
    (["list", "extra"], ["dflash-doctor list: error: unrecognized arguments: extra"]),
], ids=["mistyped-flag", "missing-value", "serve", "explain", "list"])
def test_a_wrong_option_is_one_line_with_the_closest_option_and_where_the_help_is(
        doctor: Doctor, argv: list[str], says: list[str]) -> None:
    line = one_line_usage_error(doctor(*argv), *says)
    assert "usage:" not in line


def test_a_mistyped_command_names_the_closest_command_and_lists_them_all(doctor: Doctor) -> None:
    line = one_line_usage_error(doctor("lst"), "unknown command 'lst'; did you mean 'list'?", "try 'dflash-doctor --help'")
    assert all(name in line for name in COMMANDS)
    line = one_line_usage_error(doctor("xyzzy", "--no-gpu"), "unknown command 'xyzzy'")
    assert "did you mean" not in line and all(name in line for name in COMMANDS)


def test_a_program_that_is_no_python_is_named_so_and_the_probe_source_is_never_quoted(doctor: Doctor) -> None:
    # /bin/ls takes the handshake's source (passed after -c) for a file name and complains about it.
    line = one_line_usage_error(doctor("--python", "/bin/ls", "--only", "distributions"),
                    "--python /bin/ls is not a Python interpreter")
    source = probe_source("handshake")
    assert not any(part.strip() in line for part in source.splitlines() if len(part.strip()) > 8), line
    assert "Probe" not in line and "#" not in line


def served(doctor: Doctor, model: str) -> dict[str, Any]:
    proc = doctor("serve", "--no-gpu", "--only", "model-files", "--json", "-", "--", "vllm", "serve", model)
    return validate_report(json.loads(proc.stdout))


def test_a_missing_absolute_model_path_is_not_called_relative_and_a_relative_one_is(doctor: Doctor,
                                                                                   tmp_path: Path) -> None:
    missing = tmp_path / "models" / "no-such-model"
    report = served(doctor, str(missing))
    absolute = finding(report, "model-files.dir-missing")
    assert absolute["title"] == f"target directory '{missing}' does not exist"
    assert "working directory" not in str(absolute)
    report = served(doctor, "no-such-model")
    relative = finding(report, "model-files.dir-missing")
    assert "relative to the working directory" in relative["title"]


def test_a_check_whose_only_finding_follows_from_another_says_why_not_zero_findings(doctor: Doctor,
                                                                                    tmp_path: Path) -> None:
    spec = '{"method": "dflash", "model": "%s", "num_speculative_tokens": 4}' % (tmp_path / "no-drafter")
    proc = doctor("serve", "--no-gpu", "--only", "model-files,drafter", "--", "vllm", "serve",
                  str(tmp_path / "no-target"), "--speculative-config", spec)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "0 findings" not in proc.stdout and "from , shown there" not in proc.stdout
    (line,) = [ln for ln in proc.stdout.splitlines() if "DFlash drafter against its target" in ln]
    assert "not judged, the drafter" in line and "follows from model-files.dir-missing" in line, line


def test_explain_wraps_to_the_terminal_width_and_keeps_quoted_commands_whole(doctor: Doctor) -> None:
    for columns in (60, 100):
        proc = doctor("explain", "namespaces.leftover", env={"COLUMNS": str(columns)})
        assert proc.returncode == 0, proc.stderr
        heading, *lines = proc.stdout.splitlines()
        assert heading == ("namespaces.leftover: A flash_attn directory no distribution owns makes flash_attn a "
                           "namespace package")  # one line, as `explain` without an id lists it
        assert len(lines) > 8 and max(len(line) for line in lines) < columns, lines
        assert any("`pip uninstall flash-attn-4`" in line for line in lines)  # never split across lines
        assert any("`suppress(ModuleNotFoundError)`" in line for line in lines)
    # Not a terminal and no COLUMNS: 80 columns.
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    plain = subprocess.run([sys.executable, "-m", "dflash_doctor", "explain"], env=env, cwd=doctor.cwd,
                           capture_output=True, text=True, timeout=120, check=False)
    assert plain.returncode == 0 and max(len(line) for line in plain.stdout.splitlines()) < 80, plain.stdout


# ----------------------------------------------------------------------------- findings on a venv without vLLM


def test_a_venv_without_vllm_or_flash_attn_says_neither_is_installed(doctor: Doctor, tmp_path: Path) -> None:
    env = make_venv(tmp_path)
    report, proc = doctor.report("--python", str(env.python), "--no-gpu", "--only", "namespaces,imports")
    assert proc.returncode == 0, proc.stderr
    for id_ in ("namespaces.absent", "imports.rotary-absent"):
        title = finding(report, id_)["title"]
        assert "neither flash_attn nor vLLM is installed here" in title, title
        assert "every vLLM from 0.18 on skips its flash_attn import when flash_attn is absent" in title
        assert "guarded import skips it" not in title and "bundled" not in title


def test_with_vllm_installed_the_absent_flash_attn_names_that_vllm(doctor: Doctor, tmp_path: Path) -> None:
    env = make_venv(tmp_path)
    install(env, build_wheel(tmp_path / "wheels", "vllm", "0.20.1", {"vllm/__init__.py": ""}))
    report, _ = doctor.report("--python", str(env.python), "--no-gpu", "--only", "namespaces,imports")
    assert finding(report, "namespaces.absent")["title"] == (
        "flash_attn is not installed: vLLM 0.20.1's guarded import skips it and uses its bundled flash-attention")
    assert "vLLM 0.20.1's guarded import skips it" in finding(report, "imports.rotary-absent")["title"]


# ----------------------------------------------------------------------------- the system package manager's files


def test_a_shadowed_copy_the_system_package_manager_owns_is_never_deleted_by_hand(doctor: Doctor,
                                                                                  tmp_path: Path) -> None:
    env = make_venv(tmp_path)
    install(env, build_wheel(tmp_path / "wheels", "flash-attn", "2.8.3", {"flash_attn/__init__.py": ""}))
    # A second copy, earlier in nothing but later on sys.path, whose INSTALLER says Debian installed it.
    system = make_venv(tmp_path, name="system")
    install(system, build_wheel(tmp_path / "w2", "flash-attn", "2.0", {"flash_attn/__init__.py": ""}))
    debian = dist_info(system, "flash-attn")
    (debian / "INSTALLER").write_text("debian\n")
    (env.site_packages / "zz-system.pth").write_text(f"{system.site_packages}\n")
    report, _ = doctor.report("--python", str(env.python), "--only", "distributions")
    duplicate = finding(report, "distributions.duplicate")
    assert duplicate["status"] == "fail" and "2 installed copies" in duplicate["title"]
    commands = [r["command"] for r in duplicate["remediation"]]
    assert commands == [f"dpkg -S {debian}"], commands
    assert "apt" in duplicate["remediation"][0]["why"] and "never" in duplicate["remediation"][0]["why"]
    assert not any(c.startswith("rm ") for f in findings_of(report) for c in (r["command"] for r in f["remediation"]))


DEBIAN_DIST_PACKAGES = Path("/usr/lib/python3/dist-packages")


@pytest.mark.skipif(not (Path("/usr/bin/python3").exists() and DEBIAN_DIST_PACKAGES.is_dir()
                         and shutil.which("dpkg")), reason="no Debian system interpreter on this machine")
def test_on_the_debian_system_python_no_fix_deletes_what_dpkg_owns(doctor: Doctor) -> None:
    report, proc = doctor.report("--python", "/usr/bin/python3", "--only", "distributions", "--no-gpu")
    assert proc.returncode in (0, 1), proc.stderr
    for found in findings_of(report, "distributions"):
        for step in found["remediation"]:
            assert not (step["command"].startswith("rm ") and str(DEBIAN_DIST_PACKAGES) in step["command"]), found
    for duplicate in (f for f in findings_of(report) if f["id"] == "distributions.duplicate"):
        copies = duplicate["evidence"]["copies"]
        if all(c["dist_info"].startswith(f"{DEBIAN_DIST_PACKAGES}/") for c in copies) \
                and len({c["version"] for c in copies}) == 1:
            # Debian's python3-cryptography ships a dist-info and an egg-info of one version side by side.
            assert duplicate["status"] == "pass", duplicate
            assert "metadata directories" in duplicate["title"] and "dpkg" in duplicate["title"]
            owner = subprocess.run(["dpkg", "-S", copies[0]["dist_info"]], capture_output=True, text=True, check=False)
            assert owner.returncode == 0, owner.stderr  # dpkg does own it


def test_one_directory_on_sys_path_twice_through_a_symlink_is_no_duplicate(doctor: Doctor, tmp_path: Path) -> None:
    # The probe walks each real directory once, however many sys.path entries lead to it.
    env = make_venv(tmp_path)
    install(env, build_wheel(tmp_path / "wheels", "flash-attn", "2.8.3", {"flash_attn/__init__.py": ""}))
    alias = tmp_path / "alias-of-site-packages"
    alias.symlink_to(env.site_packages, target_is_directory=True)
    (env.site_packages / "zz-alias.pth").write_text(f"{alias}\n{env.site_packages}\n")
    report, _ = doctor.report("--python", str(env.python), "--only", "distributions")
    assert not [f for f in findings_of(report) if f["id"] == "distributions.duplicate"], findings_of(report)
