"""Reading the doctor's own JSON documents (reports, baselines) and the files a user points it at: every
way one can be unusable is an error that names the file, never a traceback, and nothing can make it hang.

- `read_text`: only a regular file is read (a FIFO, a directory or a device is named as such; opening
  never blocks), with a size bound; a name the system rejects (too long, say) is an error like any other.
- `parse_json`: JSON as RFC 8259 has it (no NaN or Infinity, no number that overflows to one), integers
  of at most `MAX_INT_DIGITS` digits, nesting at most `MAX_DEPTH` deep and at most `MAX_VALUES` values, so that
  nothing read later (validation, judging, redaction, writing it out again) can run out of stack, memory or
  time: 16 MB of `[{},{},...]` is five million objects, 0.8 GB once parsed.
- `load_document`: the above, then the document's "schema" and its shape against the shipped JSON
  Schema (`dflash_doctor.documents.docschema`); code that reads a loaded document relies on that shape.
"""

from __future__ import annotations

import gc
import json
import math
import os
import stat
from typing import Any

from dflash_doctor.documents.docschema import first_error, load_schema

__all__ = ["MAX_BYTES", "MAX_DEPTH", "MAX_INT_DIGITS", "MAX_VALUES", "DocumentError", "check_document", "load_document", "parse_json",
           "read_text", "shown_path", "too_deep", "validate_document"]

MAX_DEPTH = 64
"""Deeper than any document the doctor writes (a report is 11 levels deep, a model config a few more)."""
MAX_INT_DIGITS = 100
"""No count, size or id the doctor reads has more digits (Python itself refuses 4,301 or more)."""
MAX_BYTES = 64 << 20
"""A report of a 300-distribution environment with every file hashed is a few MB."""
MAX_VALUES = 1_000_000
"""Objects, arrays and the members and elements in them, counted from the text before it is parsed (its commas
and opening brackets: an upper bound). A report of 164 distributions holds about 3,000; a saved report at the
bound (50,000 distributions) is judged and rendered again in under 0.5 GB."""
_SHOWN = 160


class DocumentError(ValueError):
    """JSON text that is not a usable document; the message says why (the caller names the file)."""


def shown_path(path: str) -> str:
    """A path as it goes into a one-line message: a name of 100,000 characters is shortened."""
    return path if len(path) <= _SHOWN else f"{path[:_SHOWN // 2]}...{path[-_SHOWN // 2:]} ({len(path)} characters)"


def read_text(path: str, what: str, error: type[Exception], max_bytes: int = MAX_BYTES) -> str:
    """The UTF-8 text of the regular file `path`; `error("PATH: cannot read the WHAT (why)")` otherwise."""
    shown = shown_path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        raise error(f"{shown}: cannot read the {what} ({getattr(exc, 'strerror', None) or exc})") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise error(f"{shown}: cannot read the {what} ({kind})")
        if info.st_size > max_bytes:
            raise error(f"{shown}: cannot read the {what} ({info.st_size} bytes, more than {max_bytes})")
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise error(f"{shown}: cannot read the {what} ({exc.strerror or exc})") from exc
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise error(f"{shown}: cannot read the {what} (more than {max_bytes} bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{shown}: cannot read the {what} (not UTF-8 text: {exc.reason} at byte {exc.start})") from exc


def _int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise DocumentError(f"an integer of {digits} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise DocumentError(f"the number {text[:40]} is out of range")
    return value


def _constant(name: str) -> Any:
    raise DocumentError(f"{name} is not JSON")


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether JSON data `value` nests dicts and lists more than `limit` deep (`{}` is 1 deep); no recursion."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            if depth > limit:
                return True
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def parse_json(text: str, max_values: int = MAX_VALUES) -> Any:
    """The JSON value in `text`; DocumentError (the message says where or why) otherwise. `max_values`: for a
    document whose own bound is counted otherwise (a model's index, by its names)."""
    values = text.count(",") + text.count("{") + text.count("[")
    if values > max_values:
        raise DocumentError(f"not usable JSON: up to {values} values, more than the {max_values} read")
    collecting = gc.isenabled()
    gc.disable()  # millions of new containers would start a collection every few hundred
    try:
        value = json.loads(text, parse_int=_int, parse_float=_float, parse_constant=_constant)
    except json.JSONDecodeError as exc:
        raise DocumentError(f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from exc
    except DocumentError as exc:
        raise DocumentError(f"not usable JSON: {exc}") from exc
    except RecursionError as exc:
        raise DocumentError(f"not usable JSON: nested deeper than {MAX_DEPTH} levels") from exc
    except ValueError as exc:  # what else the number conversions raise
        raise DocumentError(f"not usable JSON: {exc}") from exc
    finally:
        if collecting:
            gc.enable()
    if too_deep(value):
        raise DocumentError(f"not usable JSON: nested deeper than {MAX_DEPTH} levels")
    return value


def load_document(path: str, schema: str, kind: str, error: type[Exception], hint: str = "") -> dict[str, Any]:
    """The JSON object in `path` whose "schema" is `schema` and whose shape follows the shipped schema file
    of that name; `error(message)` otherwise."""
    text = read_text(path, kind, error)
    return check_document(text, path, schema, kind, error, hint)


def check_document(text: str, source: str, schema: str, kind: str, error: type[Exception],
                   hint: str = "") -> dict[str, Any]:
    shown = shown_path(source)
    try:
        data = parse_json(text)
    except DocumentError as exc:
        raise error(f"{shown}: {exc}") from exc
    return validate_document(data, shown, schema, kind, error, hint)


def validate_document(data: Any, shown: str, schema: str, kind: str, error: type[Exception],
                      hint: str = "") -> dict[str, Any]:
    """`data` itself (already parsed, e.g. received from another node) checked as `load_document` does."""
    if not isinstance(data, dict) or data.get("schema") != schema:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        if isinstance(found, str):
            found = found[:80]
        elif not isinstance(found, (int, float, bool, type(None))):
            found = type(found).__name__
        raise error(f"{shown}: not a dflash-doctor {kind} (schema {found!r}, expected {schema!r}){hint}")
    if too_deep(data):
        raise error(f"{shown}: not a usable {kind}: nested deeper than {MAX_DEPTH} levels")
    problem = first_error(data, load_schema(schema.split("/", 1)[1].replace("/", "-")))
    if problem is not None:
        raise error(f"{shown}: not a valid dflash-doctor {kind}: {problem}")
    return data
