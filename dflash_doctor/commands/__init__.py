"""Every subcommand, one module each, with `main(argv) -> exit code`; `dflash_doctor.cli` dispatches through
this one table (a module is imported only when its command runs)."""

from __future__ import annotations

__all__ = ["COMMANDS", "DEFAULT_COMMAND"]

COMMANDS: dict[str, str] = {
    "judge": "dflash_doctor.commands.judge",
    "list": "dflash_doctor.commands.list_checks",
    "explain": "dflash_doctor.commands.explain",
    "profiles": "dflash_doctor.commands.list_profiles",
    "serve": "dflash_doctor.commands.serve",
    "baseline": "dflash_doctor.commands.baseline",
    "merge": "dflash_doctor.commands.merge",
    "fleet": "dflash_doctor.commands.fleet",
    "fix": "dflash_doctor.commands.fix",
    "live": "dflash_doctor.commands.live",
}
"""`dflash-doctor NAME ...` -> the module that runs it."""

DEFAULT_COMMAND = "dflash_doctor.commands.run"
"""`dflash-doctor [options]`: no command name, the doctor's run."""
