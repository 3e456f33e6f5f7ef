"""The DFlash failures users reported since release, caught before `vllm serve`: each on toy models written
with the real `safetensors` library (tests/toymodels.py), judged against the real source of the vLLM release
it depends on (sdists from PyPI, tests/vllm_sources.py; each source is read once per version and set of
architectures, test_models_check.vllm_facts)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("safetensors")

from test_models_check import found, gpu_fixture, ids, patch_config, run_checks

from dflash_doctor.model import Status

try:
    import toymodels as toy
except ImportError:  # tests/ imported as a package
    from tests import toymodels as toy  # type: ignore[no-redef]


def seed(target: Path, drafter: Path, *extra: str, spec: dict[str, Any] | None = None) -> list[str]:
    """The project's seed command (README) with the toy models in it."""
    return ["vllm", "serve", str(target), "--max-model-len", "32768", "--max-num-batched-tokens", "32768",
            "--language-model-only", "--speculative-config",
            json.dumps({"method": "dflash", "model": str(drafter), "num_speculative_tokens": 15, **(spec or {})}),
            *extra]


@pytest.fixture
def toys(tmp_path: Path) -> tuple[Path, Path]:
    """A toy Qwen3 target with Qwen3's 40960 positions, and its drafter."""
    target = toy.write_toy_target(tmp_path / "target")
    patch_config(target, max_position_embeddings=40960)
    return target, toy.write_toy_drafter(tmp_path / "drafter")


def titles(results: Any, finding_id: str) -> list[str]:
    return [f.title for r in results.values() for f in r.findings if f.id == finding_id]


# ----------------------------------------------------------------------- 6: the rest of the seed command


def test_a_reasoning_parser_typo_fails_with_the_installed_registry_and_the_fix(tmp_path: Path,
                                                                               toys: tuple[Path, Path]) -> None:
    results = run_checks(tmp_path, argv=seed(*toys, "--reasoning-parser", "qwen_3"), vllm="0.34.0")
    f = found(results, "serve-command.unknown-reasoning-parser")
    assert f.status is Status.FAIL
    assert "'qwen_3' is not a parser vLLM 0.34.0 registers (vllm/reasoning/__init__.py): vLLM stops" in f.title
    assert "invalid reasoning parser: qwen_3 (chose from" in f.title and f.title.endswith("did you mean qwen3?")
    assert f.remediation[0].command.endswith("--reasoning-parser qwen3")
    ok = run_checks(tmp_path, argv=seed(*toys, "--reasoning-parser", "qwen3"), vllm="0.34.0")
    assert found(ok, "serve-command.reasoning-parser").status is Status.PASS


def test_the_tool_parser_is_judged_against_each_release_and_only_fails_with_auto_tool_choice(
        tmp_path: Path, toys: tuple[Path, Path]) -> None:
    for version in ("0.20.1", "0.34.0"):
        good = run_checks(tmp_path, argv=seed(*toys, "--enable-auto-tool-choice", "--tool-call-parser", "qwen3_coder"),
                          vllm=version)
        assert found(good, "serve-command.tool-parser").status is Status.PASS
    typo = run_checks(tmp_path, argv=seed(*toys, "--enable-auto-tool-choice", "--tool-call-parser", "qwen3-coder"),
                      vllm="0.34.0")
    f = found(typo, "serve-command.unknown-tool-parser")
    assert f.status is Status.FAIL and "did you mean qwen3_coder" in f.title
    assert "--tool-call-parser qwen3_coder" in f.remediation[0].command
    unused = run_checks(tmp_path, argv=seed(*toys, "--tool-call-parser", "qwen3-coder"), vllm="0.34.0")
    assert found(unused, "serve-command.unknown-tool-parser").status is Status.WARN


def test_auto_tool_choice_without_a_parser_fails_with_vllms_words(tmp_path: Path, toys: tuple[Path, Path]) -> None:
    results = run_checks(tmp_path, argv=seed(*toys, "--enable-auto-tool-choice"), vllm="0.34.0")
    f = found(results, "serve-command.auto-tool-choice-without-parser")
    assert f.status is Status.FAIL and "--enable-auto-tool-choice requires --tool-call-parser" in f.title
    assert " --tool-call-parser " in f.remediation[0].command
    assert "--enable-auto-tool-choice" not in f.remediation[1].command


