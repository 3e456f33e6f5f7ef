"""Python source the parser refuses, and parses that never overlap (facts.pysource).

A vLLM file that CPython's parser refuses, in any of its ways (SyntaxError, a null byte's ValueError,
RecursionError, or the MemoryError it gives for an expression nested thousands deep), is a fact about that file:
the scan goes on through the rest of vLLM, and the check says what it could not read. A collector that fails is
an error finding, never a quiet pass. Every parse in the package goes through one helper that holds a lock:
CPython 3.11's AST constructor fails when two threads parse at once (cpython#106905).
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import Doctor, findings_of
from realenv import make_venv
from stacks import add_to_path, vllm_site

from dflash_doctor.facts.pysource import SourceError, parse_expression, parse_module
from dflash_doctor.facts.python.vllm_scan import scan_package
from dflash_doctor.facts.python.vllm_serve_path import scan_serve_path
from dflash_doctor.knowledge.vllm_imports import SERVE_LOADED_BY_NAME

ROOT = Path(__file__).resolve().parent.parent
ENTRY = "vllm.entrypoints.cli.main:main"

# What CPython 3.11's parser answers each with (checked below, so that the tests keep meaning it on a later
# Python): `x = ------...1` with 6,000 signs is a MemoryError, with 3,000 a RecursionError; 201 nested
# parentheses are "too many nested parentheses"; a null byte is a SyntaxError (a ValueError before 3.11.4).
REFUSED = {
    "memory": "x = " + "-" * 6000 + "1\n",
    "recursion": "x = " + "-" * 3000 + "1\n",
    "parentheses": "x = " + "(" * 201 + "1" + ")" * 201 + "\n",
    "null-byte": "x = 1\0\n",
    "indentation": "".join(" " * i + "if x:\n" for i in range(101)) + " " * 101 + "pass\n",
}


@pytest.mark.parametrize("kind", sorted(REFUSED))
def test_every_refusal_of_the_parser_is_one_source_error(kind: str) -> None:
    with pytest.raises(SourceError) as caught:
        parse_module(REFUSED[kind], "bad.py")
    assert "\n" not in str(caught.value) and str(caught.value)
    if kind == "memory":
        with pytest.raises(MemoryError):  # what the bare parser does with it: the reason for the helper
            ast.parse(REFUSED[kind])
        assert str(caught.value).startswith("MemoryError")


def test_parses_from_many_threads_at_once_all_succeed() -> None:
    # Deep expressions, parsed by 16 threads together: each gets its own tree, none a SystemError.
    sources = [f"y{i} = " + "(" * 150 + "-" * 900 + str(i) + ")" * 150 for i in range(16)]
    wanted = [ast.dump(ast.parse(s)) for s in sources]
    results: dict[int, str] = {}
    failures: list[BaseException] = []
    start = threading.Barrier(len(sources))

    def parse(i: int) -> None:
        start.wait()
        try:
            for _ in range(5):
                results[i] = ast.dump(parse_module(sources[i]))
                parse_expression(sources[i].split(" = ", 1)[1])
        except BaseException as exc:  # noqa: BLE001 - every failure is the test's
            failures.append(exc)

    threads = [threading.Thread(target=parse, args=(i,)) for i in range(len(sources))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures
    assert [results[i] for i in range(len(sources))] == wanted


def test_every_parse_of_python_source_in_the_package_goes_through_the_helper() -> None:
    # ast.parse and compile(...) are the parser's doors (ast.literal_eval of a text calls ast.parse: the package
    # hands it parse_expression's tree, or a node of one). Only facts/pysource.py itself calls ast.parse; the
    # probes run in the target's own interpreter, one thread, and import nothing from the package.
    package = ROOT / "dflash_doctor"
    door = re.compile(r"\bast\.parse\(|(?<![\w.])compile\(")
    offenders = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        if rel == "facts/pysource.py" or rel.startswith("facts/probes/"):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if door.search(line) and not line.lstrip().startswith("#"):
                offenders.append(f"{rel}:{number}: {line.strip()}")
    assert not offenders, offenders


# ------------------------------------------------------------------------------ a real vLLM tree with a bad file


def vllm_copy(tmp_path: Path) -> Path:
    """The real vLLM 0.20.1 site (the wheel installed --no-deps), copied as hard links: a file is replaced by
    unlinking it first, so the cached tree is never written."""
    site = tmp_path / "site"
    shutil.copytree(vllm_site("0.20.1"), site, copy_function=os.link)
    return site


def spoil(site: Path, rel: str, text: str) -> None:
    path = site / rel
    original = path.read_text()
    path.unlink()
    path.write_text(original + "\n" + text)


def test_a_file_the_parser_refuses_is_a_fact_of_the_scans_and_they_go_on(tmp_path: Path) -> None:
    site = vllm_copy(tmp_path)
    spoil(site, "vllm/logger.py", REFUSED["memory"])
    spoil(site, "vllm/model_executor/layers/rotary_embedding/common.py", REFUSED["memory"])
    package = site / "vllm"
    serve = scan_serve_path(str(package), ENTRY, [m for m, _ in SERVE_LOADED_BY_NAME.value], budget_s=60,
                            roots=[str(site)])
    errors = {os.path.relpath(e["file"], site): e["error"] for e in serve["errors"]}
    assert errors["vllm/logger.py"].startswith("MemoryError"), errors
    assert serve["complete"] and any(e["module"].startswith("fastapi") and e["reach"] == "serve"
                                     for e in serve["imports"])
    surface = scan_package(str(package), ["flash_attn", "vllm_flash_attn"])
    refused = {os.path.relpath(e["file"], site): e["error"] for e in surface["errors"]}
    assert set(refused) == {"vllm/model_executor/layers/rotary_embedding/common.py"}, refused
    assert refused["vllm/model_executor/layers/rotary_embedding/common.py"].startswith("MemoryError")
    assert surface["sites"], "the rest of vLLM's files were scanned"


def judged_with_a_spoiled_file(doctor: Doctor, tmp_path: Path, rel: str, check: str) -> dict[str, Any]:
    """`check` judged (a real run, exit 1) in a venv whose vLLM 0.20.1 has the MemoryError expression at the end of
    `rel`; nothing of the doctor's own failed."""
    site = vllm_copy(tmp_path)
    spoil(site, rel, REFUSED["memory"])
    env = make_venv(tmp_path)
    add_to_path(env, site)
    report, proc = doctor.report("--python", str(env.python), "--no-gpu", "--only", check)
    assert proc.returncode == 1, proc.stderr
    assert not [f for f in findings_of(report) if f["id"].startswith("doctor.")]
    return report


