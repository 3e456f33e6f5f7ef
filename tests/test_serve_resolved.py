"""The forms of a `vllm serve` command vLLM reads, read the same way by the doctor's own reading (the fallback
where vLLM's parser cannot run): --spec-method/--spec-model/--spec-tokens merged as each release's
`create_speculative_config` merges them, `--config FILE.yaml`, a flag's prefix; and the rules judging what vLLM's
validation resolved where it ran. Real toy models (tests/toymodels.py) and the real vLLM source of the release
named (tests/vllm_sources.py); the release's own merge is held to the doctor's in test_release_matrix.py."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("safetensors")

from test_models_check import found, patch_config, run_checks

from dflash_doctor.facts.serve.serve_args import parse_serve_command
from dflash_doctor.model import Status


def ids(results: dict[str, Any]) -> set[str]:
    return {f.id for r in results.values() for f in r.findings}


try:
    import toymodels as toy
except ImportError:  # tests/ imported as a package
    from tests import toymodels as toy  # type: ignore[no-redef]


@pytest.fixture
def past_the_target(tmp_path: Path) -> tuple[Path, Path]:
    """A toy target of 4 layers and a drafter whose target_layer_ids name layer 9."""
    target = toy.write_toy_target(tmp_path / "target")
    patch_config(target, max_position_embeddings=40960)
    return target, toy.write_toy_drafter(tmp_path / "drafter", target_layer_ids=(1, 9))


def _spec_flags(target: Path, drafter: Path) -> list[str]:
    return ["vllm", "serve", str(target), "--max-num-batched-tokens", "32768", "--spec-method", "dflash",
            "--spec-model", str(drafter), "--spec-tokens", "15"]


def _json_form(target: Path, drafter: Path) -> list[str]:
    return ["vllm", "serve", str(target), "--max-num-batched-tokens", "32768", "--speculative-config",
            json.dumps({"method": "dflash", "model": str(drafter), "num_speculative_tokens": 15})]


def test_spec_flags_read_the_drafter_and_fail_layer_ids_past_the_target_as_the_json_form_does(
        tmp_path: Path, past_the_target: tuple[Path, Path]) -> None:
    target, drafter = past_the_target
    by_flags = run_checks(tmp_path, argv=_spec_flags(target, drafter), vllm="0.24.0")
    by_json = run_checks(tmp_path, argv=_json_form(target, drafter), vllm="0.24.0")
    for results in (by_flags, by_json):
        layer_ids = found(results, "drafter.layer-ids-invalid")
        assert layer_ids.status is Status.FAIL and "[9] outside [0, 4)" in layer_ids.title
        assert found(results, "serve-command.drafter-broken").status is Status.FAIL
    assert "serve-command.flags-unchecked" not in ids(by_flags)
    assert "serve-command.spec-flags-conflict" not in ids(by_flags)
    assert "serve-command.spec-flags-unknown" not in ids(by_flags)


def test_spec_model_beside_the_json_model_fails_with_vllms_words_and_its_fix_clears_it(
        tmp_path: Path, past_the_target: tuple[Path, Path]) -> None:
    target = past_the_target[0]
    drafter = toy.write_toy_drafter(tmp_path / "good-drafter")
    argv = [*_json_form(target, drafter), "--spec-model", str(drafter)]
    f = found(run_checks(tmp_path, argv=argv, vllm="0.34.0"), "serve-command.spec-flags-conflict")
    assert f.status is Status.FAIL
    assert f.title.startswith("--spec-model and --speculative-config['model'] are mutually exclusive: vLLM 0.22.0 to "
                              "0.34.0 (and the installed vLLM 0.34.0) stop")
    fixed = shlex.split(f.remediation[0].command)
    assert "--spec-model" not in fixed and parse_serve_command(fixed)["speculative_config"]["conflict"] is None
    assert "serve-command.spec-flags-conflict" not in ids(run_checks(tmp_path, argv=fixed, vllm="0.34.0"))


def test_spec_flags_fail_on_a_release_without_them_and_the_json_fix_reads_the_same_drafter(
        tmp_path: Path, past_the_target: tuple[Path, Path]) -> None:
    target = past_the_target[0]
    drafter = toy.write_toy_drafter(tmp_path / "good-drafter")
    f = found(run_checks(tmp_path, argv=_spec_flags(target, drafter), vllm="0.20.1"), "serve-command.spec-flags-unknown")
    assert f.status is Status.FAIL and "they first shipped in vLLM 0.22.0" in f.title
    fixed = shlex.split(f.remediation[0].command)
    assert not any(w.startswith("--spec-") for w in fixed)
    again = run_checks(tmp_path, argv=fixed, vllm="0.20.1")
    assert "serve-command.spec-flags-unknown" not in ids(again)
    assert found(again, "serve-command.spec-ok").status is Status.PASS
    # the control: 0.22.0, the first release with the flags, takes them
    assert "serve-command.spec-flags-unknown" not in ids(run_checks(tmp_path, argv=_spec_flags(target, drafter),
                                                                     vllm="0.22.1"))


def test_a_config_file_and_a_flags_prefix_are_read_as_vllm_reads_them(
        tmp_path: Path, past_the_target: tuple[Path, Path]) -> None:
    target, drafter = past_the_target
    config = tmp_path / "serve.yaml"
    config.write_text(f"tensor-parallel-size: 2\nspeculative-config:\n  method: dflash\n  model: {drafter}\n"
                      "  num_speculative_tokens: 15\nmax_num_batched_tokens: 32768\n")
    argv = ["vllm", "serve", str(target), "--config", "serve.yaml", "--max-model", "8192"]
    facts = parse_serve_command(argv, str(tmp_path))
    assert facts["fields"]["tensor_parallel_size"] == 2 and facts["fields"]["max_model_len"] == 8192
    assert facts["abbreviated"] == {"--max-model": "--max-model-len"} and not facts["unknown_flags"]
    assert facts["args"] == argv[2:]  # what vLLM's own parser is given: the command as it is
    results = run_checks(tmp_path, argv=argv, vllm="0.24.0")
    assert found(results, "drafter.layer-ids-invalid").status is Status.FAIL
    assert "serve-command.flags-unchecked" not in ids(results)
    # the command's own flags come after the file's, and win (vLLM: "cli > config > defaults")
    assert parse_serve_command([*argv, "-tp", "4"], str(tmp_path))["fields"]["tensor_parallel_size"] == 4


def test_a_config_file_vllm_refuses_is_a_flag_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "serve.json").write_text("{}")
    facts = parse_serve_command(["vllm", "serve", "m", "--config", "serve.json"], str(tmp_path))
    assert facts["errors"] == [{"flag": "--config", "message": "--config: Config file must be of a yaml/yml type. "
                                                                "json supplied"}]
    missing = parse_serve_command(["vllm", "serve", "m", "--config", "absent.yaml"], str(tmp_path))
    assert "Unable to read the config file at absent.yaml" in missing["errors"][0]["message"]
    ambiguous = parse_serve_command(["vllm", "serve", "m", "--spec-mo", "d", "--spec-m", "x"])
    assert ambiguous["fields"]["spec_model"] == "d"
    assert ambiguous["errors"] == [{"flag": "--spec-m", "message": "ambiguous option: --spec-m could match "
                                                                   "--spec-method, --spec-model"}]


@pytest.mark.parametrize("words", [
    ["-sc", '{"model": "d"}', "--spec-model", "e"],
    ['-sc={"model": "d"}', "--spec_model=e"],
    ["--speculative-config.model", "d", "--spec-mod", "e"],
    ["--speculative_config.model=d", "--spec-model", "e"],
])
def test_every_spelling_of_a_key_given_twice_is_vllms_mutually_exclusive_error(words: list[str]) -> None:
    spec = parse_serve_command(["vllm", "serve", "m", *words])["speculative_config"]
    assert spec["conflict"] == "--spec-model and --speculative-config['model'] are mutually exclusive"
    assert spec["value"] == {"model": "d"}
