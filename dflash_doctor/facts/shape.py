"""The shape of a fact section (`dflash_doctor.shape`), under the name the `*_shapes.py` modules import it by."""

from __future__ import annotations

from dflash_doctor.shape import Shape, ShapeError, dump, load

__all__ = ["Shape", "ShapeError", "dump", "load"]
