"""Healthy layouts of real environments, as installers lay them out: none is hostile, none fails.

Each environment is real: venvs made by `venv`, `virtualenv` and uv, sites reached through `--system-site-packages`,
a `.pth` line or PYTHONUSERBASE, distributions installed by pip and uv from small real wheels (one with a console
script, which the installer writes to the scripts directory of the prefix it installs into: a RECORD line
`../../../bin/tiny-tool` from that prefix's site-packages), torch 2.13.0 in another venv, an editable install of a
package with a C extension built by setuptools, and a prefix laid out like the vLLM container's `/usr/local`. A
RECORD line that leaves every one of those prefixes is still reported, and such a file is never loaded: that is
tests/test_hostile_files.py.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import Doctor, finding, findings_of
from realenv import Env, _run, build_wheel, install, make_venv, uv_bin
from stacks import torch_site
from test_hostile_files import constructor_library

pytestmark = [pytest.mark.slow, pytest.mark.layouts]

COMMON = ("--no-gpu", "--timeout", "60")
CHECKS = (*COMMON, "--only", "distributions,namespaces,imports")
HOSTILE_WORDS = ("hostile", "points outside the environment")


def tool_wheel(root: Path) -> Path:
    """A small pure wheel with a console script."""
    return build_wheel(root / "wheels", "tiny-tool", "1.0", {"tiny_tool/__init__.py": "def main():\n    pass\n"},
                       entry_points={"console_scripts": {"tiny-tool": "tiny_tool:main"}})


def site_of(python: Path) -> Path:
    return Path(_run([python, "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())


def host_pip(*args: str, environ: dict[str, str] | None = None) -> None:
    _run([sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", "-q", *args], env=environ)


def plain_venv(parent: Path, *flags: str) -> Env:
    root = parent / "env"
    _run([sys.executable, "-m", "venv", "--without-pip", *flags, root])
    python = root / "bin" / "python"
    return Env(root=root, python=python, site_packages=site_of(python), kind="venv")


def system_site_packages(tmp: Path) -> tuple[Env, dict[str, str]]:
    """A venv made with --system-site-packages: the base interpreter's distributions (pip, setuptools, ...) have
    their console scripts in the base interpreter's bin/."""
    return plain_venv(tmp, "--system-site-packages"), {}


def uv_venv(tmp: Path) -> tuple[Env, dict[str, str]]:
    """A venv made by `uv venv` (its pyvenv.cfg names uv), the console script installed by uv. With this
    machine's python3: uv's own managed Pythons would need a download."""
    env = make_venv(tmp, "uv")
    install(env, tool_wheel(tmp), installer="uv")
    assert (env.root / "bin" / "tiny-tool").exists()
    return env, {}


def pth_to_other_venv(tmp: Path) -> tuple[Env, dict[str, str]]:
    """A venv reaching another venv's site-packages through a `.pth` line; the other venv holds a console script."""
    base = make_venv(tmp, "uv", name="base")
    install(base, tool_wheel(tmp), installer="uv")
    assert (base.root / "bin" / "tiny-tool").exists()
    env = make_venv(tmp)
    (env.site_packages / "zz-base.pth").write_text(f"{base.site_packages}\n")
    return env, {}


def pth_to_torch_venv(tmp: Path) -> tuple[Env, dict[str, str]]:
    """The same with torch 2.13.0 (and its torchrun, torchfrtrace) in the other venv."""
    env = make_venv(tmp)
    (env.site_packages / "zz-torch.pth").write_text(f"{torch_site()}\n")
    return env, {}


def user_install(tmp: Path) -> tuple[Env, dict[str, str]]:
    """`pip install --user` into PYTHONUSERBASE (a venv made with --system-site-packages keeps the user site on).

    pip runs as the target venv's interpreter (`pip --python`): the interpreter running the tests may itself be a
    venv without the system site, where pip refuses `--user`, or an externally managed system Python."""
    environ = {"PYTHONUSERBASE": str(tmp / "userbase")}
    env = plain_venv(tmp, "--system-site-packages")
    host_pip("--python", str(env.python), "install", "--user", "--no-deps", "--no-index", str(tool_wheel(tmp)),
             environ=environ)
    assert (tmp / "userbase" / "bin" / "tiny-tool").exists()
    return env, environ


def virtualenv_venv(tmp: Path) -> tuple[Env, dict[str, str]]:
    """A venv made by `virtualenv` (its own site layout and activation scripts; a test dependency)."""
    root = tmp / "env"
    _run([sys.executable, "-m", "virtualenv", "-q", "--no-pip", "--no-setuptools", "--no-wheel",
          "--no-periodic-update", root])
    python = root / "bin" / "python"
    env = Env(root=root, python=python, site_packages=site_of(python), kind="venv")
    install(env, tool_wheel(tmp), installer="uv")
    return env, {}


SETUP_PY = """\
from setuptools import Extension, setup

setup(name="tiny-ext", version="1.0", packages=["tiny_ext"],
      ext_modules=[Extension("tiny_ext._speed", ["tiny_ext/_speed.c"])],
      entry_points={"console_scripts": ["tiny-ext = tiny_ext:main"]})
"""
PYPROJECT = """\
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"
"""
EXTENSION_C = """\
#include <Python.h>
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "_speed", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__speed(void) { return PyModule_Create(&def); }
"""


