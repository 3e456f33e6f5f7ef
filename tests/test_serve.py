"""`dflash-doctor serve -- vllm serve ...`: the command line judged against real toy models, the real vLLM
source of the version it names, and GPU facts recorded on a real H200 (fixtures/gpu/; the SM86 pair is
derived from that recording and labelled so). vLLM's own parser and config validation, on the same kind of
commands, are compared with these verdicts in test_vllm_validation.py."""

from __future__ import annotations

import copy
import json
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("safetensors")

from conftest import Doctor, finding, findings_of, validate_report
from realenv import make_venv
from stacks import add_to_path, vllm_site
from test_models_check import found, gpu_fixture, ids, patch_config, run_checks

from dflash_doctor.check import Context
from dflash_doctor.facts.serve.serve import collect_args, port_facts
from dflash_doctor.facts.serve.serve_args import parse_serve_command
from dflash_doctor.facts.shape import section_json
from dflash_doctor.model import Status

try:
    import toymodels as toy
except ImportError:  # tests/ imported as a package
    from tests import toymodels as toy  # type: ignore[no-redef]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


def seed(target: Path, drafter: Path, *extra: str, tokens: str = "32768") -> list[str]:
    """The project's own serve command (README), with the toy models in it."""
    return ["vllm", "serve", str(target), "--tensor-parallel-size", "2", "--max-model-len", "32768",
            "--max-num-batched-tokens", tokens, "--language-model-only", "--speculative-config",
            json.dumps({"method": "dflash", "model": str(drafter), "num_speculative_tokens": 15}), *extra]


@pytest.fixture
def toys(tmp_path: Path) -> tuple[Path, Path]:
    """A toy target whose config allows 40960 positions (as Qwen3's does), and its drafter."""
    target = toy.write_toy_target(tmp_path / "target")
    patch_config(target, max_position_embeddings=40960)
    return target, toy.write_toy_drafter(tmp_path / "drafter")


def two_h200() -> dict[str, Any]:
    """DERIVED: the recorded H200 (fixtures/gpu/h200-facts.json) and a copy of it as GPU 1, for a two-GPU box
    of that kind; every other number is the recording's."""
    gpu = copy.deepcopy(gpu_fixture("h200-facts.json"))
    second = copy.deepcopy(gpu["devices"][0])
    second["index"] = 1
    gpu["devices"].append(second)
    gpu["device_count"] = 2
    return gpu


def serve_report(doctor: Doctor, *options: str, command: Sequence[str]) -> tuple[dict[str, Any], Any]:
    """`dflash-doctor serve OPTIONS --json - -- COMMAND`, its validated report and the process."""
    proc = doctor("serve", *options, "--json", "-", "--", *command)
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"stdout is not one JSON document:\n{proc.stdout[:2000]}\n{proc.stderr[-2000:]}")
    return validate_report(report), proc


# ------------------------------------------------------------------------------- the subset parser


def test_subset_parser_reads_every_documented_flag_form() -> None:
    facts = parse_serve_command([
        "vllm", "serve", "Qwen/Qwen3-8B", "-tp", "2", "--pipeline_parallel_size=1", "--max-model-len", "32k",
        "--max-num-batched-tokens", "16K", "--max-num-seqs", "64", "--gpu-memory-utilization", "0.85",
        "--dtype", "bfloat16", "--no-enable-chunked-prefill", "--trust-remote-code", "--language-model-only",
        "--port", "8123", "--host=127.0.0.1", "--speculative-config", '{"method": "dflash", "model": "d"}',
        "--speculative-config.num_speculative_tokens", "15", "--enable-prefix-caching"])
    fields = facts["fields"]
    assert facts["parser"] == "subset" and facts["program"] == ["vllm", "serve"] and not facts["errors"]
    assert fields["model"] == "Qwen/Qwen3-8B" and fields["tensor_parallel_size"] == 2
    assert fields["max_model_len"] == 32000 and fields["max_num_batched_tokens"] == 16384
    assert fields["enable_chunked_prefill"] is False and fields["language_model_only"] is True
    assert fields["port"] == 8123 and fields["host"] == "127.0.0.1"
    assert facts["speculative_config"]["value"] == {"method": "dflash", "model": "d", "num_speculative_tokens": 15}
    assert facts["unknown_flags"] == ["--enable-prefix-caching"]


