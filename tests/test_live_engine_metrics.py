"""The live check's reading of the spec-decode counters, against what real vLLM servers exposed on an H200.

Every served scenario of the engine recordings (fixtures/engine/, fixtures/engine/vllm-VERSION/) kept its
server's `/metrics` spec-decode lines after one completion. The names the live collector looks for are read from
the release's own source (`metric_names_from_source` over vllm/v1/spec_decode/metrics.py), as `dflash-doctor live`
reads them from the installed vLLM; here they must be the names the real server of that release exposed, and the
counts the collector tallies from those lines must be the engine's own (one draft of k tokens, all accepted, for
the toy pair whose drafter is the target's copy).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from vllm_sources import vllm_source

from dflash_doctor.facts.live.live import metric_names_from_source, names_exposed, parse_prometheus, tally

ENGINE = Path(__file__).resolve().parent.parent / "fixtures" / "engine"


def _served() -> list[tuple[str, Path]]:
    out = []
    for path in sorted([*ENGINE.glob("[0-9][0-9]-*.json"), *ENGINE.glob("vllm-*/[0-9][0-9]-*.json")]):
        record: dict[str, Any] = json.loads(path.read_text())
        if record["engine"].get("answered") and record["engine"].get("spec_decode_metrics"):
            out.append((record["vllm_version"], path))
    return out


SERVED = _served()


def test_the_newer_release_is_among_the_recorded_servers() -> None:
    assert {"0.26.0"} <= {version for version, _ in SERVED}


@pytest.mark.parametrize(("version", "path"), SERVED, ids=lambda v: v.stem if isinstance(v, Path) else v)
def test_the_names_read_from_the_releases_source_are_the_ones_its_server_exposed_and_tally_its_counts(
        version: str, path: Path) -> None:
    record = json.loads(path.read_text())
    samples, _ = parse_prometheus("\n".join(record["engine"]["spec_decode_metrics"]) + "\n")
    exposed = names_exposed(samples)
    from_source = metric_names_from_source((vllm_source(version) / "v1" / "spec_decode" / "metrics.py").read_text())
    assert {r: n for r, n in from_source.items() if r in exposed} == exposed, (from_source, exposed)
    assert {"drafts", "draft_tokens", "accepted_tokens"} <= set(exposed)
    counts, invalid = tally(samples, from_source)
    assert not invalid
    k = counts["draft_tokens"] / counts["drafts"]
    assert counts["drafts"] >= 1 and k == 15 and counts["accepted_tokens"] <= counts["draft_tokens"]
    per_pos = counts.get("accepted_per_pos") or {}
    assert sum(per_pos.values()) == counts["accepted_tokens"]
