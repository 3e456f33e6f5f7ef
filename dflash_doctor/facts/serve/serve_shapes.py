"""The shapes of the sections `facts.serve.serve` collects: serve_args (the `vllm serve` command, parsed) and
vllm_dflash (what the installed vLLM accepts for DFlash, read from its source), typed to the leaves.

The one free-form value is the user's own --speculative-config JSON: it stays raw inside `SpeculativeConfig`
(and `ServeFields.speculative_config`), read through `SpeculativeConfig`'s typed accessors."""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import Any, ClassVar

from dflash_doctor.facts.models.models_shapes import RefusedFile
from dflash_doctor.facts.shape import Shape, frozen_dataclass

__all__ = [
    "MAX_GPUS",
    "MAX_GPU_MEMORY_GIB",
    "AnsweredOp",
    "BackendChoice",
    "BackendInputs",
    "BackendSupport",
    "ConfigFile",
    "Eagle3Arch",
    "Eagle3Facts",
    "EnvironVerdict",
    "FlagError",
    "FlashAttnBuilds",
    "Fp8Facts",
    "LanguageModelOnly",
    "Marker",
    "ModelCodeCall",
    "NotValidated",
    "ParserRegistries",
    "ParserRegistry",
    "PortFacts",
    "Priorities",
    "ProbeProcess",
    "RefusedConnection",
    "RefusedValue",
    "RopeLayout",
    "RunnerFacts",
    "ServeArgs",
    "ServeAssumptions",
    "ServeFields",
    "Served",
    "SkippedPart",
    "SpeculativeConfig",
    "StoodIn",
    "TransformersTypes",
    "VllmAttention",
    "VllmAttentionTable",
    "VllmDflash",
    "VllmEnvironRules",
    "VllmError",
    "VllmPairing",
    "VllmParser",
    "VllmPlatform",
    "VllmValidation",
]


MAX_GPUS = 256
"""--gpus N stands in for one serving machine's GPUs: more than any machine holds is a usage error, and a saved
report that says more is not judged as that many (each GPU is an object)."""
MAX_GPU_MEMORY_GIB = 1e6
"""--gpu-memory GIB: at most this (a finite size that the arithmetic on it keeps finite)."""


@frozen_dataclass(frozen=True)
class ServeAssumptions(Shape):
    """What the user told the doctor to assume of the serving machine (--gpus, --gpu-memory-gib, ...)."""

    gpus: int | None = None
    gpu_memory_gib: float | None = None
    target_archs: list[str] = field(default_factory=list)


@frozen_dataclass(frozen=True)
class FlagError(Shape):
    flag: str | None = None
    message: str = ""


