"""Paths two installed distributions both install (distributions.shared-paths), whoever they are, on real wheels:

- tokenspeed-fa4 4.0.0.post20260923 installed after flash-attn-4 4.0.0b40 (48 shared flash_attn/cute/ paths, 36
  with other bytes, measured on the two wheels' RECORDs): the stack's flash-attn-4 runs tokenspeed's copies (fail).
  The first remediation, pasted into bash as it is (pip and uv find the wheels in the test cache: PIP_FIND_LINKS,
  PIP_NO_INDEX), removes tokenspeed-fa4 and puts flash-attn-4's own files back; the doctor then finds no shared path.
- tokenspeed-quack 0.6.4.post20260923 and quack-kernels 0.6.5 (113 quack/ paths, one with other bytes): a warning,
  and keeping tokenspeed-quack instead (the second remediation) clears it too.
- the flash-attn 2.8.3 wheel built from its sdist (its stale flash_attn/cute/) with both: the three-way paths are
  this rule's, the flash-attn/flash-attn-4 pair stays namespaces.cute-overlap's.
- control: flash-attn-4 alone shares nothing.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import Doctor, finding, findings_of
from packaging.utils import canonicalize_name
from realenv import Env, fa2_wheel, install, make_venv
from stacks import kernel_wheel
from test_kernel_wheels import (
    shell,  # pip and uv find the wheels in the test cache (PIP_FIND_LINKS, PIP_NO_INDEX)
)

FA4 = ("flash-attn-4", "4.0.0b40")
TS_FA4 = ("tokenspeed-fa4", "4.0.0.post20260923")
QUACK = ("quack-kernels", "0.6.5")
TS_QUACK = ("tokenspeed-quack", "0.6.4.post20260923")


def env_with(tmp_path: Path, *wheels: Path, installer: str = "pip") -> Env:
    env = make_venv(tmp_path / "with space", "uv" if installer == "uv" else "venv", with_pip=installer == "pip")
    for wheel in wheels:  # one install each, in this order: the last one's files win
        install(env, wheel, installer=installer, compile_bytecode=False)  # type: ignore[arg-type]
        time.sleep(0.05)  # RECORD times order the installs
    return env


def shared(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in findings_of(report) if f["id"] == "distributions.shared-paths"]


def assert_nothing_shared(doctor: Doctor, env: Env) -> dict[str, Any]:
    report, _ = doctor.report("--python", str(env.python), "--only", "distributions")
    found = shared(report)
    assert [f["status"] for f in found] == ["pass"], [f["title"] for f in found]
    assert found[0]["title"].startswith("no two of the ") and found[0]["title"].endswith(
        " installed distributions install the same path")
    assert not [f for f in findings_of(report) if f["id"] == "distributions.record-mismatch"]
    return report


@pytest.mark.slow
@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_tokenspeed_fa4_over_flash_attn_4_fails_and_the_pasted_fix_puts_flash_attn_4_back(
        doctor: Doctor, tmp_path: Path, installer: str) -> None:
    env = env_with(tmp_path, kernel_wheel(*FA4), kernel_wheel(*TS_FA4), installer=installer)
    report, proc = doctor.report("--python", str(env.python), "--only", "distributions")
    [overlap] = shared(report)
    assert overlap["status"] == "fail" and proc.returncode == 1
    assert overlap["title"] == ("flash-attn-4 4.0.0b40 and tokenspeed-fa4 4.0.0.post20260923 install the same 48 paths "
                                "(flash_attn/), 36 with other bytes: 36 hold tokenspeed-fa4's bytes; tokenspeed-fa4 "
                                "was installed last")
    evidence = overlap["evidence"]
    assert (evidence["shared"], evidence["differing"], evidence["identical"]) == (48, 36, 12)
    assert {d["name"]: d["holds"] for d in evidence["distributions"]} == {"flash-attn-4": 0, "tokenspeed-fa4": 36}
    assert len(evidence["stack_not_on_disk"]) == 20  # capped list; the title counts them all
    assert evidence["uninstall_deletes"] == {"flash-attn-4": {"tokenspeed-fa4": 48},
                                             "tokenspeed-fa4": {"flash-attn-4": 48}}
    # The shared paths are this finding's, not a changed-on-disk finding of flash-attn-4 (whose fix is half of it).
    assert not [f for f in findings_of(report) if f["id"] == "distributions.record-mismatch"]
    fix = overlap["remediation"][0]["command"]
    if installer == "pip":
        assert fix == (f"'{env.python}' -m pip uninstall -y tokenspeed-fa4 && '{env.python}' -m pip install "
                       "--force-reinstall --no-deps 'flash-attn-4==4.0.0b40'")
    else:
        assert fix == (f"uv pip uninstall --python '{env.python}' tokenspeed-fa4 && uv pip install --python "
                       f"'{env.python}' --reinstall --no-deps 'flash-attn-4==4.0.0b40'")

    shell(fix, env.root)
    assert_nothing_shared(doctor, env)
    assert (env.site_packages / "flash_attn" / "cute" / "interface.py").is_file()
    assert not list(env.site_packages.glob("tokenspeed_fa4-*.dist-info"))


@pytest.mark.slow
def test_tokenspeed_quack_beside_quack_kernels_warns_and_keeping_the_fork_clears_it(
        doctor: Doctor, tmp_path: Path) -> None:
    env = env_with(tmp_path, kernel_wheel(*QUACK), kernel_wheel(*TS_QUACK))
    report, _ = doctor.report("--python", str(env.python), "--only", "distributions")
    [overlap] = shared(report)
    assert overlap["status"] == "warn"
    assert overlap["title"].startswith("quack-kernels 0.6.5 and tokenspeed-quack 0.6.4.post20260923 install the same "
                                       "113 paths (quack/), 1 with other bytes: 1 holds tokenspeed-quack's bytes")
    keep_quack, keep_fork = (r["command"] for r in overlap["remediation"])
    assert "uninstall -y tokenspeed-quack &&" in keep_quack and "'quack-kernels==0.6.5'" in keep_quack
    shell(keep_fork, env.root)  # the other way round: quack-kernels removed, the fork's files put back
    assert_nothing_shared(doctor, env)
    assert (env.site_packages / "quack" / "__init__.py").is_file()


@pytest.mark.slow
def test_flash_attn_2_with_both_forks_of_cute_is_judged_once_per_set_of_names(doctor: Doctor, tmp_path: Path) -> None:
    env = env_with(tmp_path, kernel_wheel(*FA4), kernel_wheel(*TS_FA4), fa2_wheel())
    report, _ = doctor.report("--python", str(env.python), "--only", "distributions,namespaces")
    by_names = {tuple(canonicalize_name(d["name"]) for d in f["evidence"]["distributions"]): f
                for f in shared(report)}
    # the 20 stale flash_attn/cute/ paths of flash-attn 2.8.3 are in all three; 28 more only in the two forks
    assert sorted((names, f["evidence"]["shared"]) for names, f in by_names.items()) == [
        (("flash-attn", "flash-attn-4", "tokenspeed-fa4"), 20), (("flash-attn-4", "tokenspeed-fa4"), 28)]
    three = by_names[("flash-attn", "flash-attn-4", "tokenspeed-fa4")]
    assert three["evidence"]["installed_last"] == "flash_attn"  # its METADATA Name
    # flash-attn (stack) installed last holds the 20: bytes of the stack, a warning here; cute-overlap fails it
    assert three["status"] == "warn", three["title"]
    assert finding(report, "namespaces.cute-overlap")["status"] == "fail"
    # first: keep the serving stack's two, remove the fork, reinstall both in the order they were installed
    keep_stack = three["remediation"][0]["command"]
    python = f"'{env.python}' -m pip"
    assert keep_stack == (f"{python} uninstall -y tokenspeed-fa4 && {python} install --force-reinstall --no-deps "
                          f"'flash-attn-4==4.0.0b40' && {python} install --force-reinstall --no-deps 'flash_attn==2.8.3'")
    # then each alone: keeping flash_attn removes the other two, whose uninstall deletes nothing else
    assert three["remediation"][1]["command"].startswith(f"{python} uninstall -y flash-attn-4 tokenspeed-fa4 && ")


def test_flash_attn_4_alone_shares_no_path(doctor: Doctor, tmp_path: Path) -> None:
    env = env_with(tmp_path, kernel_wheel(*FA4))
    report = assert_nothing_shared(doctor, env)
    installed = len(list(env.site_packages.glob("*.dist-info")))  # flash-attn-4, the venv's own pip (and setuptools)
    assert finding(report, "distributions.shared-paths")["title"] == (
        f"no two of the {installed} installed distributions install the same path")


@pytest.mark.slow
def test_fix_leaves_out_an_uninstall_that_deletes_another_distributions_files(tmp_path: Path) -> None:
    """The seed scenario of the fix tests (vLLM 0.20.1 on the path, flash-attn-4 without flash-attn: its first fix
    uninstalls flash-attn-4) with tokenspeed-fa4 over flash-attn-4: that uninstall would delete the 48 paths
    tokenspeed-fa4 lists too, so the plan leaves it out, saying why; the shared-paths fix, which reinstalls what its
    uninstall deletes, stays."""
    from stacks import add_to_path, vllm_site
    from test_fix_plan import plan_only

    env = env_with(tmp_path, kernel_wheel(*FA4), kernel_wheel(*TS_FA4))
    add_to_path(env, vllm_site("0.20.1"))
    _, document = plan_only(env, tmp_path)
    dropped = {s["command"]: s["dropped"] for s in document["dropped"]}
    why = dropped[f"'{env.python}' -m pip uninstall -y flash-attn-4"]  # namespaces.v4-without-v2's first fix
    assert why == ("it uninstalls flash-attn-4, whose RECORD lists 48 paths tokenspeed-fa4 lists too: the uninstall "
                   "deletes its files and the step does not reinstall it (distributions.shared-paths names the fix "
                   "that does)")
    kept = [s["command"] for s in document["steps"]]
    assert (f"'{env.python}' -m pip uninstall -y tokenspeed-fa4 && '{env.python}' -m pip install --force-reinstall "
            "--no-deps 'flash-attn-4==4.0.0b40'") in kept


def test_a_shared_path_that_leads_out_of_the_environment_or_blocks_is_never_read(doctor: Doctor, tmp_path: Path) -> None:
    """Two real wheels (built here) that both install `twin/a.py` and `twin/b.py` with other bytes; on disk a.py is then
    a symlink to a file outside the environment and b.py a FIFO. Neither is opened: the finding says so, path by
    path, and the doctor returns (a FIFO opened would block it)."""
    from realenv import build_wheel

    wheels = [build_wheel(tmp_path / "wheels", name, "1.0", {"twin/a.py": f"A = {n}\n", "twin/b.py": f"B = {n}\n"})
              for n, name in enumerate(("twin-one", "twin-two"))]
    env = env_with(tmp_path, *wheels)
    outside = tmp_path / "outside.py"
    outside.write_text("SECRET = 1\n")
    (env.site_packages / "twin" / "a.py").unlink()
    (env.site_packages / "twin" / "a.py").symlink_to(outside)
    (env.site_packages / "twin" / "b.py").unlink()
    os.mkfifo(env.site_packages / "twin" / "b.py")
    report, _ = doctor.report("--python", str(env.python), "--only", "distributions", timeout=120)
    [overlap] = shared(report)
    assert overlap["status"] == "warn", overlap["title"]
    assert overlap["title"].startswith("twin-one 1.0 and twin-two 1.0 install the same 2 paths (twin/), 2 with other "
                                       "bytes: 2 not hashed")
    assert overlap["evidence"]["not_hashed"] == [
        {"path": "twin/a.py", "why": f"resolves to {outside}, outside the environment"},
        {"path": "twin/b.py", "why": "a FIFO"}]


@pytest.mark.slow
def test_fix_yes_puts_flash_attn_4_back_over_tokenspeed_fa4_and_undo_restores_every_byte(
        doctor: Doctor, tmp_path: Path) -> None:
    """`fix --yes` runs the shared-paths fix (uninstall tokenspeed-fa4, reinstall flash-attn-4), asked of pip and
    taken from the test cache (PIP_FIND_LINKS, PIP_NO_INDEX), re-checks, keeps it; `fix --undo` puts tokenspeed-fa4
    and its bytes at the shared paths back, byte for byte."""
    import json
    import subprocess
    import sys

    from realenv import REPO_ROOT, _clean_environ, dir_digest
    from stacks import pypi_wheels_dir

    env = env_with(tmp_path, kernel_wheel(*FA4), kernel_wheel(*TS_FA4))
    before = dir_digest(env.root)
    environ = {**_clean_environ({"DFLASH_DOCTOR_SNAPSHOTS": str(tmp_path / "snaps"), "PIP_CONFIG_FILE": os.devnull,
                                 "PIP_FIND_LINKS": str(pypi_wheels_dir()), "PIP_NO_INDEX": "1"}),
               "PYTHONPATH": str(REPO_ROOT)}

    def fix(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "dflash_doctor", "fix", "--python", str(env.python), "--no-gpu",
                               "--only", "distributions", *args], cwd=tmp_path, env=environ, capture_output=True,
                              text=True, timeout=600, check=False, stdin=subprocess.DEVNULL)

    out = tmp_path / "fix.json"
    proc = fix("--yes", "--json", str(out))
    document = json.loads(out.read_text())
    [step] = [s for s in document["steps"] if s["findings"][0]["id"] == "distributions.shared-paths"]
    assert step["applied"] == "cleared", proc.stdout + proc.stderr
    assert step["verified"] == "resolves"
    assert document["after_findings"]["distributions"]["distributions.shared-paths"] == "pass"
    assert not list(env.site_packages.glob("tokenspeed_fa4-*.dist-info"))

    undo = fix("--undo")
    assert undo.returncode == 0, undo.stdout + undo.stderr
    assert dir_digest(env.root) == before
