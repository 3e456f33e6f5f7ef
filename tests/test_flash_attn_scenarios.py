"""The failures this project exists for, each in a real venv built from real wheels.

flash-attn-4 4.0.0b36 from PyPI; flash-attn 2.8.3 built from its PyPI sdist (without its CUDA
extension); the real vLLM 0.20.1 and 0.24.0 wheels; installed with pip or uv, in both orders.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import Doctor, finding, findings_of
from realenv import Env, dir_digest, fa2_wheel, fa4_wheel, install, make_venv, uninstall
from stacks import (
    UNDEFINED_C10_SYMBOL,
    add_to_path,
    fa2_wheel_with_foreign_extension,
    torch_site,
    vllm_site,
)

pytestmark = pytest.mark.slow


def env_with(tmp_path: Path, *wheels: Path, kind: str = "venv", installer: str = "pip") -> Env:
    env = make_venv(tmp_path, kind)  # type: ignore[arg-type]
    for wheel in wheels:
        install(env, wheel, installer=installer)  # type: ignore[arg-type]
    return env


def statuses(report: dict) -> dict[str, str]:
    return {c["id"]: c["status"] for c in report["checks"]}


# ---------------------------------------------------------------- flash-attn-4 without v2


def test_v4_only_env_without_vllm_warns_namespace_and_offers_uninstall_first(doctor: Doctor, tmp_path: Path) -> None:
    env = env_with(tmp_path, fa4_wheel())
    report, proc = doctor.report("--python", str(env.python), "--only", "python")
    namespace = finding(report, "namespaces.v4-without-v2")
    assert namespace["status"] == "warn"
    assert "flash-attn-4 4.0.0b36" in namespace["title"]
    assert "vLLM is not installed" in namespace["title"]
    commands = [r["command"] for r in namespace["remediation"]]
    # pip leaves an empty site-packages/flash_attn/ (a namespace portion): the same line removes it
    leftover = env.site_packages / "flash_attn"
    assert commands[0] == (f"{env.python} -m pip uninstall -y flash-attn-4 && if [ -d {leftover} ]; then find "
                           f"{leftover} -depth \\( -type f -path '*/__pycache__/*.pyc' -o -type d -empty \\) -delete; fi")
    assert "'flash-attn<3'" in commands[1] and "--no-build-isolation" in commands[1]
    rotary = finding(report, "imports.namespace-package")
    assert rotary["status"] == "warn"
    assert "No module named 'flash_attn.ops'" in rotary["evidence"]["exception"]
    # flash-attn-4 requires torch, which this env lacks: a failure of its own
    assert finding(report, "distributions.requirement-missing")["title"] == "flash-attn-4 4.0.0b36 requires torch, which is not installed"
    assert proc.returncode == 1
    assert doctor("--python", str(env.python), "--only", "python", "--skip", "distributions").returncode == 0
    assert doctor("--python", str(env.python), "--only", "python", "--skip", "distributions", "--strict").returncode == 1


def test_v4_only_env_with_vllm_0_20_fails_because_find_spec_guard_lets_the_import_die(
    doctor: Doctor, tmp_path: Path
) -> None:
    env = env_with(tmp_path, fa4_wheel())
    add_to_path(env, vllm_site("0.20.1"))
    report, proc = doctor.report("--python", str(env.python), "--only", "namespaces,imports,distributions")
    namespace = finding(report, "namespaces.v4-without-v2")
    assert namespace["status"] == "fail"
    assert "vLLM 0.20.1 dies at engine start" in namespace["title"]
    assert "vllm/model_executor/layers/rotary_embedding/common.py:138" in namespace["title"]
    assert "find_spec('flash_attn') is not None" in namespace["title"]
    rotary = finding(report, "imports.namespace-package")
    assert rotary["status"] == "fail"
    assert "nothing catches this" in rotary["detail"]
    missing = {f["title"] for f in findings_of(report) if f["id"] == "distributions.requirement-missing"}
    assert "vllm 0.20.1 requires torch==2.11.0, which is not installed" in missing
    assert proc.returncode == 1


def test_v4_only_env_with_vllm_0_24_survives_with_a_warning(doctor: Doctor, tmp_path: Path) -> None:
    env = env_with(tmp_path, fa4_wheel())
    add_to_path(env, vllm_site("0.24.0"))
    report, _ = doctor.report("--python", str(env.python), "--only", "namespaces,imports")
    namespace = finding(report, "namespaces.v4-without-v2")
    assert namespace["status"] == "warn"
    assert "vLLM 0.24.0 survives" in namespace["title"]
    assert "suppress(ModuleNotFoundError)" in namespace["title"]
    assert finding(report, "imports.namespace-package")["status"] == "warn"


def test_vllm_pin_on_torch_is_read_from_its_installed_metadata(doctor: Doctor, tmp_path: Path) -> None:
    env = make_venv(tmp_path)
    add_to_path(env, vllm_site("0.20.1"), "a-vllm")
    add_to_path(env, torch_site(), "b-torch")
    report, _ = doctor.report("--python", str(env.python), "--only", "distributions")
    unmet = [f for f in findings_of(report) if f["id"] == "distributions.requirement-unmet"]
    torch = next(f for f in unmet if f["evidence"]["requirement"].startswith("torch=="))
    assert torch["title"] == "vllm 0.20.1 requires torch==2.11.0, found 2.13.0+cpu"
    assert torch["status"] == "fail"
    assert torch["remediation"][0]["command"] == f"{env.python} -m pip install 'torch==2.11.0'"


# ---------------------------------------------------------------- v2 and v4 together


@pytest.mark.parametrize("order", ["v2-then-v4", "v4-then-v2"])
def test_v2_and_v4_both_installed_overlap_on_cute_files(doctor: Doctor, tmp_path: Path, order: str) -> None:
    wheels = [fa2_wheel(), fa4_wheel()] if order == "v2-then-v4" else [fa4_wheel(), fa2_wheel()]
    env = env_with(tmp_path, *wheels)
    report, proc = doctor.report("--python", str(env.python), "--only", "namespaces")
    overlap = finding(report, "namespaces.cute-overlap")
    evidence = overlap["evidence"]
    assert evidence["shared"] == 20  # measured: the 2.8.3 and 4.0.0b36 wheels share 20 paths, all different bytes
    assert f"both claim {evidence['shared']} files under flash_attn/cute/" in overlap["title"]
    changed = evidence["shared"] - evidence["identical_in_both"]
    if order == "v2-then-v4":  # flash-attn-4's files won: it works, but an uninstall would break the other
        assert len(evidence["hold_flash_attn_4"]) == changed and evidence["hold_flash_attn"] == []
        assert overlap["status"] == "warn" and proc.returncode == 0
    else:  # v2's stale copy won: flash-attn-4 runs old code
        assert len(evidence["hold_flash_attn"]) == changed and evidence["hold_flash_attn_4"] == []
        assert overlap["status"] == "fail" and proc.returncode == 1
        assert overlap["remediation"][0]["command"] == (
            f"{env.python} -m pip install --force-reinstall --no-deps 'flash-attn-4==4.0.0b36'")
    assert "Uninstalling either one deletes files the other lists in its RECORD" in overlap["detail"]


def test_uninstalling_v4_after_both_deletes_files_flash_attn_still_lists(doctor: Doctor, tmp_path: Path) -> None:
    env = env_with(tmp_path, fa2_wheel(), fa4_wheel())
    uninstall(env, "flash-attn-4")
    report, _ = doctor.report("--python", str(env.python), "--only", "distributions,namespaces")
    mismatch = finding(report, "distributions.record-mismatch")
    assert mismatch["status"] == "fail"
    assert mismatch["title"].startswith("flash_attn 2.8.3:") and "missing" in mismatch["title"]
    assert all(p.startswith("flash_attn/cute/") for p in mismatch["evidence"]["missing"])
    assert finding(report, "namespaces.ok")["status"] == "pass"


# ---------------------------------------------------------------- v2 built against another torch


def test_undefined_symbol_from_the_extension_breaks_even_the_triton_rotary_import(doctor: Doctor, tmp_path: Path) -> None:
    env = env_with(tmp_path, fa2_wheel_with_foreign_extension())
    add_to_path(env, torch_site())
    report, proc = doctor.report("--python", str(env.python), "--only", "imports,extensions")
    rotary = finding(report, "imports.undefined-symbol")
    assert rotary["status"] == "fail"
    assert UNDEFINED_C10_SYMBOL in rotary["title"]
    assert "installed 2.13.0" in rotary["title"]
    assert any("FLASH_ATTENTION_FORCE_BUILD=TRUE" in r["command"] and "--no-build-isolation" in r["command"]
               for r in rotary["remediation"])
    extension = [f for f in findings_of(report, "extensions") if f["id"] == "extensions.undefined-symbol"]
    assert extension and "flash_attn_2_cuda" in extension[0]["title"]
    assert proc.returncode == 1

    # vLLM 0.24's suppress(ModuleNotFoundError) does not catch an ImportError: still fatal.
    add_to_path(env, vllm_site("0.24.0"), "zz-vllm")
    report, _ = doctor.report("--python", str(env.python), "--only", "imports")
    rotary = finding(report, "imports.undefined-symbol")
    assert rotary["status"] == "fail"
    assert "vLLM 0.24.0 imports it at vllm/model_executor/layers/rotary_embedding/common.py:141" in rotary["detail"]
    assert "nothing catches this" in rotary["detail"]


# ---------------------------------------------------------------- the path and the installer


def test_a_stray_flash_attn_on_pythonpath_shadows_the_installed_one_and_in_the_working_directory_does_not(
        doctor: Doctor, tmp_path: Path) -> None:
    env = env_with(tmp_path, fa2_wheel())
    workdir = tmp_path / "work"
    (workdir / "flash_attn").mkdir(parents=True)
    (workdir / "flash_attn" / "__init__.py").write_text("")
    # `vllm serve`'s console script never has the working directory on its path: the installed one is imported.
    report, proc = doctor.report("--python", str(env.python), "--only", "namespaces", cwd=workdir)
    assert [f["id"] for f in findings_of(report, "namespaces")] == ["namespaces.ok"] and proc.returncode == 0
    # On PYTHONPATH (`PYTHONPATH=. vllm serve ...`), it shadows the installed one.
    pythonpath = os.pathsep.join(p for p in (str(workdir), os.environ.get("PYTHONPATH", "")) if p)
    report, proc = doctor.report("--python", str(env.python), "--only", "namespaces", cwd=workdir,
                                 env={"PYTHONPATH": pythonpath})
    shadow = finding(report, "namespaces.shadowed")
    assert shadow["status"] == "fail" and proc.returncode == 1
    assert str(workdir / "flash_attn") in shadow["title"]


def test_uv_made_env_gets_uv_remediation_commands(doctor: Doctor, tmp_path: Path) -> None:
    env = env_with(tmp_path, fa4_wheel(), kind="uv", installer="uv")
    report, _ = doctor.report("--python", str(env.python), "--only", "namespaces")
    assert report["target"]["env_kind"] == "uv"
    commands = [r["command"] for r in finding(report, "namespaces.v4-without-v2")["remediation"]]
    assert commands[0] == f"uv pip uninstall --python {env.python} flash-attn-4"
    assert commands[1].startswith(f"uv pip install --python {env.python} --no-build-isolation 'flash-attn<3")


# ---------------------------------------------------------------- the doctor disturbs nothing


def test_a_full_run_leaves_the_target_site_packages_byte_identical(doctor: Doctor, tmp_path: Path) -> None:
    env = env_with(tmp_path, fa2_wheel(), fa4_wheel())
    add_to_path(env, torch_site())
    before = dir_digest(env.site_packages)
    proc = doctor("--python", str(env.python), "--no-gpu", "--verify-hashes")
    assert "summary:" in proc.stdout
    assert dir_digest(env.site_packages) == before


def test_judge_on_a_saved_scenario_report_gives_the_same_findings(doctor: Doctor, tmp_path: Path) -> None:
    env = env_with(tmp_path, fa2_wheel(), fa4_wheel())
    saved = tmp_path / "ticket.json"
    first = doctor("--python", str(env.python), "--only", "python", "--json", str(saved))
    again, proc = doctor.report("judge", str(saved))
    original = json.loads(saved.read_text())
    key = lambda r: [(f["id"], f["status"], f["title"], f["remediation"]) for f in findings_of(r)]  # noqa: E731
    assert key(again) == key(original)
    assert proc.returncode == first.returncode == 1
    assert "namespaces.cute-overlap" in {f["id"] for f in findings_of(again)}


def test_terminal_report_shows_the_fix_under_the_failing_check(doctor: Doctor, tmp_path: Path) -> None:
    env = env_with(tmp_path, fa4_wheel())
    add_to_path(env, vllm_site("0.20.1"))
    proc = doctor("--python", str(env.python), "--only", "namespaces")
    lines = proc.stdout.splitlines()
    headline = next(i for i, line in enumerate(lines) if line.startswith("[FAIL]") and "flash_attn namespace" in line)
    assert "fix:" in lines[headline + 1 : headline + 12] or any("fix:" in x for x in lines[headline : headline + 12])
    assert any(f"$ {env.python} -m pip uninstall -y flash-attn-4" in x for x in lines)
    assert "Explain a finding: dflash-doctor explain namespaces.v4-without-v2" in proc.stdout


def test_a_vllm_requirement_serve_only_looks_for_is_a_warning_the_ones_it_imports_fail(
        doctor: Doctor, tmp_path: Path) -> None:
    # The real vLLM 0.20.1 wheel alone: flashinfer-python is missing, and no module `vllm serve` imports on its way
    # up imports flashinfer (the scan of vLLM's files, facts.python.vllm_serve_path; tests/test_serve_imports.py has the
    # rest); transformers, which vLLM imports on its way up, is missing too.
    env = make_venv(tmp_path)
    add_to_path(env, vllm_site("0.20.1"))
    report, _ = doctor.report("--python", str(env.python), "--no-gpu", "--only", "distributions")
    from packaging.requirements import Requirement
    missing = {Requirement(f["evidence"]["requirement"]).name: f
               for f in findings_of(report) if f["id"] == "distributions.requirement-missing"}
    flashinfer = missing["flashinfer-python"]
    assert flashinfer["status"] == "warn"
    assert "`vllm serve` does not import it on the serve path" in flashinfer["title"]
    assert missing["torch"]["status"] == "fail" and missing["transformers"]["status"] == "fail"
