"""Shared test helpers: run the real CLI in a subprocess, and validate every report it writes."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import py_compile
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import jsonschema
import pytest

# A hook, registered by being here: a failing test's report shows the command, exit status and stderr of the
# subprocess that failed it.
from subprocess_report import pytest_runtest_makereport  # noqa: F401

SCHEMA = json.loads(
    (Path(__file__).resolve().parent.parent / "dflash_doctor" / "documents" / "schema" / "report-v1.json").read_text()
)


# What the run's processes write outside the test cache, and no test looks at after it ends, goes to one directory of
# the run, removed when the run ends: uv's cache (every wheel a test installs with uv, unpacked: 2.8 GB a run in
# ~/.cache/uv), pip's cache (the wheel pip builds of a checkout, as test_benchmarks_smoke's installs: it kept them
# in ~/.cache/pip/wheels), virtualenv's app data, and $TMPDIR of every process the tests start (the temporary
# directories of a doctor or an installer a test kills). Made by the process that starts the run, once its command line is taken
# (pytest_configure: a command line pytest refuses makes nothing), before xdist starts its workers, which inherit it.
# This process's own temporary files (pytest's temp dir, kept for a failing test) stay where they were: the directory
# is fixed before $TMPDIR changes.
_SCRATCH_OWNER = "DFLASH_DOCTOR_TEST_SCRATCH_OWNER"

# The doctor's own bytecode, as an installed wheel has it (pip compiles what it installs): the suite starts the doctor
# as a process of its own about a thousand times, and an editable checkout under PYTHONDONTWRITEBYTECODE (which CI
# and many shells set) has none, so each of them compiled its ~220 modules again (0.25 s of CPU a process). Compiled
# once, by the process that starts the run, and removed when it ends: only the files this run made.
_PACKAGE = Path(__file__).resolve().parent.parent / "dflash_doctor"
_compiled: list[Path] = []


def pytest_configure(config: pytest.Config) -> None:
    if _SCRATCH_OWNER in os.environ:
        return  # an xdist worker, or a run inside a run: the starting process made them
    tempfile.gettempdir()
    scratch = Path(tempfile.mkdtemp(prefix="dflash-doctor-test-run-"))
    os.environ[_SCRATCH_OWNER] = f"{os.getpid()} {scratch}"
    for variable, name in (("UV_CACHE_DIR", "uv-cache"), ("PIP_CACHE_DIR", "pip-cache"),
                           ("VIRTUALENV_OVERRIDE_APP_DATA", "virtualenv"), ("TMPDIR", "tmp")):
        (scratch / name).mkdir()
        os.environ[variable] = str(scratch / name)
    if sys.pycache_prefix is not None:
        return
    for source in sorted(_PACKAGE.rglob("*.py")):
        cached = Path(importlib.util.cache_from_source(str(source)))
        if not cached.exists():
            try:
                py_compile.compile(str(source), cfile=str(cached), doraise=True)
            except (OSError, py_compile.PyCompileError):
                continue  # a read-only checkout: the processes compile in memory, as before
            _compiled.append(cached)


def pytest_unconfigure(config: pytest.Config) -> None:
    owner, _, scratch = os.environ.get(_SCRATCH_OWNER, "").partition(" ")
    if owner == str(os.getpid()) and scratch:
        shutil.rmtree(scratch, ignore_errors=True)
    for cached in _compiled:
        cached.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # left where something else wrote beside it
            cached.parent.rmdir()


# The report schema checked against its metaschema once, here: `jsonschema.validate` checks it again on every call
# (26 ms each; test_documents alone validates a report hundreds of times).
_SCHEMA_VALIDATOR = jsonschema.validators.validator_for(SCHEMA)
_SCHEMA_VALIDATOR.check_schema(SCHEMA)
_REPORT_VALIDATOR = _SCHEMA_VALIDATOR(SCHEMA)


def validate_report(report: dict[str, Any]) -> dict[str, Any]:
    """`jsonschema.validate(report, SCHEMA)`, the schema's own check made once: the same error, the best match."""
    error = jsonschema.exceptions.best_match(_REPORT_VALIDATOR.iter_errors(report))
    if error is not None:
        raise error
    return report


class Doctor:
    """The dflash-doctor command, run as a user runs it: a real process, real exit code."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd

    def __call__(self, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
                 timeout: float = 300) -> subprocess.CompletedProcess[str]:
        full_env = {**os.environ, **(env or {})}
        full_env.pop("NO_COLOR", None) if env is None or "NO_COLOR" not in env else None
        return subprocess.run([sys.executable, "-m", "dflash_doctor", *args], check=False, cwd=cwd or self.cwd,
                              env=full_env, capture_output=True, text=True, timeout=timeout)

    def report(self, *args: str, **kwargs: Any) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
        """Run with --json - and return the validated report."""
        proc = self(*args, "--json", "-", **kwargs)
        try:
            report = json.loads(proc.stdout)
        except json.JSONDecodeError:
            raise AssertionError(f"stdout is not one JSON document:\n{proc.stdout[:2000]}\nstderr:\n{proc.stderr[-2000:]}")
        return validate_report(report), proc


# The longest tests first, so that xdist hands them out while every worker is still busy and the run does not end
# waiting on one of them (`--dist loadgroup` hands out its groups first, the largest first, then single tests in
# collection order). On CI these took 50 to 110 s each; the tests marked slow take seconds to a minute, most others
# well under a second. A name missing here only loses its place in the queue.
LONGEST_FIRST = (
    "tests/test_documents.py::test_fact_sections_of_any_shape_are_judged_merged_and_compared_without_a_crash",
    "tests/test_documents.py::test_every_wrong_typed_node_of_a_real_report_is_rejected_or_judged_never_a_traceback",
    "tests/test_serve_imports.py::test_the_scan_agrees_with_a_real_import_that_lacks_one_package",
    ("tests/test_fix_plan.py::test_the_seed_plan_starts_with_what_stops_serve_and_leaves_out_undone_and_cuda_steps_"
     "saying_why"),
    "tests/test_fix_plan.py::test_a_run_told_the_gpus_it_is_for_keeps_the_cuda_build_and_still_drops_the_undone_step",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        if item.nodeid.split("[")[0] in LONGEST_FIRST:
            return 0
        return 1 if item.get_closest_marker("slow") else 2

    items.sort(key=rank)  # stable: the order within each rank stays the files' own


@pytest.fixture
def doctor(tmp_path: Path) -> Doctor:
    return Doctor(tmp_path)


def findings_of(report: dict[str, Any], check_id: str | None = None) -> list[dict[str, Any]]:
    return [f for c in report["checks"] if check_id in (None, c["id"]) for f in c["findings"]]


def finding(report: dict[str, Any], finding_id: str) -> dict[str, Any]:
    found = [f for f in findings_of(report) if f["id"] == finding_id]
    assert found, f"no {finding_id} in {[f['id'] for f in findings_of(report)]}"
    return found[0]
