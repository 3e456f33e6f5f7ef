"""Remediations checked before they are shown, and `dflash-doctor fix` applying them with proof.

Fast tests judge recorded dry runs (tests/fixtures/dry_runs: what pip 23.2.1 really said on this project's CI
machine about the seed scenario's fixes). The others run the real CLI on real venvs made by pip and by uv,
holding the real flash-attn-4 4.0.0b36 wheel, with the real vLLM 0.20.1 wheel (--no-deps) on their path: one
module-scoped env per installer, which every test leaves as it found it (fix --undo restores every byte, and
the test proves it with the sha256 of every file in the env).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import Doctor, validate_report
from realenv import (
    Env,
    _clean_environ,
    dir_digest,
    fa2_wheel,
    fa4_wheel,
    install,
    make_venv,
    uninstall,
    uv_bin,
)
from stacks import add_to_path, vllm_site

from dflash_doctor.checks.fix.build_prereqs import judge_build
from dflash_doctor.codes.aliases import upgrade_findings
from dflash_doctor.facts.fix import build_env, dryrun
from dflash_doctor.facts.fix.dryrun_shapes import DryRunItem, DryRuns, InstalledDist
from dflash_doctor.facts.shape import section_json
from dflash_doctor.fix.plan import decide
from dflash_doctor.fix.verify import judge_item, rank, verify_results
from dflash_doctor.model import CheckResult

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "dry_runs"
CHECKS = "namespaces,imports"


def recorded(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    upgrade_findings(data)  # recorded with the v1 ids
    for check in data["checks"]:  # judge afresh: drop what the recording run concluded
        for f in check["findings"]:
            f["remediation"] = [{"command": r["command"], "why": r["why"]} for r in f["remediation"]]
    return data


def judged(item: dict[str, Any], installed: list[dict[str, Any]], env: dict[str, str]) -> tuple[str, tuple[str, ...]]:
    """judge_item on dry-run facts as a report holds them (read through their shapes)."""
    return judge_item(DryRunItem.from_json(item), [InstalledDist.from_json(d) for d in installed], env)


def verdicts(data: dict[str, Any]) -> dict[str, str]:
    dry = DryRuns.from_json(data["dry_runs"])
    return {item.command: judge_item(item, dry.installed, dry.marker_environment)[0] for item in dry.items}


def command_ending(table: dict[str, str], tail: str) -> str:
    (found,) = [v for c, v in table.items() if c.endswith(tail)]
    return found


# --------------------------------------------------------------------------- judging recorded dry runs


def test_recorded_pip_dry_runs_of_the_seed_scenario_are_judged_resolves_breaks_fails_or_not_checked() -> None:
    table = verdicts(recorded("seed-pip.json"))
    assert command_ending(table, "pip install 'torch==2.11.0'") == "resolves"
    # torch alone resolves to the newest torch, which vLLM 0.20.1's pin rejects
    assert command_ending(table, "pip install torch").startswith(
        "would-break: [vllm 0.20.1 requires torch==2.11.0; torch would be 2.14.1")
    # flashinfer 0.6.8.post1 pulls an apache-tvm-ffi that vLLM 0.20.1 pins to another version
    assert "vllm 0.20.1 requires apache-tvm-ffi==0.1.9; apache-tvm-ffi would be 0.1.15.post2" in command_ending(
        table, "pip install 'flashinfer-python==0.6.8.post1'")
    # flash-attn's setup.py cannot even say its metadata without its build requirements: not shown as working
    assert command_ending(table, "pip install --no-build-isolation 'flash-attn<3'") == (
        "fails: metadata-generation-failed: ModuleNotFoundError: No module named 'packaging'")
    assert command_ending(table, "pip install --force-reinstall 'vllm==0.20.1'") == (
        "not-checked: pip did not answer within 90 s (--timeout)")
    assert command_ending(table, "-type d -empty \\) -delete; fi") == "resolves"


def test_a_fix_that_would_break_a_pin_ranks_below_one_that_does_not() -> None:
    data = recorded("seed-pip.json")
    results = verify_results([CheckResult.from_dict(c) for c in data["checks"]], data["dry_runs"])
    flashinfer = next(f for r in results for f in r.findings
                      if f.title.startswith("vllm 0.20.1 requires flashinfer-python==0.6.8.post1"))
    order = [(r.command.rsplit(" ", 1)[-1], r.verified.split(":")[0]) for r in flashinfer.remediation]
    # the checker's own order put the flashinfer install first; it would break vLLM's apache-tvm-ffi pin
    assert order == [("'vllm==0.20.1'", "not-checked"), ("'flashinfer-python==0.6.8.post1'", "would-break")]
    namespace = next(f for r in results for f in r.findings if f.id == "namespaces.v4-without-v2")
    assert [rank(r.verified) for r in namespace.remediation] == [0, 4, 0]  # ranked by group: 0, then (4, 0)
    assert namespace.remediation[0].verified == "resolves"
    assert namespace.remediation[0].changes[0] == "remove flash-attn-4 4.0.0b36 (121 files)"
    # a fix that resolution could not even prepare stays, last, with the continuation it leads
    assert [r.why.startswith("...") for r in namespace.remediation[1:]] == [False, True]
    assert namespace.remediation[1].verified.startswith("fails:")


def test_a_report_with_remediations_but_no_verification_still_loads_and_validates() -> None:
    data = recorded("seed-pip.json")
    report = {"schema": "dflash-doctor/report/v1", "tool": {"name": "dflash-doctor", "version": "0.1.0"},
              "created": "2026-12-03T11:54:00Z", "target": {"python": "/x", "python_version": "3.11",
                                                           "platform": "Linux", "env_kind": "venv"},
              "summary": {"pass": 0, "warn": 0, "fail": 3, "skip": 0, "error": 0, "exit_code": 1},
              "checks": data["checks"]}
    validate_report(report)
    verified = verify_results([CheckResult.from_dict(c) for c in data["checks"]], data["dry_runs"])
    validate_report({**report, "checks": [r.to_dict() for r in verified], "dry_runs": data["dry_runs"]})


def test_every_report_format_shows_what_the_dry_run_proved() -> None:
    """The terminal shows `verified:` under each fix; the Markdown, JUnit and GitHub outputs carry it too."""
    from dflash_doctor.render import github, junit, markdown

    data = recorded("seed-pip.json")
    checks = [r.to_dict() for r in verify_results([CheckResult.from_dict(c) for c in data["checks"]], data["dry_runs"])]
    report = {"schema": "dflash-doctor/report/v1", "tool": {"name": "dflash-doctor", "version": "0.1.0"},
              "created": "2026-12-03T11:54:00Z", "target": {"python": "/x", "python_version": "3.11",
                                                           "platform": "Linux", "env_kind": "venv"},
              "summary": {"pass": 0, "warn": 0, "fail": 3, "skip": 0, "error": 0, "exit_code": 1},
              "checks": checks, "dry_runs": data["dry_runs"]}
    verdicts = {step["verified"] for c in checks for f in c["findings"] for step in f.get("remediation") or ()
                if step.get("verified")}
    assert "resolves" in verdicts and any(v.startswith("fails:") for v in verdicts)
    shown = {"markdown": markdown.render(report), "junit": junit.render(report).decode("utf-8"),
             "github": "\n".join(github.render_lines(report))}
    for name, text in shown.items():
        assert "erified: resolves" in text and "erified: fails:" in text, name


def test_a_source_build_gets_max_jobs_from_free_memory_and_only_the_gpus_archs() -> None:
    build = {"nvcc": "/usr/local/cuda-12.8/bin/nvcc", "nvcc_release": "12.8", "cuda_home": "/usr/local/cuda-12.8",
             "ninja": "/env/bin/ninja", "cxx": "/usr/bin/c++", "mem_available_bytes": 40 * 1024 ** 3, "cores": 32,
             "torch": {"installed": True, "version": "2.11.0", "cuda": "12.8"}, "archs": ["90"],
             "archs_from": "GPUs (NVML)", "max_jobs_env": None}
    plan = judge_build(build, python="/env/bin/python", uv=False, what="flash-attn 2.8.3")
    assert plan.env == {"MAX_JOBS": "4", "FLASH_ATTN_CUDA_ARCHS": "90"}  # min(32 // 2, 40 GiB / 9 GiB)
    # 1 of the 4 default archs, on 16 of 64 cores (4 jobs x nvcc --threads 4): the README's 3-5 min x 1/4 x 4
    assert plan.ready and "about 3-5 min" in plan.summary, plan.summary
    mismatch = judge_build({**build, "nvcc_release": "13.0", "ninja": None}, python="/env/bin/python", uv=True,
                           what="flash-attn 2.8.3")
    ids = {f.id: f for f in mismatch.findings}
    assert set(ids) == {"build-prerequisites.nvcc-mismatch", "build-prerequisites.ninja-missing"}
    assert ids["build-prerequisites.ninja-missing"].remediation[0].command == \
        "uv pip install --python /env/bin/python ninja"


def test_a_fix_that_resolves_to_an_sdist_needs_a_build_and_fix_stops_there_unless_allowed() -> None:
    # pip 23.2.1's real report for `pip install --dry-run --report - --no-binary einops 'einops==0.8.2'`
    report = json.loads((FIXTURES / "einops-sdist-pip-report.json").read_text())
    command = "/env/bin/python -m pip install --no-binary einops 'einops==0.8.2'"
    item = {"command": command, "segments": [{"kind": "install", "tool": "pip", "status": "resolved",
                                              "install": dryrun.pip_report_installs(report), "remove": []}]}
    assert judged(item, [], {}) == ("needs-build: {einops 0.8.2 from source}",
                                        ("install einops 0.8.2 (sdist: builds from source)",))
    build = build_env.collect({}, python="/env/bin/python", target_archs=["sm_90"])  # this machine's facts
    result = CheckResult.from_dict({"id": "imports", "layer": "python", "title": "t", "status": "fail", "findings": [
        {"id": "imports.extension-missing", "status": "fail", "title": "t", "remediation": [
            {"command": command, "why": "w"}]}]})
    checked = verify_results([result], {"python": "/env/bin/python", "items": [item], "build": build})
    step = checked[0].findings[0].remediation[0]
    jobs = judge_build(build, python="/env/bin/python", uv=False, what="einops 0.8.2").env["MAX_JOBS"]
    assert step.command == f"MAX_JOBS={jobs} FLASH_ATTN_CUDA_ARCHS=90 {command}"
    assert step.verified.startswith(f"needs-build: {{einops 0.8.2 from source; MAX_JOBS={jobs} ")
    assert checked[-1].id == "build-prerequisites"
    assert dryrun.parse_command(step.command)[0].env == {"MAX_JOBS": jobs, "FLASH_ATTN_CUDA_ARCHS": "90"}
    assert decide(step.verified, allow_build=False, stopped=False) == (
        "skipped: it builds from source (hours); pass --allow-build to run it", True)
    assert decide("resolves", allow_build=False, stopped=True)[0].startswith("skipped: an earlier step")
    assert decide(step.verified, allow_build=True, stopped=False) == ("", False)


# --------------------------------------------------------------------------- real envs


def pip_venv(parent: Path) -> Env:
    """A venv made by `python -m venv`, with the pip its ensurepip bundles, put in by uv from that very wheel
    (ensurepip's own pip run costs ~20 s on a busy 2-core machine; the installed pip is the same)."""
    import ensurepip

    env = make_venv(parent, "venv")
    (wheel,) = (Path(ensurepip.__file__).parent / "_bundled").glob("pip-*.whl")
    subprocess.run([str(uv_bin()), "pip", "install", "--quiet", "--no-config", "--no-index", "--link-mode", "copy",
                    "--compile-bytecode",
                    "--python", str(env.python), str(wheel)], check=True, env=_clean_environ(), capture_output=True)
    return env


def seed_env(parent: Path, installer: str) -> Env:
    """The seed scenario: flash-attn-4 only, vLLM 0.20.1 (--no-deps) on the path."""
    env = make_venv(parent, "uv") if installer == "uv" else pip_venv(parent)
    install(env, fa4_wheel(), installer=installer)  # type: ignore[arg-type]
    add_to_path(env, vllm_site("0.20.1"))
    return env


@pytest.fixture(scope="module")
def envs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Env]:
    return {installer: seed_env(tmp_path_factory.mktemp(installer) / "with space", installer)
            for installer in ("pip", "uv")}