def test_a_config_only_its_own_code_can_load_needs_trust_remote_code(tmp_path: Path, toys: tuple[Path, Path]) -> None:
    target, drafter = toys
    patch_config(target, model_type="toy_remote", auto_map={"AutoConfig": "configuration_toy.ToyConfig",
                                                            "AutoModelForCausalLM": "modeling_toy.ToyForCausalLM"})
    results = run_checks(tmp_path, argv=seed(target, drafter), vllm="0.34.0")
    f = found(results, "serve-command.trust-remote-code-needed")
    # the sdist tree has no transformers beside it: the doctor says it could not tell, as a warning
    assert f.status is Status.WARN and "model_type 'toy_remote' is not in vLLM 0.34.0's own config registry" in f.title
    assert f.remediation[0].command.endswith(" --trust-remote-code")
    trusted = run_checks(tmp_path, argv=seed(target, drafter, "--trust-remote-code"), vllm="0.34.0")
    assert not titles(trusted, "serve-command.trust-remote-code-needed")
    # the drafter's own auto_map (AutoModel only, model_type qwen3) never needs it
    plain = toy.write_toy_target(tmp_path / "plain")
    assert not titles(run_checks(tmp_path, argv=seed(plain, drafter), vllm="0.34.0"),
                      "serve-command.trust-remote-code-needed")


def test_a_multimodal_target_without_language_model_only_warns_and_with_it_passes(tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "target", nested_text_config=True)
    drafter = toy.write_toy_drafter(tmp_path / "drafter")
    argv = [w for w in seed(target, drafter) if w != "--language-model-only"]
    f = found(run_checks(tmp_path, argv=argv, vllm="0.34.0"), "serve-command.multimodal-target")
    assert f.status is Status.WARN and "has vision_config" in f.title
    assert f.remediation[0].command.endswith(" --language-model-only")
    ok = found(run_checks(tmp_path, argv=seed(target, drafter), vllm="0.34.0"), "serve-command.language-model-only")
    assert ok.status is Status.PASS and "builds no vision tower" in ok.title


def test_the_drafter_weights_need_no_renaming_unless_an_index_names_another_file(tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "target")
    drafter = toy.write_toy_drafter(tmp_path / "drafter")
    renamed = drafter / "dflash-q36-27b.safetensors"
    (drafter / "model.safetensors").rename(renamed)
    results = run_checks(tmp_path, target=target, drafter=drafter)
    assert "vLLM loads dflash-q36-27b.safetensors (any *.safetensors name" in found(results, "drafter.ok").title
    # an index copied from the publisher still names model.safetensors: vLLM filters the renamed file out
    (drafter / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {"fc.weight": "model.safetensors", "norm.weight": "model.safetensors"}}))
    f = found(run_checks(tmp_path, target=target, drafter=drafter), "drafter.weights-file")
    assert f.status is Status.FAIL and "does not list dflash-q36-27b.safetensors" in f.title
    assert f.remediation[0].command == f"mv -- {drafter}/dflash-q36-27b.safetensors {drafter}/model.safetensors"


# ------------------------------------------------------------------------- 1: the drafter's context


def test_a_drafter_shorter_than_the_served_context_fails_on_the_v2_runner_only(
        tmp_path: Path, toys: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    target, drafter = toys
    patch_config(drafter, max_position_embeddings=4096)
    # 0.29.0 runs DFlash on V2 by default (use_v2_model_runner ends in `return True`), with no limiter: the first
    # long request kills the engine
    f = found(run_checks(tmp_path, argv=seed(target, drafter), vllm="0.29.0"), "drafter.context-shorter-than-served")
    assert f.status is Status.FAIL
    assert "the drafter's context 4096 is shorter than the served 32768: on the V2 model runner" in f.title
    assert f.remediation[0].command.endswith(" --max-model-len 4096")
    assert "\"max_position_embeddings\": 32768" in f.remediation[1].command
    # 0.24.0 runs Qwen3ForCausalLM on V2 by default (DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES)
    v24 = found(run_checks(tmp_path, argv=seed(target, drafter), vllm="0.24.0"), "drafter.context-shorter-than-served")
    assert v24.status is Status.FAIL and "Qwen3ForCausalLM is in DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES" in v24.title
    # 0.20.1 runs V1 unless told otherwise: drafting stops for longer requests
    v20 = found(run_checks(tmp_path, argv=seed(target, drafter), vllm="0.20.1"), "drafter.context-shorter-than-served")
    assert v20.status is Status.WARN and "stops drafting for longer requests" in v20.title
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "1")
    forced = run_checks(tmp_path, argv=seed(target, drafter), vllm="0.20.1")
    assert found(forced, "drafter.context-shorter-than-served").status is Status.FAIL


def test_from_0_33_vllm_raises_a_default_rope_drafters_context(tmp_path: Path, toys: tuple[Path, Path]) -> None:
    # SpeculativeConfig._maybe_override_draft_max_position_embeddings: default RoPE only sizes a cache.
    target, drafter = toys
    patch_config(drafter, max_position_embeddings=4096)
    results = run_checks(tmp_path, argv=seed(target, drafter), vllm="0.34.0")
    assert not {"drafter.context-shorter-than-served", "drafter.context-limits-served"} & set(ids(results, "drafter"))