def requirement_findings(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    from packaging.requirements import Requirement

    return {str(Requirement(f["evidence"]["requirement"]).name): f for f in findings_of(report)
            if f["id"] in ("distributions.requirement-missing", "distributions.requirement-unmet")
            and f["evidence"]["requirer"] == "vllm"}


def test_a_vllm_module_the_parser_gives_up_on_leaves_missing_requirements_failing(doctor: Doctor,
                                                                                  tmp_path: Path) -> None:
    # vllm/logger.py, which every module on `vllm serve`'s way up imports, with an expression CPython 3.11's
    # parser answers with MemoryError; fastapi, which vLLM imports on its way up elsewhere, is not installed.
    report = judged_with_a_spoiled_file(doctor, tmp_path, "vllm/logger.py", "distributions")
    found = requirement_findings(report)
    fastapi = found["fastapi[standard]"] if "fastapi[standard]" in found else found["fastapi"]
    assert fastapi["status"] == "fail" and "`vllm serve` imports fastapi" in fastapi["detail"]
    [unread] = [f for f in findings_of(report) if f["id"] == "distributions.serve-path-unread"]
    assert unread["status"] == "error" and "vllm/logger.py: MemoryError" in unread["title"]


def test_a_collector_that_fails_is_an_error_finding_in_the_check_that_reads_it(doctor: Doctor,
                                                                             tmp_path: Path) -> None:
    # A saved report whose optional section is its collector's error marker, as a collector that raised leaves
    # it: the check judges without it, and says so in an error (exit 1), not a pass.
    saved = tmp_path / "report.json"
    first = doctor("--no-gpu", "--only", "distributions", "--json", str(saved))
    assert first.returncode == 0, first.stderr
    report = json.loads(saved.read_text())
    [check] = [c for c in report["checks"] if c["id"] == "distributions"]
    check["facts"]["vllm_serve_imports"] = {"_error": "MemoryError: the parser gave up"}
    saved.write_text(json.dumps(report))
    judged, proc = doctor.report("judge", str(saved))
    assert proc.returncode == 1
    [partial] = [f for f in findings_of(judged) if f["id"] == "doctor.facts-partial"]
    assert partial["status"] == "error" and "'vllm_serve_imports'" in partial["title"]
    assert "MemoryError: the parser gave up" in partial["title"]


def test_a_vllm_file_the_parser_gives_up_on_is_an_import_surface_error_naming_it(doctor: Doctor,
                                                                                tmp_path: Path) -> None:
    # The rotary embedding's file, which imports flash_attn on vLLM's serving path, with the MemoryError expression:
    # the rest of vLLM is scanned and judged, and the check is an error that names the file, not a pass.
    report = judged_with_a_spoiled_file(doctor, tmp_path, "vllm/model_executor/layers/rotary_embedding/common.py",
                                        "import-surface")
    [unread] = [f for f in findings_of(report) if f["id"] == "import-surface.unread"]
    assert unread["status"] == "error"
    assert "rotary_embedding/common.py could not be read (MemoryError" in unread["title"], unread["title"]
