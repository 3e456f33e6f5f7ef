"""`dflash-doctor live URL`: the client against replayed real answers, and the judgement of recorded runs.

fixtures/live/ holds what vLLM 0.20.1 answered on the GPU machine (recording/engine/live_driver.py: a recording
proxy between the doctor and `vllm serve`), for toy pairs whose outcome is known from their weights
(recording/engine/live_models.py): `accepted` (every draft token accepted), `rejected` (none), `no-spec` (no
speculative config), and the doctor's own reports of those runs. A local server replays those exchanges byte
for byte (tests/live_replay.py); nothing here is invented. The same replay breaks on purpose to test the
client: a server that hangs, one that answers garbage, a refused connection.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import finding, findings_of
from live_replay import (
    FIXTURES,
    dripping,
    edited,
    exchanges,
    refused_port,
    replay,
    url_of,
    with_json,
    with_sample,
)
from stacks import vllm_site
from test_fact_shapes import assert_has_its_shape

from dflash_doctor.check import Facts
from dflash_doctor.checks.live import LiveCheck
from dflash_doctor.facts.live.live import LiveOptions, gather, get
from dflash_doctor.model import Finding
from dflash_doctor.report import document as report_module

K = 15  # num_speculative_tokens of the recorded servers


def recorded_report(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.report.json").read_text())
    return data


def live_facts(report: dict[str, Any]) -> dict[str, Any]:
    facts: dict[str, Any] = next(c for c in report["checks"] if c["id"] == "live")["facts"]["live"]
    return facts


def ids(report: dict[str, Any]) -> list[str]:
    return [f["id"] for f in findings_of(report, "live")]


def judged(facts: dict[str, Any]) -> dict[str, Finding]:
    """The live check's findings on facts gathered in this process, by id."""
    return {f.id: f for f in LiveCheck().judge(Facts({"live": {"given": True, **facts}}))}


def strict_json(text: str) -> Any:
    """JSON as RFC 8259 has it: NaN, Infinity and -Infinity are not JSON."""
    def refuse(word: str) -> Any:
        raise ValueError(f"{word} is not JSON")
    return json.loads(text, parse_constant=refuse)


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


# --- what the server says is data, never a reason to read a local file or to wait ---------------------------

def test_a_root_path_the_server_names_is_never_opened(tmp_path: Path) -> None:
    # a directory of this machine with a config.json, named as the served model's root by a (rejected) server
    local = tmp_path / "someone-elses-model"
    local.mkdir()
    (local / "config.json").write_text(json.dumps({"num_hidden_layers": 4242,
                                                   "quantization_config": {"quant_method": "read-from-local-disk"}}))

    def rooted(_: int, body: bytes) -> bytes:
        return with_json(body, lambda d: d["data"][0].update(root=str(local)))

    with replay(edited("rejected", "/v1/models", rooted)) as server:
        facts = gather(LiveOptions(url=url_of(server), timeout_s=5.0, requests=2))
    assert facts["models"]["data"][0]["root"] == str(local)  # what the server said is a fact...
    assert facts["context"]["target"] is None  # ...and was not followed
    collapse = judged(facts)["live.collapse"]  # whose causes name what the doctor knows
    for text in (json.dumps(facts), json.dumps(collapse.evidence), collapse.detail):
        assert "4242" not in text and "read-from-local-disk" not in text


@pytest.mark.parametrize("what", ["headers", "chunk-size"])
def test_a_server_that_drips_its_answer_is_bounded_by_the_request_timeout(what: str) -> None:
    # a byte every second answers every socket read in time: only a deadline on the whole request ends it
    with dripping(what, every_s=1.0) as url:
        started = time.monotonic()
        answer = get(url, "/health", None, 2.0)
        took = time.monotonic() - started
    assert answer.error == "no complete answer within 2 s"
    assert took < 4  # without the deadline: until the server gives up dripping, 45 s


def test_live_against_a_dripping_server_ends_within_the_request_timeout(doctor: Any) -> None:
    with dripping("headers", every_s=2.0) as url:
        started = time.monotonic()
        report, proc = doctor.report("live", url, "--request-timeout", "5", timeout=60)
        took = time.monotonic() - started
    assert proc.returncode == 1, proc.stderr
    assert finding(report, "live.unreachable")["title"].endswith("/health: no complete answer within 5 s")
    assert took < 5 + 15  # the request's 5 s and the doctor's start on a busy machine (without the deadline: 45 s)


# --- counters that are not counts, or that go backwards ----------------------------------------------------

DRAFTS = "vllm:spec_decode_num_drafts_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"


