"""The serve layer: the `vllm serve` command, judged against the installed vLLM and the models it names, and what it needs of the GPUs."""

from __future__ import annotations

from dflash_doctor.checks.serve.command import CODES as _command_codes
from dflash_doctor.checks.serve.command import ServeCommandCheck
from dflash_doctor.checks.serve.resources import CODES as _resources_codes
from dflash_doctor.checks.serve.resources import ServeResourcesCheck
from dflash_doctor.codes import Code

__all__ = ["CODES", "ServeCommandCheck", "ServeResourcesCheck"]

CODES: tuple[Code, ...] = (*_command_codes, *_resources_codes)
