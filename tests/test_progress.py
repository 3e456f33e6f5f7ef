"""The live status line: on a terminal, while the doctor collects, one transient line says which collectors
are still at work and for how long; it is gone before the report prints (and after SIGTERM, with the
cursor shown again), and nothing of it reaches a pipe or a JSON report on stdout.

Real runs of the CLI on a pseudo-terminal, against a real venv holding a flash-attn wheel whose import
takes two seconds, so that the rotary-import collector is measurably at work.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import Doctor, validate_report
from realenv import Env, build_wheel, install, make_venv

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
SLOW_IMPORT_S = 2.0
ARGS = ("--no-gpu", "--only", "imports")

SLOW_FLASH_ATTN = {
    "flash_attn/__init__.py": f"import time\ntime.sleep({SLOW_IMPORT_S})\n__version__ = '2.8.3'\n",
    "flash_attn/ops/__init__.py": "",
    "flash_attn/ops/triton/__init__.py": "",
    "flash_attn/ops/triton/rotary.py": "def apply_rotary(*args, **kwargs):\n    raise NotImplementedError\n",
}


@pytest.fixture(scope="module")
def slow_env(tmp_path_factory: pytest.TempPathFactory) -> Env:
    tmp = tmp_path_factory.mktemp("slow")
    env = make_venv(tmp)
    install(env, build_wheel(tmp / "wheels", "flash-attn", "2.8.3", SLOW_FLASH_ATTN))
    return env


@dataclass
class TerminalRun:
    raw: bytes
    returncode: int
    stderr: str


def on_a_terminal(argv: list[str], *, env: dict[str, str] | None = None, signals: tuple[float, ...] = (),
                  timeout: float = 120, size: tuple[int, int] = (40, 120)) -> TerminalRun:
    """Run the CLI with stdout on a pseudo-terminal of 120 columns (`size`: rows, columns; 0, 0 is one that
    tells no size); send SIGTERM at each time in `signals` (seconds after the status line first appeared)."""
    # a terminal tells its own size: COLUMNS and LINES inherited (pytest-xdist's workers export 80 x 24) would
    # override the one `size` gives, as they override any terminal's
    inherited = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    full_env = {**inherited, "PYTHONPATH": str(ROOT), **(env or {})}
    if env is None or "NO_COLOR" not in env:
        full_env.pop("NO_COLOR", None)
    if full_env.get("TERM") in (None, "dumb", "unknown"):
        full_env["TERM"] = "xterm-256color"  # a terminal that takes cursor control, as a user's does
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", *size, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "dflash_doctor", *argv], stdin=subprocess.DEVNULL,
                            stdout=follower, stderr=subprocess.PIPE, env=full_env, cwd=ROOT)
    os.close(follower)
    chunks: list[bytes] = []
    pending = list(signals)
    seen_at: float | None = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.05)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other end closed
                break
            if not chunk:
                break
            chunks.append(chunk)
        if seen_at is None and b"collecting" in b"".join(chunks):
            seen_at = time.monotonic()
        while pending and seen_at is not None and time.monotonic() - seen_at >= pending[0]:
            pending.pop(0)
            proc.send_signal(signal.SIGTERM)
    os.close(leader)
    _, stderr = proc.communicate(timeout=30)
    return TerminalRun(b"".join(chunks), proc.returncode, stderr.decode(errors="replace"))


CSI = re.compile(r"\x1b\[(\??)([0-9;]*)([A-Za-z])")


@dataclass
class Screen:
    lines: list[str]
    cursor_visible: bool


def screen_of(raw: bytes) -> Screen:
    """What a terminal shows once `raw` is written: a small emulator of what the doctor may send (text,
    CR, LF, SGR colours, cursor up/down/column, erase in line, cursor show/hide). Anything else fails."""
    text = raw.decode("utf-8")
    rows: list[list[str]] = [[]]
    row = col = 0
    visible = True
    at = 0
    while at < len(text):
        char = text[at]
        if char == "\x1b":
            match = CSI.match(text, at)
            assert match, f"unexpected escape sequence {text[at:at + 12]!r}"
            private, params, final = match.groups()
            number = int(params.split(";")[0] or 0) if params else 0
            if private:
                assert params == "25" and final in "hl", match.group(0)
                visible = final == "h"
            elif final == "m":
                pass
            elif final == "A":
                row = max(0, row - max(1, number))
            elif final == "B":
                row += max(1, number)
            elif final == "G":
                col = max(0, number - 1)
            elif final == "K":
                line = rows[row] if row < len(rows) else []
                if number == 2:
                    line[:] = []
                elif number == 0:
                    del line[col:]
                else:
                    raise AssertionError(match.group(0))
            else:
                raise AssertionError(f"unexpected escape sequence {match.group(0)!r}")
            at = match.end()
            continue
        if char == "\r":
            col = 0
        elif char == "\n":
            row += 1
        else:
            while len(rows) <= row:
                rows.append([])
            line = rows[row]
            line.extend(" " * (col - len(line)))
            if col < len(line):
                line[col] = char
            else:
                line.append(char)
            col += 1
        while len(rows) <= row:
            rows.append([])
        at += 1
    return Screen(["".join(r).rstrip() for r in rows], visible)


def elapsed_shown(raw: bytes, collector: str) -> list[float]:
    return [float(s) for s in re.findall(rb"%s (\d+\.\d) s" % collector.encode(), raw)]


def test_on_a_terminal_a_live_line_says_what_is_collected_and_is_gone_before_the_report(slow_env: Env) -> None:
    run = on_a_terminal(["--python", str(slow_env.python), *ARGS])
    assert run.returncode in (0, 1), run.stderr
    raw = run.raw
    assert b"collecting: " in raw
    # Refreshed while the run goes on: the slow import is seen at work for more than a second.
    shown = elapsed_shown(raw, "rotary-import")
    assert shown and max(shown) >= 1.0, shown
    assert re.search(rb"\(\d+ of \d+ checks ready, \d+\.\d s\)", raw)
    screen = screen_of(raw)
    assert not any("collecting" in line or "checks ready" in line for line in screen.lines), screen.lines
    first = next(line for line in screen.lines if line)
    assert first.startswith("dflash-doctor "), screen.lines[:3]  # the report's first line, the line gone
    assert any("flash_attn rotary import" in line for line in screen.lines)
    assert screen.cursor_visible
    assert run.stderr == ""


def test_with_no_color_the_line_is_ascii_without_escape_sequences(slow_env: Env) -> None:
    run = on_a_terminal(["--python", str(slow_env.python), *ARGS], env={"NO_COLOR": "1"})
    assert run.returncode in (0, 1), run.stderr
    raw = run.raw
    assert raw.isascii() and b"\x1b" not in raw
    assert b"collecting: " in raw and max(elapsed_shown(raw, "rotary-import")) >= 1.0
    screen = screen_of(raw)
    assert not any("collecting" in line for line in screen.lines), screen.lines
    assert next(line for line in screen.lines if line).startswith("dflash-doctor ")


def test_with_no_color_on_a_terminal_that_tells_no_width_the_line_has_80_columns(
        slow_env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)  # nothing else tells the width either
    run = on_a_terminal(["--python", str(slow_env.python), *ARGS], env={"NO_COLOR": "1"}, size=(0, 0))
    assert run.returncode in (0, 1), run.stderr
    drawn = [part for part in run.raw.decode("ascii").split("\r") if "collecting" in part]
    assert drawn, run.raw
    # Whole lines ("... (N of M checks ready, T s)"), as wide as 79 columns at most: not cut to 20.
    assert any(re.search(r"checks ready, \d+\.\d s\)", part) for part in drawn), drawn
    assert max(len(part.rstrip()) for part in drawn) <= 79, drawn


def test_piped_stdout_json_on_stdout_and_judge_get_none_of_it(doctor: Doctor, slow_env: Env, tmp_path: Path) -> None:
    piped = doctor("--python", str(slow_env.python), *ARGS)
    assert piped.returncode in (0, 1), piped.stderr
    for stream in (piped.stdout, piped.stderr):
        assert "collecting" not in stream and "checks ready" not in stream and "\x1b" not in stream and "\r" not in stream
    assert piped.stdout.startswith("dflash-doctor ")
    assert piped.stderr == ""

    # `--json -` with stdout on a terminal: the terminal gets the JSON document and nothing else.
    run = on_a_terminal(["--python", str(slow_env.python), *ARGS, "--json", "-"])
    assert run.returncode in (0, 1), run.stderr
    assert b"collecting" not in run.raw and b"\x1b" not in run.raw
    text = run.raw.decode().replace("\r\n", "\n")  # the terminal's own newline translation
    report = validate_report(json.loads(text))
    assert report["checks"] and text.startswith("{") and text.endswith("}\n")  # one document, nothing around it
    assert run.stderr == ""

    # `judge` collects nothing: no line, even on a terminal.
    saved = tmp_path / "report.json"
    saved.write_text(text)
    judged = on_a_terminal(["judge", str(saved)])
    assert judged.returncode in (0, 1), judged.stderr
    assert b"dflash-doctor " in judged.raw
    for said in (b"collecting", b"checks ready", b"checks judged", b"starting ("):
        assert said not in judged.raw


def test_sigterm_takes_the_line_down_before_the_partial_report_and_shows_the_cursor(slow_env: Env) -> None:
    run = on_a_terminal(["--python", str(slow_env.python), *ARGS], signals=(0.5,))
    assert run.returncode == 1, run.stderr
    assert "stopped by SIGTERM" in run.stderr
    screen = screen_of(run.raw)
    assert not any("collecting" in line for line in screen.lines), screen.lines
    assert next(line for line in screen.lines if line).startswith("dflash-doctor ")
    assert any("PARTIAL report" in line for line in screen.lines)
    assert screen.cursor_visible


SLOW_COLLECTOR = """
import time
from dflash_doctor.facts.sections import Collector
from dflash_doctor.model import Finding, Status

