"""The environment probe reads a RECORD's lines as csv.reader reads them: its split of a plain RECORD (no quote,
carriage return or NUL) gives the same fields and line numbers on every RECORD installed here and on odd ones."""

from __future__ import annotations

import ast
import csv
import io
import sys
import sysconfig
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

PROBE = Path(__file__).resolve().parents[1] / "dflash_doctor" / "facts" / "probes" / "environment.py"


def _record_lines() -> Callable[[str], Iterable[tuple[int, list[str]]]]:
    """The probe's own function, taken from its source (the probe runs its main() when imported)."""
    tree = ast.parse(PROBE.read_text(encoding="utf-8"))
    (function,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "record_lines"]
    import typing

    namespace: dict[str, Any] = {"csv": csv, "io": io, **{n: getattr(typing, n) for n in ("Iterable", "List", "Tuple")}}
    exec(compile(ast.Module(body=[function], type_ignores=[]), str(PROBE), "exec"), namespace)  # noqa: S102
    return namespace["record_lines"]  # type: ignore[no-any-return]


def _as_csv_reads(text: str) -> list[tuple[int, list[str]]] | str:
    try:
        return [(n, row) for n, row in enumerate(csv.reader(io.StringIO(text)), 1) if row]
    except csv.Error as exc:
        return f"csv.Error: {exc}"


def _as_probe_reads(text: str) -> list[tuple[int, list[str]]] | str:
    try:
        return list(_record_lines()(text))
    except csv.Error as exc:
        return f"csv.Error: {exc}"


def test_every_installed_record_reads_as_csv_reads_it() -> None:
    sites = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *sys.path}
    records = sorted({p for s in sites if s and Path(s).is_dir() for p in Path(s).glob("*.dist-info/RECORD")})
    assert len(records) > 20
    for record in records:
        text = record.read_text(encoding="utf-8", errors="replace")
        assert _as_probe_reads(text) == _as_csv_reads(text), record


LONG = "x" * (csv.field_size_limit() + 1)


@pytest.mark.parametrize("text", [
    "", "\n", "a,b,c", "a,b,c\n", "a,b,c\n\n\nd,e,f\n", "a,b\nc,d,e\n", " \n", "a,,\n,,\n", "a,b,c,d\n",
    '"a,b",sha256=x,1\nc,d,e\n', 'a"b,c,d\n', "a,b,c\r\nd,e,f\r\n", "a,b,c\rd,e,f\n", "a\x00,b,c\n",
    f"{LONG},h,1\n", f"{LONG[:-1]},h,1\n", "a\u2028b,c,d\n", "a\x0bb,c,d\x1c\n", "é,ü,1\n",
    '"unterminated,b,c\nd,e,f\n', "a,b,c\nd,e\n\"x\n",
])
def test_an_odd_record_reads_as_csv_reads_it(text: str) -> None:
    assert _as_probe_reads(text) == _as_csv_reads(text)
