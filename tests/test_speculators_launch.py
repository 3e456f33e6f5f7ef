"""`vllm serve SPECULATORS_DIR`: the one-command launch of a speculators-format drafter, read as each vLLM release
reads it (maybe_override_with_speculators): the verifier its config names is the target, the directory the
drafter; from 0.33 a verifier that is not a remote repo is refused. Real toy models, real vLLM sources."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from test_dflash_reports import _to_speculators_format
from test_models_check import found, ids, patch_config, run_checks

from dflash_doctor.model import Status

try:
    import toymodels as toy
except ImportError:  # tests/ imported as a package
    from tests import toymodels as toy  # type: ignore[no-redef]


def _launch(tmp_path: Path, verifier: Any) -> tuple[Path, Path]:
    """A toy target and its drafter rewritten in the speculators format, whose verifier is `verifier`
    (a Path: the target's directory)."""
    target = toy.write_toy_target(tmp_path / "target")
    patch_config(target, max_position_embeddings=40960)
    drafter = toy.write_toy_drafter(tmp_path / "drafter")
    config = _to_speculators_format(drafter)
    config["speculators_config"]["verifier"]["name_or_path"] = str(verifier if verifier != "TARGET" else target)
    if verifier is None:
        config["speculators_config"]["verifier"]["name_or_path"] = None
    (drafter / "config.json").write_text(json.dumps(config))
    return target, drafter


def serve(model: Path | str, *extra: str) -> list[str]:
    return ["vllm", "serve", str(model), "--max-model-len", "32768", "--max-num-batched-tokens", "32768", *extra]


@pytest.mark.parametrize("vllm", ["0.20.1", "0.29.0"])
def test_before_0_33_the_drafter_dir_is_served_with_its_local_verifier_as_the_target(tmp_path: Path, vllm: str) -> None:
    target, drafter = _launch(tmp_path, "TARGET")
    results = run_checks(tmp_path, argv=serve(drafter), vllm=vllm)
    launch = found(results, "serve-command.speculators-launch")
    assert launch.status is Status.PASS
    assert f"serves its verifier {target} with it as the dflash drafter (num_speculative_tokens 15)" in launch.title
    # judged as the pair vLLM serves: no "no --speculative-config", the drafter against the verifier
    assert "serve-command.no-speculative-config" not in ids(results, "serve-command")
    assert found(results, "serve-command.spec-ok").title.startswith("the speculators drafter's config: method dflash")
    assert results["drafter"].status is not Status.FAIL
    held = found(results, "drafter.ok" if vllm != "0.20.1" else "drafter.checked")  # 0.20.1: the layer-id offset
    assert "mask_token_id 500" in held.title and "target Qwen3ForCausalLM" in held.title


def test_from_0_33_a_local_verifier_is_refused_with_the_explicit_command_as_the_fix(tmp_path: Path) -> None:
    target, drafter = _launch(tmp_path, "TARGET")
    results = run_checks(tmp_path, argv=serve(drafter), vllm="0.34.0")
    refused = found(results, "serve-command.speculators-verifier-refused")
    assert refused.status is Status.FAIL
    assert "is a local path" in refused.title and "Speculators verifier must name a remote model repository" in refused.title
    assert "serve-command.no-speculative-config" not in ids(results, "serve-command")
    fix = shlex.split(refused.remediation[0].command)
    assert fix[:3] == ["vllm", "serve", str(target)]
    spec = json.loads(fix[fix.index("--speculative-config") + 1])
    assert spec == {"method": "dflash", "model": str(drafter), "num_speculative_tokens": 15}
    # the fix, applied literally: vLLM reads the drafter as a drafter and the command passes
    fixed = run_checks(tmp_path, argv=fix, vllm="0.34.0")
    assert not [i for i in ids(fixed, "serve-command") if i.startswith("serve-command.speculators")]
    assert found(fixed, "serve-command.spec-ok").status is Status.PASS
    assert fixed["drafter"].status is Status.PASS


@pytest.mark.parametrize(("vllm", "expected"), [("0.29.0", "serve-command.speculators-no-verifier"),
                                                ("0.34.0", "serve-command.speculators-verifier-refused")])
def test_a_speculators_drafter_without_a_verifier_fails_on_every_release(tmp_path: Path, vllm: str,
                                                                          expected: str) -> None:
    _, drafter = _launch(tmp_path, None)
    results = run_checks(tmp_path, argv=serve(drafter), vllm=vllm)
    f = found(results, expected)
    assert f.status is Status.FAIL
    assert "TARGET" in f.remediation[0].command


def test_from_0_33_a_remote_verifier_is_served_from_the_hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "hub"
    snapshot = cache / "models--Qwen--Qwen3-8B" / "snapshots" / "abc123"
    toy.write_toy_target(snapshot)
    patch_config(snapshot, max_position_embeddings=40960)
    (cache / "models--Qwen--Qwen3-8B" / "refs").mkdir(parents=True)
    (cache / "models--Qwen--Qwen3-8B" / "refs" / "main").write_text("abc123")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    _, drafter = _launch(tmp_path, "Qwen/Qwen3-8B")
    results = run_checks(tmp_path, argv=serve(drafter), vllm="0.34.0")
    assert found(results, "serve-command.speculators-launch").status is Status.PASS
    assert results["drafter"].status is Status.PASS, [f.title for f in results["drafter"].findings]


@pytest.mark.parametrize(("vllm", "dropped"), [("0.24.0", "method, model, num_speculative_tokens"),
                                               ("0.29.0", "model")])
def test_a_speculative_config_beside_the_launch_is_dropped_before_0_29_and_merged_after(
        tmp_path: Path, vllm: str, dropped: str) -> None:
    _, drafter = _launch(tmp_path, "TARGET")
    patch_config(drafter, block_size=16)
    spec = json.dumps({"method": "dflash", "model": "/elsewhere", "num_speculative_tokens": 7})
    results = run_checks(tmp_path, argv=serve(drafter, "--speculative-config", spec), vllm=vllm)
    f = found(results, "serve-command.speculators-launch")
    assert f.status is Status.WARN and f"drops {dropped} of the --speculative-config" in f.title
    # the drafter is judged with the k vLLM serves: the checkpoint's 15 before 0.29, the command's 7 after
    k = 15 if vllm == "0.24.0" else 7
    assert f"block_size 16 (k={k})" in " ".join(x.title for x in results["drafter"].findings)


@pytest.mark.parametrize("speculators_config", [["Qwen/Qwen3-8B"], {}, {"verifier": "Qwen/Qwen3-8B"},
                                                {"verifier": {"name_or_path": ["x"]}, "proposal_methods": "many"},
                                                {"verifier": {"name_or_path": "\u0000" * 3},
                                                 "proposal_methods": [{"speculative_tokens": {"k": 1}}]}])
def test_a_hand_broken_speculators_config_is_a_finding_never_a_traceback(tmp_path: Path, speculators_config: Any) -> None:
    _, drafter = _launch(tmp_path, "Qwen/Qwen3-8B")
    patch_config(drafter, speculators_config=speculators_config)
    for vllm in ("0.24.0", "0.34.0"):
        results = run_checks(tmp_path, argv=serve(drafter), vllm=vllm)
        launch = [f for f in results["serve-command"].findings if f.id.startswith("serve-command.speculators")]
        assert len(launch) == 1, (vllm, [(f.id, f.title) for f in launch])
        # refused where vLLM refuses it, else served and k {"k": 1} refused by the speculative-config rules
        assert results["serve-command"].status is Status.FAIL
