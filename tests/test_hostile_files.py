"""Files that would blind, hang or hijack the doctor: a FIFO or a /dev/zero link where a library, RECORD or
METADATA should be, RECORD lines that leave the environment, and extensions no RECORD lists.

Every file here is real: a FIFO made with mkfifo, symlinks to the real /dev/zero, C extension modules and a
library with a constructor compiled with cc, installed by pip/uv from real wheels. Each run finishes well within
its --timeout, and the other distributions are still judged.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest
from conftest import Doctor, finding, findings_of
from realenv import Env, build_wheel, dist_info, install, make_venv

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")]

EXT_SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")
PY_TAG = f"cp{sys.version_info[0]}{sys.version_info[1]}"
EXTENSION = f"flash_attn_2_cuda{EXT_SUFFIX}"
# Well within the doctor's own --timeout: a probe blocked on a FIFO would only end at 60 s.
TIMEOUT = ("--timeout", "60")
BOUND_S = 30.0
RUN = ("--only", "python,arch-coverage", "--no-gpu", "--target-arch", "sm_90", *TIMEOUT)


def c_extension(directory: Path, module: str, body: str = "") -> Path:
    """A real CPython extension module `module`, compiled with cc against this interpreter's Python.h."""
    directory.mkdir(parents=True, exist_ok=True)
    source = directory / f"{module}.c"
    source.write_text(
        "#include <Python.h>\n"
        f"{body}\n"
        f'static struct PyModuleDef def = {{PyModuleDef_HEAD_INIT, "{module}", NULL, -1, NULL}};\n'
        f"PyMODINIT_FUNC PyInit_{module}(void) {{ return PyModule_Create(&def); }}\n"
    )
    out = directory / f"{module}{EXT_SUFFIX}"
    subprocess.run(["cc", "-shared", "-fPIC", "-I", sysconfig.get_paths()["include"], "-o", str(out), str(source)],
                   check=True, capture_output=True)
    return out


def constructor_library(directory: Path, marker: Path) -> Path:
    """A shared library whose ELF constructor writes `marker` the moment anything dlopens it."""
    directory.mkdir(parents=True, exist_ok=True)
    source = directory / "evil.c"
    source.write_text(
        "#include <stdio.h>\n"
        "__attribute__((constructor)) static void ran(void) {\n"
        f'  FILE *f = fopen("{marker}", "w"); if (f) {{ fputs("constructor ran", f); fclose(f); }}\n'
        "}\n"
        "void *PyInit_evil(void) { return 0; }\n"
    )
    out = directory / f"evil{EXT_SUFFIX}"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(out), str(source)], check=True, capture_output=True)
    return out


