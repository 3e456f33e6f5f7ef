"""Facts about a model directory (target or DFlash drafter), from its files alone.

Reads `config.json`, `model.safetensors[.index.json]` headers and the tokenizer file list;
never tensor data, never torch, never writes. Judgement (does the drafter fit the target?)
lives elsewhere and works on the dict returned here.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Collection, Iterable
from typing import Any, Final

from dflash_doctor.facts.modelfiles.safetensors_header import (
    FATAL_KINDS,
    JSONDict,
    cap_problems,
    problem,
    read_safetensors_header,
)

__all__ = [
    "DRAFTER_KEYS",
    "LANDMARK_SUFFIXES",
    "TEXT_KEYS",
    "TOKENIZER_FILES",
    "read_model_dir",
]

CONFIG_NAME: Final[str] = "config.json"
SINGLE_NAME: Final[str] = "model.safetensors"
INDEX_NAME: Final[str] = "model.safetensors.index.json"

# A config or index larger than this is not a config: refuse instead of loading it.
CONFIG_MAX_BYTES: Final[int] = 16 * 1024 * 1024
INDEX_MAX_BYTES: Final[int] = 128 * 1024 * 1024

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
) -> JSONDict:
    """Facts about the model in `path`; JSON-able; never raises on bad input.

    `keep_tensors=True` keeps every tensor's dtype/shape/bytes/file (use for a drafter);
    False keeps counts, bytes and a dtype histogram, plus only tensors whose names end with
    one of `landmarks` (use for a target with thousands of tensors).
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
    problems: list[JSONDict] = facts["problems"]
    names = _list_dir(root, problems)
    if names is None:
        return facts
    facts["config"] = _read_config(root, names, problems)
    facts["weights"] = _read_weights(root, names, keep_tensors, tuple(landmarks), problems)
    facts["tokenizer_files"] = [n for n in TOKENIZER_FILES if n in names]
    facts["processor_files"] = [n for n in PROCESSOR_FILES if n in names]
    facts["card"] = _model_card(root, names)
    facts["problems"] = cap_problems(problems)
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


def _read_json(file: str, max_bytes: int, problems: list[JSONDict]) -> Any:
    """Parsed JSON, or None with a problem. A missing file is the caller's business (checked before)."""
    try:
        # Opening a FIFO named config.json would block: only regular files are opened.
        if not stat.S_ISREG(os.stat(file).st_mode):
            problems.append(problem("not-a-file", file, "is not a regular file"))
            return None
        with open(file, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > max_bytes:
                problems.append(
                    problem("too-large", file, f"{size} bytes; refusing to parse more than {max_bytes}")
                )
                return None
            raw = handle.read(max_bytes + 1)
    except OSError as exc:
        problems.append(problem("unreadable", file, f"cannot read: {exc.strerror or exc.__class__.__name__}"))
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        problems.append(problem("bad-json", file, f"not UTF-8 text (binary data at byte {exc.start})"))
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        problems.append(
            problem("bad-json", file, f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}")
        )
    except (ValueError, RecursionError) as exc:
        problems.append(problem("bad-json", file, f"malformed JSON: {exc.__class__.__name__}"))
    return None


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
    return {
        "file": file,
        "keys": sorted(config),
        "architectures": config.get("architectures"),
        "model_type": config.get("model_type"),
        "text_from": text_from,
        "text": _text_view(config, nested),
        "drafter": {k: config[k] for k in DRAFTER_KEYS if k in config},
        "auto_map": sorted(str(k) for k in config["auto_map"]) if isinstance(config.get("auto_map"), dict) else None,
        "quantization_config": _bounded(_quantization_config(config, nested)),
        "vision_config": isinstance(config.get("vision_config"), dict),
    }


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
    root: str, names: set[str], keep_tensors: bool, landmarks: tuple[str, ...], problems: list[JSONDict]
) -> JSONDict:
    weights = _empty_weights(keep_tensors)
    on_disk = sorted(n for n in names if n.endswith(".safetensors"))
    weights["other_weight_files"] = sorted(n for n in names if n.endswith(_OTHER_WEIGHT_SUFFIXES))
    weight_map: dict[str, str] | None = None
    if INDEX_NAME in names:
        weights["layout"] = "sharded"
        weight_map = _read_index(root, weights, problems)
    if weight_map is not None:
        to_read = sorted(set(weight_map.values()))
        weights["unlisted_files"] = [n for n in on_disk if n not in set(to_read)]
    else:
        # No usable index: vLLM loads every *.safetensors in the directory, so read them all.
        to_read = on_disk
        if weights["layout"] == "none" and on_disk:
            weights["layout"] = "single" if on_disk == [SINGLE_NAME] else "unindexed"
    if not to_read and weight_map is None and not weights["other_weight_files"]:
        problems.append(
            problem("no-weights", root, "no weight files (*.safetensors, *.bin, ...) in the directory")
        )
    by_shard = _group_by_shard(weight_map) if weight_map is not None else {}
    headers = _read_headers(root, to_read, {s: len(names) for s, names in by_shard.items()}, problems)
    _summarise(headers, weights, keep_tensors, landmarks, problems)
    if weight_map is not None:
        _cross_check_index(weight_map, by_shard, headers, problems)
    return weights