def test_nan_and_inf_counters_fail_and_the_report_is_strict_json(doctor: Any, tmp_path: Path) -> None:
    def broken(i: int, body: bytes) -> bytes:  # the real /metrics after the workload, two counters broken
        return with_sample(with_sample(body, DRAFTS, "NaN"), ACCEPTED, "+Inf") if i == 1 else body

    out = tmp_path / "nan.json"
    with replay(edited("accepted", "/metrics", broken)) as server:
        proc = doctor("live", url_of(server), "--json", str(out))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = strict_json(out.read_text())
    bad = finding(report, "live.counters-invalid")
    assert bad["status"] == "fail"
    assert "drafts (after) = NaN" in bad["title"] and "accepted_tokens (after) = +Inf" in bad["title"]
    assert "live.acceptance" not in ids(report)
    again = report_module.load(str(out))  # as `judge` reads it back: it refused the NaN before
    assert "live.counters-invalid" in ids(again)


def test_counters_that_go_backwards_warn_and_give_no_figures() -> None:
    def restarted(i: int, body: bytes) -> bytes:  # before the workload: higher than the recorded after
        return with_sample(body, DRAFTS, "1000.0") if i == 0 else body

    with replay(edited("accepted", "/metrics", restarted)) as server:
        facts = gather(LiveOptions(url=url_of(server), timeout_s=5.0, requests=2))
    assert_has_its_shape("live", {"given": True, **facts}, "counters that went backwards")
    found = judged(facts)
    back = found["live.counters-backwards"]
    assert back.status.value == "warn"
    assert "drafts 1000 -> 32" in back.title
    assert not {"live.acceptance", "live.collapse", "live.acceptance-low"} & set(found)
    assert "mean_acceptance_length" not in back.evidence["figures"]


def test_the_json_writer_writes_null_for_a_float_that_is_not_finite(tmp_path: Path) -> None:
    from dflash_doctor.render import json_report

    json_report.write({"checks": [{"evidence": {"ratio": float("nan"), "rates": [1.5, float("-inf")]}}]},
                      str(tmp_path / "r.json"))
    assert strict_json((tmp_path / "r.json").read_text()) == {"checks": [{"evidence": {"ratio": None,
                                                                                       "rates": [1.5, None]}}]}


# --- wrong types in the server's answers --------------------------------------------------------------------

def test_wrong_types_in_models_and_usage_are_named_not_a_crash() -> None:
    def models(_: int, body: bytes) -> bytes:
        def change(d: Any) -> None:
            d["data"][0].update(root=["/", "etc"], max_model_len="4096")
            d["data"].insert(0, {"id": 7})
        return with_json(body, change)

    def usage(i: int, body: bytes) -> bytes:
        return with_json(body, lambda d: d["usage"].update(completion_tokens="64", prompt_tokens=[5]))

    recorded = edited("accepted", "/v1/models", models)
    with replay([ex for ex in recorded if ex["path"] != "/v1/completions"] +
                edited("accepted", "/v1/completions", usage)) as server:
        facts = gather(LiveOptions(url=url_of(server), timeout_s=5.0, requests=2))
    assert_has_its_shape("live", {"given": True, **facts}, "answers of the wrong type")
    fields = {m["field"]: m for m in facts["malformed"]}
    assert set(fields) == {"data[0].id", "data[1].root", "data[1].max_model_len", "usage.completion_tokens",
                           "usage.prompt_tokens"}
    assert fields["data[1].root"]["found"] == "a list"
    assert fields["usage.completion_tokens"]["found"] == "a string ('64')"
    assert fields["usage.completion_tokens"]["times"] == 2
    assert facts["workload"]["ok"] == 2  # the model with a string id was used
    found = judged(facts)
    malformed = found["live.answer-malformed"]
    assert malformed.status.value == "warn"
    assert "GET /v1/models data[1].root: a list, not a string or null" in malformed.title
    assert "POST /v1/completions usage.prompt_tokens: a list, not a whole number" in malformed.title
    assert "live.acceptance" in found  # the counters still say what they say


# --- mutated workload and baseline files: a usage error or a verdict, never a traceback ---------------------

def _mutants(text: str, rng: random.Random, count: int) -> list[str]:
    """Mutants of a JSON document: truncated, a value swapped for one of another type, a huge number, a deep
    nesting, a key dropped."""
    odd: list[Any] = [None, True, -1, 0, 2.5, 1e308, -1e308, "", "x", "\u0663", [], {}, [1, "a"], {"0": "x"},
                      2**63, -(2**63)]
    out = []
    for _ in range(count):
        kind = rng.choice(("truncate", "swap", "swap", "swap", "huge", "deep", "drop"))
        if kind == "truncate":
            out.append(text[:rng.randrange(len(text))])
            continue
        copy = json.loads(text)
        paths: list[tuple[Any, Any]] = []
        stack: list[Any] = [copy]
        while stack:
            node = stack.pop()
            keys = list(node) if isinstance(node, dict) else range(len(node)) if isinstance(node, list) else []
            for key in keys:
                paths.append((node, key))
                stack.append(node[key])
        if not paths:
            out.append(json.dumps(rng.choice(odd)))
            continue
        node, key = rng.choice(paths)
        marker = "\x00MARK\x00"
        if kind == "drop" and isinstance(node, dict):
            del node[key]
        elif kind == "huge" or kind == "deep":
            node[key] = marker
        else:
            node[key] = rng.choice(odd)
        dumped = json.dumps(copy)
        if kind == "huge":
            dumped = dumped.replace(json.dumps(marker), rng.choice(("1" + "0" * 5000, "1e999", "-1e999", "9" * 400)))
        elif kind == "deep":
            depth = rng.choice((70, 2000, 100_000))
            dumped = dumped.replace(json.dumps(marker), "[" * depth + "1" + "]" * depth)
        out.append(dumped)
    return out


