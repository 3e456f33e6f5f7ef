"""What vLLM's own validation is given, and what it may run, in the real vLLM 0.20.1 (tests/stacks.py).

- A model directory whose config.json has an auto_map: with `--trust-remote-code` vLLM's create_engine_config
  loads its configuration_*.py through transformers, which copies it to ~/.cache/huggingface/modules and
  executes it. By default the doctor's validation stops before any of it is copied or run, and says so;
  `--run-model-code` runs it with a HOME of the doctor's own and no outbound connections.
- A model directory with a file the doctor refuses to read (a config.json over 16 MiB, a safetensors header
  over the safetensors limit): vLLM's validation, which would read it whole, is not given the command.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("safetensors")

from conftest import finding, validate_report
from stacks import vllm_python
from test_models_check import patch_config
from test_vllm_validation import A6000_PAIR, VLLM, all_of, command

try:
    import toymodels as toy
except ImportError:  # tests/ imported as a package
    from tests import toymodels as toy  # type: ignore[no-redef]

pytestmark = pytest.mark.xdist_group("vllm-0.20.1-validation")

FLAGS = ["--max-num-batched-tokens", "32768", "--max-num-seqs", "256"]

# The model's own code, as a repository on the Hub may ship it: at import it leaves a file, and calls home.
CONFIGURATION = '''
import os, socket
open({ran!r}, "w").write("ran")
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=5).close()
except OSError as exc:
    open({refused!r}, "w").write(repr(exc))
from transformers import Qwen3Config


class CallingHomeConfig(Qwen3Config):
    pass
'''


class Listener:
    """A real TCP listener on 127.0.0.1 that counts who connects."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port: int = self.sock.getsockname()[1]
        self.peers: list[Any] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, peer = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.peers.append(peer)
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    found = Listener()
    yield found
    found.close()


def remote_code_target(base: Path, port: int) -> Path:
    target = toy.write_toy_target(base / "target")
    config = json.loads((target / "config.json").read_text())
    config.update(auto_map={"AutoConfig": "configuration_calling_home.CallingHomeConfig"},
                  max_position_embeddings=40960)
    (target / "config.json").write_text(json.dumps(config, indent=2))
    (target / "configuration_calling_home.py").write_text(CONFIGURATION.format(
        ran=str(base / "code-ran"), refused=str(base / "connection-refused"), port=port))
    return target


def serve_remote_code(base: Path, listener: Listener, *options: str) -> tuple[dict[str, Any], int]:
    """`vllm serve TARGET --trust-remote-code` on the remote-code target, judged with HOME and TMPDIR of the
    test's own (base/home, base/tmp)."""
    target = remote_code_target(base, listener.port)
    drafter = toy.write_toy_drafter(base / "drafter")
    home, scratch = base / "home", base / "tmp"
    home.mkdir()
    scratch.mkdir()
    argv = [*command(target, drafter, FLAGS, {}), "--trust-remote-code"]
    return doctor_serve(base, argv, *A6000_PAIR, *options, env={"HOME": str(home), "TMPDIR": str(scratch)})


def doctor_serve(cwd: Path, argv: list[str], *options: str, env: dict[str, str]) -> tuple[dict[str, Any], int]:
    """The doctor as a user runs it, wrapped so that the peak memory of its processes (the probes included) is
    measured: the wrapper's children's ru_maxrss, in KiB, is its last line of stderr."""
    wrapper = ("import resource, subprocess, sys; code = subprocess.run(sys.argv[1:]).returncode; "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(code)")
    proc = subprocess.run([sys.executable, "-c", wrapper, sys.executable, "-m", "dflash_doctor", "serve",
                           "--python", str(vllm_python(VLLM)), *options, "--only", "serve-command", "--json", "-",
                           "--timeout", "400", "--", *argv],
                          check=False, cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True, timeout=600)
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"not one JSON document:\n{proc.stdout[:2000]}\n{proc.stderr[-3000:]}") from None
    doctor_serve.max_rss_kib = int(proc.stderr.strip().splitlines()[-1])  # type: ignore[attr-defined]
    return validate_report(report), proc.returncode


def listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.slow
def test_a_models_own_code_is_not_run_by_the_validation_and_the_report_says_what_was_not_judged(
    tmp_path: Path, listener: Listener,
) -> None:
    report, code = serve_remote_code(tmp_path, listener)
    target, home = tmp_path / "target", tmp_path / "home"

    # Nothing of the model's ran: no file left, no connection made, nothing copied under HOME.
    assert not (tmp_path / "code-ran").exists() and not (tmp_path / "connection-refused").exists()
    assert listener.peers == []
    assert listing(home) == []
    # The report says which part of vLLM's validation was not run, and why; the parser's verdict still counts.
    not_run = finding(report, "serve-command.model-code-not-run")
    assert not_run["status"] == "warn"
    assert str(target) in not_run["title"] and "auto_map: AutoConfig" in not_run["title"]
    assert "configuration_calling_home.py" in not_run["title"]
    assert not_run["evidence"]["auto_map"] == {str(target): ["AutoConfig"]}
    (remedy,) = not_run["remediation"]
    assert remedy["command"].startswith("dflash-doctor serve --run-model-code -- vllm serve ")
    assert all_of(report, "serve-command.vllm-validation") == []
    assert finding(report, "serve-command.parsed")["title"] == f"the command was read by vLLM {VLLM}'s own parser"
    judged = finding(report, "serve-command.judged-by")
    assert judged["evidence"]["vllm"] == ["serve-command.parsed"]
    assert "serve-command.model-code-not-run" not in judged["evidence"]["rules"]
    assert code == 0


@pytest.mark.slow
def test_run_model_code_runs_it_without_the_users_home_or_network(tmp_path: Path, listener: Listener) -> None:
    report, _ = serve_remote_code(tmp_path, listener, "--run-model-code")
    home, scratch = tmp_path / "home", tmp_path / "tmp"

    assert (tmp_path / "code-ran").read_text() == "ran"  # asked for: the code ran
    assert listener.peers == []
    assert "ConnectionRefusedError" in (tmp_path / "connection-refused").read_text()
    # Transformers' modules cache went to a directory of the doctor's own, removed after: HOME is untouched.
    assert listing(home) == []
    assert [n for n in listing(scratch) if n.startswith("dflash-doctor-")] == []
    validation = finding(report, "serve-command.vllm-validation")
    assert validation["status"] == "pass"
    assert validation["evidence"]["model_code_run"] is True
    assert [c["address"] for c in validation["evidence"]["refused_connections"]] == [
        f"('127.0.0.1', {listener.port})"]
    assert all_of(report, "serve-command.model-code-not-run") == []


def oversized_config(directory: Path) -> Path:
    config = directory / "config.json"
    with config.open("r+b") as handle:
        handle.truncate(1 << 30)  # sparse: a gigabyte that takes no disk
    return config


def oversized_header(directory: Path) -> Path:
    weights = directory / "model.safetensors"
    toy.set_header_length(weights, 1 << 30)
    with weights.open("r+b") as handle:
        handle.truncate((1 << 30) + 8)
    return weights


def oversized_quant_config(directory: Path) -> Path:
    """A sparse gigabyte hf_quant_config.json, which vLLM's get_config json.loads whole where config.json holds
    no quantization_config (ModelOpt 0.29's layout)."""
    quant = directory / "hf_quant_config.json"
    with quant.open("wb") as handle:
        handle.truncate(1 << 30)
    return quant


def through_config_file(base: Path, argv: list[str]) -> list[str]:
    """The same command with the model named in a --config YAML file (vLLM's own parser reads it; the doctor's
    documented subset does not)."""
    at = argv.index("serve") + 1
    (base / "serve.yaml").write_text(f"model: {argv[at]}\n")
    return [*argv[:at], "--config", str(base / "serve.yaml"), *argv[at + 1:]]


@pytest.mark.slow
@pytest.mark.parametrize(("oversize", "config_file"), [(oversized_config, False), (oversized_header, False),
                                                       (oversized_config, True), (oversized_quant_config, False),
                                                       (oversized_config, "--hf-config-path")],
                         ids=["config.json", "safetensors header", "config.json of the model a --config file names",
                              "hf_quant_config.json", "config.json of the --hf-config-path directory"])
def test_a_file_the_doctor_refuses_is_not_handed_to_vllms_validation(tmp_path: Path, oversize: Any,
                                                                     config_file: bool | str) -> None:
    target = toy.write_toy_target(tmp_path / "target")
    drafter = toy.write_toy_drafter(tmp_path / "drafter")
    argv = command(target, drafter, FLAGS, {})
    if config_file == "--hf-config-path":  # vLLM reads the served model's config from another directory
        elsewhere = toy.write_toy_target(tmp_path / "config-elsewhere")
        argv, config_file = [*argv, "--hf-config-path", str(elsewhere)], False
        refused = oversize(elsewhere)
    else:
        refused = oversize(drafter if oversize is oversized_header else target)
    report, _ = doctor_serve(tmp_path, through_config_file(tmp_path, argv) if config_file else argv, *A6000_PAIR,
                             env={})

    not_run = finding(report, "serve-command.vllm-validation-not-run")
    assert not_run["status"] == "warn"
    assert str(refused) in not_run["title"]
    assert [f["file"] for f in not_run["evidence"]["files"]] == [str(refused)]
    assert all_of(report, "serve-command.vllm-validation") == []
    assert finding(report, "serve-command.parsed")["title"] == f"the command was read by vLLM {VLLM}'s own parser"
    # Not a gigabyte read anywhere: the doctor and its probes (vLLM and torch imported) stay well under it.
    assert doctor_serve.max_rss_kib < (1 << 30) // 1024 * 3 // 4, doctor_serve.max_rss_kib  # type: ignore[attr-defined]


