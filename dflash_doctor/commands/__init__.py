"""Every subcommand, one module each, with `main(argv) -> exit code`; `dflash_doctor.cli` dispatches through
this one table. The table names modules (as pytest's `default_plugins` does) and `command` imports only the
one chosen, so `dflash-doctor --help` loads no other command and each command imports what it uses at its top."""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence
from importlib import import_module

__all__ = ["COMMANDS", "DEFAULT_COMMAND", "Command", "command", "entry_point", "settle"]

Command = Callable[[Sequence[str]], int]
"""main(argv) -> exit code."""

COMMANDS: dict[str, str] = {
    "judge": "judge",
    "list": "list_checks",
    "explain": "explain",
    "profiles": "list_profiles",
    "serve": "serve",
    "baseline": "baseline",
    "merge": "merge",
    "fleet": "fleet",
    "fix": "fix",
    "live": "live",
}
"""`dflash-doctor NAME ...` -> the module of `dflash_doctor.commands` that runs it (options.SUBCOMMANDS names the
same, for the parser)."""

DEFAULT_COMMAND = "run"
"""`dflash-doctor [options]`: no command name, the doctor's run (module `dflash_doctor.commands.run`)."""


def command(module: str) -> Command:
    """The `main` of the command module `module` (a value of COMMANDS, or DEFAULT_COMMAND), imported now."""
    main: Command = import_module(f"{__name__}.{module}").main
    return main


_entry_point = False


def entry_point() -> None:
    """The doctor is this process's program (the console script, `python -m dflash_doctor`), not a call from a
    program that runs it in its own process: `settle` tunes the cyclic collector only then."""
    global _entry_point
    _entry_point = True


def settle() -> None:
    """What is imported by now (the doctor's modules, a few hundred classes) lives as long as the process: the cyclic
    collector need not walk it again each time the scans' parse trees and the facts' objects set it off (~0.1 s of
    CPU in a run over a serving environment). It still collects what the run makes, less often. Only where the
    doctor is the process's program (`entry_point`): a caller's objects and collector are its own."""
    if _entry_point:
        gc.freeze()
        gc.set_threshold(10_000, 10, 10)