@pytest.fixture(scope="module")
def extension(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return c_extension(tmp_path_factory.mktemp("ext"), "flash_attn_2_cuda")


def stack_env(root: Path, extension: Path) -> Env:
    """flash-attn 2.8.3 with a real flash_attn_2_cuda extension, and transformers (another stack distribution,
    pure Python) to show the rest of the environment is still judged."""
    fa = build_wheel(root / "wheels", "flash_attn", "2.8.3",
                     {"flash_attn/__init__.py": '__version__ = "2.8.3"\n', EXTENSION: extension.read_bytes()},
                     tag=f"{PY_TAG}-{PY_TAG}-linux_x86_64")
    other = build_wheel(root / "wheels", "transformers", "4.57.0", {"transformers/__init__.py": ""})
    env = make_venv(root)
    install(env, fa, other, installer="uv")
    return env


def run(doctor: Doctor, env: Env, *extra: str) -> tuple[dict, float]:
    started = time.monotonic()
    report, proc = doctor.report("--python", str(env.python), *RUN, *extra, timeout=200)
    elapsed = time.monotonic() - started
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert elapsed < BOUND_S, f"took {elapsed:.1f} s"
    stack = finding(report, "distributions.stack")
    assert "transformers 4.57.0" in stack["title"], stack["title"]
    assert not any(f["id"] == "doctor.collector-failed" for f in findings_of(report))
    return report, elapsed


def append_record_line(env: Env, line: str) -> int:
    """Append one row to flash-attn's RECORD; its 1-based line number."""
    record = dist_info(env, "flash-attn") / "RECORD"
    text = record.read_text()
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow([line, "sha256=AAAA", "16"])
    record.write_text(text + buffer.getvalue())
    return len((text + buffer.getvalue()).splitlines())


def make_hostile(path: Path, how: str) -> None:
    path.unlink()
    if how == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")


@pytest.mark.parametrize("how", ["fifo", "devzero"])
@pytest.mark.parametrize("what", ["extension", "RECORD", "METADATA"])
def test_a_fifo_or_dev_zero_link_is_a_finding_naming_it_and_the_python_layer_still_runs(
    doctor: Doctor, tmp_path: Path, extension: Path, what: str, how: str
) -> None:
    env = stack_env(tmp_path, extension)
    path = {"extension": env.site_packages / EXTENSION,
            "RECORD": dist_info(env, "flash-attn") / "RECORD",
            "METADATA": dist_info(env, "flash-attn") / "METADATA"}[what]
    make_hostile(path, how)
    report, _ = run(doctor, env)
    if what == "extension" and how == "fifo":
        odd = finding(report, "distributions.file-not-regular")
        assert EXTENSION in odd["title"] and "a FIFO" in odd["title"]
    elif what == "extension":
        escape = finding(report, "distributions.record-escapes")
        assert EXTENSION in escape["title"] and "/dev/zero" in escape["title"]
        assert escape["status"] == "fail"
    else:
        code = "distributions.record-broken" if what == "RECORD" else "distributions.metadata-broken"
        broken = finding(report, code)
        assert str(path) in broken["title"]
        assert ("a FIFO" if how == "fifo" else "/dev/zero") in broken["title"]
    libraries = report_section(report, "arch_coverage")["libraries"]
    assert all(lib["file"] != str(path) for lib in libraries)


def report_section(report: dict, name: str) -> dict:
    for check in report["checks"]:
        if name in (check.get("facts") or {}):
            return check["facts"][name]
    raise AssertionError(f"no {name} facts")


def test_a_record_line_pointing_at_dev_zero_is_a_finding_naming_the_line(
    doctor: Doctor, tmp_path: Path, extension: Path
) -> None:
    env = stack_env(tmp_path, extension)
    up = "../" * len(env.site_packages.parts)  # from flash_attn/ to the root ("/.." stays "/"): the real /dev/zero
    line = append_record_line(env, f"flash_attn/{up}dev/zero")
    report, _ = run(doctor, env, "--verify-hashes")
    escape = finding(report, "distributions.record-escapes")
    assert escape["status"] == "fail"
    assert f"line {line}" in escape["title"] and "/dev/zero" in escape["title"]
    assert str(dist_info(env, "flash-attn") / "RECORD") in escape["title"]
    assert escape["evidence"]["lines"][0]["line"] == line


def test_a_record_line_to_a_library_outside_the_environment_is_never_loaded(
    doctor: Doctor, tmp_path: Path, extension: Path
) -> None:
    env = stack_env(tmp_path / "inside", extension)
    marker = tmp_path / "constructor-ran"
    evil = constructor_library(tmp_path / "outside", marker)
    rel = "flash_attn/../" + os.path.relpath(evil, env.site_packages)
    assert ".." in rel and not (env.site_packages / rel).resolve().is_relative_to(env.root)
    line = append_record_line(env, rel)
    report, _ = run(doctor, env)
    assert not marker.exists(), "the library's constructor ran: the doctor loaded a file outside the environment"
    escape = finding(report, "distributions.record-escapes")
    assert f"line {line}" in escape["title"] and rel in escape["title"] and str(evil) in escape["title"]
    assert escape["evidence"]["lines"][0]["resolves_to"] == str(evil)
    # The real extension is still loaded and judged.
    assert "flash_attn_2_cuda" in finding(report, "extensions.ok")["title"]
    files = [lib["file"] for lib in report_section(report, "arch_coverage")["libraries"]]
    assert str(evil) not in files and str(env.site_packages / EXTENSION) in files


@pytest.mark.parametrize("in_record", [True, False], ids=["listed-in-record", "not-in-record"])
def test_an_extension_symlinked_to_a_library_outside_the_environment_is_never_loaded(
    doctor: Doctor, tmp_path: Path, extension: Path, in_record: bool
) -> None:
    """flash_attn_2_cuda in site-packages is a symlink to a library outside every root of the environment. The
    import system finds it under its extension name; the doctor resolves it and never loads it (its constructor
    would run), whether RECORD lists the name or not."""
    env = stack_env(tmp_path / "inside", extension)
    marker = tmp_path / "constructor-ran"
    evil = constructor_library(tmp_path / "outside", marker)
    link = env.site_packages / EXTENSION
    link.unlink()
    link.symlink_to(evil)
    if not in_record:
        record = dist_info(env, "flash-attn") / "RECORD"
        record.write_text("".join(line for line in record.read_text().splitlines(keepends=True)
                                  if not line.startswith(EXTENSION + ",")))
    report, _ = run(doctor, env)
    assert not marker.exists(), "the library's constructor ran: the doctor loaded a file outside the environment"
    not_loaded = finding(report, "extensions.not-loaded")
    assert not_loaded["status"] == "fail"
    assert str(link) in not_loaded["title"] and str(evil) in not_loaded["title"], not_loaded["title"]
    files = [lib["file"] for lib in report_section(report, "arch_coverage")["libraries"]]
    assert str(evil) not in files and str(link) not in files
    if in_record:
        escape = finding(report, "distributions.record-escapes")
        assert EXTENSION in escape["title"] and str(evil) in escape["title"]
        assert f"listed in {dist_info(env, 'flash-attn') / 'RECORD'} line" in not_loaded["title"]
    else:
        assert "not in any RECORD" in not_loaded["title"]


def test_a_dotted_extension_symlinked_outside_the_environment_is_never_loaded(
    doctor: Doctor, tmp_path: Path
) -> None:
    """vllm/_C.abi3.so, which no RECORD lists, a symlink to a library outside the environment."""
    vllm = build_wheel(tmp_path / "wheels", "vllm", "0.24.0", {"vllm/__init__.py": ""})
    env = make_venv(tmp_path)
    install(env, vllm, installer="uv")
    marker = tmp_path / "constructor-ran"
    evil = constructor_library(tmp_path / "outside", marker)
    link = env.site_packages / "vllm" / "_C.abi3.so"
    link.symlink_to(evil)
    report, _ = doctor.report("--python", str(env.python), "--only", "distributions,extensions,arch-coverage",
                              "--no-gpu", "--target-arch", "sm_90", *TIMEOUT, timeout=200)
    assert not marker.exists(), "the library's constructor ran: the doctor loaded a file outside the environment"
    not_loaded = finding(report, "extensions.not-loaded")
    assert "vllm._C" in not_loaded["title"] and str(evil) in not_loaded["title"], not_loaded["title"]
    assert "extensions.untracked" not in [f["id"] for f in findings_of(report)]


def test_an_import_never_loads_an_extension_that_resolves_outside_the_environment(
    doctor: Doctor, tmp_path: Path, extension: Path
) -> None:
    """`import flash_attn`, whose __init__ imports flash_attn_2_cuda (as flash-attn 2 does), with that name a
    symlink out of the environment: the import the doctor makes (the rotary import) fails on it, unloaded."""
    fa = build_wheel(tmp_path / "wheels", "flash_attn", "2.8.3",
                     {"flash_attn/__init__.py": '__version__ = "2.8.3"\nimport flash_attn_2_cuda\n',
                      EXTENSION: extension.read_bytes()}, tag=f"{PY_TAG}-{PY_TAG}-linux_x86_64")
    env = make_venv(tmp_path / "inside")
    install(env, fa, installer="uv")
    marker = tmp_path / "constructor-ran"
    evil = constructor_library(tmp_path / "outside", marker)
    link = env.site_packages / EXTENSION
    link.unlink()
    link.symlink_to(evil)
    report, proc = doctor.report("--python", str(env.python), "--only", "imports", "--no-gpu", *TIMEOUT,
                                 timeout=200)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert not marker.exists(), "the library's constructor ran: the doctor loaded a file outside the environment"
    rotary = report_section(report, "rotary_import")
    assert not rotary["ok"] and "outside the environment" in rotary["exception"]["message"], rotary


def test_baseline_save_hashes_no_fifo_and_nothing_outside_the_environment(
    doctor: Doctor, tmp_path: Path, extension: Path
) -> None:
    env = stack_env(tmp_path / "inside", extension)
    marker = tmp_path / "constructor-ran"
    evil = constructor_library(tmp_path / "outside", marker)
    rel = "flash_attn/../" + os.path.relpath(evil, env.site_packages)
    append_record_line(env, rel)
    make_hostile(env.site_packages / EXTENSION, "fifo")
    golden = tmp_path / "golden.json"
    started = time.monotonic()
    proc = doctor("baseline", "save", str(golden), "--python", str(env.python), "--no-gpu", *TIMEOUT, timeout=200)
    assert time.monotonic() - started < BOUND_S
    # Recorded as it is; the save fails because the environment does not pass the doctor.
    assert proc.returncode == 1 and f"baseline written to {golden}" in proc.stdout, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    files = json.loads(golden.read_text())["distributions"]["flash-attn"]["files"]
    assert files[EXTENSION].startswith("not hashed: a FIFO")
    assert files[rel].startswith(f"not hashed: resolves to {evil}")
    assert files["flash_attn/__init__.py"].startswith("sha256=")


def test_an_extension_only_the_import_system_finds_is_loaded_and_judged_and_says_so(
    doctor: Doctor, tmp_path: Path
) -> None:
    """A flash_attn_2_cuda built by hand and put on the path with a .pth file, as `setup.py develop` does:
    no RECORD lists it, `import flash_attn_2_cuda` loads it."""
    fa = build_wheel(tmp_path / "wheels", "flash_attn", "2.8.3", {"flash_attn/__init__.py": '__version__ = "2.8.3"\n'})
    env = make_venv(tmp_path)
    install(env, fa, installer="uv")
    build = c_extension(tmp_path / "source-build", "flash_attn_2_cuda")
    (env.site_packages / "develop.pth").write_text(f"{build.parent}\n")
    report, _ = run_only_fa(doctor, env)
    untracked = finding(report, "extensions.untracked")
    assert untracked["status"] == "warn"
    assert "found by the import system, not in any RECORD" in untracked["title"]
    assert str(build) in untracked["title"]
    assert "flash_attn_2_cuda" in finding(report, "extensions.ok")["title"]
    loaded = [i for i in report_section(report, "extensions")["items"] if i["module"] == "flash_attn_2_cuda"]
    assert loaded and loaded[0]["ok"] and loaded[0]["found_by"] == "import-system" and loaded[0]["path"] == str(build)
    scanned = [lib for lib in report_section(report, "arch_coverage")["libraries"] if lib["file"] == str(build)]
    assert scanned and scanned[0]["found_by"] == "import-system" and scanned[0]["error"] is None
    assert scanned[0]["distribution"] == "flash_attn" and scanned[0]["canonical"] == "flash-attn"


def run_only_fa(doctor: Doctor, env: Env, environ: dict[str, str] | None = None) -> tuple[dict, float]:
    started = time.monotonic()
    report, proc = doctor.report("--python", str(env.python), *RUN, timeout=200, env=environ)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return report, time.monotonic() - started


def test_an_extension_on_pythonpath_that_shadows_the_recorded_one_is_judged_and_named(
    doctor: Doctor, tmp_path: Path, extension: Path
) -> None:
    env = stack_env(tmp_path, extension)
    shadow = c_extension(tmp_path / "copied-build", "flash_attn_2_cuda")
    # The doctor's own PYTHONPATH (its source) stays on, after the copied build.
    pythonpath = os.pathsep.join(p for p in (str(shadow.parent), os.environ.get("PYTHONPATH", "")) if p)
    report, _ = run_only_fa(doctor, env, {"PYTHONPATH": pythonpath})
    untracked = finding(report, "extensions.untracked")
    assert str(shadow) in untracked["title"]
    assert f"shadows {env.site_packages / EXTENSION}" in untracked["detail"]
    items = {(i["module"], i["found_by"]): i for i in report_section(report, "extensions")["items"]}
    assert items[("flash_attn_2_cuda", "record")]["ok"] and items[("flash_attn_2_cuda", "import-system")]["ok"]
    files = {lib["file"]: lib for lib in report_section(report, "arch_coverage")["libraries"]}
    assert files[str(shadow)]["found_by"] == "import-system"
    assert files[str(env.site_packages / EXTENSION)]["found_by"] == "record"


def test_a_dotted_extension_is_found_without_importing_its_package(doctor: Doctor, tmp_path: Path) -> None:
    """vllm._C copied into an installed vllm whose __init__ leaves a mark: the spec is resolved level by level
    and the file loaded on its own, so vllm/__init__.py (which imports torch in the real one) never runs."""
    marker = tmp_path / "vllm-init-ran"
    vllm = build_wheel(tmp_path / "wheels", "vllm", "0.24.0",
                       {"vllm/__init__.py": f"open({str(marker)!r}, 'w').write('imported')\n"})
    env = make_venv(tmp_path)
    install(env, vllm, installer="uv")
    ext = c_extension(tmp_path / "build", "_C")
    shutil.copy(ext, env.site_packages / "vllm" / ext.name)
    report, _ = doctor.report("--python", str(env.python), "--only", "distributions,extensions,arch-coverage",
                                 "--no-gpu", "--target-arch", "sm_90", *TIMEOUT, timeout=200)
    assert not marker.exists(), "vllm/__init__.py ran"
    untracked = finding(report, "extensions.untracked")
    assert "vllm._C" in untracked["title"] and str(env.site_packages / "vllm" / ext.name) in untracked["title"]
    assert untracked["evidence"]["extensions"][0]["distribution"] == "vllm"
    assert "vllm._C" in finding(report, "extensions.ok")["title"]


def test_console_scripts_of_a_pip_target_install_are_no_escape(doctor: Doctor, tmp_path: Path) -> None:
    """`pip install --target DIR` records console scripts as `../../bin/NAME` from DIR, a path that leads out of
    the environment to nothing (seen on the GPU machine with the doctor's own wheel): never opened, no finding."""
    env = make_venv(tmp_path)
    wheel = build_wheel(tmp_path / "wheels", "tool-with-script", "1.0", {"tool_with_script/__init__.py": "def main():\n    pass\n"},
                        entry_points={"console_scripts": {"tool-with-script": "tool_with_script:main"}})
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(target),
                    str(wheel)], check=True, capture_output=True)
    record = next(target.glob("tool_with_script-*.dist-info")) / "RECORD"
    escaping = [line for line in record.read_text().splitlines() if line.startswith("../")]
    assert escaping and not (target / escaping[0].split(",")[0]).exists()  # pip wrote the line, to nowhere
    (env.site_packages / "zz-target.pth").write_text(f"{target}\n")
    report, _ = doctor.report("--python", str(env.python), *RUN)
    assert "distributions.record-escapes" not in [f["id"] for f in findings_of(report)]


