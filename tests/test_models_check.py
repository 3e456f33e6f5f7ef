"""The model layer on real files: a 4-layer toy Qwen3 target and a 1-layer DFlash drafter written with the
real `safetensors` library (tests/toymodels.py), and each break of them; the rules that depend on the vLLM
version judged against the real vLLM source of that version (sdists from PyPI, tests/vllm_sources.py)."""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("safetensors")

from vllm_sources import vllm_source

from dflash_doctor.check import Context
from dflash_doctor.checks.models import DrafterAttentionCheck, DrafterCheck, ModelFilesCheck
from dflash_doctor.checks.serve import ServeCommandCheck, ServeResourcesCheck
from dflash_doctor.registry import CODES
from dflash_doctor.facts.models import models as models_collector
from dflash_doctor.facts.serve.serve import collect_args, head_sizes_of, read_vllm_dflash
from dflash_doctor.facts.serve.vllm_pairing import target_architectures
from dflash_doctor.knowledge.dflash import uniform_layer_ids
from dflash_doctor.model import CheckResult, Finding, Status
from dflash_doctor.runner import judge

try:
    import toymodels as toy
except ImportError:  # tests/ imported as a package
    from tests import toymodels as toy  # type: ignore[no-redef]

REPO = Path(__file__).resolve().parent.parent
GPU_FIXTURES = REPO / "fixtures" / "gpu"
CHECKS = (ModelFilesCheck(), DrafterCheck(), DrafterAttentionCheck(), ServeCommandCheck(), ServeResourcesCheck())


# --------------------------------------------------------------------------------------- helpers


@functools.cache
def vllm_facts(version: str, head_sizes: tuple[int, ...], archs: tuple[str, ...] = ()) -> dict[str, Any]:
    """What the real vLLM `version` accepts for DFlash, read from its source as the collector reads it."""
    return {"installed": True, "version": version, **read_vllm_dflash(str(vllm_source(version)), head_sizes, archs)}


def gpu_fixture(name: str) -> dict[str, Any]:
    """A recorded (or labelled derived) `gpu` section from fixtures/gpu/."""
    data = json.loads((GPU_FIXTURES / name).read_text())
    section: dict[str, Any] = data["sections"]["gpu"]
    return section


def run_checks(cwd: Path, *, target: Path | None = None, drafter: Path | None = None,
               argv: Sequence[str] | None = None, vllm: str | None = "0.22.0", gpu: Mapping[str, Any] | None = None,
               gpus: int | None = None, gpu_memory: float | None = None, target_archs: Sequence[str] = (),
               vllm_version: str | None = None) -> dict[str, CheckResult]:
    """The real collectors on real files (vLLM's parser off: it cannot import here), then judgement.
    `vllm_version` labels the source of `vllm` as another release (DERIVED: for a rule keyed on a release whose
    sdist is not in the test cache; the test says so)."""
    options: dict[str, Any] = {}
    if argv is not None:
        options["serve"] = {"argv": list(argv), "vllm_parser": False, "gpus": gpus, "gpu_memory_gib": gpu_memory}
    else:
        options.update({"model": str(target) if target else None, "drafter": str(drafter) if drafter else None})
        if gpus or gpu_memory:
            options["serve"] = {"gpus": gpus, "gpu_memory_gib": gpu_memory}
    ctx = Context(python=sys.executable, cwd=str(cwd), target_archs=tuple(target_archs), options=options)
    sections: dict[str, Any] = {}
    sections.update(collect_args(ctx, {}))
    sections.update(models_collector.collect(ctx, sections))
    if vllm is not None:
        sections["vllm_dflash"] = vllm_facts(vllm, tuple(head_sizes_of(sections["models"])),
                                             tuple(target_architectures(sections["models"])))
        if vllm_version is not None:
            sections["vllm_dflash"] = {**sections["vllm_dflash"], "version": vllm_version}
    else:
        sections["vllm_dflash"] = {"installed": False, "version": None, "root": None}
    if gpu is not None:
        sections["gpu"] = dict(gpu)
    results = judge(CHECKS, sections)
    for result in results:  # the meta-rule: every id a check emits is in the code table, with an explanation
        for f in result.findings:
            assert f.id in CODES and CODES[f.id].explanation, f.id
    return {r.id: r for r in results}


