"""Runs the checks so that the doctor's own failure still leaves a report.

The runner turns a raising check or collector into an `error` result; what it cannot survive is the
doctor being stopped (a CI job's timeout sends SIGTERM, a user presses Ctrl-C) or its own code raising
outside a check. Here collection and judging run in a worker thread while the main thread waits, so a
signal is handled at once: the probes still running are killed (each runs in its own process group),
every check whose facts had been collected is judged, the others are marked `doctor.incomplete`, and a
`doctor` result says what stopped the run. The caller writes that partial report like any other.
A second signal ends the process at once (exit status 128 + the signal's number), without a report.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dflash_doctor.check import Check, Context, Facts
from dflash_doctor.guest import STOP, lingering
from dflash_doctor.model import CheckResult, Finding, Status
from dflash_doctor.runner import collect, judge, judge_one, needed_sections
from dflash_doctor.sections import Collector, all_collectors

__all__ = ["Outcome", "Stopped", "run_checks"]


class Stopped(BaseException):
    """Raised in the main thread by SIGTERM (SIGINT raises KeyboardInterrupt)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@dataclass(frozen=True)
class _Recording(Collector):
    """A collector that also drops what it produced into a shared dict as soon as it has it."""

    sink: dict[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)
    lock: Any = field(default=None, compare=False, hash=False, repr=False)

    def load(self) -> Callable[..., Mapping[str, Any]]:
        function = Collector.load(self)

        def recorded(ctx: Context, earlier: Mapping[str, Any], **wanted: Any) -> Mapping[str, Any]:
            produced = function(ctx, earlier, **wanted)
            with self.lock:
                self.sink.update(produced)
            return produced

        return recorded


@dataclass(frozen=True)
class Outcome:
    results: list[CheckResult]
    sections: dict[str, Any]
    stopped: CheckResult | None = None
    """The doctor's own failure (interrupted or crashed); None when the run completed."""
    lingering: bool = False
    """A worker or guest thread was still busy when the run ended (the caller should not wait for it)."""

    @property
    def partial(self) -> bool:
        return self.stopped is not None


class _Signals:
    """SIGTERM (and SIGINT, unless it was ignored when the doctor started) raise `Stopped` once; a second
    signal after that ends the process at once, with one line on stderr and exit status 128 + signal number.
    After a stop the second-signal handler stays installed: writing the partial report is not interrupted
    by a traceback."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and threading.current_thread() is threading.main_thread()
        self.stopping = False
        self.previous: dict[int, Any] = {}

    def _handle(self, signum: int, _frame: Any) -> None:
        if self.stopping:
            name = signal.Signals(signum).name
            os.write(2, f"dflash-doctor: stopped again by {name}; exiting now, without a report\n".encode())
            os._exit(128 + signum)
        self.stopping = True
        raise Stopped(signum)

    def install(self) -> None:
        if self.enabled:
            for signum in (signal.SIGTERM, signal.SIGINT):
                current = signal.getsignal(signum)
                if current is signal.SIG_IGN:
                    continue  # a process started in the background keeps SIGINT ignored, as it should
                self.previous[signum] = signal.signal(signum, self._handle)

    def stopped(self) -> None:
        """The run is being given up: from now on any signal ends the process at once."""
        self.stopping = True

    def restore(self) -> None:
        """Put the previous handlers back, unless the run was stopped (see the class)."""
        if self.stopping:
            return
        for signum, previous in self.previous.items():
            signal.signal(signum, previous)


def _kill_probes() -> None:
    """End the probes this process started: direct children that lead their own process group."""
    children: list[int] = []
    for task in Path("/proc/self/task").glob("*/children"):
        with contextlib.suppress(OSError, ValueError):
            children += [int(pid) for pid in task.read_text().split()]
    for pid in children:
        with contextlib.suppress(OSError):
            if os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)


def _doctor_result(finding: Finding) -> CheckResult:
    return CheckResult("doctor", "doctor", "The doctor's own run", Status.ERROR, (finding,))


def _partial_results(checks: Sequence[Check], sections: Mapping[str, Any], ctx: Context,
                     durations: Mapping[str, float] | None, why: str, judged: Mapping[str, CheckResult],
                     cause: str) -> list[CheckResult]:
    """Results judged before the stop as they were; the rest judged now where their facts are in, else
    `doctor.incomplete` (a consequence of `cause`). A guest's code is not started again after a stop."""
    done: dict[str, CheckResult] = {}
    for check in checks:
        ready = set(check.needs) <= set(sections) and all(d in done for d in getattr(check, "after", ()))
        if check.id in judged:
            done[check.id] = judged[check.id]
        elif ctx.no_gpu and getattr(check, "requires_gpu", False):
            done[check.id] = judge([check], sections, ctx)[0]
        elif ready:
            done[check.id] = judge_one(check, Facts(sections, prior=done), durations)
        else:
            missing = sorted(set(check.needs) - set(sections))
            done[check.id] = CheckResult(check.id, check.layer, check.title, Status.ERROR, (Finding(
                id="doctor.incomplete", status=Status.ERROR,
                title=f"{check.title}: not judged, the run stopped first ({why})",
                detail=("facts not collected: " + ", ".join(missing)) if missing else "",
                evidence={"missing_sections": missing}, cause=cause),))
    return [done[c.id] for c in checks]