def test_from_0_33_a_yarn_drafter_shorter_than_served_lowers_the_served_context(
        tmp_path: Path, toys: tuple[Path, Path]) -> None:
    # From 0.30 yarn's factor is not multiplied in (the drafter is 8192 long); from 0.33 a yarn drafter is not
    # raised, and VllmConfig._limit_max_model_len_to_draft serves 8192 with only a log line.
    target, drafter = toys
    patch_config(drafter, max_position_embeddings=8192,
                 rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8192})
    f = found(run_checks(tmp_path, argv=seed(target, drafter), vllm="0.34.0"), "drafter.context-limits-served")
    assert f.status is Status.WARN and "lowers the served max_model_len to 8192" in f.title
    assert f.remediation[0].command.endswith(" --max-model-len 8192")
    # Up to 0.29 the yarn factor lengthens it to 32768, the served length: nothing to say
    results = run_checks(tmp_path, argv=seed(target, drafter), vllm="0.29.0")
    assert not {"drafter.context-shorter-than-served", "drafter.context-limits-served"} & set(ids(results, "drafter"))


def test_layer_types_of_another_length_than_the_layers_fail(tmp_path: Path, toys: tuple[Path, Path]) -> None:
    target, drafter = toys
    patch_config(drafter, layer_types=["sliding_attention", "full_attention"], sliding_window=2048)
    f = found(run_checks(tmp_path, argv=seed(target, drafter), vllm="0.34.0"), "drafter.layer-types-length")
    assert f.status is Status.FAIL
    assert "must be equal to the number of layer types (2)" in f.title
    assert f.remediation[0].command == f"set '\"layer_types\": [\"sliding_attention\"]' in {drafter}/config.json"


# ----------------------------------------------------------------------------- 4: layer counts


def test_a_drafter_made_for_another_target_names_it(tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "Toy-2L", layers=2)
    drafter = toy.write_toy_drafter(tmp_path / "drafter", target_layer_ids=(1, 3), num_target_layers=4)
    (drafter / "README.md").write_text("---\nlicense: mit\nbase_model:\n- toy-org/Toy-4L\ntags:\n- dflash\n---\n# Toy\n")
    results = run_checks(tmp_path, target=target, drafter=drafter)
    f = found(results, "drafter.made-for")
    assert f.status is Status.FAIL and f.cause == "drafter.layer-ids-invalid"
    assert f.title.startswith(f"this drafter was made for toy-org/Toy-4L ({drafter}/README.md base_model, 4 layers)")
    assert "the target Toy-2L has 2 layers" in f.title and "mat1 and mat2 shapes cannot be multiplied" in f.title
    fits = run_checks(tmp_path, target=toy.write_toy_target(tmp_path / "Toy-4L"), drafter=drafter)
    assert "made for toy-org/Toy-4L" in found(fits, "drafter.ok").title


# ------------------------------------------------------------------ 3: the target's auxiliary hidden states


def test_a_target_class_without_the_eagle3_interface_fails_where_vllm_lacks_it(tmp_path: Path) -> None:
    """vLLM 0.22.0's OlmoForCausalLM(nn.Module, SupportsPP, SupportsLoRA) has no SupportsEagle3; 0.34.0's has."""
    target = toy.write_toy_target(tmp_path / "target")
    patch_config(target, architectures=["OlmoForCausalLM"], model_type="olmo")
    drafter = toy.write_toy_drafter(tmp_path / "drafter")
    f = found(run_checks(tmp_path, target=target, drafter=drafter, vllm="0.22.0"), "drafter.target-no-aux-hidden-states")
    assert f.status is Status.FAIL
    assert "OlmoForCausalLM (vllm/model_executor/models/olmo.py) does not implement SupportsEagle3" in f.title
    assert "Model does not support EAGLE3 interface" in f.title
    assert "drafter.target-no-aux-hidden-states" not in ids(run_checks(tmp_path, target=target, drafter=drafter,
                                                                       vllm="0.34.0"), "drafter")
    # Qwen3.5's class inherits the interface from Qwen3VLForConditionalGeneration, through the module it imports
    nested = toy.write_toy_target(tmp_path / "qwen35", nested_text_config=True)
    ok = found(run_checks(tmp_path, target=nested, drafter=drafter, vllm="0.34.0"), "drafter.ok")
    assert "target Qwen3_5ForConditionalGeneration implements SupportsEagle3" in ok.title


# ------------------------------------------------------------------------------ 2: quantization pairs


FP8_PER_TENSOR = {"quant_method": "fp8", "activation_scheme": "dynamic"}


