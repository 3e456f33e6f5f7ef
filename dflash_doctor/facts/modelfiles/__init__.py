"""Fact readers for model directories: config.json, safetensors headers, tokenizer files.

Pure file reading (no torch, no safetensors library, never a write); the judging lives in checks.
"""

from __future__ import annotations

from dflash_doctor.facts.modelfiles.model_dir import (
    DRAFTER_KEYS,
    TEXT_KEYS,
    TOKENIZER_FILES,
    read_model_dir,
    refused_files,
)
from dflash_doctor.facts.modelfiles.safetensors_header import (
    DTYPE_BITS,
    MAX_HEADER_SIZE,
    read_safetensors_header,
)

__all__ = [
    "DRAFTER_KEYS",
    "DTYPE_BITS",
    "MAX_HEADER_SIZE",
    "TEXT_KEYS",
    "TOKENIZER_FILES",
    "read_model_dir",
    "read_safetensors_header",
    "refused_files",
]
