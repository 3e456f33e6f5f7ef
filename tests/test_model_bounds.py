"""Sizes read from model files are bounded by what the files hold, and one cause is one decisive finding.

Real files throughout: toy models written with the real `safetensors` library (tests/toymodels.py), hand-made
safetensors headers (8-byte length + JSON, real files the reference reader would refuse), and the real CLI in a
subprocess with a short timeout."""

from __future__ import annotations

import json
import math
import resource
import shlex
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("safetensors")

from conftest import Doctor, finding, findings_of, validate_report
from test_models_check import found, patch_config, run_checks

from dflash_doctor.facts.modelfiles.model_dir import CONFIG_LIST_MAX
from dflash_doctor.facts.modelfiles.safetensors_header import MAX_HEADER_SIZE, MAX_TENSORS_KEPT
from dflash_doctor.facts.serve.serve_args import parse_serve_command
from dflash_doctor.knowledge.dflash import SPEC_BUDGET_RULE_A
from dflash_doctor.model import Status

try:
    import toymodels as toy
except ImportError:  # tests/ imported as a package
    from tests import toymodels as toy  # type: ignore[no-redef]


def spec_json(drafter: Path, **extra: Any) -> str:
    return json.dumps({"method": "dflash", "model": str(drafter), "num_speculative_tokens": 15, **extra})


def command(target: Path, drafter: Path, *extra: str) -> list[str]:
    return ["vllm", "serve", str(target), "--max-model-len", "4096", "--speculative-config", spec_json(drafter),
            *extra]


def huge_dims_header(path: Path, header_bytes: int) -> Path:
    """A real safetensors file whose one tensor declares ~header_bytes / 21 dimensions of 2**63 - 1 each."""
    dims = header_bytes // 21
    header = {"w": {"dtype": "F32", "shape": [2**63 - 1] * dims, "data_offsets": [0, 4]}}
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with path.open("wb") as handle:
        handle.write(struct.pack("<Q", len(raw)))
        handle.write(raw)
        handle.write(b"\0" * 4)
    return path


def report_of(doctor: Doctor, *options: str, argv: list[str], timeout: float = 60) -> tuple[dict[str, Any], Any]:
    """`dflash-doctor serve OPTIONS --json - -- ARGV` with a short timeout: a loop without end fails the test."""
    proc = doctor("serve", *options, "--json", "-", "--", *argv, timeout=timeout)
    return validate_report(json.loads(proc.stdout)), proc


def children_max_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


# ----------------------------------------------------------------------------------- sizes from files


@pytest.mark.parametrize("megabytes", [2, 6])
def test_a_header_of_many_huge_dimensions_is_read_in_linear_time_and_kept_out_of_the_facts(
        doctor: Doctor, tmp_path: Path, megabytes: int) -> None:
    target = toy.write_toy_target(tmp_path / "target")
    drafter = toy.write_toy_drafter(tmp_path / "drafter")
    weights = huge_dims_header(drafter / "model.safetensors", megabytes * 1_000_000)
    started = time.monotonic()
    report, proc = report_of(doctor, "--no-gpu", "--only", "models", argv=command(target, drafter))
    elapsed = time.monotonic() - started
    assert elapsed < 10, f"{elapsed:.1f} s for a {megabytes} MB header"
    broken = finding(report, "model-files.weights-broken")
    assert broken["evidence"]["file"] == str(weights) and broken["evidence"]["tensor"] == "w"
    assert str(weights) in broken["title"] and "tensor 'w'" in broken["title"]
    assert "overflows: the element count passes 2**64 at dimension 1 of" in broken["title"]
    assert len(broken["title"]) < 1000  # the first dimensions and the rank, never the whole shape
    assert len(proc.stdout) < 200_000  # nor in the saved facts: the report is small
    facts = next(c["facts"] for c in report["checks"] if c["id"] == "model-files")
    tensor = facts["models"]["drafter"]["dir"]["weights"]["tensors"]["w"]
    assert len(tensor["shape"]) == 8 and tensor["rank"] == megabytes * 1_000_000 // 21


