"""Write the toy Qwen3 target, the DFlash drafters of the engine scenarios and a tiny tokenizer.

Usage: python3 recording/engine/make_models.py OUT_DIR   (needs numpy, safetensors, tokenizers)
The models are tests/toymodels.py's; the tokenizer is a WordLevel one with the toy's 512 ids.
Beside the drafters of scenarios 06 and 07: `drafter-short-context` (max_position_embeddings 256, below the
served --max-model-len 512) and `drafter-fp8`, the healthy drafter quantized as a real FP8 checkpoint is: its
decoder layers' projection weights stored as float8_e4m3fn (safetensors dtype F8_E4M3) with a float32
`weight_scale` each, and config.json's `quantization_config` {"quant_method": "fp8", "activation_scheme":
"dynamic", "fmt": "e4m3"} (AutoFP8's format, read by vLLM's Fp8Config, per-tensor: no weight_block_size), fc
and the norms left in float16 (`ignored_layers`).
"""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from tokenizers import Tokenizer, models, pre_tokenizers
from toymodels import TOY, write_toy_drafter, write_toy_target


def write_tokenizer(directory: Path) -> None:
    specials = ["<unk>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    vocab = {tok: i for i, tok in enumerate(specials)}
    for i in range(len(specials), TOY["vocab_size"]):
        vocab[f"w{i}"] = i
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.add_special_tokens(specials)
    tokenizer.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "<unk>", "eos_token": "<|im_end|>",
        "bos_token": None, "pad_token": "<|endoftext|>", "model_max_length": 4096,
    }, indent=2) + "\n")


FP8_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# AutoFP8's checkpoint structure (quant_method fp8, activation_scheme dynamic: each quantized layer's weight F8_E4M3
# and a scalar F32 weight_scale); vLLM's Fp8Config.from_config reads ignored_layers and matches a layer's full
# prefix (quant_utils.is_layer_skipped, 0.26.0): the checkpoint's name and the model's ("model.fc") both listed.
FP8_CONFIG = {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3", "ignored_layers": ["fc", "model.fc"]}
_DTYPES = {"float16": "F16", "float32": "F32", "bfloat16": "BF16"}


def write_fp8_drafter(directory: Path) -> Path:
    """The healthy toy drafter as a per-tensor FP8 checkpoint (numpy has no float8: the file is written by hand,
    each FP8 value the e4m3fn code of the float16 value divided by its scale; the toy's weights are zero, code 0)."""
    write_toy_drafter(directory)
    weights = directory / "model.safetensors"
    tensors: dict[str, tuple[str, tuple[int, ...], bytes]] = {}
    for name, array in load_file(str(weights)).items():
        if name.endswith(".weight") and name.split(".")[-2] in FP8_PROJECTIONS:
            assert not array.any(), name  # zero weights: e4m3fn's zero is the byte 0
            tensors[name] = ("F8_E4M3", array.shape, bytes(array.size))
            tensors[name.removesuffix(".weight") + ".weight_scale"] = (
                "F32", (), np.float32(1.0).tobytes())
        else:
            tensors[name] = (_DTYPES[str(array.dtype)], array.shape, array.tobytes())
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset, blobs = 0, []
    for name in sorted(tensors):
        dtype, shape, blob = tensors[name]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    weights.write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))
    config = json.loads((directory / "config.json").read_text())
    config["quantization_config"] = FP8_CONFIG
    (directory / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return directory


def main(out: Path) -> None:
    target = write_toy_target(out / "target", tokenizer=False)
    write_tokenizer(target)
    write_toy_drafter(out / "drafter")                                   # healthy: ids (1, 2) of 4 layers
    write_toy_drafter(out / "drafter-ids-out-of-range", target_layer_ids=(1, 7))
    write_toy_drafter(out / "drafter-fc-width", fc_width=3 * TOY["hidden_size"])  # fc.weight [64, 192], 2 ids
    # a drafter whose context (256) is below the served --max-model-len (512): scenarios 15 and 16
    write_toy_drafter(out / "drafter-short-context", config_overrides={"max_position_embeddings": 256})
    write_fp8_drafter(out / "drafter-fp8")                                # scenario 17
    write_padded_pair(out)                                                # scenario 19


def write_padded_pair(out: Path) -> None:
    """Scenario 19: a target whose vocabulary is padded to 576 ids past the tokenizer's and the drafter's 512.
    Every decoder layer is zero, embed_tokens all ones and both final norms one, so each hidden state is all ones;
    the target's lm_head row 7 is all ones: it greedily writes token 7. The drafter has no lm_head of its own: it
    drafts token 7 only when it shares the target's (vLLM's DFlash loader); with its own, never-loaded lm_head it
    drafts anything else, and the acceptance (the /metrics the driver keeps) says which."""
    h, v = TOY["hidden_size"], 576
    target = write_toy_target(out / "padded-target", tokenizer=False, shards=1, vocab_size=v)
    write_tokenizer(target)
    lm_head = np.zeros((v, h), dtype="float16")
    lm_head[7] = 1.0
    edit_tensors(target / "model.safetensors", **{"model.embed_tokens.weight": np.ones((v, h), dtype="float16"),
                                           "model.norm.weight": np.ones((h,), dtype="float16"), "lm_head.weight": lm_head})
    drafter = write_toy_drafter(out / "padded-drafter")
    edit_tensors(drafter / "model.safetensors", **{"norm.weight": np.ones((h,), dtype="float16")})


def edit_tensors(path: Path, **tensors: np.ndarray) -> None:  # type: ignore[type-arg]
    data = load_file(str(path))
    for name, value in tensors.items():
        assert name in data and data[name].shape == value.shape, (name, value.shape)
        data[name] = value.astype(data[name].dtype)
    save_file(data, str(path), metadata={"format": "pt"})


if __name__ == "__main__":
    main(Path(sys.argv[1]))
