"""The real-environment helpers do what the doctor's tests rely on them to do."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from realenv import (
    HANG_ON_IMPORT,
    REPO_ROOT,
    SEGFAULT_ON_IMPORT,
    build_wheel,
    cache_dir,
    dir_digest,
    dist_info,
    fa2_sdist,
    fa2_wheel,
    fa4_wheel,
    install,
    make_venv,
    uninstall,
    wheel_files,
)

pytestmark = pytest.mark.slow

FIND_SPEC = ("import importlib.util as u, json; s = u.find_spec('flash_attn'); "
             "print(json.dumps([s.origin, list(s.submodule_search_locations)]))")


def test_cache_lives_outside_the_repo() -> None:
    assert REPO_ROOT not in cache_dir().parents
    assert fa4_wheel().parent.parent == cache_dir()


def test_cache_inside_the_repo_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DFLASH_DOCTOR_TEST_CACHE", str(REPO_ROOT / ".cache"))
    with pytest.raises(RuntimeError, match="inside the repo"):
        cache_dir()


def test_fa4_alone_makes_flash_attn_a_namespace_package(tmp_path: Path) -> None:
    env = make_venv(tmp_path)
    result = install(env, fa4_wheel())

    assert not (env.site_packages / "flash_attn" / "__init__.py").exists()
    assert (env.site_packages / "flash_attn" / "cute" / "__init__.py").is_file()
    assert (dist_info(env, "flash-attn-4") / "INSTALLER").read_text().strip() == "pip"
    assert result.pyc_written > 0  # pip compiles by default
    proc = env.run_code(FIND_SPEC)
    assert proc.returncode == 0, proc.stderr
    origin, locations = json.loads(proc.stdout)
    assert origin is None  # a namespace package has no file behind it
    assert locations == [str(env.site_packages / "flash_attn")]


def test_fa2_wheel_is_pure_python_and_ships_hopper(tmp_path: Path) -> None:
    wheel = fa2_wheel()
    assert wheel.name == "flash_attn-2.8.3-py3-none-any.whl"
    names = wheel_files(wheel)
    assert {n.split("/")[0] for n in names} == {"flash_attn", "hopper", "flash_attn-2.8.3.dist-info"}
    assert not [n for n in names if n.endswith(".so")]

    env = make_venv(tmp_path, "uv")
    result = install(env, wheel, installer="uv")
    assert result.pyc_written == 0  # uv does not compile unless asked
    assert (dist_info(env, "flash-attn") / "INSTALLER").read_text().strip() == "uv"
    assert (env.site_packages / "hopper" / "__init__.py").stat().st_nlink == 1  # copied, not uv-cache links
    proc = env.run_code(FIND_SPEC)
    origin, _ = json.loads(proc.stdout)
    assert origin == str(env.site_packages / "flash_attn" / "__init__.py")
    # A real import runs flash_attn/__init__.py, which needs torch: absent here (--no-deps).
    proc = env.run_code("import flash_attn")
    assert "No module named 'torch'" in proc.stderr


def test_fa2_init_is_a_regular_package_not_a_pkgutil_namespace() -> None:
    with tarfile.open(fa2_sdist()) as tf:
        member = tf.extractfile("flash_attn-2.8.3/flash_attn/__init__.py")
        assert member is not None
        from_sdist = member.read()
    with zipfile.ZipFile(fa2_wheel()) as zf:
        assert zf.read("flash_attn/__init__.py") == from_sdist
    assert from_sdist.startswith(b'__version__ = "2.8.3"') and b"extend_path" not in from_sdist


def test_fa4_over_fa2_claims_twenty_files_with_other_bytes(tmp_path: Path) -> None:
    fa2, fa4 = fa2_wheel(), fa4_wheel()
    cute2 = {n for n in wheel_files(fa2) if n.startswith("flash_attn/cute/")}
    cute4 = {n for n in wheel_files(fa4) if n.startswith("flash_attn/cute/")}
    assert (len(cute2), len(cute4), len(cute2 & cute4)) == (21, 56, 20)
    with zipfile.ZipFile(fa2) as z2, zipfile.ZipFile(fa4) as z4:
        assert all(z2.read(n) != z4.read(n) for n in cute2 & cute4)

    env = make_venv(tmp_path)
    install(env, fa2, compile_bytecode=False)
    install(env, fa4, compile_bytecode=False)  # pip overwrites fa2's files without a word
    overwritten = env.site_packages / "flash_attn" / "cute" / "interface.py"
    with zipfile.ZipFile(fa4) as z4:
        assert overwritten.read_bytes() == z4.read("flash_attn/cute/interface.py")
    assert "flash_attn/cute/interface.py" in (dist_info(env, "flash-attn") / "RECORD").read_text()

    # Uninstalling fa4 deletes what its RECORD lists, fa2's shared files included.
    uninstall(env, "flash-attn-4")
    assert (env.site_packages / "flash_attn" / "__init__.py").is_file()
    assert not overwritten.exists()
    assert (env.site_packages / "flash_attn" / "cute" / "hopper_helpers.py").is_file()  # fa2-only


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_hand_built_wheel_installs_and_uninstalls_cleanly(tmp_path: Path, installer: str) -> None:
    wheel = build_wheel(
        tmp_path / "wheels", "dflash-plugin-demo", "1.0",
        {"dflash_plugin_demo/__init__.py": "class Check:\n    id = 'demo'\n"},
        requires=["packaging>=23"],
        entry_points={"dflash_doctor.checks": {"demo": "dflash_plugin_demo:Check"}},
        metadata_extra="Summary: a third-party check",
    )
    assert wheel.name == "dflash_plugin_demo-1.0-py3-none-any.whl"
    env = make_venv(tmp_path, "uv" if installer == "uv" else "venv")
    empty = dir_digest(env.site_packages)
    install(env, wheel, installer=installer)  # type: ignore[arg-type]

    record = (dist_info(env, "dflash-plugin-demo") / "RECORD").read_text()
    assert "dflash_plugin_demo/__init__.py,sha256=" in record
    proc = env.run_code(
        "from importlib.metadata import distribution as d, entry_points as e; "
        "print(d('dflash-plugin-demo').requires, [x.value for x in e(group='dflash_doctor.checks')])")
    assert proc.stdout.strip() == "['packaging>=23'] ['dflash_plugin_demo:Check']", proc.stderr
    assert env.run_code("import dflash_plugin_demo").returncode == 0

    uninstall(env, "dflash-plugin-demo", installer=installer)  # type: ignore[arg-type]
    assert dir_digest(env.site_packages) == empty


def test_hand_built_wheel_is_deterministic(tmp_path: Path) -> None:
    files = {"m.py": "x = 1\n"}
    a = build_wheel(tmp_path / "a", "m", "0.1", files).read_bytes()
    b = build_wheel(tmp_path / "b", "m", "0.1", files).read_bytes()
    assert a == b


def test_module_that_segfaults_on_import_really_does(tmp_path: Path) -> None:
    env = make_venv(tmp_path)
    install(env, build_wheel(tmp_path, "crashy", "1.0", {"crashy.py": SEGFAULT_ON_IMPORT}), installer="uv")
    assert env.run_code("import crashy").returncode == -signal.SIGSEGV


def test_module_that_hangs_on_import_really_does(tmp_path: Path) -> None:
    env = make_venv(tmp_path)
    install(env, build_wheel(tmp_path, "stuck", "1.0", {"stuck.py": HANG_ON_IMPORT}), installer="uv")
    with pytest.raises(subprocess.TimeoutExpired):
        env.run_code("import stuck", timeout=1)


def test_uv_venv_is_marked_in_pyvenv_cfg(tmp_path: Path) -> None:
    assert "\nuv = " in (make_venv(tmp_path, "uv", name="u").root / "pyvenv.cfg").read_text()
    assert "\nuv = " not in (make_venv(tmp_path, "venv", name="v").root / "pyvenv.cfg").read_text()


def test_dir_digest_sees_content_new_dirs_and_symlinks(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("a = 1\n")
    before = dir_digest(tmp_path)
    assert set(before) == {"pkg", "pkg/a.py"}

    (tmp_path / "pkg" / "__pycache__").mkdir()
    assert dir_digest(tmp_path) != before
    (tmp_path / "pkg" / "__pycache__").rmdir()
    (tmp_path / "pkg" / "a.py").write_text("a = 2\n")
    assert dir_digest(tmp_path) != before
    (tmp_path / "pkg" / "a.py").write_text("a = 1\n")
    (tmp_path / "link").symlink_to("pkg")
    assert dir_digest(tmp_path)["link"] == "<symlink> pkg"


FAILING_SUBPROCESSES = '''\
import json, subprocess, sys

from realenv import _run

SAY = "import sys; sys.stderr.write('x' * 900 + sys.argv[1] + 'y' * 900); sys.exit(int(sys.argv[2]))"


def test_check_true():
    subprocess.run([sys.executable, "-c", SAY, "MARK-CHECKED", "3"], check=True, capture_output=True)


def test_returncode_asserted():
    proc = subprocess.run([sys.executable, "-c", SAY, "MARK-ASSERTED", "4"], capture_output=True, text=True)
    assert proc.returncode == 0


def test_helper():
    _run([sys.executable, "-c", SAY, "MARK-HELPER", "5"])


def test_output_read():
    proc = subprocess.run([sys.executable, "-c", SAY, "MARK-READ", "6"], capture_output=True, text=True)
    json.loads(proc.stdout)
'''


def test_a_failing_subprocess_shows_its_command_exit_status_and_stderr(tmp_path: Path) -> None:
    """Run as this suite runs them (its conftest), each failing test's report names the command, its exit status
    and the tail of its stderr, even where pytest's own report would cut them."""
    (tmp_path / "test_inner.py").write_text(FAILING_SUBPROCESSES)
    tests = Path(__file__).resolve().parent
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "conftest",
                           "test_inner.py"], check=False, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          # pytest prints a failure's whole message again in its summary on CI (CI, BUILD_NUMBER)
                          env={**{k: v for k, v in os.environ.items() if k not in ("CI", "BUILD_NUMBER")},
                               "PYTHONPATH": os.pathsep.join([str(tests), str(REPO_ROOT)])})
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "4 failed" in proc.stdout, proc.stdout[-3000:]
    for marker, status in (("MARK-CHECKED", 3), ("MARK-ASSERTED", 4), ("MARK-HELPER", 5), ("MARK-READ", 6)):
        assert f"command failed (exit status {status}): {sys.executable} -c " in proc.stdout, proc.stdout[-3000:]
        assert proc.stdout.count("x" * 100 + marker + "y" * 100) == 1, marker  # once: a helper's error is not repeated
