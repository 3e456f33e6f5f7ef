"""The command line contract: exit codes, JSON on stdout, judge, list, explain, secrets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import Doctor, findings_of, validate_report
from realenv import make_venv

from dflash_doctor.report.redact import Redactor


def test_doctor_runs_cleanly_on_this_machine_and_exits_zero(doctor: Doctor) -> None:
    proc = doctor("--no-gpu")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "summary:" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


def test_json_to_stdout_is_the_only_thing_on_stdout_and_validates(doctor: Doctor) -> None:
    report, proc = doctor.report("--no-gpu")
    assert report["schema"] == "dflash-doctor/report/v1"
    assert report["summary"]["exit_code"] == proc.returncode == 0
    # Paths under the user's home are redacted to `~` (an interpreter under /root/.pyenv, say).
    assert report["target"]["python"] == Redactor.for_this_machine().text(sys.executable)
    assert {c["id"] for c in report["checks"]} >= {"distributions", "namespaces", "imports"}


def test_plain_output_when_not_a_tty_uses_ascii_marks(doctor: Doctor) -> None:
    proc = doctor("--no-gpu", "--only", "distributions")
    assert "[ok]" in proc.stdout
    assert "\x1b[" not in proc.stdout  # no colour escapes in a log


def test_bad_command_line_exits_2(doctor: Doctor) -> None:
    assert doctor("--no-such-flag").returncode == 2
    unknown = doctor("--only", "no-such-check")
    assert unknown.returncode == 2
    assert "unknown check or layer: no-such-check" in unknown.stderr


def test_only_and_skip_take_ids_and_layers(doctor: Doctor) -> None:
    report, _ = doctor.report("--only", "namespaces")
    assert [c["id"] for c in report["checks"]] == ["namespaces"]
    report, _ = doctor.report("--skip", "python")
    assert all(c["layer"] != "python" for c in report["checks"])


def one_line_usage_error(proc: subprocess.CompletedProcess[str], *expected: str) -> str:
    """The one line a usage error prints on stderr (exit 2, nothing on stdout), holding each of `expected`."""
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dflash-doctor"), proc.stderr
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


def make_interpreter(tmp_path: Path, kind: str) -> tuple[str, str]:
    """A --python value of each kind the handshake refuses, and what the one line says about it."""
    if kind == "missing":
        return str(tmp_path / "no" / "python3"), "no/python3: no such file"
    if kind == "directory":
        return str(tmp_path), "is a directory"
    if kind == "not-executable":
        (tmp_path / "python3").write_text("#!/bin/sh\n")
        return str(tmp_path / "python3"), "not executable"
    if kind == "not-python":
        return "/bin/ls", "not a Python interpreter"
    if kind == "hangs":
        script = tmp_path / "python3"
        script.write_text("#!/bin/sh\nsleep 60\n")
        script.chmod(0o755)
        return str(script), "did not answer within 1 s"
    old = Path.home() / ".pyenv" / "versions" / kind / "bin" / "python"
    if not old.exists():
        pytest.skip(f"no CPython {kind} on this machine")
    return str(old), f"is CPython {kind}; the doctor's probes need Python 3.8 or newer"


@pytest.mark.parametrize("kind", ["missing", "directory", "not-executable", "not-python", "hangs", "3.7.16", "2.7.18"])
def test_an_interpreter_that_cannot_be_inspected_is_one_line_and_exit_2(doctor: Doctor, tmp_path: Path,
                                                                         kind: str) -> None:
    python, says = make_interpreter(tmp_path, kind)
    # 1 s for the one that hangs; the old interpreters answer, but their start-up on a busy machine (the
    # suite's workers side by side on two cores) can take longer than 1 s
    timeout = "1" if kind == "hangs" else "20"
    started = time.monotonic()
    proc = doctor("--python", python, "--timeout", timeout, "--only", "distributions")
    one_line_usage_error(proc, f"--python {python}", says)
    assert time.monotonic() - started < 30  # the hanging one is given up after --timeout, once
    served = doctor("serve", "--python", python, "--timeout", timeout, "--", "vllm", "serve", "m")
    one_line_usage_error(served, says)


def test_a_relative_python_is_made_absolute_without_resolving_the_venv_symlink(tmp_path: Path) -> None:
    env = make_venv(tmp_path)
    relative = os.path.relpath(env.python, tmp_path)
    assert env.python.is_symlink() and not relative.startswith("/")
    report, proc = Doctor(tmp_path).report("--python", relative, "--only", "namespaces")
    assert proc.returncode == 0, proc.stderr
    assert report["target"]["python"] == str(env.python)  # the venv's own path, not the base interpreter


@pytest.mark.parametrize("argv, says", [
    (["--timeout", "-1"], "--timeout -1.0: give a number of seconds, more than 0"),
    (["--timeout", "0"], "--timeout 0.0: give a number of seconds"),
    (["--timeout", "nan"], "--timeout nan"),
    (["--timeout", "inf"], "--timeout inf"),
    (["--target-arch", "sm_999x"], "--target-arch 'sm_999x': not a GPU architecture name"),
    (["--target-arch", "sm_86,banana"], "'banana'"),
    (["--target-arch", ","], "no architectures"),
    (["--python", ""], "--python: give the path of an interpreter"),
    (["--json", "x" * 100_000], "File name too long"),
    (["--json", "."], "is a directory"),
    (["--markdown", "/no/such/dir/r.md"], "directory /no/such/dir does not exist"),
    (["baseline", "save", "/no/such/dir/golden.json"], "its directory does not exist"),
    (["serve", "--gpus", "0", "--", "vllm", "serve", "m"], "--gpus 0: give a whole number, at least 1"),
    (["serve", "--gpu-memory", "nan", "--", "vllm", "serve", "m"], "--gpu-memory nan: give a number of GiB"),
    (["merge", "--jobs", "0", "r.json"], "--jobs 0"),
    (["fleet", "--ray", "auto", "--node-timeout", "-5"], "--node-timeout -5.0"),
    (["fleet", "--ray", "auto", "--min-nodes", "-1"], "--min-nodes -1"),
], ids=lambda v: " ".join(v)[:40] if isinstance(v, list) else None)
def test_wrong_numbers_archs_and_paths_are_one_line_usage_errors(doctor: Doctor, argv: list[str], says: str) -> None:
    proc = doctor(*argv)
    one_line_usage_error(proc, says)
    assert len(proc.stderr) < 1000  # a 100,000-character name is shortened


@pytest.mark.parametrize("arch", ["sm_120", "sm_999", "compute_90", "9.0a"])
def test_well_formed_archs_are_accepted_even_when_no_gpu_has_them_yet(doctor: Doctor, arch: str) -> None:
    # An arch the knowledge does not list yet is still judged by the rules (SASS within a major, PTX
    # forward): refusing it would make the doctor useless on the next GPU generation.
    proc = doctor("--no-gpu", "--only", "namespaces", "--target-arch", arch)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("kind", ["long-name", "missing", "directory", "fifo"])
def test_a_config_that_cannot_be_read_is_one_line_never_a_hang(doctor: Doctor, tmp_path: Path, kind: str) -> None:
    config = {"long-name": "c" * 100_000, "missing": str(tmp_path / "none.toml"), "directory": str(tmp_path),
              "fifo": str(tmp_path / "fifo.toml")}[kind]
    if kind == "fifo":
        os.mkfifo(config)
    proc = doctor("--config", config, "--profile", "ci", timeout=60)
    one_line_usage_error(proc, "cannot read the config file")
    assert doctor("profiles", "--config", config, timeout=60).returncode == 2


def test_judge_on_a_saved_report_gives_the_same_findings(doctor: Doctor, tmp_path: Path) -> None:
    saved = tmp_path / "report.json"
    first = doctor("--no-gpu", "--json", str(saved))
    again, proc = doctor.report("judge", str(saved))
    original = validate_report(json.loads(saved.read_text()))
    assert proc.returncode == first.returncode
    strip = lambda r: [(f["id"], f["status"], f["title"]) for f in findings_of(r)]
    assert strip(again) == strip(original)


def test_judge_names_the_file_of_a_malformed_report(doctor: Doctor, tmp_path: Path) -> None:
    bad = tmp_path / "broken.json"
    bad.write_text('{"schema": "dflash-doctor/report/v1", "checks": [')
    proc = doctor("judge", str(bad))
    assert proc.returncode == 2
    assert "broken.json: not valid JSON" in proc.stderr
    other = tmp_path / "other.json"
    other.write_text("[1, 2]")
    assert "not a dflash-doctor report" in doctor("judge", str(other)).stderr


def test_list_shows_every_builtin_check(doctor: Doctor) -> None:
    proc = doctor("list")
    assert proc.returncode == 0
    for check_id in ("distributions", "namespaces", "imports", "import-surface", "extensions"):
        assert check_id in proc.stdout


def test_explain_prints_a_code_and_rejects_unknown_ids(doctor: Doctor) -> None:
    proc = doctor("explain", "namespaces.v4-without-v2")
    assert proc.returncode == 0
    assert "namespace package" in proc.stdout
    assert doctor("explain", "no.such-id").returncode == 2


def test_secret_values_never_reach_any_output(doctor: Doctor, tmp_path: Path) -> None:
    token = "hf_" + "Q" * 34
    env = {"HF_TOKEN": token, "VLLM_API_KEY": "sk-" + "z" * 30, "VLLM_LOGGING_LEVEL": "DEBUG",
           "CUDA_VISIBLE_DEVICES": "0,1", "VLLM_PLUGIN_URL": "https://user:" + "p" * 12 + "@example.invalid/x"}
    saved = tmp_path / "r.json"
    proc = doctor("--no-gpu", "-v", "--json", str(saved), env=env)
    text = proc.stdout + proc.stderr + saved.read_text()
    for secret in (token, "z" * 30, "p" * 12):
        assert secret not in text
    target = json.loads(saved.read_text())["checks"][0]["facts"]["target"]
    assert "HF_TOKEN" in target["environ"]["names"]
    assert target["environ"]["values"]["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert target["environ"]["values"]["VLLM_LOGGING_LEVEL"] == "DEBUG"
    assert "VLLM_API_KEY" not in target["environ"]["values"]


def test_the_pipeline_runs_a_request_with_no_command_line(tmp_path: Path) -> None:
    """Every command runs the doctor through `pipeline.run(Request)`: a typed request, no argparse below the
    command line. The run's report is the command line's (its options recorded, validated by the schema)."""
    from dflash_doctor.pipeline import run
    from dflash_doctor.request import Request, RequestError

    done = run(Request(python=sys.executable, cwd=str(tmp_path), no_gpu=True, only=("distributions",), strict=True))
    validate_report(done.report)
    assert [c["id"] for c in done.report["checks"]] == ["distributions"]
    assert done.report["options"] == {"no_gpu": True, "target_archs": [], "only": ["distributions"], "skip": [],
                                      "strict": True, "profile": None, "profile_origin": None, "baseline": None}
    assert done.exit_code in (0, 1) and [r.id for r in done.raw_results] == ["distributions"]
    with pytest.raises(RequestError, match="unknown check or layer: no-such-check"):
        run(Request(python=sys.executable, cwd=str(tmp_path), only=("no-such-check",)))
    # A baseline file is read like any other fact: one that cannot be read is the baseline check's error, naming
    # the file (the command line refuses it before the run: test_baseline).
    missing = tmp_path / "missing.json"
    done = run(Request(python=sys.executable, cwd=str(tmp_path), no_gpu=True, only=("distributions",),
                       baseline=str(missing)))
    (result,) = [r for r in done.raw_results if r.id == "baseline"]
    assert result.status.value == "error" and str(missing) in result.findings[0].detail, result
