"""Time `read_model_dir` on a synthetic 60 GB-class sharded target (Qwen3-32B-like).

The shards are real safetensors files at full apparent size but sparse on disk: the header
is written by hand, then the file is extended with `os.truncate`, so the benchmark needs
almost no disk and no safetensors/numpy. Goal: well under 0.5 s per directory read.

    PYTHONPATH=. python benchmarks/bench_model_headers.py [--runs 15] [--budget 0.5]

`--smoke` (CI): 4 layers instead of 64, one run each, the budget reported but not judged.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from dflash_doctor.facts.modelfiles import read_model_dir

# Qwen3-32B geometry (64 layers, 64 q heads, 8 kv heads, head_dim 128), BF16.
LAYERS, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTER, VOCAB = 64, 5120, 64, 8, 128, 25600, 151936
SHARD_BYTES = 4_900_000_000  # close shards at ~4.6-4.9 GB, as HF sharding does
BF16 = 2


def tensor_list(layers: int = LAYERS) -> list[tuple[str, list[int]]]:
    tensors: list[tuple[str, list[int]]] = [("model.embed_tokens.weight", [VOCAB, HIDDEN])]
    for i in range(layers):
        p = f"model.layers.{i}"
        tensors += [
            (f"{p}.input_layernorm.weight", [HIDDEN]),
            (f"{p}.post_attention_layernorm.weight", [HIDDEN]),
            (f"{p}.self_attn.q_proj.weight", [HEADS * HEAD_DIM, HIDDEN]),
            (f"{p}.self_attn.k_proj.weight", [KV_HEADS * HEAD_DIM, HIDDEN]),
            (f"{p}.self_attn.v_proj.weight", [KV_HEADS * HEAD_DIM, HIDDEN]),
            (f"{p}.self_attn.o_proj.weight", [HIDDEN, HEADS * HEAD_DIM]),
            (f"{p}.self_attn.q_norm.weight", [HEAD_DIM]),
            (f"{p}.self_attn.k_norm.weight", [HEAD_DIM]),
            (f"{p}.mlp.gate_proj.weight", [INTER, HIDDEN]),
            (f"{p}.mlp.up_proj.weight", [INTER, HIDDEN]),
            (f"{p}.mlp.down_proj.weight", [HIDDEN, INTER]),
        ]
    tensors += [("model.norm.weight", [HIDDEN]), ("lm_head.weight", [VOCAB, HIDDEN])]
    return tensors


def nbytes(shape: list[int]) -> int:
    n = BF16
    for d in shape:
        n *= d
    return n


def shard_groups(tensors: list[tuple[str, list[int]]]) -> list[list[tuple[str, list[int]]]]:
    groups: list[list[tuple[str, list[int]]]] = [[]]
    size = 0
    for t in tensors:
        if groups[-1] and size + nbytes(t[1]) > SHARD_BYTES:
            groups.append([])
            size = 0
        groups[-1].append(t)
        size += nbytes(t[1])
    return groups


def write_sparse_shard(path: Path, tensors: list[tuple[str, list[int]]]) -> int:
    """Header by hand (as the reference writer lays it out), then a sparse extension to full size."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, shape in tensors:
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + nbytes(shape)]}
        offset += nbytes(shape)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # the reference writer pads to a multiple of 8
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", len(raw)))
        handle.write(raw)
    os.truncate(path, 8 + len(raw) + offset)
    return offset


def build_target(root: Path, layers: int = LAYERS) -> tuple[int, int]:
    groups = shard_groups(tensor_list(layers))
    weight_map: dict[str, str] = {}
    total = 0
    for k, group in enumerate(groups):
        name = f"model-{k + 1:05d}-of-{len(groups):05d}.safetensors"
        total += write_sparse_shard(root / name, group)
        weight_map.update({t: name for t, _ in group})
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (root / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    config = {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "num_hidden_layers": layers,
        "hidden_size": HIDDEN,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "intermediate_size": INTER,
        "vocab_size": VOCAB,
        "torch_dtype": "bfloat16",
        "max_position_embeddings": 40960,
        "tie_word_embeddings": False,
    }
    (root / "config.json").write_text(json.dumps(config, indent=2))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (root / name).write_text("{}")
    return len(groups), total


def drop_page_cache(root: Path) -> None:
    """Best effort 'cold': flush and advise the kernel to forget each file's cached pages."""
    advise = getattr(os, "posix_fadvise", None)
    for path in root.iterdir():
        fd = os.open(path, os.O_RDONLY)
        try:
            if advise is not None:
                advise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def median_time(fn: Callable[[], object], runs: int, before: Callable[[], None] | None = None) -> float:
    samples = []
    for _ in range(runs):
        if before is not None:
            before()
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--budget", type=float, default=0.5, help="seconds; exit 1 if a median exceeds it")
    parser.add_argument("--dir", help="parent for the temporary model (default: system temp)")
    parser.add_argument("--smoke", action="store_true", help="CI: 4 layers, one run, budget not judged")
    args = parser.parse_args(argv)
    layers = 4 if args.smoke else LAYERS
    if args.smoke:
        args.runs = 1

    root = Path(tempfile.mkdtemp(prefix="bench-target-", dir=args.dir))
    try:
        started = time.perf_counter()
        shards, total = build_target(root, layers)
        os.sync()
        built = time.perf_counter() - started
        apparent = sum(p.stat().st_size for p in root.iterdir())
        on_disk = sum(p.stat().st_blocks * 512 for p in root.iterdir())
        print(
            f"synthetic target: {layers} layers, {len(tensor_list(layers))} tensors, {shards} shards, "
            f"{apparent / 1e9:.1f} GB apparent, {on_disk / 1e6:.1f} MB on disk (built in {built:.2f}s)"
        )

        facts = read_model_dir(root, keep_tensors=False)
        assert facts["problems"] == [], facts["problems"]
        assert facts["weights"]["total_bytes"] == total
        summary_json = len(json.dumps(facts))
        full_json = len(json.dumps(read_model_dir(root, keep_tensors=True)))

        results = {
            "cold-ish summary (keep_tensors=False)": median_time(
                lambda: read_model_dir(root, keep_tensors=False), args.runs, lambda: drop_page_cache(root)
            ),
            "warm summary (keep_tensors=False)": median_time(
                lambda: read_model_dir(root, keep_tensors=False), args.runs
            ),
            "warm full (keep_tensors=True)": median_time(
                lambda: read_model_dir(root, keep_tensors=True), args.runs
            ),
        }
        for label, seconds in results.items():
            print(f"  {label:<40} median of {args.runs}: {seconds * 1000:7.1f} ms")
        print(f"  facts JSON: {summary_json / 1024:.1f} KiB summary, {full_json / 1024:.1f} KiB full")
        worst = max(results.values())
        verdict = "within" if worst <= args.budget else "OVER"
        print(f"slowest median {worst * 1000:.1f} ms: {verdict} the {args.budget * 1000:.0f} ms budget"
              + (" (smoke: not judged)" if args.smoke else ""))
        return 0 if worst <= args.budget or args.smoke else 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
