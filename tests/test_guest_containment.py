"""What a plugin can reach through its guest stays inside it: whatever processes it starts end with it (a
daemon in a session of its own included), it reports only findings of its own check, and what it answers is
bounded in depth.

Each plugin is a real wheel installed by pip where the doctor's interpreter finds it; the doctor is the real
CLI in a subprocess; the daemons are real processes, double-forked into sessions of their own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import Doctor, finding, findings_of
from test_plugin_guests import HEADER, check_class, check_result, install_plugin

pytestmark = pytest.mark.slow

# ------------------------------------------------------------------ what a plugin starts ends with it

# A daemon as daemons are made: fork, setsid() into a session (and process group) of its own, fork again so it is
# no session leader, the middle process exits; its stdio goes to /dev/null, so it holds none of the guest's pipes
# (unless told to keep them). It writes its pid, then beats its heartbeat file for a minute.
DAEMON = '''
def start_daemon(pidfile, heartbeat, keep_stdio=False):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (() if keep_stdio else (0, 1, 2)):
                os.dup2(null, fd)
            with open(pidfile + ".tmp", "w") as out:
                out.write(str(os.getpid()))
            os.rename(pidfile + ".tmp", pidfile)
            for _ in range(1200):
                with open(heartbeat, "w") as out:
                    out.write(str(time.time()))
                time.sleep(0.05)
            os._exit(0)
        os._exit(0)
    os.wait()
    deadline = time.time() + 20
    while not os.path.exists(pidfile) and time.time() < deadline:
        time.sleep(0.01)
'''


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _ended(pid: int, seconds: float = 3.0) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _daemon_plugin(tmp_path: Path, *, at_import: bool, judge_then: str = "",
                   keep_stdio: bool = False) -> tuple[dict[str, str], Path, Path]:
    pidfile, heartbeat = tmp_path / "daemon.pid", tmp_path / "daemon.beat"
    start = f"start_daemon({str(pidfile)!r}, {str(heartbeat)!r}, keep_stdio={keep_stdio})"
    body = ("" if at_import else start + "\n") + judge_then + "\nyield Finding('site-guest.ok', Status.PASS, 'ok')"
    source = HEADER + DAEMON + check_class(body) + (start + "\n" if at_import else "")
    return install_plugin(tmp_path, source), pidfile, heartbeat


def _pid(pidfile: Path) -> int:
    assert pidfile.exists(), "the plugin's daemon never started"
    return int(pidfile.read_text())


def _kill(pid: int) -> None:
    if _alive(pid):  # leave nothing behind when the test fails
        os.kill(pid, 9)


@pytest.mark.parametrize(("at_import", "keep_stdio"), [(False, False), (True, False), (False, True)],
                         ids=["started-by-judge", "started-at-import", "holding-the-guests-pipes"])
def test_a_daemon_a_plugin_starts_ends_when_the_doctor_is_done(doctor: Doctor, tmp_path: Path, at_import: bool,
                                                               keep_stdio: bool) -> None:
    env, pidfile, heartbeat = _daemon_plugin(tmp_path, at_import=at_import, keep_stdio=keep_stdio)
    report, proc = doctor.report("--no-gpu", "--only", "site", "--timeout", "30", env=env, timeout=120)
    pid = _pid(pidfile)
    try:
        assert _ended(pid), f"the plugin's daemon {pid} outlived the doctor"
        beat = heartbeat.stat().st_mtime
        time.sleep(0.3)
        assert heartbeat.stat().st_mtime == beat, "the daemon's heartbeat goes on"
    finally:
        _kill(pid)
    assert finding(report, "site-guest.ok")["status"] == "pass"
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("at_import", [False, True], ids=["started-by-judge", "started-at-import"])
def test_a_daemon_a_plugin_starts_ends_when_the_doctor_kills_it_at_the_timeout(doctor: Doctor, tmp_path: Path,
                                                                              at_import: bool) -> None:
    hang = "while True:\n    time.sleep(1)"
    pidfile, heartbeat = tmp_path / "daemon.pid", tmp_path / "daemon.beat"
    start = f"start_daemon({str(pidfile)!r}, {str(heartbeat)!r})"
    if at_import:  # its import starts the daemon and never returns
        source = HEADER + DAEMON + check_class("pass\nyield") + start + "\n" + hang + "\n"
    else:
        source = HEADER + DAEMON + check_class(start + "\n" + hang + "\nyield")
    env = install_plugin(tmp_path, source)
    only = "distributions" if at_import else "site,distributions"  # a plugin that did not load has no layer
    report, proc = doctor.report("--no-gpu", "--only", only, "--timeout", "4", env=env, timeout=120)
    pid = _pid(pidfile)
    try:
        assert _ended(pid), f"the plugin's daemon {pid} outlived the doctor"
    finally:
        _kill(pid)
    code = "doctor.plugin-failed" if at_import else "doctor.plugin-timeout"
    assert "acme_guest:SiteCheck" in json.dumps(finding(report, code))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr


def test_a_daemon_a_plugin_starts_ends_even_when_the_doctor_is_killed_outright(tmp_path: Path) -> None:
    env, pidfile, _ = _daemon_plugin(tmp_path, at_import=False, judge_then="while True:\n    time.sleep(1)")
    argv = [sys.executable, "-m", "dflash_doctor", "--no-gpu", "--only", "site", "--timeout", "600"]
    proc = subprocess.Popen(argv, cwd=tmp_path, env={**os.environ, **env}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not pidfile.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the plugin's judge never started its daemon"
            time.sleep(0.05)
    finally:
        proc.kill()  # SIGKILL: the doctor cleans up nothing itself
        proc.wait()
    pid = _pid(pidfile)
    try:
        assert _ended(pid, 10), f"the plugin's daemon {pid} outlived the doctor"
    finally:
        _kill(pid)


# ------------------------------------------------------------- a plugin reports under its own id only

FORGED = {
    "the-doctors-stop": "doctor.interrupted",
    "a-builtin-checks": "distributions.ok",
    "its-layers-not-its-checks": "site.ok",
    "a-long-one": "doctor." + "x" * 500,
}


@pytest.mark.parametrize("case", sorted(FORGED))
def test_a_finding_under_an_id_not_its_own_is_dropped_for_an_error_naming_the_plugin(doctor: Doctor,
                                                                                    tmp_path: Path, case: str) -> None:
    forged = FORGED[case]
    body = (f"yield Finding({forged!r}, Status.PASS, 'all is well, says the doctor')\n"
            "yield Finding('site-guest.own', Status.WARN, 'its own finding')")
    env = install_plugin(tmp_path, HEADER + check_class(body))
    report, proc = doctor.report("--no-gpu", "--only", "site", env=env)
    assert forged not in [f["id"] for f in findings_of(report)]
    assert not report.get("partial")
    ids = [f["id"] for f in check_result(report, "site-guest")["findings"]]  # type: ignore[union-attr]
    assert ids == ["site-guest.own", "doctor.plugin-foreign-ids"]
    error = finding(report, "doctor.plugin-foreign-ids")
    assert error["status"] == "error"
    assert "acme_guest:SiteCheck" in error["title"] and "acme-guest" in error["title"]
    assert f"'{forged[:80]}" in error["title"]
    assert len(error["title"]) < 400  # a long id is shown cut
    assert check_result(report, "site-guest")["status"] == "error"
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    explained = doctor("explain", "doctor.plugin-foreign-ids")
    assert explained.returncode == 0 and "its own check's id" in explained.stdout


@pytest.mark.parametrize("check_id", ["fleet", "build-prerequisites", "distributions.more", "doctor.site",
                                      "plugins"])
def test_a_plugin_may_not_take_an_id_the_doctors_or_a_builtin_checks_findings_begin_with(
        doctor: Doctor, tmp_path: Path, check_id: str) -> None:
    own = f"{check_id}.ok"
    env = install_plugin(tmp_path, HEADER + check_class(f"yield Finding({own!r}, Status.PASS, 'ok')",
                                                        check_id=repr(check_id)))
    report, proc = doctor.report("--no-gpu", "--only", "distributions", env=env)
    invalid = finding(report, "doctor.plugin-invalid")
    assert "reserved" in invalid["title"] and repr(check_id) in invalid["title"]
    assert own not in [f["id"] for f in findings_of(report)]
    assert proc.returncode == 1 and "Traceback" not in proc.stderr


# ------------------------------------------------------------------------- what it answers is bounded

# The guest's own answer, written past the guest host's checks: straight onto the pipe the answer goes by (the
# one pipe among its open files that is neither its stdin nor its stderr), then the process ends.
FORGE_ANSWER = '''
def forge_answer(payload):
    links = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            links[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
    (answer_fd,) = [fd for fd, link in links.items()
                    if fd > 2 and link.startswith("pipe:") and link not in (links[0], links[2])]
    os.write(answer_fd, b"@@dflash-doctor-guest@@" + payload.encode() + b"\\n")
    os._exit(0)
'''

def nested(levels: int, inner: str = "{}", wrap: str = "{{'a': {}}}") -> str:
    """Plugin code that builds `ev`, `levels` containers deep."""
    return f"ev = {inner}\nfor _ in range({levels}):\n    ev = {wrap.format('ev')}\n"


YIELD_DEEP = "yield Finding('site-guest.deep', Status.WARN, 'deep', evidence={'x': ev})"
FORGE_DEEP = ("forge_answer(json.dumps({'findings': [{'id': 'site-guest.deep', 'status': 'warn', 'title': 'deep', "
              "'evidence': ev}]}))\nyield")
DEEP_ANSWERS = {
    # what the plugin's judge does, the finding the doctor reports, what its title says
    "evidence-600-deep": (nested(600) + YIELD_DEEP, "doctor.plugin-invalid", "evidence is nested deeper than 16"),
    "evidence-of-tuples-600-deep": (nested(600, "()", "({},)") + YIELD_DEEP, "doctor.plugin-crashed",
                                    "nested deeper than 64 levels"),
    "evidence-holding-itself": ("ev = {}\nev['self'] = ev\n" + YIELD_DEEP, "doctor.plugin-invalid",
                                "evidence is nested deeper than 16"),
    "forged-answer-600-deep": (nested(600) + FORGE_DEEP, "doctor.plugin-crashed", "nested deeper than 64 levels"),
    "forged-answer-40-deep": (nested(40) + FORGE_DEEP, "doctor.plugin-crashed", "evidence is nested deeper than 16"),
    "forged-answer-100000-deep": ("forge_answer('[' * 100000 + ']' * 100000)\nyield", "doctor.plugin-crashed",
                                  "nested deeper than 64 levels"),
}


@pytest.mark.parametrize("case", sorted(DEEP_ANSWERS))
def test_an_answer_nested_too_deep_is_an_error_naming_the_plugin_never_a_traceback(doctor: Doctor, tmp_path: Path,
                                                                                   case: str) -> None:
    body, code, said = DEEP_ANSWERS[case]
    env = install_plugin(tmp_path, "import json\n" + HEADER + FORGE_ANSWER + check_class(body))
    out = tmp_path / "r.md"
    report, proc = doctor.report("--no-gpu", "--only", "site,distributions", "--markdown", str(out), env=env)
    assert "Traceback" not in proc.stderr and "RecursionError" not in proc.stderr, proc.stderr[-2000:]
    error = finding(report, code)
    assert said in error["title"] and "acme_guest:SiteCheck" in error["title"], error["title"]
    assert [f["id"] for f in check_result(report, "site-guest")["findings"]] == [code]  # type: ignore[union-attr]
    assert check_result(report, "distributions")["status"] in ("pass", "warn", "fail")
    assert proc.returncode == 1
    assert code in out.read_text()
    terminal = doctor("--no-gpu", "--only", "site", env=env)
    assert terminal.returncode == 1 and "Traceback" not in terminal.stdout + terminal.stderr
    assert code in terminal.stdout


def test_a_flood_of_findings_is_cut_to_the_cap_with_an_error_naming_the_plugin(doctor: Doctor, tmp_path: Path) -> None:
    body = "for i in range(5000):\n    yield Finding(f'site-guest.n{i}', Status.WARN, 'one of many')"
    env = install_plugin(tmp_path, HEADER + check_class(body))
    report, proc = doctor.report("--no-gpu", "--only", "site", env=env)
    ids = [f["id"] for f in check_result(report, "site-guest")["findings"]]  # type: ignore[union-attr]
    assert ids == [f"site-guest.n{i}" for i in range(1000)] + ["doctor.plugin-invalid"]
    error = finding(report, "doctor.plugin-invalid")
    assert "5000 findings, more than 1000" in error["title"] and "acme_guest:SiteCheck" in error["title"]
    assert proc.returncode == 1 and "Traceback" not in proc.stderr


def test_what_a_plugin_raises_is_shown_cut_however_long_its_message(doctor: Doctor, tmp_path: Path) -> None:
    env = install_plugin(tmp_path, HEADER + check_class("raise ValueError('why ' * 1_000_000)\nyield"))
    report, proc = doctor.report("--no-gpu", "--only", "site", env=env)
    crashed = finding(report, "doctor.plugin-crashed")
    assert "judge raised ValueError: why why" in crashed["title"] and "(4000012 characters)" in crashed["title"]
    assert len(crashed["title"]) < 2500 and len(json.dumps(crashed)) < 6000
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
