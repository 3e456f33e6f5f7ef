"""`dflash-doctor explain [ID]`: a finding id's explanation from the code table of the built-in checks
(`registry.CODES`; no id: every id)."""

from __future__ import annotations

import re
import shutil
import sys
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING

from dflash_doctor.codes.aliases import V1_ALIASES
from dflash_doctor.commands.options import Parser, tell
from dflash_doctor.registry import CODES

if TYPE_CHECKING:
    from dflash_doctor.codes import Code

__all__ = ["main"]


def main(argv: Sequence[str]) -> int:
    parser = Parser(prog="dflash-doctor explain", description="Explain a finding id.")
    parser.add_argument("id", nargs="?", help="a finding id, e.g. namespaces.v4-without-v2 (none: list them all)")
    args = parser.parse_args(argv)
    if args.id is None:
        for code in CODES.values():
            sys.stdout.write(_wrap(f"{code.id:<34} {code.title}", indent=" " * 35) + "\n")
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
        tell(f"dflash-doctor: unknown finding id {args.id!r}"
             + (f"; did you mean: {', '.join(close[:5])}" if close else "") + "\n")
        return 2
    sys.stdout.write(_entry(entry))
    return 0


def _entry(entry: Code) -> str:
    # The heading stays one line (an id and its title, what one searches for); the explanation is wrapped.
    paragraphs = [_wrap(p) for p in entry.explanation.split("\n") if p.strip()]
    return "\n\n".join([f"{entry.id}: {entry.title}", *paragraphs, f"(since {entry.since})"]) + "\n"


_QUOTED = re.compile(r"`[^`\n]*`")
_KEPT = "\x00"  # stands for a space inside a `quoted command` while the text is wrapped


def _wrap(text: str, indent: str = "") -> str:
    """`text` wrapped to the terminal's width (80 columns when it is not known); a `quoted command`, a path
    or a flag is never broken, so what is copied from it still runs."""
    columns = shutil.get_terminal_size((80, 24)).columns
    width = max(40, (columns if columns > 0 else 80) - 1)
    kept = _QUOTED.sub(lambda m: m.group(0).replace(" ", _KEPT), text)
    lines = textwrap.wrap(kept, width, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False)
    return "\n".join(lines).replace(_KEPT, " ")
