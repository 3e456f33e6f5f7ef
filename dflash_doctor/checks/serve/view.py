"""The `vllm serve` command as the serve-command rules read it: one public, typed view, built once per judgement
(checks.serve.command.read_command) and passed to every rule module of the package (command, pairing)."""

from __future__ import annotations

from collections.abc import Mapping

from dflash_doctor.checks.models.model_views import GpuView
from dflash_doctor.checks.models.speculators import Launch
from dflash_doctor.checks.remedy import Installer
from dflash_doctor.facts.models.models_shapes import Model
from dflash_doctor.facts.serve.serve_shapes import ServeArgs, ServeFields, SpeculativeConfig, VllmDflash
from dflash_doctor.model import CheckResult, Finding
from dflash_doctor.shape import frozen_dataclass

__all__ = ["ServeCommand"]


@frozen_dataclass(frozen=True)
class ServeCommand:
    """The parsed command with what it is judged against.

    `spec` is the speculative config vLLM serves with: the command's own, or for `vllm serve SPECULATORS_DIR` the
    one vLLM builds from the drafter's config (`launch`, with its findings in `launch_findings`)."""

    serve: ServeArgs
    spec: SpeculativeConfig
    target: Model | None
    drafter: Model | None
    vllm: VllmDflash | None
    gpus: GpuView
    """The GPUs vLLM will see."""
    prior: Mapping[str, CheckResult]
    installer: Installer
    launch: Launch | None = None
    launch_findings: tuple[Finding, ...] = ()

    @property
    def fields(self) -> ServeFields:
        return self.serve.fields

    @property
    def argv(self) -> list[str]:
        return list(self.serve.argv)

    @property
    def tp(self) -> int:
        return self.fields.tp

    @property
    def pp(self) -> int:
        return self.fields.pp

    @property
    def label(self) -> str:
        return f"vLLM {self.vllm.version}" if self.vllm and self.vllm.installed else "vLLM"

    @property
    def ccs(self) -> list[str]:
        """The serving GPUs' compute capabilities ("8.6")."""
        return list(self.gpus.ccs)
