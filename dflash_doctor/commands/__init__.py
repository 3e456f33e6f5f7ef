"""Every subcommand, one module each, with `main(argv) -> exit code`; `dflash_doctor.cli` dispatches through
this one table. The table names modules (as pytest's `default_plugins` does) and `command` imports only the
one chosen, so `dflash-doctor --help` loads no other command and each command imports what it uses at its top."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from importlib import import_module

__all__ = ["COMMANDS", "DEFAULT_COMMAND", "Command", "command"]

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
