"""Which flash-attn v2 to recommend, and why. (Reviewed against the releases on PyPI.)"""

from __future__ import annotations

from dflash_doctor.knowledge import Fact

V2_SPEC: Fact[str] = Fact(
    value="flash-attn<3",
    note="flash-attn v2 provides flash_attn/__init__.py and flash_attn.ops.triton.rotary; its setup.py imports "
    "torch, so it builds only with --no-build-isolation against the torch already installed",
    source="flash-attention setup.py (import torch at top level; README: pip install flash-attn --no-build-isolation)",
    read_from="flash-attention v2.8.3 (060c9188)",
)

COEXISTING_V2_SPEC: Fact[str] = Fact(
    value="flash-attn<3",
    note="no v2 release on PyPI yet keeps flash_attn/cute out of its wheel",
    source="pending review",
    read_from="pending review",
)
