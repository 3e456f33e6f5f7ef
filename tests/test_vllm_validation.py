"""The doctor's verdicts on `vllm serve` commands, compared with vLLM's own.

The real vLLM 0.20.1 parses each command with its own parser and runs `create_engine_config`, its whole
config validation (it reads the toy models' configs and loads no weights). It runs on vLLM's CPU
platform, chosen by a platform plugin, with torch 2.13.0 (CPU) beside it: `stacks.vllm_python` says how
and why. The doctor judges the same command with its own rules alone (its documented subset of flags,
vLLM's parser off, vLLM 0.20.1's source read for the version rules, two H200-sized GPUs given as
`--gpus 2 --gpu-memory 139.8`). Limits whose defaults depend on the platform (max_num_seqs,
max_num_batched_tokens) are given in every command, so that both judge the same numbers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("safetensors")

from conftest import Doctor, finding, validate_report
from stacks import vllm_python
from test_models_check import patch_config, run_checks

from dflash_doctor.facts.probes import ProbeJob, ProbeOutcome, run_probes_sharing_imports
from dflash_doctor.facts.serve_args import parse_serve_command
from dflash_doctor.model import Status

try:
    import toymodels as toy
except ImportError:  # tests/ imported as a package
    from tests import toymodels as toy  # type: ignore[no-redef]

VLLM = "0.20.1"
TARGET, DRAFTER = "TARGET", "DRAFTER"

# (name, flags after `vllm serve TARGET`, speculative config, words of vLLM's reason or None when it accepts)
CASES: list[tuple[str, list[str], dict[str, Any], str | None]] = [
    ("the seed command", ["--max-num-batched-tokens", "32768", "--max-num-seqs", "1024"], {}, None),
    ("8192 tokens, 1024 sequences (H200 default)", ["--max-num-batched-tokens", "8192", "--max-num-seqs", "1024"],
     {}, "max_num_scheduled_tokens is set to -6144 based on the speculative decoding settings"),
    ("8192 tokens, 256 sequences (A6000 default)", ["--max-num-batched-tokens", "8192", "--max-num-seqs", "256"],
     {}, None),
    ("num_speculative_tokens missing", ["--max-num-batched-tokens", "32768", "--max-num-seqs", "256"],
     {"num_speculative_tokens": None},
     "A speculative model was provided, but neither `speculative_token_tree` nor `num_speculative_tokens`"),
    ("num_speculative_tokens 0", ["--max-num-batched-tokens", "32768", "--max-num-seqs", "256"],
     {"num_speculative_tokens": 0}, "greater than 0"),
    ("chunked prefill off, 4096 tokens",
     ["--max-num-batched-tokens", "4096", "--max-num-seqs", "256", "--no-enable-chunked-prefill"], {},
     "max_num_batched_tokens (4096) is smaller than max_model_len (32768)"),
    ("more sequences than tokens", ["--max-num-batched-tokens", "4096", "--max-num-seqs", "8192"], {},
     "max_num_batched_tokens (4096) must be greater than or equal to max_num_seqs (8192)"),
    ("max_model_len past the target's positions",
     ["--max-model-len", "65536", "--max-num-batched-tokens", "65536", "--max-num-seqs", "256"], {},
     "max_model_len (65536) is greater than the derived max_model_len"),
    ("draft TP equal to the target's", ["--max-num-batched-tokens", "32768", "--max-num-seqs", "256"],
     {"draft_tensor_parallel_size": 2}, None),
    ("draft TP 3 under TP 2", ["--max-num-batched-tokens", "32768", "--max-num-seqs", "256"],
     {"draft_tensor_parallel_size": 3}, "cannot be other value than 1 or target model tensor_parallel_size"),
    ("a method vLLM does not know", ["--max-num-batched-tokens", "32768", "--max-num-seqs", "256"],
     {"method": "dflashh"}, "'dflashh'"),
]


def command(target: Path, drafter: Path, flags: list[str], spec_changes: Mapping[str, Any]) -> list[str]:
    spec: dict[str, Any] = {"method": "dflash", "model": str(drafter), "num_speculative_tokens": 15}
    spec.update(spec_changes)
    argv = ["vllm", "serve", str(target), "--tensor-parallel-size", "2", "--language-model-only"]
    if "--max-model-len" not in flags:
        argv += ["--max-model-len", "32768"]
    return [*argv, *flags, "--speculative-config", json.dumps({k: v for k, v in spec.items() if v is not None})]


@pytest.fixture(scope="module")
def toys(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("toys")
    target = toy.write_toy_target(base / "target")
    patch_config(target, max_position_embeddings=40960)  # as Qwen3's config allows
    return target, toy.write_toy_drafter(base / "drafter")


@pytest.fixture(scope="module")
def vllm_verdicts(toys: tuple[Path, Path]) -> dict[str, ProbeOutcome]:
    """vLLM's own verdict on every case: the doctor's vllm_args probe, in children sharing one vLLM import."""
    jobs = [ProbeJob(name, "vllm_args", {"args": parse_serve_command(command(*toys, flags, spec))["args"],
                                         "validate": True})
            for name, flags, spec, _ in CASES]
    shared = run_probes_sharing_imports(str(vllm_python(VLLM)), jobs, timeout_s=300, cwd=str(toys[0].parent),
                                        preload=("vllm.engine.arg_utils", "vllm.entrypoints.openai.cli_args"))
    return shared.outcomes


def vllm_error(outcome: ProbeOutcome) -> str | None:
    assert outcome.ok, (outcome.error, outcome.stderr[-2000:])
    data = outcome.data
    assert data["available"] and data["version"] == VLLM and data["parse_error"] is None, data
    validation = data["validation"]
    return None if validation["ok"] else str(validation["error"]["message"])


@pytest.mark.slow
@pytest.mark.parametrize(("name", "flags", "spec", "words"), CASES, ids=[c[0] for c in CASES])
def test_the_doctor_fails_exactly_the_commands_vllm_rejects_and_says_why(
    tmp_path: Path, toys: tuple[Path, Path], vllm_verdicts: dict[str, ProbeOutcome],
    name: str, flags: list[str], spec: dict[str, Any], words: str | None,
) -> None:
    rejected = vllm_error(vllm_verdicts[name])
    results = run_checks(tmp_path, argv=command(*toys, flags, spec), vllm=VLLM, gpus=2, gpu_memory=139.8)
    failing = [f.title for r in results.values() for f in r.findings if f.status in (Status.FAIL, Status.ERROR)]
    if words is None:
        assert rejected is None and failing == []
    else:
        assert rejected is not None and words in rejected
        assert any(words in title for title in failing), failing


@pytest.mark.slow
def test_with_vllm_importable_the_doctor_reads_the_command_with_vllms_parser_and_reports_its_validation(
    doctor: Doctor, toys: tuple[Path, Path],
) -> None:
    python = str(vllm_python(VLLM))
    flags = ["--max-num-batched-tokens", "8192", "--max-num-seqs", "1024"]
    proc = doctor("serve", "--python", python, "--vllm-validate", "--gpus", "2", "--gpu-memory", "139.8",
                  "--only", "serve-command", "--json", "-", "--", *command(*toys, flags, {}), timeout=300)
    report = validate_report(json.loads(proc.stdout))
    assert finding(report, "serve-command.parsed")["title"] == f"the command was read by vLLM {VLLM}'s own parser"
    rejected = finding(report, "serve-command.vllm-validation")
    assert rejected["status"] == "fail"
    assert rejected["title"] == (
        "vLLM's own config validation rejects the command: ValidationError: max_num_scheduled_tokens is set to "
        "-6144 based on the speculative decoding settings, which does not allow any tokens to be scheduled. "
        "Increase max_num_batched_tokens to accommodate the additional draft token slots, or decrease "
        "num_speculative_tokens or max_num_seqs.")
    # The doctor's own rule says the same, from the files and the flags alone.
    assert "max_num_scheduled_tokens is set to -6144" in finding(report, "serve-command.token-budget")["title"]
    assert proc.returncode == 1