def editable_c_extension(tmp: Path) -> tuple[Env, dict[str, str]]:
    """`pip install -e` (PEP 660, setuptools' finder) of a package with a C extension, which setuptools builds
    into the project, outside site-packages. The venv sees the cached builder's setuptools and wheel (and its
    torch) through a `.pth` line."""
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    project = tmp / "project"
    (project / "tiny_ext").mkdir(parents=True)
    (project / "setup.py").write_text(SETUP_PY)
    (project / "pyproject.toml").write_text(PYPROJECT)
    (project / "tiny_ext" / "__init__.py").write_text("def main():\n    pass\n")
    (project / "tiny_ext" / "_speed.c").write_text(EXTENSION_C)
    env = make_venv(tmp)
    (env.site_packages / "zz-builder.pth").write_text(f"{torch_site()}\n")
    host_pip("--python", str(env.python), "install", "--no-deps", "--no-index", "--no-build-isolation",
             "-e", str(project))
    check = env.run_code("import tiny_ext._speed as m; print(m.__file__)")
    assert check.returncode == 0 and str(project) in check.stdout, check.stderr
    return env, {}


def container_prefix(tmp: Path) -> tuple[Env, dict[str, str]]:
    """A prefix laid out like the vLLM container's: distributions in `usr/local/lib/python3.X/dist-packages`,
    console scripts in `usr/local/bin` (installed with `uv pip install --prefix`, as `pip install --prefix` does)."""
    prefix = tmp / "image" / "usr" / "local"
    _run([uv_bin(), "pip", "install", "-q", "--no-config", "--no-index", "--no-deps", "--link-mode", "copy",
          "--python", sys.executable, "--prefix", prefix, tool_wheel(tmp)])
    lib = prefix / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    (lib / "site-packages").rename(lib / "dist-packages")
    assert (prefix / "bin" / "tiny-tool").exists()
    record = lib / "dist-packages" / "tiny_tool-1.0.dist-info" / "RECORD"
    assert "../../../bin/tiny-tool" in record.read_text()  # the installer's own line from dist-packages to bin
    env = make_venv(tmp)
    (env.site_packages / "zz-container.pth").write_text(f"{lib / 'dist-packages'}\n")
    return env, {}


LAYOUTS: dict[str, Callable[[Path], tuple[Env, dict[str, str]]]] = {
    "system-site-packages": system_site_packages,
    "pth-to-other-venv": pth_to_other_venv,
    "pth-to-torch-venv": pth_to_torch_venv,
    "user-install": user_install,
    "virtualenv": virtualenv_venv,
    "uv-venv": uv_venv,
    "editable-c-extension": editable_c_extension,
    "container-prefix": container_prefix,
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_healthy_layout_passes_with_no_record_escape(doctor: Doctor, tmp_path: Path, layout: str) -> None:
    env, environ = LAYOUTS[layout](tmp_path)
    report, proc = doctor.report("--python", str(env.python), *CHECKS, env=environ or None, timeout=200)
    findings = findings_of(report)
    failed = [f"{f['id']}: {f['title']}" for f in findings if f["status"] == "fail"]
    warned = [f"{f['id']}: {f['title']}" for f in findings if f["status"] == "warn"]
    # The figures of the before/after matrix in the report.
    print(f"LAYOUT {layout}: exit {proc.returncode}, {len(failed)} fail, {len(warned)} warn")
    escapes = [f for f in findings if f["id"] == "distributions.record-escapes"]
    assert not escapes, "\n".join(f["title"] for f in escapes)
    hostile = [f"{f['id']}: {f['title']}" for f in findings
               if any(w in (f["title"] + f.get("detail", "")).lower() for w in HOSTILE_WORDS)]
    assert not hostile, "\n".join(hostile)
    assert not failed, "\n".join(failed)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_a_record_line_leaving_every_prefix_is_still_reported_and_never_loaded(doctor: Doctor, tmp_path: Path) -> None:
    """The base venv a `.pth` line reaches is inside; a RECORD line of its distribution that leaves it (and every
    other root) for a library elsewhere is still a finding, and the library is never loaded."""
    env, _ = pth_to_other_venv(tmp_path)
    marker = tmp_path / "constructor-ran"
    evil = constructor_library(tmp_path / "outside", marker)
    record = next((tmp_path / "base").glob("lib/python*/site-packages/tiny_tool-1.0.dist-info/RECORD"))
    rel = "../../../../" + os.path.relpath(evil, tmp_path)
    assert (record.parent.parent / rel).resolve() == evil
    record.write_text(record.read_text() + f"{rel},sha256=AAAA,16\n")
    report, _ = doctor.report("--python", str(env.python), *COMMON, "--only", "distributions,extensions",
                              timeout=200)
    assert not marker.exists(), "the library's constructor ran: the doctor loaded a file outside the environment"
    escape = finding(report, "distributions.record-escapes")
    assert rel in escape["title"] and str(evil) in escape["title"]
    assert [line["path"] for line in escape["evidence"]["lines"]] == [rel]  # the console script is no escape