def _with_live_facts(report_text: str, live_text: str) -> str:
    """The report with its live facts' JSON text replaced by `live_text` (which may be broken JSON)."""
    report = json.loads(report_text)
    for check in report["checks"]:
        if check["id"] == "live":
            check["facts"]["live"] = "\x00LIVE\x00"
    return json.dumps(report).replace(json.dumps("\x00LIVE\x00"), live_text)


def test_mutated_baseline_and_prompts_files_give_usage_errors_or_verdicts_never_tracebacks(tmp_path: Path) -> None:
    from dflash_doctor.commands.live import live_options, parser
    from dflash_doctor.commands.options import UsageError
    from dflash_doctor.model import exit_code
    from dflash_doctor.runner import judge_one

    rng = random.Random(20)
    rejected = live_facts(recorded_report("rejected"))
    baseline_text = (FIXTURES / "accepted.report.json").read_text()
    prompts_text = json.dumps(["The capital of France is", "def f(n):", "1, 2, 3,"])
    live_text = json.dumps(live_facts(json.loads(baseline_text)))
    cases = [("--baseline", m) for m in _mutants(baseline_text, rng, 100)]
    cases += [("--baseline", _with_live_facts(baseline_text, m)) for m in _mutants(live_text, rng, 160)]
    cases += [("--prompts", m) for m in _mutants(prompts_text, rng, 100)]
    codes: dict[int, int] = {}
    for i, (option, text) in enumerate(cases):
        path = tmp_path / f"mutant-{i}.json"
        path.write_text(text)
        args = parser().parse_args(["http://127.0.0.1:1", option, str(path)])
        try:
            options = live_options(args, args.url)
        except UsageError as exc:
            assert str(path) in str(exc) or option in str(exc)
            codes[2] = codes.get(2, 0) + 1
            continue
        facts = {**rejected, "baseline": options.baseline} if options.baseline else rejected
        if options.baseline and isinstance(options.baseline.get("digest"), str):
            facts = {**facts, "workload": {**facts["workload"], "digest": options.baseline["digest"]}}
        result = judge_one(LiveCheck(), Facts({"live": facts}))
        assert not [f for f in result.findings if f.id.startswith("doctor.")], (option, text[:300], result.findings)
        code = exit_code([result])
        codes[code] = codes.get(code, 0) + 1
    assert set(codes) <= {0, 1, 2} and codes.get(2) and codes.get(1), codes


def test_a_saved_live_report_with_mutated_facts_is_judged_never_a_crashed_check() -> None:
    from dflash_doctor.documents.jsondoc import DocumentError, parse_json
    from dflash_doctor.runner import judge_one

    rng = random.Random(21)
    judged_ids: set[str] = set()
    for text in _mutants(json.dumps(live_facts(recorded_report("rejected"))), rng, 300):
        try:
            facts = parse_json(text)  # as `judge` reads a report: what it refuses never reaches the check
        except DocumentError:
            continue
        result = judge_one(LiveCheck(), Facts({"live": facts}))
        assert "doctor.check-crashed" not in {f.id for f in result.findings}, (text[:300], result.findings)
        judged_ids.update(f.id for f in result.findings)
    # a field of the wrong shape is named (doctor.facts-unavailable); content of the wrong type is judged
    assert {"live.collapse", "doctor.facts-unavailable"} <= judged_ids


def test_a_drafter_config_with_a_huge_layer_id_list_puts_only_its_head_and_count_into_the_live_facts(
        tmp_path: Path) -> None:
    from dflash_doctor.facts.live.live import MAX_IDS, _config

    drafter = tmp_path / "drafter"
    drafter.mkdir()
    (drafter / "config.json").write_text(json.dumps(
        {"dflash_config": {"target_layer_ids": list(range(200_000))},
         "quantization_config": {"quant_method": "fp8", "ignored_layers": [f"layer.{i}" for i in range(20_000)]}}))
    facts = _config(str(drafter))
    assert facts is not None
    assert facts["target_layer_ids"] == list(range(MAX_IDS)) and facts["target_layer_ids_count"] == 200_000
    assert facts["quantization_config"] == {"quant_method": "fp8"}
    assert len(json.dumps(facts)) < 10_000