def _read_index(root: str, weights: JSONDict, problems: list[JSONDict]) -> dict[str, str] | None:
    file = os.path.join(root, INDEX_NAME)
    index = _read_json(file, INDEX_MAX_BYTES, problems)
    if index is None:
        return None
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    # JSON object keys are always strings; only the values need checking.
    if not isinstance(weight_map, dict) or not all(type(v) is str for v in weight_map.values()):
        problems.append(
            problem("bad-index", file, "no 'weight_map' object mapping tensor names to shard files")
        )
        return None
    unsafe = sorted(v for v in set(weight_map.values()) if not _is_plain_relative(v))
    if unsafe:
        # Never follow an index out of the model directory.
        problems.append(
            problem("bad-index", file, f"shard paths leave the model directory: {', '.join(unsafe[:5])}")
        )
        refused = set(unsafe)
        weight_map = {k: v for k, v in weight_map.items() if v not in refused}
    metadata = index.get("metadata")
    total = metadata.get("total_size") if isinstance(metadata, dict) else None
    weights["index"] = {
        "file": file,
        "total_size": total if isinstance(total, int) and not isinstance(total, bool) else None,
        "shards": sorted(set(weight_map.values())),
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
    root: str, shards: Iterable[str], expected: dict[str, int], problems: list[JSONDict]
) -> dict[str, JSONDict]:
    headers: dict[str, JSONDict] = {}
    for shard in shards:
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
        headers[shard] = read_safetensors_header(file)
    return headers


def _summarise(
    headers: dict[str, JSONDict],
    weights: JSONDict,
    keep_tensors: bool,
    landmarks: tuple[str, ...],
    problems: list[JSONDict],
) -> None:
    """Per-file summaries, totals and the dtype histogram; file problems move to the flat list."""
    seen_in: dict[str, str] = {}
    dtype_tensors: dict[str, int] = {}
    dtype_bytes: dict[str, int] = {}
    kept: dict[str, JSONDict] = weights["tensors"]
    for shard, header in headers.items():
        problems.extend(header["problems"])
        tensors: dict[str, JSONDict] = header["tensors"]
        for name in sorted(seen_in.keys() & tensors.keys()):
            problems.append(
                problem(
                    "duplicate-tensor",
                    header["path"],
                    f"tensor '{name}' is also in {seen_in[name]}",
                    tensor=name,
                )
            )
        seen_in.update(dict.fromkeys(tensors, shard))
        file_bytes = 0
        for info in tensors.values():
            dtype, nbytes = info["dtype"], info["bytes"] or 0
            file_bytes += nbytes
            dtype_tensors[dtype] = dtype_tensors.get(dtype, 0) + 1
            dtype_bytes[dtype] = dtype_bytes.get(dtype, 0) + nbytes
        names = tensors if keep_tensors else [n for n in tensors if n.endswith(landmarks)]
        for name in names:
            kept[name] = {**tensors[name], "file": shard}
        weights["files"].append(
            {
                "file": shard,
                "size": header["size"],
                "header_len": header["header_len"],
                "data_len": header["data_len"],
                "tensor_count": len(tensors),
                "bytes": file_bytes,
                "metadata": header["metadata"],
            }
        )
        weights["tensor_count"] += len(tensors)
        weights["total_bytes"] += file_bytes
        weights["file_bytes"] += header["size"] or 0
    weights["dtypes"] = {
        d: {"tensors": dtype_tensors[d], "bytes": dtype_bytes[d]} for d in sorted(dtype_tensors)
    }


def _cross_check_index(
    weight_map: dict[str, str],
    by_shard: dict[str, set[str]],
    headers: dict[str, JSONDict],
    problems: list[JSONDict],
) -> None:
    """Every indexed tensor is in the shard the index names, and every shard tensor is indexed."""
    for shard, header in headers.items():
        if any(p["kind"] in FATAL_KINDS for p in header["problems"]):
            continue  # no trustworthy tensor table: comparing names would only add noise
        indexed, present = by_shard.get(shard, set()), header["tensors"].keys()
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
