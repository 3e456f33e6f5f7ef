"""What every command that runs the doctor does with the run: the live status line while it runs, then the
requested report files and the chosen view, and the exit code (`commands.run`, `serve`, `judge`, `live`,
`baseline`). Nothing here imports the run itself."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from dflash_doctor.commands.options import tell
from dflash_doctor.documents.jsondoc import shown_path
from dflash_doctor.render import json_report
from dflash_doctor.render.plain import plain_output

if TYPE_CHECKING:
    from dflash_doctor.pipeline import Run

__all__ = ["OnEvent", "emit", "exit_if_lingering", "live_progress", "prepare"]

OnEvent = Callable[[str, str, float], None]


def _stdout_view(args: argparse.Namespace) -> str | None:
    """The view rendered on stdout: "terminal" or "github" (`--format`); None where a report file goes to stdout
    (`--json -` and the like)."""
    outputs = (getattr(args, "json", None), getattr(args, "junit", None), getattr(args, "markdown", None))
    return None if "-" in outputs else "github" if getattr(args, "format", "terminal") == "github" else "terminal"


def _progress_shown(args: argparse.Namespace) -> bool:
    """The terminal view goes to stdout, and stdout is a terminal."""
    try:
        tty = sys.stdout.isatty()
    except (AttributeError, ValueError):
        tty = False
    return tty and _stdout_view(args) == "terminal"


@contextlib.contextmanager
def live_progress(args: argparse.Namespace) -> Iterator[OnEvent | None]:
    """A transient status line on the terminal while the block runs (the `on_event` for `pipeline.run`), or
    None where nothing may be added to stdout: not a terminal, a report on stdout, `--format github`.
    The line is gone when the block ends, before the report is rendered."""
    if not _progress_shown(args):
        yield None
        return

    dumb = os.environ.get("TERM", "") in ("dumb", "unknown")  # no cursor control there: the plain line
    from dflash_doctor.render.progress import status_line  # rich (~30 ms): only when the line is shown

    with status_line(sys.stdout, plain=bool(args.no_color) or plain_output(sys.stdout) or dumb) as on_event:
        yield on_event


def prepare(args: argparse.Namespace) -> None:
    """Start, beside the run, what writing its outputs needs and its facts do not: the chosen views' modules (rich
    for the terminal: ~30 ms) and this machine's host names for the redaction (a resolver's answer, which can take
    its timeout). The run's end then waits for none of it. Anything that fails here is met again, and said, where
    the output is written."""

    def work() -> None:
        with contextlib.suppress(Exception):
            from dflash_doctor.report.redact import this_hosts

            this_hosts()
            if args.junit:
                import dflash_doctor.render.junit
            if args.markdown:
                import dflash_doctor.render.markdown
            view = _stdout_view(args)
            if view == "github":
                import dflash_doctor.render.github
            elif view == "terminal":
                import dflash_doctor.render.terminal  # noqa: F401

    threading.Thread(target=work, name="dflash-doctor-prepare-outputs", daemon=True).start()


def _write(kind: str, path: str, write: Any, report: Mapping[str, Any]) -> bool:
    try:
        write(report, path)
    except BrokenPipeError:
        raise
    except OSError as exc:
        tell(f"dflash-doctor: cannot write the {kind} report to {shown_path(path)}: {exc.strerror or exc}\n")
        return False
    except Exception as exc:  # noqa: BLE001 - one broken output must not cost the others
        tell(f"dflash-doctor: internal error writing the {kind} report to {shown_path(path)}: "
             f"{type(exc).__name__}: {exc}\n")
        return False
    if path != "-":  # say where: a profile (ticket) may have chosen the name
        tell(f"dflash-doctor: {kind} report written to {shown_path(os.path.abspath(path))}\n")
    return True


def emit(run: Run, args: argparse.Namespace) -> int:
    """Write the requested files and render the chosen view; returns the exit code (2 if an output failed)."""
    report, ok = run.report, True
    if args.json:
        ok &= _write("JSON", args.json, json_report.write, report)
    # each view only when asked: a run that writes JSON alone (CI's `--json -`) or GitHub annotations loads
    # neither rich nor the views it does not write (~40 ms of imports)
    if args.junit:
        from dflash_doctor.render import junit

        ok &= _write("JUnit", args.junit, junit.write, report)
    if args.markdown:
        from dflash_doctor.render import markdown

        ok &= _write("Markdown", args.markdown, markdown.write, report)
    view = _stdout_view(args)
    if view is not None:
        try:
            if view == "github":
                from dflash_doctor.render import github

                github.render(report, sys.stdout)
            else:
                plain = args.no_color or plain_output(sys.stdout)
                from dflash_doctor.render.terminal import TerminalReporter, make_console

                TerminalReporter(make_console(sys.stdout, plain), plain, args.verbose).render(report, run.results)
            sys.stdout.flush()
        except BrokenPipeError:
            raise  # the reader went away: main() ends quietly
        except Exception as exc:  # noqa: BLE001
            tell(f"dflash-doctor: internal error rendering the report: {type(exc).__name__}: {exc}\n")
            ok = False
    return run.exit_code if ok else max(run.exit_code, 2)


def exit_if_lingering(run: Run, code: int) -> None:
    """A collector ignored the stop or its timeout: end the process now with `code`, its output
    flushed, rather than let Python's exit wait for that thread."""
    if run.lingering:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
