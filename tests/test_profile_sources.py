"""Profiles come from the project the user is in, never from a pyproject.toml planted above it, and never
redefine a built-in profile; the report names the file a profile came from.

Real files and the real CLI: the planted profiles point `python` at an executable script that leaves a marker
when it runs (it then runs the real interpreter), so a profile that was used shows on the disk.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from conftest import Doctor
from test_cli import one_line_usage_error

RUN = ("--only", "namespaces", "--no-gpu")


def planted(directory: Path, name: str) -> Path:
    """A pyproject.toml in `directory` whose profile `name` runs a script leaving `directory/ran` as the target."""
    script = directory / "planted-python"
    script.write_text(f'#!/bin/sh\n: > "{directory / "ran"}"\nexec "{sys.executable}" "$@"\n')
    script.chmod(0o755)
    pyproject = directory / "pyproject.toml"
    pyproject.write_text(f'[tool.dflash-doctor.profiles.{name}]\npython = "{script}"\ntarget-arch = ["sm_86"]\n'
                         'markdown = "planted.md"\n')
    return pyproject


@pytest.mark.parametrize("builtin", ["ci", "ticket"])
def test_a_pyproject_above_cannot_redefine_a_builtin_profile(doctor: Doctor, tmp_path: Path, builtin: str) -> None:
    pyproject = planted(tmp_path, builtin)
    work = tmp_path / "work"
    work.mkdir()
    proc = doctor("--profile", builtin, "--target-arch", "sm_86", *RUN, cwd=work, timeout=120)
    one_line_usage_error(proc, str(pyproject), f"profile {builtin!r} is built in")
    assert not (tmp_path / "ran").exists() and not (work / "planted.md").exists()


def test_a_config_file_cannot_redefine_a_builtin_profile_either(doctor: Doctor, tmp_path: Path) -> None:
    config = tmp_path / "profiles.toml"
    config.write_text('[profiles.ticket]\njson = "elsewhere.json"\n')
    proc = doctor("--config", str(config), "--profile", "ticket", *RUN, cwd=tmp_path, timeout=120)
    one_line_usage_error(proc, str(config), "'ticket' is built in")


def test_profiles_are_not_looked_for_above_the_repository_root(doctor: Doctor, tmp_path: Path) -> None:
    planted(tmp_path, "team")
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "src").mkdir()
    proc = doctor("--profile", "team", *RUN, cwd=tmp_path / "repo" / "src", timeout=120)
    one_line_usage_error(proc, "unknown profile 'team'")
    assert not (tmp_path / "ran").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
@pytest.mark.parametrize("whose", ["file", "directory"])
def test_a_pyproject_or_directory_of_another_user_is_not_read(doctor: Doctor, tmp_path: Path, whose: str) -> None:
    pyproject = planted(tmp_path, "team")
    work = tmp_path / "shared" / "work"
    work.mkdir(parents=True)
    if whose == "file":
        os.chown(pyproject, 65534, 65534)
    else:  # the user's project sits in a directory someone else owns, with a pyproject.toml in it
        (tmp_path / "shared" / "pyproject.toml").write_text(pyproject.read_text())
        os.chown(tmp_path / "shared", 65534, 65534)
        pyproject.unlink()
    proc = doctor("--profile", "team", *RUN, cwd=work, timeout=120)
    one_line_usage_error(proc, "unknown profile 'team'")
    assert not (tmp_path / "ran").exists()


def test_the_report_names_the_file_the_profile_came_from(doctor: Doctor, tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[tool.dflash-doctor.profiles.quick]\nextends = "ci"\n'
                                            'target-arch = ["sm_86"]\n')
    report, proc = doctor.report("--profile", "quick", *RUN, cwd=project, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    assert report["options"]["profile"] == "quick"
    assert report["options"]["profile_origin"] == str(project / "pyproject.toml")
    report, _ = doctor.report("--profile", "ci", "--target-arch", "sm_86", *RUN, cwd=project, timeout=120)
    assert report["options"]["profile"] == "ci" and report["options"]["profile_origin"] == "built-in"
