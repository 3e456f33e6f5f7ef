"""Every secret the doctor is given is masked by its value in every output.

- `vllm serve ... --api-key K1 K2`: vLLM's --api-key takes a list (`api_key: list[str]`,
  vllm/entrypoints/openai/cli_args.py; `nargs="+"` from vllm/engine/arg_utils.py get_kwargs), so K2 is a key
  too, not the model;
- a JSON flag value with a secret-named key (`--speculative-config '{"api_key": ...}'`);
- the key of `live --api-key-env NAME`, echoed back by a real loopback server's 401 answer;
- a variable of the environment whose name says secret (HF_TOKEN), wherever its value turns up.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from conftest import Doctor, findings_of, validate_report

FIRST, SECOND, IN_JSON = "firstkey-4711-plain", "secondkey-0815-plain", "jsonkey-2342-plain"


def outputs(doctor: Doctor, tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[str, dict[str, Any]]:
    """Every output of the same run: the terminal (-v), --format github, JSON, JUnit and Markdown files."""
    head, sep, tail = (args[: args.index("--")], ("--",), args[args.index("--") + 1:]) if "--" in args else (args, (), ())
    files = [tmp_path / "r.json", tmp_path / "r.xml", tmp_path / "r.md"]
    terminal = doctor(*head, "-v", "--json", str(files[0]), "--junit", str(files[1]), "--markdown", str(files[2]),
                      *sep, *tail, env=env)
    github = doctor(*head, "--format", "github", *sep, *tail, env=env)
    text = "".join([terminal.stdout, terminal.stderr, github.stdout, github.stderr, *(f.read_text() for f in files)])
    return text, validate_report(json.loads(files[0].read_text()))


def test_every_value_of_a_list_api_key_and_a_json_api_key_are_in_no_output(doctor: Doctor, tmp_path: Path) -> None:
    spec = {"method": "dflash", "model": "/models/drafter", "num_speculative_tokens": 4, "api_key": IN_JSON}
    text, report = outputs(doctor, tmp_path, "serve", "--no-gpu", "--only", "serve-command", "--no-vllm-parser", "--",
                           "vllm", "serve", "/models/none", "--api-key", FIRST, SECOND,
                           "--speculative-config", json.dumps(spec))
    for value in (FIRST, SECOND, IN_JSON):
        assert value not in text, f"{value!r} leaked"
    facts = report["checks"][0]["facts"]["serve_args"]
    assert facts["argv"][3:6] == ["--api-key", "<redacted>", "<redacted>"]
    # K2 is a key, not a second positional argument: the model is the one given, and no error says otherwise.
    assert facts["fields"]["model"] == "/models/none"
    assert not [e for e in facts["errors"] if e["flag"] == "MODEL"], facts["errors"]
    assert "api_key" in facts["flags_given"] and "--api-key" not in facts["unknown_flags"]


class _Refusing(http.server.BaseHTTPRequestHandler):
    """A server that answers every request 401 and echoes the key it was sent (without "Bearer", which the pattern
    redaction would catch), as some proxies do."""

    seen: ClassVar[list[str]] = []

    def _refuse(self) -> None:
        sent = self.headers.get("Authorization", "")
        type(self).seen.append(sent)
        key = sent.removeprefix("Bearer ")
        body = json.dumps({"error": {"message": f"Unauthorized: the key {key} is not valid",
                                     "type": "invalid_request_error", "code": 401}}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _refuse

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def refusing_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_401_answer_that_echoes_the_key_shows_it_in_no_output(doctor: Doctor, tmp_path: Path,
                                                                 refusing_server: str) -> None:
    key = "server-key-5f1e0c9a"  # shaped like no known token: only its value gives it away
    _Refusing.seen.clear()
    text, report = outputs(doctor, tmp_path, "live", refusing_server, "--api-key-env", "DOCTOR_TEST_KEY",
                           "--request-timeout", "5", env={"DOCTOR_TEST_KEY": key})
    assert f"Bearer {key}" in _Refusing.seen  # the key was sent, and the answer echoed it
    assert "401" in json.dumps(findings_of(report))  # the answer reached the report
    assert key not in text


def test_a_secret_variable_of_the_environment_is_masked_wherever_its_value_appears(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from dflash_doctor.render.redact import Redactor

    monkeypatch.setenv("HF_TOKEN", "plainvalue-of-the-hf-token")  # not shaped like hf_...: only the name says so
    monkeypatch.setenv("SSH_AUTH_SOCK", "/tmp/ssh-XXXX/agent.1")  # a path: not masked
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false-and-long")
    redactor = Redactor.for_this_machine(keep_hosts=True)
    assert redactor.text("401: plainvalue-of-the-hf-token rejected") == "401: <redacted> rejected"
    assert redactor.text("socket /tmp/ssh-XXXX/agent.1") == "socket /tmp/ssh-XXXX/agent.1"
    assert redactor.text("false-and-long") == "false-and-long"


@pytest.mark.parametrize(("key", "secret"), [
    ("api_key", True), ("hf_token", True), ("token", True), ("password", True), ("client_secret", True),
    ("access_token", True), ("bos_token", False), ("pad_token", False), ("max_tokens", False),
    ("tokenizer", False), ("api_key_env", False), ("num_speculative_tokens", False),
])
def test_a_json_key_names_a_secret_by_its_words_not_by_containing_token(key: str, secret: bool) -> None:
    from dflash_doctor.facts.secrets import secret_key
    from dflash_doctor.render.redact import Redactor

    assert secret_key(key) is secret
    shown = Redactor().tree({key: "<s>-value"})[key]
    assert (shown == "<redacted>") is secret
