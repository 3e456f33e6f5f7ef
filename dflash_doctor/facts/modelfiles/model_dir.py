"""Facts about a model directory (target or DFlash drafter), from its files alone.

Reads `config.json`, `model.safetensors[.index.json]` headers and the tokenizer file list;
never tensor data, never torch, never writes. Judgement (does the drafter fit the target?)
lives elsewhere and works on the dict returned here.
"""

from __future__ import annotations

import itertools
import os
import re
import stat
from collections.abc import Callable, Collection, Iterable
from typing import Any, Final

from dflash_doctor.documents.jsondoc import MAX_VALUES, DocumentError, parse_json
from dflash_doctor.facts.modelfiles.safetensors_header import (
    DTYPE_BITS,
    FATAL_KINDS,
    MAX_DTYPES,
    MAX_GROUPS,
    MAX_TENSORS_KEPT,
    OTHER_GROUP,
    JSONDict,
    Problems,
    header_refusal,
    problem,
    read_header_and_names,
)

__all__ = [
    "CONFIG_LIST_MAX",
    "DRAFTER_KEYS",
    "LANDMARK_SUFFIXES",
    "LAYERS_KEPT",
    "TEXT_KEYS",
    "TOKENIZER_FILES",
    "read_model_dir",
    "refused_files",
]

MODEL_JSON_MAX_VALUES = 8_000_000
"""The most values a model directory's JSON may hold: a config.json within its 16 MiB cap holds at most about
eight million numbers (a hand-written `target_layer_ids` of millions is a finding, not a refusal), which parse well
under 1 GB; a cap's worth of empty objects counts more and is refused before it is parsed."""

CONFIG_NAME: Final[str] = "config.json"
SINGLE_NAME: Final[str] = "model.safetensors"
INDEX_NAME: Final[str] = "model.safetensors.index.json"

# A config or index larger than this is not a config: refuse instead of loading it.
CONFIG_MAX_BYTES: Final[int] = 16 * 1024 * 1024
INDEX_MAX_BYTES: Final[int] = 128 * 1024 * 1024
JSON_MAX_BYTES: Final[dict[str, int]] = {"tokenizer.json": 128 * 1024 * 1024}
"""JSON files of a model directory that are larger than config.json by nature (a tokenizer's vocabulary and
merges: tens of MB), and the most of each the doctor lets vLLM's validation be given; any other, CONFIG_MAX_BYTES."""
# The largest published checkpoints index ~2e5 tensors in a few hundred shards; an index that names more is
# not read (its weight_map alone would take gigabytes as Python objects), and the shards it names are read up
# to MAX_SHARDS.
INDEX_MAX_TENSORS: Final[int] = 1_000_000
MAX_SHARDS: Final[int] = 4096
# The headers of all files together: a real checkpoint's come to a few MB (1e5 tensors); past this many bytes
# (one header may be 100 MB) the remaining files are not read, so that the names kept for the cross-checks stay
# within memory and time.
HEADERS_MAX_BYTES: Final[int] = 128 * 1024 * 1024
# Lists kept from config.json: the first CONFIG_LIST_MAX items; config["lists"] has the count and a summary of
# every longer one (a config may say "layer_types" four million times).
CONFIG_LIST_MAX: Final[int] = 1024
CONFIG_DICT_MAX: Final[int] = 256
CONFIG_DEPTH_MAX: Final[int] = 8
CONFIG_STRING_MAX: Final[int] = 1024
CONFIG_NODES_MAX: Final[int] = 20_000
CONFIG_CHARS_MAX: Final[int] = 1_000_000
# The index facts list this many shard names ("shard_count" has them all).
SHARDS_LISTED: Final[int] = 256
# Tensors a drafter's checks read by name, kept in the facts whatever else its files hold: these names, and
# the decoder layers below LAYERS_KEPT.
DRAFTER_NAMED: Final[frozenset[str]] = frozenset(
    {"fc.weight", "norm.weight", "hidden_norm.weight", "embed_tokens.weight", "lm_head.weight", "d2t", "t2d"}
)
LAYERS_KEPT: Final[int] = 8  # _WANTED spells it [0-7]
# One match per name (a header may hold a million): DRAFTER_NAMED with or without "model.", or a layer below
# LAYERS_KEPT (a single digit: LAYERS_KEPT is 8) or midlayer (layer 0 of EAGLE-style checkpoints), or a Domino
# head's module (knowledge.dflash_formats.DOMINO_HEAD).
_WANTED: Final[re.Pattern[str]] = re.compile(
    r"(?:model\.)?(?:(?:" + "|".join(re.escape(n) for n in sorted(DRAFTER_NAMED)) + r")$|(?:layers\.[0-7]|midlayer)\."
    r"|(?:prefix_gru|embed_proj)\.)"
)

