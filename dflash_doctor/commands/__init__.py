"""Every subcommand, one module each, with `main(argv) -> exit code`; `dflash_doctor.cli` dispatches through
this one table. A command module imports at its top only what its parser needs (the rest when it runs), so
importing them all keeps `dflash-doctor --help` cheap."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from dflash_doctor.commands import (
    baseline,
    explain,
    fix,
    fleet,
    judge,
    list_checks,
    list_profiles,
    live,
    merge,
    run,
    serve,
)

__all__ = ["COMMANDS", "DEFAULT_COMMAND", "Command"]

Command = Callable[[Sequence[str]], int]
"""main(argv) -> exit code."""

COMMANDS: dict[str, Command] = {
    "judge": judge.main,
    "list": list_checks.main,
    "explain": explain.main,
    "profiles": list_profiles.main,
    "serve": serve.main,
    "baseline": baseline.main,
    "merge": merge.main,
    "fleet": fleet.main,
    "fix": fix.main,
    "live": live.main,
}
"""`dflash-doctor NAME ...` -> the command that runs it (options.SUBCOMMANDS names the same, for the parser)."""

DEFAULT_COMMAND: Command = run.main
"""`dflash-doctor [options]`: no command name, the doctor's run."""
