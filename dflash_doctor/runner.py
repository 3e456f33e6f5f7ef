"""Collects the facts the selected checks need (`facts.collect`), then judges them, so that the doctor's own
failure still leaves a report.

Collectors run concurrently (each waits only for the sections it requires); judging is cheap and runs
in declared order, after the checks a check reads (third-party checks, each judged in a process of its
own, are started side by side, their results taken in that order). Whatever a check or collector raises
becomes an `error` result naming what broke: one broken layer never takes the doctor down.

What a check cannot survive is the doctor being stopped (a CI job's timeout sends SIGTERM, a user presses
Ctrl-C) or its own code raising outside a check. `run_checks` runs collection and judging in a worker
thread while the main thread waits, so a signal is handled at once: the probes still running are killed
(each runs in its own process group), every check whose facts had been collected is judged by the same
judge loop, the others are marked `doctor.incomplete`, and a `doctor` result says what stopped the run.
The caller writes that partial report like any other. A second signal ends the process at once (exit
status 128 + the signal's number), without a report.

Progress is told through one callback, `on_event(kind, name, t)` (`ProgressFn`, t from `time.monotonic()`),
which a view may draw (the terminal's live status line); the core draws nothing itself. Kinds:
"check-planned" (each selected check, as the run starts), "collector-start" and "collector-end" (a
collector), "handshake-start" and "handshake-end" (the target interpreter answering which Python it is),
"target-process-start" and "target-process-end" (the run's shared target process, up to the end of its torch
import), "check-ready" (every fact a check judges is in), "judge-start" and "judge-end" (a check is
being judged, has been judged), and "abort" (name: the signal) just before a second signal ends the
process at once. Whatever the callback raises is ignored: progress never changes a run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import field
from pathlib import Path
from typing import Any

from dflash_doctor.check import Check, Facts, SectionError
from dflash_doctor.context import Context, ProgressFn
from dflash_doctor.facts.collect import InterpreterError, Timeline, collect, teller
from dflash_doctor.facts.sections import Collector, PluginCollectFn, all_collectors
from dflash_doctor.guest import STOP
from dflash_doctor.model import CheckResult, Finding, Status, doctor_result, interrupted_result, worst
from dflash_doctor.shape import frozen_dataclass

__all__ = ["Outcome", "ProgressFn", "Signals", "Stopped", "judge", "needed_sections", "run",
           "run_checks", "select", "spare"]


def select(checks: Sequence[Check], only: Iterable[str] = (), skip: Iterable[str] = ()) -> list[Check]:
    """Filter by check id or layer; --only keeps what any name matches, --skip drops it."""
    only_set, skip_set = set(only), set(skip)

    def matches(check: Check, names: set[str]) -> bool:
        return check.id in names or check.layer in names

    chosen = [c for c in checks if (not only_set or matches(c, only_set)) and not matches(c, skip_set)]
    # A check that reads another check's result pulls that one in.
    ids = {c.id for c in chosen}
    for check in list(chosen):
        for dependency in check.after:
            if dependency not in ids:
                extra = next((c for c in checks if c.id == dependency), None)
                if extra is not None:
                    chosen.insert(0, extra)
                    ids.add(dependency)
    order = {c.id: i for i, c in enumerate(checks)}
    return sorted(chosen, key=lambda c: order[c.id])


def _skip_for_gpu(check: Check) -> CheckResult:
    finding = Finding(
        id="doctor.skipped-no-gpu",
        status=Status.SKIP,
        title=f"{check.title}: skipped (--no-gpu)",
        detail="This check needs a GPU; --no-gpu was given.",
    )
    return CheckResult(check.id, check.layer, check.title, Status.SKIP, (finding,))


def judge_one(check: Check, facts: Facts, durations: Mapping[str, float] | None = None) -> CheckResult:
    started = time.monotonic()
    collected_s = max((durations or {}).get(s, 0.0) for s in check.needs) if check.needs else 0.0
    saved = {s: facts.raw(s) for s in sorted({*check.needs, *check.wants}) if facts.raw(s) is not None}
    try:
        findings = tuple(check.judge(facts))
        if not findings:
            raise RuntimeError("the check returned no finding")
        findings += tuple(_judged_without(check, facts))
        status = worst(f.status for f in findings)
    except SectionError as exc:
        findings = (
            Finding(
                id="doctor.facts-unavailable",
                status=Status.ERROR,
                title=f"{check.title}: facts {exc.section!r} {exc.what}",
                detail=exc.reason,
                evidence={"section": exc.section},
            ),
        )
        status = Status.ERROR
    except Exception as exc:  # noqa: BLE001 - a check that raises is an error result, never the run's end
        findings = (
            Finding(
                id="doctor.check-crashed",
                status=Status.ERROR,
                title=f"{check.title}: the check itself failed ({type(exc).__name__}: {exc})",
                detail=traceback.format_exc(limit=8),
                evidence={"check": check.id},
            ),
        )
        status = Status.ERROR
    elapsed = collected_s + time.monotonic() - started
    return CheckResult(check.id, check.layer, check.title, status, findings, saved, elapsed)


def _judged_without(check: Check, facts: Facts) -> Iterator[Finding]:
    """An error for each section the check read as optional that could not be used: its verdict lacks them."""
    for section, reason in sorted(facts.unavailable.items()):
        yield Finding(
            id="doctor.facts-partial",
            status=Status.ERROR,
            title=f"{check.title}: judged without facts {section!r}: {reason}"[:400],
            detail="The check judged what it could without this section; what it would have shown is not judged.",
            evidence={"section": section, "reason": reason[:2000]},
        )


@frozen_dataclass(frozen=True)
class Cutoff:
    """A run that stopped before it finished: what stopped it and what had been judged by then."""

    why: str
    """e.g. "stopped by SIGTERM", shown in each `doctor.incomplete` title."""
    cause: str
    """The id of the `doctor` finding that the incomplete results follow from."""
    judged: Mapping[str, CheckResult]
    """Results judged before the stop, kept as they were (a guest's code is not started again)."""


def _ready(check: Check, sections: Mapping[str, object], done: Mapping[str, CheckResult]) -> bool:
    return set(check.needs) <= set(sections) and all(d in done for d in check.after)


def _incomplete(check: Check, sections: Mapping[str, object], cutoff: Cutoff) -> CheckResult:
    missing = sorted(set(check.needs) - set(sections))
    return CheckResult(check.id, check.layer, check.title, Status.ERROR, (Finding(
        id="doctor.incomplete", status=Status.ERROR,
        title=f"{check.title}: not judged, the run stopped first ({cutoff.why})",
        detail=("facts not collected: " + ", ".join(missing)) if missing else "",
        evidence={"missing_sections": missing}, cause=cutoff.cause),))


def judge(
    checks: Sequence[Check],
    sections: Mapping[str, object],
    ctx: Context | None = None,
    durations: Mapping[str, float] | None = None,
    on_result: Callable[[CheckResult], None] | None = None,
    cutoff: Cutoff | None = None,
    on_event: ProgressFn | None = None,
) -> list[CheckResult]:
    """Judge facts into results, in declared order; usable on a saved report's facts.

    `on_result` is told each result as soon as it is judged (`run_checks` keeps them for a partial
    report). With `cutoff` (a run that stopped), the results judged before the stop are kept as they were,
    the rest are judged where their facts are in, else marked `doctor.incomplete`."""
    done: dict[str, CheckResult] = {}
    apart: dict[str, Future[CheckResult]] = {}
    pool: ThreadPoolExecutor | None = None
    tell = teller(on_event)
    try:
        for index, check in enumerate(checks):
            if cutoff is not None and check.id in cutoff.judged:
                done[check.id] = cutoff.judged[check.id]
            elif ctx is not None and ctx.no_gpu and check.requires_gpu:
                done[check.id] = _skip_for_gpu(check)
            elif cutoff is not None and not _ready(check, sections, done):
                done[check.id] = _incomplete(check, sections, cutoff)
            else:
                if pool is None and cutoff is None and check.judged_apart:
                    pool, apart = _judge_apart(checks[index:], sections, ctx, durations, done)
                tell("judge-start", check.id)
                future = apart.get(check.id)
                done[check.id] = (future.result() if future is not None
                                  else judge_one(check, Facts(sections, prior=done), durations))
            tell("judge-end", check.id)
            if on_result is not None:
                on_result(done[check.id])
    finally:
        if pool is not None:
            pool.shutdown(wait=False)  # each guest ends within its timeout, or at once when the run is stopped
    return [done[c.id] for c in checks]


def _judge_apart(rest: Sequence[Check], sections: Mapping[str, object], ctx: Context | None,
                 durations: Mapping[str, float] | None,
                 done: Mapping[str, CheckResult]) -> tuple[ThreadPoolExecutor | None, dict[str, Future[CheckResult]]]:
    """Start, side by side, the checks judged in processes of their own (third-party checks) that read no
    result still to come: several hung plugins then cost one --timeout, not one each. They see the results
    judged so far (every built-in: the plugins come after them)."""
    ready = [c for c in rest if c.judged_apart and set(c.after) <= set(done)
             and not (ctx is not None and ctx.no_gpu and c.requires_gpu)]
    if len(ready) < 2:
        return None, {}
    pool = ThreadPoolExecutor(max_workers=min(8, len(ready)), thread_name_prefix="dflash-doctor-guest")
    prior = dict(done)
    return pool, {c.id: pool.submit(judge_one, c, Facts(sections, prior=prior), durations) for c in ready}


def needed_sections(checks: Sequence[Check], ctx: Context) -> set[str]:
    """The fact sections the checks judge (none for a GPU check under --no-gpu: it is skipped unjudged)."""
    needed: set[str] = set()
    for check in checks:
        if ctx.no_gpu and check.requires_gpu:
            continue
        needed |= set(check.needs) | set(check.wants)
    return needed


def run(checks: Sequence[Check], ctx: Context) -> tuple[list[CheckResult], dict[str, object], float]:
    """Collect and judge; returns results, all collected sections, and the collection wall time."""
    started = time.monotonic()
    sections, durations = collect(ctx, needed_sections(checks, ctx))
    collected_s = time.monotonic() - started
    return judge(checks, sections, ctx, durations), sections, collected_s


# ------------------------------------------------------------------- a run that survives being stopped


class Stopped(BaseException):
    """Raised in the main thread by SIGTERM (SIGINT raises KeyboardInterrupt)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@frozen_dataclass(frozen=True)
class _Recording(Collector):
    """A collector that also drops what it produced into a shared dict as soon as it has it."""

    sink: dict[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)
    lock: Any = field(default=None, compare=False, hash=False, repr=False)

    def load(self) -> PluginCollectFn:
        function = Collector.load(self)

        def recorded(ctx: Context, earlier: Mapping[str, object], **wanted: Any) -> Mapping[str, Any]:
            produced = function(ctx, earlier, **wanted)
            with self.lock:
                if not STOP.is_set():  # facts that came in after a stop were cut short by it: not kept
                    self.sink.update(produced)
            return produced

        return recorded


@frozen_dataclass(frozen=True)
class Outcome:
    results: list[CheckResult]
    sections: dict[str, object]
    stopped: CheckResult | None = None
    """The doctor's own failure (interrupted or crashed); None when the run completed."""
    lingering: bool = False
    """The run's worker thread was still busy when the run ended (the caller should not wait for it)."""
    timeline: Timeline = field(default_factory=Timeline, compare=False, repr=False)
    """The collection's steps as they went (the report's `timeline`)."""

    @property
    def partial(self) -> bool:
        return self.stopped is not None


class Signals:
    """SIGTERM (and SIGINT, unless it was ignored when the doctor started) raise `Stopped` once; a second
    signal after that ends the process at once, with one line on stderr and exit status 128 + signal number.
    After a stop the second-signal handler stays installed: writing the partial report is not interrupted
    by a traceback."""

    def __init__(self, enabled: bool, on_event: ProgressFn | None = None) -> None:
        self.enabled = enabled and threading.current_thread() is threading.main_thread()
        self.stopping = False
        self.previous: dict[int, Any] = {}
        self.tell = teller(on_event)

    def _handle(self, signum: int, _frame: Any) -> None:
        if self.stopping:
            name = signal.Signals(signum).name
            self.tell("abort", name)  # a live status line is taken down first
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


# Children started on purpose to outlive a stopped run: the server `serve --exec --live` leaves running.
_SPARED: set[int] = set()


def spare(pid: int) -> None:
    """Keep child `pid` (and its process group) out of what a stopped run kills."""
    _SPARED.add(pid)


def _kill_probes() -> None:
    """End the probes this process started: direct children that lead their own process group, but the
    ones `spare` named."""
    children: list[int] = []
    for task in Path("/proc/self/task").glob("*/children"):
        with contextlib.suppress(OSError, ValueError):
            children += [int(pid) for pid in task.read_text().split()]
    for pid in children:
        if pid in _SPARED:
            continue
        with contextlib.suppress(OSError):
            if os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)


