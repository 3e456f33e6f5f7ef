"""Probes that share one import: forked children of one target process, each still a process of its own.

Real subprocesses in this interpreter, with real modules that crash, hang or flood their output on
import, on the probes' PYTHONPATH (their working directory is on no probe's sys.path, as on no `vllm serve`'s).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from conftest import Doctor
from realenv import HANG_ON_IMPORT, SEGFAULT_ON_IMPORT, fa4_wheel, install, make_venv
from stacks import add_to_path, torch_site

from dflash_doctor.context import Context
from dflash_doctor.facts.collect import InterpreterError, collect
from dflash_doctor.facts.probes import (
    TARGET_PROCESS_MARKER,
    ProbeJob,
    SharedTargetProcess,
    run_probe,
    run_probes_sharing_imports,
)
from dflash_doctor.facts.python import interpreter

CHATTY_ON_IMPORT = "import sys\nprint('x' * 300000)\nsys.stderr.write('e' * 300000)\n"


@pytest.fixture
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    (tmp_path / "crashy.py").write_text(SEGFAULT_ON_IMPORT)
    (tmp_path / "hangy.py").write_text(HANG_ON_IMPORT)
    (tmp_path / "chatty.py").write_text(CHATTY_ON_IMPORT)
    (tmp_path / "heavy.py").write_text("import time\ntime.sleep(0.5)\nLOADED_AT = time.monotonic()\n")
    return tmp_path


def importing(name: str, module: str) -> ProbeJob:
    return ProbeJob(name, "try_import", {"module": module})


def test_each_job_reports_as_the_probe_would_alone(modules: Path) -> None:
    jobs = [importing("json", "json"), importing("missing", "no_such_module_here")]
    shared = run_probes_sharing_imports(sys.executable, jobs, preload=("heavy",), timeout_s=30, cwd=str(modules))
    alone = run_probe(sys.executable, "try_import", {"module": "no_such_module_here"}, timeout_s=30, cwd=str(modules))
    assert shared.outcomes["json"].ok and shared.outcomes["json"].data["ok"] is True
    missing = shared.outcomes["missing"]
    assert missing.ok and missing.data["exception"]["type"] == alone.data["exception"]["type"] == "ModuleNotFoundError"
    assert shared.target_process["forked"] is True
    (heavy,) = shared.target_process["preload"]
    assert heavy["imported"] is True and heavy["seconds"] >= 0.5


def test_a_preloaded_module_is_imported_once_not_once_per_job(modules: Path) -> None:
    jobs = [importing(f"job{i}", "heavy") for i in range(4)]
    started = time.monotonic()
    shared = run_probes_sharing_imports(sys.executable, jobs, preload=("heavy",), timeout_s=30, cwd=str(modules))
    # Four jobs, each importing a module that takes 0.5 s: the children find it loaded.
    assert all(o.ok and o.data["ok"] and o.data["seconds"] < 0.1 for o in shared.outcomes.values())
    assert time.monotonic() - started < 0.5 + 1.5


def test_a_job_that_segfaults_is_a_finding_for_that_job_alone(modules: Path) -> None:
    jobs = [importing("crash", "crashy"), importing("fine", "json")]
    shared = run_probes_sharing_imports(sys.executable, jobs, preload=(), timeout_s=30, cwd=str(modules))
    crash = shared.outcomes["crash"]
    assert (crash.signal, crash.error, crash.data) == ("SIGSEGV", "killed by SIGSEGV", None)
    assert "Fatal Python error" in crash.stderr or crash.stderr == ""
    assert shared.outcomes["fine"].ok and shared.outcomes["fine"].data["ok"] is True


def test_a_job_that_hangs_times_out_alone_and_its_siblings_report(modules: Path) -> None:
    jobs = [importing("hang", "hangy"), importing("fine", "json")]
    started = time.monotonic()
    shared = run_probes_sharing_imports(sys.executable, jobs, preload=(), timeout_s=2, cwd=str(modules))
    elapsed = time.monotonic() - started
    hang = shared.outcomes["hang"]
    assert hang.timed_out and hang.error == "timed out after 2 s" and hang.data is None
    assert shared.outcomes["fine"].ok
    assert elapsed < 2 + 2


def test_output_larger_than_a_pipe_does_not_block_and_facts_still_arrive(modules: Path) -> None:
    shared = run_probes_sharing_imports(
        sys.executable, [importing("chatty", "chatty")], preload=(), timeout_s=30, cwd=str(modules))
    chatty = shared.outcomes["chatty"]
    assert chatty.ok and chatty.data["ok"] is True
    assert "characters trimmed" in chatty.stderr  # kept as evidence, trimmed


def test_a_target_process_that_dies_while_preloading_runs_each_job_on_its_own(modules: Path) -> None:
    jobs = [importing("fine", "json"), importing("crash", "crashy")]
    shared = run_probes_sharing_imports(sys.executable, jobs, preload=("crashy",), timeout_s=30, cwd=str(modules))
    assert shared.target_process["process"]["signal"] == "SIGSEGV"
    assert "each job ran in a process of its own" in shared.target_process["fallback"]
    assert shared.outcomes["fine"].ok and shared.outcomes["crash"].signal == "SIGSEGV"


def test_a_target_process_that_hangs_while_preloading_times_every_job_out(modules: Path) -> None:
    jobs = [importing("fine", "json")]
    shared = run_probes_sharing_imports(sys.executable, jobs, preload=("hangy",), timeout_s=1, cwd=str(modules))
    assert shared.outcomes["fine"].timed_out and shared.outcomes["fine"].data is None


def test_a_preload_that_is_not_installed_is_noted_and_the_jobs_run(modules: Path) -> None:
    shared = run_probes_sharing_imports(
        sys.executable, [importing("fine", "json")], preload=("no_such_module_here",), timeout_s=30, cwd=str(modules))
    assert shared.target_process["preload"] == [{"module": "no_such_module_here", "found": False}]
    assert shared.outcomes["fine"].ok


def test_where_fork_is_missing_each_job_runs_in_an_interpreter_of_its_own(
    modules: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_fork = tmp_path_factory.mktemp("no-fork")
    (no_fork / "sitecustomize.py").write_text("import os\ndel os.fork\n")  # as on Windows
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(no_fork), str(modules)]))
    jobs = [importing("crash", "crashy"), importing("fine", "json"), importing("hang", "hangy")]
    shared = run_probes_sharing_imports(sys.executable, jobs, preload=("json",), timeout_s=3, cwd=str(modules))
    assert shared.target_process["forked"] is False
    assert shared.outcomes["crash"].signal == "SIGSEGV" and shared.outcomes["fine"].ok
    assert shared.outcomes["hang"].timed_out


def _rotary_loaded(doctor: Doctor, python: Path) -> dict[str, object]:
    report, proc = doctor.report("--python", str(python), "--no-gpu", "--only", "imports")
    assert proc.returncode in (0, 1), proc.stderr
    check = next(c for c in report["checks"] if c["id"] == "imports")
    loaded: dict[str, object] = check["facts"]["rotary_import"]["loaded"]
    return loaded


def test_the_python_layers_import_no_torch_when_no_installed_package_would(tmp_path: Path, doctor: Doctor) -> None:
    # torch alone (real, 2.13 CPU): the rotary import cannot reach it, so nothing imports it; once
    # flash-attn-4 (whose import loads torch) is installed beside it, the shared process imports it once.
    env = make_venv(tmp_path)
    add_to_path(env, torch_site(), "zz-torch")
    assert "torch" not in _rotary_loaded(doctor, env.python)
    install(env, fa4_wheel())
    assert "torch" in _rotary_loaded(doctor, env.python)


def test_the_shared_process_answers_the_handshake_before_its_preload_and_no_interpreter_is_started_to_ask(
    modules: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []
    probe = interpreter.run_probe
    monkeypatch.setattr(interpreter, "run_probe", lambda python, name, *a, **k: asked.append(name) or probe(
        python, name, *a, **k))
    target_process = SharedTargetProcess(sys.executable, preload=("hangy",), timeout_s=30, cwd=str(modules)).start()
    try:
        began = time.monotonic()
        answer = interpreter.verify(sys.executable, 30, cwd=str(modules), target_process=target_process)
        waited = time.monotonic() - began
    finally:
        target_process.abort()
    # Its preload never ends (hangy): the answer came before it, from the target process itself.
    assert answer.version == tuple(sys.version_info[:3]) and answer.implementation == "CPython"
    assert asked == [] and waited < 10


@pytest.mark.parametrize("kind", ["not-python", "hangs"])
def test_an_interpreter_the_shared_process_cannot_start_in_is_refused_as_before_and_nothing_is_left_running(
    tmp_path: Path, kind: str
) -> None:
    if kind == "not-python":
        python, says, timeout = "/bin/ls", "is not a Python interpreter", 20.0
    else:
        script = tmp_path / "python3"
        script.write_text("#!/bin/sh\nsleep 60\n")
        script.chmod(0o755)
        python, says, timeout = str(script), "did not answer within 1 s", 1.0
    told: list[tuple[str, str]] = []
    began = time.monotonic()
    with pytest.raises(InterpreterError, match=says):
        # rotary_import: a section whose probe runs in the shared process, which starts before the handshake
        collect(Context(python=python, cwd=str(tmp_path), timeout_s=timeout), {"rotary_import"},
                on_event=lambda kind, name, t: told.append((kind, name)))
    assert time.monotonic() - began < timeout + 5  # a hanging one is given up once, after --timeout
    assert ("target-process-start", "target-process") in told
    assert not [k for k, _ in told if k.startswith("collector")]
    assert _shared_processes() == []  # the shared process was ended with the run


def _shared_processes() -> list[int]:
    """This process's children that run the shared target process's script (probes/target_process.py)."""
    pids: list[int] = []
    for task in Path(f"/proc/{os.getpid()}/task").glob("*/children"):
        pids += [int(pid) for pid in task.read_text().split()]
    marker = TARGET_PROCESS_MARKER.encode()
    return [pid for pid in pids if marker in _cmdline(pid)]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_the_environment_is_read_while_torch_imports_and_the_report_shows_when_each_step_ran(
    tmp_path: Path, doctor: Doctor
) -> None:
    # Real torch (2.13 CPU) and flash-attn-4, whose import loads it: the shared process imports torch, and the
    # report's timeline says when the handshake, that import and each collector ran.
    env = make_venv(tmp_path)
    add_to_path(env, torch_site(), "zz-torch")
    install(env, fa4_wheel())
    report, proc = doctor.report("--python", str(env.python), "--no-gpu", "--only", "imports")
    assert proc.returncode in (0, 1), proc.stderr
    steps = {step["name"]: step for step in report["timeline"]}

    def end(name: str) -> float:  # the times are rounded to the millisecond: one each side of an order
        return float(steps[name]["start_s"]) + float(steps[name]["duration_s"])

    slack = 0.002

    torch_import, handshake = steps["target-process"], steps["handshake"]
    assert [s["start_s"] for s in report["timeline"]] == sorted(s["start_s"] for s in report["timeline"])
    assert torch_import["start_s"] <= handshake["start_s"]  # the import does not wait for the handshake
    assert end("handshake") <= steps["environment"]["start_s"] + slack  # no collector starts before it
    assert steps["environment"]["start_s"] < end("target-process")  # nor waits for the import it does not need
    assert end("rotary-import") + slack >= end("target-process")  # the rotary import runs in a child forked after it


def test_a_collector_after_another_waits_for_it_only_when_the_run_collects_it(tmp_path: Path) -> None:
    from dflash_doctor.facts.collect import Timeline
    from dflash_doctor.facts.sections import Collector

    def slow(_ctx: Context, _earlier: object) -> dict[str, object]:
        time.sleep(0.3)
        return {"first": {}}

    def quick(_ctx: Context, earlier: dict[str, object]) -> dict[str, object]:
        return {"second": {"saw": sorted(earlier)}}

    plan = [Collector("first", ("first",), slow), Collector("second", ("second",), quick, after=("first",))]
    ctx = Context(python=sys.executable, cwd=str(tmp_path))
    timeline = Timeline()
    sections, _ = collect(ctx, {"first", "second"}, plan, on_event=timeline.event)
    steps = {s["name"]: s for s in timeline.steps(since=0.0)}
    assert steps["second"]["start_s"] >= steps["first"]["start_s"] + steps["first"]["duration_s"] - 0.002
    assert sections["second"] == {"saw": []}  # an order, not an input
    alone, _ = collect(ctx, {"second"}, plan)
    assert set(alone) == {"second"}  # nor is it collected for the one that comes after it
