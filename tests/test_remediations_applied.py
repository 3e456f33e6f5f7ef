"""The doctor's fixes for a broken flash_attn, applied literally: each remediation's `command`, taken from the
JSON report and run by `bash -c` as a user pastes it, on a real venv made by pip (with pip inside) or by uv,
holding the real flash-attn-4 4.0.0b36 wheel, flash-attn 2.8.3 built from its sdist, and the real vLLM 0.20.1
(whose `find_spec('flash_attn')` guard lets a namespace flash_attn die at the unguarded import, and skips the
import when there is no flash_attn at all). Then the doctor runs again on the same env: the failure is gone.

The venvs live under a directory whose name holds a space, so every path in a command must be quoted.
"""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

import pytest
from conftest import Doctor, finding, findings_of
from realenv import (
    Env,
    _clean_environ,
    fa2_sdist,
    fa2_wheel,
    fa4_wheel,
    install,
    make_venv,
    uninstall,
    uv_bin,
)
from stacks import add_to_path, torch_site, vllm_site

from dflash_doctor.checks.remedy import remove_leftovers

CHECKS = "namespaces,imports"

# What each state is made of: wheels installed in this order, then distributions uninstalled with the same
# installer. The flash-attn v2 of the tests has no CUDA extension (no GPU builds here), so in every state
# that holds it the rotary import fails on `flash_attn_2_cuda`; the torch beside it makes that the failure.
STATES = {
    "v4-only": (("v4",), ()),
    "v4-then-v2": (("v4", "v2"), ()),
    "v2-then-v4-then-v4-uninstalled": (("v2", "v4"), ("flash-attn-4",)),
    "v2-then-v4-then-v2-uninstalled": (("v2", "v4"), ("flash-attn",)),
}