def _readiness(checks: Sequence[Check], ctx: Context, collectors: Sequence[Collector],
               on_event: ProgressFn | None) -> ProgressFn | None:
    """`on_event`, also told "check-ready" for each check once the collectors of all it judges have ended."""
    if on_event is None:
        return None
    needed = needed_sections(checks, ctx)
    waiting = {c.id: set(c.needs) & needed if not (ctx.no_gpu and c.requires_gpu) else set()
               for c in checks}
    provides = {c.name: set(c.provides) for c in collectors}
    lock = threading.Lock()
    tell = teller(on_event)

    def ready(collected: set[str]) -> list[str]:
        with lock:
            now = [check for check, sections in waiting.items() if not sections - collected]
            for check in now:
                del waiting[check]
            return now

    collected: set[str] = set()

    def relay(kind: str, name: str, t: float) -> None:
        with contextlib.suppress(Exception):
            on_event(kind, name, t)
        if kind == "collector-end":
            with lock:
                collected.update(provides.get(name, ()))
                done = set(collected)
            for check_id in ready(done):
                tell("check-ready", check_id)

    for check in checks:
        tell("check-planned", check.id)
    for check_id in ready(set()):
        tell("check-ready", check_id)
    return relay


def run_checks(checks: Sequence[Check], ctx: Context, handle_signals: bool = False,
               collectors: list[Collector] | None = None, on_event: ProgressFn | None = None) -> Outcome:
    """Collect and judge like `run`, surviving SIGTERM/SIGINT and the doctor's own exceptions; InterpreterError
    (nothing judged) when the target interpreter does not answer the handshake.

    `on_event` is told the run's progress (see the module's docstring)."""
    sink: dict[str, Any] = {}
    lock = threading.Lock()
    recording = [_Recording(c.name, c.provides, c.function, c.requires, c.partial, c.after, sink=sink, lock=lock)
                 for c in (collectors if collectors is not None else all_collectors())]
    state: dict[str, Any] = {}
    judged: dict[str, CheckResult] = {}
    started = time.monotonic()
    STOP.clear()
    relay = _readiness(checks, ctx, recording, on_event)
    timeline = Timeline()

    def told(kind: str, name: str, t: float) -> None:
        timeline.event(kind, name, t)
        if relay is not None:
            relay(kind, name, t)

    def keep(result: CheckResult) -> None:
        with lock:
            if not STOP.is_set():  # judged after a stop, from facts the stop cut short: not kept
                judged[result.id] = result

    # The run's end is an Event, not the thread's liveness: on Python 3.11 a signal handler that raises while
    # the main thread is in Thread.join marks the joined thread stopped although it still runs (CPython's
    # _wait_for_tstate_lock releases the lock the running thread holds), and a stopped run would then take a
    # collector still waiting on a server for finished, and the process's exit would wait for it.
    done = threading.Event()

    def work() -> None:
        try:
            sections, durations = collect(ctx, needed_sections(checks, ctx), list(recording), told)
            state["sections"] = sections
            state["results"] = judge(checks, sections, ctx, durations, on_result=keep, on_event=on_event)
        except InterpreterError as exc:  # nothing was collected: the caller's to report (a usage error)
            state["refused"] = exc
        except BaseException as exc:  # noqa: BLE001 - becomes the doctor's own error result
            state["error"] = exc
            state["traceback"] = traceback.format_exc(limit=12)
        finally:
            done.set()

    worker = threading.Thread(target=work, name="dflash-doctor-run", daemon=True)
    signals = Signals(handle_signals, on_event)
    signals.install()
    try:
        worker.start()
        while not done.wait(0.1):
            pass
    except (KeyboardInterrupt, Stopped) as exc:
        signals.stopped()
        STOP.set()  # guests still judging are given up, and none is started again
        name = exc.args[0] if isinstance(exc, Stopped) else "SIGINT"
        elapsed = time.monotonic() - started
        _kill_probes()
        done.wait(2.0)
        with lock:
            partial = dict(sink)
            kept = dict(judged)
        why = f"stopped by {name}"
        results = judge(checks, partial, ctx, cutoff=Cutoff(why, "doctor.interrupted", kept))
        return Outcome(results, partial, interrupted_result(name, elapsed, partial), lingering=not done.is_set(),
                       timeline=timeline)
    finally:
        signals.restore()
    if "refused" in state:
        raise state["refused"]
    if "error" in state:
        error: BaseException = state["error"]
        with lock:
            partial = dict(state.get("sections") or sink)
            kept = dict(judged)
        finding = Finding(
            id="doctor.crashed", status=Status.ERROR,
            title=f"the doctor itself failed ({type(error).__name__}: {error}); this report is partial",
            detail=state["traceback"], evidence={"exception": type(error).__name__})
        results = judge(checks, partial, ctx, cutoff=Cutoff("the doctor failed", "doctor.crashed", kept))
        return Outcome(results, partial, doctor_result(finding), timeline=timeline)
    return Outcome(state["results"], state["sections"], timeline=timeline)