def fix(doctor: Doctor, env: Env, *args: str, snapshots: Path, path_with_uv: bool = True,
        stdin: Any = subprocess.DEVNULL) -> subprocess.CompletedProcess[str]:
    environ = _clean_environ({"DFLASH_DOCTOR_SNAPSHOTS": str(snapshots)})
    # without uv: only the system's own tools (bash, find); the doctor and the target are named by absolute path
    environ["PATH"] = os.pathsep.join([str(uv_bin().parent), environ.get("PATH", "")]) if path_with_uv \
        else "/usr/bin:/bin"
    return subprocess.run([sys.executable, "-m", "dflash_doctor", "fix", "--python", str(env.python), "--no-gpu",
                           "--only", CHECKS, *args], cwd=doctor.cwd, env={**environ, "PYTHONPATH": str(
                               Path(__file__).resolve().parent.parent)}, capture_output=True, text=True,
                          timeout=300, stdin=stdin, check=False)


@pytest.mark.slow
@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_fix_yes_clears_the_seed_failure_and_undo_restores_every_byte(
    doctor: Doctor, envs: dict[str, Env], tmp_path: Path, installer: str
) -> None:
    env = envs[installer]
    before = dir_digest(env.root)
    out = tmp_path / "fix.json"
    proc = fix(doctor, env, "--yes", "--json", str(out), snapshots=tmp_path / "snaps")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "namespaces  fail    pass" in proc.stdout and "imports     fail    pass" in proc.stdout, proc.stdout
    document = json.loads(out.read_text())
    (step,) = document["steps"]
    assert step["applied"] == "cleared" and step["verified"] == "resolves"
    assert step["findings"][0]["id"] == "namespaces.v4-without-v2"
    assert document["after"] == {"namespaces": "pass", "imports": "pass"}
    applied = [r["applied"] for c in document["report"]["checks"] for f in c["findings"] for r in f["remediation"]
               if r.get("applied")]
    assert applied == ["cleared", "cleared"]  # the namespace finding's fix, and the same line under the import
    assert not (env.site_packages / "flash_attn").exists()
    assert document["after_findings"]["imports"] == {"imports.rotary-absent": "pass"}

    undo = fix(doctor, env, "--undo", snapshots=tmp_path / "snaps")
    assert undo.returncode == 0, undo.stdout + undo.stderr
    assert dir_digest(env.root) == before


