"""Writes the JSON report to a file, or to stdout for `-`.

The report is strict JSON (RFC 8259): a float that is NaN or infinite, which Python's json would write as
the bare words NaN/Infinity that no strict reader (`dflash-doctor judge` included) accepts, is written as
null. Checks turn such values into findings before this (the live check's `live.counters-invalid`); this is
the last guard, so that no report the doctor writes is refused when it is read back.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from typing import Any

from dflash_doctor.documents import writer

__all__ = ["dumps", "finite", "write"]


def finite(value: Any) -> Any:
    """`value` with every NaN or infinite float in it (in dicts, lists and tuples) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def dumps(report: Mapping[str, Any]) -> str:
    """The report as strict JSON text (indented, a final newline)."""
    try:
        text = json.dumps(report, indent=2, sort_keys=False, default=str, allow_nan=False)
    except ValueError:  # an out-of-range float somewhere
        text = json.dumps(finite(report), indent=2, sort_keys=False, default=str, allow_nan=False)
    return text + "\n"


def write(report: Mapping[str, Any], destination: str) -> None:
    text = dumps(report)
    if destination == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        writer.replace(destination, text, writer.JSON_DOCUMENT)