def test_a_drafter_config_with_10_to_the_12_layers_is_one_finding_not_a_loop(doctor: Doctor, tmp_path: Path) -> None:
    """num_hidden_layers 1000000000000 once took 2.5 GB after 20 s and never finished; the layer count is bounded
    by the tensors the weights hold. Without layer_types, the KV-cache estimate must not expand the count either."""
    target = toy.write_toy_target(tmp_path / "target")
    drafter = toy.write_toy_drafter(tmp_path / "drafter", config_overrides={"num_hidden_layers": 10**12},
                                    omit_config_keys=["layer_types"])
    before = children_max_rss_mib()
    started = time.monotonic()
    report, _ = report_of(doctor, "--no-gpu", "--gpus", "1", "--gpu-memory", "80", "--only", "models,serve",
                                argv=command(target, drafter))
    elapsed = time.monotonic() - started
    assert elapsed < 30 and max(before, children_max_rss_mib()) < 1024
    f = finding(report, "drafter.config-weights")
    assert f["status"] == "fail" and str(drafter / "config.json") in f["title"]
    assert "num_hidden_layers 1000000000000, but the weights hold 1 layer" in f["title"]
    assert f["evidence"]["weights"] == {"num_hidden_layers": 1}
    drafter_fails = [x for x in findings_of(report, "drafter") if x["status"] == "fail"]
    assert [x["id"] for x in drafter_fails] == ["drafter.config-weights"]
    assert finding(report, "serve-command.drafter-broken")["cause"] == "drafter.config-weights"
    assert "serve-resources.memory" in {x["id"] for x in findings_of(report, "serve-resources")} or \
        "serve-resources.kv-cache" in {x["id"] for x in findings_of(report, "serve-resources")}


def test_absurd_target_lengths_are_judged_without_a_traceback(doctor: Doctor, tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "target")
    patch_config(target, num_hidden_layers=10**12, drop_layer_types=None, max_position_embeddings=10**400)
    drafter = toy.write_toy_drafter(tmp_path / "drafter")
    report, proc = report_of(doctor, "--no-gpu", "--gpus", "1", "--gpu-memory", "80", "--only", "models,serve",
                                argv=command(target, drafter))
    assert not [x for x in findings_of(report) if x["status"] == "error"], proc.stderr[-2000:]
    assert "Infinity" not in proc.stdout and "NaN" not in proc.stdout


# ------------------------------------------------------------------ inputs far larger than any real model

# Run the doctor under a fresh parent that reports its child's peak RSS and CPU seconds: RUSAGE_CHILDREN of the
# test process would include every earlier child of this worker.
_MEASURED = """
import json, resource, subprocess, sys
proc = subprocess.run(sys.argv[2:], capture_output=True, text=True, timeout=float(sys.argv[1]))
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
sys.stdout.write(proc.stdout)
sys.stderr.write(proc.stderr + "\\n" + json.dumps({"rc": proc.returncode, "rss_mib": usage.ru_maxrss / 1024,
                                                  "cpu_s": usage.ru_utime + usage.ru_stime}))
"""


def measured_report(tmp_path: Path, argv: list[str], timeout: float = 300) -> tuple[dict[str, Any], dict[str, Any]]:
    """`dflash-doctor serve --no-gpu --only models --json REPORT -- ARGV`: the validated report, and the run's
    rc, peak RSS (MiB), CPU seconds, wall seconds and report bytes."""
    out = tmp_path / "report.json"
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", _MEASURED, str(timeout), sys.executable, "-m", "dflash_doctor",
                           "serve", "--no-gpu", "--only", "models", "--json", str(out), "--", *argv],
                          check=False, capture_output=True, text=True, timeout=timeout + 30, cwd=tmp_path)
    wall = time.monotonic() - started
    figures = json.loads(proc.stderr.strip().splitlines()[-1])
    figures.update(wall_s=wall, report_bytes=out.stat().st_size if out.exists() else None)
    assert figures["rc"] in (0, 1), proc.stderr[-3000:]
    return validate_report(json.loads(out.read_text())), figures


