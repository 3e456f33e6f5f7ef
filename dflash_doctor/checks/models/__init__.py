"""The models layer: the target's and the drafter's files, and whether the drafter fits the target and the installed
vLLM's DFlash. The check classes are here; their rules are in the submodules (files, drafter, drafter_pairing,
drafter_attention) over the typed models facts, and their codes in `codes`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from dflash_doctor.check import Check, Facts
from dflash_doctor.checks.models.codes import (
    ATTENTION_CODES,
    ATTENTION_NOT_GIVEN,
    CODES,
    DRAFTER_CODES,
    DRAFTER_NOT_GIVEN,
    FILES_CODES,
)
from dflash_doctor.checks.models.drafter import judge_drafter
from dflash_doctor.checks.models.drafter_attention import judge_drafter_attention
from dflash_doctor.checks.models.files import judge_model_files
from dflash_doctor.codes import Code
from dflash_doctor.model import Finding

__all__ = ["CODES", "DrafterAttentionCheck", "DrafterCheck", "ModelFilesCheck"]


class ModelFilesCheck(Check):
    id: ClassVar[str] = "model-files"
    layer: ClassVar[str] = "models"
    title: ClassVar[str] = "Model files"
    codes: ClassVar[tuple[Code, ...]] = FILES_CODES
    needs: ClassVar[frozenset[str]] = frozenset({"models"})

    def judge(self, facts: Facts) -> Iterable[Finding]:
        return judge_model_files(facts, self.title)


class DrafterCheck(Check):
    id: ClassVar[str] = "drafter"
    layer: ClassVar[str] = "models"
    title: ClassVar[str] = "DFlash drafter against its target"
    codes: ClassVar[tuple[Code, ...]] = (*DRAFTER_CODES, DRAFTER_NOT_GIVEN)
    needs: ClassVar[frozenset[str]] = frozenset({"models", "vllm_dflash", "serve_args", "target", "gpu"})
    after: ClassVar[frozenset[str]] = frozenset({"model-files"})

    def judge(self, facts: Facts) -> Iterable[Finding]:
        return judge_drafter(facts, self.title)


class DrafterAttentionCheck(Check):
    id: ClassVar[str] = "drafter-attention"
    layer: ClassVar[str] = "models"
    title: ClassVar[str] = "Attention backend for the drafter"
    codes: ClassVar[tuple[Code, ...]] = (*ATTENTION_CODES, ATTENTION_NOT_GIVEN)
    needs: ClassVar[frozenset[str]] = frozenset({"models", "vllm_dflash", "serve_args", "gpu"})

    def judge(self, facts: Facts) -> Iterable[Finding]:
        return judge_drafter_attention(facts, self.title)
