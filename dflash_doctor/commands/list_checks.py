"""`dflash-doctor list`: the checks, built-in and plugins, and the plugins that failed to load."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from dflash_doctor.commands.options import Parser
from dflash_doctor.registry import load_checks
from dflash_doctor.render.plain import plain_output
from dflash_doctor.render.text import log_line, screen

__all__ = ["main"]


def main(argv: Sequence[str]) -> int:
    Parser(prog="dflash-doctor list", description="List the checks.").parse_args(argv)
    loaded, errors = load_checks()
    shown = log_line if plain_output(sys.stdout) else screen  # a plugin's title or error is the plugin's text

    def write(line: str) -> None:
        sys.stdout.write(shown(line.removesuffix("\n")) + "\n")

    width = max((len(lc.check.id) for lc in loaded), default=10)
    for lc in loaded:
        check = lc.check
        gpu = " (GPU)" if check.requires_gpu else ""
        origin = "" if lc.origin == "builtin" else f"  [plugin: {lc.origin}]"
        write(f"{check.id:<{width}}  {check.layer:<8}  {check.title}{gpu}{origin}\n")
    for error in errors:
        state = "invalid" if error.invalid else "failed to load"
        write(f"{error.name:<{width}}  ({state}, {error.entry_point or '?'} from {error.origin}: {error.reason})\n")
    return 0
