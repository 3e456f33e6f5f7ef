"""The live status line on a terminal while the doctor runs: which collectors are still at work and for
how long, and how many checks have all their facts, e.g.

    collecting: rotary-import 2.1 s, extensions 0.8 s (5 of 14 checks ready, 2.4 s)

It is transient: taken down before the report prints, and before a second SIGTERM or Ctrl-C ends the
doctor at once, with the cursor shown again. On a colour terminal it is a `rich.live.Live` with a spinner,
refreshed five times a second by rich's own thread. In plain mode (NO_COLOR, `--no-color`, a dumb
terminal) it is ASCII to the last byte and uses no escape sequence: the line is redrawn after a carriage
return by a thread of its own, at the same rate, and blanked the same way. Nothing is drawn before the
run itself starts (a usage error prints only its own line). `commands/run.py` decides where it is shown:
only when stdout is a terminal that gets the report (never with `--json -`, never for `judge`).

The runner tells the progress through `on_event(kind, name, t)` (see `dflash_doctor.runner`); this is the
only module that draws it.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import IO, Protocol

from rich.console import Console
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

from dflash_doctor.render.plain import to_ascii

__all__ = ["ProgressState", "status_line"]

REFRESH_PER_SECOND = 5
OnEvent = Callable[[str, str, float], None]


class ProgressState:
    """What the run has told so far, and the line that says it."""

    def __init__(self, now: float | None = None) -> None:
        self.lock = threading.Lock()
        self.started = time.monotonic() if now is None else now
        self.planned: list[str] = []
        self.ready: set[str] = set()
        self.judged: set[str] = set()
        self.collecting: dict[str, float] = {}
        self.judging: dict[str, float] = {}

    def event(self, kind: str, name: str, t: float) -> None:
        with self.lock:
            if kind == "check-planned" and name not in self.planned:
                self.planned.append(name)
            elif kind == "collector-start":
                self.collecting[name] = t
            elif kind == "collector-end":
                self.collecting.pop(name, None)
            elif kind == "check-ready":
                self.ready.add(name)
            elif kind == "judge-start":
                self.judging[name] = t
            elif kind == "judge-end":
                self.judging.pop(name, None)
                self.judged.add(name)
                self.ready.add(name)

    def describe(self, now: float) -> str:
        with self.lock:
            total, elapsed = len(self.planned), now - self.started

            def running(started: dict[str, float]) -> str:
                oldest_first = sorted(started.items(), key=lambda item: item[1])
                return ", ".join(f"{name} {max(0.0, now - t):.1f} s" for name, t in oldest_first)

            if self.collecting:
                return (f"collecting: {running(self.collecting)} "
                        f"({len(self.ready)} of {total} checks ready, {elapsed:.1f} s)")
            if self.judging or self.judged:
                doing = f": {running(self.judging)}" if self.judging else ""
                return f"judging{doing} ({len(self.judged)} of {total} checks judged, {elapsed:.1f} s)"
            return f"starting ({len(self.ready)} of {total} checks ready, {elapsed:.1f} s)"


class _Line(Protocol):
    def start(self) -> None: ...

    def stop(self) -> None: ...


class _RichLine:
    """A transient `rich.live.Live`: a spinner and the state's line, cut to the terminal's width."""

    def __init__(self, stream: IO[str], state: ProgressState) -> None:
        self.state = state
        self.spinner = Spinner("dots", style="cyan")
        console = Console(file=stream, force_terminal=True, highlight=False, emoji=False)
        self.live = Live(console=console, get_renderable=self._frame, transient=True,
                         refresh_per_second=REFRESH_PER_SECOND, redirect_stdout=False, redirect_stderr=False)

    def _frame(self) -> Text:
        now = time.monotonic()
        line = Text(no_wrap=True, overflow="ellipsis", end="")
        frame = self.spinner.render(now)
        line.append_text(frame if isinstance(frame, Text) else Text(str(frame)))
        line.append(" " + self.state.describe(now), style="dim")
        return line

    def start(self) -> None:
        self.live.start(refresh=False)

    def stop(self) -> None:
        self.live.stop()


class _PlainLine:
    """ASCII only, no escape sequence: redrawn after a carriage return, blanked with spaces."""

    FRAMES = "-\\|/"

    def __init__(self, stream: IO[str], state: ProgressState) -> None:
        self.stream = stream
        self.state = state
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.shown = 0  # characters on the line now
        self.frame = 0
        self.thread = threading.Thread(target=self._run, name="dflash-doctor-progress", daemon=True)

    def _width(self) -> int:
        try:
            columns = os.get_terminal_size(self.stream.fileno()).columns
        except (OSError, ValueError, AttributeError):
            columns = 0
        if columns <= 0:  # a terminal that tells no size (a pseudo-terminal nobody sized, a serial line)
            columns = _columns_from_environment() or 80
        return max(20, columns - 1)  # never the last column: some terminals wrap there

    def _run(self) -> None:
        while not self.done.wait(1.0 / REFRESH_PER_SECOND):
            self._draw()

    def _draw(self) -> None:
        text = to_ascii(f"{self.FRAMES[self.frame % len(self.FRAMES)]} {self.state.describe(time.monotonic())}")
        self.frame += 1
        width = self._width()
        if len(text) > width:
            text = text[: width - 3] + "..."
        with self.lock:
            if self.done.is_set():
                return
            self._write("\r" + text + " " * max(0, self.shown - len(text)))
            self.shown = len(text)

    def _write(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.stream.write(text)
            self.stream.flush()

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.done.set()
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(timeout=1.0)
        with self.lock:
            if self.shown:
                self._write("\r" + " " * self.shown + "\r")
                self.shown = 0


def _columns_from_environment() -> int:
    """COLUMNS, when it is a positive whole number (as the shell exports it); else 0."""
    value = os.environ.get("COLUMNS", "")
    return int(value) if value.isdigit() and int(value) > 0 else 0


@contextlib.contextmanager
def status_line(stream: IO[str], plain: bool) -> Iterator[OnEvent]:
    """A transient status line on `stream` (a terminal) for as long as the block runs; yields the
    `on_event` to give the runner. The line first appears with the run's first event."""
    state = ProgressState()
    line: _Line = _PlainLine(stream, state) if plain else _RichLine(stream, state)
    lock = threading.Lock()
    phase = {"started": False, "ended": False}

    def end() -> None:
        with lock:
            if phase["ended"] or not phase["started"]:
                phase["ended"] = True
                return
            phase["ended"] = True
        line.stop()

    def on_event(kind: str, name: str, t: float) -> None:
        if kind == "abort":  # a second signal: the process ends right after this
            end()
            return
        state.event(kind, name, t)
        with lock:
            if phase["started"] or phase["ended"]:
                return
            phase["started"] = True
            state.started = t
            line.start()  # under the lock: `end` cannot stop it before it started

    try:
        yield on_event
    finally:
        end()
