"""Tiny real model directories for tests: a Qwen3-like target and a matching DFlash drafter.

Weights are written with the real `safetensors` library (test dependency), configs as real
`config.json` files. Keyword arguments produce each kind of break, so tests of the later
drafter-vs-target check can build exactly the mismatch they need. Corruptions that the
library refuses to write (overlaps, gaps, wrong sizes) go through `write_raw_safetensors`.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import save_file

__all__ = [
    "TOY",
    "drafter_tensor_shapes",
    "qwen3_layer_shapes",
    "set_header_length",
    "target_tensor_shapes",
    "truncate_by",
    "write_raw_safetensors",
    "write_toy_drafter",
    "write_toy_target",
]

# The toy geometry: hidden 64, 4 heads x head_dim 16, 2 kv heads, vocab 512, intermediate 128.
TOY: dict[str, int] = {
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "vocab_size": 512,
    "intermediate_size": 128,
}

Shapes = dict[str, tuple[int, ...]]


def qwen3_layer_shapes(
    prefix: str, hidden: int, heads: int, kv_heads: int, head_dim: int, inter: int
) -> Shapes:
    """The 11 tensors of one Qwen3 decoder layer (dflash.md section 2)."""
    return {
        f"{prefix}.input_layernorm.weight": (hidden,),
        f"{prefix}.post_attention_layernorm.weight": (hidden,),
        f"{prefix}.self_attn.q_proj.weight": (heads * head_dim, hidden),
        f"{prefix}.self_attn.k_proj.weight": (kv_heads * head_dim, hidden),
        f"{prefix}.self_attn.v_proj.weight": (kv_heads * head_dim, hidden),
        f"{prefix}.self_attn.o_proj.weight": (hidden, heads * head_dim),
        f"{prefix}.self_attn.q_norm.weight": (head_dim,),
        f"{prefix}.self_attn.k_norm.weight": (head_dim,),
        f"{prefix}.mlp.gate_proj.weight": (inter, hidden),
        f"{prefix}.mlp.up_proj.weight": (inter, hidden),
        f"{prefix}.mlp.down_proj.weight": (hidden, inter),
    }


def target_tensor_shapes(layers: int = 4, **geometry: int) -> Shapes:
    g = {**TOY, **geometry}
    h, v = g["hidden_size"], g["vocab_size"]
    shapes: Shapes = {"model.embed_tokens.weight": (v, h)}
    for i in range(layers):
        shapes.update(
            qwen3_layer_shapes(
                f"model.layers.{i}",
                h,
                g["num_attention_heads"],
                g["num_key_value_heads"],
                g["head_dim"],
                g["intermediate_size"],
            )
        )
    shapes["model.norm.weight"] = (h,)
    shapes["lm_head.weight"] = (v, h)
    return shapes


def drafter_tensor_shapes(
    layers: int = 1, n_target_layers: int = 2, fc_width: int | None = None, **geometry: int
) -> Shapes:
    """DFlash drafter tensors: no `model.` prefix, no embed_tokens/lm_head; fc is [H, len(ids)*H]."""
    g = {**TOY, **geometry}
    h = g["hidden_size"]
    shapes: Shapes = {
        "fc.weight": (h, fc_width if fc_width is not None else n_target_layers * h),
        "hidden_norm.weight": (h,),
        "norm.weight": (h,),
    }
    for i in range(layers):
        shapes.update(
            qwen3_layer_shapes(
                f"layers.{i}",
                h,
                g["num_attention_heads"],
                g["num_key_value_heads"],
                g["head_dim"],
                g["intermediate_size"],
            )
        )
    return shapes


def _arrays(shapes: Mapping[str, Sequence[int]], dtype: str) -> dict[str, np.ndarray[Any, Any]]:
    return {name: np.zeros(tuple(shape), dtype=dtype) for name, shape in shapes.items()}


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def _qwen3_config(layers: int, geometry: Mapping[str, int]) -> dict[str, Any]:
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "num_hidden_layers": layers,
        **geometry,
        "torch_dtype": "float16",
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000,
        "tie_word_embeddings": False,
        "attention_bias": False,
        "layer_types": ["full_attention"] * layers,
        "sliding_window": None,
    }


def write_toy_target(
    directory: str | os.PathLike[str],
    *,
    layers: int = 4,
    shards: int = 2,
    nested_text_config: bool = False,
    drop_from_shard: Iterable[str] = (),
    extra_in_shard: Mapping[str, Sequence[int]] | None = None,
    omit_shards: Iterable[int] = (),
    tokenizer: bool = True,
    dtype: str = "float16",
    **geometry: int,
) -> Path:
    """A Qwen3-like target split into `shards` files (1 means a single `model.safetensors`).

    Breaks: `drop_from_shard` names tensors the index lists but the shard lacks;
    `extra_in_shard` adds tensors to the last shard that the index does not list;
    `omit_shards` (0-based) deletes shard files after writing the index;
    `nested_text_config` writes a Qwen3.5-style config with the text part under `text_config`.
    """
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    g = {**TOY, **geometry}
    shapes = target_tensor_shapes(layers, **g)
    groups = _split(list(shapes), shards)
    weight_map: dict[str, str] = {}
    total = 0
    dropped = set(drop_from_shard)
    for k, names in enumerate(groups):
        filename = "model.safetensors" if shards == 1 else f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        tensors = _arrays({n: shapes[n] for n in names if n not in dropped}, dtype)
        if extra_in_shard and k == len(groups) - 1:
            tensors.update(_arrays(extra_in_shard, dtype))
        save_file(tensors, str(root / filename), metadata={"format": "pt"})
        for n in names:
            weight_map[n] = filename
            total += int(np.prod(shapes[n])) * np.dtype(dtype).itemsize
    if shards > 1:
        _write_json(
            root / "model.safetensors.index.json",
            {"metadata": {"total_size": total}, "weight_map": weight_map},
        )
    for k in omit_shards:
        (root / f"model-{k + 1:05d}-of-{shards:05d}.safetensors").unlink()
    config = _qwen3_config(layers, g)
    if nested_text_config:
        text = {**config, "model_type": "qwen3_5_text"}
        del text["architectures"]
        config = {
            "architectures": ["Qwen3_5ForConditionalGeneration"],
            "model_type": "qwen3_5",
            "text_config": text,
            "vision_config": {"hidden_size": 32, "depth": 2},
            "tie_word_embeddings": False,
        }
    _write_json(root / "config.json", config)
    if tokenizer:
        _write_json(root / "tokenizer.json", {"version": "1.0", "model": {"type": "BPE", "vocab": {}}})
        _write_json(root / "tokenizer_config.json", {"eos_token": "<|im_end|>"})
    return root


def _split(names: list[str], parts: int) -> list[list[str]]:
    size = -(-len(names) // parts)
    return [names[i : i + size] for i in range(0, len(names), size)]


def write_toy_drafter(
    directory: str | os.PathLike[str],
    *,
    layers: int = 1,
    target_layer_ids: Sequence[int] | None = (1, 2),
    mask_token_id: int | None = 500,
    block_size: int | None = 16,
    num_target_layers: int = 4,
    fc_width: int | None = None,
    architectures: Sequence[str] = ("DFlashDraftModel",),
    extra_tensors: Mapping[str, Sequence[int]] | None = None,
    drop_tensors: Iterable[str] = (),
    config_overrides: Mapping[str, Any] | None = None,
    omit_config_keys: Iterable[str] = (),
    dtype: str = "float16",
    **geometry: int,
) -> Path:
    """A DFlash drafter matching `write_toy_target` defaults, as one `model.safetensors`.

    `target_layer_ids=None` / `mask_token_id=None` leave the key out of `dflash_config`;
    `fc_width` overrides the fc input width (default len(ids) * hidden);
    `extra_tensors` (e.g. {"mask_hidden": [64]}) and `drop_tensors` alter the weights;
    `config_overrides` / `omit_config_keys` edit the top level of config.json last.
    """
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    g = {**TOY, **geometry}
    ids = list(target_layer_ids) if target_layer_ids is not None else [1, 2]
    shapes = drafter_tensor_shapes(layers, len(ids), fc_width, **g)
    for name in drop_tensors:
        shapes.pop(name, None)
    shapes.update({n: tuple(s) for n, s in (extra_tensors or {}).items()})
    save_file(_arrays(shapes, dtype), str(root / "model.safetensors"), metadata={"format": "pt"})
    dflash_config: dict[str, Any] = {}
    if mask_token_id is not None:
        dflash_config["mask_token_id"] = mask_token_id
    if target_layer_ids is not None:
        dflash_config["target_layer_ids"] = list(target_layer_ids)
    config: dict[str, Any] = {
        **_qwen3_config(layers, g),
        "architectures": list(architectures),
        "auto_map": {"AutoModel": "dflash.DFlashDraftModel"},
        "num_target_layers": num_target_layers,
        "dflash_config": dflash_config,
        # The released drafters carry their target's context (z-lab/Qwen3-8B-DFlash-b16: 40960), never less.
        "max_position_embeddings": 40960,
    }
    if block_size is not None:
        config["block_size"] = block_size
    config.update(config_overrides or {})
    for key in omit_config_keys:
        config.pop(key, None)
    _write_json(root / "config.json", config)
    return root


def write_raw_safetensors(
    path: str | os.PathLike[str],
    header: Mapping[str, Any] | bytes,
    data_len: int | None = None,
    *,
    header_len: int | None = None,
) -> Path:
    """A hand-made safetensors file: 8-byte length, header bytes (padded to 8 like the writer), data.

    `data_len` defaults to the largest end offset; `header_len` overrides the length field.
    """
    raw = header if isinstance(header, bytes) else json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    if data_len is None and not isinstance(header, bytes):
        ends = [v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"]
        data_len = max(ends, default=0)
    out = Path(path)
    with out.open("wb") as handle:
        handle.write(struct.pack("<Q", len(raw) if header_len is None else header_len))
        handle.write(raw)
        handle.write(b"\0" * (data_len or 0))
    return out


def set_header_length(path: str | os.PathLike[str], n: int) -> None:
    """Overwrite the 8-byte header length of an existing file."""
    with open(path, "r+b") as handle:
        handle.write(struct.pack("<Q", n))


def truncate_by(path: str | os.PathLike[str], drop: int) -> None:
    """Cut `drop` bytes off the end of a file, like an interrupted download."""
    os.truncate(path, os.path.getsize(path) - drop)