def found(results: Mapping[str, CheckResult], finding_id: str) -> Finding:
    hits = [f for r in results.values() for f in r.findings if f.id == finding_id]
    assert hits, f"no {finding_id} in {[(f.id, f.title) for r in results.values() for f in r.findings]}"
    return hits[0]


def ids(results: Mapping[str, CheckResult], check: str) -> list[str]:
    return [f.id for f in results[check].findings]


def patch_config(directory: Path, **changes: Any) -> None:
    """Edit a real config.json in place, as a hand-written config would differ."""
    path = directory / "config.json"
    config = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None and key.startswith("drop_"):
            config.pop(key[5:], None)
        else:
            config[key] = value
    path.write_text(json.dumps(config, indent=2))


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    return toy.write_toy_target(tmp_path / "target"), toy.write_toy_drafter(tmp_path / "drafter")


# ----------------------------------------------------------------------------------- the good pair


def test_matching_toy_target_and_drafter_pass_every_model_rule(tmp_path: Path, pair: tuple[Path, Path]) -> None:
    target, drafter = pair
    results = run_checks(tmp_path, target=target, drafter=drafter, vllm="0.22.0")
    assert results["model-files"].status is Status.PASS
    assert results["drafter"].status is Status.PASS
    ok = found(results, "drafter.ok")
    assert "target_layer_ids [1, 2]" in ok.title and "fc.weight [64, 128] = 2 x 64" in ok.title
    assert "mask_token_id 500" in ok.title and "14 tensors match config.json" in ok.title


def test_a_plain_run_without_model_paths_skips_every_model_check(tmp_path: Path) -> None:
    results = run_checks(tmp_path)
    for check in ("model-files", "drafter", "drafter-attention"):
        assert results[check].status is Status.SKIP
        assert results[check].findings[0].id == f"{check}.not-given"
    assert results["serve-command"].findings[0].id == "serve-command.not-given"


def test_qwen3_5_style_nested_text_config_is_read_for_the_target(tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "target", nested_text_config=True)
    drafter = toy.write_toy_drafter(tmp_path / "drafter")
    results = run_checks(tmp_path, target=target, drafter=drafter)
    assert results["drafter"].status is Status.PASS, ids(results, "drafter")


def test_vllm_0_20_reads_the_layer_ids_one_layer_early_and_says_so(tmp_path: Path, pair: tuple[Path, Path]) -> None:
    results = run_checks(tmp_path, target=pair[0], drafter=pair[1], vllm="0.20.1")
    offset = found(results, "drafter.layer-ids-vllm-offset")
    assert offset.status is Status.WARN and "vLLM 0.20.1" in offset.title
    assert results["drafter"].status is Status.WARN
    # 0.22.0 adds the 1: no warning there
    assert "drafter.layer-ids-vllm-offset" not in ids(run_checks(tmp_path, target=pair[0], drafter=pair[1],
                                                                 vllm="0.22.0"), "drafter")


# --------------------------------------------------------------------------------------- each break


def test_layer_ids_past_the_target_depth_fail_naming_the_config(tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "target")
    drafter = toy.write_toy_drafter(tmp_path / "drafter", target_layer_ids=(1, 9))
    f = found(run_checks(tmp_path, target=target, drafter=drafter), "drafter.layer-ids-invalid")
    assert f.status is Status.FAIL
    assert str(drafter / "config.json") in f.title and "[9] outside [0, 4)" in f.title
    assert "publisher's own config.json" in f.remediation[0].command


def test_unordered_or_repeated_layer_ids_fail(tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "target")
    drafter = toy.write_toy_drafter(tmp_path / "drafter", target_layer_ids=(2, 2))
    assert "not strictly increasing (repeats)" in found(run_checks(tmp_path, target=target, drafter=drafter),
                                                        "drafter.layer-ids-invalid").title


