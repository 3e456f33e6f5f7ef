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

A run holds each section as its collector returned it: an instance of its shape (`Shape.collected` reads a probe's
JSON into it), or a `SectionFailure` when its collector failed. JSON is read and written at one boundary, here:
`section_json` gives a section's JSON form (what the report saves), `section_of_json` reads one back (a saved
report's facts, a plugin's process, a third-party collector's plain mapping); only these two know how a failure
is written in JSON.
"""

from __future__ import annotations

import contextlib
import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, Union

__all__ = ["Collected", "SectionFailure", "Shape", "ShapeError", "by_section", "dump", "frozen_dataclass", "load",
           "section_json", "section_of_json", "undeclared_keys"]

S = TypeVar("S", bound="Shape")
T = TypeVar("T")


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
    def collected(cls: type[S], data: Any) -> S:  # noqa: PYI019 - typing.Self is 3.11+
        """A collector's JSON (a probe's document, with what the collector adds) read into this shape, which
        remembers the keys it was given, in their order, and the values of any it does not declare: the report
        writes the section back as it was collected (`section_json`), not with the defaults of the keys it left
        out. ShapeError as `from_json`."""
        value: S = load(cls, data, cls.SECTION or cls.__name__, keep=True)
        return value

    @classmethod
    def read(cls: type[S], data: Any) -> S | None:  # noqa: PYI019 - typing.Self is 3.11+
        """The section read through this shape where reading it is optional (a renderer, a comparison, a
        collector's earlier sections): None when it is missing, failed to collect, or not of this shape."""
        if isinstance(data, cls):
            return data
        data = section_of_json(cls.SECTION, data)
        if data is None or isinstance(data, SectionFailure):
            return None
        try:
            return cls.from_json(section_json(data) if isinstance(data, Shape) else data)
        except ShapeError:
            return None

    def to_json(self) -> Any:
        return dump(self)


def _frozen_dataclass(cls: type[T]) -> type[T]:
    """`@dataclass(frozen=True)` at a fraction of its cost when the class is made.

    The doctor declares some 300 frozen dataclasses (250 of them shapes) and starts as a process of its own for
    every run; `dataclasses` writes and compiles each class's __init__, __repr__, __eq__, __hash__, __setattr__ and
    __delattr__ when the class is made (a millisecond a class on a 2-core machine: a quarter of the doctor's start),
    though a run makes instances of a few dozen of them. Here `dataclasses` still reads the fields
    (dataclasses.fields, replace and asdict work as before); equality, hashing, repr and the refusal to assign are
    functions shared by every class, reading the fields; __init__ is written (as `dataclasses` writes it) when the
    class is first instantiated. The type checker sees `dataclasses.dataclass` itself (`frozen_dataclass` below)."""
    # Over a frozen dataclass (another of these) dataclasses must be told frozen, and then writes the two refusals
    frozen_base = any(getattr(getattr(base, "__dataclass_params__", None), "frozen", False) for base in cls.__mro__[1:])
    undocumented = not cls.__dict__.get("__doc__")
    if undocumented:  # else dataclasses writes one from inspect.signature (tokenize's patterns compiled at first use)
        type.__setattr__(cls, "__doc__", cls.__name__)
    dataclasses.dataclass(cls, init=False, repr=False, eq=False, frozen=frozen_base)
    fields = tuple(dataclasses.fields(cls))  # type: ignore[arg-type]  # a dataclass since the line above
    declared = vars(cls).get("__dataclass_fields__", {})
    if any(f.kw_only is True for f in fields) or any(
            getattr(f, "_field_type", None) is getattr(dataclasses, "_FIELD_INITVAR", object())
            for f in declared.values()):
        raise TypeError(f"{cls.__qualname__}: frozen_dataclass takes no kw_only or InitVar fields")
    defaulted = ""
    for f in fields:
        if not f.init:
            continue
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            defaulted = f.name
        elif defaulted:
            raise TypeError(f"non-default argument {f.name!r} follows default argument {defaulted!r}")
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    with contextlib.suppress(AttributeError):  # what a dataclass deriving from this one reads: frozen, with all three
        params.init = params.repr = params.eq = params.frozen = True
    names = tuple(f.name for f in fields)
    if undocumented:  # as dataclasses words it, without the annotations
        type.__setattr__(cls, "__doc__", f"{cls.__name__}({', '.join(f.name for f in fields if f.init)})")
    compared = tuple(f.name for f in fields if f.compare)
    hashed = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))
    shown = tuple(f.name for f in fields if f.repr)
    own = cls.__dict__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        init = _written_init(cls, fields)
        type.__setattr__(cls, "__init__", init)
        init(self, *args, **kwargs)

    def __repr__(self: Any) -> str:
        return f"{type(self).__qualname__}({', '.join(f'{n}={getattr(self, n)!r}' for n in shown)})"

    def __eq__(self: Any, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return tuple(getattr(self, n) for n in compared) == tuple(getattr(other, n) for n in compared)

    def __hash__(self: Any) -> int:
        return hash(tuple(getattr(self, n) for n in hashed))

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        object.__setattr__(self, name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        object.__delattr__(self, name)

    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    methods: dict[str, Any] = {"__init__": __init__, "__repr__": __repr__, "__eq__": __eq__,
                               "__setattr__": __setattr__, "__delattr__": __delattr__}
    for name, method in methods.items():
        if name not in own:
            method.__qualname__ = f"{cls.__qualname__}.{name}"
            type.__setattr__(cls, name, method)
    if not explicit_hash:
        __hash__.__qualname__ = f"{cls.__qualname__}.__hash__"
        type.__setattr__(cls, "__hash__", __hash__)
    if "__match_args__" not in own:
        type.__setattr__(cls, "__match_args__", names)
    return cls


def _written_init(cls: type, fields: tuple[dataclasses.Field[Any], ...]) -> Callable[..., None]:
    """The __init__ `dataclasses` writes for a frozen class of these fields (all init fields, in order)."""
    scope: dict[str, Any] = {"__set": object.__setattr__, "__factory": _FACTORY}
    params, body = [], []
    for i, f in enumerate(fields):
        made = f.default_factory is not dataclasses.MISSING
        given = f.default is not dataclasses.MISSING
        scope[f"__d{i}"] = f.default_factory if made else f.default
        default = f"__d{i}()" if made else f"__d{i}" if given else None
        if f.init:
            params.append(f"{f.name}=__factory" if made else f"{f.name}=__d{i}" if given else f.name)
            value = f"{default} if {f.name} is __factory else {f.name}" if made else f.name
        elif default is not None:
            value = default
        else:
            continue
        body.append(f"__set(self, {f.name!r}, {value})")
    if hasattr(cls, "__post_init__"):
        body.append("self.__post_init__()")
    text = f"def __init__(self, {', '.join(params)}):\n" + "".join(f" {line}\n" for line in body or ["pass"])
    exec(text, scope)  # noqa: S102 - text made here from the class's own field names, as `dataclasses` does
    init: Callable[..., None] = scope["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


_FACTORY = object()  # the default of a field made by a factory: a fresh value for each instance


if TYPE_CHECKING:
    from dataclasses import dataclass as frozen_dataclass
else:  # the type checker reads the line above: each class is a frozen dataclass to it
    def frozen_dataclass(cls=None, /, *, frozen):
        """`@frozen_dataclass(frozen=True)`, for every frozen dataclass of the doctor (`_frozen_dataclass`)."""
        if not frozen:
            raise TypeError("frozen_dataclass makes frozen classes only")
        return _frozen_dataclass if cls is None else _frozen_dataclass(cls)


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


def load(tp: Any, data: Any, section: str, where: str = "", keep: bool = False) -> Any:
    """`data` checked against the type `tp` (a `Shape` becomes an instance of it; one that is one already stays as
    it is). `keep`: each shape read remembers the keys it was given (`Shape.collected`)."""
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
                return load(present[0], data, section, where, keep)
            except ShapeError as exc:
                if exc.where != where:
                    raise
                raise ShapeError(section, where, f"expected {_name(tp)}, found {_json_type(data)}") from None
        for arg in args:
            try:
                return load(arg, data, section, where, keep)
            except ShapeError:
                continue
        raise ShapeError(section, where, f"expected {_name(tp)}, found {_json_type(data)}")
    if origin is list:
        (item,) = args or (Any,)
        if not isinstance(data, list):
            raise ShapeError(section, where, f"expected a list, found {_json_type(data)}")
        if item in _LEAVES and all(map(_LEAVES[item], data)):  # a list of strings (a RECORD's files): one pass
            return list(data)
        return [load(item, value, section, f"{where}[{i}]", keep) for i, value in enumerate(data)]
    if origin in (dict, Mapping):
        _, item = args or (str, Any)
        if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
            raise ShapeError(section, where, f"expected an object, found {_json_type(data)}")
        if item in _LEAVES and all(map(_LEAVES[item], data.values())):
            return dict(data)
        return {k: load(item, value, section, f"{where}.{k}" if where else k, keep) for k, value in data.items()}
    if isinstance(tp, type) and issubclass(tp, Shape):
        if isinstance(data, tp):
            return data
        return _load_shape(tp, data, section, where, keep)
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


# The keys a shape read by `Shape.collected` was given, in their order, and the values of those it does not declare
# (a probe newer than its shape; tests/test_fact_shapes.py holds the real ones to none): attributes of the instance,
# not fields, so equality and `dataclasses.replace` ignore them. The key tuples are shared: a section's thousand
# distributions were written with a handful of distinct key orders.
_KEPT = "_collected_keys"
_UNDECLARED = "_collected_undeclared"
_KEY_ORDERS: dict[tuple[str, ...], tuple[str, ...]] = {}
_ATTRIBUTES: dict[type, dict[str, str]] = {}


def _attributes(cls: type[Shape]) -> dict[str, str]:
    """{JSON key: attribute} of `cls`, worked out once per class."""
    known = _ATTRIBUTES.get(cls)
    if known is None:
        known = _ATTRIBUTES[cls] = {name: attribute for attribute, name, _, _ in _fields(cls)}
    return known


def _load_shape(cls: type[Shape], data: Any, section: str, where: str, keep: bool = False) -> Shape:
    if cls.WHOLE:
        return cls(**{cls.WHOLE: load(_hints(cls)[cls.WHOLE], data, section, where, keep)})
    if not isinstance(data, dict):
        raise ShapeError(section, where, f"expected an object, found {_json_type(data)}")
    values: dict[str, Any] = {}
    for attribute, name, hint, required in _fields(cls):
        if name in data:
            values[attribute] = load(hint, data[name], section, f"{where}.{name}" if where else name, keep)
        elif required:
            raise ShapeError(section, f"{where}.{name}" if where else name, "missing")
    loaded = cls(**values)
    if keep:
        keys = tuple(data)
        object.__setattr__(loaded, _KEPT, _KEY_ORDERS.setdefault(keys, keys))
        declared = _attributes(cls)
        if len(declared) < len(keys) or not all(key in declared for key in keys):
            object.__setattr__(loaded, _UNDECLARED, {k: v for k, v in data.items() if k not in declared})
    return loaded


_SCALARS = frozenset({str, int, float, bool, type(None)})


def dump(value: Any, as_collected: bool = False) -> Any:
    """The JSON form of a loaded value (what `load` read, for the keys the shapes declare): every field of a
    shape, in its declared order; `as_collected`, a shape read by `Shape.collected` has the keys it was given,
    in their order (those it does not declare with their values as given)."""
    if isinstance(value, Shape):
        if value.WHOLE:
            return dump(getattr(value, value.WHOLE), as_collected)
        kept: tuple[str, ...] | None = getattr(value, _KEPT, None) if as_collected else None
        if kept is not None:
            attributes = _attributes(type(value))
            undeclared: dict[str, Any] = getattr(value, _UNDECLARED, {})
            return {key: dump(getattr(value, attributes[key]) if key in attributes else undeclared[key], as_collected)
                    for key in kept}
        return {field.metadata.get("key", field.name): dump(getattr(value, field.name), as_collected)
                for field in dataclasses.fields(value)}  # type: ignore[arg-type]
    if isinstance(value, list):
        return [v if type(v) in _SCALARS else dump(v, as_collected) for v in value]
    if isinstance(value, dict):
        return {k: v if type(v) in _SCALARS else dump(v, as_collected) for k, v in value.items()}
    return value


def undeclared_keys(value: Any, where: str = "") -> list[str]:
    """Where a value read by `Shape.collected` was given keys its shapes do not declare ("models.target.x")."""
    found: list[str] = []
    if isinstance(value, Shape):
        found += [f"{where}.{key}" if where else key for key in getattr(value, _UNDECLARED, {})]
        if value.WHOLE:
            return found + undeclared_keys(getattr(value, value.WHOLE), where)
        for field in dataclasses.fields(value):  # type: ignore[arg-type]
            key = field.metadata.get("key", field.name)
            found += undeclared_keys(getattr(value, field.name), f"{where}.{key}" if where else key)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            if type(item) not in _SCALARS:
                found += undeclared_keys(item, f"{where}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            found += undeclared_keys(item, f"{where}.{key}" if where else str(key))
    return found


# ------------------------------------------------------------------------- a section as a run holds it


@dataclass(frozen=True)
class SectionFailure:
    """A section its collector could not collect, and why: held in the section's place, so that the checks
    that need it become `error` results naming it (`check.SectionError`) and the others judge as ever."""

    section: str
    reason: str
    traceback: str | None = None
    """Where the collector raised (its last frames), when it did."""


Collected = Mapping[str, Shape | SectionFailure]
"""What a built-in collector returns (`facts.sections.CollectFn`): {section: an instance of its shape, or why it
could not be collected}."""


# How a failed section is written in JSON (the report's facts, a plugin's request), read back by section_of_json.
_ERROR = "_error"
_TRACEBACK = "_traceback"


def section_json(value: Any) -> Any:
    """A section's JSON form: a failure as {"_error": why, "_traceback": where} (the traceback when there is
    one), a shape as it was collected (`dump(..., as_collected=True)`), anything else (a saved report's or a
    third-party collector's JSON) as it is."""
    if isinstance(value, SectionFailure):
        marker: dict[str, Any] = {_ERROR: value.reason}
        if value.traceback is not None:
            marker[_TRACEBACK] = value.traceback
        return marker
    if isinstance(value, Shape):
        return dump(value, as_collected=True)
    return value


def section_of_json(section: str, data: Any) -> Any:
    """The section `section` read from JSON: a failure's marker becomes the `SectionFailure` it stands for;
    anything else stays as it is (read through its shape when something asks for it)."""
    if isinstance(data, dict) and _ERROR in data:
        where = data.get(_TRACEBACK)
        return SectionFailure(section, str(data[_ERROR]), where if isinstance(where, str) else None)
    return data


def by_section(*sections: Shape) -> dict[str, Shape | SectionFailure]:
    """A collector's sections, each an instance of its shape, by their shapes' `SECTION`."""
    return {type(section).SECTION: section for section in sections}