def test_subset_parser_names_the_flag_of_a_bad_value_and_never_raises() -> None:
    facts = parse_serve_command(["vllm", "serve", "m", "--speculative-config", "{'method': 'dflash'}",
                                 "--max-num-seqs", "many", "--dtype", "fp9", "--port"])
    messages = [e["message"] for e in facts["errors"]]
    assert any(m.startswith("--speculative-config is not a valid JSON object") for m in messages)
    assert any("--max-num-seqs 'many'" in m for m in messages)
    assert any("--dtype 'fp9': invalid choice" in m for m in messages)
    assert "--port expects a value" in messages
    assert facts["speculative_config"]["error"]


def test_the_api_server_module_form_is_a_serve_command_and_anything_else_is_not() -> None:
    facts = parse_serve_command(["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m", "-tp", "4"])
    assert facts["program_error"] is None and facts["fields"]["model"] == "m"
    assert facts["fields"]["tensor_parallel_size"] == 4
    assert "is not a `vllm serve` command" in str(parse_serve_command(["vllm", "bench", "m"])["program_error"])


# --------------------------------------------------------------------------------------- the seed


def test_the_seed_command_passes_on_the_sm86_pair(tmp_path: Path, toys: tuple[Path, Path]) -> None:
    results = run_checks(tmp_path, argv=seed(*toys, "--port", str(free_port())), vllm="0.20.1",
                         gpu=gpu_fixture("sm86-derived-from-h200.json"))
    failing = [(f.id, f.title) for r in results.values() for f in r.findings if f.status in (Status.FAIL, Status.ERROR)]
    assert not failing
    assert "leaves 29184 tokens to schedule" in found(results, "serve-command.token-budget").title
    assert found(results, "serve-resources.world-size").title.startswith("TP 2 x PP 1 = 2 of 2 GPU(s)")
    assert found(results, "serve-resources.memory").status is Status.PASS


def test_the_seed_with_8192_batched_tokens_fails_on_h200s_with_vllms_reason(tmp_path: Path,
                                                                              toys: tuple[Path, Path]) -> None:
    results = run_checks(tmp_path, argv=seed(*toys, "--port", str(free_port()), tokens="8192"), vllm="0.20.1",
                         gpu=two_h200())
    f = found(results, "serve-command.token-budget")
    assert f.status is Status.FAIL
    assert "14 x 1024 = 14336 draft slots" in f.title
    assert "max_num_scheduled_tokens is set to -6144 based on the speculative decoding settings, which does not " \
           "allow any tokens to be scheduled" in f.title
    assert f.remediation[0].command.endswith(" --max-num-batched-tokens 22528")
    # the same with the GPUs' shape given by hand, as on a CI machine
    assumed = run_checks(tmp_path, argv=seed(*toys, tokens="8192"), vllm="0.20.1", gpus=2, gpu_memory=139.8)
    assert found(assumed, "serve-command.token-budget").status is Status.FAIL


def test_8192_only_warns_on_a6000s_whose_default_max_num_seqs_is_256(tmp_path: Path,
                                                                      toys: tuple[Path, Path]) -> None:
    results = run_checks(tmp_path, argv=seed(*toys, "--port", str(free_port()), tokens="8192"), vllm="0.20.1",
                         gpu=gpu_fixture("sm86-derived-from-h200.json"))
    f = found(results, "serve-command.token-budget")
    assert f.status is Status.WARN and "leaves max_num_scheduled_tokens 4608" in f.title


def test_without_gpu_facts_the_budget_is_judged_for_both_default_tiers(tmp_path: Path, toys: tuple[Path, Path]) -> None:
    results = run_checks(tmp_path, argv=seed(*toys, tokens="8192"), vllm="0.20.1")
    budget = [f for f in results["serve-command"].findings if f.id == "serve-command.token-budget"]
    assert [f.status for f in budget] == [Status.WARN, Status.FAIL]
    assert "on a GPU of 70 GiB or more" in budget[1].title
    assert found(results, "serve-resources.gpu-facts-unavailable").status is Status.SKIP