def test_missing_layer_ids_fail_and_are_never_computed(tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "target")
    drafter = toy.write_toy_drafter(tmp_path / "drafter", target_layer_ids=None)
    f = found(run_checks(tmp_path, target=target, drafter=drafter), "drafter.layer-ids-missing")
    assert f.status is Status.FAIL and "no dflash_config.target_layer_ids" in f.title


def test_layer_ids_equal_to_the_uniform_formula_warn_that_they_look_computed(tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "target", layers=36)
    guessed = uniform_layer_ids(36, 5)
    assert guessed == [1, 9, 17, 25, 33]  # the formula as z-lab wrote it (dflash.md: a 36-layer Qwen3, 5 layers)
    drafter = toy.write_toy_drafter(tmp_path / "drafter", layers=5, target_layer_ids=guessed, num_target_layers=36)
    f = found(run_checks(tmp_path, target=target, drafter=drafter), "drafter.layer-ids-heuristic")
    assert f.status is Status.WARN and "look computed, not trained" in f.title
    assert "z-lab/dflash#156" in f.detail


def test_wrong_fc_width_fails_naming_the_safetensors_file(tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "target")
    drafter = toy.write_toy_drafter(tmp_path / "drafter", fc_width=3 * 64)
    f = found(run_checks(tmp_path, target=target, drafter=drafter), "drafter.fc-width")
    assert f.status is Status.FAIL
    assert f"{drafter}/model.safetensors: fc.weight is [64, 192]" in f.title
    assert "[64, 128] = [hidden_size, 2 target_layer_ids x 64]" in f.title


def test_missing_mask_token_fails_with_vllms_own_words(tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "target")
    drafter = toy.write_toy_drafter(tmp_path / "drafter", mask_token_id=None)
    f = found(run_checks(tmp_path, target=target, drafter=drafter), "drafter.mask-token-missing")
    assert f.status is Status.FAIL and str(drafter / "config.json") in f.title
    assert "`dflash_config.mask_token_id` specified in its config.json" in f.title


def test_mask_token_past_the_target_vocabulary_fails(tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "target")
    drafter = toy.write_toy_drafter(tmp_path / "drafter", mask_token_id=512)
    f = found(run_checks(tmp_path, target=target, drafter=drafter), "drafter.mask-token-out-of-vocab")
    assert "mask_token_id 512 is outside the target's vocabulary (vocab_size 512)" in f.title


def test_top_level_mask_token_is_accepted_by_0_34_only(tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "target")
    drafter = toy.write_toy_drafter(tmp_path / "drafter", mask_token_id=None, config_overrides={"mask_token_id": 500})
    assert found(run_checks(tmp_path, target=target, drafter=drafter, vllm="0.34.0"),
                 "drafter.mask-token-top-level").status is Status.WARN
    assert "which vLLM 0.22.0 does not read" in found(run_checks(tmp_path, target=target, drafter=drafter),
                                                      "drafter.mask-token-missing").title


def test_vocab_mismatch_fails(tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "target")
    drafter = toy.write_toy_drafter(tmp_path / "drafter", vocab_size=1024)
    f = found(run_checks(tmp_path, target=target, drafter=drafter), "drafter.vocab-mismatch")
    assert "vocab_size 1024 differs from the target's 512" in f.title


def test_hidden_size_of_another_model_fails(tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "target")
    drafter = toy.write_toy_drafter(tmp_path / "drafter", hidden_size=128, num_attention_heads=8, num_key_value_heads=4)
    f = found(run_checks(tmp_path, target=target, drafter=drafter), "drafter.hidden-size-mismatch")
    assert "hidden_size 128 differs from the target's 64" in f.title


def test_a_config_written_for_another_geometry_fails_on_the_tensor_shapes(tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "target")
    drafter = toy.write_toy_drafter(tmp_path / "drafter", config_overrides={"intermediate_size": 256})
    results = run_checks(tmp_path, target=target, drafter=drafter)
    titles = [f.title for f in results["drafter"].findings if f.id == "drafter.tensor-shape"]
    assert len(titles) == 3  # gate, up and down projections
    assert any("layers.0.mlp.gate_proj.weight is [128, 64]" in t and "config.json implies [256, 64]" in t
               for t in titles)


