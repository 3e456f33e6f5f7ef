"""The bug-ticket report: Markdown to paste, redaction of every output, the environment fingerprint, and a
partial report when the doctor itself is stopped mid-run.

Everything runs the real CLI on real venvs (flash-attn-4 from PyPI; hand-built wheels installed by pip).
Secrets, a home directory, a user name, this machine's host name and IP addresses are planted through the
environment the doctor and its target interpreter see; none may come out of any output.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import Doctor, finding, validate_report
from realenv import HANG_ON_IMPORT, Env, build_wheel, fa4_wheel, install, make_venv, uninstall

from dflash_doctor.check import Check
from dflash_doctor.model import Finding

TOKENS = {
    "HF_TOKEN": "hf_" + "Zq8" * 12,
    "OPENAI_API_KEY": "sk-proj-" + "Xk2" * 8,
    "VLLM_API_KEY": "plainsecretvalue4711",  # no token shape: only its name gives it away
    "VLLM_GH_MIRROR": "ghp_" + "M3n" * 8,  # an allow-listed name with a token-shaped value
    "VLLM_EXTRA_HEADERS": "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9abcdefghijklmnop",
    "VLLM_PLUGIN_INDEX": "https://builder:s3cretpw9@pypi.internal.example/simple",
}
USER = "dfuser7q"
IPV4 = "10.20.30.40"
IPV6 = "fd12:3456:789a::42"


@pytest.fixture(scope="module")
def fa4_env(tmp_path_factory: pytest.TempPathFactory) -> Env:
    env = make_venv(tmp_path_factory.mktemp("fa4"))
    install(env, fa4_wheel())
    return env


def read_all(*paths: Path) -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in paths if p.exists())


# ----------------------------------------------------------------------------------------------- Markdown


def test_markdown_report_has_the_table_the_failures_with_fixes_and_facts_in_details(
        doctor: Doctor, fa4_env: Env, tmp_path: Path) -> None:
    path = tmp_path / "ticket.md"
    report, proc = doctor.report("--python", str(fa4_env.python), "--no-gpu", "--markdown", str(path))
    text = path.read_text()
    assert text.startswith("### dflash-doctor: FAIL (exit 1)\n")
    assert f"environment fingerprint `{report['fingerprint']['id']}`" in text
    assert "| check | layer | status | finding |" in text
    for check in report["checks"]:
        assert f"| {check['title']} | {check['layer']} |" in text
    failing = finding(report, "distributions.requirement-missing")
    assert f"#### ❌ fail {failing['title']}" in text
    for step in failing["remediation"]:
        assert f"```console\n{step['command']}\n```" in text
    warned = finding(report, "namespaces.v4-without-v2")
    assert warned["title"] in text
    assert "<details>\n<summary><code>distributions</code>" in text and text.count("</details>") >= 3
    assert len(text) < 65_536  # GitHub's limit for an issue body
    assert proc.returncode == 1


def test_ticket_profile_writes_both_files_in_the_working_directory(doctor: Doctor, fa4_env: Env, tmp_path: Path) -> None:
    proc = doctor("--python", str(fa4_env.python), "--profile", "ticket", "--no-gpu", cwd=tmp_path)
    assert proc.returncode == 1
    report = validate_report(json.loads((tmp_path / "dflash-doctor-report.json").read_text()))
    assert (tmp_path / "dflash-doctor-report.md").read_text().startswith("### dflash-doctor: FAIL")
    assert report["options"]["profile"] == "ticket"
    # It says where they went: the profile chose the names, the user did not type them.
    assert f"dflash-doctor: JSON report written to {tmp_path / 'dflash-doctor-report.json'}\n" in proc.stderr
    assert f"dflash-doctor: Markdown report written to {tmp_path / 'dflash-doctor-report.md'}\n" in proc.stderr


# ----------------------------------------------------------------------------------------------- redaction


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Env, dict[str, str]]:
    """A venv inside a planted home directory, and an environment carrying every kind of secret."""
    home = tmp_path_factory.mktemp("redact") / "home" / USER
    env = make_venv(home / "envs", name="serving")
    install(env, fa4_wheel())
    hostname = socket.gethostname()
    variables = {**TOKENS, "HOME": str(home), "USER": USER, "LOGNAME": USER,
                 "VLLM_HOST_IP": IPV4, "VLLM_HOST_IPV6": IPV6, "CUDA_HOME": f"/opt/{hostname}/cuda-12.8"}
    return env, variables


def secrets_of(variables: dict[str, str]) -> list[str]:
    return [*TOKENS.values(), "s3cretpw9", "pypi.internal.example", variables["HOME"], USER]


def hosts_of(variables: dict[str, str]) -> list[str]:
    return [IPV4, IPV6, variables["CUDA_HOME"]]


def run_every_output(doctor: Doctor, env: Env, variables: dict[str, str], out: Path, *extra: str) -> str:
    out.mkdir()
    files = {"json": out / "r.json", "junit": out / "r.xml", "markdown": out / "r.md"}
    first = doctor("--python", str(env.python), "--no-gpu", "-v", *extra, *(a for k, p in files.items() for a in (f"--{k}", str(p))),
                   env=variables)
    summary = out / "summary.md"
    second = doctor("--python", str(env.python), "--no-gpu", "--format", "github", *extra,
                    env={**variables, "GITHUB_STEP_SUMMARY": str(summary)})
    judged = doctor("judge", str(files["json"]), "-v", *extra, env=variables)
    for proc in (first, second, judged):
        assert "Traceback" not in proc.stderr, proc.stderr
    validate_report(json.loads(files["json"].read_text()))
    return "\n".join([first.stdout, first.stderr, second.stdout, second.stderr, judged.stdout, judged.stderr,
                      read_all(*files.values(), summary)])


def test_every_planted_secret_home_user_host_and_address_is_absent_from_every_output(
        doctor: Doctor, planted: tuple[Env, dict[str, str]], tmp_path: Path) -> None:
    env, variables = planted
    text = run_every_output(doctor, env, variables, tmp_path / "out")
    for value in [*secrets_of(variables), *hosts_of(variables)]:
        assert value not in text, f"{value!r} leaked"
    report = json.loads((tmp_path / "out" / "r.json").read_text())
    target = report["checks"][0]["facts"]["target"]
    # What stays is what a maintainer needs: names of the variables, paths relative to home, redacted values.
    assert {"HF_TOKEN", "OPENAI_API_KEY", "VLLM_API_KEY", "VLLM_HOST_IP"} <= set(target["environ"]["names"])
    assert target["executable"].startswith("~/envs/serving/")
    assert target["environ"]["values"]["VLLM_HOST_IP"] == "<ip>"
    assert target["environ"]["values"]["CUDA_HOME"].startswith("/opt/host-")
    assert report["host"]["name"].startswith("host-") and report["redaction"] == {"enabled": True, "keep_hosts": False}


def test_keep_hosts_keeps_addresses_and_host_names_but_never_secrets(
        doctor: Doctor, planted: tuple[Env, dict[str, str]], tmp_path: Path) -> None:
    env, variables = planted
    text = run_every_output(doctor, env, variables, tmp_path / "out", "--keep-hosts")
    for value in secrets_of(variables):
        assert value not in text, f"{value!r} leaked"
    for value in hosts_of(variables):
        assert value in text


def test_redaction_of_strings_wherever_they_occur() -> None:
    from dflash_doctor.report.redact import Redactor

    r = Redactor(homes=("/home/alice",), user="alice", hosts=("gpu-17.corp.example", "gpu-17"))
    cases = {
        "vllm serve m --api-key sk-abcdefghijklmnop1234 --port 8000": "vllm serve m --api-key <redacted> --port 8000",
        "HF_TOKEN=abc123 vllm serve": "HF_TOKEN=<redacted> vllm serve",
        "pip install -i https://u:pw@pypi.corp.example/simple x": "pip install -i https://<redacted>@<host>/simple x",
        "/home/alice/.cache/huggingface": "~/.cache/huggingface",
        "/home/bob/miniconda3/bin/python": "/home/<user>/miniconda3/bin/python",
        "/data/alice/models": "/data/<user>/models",
        "ray://10.1.2.3:10001": "ray://<host>:10001",
        "NCCL on gpu-17.corp.example:29500 and gpu-17": "NCCL on host-"
        f"{__import__('hashlib').sha256(b'gpu-17.corp.example').hexdigest()[:8]}:29500 and host-"
        f"{__import__('hashlib').sha256(b'gpu-17').hexdigest()[:8]}",
        # Not secrets, not hosts: kept as they are.
        "KeyError: 'tokenizer'": "KeyError: 'tokenizer'",
        "nvidia-curand-cu12==10.3.9.90": "nvidia-curand-cu12==10.3.9.90",
        "nvidia_curand_cu12-10.3.9.90.dist-info": "nvidia_curand_cu12-10.3.9.90.dist-info",
        "at::Tensor c10::cuda::getCurrentCUDAStream at 12:34:56": "at::Tensor c10::cuda::getCurrentCUDAStream at 12:34:56",
        "https://download.pytorch.org/whl/cu128": "https://download.pytorch.org/whl/cu128",
        "bound to 127.0.0.1 and 0.0.0.0": "bound to 127.0.0.1 and 0.0.0.0",
    }
    for raw, expected in cases.items():
        assert r.text(raw) == expected, raw


def test_a_fix_s_changes_keep_four_part_versions_and_still_lose_host_names() -> None:
    from dflash_doctor.report.redact import Redactor

    r = Redactor(homes=("/home/alice",), user="alice", hosts=("gpu-17.corp.example", "gpu-17"))
    step = {"command": "pip install x", "verified": "resolves",
            "changes": ["install nvidia-cudnn-cu12 9.1.0.70 (wheel)", "upgrade nvidia-nccl-cu12 2.21.5.1 -> 2.26.2.1 (wheel)",
                        "/mnt/gpu-17/env/lib/python3.11/site-packages/flash_attn/ goes"]}
    got = r.tree({"remediation": [step], "detail": "peer 10.1.2.3 answered"})
    assert got["remediation"][0]["changes"][:2] == step["changes"][:2]
    assert "gpu-17" not in got["remediation"][0]["changes"][2] and "/mnt/host-" in got["remediation"][0]["changes"][2]
    assert got["detail"] == "peer <ip> answered"


def test_secret_flags_of_a_serve_command_are_redacted_in_both_forms_in_every_output(doctor: Doctor,
                                                                                      tmp_path: Path) -> None:
    secrets = {"--api-key": "plainkey4711value", "--hf-token": "tokvalue0815plain", "--db-password": "pw-plain-9"}
    command = ["vllm", "serve", "/models/none", "--api-key", secrets["--api-key"],
               f"--hf-token={secrets['--hf-token']}", "--db-password", secrets["--db-password"],
               "--ssl-keyfile", "/etc/ssl/serving-key.pem", "--max-num-batched-tokens", "8192"]
    saved, markdown = tmp_path / "r.json", tmp_path / "r.md"
    run = doctor("serve", "--no-gpu", "-v", "--only", "serve-command", "--no-vllm-parser", "--json", str(saved),
                 "--markdown", str(markdown), "--", *command)
    judged = doctor("judge", str(saved), "-v")
    judged_json = doctor("judge", str(saved), "--json", "-")
    text = run.stdout + run.stderr + saved.read_text() + markdown.read_text() + judged.stdout + judged.stderr \
        + judged_json.stdout
    for value in secrets.values():
        assert value not in text, f"{value!r} leaked"
    argv = json.loads(saved.read_text())["checks"][0]["facts"]["serve_args"]["argv"]
    assert argv[3:9] == ["--api-key", "<redacted>", "--hf-token=<redacted>", "--db-password", "<redacted>",
                         "--ssl-keyfile"]
    assert "/etc/ssl/serving-key.pem" in argv  # a key file's path is not the key: kept, it helps the diagnosis
    assert "8192" in argv


def _parent_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])  # the field after the command name, which may hold spaces


def _descends_from(pid: int, ancestor: int) -> bool:
    for _ in range(64):
        if pid == ancestor:
            return True
        parent = _parent_of(pid)
        if parent is None or parent <= 1:
            return False
        pid = parent
    return False


def test_a_serve_command_s_key_never_shows_in_any_process_s_command_line(tmp_path: Path) -> None:
    """The vLLM-parser probe gets the serve command on stdin: a command line is readable by every user of the
    box (`ps`, /proc/PID/cmdline). A `vllm` whose import takes 3 s holds the probe up while /proc is read.

    Only the doctor's own process tree is read (the key is this run's own, so no other process could show
    it anyway), and a child that still shows the doctor's own command line is the doctor between fork and
    exec (on a loaded machine that moment is long enough to be seen): that is the user's own command line, as
    public as their `vllm serve`, not a command line the doctor wrote."""
    site = tmp_path / "site"
    (site / "vllm").mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text("import time\ntime.sleep(3)\n__version__ = '0.20.1'\n")
    key = f"plainkey{os.getpid()}x{time.monotonic_ns()}"  # this run's own: another run of this test shows its own
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    argv = [sys.executable, "-m", "dflash_doctor", "serve", "--no-gpu", "--only", "serve-command",
            "--json", str(tmp_path / "r.json"), "--", "vllm", "serve", "/models/none", "--api-key", key]
    users_own = b"".join(word.encode() + b"\0" for word in argv)  # as /proc/PID/cmdline holds it
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seen: set[str] = set()
    probes_seen = 0
    while proc.poll() is None:
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            pid = int(cmdline.parent.name)
            if pid == proc.pid or not _descends_from(pid, proc.pid):
                continue
            try:
                raw = cmdline.read_bytes()
            except OSError:
                continue
            if raw == users_own:
                continue  # the doctor forked, not yet exec'd: its own command line still shows
            words = raw.decode("utf-8", "replace").split("\0")
            # the probe itself, or the run's one target process it is forked from (target_process.py: same command line)
            if any("vllm_args" in w or "make_arg_parser" in w or "PRELOAD_IF_FOUND" in w for w in words):
                probes_seen += 1
            seen.update(w for w in words if key in w)
        time.sleep(0.05)
    proc.communicate()
    assert probes_seen, "the vLLM-parser probe was never seen running"
    facts = json.loads((tmp_path / "r.json").read_text())["checks"][0]["facts"]
    assert facts["serve_args"]["argv"][-2:] == ["--api-key", "<redacted>"]
    assert not seen, seen


# ----------------------------------------------------------------------------------------------- fingerprint


def test_fingerprint_is_stable_across_runs_and_printed_in_every_output(doctor: Doctor, fa4_env: Env, tmp_path: Path) -> None:
    first, _ = doctor.report("--python", str(fa4_env.python), "--no-gpu")
    second, _ = doctor.report("--python", str(fa4_env.python), "--no-gpu", "--skip", "import-surface")
    fingerprint = first["fingerprint"]["id"]
    assert fingerprint == second["fingerprint"]["id"]
    assert first["fingerprint"]["inputs"]["stack"] == {"flash-attn-4": "4.0.0b36"}
    assert first["fingerprint"]["inputs"]["compute_capabilities"] is None  # --no-gpu: not collected
    md, xml = tmp_path / "r.md", tmp_path / "r.xml"
    terminal = doctor("--python", str(fa4_env.python), "--no-gpu", "--markdown", str(md), "--junit", str(xml))
    github = doctor("--python", str(fa4_env.python), "--no-gpu", "--format", "github")
    assert f"environment fingerprint: {fingerprint}" in terminal.stdout
    assert f"fingerprint {fingerprint}" in github.stdout
    assert fingerprint in md.read_text() and f'value="{fingerprint}"' in xml.read_text()


def test_fingerprint_reads_the_driver_and_compute_capabilities_of_real_nvml_facts() -> None:
    from dflash_doctor.facts.fingerprint import of_sections

    h200 = json.loads((Path(__file__).parent / "fixtures" / "baseline" / "nvml_h200.json").read_text())
    with_gpu = of_sections({"gpu": h200})
    assert with_gpu["inputs"]["driver"] == {"version": "580.159.04", "cuda": "13.0"}
    assert with_gpu["inputs"]["compute_capabilities"] == ["9.0"]
    assert with_gpu["id"] != of_sections({})["id"]
    failed = of_sections({"gpu": {"_error": "collector crashed"}})  # a failed collection reads as not collected
    assert failed["inputs"]["driver"] is None and failed["id"] == of_sections({})["id"]


def test_fingerprint_changes_when_a_stack_version_changes(doctor: Doctor, tmp_path: Path) -> None:
    env = make_venv(tmp_path)
    install(env, fa4_wheel())
    before, _ = doctor.report("--python", str(env.python), "--no-gpu")
    uninstall(env, "flash-attn-4")
    install(env, build_wheel(tmp_path / "wheels", "flash-attn-4", "4.0.0b37", {"flash_attn/cute/__init__.py": ""}))
    after, _ = doctor.report("--python", str(env.python), "--no-gpu")
    assert after["fingerprint"]["inputs"]["stack"] == {"flash-attn-4": "4.0.0b37"}
    assert after["fingerprint"]["id"] != before["fingerprint"]["id"]
    # Everything else about the environment is the same.
    assert {k: v for k, v in after["fingerprint"]["inputs"].items() if k != "stack"} == \
        {k: v for k, v in before["fingerprint"]["inputs"].items() if k != "stack"}


# ----------------------------------------------------------------------------------------------- partial


def _probe_processes(python: Path) -> list[int]:
    """Running probes of the import kind in `python`: an interpreter started for one (the try_import
    probe's source is on its command line), or a job forked by the run's target process (a child of
    that process, whose source is on both command lines)."""
    cmdlines: dict[int, str] = {}
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdlines[int(entry.name)] = (entry / "cmdline").read_bytes().decode(errors="replace")
            status = (entry / "status").read_text()
            parents[int(entry.name)] = int(status.split("PPid:", 1)[1].split()[0])
        except (OSError, IndexError, ValueError):
            continue
    ours = {pid for pid, cmd in cmdlines.items() if cmd.startswith(str(python))}
    alone = [pid for pid in ours if "Performs one import exactly" in cmdlines[pid]]
    shared = {pid for pid in ours if "The target process: runs inside the TARGET" in cmdlines[pid]}
    forked = [pid for pid in shared if parents.get(pid) in shared]
    return alone + forked


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_stopped_mid_run_the_doctor_still_writes_a_partial_report(tmp_path: Path, signum: int) -> None:
    env = make_venv(tmp_path)
    # flash_attn whose import never returns: the rotary-import probe hangs in it.
    install(env, build_wheel(tmp_path / "wheels", "flash-attn", "2.8.3", {"flash_attn/__init__.py": HANG_ON_IMPORT}))
    out = {"json": tmp_path / "r.json", "junit": tmp_path / "r.xml", "markdown": tmp_path / "r.md"}
    argv = [sys.executable, "-m", "dflash_doctor", "--python", str(env.python), "--no-gpu", "--timeout", "120",
            *(a for k, p in out.items() for a in (f"--{k}", str(p)))]
    # As from a terminal: a test runner started in the background (as CI may be) inherits SIGINT ignored,
    # and Python then rightly leaves it ignored; Ctrl-C in a terminal reaches a process that handles it.
    proc = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 60
        while not _probe_processes(env.python):
            assert proc.poll() is None and time.monotonic() < deadline, "the import probe never started"
            time.sleep(0.1)
        time.sleep(0.5)
        stopped = time.monotonic()
        proc.send_signal(signum)
        stdout, stderr = proc.communicate(timeout=30)
        exit_after = time.monotonic() - stopped
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, stderr
    assert exit_after < 10
    assert "Traceback" not in stderr
    assert not _probe_processes(env.python)  # the hung probe was ended with the doctor
    report = validate_report(json.loads(out["json"].read_text()))
    assert report["partial"] is True and report["summary"]["exit_code"] == 1
    stop = finding(report, "doctor.interrupted")
    name = signal.Signals(signum).name
    assert f"stopped by {name}" in stop["title"]
    statuses = {c["id"]: c["status"] for c in report["checks"]}
    assert statuses["distributions"] in ("pass", "warn", "fail")  # judged: its facts were in
    imports = next(c for c in report["checks"] if c["id"] == "imports")
    assert [f["id"] for f in imports["findings"]] == ["doctor.incomplete"]
    assert "rotary_import" in imports["findings"][0]["detail"]
    assert "PARTIAL" in out["junit"].read_text() and "Partial report" in out["markdown"].read_text()
    assert "PARTIAL report" in stdout


def _exiting_collector(_ctx: object, _earlier: object) -> dict[str, object]:
    raise SystemExit("a plugin called sys.exit()")  # not an Exception: the runner does not catch it


class _NeedsExiting(Check):
    id = "exiting"
    layer = "python"
    title = "A check whose collector exits"
    needs = frozenset({"exiting"})

    def judge(self, facts: object) -> list[Finding]:
        raise AssertionError("never judged: its facts never came")


def test_when_the_doctor_itself_fails_the_facts_it_has_are_still_judged(tmp_path: Path) -> None:
    from dflash_doctor.check import Context
    from dflash_doctor.facts.sections import BUILTIN_COLLECTORS, Collector
    from dflash_doctor.registry import load_checks
    from dflash_doctor.runner import run_checks

    checks = [lc.check for lc in load_checks()[0] if lc.check.id == "distributions"] + [_NeedsExiting()]
    collectors = [*BUILTIN_COLLECTORS, Collector("exiting", ("exiting",), "test_ticket_report:_exiting_collector")]
    outcome = run_checks(checks, Context(python=sys.executable, cwd=str(tmp_path)), collectors=collectors)
    assert outcome.partial and outcome.stopped is not None
    crash = outcome.stopped.findings[0]
    assert crash.id == "doctor.crashed" and "SystemExit: a plugin called sys.exit()" in crash.title
    statuses = {r.id: (r.status.value, r.findings[0].id) for r in outcome.results}
    assert statuses["distributions"][0] == "pass"
    assert statuses["exiting"] == ("error", "doctor.incomplete")


def test_a_result_whose_facts_break_the_report_leaves_the_report_of_what_is_certain() -> None:
    """A check result whose facts cannot be written (here: pairs of three, not a mapping) does not take the
    report down: the results go out without their facts, with the doctor's own failure, marked partial."""
    from dflash_doctor.model import CheckResult, Status
    from dflash_doctor.report.document import finish

    broken = CheckResult("distributions", "python", "Distributions", Status.PASS,
                         (Finding(id="distributions.ok", status=Status.PASS, title="fine"),),
                         facts=[("a", 1, 2)])  # type: ignore[arg-type]
    report, kept = finish([broken], {"distributions": {}}, sys.executable, False, {}, None)
    assert kept is not None and [r.id for r in kept] == ["distributions", "doctor"]
    assert report["partial"] is True and report["summary"]["exit_code"] == 1
    assert [c["id"] for c in report["checks"]] == ["distributions", "doctor"]
    crash = report["checks"][1]["findings"][0]
    assert crash["id"] == "doctor.crashed" and "while building the report (ValueError" in crash["title"]
    assert report["redaction"]["enabled"] is True


def test_an_interpreter_that_does_not_answer_stops_the_collection_before_any_collector(tmp_path: Path) -> None:
    """The handshake comes before any collector: /bin/ls is refused, and no collector has started."""
    from dflash_doctor.context import Context
    from dflash_doctor.facts.collect import InterpreterError, collect

    told: list[tuple[str, str]] = []
    with pytest.raises(InterpreterError, match="is not a Python interpreter"):
        collect(Context(python="/bin/ls", cwd=str(tmp_path), timeout_s=20), {"target", "distributions"},
                on_event=lambda kind, name, t: told.append((kind, name)))
    assert told == [("handshake-start", "handshake")]