# The flat "text" view: what a drafter/target comparison needs, wherever the config nests it.
TEXT_KEYS: Final[tuple[str, ...]] = (
    "architectures",
    "model_type",
    "num_hidden_layers",
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
    "torch_dtype",
    "dtype",
    "max_position_embeddings",
    # The other keys vLLM derives a context length from (MAX_LEN_DERIVATION), and longrope's default.
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
    "original_max_position_embeddings",
    # Experts counts: vLLM's is_moe (model_arch_config_convertor.get_num_experts), which picks the model runner.
    "num_experts",
    "moe_num_experts",
    "n_routed_experts",
    "num_local_experts",
    "tie_word_embeddings",
    "layer_types",
    "sliding_window",
    # Required by the MLX DFlash loader (omlx #2317: a missing rope_theta broke loading).
    "rms_norm_eps",
    "rope_theta",
    "rope_scaling",
    "rope_parameters",
    "attention_bias",
)

# Drafter-specific keys, kept verbatim (dflash.md section 1; vLLM qwen3_dflash.py / EAGLEConfig).
DRAFTER_KEYS: Final[tuple[str, ...]] = (
    "dflash_config",
    "block_size",
    "target_hidden_size",
    "num_target_layers",
    "mask_token_id",
    "target_layer_ids",
    "draft_vocab_size",
    "eagle_config",
    # vllm-project/speculators' format (vLLM transformers_utils/configs/speculators): the dims are nested in
    # transformer_layer_config (read as the text config), the DFlash keys sit at the top level.
    "speculators_model_type",
    "aux_hidden_state_layer_ids",
    "eagle_aux_hidden_state_layer_ids",
    "sample_from_anchor",
    "sliding_window_non_causal",
    "conv_kernel_size",
    "conv_group_size",
    "selector_rank",
    "selector_top_k",
    # vLLM's one-command launch (`vllm serve SPECULATORS_DIR`) reads the verifier and k from here
    # (transformers_utils/config.py maybe_override_with_speculators).
    "speculators_config",
    # The drafter's RoPE layout, read by DFlashQwen3DecoderLayer from 0.28.0 (default True: neox).
    "is_neox_style",
    # Its causality, read first by qwen3_dflash.py _dflash_layer_causal from 0.28.0 (knowledge.dflash_formats).
    "is_causal",
)

# Where multimodal configs keep the language model's config, in lookup order.
_TEXT_CONFIG_PATHS: Final[tuple[tuple[str, ...], ...]] = (
    ("text_config",),
    ("llm_config",),
    ("language_config",),
    ("thinker_config", "text_config"),
    ("transformer_layer_config",),
)

TOKENIZER_FILES: Final[tuple[str, ...]] = (
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "tiktoken.model",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "chat_template.jinja",
    "chat_template.json",
)

# Files a multimodal checkpoint ships for its image/video processor (transformers' processor configs).
PROCESSOR_FILES: Final[tuple[str, ...]] = (
    "preprocessor_config.json",
    "processor_config.json",
    "video_preprocessor_config.json",
)
README_MAX_BYTES: Final[int] = 64 * 1024
# Bounds on the quantization_config kept verbatim: a checkpoint may list thousands of ignored modules.
QUANT_LIST_MAX: Final[int] = 64
QUANT_DEPTH_MAX: Final[int] = 6

