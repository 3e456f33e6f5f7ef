"""`dflash-doctor profiles`: list the profiles (named sets of run options, `commands.profiles`) with their flags."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from dflash_doctor.commands.options import Parser, UsageError, run_parser, usage_error
from dflash_doctor.commands.profiles import ProfileError, load_profiles

__all__ = ["main"]


def main(argv: Sequence[str]) -> int:
    parser = Parser(
        prog="dflash-doctor profiles",
        description="List the profiles: built-in, from pyproject.toml's [tool.dflash-doctor.profiles.*], "
        "and from --config FILE.")
    parser.add_argument("--config", metavar="FILE", help="also read [profiles.NAME] tables from this TOML file")
    args = parser.parse_args(argv)
    try:
        profiles = load_profiles(run_parser(), args.config)
    except ProfileError as exc:
        return usage_error(UsageError(str(exc)))
    for profile in profiles.values():
        sys.stdout.write(f"{profile.name}  [{profile.origin}]\n    {profile.description}\n    {profile.as_flags()}\n")
    return 0
