"""The live layer: a running server's metrics and served config, judged for speculative decoding's acceptance."""

from __future__ import annotations

from dflash_doctor.checks.live.server import CODES as _server_codes
from dflash_doctor.checks.live.server import LiveCheck
from dflash_doctor.codes import Code

__all__ = ["CODES", "LiveCheck"]

CODES: tuple[Code, ...] = (*_server_codes,)
