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


def without_blocks(text: str, keep: Callable[[str], bool]) -> str | None:
    """`text` with the lines of every top-level function and class (its decorators included) blanked unless
    `keep(block)`, line numbers kept: what runs at module level and the blocks kept parse as they stand. None when
    the cut is in doubt (a blanked stretch holds an odd number of triple quotes: it may start or end a string): the
    caller then parses the whole text. A refusal of the parser inside a blanked block is not seen."""
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
            continue
        if (block.count('"""') + block.count("'''")) % 2:
            return None
        pieces += [text[kept_from:begin], "\n" * block.count("\n")]
        kept_from = end
    pieces.append(text[kept_from:])
    return "".join(pieces)