def test_vllms_own_defaults_leave_no_room_for_k_15_on_a6000s(tmp_path: Path, toys: tuple[Path, Path]) -> None:
    """Without --max-num-batched-tokens, `vllm serve` on a GPU under 70 GiB gets 2048 batched tokens and 256
    sequences: 14 x 256 draft slots do not fit, and vLLM 0.20.1 refuses to start."""
    spec = json.dumps({"method": "dflash", "model": str(toys[1]), "num_speculative_tokens": 15})
    results = run_checks(tmp_path, argv=["vllm", "serve", str(toys[0]), "-tp", "2", "--speculative-config", spec],
                         vllm="0.20.1", gpu=gpu_fixture("sm86-derived-from-h200.json"))
    f = found(results, "serve-command.token-budget")
    assert f.status is Status.FAIL
    assert f.title.startswith("max_num_batched_tokens 2048 (vLLM's default) leaves no tokens to schedule")


def test_vllm_0_34_caps_dflash_sequences_instead(tmp_path: Path, toys: tuple[Path, Path]) -> None:
    results = run_checks(tmp_path, argv=seed(*toys, tokens="8192"), vllm="0.34.0", gpu=two_h200())
    f = found(results, "serve-command.token-budget")
    assert f.status is Status.WARN
    assert "DFlash caps running sequences at max_num_batched_tokens 8192 // (k + 1 = 16) = 512" in f.title
    tiny = run_checks(tmp_path, argv=seed(*toys, tokens="16"), vllm="0.34.0", gpu=two_h200())
    assert "VllmConfig does not have enough slots" in found(tiny, "serve-command.token-budget").title


def test_vllm_0_29_neither_reserves_draft_slots_nor_caps_sequences(tmp_path: Path, toys: tuple[Path, Path]) -> None:
    """0.28-0.32 schedule max_num_batched_tokens whole and refuse only max_num_batched_tokens <= k (their
    max_num_new_slots_for_drafting for DFlash); the cap of max_num_batched_tokens // (k + 1) came in 0.33."""
    results = run_checks(tmp_path, argv=seed(*toys, tokens="8192"), vllm="0.29.0", gpu=two_h200())
    f = found(results, "serve-command.token-budget")
    assert f.status is Status.PASS and "schedules 8192 tokens per step" in f.title
    tiny = found(run_checks(tmp_path, argv=seed(*toys, tokens="16"), vllm="0.29.0", gpu=two_h200()),
                 "serve-command.token-budget")
    assert tiny.status is Status.WARN and "under 8192" in tiny.title  # 16 > k = 15: vLLM starts, and warns


# ------------------------------------------------------------------------------------ each rule


def test_tp_2_on_the_recorded_single_h200_fails_with_vllms_world_size_message(tmp_path: Path,
                                                                              toys: tuple[Path, Path]) -> None:
    f = found(run_checks(tmp_path, argv=seed(*toys), gpu=gpu_fixture("h200-facts.json")), "serve-resources.world-size")
    assert f.status is Status.FAIL
    assert f.title.startswith("\"World size (2) is larger than the number of available GPUs (1) in this node.\"")


def test_cuda_visible_devices_is_applied_before_counting(tmp_path: Path, toys: tuple[Path, Path]) -> None:
    f = found(run_checks(tmp_path, argv=seed(*toys), gpu=gpu_fixture("h200-cvd-0-7.json")), "serve-resources.world-size")
    assert f.status is Status.FAIL and "CUDA_VISIBLE_DEVICES='0,7'" in f.title


def test_heads_and_kv_heads_against_tensor_parallel_size(tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "target", num_attention_heads=6, num_key_value_heads=3)
    drafter = toy.write_toy_drafter(tmp_path / "drafter", num_attention_heads=6, num_key_value_heads=3)
    spec = json.dumps({"method": "dflash", "model": str(drafter), "num_speculative_tokens": 15})
    results = run_checks(tmp_path, argv=["vllm", "serve", str(target), "-tp", "2", "--speculative-config", spec])
    f = found(results, "serve-command.kv-heads-tp")
    assert f.title.startswith("target: 3 KV heads across --tensor-parallel-size 2")
    results = run_checks(tmp_path, argv=["vllm", "serve", str(target), "-tp", "4", "--speculative-config", spec])
    assert "\"Total number of attention heads (6) must be divisible by tensor parallel size (4).\"" in \
        found(results, "serve-command.heads-tp").title


