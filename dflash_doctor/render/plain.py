"""Plain output: when stdout is not a terminal or NO_COLOR is set, every byte the doctor prints is ASCII.

Titles and details come from checks, plugins, probes' stderr and other projects' exception messages, so
the text is made ASCII here, at the edge, by one function (`to_ascii`), not by each check: typographic
punctuation becomes its ASCII spelling (an em dash `-`, a middle dot `|`, an ellipsis `...`, arrows
`->`), box drawing becomes `-`, `|` and `+`, and anything else is written as a Python escape (`\\xe8`,
`\\u4e2d`): a path or a name with other letters is then visibly not what it seems, rather than silently
another path.
"""

from __future__ import annotations

import os
import unicodedata
from typing import IO

__all__ = ["plain_output", "to_ascii"]

_SPELLED = {
    "\u2014": "-", "\u2013": "-", "\u2012": "-", "\u2010": "-", "\u2011": "-", "\u2212": "-", "\u2015": "-",
    "\u00b7": "|", "\u2022": "*", "\u2023": ">", "\u25cf": "*", "\u2026": "...",
    "\u2192": "->", "\u2190": "<-", "\u2194": "<->", "\u21d2": "=>", "\u21d0": "<=", "\u27f6": "->",
    "\u2191": "^", "\u2193": "v", "\u21b3": "->",
    "\u2018": "'", "\u2019": "'", "\u201a": ",", "\u201b": "'", "\u2032": "'",
    "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u2033": '"', "\u00ab": "<<", "\u00bb": ">>",
    "\u2264": "<=", "\u2265": ">=", "\u2260": "!=", "\u2248": "~", "\u00d7": "x", "\u00f7": "/",
    "\u00b1": "+/-", "\u221e": "inf", "\u00b5": "u", "\u03bc": "u", "\u00b0": " deg",
    "\u00a0": " ", "\u2009": " ", "\u202f": " ", "\u2007": " ", "\u200b": "", "\ufe0f": "", "\u200d": "",
    "\u2713": "ok", "\u2714": "ok", "\u2705": "ok", "\u2717": "x", "\u2718": "x", "\u274c": "x",
    "\u2620": "ERROR", "\u26a0": "!", "\U0001f6d1": "ERROR", "\u2796": "-",
}
_TABLE = {ord(k): v for k, v in _SPELLED.items()}


def _box(char: str) -> str | None:
    code = ord(char)
    if 0x2500 <= code <= 0x257F:  # box drawing
        name = unicodedata.name(char, "")
        horizontal, vertical = "HORIZONTAL" in name, "VERTICAL" in name
        if horizontal and not vertical:
            return "-"
        if vertical and not horizontal:
            return "|"
        return "+"
    if 0x2580 <= code <= 0x259F:  # block elements
        return "#"
    return None


def _one(char: str) -> str:
    if char.isascii():
        return char
    boxed = _box(char)
    if boxed is not None:
        return boxed
    return char.encode("ascii", "backslashreplace").decode("ascii")


def to_ascii(text: str) -> str:
    """`text` with every character ASCII (see the module's docstring for how)."""
    if text.isascii():
        return text
    return "".join(_one(c) for c in text.translate(_TABLE))


def plain_output(stream: IO[str]) -> bool:
    """Plain ASCII without colour: NO_COLOR is set (any value, https://no-color.org) or not a terminal."""
    return bool(os.environ.get("NO_COLOR")) or not stream.isatty()
