"""The shape of a fact section (`dflash_doctor.shape`), under the name the `*_shapes.py` modules import it by."""

from __future__ import annotations

from dflash_doctor.shape import (
    Collected,
    SectionFailure,
    Shape,
    ShapeError,
    by_section,
    dump,
    frozen_dataclass,
    load,
    section_json,
    section_of_json,
    undeclared_keys,
)

__all__ = ["Collected", "SectionFailure", "Shape", "ShapeError", "by_section", "dump", "frozen_dataclass", "load",
           "section_json", "section_of_json", "undeclared_keys"]