@pytest.mark.slow
@pytest.mark.parametrize("state", ["v4-then-v2", "v2-then-v4-then-v4-uninstalled"])
def test_fix_yes_clears_the_overlap_states_and_undo_restores_every_byte(
    doctor: Doctor, tmp_path: Path, state: str
) -> None:
    env = make_venv(tmp_path / "with space", "uv")
    for wheel in (fa4_wheel(), fa2_wheel()) if state == "v4-then-v2" else (fa2_wheel(), fa4_wheel()):
        install(env, wheel, installer="uv")
    if state != "v4-then-v2":
        uninstall(env, "flash-attn-4", installer="uv")
    add_to_path(env, vllm_site("0.20.1"))
    before = dir_digest(env.root)
    out = tmp_path / "fix.json"
    proc = fix(doctor, env, "--yes", "--json", str(out), snapshots=tmp_path / "snaps")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    document = json.loads(out.read_text())
    assert document["after"] == {"namespaces": "pass", "imports": "pass"}
    assert [s["applied"] for s in document["steps"]] == ["cleared"] * len(document["steps"])
    assert not (env.site_packages / "flash_attn").exists()
    assert fix(doctor, env, "--undo", snapshots=tmp_path / "snaps").returncode == 0
    assert dir_digest(env.root) == before


