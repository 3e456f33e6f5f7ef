"""What vLLM resolved, exported by the vllm_args probe and judged by the doctor's rules, on the real vLLM: 0.20.1
(the release CI installs, tests/warm_cache.py) and 0.34.0 (the newest release read; its venv is made on first use
by stacks.vllm_python). The toy models are tests/toymodels.py's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("safetensors")

from conftest import Doctor, finding, findings_of, validate_report
from stacks import vllm_python
from test_models_check import patch_config

try:
    import toymodels as toy
except ImportError:  # tests/ imported as a package
    from tests import toymodels as toy  # type: ignore[no-redef]

GPUS = ("--gpus", "2", "--gpu-memory", "139.8")
LIMITS = ["-tp", "2", "--max-num-batched-tokens", "32768", "--max-num-seqs", "256"]


@pytest.fixture(scope="module")
def toys(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A toy target of 4 layers (40960 positions, as Qwen3's), its drafter, and a drafter whose target_layer_ids
    name layer 9."""
    base = tmp_path_factory.mktemp("toys")
    target = toy.write_toy_target(base / "target")
    patch_config(target, max_position_embeddings=40960)
    return (target, toy.write_toy_drafter(base / "drafter"),
            toy.write_toy_drafter(base / "past", target_layer_ids=(1, 9)))


def serve(doctor: Doctor, version: str, argv: list[str], only: str, *options: str,
          env: dict[str, str] | None = None) -> dict[str, Any]:
    proc = doctor("serve", "--python", str(vllm_python(version)), *GPUS, *options, "--timeout", "400", "--only", only,
                  "--json", "-", "--", *argv, env=env, timeout=600)
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"not one JSON document:\n{proc.stdout[:2000]}\n{proc.stderr[-2000:]}") from None
    return validate_report(report)


def serve_facts(report: dict[str, Any]) -> dict[str, Any]:
    """The serve_args facts of the report (each check carries the sections it judged)."""
    facts: dict[str, Any] = next(c["facts"]["serve_args"] for c in report["checks"]
                                 if "serve_args" in (c.get("facts") or {}))
    return facts


@pytest.mark.slow
@pytest.mark.xdist_group("vllm-0.20.1-validation")
def test_the_values_vllm_resolved_are_in_the_facts_and_the_rules_judge_them(
        doctor: Doctor, toys: tuple[Path, Path, Path]) -> None:
    target, drafter, _ = toys
    spec = {"method": "dflash", "model": str(drafter), "num_speculative_tokens": 15}
    argv = ["vllm", "serve", str(target), *LIMITS, "--speculative-config", json.dumps(spec)]  # no --max-model-len
    report = serve(doctor, "0.20.1", argv, "serve-command,serve-resources", "--target-arch", "sm_90",
                   env={"VLLM_CACHE_ROOT": str(doctor.cwd / "vllm-cache")})  # a cache that knows no model class
    parser = serve_facts(report)["vllm_parser"]
    validation = parser["validation"]
    assert validation is not None and validation["ok"], parser
    served = validation["served"]
    assert served["draft_model"] == str(drafter) and served["method"] == "dflash"
    # vLLM's cache (empty here) did not know the drafter's class: vLLM learned its interface in the validation's own
    # process, not in an interpreter of its own that imports torch and vLLM again. Qwen3's module asks compiled ops
    # this machine has no driver for at import: answered for the simulated GPU as the release's csrc does.
    assert validation["model_info_learned"] == {"Qwen3ForCausalLM": "here", "DFlashQwen3ForCausalLM": "here"}
    answered = {a["op"]: a["answers"] for a in parser["platform"]["answered"] if a["asked"]}
    assert answered == {"_C::cutlass_scaled_mm_supports_fp8": [True], "_C::cutlass_scaled_mm_supports_block_fp8": [True]}
    assert served["num_speculative_tokens"] == 15
    assert (served["tensor_parallel_size"], served["pipeline_parallel_size"], served["data_parallel_size"]) == (2, 1, 1)
    assert served["draft_tensor_parallel_size"] == 2  # vLLM's default: the target's
    assert served["max_model_len"] == 40960  # derived by vLLM from the target's config: none was asked
    # 0.20.1 has no VllmConfig.use_v2_model_runner: its gpu_worker.py reads the variable, unset here
    assert (served["model_runner"], served["model_runner_from"]) == ("v1", "envs.VLLM_USE_V2_MODEL_RUNNER")
    assert served["dtype"] == "float16"  # the toy's torch_dtype, which an sm_90 GPU supports
    assert served["enforce_eager"] is False and isinstance(served["enable_prefix_caching"], bool)
    assert finding(report, "serve-command.spec-ok")["title"] == (
        f"--speculative-config: method dflash, drafter {drafter}, num_speculative_tokens 15, draft TP 2")
    memory = finding(report, "serve-resources.memory")
    assert memory["evidence"]["max_model_len"] == served["max_model_len"]


@pytest.mark.slow
def test_vllm_0_34_reads_the_spec_flags_and_the_doctor_reads_the_drafter_they_name(
        doctor: Doctor, toys: tuple[Path, Path, Path]) -> None:
    target, drafter, past = toys
    by_flags = ["vllm", "serve", str(target), *LIMITS, "--spec-method", "dflash", "--spec-model", str(past),
                "--spec-tokens", "15"]
    report = serve(doctor, "0.34.0", by_flags, "drafter,serve-command")
    assert serve_facts(report)["parser"] == "vllm"
    spec = serve_facts(report)["speculative_config"]
    assert spec["value"] == {"method": "dflash", "model": str(past), "num_speculative_tokens": 15}
    assert spec["from_flags"] == ["--spec-method", "--spec-model", "--spec-tokens"]
    layer_ids = finding(report, "drafter.layer-ids-invalid")
    assert layer_ids["status"] == "fail" and "[9] outside [0, 4)" in layer_ids["title"]
    # --spec-model beside the JSON's "model": vLLM's own error where its validation gets that far, and the rule's
    both = ["vllm", "serve", str(target), *LIMITS, "--speculative-config",
            json.dumps({"method": "dflash", "model": str(drafter), "num_speculative_tokens": 15}),
            "--spec-model", str(drafter)]
    report = serve(doctor, "0.34.0", both, "serve-command")
    conflict = finding(report, "serve-command.spec-flags-conflict")
    assert conflict["status"] == "fail"
    assert conflict["title"].startswith("--spec-model and --speculative-config['model'] are mutually exclusive")
    validation = [f for f in findings_of(report) if f["id"] == "serve-command.vllm-validation"]
    assert validation and validation[0]["status"] in ("fail", "skip")
    if validation[0]["status"] == "fail":
        assert "--spec-model and --speculative-config['model'] are mutually exclusive" in validation[0]["title"]