def assert_within_budget(figures: dict[str, Any]) -> None:
    """The issue's budget: under 1 GB, a report of a few MB, and done in seconds of CPU (wall time on a loaded
    test machine says little; the CPU seconds are what --timeout would see on an idle one)."""
    assert figures["rss_mib"] < 1024, figures
    assert figures["report_bytes"] < 5_000_000, figures
    assert figures["cpu_s"] < 30, figures


def test_a_drafter_with_3e8_layers_and_one_layer_type_is_counted_not_expanded(tmp_path: Path) -> None:
    """`[layer_types[-1]] * num_hidden_layers` once built a 3e8-item list (4.6 GB) for the remediation."""
    target = toy.write_toy_target(tmp_path / "target")
    drafter = toy.write_toy_drafter(tmp_path / "drafter", config_overrides={
        "num_hidden_layers": 300_000_000, "layer_types": ["full_attention"]})
    report, figures = measured_report(tmp_path, command(target, drafter))
    assert_within_budget(figures)
    f = finding(report, "drafter.layer-types-length")
    assert "layer_types has 1 entries for num_hidden_layers 300000000" in f["title"]
    assert f["evidence"]["layer_types_count"] == 1 and f["evidence"]["num_hidden_layers"] == 300_000_000
    assert f["cause"] == "drafter.config-weights"  # the weights hold 1 layer: num_hidden_layers is what is wrong
    assert "num_hidden_layers 300000000, but the weights hold 1 layer" in finding(report, "drafter.config-weights")["title"]


def test_a_target_layer_ids_list_of_7_million_entries_is_summarised(tmp_path: Path) -> None:
    """7 million ids (a 14 MB config.json, under the 16 MB a config may have) once took 2.6 GB and wrote a
    476 MB report: the ids went into the facts and every finding's title and evidence."""
    target = toy.write_toy_target(tmp_path / "target")
    drafter = toy.write_toy_drafter(tmp_path / "drafter")
    config = json.loads((drafter / "config.json").read_text())
    config["dflash_config"]["target_layer_ids"] = [1] * 7_000_000
    (drafter / "config.json").write_text(json.dumps(config, separators=(",", ":")))
    report, figures = measured_report(tmp_path, command(target, drafter))
    assert_within_budget(figures)
    ids = finding(report, "drafter.layer-ids-invalid")
    assert "target_layer_ids [1, 1, 1, 1, 1, 1, 1, 1, ...] (7000000 in all) are not strictly increasing (repeats)" \
        in ids["title"]
    assert ids["evidence"]["count"] == 7_000_000 and len(ids["evidence"]["target_layer_ids"]) <= 12
    fc = finding(report, "drafter.fc-width")  # fc reads 7e6 x 64 features: the whole count, not the kept ids
    assert fc["evidence"]["expected"] == [64, 7_000_000 * 64]
    config_facts = next(c["facts"] for c in report["checks"] if c["id"] == "model-files")["models"]["drafter"]["dir"]["config"]
    summary = config_facts["lists"]["drafter.dflash_config.target_layer_ids"]
    assert summary["count"] == 7_000_000 and summary["repeats"] and not summary["increasing"]
    assert len(config_facts["drafter"]["dflash_config"]["target_layer_ids"]) == CONFIG_LIST_MAX


def _many_tiny_tensors_header(path: Path, junk: int, real: dict[str, tuple[int, ...]]) -> int:
    """A valid safetensors file: `junk` one-byte U8 scalars named by hex number, then the drafter's own F16
    tensors (`real`), in offset order as the writer lays them out. Returns the header length."""
    entries = [f'"{i:x}":{{"dtype":"U8","shape":[],"data_offsets":[{i},{i + 1}]}}' for i in range(junk)]
    offset = junk
    for name, shape in real.items():
        size = 2 * math.prod(shape)
        entries.append(f'"{name}":{{"dtype":"F16","shape":{list(shape)},"data_offsets":[{offset},{offset + size}]}}'
                       .replace(" ", ""))
        offset += size
    raw = ("{" + ",".join(entries) + "}").encode()
    del entries
    raw += b" " * (-len(raw) % 8)
    with path.open("wb") as handle:
        handle.write(struct.pack("<Q", len(raw)))
        handle.write(raw)
        handle.truncate(8 + len(raw) + offset)  # the data: zeros
    return len(raw)


