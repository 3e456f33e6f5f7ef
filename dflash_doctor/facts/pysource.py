"""The one way the doctor parses Python source (vLLM's files, a guard's test, a --speculative-config written as a
Python literal): `parse_module` and `parse_expression`, one parse at a time in the process.

Two things every caller gets from here:

- Any refusal of CPython's parser is one exception, `SourceError`, whose message is one line: a `SyntaxError`
  (an `IndentationError` past 100 levels, "too many nested parentheses"), a `ValueError` (a null byte), a
  `RecursionError` or a `MemoryError` (an expression nested thousands deep: `x = ------...1` with 6,000 signs
  makes CPython 3.11's parser give up with a `MemoryError` while the machine has memory to spare), or a
  `SystemError`. A file the doctor cannot parse is then a fact about that file, never the end of a scan.
- A scan that needs only part of a module may parse that part (`without_blocks`): the parser's cost is in the
  bodies of functions, and most of a module is function bodies.
- Parses never overlap: CPython 3.11's AST constructor keeps its recursion depth in a per-interpreter counter,
  so two threads parsing at once can fail with "AST constructor recursion depth mismatch" (SystemError,
  cpython#106905). The collectors run side by side in threads; the lock makes them take turns.
"""

from __future__ import annotations

import ast
import itertools
import re
import threading
from collections.abc import Callable

__all__ = ["SourceError", "parse_expression", "parse_module", "without_blocks"]

_PARSE_LOCK = threading.Lock()


class SourceError(ValueError):
    """Python source the parser refused; the message says why in one line (the caller names the file)."""


def _parse(text: str, filename: str, mode: str) -> ast.AST:
    try:
        with _PARSE_LOCK:
            return ast.parse(text, filename=filename, mode=mode)
    except SyntaxError as exc:
        where = f" (line {exc.lineno})" if exc.lineno else ""
        raise SourceError(f"{type(exc).__name__}: {exc.msg}{where}") from None
    except MemoryError:
        raise SourceError("MemoryError: the parser gave up (nested too deep, or too large)") from None
    except RecursionError:
        raise SourceError("RecursionError: nested too deep for the parser") from None
    except (ValueError, SystemError) as exc:
        raise SourceError(f"{type(exc).__name__}: {str(exc)[:200]}") from None


def parse_module(text: str, filename: str = "<unknown>") -> ast.Module:
    """`text` parsed as a module; SourceError when the parser refuses it."""
    tree = _parse(text, filename, "exec")
    assert isinstance(tree, ast.Module)
    return tree


def parse_expression(text: str, filename: str = "<unknown>") -> ast.Expression:
    """`text` parsed as one expression; SourceError when the parser refuses it."""
    tree = _parse(text, filename, "eval")
    assert isinstance(tree, ast.Expression)
    return tree


_BLOCK_START = re.compile(r"(?:async[ \t]+)?def[ \t]|@|class[ \t]")
# A line that starts a top-level statement (not indented, not blank, no comment, no closing bracket), found by the
# newline before it: a search with a literal first character is several times faster than one anchored with ^.
_TOP_LEVEL_LINE = re.compile(r"\n[^ \t\n#)\]}]")


