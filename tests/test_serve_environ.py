"""The environment `vllm serve` gets, judged where vLLM does not import here: the doctor's rule over the lists it reads
from the installed release's source (real sdists), on real toy model files, with the real environment of the
doctor's process. vLLM's own function judging it live: tests/test_vllm_validation_newest.py; the rule held to each
release's own function: tests/test_release_matrix.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("safetensors")

from test_models_check import found, patch_config, run_checks
from vllm_release import MATRIX, vllm_validate_environ
from vllm_sources import vllm_source

from dflash_doctor.checks.models.drafter_pairing import v1_runner_fix
from dflash_doctor.facts.serve.serve import read_vllm_dflash
from dflash_doctor.facts.serve.serve_shapes import VllmDflash
from dflash_doctor.model import Status

try:
    import toymodels as toy
except ImportError:  # tests/ imported as a package
    from tests import toymodels as toy  # type: ignore[no-redef]


def _command(tmp_path: Path, *extra: str) -> list[str]:
    target = toy.write_toy_target(tmp_path / "target")
    patch_config(target, max_position_embeddings=40960)
    drafter = toy.write_toy_drafter(tmp_path / "drafter")
    return ["vllm", "serve", str(target), "--max-model-len", "32768", "--max-num-batched-tokens", "32768",
            "--max-num-seqs", "256", *extra, "--speculative-config",
            json.dumps({"method": "dflash", "model": str(drafter), "num_speculative_tokens": 15})]


def _environ_findings(results: dict[str, object], finding_id: str) -> list[object]:
    return [f for r in results.values() for f in r.findings if f.id == finding_id]  # type: ignore[attr-defined]


def test_without_vllm_the_rules_read_from_0_34_0_refuse_the_v1_runner_and_warn_on_an_unknown_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "0")
    monkeypatch.setenv("VLLM_ALLOW_LONG_MAX_MODE_LEN", "1")  # a typo of VLLM_ALLOW_LONG_MAX_MODEL_LEN
    results = run_checks(tmp_path, argv=_command(tmp_path), vllm="0.34.0", gpus=2, gpu_memory=48)
    refused = found(results, "serve-command.environ-refused")
    assert refused.status is Status.FAIL
    assert refused.title.endswith("VLLM_USE_V2_MODEL_RUNNER=0 is no longer supported: Model Runner V1 has been "
                                  "removed. Unset this variable.")
    assert refused.evidence["judged_by"] == ("the doctor's reading of vLLM 0.34.0's vllm/platforms/interface.py "
                                             "Platform.validate_environ")
    assert [r.command for r in refused.remediation] == ["unset VLLM_USE_V2_MODEL_RUNNER"]
    unknown = found(results, "serve-command.environ-unknown")
    assert unknown.status is Status.WARN and unknown.evidence["variables"] == ["VLLM_ALLOW_LONG_MAX_MODE_LEN"]


def test_the_release_before_takes_the_v1_runner_and_hard_validation_refuses_the_unknown_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "0")
    monkeypatch.setenv("VLLM_ALLOW_LONG_MAX_MODE_LEN", "1")
    results = run_checks(tmp_path, argv=_command(tmp_path), vllm="0.33.0", gpus=2, gpu_memory=48)
    assert _environ_findings(results, "serve-command.environ-refused") == []
    assert found(results, "serve-command.environ-unknown").evidence["variables"] == ["VLLM_ALLOW_LONG_MAX_MODE_LEN"]
    hard = run_checks(tmp_path / "hard", argv=_command(tmp_path / "hard", "--fail-on-environ-validation"),
                      vllm="0.33.0", gpus=2, gpu_memory=48)
    refused = found(hard, "serve-command.environ-refused")
    assert refused.title.endswith("Unknown vLLM environment variable detected: VLLM_ALLOW_LONG_MAX_MODE_LEN")
    assert _environ_findings(hard, "serve-command.environ-unknown") == []


def test_a_removed_variable_fails_with_the_releases_own_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_MARLIN_INPUT_DTYPE", "int8")
    results = run_checks(tmp_path, argv=_command(tmp_path), vllm="0.34.0", gpus=2, gpu_memory=48)
    assert "VLLM_MARLIN_INPUT_DTYPE has been removed. Marlin no longer supports 8-bit activations." in found(
        results, "serve-command.environ-refused").title


@pytest.mark.parametrize("version", MATRIX)
def test_no_remediation_offers_the_v1_runner_to_a_release_that_refuses_it(version: str) -> None:
    """drafter.padded-vocab-v2's `export VLLM_USE_V2_MODEL_RUNNER=0` is offered exactly where the release's own
    validate_environ takes the value."""
    vllm = VllmDflash.from_json({"installed": True, "version": version,
                                 **read_vllm_dflash(str(vllm_source(version)))})
    error, _ = vllm_validate_environ(version)({"VLLM_USE_V2_MODEL_RUNNER": "0"}, False)
    offered = [r.command for r in v1_runner_fix(vllm, "the V1 runner")]
    assert offered == ([] if error else ["export VLLM_USE_V2_MODEL_RUNNER=0"]), (version, error)