def test_missing_and_unexpected_tensors_fail(tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "target")
    drafter = toy.write_toy_drafter(tmp_path / "drafter", drop_tensors=["layers.0.self_attn.k_norm.weight"],
                                    extra_tensors={"layers.0.self_attn.rotary.inv_freq": [8]})
    results = run_checks(tmp_path, target=target, drafter=drafter)
    assert "layers.0.self_attn.k_norm.weight" in found(results, "drafter.tensor-missing").title
    assert "layers.0.self_attn.rotary.inv_freq" in found(results, "drafter.tensor-unexpected").title


def test_a_mask_hidden_tensor_fails_with_vllms_assert(tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "target")
    drafter = toy.write_toy_drafter(tmp_path / "drafter", extra_tensors={"mask_hidden": [64]})
    f = found(run_checks(tmp_path, target=target, drafter=drafter), "drafter.mask-hidden")
    assert "DFlash should use mask_token_id" in f.title


def test_tensors_saved_with_a_model_prefix_fail(tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "target")
    drafter = toy.write_toy_drafter(tmp_path / "drafter", extra_tensors={"model.norm.weight": [64]})
    assert "model.norm.weight" in found(run_checks(tmp_path, target=target, drafter=drafter),
                                        "drafter.tensor-prefix").title


def test_an_architecture_outside_the_registry_fails_and_dflash_prefix_is_applied(tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "target")
    drafter = toy.write_toy_drafter(tmp_path / "drafter", architectures=("LlamaForCausalLM",))
    f = found(run_checks(tmp_path, target=target, drafter=drafter, vllm="0.34.0"), "drafter.architecture-unknown")
    assert "looked up as ['DFlashLlamaForCausalLM']" in f.title and "DFlashDraftModel" in f.title
    # a name vLLM prefixes with DFlash into a registered one is accepted (0.34.0 registers DFlashLagunaForCausalLM)
    other = toy.write_toy_drafter(tmp_path / "laguna", architectures=("LagunaForCausalLM",))
    assert "drafter.architecture-unknown" not in ids(run_checks(tmp_path, target=target, drafter=other,
                                                                vllm="0.34.0"), "drafter")


def test_vllm_before_0_20_has_no_dflash(tmp_path: Path, pair: tuple[Path, Path]) -> None:
    f = found(run_checks(tmp_path, target=pair[0], drafter=pair[1], vllm="0.19.1"), "drafter.vllm-without-dflash")
    assert "vLLM 0.19.1 has no DFlash support" in f.title


def test_target_hidden_size_null_breaks_0_20_to_0_24_only(tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "target")
    drafter = toy.write_toy_drafter(tmp_path / "drafter", config_overrides={"target_hidden_size": None})
    assert found(run_checks(tmp_path, target=target, drafter=drafter, vllm="0.24.0"),
                 "drafter.target-hidden-size-null").status is Status.FAIL
    assert "drafter.target-hidden-size-null" not in ids(run_checks(tmp_path, target=target, drafter=drafter,
                                                                   vllm="0.34.0"), "drafter")


def test_sliding_layers_without_a_window_fail_on_0_34_and_are_ignored_by_0_20(tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "target")
    drafter = toy.write_toy_drafter(tmp_path / "drafter", config_overrides={"layer_types": ["sliding_attention"]})
    f = found(run_checks(tmp_path, target=target, drafter=drafter, vllm="0.34.0"), "drafter.sliding-window-missing")
    assert f.status is Status.FAIL and "DFlash sliding attention requires a window size" in f.title
    old = found(run_checks(tmp_path, target=target, drafter=drafter, vllm="0.20.1"), "drafter.sliding-ignored")
    assert old.status is Status.WARN and "run full attention" in old.title