def collect(ctx, earlier):
    time.sleep(60)  # deaf to the stop: the first SIGTERM waits for it, the second ends the doctor
    return {"acme_slow": {}}


COLLECTOR = Collector("acme-slow", ("acme_slow",), collect)


class SlowCheck:
    id = "acme-slow"
    layer = "site"
    title = "A slow site check"
    needs = frozenset({"acme_slow"})
    after = frozenset()
    requires_gpu = False

    def judge(self, facts):
        yield Finding("acme-slow.slow", Status.PASS, "collected")
"""


def test_a_second_sigterm_ends_the_doctor_with_no_line_left_and_the_cursor_shown(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path / "wheels", "acme-slow", "0.1", {"acme_slow.py": SLOW_COLLECTOR},
                        entry_points={"dflash_doctor.checks": {"acme-slow": "acme_slow:SlowCheck"},
                                      "dflash_doctor.collectors": {"acme-slow": "acme_slow:COLLECTOR"}})
    plugins = tmp_path / "plugins"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target",
                    str(plugins), str(wheel)], check=True)
    env = {"PYTHONPATH": os.pathsep.join([str(plugins), str(ROOT)])}
    run = on_a_terminal(["--no-gpu", "--only", "site", "--timeout", "600"], env=env, signals=(0.5, 1.0))
    # The collector still sleeps after the first SIGTERM; the second ends the doctor at once.
    assert run.returncode == 128 + signal.SIGTERM, (run.returncode, run.stderr)
    assert "stopped again by SIGTERM" in run.stderr and "Traceback" not in run.stderr
    assert b"collecting: acme-slow" in run.raw
    screen = screen_of(run.raw)
    assert not any("collecting" in line for line in screen.lines), screen.lines
    assert screen.cursor_visible  # the shell's cursor is not left hidden


ABORT_SCRIPT = """
import os, signal, sys, time
from dflash_doctor.render.progress import status_line
from dflash_doctor.runner import Signals