def without_blocks(text: str, keep: Callable[[str], bool], members: bool = False) -> str | None:
    """`text` with the lines of every top-level function and class (its decorators included) blanked unless
    `keep(block)`, line numbers kept: what runs at module level and the blocks kept parse as they stand. None when
    the cut is in doubt, and the caller then parses the whole text: a stretch to blank holds an odd number of
    triple quotes of either kind (it may start or end a string) or one after a `#`, or ends in, or follows, a line
    continued by a backslash; or the text ends a line with a lone carriage return (the parser counts it as a line,
    the cut does not). A refusal of the parser inside a blanked block is not seen.

    `members`: in a kept class with a one-line header (its decorators are top-level blocks of their own), its
    methods and nested classes, each with its decorators, are cut the same way, each one not kept becoming a `pass`
    on its first line (a class whose members are all cut still parses). A class whose text holds a carriage return
    or a form feed (which moves the parser's column) is kept whole."""
    if _LONE_CR.search(text):
        return None
    starts = [m.start() + 1 for m in _TOP_LEVEL_LINE.finditer(text)]
    if text[:1] not in ("", " ", "\t", "\n", "#", ")", "]", "}"):
        starts.insert(0, 0)
    if not starts:
        return text
    pieces: list[str] = []
    kept_from = 0
    for begin, end in itertools.pairwise([*starts, len(text)]):
        if not _BLOCK_START.match(text, begin):
            continue
        block = text[begin:end]
        if keep(block):
            if members and block.startswith("class"):
                inner = _without_members(block, keep)
                if inner is None:
                    return None
                pieces += [text[kept_from:begin], inner]
                kept_from = end
            continue
        if _in_doubt(text, begin, block):
            return None
        pieces += [text[kept_from:begin], "\n" * block.count("\n")]
        kept_from = end
    pieces.append(text[kept_from:])
    return "".join(pieces)


_LONE_CR = re.compile(r"\r(?!\n)")
# A triple quote after a `#`: a comment's, which the count of triple quotes would take for a string's.
_QUOTES_IN_COMMENT = re.compile(r"#[^\n]*(?:\"\"\"|\'\'\')")
# A class's header on one line, a comment after it at most: its body's first code line comes next.
_CLASS_HEADER = re.compile(r"class[ \t]+\w+[ \t]*(?:\([^()\n]*\))?[ \t]*:[ \t]*(?:#[^\n]*)?\n")
# The first code line after the header (not blank, no comment): the body's indentation.
_FIRST_CODE_LINE = re.compile(r"\n([ \t]+)[^ \t\n#]")


def _in_doubt(text: str, begin: int, stretch: str) -> bool:
    """Whether `stretch` (at `begin` in `text`), about to be cut, may start or end inside a string or a line
    continued by a backslash."""
    return bool(stretch.count('"""') % 2 or stretch.count("'''") % 2 or _QUOTES_IN_COMMENT.search(stretch)
                or stretch.rstrip().endswith("\\") or text.endswith(("\\\n", "\\\r\n"), 0, begin))


def _without_members(block: str, keep: Callable[[str], bool]) -> str | None:
    """A class `block` with each member at its body's indentation (a def or a nested class, with its decorators) that
    is not kept cut to a `pass` on its first line, line numbers kept; the block as it is where its header spans
    lines or its text holds a carriage return or a form feed; None when the cut is in doubt, as `without_blocks`."""
    header = _CLASS_HEADER.match(block)
    if header is None or "\r" in block or "\f" in block:
        return block
    first = _FIRST_CODE_LINE.search(block, header.end() - 1)
    if first is None:
        return block
    indent = first.group(1)
    member_line = re.compile("\n" + re.escape(indent) + r"[^ \t\n#)\]}]")
    starts = [m.start() + 1 for m in member_line.finditer(block)]
    bounds = list(itertools.pairwise([*starts, len(block)]))
    pieces: list[str] = []
    kept_from = 0
    at = 0
    while at < len(bounds):
        begin, end = bounds[at]
        at += 1
        if not _BLOCK_START.match(block, begin + len(indent)):
            continue
        # a decorator goes with what it decorates (the lines after it up to the first that is no decorator): kept
        # or cut together
        last = begin
        while block.startswith("@", last + len(indent)) and at < len(bounds):
            last, end = bounds[at]
            at += 1
        member = block[begin:end]
        if keep(member):
            continue
        if _in_doubt(block, begin, member):
            return None
        pieces += [block[kept_from:begin], indent + "pass" + "\n" * member.count("\n")]
        kept_from = end
    if not pieces:
        return block
    pieces.append(block[kept_from:])
    return "".join(pieces)
