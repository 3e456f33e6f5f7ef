"""Every count the doctor takes is bounded by what is plausible, and every JSON it reads by depth.

A number past the bound is a one-line usage error (exit 2) that says the range, before anything is built from
it: each run here is a real `dflash-doctor` process whose address space is limited (RLIMIT_AS) to far less
than one object per unit of a 20-digit count would take; on the unbounded code, `serve --gpus` with 20 digits
grew to 24 GB. A number inside the serve command that no cluster has is a finding, and a --speculative-config
nested 600 deep is a finding too, never a traceback.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HUGE = "9" * 20
ADDRESS_SPACE = 3 << 30  # the interpreter and its imports take a few hundred MB of it


def limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def doctor(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "dflash_doctor", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300, preexec_fn=limited, check=False)


@pytest.mark.parametrize(("argv", "says"), [
    (["serve", "--no-gpu", "--gpus", HUGE, "--", "vllm", "serve", "m"],
     f"--gpus {HUGE}: give a whole number, at least 1 and at most 256"),
    (["serve", "--no-gpu", "--gpus", "257", "--", "vllm", "serve", "m"], "at least 1 and at most 256"),
    (["serve", "--no-gpu", "--gpu-memory", "1e20", "--", "vllm", "serve", "m"], "at most 1e+06"),
    (["--no-gpu", "--timeout", "1e20"], "--timeout 1e+20: give a number of seconds, more than 0 and at most 86400"),
    (["--no-gpu", "--target-arch", ",".join(f"sm_{n}" for n in range(50, 90))],
     "more than 32 architectures"),
    (["--no-gpu", *[w for n in range(50, 90) for w in ("--target-arch", f"sm_{n}")]], "more than 32 architectures"),
    (["live", "http://127.0.0.1:9", "--requests", HUGE],
     f"--requests {HUGE}: give a whole number, at least 1 and at most 1000"),
    (["live", "http://127.0.0.1:9", "--max-tokens", HUGE], "at least 1 and at most 100000"),
    (["merge", "--jobs", HUGE, "r.json"], f"--jobs {HUGE}: give a whole number, at least 1 and at most 64"),
    (["fleet", "--ray", "auto", "--min-nodes", HUGE],
     f"--min-nodes {HUGE}: give a whole number, at least 0 and at most 100000"),
], ids=["gpus-huge", "gpus-257", "gpu-memory", "timeout", "archs-one-list", "archs-many-flags", "live-requests",
        "live-max-tokens", "merge-jobs", "fleet-min-nodes"])
def test_a_count_past_what_is_plausible_is_a_one_line_usage_error_before_anything_is_built(
        tmp_path: Path, argv: list[str], says: str) -> None:
    proc = doctor(tmp_path, *argv)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stdout == "" and "Traceback" not in proc.stderr and "MemoryError" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dflash-doctor"), proc.stderr[-2000:]
    assert says in lines[0], lines[0]


def report_of(tmp_path: Path, *argv: str) -> tuple[dict[str, object], subprocess.CompletedProcess[str]]:
    proc = doctor(tmp_path, *argv[:1], "--json", "-", *argv[1:])
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return json.loads(proc.stdout), proc


def findings(report: dict[str, object]) -> dict[str, dict[str, str]]:
    checks = report["checks"]
    assert isinstance(checks, list)
    return {f["id"]: f for c in checks for f in c["findings"]}


@pytest.mark.parametrize(("flags", "says"), [
    (["-tp", HUGE], f"-tp '{HUGE}': more than 65536"),
    (["--pipeline-parallel-size", "70000"], "--pipeline-parallel-size '70000': more than 65536"),
    (["--max-num-batched-tokens", "9" * 400 + "k"], "cannot convert float infinity to integer"),
], ids=["tp", "pp", "batched-tokens-past-float"])
def test_a_count_in_the_serve_command_past_any_cluster_is_a_flag_finding(tmp_path: Path, flags: list[str],
                                                                        says: str) -> None:
    report, proc = report_of(tmp_path, "serve", "--no-gpu", "--only", "serve-command", "--no-vllm-parser", "--",
                             "vllm", "serve", str(tmp_path), *flags)
    assert proc.returncode == 1
    invalid = findings(report)["serve-command.flag-invalid"]
    assert invalid["status"] == "fail" and says in invalid["title"], invalid["title"]


def test_a_speculative_config_nested_600_deep_is_a_finding_not_a_traceback(tmp_path: Path) -> None:
    deep = '{"a": ' * 600 + "1" + "}" * 600  # 7 kB
    report, proc = report_of(tmp_path, "serve", "--no-gpu", "--only", "serve-command", "--", "vllm", "serve",
                             str(tmp_path), "--speculative-config", deep)
    assert proc.returncode == 1 and "RecursionError" not in proc.stderr
    spec = findings(report)["serve-command.spec-json"]
    assert spec["status"] == "fail" and "nested deeper than 64 levels" in spec["title"], spec["title"]
    # Python's syntax (what the doctor repairs a --speculative-config from) nested as deep as its parser allows
    python_deep = "{'a': " + "[" * 199 + "1" + "]" * 199 + "}"
    report, proc = report_of(tmp_path, "serve", "--no-gpu", "--only", "serve-command", "--", "vllm", "serve",
                             str(tmp_path), "--speculative-config", python_deep)
    assert proc.returncode == 1 and "serve-command.spec-json" in findings(report)