@pytest.mark.slow
def test_a_model_named_in_a_config_file_is_looked_at_then_validated(tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "target")
    patch_config(target, max_position_embeddings=40960)  # as Qwen3's config allows
    drafter = toy.write_toy_drafter(tmp_path / "drafter")
    argv = through_config_file(tmp_path, command(target, drafter, FLAGS, {}))
    report, _ = doctor_serve(tmp_path, argv, *A6000_PAIR, env={})
    assert finding(report, "serve-command.vllm-validation")["status"] == "pass"
    assert all_of(report, "serve-command.vllm-validation-not-run") == []


def test_refused_files_are_what_the_model_reader_refuses_by_its_own_caps(tmp_path: Path) -> None:
    from dflash_doctor.facts.modelfiles import read_model_dir, refused_files

    clean = toy.write_toy_drafter(tmp_path / "clean")
    assert refused_files(clean) == []
    big_config = toy.write_toy_target(tmp_path / "big-config")
    with (big_config / "config.json").open("r+b") as handle:
        handle.truncate(16 * 1024 * 1024 + 1)  # one byte over the cap
    big_header = toy.write_toy_drafter(tmp_path / "big-header")
    oversized_header(big_header)
    fifo = toy.write_toy_drafter(tmp_path / "fifo")
    (fifo / "config.json").unlink()
    os.mkfifo(fifo / "config.json")
    for directory, kind, name in ((big_config, "too-large", "config.json"),
                                  (big_header, "header-too-large", "model.safetensors"),
                                  (fifo, "not-a-file", "config.json")):
        (refused,) = refused_files(directory)
        assert (refused["kind"], refused["file"]) == (kind, str(directory / name))
        # The reader of the model's facts refuses the same file, for the same reason, in the same words.
        assert refused in read_model_dir(directory)["problems"]


@pytest.mark.slow
@pytest.mark.parametrize("oversized", [False, True], ids=["its verifier", "its verifier's config.json over the cap"])
def test_a_speculators_drafter_served_alone_has_its_verifier_looked_at_before_vllm_reads_it(
    tmp_path: Path, oversized: bool,
) -> None:
    from test_speculators_launch import _launch

    target, drafter = _launch(tmp_path, "TARGET")
    refused = oversized_config(target) if oversized else None
    argv = ["vllm", "serve", str(drafter), "--tensor-parallel-size", "2", "--max-model-len", "32768", *FLAGS]
    report, _ = doctor_serve(tmp_path, argv, *A6000_PAIR, env={})
    if refused is None:
        assert all_of(report, "serve-command.vllm-validation-not-run") == []
        assert finding(report, "serve-command.vllm-validation")["status"] == "pass"
        return
    not_run = finding(report, "serve-command.vllm-validation-not-run")
    assert [f["file"] for f in not_run["evidence"]["files"]] == [str(refused)]
    assert all_of(report, "serve-command.vllm-validation") == []
    assert doctor_serve.max_rss_kib < (1 << 30) // 1024 * 3 // 4, doctor_serve.max_rss_kib  # type: ignore[attr-defined]


@pytest.mark.slow
def test_a_hugging_face_cache_ref_over_the_cap_is_read_by_no_part_of_vllm(tmp_path: Path) -> None:
    """`vllm serve ORG/NAME` reads the repo's refs/main in the Hugging Face cache whole (huggingface_hub, already
    in vLLM's parser step, AsyncEngineArgs.from_cli_args): a sparse gigabyte planted there is opened by nothing."""
    drafter = toy.write_toy_drafter(tmp_path / "drafter")
    refs = tmp_path / "hub" / "models--org--model" / "refs"
    refs.mkdir(parents=True)
    with (refs / "main").open("wb") as handle:
        handle.truncate(1 << 30)
    argv = [*command(tmp_path / "unused", drafter, FLAGS, {})]
    argv[argv.index("serve") + 1] = "org/model"
    report, _ = doctor_serve(tmp_path, argv, *A6000_PAIR, env={"HF_HUB_CACHE": str(tmp_path / "hub")})
    not_run = finding(report, "serve-command.vllm-validation-not-run")
    assert [f["file"] for f in not_run["evidence"]["files"]] == [str(refs / "main")]
    assert all_of(report, "serve-command.vllm-validation") == []
    assert doctor_serve.max_rss_kib < (1 << 30) // 1024 * 3 // 4, doctor_serve.max_rss_kib  # type: ignore[attr-defined]
