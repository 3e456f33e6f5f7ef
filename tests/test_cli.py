"""The command line contract: exit codes, JSON on stdout, judge, list, explain, secrets."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from conftest import Doctor, finding, findings_of, validate_report

from dflash_doctor.redact import Redactor


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


def test_missing_target_interpreter_is_an_error_finding_not_a_traceback(doctor: Doctor, tmp_path: Path) -> None:
    report, proc = doctor.report("--python", str(tmp_path / "no" / "python3"), "--only", "distributions")
    assert proc.returncode == 1
    error = finding(report, "doctor.facts-unavailable")
    assert error["status"] == "error"
    assert "no/python3" in error["detail"]
    assert "Traceback" not in proc.stderr


def test_judge_on_a_saved_report_gives_the_same_findings(doctor: Doctor, tmp_path: Path) -> None:
    saved = tmp_path / "report.json"
    first = doctor("--no-gpu", "--json", str(saved))
    again, proc = doctor.report("judge", str(saved))
    original = validate_report(json.loads(saved.read_text()))
    assert proc.returncode == first.returncode
    strip = lambda r: [(f["id"], f["status"], f["title"]) for f in findings_of(r)]  # noqa: E731
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
    proc = doctor("explain", "namespace.v4-without-v2")
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
