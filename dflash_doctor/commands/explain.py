"""`dflash-doctor explain [ID]`: a finding id's explanation from the code table (no id: every id)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dflash_doctor.codes import Code

__all__ = ["main"]


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="dflash-doctor explain", description="Explain a finding id.")
    parser.add_argument("id", nargs="?", help="a finding id, e.g. namespaces.v4-without-v2 (none: list them all)")
    args = parser.parse_args(argv)
    from dflash_doctor.codes import CODES
    from dflash_doctor.codes.aliases import V1_ALIASES

    if args.id is None:
        for code in CODES.values():
            sys.stdout.write(f"{code.id:<34} {code.title}\n")
        return 0
    renamed = V1_ALIASES.get(args.id)
    if renamed:
        # A v1 id (from a saved report): explain what it is called now, one entry per check that emits it.
        sys.stdout.write(f"{args.id} is a v1 finding id; it is now {' or '.join(renamed)}.\n\n")
        sys.stdout.write("\n".join(_entry(CODES[new]) for new in renamed))
        return 0
    entry = CODES.get(args.id)
    if entry is None:
        close = [c for c in CODES if args.id in c]
        sys.stderr.write(f"dflash-doctor: unknown finding id {args.id!r}"
                         + (f"; did you mean: {', '.join(close[:5])}" if close else "") + "\n")
        return 2
    sys.stdout.write(_entry(entry))
    return 0


def _entry(entry: Code) -> str:
    return f"{entry.id}: {entry.title}\n\n{entry.explanation}\n\n(since {entry.since})\n"