@pytest.mark.slow
def test_fix_without_a_terminal_and_without_yes_exits_2_and_changes_nothing(
    doctor: Doctor, envs: dict[str, Env], tmp_path: Path
) -> None:
    env = envs["pip"]
    before = dir_digest(env.root)
    proc = fix(doctor, env, snapshots=tmp_path / "snaps")
    assert proc.returncode == 2
    assert "pass --yes" in proc.stderr
    assert "plan (1 step(s)" in proc.stdout and "verified: resolves" in proc.stdout
    assert dir_digest(env.root) == before and not (tmp_path / "snaps").exists()


@pytest.mark.slow
def test_a_step_whose_command_fails_is_rolled_back_to_every_byte(
    doctor: Doctor, envs: dict[str, Env], tmp_path: Path
) -> None:
    env = envs["uv"]  # its fix is `uv pip uninstall ...`; run where uv is not on PATH, it cannot work
    before = dir_digest(env.root)
    out = tmp_path / "fix.json"
    proc = fix(doctor, env, "--yes", "--json", str(out), snapshots=tmp_path / "snaps", path_with_uv=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (step,) = json.loads(out.read_text())["steps"]
    assert step["applied"].startswith("rolled-back: the command exited 127"), step
    assert step["left_different"] == []
    assert dir_digest(env.root) == before


@pytest.mark.slow
def test_an_uninstall_alone_is_shown_as_leaving_the_namespace_directory_behind(
    envs: dict[str, Env], tmp_path: Path
) -> None:
    env = envs["pip"]
    sections = json.loads(subprocess.run(
        [sys.executable, "-m", "dflash_doctor", "--python", str(env.python), "--no-gpu", "--only", "distributions",
         "--json", "-"], capture_output=True, text=True, check=False, cwd=tmp_path).stdout)["checks"][0]["facts"]
    target = {**sections["target"], "environment_roots": [str(env.site_packages), str(env.root)]}
    alone = f"'{env.python}' -m pip uninstall -y flash-attn-4"
    facts = section_json(dryrun.collect([alone], {**sections, "target": target}, python=str(env.python),
                                        timeout_s=30, cwd=str(tmp_path)))
    verified, changes = judged(facts["items"][0], facts["installed"], {})
    assert verified.startswith(f"fails: {env.site_packages / 'flash_attn'}/ stays behind"), verified
    assert "namespace package" in verified and changes[0].startswith("remove flash-attn-4 4.0.0b36")


def test_the_recorded_unmet_pin_fix_resolves_as_a_downgrade_to_the_pinned_torch() -> None:
    table = verdicts(recorded("unmet-pin-pip.json"))
    data = recorded("unmet-pin-pip.json")
    (item,) = [i for i in data["dry_runs"]["items"] if i["command"].endswith("pip install 'torch==2.11.0'")]
    verified, changes = judged(item, data["dry_runs"]["installed"], data["dry_runs"]["marker_environment"])
    assert verified == "resolves"
    assert "downgrade torch 2.13.0+cpu -> 2.11.0 (wheel)" in changes
    # uninstalling torch (simulated from its RECORD: pip removes torch/ whole) breaks what needs any torch
    assert command_ending(table, "pip uninstall -y torch") == (
        "would-break: [flash-attn-4 4.0.0b36 requires torch; it would be removed]")
    # with torch there, flash-attn's setup.py gets further, and stops at the CUDA toolchain
    assert command_ending(table, "pip install --no-build-isolation 'flash-attn<3'") == (
        "fails: metadata-generation-failed: OSError: CUDA_HOME environment variable is not set. "
        "Please set it to your CUDA install root.")


def test_a_build_that_stopped_at_an_import_gets_its_prerequisites_judged_with_their_own_fixes() -> None:
    data = recorded("seed-pip.json")
    python = data["dry_runs"]["python"]
    # this machine's build facts (nvcc, ninja, compiler, memory), beside the recorded dry runs of the seed scenario
    build = build_env.collect({"distributions": {"items": data["dry_runs"]["installed"]}}, python=python)
    results = verify_results([CheckResult.from_dict(c) for c in data["checks"]], {**data["dry_runs"], "build": build})
    assert results[-1].id == "build-prerequisites"
    found = {f.id: f for f in results[-1].findings}
    # flash-attn's setup.py stopped at `import packaging`, and torch is not in the env either
    assert found["build-prerequisites.module-missing"].remediation[0].command == f"{python} -m pip install packaging"
    assert "build-prerequisites.torch-missing" in found
    namespace = next(f for r in results for f in r.findings if f.id == "namespaces.v4-without-v2")
    assert namespace.remediation[1].verified.endswith("(build prerequisites missing: module-missing, torch-missing)") \
        or "build prerequisites missing: module-missing, torch-missing" in namespace.remediation[1].verified


@pytest.mark.slow
@pytest.mark.network
def test_verify_fixes_asks_the_real_index(envs: dict[str, Env], tmp_path: Path) -> None:
    env = envs["pip"]
    command = f"'{env.python}' -m pip install --force-reinstall --no-deps 'flash-attn-4==4.0.0b36'"
    sections = json.loads(subprocess.run(
        [sys.executable, "-m", "dflash_doctor", "--python", str(env.python), "--no-gpu", "--only", "distributions",
         "--json", "-"], capture_output=True, text=True, check=False, cwd=tmp_path).stdout)["checks"][0]["facts"]
    facts = section_json(dryrun.collect([command], sections, python=str(env.python), timeout_s=120, cwd=str(tmp_path)))
    (segment,) = facts["items"][0]["segments"]
    assert segment["status"] == "resolved" and segment["tool"] == "pip", segment
    assert segment["argv"][3:7] == ["install", "--dry-run", "--report", segment["argv"][6]]
    verified, changes = judged(facts["items"][0], facts["installed"], facts["marker_environment"])
    assert (verified, changes) == ("resolves", ("reinstall flash-attn-4 4.0.0b36 (wheel)",))


@pytest.mark.slow
def test_an_index_that_uv_cannot_reach_is_not_checked_and_says_why(
    envs: dict[str, Env], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = envs["uv"]  # pip's side: test_verify_fixes_offline_says_not_checked_and_judge_judges_the_saved_dry_runs_again
    # an index on a port nothing listens on, with the machine's own index configuration left out
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("UV_NO_CONFIG", "1")
    monkeypatch.setenv("UV_NO_CACHE", "1")
    monkeypatch.setenv("UV_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PATH", os.pathsep.join([str(uv_bin().parent), os.environ.get("PATH", "")]))
    command = f"uv pip install --python '{env.python}' --reinstall --no-deps 'flash-attn-4==4.0.0b36'"
    sections = {"target": {"environment_roots": [str(env.root)], "env_kind": env.kind}, "distributions": {}}
    facts = section_json(dryrun.collect([command], sections, python=str(env.python), timeout_s=30, cwd=str(tmp_path)))
    verified, _ = judged(facts["items"][0], [], {})
    assert verified.startswith("not-checked: the package index did not answer (offline?)"), facts["items"]


@pytest.mark.slow
def test_a_pip_dry_run_whose_build_fails_keeps_the_builds_own_error(
    envs: dict[str, Env], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """pip counts a build's output as shown when it also writes a log (--log), and leaves it out of stderr: the
    dry run asked again without the log, the reason is the build's own error, as flash-attn's setup.py raises it."""
    env = envs["pip"]
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    package = tmp_path / "needs-cuda"  # a build backend of its own, which raises as flash-attn's setup.py does
    package.mkdir()
    (package / "pyproject.toml").write_text('[build-system]\nrequires = []\nbuild-backend = "backend"\n'
                                            'backend-path = ["."]\n')
    (package / "backend.py").write_text(
        'def fail(*args, **kwargs):\n    raise OSError("CUDA_HOME environment variable is not set. Please set it to '
        'your CUDA install root.")\n\n\nget_requires_for_build_wheel = prepare_metadata_for_build_wheel = fail\n')
    command = f"{shlex.quote(str(env.python))} -m pip install {shlex.quote(str(package))}"
    sections = {"target": {"environment_roots": [str(env.root)], "env_kind": env.kind}, "distributions": {}}
    facts = section_json(dryrun.collect([command], sections, python=str(env.python), timeout_s=60, cwd=str(tmp_path)))
    (segment,) = facts["items"][0]["segments"]
    assert segment["status"] == "failed", segment
    assert "OSError: CUDA_HOME environment variable is not set" in segment["reason"], segment
    assert "--log" not in segment["argv"], segment  # the run whose stderr is kept


@pytest.mark.slow
def test_verify_fixes_offline_says_not_checked_and_judge_judges_the_saved_dry_runs_again(
    doctor: Doctor, envs: dict[str, Env], tmp_path: Path
) -> None:
    env = envs["pip"]
    offline = {"PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": "http://127.0.0.1:9/simple"}
    saved = tmp_path / "report.json"
    proc = doctor("--python", str(env.python), "--no-gpu", "--only", "namespaces", "--verify-fixes",
                  "--timeout", "30", "--no-color", "--json", str(saved), env=offline)
    assert proc.returncode == 1, proc.stderr
    assert "verified: resolves" in proc.stdout  # the uninstall, simulated from RECORD: no index needed
    assert "verified: not-checked: the package index did not answer (offline?)" in proc.stdout
    report = validate_report(json.loads(saved.read_text()))
    # pip's own words, from its log of the same dry run (it says them only at debug level with --retries 0)
    pip_asked = [s for i in report["dry_runs"]["items"] for s in i["segments"] if s.get("kind") == "install"]
    assert pip_asked and all(s["reason"].startswith("the package index did not answer (offline?): Could not fetch "
                                                    "URL http://127.0.0.1:9/simple/") for s in pip_asked), pip_asked
    first = [r["verified"] for r in report["checks"][0]["findings"][0]["remediation"]]
    again, _ = doctor.report("judge", str(saved))
    assert [r["verified"] for r in again["checks"][0]["findings"][0]["remediation"]] == first
    assert again["dry_runs"]["items"] == report["dry_runs"]["items"]