def test_the_shared_process_never_preloads_a_torch_whose_extension_resolves_outside_the_environment(
    doctor: Doctor, tmp_path: Path
) -> None:
    """The run's shared target process imports torch once, before any job, when a stack package that loads
    torch is installed. A `torch` whose `_C` extension is a symlink out of the environment must not be loaded
    there either: its constructor never runs."""
    marker = tmp_path / "constructor-ran"
    evil = constructor_library(tmp_path / "outside", marker)
    torch_c = f"torch/_C{EXT_SUFFIX}"
    wheel = build_wheel(tmp_path / "wheels", "torch", "2.13.0",
                        {"torch/__init__.py": "from torch import _C\n", torch_c: b"placeholder"},
                        tag=f"{PY_TAG}-{PY_TAG}-linux_x86_64")
    fa = build_wheel(tmp_path / "wheels", "flash_attn", "2.8.3", {"flash_attn/__init__.py": "import torch\n"})
    env = make_venv(tmp_path / "inside")
    install(env, wheel, fa, installer="uv")
    link = env.site_packages / torch_c
    link.unlink()
    link.symlink_to(evil)
    _, proc = doctor.report("--python", str(env.python), "--only", "imports", "--no-gpu", *TIMEOUT,
                                 timeout=200)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert not marker.exists(), "the library's constructor ran: the shared process loaded a file outside the environment"


