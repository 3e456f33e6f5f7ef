"""Acceptance-killing regressions of single vLLM release lines, judged on real toy models against each release's
real source (tests/vllm_sources.py): the 0.28 drafter RoPE layout taken from the target (vllm #53063, PRs #51655 and
#54373), and the 0.24 V2 runner's lm_head sharing with a padded target vocabulary (PR #46435). The releases on
either side of each line are judged too: the rule must say nothing there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


# ------------------------------------------------- each release's own V2 DFlash loader against the doctor's reading

# The matrix, and the releases on either side of the 0.24 and 0.28 lines.
LOADER_RELEASES = ("0.24.0", "0.25.1", "0.26.0", "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.33.0", "0.34.0")
LOADER = "v1/worker/gpu/spec_decode/dflash/utils.py"


def _release_loader(version: str) -> Any:
    """The release's own load_dflash_model (V2 runner), with its own _should_share, get_target_lm_head and
    dflash_target_rope_is_neox_style; only what builds or compiles a model is given (get_model returns the drafter
    `load` is called with, set_model_tag does nothing, one pipeline stage)."""
    import contextlib
    import sys
    from types import ModuleType, SimpleNamespace

    from vllm_release import release_function
    from vllm_sources import vllm_source

    root = vllm_source(version)
    eagle = "v1/worker/gpu/spec_decode/eagle/utils.py"
    models = "model_executor/models/qwen3_dflash.py"
    namespace: dict[str, Any] = {
        "get_pp_group": lambda: SimpleNamespace(world_size=1),
        "replace": lambda obj, **changes: SimpleNamespace(**{**vars(obj), **changes}),
        "maybe_share_target_embed": lambda *args: None,
        "get_draft_load_config": lambda config: None, "get_pp_safe_draft_load_config": lambda config: config,
        "_should_share": release_function(version, eagle, "_should_share", {}),
    }
    if "def get_target_lm_head(" in (root / eagle).read_text():
        namespace["get_target_lm_head"] = release_function(version, eagle, "get_target_lm_head", {})
    if "def get_dflash_causal(" in (root / LOADER).read_text():
        namespace["get_dflash_causal"] = release_function(version, LOADER, "get_dflash_causal", {})
    backends = ModuleType("vllm.compilation.backends")
    backends.set_model_tag = lambda tag: contextlib.nullcontext()  # type: ignore[attr-defined]
    dflash = ModuleType("vllm.model_executor.models.qwen3_dflash")
    dflash.dflash_has_any_non_causal = lambda config: True  # type: ignore[attr-defined]
    if "def dflash_target_rope_is_neox_style(" in (root / models).read_text():
        dflash.dflash_target_rope_is_neox_style = release_function(  # type: ignore[attr-defined]
            version, models, "dflash_target_rope_is_neox_style", {})
    remaps_on_vocab = "draft_vocab_size != target_vocab_size" in (root / models).read_text()

    def load(target_neox: bool, drafter_vocab: int, target_vocab: int) -> tuple[bool, bool]:
        """(the drafter keeps its own lm_head, the drafter's is_neox_style was set from the target)."""
        draft_head, target_head = object(), object()
        hf_config = SimpleNamespace(dflash_config={}, num_hidden_layers=1)
        drafter = SimpleNamespace(model=SimpleNamespace(embed_tokens=None), lm_head=draft_head, config=hf_config,
                                  draft_id_to_target_id=object() if remaps_on_vocab and drafter_vocab != target_vocab
                                  else None)
        rotary = SimpleNamespace(is_neox_style=target_neox)
        target = SimpleNamespace(lm_head=target_head, model=SimpleNamespace(embed_tokens=object()),
                                 modules=lambda: iter([rotary]))
        spec = SimpleNamespace(draft_model_config=SimpleNamespace(hf_config=hf_config), attention_backend=None,
                               kv_cache_dtype=None)
        config = SimpleNamespace(speculative_config=spec, attention_config=SimpleNamespace(),
                                 cache_config=SimpleNamespace(), load_config=SimpleNamespace())
        function = release_function(version, LOADER, "load_dflash_model",
                                    {**namespace, "get_model": lambda **_: drafter})
        saved = {name: sys.modules.get(name) for name in (backends.__name__, dflash.__name__)}
        sys.modules[backends.__name__], sys.modules[dflash.__name__] = backends, dflash
        try:
            loaded = function(target, config)
        finally:
            for name, module in saved.items():
                if module is None:
                    sys.modules.pop(name, None)
                else:
                    sys.modules[name] = module
        return loaded.lm_head is draft_head, getattr(hf_config, "is_neox_style", None) is not None
    return load


@pytest.mark.parametrize("version", LOADER_RELEASES)
def test_which_releases_keep_the_drafters_head_or_take_the_targets_rope_is_each_releases_own_loader(version: str) -> None:
    from test_release_matrix import _vllm_facts

    from dflash_doctor.checks.models.drafter_pairing import _in_releases
    from dflash_doctor.knowledge.dflash_reports import PADDED_VOCAB_V2, ROPE_LAYOUT_FROM_TARGET

    load = _release_loader(version)
    vllm = _vllm_facts(version)
    keeps_head = _in_releases(vllm, "v2_lm_head_kept_for_vocab_remap", PADDED_VOCAB_V2.value["releases"])
    takes_rope = _in_releases(vllm, "rope_layout_from_target", ROPE_LAYOUT_FROM_TARGET.value["releases"])
    for drafter_vocab, target_vocab in ((152064, 152576), (151936, 151936)):
        kept, overridden = load(False, drafter_vocab, target_vocab)
        assert kept == (keeps_head and drafter_vocab != target_vocab), (version, drafter_vocab, target_vocab)
        assert overridden == takes_rope, version


def test_without_readable_source_the_release_line_decides() -> None:
    from dflash_doctor.checks.models.drafter_pairing import _in_releases
    from dflash_doctor.facts.serve.serve_shapes import VllmDflash

    def line(version: str, marker: str) -> bool:
        return _in_releases(VllmDflash(installed=True, version=version), marker, ("0.28",))

    assert [line(v, "rope_layout_from_target") for v in ("0.27.1", "0.28.0", "0.28.2", "0.29.0")] == \
        [False, True, True, False]
    assert not _in_releases(None, "rope_layout_from_target", ("0.28",))  # no vLLM: the newest behaviour


@pytest.mark.parametrize(("vllm", "runner"), [("0.25.1", "1"), ("0.24.0", "0")])
def test_a_padded_target_vocabulary_where_vllm_shares_the_head_only_warns(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch,
                                                                        vllm: str, runner: str) -> None:
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", runner)
    target, drafter = _pair(tmp_path, vocab_size=1024)
    argv = ["vllm", "serve", str(target), "--max-model-len", "32768", "--speculative-config",
            '{"method": "dflash", "model": "' + str(drafter) + '", "num_speculative_tokens": 15}']
    f = found(run_checks(tmp_path, argv=argv, vllm=vllm), "drafter.vocab-mismatch")
    assert f.status is Status.WARN and "vocab_size 512 is below the target's 1024" in f.title
