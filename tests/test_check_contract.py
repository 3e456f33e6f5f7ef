"""The check contract (`dflash_doctor.check.Check`): every built-in check subclasses the one declared base, sets
only what differs from its defaults, and its `judge` reads only the fact sections it declares (`needs`, `wants`):
what the runner collects for a check is what the check reads, so a saved report can be judged again."""

from __future__ import annotations

import ast
import contextlib
import inspect
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from dflash_doctor.check import Check, Facts
from dflash_doctor.facts.sections import SECTION_SHAPES
from dflash_doctor.registry import BUILTIN_CHECKS
from dflash_doctor.report.document import sections_of

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
REQUIRED = ("id", "layer", "title", "needs")


def test_every_builtin_check_subclasses_the_base_and_repeats_none_of_its_defaults() -> None:
    defaults = {name: getattr(Check, name) for name in ("wants", "after", "requires_gpu", "on_request",
                                                        "judged_apart", "codes")}
    for cls in BUILTIN_CHECKS:
        assert issubclass(cls, Check), cls
        assert all(name in vars(cls) for name in REQUIRED), (cls, [n for n in REQUIRED if n not in vars(cls)])
        repeated = [name for name, value in defaults.items() if name in vars(cls) and vars(cls)[name] == value]
        assert not repeated, f"{cls.__name__} repeats the base's defaults: {repeated}"
        assert cls.codes, f"{cls.__name__} declares no finding codes"


def test_the_base_documents_every_attribute_it_declares() -> None:
    declared = [name for name in Check.__annotations__]
    doc = inspect.getdoc(Check) or ""
    assert sorted(declared) == sorted({*REQUIRED, "wants", "after", "requires_gpu", "on_request", "judged_apart",
                                       "codes"})
    assert all(f"`{name}`" in doc for name in declared), [n for n in declared if f"`{n}`" not in doc]
    for page in ("docs/plugins.md", "docs/how-it-works.md"):
        text = (ROOT / page).read_text()
        assert all(f"`{name}`" in text for name in declared), (page, [n for n in declared if f"`{n}`" not in text])


def test_the_run_reads_a_check_only_through_the_base() -> None:
    """No `getattr(check, ...)` outside the guest validation (`guest.py`), where a third-party
    object, not yet known to be a check, is read."""
    for path in sorted((ROOT / "dflash_doctor").rglob("*.py")):
        if path.name == "guest.py" or "probes" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
                    and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in ("check", "c", "cls", "plugin"):
                pytest.fail(f"{path.relative_to(ROOT)}:{node.lineno} reads a check by getattr")


def test_each_check_names_only_sections_a_collector_provides_with_a_shape() -> None:
    for cls in BUILTIN_CHECKS:
        unknown = (set(cls.needs) | set(cls.wants)) - set(SECTION_SHAPES)
        assert not unknown, f"{cls.__name__} names sections no built-in collector provides: {sorted(unknown)}"
        assert not set(cls.needs) & set(cls.wants), cls


class _Reading(Facts):
    """Facts that note every section a check reads."""

    def __init__(self, sections: Mapping[str, Any]) -> None:
        super().__init__(sections)
        self.read: set[str] = set()

    def __getitem__(self, name: str) -> Any:
        self.read.add(name)
        return super().__getitem__(name)

    def optional(self, name: str) -> Any:
        self.read.add(name)
        return super().optional(name)

    def raw(self, name: str) -> Any:
        self.read.add(name)
        return super().raw(name)


def _reports(value: Any) -> Iterator[Mapping[str, Any]]:
    if isinstance(value, Mapping):
        if "schema" in value and isinstance(value.get("checks"), list):
            yield value
        for item in value.values():
            yield from _reports(item)
    elif isinstance(value, list):
        for item in value:
            yield from _reports(item)


SAVED = [(path, sections) for path in sorted(FIXTURES.rglob("*.json"))
         for sections in (sections_of(r) for r in _reports(json.loads(path.read_text()))) if sections]


def test_each_check_reads_only_the_sections_it_declares_on_every_saved_report() -> None:
    """Every built-in check judged over every saved report in fixtures/ (all their sections given): the sections
    it read are among its `needs` and `wants`."""
    judged: dict[str, int] = {}
    for path, sections in SAVED:
        for cls in BUILTIN_CHECKS:
            if not set(cls.needs) <= set(sections):
                continue
            facts = _Reading(sections)
            with contextlib.suppress(Exception):  # a section of another shape: what was read so far still counts
                list(cls().judge(facts))
            undeclared = facts.read - set(cls.needs) - set(cls.wants)
            assert not undeclared, f"{cls.__name__} read {sorted(undeclared)} on {path.relative_to(ROOT)}"
            judged[cls.id] = judged.get(cls.id, 0) + 1
    assert SAVED and len(judged) >= len(BUILTIN_CHECKS) - 2, sorted(judged)


def _sections_read(package: Path) -> dict[str, str]:
    """The sections the modules of a check package read, by name (`facts.section(Shape)`,
    `facts.optional_section(Shape)`, `facts["name"]`, `facts.optional("name")`, `facts.raw("name")`), each with
    where it is read."""
    by_class = {shape.__name__: name for name, shape in SECTION_SHAPES.items()}
    read: dict[str, str] = {}
    for path in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            name = None
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
                arg = node.args[0]
                if node.func.attr in ("section", "optional_section") and isinstance(arg, ast.Name):
                    name = by_class.get(arg.id)
                elif node.func.attr in ("optional", "raw") and isinstance(arg, ast.Constant):
                    name = arg.value if arg.value in SECTION_SHAPES else None
            elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "facts" \
                    and isinstance(node.slice, ast.Constant) and node.slice.value in SECTION_SHAPES:
                name = node.slice.value
            if name is not None:
                read.setdefault(name, f"{path.relative_to(ROOT)}:{node.lineno}")
    return read


def test_each_layer_reads_only_sections_its_checks_declare() -> None:
    """Read from the source, for the paths no saved report reaches (a check package with one check is held
    exactly; a package of several, to what its checks declare together)."""
    layers: dict[Path, set[str]] = {}
    for cls in BUILTIN_CHECKS:
        package = Path(inspect.getfile(cls)).parent
        layers.setdefault(package, set()).update(cls.needs, cls.wants)
    for package, declared in layers.items():
        undeclared = {name: where for name, where in _sections_read(package).items() if name not in declared}
        assert not undeclared, f"{package.name}: sections read that no check of it declares: {undeclared}"
