"""Collects the facts the selected checks need, then judges them.

Collectors run concurrently (each waits only for the sections it requires); judging is cheap and runs
in declared order, after the checks a check reads. Whatever a check or collector raises becomes an
`error` result naming what broke: one broken layer never takes the doctor down.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from dflash_doctor.check import Check, Context, Facts, SectionError
from dflash_doctor.model import CheckResult, Finding, Status, worst
from dflash_doctor.probe import TargetHost
from dflash_doctor.sections import HOST_SECTIONS, SHARED_IMPORTS, Collector, collectors_for

__all__ = ["collect", "judge", "needed_sections", "run", "select"]


def select(checks: Sequence[Check], only: Iterable[str] = (), skip: Iterable[str] = ()) -> list[Check]:
    """Filter by check id or layer; --only keeps what any name matches, --skip drops it."""
    only_set, skip_set = set(only), set(skip)

    def matches(check: Check, names: set[str]) -> bool:
        return check.id in names or check.layer in names

    chosen = [c for c in checks if (not only_set or matches(c, only_set)) and not matches(c, skip_set)]
    # A check that reads another check's result pulls that one in.
    ids = {c.id for c in chosen}
    for check in list(chosen):
        for dependency in getattr(check, "after", frozenset()):
            if dependency not in ids:
                extra = next((c for c in checks if c.id == dependency), None)
                if extra is not None:
                    chosen.insert(0, extra)
                    ids.add(dependency)
    order = {c.id: i for i, c in enumerate(checks)}
    return sorted(chosen, key=lambda c: order[c.id])


def collect(
    ctx: Context, sections: set[str], collectors: list[Collector] | None = None
) -> tuple[dict[str, Any], dict[str, float]]:
    """Run the collectors for `sections` concurrently; a failed one stores {"_error": why}.

    Probes that need the target's stack share one target process, started first so that its torch
    import overlaps the collectors that need none. Returns the sections and how long each took to
    collect (its collector's wall time)."""
    plan = collectors_for(sections, collectors)
    demanded = set(sections).union(*(c.requires for c in plan))
    host: TargetHost | None = None
    if ctx.host is None and HOST_SECTIONS & demanded & {s for c in plan for s in c.provides}:
        host = TargetHost(ctx.python, preload=SHARED_IMPORTS, timeout_s=ctx.timeout_s, cwd=ctx.cwd).start()
        ctx = dataclasses.replace(ctx, host=host)
    try:
        return _collect(ctx, plan, demanded)
    finally:
        if host is not None:
            host.close()


def _collect(ctx: Context, plan: list[Collector], demanded: set[str]) -> tuple[dict[str, Any], dict[str, float]]:
    results: dict[str, Any] = {}
    durations: dict[str, float] = {}
    lock = threading.Lock()
    futures: dict[str, Future[None]] = {}

    def run_one(collector: Collector) -> None:
        for needed in collector.requires:
            owner = next((c for c in plan if needed in c.provides), None)
            if owner is not None:
                futures[owner.name].result()
        with lock:
            earlier = {s: results[s] for s in collector.requires if s in results}
        wanted = tuple(s for s in collector.provides if s in demanded) if collector.partial else collector.provides
        started = time.monotonic()
        try:
            if collector.partial:
                produced = dict(collector.load()(ctx, earlier, wanted=frozenset(wanted)))
            else:
                produced = dict(collector.load()(ctx, earlier))
        except Exception as exc:
            reason = f"{type(exc).__name__}: {exc}"
            produced = {s: {"_error": reason, "_traceback": traceback.format_exc(limit=6)} for s in wanted}
        elapsed = time.monotonic() - started
        with lock:
            for section in wanted:
                results[section] = produced.get(section, {"_error": f"collector {collector.name} gave no facts"})
                durations[section] = elapsed

    with ThreadPoolExecutor(max_workers=max(1, len(plan))) as pool:
        for collector in plan:
            futures[collector.name] = pool.submit(run_one, collector)
        for future in futures.values():
            future.result()
    return results, durations


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
    saved = {s: facts.raw(s) for s in sorted(check.needs) if facts.raw(s) is not None}
    try:
        findings = tuple(check.judge(facts))
        if not findings:
            raise RuntimeError("the check returned no finding")
        status = worst(f.status for f in findings)
    except SectionError as exc:
        findings = (
            Finding(
                id="doctor.facts-unavailable",
                status=Status.ERROR,
                title=f"{check.title}: facts {exc.section!r} could not be collected",
                detail=exc.reason,
                evidence={"section": exc.section},
            ),
        )
        status = Status.ERROR
    except Exception as exc:
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


def judge(
    checks: Sequence[Check],
    sections: Mapping[str, Any],
    ctx: Context | None = None,
    durations: Mapping[str, float] | None = None,
    on_result: Callable[[CheckResult], None] | None = None,
) -> list[CheckResult]:
    """Judge facts into results, in declared order; usable on a saved report's facts.

    `on_result` is told each result as soon as it is judged (the supervisor keeps them for a partial
    report)."""
    done: dict[str, CheckResult] = {}
    for check in checks:
        if ctx is not None and ctx.no_gpu and getattr(check, "requires_gpu", False):
            done[check.id] = _skip_for_gpu(check)
        else:
            done[check.id] = judge_one(check, Facts(sections, prior=done), durations)
        if on_result is not None:
            on_result(done[check.id])
    return [done[c.id] for c in checks]


def needed_sections(checks: Sequence[Check], ctx: Context) -> set[str]:
    """The fact sections the checks judge (none for a GPU check under --no-gpu: it is skipped unjudged)."""
    needed: set[str] = set()
    for check in checks:
        if ctx.no_gpu and getattr(check, "requires_gpu", False):
            continue
        needed |= set(check.needs)
    return needed


def run(checks: Sequence[Check], ctx: Context) -> tuple[list[CheckResult], dict[str, Any], float]:
    """Collect and judge; returns results, all collected sections, and the collection wall time."""
    started = time.monotonic()
    sections, durations = collect(ctx, needed_sections(checks, ctx))
    collected_s = time.monotonic() - started
    return judge(checks, sections, ctx, durations), sections, collected_s
