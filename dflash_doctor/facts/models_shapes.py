"""The shape of the `models` section (`facts.models`): the target and drafter models named on the command
line or in the serve command, each described from its files (config, weights' headers, tokenizer)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from dflash_doctor.facts.shape import Shape

__all__ = ["Models"]


@dataclass(frozen=True)
class Models(Shape):
    SECTION: ClassVar[str] = "models"

    given: bool = False
    source: str | None = None
    """Where the names came from ("serve": the serve command, else the command line)."""
    target: dict[str, Any] | None = None
    """`facts.models.describe_model` of the target (None: not given)."""
    drafter: dict[str, Any] | None = None
    speculators_launch: dict[str, Any] | None = None
    """`vllm serve SPECULATORS_DIR` (facts.models.speculators_launch): the verifier vLLM serves instead, read from
    the directory's speculators_config; the directory is then the drafter and the verifier the target."""
    seconds: float | None = None
