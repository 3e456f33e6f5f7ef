"""Runs the collectors a run needs, and only those: the target interpreter's handshake first, then the collectors
side by side, each waiting only for the sections it requires; the probes that need the target's stack run as
forked children of one target process (`facts.probes.SharedTargetProcess`).

The run's critical path is one `import torch` and what truly depends on it. So the target process is started
first, before the handshake: its torch import needs nothing of it, and its first message, before that import,
is the handshake's answer (no interpreter is started for the question). A run of every check starts it, and the
environment probe, even before the doctor imports its checks (`facts.head_start`); the collection takes them there. The collectors wait for the answer;
the import goes on meanwhile. A collector that waits for another waits only for the sections it requires.

Each section is held as its collector returned it, an instance of its shape; a collector that raises leaves a
`SectionFailure` (why, and where) in each section it provides: one broken layer never takes the run down. A
third-party collector is given the sections it requires as JSON, as ever, and may return plain JSON, read where
the run takes it (`accept`). An interpreter that does not answer the handshake is the one thing that stops the
collection (`InterpreterError`, before any collector starts, the target process ended at once): every probe
would otherwise fail on it, one by one.

The steps are told as they start and end (`on_event`: "handshake-start"/"-end", "target-process-start"/"-end"
(its start up to the end of its preload), "collector-start"/"-end"); `Timeline` keeps them, for the report's
`timeline` (docs/output.md): where each step started, relative to the run's start, and how long it took.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from dflash_doctor.context import Context, ProgressFn
from dflash_doctor.facts.head_start import target_process_preload
from dflash_doctor.facts.probes import SharedTargetProcess
from dflash_doctor.facts.python.interpreter import InterpreterError, precheck, verify
from dflash_doctor.facts.sections import (
    BUILTIN_COLLECTORS,
    SHARED_IMPORTS,
    TARGET_PROCESS_SECTIONS,
    TORCH_SECTIONS,
    Collector,
    collectors_for,
    shape_of,
)
from dflash_doctor.facts.sourcefiles import SourceFiles
from dflash_doctor.shape import SectionFailure, Shape, ShapeError, section_json, section_of_json

__all__ = ["STEP_KINDS", "InterpreterError", "Timeline", "accept", "collect", "teller"]

STEP_KINDS = ("head-start", "handshake", "target-process", "collector")
"""The collection's steps a timeline holds; each is told as KIND-start and KIND-end. A `head-start` step is a probe
the run started before it imported its checks (`facts.head_start`), named after the collector that took it."""
TARGET_PROCESS = "target-process"
HANDSHAKE = "handshake"


def collect(
    ctx: Context, sections: set[str], collectors: list[Collector] | None = None,
    on_event: ProgressFn | None = None,
) -> tuple[dict[str, object], dict[str, float]]:
    """Run the collectors for `sections` concurrently; a failed one leaves a `SectionFailure`. Returns the
    sections (each an instance of its shape, a failure, or a third-party collector's JSON) and how long each took
    to collect (its collector's wall time); InterpreterError when the target interpreter (other than the doctor's
    own, which is running this code) does not answer the handshake."""
    tell = teller(on_event)
    foreign = ctx.python != sys.executable
    if foreign:
        precheck(ctx.python)  # nothing is started in what is no file to run
    plan = collectors_for(sections, collectors)
    demanded = set(sections).union(*(c.requires for c in plan))
    if ctx.sources is None:  # vLLM's tree, read by three scans side by side, is read once
        ctx = dataclasses.replace(ctx, sources=SourceFiles())
    target_process: SharedTargetProcess | None = None
    if ctx.target_process is None and TARGET_PROCESS_SECTIONS & demanded & {s for c in plan for s in c.provides}:
        # The GPU layers use torch whatever is installed; the Python layers only through a package that loads it.
        preload_if_found = target_process_preload(bool(TORCH_SECTIONS & demanded))
        # Started by the run's head start when it was started for the same (facts.head_start), else now.
        target_process = ctx.head_start.take_target_process(
            ctx.python, SHARED_IMPORTS, preload_if_found, ctx.timeout_s, ctx.cwd) if ctx.head_start else None
        if target_process is None:
            target_process = SharedTargetProcess(ctx.python, preload=SHARED_IMPORTS, timeout_s=ctx.timeout_s,
                                                 cwd=ctx.cwd, preload_if_found=preload_if_found).start()
        tell(f"{TARGET_PROCESS}-start", TARGET_PROCESS, target_process.started_at)
        target_process.when_ready(
            lambda: tell(f"{TARGET_PROCESS}-end", TARGET_PROCESS, target_process.ready_at if target_process else None))
        ctx = dataclasses.replace(ctx, target_process=target_process)
    try:
        if foreign:
            tell(f"{HANDSHAKE}-start", HANDSHAKE)
            try:
                verify(ctx.python, ctx.timeout_s, cwd=ctx.cwd, target_process=target_process)
            except InterpreterError:
                if target_process is not None:
                    target_process.abort()
                    target_process = None
                raise
            tell(f"{HANDSHAKE}-end", HANDSHAKE)
        return _collect(ctx, plan, demanded, on_event)
    finally:
        if target_process is not None:
            target_process.close()


def teller(on_event: ProgressFn | None) -> Callable[..., None]:
    """tell(kind, name[, at]): `on_event` told the time (now, or `at`: a step that began before it was told),
    whatever it raises ignored; nothing without one. The collection and the judging (`runner`) tell their progress
    through it."""

    def tell(kind: str, name: str, at: float | None = None) -> None:
        if on_event is not None:
            with contextlib.suppress(Exception):  # a view's trouble is not the run's
                on_event(kind, name, time.monotonic() if at is None else at)

    return tell


_BUILTIN_FUNCTIONS = frozenset(c.function for c in BUILTIN_COLLECTORS)


def accept(collector: Collector, produced: object, wanted: tuple[str, ...]) -> dict[str, object]:
    """What a collector returned for the sections `wanted`, as the run holds them: an instance of the section's
    shape or a `SectionFailure` as it is; JSON (a third-party collector's plain mapping) read here: a failure's
    marker becomes its `SectionFailure`, a built-in section is read into its shape (one that is not of it is a
    failure naming the field), any other section kept as JSON. A section it did not give is a failure."""
    if not isinstance(produced, Mapping):
        return {s: SectionFailure(s, f"collector {collector.name} gave {type(produced).__name__}, not its sections")
                for s in wanted}
    accepted: dict[str, object] = {}
    for section in wanted:
        if section not in produced:
            accepted[section] = SectionFailure(section, f"collector {collector.name} gave no facts")
            continue
        value = produced[section]
        shape = shape_of(section)
        if isinstance(value, SectionFailure) or shape is None or isinstance(value, shape):
            accepted[section] = section_of_json(section, value)
            continue
        if isinstance(value, Shape):
            accepted[section] = SectionFailure(section, f"collector {collector.name} gave a {type(value).__name__}, "
                                                        f"not the section's shape {shape.__name__}")
            continue
        value = section_of_json(section, value)
        try:
            accepted[section] = value if isinstance(value, SectionFailure) else shape.collected(value)
        except ShapeError as exc:
            accepted[section] = SectionFailure(section, str(exc))
    return accepted


def _collect(ctx: Context, plan: list[Collector], demanded: set[str],
             on_event: ProgressFn | None = None) -> tuple[dict[str, object], dict[str, float]]:
    results: dict[str, object] = {}
    durations: dict[str, float] = {}
    lock = threading.Lock()
    tell = teller(on_event)
    futures: dict[str, Future[None]] = {}

    def run_one(collector: Collector) -> None:
        for needed in (*collector.requires, *collector.after):
            owner = next((c for c in plan if needed in c.provides), None)
            if owner is not None:
                futures[owner.name].result()
        with lock:
            earlier = {s: results[s] for s in collector.requires if s in results}
        if collector.function not in _BUILTIN_FUNCTIONS:  # a third party's reads the sections it requires as JSON
            earlier = {s: section_json(value) for s, value in earlier.items()}
        wanted = tuple(s for s in collector.provides if s in demanded) if collector.partial else collector.provides
        started = time.monotonic()
        tell("collector-start", collector.name)
        try:
            if collector.partial:
                produced = accept(collector, collector.load()(ctx, earlier, wanted=frozenset(wanted)), wanted)
            else:
                produced = accept(collector, collector.load()(ctx, earlier), wanted)
        except Exception as exc:  # noqa: BLE001 - a broken collector is a section that says why
            reason, where = f"{type(exc).__name__}: {exc}", traceback.format_exc(limit=6)
            produced = {s: SectionFailure(s, reason, where) for s in wanted}
        elapsed = time.monotonic() - started
        with lock:
            for section in wanted:
                results[section] = produced[section]
                durations[section] = elapsed
        tell("collector-end", collector.name)

    with ThreadPoolExecutor(max_workers=max(1, len(plan))) as pool:
        for collector in plan:
            futures[collector.name] = pool.submit(run_one, collector)
        for future in futures.values():
            future.result()
    return results, durations


class Timeline:
    """The collection's steps as they were told (`STEP_KINDS`, each KIND-start and KIND-end, at time.monotonic()):
    `steps` gives each one's start, relative to a given time (the run's start), and how long it took."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._started: dict[tuple[str, str], float] = {}
        self._ended: dict[tuple[str, str], float] = {}

    def event(self, kind: str, name: str, t: float) -> None:
        step, _, edge = kind.rpartition("-")
        if step not in STEP_KINDS:
            return
        with self._lock:
            if edge == "start":
                self._started.setdefault((step, name), t)
            elif edge == "end":
                self._ended.setdefault((step, name), t)

    def steps(self, since: float) -> list[dict[str, Any]]:
        """Each step, in the order they started: its name, kind, start (`start_s`, seconds after `since`) and
        duration (`duration_s`; None for a step that had not ended when the run did)."""
        with self._lock:
            started, ended = dict(self._started), dict(self._ended)
        return [{"name": name, "kind": step, "start_s": round(max(0.0, t - since), 3),
                 "duration_s": round(ended[step, name] - t, 3) if (step, name) in ended else None}
                for (step, name), t in sorted(started.items(), key=lambda item: item[1])]
