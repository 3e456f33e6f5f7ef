"""Command line: `dflash-doctor [options]` (the run), or `dflash-doctor COMMAND ...` for each command of
`dflash_doctor.commands.COMMANDS` (judge, list, explain, profiles, serve, baseline, merge, fleet).

This module only dispatches: each command is a module of `dflash_doctor.commands` with `main(argv) -> exit
code`; the exit codes are the run's (see `dflash_doctor.commands.run`).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from collections.abc import Sequence

from dflash_doctor.commands import COMMANDS, DEFAULT_COMMAND, command, entry_point, settle
from dflash_doctor.commands.options import parse_run_args, tell, unknown_command

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:
        entry_point()
    try:
        code = _dispatch(list(sys.argv[1:] if argv is None else argv))
    except BrokenPipeError:
        code = _reader_gone()
    if argv is None:
        _end(code)
    return code


def _reader_gone() -> int:
    """The reader went away (`dflash-doctor ... | head`): not an error of the doctor's; say nothing more."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return 1


def _end(code: int) -> None:
    """The doctor as the process's program ends here, once its outputs are flushed and its exit handlers have run
    (temporary directories, logging): the interpreter's own teardown, which frees every object of the run one by
    one, is skipped (~40 ms of a run over a serving environment). Only when nothing else is at work: a thread that
    is not a daemon (a pool's worker still judging a plugin after the run failed) is waited for, and an output that
    cannot be flushed is reported, by Python's own exit, as ever (returning leaves both to it)."""
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        return
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except BrokenPipeError:
        code = _reader_gone()
    except (OSError, ValueError):
        return
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):  # what an exit handler wrote
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    os._exit(code)


def _dispatch(argv: list[str]) -> int:
    """`dflash-doctor NAME ...` runs the command NAME of the table; anything else is the default run."""
    if argv and argv[0] in COMMANDS:
        module, rest = COMMANDS[argv[0]], argv[1:]
    elif argv and not argv[0].startswith("-"):
        # The run takes options only: a first word that is no option is a command name, mistyped.
        tell(unknown_command(argv[0]))
        return 2
    else:
        module, rest = DEFAULT_COMMAND, argv
        if {"-h", "--help", "--version"} & set(rest):
            parse_run_args(rest)  # prints the run's help or version and exits: none of the run that commands.run imports
    main = command(module)
    settle()
    return main(rest)


if __name__ == "__main__":
    raise SystemExit(main())
