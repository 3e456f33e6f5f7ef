"""Fact readers for model directories: safetensors headers, config.json, index, tokenizer files.

Valid files are written by the real `safetensors` library; broken ones by hand (the library
refuses to write them) or by truncating/overwriting real ones.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import struct
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("safetensors")
pytest.importorskip("numpy")

import numpy as np
from safetensors import safe_open

from dflash_doctor.facts.modelfiles import model_dir as model_dir_module
from dflash_doctor.facts.modelfiles import read_model_dir, read_safetensors_header
from dflash_doctor.facts.modelfiles import safetensors_header as header_module

try:
    import toymodels as toy
except ImportError:  # tests/ imported as a package
    from tests import toymodels as toy  # type: ignore[no-redef]


# --- helpers ---------------------------------------------------------------------------------


def kinds(facts: dict[str, Any]) -> list[str]:
    return [p["kind"] for p in facts["problems"]]


def only(facts: dict[str, Any], kind: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [p for p in facts["problems"] if p["kind"] == kind]
    assert len(found) == 1, facts["problems"]
    return found[0]


def f32(shape: list[int], begin: int, end: int) -> dict[str, Any]:
    return {"dtype": "F32", "shape": shape, "data_offsets": [begin, end]}


@pytest.fixture
def target(tmp_path: Path) -> Path:
    return toy.write_toy_target(tmp_path / "target")


@pytest.fixture
def drafter(tmp_path: Path) -> Path:
    return toy.write_toy_drafter(tmp_path / "drafter")


def shard(root: Path, k: int, of: int = 2) -> Path:
    return root / f"model-{k:05d}-of-{of:05d}.safetensors"


def permission_blocks_reads(path: Path) -> bool:
    """After chmod 000: does the OS actually refuse us? (Not for root, nor some filesystems.)"""
    try:
        with open(path, "rb"):
            return False
    except PermissionError:
        return True


@pytest.fixture
def unreadable() -> Iterator[list[Path]]:
    """Paths appended here are restored to 0o644 afterwards so tmp cleanup works."""
    paths: list[Path] = []
    yield paths
    for p in paths:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)


# --- safetensors header: valid files ---------------------------------------------------------


def test_header_of_valid_file_lists_every_tensor_with_dtype_shape_and_bytes(drafter: Path) -> None:
    file = drafter / "model.safetensors"
    facts = read_safetensors_header(file)
    assert facts["problems"] == []
    assert facts["size"] == file.stat().st_size
    assert facts["size"] == 8 + facts["header_len"] + facts["data_len"]
    assert facts["metadata"] == {"format": "pt"}
    assert len(facts["tensors"]) == 11 * 1 + 3
    assert facts["tensors"]["fc.weight"] == {"dtype": "F16", "shape": [64, 128], "bytes": 64 * 128 * 2}
    assert facts["tensors"]["layers.0.self_attn.k_proj.weight"]["shape"] == [2 * 16, 64]


def test_header_facts_agree_with_the_safetensors_library(target: Path) -> None:
    for file in (shard(target, 1), shard(target, 2)):
        facts = read_safetensors_header(file)
        with safe_open(str(file), framework="numpy") as reference:
            assert sorted(facts["tensors"]) == sorted(reference.keys())
            assert facts["metadata"] == reference.metadata()
            for name in reference.keys():  # noqa: SIM118 (a safe_open handle, not a dict)
                sliced = reference.get_slice(name)
                assert facts["tensors"][name]["shape"] == list(sliced.get_shape())
                assert facts["tensors"][name]["dtype"] == sliced.get_dtype()


def test_space_padded_header_and_empty_and_scalar_tensors_are_valid(tmp_path: Path) -> None:
    header = {"empty": f32([0, 4], 0, 0), "scalar": f32([], 0, 4), "__metadata__": {"k": "v"}}
    raw = json.dumps(header).encode() + b" " * 13
    facts = read_safetensors_header(toy.write_raw_safetensors(tmp_path / "x.safetensors", raw, 4))
    assert facts["problems"] == []
    assert facts["tensors"]["scalar"] == {"dtype": "F32", "shape": [], "bytes": 4}
    assert facts["tensors"]["empty"]["bytes"] == 0


def test_subbyte_dtype_with_whole_bytes_is_valid(tmp_path: Path) -> None:
    header = {"w": {"dtype": "F4", "shape": [4, 2], "data_offsets": [0, 4]}}
    facts = read_safetensors_header(toy.write_raw_safetensors(tmp_path / "x.safetensors", header))
    assert facts["problems"] == []


# --- safetensors header: each break is a problem naming the file -----------------------------


def test_header_length_over_100mb_is_refused_without_allocating(tmp_path: Path) -> None:
    file = toy.write_raw_safetensors(tmp_path / "huge.safetensors", b"{}", 0, header_len=200_000_000)
    tracemalloc.start()
    try:
        facts = read_safetensors_header(file)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000
    p = only(facts, "header-too-large")
    assert str(file) in p["message"] and "200000000" in p["message"]
    assert facts["tensors"] == {}


def test_header_length_past_end_of_file(tmp_path: Path, drafter: Path) -> None:
    file = drafter / "model.safetensors"
    toy.set_header_length(file, file.stat().st_size)
    facts = read_safetensors_header(file)
    assert kinds(facts) == ["header-past-eof"]
    assert str(file) in facts["problems"][0]["message"]


def test_truncated_file_is_caught_by_total_length(drafter: Path) -> None:
    file = drafter / "model.safetensors"
    toy.truncate_by(file, 100)
    facts = read_safetensors_header(file)
    p = only(facts, "truncated")
    assert str(file) in p["message"] and "100 bytes missing" in p["message"]
    assert len(facts["tensors"]) == 14  # the header is intact, so the facts survive


def test_trailing_bytes_after_last_tensor(drafter: Path) -> None:
    file = drafter / "model.safetensors"
    with open(file, "ab") as handle:
        handle.write(b"\0" * 16)
    assert kinds(read_safetensors_header(file)) == ["trailing-bytes"]


def test_overlapping_offsets_name_both_tensors(tmp_path: Path) -> None:
    file = toy.write_raw_safetensors(tmp_path / "o.safetensors", {"a": f32([2], 0, 8), "b": f32([2], 4, 12)})
    p = only(read_safetensors_header(file), "overlap")
    assert p["tensor"] == "b" and "'a'" in p["message"] and str(file) in p["message"]


def test_gap_between_tensors(tmp_path: Path) -> None:
    file = toy.write_raw_safetensors(tmp_path / "g.safetensors", {"a": f32([2], 0, 8), "b": f32([2], 16, 24)})
    p = only(read_safetensors_header(file), "gap")
    assert p["tensor"] == "b" and "8 unindexed bytes after 'a'" in p["message"]


def test_gap_at_start_of_data(tmp_path: Path) -> None:
    file = toy.write_raw_safetensors(tmp_path / "g.safetensors", {"a": f32([2], 8, 16)})
    assert "at the start" in only(read_safetensors_header(file), "gap")["message"]


def test_size_mismatch_between_shape_dtype_and_offsets(tmp_path: Path) -> None:
    file = toy.write_raw_safetensors(tmp_path / "s.safetensors", {"w": f32([4], 0, 8)})
    p = only(read_safetensors_header(file), "size-mismatch")
    assert p["tensor"] == "w" and "needs 16 bytes" in p["message"] and str(file) in p["message"]


def test_reversed_offsets(tmp_path: Path) -> None:
    file = toy.write_raw_safetensors(tmp_path / "r.safetensors", {"w": f32([0], 8, 0)}, 8)
    assert "bad-offsets" in kinds(read_safetensors_header(file))


def test_unknown_dtype(tmp_path: Path) -> None:
    header = {"w": {"dtype": "F8_E4M3FN", "shape": [4], "data_offsets": [0, 4]}}
    p = only(
        read_safetensors_header(toy.write_raw_safetensors(tmp_path / "d.safetensors", header)), "bad-dtype"
    )
    assert "F8_E4M3FN" in p["message"] and p["tensor"] == "w"


def test_subbyte_dtype_with_odd_element_count_is_misaligned(tmp_path: Path) -> None:
    header = {"w": {"dtype": "F4", "shape": [3], "data_offsets": [0, 2]}}
    facts = read_safetensors_header(toy.write_raw_safetensors(tmp_path / "m.safetensors", header))
    assert kinds(facts) == ["misaligned"]


def test_shape_overflowing_u64_is_a_problem(tmp_path: Path) -> None:
    header = {"w": {"dtype": "F32", "shape": [2**40, 2**40], "data_offsets": [0, 0]}}
    facts = read_safetensors_header(toy.write_raw_safetensors(tmp_path / "o.safetensors", header))
    assert kinds(facts) == ["overflow"]


def test_file_shorter_than_8_bytes(tmp_path: Path) -> None:
    file = tmp_path / "tiny.safetensors"
    file.write_bytes(b"\x01\x02")
    assert kinds(read_safetensors_header(file)) == ["header-too-small"]


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        (b'{"a": ', "bad-json"),
        (b"[1, 2]", "bad-json"),
        (b'{"a": NaN}', "bad-json"),
        (b"\xff\xfe{}", "bad-utf8"),
        (b"[" * 50_000 + b"]" * 50_000, "bad-json"),  # nesting deep enough to hit RecursionError
    ],
    ids=["unterminated", "array", "nan", "not-utf8", "deep-nesting"],
)
def test_header_that_is_not_a_json_object(tmp_path: Path, raw: bytes, kind: str) -> None:
    file = toy.write_raw_safetensors(tmp_path / "j.safetensors", raw, 0)
    facts = read_safetensors_header(file)
    assert kind in kinds(facts)
    assert all(str(file) in p["message"] for p in facts["problems"])


def test_header_must_begin_with_brace_but_is_still_read(tmp_path: Path) -> None:
    raw = b"  " + json.dumps({"w": f32([1], 0, 4)}).encode()
    facts = read_safetensors_header(toy.write_raw_safetensors(tmp_path / "b.safetensors", raw, 4))
    assert kinds(facts) == ["header-start"]
    assert "w" in facts["tensors"]


def test_duplicate_tensor_name_in_header(tmp_path: Path) -> None:
    entry = b'{"dtype":"F32","shape":[1],"data_offsets":[0,4]}'
    raw = b'{"w":' + entry + b',"w":' + entry + b"}"
    facts = read_safetensors_header(toy.write_raw_safetensors(tmp_path / "d.safetensors", raw, 4))
    assert "duplicate-key" in kinds(facts)


def test_duplicate_field_inside_a_tensor_entry(tmp_path: Path) -> None:
    raw = b'{"w":{"dtype":"F32","dtype":"F16","shape":[1],"data_offsets":[0,4]}}'
    facts = read_safetensors_header(toy.write_raw_safetensors(tmp_path / "d.safetensors", raw, 4))
    assert only(facts, "duplicate-key")["message"].endswith("repeats the key 'dtype'")


def test_strings_equal_to_field_names_are_not_duplicates(tmp_path: Path) -> None:
    header = {"__metadata__": {"dtype": "shape"}, "dtype": f32([1], 0, 4), "shape": f32([1], 4, 8)}
    facts = read_safetensors_header(toy.write_raw_safetensors(tmp_path / "n.safetensors", header))
    assert facts["problems"] == []
    assert sorted(facts["tensors"]) == ["dtype", "shape"]


def test_metadata_must_map_strings_to_strings(tmp_path: Path) -> None:
    header = {"__metadata__": {"format": "pt", "step": 3}, "w": f32([1], 0, 4)}
    facts = read_safetensors_header(toy.write_raw_safetensors(tmp_path / "m.safetensors", header))
    assert kinds(facts) == ["bad-metadata"]
    assert facts["metadata"] == {"format": "pt"}


@pytest.mark.parametrize(
    "entry",
    [
        "not an object",
        {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]},
        {"dtype": "F32", "shape": [1.0], "data_offsets": [0, 4]},
        {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]},
        {"dtype": "F32", "shape": [1]},
        {"dtype": 32, "shape": [1], "data_offsets": [0, 4]},
        {"dtype": "F32", "shape": [True], "data_offsets": [0, 4]},
        {"dtype": "F32", "shape": [1], "data_offsets": "ab"},
        {"dtype": "F32", "shape": [1], "data_offsets": {"b": 0, "e": 4}},
        {"dtype": "F32", "shape": [2**64], "data_offsets": [0, 4]},
    ],
    ids=[
        "string",
        "negative-dim",
        "float-dim",
        "three-offsets",
        "no-offsets",
        "numeric-dtype",
        "bool-dim",
        "offsets-string",
        "offsets-object",
        "dim-over-u64",
    ],
)
def test_malformed_tensor_entry(tmp_path: Path, entry: Any) -> None:
    file = toy.write_raw_safetensors(tmp_path / "t.safetensors", {"w": entry}, 4)
    p = only(read_safetensors_header(file), "bad-tensor-info")
    assert p["tensor"] == "w" and str(file) in p["message"]


def test_many_identical_problems_are_capped_with_a_count(tmp_path: Path) -> None:
    header = {f"w{i:02d}": {"dtype": "Q4", "shape": [1], "data_offsets": [i, i + 1]} for i in range(30)}
    facts = read_safetensors_header(toy.write_raw_safetensors(tmp_path / "c.safetensors", header))
    assert kinds(facts).count("bad-dtype") == header_module.MAX_PROBLEMS_PER_KIND + 1
    assert facts["problems"][-1]["omitted"] == 30 - header_module.MAX_PROBLEMS_PER_KIND


def test_missing_file_is_unreadable(tmp_path: Path) -> None:
    facts = read_safetensors_header(tmp_path / "absent.safetensors")
    assert kinds(facts) == ["unreadable"] and facts["size"] is None


def test_directory_instead_of_file_is_a_problem(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors").mkdir()
    assert kinds(read_safetensors_header(tmp_path / "model.safetensors")) == ["not-a-file"]


def test_permission_denied_file_is_unreadable(drafter: Path, unreadable: list[Path]) -> None:
    file = drafter / "model.safetensors"
    os.chmod(file, 0)
    unreadable.append(file)
    if not permission_blocks_reads(file):
        pytest.skip("chmod 000 does not block reads here (running as root?)")
    p = only(read_safetensors_header(file), "unreadable")
    assert str(file) in p["message"]


def test_os_error_while_reading_is_a_problem_not_a_traceback(
    drafter: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Simulated, so it also runs as root where chmod cannot block reads.
    def denied(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(header_module, "open", denied, raising=False)
    facts = read_safetensors_header(drafter / "model.safetensors")
    assert kinds(facts) == ["unreadable"] and "Permission denied" in facts["problems"][0]["message"]


def test_random_garbage_never_raises_and_stays_json(tmp_path: Path) -> None:
    rng = random.Random(1234)
    valid = json.dumps({"w": f32([2], 0, 8)}).encode()
    for i in range(300):
        file = tmp_path / f"g{i}.safetensors"
        choice = i % 3
        if choice == 0:  # pure noise
            file.write_bytes(bytes(rng.randrange(256) for _ in range(rng.randrange(0, 64))))
        elif choice == 1:  # a plausible length, then noise
            body = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 64)))
            file.write_bytes(struct.pack("<Q", rng.randrange(0, 80)) + body)
        else:  # a valid header with a few bytes flipped
            data = bytearray(struct.pack("<Q", len(valid)) + valid + b"\0" * 8)
            for _ in range(3):
                data[rng.randrange(len(data))] = rng.randrange(256)
            file.write_bytes(bytes(data))
        facts = read_safetensors_header(file)
        json.dumps(facts)


# --- model directory: clean toy models -------------------------------------------------------


def test_sharded_toy_target_reads_clean(target: Path) -> None:
    facts = read_model_dir(target)
    assert facts["problems"] == []
    weights = facts["weights"]
    assert weights["layout"] == "sharded"
    assert weights["index"]["shards"] == [shard(target, 1).name, shard(target, 2).name]
    assert weights["tensor_count"] == weights["index"]["tensor_count"] == 11 * 4 + 3
    assert weights["total_bytes"] == weights["index"]["total_size"]
    assert weights["file_bytes"] == sum(p.stat().st_size for p in target.glob("*.safetensors"))
    assert [f["tensor_count"] for f in weights["files"]] == [24, 23]
    assert weights["tensors"]["model.layers.3.mlp.down_proj.weight"]["file"] == shard(target, 2).name
    assert facts["tokenizer_files"] == ["tokenizer.json", "tokenizer_config.json"]
    text = facts["config"]["text"]
    assert (text["num_hidden_layers"], text["hidden_size"], text["vocab_size"]) == (4, 64, 512)
    assert facts["config"]["drafter"] == {}


def test_single_file_target_has_single_layout(tmp_path: Path) -> None:
    facts = read_model_dir(toy.write_toy_target(tmp_path / "t", shards=1))
    assert facts["weights"]["layout"] == "single" and facts["weights"]["index"] is None
    assert facts["problems"] == []


def test_target_summary_mode_keeps_counts_dtypes_and_landmarks_only(target: Path) -> None:
    facts = read_model_dir(target, keep_tensors=False)
    weights = facts["weights"]
    assert weights["tensors_complete"] is False
    assert sorted(weights["tensors"]) == ["lm_head.weight", "model.embed_tokens.weight"]
    assert weights["tensors"]["model.embed_tokens.weight"]["shape"] == [512, 64]
    assert weights["dtypes"] == {"F16": {"tensors": 47, "bytes": weights["total_bytes"]}}
    assert weights["tensor_count"] == 47


def test_drafter_keeps_every_tensor_shape_and_raw_dflash_keys(drafter: Path) -> None:
    facts = read_model_dir(drafter)
    assert facts["problems"] == []
    tensors = facts["weights"]["tensors"]
    assert facts["weights"]["tensors_complete"] is True
    assert len(tensors) == 14
    assert tensors["fc.weight"]["shape"] == [64, 2 * 64]
    assert not any(n.startswith("model.") or "embed_tokens" in n or "lm_head" in n for n in tensors)
    config = facts["config"]
    assert config["architectures"] == ["DFlashDraftModel"] and config["model_type"] == "qwen3"
    assert config["drafter"] == {
        "dflash_config": {"mask_token_id": 500, "target_layer_ids": [1, 2]},
        "block_size": 16,
        "num_target_layers": 4,
    }


def test_absent_config_keys_are_left_out_while_explicit_nulls_are_kept(tmp_path: Path) -> None:
    root = toy.write_toy_drafter(tmp_path / "d", block_size=None, omit_config_keys=["vocab_size"])
    config = read_model_dir(root)["config"]
    assert "block_size" not in config["drafter"]
    assert "vocab_size" not in config["text"]
    assert config["text"]["sliding_window"] is None


def test_nested_text_config_is_flattened_into_text_view(tmp_path: Path) -> None:
    facts = read_model_dir(toy.write_toy_target(tmp_path / "t", nested_text_config=True))
    config = facts["config"]
    assert config["text_from"] == "text_config"
    assert config["architectures"] == ["Qwen3_5ForConditionalGeneration"]
    assert config["text"]["architectures"] == ["Qwen3_5ForConditionalGeneration"]  # only at the top
    assert config["text"]["model_type"] == "qwen3_5_text"
    assert config["text"]["hidden_size"] == 64 and config["text"]["num_key_value_heads"] == 2
    assert config["text"]["layer_types"] == ["full_attention"] * 4


def test_stray_safetensors_next_to_an_index_are_listed_not_read(target: Path) -> None:
    toy.write_toy_drafter(target / "sub")  # a helper dir, not a file: ignored
    (target / "consolidated.safetensors").write_bytes(b"junk")
    facts = read_model_dir(target)
    assert facts["weights"]["unlisted_files"] == ["consolidated.safetensors"]
    assert facts["problems"] == []


# --- model directory: each break is a problem naming the file --------------------------------


def test_truncated_shard_is_named(target: Path) -> None:
    toy.truncate_by(shard(target, 2), 1000)
    p = only(read_model_dir(target), "truncated")
    assert p["file"] == str(shard(target, 2))


def test_shard_header_past_eof_skips_index_cross_check(target: Path) -> None:
    toy.set_header_length(shard(target, 1), 10**9 // 20)
    facts = read_model_dir(target)
    assert kinds(facts) == ["header-past-eof"]  # no flood of index-tensor-missing
    assert facts["problems"][0]["file"] == str(shard(target, 1))


def test_200mb_header_claim_in_a_shard(target: Path) -> None:
    toy.set_header_length(shard(target, 2), 200_000_000)
    assert kinds(read_model_dir(target)) == ["header-too-large"]


def test_missing_shard_is_named_with_its_tensor_count(tmp_path: Path) -> None:
    root = toy.write_toy_target(tmp_path / "t", omit_shards=[1])
    p = only(read_model_dir(root), "missing-shard")
    assert p["file"] == str(shard(root, 2)) and "23 tensors" in p["message"]


def test_tensor_in_index_missing_from_its_shard(tmp_path: Path) -> None:
    root = toy.write_toy_target(tmp_path / "t", drop_from_shard=["model.layers.0.self_attn.q_proj.weight"])
    p = only(read_model_dir(root), "index-tensor-missing")
    assert p["tensor"] == "model.layers.0.self_attn.q_proj.weight" and p["file"] == str(shard(root, 1))


def test_tensor_in_shard_missing_from_index(tmp_path: Path) -> None:
    root = toy.write_toy_target(tmp_path / "t", extra_in_shard={"mask_hidden": [64]})
    p = only(read_model_dir(root), "unindexed-tensor")
    assert p["tensor"] == "mask_hidden" and p["file"] == str(shard(root, 2))


def test_tensor_in_two_files_is_a_duplicate(tmp_path: Path) -> None:
    root = toy.write_toy_drafter(tmp_path / "d")
    toy.write_raw_safetensors(
        root / "extra.safetensors", {"fc.weight": {"dtype": "F16", "shape": [1], "data_offsets": [0, 2]}}
    )
    facts = read_model_dir(root)
    assert facts["weights"]["layout"] == "unindexed"
    assert only(facts, "duplicate-tensor")["tensor"] == "fc.weight"


def test_index_shard_path_leaving_the_directory_is_refused(target: Path) -> None:
    index = json.loads((target / "model.safetensors.index.json").read_text())
    index["weight_map"]["model.norm.weight"] = "../../etc/passwd"
    (target / "model.safetensors.index.json").write_text(json.dumps(index))
    facts = read_model_dir(target)
    assert only(facts, "bad-index")["file"].endswith("model.safetensors.index.json")
    assert "../../etc/passwd" not in facts["weights"]["index"]["shards"]


def test_malformed_index_json_still_reads_the_shards(target: Path) -> None:
    (target / "model.safetensors.index.json").write_text('{"weight_map": {')
    facts = read_model_dir(target)
    assert kinds(facts) == ["bad-json"]
    assert facts["problems"][0]["file"].endswith("model.safetensors.index.json")
    assert facts["weights"]["tensor_count"] == 47


def test_index_without_weight_map(target: Path) -> None:
    (target / "model.safetensors.index.json").write_text('{"metadata": {}}')
    assert kinds(read_model_dir(target)) == ["bad-index"]


def test_malformed_config_json_names_the_file(drafter: Path) -> None:
    (drafter / "config.json").write_text('{"architectures": ["DFlashDraftModel"],\n "block_size": 16,,}')
    facts = read_model_dir(drafter)
    p = only(facts, "bad-json")
    assert p["file"] == str(drafter / "config.json") and "line 2" in p["message"]
    assert facts["config"] is None and facts["weights"]["tensor_count"] == 14


def test_binary_garbage_config_json_names_the_file(drafter: Path) -> None:
    (drafter / "config.json").write_bytes(bytes(range(256)) * 4)
    p = only(read_model_dir(drafter), "bad-json")
    assert p["file"] == str(drafter / "config.json") and "not UTF-8" in p["message"]


def test_config_json_that_is_not_an_object(drafter: Path) -> None:
    (drafter / "config.json").write_text("[1, 2, 3]")
    assert kinds(read_model_dir(drafter)) == ["bad-json"]


def test_missing_config_json(drafter: Path) -> None:
    (drafter / "config.json").unlink()
    p = only(read_model_dir(drafter), "missing-config")
    assert p["file"] == str(drafter / "config.json")


def test_oversized_config_json_is_not_parsed(drafter: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model_dir_module, "CONFIG_MAX_BYTES", 100)
    assert kinds(read_model_dir(drafter)) == ["too-large"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fifo_in_place_of_config_or_shard_is_not_opened(drafter: Path) -> None:
    for name in ("config.json", "model.safetensors"):
        (drafter / name).unlink()
        os.mkfifo(drafter / name)  # opening it for reading would block forever
    facts = read_model_dir(drafter)
    assert sorted(p["file"] for p in facts["problems"] if p["kind"] == "not-a-file") == [
        str(drafter / "config.json"),
        str(drafter / "model.safetensors"),
    ]


def test_index_shard_name_with_nul_byte_is_a_problem(target: Path) -> None:
    index = json.loads((target / "model.safetensors.index.json").read_text())
    index["weight_map"]["model.norm.weight"] = "bad\u0000name.safetensors"
    (target / "model.safetensors.index.json").write_text(json.dumps(index))  # written as "\\u0000"
    facts = read_model_dir(target)
    assert "missing-shard" in kinds(facts)
    assert kinds(read_safetensors_header("bad\0name.safetensors")) == ["unreadable"]


def test_missing_directory(tmp_path: Path) -> None:
    facts = read_model_dir(tmp_path / "nope")
    assert kinds(facts) == ["missing-dir"] and facts["config"] is None


def test_file_given_as_directory(drafter: Path) -> None:
    assert kinds(read_model_dir(drafter / "config.json")) == ["not-a-dir"]


def test_directory_without_weights(tmp_path: Path) -> None:
    root = tmp_path / "empty"
    root.mkdir()
    (root / "config.json").write_text("{}")
    facts = read_model_dir(root)
    assert kinds(facts) == ["no-weights"] and facts["weights"]["layout"] == "none"


def test_pytorch_bin_weights_are_listed_not_a_problem(tmp_path: Path) -> None:
    root = tmp_path / "bin"
    root.mkdir()
    (root / "config.json").write_text("{}")
    (root / "pytorch_model.bin").write_bytes(b"x")
    facts = read_model_dir(root)
    assert facts["problems"] == [] and facts["weights"]["other_weight_files"] == ["pytorch_model.bin"]


def test_unreadable_config_and_directory(drafter: Path, unreadable: list[Path]) -> None:
    os.chmod(drafter / "config.json", 0)
    unreadable.append(drafter / "config.json")
    if not permission_blocks_reads(drafter / "config.json"):
        pytest.skip("chmod 000 does not block reads here (running as root?)")
    assert only(read_model_dir(drafter), "unreadable")["file"] == str(drafter / "config.json")
    os.chmod(drafter, 0)
    unreadable.insert(0, drafter)
    assert kinds(read_model_dir(drafter)) == ["unreadable"]


def test_unreadable_config_is_a_problem_not_a_traceback(
    drafter: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Simulated, so it also runs as root.
    def denied(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(model_dir_module, "open", denied, raising=False)
    p = only(read_model_dir(drafter), "unreadable")
    assert p["file"] == str(drafter / "config.json")


# --- model directory: contract ---------------------------------------------------------------


def _snapshot(root: Path) -> dict[str, tuple[str, int, int]]:
    return {
        str(p.relative_to(root)): (
            hashlib.sha256(p.read_bytes()).hexdigest(),
            p.stat().st_mtime_ns,
            p.stat().st_mode,
        )
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_reading_changes_nothing_on_disk(target: Path, drafter: Path) -> None:
    before = (_snapshot(target), _snapshot(drafter), target.stat().st_mtime_ns)
    read_model_dir(target, keep_tensors=False)
    read_model_dir(drafter)
    assert (_snapshot(target), _snapshot(drafter), target.stat().st_mtime_ns) == before


def test_facts_round_trip_through_json(tmp_path: Path) -> None:
    root = toy.write_toy_target(tmp_path / "t", omit_shards=[0], extra_in_shard={"x": [3]})
    facts = read_model_dir(root)
    assert facts["problems"]
    assert json.loads(json.dumps(facts)) == facts


def test_top_level_keys_are_stable(drafter: Path) -> None:
    facts = read_model_dir(drafter)
    assert sorted(facts) == ["card", "config", "path", "problems", "processor_files", "tokenizer_files", "weights"]
    assert sorted(facts["weights"]) == sorted(
        [
            "layout",
            "index",
            "files",
            "unlisted_files",
            "other_weight_files",
            "tensor_count",
            "total_bytes",
            "file_bytes",
            "dtypes",
            "tensors_complete",
            "tensors",
            "layers",
        ]
    )
    assert sorted(facts["config"]) == sorted(
        ["file", "keys", "architectures", "model_type", "text_from", "text", "drafter", "lists", "auto_map",
         "quantization_config", "vision_config"]
    )


# --- conformance with the reference implementation ------------------------------------------


def _library_accepts(file: Path) -> bool:
    try:
        with safe_open(str(file), framework="numpy") as handle:
            handle.keys()
        return True
    except Exception:  # noqa: BLE001 (the library raises several exception types on malformed files)
        return False


def _mutant(rng: random.Random) -> tuple[bytes, int]:
    """A small valid header with one random defect (or none): returns (header bytes, data length)."""
    header: dict[str, Any] = {
        "__metadata__": {"format": "pt"},
        "a": {"dtype": "F16", "shape": [2, 3], "data_offsets": [0, 12]},
        "b": {"dtype": "F4", "shape": [4], "data_offsets": [12, 14]},
        "c": {"dtype": "I64", "shape": [], "data_offsets": [14, 22]},
    }
    data_len = 22
    name = rng.choice(["a", "b", "c"])
    defect = rng.randrange(9)
    if defect == 1:
        header[name]["data_offsets"][rng.randrange(2)] += rng.choice([-2, -1, 1, 2])
    elif defect == 2:
        header[name]["shape"] = [rng.randrange(5) for _ in range(rng.randrange(3))]
    elif defect == 3:
        header[name]["dtype"] = rng.choice(["F32", "BF16", "F6_E2M3", "U8", "F8_E4M3FN", "bf16"])
    elif defect == 4:
        data_len += rng.choice([-3, -1, 1, 5])
    elif defect == 5:
        header["__metadata__"] = rng.choice([{"n": 1}, [], "x", {"k": None}])
    elif defect == 6:
        del header[name][rng.choice(["dtype", "shape", "data_offsets"])]
    elif defect == 7:
        header[name]["data_offsets"] = [0, 0] if rng.random() < 0.5 else [22, 22]
    elif defect == 8:
        header[name]["shape"] = [-1] if rng.random() < 0.5 else [1.5]
    return json.dumps(header).encode(), max(data_len, 0)


# Deliberate differences: the Rust reader tolerates leading whitespace although the README
# requires '{', and keeps the last of duplicate tensor names although the README disallows them.
_STRICTER_THAN_LIBRARY = {"header-start", "duplicate-key"}


def test_problems_agree_with_the_safetensors_library_on_mutated_files(tmp_path: Path) -> None:
    rng = random.Random(20260512)
    disagreements, verdicts = [], []
    for i in range(400):
        raw, data_len = _mutant(rng)
        file = toy.write_raw_safetensors(tmp_path / f"m{i}.safetensors", raw, data_len)
        facts = read_safetensors_header(file)
        ours = not [k for k in kinds(facts) if k not in _STRICTER_THAN_LIBRARY]
        verdicts.append(_library_accepts(file))
        if ours != verdicts[-1]:
            disagreements.append((raw, data_len, kinds(facts)))
    assert disagreements == []
    assert verdicts.count(True) >= 20 and verdicts.count(False) >= 200  # both outcomes exercised


# ----------------------------------------------------------------------------- bounded by what checks need


def test_a_header_with_blanks_between_tokens_reads_as_the_compact_one(tmp_path: Path) -> None:
    header = {"__metadata__": {"format": "pt"}, "a": f32([2, 2], 0, 16), "b": f32([], 16, 20)}
    compact = read_safetensors_header(toy.write_raw_safetensors(tmp_path / "c.safetensors", header))
    spaced = json.dumps(header, indent=2).replace(":", " :\t").encode()
    loose = read_safetensors_header(toy.write_raw_safetensors(tmp_path / "s.safetensors", spaced, 20))
    assert loose["tensors"] == compact["tensors"] and loose["metadata"] == {"format": "pt"}
    assert kinds(loose) == [] and loose["tensor_count"] == 2 and loose["tensors_complete"]


def test_data_after_the_header_object_is_bad_json(tmp_path: Path) -> None:
    raw = json.dumps({"w": f32([1], 0, 4)}).encode() + b' {"x": 1}'
    p = only(read_safetensors_header(toy.write_raw_safetensors(tmp_path / "x.safetensors", raw, 4)), "bad-json")
    assert "Extra data" in p["message"]


def test_metadata_and_tensor_names_of_megabytes_stay_out_of_the_facts(tmp_path: Path) -> None:
    long_name = "n" * 200_000
    header = {"__metadata__": {f"k{i}": "v" * 5000 for i in range(1000)},
              long_name: {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
              "w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 9]}}  # 5 bytes for 4: named in a problem
    facts = read_safetensors_header(toy.write_raw_safetensors(tmp_path / "m.safetensors", header))
    assert facts["tensor_count"] == 2 and sorted(facts["tensors"]) == ["w"] and not facts["tensors_complete"]
    assert len(facts["metadata"]) == header_module.METADATA_MAX_KEYS
    assert all(len(v) == header_module.METADATA_MAX_CHARS for v in facts["metadata"].values())
    assert len(json.dumps(facts)) < 100_000


def test_a_drafter_with_thousands_of_tensors_keeps_those_its_checks_read(tmp_path: Path) -> None:
    """Written by the real safetensors library: 3000 junk tensors sort before the drafter's own (the writer
    orders by name), and the facts keep fc, the norms and layer 0 past MAX_TENSORS_KEPT, with the counts."""
    from safetensors.numpy import save_file

    drafter = toy.write_toy_drafter(tmp_path / "drafter")
    arrays = {n: np.zeros(s, dtype=np.float16) for n, s in toy.drafter_tensor_shapes().items()}
    arrays.update({f"a.{i:05d}": np.zeros((1,), dtype=np.float16) for i in range(3000)})
    arrays.update({f"layers.{i}.x": np.zeros((1,), dtype=np.float16) for i in range(9, 40)})
    save_file(arrays, str(drafter / "model.safetensors"))
    weights = read_model_dir(drafter)["weights"]
    assert weights["tensor_count"] == len(arrays) and not weights["tensors_complete"]
    assert len(weights["tensors"]) == header_module.MAX_TENSORS_KEPT
    assert set(toy.drafter_tensor_shapes()) <= set(weights["tensors"])
    assert weights["layers"] == {"count": 32, "first": [0, *range(9, 24)], "max": 39}


def test_config_facts_stay_small_whatever_the_config_holds(tmp_path: Path) -> None:
    drafter = toy.write_toy_drafter(tmp_path / "drafter", config_overrides={
        "dflash_config": {"mask_token_id": 5, "target_layer_ids": list(range(50_000)),
                          "blob": {f"k{i}": "x" * 400 for i in range(20_000)}},
        "layer_types": ["sliding_attention", "full_attention"] * 100_000,
        "architectures": ["A" * 3_000_000]})
    config = read_model_dir(drafter)["config"]
    assert len(json.dumps(config)) < 2_000_000
    assert config["lists"]["text.layer_types"] == {
        "count": 200_000, "kept": model_dir_module.CONFIG_LIST_MAX, "ints": False,
        "values": {"sliding_attention": 100_000, "full_attention": 100_000}, "other": 0}
    ids = config["lists"]["drafter.dflash_config.target_layer_ids"]
    assert (ids["count"], ids["min"], ids["max"], ids["increasing"], ids["repeats"]) == (50_000, 0, 49_999, True, False)
    assert len(config["architectures"][0]) == model_dir_module.CONFIG_STRING_MAX


def test_headers_past_the_total_budget_are_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One header may be 100 MB; the names of all of them are kept for the cross-checks, so the total is
    bounded too (here lowered to less than one toy header, so the second shard is the one left unread)."""
    target = toy.write_toy_target(tmp_path / "t", shards=2, tokenizer=True)
    monkeypatch.setattr(model_dir_module, "HEADERS_MAX_BYTES", 100)
    facts = read_model_dir(target, keep_tensors=False)
    p = only(facts, "too-many-shards")
    assert p["message"].startswith(f"{target}: the headers of 1 files hold ") and "the other 1 files were not read" \
        in p["message"]
    assert [f["file"] for f in facts["weights"]["files"]] == ["model-00001-of-00002.safetensors"]
