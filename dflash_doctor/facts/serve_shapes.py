"""The shapes of the sections `facts.serve` collects: serve_args (the `vllm serve` command, parsed) and
vllm_dflash (what the installed vLLM accepts for DFlash, read from its source)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from dflash_doctor.facts.shape import Shape

__all__ = [
    "BackendChoice",
    "BackendInputs",
    "FlagError",
    "PortFacts",
    "ServeArgs",
    "ServeAssumptions",
    "Served",
    "SpeculativeConfig",
    "StoodIn",
    "VllmAttention",
    "VllmDflash",
    "VllmError",
    "VllmParser",
    "VllmPlatform",
    "VllmValidation",
]


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
class VllmError(Shape):
    """An exception vLLM raised, as the probe saw it."""

    type: str | None = None
    mro: list[str] = field(default_factory=list)
    message: str = ""
    traceback: str = ""


@dataclass(frozen=True)
class StoodIn(Shape):
    """A compiled module of vLLM that needs the CUDA driver, stood in for on a machine without one."""

    module: str = ""
    error: str = ""


@dataclass(frozen=True)
class VllmPlatform(Shape):
    """The platform vLLM judged on: "real" (vLLM's own detection) or "simulated" (a CUDA platform whose
    device queries answer from `simulated_from`: NVML's GPUs, or --target-arch/--gpus/--gpu-memory)."""

    kind: str | None = None
    cls: str | None = None
    device_type: str | None = None
    capability: list[int] | None = None
    count: int | None = None
    memory_bytes: int | None = None
    name: str | None = None
    replaced: str | None = None
    stood_in: list[StoodIn] = field(default_factory=list)
    simulated_from: dict[str, str] = field(default_factory=dict)
    """For each of capability, count, memory: where the value came from ("--target-arch", "nvml", ...)."""


@dataclass(frozen=True)
class BackendInputs(Shape):
    head_size: int | None = None
    dtype: str | None = None
    kv_cache_dtype: str | None = None
    backend_asked: str | None = None
    use_non_causal: Any = None
    """True/False as the release sets it for the drafter, or "from the speculative method"."""
    backend: str | None = None


@dataclass(frozen=True)
class BackendChoice(Shape):
    """vLLM's attention selector's answer for one model's layers: the backend, or its refusal."""

    backend: str | None = None
    error: VllmError | None = None
    inputs: BackendInputs = field(default_factory=BackendInputs)


@dataclass(frozen=True)
class VllmAttention(Shape):
    """The selector's answers on one (simulated or real) compute capability."""

    capability: list[int] | None = None
    target: BackendChoice | None = None
    drafter: BackendChoice | None = None


@dataclass(frozen=True)
class Served(Shape):
    """What vLLM's validation settled on (derived or lowered), for the checks to compare with the request."""

    max_model_len: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    method: str | None = None
    num_speculative_tokens: int | None = None
    draft_max_model_len: int | None = None
    kv_cache_dtype: str | None = None


@dataclass(frozen=True)
class VllmValidation(Shape):
    """vLLM's create_engine_config on the exact command: `ok`, or the `error` it raised."""

    ok: bool = False
    error: VllmError | None = None
    served: Served | None = None


@dataclass(frozen=True)
class VllmParser(Shape):
    """vLLM's own argument parser, run in the target (`tried`: whether it was)."""

    tried: bool = False
    available: bool = False
    version: str | None = None
    import_error: dict[str, Any] | None = None
    parser_error: dict[str, Any] | None = None
    parse_error: str | None = None
    validation: VllmValidation | None = None
    """vLLM's own validation of the engine arguments (None: not run, or not finished: see `validating`)."""
    validating: bool = False
    """The validation started and the probe ended before it finished (its timeout, or a crash)."""
    platform: VllmPlatform | None = None
    attention: list[VllmAttention] | None = None
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
