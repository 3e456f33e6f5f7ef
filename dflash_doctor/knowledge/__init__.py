"""The one reviewed place for hard-coded compatibility knowledge.

Every fact the doctor cannot read from the installed packages themselves lives in this package, one
module per project (flash_attn, vllm, cuda, dflash, ...), each fact with the source it was read from and
the version of that source. Prefer reading installed metadata and source to adding a fact here.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from dflash_doctor.shape import frozen_dataclass

__all__ = ["Fact"]

T = TypeVar("T")


@frozen_dataclass(frozen=True)
class Fact(Generic[T]):
    value: T
    source: str
    """Where it was read: repository path (and line), issue or PR, with the file's own words where short."""
    read_from: str
    """The version or commit of that source, e.g. "flash-attention v2.8.3 (060c9188)"."""
    note: str = ""
