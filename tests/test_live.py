"""`dflash-doctor live URL`: the client against replayed real answers, and the judgement of recorded runs.

fixtures/live/ holds what vLLM 0.20.1 answered on the GPU machine (scripts/engine/live_driver.py: a recording
proxy between the doctor and `vllm serve`), for toy pairs whose outcome is known from their weights
(scripts/engine/live_models.py): `accepted` (every draft token accepted), `rejected` (none), `no-spec` (no
speculative config), and the doctor's own reports of those runs. A local server replays those exchanges byte
for byte (tests/live_replay.py); nothing here is invented. The same replay breaks on purpose to test the
client: a server that hangs, one that answers garbage, a refused connection.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import finding, findings_of
from live_replay import FIXTURES, exchanges, refused_port, replay, url_of
from stacks import vllm_site

from dflash_doctor.facts.live import LiveOptions, gather

K = 15  # num_speculative_tokens of the recorded servers


def recorded_report(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.report.json").read_text())
    return data


def live_facts(report: dict[str, Any]) -> dict[str, Any]:
    facts: dict[str, Any] = next(c for c in report["checks"] if c["id"] == "live")["facts"]["live"]
    return facts


def ids(report: dict[str, Any]) -> list[str]:
    return [f["id"] for f in findings_of(report, "live")]


# --- judgement of the recorded runs ------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "code", "verdict"), [
    ("accepted", 0, "live.acceptance"),
    ("rejected", 1, "live.collapse"),
    ("no-spec", 0, "live.no-spec-metrics"),
    ("serve-exec-live.live", 0, "live.acceptance"),
    ("serve-exec-live-rejected.live", 1, "live.collapse"),
    ("rejected-vs-baseline", 1, "live.baseline-drop"),
])
def test_recorded_runs_are_judged_as_the_engine_behaved(doctor: Any, name: str, code: int, verdict: str) -> None:
    report, proc = doctor.report("judge", str(FIXTURES / f"{name}.report.json"))
    assert proc.returncode == code, proc.stderr
    assert verdict in ids(report)
    fig = finding(report, verdict)["evidence"].get("figures") or {}
    if name in ("accepted", "serve-exec-live.live"):
        # all-zero drafter == target's token: every one of the k draft tokens accepted, every position at 1.0
        assert fig["mean_acceptance_length"] == 1 + K
        assert fig["acceptance_rate"] == 1.0
        assert fig["per_position"] == [1.0] * K
    if name == "rejected-vs-baseline":
        assert "live.collapse" in ids(report)
        fig = finding(report, "live.collapse")["evidence"]["figures"]
    if name.startswith(("rejected", "serve-exec-live-rejected")):
        assert fig["mean_acceptance_length"] == 1.0 and fig["acceptance_rate"] == 0.0
        assert fig["per_position"] == [0.0] * K


def test_the_collapse_names_causes_in_order_with_the_facts_and_fixes(doctor: Any) -> None:
    # started by `serve --exec --live`: the doctor knows the command, the drafter's config and vLLM's offset rule
    report, _ = doctor.report("judge", str(FIXTURES / "serve-exec-live-rejected.live.report.json"))
    f = finding(report, "live.collapse")
    causes = {c["cause"]: c["facts"] for c in f["evidence"]["likely_causes"]}
    assert list(causes) == ["layer-ids", "quantization", "attention-backend", "long-context"]
    assert causes["layer-ids"].startswith("drafter target_layer_ids [1, 2]; vLLM 0.20.1 passes the ids as they are")
    assert "--enforce-eager (no CUDA graphs)" in causes["attention-backend"]
    commands = [r["command"] for r in f["remediation"]]
    assert commands[0].startswith("set dflash_config.target_layer_ids to [2, 3] in ")
    assert not any("--enforce-eager" in c for c in commands)  # it is in the command already
    # run by itself, `live URL` does not know the drafter, and says how to know it
    alone = finding(recorded_report("rejected"), "live.collapse")
    assert "serve --exec --live" in alone["evidence"]["likely_causes"][0]["facts"]


# --- the client against the replayed server --------------------------------------------------------------

def test_the_client_reads_the_replayed_accepted_server_as_it_read_the_real_one(doctor: Any) -> None:
    recorded = live_facts(recorded_report("accepted"))
    # the real vLLM 0.20.1 beside the doctor (on the path of the inspected interpreter, never imported)
    path = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(vllm_site("0.20.1"))) if p)
    with replay(exchanges("accepted")) as server:
        report, proc = doctor.report("live", url_of(server), env={"PYTHONPATH": path})
        seen = [(m, p) for m, p, _, _ in server.seen]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    facts = live_facts(report)
    assert facts["metric_names"]["from"] == "the installed vLLM's vllm/v1/spec_decode/metrics.py"
    assert facts["metric_names"]["names"] == recorded["metric_names"]["names"]
    assert (facts["vllm"]["version"], facts["vllm"]["layer_ids_plus_one"]) == ("0.20.1", False)
    for key in ("metrics_before", "metrics_after"):
        assert facts[key]["counters"] == recorded[key]["counters"]
    assert facts["workload"]["completion_tokens"] == recorded["workload"]["completion_tokens"]
    assert seen[:3] == [("GET", "/health"), ("GET", "/v1/models"), ("GET", "/metrics")]
    assert seen[-1] == ("GET", "/metrics") and seen.count(("POST", "/v1/completions")) == 8
    assert finding(report, "live.acceptance")["evidence"]["figures"]["mean_acceptance_length"] == 1 + K


def test_a_drop_against_a_saved_baseline_warns_with_both_figures(doctor: Any, tmp_path: Path) -> None:
    with replay(exchanges("rejected")) as server:
        report, proc = doctor.report("live", url_of(server), "--baseline", str(FIXTURES / "accepted.report.json"))
    assert proc.returncode == 1
    drop = finding(report, "live.baseline-drop")
    assert drop["status"] == "warn"
    assert "1.00 now, 16.00 in" in drop["title"]


def test_the_api_key_is_sent_and_never_shown(doctor: Any, tmp_path: Path) -> None:
    secret = "sk-live-test-7f3a9c"
    with replay(exchanges("accepted")) as server:
        proc = doctor("live", url_of(server), "--api-key-env", "T4_KEY", "--json", str(tmp_path / "r.json"),
                      "--markdown", str(tmp_path / "r.md"), "--junit", str(tmp_path / "r.xml"), "-v",
                      env={"T4_KEY": secret})
        auth = {h.get("Authorization") for _, _, h, _ in server.seen}
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert auth == {f"Bearer {secret}"}
    for text in (proc.stdout, proc.stderr, *(p.read_text() for p in tmp_path.iterdir())):
        assert secret not in text
    facts = live_facts(json.loads((tmp_path / "r.json").read_text()))
    assert facts["api_key_set"] is True
    assert facts["metric_names"]["from"] == "the names the server exposes"  # no vLLM beside the doctor here


def test_a_refused_connection_is_a_finding_not_a_traceback() -> None:
    facts = gather(LiveOptions(url=f"http://127.0.0.1:{refused_port()}", timeout_s=2.0))
    assert "connection refused" in facts["health"]["error"]
    assert "metrics_before" not in facts  # nothing else was tried


@pytest.mark.parametrize(("mode", "words", "section"), [
    ("hang", "no complete answer within 1 s", "health"),
    ("garbage", "not an HTTP answer", "health"),
    ("hang-metrics", "no complete answer within 1 s", "metrics_before"),
])
def test_a_server_that_hangs_or_answers_garbage_is_bounded(mode: str, words: str, section: str) -> None:
    with replay(exchanges("accepted"), mode) as server:
        started = time.monotonic()
        facts = gather(LiveOptions(url=url_of(server), timeout_s=1.0, budget_s=5.0, requests=2))
        took = time.monotonic() - started
    assert words in facts[section]["error"]
    assert took < 6  # every request bounded: /metrics twice at 1 s, the workload's two requests answered


def test_a_server_without_spec_decode_metrics_reads_as_none() -> None:
    with replay(exchanges("no-spec")) as server:
        facts = gather(LiveOptions(url=url_of(server), timeout_s=5.0, requests=1))
    assert facts["metrics_after"]["samples"] > 100  # a real vLLM /metrics, without the spec-decode counters
    assert not {"drafts", "draft_tokens", "accepted_tokens"} & set(facts["metrics_after"]["counters"])
    assert facts["metric_names"]["exposed"] == {}


def test_serve_exec_live_reports_a_start_that_dies_with_its_log_tail(doctor: Any, tmp_path: Path) -> None:
    proc = doctor("serve", "--only", "namespaces", "--no-color", "--json", str(tmp_path / "pre.json"), "--exec",
                  "--live", "--live-wait", "30", "--", sys.executable, "-c",
                  "import sys; print('INFO starting'); print('ValueError: the drafter is broken'); sys.exit(3)")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "pre.live.json").read_text())
    died = finding(report, "live.server-died")
    assert "ValueError: the drafter is broken" in died["detail"]
    assert died["evidence"]["server"]["exit_status"] == 3


# A server that never becomes ready: it writes its PID and that of a child it started (an engine process, in
# vLLM), then sleeps, answering nothing on any port.
NEVER_READY = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
open(sys.argv[1], "w").write(f"{child.pid}\\n")
time.sleep(600)
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] if Path(f"/proc/{pid}/stat").exists() else "X"
    return state not in ("Z", "X")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_stopping_serve_exec_live_while_it_waits_stops_the_server_it_started(tmp_path: Path, signum: int) -> None:
    pids = tmp_path / "server.pids"
    proc = subprocess.Popen([sys.executable, "-m", "dflash_doctor", "serve", "--only", "namespaces", "--no-color",
                             "--json", str(tmp_path / "pre.json"), "--exec", "--live", "--live-wait", "120", "--",
                             sys.executable, "-c", NEVER_READY, str(pids)],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            # as from a terminal: a test runner in the background has SIGINT ignored, and so would the doctor
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # noqa: PLW1509
    deadline = time.monotonic() + 60
    while not (pids.exists() and pids.read_text().endswith("\n")) and time.monotonic() < deadline:
        time.sleep(0.1)
    engine = int(pids.read_text())
    assert alive(engine)
    started = time.monotonic()
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, stderr
    assert f"stopped by {signal.Signals(signum).name} while waiting" in stderr and "was stopped" in stderr, stderr
    assert "Traceback" not in stderr and "left running" not in stderr
    assert not alive(engine), "the server's own child outlived the stop"
    assert time.monotonic() - started < 20


# A server that is up (/health answers) but never answers anything else: the live checks are under way when
# the doctor is stopped.
HEALTHY_THEN_SILENT = """
import http.server, os, sys, time
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/health":
            open(sys.argv[1], "w").write("up\\n")
            self.send_response(200)
            self.end_headers()
            return
        time.sleep(600)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[3])), Handler).serve_forever()
