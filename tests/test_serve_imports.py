"""vLLM's requirements judged by what `vllm serve` imports on its way up (facts.python.vllm_serve_path).

A requirement of vLLM that is missing (or at another version) fails the gate when the installed vLLM's own files
import it on the way up; otherwise it is a warning in pip check's words that names what needs it. Tested on the
real vLLM 0.20.1 wheel: against what the engine did on an H200 (fixtures/engine/01-healthy.json: it served with
nineteen requirements missing or at other versions), against what a real import does with one package taken away
(the cached venv where vLLM 0.20.1 imports on this CPU machine), and on environments built with real wheels.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from conftest import Doctor, findings_of
from realenv import _host_pip, _locked, _run, cache_dir, install, make_venv
from stacks import add_to_path, vllm_python, vllm_site

from dflash_doctor.facts.python.environment_shapes import Distributions
from dflash_doctor.facts.python.vllm_scan import scan_package
from dflash_doctor.facts.python.vllm_serve_path import (
    _module_level_text,
    import_names,
    imported_elsewhere,
    matches,
    scan_serve_path,
    unmet_requirements,
)
from dflash_doctor.facts.sourcefiles import SourceFiles
from dflash_doctor.knowledge.vllm_imports import SERVE_LOADED_BY_NAME

ROOT = Path(__file__).resolve().parent.parent
ENTRY = "vllm.entrypoints.cli.main:main"
BY_NAME = [m for m, _ in SERVE_LOADED_BY_NAME.value]


def pypi_wheel(spec: str) -> Path:
    """A real wheel from PyPI (no dependencies), downloaded once into the test cache."""
    dest = cache_dir() / "pypi"
    name, _, version = spec.partition("==")
    stem = f"{name.replace('-', '_')}-{version}-"
    with _locked(f"pypi-{name}-{version}"):
        found = sorted(dest.glob(f"{stem}*.whl"), key=lambda p: p.name.lower())
        if not found:
            with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
                _run([*_host_pip(), "download", spec, "--no-deps", "--only-binary", ":all:", "-d", tmp])
                dest.mkdir(exist_ok=True)
                for whl in Path(tmp).glob("*.whl"):
                    os.replace(whl, dest / whl.name)
            found = sorted(p for p in dest.glob("*.whl") if p.name.lower().startswith(stem.lower()))
        return found[0]


def serve_scan(root: Path) -> dict[str, Any]:
    return scan_serve_path(str(root), ENTRY, BY_NAME)


def reach_of(scan: dict[str, Any], name: str) -> str | None:
    order = ("serve", "conditional", "guarded")
    reaches = [e["reach"] for e in scan["imports"] if matches(e["module"], e["names"], name)]
    return min(reaches, key=order.index, default=None)


# ------------------------------------------------------------------------------ the scan of the real wheel


def test_the_scan_of_the_real_vllm_0_20_1_reaches_what_serve_imports_in_under_a_few_seconds() -> None:
    scan = serve_scan(vllm_site("0.20.1") / "vllm")
    assert scan["complete"] and not scan["errors"]
    assert all(r["found"] for r in scan["roots"])
    serve = {e["module"].split(".")[0] for e in scan["imports"] if e["reach"] == "serve"}
    assert {"fastapi", "uvicorn", "torch", "transformers", "zmq", "msgspec", "openai",
            "model_hosting_container_standards"} <= serve
    # a LazyLoader (vllm/utils/import_utils.py) that a dataclass field's annotation reads when the class is made
    llguidance = next(e for e in scan["imports"] if e["module"] == "llguidance")
    assert llguidance["reach"] == "serve"
    assert llguidance["file"] == "vllm/v1/structured_output/backend_guidance.py" and llguidance["line"] == 139
    # vLLM catches these ImportErrors, or imports them under a condition: never a failure
    assert reach_of(scan, "opentelemetry.sdk") == "guarded" and reach_of(scan, "cv2") == "guarded"
    assert reach_of(scan, "vllm_omni") == "conditional"  # main() imports it only under `--omni`
    assert reach_of(scan, "flashinfer") is None and reach_of(scan, "anthropic") is None
    # bounded in time: measured 0.5-0.8 s on the project's 2-core test machine (seconds under a load of 11)
    assert scan["seconds"] < 30, scan["seconds"]


def test_nothing_the_engine_served_without_is_on_the_serve_path() -> None:
    # fixtures/engine/01-healthy.json: vLLM 0.20.1 started and answered on an H200 with these requirements missing
    # (flashinfer-python, compressed-tensors, anthropic, mcp, tilelang, ...) or at other versions (numba, setuptools)
    record = json.loads((ROOT / "fixtures" / "engine" / "01-healthy.json").read_text())
    assert record["engine"]["started"] and record["engine"]["answered"]
    facts = next(c["facts"] for c in record["report"]["checks"] if c["id"] == "distributions")
    dists = Distributions.from_json(facts["distributions"])
    unmet = unmet_requirements(dists, facts["target"]["marker_environment"])
    assert len(unmet) >= 19 and {str(r.name) for r, found in unmet if found is not None} == {"setuptools", "numba"}
    scan = serve_scan(vllm_site("0.20.1") / "vllm")
    on_the_way_up = {str(r.name): [n for n in import_names(r.name, dists) if reach_of(scan, n) == "serve"]
                     for r, _ in unmet}
    assert not any(on_the_way_up.values()), on_the_way_up


# What the real import does with one package taken away (sys.modules[name] = None: `import name` raises
# ModuleNotFoundError), in a fork of one process that imported torch: vLLM's serve modules, as `vllm serve`
# imports them (the console script's module and main()'s imports, the engine client, the GPU worker; not
# vllm.platforms.cuda, which needs libcuda on this machine). The parent also imports the heaviest third-party
# modules on that path, once instead of once per fork, and only when none of them imported a package to be
# taken away: a module imported before the fork can then only make a fork fail more (one that gates an import
# on a package being there, which it was), never hide a failed import.
PRELOAD = ("torch._dynamo", "openai", "transformers", "transformers.modeling_utils", "aiohttp")
HIDE_AND_IMPORT = """
import json, os, sys
import torch
hidden = json.loads(sys.argv[1])
for module in json.loads(sys.argv[3]):
    __import__(module)