def shell(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a pasted command line as a user's shell does, with uv on PATH as it is where uv made the env."""
    environ = _clean_environ()
    environ["PATH"] = os.pathsep.join([str(uv_bin().parent), environ.get("PATH", "")])
    proc = subprocess.run(["bash", "-c", command], check=False, cwd=cwd, env=environ, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, f"{command}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    return proc


def statuses(report: dict) -> dict[str, str]:
    return {c["id"]: c["status"] for c in report["checks"]}


def env_in_state(tmp_path: Path, state: str, installer: str) -> Env:
    wheels, removed = STATES[state]
    env = make_venv(tmp_path / "with space", "uv" if installer == "uv" else "venv", with_pip=installer == "pip")
    for wheel in wheels:
        install(env, fa4_wheel() if wheel == "v4" else fa2_wheel(), installer=installer)  # type: ignore[arg-type]
    if removed:
        uninstall(env, *removed, installer=installer)  # type: ignore[arg-type]
    add_to_path(env, vllm_site("0.20.1"))
    if "v2" in wheels:
        add_to_path(env, torch_site(), "b-torch")
    return env


def assert_fixed(doctor: Doctor, env: Env) -> dict:
    report, proc = doctor.report("--python", str(env.python), "--only", CHECKS)
    assert statuses(report) == {"namespaces": "pass", "imports": "pass"}, [
        (f["id"], f["title"]) for f in findings_of(report)]
    assert finding(report, "imports.rotary-absent")["status"] == "pass"
    assert finding(report, "namespaces.absent")["status"] == "pass"
    assert not (env.site_packages / "flash_attn").exists()
    assert proc.returncode == 0
    return report


@pytest.mark.slow
@pytest.mark.parametrize("installer", ["pip", "uv"])
@pytest.mark.parametrize("state", list(STATES))
def test_the_first_remediation_of_the_failing_rotary_import_pasted_as_is_makes_it_pass(
    doctor: Doctor, tmp_path: Path, state: str, installer: str
) -> None:
    env = env_in_state(tmp_path, state, installer)
    report, _ = doctor.report("--python", str(env.python), "--only", CHECKS)
    rotary = next(f for f in findings_of(report, "imports"))
    assert rotary["status"] == "fail", rotary["title"]
    assert "nothing catches this" in rotary["detail"]
    first = rotary["remediation"][0]["command"]
    if installer == "uv":
        assert first.startswith(f"uv pip uninstall --python '{env.python}' ")
        assert "find " not in first  # uv removes the directories it empties (knowledge.installers)
    else:
        assert first.startswith(f"'{env.python}' -m pip uninstall -y ")
        assert f"find '{env.site_packages / 'flash_attn'}' -depth" in first
        assert "rm " not in first
    if state in ("v4-only", "v2-then-v4-then-v2-uninstalled"):
        assert rotary["id"] == "imports.namespace-package" and rotary["cause"] == "namespaces.v4-without-v2"
        assert f"{env.site_packages / 'flash_attn'} (flash-attn-4 4.0.0b36's files" in rotary["title"]
        # the namespace finding offers the same line first
        assert finding(report, "namespaces.v4-without-v2")["remediation"][0]["command"] == first
    else:
        assert rotary["id"] == "imports.extension-missing", rotary["title"]
    shell(first, tmp_path)
    assert_fixed(doctor, env)
    assert not list(env.site_packages.glob("flash_attn*.dist-info"))


@pytest.mark.slow
@pytest.mark.parametrize("leftover", ["empty", "bytecode", "stray-file"])
def test_what_pip_uninstall_leaves_is_named_as_the_cause_and_its_own_fix_clears_it(
    doctor: Doctor, tmp_path: Path, leftover: str
) -> None:
    env = make_venv(tmp_path / "with space", with_pip=True)
    install(env, fa4_wheel())
    package = env.site_packages / "flash_attn"
    if leftover == "bytecode":  # `python -O` wrote .opt-1.pyc, which pip's uninstall does not list
        assert env.run("-O", "-m", "compileall", "-q", str(package)).returncode == 0
    # The old first remediation, as the report had it; pip leaves site-packages/flash_attn/ behind.
    shell(f"'{env.python}' -m pip uninstall -y flash-attn-4", tmp_path)
    assert package.is_dir()
    if leftover == "stray-file":
        (package / "NOTES.md").write_text("my notes\n")
    add_to_path(env, vllm_site("0.20.1"))

    report, _ = doctor.report("--python", str(env.python), "--only", CHECKS)
    namespace = finding(report, "namespaces.leftover")
    assert namespace["status"] == "fail"
    assert namespace["title"].startswith(f"{package} has no __init__.py and no installed distribution owns it")
    assert "vLLM 0.20.1 dies at engine start" in namespace["title"]
    assert {"empty": "it holds nothing", "bytecode": "it holds only __pycache__ (",
            "stray-file": "it holds 1 file(s) no distribution owns: NOTES.md"}[leftover] in namespace["title"]
    rotary = finding(report, "imports.namespace-package")
    assert rotary["status"] == "fail" and rotary["cause"] == "namespaces.leftover"
    assert f"{package} (no installed distribution owns it" in rotary["title"]
    assert "flash-attn-4" not in rotary["title"]  # it is gone; the directory is the cause
    command = rotary["remediation"][0]["command"]
    assert command == namespace["remediation"][0]["command"]
    if leftover == "stray-file":
        assert command == f"mv '{package}' '{package}.disabled'"
    else:
        assert command.startswith(f"if [ -d '{package}' ]; then find '{package}' -depth")
    shell(command, tmp_path)
    assert_fixed(doctor, env)
    if leftover == "stray-file":  # moved aside, never deleted
        assert (env.site_packages / "flash_attn.disabled" / "NOTES.md").read_text() == "my notes\n"


@pytest.mark.slow
def test_a_source_checkout_on_pythonpath_is_named_as_the_rotary_failure_cause(
    doctor: Doctor, tmp_path: Path
) -> None:
    """`PYTHONPATH=. vllm serve ...` from a flash-attention checkout (the working directory alone is on no `vllm
    serve`'s path, so on no probe's)."""
    checkout = tmp_path / "src" / "flash-attention"
    with tarfile.open(fa2_sdist()) as sdist:
        members = [m for m in sdist.getmembers() if m.isfile() and m.name.split("/")[1:2] == ["flash_attn"]]
        for member in members:
            member.name = member.name.split("/", 1)[1]
        sdist.extractall(checkout, members=members, filter="data")
    assert (checkout / "flash_attn" / "__init__.py").is_file()
    env = make_venv(tmp_path / "with space", with_pip=True)
    add_to_path(env, vllm_site("0.20.1"))

    pythonpath = {"PYTHONPATH": os.pathsep.join(p for p in (str(checkout), os.environ.get("PYTHONPATH", "")) if p)}
    report, _ = doctor.report("--python", str(env.python), "--only", CHECKS, cwd=checkout, env=pythonpath)
    rotary = next(f for f in findings_of(report, "imports"))
    assert rotary["status"] == "fail" and rotary["cause"] == "namespaces.shadowed"
    assert rotary["title"].startswith(
        f"`from flash_attn.ops.triton.rotary import apply_rotary` fails: flash_attn is {checkout / 'flash_attn'}, "
        f"from {checkout} on sys.path, which no installed distribution owns")
    assert finding(report, "namespaces.shadowed")["status"] == "fail"
    command = rotary["remediation"][0]["command"]
    assert command == f"mv {checkout / 'flash_attn'} {checkout / 'flash_attn'}.disabled"
    shell(command, tmp_path)
    report, proc = doctor.report("--python", str(env.python), "--only", CHECKS, cwd=checkout, env=pythonpath)
    assert statuses(report) == {"namespaces": "pass", "imports": "pass"} and proc.returncode == 0
    assert (checkout / "flash_attn.disabled" / "__init__.py").is_file()


def test_the_leftover_cleanup_deletes_bytecode_and_empty_directories_and_nothing_else(tmp_path: Path) -> None:
    root = tmp_path / "site packages" / "flash_attn"
    (root / "cute" / "__pycache__").mkdir(parents=True)
    (root / "cute" / "__pycache__" / "interface.cpython-311.opt-1.pyc").write_bytes(b"\x00")
    (root / "ops" / "triton").mkdir(parents=True)
    (root / "mine").mkdir()
    (root / "mine" / "notes.txt").write_text("keep\n")
    (root / "mine" / "__pycache__").mkdir()
    (root / "mine" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\x00")
    (root / "mine" / "stale.pyc").write_bytes(b"\x00")  # not in __pycache__: a sourceless module, importable
    command = remove_leftovers([str(root), str(tmp_path / "absent dir")])
    shell(command, tmp_path)
    left = sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))
    assert left == ["mine", "mine/notes.txt", "mine/stale.pyc"]
    shell(remove_leftovers([str(root / "cute")]), tmp_path)  # gone already: the command still succeeds
