"""The shapes' classes (`shape.frozen_dataclass`) behave as `@dataclass(frozen=True)` classes do: the same fields,
constructor, equality, hash, repr, copies and refusals, for every shape the doctor declares and for a class of
each kind of field; only the cost of making the class differs."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from dataclasses import field
from typing import Any, ClassVar

import pytest

from dflash_doctor.facts.models import models_shapes
from dflash_doctor.facts.sections import SECTION_SHAPES
from dflash_doctor.shape import Shape, frozen_dataclass


@frozen_dataclass(frozen=True)
class Part(Shape):
    name: str
    size: int = 0


@frozen_dataclass(frozen=True)
class Whole(Shape):
    SECTION: ClassVar[str] = "whole"
    title: str
    parts: list[Part] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)
    ratio: float = 0.5
    hidden: str = field(default="x", repr=False, compare=False)


@dataclasses.dataclass(frozen=True)
class Reference:  # the same fields, made by dataclasses itself
    title: str
    parts: list[Part] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)
    ratio: float = 0.5
    hidden: str = field(default="x", repr=False, compare=False)


def test_a_shape_is_made_read_compared_and_refused_as_a_frozen_dataclass() -> None:
    whole = Whole("w", [Part("a", 1)], ratio=2.0)
    reference = Reference("w", [Part("a", 1)], ratio=2.0)
    assert [f.name for f in dataclasses.fields(whole)] == [f.name for f in dataclasses.fields(reference)]
    assert repr(whole) == repr(reference).replace("Reference", "Whole")
    assert repr(Part("a")) == "Part(name='a', size=0)"
    assert whole == Whole("w", [Part("a", 1)], ratio=2.0, hidden="other")  # hidden is not compared
    assert whole != Whole("w", [Part("a", 2)], ratio=2.0) and whole != reference
    assert hash(Part("a", 1)) == hash(Part("a", 1)) and len({Part("a", 1), Part("a", 1), Part("b")}) == 2
    with pytest.raises(TypeError):
        hash(whole)  # a list field, as with dataclasses
    assert Whole("x").parts is not Whole("x").parts  # each instance its own default
    with pytest.raises(dataclasses.FrozenInstanceError):
        whole.title = "v"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del whole.title  # type: ignore[misc]
    with pytest.raises(TypeError):
        Whole()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Whole("w", nope=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Whole("w", title="w")  # type: ignore[misc]
    changed = dataclasses.replace(whole, ratio=3.0)
    assert changed.ratio == 3.0 and changed.parts == whole.parts and changed.title == "w"
    assert dataclasses.asdict(whole) == {"title": "w", "parts": [{"name": "a", "size": 1}], "notes": {},
                                         "ratio": 2.0, "hidden": "x"}
    assert copy.deepcopy(whole) == whole and pickle.loads(pickle.dumps(whole)) == whole
    assert Whole.__match_args__ == ("title", "parts", "notes", "ratio", "hidden")
    assert Whole.from_json({"title": "t", "parts": [{"name": "p"}]}) == Whole("t", [Part("p")])


def test_every_declared_shape_makes_its_default_instance_and_keeps_its_own_hash_choice() -> None:
    for shape in SECTION_SHAPES.values():
        required = [f for f in dataclasses.fields(shape) if f.default is dataclasses.MISSING
                    and f.default_factory is dataclasses.MISSING]
        if required:
            continue
        made = shape()
        assert made == shape() and dataclasses.replace(made) == made, shape
    # a shape that says it is not hashable (equal by value, and its values are a dict) stays so
    unhashable = [value for value in vars(models_shapes).values()
                  if isinstance(value, type) and "__hash__" in vars(value) and vars(value)["__hash__"] is None]
    assert unhashable and all(value.__hash__ is None for value in unhashable)


def test_a_dataclass_deriving_from_a_shape_is_frozen_and_what_it_cannot_make_is_refused_when_the_class_is_made(
        ) -> None:
    @dataclasses.dataclass(frozen=True)
    class Derived(Part):  # a plugin's own frozen dataclass over one of the doctor's: accepted, as before
        extra: int = 1

    derived = Derived("d", 2, 3)
    assert derived == Derived("d", 2, 3) and dataclasses.fields(Derived)[-1].name == "extra"
    with pytest.raises(dataclasses.FrozenInstanceError):
        derived.extra = 4  # type: ignore[misc]
    with pytest.raises(TypeError, match="cannot inherit non-frozen dataclass from a frozen one"):
        @dataclasses.dataclass
        class Thawed(Part):
            extra: int = 1
    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument 'a'"):
        @frozen_dataclass(frozen=True)
        class Misordered:
            a: int = 0
            b: int  # type: ignore[misc]
    with pytest.raises(TypeError, match="no kw_only or InitVar"):
        @frozen_dataclass(frozen=True)
        class KeywordOnly:
            a: int = field(default=0, kw_only=True)