_OTHER_WEIGHT_SUFFIXES: Final[tuple[str, ...]] = (".bin", ".pt", ".pth", ".gguf", ".ckpt")

# Kept in summary mode: the drafter reuses the target's embedding and lm_head, so their
# shapes (vocab x hidden) are what a drafter check needs from an otherwise summarised target.
LANDMARK_SUFFIXES: Final[tuple[str, ...]] = ("embed_tokens.weight", "lm_head.weight")


def read_model_dir(
    path: str | os.PathLike[str],
    *,
    keep_tensors: bool = True,
    landmarks: Collection[str] = LANDMARK_SUFFIXES,
    group: Callable[[str], str] | None = None,
) -> JSONDict:
    """Facts about the model in `path`; JSON-able; never raises on bad input.

    `keep_tensors=True` keeps every tensor's dtype/shape/bytes/file (use for a drafter) up to
    MAX_TENSORS_KEPT; past that, the tensors a drafter check reads by name (DRAFTER_NAMED, the layers
    below LAYERS_KEPT) and the first others, with "tensors_complete" False and "layers" counting every
    `layers.N` (or `midlayer`) the names show, as vLLM's DFlash loader reads a drafter's names. False keeps counts, bytes and a dtype histogram, plus only tensors
    whose names end with one of `landmarks` (use for a target with thousands of tensors). `group`
    adds "groups" to the weights: bytes per group(name).
    """
    root = os.fspath(path)
    facts: JSONDict = {
        "path": root,
        "config": None,
        "weights": _empty_weights(keep_tensors),
        "tokenizer_files": [],
        "processor_files": [],
        "card": None,
        "problems": [],
    }
    problems = Problems()
    names = _list_dir(root, problems)
    if names is None:
        facts["problems"] = problems.capped()
        return facts
    facts["config"] = _read_config(root, names, problems)
    facts["weights"] = _read_weights(root, names, keep_tensors, tuple(landmarks), group, problems)
    facts["tokenizer_files"] = [n for n in TOKENIZER_FILES if n in names]
    facts["processor_files"] = [n for n in PROCESSOR_FILES if n in names]
    facts["card"] = _model_card(root, names)
    facts["problems"] = problems.capped()
    return facts


def _empty_weights(keep_tensors: bool) -> JSONDict:
    return {
        "layout": "none",
        "index": None,
        "files": [],
        "unlisted_files": [],
        "other_weight_files": [],
        "tensor_count": 0,
        "total_bytes": 0,
        "file_bytes": 0,
        "dtypes": {},
        "tensors_complete": keep_tensors,
        "tensors": {},
        "layers": {"count": 0, "first": [], "max": None},
    }


def _list_dir(root: str, problems: list[JSONDict]) -> set[str] | None:
    try:
        return set(os.listdir(root))
    except FileNotFoundError:
        problems.append(problem("missing-dir", root, "model directory does not exist"))
    except NotADirectoryError:
        problems.append(problem("not-a-dir", root, "is not a directory"))
    except OSError as exc:
        problems.append(problem("unreadable", root, f"cannot list directory: {exc.strerror or exc}"))
    return None


# --- JSON files -------------------------------------------------------------------------------


