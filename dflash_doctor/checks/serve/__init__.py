"""The serve layer: the `vllm serve` command, judged against the installed vLLM and the models it names, and what it
needs of the GPUs.

Modules, bottom to top: codes (the finding codes), settings (vLLM's defaults and rules over the parsed fields),
view (ServeCommand, the command's typed view), speculators and pairing (rules over it), command and resources
(the two checks' rule sets); the check classes are here."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from dflash_doctor.check import Check, Facts
from dflash_doctor.checks.serve.codes import CODES, COMMAND_CODES, NOT_GIVEN, RESOURCES_CODES
from dflash_doctor.checks.serve.command import command_findings
from dflash_doctor.checks.serve.resources import resources_findings
from dflash_doctor.checks.serve.settings import not_given
from dflash_doctor.codes import Code
from dflash_doctor.facts.serve.serve_shapes import ServeArgs
from dflash_doctor.model import Finding

__all__ = ["CODES", "ServeCommandCheck", "ServeResourcesCheck"]


class ServeCommandCheck(Check):
    id: ClassVar[str] = "serve-command"
    layer: ClassVar[str] = "serve"
    title: ClassVar[str] = "vllm serve command line"
    codes: ClassVar[tuple[Code, ...]] = COMMAND_CODES
    needs: ClassVar[frozenset[str]] = frozenset({"serve_args", "models", "vllm_dflash", "gpu", "target"})
    after: ClassVar[frozenset[str]] = frozenset({"drafter"})

    def judge(self, facts: Facts) -> Iterable[Finding]:
        if not facts.section(ServeArgs).given:
            return not_given(NOT_GIVEN)
        return command_findings(facts)


class ServeResourcesCheck(Check):
    id: ClassVar[str] = "serve-resources"
    layer: ClassVar[str] = "serve"
    title: ClassVar[str] = "GPUs, memory and port for vllm serve"
    codes: ClassVar[tuple[Code, ...]] = RESOURCES_CODES
    needs: ClassVar[frozenset[str]] = frozenset({"serve_args", "models", "gpu", "vllm_dflash"})

    def judge(self, facts: Facts) -> Iterable[Finding]:
        return resources_findings(facts)