with status_line(sys.stdout, plain=PLAIN) as on_event:
    signals = Signals(True, on_event)
    signals.install()
    signals.stopped()  # a first signal stopped the run: the next one ends the process at once
    on_event("check-planned", "imports", time.monotonic())
    on_event("collector-start", "rotary-import", time.monotonic())
    time.sleep(0.6)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(10)
print("not reached")
"""


@pytest.mark.parametrize("plain", [False, True], ids=["rich", "plain"])
def test_the_second_signal_handler_takes_the_line_down_before_the_process_ends(plain: bool) -> None:
    """The runner's own second-signal path (it ends the process with os._exit, no cleanup runs after it),
    in a real process on a real pseudo-terminal, with the line up at that moment."""
    script = ABORT_SCRIPT.replace("PLAIN", str(plain))
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm-256color"}
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.DEVNULL, stdout=follower,
                            stderr=subprocess.PIPE, env=env, cwd=ROOT)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    _, stderr = proc.communicate(timeout=30)
    raw = b"".join(chunks)
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    assert b"stopped again by SIGTERM" in stderr and b"not reached" not in raw
    # the line was up, and refreshed, when the signal came (which refreshes land depends on the machine's load)
    shown = set(re.findall(rb"collecting: rotary-import (\d+\.\d) s", raw))
    assert len(shown) >= 2, raw
    screen = screen_of(raw)
    assert not any(line.strip() for line in screen.lines), screen.lines
    assert screen.cursor_visible
    if plain:
        assert raw.isascii() and b"\x1b" not in raw
