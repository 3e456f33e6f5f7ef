"""The declared shape of the `live` section (facts.live.live): what a running server answered, typed to the leaves.

Each endpoint's status, seconds and error; the models /v1/models lists; each /metrics scrape with its
speculative-decoding counters (per position for the curve) and the counters that were not counts; the workload
and its figures; the installed vLLM beside the doctor; and what the serve command and the model directories it
names say. The values a user's config.json holds (layer ids, quantization, ...) and the speculative config the
command carried stay raw inside `ModelConfig` and `SpeculativeConfig`, which read them through typed accessors.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, ClassVar

from dflash_doctor.facts.shape import Shape, dump, frozen_dataclass

__all__ = [
    "Baseline", "Counters", "Endpoint", "Figures", "InstalledVllm", "Live", "MalformedField", "MetricNames",
    "MetricsScrape", "ModelConfig", "ModelsAnswer", "ServeContext", "ServedModel", "SpeculativeConfig",
    "StartedServer", "Workload",
]

MAX_COUNT = 2**53
"""A count above this is not exact in a float: no server counts that many tokens."""


def _count(value: Any) -> int | None:
    """A raw value that is a whole number from 0 to MAX_COUNT (a bool is not one), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    return int(value) if 0 <= value <= MAX_COUNT else None


@frozen_dataclass(frozen=True)
class StartedServer(Shape):
    """The server `serve --exec --live` started: its PID, log, and how its start ended."""

    pid: int | None = None
    log: str | None = None
    url: str | None = None
    exit_status: int | None = None
    """Set when `vllm serve` exited before /health answered."""
    ready: bool | None = None
    seconds: float | None = None
    log_tail: list[str] = field(default_factory=list)


@frozen_dataclass(frozen=True)
class Endpoint(Shape):
    """One GET's outcome (/health)."""

    status: int | None = None
    seconds: float | None = None
    error: str | None = None


@frozen_dataclass(frozen=True)
class ServedModel(Shape):
    """An entry of /v1/models (each field None where the server's was of the wrong type)."""

    id: str | None = None
    root: str | None = None
    parent: str | None = None
    max_model_len: int | None = None


@frozen_dataclass(frozen=True)
class ModelsAnswer(Shape):
    status: int | None = None
    error: str | None = None
    data: list[ServedModel] | None = None


@frozen_dataclass(frozen=True)
class MetricNames(Shape):
    source: str | None = field(default=None, metadata={"key": "from"})
    """Where the names came from: the installed vLLM's source, the server, or knowledge.live."""
    names: dict[str, str] = field(default_factory=dict)
    """Role ("drafts", "draft_tokens", "accepted_tokens", "accepted_per_pos") -> metric name."""
    exposed: dict[str, str] = field(default_factory=dict)


@frozen_dataclass(frozen=True)
class Counters(Shape):
    """One scrape's counters, summed over every engine and model label (facts.live.live.tally); a counter that was not
    a count in /metrics is left out (and named in the scrape's invalid_counters)."""

    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    accepted_per_pos: dict[str, float] | None = None
    """Position ("0", "1", ...) -> accepted tokens at that position."""
    generation_tokens: float | None = field(default=None, metadata={"key": "vllm:generation_tokens"})
    prompt_tokens: float | None = field(default=None, metadata={"key": "vllm:prompt_tokens"})
    requests_running: float | None = field(default=None, metadata={"key": "vllm:num_requests_running"})

    def spec(self) -> dict[str, float | None]:
        """The speculative-decoding counters by role."""
        return {"drafts": self.drafts, "draft_tokens": self.draft_tokens, "accepted_tokens": self.accepted_tokens}


@frozen_dataclass(frozen=True)
class MetricsScrape(Shape):
    """One GET /metrics and what it counted."""

    status: int | None = None
    seconds: float | None = None
    bytes: int = 0
    error: str | None = None
    truncated_at: int | None = None
    samples: int = 0
    unparsed_lines: int = 0
    body_head: str | None = None
    counters: Counters = field(default_factory=Counters)
    invalid_counters: dict[str, str] = field(default_factory=dict)
    """Each counter whose samples or sum is not a count, with its value as Prometheus writes it."""

    def without_counters(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: v for k, v in dump(self).items() if k != "counters"}
        return out


@frozen_dataclass(frozen=True)
class Workload(Shape):
    """The fixed greedy workload sent through /v1/completions, and what came back."""

    prompts_source: str = ""
    prompts: int = 0
    requests: int = 0
    max_tokens: int = 0
    temperature: float = 0
    digest: str | None = None
    """Of the prompts, token limit and request count: two runs of one digest are comparable."""
    skipped: str | None = None
    stopped: str | None = None
    wall_s: float | None = None
    sent: int = 0
    ok: int = 0
    completion_tokens: int = 0
    prompt_tokens: int = 0
    errors: list[str] = field(default_factory=list)
    request_seconds: list[float] = field(default_factory=list)