@pytest.mark.parametrize(("flags", "message"), [
    (["--max-num-batched-tokens", "4096", "--no-enable-chunked-prefill"],
     "max_num_batched_tokens (4096) is smaller than max_model_len (32768) with chunked prefill off"),
    (["--max-num-batched-tokens", "4096", "--max-num-seqs", "8192"],
     "max_num_batched_tokens (4096) must be greater than or equal to max_num_seqs (8192)"),
])
def test_scheduler_limits_fail_exactly_as_vllms_scheduler_config(tmp_path: Path, toys: tuple[Path, Path],
                                                                 flags: list[str], message: str) -> None:
    spec = json.dumps({"method": "dflash", "model": str(toys[1]), "num_speculative_tokens": 15})
    argv = ["vllm", "serve", str(toys[0]), "--max-model-len", "32768", *flags, "--speculative-config", spec]
    f = found(run_checks(tmp_path, argv=argv, gpu=gpu_fixture("h200-facts.json")), "serve-command.scheduler")
    assert f.status is Status.FAIL and message in f.title


def test_chunked_prefill_on_lets_batched_tokens_be_smaller_than_the_model_length(tmp_path: Path,
                                                                                 toys: tuple[Path, Path]) -> None:
    spec = json.dumps({"method": "dflash", "model": str(toys[1]), "num_speculative_tokens": 3})
    argv = ["vllm", "serve", str(toys[0]), "--max-model-len", "32768", "--max-num-batched-tokens", "4096",
            "--speculative-config", spec]
    assert "serve-command.scheduler" not in ids(run_checks(tmp_path, argv=argv, gpu=gpu_fixture("h200-facts.json")),
                                        "serve-command")


def test_max_model_len_past_the_targets_own_limit_fails(tmp_path: Path) -> None:
    target, drafter = toy.write_toy_target(tmp_path / "target"), toy.write_toy_drafter(tmp_path / "drafter")
    f = found(run_checks(tmp_path, argv=seed(target, drafter)), "serve-command.max-model-len")
    assert f.status is Status.FAIL
    assert "--max-model-len 32768 is greater than the target's derived maximum (max_position_embeddings=4096)" \
        in f.title
    assert f.remediation[0].command.endswith(" --max-model-len 4096")


@pytest.mark.parametrize(("spec", "finding_id", "words"), [
    ("{method: dflash}", "serve-command.spec-json", "is not a JSON object"),
    ({"method": "dflash", "model": "DRAFTER"}, "serve-command.spec-k-missing",
     "neither `speculative_token_tree` nor `num_speculative_tokens` was provided"),
    ({"method": "dflash", "model": "DRAFTER", "num_speculative_tokens": 0}, "serve-command.spec-k-invalid",
     "not a positive integer"),
    ({"method": "dflash", "model": "DRAFTER", "num_speculative_tokens": 15, "draft_tensor_parallel_size": 3},
     "serve-command.spec-draft-tp", "neither 1 nor --tensor-parallel-size 2"),
    ({"method": "dflash", "model": "DRAFTER", "num_speculative_tokens": 15, "tensor_parallel_size": 2},
     "serve-command.spec-invalid", "draft_tensor_parallel_size"),
    ({"model": "DRAFTER", "num_speculative_tokens": 15}, "serve-command.spec-method", "loads the drafter as a plain draft model"),
    ({"method": "dflash", "num_speculative_tokens": 15}, "serve-command.spec-model-missing", "has no \"model\""),
])
def test_each_bad_speculative_config_fails_naming_the_flag(tmp_path: Path, toys: tuple[Path, Path],
                                                           spec: Any, finding_id: str, words: str) -> None:
    raw = spec if isinstance(spec, str) else json.dumps(spec).replace("DRAFTER", str(toys[1]))
    argv = ["vllm", "serve", str(toys[0]), "-tp", "2", "--speculative-config", raw]
    f = found(run_checks(tmp_path, argv=argv, vllm="0.20.1"), finding_id)
    assert f.status is Status.FAIL and words in f.title and "--speculative-config" in f.title


