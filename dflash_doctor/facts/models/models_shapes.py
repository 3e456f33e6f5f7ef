"""The shape of the `models` section (`facts.models.models`): the target and drafter models named on the command
line or in the serve command, each described from its files (config, weights' headers, tokenizer).

Typed to the leaves: a model (`Model`) has its resolved path (`ResolvedPath`), its directory (`ModelDir`: the
config facts, the weights with their index, files, dtypes and tensors, the card, the problems), its tokenizer
config. The user's own config.json values stay raw in one place, `ModelConfig`, which reads them through typed
accessors (`config.text.int("num_hidden_layers")`, `config.text.layer_types`, `config.drafter_keys`)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import field
from typing import Any, ClassVar, TypeGuard

from dflash_doctor.facts.shape import Shape, frozen_dataclass

__all__ = [
    "ConfigView",
    "DtypeTotal",
    "HfCache",
    "LayerCount",
    "ListSummary",
    "Model",
    "ModelCard",
    "ModelConfig",
    "ModelDir",
    "Models",
    "Problem",
    "RefusedFile",
    "ResolvedPath",
    "SpeculatorsLaunch",
    "Tensor",
    "TokenizerConfig",
    "WeightFile",
    "Weights",
    "WeightsIndex",
    "is_int",
]


_Int = int
_Str = str
_List = list


def is_int(value: object) -> TypeGuard[int]:
    """A JSON integer (not a boolean)."""
    return isinstance(value, int) and not isinstance(value, bool)


class ConfigView:
    """A part of a user's config.json (the text config, the drafter keys, a nested block such as dflash_config),
    read through typed accessors: whatever a hand-written file holds, each accessor gives its type or None."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[_Str, Any] | None = None) -> None:
        self._data: dict[_Str, Any] = dict(data) if isinstance(data, Mapping) else {}

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[_Str]:
        return iter(self._data)

    def __len__(self) -> _Int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ConfigView) and other._data == self._data

    __hash__ = None  # type: ignore[assignment]  # equal by value, and the values are a dict

    def __repr__(self) -> _Str:
        return f"ConfigView({self._data!r})"

    def raw(self) -> dict[_Str, Any]:
        """A copy of the values as config.json has them."""
        return dict(self._data)

    def value(self, key: _Str, default: Any = None) -> Any:
        """The raw value of `key` (any JSON value), `default` when absent."""
        return self._data.get(key, default)

    def int(self, key: _Str) -> _Int | None:
        value = self._data.get(key)
        return value if is_int(value) else None

    def number(self, key: _Str) -> float | None:
        """A finite number (int or float, not a boolean)."""
        value = self._data.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            try:
                return value if math.isfinite(value) else None
            except OverflowError:
                return None
        return None

    def str(self, key: _Str) -> _Str | None:
        value = self._data.get(key)
        return value if isinstance(value, str) else None

    def list(self, key: _Str) -> _List[Any] | None:
        value = self._data.get(key)
        return value if isinstance(value, list) else None

    def view(self, key: _Str) -> ConfigView:
        """A nested object (`dflash_config`), empty when absent or not an object."""
        return ConfigView(self._data.get(key) if isinstance(self._data.get(key), dict) else None)

    def truthy(self, key: _Str, default: bool = False) -> bool:
        return bool(self._data.get(key, default))

    # The keys the checks read by meaning.

    @property
    def layer_types(self) -> _List[Any] | None:
        return self.list("layer_types")

    @property
    def head_dim(self) -> _Int | None:
        """head_dim, else hidden_size // num_attention_heads (as vLLM derives it)."""
        head_dim, hidden, heads = self.int("head_dim"), self.int("hidden_size"), self.int("num_attention_heads")
        if head_dim is not None:
            return head_dim
        if hidden is not None and heads is not None and heads > 0:
            return hidden // heads
        return None

    @property
    def torch_dtype(self) -> Any:
        return self._data.get("torch_dtype") or self._data.get("dtype")

    def rope_entries(self, layer_types: tuple[_Str, ...] | _List[_Str]) -> _List[ConfigView]:
        """The RoPE entries (rope_parameters, else rope_scaling): one, or one per layer type when the block is
        keyed by the given layer types; empty entries left out."""
        rope = self._data.get("rope_parameters") or self._data.get("rope_scaling")
        if not isinstance(rope, dict) or not rope:
            return []
        if set(rope) <= set(layer_types):
            return [ConfigView(entry) for entry in rope.values() if isinstance(entry, dict) and entry]
        return [ConfigView(rope)]

    @property
    def rope_type(self) -> Any:
        """A RoPE entry's kind ("rope_type", else the older "type")."""
        return self._data.get("rope_type") or self._data.get("type")


