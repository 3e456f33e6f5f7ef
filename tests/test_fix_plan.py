"""The plan of `dflash-doctor fix` hangs together: what stops `vllm serve` first, no step that another step
undoes, no CUDA build of torch for a run told there is no GPU; each step left out is shown with why.

The real-env tests run the real CLI on the seed scenario (a pip venv holding the real flash-attn-4 4.0.0b36
wheel, the real vLLM 0.20.1 wheel --no-deps on its path, no torch), with the package index pointed at a port
nothing listens on: the installs are not asked (offline), the uninstall is simulated from RECORD, and the plan
is built from what that leaves. Nothing is applied (no --yes, stdin not a terminal: exit 2), so the env is
shared by the module. The fast tests build the plan from pip's recorded answers about the same fixes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import Doctor
from realenv import Env, _clean_environ, dir_digest
from test_fix import recorded, seed_env

from dflash_doctor.facts.fix.dryrun_shapes import DryRuns, InstalledDist
from dflash_doctor.fix.plan import effect, plan
from dflash_doctor.fix.verify import verify_results
from dflash_doctor.model import CheckResult

ROOT = Path(__file__).resolve().parent.parent
# the checks whose findings the seed scenario's plan is made of (the extension built for CPython 3.12 has no fix)
SEED_CHECKS = "distributions,namespaces,imports,import-surface"
OFFLINE = {"PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": "http://127.0.0.1:9/simple"}


@pytest.fixture(scope="module")
def seed(tmp_path_factory: pytest.TempPathFactory) -> Env:
    return seed_env(tmp_path_factory.mktemp("seed") / "with space", "pip")


def plan_only(env: Env, tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    out = tmp_path / "plan.json"
    environ = {**_clean_environ({"DFLASH_DOCTOR_SNAPSHOTS": str(tmp_path / "snaps")}), **OFFLINE,
               "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "dflash_doctor", "fix", "--python", str(env.python), "--no-gpu",
                           "--only", SEED_CHECKS, "--timeout", "30", "--json", str(out), *args],
                          cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=300, check=False,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 2 and "pass --yes" in proc.stderr, proc.stdout + proc.stderr
    assert out.exists(), "the plan that was shown is written to --json, with nothing applied"
    return proc, json.loads(out.read_text())


def ending(steps: list[dict[str, Any]], tail: str) -> dict[str, Any]:
    (found,) = [s for s in steps if s["command"].endswith(tail)]
    return found


@pytest.mark.slow
def test_the_seed_plan_starts_with_what_stops_serve_and_leaves_out_undone_and_cuda_steps_saying_why(
    seed: Env, tmp_path: Path
) -> None:
    before = dir_digest(seed.root)
    proc, document = plan_only(seed, tmp_path)
    steps, dropped = document["steps"], document["dropped"]
    # vLLM's serving path imports flash_attn.ops through the namespace flash-attn-4 leaves: that goes first
    assert "pip uninstall -y flash-attn-4" in steps[0]["command"] and steps[0]["stops_serve"] is True
    assert steps[0]["findings"][0]["id"] == "namespaces.v4-without-v2"
    assert [s["stops_serve"] for s in steps[1:]] == [False] * (len(steps) - 1)
    # no step puts torch in: the CUDA build vLLM pins is left out (the run was told there is no GPU), and the
    # torch "for flash-attn-4" is undone by step 1, which removes flash-attn-4
    assert not [s for s in steps if "torch" in s["command"]], steps
    pinned = ending(dropped, "pip install 'torch==2.11.0'")
    assert pinned["dropped"].startswith("a CUDA build of torch (several GB) for a run told there is no GPU "
                                        "(--no-gpu, no --target-arch): it installs torch==2.11.0 and torch from "
                                        "PyPI on Linux x86_64 is a CUDA build"), pinned
    assert ending(dropped, "pip install torch")["dropped"] == (
        "step 1 removes flash-attn-4, whose requirements it is for")
    # the terminal says the same, under the plan
    assert "left out of the plan (2):" in proc.stdout
    assert "left out: step 1 removes flash-attn-4, whose requirements it is for" in proc.stdout
    assert "(stops `vllm serve`)" in proc.stdout.splitlines()[3]
    assert dir_digest(seed.root) == before


@pytest.mark.slow
def test_a_run_told_the_gpus_it_is_for_keeps_the_cuda_build_and_still_drops_the_undone_step(
    seed: Env, tmp_path: Path
) -> None:
    _, document = plan_only(seed, tmp_path, "--target-arch", "sm_90")
    assert "pip uninstall -y flash-attn-4" in document["steps"][0]["command"]
    ending(document["steps"], "pip install 'torch==2.11.0'")  # an image built for H100s needs it
    assert [d["command"].rsplit(" ", 2)[-2:] for d in document["dropped"]] == [["install", "torch"]]


@pytest.mark.slow
def test_start_with_names_the_flash_attn_failure_that_stops_serve_not_the_missing_torch(
    doctor: Doctor, seed: Env
) -> None:
    proc = doctor("--python", str(seed.python), "--no-gpu", "--only", SEED_CHECKS, "--no-color")
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert next(line for line in lines if line.startswith("[")).startswith("[FAIL]   flash_attn namespace - ")
    (start,) = [line for line in lines if line.startswith("start with: ")]
    assert start.startswith("start with: flash-attn-4 4.0.0b36 installs flash_attn/cute only"), start
    assert "Explain a finding: dflash-doctor explain namespaces.v4-without-v2" in lines


# --------------------------------------------------------------------------- pip's recorded answers


def recorded_plan(gpu_expected: bool) -> tuple[list[Any], list[Any]]:
    data = recorded("seed-pip.json")
    dry = DryRuns.from_json(data["dry_runs"])
    results = verify_results([CheckResult.from_dict(c) for c in data["checks"]], dry)
    steps, dropped, _ = plan(results, dry, items={i.command: i for i in dry.items}, gpu_expected=gpu_expected)
    return steps, dropped


def tails(steps: list[Any]) -> list[str]:
    return [s.command.split(" -m pip ", 1)[-1][:28] for s in steps]


def test_the_installers_answer_shows_the_cuda_build_and_the_plan_leaves_it_out_without_a_gpu() -> None:
    steps, dropped = recorded_plan(gpu_expected=False)
    assert tails(steps) == ["install 'transformers!=5.0.*", "uninstall -y flash-attn-4 &&"]
    why = {s.command.split(" -m pip ", 1)[-1]: s.dropped for s in dropped}
    # pip resolved torch 2.11.0 with nvidia-cudnn-cu13, nvidia-nccl-cu13, ...: a CUDA build
    assert "it installs nvidia-cudnn-cu13, nvidia-cusparselt-cu13, nvidia-nccl-cu13 and more (the CUDA " \
        "libraries of a CUDA build of torch)" in why["install 'torch==2.11.0'"]
    # pip did not answer about the reinstall of vLLM: its installed METADATA says it pulls torch==2.11.0
    assert "it reinstalls vllm with its requirements, which include torch==2.11.0 (not installed), and torch " \
        "from PyPI on Linux x86_64 is a CUDA build" in why["install --force-reinstall 'vllm==0.20.1'"]
    assert why["install torch"] == "step 2 removes flash-attn-4, whose requirements it is for"


def test_with_a_gpu_expected_the_cuda_build_stays_and_the_undone_step_still_goes() -> None:
    steps, dropped = recorded_plan(gpu_expected=True)
    assert "install 'torch==2.11.0'" in tails(steps)
    assert tails(dropped) == ["install torch"]


def test_a_cpu_build_or_another_index_is_not_taken_for_a_cuda_build() -> None:
    environment = {"platform_system": "Linux", "platform_machine": "x86_64"}
    vllm = [InstalledDist(name="vllm", version="0.20.1", requires=["torch==2.11.0"])]
    assert effect("/e/bin/python -m pip install 'torch==2.11.0'", None, vllm, environment).cuda
    assert not effect("/e/bin/python -m pip install 'torch==2.11.0+cpu'", None, vllm, environment).cuda
    assert not effect("/e/bin/python -m pip install --index-url https://download.pytorch.org/whl/cpu torch", None,
                      vllm, environment).cuda
    assert not effect("/e/bin/python -m pip install --force-reinstall --no-deps 'vllm==0.20.1'", None, vllm,
                      environment).cuda
    assert effect("/e/bin/python -m pip install --force-reinstall 'vllm==0.20.1'", None, vllm, environment).cuda
    assert not effect("/e/bin/python -m pip install 'torch==2.11.0'", None, vllm,
                      {"platform_system": "Darwin", "platform_machine": "arm64"}).cuda
    assert effect("/e/bin/python -m pip uninstall -y flash-attn-4", None, [], environment).removes == {"flash-attn-4"}


# --------------------------------------------------------------------------- every fix says whether it was checked


@pytest.mark.slow
def test_a_default_runs_fixes_say_not_checked_why_and_how_in_every_format(
    doctor: Doctor, seed: Env, tmp_path: Path
) -> None:
    from conftest import validate_report

    outputs = {"json": tmp_path / "r.json", "markdown": tmp_path / "r.md", "junit": tmp_path / "r.xml"}
    proc = doctor("--python", str(seed.python), "--no-gpu", "--only", SEED_CHECKS, "--no-color",
                  *(a for kind, path in outputs.items() for a in (f"--{kind}", str(path))))
    assert proc.returncode == 1, proc.stderr
    report = validate_report(json.loads(outputs["json"].read_text()))
    said = {step.get("verified") for c in report["checks"] for f in c["findings"] for step in f["remediation"]}
    from dflash_doctor.checks.remedy import quote

    # the way to check is a command to paste: the interpreter's path (it holds a space here) quoted
    expected = (f"not-checked: the installer was not asked (no --verify-fixes); to check: dflash-doctor --python "
                f"{quote(str(seed.python))} --verify-fixes")
    assert said == {expected}, said
    # the terminal says it once, under the checks, not under each fix
    assert proc.stdout.count(f"fixes not checked with the installer: {expected.removeprefix('not-checked: ')}") == 1
    assert "verified: not-checked" not in proc.stdout
    assert "Verified: not-checked: the installer was not asked (no --verify-fixes)" in outputs["markdown"].read_text()
    assert f"verified: {expected}" in outputs["junit"].read_text()


def test_a_fix_no_installer_can_be_asked_about_says_so_and_a_verified_fix_keeps_its_verdict() -> None:
    from dflash_doctor.fix.verify import NOT_AN_INSTALLER_COMMAND, mark_unchecked, unchecked_reason

    result = CheckResult.from_dict({"id": "gpu", "layer": "gpu", "title": "t", "status": "fail", "findings": [
        {"id": "gpu.x", "status": "fail", "title": "t", "remediation": [
            {"command": "export CUDA_VISIBLE_DEVICES=0", "why": "w"},
            {"command": "/e/bin/python -m pip install torch", "why": "w", "verified": "resolves"},
            {"command": "/e/bin/python -m pip install vllm", "why": "w"}]}]})
    why = unchecked_reason({"items": []}, "/e/bin/python")
    assert why == "--verify-fixes asks the installer only about the fixes of failing findings"
    (marked,) = mark_unchecked([result], why)
    assert [r.verified for r in marked.findings[0].remediation] == [
        f"not-checked: {NOT_AN_INSTALLER_COMMAND}", "resolves", f"not-checked: {why}"]
    assert unchecked_reason({"error": "OSError: boom"}, "/e/bin/python") == (
        "the dry runs stopped (OSError: boom); to check: dflash-doctor --python /e/bin/python --verify-fixes")