@frozen_dataclass(frozen=True)
class InstalledVllm(Shape):
    """The vLLM installed beside the doctor (located, never imported)."""

    installed: bool = False
    version: str | None = None
    root: str | None = None
    probe_error: str | None = None
    metric_names: dict[str, str] = field(default_factory=dict)
    metrics_file: str | None = None
    metrics_file_error: str | None = None
    layer_ids_plus_one: bool | None = None
    """Whether its model runner adds 1 to each target_layer_ids entry (None: its source was not readable)."""


@frozen_dataclass(frozen=True)
class ModelConfig(Shape):
    """What a model directory's config.json says, as copied into the facts (facts.live.live._config): the user's own
    values stay raw here and are read through the accessors."""

    path: str = ""
    num_hidden_layers: Any = None
    quantization_config: Any = None
    torch_dtype: Any = None
    target_layer_ids: Any = None
    num_target_layers: Any = None
    max_position_embeddings: int | None = None
    rope_type: str | None = None
    target_layer_ids_count: int | None = None

    def layer_ids(self) -> list[int] | None:
        """target_layer_ids when it is a non-empty list of integers."""
        ids = self.target_layer_ids
        if isinstance(ids, list) and ids and all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            return list(ids)
        return None

    def layers(self) -> int | None:
        """num_hidden_layers when it is an integer."""
        value = self.num_hidden_layers
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def layers_text(self) -> str | None:
        """num_hidden_layers as the config writes it, when it says something."""
        return str(self.num_hidden_layers) if self.num_hidden_layers else None

    def quantization(self) -> str | None:
        """The quantization_config's quant_method (or the value itself when it is not an object), when set."""
        value = self.quantization_config
        method = value.get("quant_method") if isinstance(value, dict) else value
        return str(method) if method else None

    def context(self) -> int | None:
        """max_position_embeddings as a count."""
        return _count(self.max_position_embeddings)


@frozen_dataclass(frozen=True)
class SpeculativeConfig(Shape):
    """The serve command's --speculative-config (its JSON, as the user wrote it: raw values)."""

    method: Any = None
    model: Any = None
    num_speculative_tokens: Any = None
    quantization: Any = None

    def k(self) -> int | None:
        """num_speculative_tokens when it is a count."""
        return _count(self.num_speculative_tokens)


@frozen_dataclass(frozen=True)
class ServeContext(Shape):
    """What the serve command says (`serve --exec --live`, or `live URL -- vllm serve ...`) and the configs of
    the directories it names."""

    serve_command_known: bool = False
    speculative_config: SpeculativeConfig | None = None
    drafter: ModelConfig | None = None
    enforce_eager: bool = False
    attention_backend: str | None = None
    quantization: str | None = None
    kv_cache_dtype: str | None = None
    max_model_len: str | None = None
    requested_max_model_len: int | None = None
    target: ModelConfig | None = None


@frozen_dataclass(frozen=True)
class MalformedField(Shape):
    """A field of the server's answers that did not have its type (read as absent)."""

    answer: str = ""
    field: str = ""
    expected: str = ""
    found: str = ""
    """The first wrong value's JSON type."""
    times: int = 0


@frozen_dataclass(frozen=True)
class Figures(Shape):
    """What a live run measured (checks.live's `measure`): the counters' differences over the workload and the
    figures derived from them. A figure that could not be derived is left out of the JSON."""

    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    mean_acceptance_length: float | None = None
    draft_tokens_per_step: float | None = None
    per_position: list[float | None] | None = None
    acceptance_rate: float | None = None
    output_tokens_per_s: float | None = None
    wall_s: float | None = None
    generation_tokens: float | None = None
    backwards: dict[str, list[float]] | None = None
    """Counters lower after the workload than before it: [before, after]."""

    ALWAYS: ClassVar[tuple[str, ...]] = ("drafts", "draft_tokens", "accepted_tokens", "wall_s")

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in dump(self).items() if v is not None or k in self.ALWAYS}


@frozen_dataclass(frozen=True)
class Baseline(Shape):
    """The saved live report given with --baseline: where, its workload's digest, its figures."""

    path: str | None = None
    digest: str | None = None
    figures: Figures = field(default_factory=Figures)
    created: str | None = None


@frozen_dataclass(frozen=True)
class Live(Shape):
    SECTION: ClassVar[str] = "live"

    given: bool = False
    """Whether a server was named (`live URL`, `serve --exec --live`); nothing else is there when not."""
    url: str | None = None
    api_key_env: str | None = None
    api_key_set: bool = False
    """Whether the variable named a key; the key itself is never stored."""
    server: StartedServer | None = None
    health: Endpoint = field(default_factory=Endpoint)
    models: ModelsAnswer = field(default_factory=ModelsAnswer)
    metric_names: MetricNames = field(default_factory=MetricNames)
    metrics_before: MetricsScrape | None = None
    metrics_after: MetricsScrape | None = None
    workload: Workload = field(default_factory=Workload)
    vllm: InstalledVllm = field(default_factory=InstalledVllm)
    context: ServeContext = field(default_factory=ServeContext)
    malformed: list[MalformedField] = field(default_factory=list)
    baseline: Baseline | None = None
    seconds: float | None = None
