"""The models layer: the target's and the drafter's files, and whether the drafter fits the target and the installed vLLM's DFlash."""

from __future__ import annotations

from dflash_doctor.checks.models.drafter import CODES as _drafter_codes
from dflash_doctor.checks.models.drafter import DrafterCheck
from dflash_doctor.checks.models.drafter_attention import CODES as _drafter_attention_codes
from dflash_doctor.checks.models.drafter_attention import DrafterAttentionCheck
from dflash_doctor.checks.models.files import CODES as _files_codes
from dflash_doctor.checks.models.files import ModelFilesCheck
from dflash_doctor.codes import Code

__all__ = ["CODES", "DrafterCheck", "DrafterAttentionCheck", "ModelFilesCheck"]

CODES: tuple[Code, ...] = (*_drafter_codes, *_drafter_attention_codes, *_files_codes)
