"""What the user asked a run to inspect, and how: the one object every collector is given; and the type of the
callback a run tells its progress to (`ProgressFn`).

It sits at the bottom of the package (it imports nothing of it), so that collectors (`facts/`), the check
API (`check.py`) and the run (`runner.py`) can all take it without reaching up or sideways.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import field
from typing import Any, Protocol

from dflash_doctor.shape import frozen_dataclass

__all__ = ["Context", "HeadStart", "ProgressFn", "SourceReader", "TargetProcess"]


ProgressFn = Callable[[str, str, float], None]
"""on_event(kind, name, t): how a run tells its progress (the kinds: `dflash_doctor.runner`'s docstring). Whatever
it raises is ignored: a view's trouble is not the run's."""


class TargetProcess(Protocol):
    """The run's one target process that imported the stack once (`facts.probes.SharedTargetProcess`): probes
    that need the stack run as its forked children. Jobs are `facts.probes.ProbeJob`s, outcomes `ProbeOutcome`s."""

    parallel: int
    """How many jobs run at once; more wait for a slot."""

    def submit(self, job: Any) -> Future[Any]:
        """Start one probe job; its outcome comes through the future."""
        ...

    def run(self, jobs: list[Any]) -> dict[str, Any]:
        """Run the jobs and wait for each one's outcome, by job name."""
        ...

    def facts(self) -> dict[str, Any]:
        """How the process went so far (its own facts, for the report)."""
        ...


class HeadStart(Protocol):
    """What the run started before it imported its checks (`facts.head_start.HeadStart`): each is taken by the
    collector that asks for the same, once; None when it was not started, or was started for another question."""

    started_at: float
    """When the doctor began the run (time.monotonic()): the report's timeline counts from it."""

    def take_target_process(self, python: str, preload: tuple[str, ...], preload_if_found: tuple[str, ...] | None,
                            timeout_s: float, cwd: str) -> Any:
        """The shared target process (`facts.probes.SharedTargetProcess`) started with these, now the caller's."""
        ...

    def take_environment(self, python: str, args: Mapping[str, Any], timeout_s: float, cwd: str) -> Any:
        """The environment probe's outcome (`facts.probes.ProbeOutcome`) for these arguments, waited for."""
        ...

    def spans(self) -> dict[str, tuple[float, float]]:
        """When each probe a collector took ran, by the collector's name (time.monotonic() at start and end)."""
        ...


class SourceReader(Protocol):
    """The run's reader of source files (`facts.sourcefiles.SourceFiles`): each file read once per run."""

    def read(self, path: str, limit: int, roots: Sequence[str] | None = None) -> bytes:
        """At most `limit` bytes of a regular file (`facts.safefile.read_regular`'s rules)."""
        ...

    def python_files(self, root: str) -> list[str]:
        """Every .py file under `root`, in sorted order."""
        ...


@frozen_dataclass(frozen=True)
class Context:
    """What the user asked for: which environment to inspect, and how."""

    python: str
    """The target interpreter whose environment is inspected."""
    cwd: str
    no_gpu: bool = False
    target_archs: tuple[str, ...] = ()
    verify_hashes: bool = False
    timeout_s: float = 60.0
    options: Mapping[str, Any] = field(default_factory=dict)
    """Extra options for layers that take them (e.g. the serve command line)."""
    target_process: TargetProcess | None = None
    """The run's one target process (set by the runner while it collects; None: each probe starts its own)."""
    sources: SourceReader | None = None
    """The files the run's source scans read, each read once per run (`facts.sourcefiles.SourceFiles`, set while
    the run collects; None: each scan reads its own)."""
    head_start: HeadStart | None = None
    """What the run started before it imported its checks (`facts.head_start`), for the collectors to take."""