"""


def test_stopping_serve_exec_live_during_the_live_checks_leaves_the_ready_server_running(tmp_path: Path) -> None:
    port = refused_port()
    up = tmp_path / "up"
    proc = subprocess.Popen([sys.executable, "-m", "dflash_doctor", "serve", "--only", "namespaces", "--no-color",
                             "--json", str(tmp_path / "pre.json"), "--exec", "--live", "--live-wait", "120", "--",
                             sys.executable, "-c", HEALTHY_THEN_SILENT, str(up), "--port", str(port)],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not up.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.5)  # the live checks are waiting on /v1/models
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    server = int(stderr.split("as PID ", 1)[1].split()[0])
    try:
        assert "the server is left running: PID" in stderr, stderr
        assert alive(server), "a stop during the live checks killed the server it promised to leave running"
    finally:
        os.killpg(server, signal.SIGKILL)


@pytest.mark.parametrize("argv", [
    ["live", "ftp://example.invalid"],
    ["live", "http://127.0.0.1:1", "--requests", "0"],
    ["live", "http://127.0.0.1:1", "--prompts", "/nonexistent/prompts.txt"],
    ["live", "http://127.0.0.1:1", "--baseline", str(FIXTURES / "accepted.exchanges.json")],
    ["serve", "--live", "--", "vllm", "serve", "m"],
    ["serve", "--exec", "--live", "--json", "-", "--", "vllm", "serve", "m"],
    ["serve", "--exec", "--live", "--markdown", "-", "--", "vllm", "serve", "m"],
    ["serve", "--exec", "--live", "--", "vllm", "serve", "m", "--port", "abc"],  # checked before anything runs
    ["serve", "--exec", "--live", "--", "vllm", "serve", "m", "--port", "99999"],
])
def test_wrong_command_lines_exit_2(doctor: Any, argv: list[str]) -> None:
    proc = doctor(*argv)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
