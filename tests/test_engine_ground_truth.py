"""The doctor's verdicts against what the real vLLM engine did on an H200, per release (fixtures/engine/:
0.20.1's fixtures in the directory itself, each later release's in fixtures/engine/vllm-VERSION/).

Each fixture names its release (`vllm_version`) and was recorded by recording/engine/ (go.sh on the GPU machine,
one pipeline for every release: engine_transfer.py --vllm VERSION): the doctor ran first
(`dflash-doctor serve --json`), then the same `vllm serve` command ran for real. The saved report is
judged again with the current code; the verdict must still agree with what the engine did: a command
that started and answered /v1/completions judges to exit 0, one that died judges to exit 1 with the
finding that names the cause. A recorded disagreement stays pinned as a known limit (docs/engine-ground-truth.md).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from conftest import Doctor, findings_of, validate_report

from dflash_doctor.codes.aliases import current_ids

ENGINE = Path(__file__).resolve().parent.parent / "fixtures" / "engine"
FIRST_RELEASE = "0.20.1"
# Every release the engine is recorded on (recording/engine/record.py RELEASES): a directory per later release.
RELEASES = (FIRST_RELEASE, "0.26.0")


def release_of(path: Path) -> str:
    return path.parent.name.removeprefix("vllm-") if path.parent != ENGINE else FIRST_RELEASE


RECORDS = sorted([*ENGINE.glob("[0-9][0-9]-*.json"), *ENGINE.glob("vllm-*/[0-9][0-9]-*.json")])


def load(path: Path) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(path.read_text())
    return record


def test_the_scenarios_recorded_on_the_engine_name_their_release_the_h200_and_the_command() -> None:
    by_release: dict[str, list[str]] = {}
    for path in RECORDS:
        record = load(path)
        # the release a fixture names is the directory it sits in, and one the recording knows
        assert record["vllm_version"] == release_of(path) and record["vllm_version"] in RELEASES, path
        assert "H200" in record["device"]
        assert record["command"].startswith("vllm serve ")
        assert isinstance(record["engine"]["started"], bool) and record["engine"]["log_excerpt"]
        by_release.setdefault(record["vllm_version"], []).append(path.stem)
    assert len(by_release[FIRST_RELEASE]) >= 10, by_release
    # a later release, once recorded, holds the minimum of scenarios
    assert all(len(names) >= 12 for release, names in by_release.items() if release != FIRST_RELEASE), by_release
    assert {p.name for p in ENGINE.iterdir() if p.is_dir()} <= {f"vllm-{v}" for v in RELEASES}


def test_the_docs_table_has_a_column_per_release_and_says_which_are_not_recorded_yet() -> None:
    docs = (ENGINE.parent.parent / "docs" / "engine-ground-truth.md").read_text()
    head = next(line for line in docs.splitlines() if line.startswith("| scenario |"))
    for release in RELEASES:
        assert f"vLLM {release}" in head, (release, head)
        recorded = [p for p in RECORDS if release_of(p) == release]
        rows = [line for line in docs.splitlines() if line.startswith(("| 0", "| 1"))]
        if not recorded:
            assert rows and all("not recorded yet" in row for row in rows), release


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: f"{release_of(p)}-{p.stem}")
def test_the_recorded_facts_judge_again_to_a_verdict_that_agrees_with_the_engine(
        doctor: Doctor, tmp_path: Path, path: Path) -> None:
    record = load(path)
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps(validate_report(record["report"])))
    judged, proc = doctor.report("judge", str(saved))
    failing = {f["id"] for f in findings_of(judged) if f["status"] in ("fail", "error")}
    engine, verdict = record["engine"], record["verdict"]
    served = engine["started"] and engine["answered"]
    predicted_to_serve = proc.returncode == 0
    if verdict.get("known_limit"):
        # a disagreement docs/engine-ground-truth.md names: it stays as recorded until the doctor learns it
        assert predicted_to_serve != served, verdict["known_limit"]
        return
    assert predicted_to_serve == served, (sorted(failing), engine.get("last_exception_line"))
    if not served:
        # the recording names the finding by its v1 id: it is judged now under its current name
        assert set(current_ids(verdict["stop_finding"])) & failing, (verdict["stop_finding"], sorted(failing))
    if engine.get("root_error"):
        # The engine's own words (the exception its EngineCore died on) are quoted by a failing finding.
        message = engine["root_error"].split(": ", 1)[-1]
        quoted = [f["id"] for f in findings_of(judged) if f["status"] in ("fail", "error")
                  and message in f["title"] + "\n" + f["detail"]]
        assert quoted, (engine["root_error"], sorted(failing))


FIXED = [path for path in RECORDS if "fix" in load(path)]


def test_fix_yes_on_the_flash_attn_4_env_then_the_real_server_starts_and_answers() -> None:
    """Scenario 02's env (vLLM 0.20.1 + the flash-attn-4 wheel only), `dflash-doctor fix --yes`, then `vllm serve`.

    Recorded by recording/engine/fix_scenario.py: the verdict before, the fix's plan and outcome (its terminal
    transcript beside the fixture), and the engine afterwards. The report after the fix is judged again by the
    test above (exit 0, as the engine started and answered); this one pins what the fix did on the way.
    """
    assert FIXED, "no engine scenario recorded after `dflash-doctor fix --yes`"
    for path in FIXED:
        record = load(path)
        fix, engine = record["fix"], record["engine"]
        # before: the seed failure, named as the finding to start with
        assert fix["before"]["exit_code"] == 1
        assert "namespaces.v4-without-v2" in current_ids(fix["before"]["stop_finding"])
        # the fix: not interactive, every planned step verified, applied and cleared, nothing left failing
        assert fix["argv"][:2] == ["dflash-doctor", "fix"] and "--yes" in fix["argv"] and fix["exit_code"] == 0
        steps = fix["document"]["steps"]
        assert steps and all(s["verified"] == "resolves" and s["applied"] == "cleared" for s in steps)
        assert "namespaces.v4-without-v2" in {i for s in steps for f in s["findings"] for i in current_ids(f["id"])}
        assert fix["document"]["before"]["namespaces"] == "fail"
        assert "fail" not in fix["document"]["after"].values()
        transcript = (ENGINE / fix["transcript"]).read_text()
        assert all(f"$ {s['command']}" in transcript for s in steps)
        assert "after: 0 failing check(s)" in transcript
        # after: the doctor passes the env, and the real server started and answered
        assert record["doctor"]["exit_code"] == 0 and not record["doctor"]["failing"]
        assert engine["started"] and engine["answered"] and engine["completion"]["usage"]["completion_tokens"] > 0


def test_the_fix_for_an_fp8_kv_cache_under_a_float16_model_is_the_command_the_engine_then_served(
        doctor: Doctor, tmp_path: Path) -> None:
    """Scenario 11 (float16 target, --kv-cache-dtype fp8) died on its first request; the doctor's first
    remediation for it is, flag for flag, scenario 12's command, which the engine served on the H200."""
    dead, served = load(ENGINE / "11-kv-cache-fp8.json"), load(ENGINE / "12-kv-cache-fp8-bfloat16.json")
    assert dead["engine"]["started"] and not dead["engine"]["answered"]
    assert served["engine"]["started"] and served["engine"]["answered"]
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps(dead["report"]))
    judged, _ = doctor.report("judge", str(saved))
    (finding,) = [f for f in findings_of(judged) if f["id"] == "serve-command.fp8-kv-float16"]
    assert finding["evidence"]["backend_from"] == "vLLM's own attention selector"

    def flags(command: str) -> dict[str, str]:
        words, out = shlex.split(command)[3:], {}  # after `vllm serve TARGET`
        for i, word in enumerate(words):
            if word.startswith("--") and word != "--port":  # the scenarios ran side by side, each on its port
                following = words[i + 1] if i + 1 < len(words) else "--"
                out[word] = "" if following.startswith("--") else following
        return out

    assert flags(finding["remediation"][0]["command"]) == flags(served["command"])