pulled = sorted(m for m in sys.modules if m.split(".")[0] in hidden)
assert not pulled, f"the modules imported before the fork imported {pulled}"
out = {}
for name in json.loads(sys.argv[1]):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        sys.modules[name] = None
        message = ""
        try:
            for module in json.loads(sys.argv[2]):
                __import__(module)
        except BaseException as exc:
            message = f"{type(exc).__name__}: {exc}"
        os.write(w, message.encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.waitpid(pid, 0)
    out[name] = data.decode() or None
print("RESULT " + json.dumps(out))
"""
SERVE_MODULES = ["vllm.entrypoints.cli.main", "vllm.entrypoints.cli.benchmark.main", "vllm.entrypoints.cli.collect_env",
                 "vllm.entrypoints.cli.launch", "vllm.entrypoints.cli.openai", "vllm.entrypoints.cli.run_batch",
                 "vllm.entrypoints.cli.serve", "vllm.entrypoints.utils", "vllm.utils.argparse_utils",
                 "vllm.v1.engine.async_llm", "vllm.v1.worker.gpu_worker"]
# vLLM requirements the cached venv leaves out but the serve modules import (the scan says so; the import agrees)
SERVE_EXTRAS = ("llguidance==1.3.0", "xgrammar==0.1.32", "apache-tvm-ffi==0.1.9",
                "model-hosting-container-standards==0.1.13", "jmespath==1.0.1", "supervisor==4.2.5")


def test_the_scan_agrees_with_a_real_import_that_lacks_one_package(tmp_path: Path) -> None:
    python = vllm_python("0.20.1")
    extras = tmp_path / "extras"
    _run([*_host_pip(), "install", "--quiet", "--no-deps", "--no-index", "--target", extras,
          *(pypi_wheel(spec) for spec in SERVE_EXTRAS)])
    purelib = subprocess.run([str(python), "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    scan = serve_scan(Path(purelib) / "vllm")
    # a sample (each costs a fork that imports vLLM's serve modules); every vLLM requirement was compared once, by hand
    fatal = ["fastapi", "llguidance"]  # each costs a fork importing vLLM's serve modules: CI keeps the sample small
    harmless = ["blake3", "tiktoken"]
    assert all(reach_of(scan, n) == "serve" for n in fatal), [(n, reach_of(scan, n)) for n in fatal]
    assert all(reach_of(scan, n) != "serve" for n in harmless), [(n, reach_of(scan, n)) for n in harmless]
    # and one that vLLM's files never import, but torch.utils.cpp_extension does (IMPORTED_THROUGH)
    assert reach_of(scan, "setuptools") is None and reach_of(scan, "torch.utils.cpp_extension") == "serve"
    proc = subprocess.run([str(python), "-c", HIDE_AND_IMPORT, json.dumps([*fatal, *harmless, "setuptools"]),
                           json.dumps(SERVE_MODULES), json.dumps(PRELOAD)],
                          capture_output=True, text=True, timeout=900, check=True,
                          env={**os.environ, "PYTHONPATH": str(extras)})
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    real = json.loads(line.removeprefix("RESULT "))
    assert {n: real[n] for n in harmless} == dict.fromkeys(harmless), real
    assert all(real[n] and "ModuleNotFoundError" in real[n] for n in [*fatal, "setuptools"]), real


# ------------------------------------------------------------------------------ the doctor on real environments


def by_requirement(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    from packaging.requirements import Requirement

    return {str(Requirement(f["evidence"]["requirement"]).name): f for f in findings_of(report)
            if f["id"] in ("distributions.requirement-missing", "distributions.requirement-unmet")
            and f["evidence"]["requirer"] == "vllm"}


def test_a_vllm_requirement_serve_imports_fails_one_it_does_not_warns_naming_what_needs_it(
        doctor: Doctor, tmp_path: Path) -> None:
    env = make_venv(tmp_path)
    add_to_path(env, vllm_site("0.20.1"))
    # real wheels beside vLLM (--no-deps): prometheus-client and lark at versions vLLM does not accept, diskcache
    # at the one it pins; everything else vLLM requires is missing
    install(env, pypi_wheel("prometheus-client==0.17.1"), pypi_wheel("lark==1.1.9"), pypi_wheel("diskcache==5.6.3"))
    report, proc = doctor.report("--python", str(env.python), "--no-gpu", "--only", "distributions")
    assert proc.returncode == 1
    found = by_requirement(report)
    assert "diskcache" not in found
    fastapi = found["fastapi[standard]"] if "fastapi[standard]" in found else found["fastapi"]
    assert fastapi["status"] == "fail" and fastapi["id"] == "distributions.requirement-missing"
    assert fastapi["title"] == "vllm 0.20.1 requires fastapi>=0.115.0, which is not installed"
    assert "`vllm serve` imports fastapi" in fastapi["detail"] and "reached from vllm." in fastapi["detail"]
    prometheus = found["prometheus_client"]
    assert prometheus["status"] == "fail" and prometheus["id"] == "distributions.requirement-unmet"
    assert prometheus["title"] == "vllm 0.20.1 requires prometheus_client>=0.18.0, found 0.17.1"
    lark = found["lark"]
    assert lark["status"] == "warn" and lark["id"] == "distributions.requirement-unmet"
    # (vLLM requires lark, but its source never imports it by that name)
    assert lark["title"] == ("vllm 0.20.1 requires lark==1.2.2, found 1.1.9; `vllm serve` does not import it on the "
                             "serve path; no module of vLLM imports lark")
    flashinfer = found["flashinfer-python"]
    assert flashinfer["status"] == "warn"
    assert "it is needed for " in flashinfer["title"] and "vllm/v1/attention/backends/flashinfer.py" in flashinfer["title"]
    mcp = found["mcp"]
    assert mcp["status"] == "warn" and "vllm/entrypoints/mcp/tool_server.py" in mcp["title"]
    anthropic = found["anthropic"]
    assert anthropic["status"] == "warn" and anthropic["title"].endswith("no module of vLLM imports anthropic")
    telemetry = found["opentelemetry-sdk"]
    assert telemetry["status"] == "warn" and "inside a try whose except catches the ImportError" in telemetry["title"]
    assert found["torch"]["status"] == "fail" and found["transformers"]["status"] == "fail"
    # the facts are saved: the report judges again to the same verdicts with nothing but itself
    [check] = [c for c in report["checks"] if c["id"] == "distributions"]
    assert check["facts"]["vllm_serve_imports"]["complete"] is True
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps(report))
    again, proc_again = doctor.report("judge", str(saved))
    assert proc_again.returncode == 1
    assert {n: f["status"] for n, f in by_requirement(again).items()} == {n: f["status"] for n, f in found.items()}
    # The same facts on Python 3.12, where vLLM 0.20.1 requires setuptools (`python_version > "3.11"`): vLLM's own
    # files never import it, torch.utils.cpp_extension does, and vLLM imports that on its way up
    # (knowledge.vllm_imports.IMPORTED_THROUGH; the real import without setuptools fails).
    assert "setuptools" not in found
    check["facts"]["target"]["marker_environment"].update(python_version="3.12", python_full_version="3.12.3")
    saved.write_text(json.dumps(report))
    on_312, _ = doctor.report("judge", str(saved))
    setuptools = by_requirement(on_312)["setuptools"]
    assert setuptools["status"] == "fail" and setuptools["title"].startswith("vllm 0.20.1 requires setuptools<81.0.0,")
    assert "`vllm serve` imports torch.utils.cpp_extension on its way up, which imports setuptools" in setuptools["detail"]


def test_a_report_saved_without_the_scan_judges_vllms_requirements_as_before(doctor: Doctor, tmp_path: Path) -> None:
    # Reports saved before the scan existed (the engine recordings): vLLM's requirements on the stack are judged as
    # they were, flashinfer-python by knowledge.stack.OPTIONAL_AT_SERVE, the others not at all.
    record = json.loads((ROOT / "fixtures" / "engine" / "05-batched-tokens-too-small.json").read_text())
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps(record["report"]))
    judged, _ = doctor.report("judge", str(saved))
    found = by_requirement(judged)
    assert set(found) == {"flashinfer-python"} and found["flashinfer-python"]["status"] == "warn"


# ------------------------------------------------------------------------------ reading a module


@pytest.mark.parametrize(("source", "cut"), [
    # a function's body is blanked, its lines kept
    ("import a\ndef f():\n    import b\n    return b\nimport c\n", "import a\n\n\n\nimport c\n"),
    # a docstring whose lines start at column 0 inside a function: the cut is in doubt, the whole text is parsed
    ('def f():\n    """Example:\nimport torch\n    """\n', None),
    # a class with a class-level import keeps its body
    ("class A:\n    import b\n    def f(self):\n        pass\n", "class A:\n    import b\n    def f(self):\n        pass\n"),
])
def test_only_function_bodies_are_cut_and_a_doubtful_cut_reads_the_whole_file(source: str, cut: str | None) -> None:
    assert _module_level_text(source) == cut


@pytest.mark.parametrize("shared", [False, True])
def test_a_fifo_or_a_symlink_out_named_like_a_module_on_the_way_up_is_never_opened(tmp_path: Path, shared: bool) -> None:
    """Also when the run's reader (shared) has already read the package for the kernel-import scan, which reads
    without the environment's roots: each read keeps its own rules."""
    site = tmp_path / "site"
    package = site / "vllm"
    (package / "entrypoints" / "cli").mkdir(parents=True)
    for init in (package, package / "entrypoints", package / "entrypoints" / "cli"):
        (init / "__init__.py").write_text("")
    (package / "entrypoints" / "cli" / "main.py").write_text("import fastapi\nfrom vllm import stuck, away\n\n"
                                                             "def main():\n    import vllm.entrypoints.cli.serve\n")
    outside = tmp_path / "outside.py"
    outside.write_text("import secret_package\n")
    (package / "away.py").symlink_to(outside)
    (package / "entrypoints" / "cli" / "serve.py").write_text("try:\n    import flashinfer\nexcept ImportError:\n"
                                                              "    pass\n")
    os.mkfifo(package / "stuck.py")
    files = SourceFiles() if shared else None
    if files is not None:
        kernels = scan_package(str(package), ["secret_package", "flashinfer"], files=files)
        assert {site["file"] for site in kernels["sites"]} == {"vllm/away.py", "vllm/entrypoints/cli/serve.py"}
        assert [e["file"] for e in kernels["errors"]] == [str(package / "stuck.py")]
    scan = scan_serve_path(str(package), ENTRY, BY_NAME, budget_s=30, roots=[str(site)], files=files)
    errors = {e["file"]: e["error"] for e in scan["errors"]}
    assert scan["complete"] and set(errors) == {str(package / "stuck.py"), str(package / "away.py")}
    assert "a FIFO, not a regular file" in errors[str(package / "stuck.py")]
    assert "outside the environment" in errors[str(package / "away.py")]
    assert {e["module"]: e["reach"] for e in scan["imports"]} == {"fastapi": "serve", "flashinfer": "guarded"}
    elsewhere = imported_elsewhere(str(package), ["secret_package", "flashinfer"], roots=[str(site)], files=files)
    assert elsewhere["names"]["secret_package"]["files"] == 0  # away.py is never opened for it
    assert elsewhere["names"]["flashinfer"]["files"] == 1


def test_a_vllm_requirement_that_a_package_on_the_way_up_requires_too_fails(doctor: Doctor, tmp_path: Path) -> None:
    # vLLM's own files import opentelemetry only inside a try (vllm/tracing/otel.py); fastapi 0.165.0, which vllm
    # serve imports on its way up, requires opentelemetry-api and imports it at module level (fastapi/telemetry):
    # the real import of vLLM's serve modules without it fails (compared by hand in the cached venv)
    env = make_venv(tmp_path)
    add_to_path(env, vllm_site("0.20.1"))
    install(env, pypi_wheel("fastapi==0.165.0"))
    report, _ = doctor.report("--python", str(env.python), "--no-gpu", "--only", "distributions")
    found = by_requirement(report)
    api = found["opentelemetry-api"]
    assert api["status"] == "fail" and api["title"] == "vllm 0.20.1 requires opentelemetry-api>=1.27.0, which is not installed"
    assert "and fastapi 0.165.0 requires opentelemetry-api too" in api["detail"]
    # the SDK, which fastapi does not require, stays a warning: vLLM catches its ImportError
    assert found["opentelemetry-sdk"]["status"] == "warn"


@pytest.mark.parametrize("kind", ["venv", "uv"])
def test_flashinfer_missing_fails_where_the_sampler_imports_it_and_the_pasted_variable_clears_it(
        doctor: Doctor, tmp_path: Path, kind: str) -> None:
    """vLLM 0.24.0 (the real wheel, beside a venv made by pip's venv and by uv) without flashinfer-python: its sampler
    imports FlashInfer at engine start (knowledge.vllm_imports.IMPORTED_AT_ENGINE_START; the engine died so on
    0.26.0, fixtures/engine/vllm-0.26.0/20-flashinfer-missing.json). The fix the doctor offers for serving without
    it, pasted into bash as it is shown, then the doctor again: the failure is gone (a warning stays: the
    requirement is still unmet)."""
    env = make_venv(tmp_path, kind, name=kind)
    add_to_path(env, vllm_site("0.24.0"))
    argv = ["--python", str(env.python), "--no-gpu", "--only", "distributions"]
    report, _ = doctor.report(*argv)
    flashinfer = by_requirement(report)["flashinfer-python"]
    assert flashinfer["status"] == "fail" and flashinfer["id"] == "distributions.requirement-missing"
    assert "No module named 'flashinfer'" in flashinfer["detail"], flashinfer["detail"]
    [fix] = [r["command"] for r in flashinfer["remediation"] if "VLLM_USE_FLASHINFER_SAMPLER" in r["command"]]
    environ = {k: v for k, v in os.environ.items() if k != "VLLM_USE_FLASHINFER_SAMPLER"}
    pasted = f"{fix} && {shlex.join([sys.executable, '-m', 'dflash_doctor', *argv, '--json', '-'])}"
    proc = subprocess.run(["bash", "-c", pasted], capture_output=True, text=True, env=environ, cwd=tmp_path,
                          timeout=300, check=False)
    again = by_requirement(json.loads(proc.stdout))["flashinfer-python"]
    assert again["status"] == "warn", again["title"]


@pytest.mark.parametrize("version", ["0.20.1", "0.34.0"])
def test_the_kernel_import_scan_finds_on_the_cut_text_what_it_finds_parsing_each_file_whole(
    version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The kernel-import scan parses what runs at module level and the top-level blocks that name a kernel package:
    # on the real vLLM, every site, its guards and its scope are those of a parse of each file whole.
    from dflash_doctor.facts.python import vllm_scan
    from dflash_doctor.knowledge.vllm_imports import EXTERNAL_KERNEL_MODULES

    package = str(vllm_site(version) / "vllm")
    cut = scan_package(package, EXTERNAL_KERNEL_MODULES.value)
    monkeypatch.setattr(vllm_scan, "without_blocks", lambda _text, keep, members=False: None)  # the whole file
    whole = scan_package(package, EXTERNAL_KERNEL_MODULES.value)
    assert cut["sites"] and cut == whole


MEMBERS = '''\
import os


class Backend:
    """A backend.

    def not_a_method(): a line of the docstring, at the body's indentation
    """
    name = "flash_attn"

    @staticmethod
    @functools.cache
    def available():
        try:
            import flash_attn
        except ImportError:
            return False
        return True

    @property
    def size(self):
        return 1

    def forward(self, x):
        return x

    class Inner:
        def f(self):
            return importlib.import_module("flashinfer.sampling")

    def g(self):
        return 2


class Plain:
    def a(self):
        return 1


@register("flash_attn")
class Decorated:
    x = 1

    def h(self):
        from flashinfer import norm
        return norm
'''


@pytest.mark.parametrize("source", [
    MEMBERS,
    MEMBERS.replace("    @staticmethod\n", "    @staticmethod  # flash_attn\n"),  # a decorator that names one
    MEMBERS.replace("        return 2\n", "        return \"it's \'\'\' here\"\n"),  # a member with odd triple quotes
], ids=["members", "a-decorator-naming-a-package", "odd-triple-quotes"])
def test_the_kernel_import_scan_cuts_a_kept_classs_other_members_and_finds_what_a_whole_parse_finds(
    source: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # In a class that names a kernel package, the methods (with their decorators) and nested classes that name none
    # are cut to a `pass` each, line numbers kept; the sites, their guards and scopes are those of the whole file.
    from dflash_doctor.facts.pysource import without_blocks
    from dflash_doctor.facts.python import vllm_scan

    modules = ["flash_attn", "flashinfer"]
    words = (*modules, "import_module(", "__import__(")
    cut = without_blocks(source, keep=lambda block: any(w in block for w in words), members=True)
    found = vllm_scan.scan_source(source, "mod.py", modules)
    monkeypatch.setattr(vllm_scan, "without_blocks", lambda _text, keep, members=False: None)  # the whole file
    whole = vllm_scan.scan_source(source, "mod.py", modules)
    assert [(s["line"], s["where"], s["scope"]) for s in whole] == [
        (15, "Backend.available", "function"), (29, "Backend.Inner.f", "function"), (45, "Decorated.h", "function")]
    assert found == whole
    if "\' here" in source:  # a stretch to cut holds an odd number of triple quotes: the whole file is parsed
        assert cut is None
        return
    assert cut is not None and cut.count("\n") == source.count("\n")
    assert "def size" not in cut and "def forward" not in cut and "def g" not in cut and "class Plain" not in cut
    assert "def available" in cut and "@functools.cache" in cut and "class Inner" in cut and "def h" in cut


# Sources where a cut could go wrong (each parses whole): the scan finds what a parse of the whole file finds.
DOUBTFUL = {
    "a-header-on-two-lines": (
        "class A(\n        Base):\n    def f(self):\n        @self.hook\n        def _hook(x):\n"
        "            return x\n\n"
        "    @staticmethod\n    def available():\n        try:\n            import flash_attn\n"
        "        except ImportError:\n            return False\n"),
    "crlf-and-a-blank-first-line": (
        "class A:\r\n        \r\n    x = 'flash_attn'\r\n    def f(self):\r\n        def helper():\r\n"
        "            return 1\r\n    def g(self):\r\n        import flash_attn\r\n"),
    "a-form-feed-in-the-first-line": (
        "class A:\n        \x0c    x = 'flash_attn'\n    def f(self):\n        def helper():\n            return 1\n"
        "    def g(self):\n        import flash_attn\n"),
    "a-line-continued-onto-the-body": (
        "class A:\n    x = 'flash_attn'\n    def f(self):\n        return 1 + \\\n    __import__('flash_attn')\n"),
    "a-string-continued-onto-the-body": (
        "class A:\n    x = 'flash_attn'\n    def f(self):\n        s = 'abc\\\n    def g(self): import flash_attn #'\n"
        "    y = 1\n"),
    "triple-quotes-of-both-kinds": (
        "class A:\n    x = 'flash_attn'\n    def f(self):\n        s = \"\"\"it's \'\'\'\n"
        "    def g(self): import flash_attn #\"\"\"\n    y = 1\n"),
    "a-triple-quote-in-a-comment": (
        "class A:\n    x = 'flash_attn'\n    def f(self):\n        # \"\"\"\n        s = \"\"\"\n"
        "    def g(self): import flash_attn #\"\"\"\n    y = 1\n"),
    "a-lone-carriage-return": (
        "class A:\n    x = 'flash_attn'\n    def f(self):\r        return 1\n    def g(self):\n"
        "        from flashinfer import norm\n"),
    "a-name-in-nfkc-form": "class A:\n    x = 1\n    def f(self):\n        import \ufb02ash_attn\n",
}


@pytest.mark.parametrize("source", list(DOUBTFUL.values()), ids=list(DOUBTFUL))
def test_a_cut_in_doubt_is_not_made_and_the_sites_are_those_of_the_whole_file(
    source: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dflash_doctor.facts.pysource import parse_module
    from dflash_doctor.facts.python import vllm_scan

    parse_module(source)
    modules = ["flash_attn", "flashinfer"]
    found = vllm_scan.scan_source(source, "mod.py", modules)
    monkeypatch.setattr(vllm_scan, "without_blocks", lambda _text, keep, members=False: None)  # the whole file
    assert found == vllm_scan.scan_source(source, "mod.py", modules)



@pytest.mark.parametrize(("names", "source"), [
    (["xgrammar"], "import xgrammar\n"),  # the first line
    (["xgrammar", "gguf"], "x = 1\ndef f():\n    import gguf\n\nfrom xgrammar import y\nimport gguf\n"),
    (["cbor2"], "# import cbor2\ns = 'import cbor2'\n"),  # no import line: not a site
])
def test_where_vllm_imports_a_name_is_found_on_its_first_line_and_after_any_newline(
    tmp_path: Path, names: list[str], source: str
) -> None:
    package = tmp_path / "vllm"
    package.mkdir()
    (package / "mod.py").write_text(source)
    found = imported_elsewhere(str(package), names)["names"]
    lines = source.split("\n")
    for name in names:
        expected = [i + 1 for i, line in enumerate(lines) if line.lstrip().startswith((f"import {name}", f"from {name}"))]
        module_level = [n for n in expected if not lines[n - 1].startswith((" ", "\t"))]
        first = (module_level or expected or [None])[0]
        assert [s["line"] for s in found[name]["sites"]] == ([first] if first else []), (name, found)