@frozen_dataclass(frozen=True)
class ListSummary(Shape):
    """model_dir.list_summary: a config.json list longer than the facts keep."""

    count: int = 0
    kept: int = 0
    ints: bool = False
    min: int | None = None
    max: int | None = None
    increasing: bool | None = None
    repeats: bool | None = None
    values: dict[str, int] | None = None
    other: int | None = None


@frozen_dataclass(frozen=True)
class ModelConfig(Shape):
    """model_dir._read_config: config.json as the facts keep it. The user's values (architectures, model_type,
    the text view, the drafter keys, the quantization config) stay raw here and are read through accessors."""

    file: str = ""
    keys: list[str] = field(default_factory=list)
    """The first keys of config.json, and always quantization_config/compression_config when present."""
    architectures_raw: Any = field(default=None, metadata={"key": "architectures"})
    model_type_raw: Any = field(default=None, metadata={"key": "model_type"})
    text_from: str | None = None
    """Where the language-model config sits in a multimodal config ("text_config", ...); None: the top level."""
    text_raw: dict[str, Any] = field(default_factory=dict, metadata={"key": "text"})
    drafter_raw: dict[str, Any] = field(default_factory=dict, metadata={"key": "drafter"})
    lists: dict[str, ListSummary] = field(default_factory=dict)
    """Summaries of the lists longer than the facts keep, by place ("text.layer_types")."""
    auto_map: list[str] | None = None
    quantization_config: Any = None
    vision_config: bool = False

    @property
    def text(self) -> ConfigView:
        """The language model's keys (model_dir.TEXT_KEYS), from the nested text config or the top level."""
        return ConfigView(self.text_raw)

    @property
    def drafter(self) -> ConfigView:
        """The drafter-specific keys (model_dir.DRAFTER_KEYS) as config.json has them."""
        return ConfigView(self.drafter_raw)

    @property
    def architectures(self) -> list[str]:
        """The names in "architectures"; [] when it is absent or not a list."""
        archs = self.architectures_raw
        return [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else []

    @property
    def model_type(self) -> str | None:
        return self.model_type_raw if isinstance(self.model_type_raw, str) else None

    @property
    def quantization(self) -> ConfigView:
        return ConfigView(self.quantization_config if isinstance(self.quantization_config, dict) else None)

    def long_list(self, where: str) -> ListSummary | None:
        """The summary of a list the facts keep only the start of ("text.layer_types"); None when kept whole."""
        return self.lists.get(where)

    def list_length(self, where: str, kept: list[Any]) -> int:
        """How many items the config's list had (the kept part is cut at model_dir.CONFIG_LIST_MAX)."""
        summary = self.lists.get(where)
        return summary.count if summary is not None else len(kept)

    def value_count(self, where: str, kept: list[Any], value: str) -> int:
        """How often `value` occurs in the config's whole list (kept part, or the summary's counts)."""
        summary = self.lists.get(where)
        if summary is not None and summary.values is not None:
            return summary.values.get(value, 0)
        return kept.count(value)


@frozen_dataclass(frozen=True)
class WeightsIndex(Shape):
    """model.safetensors.index.json."""

    file: str = ""
    total_size: int | None = None
    shards: list[str] = field(default_factory=list)
    shard_count: int = 0
    tensor_count: int = 0


@frozen_dataclass(frozen=True)
class WeightFile(Shape):
    """One safetensors file's header summary."""

    file: str = ""
    size: int | None = None
    header_len: int | None = None
    data_len: int | None = None
    tensor_count: int = 0
    bytes: int = 0
    metadata: dict[str, str] = field(default_factory=dict)


@frozen_dataclass(frozen=True)
class DtypeTotal(Shape):
    tensors: int = 0
    bytes: int = 0


@frozen_dataclass(frozen=True)
class Tensor(Shape):
    """One tensor of a safetensors header (shape cut to its first dimensions when `rank` is set)."""

    dtype: str = ""
    shape: list[int] = field(default_factory=list)
    bytes: int | None = None
    file: str = ""
    rank: int | None = None

    @property
    def full_shape(self) -> list[int] | None:
        """The shape when the facts keep every dimension; None when it was cut."""
        return None if self.rank is not None else list(self.shape)


@frozen_dataclass(frozen=True)
class LayerCount(Shape):
    """The decoder layers (`layers.N`, `midlayer`) the tensor names show."""

    count: int = 0
    first: list[int] = field(default_factory=list)
    max: int | None = None


@frozen_dataclass(frozen=True)
class Weights(Shape):
    """model_dir._read_weights: the weight files, their totals and the kept tensors."""

    layout: str = "none"
    """"none", "single", "sharded" or "unindexed"."""
    index: WeightsIndex | None = None
    files: list[WeightFile] = field(default_factory=list)
    unlisted_files: list[str] = field(default_factory=list)
    other_weight_files: list[str] = field(default_factory=list)
    tensor_count: int = 0
    total_bytes: int = 0
    file_bytes: int = 0
    dtypes: dict[str, DtypeTotal] = field(default_factory=dict)
    tensors_complete: bool = True
    tensors: dict[str, Tensor] = field(default_factory=dict)
    layers: LayerCount = field(default_factory=LayerCount)
    groups: dict[str, int] | None = None


@frozen_dataclass(frozen=True)
class ModelCard(Shape):
    """README.md's front matter: what the model was made from."""

    file: str = ""
    base_model: list[str] = field(default_factory=list)


@frozen_dataclass(frozen=True)
class Problem(Shape):
    """A problem with the model files (safetensors_header.problem)."""

    kind: str = ""
    message: str = ""
    file: str = ""
    tensor: str | None = None
    omitted: int | None = None
    """A summary record: how many more problems of this kind and file were not listed."""


@frozen_dataclass(frozen=True)
class ModelDir(Shape):
    """model_dir.read_model_dir: a model directory from its files."""

    path: str = ""
    config: ModelConfig | None = None
    weights: Weights = field(default_factory=Weights)
    tokenizer_files: list[str] = field(default_factory=list)
    processor_files: list[str] = field(default_factory=list)
    card: ModelCard | None = None
    problems: list[Problem] = field(default_factory=list)


@frozen_dataclass(frozen=True)
class RefusedFile(Shape):
    """A file the doctor refuses to read: one of a model directory's (facts.modelfiles.refused_files), or a
    Hugging Face cache ref."""

    file: str = ""
    kind: str = ""
    message: str = ""


@frozen_dataclass(frozen=True)
class HfCache(Shape):
    """Where a repo id was looked up in the Hugging Face cache."""

    cache: str = ""
    repo_dir: str = ""
    snapshot: str | None = None
    revision: str | None = None
    ref_refused: RefusedFile | None = None
    """refs/main, when the doctor refused to read it (not a regular file, over REF_MAX_BYTES)."""


@frozen_dataclass(frozen=True)
class ResolvedPath(Shape):
    """facts.models.models.resolve_model_path: where a model name leads."""

    given: str = ""
    path: str | None = None
    source: str | None = None
    """"local" or "hf-cache"."""
    exists: bool = False
    is_dir: bool = False
    readable: bool = False
    hf_cache: HfCache | None = None
    error: str | None = None


@frozen_dataclass(frozen=True)
class TokenizerConfig(Shape):
    file: str = ""
    model_max_length: float | None = None
    error: str | None = None


@frozen_dataclass(frozen=True)
class Model(Shape):
    """facts.models.models.describe_model: one model, from its files."""

    role: str = ""
    """"target" or "drafter"."""
    name: str = ""
    resolved: ResolvedPath = field(default_factory=ResolvedPath)
    dir: ModelDir | None = None
    prefix_bytes: dict[str, int] | None = None
    """The target's bytes per top-level tensor-name prefix."""
    extra_files: list[str] | None = None
    """The drafter's other files vLLM reads (mask_embedding.pt)."""
    tokenizer_config: TokenizerConfig | None = None
    seconds: float = 0.0

    @property
    def config(self) -> ModelConfig | None:
        return self.dir.config if self.dir is not None else None

    @property
    def text(self) -> ConfigView:
        """The text config's keys (empty without a readable config.json)."""
        return self.config.text if self.config is not None else ConfigView()

    @property
    def weights(self) -> Weights:
        return self.dir.weights if self.dir is not None else Weights()

    @property
    def architectures(self) -> list[str]:
        return self.config.architectures if self.config is not None else []

    @property
    def config_file(self) -> str:
        """config.json's path (as the facts name it, else where it would be)."""
        if self.config is not None and self.config.file:
            return self.config.file
        return f"{self.resolved.path or self.name}/config.json"


@frozen_dataclass(frozen=True)
class SpeculatorsLaunch(Shape):
    """facts.models.models.speculators_launch: `vllm serve SPECULATORS_DIR` read from the directory's config.json."""

    model: str | None = None
    file: str | None = None
    verifier_key: bool = False
    verifier: str | None = None
    verifier_type: str = ""
    verifier_exists: bool = False
    speculative_tokens_key: bool = False
    speculative_tokens: Any = None
    """As config.json says it (the user's value, any JSON)."""
    method_key: bool = False
    method: Any = None
    """speculators_model_type, as config.json says it."""
    layer_config: bool = False


@frozen_dataclass(frozen=True)
class Models(Shape):
    SECTION: ClassVar[str] = "models"

    given: bool = False
    source: str | None = None
    """Where the names came from ("serve": the serve command, else the command line)."""
    target: Model | None = None
    """`facts.models.models.describe_model` of the target (None: not given)."""
    drafter: Model | None = None
    speculators_launch: SpeculatorsLaunch | None = None
    """`vllm serve SPECULATORS_DIR` (facts.models.models.speculators_launch): the verifier vLLM serves instead,
    read from the directory's config.json; the directory is then the drafter and the verifier the target."""
    seconds: float | None = None
