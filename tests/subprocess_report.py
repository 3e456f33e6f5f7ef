"""A failing subprocess in a test shows what it said: its command, how it ended and the tail of its stderr.

`subprocess.run(..., check=True, capture_output=True)` fails a test with "returned non-zero exit status 1" and
nothing else, and `assert proc.returncode == 0` shows the process's repr cut to a couple of hundred characters.
This hook adds a "failed subprocess" section to a failing test's report: for a CalledProcessError or a
TimeoutExpired, and for each finished process with a nonzero exit in the frame where the test failed (the
innermost in the test's own directory: a helper there, or the test). conftest.py registers it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
from realenv import command_failure


def failed_subprocesses(error: BaseException, tests: Path) -> list[str]:
    """What the subprocesses behind `error` said, each as `command_failure` words it. `tests`: the directory of
    the test, whose innermost frame in the traceback is where the test failed."""
    if isinstance(error, subprocess.CalledProcessError):
        return [command_failure(error.cmd, error.returncode, error.stdout, error.stderr)]
    if isinstance(error, subprocess.TimeoutExpired):
        return [command_failure(error.cmd, None, error.stdout, error.stderr, timeout=error.timeout)]
    frames = []
    tb = error.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    ours = [f for f in frames if Path(f.f_code.co_filename).is_relative_to(tests)]
    if not ours:
        return []
    # pytest's assertion rewriting keeps `doctor(...).returncode`'s process in a local too.
    procs = {id(v): v for v in ours[-1].f_locals.values()
             if isinstance(v, subprocess.CompletedProcess) and v.returncode != 0}
    said = (command_failure(p.args, p.returncode, p.stdout, p.stderr) for p in procs.values())
    return [text for text in said if text not in str(error)]  # a helper's error may say it already


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    if report.failed and call.excinfo is not None:
        for text in failed_subprocesses(call.excinfo.value, item.path.parent):
            report.sections.append(("failed subprocess", text))
    return report