def test_a_quantized_drafter_with_quantized_qkv_fails_where_vllm_slices_the_raw_weight_unguarded(
        tmp_path: Path, toys: tuple[Path, Path]) -> None:
    """qwen3_dflash.py slices qkv_proj.weight raw with no guard up to 0.30.0 (0.24.0 line 304); from 0.31.0 the
    slice sits under a guard on the layers' quant method (0.33.0: inline isinstance, 0.34.0: _reads_raw_weights).
    laguna_dflash.py slices it unguarded through 0.34.0, so a Laguna drafter still fails there."""
    target, drafter = toys
    patch_config(drafter, quantization_config=FP8_PER_TENSOR)
    results = run_checks(tmp_path, argv=seed(target, drafter), vllm="0.24.0")
    f = found(results, "drafter.quantized-attention")
    assert f.status is Status.FAIL and "qwen3_dflash.py slices qkv_proj.weight raw" in f.title
    assert "with no guard on the layers' quant method" in f.title and "#51581" in f.detail
    assert "per-tensor FP8 drafter" in found(results, "drafter.quantized-acceptance").title
    for fixed, guard in (("0.33.0", "isinstance(proj.quant_method, UnquantizedLinearMethod)"),
                         ("0.34.0", "_reads_raw_weights(self._context_qkv_projs)")):
        guarded = run_checks(tmp_path, argv=seed(target, drafter), vllm=fixed)
        assert "drafter.quantized-attention" not in ids(guarded, "drafter"), fixed
        assert guard in found(guarded, "drafter.checked").title, fixed
        # the acceptance warning stands: the per-tensor scales are another report
        assert "per-tensor FP8 drafter" in found(guarded, "drafter.quantized-acceptance").title
    # the same scheme written by llm-compressor (compressed-tensors, per-tensor float8 on every Linear)
    patch_config(drafter, quantization_config={"quant_method": "compressed-tensors", "config_groups": {"group_0": {
        "targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "tensor"}}}, "ignore": []})
    compressed = run_checks(tmp_path, argv=seed(target, drafter), vllm="0.30.0")
    assert found(compressed, "drafter.quantized-attention").status is Status.FAIL
    assert "per-tensor FP8 drafter" in found(compressed, "drafter.quantized-acceptance").title
    # a Laguna drafter is served by laguna_dflash.py, which 0.34.0 still slices unguarded
    patch_config(drafter, architectures=["DFlashLagunaForCausalLM"])
    laguna = found(run_checks(tmp_path, argv=seed(target, drafter), vllm="0.34.0"), "drafter.quantized-attention")
    assert laguna.status is Status.FAIL and "laguna_dflash.py slices qkv_proj.weight raw" in laguna.title
    # attention left out of the quantization: it loads
    patch_config(drafter, architectures=["DFlashDraftModel"], quantization_config={
        **FP8_PER_TENSOR, "weight_block_size": [128, 128], "modules_to_not_convert": ["layers.0.self_attn"]})
    assert "drafter.quantized-attention" not in ids(run_checks(tmp_path, argv=seed(target, drafter), vllm="0.24.0"),
                                                    "drafter")


def test_an_awq_target_warns_of_acceptance_and_fp8_on_sm86_names_the_fallback_kernel(
        tmp_path: Path, toys: tuple[Path, Path]) -> None:
    target, drafter = toys
    patch_config(target, quantization_config={"quant_method": "awq", "bits": 4, "group_size": 128})
    f = found(run_checks(tmp_path, argv=seed(target, drafter), vllm="0.34.0"), "drafter.quantized-acceptance")
    assert f.status is Status.WARN and "the target is AWQ-quantized (4-bit)" in f.title
    patch_config(target, quantization_config={"quant_method": "fp8", "weight_block_size": [128, 128]})
    sm86 = found(run_checks(tmp_path, argv=seed(target, drafter), vllm="0.34.0",
                            gpu=gpu_fixture("sm86-derived-from-h200.json")), "drafter.fp8-kernel")
    assert sm86.status is Status.WARN and "target FP8 on sm_86: no FP8 tensor cores below sm_89" in sm86.title
    assert "Marlin weight-only kernel" in sm86.title
    h200 = run_checks(tmp_path, argv=seed(target, drafter), vllm="0.34.0", gpu=gpu_fixture("h200-facts.json"))
    assert "drafter.fp8-kernel" not in ids(h200, "drafter")


# ------------------------------------------------------------------------ 5: known-bad combinations


def test_cuda_graphs_warn_only_on_the_release_the_crash_was_reported_on(tmp_path: Path,
                                                                        toys: tuple[Path, Path]) -> None:
    """DERIVED: z-lab/dflash #146 names vLLM 0.22.1, whose sdist is not in the test cache; 0.22.0's source is
    labelled 0.22.1 for this rule, which keys on the version alone."""
    argv = seed(*toys)
    f = found(run_checks(tmp_path, argv=argv, vllm="0.22.0", vllm_version="0.22.1"),
              "serve-command.known-bad-combination")
    assert f.status is Status.WARN and "cudaErrorIllegalAddress under concurrent load" in f.title
    assert "z-lab/dflash #146" in f.detail and f.remediation[0].command.endswith(" --enforce-eager")
    eager = run_checks(tmp_path, argv=seed(*toys, "--enforce-eager"), vllm="0.22.0", vllm_version="0.22.1")
    assert not titles(eager, "serve-command.known-bad-combination")
    for version in ("0.22.0", "0.24.0"):
        assert not titles(run_checks(tmp_path, argv=argv, vllm=version), "serve-command.known-bad-combination")


def test_dflash2_with_prefix_caching_warns_from_0_28(tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "target")
    patch_config(target, max_position_embeddings=40960)
    drafter = toy.write_toy_drafter(tmp_path / "drafter", architectures=("DFlash2DraftModel",))
    hits = titles(run_checks(tmp_path, argv=seed(target, drafter), vllm="0.34.0"), "serve-command.known-bad-combination")
    assert any("prefix-cache hits drop to zero with a DFlash2 drafter" in t for t in hits)
    off = run_checks(tmp_path, argv=seed(target, drafter, "--no-enable-prefix-caching"), vllm="0.34.0")
    assert not titles(off, "serve-command.known-bad-combination")


def test_dflash2_on_the_v1_runner_warns_that_its_selector_does_not_run(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """DERIVED: DFlash2 shipped in the 0.28 nightlies, whose sdists are not in the test cache; 0.24.0's source
    (V2 by default only for DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES) is labelled 0.28.0 for this rule."""
    target = toy.write_toy_target(tmp_path / "target", nested_text_config=True)  # Qwen3_5ForConditionalGeneration
    drafter = toy.write_toy_drafter(tmp_path / "drafter", architectures=("DFlash2DraftModel",))
    argv = seed(target, drafter, "--no-enable-prefix-caching")
    hits = titles(run_checks(tmp_path, argv=argv, vllm="0.24.0", vllm_version="0.28.0"),
                  "serve-command.known-bad-combination")
    assert any("candidate selector runs only in the V2 speculator" in t for t in hits)
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "1")
    assert not titles(run_checks(tmp_path, argv=argv, vllm="0.24.0", vllm_version="0.28.0"),
                      "serve-command.known-bad-combination")


def test_sliding_window_layers_run_full_warn_as_the_reported_collapse(tmp_path: Path, toys: tuple[Path, Path]) -> None:
    target, drafter = toys
    patch_config(drafter, layer_types=["sliding_attention"], sliding_window=2048)
    results = run_checks(tmp_path, argv=seed(target, drafter), vllm="0.20.1")
    f = found(results, "serve-command.known-bad-combination")
    assert f.cause == "drafter.sliding-ignored" and "acceptance collapses at long contexts" in f.title
    assert not titles(run_checks(tmp_path, argv=seed(target, drafter), vllm="0.34.0"),
                      "serve-command.known-bad-combination")


# --------------------------------------------------------------------------------- through the CLI


@pytest.mark.slow
def test_the_cli_reads_the_installed_vllm_0_20_1_for_the_parsers_and_the_target_class(
        doctor: Any, tmp_path: Path, toys: tuple[Path, Path]) -> None:
    """The real CLI on an env holding the real vLLM 0.20.1 wheel: the collector reads its registries and the
    target's class from the installed package, as `dflash-doctor serve` does for a user."""
    from realenv import make_venv
    from stacks import add_to_path, vllm_site
    from test_serve import serve_report

    env = make_venv(tmp_path)
    add_to_path(env, vllm_site("0.20.1"))
    command = seed(*toys, "--reasoning-parser", "qwen_3", "--enable-auto-tool-choice", "--tool-call-parser",
                   "qwen3_coder")
    report, proc = serve_report(doctor, "--python", str(env.python), "--only", "models,serve", "--gpus", "1",
                                "--gpu-memory", "48", "--target-arch", "sm_86", command=command)
    assert proc.returncode == 1
    by_id = {f["id"]: f for check in report["checks"] for f in check["findings"]}
    assert by_id["serve-command.unknown-reasoning-parser"]["status"] == "fail"
    assert "not a parser vLLM 0.20.1 registers" in by_id["serve-command.unknown-reasoning-parser"]["title"]
    assert by_id["serve-command.tool-parser"]["status"] == "pass"
    drafter = next(check for check in report["checks"] if check["id"] == "drafter")
    pairing = drafter["facts"]["vllm_dflash"]["pairing"]
    assert pairing["eagle3"]["archs"]["Qwen3ForCausalLM"]["implements"] is True


TRANSFORMERS_VERSION = "4.57.1"


def transformers_wheel() -> Path:
    """The real transformers wheel from PyPI, downloaded once into the test cache (pure Python)."""
    import subprocess
    import sys

    from realenv import _locked, cache_dir

    dest = cache_dir() / "pypi"
    with _locked(f"transformers-{TRANSFORMERS_VERSION}"):
        found = sorted(dest.glob(f"transformers-{TRANSFORMERS_VERSION}-*.whl"))
        if not found:
            dest.mkdir(exist_ok=True)
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "-q",
                            "-d", str(dest), f"transformers=={TRANSFORMERS_VERSION}"], check=True, timeout=600)
            found = sorted(dest.glob(f"transformers-{TRANSFORMERS_VERSION}-*.whl"))
        return found[0]


@pytest.mark.slow
def test_the_cli_reads_the_installed_transformers_for_what_needs_trust_remote_code(
        doctor: Any, tmp_path: Path, toys: tuple[Path, Path]) -> None:
    """With the real transformers wheel installed beside the real vLLM 0.20.1, a model_type transformers knows
    loads without remote code, and one it does not fails until --trust-remote-code."""
    from realenv import install, make_venv
    from stacks import add_to_path, vllm_site
    from test_serve import serve_report

    env = make_venv(tmp_path)
    add_to_path(env, vllm_site("0.20.1"))
    install(env, transformers_wheel(), compile_bytecode=False)
    target, drafter = toys
    remote = {"AutoConfig": "configuration_toy.ToyConfig", "AutoModelForCausalLM": "modeling_toy.ToyForCausalLM"}
    options = ("--python", str(env.python), "--only", "models,serve", "--gpus", "1", "--gpu-memory", "48")

    def verdict(*extra: str) -> list[dict[str, Any]]:
        report, _ = serve_report(doctor, *options, command=seed(target, drafter, *extra))
        return [f for check in report["checks"] for f in check["findings"]
                if f["id"] == "serve-command.trust-remote-code-needed"]

    patch_config(target, model_type="toy_remote", auto_map=remote)
    found_ = verdict()
    assert [f["status"] for f in found_] == ["fail"]
    assert "and the installed transformers does not know it either" in found_[0]["title"]
    patch_config(target, model_type="olmo", auto_map=remote)  # transformers 4.57.1 has OlmoConfig
    assert not verdict()


@pytest.mark.parametrize("value", [5, "Qwen3ForCausalLM", None, {"Qwen3ForCausalLM": 1}])
def test_a_hand_written_architectures_that_is_no_list_is_judged_not_crashed_on(tmp_path: Path, toys: tuple[Path, Path],
                                                                             value: Any) -> None:
    """Found by review: the known-bad rules and the DFlash2 test read "architectures" as a list and crashed
    (doctor.check-crashed) on `"architectures": 5` in the target's or the drafter's config.json."""
    target, drafter = toys
    patch_config(target, architectures=value)
    patch_config(drafter, architectures=value)
    results = run_checks(tmp_path, argv=seed(target, drafter), vllm="0.22.0", vllm_version="0.22.1")
    crashed = [(r.id, f.title) for r in results.values() for f in r.findings if f.id == "doctor.check-crashed"]
    assert not crashed, crashed
    assert results["serve-command"].status is not Status.ERROR


def test_a_vllm_newer_than_the_verified_releases_is_said(tmp_path: Path, toys: tuple[Path, Path]) -> None:
    # DERIVED: vLLM 0.34.0's source labelled 0.35.0, a release newer than tests/vllm_release.MATRIX
    from vllm_release import MATRIX

    from dflash_doctor.knowledge.dflash_reports import RULES_VERIFIED_THROUGH
    assert RULES_VERIFIED_THROUGH.value == MATRIX[-1]
    target, drafter = toys
    newer = found(run_checks(tmp_path, argv=seed(target, drafter), vllm="0.34.0", vllm_version="0.35.0rc1"),
                  "serve-command.vllm-newer-than-verified")
    assert newer.status is Status.WARN and "vLLM 0.35.0rc1 is newer than 0.34.0" in newer.title
    assert "serve-command.vllm-newer-than-verified" not in ids(
        run_checks(tmp_path, argv=seed(target, drafter), vllm="0.34.0"), "serve-command")


def _to_speculators_format(drafter: Path) -> dict[str, Any]:
    """Rewrite the toy drafter's config.json as vllm-project/speculators writes a DFlash drafter: the model's dims
    under transformer_layer_config, aux_hidden_state_layer_ids in the EAGLE convention (DFlash id + 1), a top-level
    mask_token_id, the proposal under speculators_config, and no top-level architectures."""
    path = drafter / "config.json"
    config = json.loads(path.read_text())
    dflash = config.pop("dflash_config")
    for key in ("architectures", "block_size", "num_target_layers", "target_hidden_size"):
        config.pop(key, None)
    speculators = {
        "speculators_model_type": "dflash", "mask_token_id": dflash["mask_token_id"],
        "aux_hidden_state_layer_ids": [i + 1 for i in dflash["target_layer_ids"]],
        "transformer_layer_config": {**config, "architectures": ["Qwen3ForCausalLM"]},
        "speculators_config": {"proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 15}],
                               "default_proposal_method": "greedy",
                               "verifier": {"name_or_path": "Qwen/Qwen3-8B", "architectures": ["Qwen3ForCausalLM"]}},
    }
    path.write_text(json.dumps(speculators, indent=2))
    return speculators


@pytest.mark.parametrize("vllm", ["0.24.0", "0.34.0"])
def test_a_speculators_format_drafter_is_judged_like_a_z_lab_one(
        tmp_path: Path, toys: tuple[Path, Path], vllm: str) -> None:
    target, drafter = toys
    z_lab = run_checks(tmp_path, argv=seed(target, drafter), vllm=vllm)
    _to_speculators_format(drafter)
    results = run_checks(tmp_path, argv=seed(target, drafter), vllm=vllm)
    assert results["drafter"].status is z_lab["drafter"].status
    assert "drafter.layer-ids-missing" not in ids(results, "drafter")
    ok = found(results, "drafter.ok")
    assert "target_layer_ids [1, 2]" in ok.title and "mask_token_id 500" in ok.title


def test_speculators_aux_ids_off_by_one_are_caught_as_for_any_drafter(tmp_path: Path, toys: tuple[Path, Path]) -> None:
    # vLLM subtracts 1 from aux_hidden_state_layer_ids: an aux id of 0 (written in DFlash's convention) is layer -1
    target, drafter = toys
    speculators = _to_speculators_format(drafter)
    patch_config(drafter, aux_hidden_state_layer_ids=[0, *speculators["aux_hidden_state_layer_ids"][1:]])
    f = found(run_checks(tmp_path, argv=seed(target, drafter), vllm="0.34.0"), "drafter.layer-ids-invalid")
    assert "[-1]" in f.title


def test_a_dflash2_drafter_served_with_fewer_tokens_than_its_block_warns_either_way(tmp_path: Path) -> None:
    # 0.34.0's qwen3_dflash2.py: the grouped convolution's block is 1 + num_speculative_tokens
    target = toy.write_toy_target(tmp_path / "target")
    patch_config(target, max_position_embeddings=40960)
    drafter = toy.write_toy_drafter(tmp_path / "drafter", architectures=("DFlash2DraftModel",))
    below = found(run_checks(tmp_path, argv=seed(target, drafter, spec={"num_speculative_tokens": 7}), vllm="0.34.0"),
                  "drafter.dflash2-block-mismatch")
    assert below.status is Status.WARN and "blocks of 1 + k = 8 positions, not the 16" in below.title
    assert '"num_speculative_tokens": 15' in below.remediation[0].command
    # the remediation, pasted: its command judged again has no mismatch
    fixed = run_checks(tmp_path, argv=shlex.split(below.remediation[0].command), vllm="0.34.0")
    assert "drafter.dflash2-block-mismatch" not in ids(fixed, "drafter")
    above = run_checks(tmp_path, argv=seed(target, drafter, spec={"num_speculative_tokens": 20}), vllm="0.34.0")
    assert found(above, "drafter.block-size").status is Status.WARN
    assert "drafter.dflash2-block-mismatch" not in ids(run_checks(tmp_path, argv=seed(target, drafter), vllm="0.34.0"),
                                                       "drafter")
    # a DFlash (not DFlash2) drafter with fewer tokens only drafts less
    plain = toy.write_toy_drafter(tmp_path / "plain")
    assert "drafter.dflash2-block-mismatch" not in ids(
        run_checks(tmp_path, argv=seed(target, plain, spec={"num_speculative_tokens": 7}), vllm="0.34.0"), "drafter")


def a100_from_the_h200_recording() -> dict[str, Any]:
    """DERIVED: the `gpu` section recorded on the real H200 (fixtures/gpu/h200-facts.json) with only the device's
    name and compute capability swapped for an A100's (sm_80): no A100 was recorded."""
    gpu = gpu_fixture("h200-facts.json")
    gpu["devices"] = [{**d, "name": "NVIDIA A100-SXM4-80GB", "compute_capability": [8, 0]} for d in gpu["devices"]]
    return gpu


def test_dflash2_on_sm80_warns_of_the_out_of_bounds_read_from_0_27_1_on_that_arch_only(tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "target")
    drafter = toy.write_toy_drafter(tmp_path / "drafter", architectures=("DFlash2DraftModel",))
    argv = seed(target, drafter, "--no-enable-prefix-caching")

    def oob(version: str, gpu: dict[str, Any] | None) -> list[str]:
        hits = titles(run_checks(tmp_path, argv=argv, vllm=version, gpu=gpu), "serve-command.known-bad-combination")
        return [t for t in hits if "reads out of bounds after about 11k decode steps" in t]

    (title,) = oob("0.27.1", a100_from_the_h200_recording())
    assert title.startswith("vLLM 0.27.1 on sm_80 (affected: 0.27.1 and later (no fix released as read)): a DFlash2")
    assert oob("0.29.0", a100_from_the_h200_recording())  # open-ended: vllm #55279 is open, no fix released
    assert not oob("0.26.0", a100_from_the_h200_recording())  # before the release it was reported on
    assert not oob("0.27.1", gpu_fixture("sm86-derived-from-h200.json"))  # not reproduced on sm_86 (syv-ai #72)
    assert not oob("0.27.1", gpu_fixture("h200-facts.json"))  # the real H200, sm_90
    assert not oob("0.27.1", None)  # no GPU facts: an arch-bound report is not guessed
    f = found(run_checks(tmp_path, argv=argv, vllm="0.27.1", gpu=a100_from_the_h200_recording()),
              "serve-command.known-bad-combination")
    assert "vllm-project/vllm #55279" in f.detail
    dflash = toy.write_toy_drafter(tmp_path / "dflash")  # DFlash, not DFlash2: not this report
    hits = titles(run_checks(tmp_path, argv=seed(target, dflash), vllm="0.27.1", gpu=a100_from_the_h200_recording()),
                  "serve-command.known-bad-combination")
    assert not [t for t in hits if "out of bounds" in t]


# ------------------------------------------------------------------------- 5: DFlash-format drafts (round four)

# The Domino head's modules as SpecForge and speculators build them: nn.GRU(hidden, 32, bias=False) and
# Sequential(Linear(hidden + 32, 16, bias=False), SiLU, Linear(16, vocab, bias=False)); toy hidden 64, vocab 512.
DOMINO_HEAD = {"prefix_gru.weight_ih_l0": [96, 64], "prefix_gru.weight_hh_l0": [96, 32],
               "embed_proj.0.weight": [16, 96], "embed_proj.2.weight": [512, 16]}


@pytest.mark.parametrize("version", ["0.24.0", "0.34.0"])
def test_a_domino_draft_fails_naming_its_gru_head_tensors_and_a_plain_dflash_draft_does_not(
        tmp_path: Path, version: str) -> None:
    """No release names prefix_gru (0.24.0 loads by params_dict[name], 0.34.0 through AutoWeightsLoader: both stop
    on the head's tensors); the control is the same drafter without the head."""
    target = toy.write_toy_target(tmp_path / "target")
    domino = toy.write_toy_drafter(tmp_path / "domino", extra_tensors=DOMINO_HEAD, config_overrides={
        "dflash_config": {"mask_token_id": 500, "target_layer_ids": [1, 2], "projector_type": "domino",
                          "gru_hidden_dim": 32, "emb_dim": 16}})
    f = found(run_checks(tmp_path, argv=seed(target, domino), vllm=version), "drafter.domino-head")
    assert f.status is Status.FAIL and "a Domino draft: its weights carry the GRU correction head" in f.title
    for name in DOMINO_HEAD:
        assert name in f.title
    assert f"vLLM {version}" in f.title and "There is no module or parameter named 'embed_proj'" in f.title
    assert "NVIDIA-NeMo/Automodel PR #2913" in f.detail
    plain = toy.write_toy_drafter(tmp_path / "plain")
    assert "drafter.domino-head" not in ids(run_checks(tmp_path, argv=seed(target, plain), vllm=version), "drafter")


def _causal_drafter(tmp_path: Path, name: str, **top: Any) -> Path:
    dflash = top.pop("dflash", {})
    return toy.write_toy_drafter(tmp_path / name, config_overrides={
        "dflash_config": {"mask_token_id": 500, "target_layer_ids": [1, 2], **dflash}, **top})


def test_a_causal_draft_is_judged_by_the_keys_each_release_reads(tmp_path: Path) -> None:
    """dflash_config.causal true (Automodel's JetSpec stamp): read from 0.23.0, ignored by 0.22.1. A top-level
    is_causal false beside it decides from 0.28.0 (_dflash_layer_causal reads it first); 0.24.0 reads no is_causal
    and takes dflash_config.causal."""
    target = toy.write_toy_target(tmp_path / "target")
    stamped = _causal_drafter(tmp_path, "stamped", dflash={"causal": True})
    old = found(run_checks(tmp_path, argv=seed(target, stamped), vllm="0.22.1"), "drafter.causality")
    assert old.status is Status.WARN and "states dflash_config.causal true" in old.title
    assert "resolves every layer non-causal (it does not read dflash_config.causal" in old.title
    for version in ("0.24.0", "0.34.0"):
        results = run_checks(tmp_path, argv=seed(target, stamped), vllm=version)
        assert "drafter.causality" not in ids(results, "drafter"), version
    conflicting = _causal_drafter(tmp_path, "conflicting", dflash={"causal": True}, is_causal=False)
    new = found(run_checks(tmp_path, argv=seed(target, conflicting), vllm="0.34.0"), "drafter.causality")
    assert "resolves every layer non-causal (it reads is_causal first" in new.title
    assert "_dflash_layer_causal" in new.title
    # the two statements disagree: every release that reads one of them goes against the other
    before = found(run_checks(tmp_path, argv=seed(target, conflicting), vllm="0.24.0"), "drafter.causality")
    assert "states is_causal false, but vLLM 0.24.0 resolves every layer causal (it does not read is_causal" \
        in before.title
    # a config that names JetSpec and states nothing resolves non-causal; the control, a plain DFlash draft
    named = _causal_drafter(tmp_path, "named", dflash={"draft_method": "JetSpec"})
    jet = found(run_checks(tmp_path, argv=seed(target, named), vllm="0.34.0"), "drafter.causality")
    assert "names JetSpec ('JetSpec')" in jet.title and "every layer non-causal" in jet.title
    plain = toy.write_toy_drafter(tmp_path / "plain")
    assert "drafter.causality" not in ids(run_checks(tmp_path, argv=seed(target, plain), vllm="0.34.0"), "drafter")
