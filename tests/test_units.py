"""One GiB and one way to print it, for every check and view that shows a size."""

from __future__ import annotations

import ast
from pathlib import Path

from dflash_doctor.units import GIB, gib

PACKAGE = Path(__file__).resolve().parent.parent / "dflash_doctor"


def test_gib_is_defined_in_units_only() -> None:
    defined = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, ast.AnnAssign) else []
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            defined += [f"{path.relative_to(PACKAGE)}:{name}" for name in names if name.strip("_") == "GIB"]
            if isinstance(node, ast.FunctionDef) and node.name.strip("_") == "gib":
                defined.append(f"{path.relative_to(PACKAGE)}:{node.name}()")
    assert defined == ["units.py:GIB", "units.py:gib()"]


def test_the_formatter_prints_what_the_views_printed() -> None:
    assert GIB == 1 << 30
    assert gib(None) == "?"
    assert gib(150_754_820_096) == "140.4 GiB"  # an H200's total, as NVML reports it (fixtures/gpu)
    assert gib(3 * GIB // 2, digits=2) == "1.50 GiB"
    assert gib(80 * GIB, digits=0) == "80 GiB"
