"""The python and gpu check packages have the house's shape: each finding is built from its code object (no
`Finding(` and no id spelled in a string), no private name crosses a module, no import circle inside a package,
and each package's codes.py holds one constant per id, which its check classes list."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from dflash_doctor.check import Check
from dflash_doctor.codes import Code

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("python", "gpu")


def modules(package: str) -> dict[str, ast.Module]:
    folder = ROOT / "dflash_doctor" / "checks" / package
    return {path.stem: ast.parse(path.read_text(), str(path)) for path in sorted(folder.glob("*.py"))}


@pytest.mark.parametrize("package", PACKAGES)
def test_every_finding_is_built_from_its_code_object(package: str) -> None:
    table = importlib.import_module(f"dflash_doctor.checks.{package}.codes")
    ids = {code.id for code in table.CODES}
    found = []
    for name, tree in modules(package).items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Finding":
                found.append(f"{name}.py:{node.lineno}: Finding(")
            if isinstance(node, ast.keyword) and node.arg == "id" and isinstance(node.value, ast.JoinedStr):
                found.append(f"{name}.py:{node.lineno}: id=f\"...\"")
            if name != "codes" and isinstance(node, ast.Constant) and node.value in ids:
                found.append(f"{name}.py:{node.lineno}: {node.value!r} spelled as a string")
    assert found == []


@pytest.mark.parametrize("package", PACKAGES)
def test_no_private_name_is_imported_across_modules_and_no_module_imports_its_package(package: str) -> None:
    prefix = f"dflash_doctor.checks.{package}"
    found = []
    for name, tree in modules(package).items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dflash_doctor"):
                found += [f"{name}.py: {node.module}.{alias.name}" for alias in node.names
                          if alias.name.startswith("_")]
                if node.module == prefix:
                    found.append(f"{name}.py imports its own package's __init__")
    assert found == []


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circle_between_the_modules_of_a_package(package: str) -> None:
    prefix = f"dflash_doctor.checks.{package}."
    trees = modules(package)
    edges = {name: {node.module[len(prefix):] for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(prefix)}
             for name, tree in trees.items()}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for step in edges.get(start, ()):
            if step == goal or (step not in seen and reaches(step, goal, seen | {step})):
                return True
        return False

    assert [name for name in edges if reaches(name, name, {name})] == []


@pytest.mark.parametrize("package", PACKAGES)
def test_codes_py_holds_one_constant_per_id_and_each_check_lists_the_codes_of_its_id(package: str) -> None:
    table = importlib.import_module(f"dflash_doctor.checks.{package}.codes")
    constants = {value.id: value for value in vars(table).values() if isinstance(value, Code)}
    assert set(constants.values()) == set(table.CODES) and len(table.CODES) == len(constants)
    checks = [value for name, value in vars(importlib.import_module(f"dflash_doctor.checks.{package}")).items()
              if name.endswith("Check") and isinstance(value, type) and value is not Check]
    listed = [code.id for check in checks for code in check.codes]
    assert sorted(listed) == sorted(code.id for code in table.CODES)  # each code under exactly one check
    for check in checks:
        assert check.codes and all(code.id.startswith(check.id + ".") for code in check.codes), check.id