def test_a_header_of_1_5_million_tiny_tensors_is_counted_not_copied(tmp_path: Path) -> None:
    """A 98 MB header (under safetensors' 100 MB MAX_HEADER_SIZE) of 1.5 million tensors once took 3.3 GB,
    176 s and a 370 MB report: every tensor went into the facts. The drafter's own tensors come after the first
    million names and are still the ones judged."""
    target = toy.write_toy_target(tmp_path / "target")
    drafter = toy.write_toy_drafter(tmp_path / "drafter")
    header_len = _many_tiny_tensors_header(drafter / "model.safetensors", 1_500_000, toy.drafter_tensor_shapes())
    assert header_len <= MAX_HEADER_SIZE
    report, figures = measured_report(tmp_path, command(target, drafter))
    assert_within_budget(figures)
    assert not [f for f in findings_of(report, "model-files") if f["status"] == "fail"]  # the file is valid
    unexpected = finding(report, "drafter.tensor-unexpected")
    assert unexpected["title"].startswith(f"{drafter}: ") and "0, 1, 10, 100, " in unexpected["title"]
    assert "of its 1500014 tensors are not in the facts and were not judged by name" in unexpected["title"]
    ids = {f["id"] for f in findings_of(report, "drafter") if f["status"] == "fail"}
    assert ids == {"drafter.tensor-unexpected"}  # fc, norms and layer 0 are found and match: nothing missing
    weights = next(c["facts"] for c in report["checks"] if c["id"] == "model-files")["models"]["drafter"]["dir"]["weights"]
    assert weights["tensor_count"] == 1_500_014 and not weights["tensors_complete"]
    assert len(weights["tensors"]) <= MAX_TENSORS_KEPT and "fc.weight" in weights["tensors"]
    assert weights["dtypes"]["U8"] == {"tensors": 1_500_000, "bytes": 1_500_000}


def test_an_index_of_a_million_names_is_read_in_bounds_and_a_larger_one_is_refused(tmp_path: Path) -> None:
    """A weight_map of 900000 names that no shard holds: read, and its problems capped; one of 1.1 million:
    refused with a finding that names the file (its dict alone would take gigabytes)."""
    drafter = toy.write_toy_drafter(tmp_path / "drafter")
    target = toy.write_toy_target(tmp_path / "target")
    index_file = target / "model.safetensors.index.json"
    index = json.loads(index_file.read_text())
    index["weight_map"].update({f"x.{i}": "model-00001-of-00002.safetensors" for i in range(900_000)})
    index_file.write_text(json.dumps(index))
    report, figures = measured_report(tmp_path, command(target, drafter))
    assert_within_budget(figures)
    missing = [f for f in findings_of(report, "model-files") if f["id"] == "model-files.index-mismatch"]
    assert len(missing) == 11 and "... and 899990 more 'index-tensor-missing' problems not listed" in missing[-1]["title"]
    index["weight_map"].update({f"y.{i}": "model-00002-of-00002.safetensors" for i in range(200_000)})
    index_file.write_text(json.dumps(index))
    report, figures = measured_report(tmp_path, command(target, drafter))
    assert_within_budget(figures)
    refused = finding(report, "model-files.index-mismatch")
    assert refused["title"].startswith(f"target: {index_file}: holds up to ") and "refusing to parse" in refused["title"]


# -------------------------------------------------------------------------------- causes and consequences


