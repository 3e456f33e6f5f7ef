"""The shapes of the sections `facts.serve` collects: serve_args (the `vllm serve` command, parsed) and
vllm_dflash (what the installed vLLM accepts for DFlash, read from its source)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from dflash_doctor.facts.shape import Shape

__all__ = ["FlagError", "PortFacts", "ServeArgs", "ServeAssumptions", "SpeculativeConfig", "VllmDflash", "VllmParser"]


@dataclass(frozen=True)
class ServeAssumptions(Shape):
    """What the user told the doctor to assume of the serving machine (--gpus, --gpu-memory-gib, ...)."""

    gpus: int | None = None
    gpu_memory_gib: float | None = None
    target_archs: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class FlagError(Shape):
    flag: str | None = None
    message: str = ""


@dataclass(frozen=True)
class SpeculativeConfig(Shape):
    """--speculative-config as given (`raw`) and as read (`value`: a JSON object, or None with `error`)."""

    given: bool = False
    raw: Any = None
    value: dict[str, Any] | None = None
    error: Any = None


@dataclass(frozen=True)
class VllmParser(Shape):
    """vLLM's own argument parser, run in the target (`tried`: whether it was)."""

    tried: bool = False
    available: bool = False
    version: str | None = None
    import_error: dict[str, Any] | None = None
    parser_error: dict[str, Any] | None = None
    parse_error: str | None = None
    validation: dict[str, Any] | None = None
    """{"ok", "error"}: vLLM's own validation of the engine arguments, when asked for."""
    given: list[str] = field(default_factory=list)
    process: dict[str, Any] | None = None


@dataclass(frozen=True)
class PortFacts(Shape):
    """Whether vLLM could bind its port here (`shared_listener`: another listener set SO_REUSEPORT)."""

    host: str | None = None
    port: Any = None
    free: bool | None = None
    shared_listener: bool | None = None
    error: str | None = None
    errno: str | None = None


@dataclass(frozen=True)
class ServeArgs(Shape):
    SECTION: ClassVar[str] = "serve_args"

    given: bool = False
    assume: ServeAssumptions = field(default_factory=ServeAssumptions)
    argv: list[str] = field(default_factory=list)
    cwd: str | None = None
    environ: dict[str, str | None] = field(default_factory=dict)
    parser: str | None = None
    """"vllm" (vLLM's own parser, in the target) or "subset" (the doctor's reading)."""
    fields: dict[str, Any] = field(default_factory=dict)
    """The parsed options by vLLM's field names (free-form: whatever vLLM's parser gives)."""
    flags_given: list[str] = field(default_factory=list)
    unknown_flags: list[Any] = field(default_factory=list)
    errors: list[FlagError] = field(default_factory=list)
    program: list[str] = field(default_factory=list)
    program_error: str | None = None
    speculative_config: SpeculativeConfig = field(default_factory=SpeculativeConfig)
    vllm_parser: VllmParser = field(default_factory=VllmParser)
    port: PortFacts = field(default_factory=PortFacts)
    seconds: float | None = None


@dataclass(frozen=True)
class VllmDflash(Shape):
    SECTION: ClassVar[str] = "vllm_dflash"

    installed: bool = False
    version: str | None = None
    root: str | None = None
    skipped: str | None = None
    has_dflash: bool | None = None
    registry_readable: bool | None = None
    dflash_archs: list[str] = field(default_factory=list)
    methods: list[str] | None = None
    aux_supported_model_types: Any = None
    markers: dict[str, Any] = field(default_factory=dict)
    attention: dict[str, Any] = field(default_factory=dict)
    pairing: dict[str, Any] = field(default_factory=dict)
    """What the installed vLLM pairs a target and drafter with (facts.vllm_pairing): parsers, the model
    runner, the EAGLE3 interface, FP8 kernels; free-form, read by checks.drafter_pairing / serve_pairing."""
    seconds: float | None = None