def test_an_extension_the_running_code_loads_by_its_own_path_is_loaded(
    doctor: Doctor, tmp_path: Path,
) -> None:
    """As Triton loads the launcher it compiled into its cache (~/.triton/cache/.../cuda_utils.so), outside
    every root, by an explicit path: no name found it, so the guard lets it load (the H200's kernel and rotary
    probes failed on this before). A name that finds a link out of the environment stays refused (above)."""
    marker = tmp_path / "loaded"
    cache = tmp_path / "home" / ".triton" / "cache" / "XU5D"
    c_extension(cache, "cuda_utils", body=(
        "#include <stdio.h>\n__attribute__((constructor)) static void ran(void) {\n"
        f'  FILE *f = fopen("{marker}", "w"); if (f) {{ fputs("loaded", f); fclose(f); }}\n}}\n'))
    loader = ("import importlib.util\n"
              f"spec = importlib.util.spec_from_file_location('cuda_utils', {str(cache / ('cuda_utils' + EXT_SUFFIX))!r})\n"
              "module = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(module)\n")
    fa = build_wheel(tmp_path / "wheels", "flash_attn", "2.8.3",
                     {"flash_attn/__init__.py": '__version__ = "2.8.3"\n' + loader}, tag="py3-none-any")
    env = make_venv(tmp_path / "inside")
    install(env, fa)
    report, proc = doctor.report("--python", str(env.python), "--only", "imports", "--no-gpu", *TIMEOUT,
                                 timeout=200)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    rotary = report_section(report, "rotary_import")
    assert "outside the environment" not in json.dumps(rotary), rotary
    assert marker.read_text() == "loaded"