def test_sample_from_anchor_is_refused_by_0_34(tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "target")
    drafter = toy.write_toy_drafter(tmp_path / "drafter")
    config = json.loads((drafter / "config.json").read_text())
    config["dflash_config"]["sample_from_anchor"] = True
    (drafter / "config.json").write_text(json.dumps(config))
    f = found(run_checks(tmp_path, target=target, drafter=drafter, vllm="0.34.0"), "drafter.sample-from-anchor")
    assert f.status is Status.FAIL and "sample_from_anchor=True is not supported for DFlash" in f.title


def test_num_speculative_tokens_past_the_block_warns(tmp_path: Path, pair: tuple[Path, Path]) -> None:
    argv = ["vllm", "serve", str(pair[0]), "--speculative-config",
            json.dumps({"method": "dflash", "model": str(pair[1]), "num_speculative_tokens": 16})]
    f = found(run_checks(tmp_path, argv=argv), "drafter.block-size")
    assert f.status is Status.WARN and "above block_size - 1 = 15" in f.title
    assert '"num_speculative_tokens": 15' in f.remediation[0].command


# ---------------------------------------------------------------------------------- broken files


def test_truncated_target_shard_fails_naming_the_file(tmp_path: Path, pair: tuple[Path, Path]) -> None:
    shard = pair[0] / "model-00002-of-00002.safetensors"
    toy.truncate_by(shard, 100)
    f = found(run_checks(tmp_path, target=pair[0], drafter=pair[1]), "model-files.weights-broken")
    assert f.status is Status.FAIL and f.title.startswith(f"target: {shard}: file is")
    assert "100 bytes missing" in f.title and "download" in f.detail


def test_header_length_past_the_end_fails(tmp_path: Path, pair: tuple[Path, Path]) -> None:
    shard = pair[1] / "model.safetensors"
    toy.set_header_length(shard, os.path.getsize(shard) + 10)
    f = found(run_checks(tmp_path, target=pair[0], drafter=pair[1]), "model-files.weights-broken")
    assert f.evidence["kind"] == "header-past-eof" and str(shard) in f.title


def test_a_200_mb_header_claim_fails_before_anything_is_read(tmp_path: Path, pair: tuple[Path, Path]) -> None:
    shard = pair[1] / "model.safetensors"
    toy.set_header_length(shard, 200_000_000)
    f = found(run_checks(tmp_path, target=pair[0], drafter=pair[1]), "model-files.weights-broken")
    assert f.evidence["kind"] == "header-too-large" and "100 MB" in f.detail


def test_overlapping_offsets_fail(tmp_path: Path, pair: tuple[Path, Path]) -> None:
    shard = pair[1] / "model.safetensors"
    shard.unlink()
    toy.write_raw_safetensors(shard, {"fc.weight": {"dtype": "F16", "shape": [2, 4], "data_offsets": [0, 16]},
                                      "norm.weight": {"dtype": "F16", "shape": [4], "data_offsets": [8, 16]}})
    f = found(run_checks(tmp_path, target=pair[0], drafter=pair[1]), "model-files.weights-broken")
    assert f.evidence["kind"] == "overlap" and "overlaps 'fc.weight'" in f.title


def test_a_missing_shard_fails_and_says_which(tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "target", omit_shards=[1])
    drafter = toy.write_toy_drafter(tmp_path / "drafter")
    f = found(run_checks(tmp_path, target=target, drafter=drafter), "model-files.index-mismatch")
    assert "model-00002-of-00002.safetensors" in f.title and "not in the directory" in f.title


def test_a_missing_config_blocks_the_drafter_comparison(tmp_path: Path, pair: tuple[Path, Path]) -> None:
    (pair[1] / "config.json").unlink()
    results = run_checks(tmp_path, target=pair[0], drafter=pair[1])
    assert found(results, "model-files.config-broken").status is Status.FAIL
    assert results["drafter"].findings[0].id == "drafter.not-judged"


