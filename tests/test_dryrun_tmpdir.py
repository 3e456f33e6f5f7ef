"""A dry run leaves nothing in $TMPDIR: not when pip answers, not when it is killed at the timeout, not on Ctrl-C.

pip unpacks what a dry run downloads into $TMPDIR (pip-unpack-*: a torch wheel is ~500 MB) and removes it when
it exits; killed, it cannot. The doctor gives each installer run a temporary directory of its own and removes it
on every path. Proven with the real pip of a real venv, against a real package index on loopback whose one
wheel trickles in more slowly than the run's timeout allows.
"""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from realenv import Env, _clean_environ, make_venv, uv_bin

REPO = Path(__file__).resolve().parent.parent
WHEEL = "slowpkg-1.0-py3-none-any.whl"


class SlowIndex(http.server.BaseHTTPRequestHandler):
    """/simple/slowpkg/ lists one wheel; the wheel comes 16 KiB at a time, 20 times a second, of 64 MB."""

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/simple/slowpkg":
            body = f'<html><body><a href="/files/{WHEEL}">{WHEEL}</a></body></html>'.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if self.path == f"/files/{WHEEL}":
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(64 << 20))
            self.end_headers()
            try:
                for _ in range(4096):
                    self.wfile.write(b"\0" * (16 << 10))
                    self.wfile.flush()
                    time.sleep(0.05)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        self.send_error(404)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def index() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), SlowIndex)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    server.shutdown()


@pytest.fixture(scope="module")
def pip_env(tmp_path_factory: pytest.TempPathFactory) -> Env:
    import ensurepip

    env = make_venv(tmp_path_factory.mktemp("tmpdir"), "venv")
    (wheel,) = (Path(ensurepip.__file__).parent / "_bundled").glob("pip-*.whl")
    subprocess.run([str(uv_bin()), "pip", "install", "--quiet", "--no-config", "--no-index", "--link-mode", "copy",
                    "--python", str(env.python), str(wheel)], check=True, env=_clean_environ(), capture_output=True)
    return env


def dry_run(env: Env, index: str, tmpdir: Path, timeout_s: float) -> subprocess.Popen[str]:
    """`dryrun.collect` of one pip install, in a process of its own whose $TMPDIR is `tmpdir`."""
    code = ("import json, os, sys; from dflash_doctor.facts.fix import dryrun; "
            "facts = dryrun.collect([sys.argv[1]], {'target': {'environment_roots': []}}, python=sys.argv[2], "
            "timeout_s=float(sys.argv[3]), cwd=os.getcwd()); "
            "print(json.dumps(facts.items[0].segments[0].to_json()))")
    command = f"{env.python} -m pip install slowpkg"
    environ = {**_clean_environ(), "PYTHONPATH": str(REPO), "TMPDIR": str(tmpdir), "PIP_INDEX_URL": index,
               "PIP_CONFIG_FILE": os.devnull, "PIP_CACHE_DIR": str(tmpdir.parent / "pip-cache")}
    return subprocess.Popen([sys.executable, "-c", code, command, str(env.python), str(timeout_s)], env=environ,
                            cwd=tmpdir.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # noqa: PLW1509


def left_in(tmpdir: Path) -> list[str]:
    return sorted(str(p.relative_to(tmpdir)) for p in tmpdir.rglob("*"))


@pytest.mark.slow
def test_a_pip_dry_run_killed_at_the_timeout_leaves_nothing_in_tmpdir(
    pip_env: Env, index: str, tmp_path: Path
) -> None:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    proc = dry_run(pip_env, index, tmpdir, timeout_s=8)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    segment = json.loads(out)
    assert segment["status"] == "not-checked" and segment["reason"] == "pip did not answer within 8 s (--timeout)", \
        segment
    assert left_in(tmpdir) == []


@pytest.mark.slow
def test_ctrl_c_during_a_pip_dry_run_stops_pip_and_leaves_nothing_in_tmpdir(
    pip_env: Env, index: str, tmp_path: Path
) -> None:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    proc = dry_run(pip_env, index, tmpdir, timeout_s=300)
    _, err, ended_s = stopped_while_unpacking(proc, tmpdir, signal.SIGINT)
    assert "KeyboardInterrupt" in err and ended_s < 30, err[-2000:]
    assert left_in(tmpdir) == []


def stopped_while_unpacking(proc: subprocess.Popen[str], tmpdir: Path, signum: int) -> tuple[str, str, float]:
    """Send `signum` once pip unpacks the wheel it is downloading; the process's output, and how long it took to
    end after the signal."""
    try:
        deadline = time.monotonic() + 60
        while not any(p.name.startswith("pip-unpack-") for p in tmpdir.rglob("*")):  # the wheel is coming in
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.2)
        started = time.monotonic()
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
        return out, err, time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


