"""The one way the doctor parses Python source (vLLM's files, a guard's test, a --speculative-config written as a
Python literal): `parse_module` and `parse_expression`, one parse at a time in the process.

Two things every caller gets from here:

- Any refusal of CPython's parser is one exception, `SourceError`, whose message is one line: a `SyntaxError`
  (an `IndentationError` past 100 levels, "too many nested parentheses"), a `ValueError` (a null byte), a
  `RecursionError` or a `MemoryError` (an expression nested thousands deep: `x = ------...1` with 6,000 signs
  makes CPython 3.11's parser give up with a `MemoryError` while the machine has memory to spare), or a
  `SystemError`. A file the doctor cannot parse is then a fact about that file, never the end of a scan.
- Parses never overlap: CPython 3.11's AST constructor keeps its recursion depth in a per-interpreter counter,
  so two threads parsing at once can fail with "AST constructor recursion depth mismatch" (SystemError,
  cpython#106905). The collectors run side by side in threads; the lock makes them take turns.
"""

from __future__ import annotations

import ast
import threading

__all__ = ["SourceError", "parse_expression", "parse_module"]

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