def _read_json(file: str, max_bytes: int, problems: list[JSONDict], max_pairs: int | None = None) -> Any:
    """Parsed JSON, or None with a problem. A missing file is the caller's business (checked before)."""
    refused = _json_refusal(file, max_bytes)
    if refused is not None:
        problems.append(refused)
        return None
    try:
        with open(file, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > max_bytes:  # it grew since the look above
                problems.append(_too_large(file, size, max_bytes))
                return None
            raw = handle.read(max_bytes + 1)
    except OSError as exc:
        problems.append(problem("unreadable", file, f"cannot read: {exc.strerror or exc.__class__.__name__}"))
        return None
    if max_pairs is not None and _estimated_entries(raw) > max_pairs:
        problems.append(
            problem("bad-index", file, f"holds up to {_estimated_entries(raw)} name/value pairs; refusing to parse "
                    f"more than {max_pairs} (the largest published checkpoints index about 200000 tensors)")
        )
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        problems.append(problem("bad-json", file, f"not UTF-8 text (binary data at byte {exc.start})"))
        return None
    del raw
    try:
        # bounded: nested at most jsondoc.MAX_DEPTH deep, integers of at most 100 digits, and in values (an index
        # by its names: max_pairs, each one comma)
        return parse_json(text, MODEL_JSON_MAX_VALUES if max_pairs is None else max(MAX_VALUES, 2 * max_pairs))
    except DocumentError as exc:
        problems.append(problem("bad-json", file, str(exc)))
    return None


def _too_large(file: str, size: int, max_bytes: int) -> JSONDict:
    return problem("too-large", file, f"{size} bytes; refusing to parse more than {max_bytes}")


def _json_refusal(file: str, max_bytes: int) -> JSONDict | None:
    """Why the doctor does not read this JSON file at all (not a regular file, more than `max_bytes`), or None
    (it may still fail to read or parse)."""
    try:
        st = os.stat(file)
    except (OSError, ValueError):
        return None
    # Opening a FIFO named config.json would block: only regular files are opened.
    if not stat.S_ISREG(st.st_mode):
        return problem("not-a-file", file, "is not a regular file")
    if st.st_size > max_bytes:
        return _too_large(file, st.st_size, max_bytes)
    return None


def refused_files(path: str | os.PathLike[str]) -> list[JSONDict]:
    """The files of a model directory that the doctor refuses to read, by the same caps `read_model_dir`
    applies (config.json and the index over their size caps or not regular files, a safetensors header over
    its cap), and every other JSON file of the directory by config.json's (vLLM's validation reads
    hf_quant_config.json, modules.json, the processor and sentence-transformers configs whole where they are):
    a stat per file and 8 bytes per safetensors file. A reader that would take such a file whole (vLLM's config
    validation: transformers reads config.json entire) is not to be given the directory."""
    root = os.fspath(path)
    try:
        names = set(os.listdir(root))
    except (OSError, ValueError):
        return []
    caps = {INDEX_NAME: INDEX_MAX_BYTES, **JSON_MAX_BYTES}
    refused = [p for p in (_json_refusal(os.path.join(root, name), caps.get(name, CONFIG_MAX_BYTES))
                           for name in sorted(n for n in names if n.endswith(".json"))) if p is not None]
    for name in sorted(n for n in names if n.endswith(".safetensors"))[:MAX_SHARDS]:
        refused.extend(header_refusal(os.path.join(root, name)))
    return refused


# --- config.json ------------------------------------------------------------------------------


def _read_config(root: str, names: set[str], problems: list[JSONDict]) -> JSONDict | None:
    file = os.path.join(root, CONFIG_NAME)
    if CONFIG_NAME not in names:
        problems.append(problem("missing-config", file, "config.json is missing"))
        return None
    config = _read_json(file, CONFIG_MAX_BYTES, problems)
    if config is None:
        return None
    if not isinstance(config, dict):
        problems.append(
            problem("bad-json", file, f"top level is a JSON {type(config).__name__}, not an object")
        )
        return None
    nested, text_from = _text_config(config)
    lists: dict[str, JSONDict] = {}
    budget = _Budget()
    return {
        "file": file,
        # The first keys in order, and always those a check looks for by name.
        "keys": sorted({k[:CONFIG_STRING_MAX] for k in sorted(config)[:CONFIG_DICT_MAX]}
                       | {k for k in ("quantization_config", "compression_config") if k in config}),
        "architectures": _bounded_config(config.get("architectures"), "architectures", lists, budget),
        "model_type": _bounded_config(config.get("model_type"), "model_type", lists, budget),
        "text_from": text_from,
        "text": _bounded_config(_text_view(config, nested), "text", lists, budget),
        "drafter": _bounded_config({k: config[k] for k in DRAFTER_KEYS if k in config}, "drafter", lists, budget),
        "lists": lists,
        "auto_map": sorted(str(k)[:CONFIG_STRING_MAX] for k in list(config["auto_map"])[:CONFIG_DICT_MAX])
        if isinstance(config.get("auto_map"), dict) else None,
        "quantization_config": _bounded(_quantization_config(config, nested)),
        "vision_config": isinstance(config.get("vision_config"), dict),
    }


class _Budget:
    """What the config facts may still copy: CONFIG_NODES_MAX values and CONFIG_CHARS_MAX characters of strings
    in all, so that a 16 MB config.json gives facts of well under a few MB whatever its shape."""

    def __init__(self) -> None:
        self.nodes, self.chars = CONFIG_NODES_MAX, CONFIG_CHARS_MAX

    def take(self, chars: int = 0) -> bool:
        self.nodes -= 1
        self.chars -= chars
        return self.nodes >= 0 and self.chars >= 0


def _bounded_config(value: Any, where: str, lists: dict[str, JSONDict], budget: _Budget | None = None,
                    depth: int = 0) -> Any:
    """A config value as the facts keep it: lists cut to CONFIG_LIST_MAX items (the count and a summary of
    the whole list go to `lists[where]`, e.g. "drafter.dflash_config.target_layer_ids"), objects to
    CONFIG_DICT_MAX keys, strings to CONFIG_STRING_MAX characters, nesting to CONFIG_DEPTH_MAX levels, all of
    it to the budget (None past it)."""
    budget = budget if budget is not None else _Budget()
    if depth >= CONFIG_DEPTH_MAX:
        return None
    if isinstance(value, str):
        kept = value[:CONFIG_STRING_MAX]
        return kept if budget.take(len(kept)) else None
    if not budget.take():
        return None
    if isinstance(value, dict):
        return {str(k)[:CONFIG_STRING_MAX]: _bounded_config(v, f"{where}.{k}", lists, budget, depth + 1)
                for k, v in list(value.items())[:CONFIG_DICT_MAX]}
    if isinstance(value, list):
        if len(value) > CONFIG_LIST_MAX:
            lists[where[:CONFIG_STRING_MAX]] = list_summary(value)
        return [_bounded_config(v, f"{where}[]", lists, budget, depth + 1) for v in value[:CONFIG_LIST_MAX]]
    return value


def list_summary(values: list[Any]) -> JSONDict:
    """What a check needs of a long list without the list: its length; for integers (layer ids) min, max and
    whether they strictly increase or repeat; for strings (layer types) the count of each of the first 16
    distinct values."""
    summary: JSONDict = {"count": len(values), "kept": CONFIG_LIST_MAX}
    if all(type(v) is int for v in values):
        summary.update(ints=True, min=min(values, default=None), max=max(values, default=None),
                       increasing=all(a < b for a, b in itertools.pairwise(values)),
                       repeats=len(set(values)) != len(values))
    else:
        summary["ints"] = False
        if all(type(v) is str for v in values):
            counts: dict[str, int] = {}
            other = 0
            for v in values:
                if v in counts or len(counts) < 16:
                    counts[v] = counts.get(v, 0) + 1
                else:
                    other += 1
            summary.update(values={k[:64]: n for k, n in counts.items()}, other=other)
    return summary


def _quantization_config(config: dict[str, Any], nested: dict[str, Any] | None) -> Any:
    for source in (config, nested or {}):
        value = source.get("quantization_config", source.get("compression_config"))
        if value is not None:
            return value
    return None


def _bounded(value: Any, depth: int = 0) -> Any:
    """A JSON value cut to QUANT_LIST_MAX items per list/object and QUANT_DEPTH_MAX levels."""
    if depth >= QUANT_DEPTH_MAX:
        return None
    if isinstance(value, dict):
        return {str(k): _bounded(v, depth + 1) for k, v in list(value.items())[:QUANT_LIST_MAX]}
    if isinstance(value, list):
        return [_bounded(v, depth + 1) for v in value[:QUANT_LIST_MAX]]
    if isinstance(value, str):
        return value[:256]
    return value


def _model_card(root: str, names: set[str]) -> JSONDict | None:
    """What README.md's YAML front matter says the model was made from (`base_model:`), read from at most
    README_MAX_BYTES of a regular file; None without a README."""
    if "README.md" not in names:
        return None
    file = os.path.join(root, "README.md")
    try:
        if not stat.S_ISREG(os.stat(file).st_mode):
            return {"file": file, "base_model": []}
        with open(file, "rb") as handle:
            text = handle.read(README_MAX_BYTES).decode("utf-8", "replace")
    except OSError:
        return {"file": file, "base_model": []}
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {"file": file, "base_model": []}
    found: list[str] = []
    in_list = False
    for line in lines[1:200]:
        if line.strip() == "---":
            break
        if line.startswith("base_model:"):
            value = line.split(":", 1)[1].strip().strip("'\"")
            in_list = not value
            if value:
                found.append(value)
            continue
        if in_list and line.lstrip().startswith("- "):
            found.append(line.lstrip()[2:].strip().strip("'\""))
        elif in_list and line and not line.startswith(" "):
            in_list = False
    return {"file": file, "base_model": found[:8]}


def _text_config(config: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """The nested language-model config of a multimodal config, and its dotted key path."""
    for keys in _TEXT_CONFIG_PATHS:
        node: Any = config
        for key in keys:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict):
            return node, ".".join(keys)
    return None, None


def _text_view(config: dict[str, Any], nested: dict[str, Any] | None) -> dict[str, Any]:
    """TEXT_KEYS from the nested text config, else the top level. Absent keys are left out, so an
    explicit null (e.g. `sliding_window: null`) stays distinguishable from a missing key."""
    view: dict[str, Any] = {}
    for key in TEXT_KEYS:
        if nested is not None and key in nested:
            view[key] = nested[key]
        elif key in config:
            view[key] = config[key]
    return view


# --- weights ----------------------------------------------------------------------------------


def _read_weights(
    root: str,
    names: set[str],
    keep_tensors: bool,
    landmarks: tuple[str, ...],
    group: Callable[[str], str] | None,
    problems: list[JSONDict],
) -> JSONDict:
    weights = _empty_weights(keep_tensors)
    on_disk = sorted(n for n in names if n.endswith(".safetensors"))
    weights["other_weight_files"] = sorted(n for n in names if n.endswith(_OTHER_WEIGHT_SUFFIXES))[:SHARDS_LISTED]
    weight_map: dict[str, str] | None = None
    if INDEX_NAME in names:
        weights["layout"] = "sharded"
        weight_map = _read_index(root, weights, problems)
    if weight_map is not None:
        to_read = sorted(set(weight_map.values()))
        listed = set(to_read)
        weights["unlisted_files"] = [n for n in on_disk if n not in listed][:SHARDS_LISTED]
    else:
        # No usable index: vLLM loads every *.safetensors in the directory, so read them all.
        to_read = on_disk
        if weights["layout"] == "none" and on_disk:
            weights["layout"] = "single" if on_disk == [SINGLE_NAME] else "unindexed"
    if not to_read and weight_map is None and not weights["other_weight_files"]:
        problems.append(
            problem("no-weights", root, "no weight files (*.safetensors, *.bin, ...) in the directory")
        )
    if len(to_read) > MAX_SHARDS:
        problems.append(problem("too-many-shards", root, f"{len(to_read)} safetensors files to read; the first "
                                f"{MAX_SHARDS} are read"))
        to_read = to_read[:MAX_SHARDS]
    by_shard = _group_by_shard(weight_map) if weight_map is not None else {}
    keep = _drafter_wanted if keep_tensors else (lambda name: name.endswith(landmarks))
    headers = _read_headers(root, to_read, {s: len(names) for s, names in by_shard.items()}, keep, group, problems)
    _summarise(headers, weights, keep_tensors, landmarks, problems)
    if weight_map is not None:
        _cross_check_index(weight_map, by_shard, headers, problems)
    return weights


def _drafter_wanted(name: str) -> bool:
    """A tensor a drafter check reads by name (DRAFTER_NAMED, mask_hidden, the decoder layers below LAYERS_KEPT)."""
    return _WANTED.match(name) is not None or "mask_hidden" in name


def _layer_number(name: str) -> int | None:
    """N of a `layers.N....` name (midlayer is layer 0), as the drafter check reads it."""
    if name.startswith("midlayer."):
        return 0
    if name.startswith("layers."):
        number = name.split(".", 2)[1]
        if number.isdigit() and len(number) <= 18:
            return int(number)
    return None


def _estimated_entries(raw: bytes) -> int:
    """An upper bound on the string pairs in a JSON document: a string takes two quotes, a pair two strings."""
    return raw.count(b'"') // 4


def _read_index(root: str, weights: JSONDict, problems: list[JSONDict]) -> dict[str, str] | None:
    file = os.path.join(root, INDEX_NAME)
    index = _read_json(file, INDEX_MAX_BYTES, problems, max_pairs=INDEX_MAX_TENSORS)
    if index is None:
        return None
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    # JSON object keys are always strings; only the values need checking.
    if not isinstance(weight_map, dict) or not all(type(v) is str for v in weight_map.values()):
        problems.append(
            problem("bad-index", file, "no 'weight_map' object mapping tensor names to shard files")
        )
        return None
    shards = set(weight_map.values())
    unsafe = sorted(v for v in shards if not _is_plain_relative(v))
    if unsafe:
        # Never follow an index out of the model directory.
        problems.append(
            problem("bad-index", file, f"shard paths leave the model directory: {', '.join(unsafe[:5])}")
        )
        refused = set(unsafe)
        weight_map = {k: v for k, v in weight_map.items() if v not in refused}
        shards -= refused
    metadata = index.get("metadata")
    total = metadata.get("total_size") if isinstance(metadata, dict) else None
    weights["index"] = {
        "file": file,
        "total_size": total if isinstance(total, int) and not isinstance(total, bool) else None,
        "shards": sorted(shards)[:SHARDS_LISTED],
        "shard_count": len(shards),
        "tensor_count": len(weight_map),
    }
    return weight_map


def _is_plain_relative(shard: str) -> bool:
    return bool(shard) and not os.path.isabs(shard) and ".." not in shard.replace("\\", "/").split("/")


def _group_by_shard(weight_map: dict[str, str]) -> dict[str, set[str]]:
    by_shard: dict[str, set[str]] = {}
    for name, shard in weight_map.items():
        names = by_shard.get(shard)
        if names is None:
            names = by_shard[shard] = set()
        names.add(name)
    return by_shard


def _read_headers(
    root: str,
    shards: Iterable[str],
    expected: dict[str, int],
    keep: Callable[[str], bool],
    group: Callable[[str], str] | None,
    problems: list[JSONDict],
) -> dict[str, tuple[JSONDict, list[str]]]:
    headers: dict[str, tuple[JSONDict, list[str]]] = {}
    read = 0
    shards = list(shards)
    for at, shard in enumerate(shards):
        if read >= HEADERS_MAX_BYTES:
            problems.append(problem("too-many-shards", root, f"the headers of {at} files hold {read} bytes, more than "
                                    f"any published checkpoint's; the other {len(shards) - at} files were not read"))
            break
        file = os.path.join(root, shard)
        if not os.path.lexists(file):
            problems.append(
                problem(
                    "missing-shard",
                    file,
                    f"the index puts {expected.get(shard, 0)} tensors in this shard, "
                    "but it is not in the directory",
                )
            )
            continue
        headers[shard] = read_header_and_names(file, keep, group)
        read += headers[shard][0]["header_len"] or 0
    return headers


def _summarise(
    headers: dict[str, tuple[JSONDict, list[str]]],
    weights: JSONDict,
    keep_tensors: bool,
    landmarks: tuple[str, ...],
    problems: list[JSONDict],
) -> None:
    """Per-file summaries, totals, the dtype histogram and the kept tensors; file problems move to the flat
    list. Every name of every file is compared (duplicates, layer numbers); only the kept entries are facts."""
    seen_in: dict[str, str] = {}
    dtype_tensors: dict[str, int] = {}
    dtype_bytes: dict[str, int] = {}
    groups: dict[str, int] = {}
    layers: set[int] = set()
    kept: dict[str, JSONDict] = {}
    complete = keep_tensors
    for shard, (header, names) in headers.items():
        problems.extend(header["problems"])
        for name in names:
            other = seen_in.get(name)
            if other is not None:
                problems.append(
                    problem("duplicate-tensor", header["path"], f"tensor '{name}' is also in {other}", tensor=name)
                )
            else:
                seen_in[name] = shard
            number = _layer_number(name)
            if number is not None:
                layers.add(number)
        for dtype, info in header["dtypes"].items():
            if dtype not in DTYPE_BITS and dtype not in dtype_tensors and len(dtype_tensors) >= MAX_DTYPES:
                dtype = OTHER_GROUP
            dtype_tensors[dtype] = dtype_tensors.get(dtype, 0) + info["tensors"]
            dtype_bytes[dtype] = dtype_bytes.get(dtype, 0) + info["bytes"]
        for key, size in (header.get("groups") or {}).items():
            if key not in groups and len(groups) >= MAX_GROUPS:
                key = OTHER_GROUP
            groups[key] = groups.get(key, 0) + size
        tensors: dict[str, JSONDict] = header["tensors"]
        complete = complete and bool(header["tensors_complete"])
        for name, info in tensors.items():
            if keep_tensors or name.endswith(landmarks):
                kept[name] = {**info, "file": shard}
        weights["files"].append(
            {
                "file": shard,
                "size": header["size"],
                "header_len": header["header_len"],
                "data_len": header["data_len"],
                "tensor_count": header["tensor_count"],
                "bytes": header["bytes"],
                "metadata": header["metadata"],
            }
        )
        weights["tensor_count"] += header["tensor_count"]
        weights["total_bytes"] += header["bytes"]
        weights["file_bytes"] += header["size"] or 0
    limit = MAX_TENSORS_KEPT if keep_tensors else 64
    if len(kept) > limit:
        # The names the checks read first, then the others in file order.
        wanted = [n for n in kept if _drafter_wanted(n)] if keep_tensors else []
        chosen = set(wanted[:limit])
        chosen.update([n for n in kept if n not in chosen][: max(0, limit - len(chosen))])
        kept = {n: t for n, t in kept.items() if n in chosen}
        complete = False
    weights["tensors"] = kept
    weights["tensors_complete"] = complete and len(kept) == weights["tensor_count"]
    ordered = sorted(layers)
    weights["layers"] = {"count": len(ordered), "first": ordered[:16], "max": ordered[-1] if ordered else None}
    weights["dtypes"] = {
        d: {"tensors": dtype_tensors[d], "bytes": dtype_bytes[d]} for d in sorted(dtype_tensors)
    }
    if any("groups" in header for header, _ in headers.values()):
        weights["groups"] = dict(sorted(groups.items()))


def _cross_check_index(
    weight_map: dict[str, str],
    by_shard: dict[str, set[str]],
    headers: dict[str, tuple[JSONDict, list[str]]],
    problems: list[JSONDict],
) -> None:
    """Every indexed tensor is in the shard the index names, and every shard tensor is indexed."""
    for shard, (header, names) in headers.items():
        if any(p["kind"] in FATAL_KINDS for p in header["problems"]):
            continue  # no trustworthy tensor table: comparing names would only add noise
        indexed, present = by_shard.get(shard, set()), set(names)
        for name in sorted(indexed - present):
            problems.append(
                problem(
                    "index-tensor-missing",
                    header["path"],
                    f"the index puts tensor '{name}' in this shard, but the shard does not contain it",
                    tensor=name,
                )
            )
        for name in sorted(present - indexed):
            elsewhere = weight_map.get(name)
            where = f"the index puts it in {elsewhere}" if elsewhere else "the index does not list it"
            problems.append(
                problem(
                    "unindexed-tensor",
                    header["path"],
                    f"tensor '{name}' is in this shard but {where}",
                    tensor=name,
                )
            )
