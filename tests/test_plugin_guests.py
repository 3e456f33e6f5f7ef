"""A third-party check is a guest: its time is bounded, whatever it raises is caught, what it declares is
validated, and SIGTERM stops the doctor at once even while a plugin is busy.

Each plugin is a real wheel (with an entry point in `dflash_doctor.checks`) installed by pip where the
doctor's interpreter finds it; the doctor is the real CLI in a subprocess.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import Doctor, finding, findings_of, validate_report
from realenv import build_wheel

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
JUDGED = ("pass", "warn", "fail")  # a built-in check judged as usual (not an error, not left out)

HEADER = (
    "import os, sys, time\n"
    "from dflash_doctor.model import Finding, Remediation, Status\n"
)


def check_class(judge_body: str, *, name: str = "SiteCheck", check_id: str = "'site-guest'",
                layer: str = "'site'", title: str = "'A site check'", needs: str = "frozenset({'target'})") -> str:
    return (
        f"class {name}:\n"
        f"    id = {check_id}\n    layer = {layer}\n    title = {title}\n    needs = {needs}\n"
        "    after = frozenset()\n    requires_gpu = False\n"
        "    def judge(self, facts):\n"
        + "".join(f"        {line}\n" for line in judge_body.strip().splitlines())
    )


def install_plugin(tmp_path: Path, source: str, *, dist: str = "acme-guest", module: str = "acme_guest",
                   target: str = "SiteCheck", extra_modules: dict[str, str] | None = None) -> dict[str, str]:
    """Build a real plugin wheel, install it with pip into a directory of its own, and return the
    environment that puts it (and this checkout's dflash_doctor) on the doctor's path."""
    files = {f"{module}.py": source, **(extra_modules or {})}
    wheel = build_wheel(tmp_path / "wheels", dist, "0.1", files,
                        entry_points={"dflash_doctor.checks": {"site-guest": f"{module}:{target}"}})
    plugins = tmp_path / "plugins"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target",
                    str(plugins), str(wheel)], check=True)
    return {"PYTHONPATH": os.pathsep.join([str(plugins), str(ROOT)])}


def check_result(report: dict[str, object], check_id: str) -> dict[str, object]:
    checks = [c for c in report["checks"] if c["id"] == check_id]  # type: ignore[index, union-attr]
    assert checks, f"no check {check_id}"
    result: dict[str, object] = checks[0]
    return result


# ------------------------------------------------------------------------------------------ time bound


@pytest.mark.parametrize("forever", ["while True:\n    time.sleep(1)", "while True:\n    pass"],
                         ids=["sleeps", "spins"])
def test_a_judge_that_never_returns_is_a_timeout_error_within_the_timeout(doctor: Doctor, tmp_path: Path,
                                                                          forever: str) -> None:
    env = install_plugin(tmp_path, HEADER + check_class(forever + "\nyield"))
    started = time.monotonic()
    report, proc = doctor.report("--no-gpu", "--timeout", "5", "--only", "site,distributions", env=env, timeout=60)
    took = time.monotonic() - started
    assert took < 5 + 10, f"the doctor took {took:.1f} s with --timeout 5"
    result = check_result(report, "site-guest")
    assert result["status"] == "error"
    timeout = finding(report, "doctor.plugin-timeout")
    assert "acme-guest" in timeout["title"] and "acme_guest:SiteCheck" in timeout["title"]
    assert check_result(report, "distributions")["status"] in JUDGED  # the built-ins still judged
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr


def _wait_for(path: Path, proc: subprocess.Popen[str], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the plugin's judge never started"
        time.sleep(0.05)


def test_one_sigterm_while_a_plugin_judges_forever_stops_the_doctor_within_two_seconds(tmp_path: Path) -> None:
    started_flag = tmp_path / "judging"
    body = f"open({str(started_flag)!r}, 'w').close()\nwhile True:\n    time.sleep(1)\nyield"
    env = {**os.environ, **install_plugin(tmp_path, HEADER + check_class(body))}
    env.pop("NO_COLOR", None)
    out = tmp_path / "r.json"
    argv = [sys.executable, "-m", "dflash_doctor", "--no-gpu", "--timeout", "600", "--only", "site,distributions",
            "--json", str(out)]
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(started_flag, proc)
        stopped = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=30)
        exit_after = time.monotonic() - stopped
    finally:
        if proc.poll() is None:
            proc.kill()
    assert exit_after < 2.0, f"exited {exit_after:.2f} s after SIGTERM"
    assert proc.returncode == 1
    assert stderr.splitlines() == [line for line in stderr.splitlines() if line.strip()]
    said = [line for line in stderr.splitlines() if " report written to " not in line]  # each file written is named
    assert len(said) == 1 and "stopped by SIGTERM" in said[0], stderr
    report = validate_report(json.loads(out.read_text()))
    assert report["partial"] is True and report["summary"]["exit_code"] == 1
    interrupted = finding(report, "doctor.interrupted")
    assert "SIGTERM" in interrupted["title"]
    (guest,) = check_result(report, "site-guest")["findings"]  # type: ignore[misc]
    assert guest["id"] == "doctor.incomplete" and guest["cause"] == "doctor.interrupted"
    assert check_result(report, "distributions")["status"] in JUDGED  # judged before the stop, kept
    # The terminal view: the stop first, what it left unjudged nested under it.
    lines = stdout.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("["))
    assert "stopped by SIGTERM" in lines[first]
    assert any("follows from doctor.interrupted" in line for line in lines[first + 1:])
    assert "PARTIAL report" in stdout


def test_a_second_sigterm_ends_the_doctor_at_once_without_a_traceback(tmp_path: Path) -> None:
    started_flag = tmp_path / "judging"
    body = f"open({str(started_flag)!r}, 'w').close()\nwhile True:\n    time.sleep(1)\nyield"
    env = {**os.environ, **install_plugin(tmp_path, HEADER + check_class(body))}
    argv = [sys.executable, "-m", "dflash_doctor", "--no-gpu", "--timeout", "600", "--only", "site"]
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(started_flag, proc)
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "Traceback" not in stderr
    assert len(stderr.splitlines()) <= 2, stderr
    # 143 = 128 + SIGTERM when the second signal came before the report was out, 1 when it came after.
    assert proc.returncode in (1, 128 + signal.SIGTERM), (proc.returncode, stderr)


# --------------------------------------------------------------------------------- whatever it raises


RAISING = {
    "system-exit-at-import": ("raise SystemExit(0)\n", "pass\nyield", "doctor.plugin-failed", "SystemExit"),
    "keyboard-interrupt-at-import": ("raise KeyboardInterrupt\n", "pass\nyield", "doctor.plugin-failed",
                                     "KeyboardInterrupt"),
    "system-exit-in-judge": ("", "raise SystemExit(0)\nyield", "doctor.plugin-crashed", "SystemExit"),
    "keyboard-interrupt-in-judge": ("", "raise KeyboardInterrupt\nyield", "doctor.plugin-crashed",
                                    "KeyboardInterrupt"),
    "generator-exit-in-judge": ("", "raise GeneratorExit\nyield", "doctor.plugin-crashed", "GeneratorExit"),
}


@pytest.mark.parametrize("case", sorted(RAISING))
def test_whatever_a_plugin_raises_is_an_error_finding_naming_it_and_exit_1(doctor: Doctor, tmp_path: Path,
                                                                           case: str) -> None:
    at_import, judge_body, code, exception = RAISING[case]
    env = install_plugin(tmp_path, HEADER + check_class(judge_body) + at_import)
    only = "distributions,site" if code == "doctor.plugin-crashed" else "distributions"  # no check: no layer
    report, proc = doctor.report("--no-gpu", "--only", only, env=env)
    found = finding(report, code)
    assert found["status"] == "error"
    assert "acme-guest" in found["title"] or found["evidence"].get("origin") == "acme-guest"
    assert exception in found["title"]
    assert "acme_guest:SiteCheck" in json.dumps(found)
    assert check_result(report, "distributions")["status"] in JUDGED
    assert proc.returncode == 1  # never 0 on a run whose plugin failed
    assert "Traceback" not in proc.stderr
    if code == "doctor.plugin-crashed":
        assert check_result(report, "site-guest")["status"] == "error"
    terminal = doctor("--no-gpu", "--only", only, env=env)
    assert terminal.returncode == 1 and "Traceback" not in terminal.stdout + terminal.stderr
    assert code in terminal.stdout


# ------------------------------------------------------------------------------- what it declares


INVALID = {
    "id-none": ({"check_id": "None"}, "id None"),
    "layer-none": ({"layer": "None"}, "layer None"),
    "needs-none": ({"needs": "None"}, "needs None"),
    "title-none": ({"title": "None"}, "title None"),
    "id-with-spaces": ({"check_id": "'My Check'"}, "id 'My Check'"),
    "needs-a-string": ({"needs": "'target'"}, "needs 'target'"),
    "id-reserved": ({"check_id": "'doctor'"}, "reserved"),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_a_plugin_declaring_something_unusable_is_invalid_and_list_still_works(doctor: Doctor, tmp_path: Path,
                                                                               case: str) -> None:
    declared, reason = INVALID[case]
    env = install_plugin(tmp_path, HEADER + check_class("yield Finding('site-guest.ok', Status.PASS, 'ok')", **declared))
    listed = doctor("list", env=env)
    assert listed.returncode == 0, listed.stderr
    assert "Traceback" not in listed.stderr
    assert "distributions" in listed.stdout
    (line,) = [line for line in listed.stdout.splitlines() if line.startswith("site-guest")]
    assert "(invalid, acme_guest:SiteCheck from acme-guest:" in line and reason in line
    report, proc = doctor.report("--no-gpu", "--only", "distributions", env=env)
    invalid = finding(report, "doctor.plugin-invalid")
    assert invalid["status"] == "error" and reason in invalid["title"]
    assert check_result(report, "distributions")["status"] in JUDGED
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr


def test_a_judge_returning_something_else_than_findings_is_an_invalid_plugin(doctor: Doctor, tmp_path: Path) -> None:
    env = install_plugin(tmp_path, HEADER + check_class("return ['all good', None]"))
    report, proc = doctor.report("--no-gpu", "--only", "site", env=env)
    invalid = finding(report, "doctor.plugin-invalid")
    assert "a str instead of a Finding" in invalid["title"]
    assert check_result(report, "site-guest")["status"] == "error"
    assert proc.returncode == 1


def test_a_valid_plugin_with_a_layer_of_its_own_runs_and_is_listed(doctor: Doctor, tmp_path: Path) -> None:
    body = "yield Finding('site-guest.env-kind', Status.PASS, 'env kind ' + facts['target']['env_kind'])"
    env = install_plugin(tmp_path, HEADER + check_class(body, needs="['target']"))  # a list is a set of names too
    listed = doctor("list", env=env)
    assert "[plugin: acme-guest]" in listed.stdout
    report, proc = doctor.report("--no-gpu", "--only", "site", env=env)
    assert finding(report, "site-guest.env-kind")["status"] == "pass"
    assert proc.returncode == 0, proc.stderr
    assert all(f["id"] != "doctor.plugin-invalid" for f in findings_of(report))


def test_a_plugin_whose_import_never_returns_is_a_load_error_within_the_timeout(doctor: Doctor,
                                                                               tmp_path: Path) -> None:
    env = install_plugin(tmp_path, HEADER + check_class("pass\nyield") + "while True:\n    time.sleep(1)\n")
    started = time.monotonic()
    report, proc = doctor.report("--no-gpu", "--timeout", "3", "--only", "distributions", env=env, timeout=60)
    assert time.monotonic() - started < 3 + 10
    failed = finding(report, "doctor.plugin-failed")
    assert "did not finish" in failed["title"] and "acme_guest:SiteCheck" in failed["detail"]
    assert check_result(report, "distributions")["status"] in JUDGED
    assert proc.returncode == 1 and "Traceback" not in proc.stderr


# ----------------------------------------------------------------- a guest process, not a thread


CATASTROPHIC = "import re\nre.match(r'(a+)+$', 'a' * 40 + 'b')  # holds the GIL for hours"


def _run_watched(argv: list[str], env: dict[str, str], cwd: Path, limit_s: float) -> tuple[int, str, str, float]:
    """Run the CLI, killed (and the test failed) past `limit_s`: a doctor held by a plugin must not hang the suite."""
    started = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise AssertionError(f"the doctor was still running after {limit_s:.0f} s") from None
    return proc.returncode, stdout, stderr, time.monotonic() - started


def test_a_judge_holding_the_gil_is_a_timeout_error_within_the_timeout(tmp_path: Path) -> None:
    env = {**os.environ, **install_plugin(tmp_path, HEADER + check_class(CATASTROPHIC + "\nyield"))}
    out = tmp_path / "r.json"
    argv = [sys.executable, "-m", "dflash_doctor", "--no-gpu", "--timeout", "5", "--only", "site,distributions",
            "--json", str(out)]
    code, _, stderr, took = _run_watched(argv, env, tmp_path, 5 + 40)
    assert took < 5 + 8, f"the doctor took {took:.1f} s with --timeout 5"
    report = validate_report(json.loads(out.read_text()))
    timeout = finding(report, "doctor.plugin-timeout")
    assert "acme_guest:SiteCheck" in timeout["title"] and "acme-guest" in timeout["title"]
    assert check_result(report, "site-guest")["status"] == "error"
    assert check_result(report, "distributions")["status"] in JUDGED
    assert code == 1 and "Traceback" not in stderr


def test_an_import_holding_the_gil_is_a_load_error_within_the_timeout(tmp_path: Path) -> None:
    env = {**os.environ, **install_plugin(tmp_path, HEADER + check_class("pass\nyield") + CATASTROPHIC + "\n")}
    out = tmp_path / "r.json"
    argv = [sys.executable, "-m", "dflash_doctor", "--no-gpu", "--timeout", "4", "--only", "distributions",
            "--json", str(out)]
    code, _, stderr, took = _run_watched(argv, env, tmp_path, 4 + 40)
    assert took < 4 + 8, f"the doctor took {took:.1f} s with --timeout 4"
    report = validate_report(json.loads(out.read_text()))
    failed = finding(report, "doctor.plugin-failed")
    assert "did not finish" in failed["title"] and "acme_guest:SiteCheck" in failed["detail"]
    assert check_result(report, "distributions")["status"] in JUDGED
    assert code == 1 and "Traceback" not in stderr


def _gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def test_sigterm_while_a_judge_holds_the_gil_stops_the_doctor_and_its_guest(tmp_path: Path) -> None:
    started_flag = tmp_path / "judging"
    body = f"open({str(started_flag)!r}, 'w').write(str(os.getpid()))\n{CATASTROPHIC}\nyield"
    env = {**os.environ, **install_plugin(tmp_path, HEADER + check_class(body))}
    out = tmp_path / "r.json"
    argv = [sys.executable, "-m", "dflash_doctor", "--no-gpu", "--timeout", "600", "--only", "site,distributions",
            "--json", str(out)]
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(started_flag, proc)
        time.sleep(0.3)  # well inside the regex
        stopped = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
        exit_after = time.monotonic() - stopped
    finally:
        if proc.poll() is None:
            proc.kill()
    assert exit_after < 3.0, f"exited {exit_after:.2f} s after SIGTERM"
    assert proc.returncode == 1 and "Traceback" not in stderr
    report = validate_report(json.loads(out.read_text()))
    assert report["partial"] is True
    (unjudged,) = check_result(report, "site-guest")["findings"]  # type: ignore[misc]
    assert unjudged["id"] == "doctor.incomplete" and unjudged["cause"] == "doctor.interrupted"
    assert _gone(int(started_flag.read_text()), 5), "the plugin's process outlived the doctor"


def test_sigterm_while_a_plugin_import_holds_the_gil_leaves_no_guest_behind(tmp_path: Path) -> None:
    started_flag = tmp_path / "importing"
    at_import = f"open({str(started_flag)!r}, 'w').write(str(os.getpid()))\n{CATASTROPHIC}\n"
    env = {**os.environ, **install_plugin(tmp_path, HEADER + check_class("pass\nyield") + at_import)}
    argv = [sys.executable, "-m", "dflash_doctor", "--no-gpu", "--timeout", "600", "--only", "distributions"]
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(started_flag, proc)
        stopped = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
        exit_after = time.monotonic() - stopped
    finally:
        if proc.poll() is None:
            proc.kill()
    assert exit_after < 3.0, f"exited {exit_after:.2f} s after SIGTERM"
    assert _gone(int(started_flag.read_text()), 5), "the plugin's process outlived the doctor"


GUEST_FAILURES = {
    "segfault": ("import ctypes\nctypes.string_at(0)\nyield", "killed by SIGSEGV"),
    "exits-the-process": ("os._exit(3)\nyield", "exited with code 3 without an answer"),
    "prints-forever": ("while True:\n    print('chatter ' * 100)\nyield", "wrote more than 1 MiB to stderr"),
}


@pytest.mark.parametrize("case", sorted(GUEST_FAILURES))
def test_a_judge_that_takes_its_process_down_is_a_crash_finding(tmp_path: Path, case: str) -> None:
    body, said = GUEST_FAILURES[case]
    env = {**os.environ, **install_plugin(tmp_path, HEADER + check_class(body))}
    out = tmp_path / "r.json"
    argv = [sys.executable, "-m", "dflash_doctor", "--no-gpu", "--timeout", "20", "--only", "site,distributions",
            "--json", str(out)]
    code, _, stderr, took = _run_watched(argv, env, tmp_path, 60)
    assert took < 20, f"took {took:.1f} s"
    report = validate_report(json.loads(out.read_text()))
    crashed = finding(report, "doctor.plugin-crashed")
    assert said in crashed["title"] and "acme_guest:SiteCheck" in crashed["title"]
    assert check_result(report, "distributions")["status"] in JUDGED
    assert code == 1 and "Traceback" not in stderr


def test_a_plugin_reads_the_facts_and_earlier_results_as_an_in_process_check_would(doctor: Doctor,
                                                                                  tmp_path: Path) -> None:
    body = (
        "prior = facts.prior['distributions']\n"
        "names = sorted(facts)\n"
        "yield Finding('site-guest.seen', Status.WARN, f'distributions was {prior.status.value}', 'sections ' + ','.join(names),\n"
        "              evidence={'n': len(facts['distributions']['items']), 'obj': object.__name__},\n"
        "              remediation=(Remediation('echo hi', 'because'),))\n"
    )
    source = HEADER + check_class(body, needs="frozenset({'distributions'})").replace(
        "after = frozenset()", "after = frozenset({'distributions'})")
    env = install_plugin(tmp_path, source)
    report, proc = doctor.report("--no-gpu", "--only", "site", env=env)
    seen = finding(report, "site-guest.seen")
    distributions = check_result(report, "distributions")
    assert seen["title"] == f"distributions was {distributions['status']}"
    assert seen["evidence"]["n"] == len(distributions["facts"]["distributions"]["items"])  # type: ignore[index]
    # a remediation no installer can be asked about says so (verified: not-checked), as a built-in's does
    [fix] = seen["remediation"]
    assert {k: fix[k] for k in ("command", "why")} == {"command": "echo hi", "why": "because"}
    assert fix["verified"].startswith("not-checked: not an installer command")
    assert "distributions" in seen["detail"]
    assert not [f for f in findings_of(report) if f["id"].startswith("doctor.")], proc.stderr


def test_only_a_third_party_check_runs_in_a_guest_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The built-ins judge in the doctor's process; a guest process is started only for an installed plugin."""
    from dflash_doctor import guest
    from dflash_doctor.check import Facts
    from dflash_doctor.model import Finding, Status
    from dflash_doctor.registry import load_checks

    env = install_plugin(tmp_path, HEADER + check_class("yield Finding('site-guest.ok', Status.PASS, 'ok')"))
    for entry in reversed(env["PYTHONPATH"].split(os.pathsep)):
        monkeypatch.syspath_prepend(entry)
    started: list[str] = []
    real = guest.run_guest

    def counted(request, timeout_s, stop=None):  # type: ignore[no-untyped-def]
        started.append(request["mode"])
        return real(request, timeout_s, stop)

    monkeypatch.setattr(guest, "run_guest", counted)
    builtins, errors = load_checks(autoload=False, timeout_s=30)
    assert not errors and started == []
    assert not any(isinstance(lc.check, guest.GuestCheck) for lc in builtins)
    loaded, errors = load_checks(autoload=True, timeout_s=30)
    assert not errors and started == ["declare"]
    guests = [lc for lc in loaded if isinstance(lc.check, guest.GuestCheck)]
    assert [(lc.check.id, lc.origin) for lc in guests] == [("site-guest", "acme-guest")]
    (site,) = guests
    assert list(site.check.judge(Facts({"target": {}}))) == [Finding("site-guest.ok", Status.PASS, "ok")]
    assert started == ["declare", "judge"]


def test_several_plugins_holding_the_gil_cost_one_timeout_not_one_each(tmp_path: Path) -> None:
    names = ("first", "second", "third")
    source = HEADER + "".join(check_class(CATASTROPHIC + "\nyield", name=f"Check{i}", check_id=repr(f"site-{n}"))
                              for i, n in enumerate(names))
    wheel = build_wheel(tmp_path / "wheels", "acme-hogs", "0.1", {"acme_hogs.py": source},
                        entry_points={"dflash_doctor.checks": {f"site-{n}": f"acme_hogs:Check{i}"
                                                               for i, n in enumerate(names)}})
    plugins = tmp_path / "plugins"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target",
                    str(plugins), str(wheel)], check=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugins), str(ROOT)])}
    out = tmp_path / "r.json"
    timeout = 10
    argv = [sys.executable, "-m", "dflash_doctor", "--no-gpu", "--timeout", str(timeout), "--only", "site",
            "--json", str(out)]
    code, _, stderr, took = _run_watched(argv, env, tmp_path, 3 * timeout + 60)
    assert took < 2 * timeout + 8, f"took {took:.1f} s: the three plugins were waited for one after the other"
    report = validate_report(json.loads(out.read_text()))
    assert [c["id"] for c in report["checks"]] == [f"site-{n}" for n in names]  # declared order kept
    for name in names:
        (only,) = check_result(report, f"site-{name}")["findings"]  # type: ignore[misc]
        assert only["id"] == "doctor.plugin-timeout" and f"acme_hogs:Check{names.index(name)}" in only["title"]
    assert code == 1 and "Traceback" not in stderr


def test_a_guest_runs_nothing_from_the_working_directory(tmp_path: Path) -> None:
    """The guest's interpreter starts with `-c`, which puts the working directory first on sys.path: a json.py
    there (a repository the user runs the doctor in) never runs in the guest, as it never runs in the doctor."""
    env = install_plugin(tmp_path, HEADER + check_class("yield Finding('site-guest.ok', Status.PASS, 'ok')"))
    cwd = tmp_path / "checkout"
    cwd.mkdir()
    ran = tmp_path / "ran"
    for name in ("json", "importlib", "dflash_doctor"):
        (cwd / f"{name}.py").write_text(f"open({str(ran)!r}, 'a').write({name!r} + '\\n')\n")
    # As the console script runs it: the doctor's own sys.path never holds the working directory.
    proc = subprocess.run([sys.executable, "-P", "-m", "dflash_doctor", "--no-gpu", "--only", "site", "--json", "-"],
                          cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True, timeout=120, check=False)
    assert not ran.exists(), ran.read_text()
    assert check_result(json.loads(proc.stdout), "site-guest")["status"] == "pass"