@frozen_dataclass(frozen=True)
class SpeculativeConfig(Shape):
    """--speculative-config as given (`raw`, the text) and as read (`value`: the user's JSON object, free-form,
    or None with `error`). The typed accessors read one key of `value`."""

    given: bool = False
    raw: str | None = None
    value: dict[str, Any] | None = None
    error: str | None = None
    from_flags: list[str] = field(default_factory=list)
    """--spec-method/--spec-model/--spec-tokens merged into `value` (facts.serve.serve_args merge_spec_flags)."""
    conflict: str | None = None
    """vLLM's "--spec-model and --speculative-config['model'] are mutually exclusive" for this command, or None."""

    @property
    def keys(self) -> dict[str, Any]:
        """The JSON object as read ({} when there is none)."""
        return dict(self.value or {})

    def item(self, key: str) -> Any:
        """The raw value of `key` (None when absent): the user's JSON, any type."""
        return (self.value or {}).get(key)

    def has(self, key: str) -> bool:
        return key in (self.value or {})

    def integer(self, key: str) -> int | None:
        """`key` when it is an integer (not a boolean), else None."""
        value = self.item(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def string(self, key: str) -> str | None:
        """`key` when it is a string, else None."""
        value = self.item(key)
        return value if isinstance(value, str) else None

    @property
    def method(self) -> Any:
        return self.item("method")

    @property
    def model(self) -> str | None:
        return self.string("model")

    @property
    def num_speculative_tokens(self) -> int | None:
        return self.integer("num_speculative_tokens")


@frozen_dataclass(frozen=True)
class ServeFields(Shape):
    """The parsed options by vLLM's field names: vLLM's own parser's (facts.probes.vllm_args ENGINE_FIELDS and
    FRONTEND_FIELDS) or the documented subset's (facts.serve.serve_args FLAGS). None: not given and no default read."""

    model: str | None = None
    tokenizer: str | None = None
    skip_tokenizer_init: bool | None = None
    trust_remote_code: bool | None = None
    dtype: str | None = None
    max_model_len: int | None = None
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    data_parallel_size: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    max_num_scheduled_tokens: int | None = None
    gpu_memory_utilization: float | None = None
    enable_chunked_prefill: bool | None = None
    enable_prefix_caching: bool | None = None
    speculative_config: dict[str, Any] | None = None
    """The user's JSON as the parser read it (free-form; `ServeArgs.speculative_config` is what checks read)."""
    language_model_only: bool | None = None
    attention_backend: str | None = None
    kv_cache_dtype: str | None = None
    distributed_executor_backend: str | None = None
    performance_mode: str | None = None
    reasoning_parser: str | None = None
    reasoning_parser_plugin: str | None = None
    tool_call_parser: str | None = None
    tool_parser_plugin: str | None = None
    enable_auto_tool_choice: bool | None = None
    enforce_eager: bool | None = None
    spec_method: str | None = None
    spec_model: str | None = None
    spec_tokens: int | None = None
    port: int | None = None
    host: str | None = None
    headless: bool | None = None

    @property
    def tp(self) -> int:
        """--tensor-parallel-size (vLLM's default 1)."""
        return self.tensor_parallel_size if self.tensor_parallel_size is not None else 1

    @property
    def pp(self) -> int:
        """--pipeline-parallel-size (vLLM's default 1)."""
        return self.pipeline_parallel_size if self.pipeline_parallel_size is not None else 1


@frozen_dataclass(frozen=True)
class VllmError(Shape):
    """An exception vLLM raised, as the probe saw it."""

    type: str | None = None
    mro: list[str] = field(default_factory=list)
    message: str = ""
    traceback: str = ""


@frozen_dataclass(frozen=True)
class StoodIn(Shape):
    """A compiled module of vLLM that needs the CUDA driver, stood in for on a machine without one."""

    module: str = ""
    error: str = ""


@frozen_dataclass(frozen=True)
class AnsweredOp(Shape):
    """A device query of a compiled module stood in for (the CUDA driver is absent), answered as the real op
    answers for the simulated GPU: `rule` is what the release's own source returns (knowledge.vllm
    DEVICE_QUERY_OPS), `asked` the capabilities vLLM asked about and `answers` what it was told."""

    op: str = ""
    rule: str = ""
    asked: list[int] = field(default_factory=list)
    answers: list[bool] = field(default_factory=list)


@frozen_dataclass(frozen=True)
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
    answered: list[AnsweredOp] = field(default_factory=list)
    simulated_from: dict[str, str] = field(default_factory=dict)
    """For each of capability, count, memory: where the value came from ("--target-arch", "nvml", ...)."""


@frozen_dataclass(frozen=True)
class BackendInputs(Shape):
    head_size: int | None = None
    dtype: str | None = None
    kv_cache_dtype: str | None = None
    backend_asked: str | None = None
    use_non_causal: bool | str | None = None
    """True/False as the release sets it for the drafter, or "from the speculative method"."""
    backend: str | None = None


@frozen_dataclass(frozen=True)
class BackendChoice(Shape):
    """vLLM's attention selector's answer for one model's layers: the backend, or its refusal."""

    backend: str | None = None
    error: VllmError | None = None
    inputs: BackendInputs = field(default_factory=BackendInputs)


@frozen_dataclass(frozen=True)
class VllmAttention(Shape):
    """The selector's answers on one (simulated or real) compute capability."""

    capability: list[int] | None = None
    target: BackendChoice | None = None
    drafter: BackendChoice | None = None


@frozen_dataclass(frozen=True)
class Served(Shape):
    """What vLLM's validation settled on (derived or lowered): the VllmConfig create_engine_config built, read by
    the probe (probes/vllm_args.py `served`, `resolved_values`). Where it is there, the rules judge these values
    rather than the doctor's reading of the command (`ServeArgs.as_resolved`)."""

    max_model_len: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    method: str | None = None
    num_speculative_tokens: int | None = None
    draft_max_model_len: int | None = None
    kv_cache_dtype: str | None = None
    model: str | None = None
    """The target vLLM serves (model_config.model: for `vllm serve SPECULATORS_DIR`, the verifier)."""
    draft_model: str | None = None
    """The drafter (speculative_config.model)."""
    draft_tensor_parallel_size: int | None = None
    dtype: str | None = None
    """model_config.dtype, "auto" resolved ("bfloat16")."""
    model_runner: str | None = None
    """"v1" or "v2": the GPU model runner this release serves the config with."""
    model_runner_from: str | None = None
    """What said so: "VllmConfig.use_v2_model_runner", "envs.VLLM_USE_V2_MODEL_RUNNER" or "only runner"."""
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    data_parallel_size: int | None = None
    enforce_eager: bool | None = None
    enable_prefix_caching: bool | None = None
    """cache_config.enable_prefix_caching: the release's default where the command left it."""


@frozen_dataclass(frozen=True)
class ModelCodeCall(Shape):
    """A model repository's own code that transformers was asked to copy or run (`call`: the function of
    transformers.dynamic_module_utils that refused), for `model` (its directory or name)."""

    call: str = ""
    model: str | None = None
    file: str | None = None


@frozen_dataclass(frozen=True)
class RefusedConnection(Shape):
    """A connection (or datagram) the validation's process was refused while it ran the model's code."""

    event: str = ""
    address: str = ""


@frozen_dataclass(frozen=True)
class VllmValidation(Shape):
    """vLLM's create_engine_config on the exact command: `ok`, or the `error` it raised. A non-empty
    `model_code`: the validation stopped where it would have run the model's own code (not vLLM's verdict)."""

    ok: bool = False
    error: VllmError | None = None
    served: Served | None = None
    model_code: list[ModelCodeCall] = field(default_factory=list)
    refused_connections: list[RefusedConnection] = field(default_factory=list)
    model_info_learned: dict[str, str] = field(default_factory=dict)
    """Each model class whose interface vLLM learned in this validation (its cache did not have it) and where:
    "here" (in the validation's own process) or "subprocess" (in the interpreter vLLM starts for it, where it
    failed here)."""


@frozen_dataclass(frozen=True)
class NotValidated(Shape):
    """Why vLLM's validation was not given the command: "refused-files" (`files`: what the doctor refused to
    read in the models it names), "unchecked-models" (`models`: vLLM's parser read models the doctor did not
    look at first)."""

    reason: str = ""
    files: list[RefusedFile] = field(default_factory=list)
    models: list[str] = field(default_factory=list)


@frozen_dataclass(frozen=True)
class ProbeProcess(Shape):
    """How the probe's process ran (facts.probes ProbeOutcome.as_facts)."""

    returncode: int | None = None
    signal: str | None = None
    timed_out: bool = False
    stderr: str = ""
    duration_s: float | None = None
    error: str | None = None


@frozen_dataclass(frozen=True)
class SkippedPart(Shape):
    """A part of create_engine_config ("model", "speculative", "scheduler") where it stopped at a compiled module the
    machine cannot load, or that it never reached: `skipped` says which and why."""

    part: str = ""
    function: str | None = None
    ok: bool = False
    error: VllmError | None = None
    skipped: str | None = None


@frozen_dataclass(frozen=True)
class EnvironVerdict(Shape):
    """vLLM's own `validate_environ` on the environment the serve gets, run in the probe on its own (it runs
    first inside create_engine_config too): `function` (where it is), `hard_fail` (--fail-on-environ-validation),
    the `error` it raised, the `warnings` it logged."""

    function: str | None = None
    hard_fail: bool = False
    error: VllmError | None = None
    warnings: list[str] = field(default_factory=list)
    not_run: VllmError | None = None
    """Why the doctor could not run it (not vLLM's verdict)."""


@frozen_dataclass(frozen=True)
class VllmParser(Shape):
    """vLLM's own argument parser, run in the target (`tried`: whether it was)."""

    tried: bool = False
    available: bool = False
    version: str | None = None
    import_error: VllmError | None = None
    parser_error: VllmError | None = None
    parse_error: str | None = None
    validation: VllmValidation | None = None
    """vLLM's own validation of the engine arguments (None: not run, or not finished: see `validating`)."""
    validating: bool = False
    """The validation started and the probe ended before it finished (its timeout, or a crash)."""
    platform: VllmPlatform | None = None
    attention: list[VllmAttention] | None = None
    given: list[str] = field(default_factory=list)
    not_validated: NotValidated | None = None
    environ: EnvironVerdict | None = None
    skipped_parts: list[SkippedPart] = field(default_factory=list)
    """Where create_engine_config could not finish for a compiled module the machine cannot load: the part it
    stopped in and those it never reached (validate_environ, which runs first, has its own verdict: `environ`)."""
    model_code_run: bool = False
    """--run-model-code: the validation ran the model's own code, with a HOME of its own and no network."""
    bound: dict[str, list[int]] = field(default_factory=dict)
    """Each destination of vLLM's parser, and the positions of the words after the program it took (the report's
    masking takes those of a secret destination, `api_key`, as secrets: facts.secrets.bound_secret_values)."""
    process: ProbeProcess | None = None


@frozen_dataclass(frozen=True)
class PortFacts(Shape):
    """Whether vLLM could bind its port here (`shared_listener`: another listener set SO_REUSEPORT)."""

    host: str | None = None
    port: int | None = None
    free: bool | None = None
    shared_listener: bool | None = None
    error: str | None = None
    errno: str | None = None


@frozen_dataclass(frozen=True)
class ConfigFile(Shape):
    """`--config FILE.yaml` as the doctor's own reading read it (facts.serve.serve_config_file): `error` is vLLM's own
    refusal of it, `unread` why the doctor could not read it."""

    path: str | None = None
    loaded: bool = False
    error: str | None = None
    unread: str | None = None
    keys: list[str] = field(default_factory=list)


# Served's values that stand for a ServeFields field of the same name.
_RESOLVED_FIELDS = ("max_model_len", "max_num_batched_tokens", "max_num_seqs", "kv_cache_dtype", "dtype",
                    "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "enforce_eager",
                    "enable_prefix_caching")
# Served's values that stand for a key of the speculative config.
_RESOLVED_SPEC = (("method", "method"), ("draft_model", "model"), ("num_speculative_tokens", "num_speculative_tokens"),
                  ("draft_tensor_parallel_size", "draft_tensor_parallel_size"))


@frozen_dataclass(frozen=True)
class ServeArgs(Shape):
    SECTION: ClassVar[str] = "serve_args"

    given: bool = False
    assume: ServeAssumptions = field(default_factory=ServeAssumptions)
    argv: list[str] = field(default_factory=list)
    cwd: str | None = None
    environ: dict[str, str | None] = field(default_factory=dict)
    vllm_environ: list[str] | None = None
    """The names of the `VLLM_*` variables in the environment `vllm serve` gets (the doctor's own; values only in
    `environ`, for the names it records); None in a report older than this key."""
    parser: str | None = None
    """"vllm" (vLLM's own parser, in the target) or "subset" (the doctor's reading)."""
    fields: ServeFields = field(default_factory=ServeFields)
    flags_given: list[str] = field(default_factory=list)
    unknown_flags: list[str] = field(default_factory=list)
    errors: list[FlagError] = field(default_factory=list)
    program: list[str] = field(default_factory=list)
    program_error: str | None = None
    speculative_config: SpeculativeConfig = field(default_factory=SpeculativeConfig)
    vllm_parser: VllmParser = field(default_factory=VllmParser)
    port: PortFacts = field(default_factory=PortFacts)
    config_file: ConfigFile | None = None
    abbreviated: dict[str, str] = field(default_factory=dict)
    """The doctor's own reading: each prefix of a flag read as that flag (`--max-model` -> `--max-model-len`)."""
    seconds: float | None = None
    read_fields: ServeFields | None = None
    """Only on the view `as_resolved` returns: the fields as the command was read, before vLLM's values took their
    place (a rule that explains one of vLLM's reductions reads what was asked here)."""

    @property
    def resolved(self) -> Served | None:
        """What vLLM's own validation resolved, when it ran and accepted the command; else None."""
        validation = self.vllm_parser.validation
        if validation is None or not validation.ok or validation.served is None:
            return None
        return validation.served

    def as_resolved(self) -> ServeArgs:
        """These facts with what vLLM resolved in place of the command as read, where vLLM's validation resolved
        it: the parallel sizes, max_model_len after vLLM's reductions, dtype (not on a simulated GPU of unknown
        architecture), KV cache dtype, the scheduler's limits, and the speculative config's method, drafter, k and
        draft TP. The facts as they are otherwise (the
        doctor's own reading, or vLLM's parser without its validation)."""
        served = self.resolved
        if served is None:
            return self
        platform = self.vllm_parser.platform
        # A simulated GPU of no known architecture answers vLLM's dtype question as a pre-Pascal GPU would (vLLM's
        # CudaPlatformBase.supported_dtypes: float32 only): that dtype is the simulation's, not the serving GPU's.
        unknown_arch = platform is not None and platform.kind == "simulated" and not platform.capability
        changes = {name: getattr(served, name) for name in _RESOLVED_FIELDS if getattr(served, name) is not None
                   and not (name == "dtype" and unknown_arch)}
        fields = dataclasses.replace(self.fields, **changes)
        spec = self.speculative_config
        if served.method is not None and spec.value is not None:
            value = dict(spec.value)
            value.update({key: getattr(served, name) for name, key in _RESOLVED_SPEC
                          if getattr(served, name) is not None})
            spec = dataclasses.replace(spec, value=value)
        return dataclasses.replace(self, fields=fields, speculative_config=spec, read_fields=self.fields)

    @property
    def asked(self) -> ServeFields:
        """The fields as the command was read (before `as_resolved` put vLLM's values in their place)."""
        return self.read_fields if self.read_fields is not None else self.fields


# ------------------------------------------------------------------------------------------ vllm_dflash


@frozen_dataclass(frozen=True)
class Marker(Shape):
    """Whether a marker text of knowledge.dflash is in the installed vLLM's source (`file`: where)."""

    found: bool = False
    file: str | None = None
    readable: bool = True
    """False: none of the marker's files could be read (an older report lacks the key: read as True)."""


@frozen_dataclass(frozen=True)
class Priorities(Shape):
    """_get_backend_priorities' order on one compute capability (None: it could not be evaluated)."""

    causal: list[str] | None = None
    non_causal: list[str] | None = None


@frozen_dataclass(frozen=True)
class BackendSupport(Shape):
    """One attention backend's `supports_*` answers, evaluated on constants (None: it asks the GPU or the build)."""

    file: str | None = None
    cls: str | None = field(default=None, metadata={"key": "class"})
    non_causal: bool | None = None
    kv_cache_dtype: dict[str, bool | None] = field(default_factory=dict)
    kv_combination_reason: str | None = None
    capability: dict[str, bool | None] = field(default_factory=dict)
    """By compute capability ("8.6")."""
    head_size: dict[str, bool | None] = field(default_factory=dict)
    """By head size, as a string ("128")."""


@frozen_dataclass(frozen=True)
class FlashAttnBuilds(Shape):
    """Which FlashAttention versions the installed vLLM carries."""

    fa2: bool = False
    fa3: bool = False
    fa4: bool = False


@frozen_dataclass(frozen=True)
class VllmAttentionTable(Shape):
    """The installed vLLM's attention backend selection, read from its source (facts.serve.serve._attention)."""

    source: str | None = None
    readable: bool = False
    priorities: dict[str, Priorities] = field(default_factory=dict)
    """By compute capability ("9.0")."""
    backends: dict[str, BackendSupport] = field(default_factory=dict)
    head_sizes: list[int] = field(default_factory=list)
    kv_cache_dtypes: list[str] | None = None
    flash_attn_builds: FlashAttnBuilds | None = None


@frozen_dataclass(frozen=True)
class ParserRegistry(Shape):
    names: list[str] = field(default_factory=list)
    file: str | None = None


@frozen_dataclass(frozen=True)
class ParserRegistries(Shape):
    """The parsers the installed vLLM registers, by kind (knowledge.dflash_reports.PARSER_REGISTRIES); None where
    its registry could not be read."""

    reasoning: ParserRegistry | None = None
    tool: ParserRegistry | None = None


@frozen_dataclass(frozen=True)
class LanguageModelOnly(Shape):
    known: bool | None = None
    file: str | None = None
    zero_limits: bool | None = None
    skips_tower: bool | None = None


@frozen_dataclass(frozen=True)
class RunnerFacts(Shape):
    """Which model runner serves DFlash by default (facts.serve.vllm_pairing._runner)."""

    kind: str | None = None
    file: str | None = None
    default_archs: list[str] | None = None


@frozen_dataclass(frozen=True)
class Eagle3Arch(Shape):
    registered: bool = False
    cls: str | None = field(default=None, metadata={"key": "class"})
    file: str | None = None
    implements: bool | None = None
    via: str | None = None


@frozen_dataclass(frozen=True)
class Eagle3Facts(Shape):
    interface: str | None = None
    checked_in: str | None = None
    archs: dict[str, Eagle3Arch] = field(default_factory=dict)


@frozen_dataclass(frozen=True)
class RopeLayout(Shape):
    file: str | None = None
    layout: str | None = None


@frozen_dataclass(frozen=True)
class TransformersTypes(Shape):
    file: str | None = None
    model_types: list[str] | None = None


@frozen_dataclass(frozen=True)
class Fp8Facts(Shape):
    min_capability: int | None = None
    marlin_fallback: bool | None = None
    native_from: int | None = None


@frozen_dataclass(frozen=True)
class FusedKvSlice(Shape):
    line: int = 0
    guard: str | None = None
    """The `if` test that keeps a quantized layer off the slice (its source); None: the slice is unguarded."""


@frozen_dataclass(frozen=True)
class FusedKvFacts(Shape):
    """The drafter files that slice `qkv_proj.weight` raw (vLLM #51581) and the registry's architectures each
    serves (facts.serve.vllm_pairing._fused_kv); `unread`: the drafter files the parser refused."""

    files: dict[str, list[FusedKvSlice]] = field(default_factory=dict)
    archs: dict[str, str] = field(default_factory=dict)
    unread: list[str] = field(default_factory=list)


@frozen_dataclass(frozen=True)
class CausalityFacts(Shape):
    """Which of a DFlash drafter's causality keys the installed vLLM reads, in the function that resolves it
    (facts.serve.vllm_pairing._causality); `keys` None: the source could not be read."""

    file: str | None = None
    function: str | None = None
    keys: list[str] | None = None


@frozen_dataclass(frozen=True)
class HybridArch(Shape):
    hybrid: bool | None = None
    file: str | None = None


@frozen_dataclass(frozen=True)
class HybridPrefixCache(Shape):
    """vLLM #53505 in the installed source (facts.serve.vllm_pairing._hybrid_prefix_cache): the scheduler's one-block
    backoff for eagle-family drafts, the coordinator's alignment of Mamba checkpoints to it, the target's
    architectures as hybrid or not."""

    backs_off: bool | None = None
    aligned: bool | None = None
    files: list[str] = field(default_factory=list)
    archs: dict[str, HybridArch] = field(default_factory=dict)


@frozen_dataclass(frozen=True)
class ConfidentialComputeRule(Shape):
    """Whether the installed vLLM detects NVIDIA Confidential Computing and reads VLLM_CONFIDENTIAL_COMPUTE."""

    detects: bool | None = None
    override: bool | None = None
    file: str | None = None


@frozen_dataclass(frozen=True)
class VllmPairing(Shape):
    """What the installed vLLM pairs a target and drafter with (facts.serve.vllm_pairing): parsers, the model runner,
    the EAGLE3 interface, FP8 kernels. A part absent (an older report, an unread source) is None or empty."""

    parsers: ParserRegistries = field(default_factory=ParserRegistries)
    language_model_only: LanguageModelOnly | None = None
    runner: RunnerFacts | None = None
    eagle3: Eagle3Facts | None = None
    rope_layouts: dict[str, RopeLayout] = field(default_factory=dict)
    config_registry: list[str] | None = None
    transformers: TransformersTypes | None = None
    fp8: Fp8Facts | None = None
    fused_kv_raw_weight: list[str] | None = None
    """The files that slice it unguarded; with `fused_kv` absent (an older report): every file that slices it."""
    fused_kv: FusedKvFacts | None = None
    causality: CausalityFacts | None = None
    domino_runtime: list[str] | None = None
    """The *_dflash.py files that name the Domino head's GRU; None: not read (an older report)."""
    hybrid_prefix_cache: HybridPrefixCache | None = None
    confidential_compute: ConfidentialComputeRule | None = None


@frozen_dataclass(frozen=True)
class RefusedValue(Shape):
    """A variable the installed vLLM's validate_environ refuses unless it has one of `accepted` (its message)."""

    name: str = ""
    accepted: list[str] = field(default_factory=list)
    message: str = ""


@frozen_dataclass(frozen=True)
class VllmEnvironRules(Shape):
    """What the installed vLLM's validate_environ checks, read from its source (facts.serve.vllm_environ)."""

    validated_by: str | None = None
    known: list[str] | None = None
    removed: dict[str, str] | None = None
    """envs.removed_environment_variables (name -> hint); None in a release without it."""
    refused_values: list[RefusedValue] = field(default_factory=list)
    unknown_prefix: str | None = None

    def refuses(self, name: str, value: str) -> str | None:
        """vLLM's message where it refuses `name`=`value`, else None."""
        for rule in self.refused_values:
            if rule.name == name and value not in rule.accepted:
                return rule.message.replace("{value}", value)
        return None


@frozen_dataclass(frozen=True)
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
    aux_supported_model_types: list[str] | None = None
    markers: dict[str, Marker] = field(default_factory=dict)
    attention: VllmAttentionTable | None = None
    """None: the source was not read (no vLLM, or nothing to judge)."""
    pairing: VllmPairing = field(default_factory=VllmPairing)
    environ: VllmEnvironRules | None = None
    """None: not read (an older report), or the release has no validate_environ."""
    seconds: float | None = None
