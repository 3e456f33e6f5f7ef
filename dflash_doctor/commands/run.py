"""The default command, `dflash-doctor [options]`: run the doctor, then write and render its report.

Exit codes: 0 no fail and no error; 1 any fail or error (with --strict, any warn too; a partial report
is an error: SIGTERM or SIGINT once stops the run and writes the partial report, with one line on stderr);
2 the command line or an input file was wrong (argparse's own convention), nothing judged; 128 + the
signal's number (143, 130) when a second SIGTERM/SIGINT ends the doctor before it wrote the report.

Every output (terminal, --json, --junit, --markdown, --format github) is made from one redacted report.
The command line becomes a `Request` (`options.request_of`); the run itself is `dflash_doctor.pipeline.run`,
which every command that runs the doctor calls; `commands.output` writes and renders what it gives.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from dflash_doctor.commands import settle
from dflash_doctor.commands.options import UsageError, parse_run_args, request_of, tell, usage_error
from dflash_doctor.commands.output import emit, exit_if_lingering, live_progress, prepare
from dflash_doctor.facts import head_start

__all__ = ["main"]


class _UntilTheRunHandlesSignals:
    """A SIGTERM that comes before the run takes its signals over (`runner.Signals`) ends the doctor by that signal,
    as ever, but first the processes its head start started (`HeadStart.kill_now`: their process groups killed, their
    temporary directories removed); one that comes while the head start is starting them, once it has. In the main
    thread only (elsewhere, the handlers are as they were)."""

    def __init__(self) -> None:
        self._previous: Any = None
        self._starting = False
        self._pending = False
        self.early: head_start.HeadStart | None = None

    def __enter__(self) -> _UntilTheRunHandlesSignals:  # noqa: PYI034 - typing.Self is 3.11+
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._terminated)
        return self

    def __exit__(self, *_exc: object) -> None:
        # Unless the run left its own handler (after a stop, a second signal ends the doctor at once: runner.Signals).
        if self._previous is not None and signal.getsignal(signal.SIGTERM) == self._terminated:
            signal.signal(signal.SIGTERM, self._previous)

    def _terminated(self, signum: int, _frame: object) -> None:
        if self._starting:
            self._pending = True
            return
        if self.early is not None:
            self.early.kill_now()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    @contextlib.contextmanager
    def starting(self) -> Iterator[None]:
        self._starting = True
        try:
            yield
        finally:
            self._starting = False
        if self._pending:
            self._terminated(signal.SIGTERM, None)


def main(argv: Sequence[str]) -> int:
    try:
        args = parse_run_args(argv)
        request = request_of(args)
    except UsageError as exc:
        return usage_error(exc)
    # The target's first processes start now (facts.head_start), and the doctor's checks and collectors (~0.3 s of
    # imports, which they need nothing of) load while they run: imported here, not at the module's top, for that.
    early = head_start.HeadStart.empty()
    try:
        with _UntilTheRunHandlesSignals() as signals:
            with signals.starting():
                early = signals.early = head_start.start(request)
            from dflash_doctor import pipeline

            settle()
            prepare(args)  # after the run's own imports: what it imports (the views, rich) imports none of the run's
            with live_progress(args) as on_event:
                run = pipeline.run(dataclasses.replace(request, head_start=early), handle_signals=True,
                                   on_event=on_event)
    except UsageError as exc:
        early.close()
        return usage_error(exc)
    except BaseException:
        early.close()
        raise
    stop = next((f for r in run.results if r.id == "doctor" for f in r.findings if f.id == "doctor.interrupted"), None)
    code = emit(run, args)
    early.close()  # after the report: by now the run took what it started, or the stop ended it
    if stop is not None:
        tell(f"dflash-doctor: {stop.title} (exit {code})\n")
    exit_if_lingering(run, code)
    return code