def test_dflash_on_a_vllm_without_it_fails(tmp_path: Path, toys: tuple[Path, Path]) -> None:
    f = found(run_checks(tmp_path, argv=seed(*toys), vllm="0.19.1"), "serve-command.spec-method")
    assert "method 'dflash' is not one vLLM 0.19.1 knows" in f.title and "0.20.0" in f.title


def test_a_broken_drafter_fails_the_serve_command_too(tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "target")
    patch_config(target, max_position_embeddings=40960)
    drafter = toy.write_toy_drafter(tmp_path / "drafter", mask_token_id=None)
    f = found(run_checks(tmp_path, argv=seed(target, drafter)), "serve-command.drafter-broken")
    assert "dflash_config.mask_token_id" in f.title


def test_memory_held_by_another_process_fails_naming_it(tmp_path: Path, toys: tuple[Path, Path]) -> None:
    spec = json.dumps({"method": "dflash", "model": str(toys[1]), "num_speculative_tokens": 15})
    argv = ["vllm", "serve", str(toys[0]), "--gpu-memory-utilization", "0.99", "--speculative-config", spec]
    f = found(run_checks(tmp_path, argv=argv, gpu=gpu_fixture("h200-memory-held.json")), "serve-resources.memory-held")
    assert f.status is Status.FAIL
    assert "136.29 GiB of 139.80 GiB free, below --gpu-memory-utilization 0.99 = 138.40 GiB" in f.title
    assert "python3 (pid" in f.title and "3.51 GiB" in f.title
    # at vLLM's default 0.92 the same GPU has room
    argv = ["vllm", "serve", str(toys[0]), "--speculative-config", spec]
    assert found(run_checks(tmp_path, argv=argv, gpu=gpu_fixture("h200-memory-held.json")),
                 "serve-resources.memory").status is Status.PASS


def test_weights_and_kv_cache_against_the_gpu_memory_given_by_hand(tmp_path: Path, toys: tuple[Path, Path]) -> None:
    spec = json.dumps({"method": "dflash", "model": str(toys[1]), "num_speculative_tokens": 15})
    argv = ["vllm", "serve", str(toys[0]), "--max-model-len", "4096", "--speculative-config", spec]
    weights = found(run_checks(tmp_path, argv=argv, gpus=1, gpu_memory=0.0002), "serve-resources.memory-weights")
    assert "No available memory for the cache blocks" in weights.title
    kv = found(run_checks(tmp_path, argv=argv, gpus=1, gpu_memory=0.002), "serve-resources.kv-cache")
    assert "one 4096-token sequence needs" in kv.title
    assert " --max-model-len " in kv.remediation[0].command and kv.remediation[0].command.startswith("vllm serve ")


def test_a_taken_port_fails_and_a_shared_reuseport_listener_is_told_apart(tmp_path: Path) -> None:
    with socket.socket() as plain:
        plain.bind(("127.0.0.1", 0))
        plain.listen()
        facts = port_facts("127.0.0.1", plain.getsockname()[1])
        assert facts["free"] is False and facts["errno"] == "EADDRINUSE" and facts["shared_listener"] is False
    with socket.socket() as shared:
        shared.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        shared.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        shared.bind(("127.0.0.1", 0))
        shared.listen()
        port = shared.getsockname()[1]
        assert port_facts("127.0.0.1", port)["shared_listener"] is True
        results = run_checks(tmp_path, argv=["vllm", "serve", "m", "--host", "127.0.0.1", "--port", str(port)])
        f = found(results, "serve-resources.port-in-use")
        assert f.status is Status.FAIL and "vLLM would share the port with it" in f.title


def test_not_a_serve_command_and_a_missing_model_fail(tmp_path: Path) -> None:
    assert found(run_checks(tmp_path, argv=["vllm", "chat"]), "serve-command.not-a-serve-command").status is Status.FAIL
    assert found(run_checks(tmp_path, argv=["vllm", "serve", "--port", str(free_port())]),
                 "serve-command.model-missing").status is Status.FAIL


