"""Whole-doctor reports recorded on a real H200 (fixtures/h200/), judged again with the current code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Doctor, finding, validate_report

H200 = Path(__file__).resolve().parent.parent / "fixtures" / "h200"


@pytest.mark.parametrize("name", ["report-cold.json", "report-serve-toy.json", "report-flash-attn-4.json",
                                  "report-one-host-first.json", "report-one-host-warm.json",
                                  "report-with-fabric-warm.json"])
def test_recorded_h200_reports_validate_and_judge_again_to_the_same_statuses(doctor: Doctor, name: str) -> None:
    recorded = validate_report(json.loads((H200 / name).read_text()))
    again, proc = doctor.report("judge", str(H200 / name))
    assert {c["id"]: c["status"] for c in again["checks"]} == {c["id"]: c["status"] for c in recorded["checks"]}
    assert proc.returncode == recorded["summary"]["exit_code"]


def test_the_h200_run_passes_every_gpu_layer_and_shows_the_gpu_at_a_glance(doctor: Doctor) -> None:
    proc = doctor("judge", str(H200 / "report-cold.json"))
    assert "GPU 0  NVIDIA H200  sm_90" in proc.stdout
    report, _ = doctor.report("judge", str(H200 / "report-cold.json"))
    statuses = {c["id"]: c["status"] for c in report["checks"]}
    assert statuses["gpu"] == statuses["cuda-stack"] == statuses["kernels"] == statuses["arch-coverage"] == "pass"
    assert "10 case(s) within tolerance on NVIDIA H200" in finding(report, "kernels.ok")["title"]
    assert "worst error 0.22x tolerance" in finding(report, "kernels.ok")["title"]


def test_each_fact_section_is_stored_once_in_a_report() -> None:
    report = json.loads((H200 / "report-cold.json").read_text())
    names = [name for c in report["checks"] for name in c["facts"]]
    assert len(names) == len(set(names))
    assert "distributions" in names and "kernels" in names


def test_on_the_h200_the_stack_and_kernel_probes_shared_one_cold_torch_import() -> None:
    report = json.loads((H200 / "report-cold.json").read_text())
    facts = {name: section for c in report["checks"] for name, section in c["facts"].items()}
    shared = facts["cuda_stack"]["shared_process"]
    (torch,) = shared["preload"]
    assert shared["forked"] is True and torch["module"] == "torch" and torch["seconds"] > 3  # cold: 4.0 s
    # Each job found torch imported: its own import was a lookup, its whole process a fraction of a second.
    assert facts["cuda_stack"]["torch"]["import_seconds"] < 0.01
    durations = {f["family"]: f["process"]["duration_s"] for f in facts["kernels"]["families"]}
    assert durations["sdpa"] < 1.5 and durations["triton"] < 3  # Triton's first compile: 1.2 s


def test_flash_attn_4s_own_kernel_ran_on_the_h200_within_tolerance(doctor: Doctor) -> None:
    # flash-attn-4 4.0.0b36 and its cutlass-dsl 4.8.1 (cu13) carried to the H200; no flash-attn v2, no vLLM.
    report, _ = doctor.report("judge", str(H200 / "report-flash-attn-4.json"))
    kernels = [f for c in report["checks"] if c["id"] == "kernels" for f in c["findings"]]
    (fa4,) = [f for f in kernels if f["title"].startswith("flash-attn-4 (flash_attn.cute.flash_attn_func)")]
    assert fa4["id"] == "kernels.family-ok" and "4 case(s) within tolerance" in fa4["title"]
    # v2's API is absent: flash_attn is flash-attn-4's namespace package, and the doctor says so.
    assert finding(report, "namespaces.v4-without-v2")["status"] == "warn"
    assert any(f["id"] == "kernels.not-importable" and f["title"].startswith("flash_attn.flash_attn_func")
               for f in kernels)


@pytest.mark.parametrize("name", ["report-one-host-first.json", "report-one-host-warm.json",
                                  "report-with-fabric-warm.json"])
def test_on_the_h200_one_target_process_imported_torch_once_for_every_probe(name: str) -> None:
    """One target process per run: the rotary import and the GPU probes were all forked children of one process."""
    report = json.loads((H200 / name).read_text())
    facts = {name: section for c in report["checks"] for name, section in c["facts"].items()}
    shared = facts["cuda_stack"]["shared_process"]
    (torch,) = shared["preload"]
    assert shared["forked"] is True and torch["imported"] is True and torch["seconds"] > 2
    assert shared["jobs"] == 1 + 1 + 7  # the rotary import, the stack probe, seven kernel families
    assert shared["parallel"] == 16  # the machine's cores
    assert facts["rotary_import"]["process"]["duration_s"] < 0.5  # a fork, not an interpreter and a torch import
    assert facts["cuda_stack"]["torch"]["import_seconds"] < 0.01
    assert report["wall_s"] < torch["seconds"] + 3.5  # the rest of the run hides behind the import
