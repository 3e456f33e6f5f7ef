"""`dflash-doctor live`: what the server serves against what its command asked for.

The server is the replay of a real vLLM 0.20.1 server (fixtures/live, tests/live_replay.py: max_model_len 512, 15
speculative tokens); where a later release answers otherwise, the recorded answer is edited the way that release
answers: vLLM 0.33+ lowers /v1/models' max_model_len (its ModelCard field, model_config.max_model_len) to a YaRN
drafter's context with only a log line. The drafter and target are real toy model directories."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import finding, validate_report
from live_replay import edited, exchanges, replay, url_of, with_json
from test_live import ids, judged
from test_models_check import patch_config

from dflash_doctor.facts.live.live import LiveOptions, gather

try:
    import toymodels as toy
except ImportError:  # tests/ imported as a package
    from tests import toymodels as toy  # type: ignore[no-redef]


def _served_len(length: int) -> list[dict[str, Any]]:
    def lower(_: int, body: bytes) -> bytes:
        def change(data: Any) -> None:
            data["data"][0]["max_model_len"] = length
        return with_json(body, change)
    return edited("accepted", "/v1/models", lower)


def _pair(tmp_path: Path, drafter_len: int) -> tuple[Path, Path]:
    target = toy.write_toy_target(tmp_path / "target")
    yarn = {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": drafter_len // 2}
    drafter = toy.write_toy_drafter(tmp_path / "drafter", config_overrides={
        "max_position_embeddings": drafter_len, "rope_parameters": yarn})
    return target, drafter


def command(target: Path, drafter: Path, max_len: str = "512", k: int = 15) -> list[str]:
    return ["vllm", "serve", str(target), "--max-model-len", max_len, "--speculative-config",
            json.dumps({"method": "dflash", "model": str(drafter), "num_speculative_tokens": k})]


def test_a_context_lowered_to_the_yarn_drafters_fails_with_the_cause_and_the_fix(tmp_path: Path) -> None:
    target, drafter = _pair(tmp_path, 256)
    with replay(_served_len(256)) as server:
        facts = gather(LiveOptions(url=url_of(server), serve_argv=command(target, drafter)))
    f = judged(facts)["live.served-context-shorter"]
    assert f.status.value == "fail"
    assert "serves max_model_len 256, shorter than the requested --max-model-len 512" in f.title
    assert "the drafter's context (256, RoPE yarn)" in f.title and "only a log line" in f.title
    assert [r.command for r in f.remediation] == ["serve a drafter made for 512 tokens",
                                                  "start the server with --max-model-len 256"]
    assert "live.served-config" not in judged(facts)


def test_the_served_config_that_matches_the_command_passes(tmp_path: Path) -> None:
    target, drafter = _pair(tmp_path, 4096)
    with replay(exchanges("accepted")) as server:
        facts = gather(LiveOptions(url=url_of(server), serve_argv=command(target, drafter, max_len="0.5k")))
    f = judged(facts)["live.served-config"]
    assert f.title == "the server serves max_model_len 512 and 15 speculative tokens, as the command asked"


def test_another_number_of_drafted_tokens_than_requested_warns(tmp_path: Path) -> None:
    target, drafter = _pair(tmp_path, 4096)
    with replay(exchanges("accepted")) as server:
        facts = gather(LiveOptions(url=url_of(server), serve_argv=command(target, drafter, k=7)))
    f = judged(facts)["live.served-k-differs"]
    assert f.status.value == "warn"
    assert "drafts 15 tokens per step" in f.title and "num_speculative_tokens 7" in f.title


def test_live_url_takes_the_serve_command_after_a_double_dash(doctor: Any, tmp_path: Path) -> None:
    target, drafter = _pair(tmp_path, 256)
    with replay(_served_len(256)) as server:
        proc = doctor("live", url_of(server), "--json", "-", "--", *command(target, drafter))
    assert proc.returncode == 1, proc.stderr
    report = validate_report(json.loads(proc.stdout))
    assert "live.served-context-shorter" in ids(report)
    assert "the requested --max-model-len 512" in finding(report, "live.served-context-shorter")["title"]
    # without the command nothing is known of what was asked for, and nothing is judged
    with replay(_served_len(256)) as server:
        alone, proc = doctor.report("live", url_of(server))
    assert proc.returncode == 0, proc.stderr
    assert not [i for i in ids(alone) if i.startswith("live.served")]


def test_without_max_model_len_a_context_lowered_to_the_drafters_warns(tmp_path: Path) -> None:
    # the target's own context (40960) was asked for; the server serves the yarn drafter's 256, as vLLM 0.33+ does
    target, drafter = _pair(tmp_path, 256)
    patch_config(target, max_position_embeddings=40960)
    argv = [w for w in command(target, drafter) if w not in ("--max-model-len", "512")]
    with replay(_served_len(256)) as server:
        facts = gather(LiveOptions(url=url_of(server), serve_argv=argv))
    f = judged(facts)["live.served-context-shorter"]
    assert f.status.value == "warn"
    assert "serves max_model_len 256, the drafter's context (RoPE yarn), below the target's " \
           "max_position_embeddings 40960" in f.title
    # served as the target allows: nothing to say
    with replay(exchanges("accepted")) as server:
        facts = gather(LiveOptions(url=url_of(server), serve_argv=argv))
    assert "live.served-context-shorter" not in judged(facts)
