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

    def message(self, key: str) -> str:
        return f"Unauthorized: the key {key} is not valid"

    def _refuse(self) -> None:
        sent = self.headers.get("Authorization", "")
        type(self).seen.append(sent)
        key = sent.removeprefix("Bearer ")
        body = json.dumps({"error": {"message": self.message(key),
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
    from dflash_doctor.report.redact import Redactor

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
    from dflash_doctor.report.redact import Redactor

    assert secret_key(key) is secret
    shown = Redactor().tree({key: "<s>-value"})[key]
    assert (shown == "<redacted>") is secret


# ------------------------------------------------------------------ secrets as vLLM's parser reads them

def forms(key: str) -> set[str]:
    """Every form of `key` an error message or a report may show, made by the encoders themselves: as it is,
    Python's repr and ascii(), a JSON string, each of those once more, URL percent-encoding, shell quoting."""
    import shlex
    import urllib.parse

    from dflash_doctor.checks.remedy import quote

    once = {key, repr(key)[1:-1], ascii(key)[1:-1], json.dumps(key)[1:-1], json.dumps(key, ensure_ascii=False)[1:-1]}
    twice = {encode(form) for form in once for encode in (lambda f: repr(f)[1:-1], lambda f: json.dumps(f)[1:-1])}
    quoted = {urllib.parse.quote(key, safe=""), urllib.parse.quote(key), urllib.parse.quote_plus(key),
              lower_hex(urllib.parse.quote(key, safe="")), shlex.quote(key), quote(key)}
    return once | twice | quoted


def lower_hex(encoded: str) -> str:
    """Percent-encoding in lower-case hex (`%2f`), as some clients write it."""
    import re

    return re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), encoded)


def leaked(text: str, keys: list[str]) -> list[str]:
    """The forms of `keys` in `text`, read as it is, percent-decoded (GitHub's workflow commands escape `%`) and
    XML-unescaped (JUnit)."""
    import html
    import urllib.parse

    readings = (text, urllib.parse.unquote(text), html.unescape(text))
    return sorted({form for key in keys for form in forms(key) for reading in readings if form in reading})


def every_output(doctor: Doctor, tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """`outputs`, and the same run with --exec (which names the command it does not start on stderr)."""
    text, _ = outputs(doctor, tmp_path, *args, env=env)
    at = args.index("serve") + 1 if "serve" in args else None
    if at is not None:
        refused = doctor(*args[:at], "--exec", *args[at:], env=env)
        assert refused.returncode == 1 and "not starting" in refused.stderr, refused.stderr[-2000:]
        text += refused.stdout + refused.stderr
    return text


PREFIXED = ["--api-k", "apik3y-first-0001", "apik3y-second-0002", "--hf-tok", "hftok3n-0003",
            "--api-keys", "typok3y-0004", "--hf_tok=hftok3n-inline-0005"]
PREFIXED_KEYS = [w.split("=")[-1] for w in PREFIXED if not w.startswith("--") or "=" in w]


def test_a_secret_flag_given_by_a_prefix_or_misspelt_shows_its_value_in_no_output(doctor: Doctor,
                                                                                     tmp_path: Path) -> None:
    # vLLM's parser takes `--api-k` for `--api-key` (argparse's allow_abbrev); `--api-keys` it refuses, quoting it.
    text = every_output(doctor, tmp_path, "serve", "--no-gpu", "--only", "serve-command", "--", "vllm", "serve",
                        "/models/none", *PREFIXED)
    assert "<redacted>" in text
    assert leaked(text, PREFIXED_KEYS) == []
    # The keys after `--api-k` are keys, not a second model.
    report = json.loads((tmp_path / "r.json").read_text())
    facts = report["checks"][0]["facts"]["serve_args"]
    assert facts["fields"]["model"] == "/models/none" and not facts["errors"], facts["errors"]


@pytest.mark.slow
def test_with_the_real_vllm_its_parser_says_which_words_are_secrets_and_none_shows(doctor: Doctor,
                                                                                    tmp_path: Path) -> None:
    from stacks import vllm_python

    python = str(vllm_python("0.20.1"))
    text = every_output(doctor, tmp_path, "serve", "--python", python, "--no-gpu", "--only", "serve-command",
                        "--no-vllm-validate", "--", "vllm", "serve", "/models/none", *PREFIXED)
    assert leaked(text, PREFIXED_KEYS) == []
    report = json.loads((tmp_path / "r.json").read_text())
    parser = report["checks"][0]["facts"]["serve_args"]["vllm_parser"]
    assert parser["available"] and parser["version"] == "0.20.1", parser
    # vLLM's own parser bound the prefixed flags' words to api_key and hf_token (positions after `vllm serve`),
    # and refused the misspelt flag: its error, quoting the key, is in the report masked.
    assert parser["bound"]["api_key"] == [2, 3] and parser["bound"]["hf_token"] == [5, 8], parser["bound"]
    assert "unrecognized arguments: --api-keys <redacted>" in parser["parse_error"]

    from dflash_doctor.facts.secrets import bound_secret_values
    from dflash_doctor.facts.serve.serve_shapes import ServeArgs

    facts = ServeArgs.from_json({"argv": ["vllm", "serve", "/models/none", *PREFIXED], "program": ["vllm", "serve"],
                                 "vllm_parser": {"bound": parser["bound"]}})
    assert bound_secret_values(facts) == [k for k in PREFIXED_KEYS if not k.startswith("typo")]


# Keys with a backslash, quotes, a percent sign and a space: each encoder writes them its own way.
ODD_KEYS = ["s3cr\\et\"k'ey%2F 9", "back\\slash\\only-17"]


@pytest.mark.slow
def test_a_key_that_vllm_quotes_as_a_repr_in_its_error_shows_in_no_form(doctor: Doctor, tmp_path: Path) -> None:
    """vLLM's config validation refuses an unknown key of --speculative-config and quotes its value as a repr
    (pydantic: `input_value='s3cr\\\\et...'`): the backslashes doubled, which a mask by the plain value missed."""
    pytest.importorskip("safetensors")
    from stacks import vllm_python

    try:
        import toymodels as toy
    except ImportError:  # tests/ imported as a package
        from tests import toymodels as toy  # type: ignore[no-redef]

    target, drafter = toy.write_toy_target(tmp_path / "target"), toy.write_toy_drafter(tmp_path / "drafter")
    spec = {"method": "dflash", "model": str(drafter), "num_speculative_tokens": 4, "api_key": ODD_KEYS[0]}
    text = every_output(doctor, tmp_path, "serve", "--python", str(vllm_python("0.20.1")), "--no-gpu",
                        "--only", "serve-command", "--", "vllm", "serve", str(target), "--max-num-seqs", "8",
                        "--speculative-config", json.dumps(spec), "--api-key", ODD_KEYS[1])
    report = json.loads((tmp_path / "r.json").read_text())
    validation = report["checks"][0]["facts"]["serve_args"]["vllm_parser"]["validation"]
    assert validation and "input_value=" in validation["error"]["message"], validation  # vLLM quoted it
    assert leaked(text, ODD_KEYS) == []


class _Echoing(_Refusing):
    """Echoes the key in the forms servers and proxies use: a repr, percent-encoded in a URL, shell-quoted; the
    answer is JSON, which escapes each of them again."""

    def message(self, key: str) -> str:
        import shlex
        import urllib.parse

        return (f"invalid key {key!r}; see https://auth.example/?key={urllib.parse.quote(key, safe='')} "
                f"or run: curl -H {shlex.quote('X-Key: ' + key)}")


@pytest.mark.parametrize("key", ODD_KEYS)
def test_a_key_echoed_back_escaped_quoted_or_percent_encoded_shows_in_no_form(doctor: Doctor, tmp_path: Path,
                                                                               key: str) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Echoing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        text, report = outputs(doctor, tmp_path, "live", f"http://127.0.0.1:{server.server_address[1]}",
                               "--api-key-env", "DOCTOR_TEST_KEY", "--request-timeout", "5",
                               env={"DOCTOR_TEST_KEY": key})
    finally:
        server.shutdown()
        server.server_close()
    assert "invalid key" in json.dumps(report)  # the answer reached the report
    assert leaked(text, [key]) == []


def test_fifty_thousand_api_keys_are_masked_within_the_timeout(doctor: Doctor, tmp_path: Path) -> None:
    import re
    import time

    keys = [f"k{i:05d}-fleet-key" for i in range(50_000)]
    started = time.monotonic()
    proc = doctor("serve", "--no-gpu", "--timeout", "10", "--only", "serve-command", "--no-vllm-parser",
                  "--json", str(tmp_path / "r.json"), "--markdown", str(tmp_path / "r.md"), "--",
                  "vllm", "serve", "/models/none", "--api-key", *keys, timeout=120)
    elapsed = time.monotonic() - started
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    text = proc.stdout + proc.stderr + (tmp_path / "r.json").read_text() + (tmp_path / "r.md").read_text()
    assert re.findall(r"k\d{5}-fleet-key", text) == []
    assert text.count("<redacted>") >= 50_000
    assert elapsed < 10, f"{elapsed:.1f} s under --timeout 10"


@pytest.mark.parametrize("key", [*ODD_KEYS, "plain-key-0042", "caf\u00e9-\u20ac-key"])
def test_every_encoding_of_a_given_secret_is_masked_few_or_many(key: str) -> None:
    import shlex
    import urllib.parse

    from dflash_doctor.report.redact import Redactor

    shown = [repr(key), repr([key]), repr(repr(key)), ascii(key), json.dumps({"k": key}), json.dumps(repr(key)),
             f"https://x/?k={urllib.parse.quote(key, safe='')}", f"https://x/{urllib.parse.quote(key)}",
             lower_hex(urllib.parse.quote_plus(key)), f"run {shlex.quote(key)}", repr(ValueError(f"bad {key!r}"))]
    many = [f"other-key-{i:04d}" for i in range(100)]  # past SecretMask.ALTERNATION_MOST: the index
    for values in ((key,), (key, *many)):
        redactor = Redactor(values=values)
        for text in shown:
            masked = redactor.text(text)
            assert "<redacted>" in masked and leaked(masked, [key]) == [], (text, masked)
    from dflash_doctor.report.redact import SecretMask

    mask = SecretMask([key, *many])
    assert mask("x other-key-0007y other-key-00") == "x <redacted>y other-key-00"
