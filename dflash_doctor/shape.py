"""The declared shape of a fact section, checked when facts are read.

Each section a collector provides has one shape: a frozen dataclass deriving from `Shape`, declared in
the `*_shapes.py` module next to its collector and named in its collector's row (`facts.sections`). Fields
are typed with what JSON gives (str, int, float, bool, None, list[...], dict[str, ...], another shape,
`Any` for free-form data such as evidence); `from_json` checks the data against them and raises
`ShapeError` naming the section and the field. Keys the shape does not declare are ignored (a newer
doctor's report still loads); a key that is absent takes the field's default (an older report's).

    @dataclass(frozen=True)
    class Target(Shape):
        SECTION: ClassVar[str] = "target"
        executable: str = ""
        python_version: str | None = None

A key that is not a Python name is declared with `field(default=..., metadata={"key": "import"})`.
A section whose JSON is a list or a map (not an object of named fields) declares one field and names it
in `WHOLE`; `from_json` and `to_json` then read and write that field's value as the whole section.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar, Union

__all__ = ["Shape", "ShapeError", "dump", "load"]

S = TypeVar("S", bound="Shape")


class ShapeError(ValueError):
    """Facts that do not have their section's declared shape; the message names the section and field."""

    def __init__(self, section: str, where: str, problem: str) -> None:
        super().__init__(f"facts {section!r} are malformed: {where or 'the section'}: {problem}")
        self.section = section
        self.where = where
        self.problem = problem


class Shape:
    """Base of every section's shape (and of the shapes nested in it)."""

    SECTION: ClassVar[str] = ""
    """The fact section this shape declares ("" for a part of one)."""
    WHOLE: ClassVar[str] = ""
    """The field that holds the whole section, for a section that is a list or a map."""

    @classmethod
    def from_json(cls: type[S], data: Any, section: str = "") -> S:  # noqa: PYI019 - typing.Self is 3.11+
        value: S = load(cls, data, section or cls.SECTION or cls.__name__)
        return value

    @classmethod
    def read(cls: type[S], data: Any) -> S | None:  # noqa: PYI019 - typing.Self is 3.11+
        """The section read through this shape where reading it is optional (a renderer, a comparison): None
        when it is missing, its collector's error marker, or not of this shape."""
        if data is None or (isinstance(data, dict) and "_error" in data):
            return None
        try:
            return cls.from_json(data)
        except ShapeError:
            return None

    def to_json(self) -> Any:
        return dump(self)


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"a number ({value!r})"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _name(tp: Any) -> str:
    if tp is type(None):
        return "null"
    if isinstance(tp, type):
        return {"str": "a string", "int": "an integer", "float": "a number", "bool": "a boolean",
                "list": "a list", "dict": "an object"}.get(tp.__name__, "an object")
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return " or ".join(_name(arg) for arg in typing.get_args(tp))
    return _name(origin) if origin is not None else str(tp)


# The leaf types a shape declares, and what JSON value each takes (a bool is no number).
_LEAVES: dict[Any, Callable[[Any], bool]] = {
    str: lambda data: isinstance(data, str),
    int: lambda data: isinstance(data, int) and not isinstance(data, bool),
    float: lambda data: isinstance(data, (int, float)) and not isinstance(data, bool),
    bool: lambda data: isinstance(data, bool),
    type(None): lambda data: data is None,
}
_GENERICS: dict[Any, tuple[Any, tuple[Any, ...]]] = {}


def _generic(tp: Any) -> tuple[Any, tuple[Any, ...]]:
    """`tp`'s origin and arguments (`list[str]`: list, (str,)), worked out once per type: a report's
    distributions section alone has a million nodes."""
    known = _GENERICS.get(tp)
    if known is None:
        known = _GENERICS[tp] = (typing.get_origin(tp), typing.get_args(tp))
    return known


def load(tp: Any, data: Any, section: str, where: str = "") -> Any:
    """`data` checked against the type `tp` (a `Shape` becomes an instance of it)."""
    leaf = _LEAVES.get(tp)
    if leaf is not None:
        if leaf(data):
            return data
        raise ShapeError(section, where, f"expected {_name(tp)}, found {_json_type(data)}")
    if tp is Any or tp is object:
        return data
    origin, args = _generic(tp)
    if origin in (Union, types.UnionType):
        present = [arg for arg in args if arg is not type(None)]
        if data is not None and len(present) == 1:  # `X | None`: X's own error names the field inside
            try:
                return load(present[0], data, section, where)
            except ShapeError as exc:
                if exc.where != where:
                    raise
                raise ShapeError(section, where, f"expected {_name(tp)}, found {_json_type(data)}") from None
        for arg in args:
            try:
                return load(arg, data, section, where)
            except ShapeError:
                continue
        raise ShapeError(section, where, f"expected {_name(tp)}, found {_json_type(data)}")
    if origin is list:
        (item,) = args or (Any,)
        if not isinstance(data, list):
            raise ShapeError(section, where, f"expected a list, found {_json_type(data)}")
        if item in _LEAVES and all(map(_LEAVES[item], data)):  # a list of strings (a RECORD's files): one pass
            return list(data)
        return [load(item, value, section, f"{where}[{i}]") for i, value in enumerate(data)]
    if origin in (dict, Mapping):
        _, item = args or (str, Any)
        if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
            raise ShapeError(section, where, f"expected an object, found {_json_type(data)}")
        if item in _LEAVES and all(map(_LEAVES[item], data.values())):
            return dict(data)
        return {k: load(item, value, section, f"{where}.{k}" if where else k) for k, value in data.items()}
    if isinstance(tp, type) and issubclass(tp, Shape):
        return _load_shape(tp, data, section, where)
    raise TypeError(f"{tp!r} is not a type a fact shape can declare")


_FIELDS: dict[type, list[tuple[str, str, Any, bool]]] = {}


def _fields(cls: type[Shape]) -> list[tuple[str, str, Any, bool]]:
    """(attribute, JSON key, type, required) of each field of `cls`, worked out once per class."""
    known = _FIELDS.get(cls)
    if known is None:
        hints = _hints(cls)
        known = _FIELDS[cls] = [
            (field.name, field.metadata.get("key", field.name), hints[field.name],
             field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING)
            for field in dataclasses.fields(cls)]  # type: ignore[arg-type]
    return known


def _load_shape(cls: type[Shape], data: Any, section: str, where: str) -> Shape:
    if cls.WHOLE:
        return cls(**{cls.WHOLE: load(_hints(cls)[cls.WHOLE], data, section, where)})
    if not isinstance(data, dict):
        raise ShapeError(section, where, f"expected an object, found {_json_type(data)}")
    values: dict[str, Any] = {}
    for attribute, name, hint, required in _fields(cls):
        if name in data:
            values[attribute] = load(hint, data[name], section, f"{where}.{name}" if where else name)
        elif required:
            raise ShapeError(section, f"{where}.{name}" if where else name, "missing")
    return cls(**values)


def dump(value: Any) -> Any:
    """The JSON form of a loaded value (what `load` read, for the keys the shapes declare)."""
    if isinstance(value, Shape):
        if value.WHOLE:
            return dump(getattr(value, value.WHOLE))
        return {field.metadata.get("key", field.name): dump(getattr(value, field.name))
                for field in dataclasses.fields(value)}  # type: ignore[arg-type]
    if isinstance(value, list):
        return [dump(v) for v in value]
    if isinstance(value, dict):
        return {k: dump(v) for k, v in value.items()}
    return value
