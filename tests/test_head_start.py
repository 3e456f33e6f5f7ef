"""The run's head start (facts.head_start): a run of every check starts the target process (torch's import) and the
environment probe before the doctor imports its checks, and its collectors take them; what they do not take is ended.

Real processes: the target interpreter is a venv that sees the real torch 2.13 (CPU).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from conftest import Doctor
from realenv import make_venv
from stacks import add_to_path, torch_site
from test_shared_import import _shared_processes

from dflash_doctor.facts import head_start
from dflash_doctor.facts.probes import SHARED_IMPORTS
from dflash_doctor.facts.python.environment_args import probe_args
from dflash_doctor.request import Request


def _torch_env(tmp_path: Path) -> Path:
    env = make_venv(tmp_path)
    add_to_path(env, torch_site(), "zz-torch")
    return env.python


def test_a_run_of_every_check_reads_the_environment_while_torch_imports_and_its_timeline_shows_both(
    tmp_path: Path, doctor: Doctor
) -> None:
    python = _torch_env(tmp_path)
    report, proc = doctor.report("--python", str(python), "--no-gpu")
    assert proc.returncode in (0, 1), proc.stderr
    steps = {(s["kind"], s["name"]): s for s in report["timeline"]}
    torch_import, probe = steps["target-process", "target-process"], steps["head-start", "environment"]
    collector = steps["collector", "environment"]
    # Both started before the doctor's checks were imported, side by side; the collector took the probe's facts.
    assert torch_import["start_s"] < 0.2 and probe["start_s"] < 0.2
    assert probe["start_s"] + probe["duration_s"] <= collector["start_s"] + collector["duration_s"] + 0.002
    assert report["wall_s"] >= torch_import["start_s"] + torch_import["duration_s"] - 0.002
    target = next(c for c in report["checks"] if c["id"] == "distributions")["facts"]["target"]
    assert target["probe"]["error"] is None and target["python"] == str(python)  # the head start's probe's facts


def test_a_run_of_some_checks_starts_nothing_before_it_knows_what_it_needs(tmp_path: Path, doctor: Doctor) -> None:
    python = _torch_env(tmp_path)
    report, proc = doctor.report("--python", str(python), "--no-gpu", "--only", "imports")
    assert proc.returncode in (0, 1), proc.stderr
    assert not [s for s in report["timeline"] if s["kind"] == "head-start"]


def test_what_no_collector_takes_is_ended_and_another_question_gets_nothing(tmp_path: Path) -> None:
    python = str(_torch_env(tmp_path))
    request = Request(python=python, cwd=str(tmp_path), no_gpu=True)
    with head_start.start(request) as early:
        # Asked for something else (hashes verified, another timeout, torch preloaded whatever is found): not these.
        assert early.take_environment(python, probe_args(True), request.timeout_s, request.cwd) is None
        assert early.take_target_process(python, SHARED_IMPORTS, None, request.timeout_s, request.cwd) is None
        assert early.take_target_process(python, SHARED_IMPORTS, head_start.target_process_preload(False),
                                         request.timeout_s + 1, request.cwd) is None
        assert _shared_processes()
    started = time.monotonic()
    while _shared_processes() and time.monotonic() - started < 10:
        time.sleep(0.05)
    assert not _shared_processes()
    children = [p for t in Path("/proc/self/task").glob("*/children") for p in t.read_text().split()]
    assert not [p for p in children if os.path.exists(f"/proc/{p}") and b"environment" in
                Path(f"/proc/{p}/cmdline").read_bytes()]
    assert early.spans() == {}  # nothing was taken: the timeline shows no head start


def test_an_interpreter_that_is_no_file_gets_no_head_start(tmp_path: Path) -> None:
    early = head_start.start(Request(python=str(tmp_path / "missing" / "python"), cwd=str(tmp_path)))
    assert early.take_environment(str(tmp_path / "missing" / "python"), probe_args(False), 60.0, str(tmp_path)) is None
    early.close()


def _processes_running(program: str) -> list[int]:
    """Processes running `program` (this test's own venv's interpreter: the doctor's probes in it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes().split(b"\0", 1)[0] == program.encode():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.parametrize("after_s", [0.0, 0.15, 0.4])
def test_sigterm_while_the_doctor_still_imports_ends_what_its_head_start_started(tmp_path: Path, after_s: float) -> None:
    # SIGTERM once the head start's target process is there (at once: while it starts the environment probe; then
    # while the doctor imports its checks, before the run takes its signals over; then as the run begins): the doctor
    # ends by that signal (once the run handles it: the partial report, exit 1), taking the head start's processes
    # and their temporary directories with it.
    import signal
    import subprocess
    import sys

    python = _torch_env(tmp_path)
    scratch = tmp_path / "tmpdir"
    scratch.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "dflash_doctor", "--python", str(python), "--no-gpu"],
                            cwd=tmp_path, env={**os.environ, "TMPDIR": str(scratch)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    started = time.monotonic()
    while not _processes_running(str(python)) and time.monotonic() - started < 30:
        time.sleep(0.005)
    time.sleep(after_s)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode in (-signal.SIGTERM, 1), stderr.decode()[-2000:]
    assert b"Traceback" not in stderr, stderr.decode()[-3000:]
    assert b"Traceback" not in stderr
    deadline = time.monotonic() + 10
    while _processes_running(str(python)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _processes_running(str(python))
    assert not list(scratch.iterdir())