def test_a_missing_directory_fails_and_a_repo_id_is_looked_up_in_the_hf_cache(
        tmp_path: Path, pair: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    results = run_checks(tmp_path, target=tmp_path / "nope", drafter=pair[1])
    assert found(results, "model-files.dir-missing").status is Status.FAIL
    # An absolute path of two components (a volume not mounted) is a path, never a repo id.
    unmounted = run_checks(tmp_path, target=Path("/models/Qwen3-8B"), drafter=pair[1])
    assert found(unmounted, "model-files.dir-missing").status is Status.FAIL
    cache = tmp_path / "hub"
    snapshot = cache / "models--z-lab--Toy-DFlash" / "snapshots" / "abc123"
    snapshot.parent.mkdir(parents=True)
    os.symlink(pair[1], snapshot)
    (cache / "models--z-lab--Toy-DFlash" / "refs").mkdir()
    (cache / "models--z-lab--Toy-DFlash" / "refs" / "main").write_text("abc123")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    results = run_checks(tmp_path, target=pair[0], drafter=Path("z-lab/Toy-DFlash"))
    assert results["drafter"].status is Status.PASS
    absent = run_checks(tmp_path, target=pair[0], drafter=Path("z-lab/Other-DFlash"))
    assert found(absent, "model-files.not-downloaded").status is Status.WARN
    assert absent["drafter"].findings[0].id == "drafter.not-judged"


def test_target_without_tokenizer_fails(tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "target", tokenizer=False)
    assert found(run_checks(tmp_path, target=target), "model-files.tokenizer-missing").status is Status.FAIL


# ---------------------------------------------------------------------------------- attention backend


@pytest.mark.parametrize(("version", "fixture", "expected", "scope"), [
    ("0.20.1", "sm86-derived-from-h200.json", "FLASH_ATTN", "every attention layer"),
    ("0.20.1", "h200-facts.json", "FLASH_ATTN", "every attention layer"),
    # SM75: FlashAttention needs sm_80; 0.20.1's FlashInfer and Triton backends lack non-causal support
    ("0.20.1", "sm75-derived-from-h200.json", "FLEX_ATTENTION", "every attention layer"),
    # SM100: 0.20.1 tries FlashInfer first and skips it (no non-causal); 0.34 puts FlashAttention first itself
    ("0.20.1", "sm100-derived-from-h200.json", "FLASH_ATTN", "every attention layer"),
    ("0.34.0", "sm100-derived-from-h200.json", "FLASH_ATTN", "the drafter's attention"),
])
def test_the_backend_vllm_picks_for_non_causal_attention_is_read_from_its_source(
        tmp_path: Path, pair: tuple[Path, Path], version: str, fixture: str, expected: str, scope: str) -> None:
    results = run_checks(tmp_path, target=pair[0], drafter=pair[1], vllm=version, gpu=gpu_fixture(fixture))
    f = found(results, "drafter-attention.backend")
    assert f.status is Status.PASS
    assert f" picks {expected} for {scope}" in f.title


def test_sm100_skips_flashinfer_on_0_20_for_lack_of_non_causal(tmp_path: Path, pair: tuple[Path, Path]) -> None:
    results = run_checks(tmp_path, target=pair[0], drafter=pair[1], vllm="0.20.1",
                         gpu=gpu_fixture("sm100-derived-from-h200.json"))
    f = found(results, "drafter-attention.backend")
    assert f.evidence["order"][0] == "FLASHINFER"
    assert "non-causal attention not supported" in f.evidence["skipped"]["FLASHINFER"]


def test_an_explicit_backend_without_non_causal_support_fails(tmp_path: Path, pair: tuple[Path, Path]) -> None:
    argv = ["vllm", "serve", str(pair[0]), "--attention-backend", "TRITON_ATTN", "--speculative-config",
            json.dumps({"method": "dflash", "model": str(pair[1]), "num_speculative_tokens": 15})]
    results = run_checks(tmp_path, argv=argv, vllm="0.20.1", gpu=gpu_fixture("h200-facts.json"))
    f = found(results, "drafter-attention.selected-invalid")
    assert f.status is Status.FAIL and "non-causal attention not supported" in f.title


def test_target_arch_alone_is_enough_to_name_the_backend(tmp_path: Path, pair: tuple[Path, Path]) -> None:
    results = run_checks(tmp_path, target=pair[0], drafter=pair[1], vllm="0.24.0", target_archs=["sm_86"])
    assert "on sm_86 picks FLASH_ATTN for the drafter's attention" in found(results, "drafter-attention.backend").title
    assert found(run_checks(tmp_path, target=pair[0], drafter=pair[1]), "drafter-attention.no-gpu-facts").status is Status.SKIP


# ------------------------------------------------------------------------------------- the budget


def test_a_60_gb_class_sharded_target_is_read_and_judged_in_under_half_a_second(tmp_path: Path) -> None:
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import bench_model_headers as bench
    finally:
        sys.path.pop(0)
    root = tmp_path / "big"
    root.mkdir()
    shards, total = bench.build_target(root)
    assert total > 60e9 and shards > 10
    drafter = toy.write_toy_drafter(tmp_path / "drafter", hidden_size=5120, num_attention_heads=64,
                                    num_key_value_heads=8, head_dim=128, intermediate_size=256, vocab_size=151936,
                                    num_target_layers=64, target_layer_ids=(1, 30), mask_token_id=151669)
    models = {"given": True}
    started = time.perf_counter()
    models["target"] = models_collector.describe_model(str(root), str(tmp_path), "target")
    models["drafter"] = models_collector.describe_model(str(drafter), str(tmp_path), "drafter")
    results = judge([ModelFilesCheck(), DrafterCheck()], {"models": models, "vllm_dflash": None, "serve_args": None})
    elapsed = time.perf_counter() - started
    assert [r.status for r in results] == [Status.PASS, Status.PASS], [f.title for r in results for f in r.findings]
    assert elapsed < 0.5, f"{elapsed:.3f} s"
    assert len(json.dumps(models)) < 64 * 1024  # the target is summarised, not listed tensor by tensor


def _head_128_pair(tmp_path: Path) -> tuple[Path, Path]:
    """The toy pair with a real head size (FlashInfer takes 64, 128 and 256; Triton 32 and up; the toy's is 16)."""
    return (toy.write_toy_target(tmp_path / "target", head_dim=128),
            toy.write_toy_drafter(tmp_path / "drafter", head_dim=128))


@pytest.mark.parametrize(("version", "fixture", "kv", "expected"), [
    # 0.20.1 and 0.22.1: FlashAttention takes an fp8 KV cache only on sm_90 (FA3), FlashInfer and Triton have no
    # non-causal attention: vLLM stops. 0.24.0 on: FlashInfer supports both, and vLLM picks it.
    ("0.20.1", "sm86-derived-from-h200.json", "fp8", None),
    ("0.24.0", "sm86-derived-from-h200.json", "fp8", "FLASHINFER"),
    ("0.20.1", "h200-facts.json", "fp8_e5m2", "FLASH_ATTN"),
    ("0.24.0", "h200-facts.json", "fp8_e5m2", "FLASHINFER"),  # 0.21+: FlashAttention refuses e5m2 even on FA3
    ("0.34.0", "sm100-derived-from-h200.json", "fp8", "FLASH_ATTN"),  # FA4 takes fp8 on SM100 (0.27.1+)
])
def test_the_kv_cache_dtype_decides_the_drafters_backend(tmp_path: Path, version: str, fixture: str, kv: str,
                                                        expected: str | None) -> None:
    pair = _head_128_pair(tmp_path)
    argv = ["vllm", "serve", str(pair[0]), "--kv-cache-dtype", kv, "--speculative-config",
            json.dumps({"method": "dflash", "model": str(pair[1]), "num_speculative_tokens": 15})]
    results = run_checks(tmp_path, argv=argv, vllm=version, gpu=gpu_fixture(fixture))
    if expected is not None:
        f = found(results, "drafter-attention.backend")
        assert f.status is Status.PASS and f" picks {expected} " in f.title and f"kv_cache_dtype={kv}" in f.title
        return
    f = found(results, "drafter-attention.none-valid")
    assert f.status is Status.FAIL and f"kv_cache_dtype={kv}" in f.title
    # vLLM's own words: "No valid attention backend found ... Reasons: {FLASH_ATTN: [kv_cache_dtype not supported], ..."
    assert "FLASH_ATTN: [kv_cache_dtype not supported]" in f.detail
    assert "FLASHINFER: [non-causal attention not supported]" in f.detail
    fix = f.remediation[0].command
    assert "--kv-cache-dtype" not in fix and fix.startswith(f"vllm serve {pair[0]} ")


def test_a_selected_backend_without_the_kv_cache_dtype_is_refused_in_vllms_words(tmp_path: Path) -> None:
    pair = _head_128_pair(tmp_path)
    spec = {"method": "dflash", "model": str(pair[1]), "num_speculative_tokens": 15, "attention_backend": "FLASH_ATTN"}
    argv = ["vllm", "serve", str(pair[0]), "--kv-cache-dtype", "fp8", "--speculative-config", json.dumps(spec)]
    results = run_checks(tmp_path, argv=argv, vllm="0.24.0", gpu=gpu_fixture("sm86-derived-from-h200.json"))
    f = found(results, "drafter-attention.selected-invalid")
    assert f.status is Status.FAIL
    assert "Selected backend AttentionBackendEnum.FLASH_ATTN is not valid for this configuration. Reason: " \
           "['kv_cache_dtype not supported']" in f.detail
    assert '"attention_backend": "FLASHINFER"' in f.remediation[0].command  # what vLLM picks itself there


# ----------------------------------------------------------------------------------- typed models facts


def test_the_models_facts_are_typed_to_the_leaves_and_an_older_or_broken_report_is_told_apart(tmp_path: Path) -> None:
    """The models section as the collector writes it reads as nested shapes down to a tensor's shape, the user's
    config.json through typed accessors; a report without the later keys loads with their defaults, and a leaf
    of the wrong type is an error naming its place."""
    from dflash_doctor.facts.models.models_shapes import ConfigView, Models, Tensor
    from dflash_doctor.facts.shape import ShapeError, section_json

    target, drafter = toy.write_toy_target(tmp_path / "target"), toy.write_toy_drafter(tmp_path / "drafter")
    written = json.loads(json.dumps(section_json(models_collector.collect(
        Context(python=sys.executable, cwd=str(tmp_path), options={"model": str(target), "drafter": str(drafter)}),
        {})["models"])))
    models = Models.from_json(written)
    assert models.to_json() == Models.from_json(models.to_json()).to_json()
    assert models.drafter is not None and models.target is not None
    fc = models.drafter.weights.tensors["fc.weight"]
    assert isinstance(fc, Tensor) and all(isinstance(d, int) for d in fc.shape) and fc.file == "model.safetensors"
    assert models.target.text.int("hidden_size") == 64 and models.target.architectures == ["Qwen3ForCausalLM"]
    assert models.drafter.config is not None
    assert isinstance(models.drafter.config.drafter.view("dflash_config").list("target_layer_ids"), list)
    assert models.drafter.weights.layers.count == 1 and models.target.prefix_bytes
    # The user's values stay raw, and each accessor gives its type or None.
    view = ConfigView({"hidden_size": "64", "num_hidden_layers": True, "layer_types": "full", "head_dim": 128})
    assert (view.int("hidden_size"), view.int("num_hidden_layers"), view.layer_types, view.head_dim) == \
        (None, None, None, 128)
    # A report from before tokenizer_config, extra_files, the layer counts and the problem summaries loads.
    older = json.loads(json.dumps(written))
    for model in (older["target"], older["drafter"]):
        for key in ("tokenizer_config", "extra_files", "prefix_bytes", "seconds"):
            model.pop(key, None)
        model["dir"]["weights"].pop("layers")
    loaded = Models.from_json(older)
    assert loaded.drafter is not None and loaded.drafter.weights.layers.count == 0
    assert loaded.drafter.extra_files is None and loaded.drafter.seconds == 0.0
    broken = json.loads(json.dumps(written))
    broken["drafter"]["dir"]["weights"]["tensors"]["fc.weight"]["shape"][0] = "64"
    with pytest.raises(ShapeError) as raised:
        Models.from_json(broken)
    assert raised.value.where == "drafter.dir.weights.tensors.fc.weight.shape[0]"
