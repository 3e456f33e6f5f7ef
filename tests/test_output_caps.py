"""What a probe writes is read with a cap: a target whose startup writes to stdout without end (a real `.pth`
file in a real venv) is a finding naming the likely cause, within --timeout, with the doctor's memory small.

The doctor is the real CLI in a subprocess; its peak memory is read from the kernel (/proc while it runs, and
wait4's rusage when it ends), and a doctor that grows past the budget is killed by the test rather than left
to take the machine's memory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import finding, validate_report
from realenv import build_wheel, install, make_venv

from dflash_doctor.process import STDERR_CAP, STDOUT_CAP, exchange

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
BUDGET_BYTES = 1 << 30
SPAM_PTH = "import sys; exec('while True: sys.stdout.write(\"spam \" * 1000 + \"\\\\n\")')\n"
SPAM_NO_NEWLINE_PTH = "import os; exec('while True: os.write(1, b\"x\" * 65536)')\n"


def _peak_rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def run_doctor_watched(args: list[str], cwd: Path, timeout_s: float) -> tuple[int, str, str, float, int]:
    """Run the CLI, killing it past the memory budget or `timeout_s`; returns (exit status, stdout, stderr,
    seconds, peak RSS in bytes)."""
    out, err = cwd / "doctor.out", cwd / "doctor.err"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.monotonic()
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "dflash_doctor", *args], cwd=cwd, env=env,
                                stdout=stdout, stderr=stderr, start_new_session=True)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, _peak_rss(proc.pid))
            if peak > BUDGET_BYTES or time.monotonic() - started > timeout_s:
                os.killpg(proc.pid, 9)
                proc.wait()
                raise AssertionError(f"the doctor was killed: peak RSS {peak >> 20} MiB, "
                                     f"{time.monotonic() - started:.1f} s")
            time.sleep(0.02)
    took = time.monotonic() - started
    return proc.returncode, out.read_text(errors="replace"), err.read_text(errors="replace"), took, peak


@pytest.mark.parametrize("pth", [SPAM_PTH, SPAM_NO_NEWLINE_PTH], ids=["lines", "no-newline"])
def test_a_pth_that_writes_to_stdout_forever_is_a_finding_and_the_doctor_stays_small(tmp_path: Path,
                                                                                      pth: str) -> None:
    env = make_venv(tmp_path)
    (env.site_packages / "zz-spam.pth").write_text(pth)
    timeout = 10
    report_path = tmp_path / "report.json"
    code, stdout, stderr, took, peak = run_doctor_watched(
        ["--python", str(env.python), "--no-gpu", "--timeout", str(timeout), "--only", "distributions,imports",
         "--json", str(report_path)], tmp_path, timeout + 60)
    assert took < timeout + 5, f"took {took:.1f} s with --timeout {timeout}"
    assert peak < BUDGET_BYTES, f"peak RSS {peak >> 20} MiB"
    assert code == 1, (stdout[-2000:], stderr[-2000:])
    assert "Traceback" not in stderr
    report = validate_report(json.loads(report_path.read_text()))
    unavailable = finding(report, "doctor.facts-unavailable")
    assert f"wrote more than {STDOUT_CAP >> 20} MiB to stdout" in unavailable["detail"]
    assert ".pth file" in unavailable["detail"] and str(env.python) in unavailable["detail"]
    assert "wrote more than" in stdout  # the terminal view says it too


def test_a_module_that_writes_forever_on_import_stops_its_probe_in_the_shared_host(tmp_path: Path) -> None:
    """The rotary-import probe runs forked from the shared target process: the host caps each job's output."""
    env = make_venv(tmp_path)
    spewer = "import os\nwhile True:\n    os.write(1, b'y' * 65536)\n"
    install(env, build_wheel(tmp_path / "wheels", "flash-attn", "2.8.3", {"flash_attn/__init__.py": spewer}))
    timeout = 20
    report_path = tmp_path / "report.json"
    code, _stdout, stderr, took, peak = run_doctor_watched(
        ["--python", str(env.python), "--no-gpu", "--timeout", str(timeout), "--only", "imports",
         "--json", str(report_path)], tmp_path, timeout + 60)
    assert took < timeout, f"took {took:.1f} s: the job ran to its timeout instead of being stopped at its cap"
    assert peak < BUDGET_BYTES
    assert code == 1 and "Traceback" not in stderr
    report = validate_report(json.loads(report_path.read_text()))
    text = json.dumps(report)
    assert f"wrote more than {STDOUT_CAP >> 20} MiB to stdout and was stopped" in text


def _child(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)


def test_exchange_stops_a_child_writing_to_stderr_forever_at_its_cap() -> None:
    proc = _child("import os\nwhile True:\n    os.write(2, b'e' * 4096)\n")
    started = time.monotonic()
    ran = exchange(proc, b"", 30)
    assert time.monotonic() - started < 10
    assert ran.overflow == "stderr" and not ran.timed_out
    assert len(ran.stderr) == STDERR_CAP
    assert proc.returncode == -9


def test_exchange_feeds_a_large_payload_and_reads_all_of_a_large_answer() -> None:
    payload = os.urandom(3 << 20).hex().encode()  # 6 MiB: more than any pipe holds, under the stdout cap
    proc = _child("import sys\nsys.stdout.buffer.write(sys.stdin.buffer.read())\n")
    ran = exchange(proc, payload, 60)
    assert ran.overflow is None and not ran.timed_out
    assert ran.stdout == payload and proc.returncode == 0


def test_exchange_times_out_a_child_that_never_ends_and_its_grandchild() -> None:
    proc = _child("import subprocess, sys, time\n"
                  "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
                  "print(child.pid, flush=True)\n"
                  "time.sleep(600)\n")
    started = time.monotonic()
    ran = exchange(proc, b"{}", 2.0)
    assert ran.timed_out and time.monotonic() - started < 6
    assert proc.returncode == -9
    grandchild = int(ran.stdout.split()[0])
    deadline = time.monotonic() + 10
    while Path(f"/proc/{grandchild}").exists() and "State:\tZ" not in _status(grandchild):
        assert time.monotonic() < deadline, "the probe's own child outlived its timeout"
        time.sleep(0.05)


def _status(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return ""