# ----------------------------------------------------------------------- vLLM's own parser (probe)


def _args_facts(python: Path, argv: Sequence[str], cwd: Path) -> dict[str, Any]:
    """The serve_args section as the report saves it."""
    ctx = Context(python=str(python), cwd=str(cwd), timeout_s=120, options={"serve": {"argv": list(argv)}})
    facts: dict[str, Any] = section_json(collect_args(ctx, {})["serve_args"])
    return facts


@pytest.mark.slow
def test_without_vllm_in_the_target_the_subset_reads_the_command_and_says_why(tmp_path: Path) -> None:
    env = make_venv(tmp_path)
    facts = _args_facts(env.python, ["vllm", "serve", "m", "-tp", "2"], tmp_path)
    assert facts["parser"] == "subset" and facts["fields"]["tensor_parallel_size"] == 2
    assert facts["vllm_parser"]["tried"] and not facts["vllm_parser"]["available"]
    assert facts["vllm_parser"]["import_error"]["message"] == "No module named 'vllm'"


@pytest.mark.slow
def test_the_real_vllm_wheel_without_its_torch_falls_back_with_the_real_import_error(tmp_path: Path) -> None:
    env = make_venv(tmp_path)
    add_to_path(env, vllm_site("0.20.1"))
    facts = _args_facts(env.python, ["vllm", "serve", "m"], tmp_path)
    assert facts["parser"] == "subset"
    assert facts["vllm_parser"]["import_error"]["type"] == "ModuleNotFoundError"
    assert "torch" in facts["vllm_parser"]["import_error"]["message"]


@pytest.mark.slow
def test_the_cli_passes_the_seed_on_an_env_with_the_real_vllm_0_20_1(doctor: Doctor, tmp_path: Path,
                                                                    toys: tuple[Path, Path]) -> None:
    env = make_venv(tmp_path)
    add_to_path(env, vllm_site("0.20.1"))
    command = seed(*toys, "--port", str(free_port()))
    report, proc = serve_report(doctor, "--python", str(env.python), "--only", "models,serve", "--gpus", "2",
                                "--gpu-memory", "48", "--target-arch", "sm_86", command=command)
    assert proc.returncode == 0, [(f["id"], f["title"]) for f in findings_of(report) if f["status"] == "fail"]
    assert "vLLM 0.20.1 on sm_86 picks FLASH_ATTN" in finding(report, "drafter-attention.backend")["title"]
    parsed = finding(report, "serve-command.parsed")["title"]
    assert "documented subset" in parsed and "No module named 'torch'" in parsed
    report, proc = serve_report(doctor, "--python", str(env.python), "--only", "models,serve", "--gpus", "2",
                                "--gpu-memory", "141", command=seed(*toys, tokens="8192"))
    assert proc.returncode == 1
    assert finding(report, "serve-command.token-budget")["status"] == "fail"


def test_serve_without_a_command_is_a_usage_error(doctor: Doctor) -> None:
    proc = doctor("serve", "--gpus", "2")
    assert proc.returncode == 2 and "give the serve command after --" in proc.stderr


def _free_form_fields(shape: type, seen: set[type] | None = None) -> list[str]:
    """Every field of `shape` and of the shapes nested in it that is declared `Any` (free-form)."""
    import dataclasses
    import typing

    from dflash_doctor.facts.shape import Shape

    seen = seen if seen is not None else set()
    if shape in seen:
        return []
    seen.add(shape)
    found = []
    for field in dataclasses.fields(shape):
        hint = typing.get_type_hints(shape)[field.name]
        if "Any" in str(hint):
            found.append(f"{shape.__name__}.{field.name}")
        stack = [hint]
        while stack:
            tp = stack.pop()
            if isinstance(tp, type) and issubclass(tp, Shape):
                found += _free_form_fields(tp, seen)
            stack += list(typing.get_args(tp))
    return found


def test_the_serve_facts_are_typed_to_the_leaves_but_the_users_own_speculative_config() -> None:
    from dflash_doctor.facts.serve.serve_shapes import ServeArgs, VllmDflash

    assert _free_form_fields(ServeArgs) == ["ServeFields.speculative_config", "SpeculativeConfig.value"]
    assert _free_form_fields(VllmDflash) == []


