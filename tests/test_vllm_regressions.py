"""Acceptance-killing regressions of single vLLM release lines, judged on real toy models against each release's
real source (tests/vllm_sources.py): the 0.28 drafter RoPE layout taken from the target (vllm #53063, PRs #51655 and
#54373), and the 0.24 V2 runner's lm_head sharing with a padded target vocabulary (PR #46435). The releases on
either side of each line are judged too: the rule must say nothing there."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_models_check import found, ids, patch_config, run_checks

from dflash_doctor.model import Status

try:
    import toymodels as toy
except ImportError:  # tests/ imported as a package
    from tests import toymodels as toy  # type: ignore[no-redef]


def _pair(tmp_path: Path, target_arch: str = "Qwen3ForCausalLM", **target_geometry: int) -> tuple[Path, Path]:
    target = toy.write_toy_target(tmp_path / "target", **target_geometry)
    patch_config(target, max_position_embeddings=40960, architectures=[target_arch])
    return target, toy.write_toy_drafter(tmp_path / "drafter")


# --------------------------------------------------------------- the 0.28 RoPE layout taken from the target


@pytest.mark.parametrize(("vllm", "fails"), [("0.27.1", False), ("0.28.0", True), ("0.29.0", False)])
def test_an_interleaved_target_with_a_neox_drafter_fails_on_0_28_only(tmp_path: Path, vllm: str, fails: bool) -> None:
    # DeepseekV3ForCausalLM builds its rotary embedding with is_neox_style=False in every release's deepseek_v2.py
    target, drafter = _pair(tmp_path, "DeepseekV3ForCausalLM")
    results = run_checks(tmp_path, target=target, drafter=drafter, vllm=vllm)
    assert ("drafter.rope-layout-from-target" in ids(results, "drafter")) is fails
    if fails:
        f = found(results, "drafter.rope-layout-from-target")
        assert f.status is Status.FAIL
        assert "does not set \"is_neox_style\": false (distilled neox)" in f.title
        assert "DeepseekV3ForCausalLM does (interleaved, vllm/model_executor/models/deepseek_v2.py)" in f.title
        assert "'vllm>=0.29.0'" in f.remediation[0].command


def test_on_0_28_a_drafter_that_declares_the_targets_layout_passes_and_the_other_way_fails(tmp_path: Path) -> None:
    target, drafter = _pair(tmp_path, "DeepseekV3ForCausalLM")
    patch_config(drafter, is_neox_style=False)
    results = run_checks(tmp_path, target=target, drafter=drafter, vllm="0.28.0")
    assert "drafter.rope-layout-from-target" not in ids(results, "drafter")
    assert any("RoPE layout interleaved, as the target's" in f.title for f in results["drafter"].findings)
    # a neox target (Qwen3: get_rope's default) and a drafter distilled interleaved: vLLM 0.28 makes it neox
    target, drafter = _pair(tmp_path / "qwen", "Qwen3ForCausalLM")
    patch_config(drafter, is_neox_style=False)
    f = found(run_checks(tmp_path, target=target, drafter=drafter, vllm="0.28.0"), "drafter.rope-layout-from-target")
    assert "says \"is_neox_style\": false (distilled interleaved)" in f.title and "(neox, " in f.title


# --------------------------------------------------------------- the 0.24 V2 lm_head with a padded vocabulary


@pytest.mark.parametrize(("vllm", "fails"), [("0.24.0", True), ("0.25.1", False), ("0.26.0", False)])
def test_a_padded_target_vocabulary_on_the_v2_runner_fails_on_0_24_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                       vllm: str, fails: bool) -> None:
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "1")
    target, drafter = _pair(tmp_path, vocab_size=1024)  # padded past the drafter's 512 (as MiMo's 152576 > 152064)
    argv = ["vllm", "serve", str(target), "--max-model-len", "32768", "--speculative-config",
            '{"method": "dflash", "model": "' + str(drafter) + '", "num_speculative_tokens": 15}']
    results = run_checks(tmp_path, argv=argv, vllm=vllm)
    assert ("drafter.padded-vocab-v2" in ids(results, "drafter")) is fails
    if fails:
        f = found(results, "drafter.padded-vocab-v2")
        assert f.status is Status.FAIL
        assert "the target's vocabulary (1024) is padded past the drafter's (512)" in f.title
        assert "VLLM_USE_V2_MODEL_RUNNER=1" in f.title and "accepts nothing (0%)" in f.title
        assert "'vllm>=0.25.1'" in f.remediation[0].command
        assert f.remediation[1].command == "export VLLM_USE_V2_MODEL_RUNNER=0"
        # one cause, one finding: the generic vocabulary mismatch is not said again
        assert "drafter.vocab-mismatch" not in ids(results, "drafter")
        # the second fix, applied: the V1 runner shares the target's lm_head
        monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "0")
        assert "drafter.padded-vocab-v2" not in ids(run_checks(tmp_path, argv=argv, vllm=vllm), "drafter")


def test_a_drafter_with_its_own_lm_head_is_not_the_padded_vocabulary_case(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "1")
    target = toy.write_toy_target(tmp_path / "target", vocab_size=1024)
    drafter = toy.write_toy_drafter(tmp_path / "drafter", extra_tensors={"lm_head.weight": [512, 64]})
    argv = ["vllm", "serve", str(target), "--speculative-config",
            '{"method": "dflash", "model": "' + str(drafter) + '", "num_speculative_tokens": 15}']
    assert "drafter.padded-vocab-v2" not in ids(run_checks(tmp_path, argv=argv, vllm="0.24.0"), "drafter")
