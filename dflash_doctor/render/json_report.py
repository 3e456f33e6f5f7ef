"""Writes the JSON report to a file, or to stdout for `-`."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def write(report: Mapping[str, Any], destination: str) -> None:
    text = json.dumps(report, indent=2, sort_keys=False, default=str) + "\n"
    if destination == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        Path(destination).write_text(text, encoding="utf-8")