def test_one_wrong_hidden_size_is_one_decisive_fail_and_the_shapes_name_it(doctor: Doctor, tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "target")
    patch_config(target, max_position_embeddings=40960)
    drafter = toy.write_toy_drafter(tmp_path / "drafter", config_overrides={"hidden_size": 128})
    report, _ = report_of(doctor, "--no-gpu", "--only", "models,serve", argv=command(target, drafter))
    fails = [x for x in findings_of(report, "drafter") if x["status"] == "fail"]
    decisive = [x for x in fails if not x.get("cause")]
    assert [x["id"] for x in decisive] == ["drafter.hidden-size-mismatch"]
    assert fails[0] is decisive[0]  # the cause comes first
    assert "the drafter's weights are 64 wide (norm.weight [64])" in decisive[0]["title"]
    assert decisive[0]["remediation"][0]["command"] == f"set \"hidden_size\": 64 in {drafter / 'config.json'}"
    consequences = fails[1:]
    assert len(consequences) == 12 and {x["id"] for x in consequences} == {"drafter.fc-width", "drafter.tensor-shape"}
    assert all(x["cause"] == "drafter.hidden-size-mismatch" and not x["remediation"] for x in consequences)
    broken = finding(report, "serve-command.drafter-broken")
    assert broken["cause"] == "drafter.hidden-size-mismatch" and "fails 1 drafter check(s)" in broken["title"]


@pytest.mark.parametrize(("overrides", "key", "consequence"), [
    ({"intermediate_size": 256}, "intermediate_size 256, but the weights say 128", "drafter.tensor-shape"),
    ({"num_key_value_heads": 4}, "num_key_value_heads 4, but the weights say 2", "drafter.tensor-shape"),
    ({"num_hidden_layers": 0}, "num_hidden_layers 0, but the weights hold 1 layer", "drafter.tensor-unexpected"),
])
def test_a_config_key_the_weights_contradict_is_the_cause_of_what_follows(tmp_path: Path, overrides: dict[str, Any],
                                                                          key: str, consequence: str) -> None:
    target = toy.write_toy_target(tmp_path / "target")
    drafter = toy.write_toy_drafter(tmp_path / "drafter", config_overrides=overrides)
    results = run_checks(tmp_path, target=target, drafter=drafter)
    cause = found(results, "drafter.config-weights")
    assert cause.status is Status.FAIL and key in cause.title and str(drafter / "config.json") in cause.title
    fails = [f for f in results["drafter"].findings if f.status is Status.FAIL]
    assert fails[0] is cause and len(fails) > 1
    assert all(f.cause == "drafter.config-weights" for f in fails[1:]) and consequence in {f.id for f in fails[1:]}


def test_a_tensor_missing_for_its_own_reason_has_no_cause(tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "target")
    drafter = toy.write_toy_drafter(tmp_path / "drafter", drop_tensors=["layers.0.self_attn.k_norm.weight"])
    results = run_checks(tmp_path, target=target, drafter=drafter)
    assert found(results, "drafter.tensor-missing").cause == ""
    assert "drafter.config-weights" not in {f.id for f in results["drafter"].findings}


def test_a_bad_speculative_config_is_one_finding_whose_fix_is_the_users_command(doctor: Doctor,
                                                                                tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "target")
    patch_config(target, max_position_embeddings=40960)
    drafter = toy.write_toy_drafter(tmp_path / "drafter")
    argv = ["vllm", "serve", str(target), "-tp", "1", "--max-model-len", "4096",
            "--speculative-config", f"{{method: dflash, model: {drafter}}}"]
    report, _ = report_of(doctor, "--no-gpu", "--only", "serve", argv=argv)
    spec = [x for x in findings_of(report, "serve-command") if "speculative" in x["title"]]
    assert [x["id"] for x in spec] == ["serve-command.spec-json"]
    fix = spec[0]["remediation"][0]["command"]
    assert fix.startswith(f"vllm serve {target} -tp 1 --max-model-len 4096 --speculative-config ")
    fixed = parse_serve_command(shlex.split(fix))
    assert not fixed["errors"] and fixed["speculative_config"]["value"] == {
        "method": "dflash", "model": str(drafter), "num_speculative_tokens": 15}
    # applied literally, the command passes the speculative-config rules
    again, _ = report_of(doctor, "--no-gpu", "--only", "serve", argv=shlex.split(fix))
    ids = {x["id"] for x in findings_of(again, "serve-command")}
    assert "serve-command.spec-json" not in ids and "serve-command.spec-ok" in ids