STOPPED_RUN = """
import json, os, sys, time
from dflash_doctor import pipeline
from dflash_doctor.model import CheckResult, Finding, Remediation, Status
from dflash_doctor.request import Request

python = sys.argv[1]
fix = Remediation(f"{python} -m pip install slowpkg", "the package the finding lacks")
failing = CheckResult("distributions", "python", "Distributions", Status.FAIL,
                      (Finding(id="distributions.missing", status=Status.FAIL, title="slowpkg is missing",
                               remediation=(fix,)),))
extra = {}
results, partial = pipeline._verify_fixes([failing], {"target": {"environment_roots": []}}, extra,
                                          Request(python=python, cwd=os.getcwd(), timeout_s=300), True,
                                          time.monotonic())
print(json.dumps({"partial": partial, "dry_runs": extra["dry_runs"],
                  "results": [[r.id, r.findings[0].id, r.findings[0].title] for r in results]}))
"""


@pytest.mark.slow
def test_sigterm_while_the_installer_is_asked_about_the_fixes_stops_it_and_keeps_the_report(
    pip_env: Env, index: str, tmp_path: Path
) -> None:
    """--verify-fixes asks the installer after judging: SIGTERM then (a CI job's timeout) stops pip and removes
    what it unpacked, and the run goes on to its report, partial, saying so; before, the doctor died unreported
    and left pip downloading in a session of its own."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    environ = {**_clean_environ(), "PYTHONPATH": str(REPO), "TMPDIR": str(tmpdir), "PIP_INDEX_URL": index,
               "PIP_CONFIG_FILE": os.devnull, "PIP_CACHE_DIR": str(tmp_path / "pip-cache")}
    proc = subprocess.Popen([sys.executable, "-c", STOPPED_RUN, str(pip_env.python)], env=environ, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err, ended_s = stopped_while_unpacking(proc, tmpdir, signal.SIGTERM)
    assert proc.returncode == 0 and ended_s < 30, err[-2000:]
    ran = json.loads(out)
    assert ran["partial"] is True and ran["dry_runs"] == {"error": "stopped by SIGTERM"}
    (judged, _, _), (doctor, stop, title) = ran["results"]
    assert judged == "distributions" and doctor == "doctor" and stop == "doctor.interrupted"
    assert "while asking the installer about the fixes" in title
    assert left_in(tmpdir) == []
    assert [p.name for p in Path("/proc").glob("[0-9]*") if str(tmpdir).encode() in _environ_of(p)] == [], \
        "an installer outlived the stop"


def _environ_of(proc: Path) -> bytes:
    try:
        return (proc / "environ").read_bytes()
    except OSError:
        return b""


def test_the_installer_asked_about_a_fix_runs_nothing_from_the_working_directory(
    pip_env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`PY -m pip` puts the working directory first on sys.path: a pip/ package there (a repository the user runs
    the doctor in) would run instead of the target's pip."""
    from dflash_doctor.facts.fix import dryrun

    cwd = tmp_path / "checkout"
    (cwd / "pip").mkdir(parents=True)
    ran = tmp_path / "ran"
    for name in ("__init__.py", "__main__.py"):
        (cwd / "pip" / name).write_text(f"open({str(ran)!r}, 'a').write({name!r})\n")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.delenv("PYTHONSAFEPATH", raising=False)
    facts = dryrun.collect([f"{pip_env.python} -m pip install slowpkg"], {"target": {"environment_roots": []}},
                           python=str(pip_env.python), timeout_s=60, cwd=str(cwd))
    assert not ran.exists(), ran.read_text()
    assert [item.command for item in facts.items] == [f"{pip_env.python} -m pip install slowpkg"]
