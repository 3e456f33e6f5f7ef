"""Reading the doctor's own JSON documents (reports, baselines): every way one can be unusable is an
error that names the file, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["load_document"]


def load_document(path: str, schema: str, kind: str, error: type[Exception], hint: str = "") -> dict[str, Any]:
    """The JSON object in `path` whose "schema" is `schema`; `error(message)` otherwise."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path}: cannot read the {kind} ({getattr(exc, 'strerror', None) or exc})") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from exc
    if not isinstance(data, dict) or data.get("schema") != schema:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise error(f"{path}: not a dflash-doctor {kind} (schema {found!r}, expected {schema!r}){hint}")
    return data
