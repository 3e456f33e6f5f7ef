"""Every process the doctor's questions run in is isolated and guarded, the probe's own and those it starts.

Real interpreters (this one, and the older CPythons pyenv has here, which ignore PYTHONSAFEPATH), real
venvs and wheels, a real shared library with an ELF constructor compiled with cc, real child processes
started the way vLLM's model registry starts its own (`sys.executable -m ...`). A working directory that
holds contextlib.py, json.py and runpy.py, each leaving a mark when imported, must leave none: `vllm serve`'s
console script never has the working directory on its path, and neither may a probe or its children.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import validate_report
from realenv import build_wheel, install, make_venv

from dflash_doctor.facts.probes import ProbeJob, run_probe, run_probes_sharing_imports

ROOT = Path(__file__).resolve().parent.parent
SHADOWS = ("contextlib", "json", "runpy", "re")
OLDER = [Path.home() / ".pyenv" / "versions" / v / "bin" / "python" for v in ("3.8.18", "3.10.13")]
INTERPRETERS = [sys.executable] + [str(p) for p in OLDER if p.exists()]


def spawner(record: Path) -> str:
    """A module whose import starts two Python processes as vLLM does during validation (`-m`, `-c`) and writes
    what they saw to `record` (the `-c` one imports a module first: an older Python's child takes the working
    directory off its path at its first import)."""
    return (
        "import json, subprocess, sys\n"
        "_tool = subprocess.run([sys.executable, '-m', 'json.tool'], input='[1]', capture_output=True, text=True,"
        " timeout=60)\n"
        "_path = subprocess.run([sys.executable, '-c', 'import colorsys, json, sys; print(json.dumps(sys.path))'],"
        " capture_output=True, text=True, timeout=60)\n"
        f"with open({str(record)!r}, 'w') as _out:\n"
        "    json.dump({'tool': _tool.stdout.strip(), 'tool_stderr': _tool.stderr[-2000:],"
        " 'path': _path.stdout.strip(), 'path_stderr': _path.stderr[-2000:],"
        " 'doctor': __import__('os').environ.get('DFLASH_DOCTOR_PROBE')}, _out)\n"
        "if _tool.returncode:\n"
        "    raise ImportError(_tool.stderr[-2000:])\n"
    )


def hostile_workdir(tmp_path: Path) -> Path:
    """A working directory whose contextlib.py, json.py, runpy.py and re.py leave a mark when imported."""
    workdir = tmp_path / "work dir"
    workdir.mkdir()
    for name in SHADOWS:
        (workdir / f"{name}.py").write_text(f"open({str(tmp_path / ('ran-' + name))!r}, 'a').write('ran')\n")
    return workdir


def marks(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in tmp_path.glob("ran-*"))


@pytest.mark.parametrize("python", INTERPRETERS, ids=lambda p: Path(p).parent.parent.name if "pyenv" in p else "this")
def test_stdlib_names_in_the_working_directory_run_in_no_probe_and_no_process_it_starts(
        tmp_path: Path, python: str) -> None:
    workdir = hostile_workdir(tmp_path)
    modules = tmp_path / "modules"
    modules.mkdir()
    record = tmp_path / "children.json"
    (modules / "spawner.py").write_text(spawner(record))
    env = dict(os.environ, PYTHONPATH=str(modules))
    env.pop("PYTHONSAFEPATH", None)
    outcome = run_probe(python, "try_import", {"module": "spawner"}, timeout_s=120, cwd=str(workdir), env=env)
    assert outcome.ok and outcome.data["ok"] is True, (outcome.error, outcome.stderr, outcome.data)
    assert marks(tmp_path) == [], "a module in the working directory ran in the probe or in a process it started"
    # The children ran, with the target's own path as `vllm serve` sees it: PYTHONPATH kept, no working
    # directory, nothing of the doctor's.
    seen = json.loads(record.read_text())
    assert seen["tool"] == "[\n    1\n]", seen
    path = json.loads(seen["path"])
    assert path[0] == str(modules) and "" not in path and str(workdir) not in path, path
    assert not [entry for entry in path if "dflash-doctor-probe-" in entry], path
    assert seen["path_stderr"] == seen["tool_stderr"] == "", seen


def test_the_shared_target_process_its_jobs_and_what_they_start_run_nothing_from_the_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workdir = hostile_workdir(tmp_path)
    modules = tmp_path / "modules"
    modules.mkdir()
    record = tmp_path / "children.json"
    (modules / "spawner.py").write_text(spawner(record))
    monkeypatch.setenv("PYTHONPATH", str(modules))
    carriers = tmp_path / "tmp"
    carriers.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(carriers))  # where the doctor makes its directories
    shared = run_probes_sharing_imports(sys.executable, [ProbeJob("spawn", "try_import", {"module": "spawner"})],
                                        preload=("json",), timeout_s=120, cwd=str(workdir))
    process = shared.target_process
    assert process["forked"] is True and process["preload"][0]["imported"] is True, process
    outcome = shared.outcomes["spawn"]
    assert outcome.ok and outcome.data["ok"] is True, (outcome.error, outcome.stderr)
    assert marks(tmp_path) == []
    seen = json.loads(record.read_text())
    path = json.loads(seen["path"])
    assert path[0] == str(modules) and str(workdir) not in path, path
    assert Path(json.loads(seen["doctor"])["carrier"]).parent == carriers
    assert not list(carriers.iterdir()), "the directory that carried the prelude was left behind"


def test_a_doctor_run_from_a_directory_holding_stdlib_names_runs_none_of_them(tmp_path: Path) -> None:
    """The whole run (the handshake, the environment probe, the shared target process and its jobs), with a
    flash_attn whose import starts `sys.executable -m json.tool` as vLLM starts its registry subprocess."""
    workdir = hostile_workdir(tmp_path)
    env = make_venv(tmp_path)
    record = tmp_path / "children.json"
    install(env, build_wheel(tmp_path / "wheels", "flash-attn", "2.8.3", {
        "flash_attn/__init__.py": spawner(record),
        "flash_attn/ops/__init__.py": "",
        "flash_attn/ops/triton/__init__.py": "",
        "flash_attn/ops/triton/rotary.py": "def apply_rotary(*args, **kwargs):\n    pass\n",
    }))
    # The doctor as its console script starts it (-P: not the working directory on its own path either).
    proc = subprocess.run([sys.executable, "-P", "-m", "dflash_doctor", "--python", str(env.python), "--no-gpu",
                           "--only", "distributions,namespaces,imports", "--json", "-"],
                          cwd=workdir, capture_output=True, text=True, timeout=300, check=False,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    report = validate_report(json.loads(proc.stdout))
    assert marks(tmp_path) == [], "a module in the working directory ran in a probe or a process it started"
    statuses = {c["id"]: c["status"] for c in report["checks"]}
    assert statuses["imports"] == "pass", (statuses, proc.stderr[-2000:])
    assert json.loads(record.read_text())["tool"] == "[\n    1\n]"
    # What the report says of the environment is the user's, not what the doctor set to run its probes.
    environ = next(c["facts"]["target"]["environ"] for c in report["checks"] if "target" in (c.get("facts") or {}))
    assert "DFLASH_DOCTOR_PROBE" not in environ["names"] and "PYTHONSAFEPATH" not in environ["names"], environ
    assert environ["values"].get("PYTHONPATH") == str(ROOT), environ


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler (cc)")
@pytest.mark.parametrize("how", ["-m", "-c"])
def test_a_process_a_probe_starts_never_loads_an_extension_that_resolves_outside_the_environment(
        doctor, tmp_path: Path, how: str) -> None:  # type: ignore[no-untyped-def]
    """flash_attn's import starts a child (`sys.executable -m fa_registry`, as vLLM's model registry does) that
    imports flash_attn_2_cuda, a symlink in site-packages to a library outside the environment whose constructor
    leaves a mark: the child refuses it as the probe would, and the refusal reaches the report."""
    marker = tmp_path / "constructor-ran"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "evil.c").write_text(
        "#include <stdio.h>\n__attribute__((constructor)) static void ran(void) {\n"
        f'  FILE *f = fopen("{marker}", "w"); if (f) {{ fputs("constructor ran", f); fclose(f); }}\n}}\n')
    evil = outside / "evil.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(evil), str(outside / "evil.c")], check=True)
    child = ([sys.executable, "-m", "fa_registry"] if how == "-m"
             else [sys.executable, "-c", "import fa_registry"])
    init = ("import subprocess, sys\n"
            f"_child = subprocess.run([sys.executable] + {child[1:]!r}, capture_output=True, text=True, timeout=60)\n"
            "if _child.returncode:\n"
            "    raise ImportError('the registry subprocess failed: ' + _child.stderr[-3000:])\n")
    env = make_venv(tmp_path / "inside")
    install(env, build_wheel(tmp_path / "wheels", "flash-attn", "2.8.3", {
        "flash_attn/__init__.py": init,
        "flash_attn/ops/__init__.py": "",
        "flash_attn/ops/triton/__init__.py": "",
        "flash_attn/ops/triton/rotary.py": "def apply_rotary(*args, **kwargs):\n    pass\n",
        "fa_registry.py": "import flash_attn_2_cuda\n",
    }))
    import sysconfig
    link = env.site_packages / f"flash_attn_2_cuda{sysconfig.get_config_var('EXT_SUFFIX')}"
    link.symlink_to(evil)
    report, proc = doctor.report("--python", str(env.python), "--only", "imports", "--no-gpu", "--timeout", "120",
                                 timeout=300)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert not marker.exists(), "the library's constructor ran: a process the probe started loaded it"
    rotary = next(c["facts"]["rotary_import"] for c in report["checks"] if c["id"] == "imports")
    message = rotary["exception"]["message"]
    assert not rotary["ok"] and "the registry subprocess failed" in message, rotary
    assert f"not loaded: {link} resolves to {evil}, outside the environment" in message, message


def test_python_source_that_resolves_outside_the_environment_is_not_run_and_the_import_names_it(
        tmp_path: Path) -> None:
    """A package in site-packages that is a link to a directory elsewhere: its code would run on the rotary import.
    The probe does not run it (the same guard the prelude installs for extensions, in the probe and in each process
    it starts); the import's finding says why it was not loaded."""
    env = make_venv(tmp_path, name="env")
    outside = tmp_path / "elsewhere" / "flash_attn"
    outside.mkdir(parents=True)
    marker = tmp_path / "RAN"
    (outside / "__init__.py").write_text(f"open({str(marker)!r}, 'a').write('imported\\n')\n")
    (env.site_packages / "flash_attn").symlink_to(outside)
    proc = subprocess.run([sys.executable, "-m", "dflash_doctor", "--python", str(env.python), "--no-gpu",
                           "--only", "imports,namespaces", "--json", "-"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    report = validate_report(json.loads(proc.stdout))
    assert not marker.exists(), marker.read_text()
    titles = [f["title"] for c in report["checks"] if c["id"] == "imports" for f in c["findings"]]
    assert any("outside the environment" in t for t in titles), titles
    spawn = subprocess.run([str(env.python), "-c", "import flash_attn"], capture_output=True, text=True,
                           timeout=60, cwd=tmp_path)
    assert spawn.returncode == 0 and marker.exists()  # outside the doctor, the interpreter runs it: a real package