def test_every_speculative_config_fix_is_a_whole_command(tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "target")
    drafter = toy.write_toy_drafter(tmp_path / "drafter")
    for raw in ("not json", json.dumps({"model": str(tmp_path / "plain"), "num_speculative_tokens": 15}),
                json.dumps({"method": "dflash", "model": str(drafter)})):
        results = run_checks(tmp_path, argv=["vllm", "serve", str(target), "--speculative-config", raw])
        for f in results["serve-command"].findings:
            for r in f.remediation:
                if "speculative" in r.command:
                    assert r.command.startswith(f"vllm serve {target} "), (f.id, r.command)
    plain = run_checks(tmp_path, argv=["vllm", "serve", str(target)])
    assert found(plain, "serve-command.no-speculative-config").remediation[0].command.startswith(f"vllm serve {target} ")
    # the k that fills the drafter's block: block_size 16 -> 15
    k = run_checks(tmp_path, argv=["vllm", "serve", str(target), "--speculative-config",
                                   json.dumps({"method": "dflash", "model": str(drafter)})])
    assert '"num_speculative_tokens": 15}' in found(k, "serve-command.spec-k-missing").remediation[0].command


def test_the_token_budget_rule_is_explained_once_for_two_gpu_tiers(doctor: Doctor, tmp_path: Path) -> None:
    target = toy.write_toy_target(tmp_path / "target")
    patch_config(target, max_position_embeddings=40960)
    drafter = toy.write_toy_drafter(tmp_path / "drafter")
    argv = ["vllm", "serve", str(target), "--max-model-len", "32768", "--max-num-batched-tokens", "8192",
            "--speculative-config", spec_json(drafter)]
    proc = doctor("serve", "--no-gpu", "--only", "serve", "--", *argv, env={"NO_COLOR": "1", "COLUMNS": "100000"})
    budget = [line for line in proc.stdout.splitlines() if "[serve-command.token-budget]" in line]
    assert len(budget) >= 2  # judged for both default tiers
    assert proc.stdout.count(SPEC_BUDGET_RULE_A.source[:80]) == 1
    report, _ = report_of(doctor, "--no-gpu", "--only", "serve", argv=argv)
    rule_a = [x for x in findings_of(report, "serve-command") if x["id"] == "serve-command.token-budget"
              and x["evidence"].get("rule") == "0.20-0.27"]
    assert [x["status"] for x in rule_a] == ["warn", "fail"]
    assert [bool(x["detail"]) for x in rule_a] == [False, True]  # on the finding a user acts on


def test_the_drafter_checks_fixes_are_whole_commands_too(tmp_path: Path) -> None:
    from test_models_check import gpu_fixture

    target = toy.write_toy_target(tmp_path / "target")
    drafter = toy.write_toy_drafter(tmp_path / "drafter")
    argv = ["vllm", "serve", str(target), "--speculative-config", spec_json(drafter, num_speculative_tokens=16)]
    fix = found(run_checks(tmp_path, argv=argv), "drafter.block-size").remediation[0].command
    assert fix.startswith(f"vllm serve {target} --speculative-config ")
    assert parse_serve_command(shlex.split(fix))["speculative_config"]["value"]["num_speculative_tokens"] == 15
    argv = ["vllm", "serve", str(target), "--attention-backend", "TRITON_ATTN", "--speculative-config",
            spec_json(drafter)]
    results = run_checks(tmp_path, argv=argv, vllm="0.20.1", gpu=gpu_fixture("h200-facts.json"))
    fix = found(results, "drafter-attention.selected-invalid").remediation[0].command
    assert fix.startswith(f"vllm serve {target} ") and fix.endswith(" --attention-backend FLASH_ATTN")