@pytest.mark.parametrize(("section", "path", "value", "where"), [
    ("serve_args", ("fields", "max_model_len"), "32768", "fields.max_model_len"),
    ("serve_args", ("vllm_parser", "process"), {"returncode": "0"}, "vllm_parser.process.returncode"),
])
def test_a_saved_report_whose_serve_facts_have_a_mistyped_leaf_is_an_error_naming_the_field(
        section: str, path: tuple[str, ...], value: Any, where: str) -> None:
    """The recorded serve report (fixtures/h200/report-serve-toy.json) judges; the same facts with one leaf of
    the wrong type are the serve-command check's error naming that leaf, not a verdict on a wrong value."""
    from dflash_doctor.checks.serve import ServeCommandCheck
    from dflash_doctor.report import document as report_module
    from dflash_doctor.runner import judge

    data = json.loads((Path(__file__).resolve().parent.parent / "fixtures/h200/report-serve-toy.json").read_text())
    sections = report_module.sections_of(data)
    [result] = judge([ServeCommandCheck()], sections)
    assert result.status is not Status.ERROR and all(f.id.startswith("serve-command.") for f in result.findings)
    broken = copy.deepcopy(sections)
    node = broken[section]
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    [result] = judge([ServeCommandCheck()], broken)
    assert result.status is Status.ERROR
    [error] = result.findings
    assert error.id == "doctor.facts-unavailable" and f"{where}: expected" in error.detail, error.detail


@pytest.mark.parametrize(("path", "value", "where"), [
    (("pairing", "runner"), {"kind": 2}, "pairing.runner.kind"),
    (("markers", "spec_budget_a"), {"found": "yes"}, "markers.spec_budget_a.found"),
    (("attention", "backends", "FLASH_ATTN", "capability"), {"9.0": "yes"}, "attention.backends.FLASH_ATTN.capability.9.0"),
])
def test_recorded_vllm_facts_load_typed_and_a_mistyped_leaf_names_its_field(
        path: tuple[str, ...], value: Any, where: str) -> None:
    """vLLM 0.20.1's facts as recorded on the H200 (fixtures/engine/01-healthy.json) load through the typed shape;
    one leaf of the wrong type is refused naming that leaf."""
    from dflash_doctor.facts.serve.serve_shapes import VllmDflash
    from dflash_doctor.facts.shape import ShapeError
    from dflash_doctor.report import document as report_module

    data = json.loads((Path(__file__).resolve().parent.parent / "fixtures/engine/01-healthy.json").read_text())
    raw = report_module.sections_of(data["report"])["vllm_dflash"]
    vllm = VllmDflash.from_json(raw)
    assert vllm.pairing.runner is not None and vllm.pairing.runner.kind == raw["pairing"]["runner"]["kind"]
    assert vllm.attention is not None and vllm.attention.backends["FLASH_ATTN"].capability["9.0"] is True
    assert vllm.markers["spec_budget_a"].found == raw["markers"]["spec_budget_a"]["found"]
    broken = copy.deepcopy(raw)
    node = broken
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(ShapeError, match=f"{where}: expected"):
        VllmDflash.from_json(broken)


def test_every_serve_finding_is_built_from_its_code_object() -> None:
    """Each serve finding id is one grep from its explanation: the ids are written only in checks/serve/codes.py,
    and every finding is built by its Code (no `Finding(id=...)`, no id built from a check id)."""
    from dflash_doctor.checks.serve import CODES, ServeCommandCheck, ServeResourcesCheck
    from dflash_doctor.checks.serve import codes as serve_codes

    package = Path(serve_codes.__file__).parent
    for module in sorted(package.glob("*.py")):
        if module.name == "codes.py":
            continue
        text = module.read_text()
        assert "Finding(" not in text and 'id=f"' not in text, module.name
        assert '"serve-command.' not in text and '"serve-resources.' not in text, module.name
    assert ServeCommandCheck.codes + ServeResourcesCheck.codes == CODES
    assert all(c.id.startswith(f"{check.id}.") for check in (ServeCommandCheck, ServeResourcesCheck)
               for c in check.codes)
