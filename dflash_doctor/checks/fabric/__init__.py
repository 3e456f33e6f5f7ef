"""The fabric layer: peer-to-peer and NCCL between the GPUs a tensor-parallel serve spans."""

from __future__ import annotations

from dflash_doctor.checks.fabric.peers import CODES as _peers_codes
from dflash_doctor.checks.fabric.peers import FabricCheck
from dflash_doctor.codes import Code

__all__ = ["CODES", "FabricCheck"]

CODES: tuple[Code, ...] = (*_peers_codes,)