def run_checks(checks: Sequence[Check], ctx: Context, handle_signals: bool = False,
               collectors: list[Collector] | None = None) -> Outcome:
    """Collect and judge like `runner.run`, surviving SIGTERM/SIGINT and the doctor's own exceptions."""
    sink: dict[str, Any] = {}
    lock = threading.Lock()
    recording = [_Recording(c.name, c.provides, c.function, c.requires, c.partial, sink=sink, lock=lock)
                 for c in (collectors if collectors is not None else all_collectors())]
    state: dict[str, Any] = {}
    judged: dict[str, CheckResult] = {}
    started = time.monotonic()
    STOP.clear()

    def keep(result: CheckResult) -> None:
        with lock:
            if not STOP.is_set():  # judged after a stop, from facts the stop cut short: not kept
                judged[result.id] = result

    def work() -> None:
        try:
            sections, durations = collect(ctx, needed_sections(checks, ctx), list(recording))
            state["sections"] = sections
            state["results"] = judge(checks, sections, ctx, durations, on_result=keep)
        except BaseException as exc:  # noqa: BLE001 - becomes the doctor's own error result
            state["error"] = exc
            state["traceback"] = traceback.format_exc(limit=12)

    worker = threading.Thread(target=work, name="dflash-doctor-run", daemon=True)
    signals = _Signals(handle_signals)
    signals.install()
    try:
        worker.start()
        while worker.is_alive():
            worker.join(0.1)
    except (KeyboardInterrupt, Stopped) as exc:
        signals.stopped()
        STOP.set()  # guests still judging are given up, and none is started again
        name = exc.args[0] if isinstance(exc, Stopped) else "SIGINT"
        elapsed = time.monotonic() - started
        _kill_probes()
        worker.join(2.0)
        with lock:
            partial = dict(sink)
            kept = dict(judged)
        why = f"stopped by {name}"
        finding = Finding(
            id="doctor.interrupted", status=Status.ERROR,
            title=f"the doctor was stopped by {name} after {elapsed:.1f} s; this report is partial",
            detail=f"collected before the stop: {', '.join(sorted(partial)) or 'nothing'}",
            evidence={"signal": name, "elapsed_s": round(elapsed, 3), "collected": sorted(partial)})
        return Outcome(_partial_results(checks, partial, ctx, None, why, kept, "doctor.interrupted"), partial,
                       _doctor_result(finding), lingering=worker.is_alive() or lingering())
    finally:
        signals.restore()
    if "error" in state:
        error: BaseException = state["error"]
        with lock:
            partial = dict(state.get("sections") or sink)
            kept = dict(judged)
        finding = Finding(
            id="doctor.crashed", status=Status.ERROR,
            title=f"the doctor itself failed ({type(error).__name__}: {error}); this report is partial",
            detail=state["traceback"], evidence={"exception": type(error).__name__})
        return Outcome(_partial_results(checks, partial, ctx, None, "the doctor failed", kept, "doctor.crashed"),
                       partial, _doctor_result(finding), lingering=lingering())
    return Outcome(state["results"], state["sections"], lingering=lingering())


def failure_result(exc: BaseException, where: str) -> CheckResult:
    """The doctor's own failure outside the checks (building or comparing the report), as a result."""
    return _doctor_result(Finding(
        id="doctor.crashed", status=Status.ERROR,
        title=f"the doctor itself failed while {where} ({type(exc).__name__}: {exc}); this report is partial",
        detail="".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=12)),
        evidence={"exception": type(exc).__name__, "while": where}))
