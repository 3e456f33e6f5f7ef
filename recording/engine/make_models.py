"""Write the toy Qwen3 target, the DFlash drafters of the engine scenarios and a tiny tokenizer.

Usage: python3 scripts/engine/make_models.py OUT_DIR   (needs numpy, safetensors, tokenizers)
The models are tests/toymodels.py's; the tokenizer is a WordLevel one with the toy's 512 ids.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

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


def main(out: Path) -> None:
    target = write_toy_target(out / "target", tokenizer=False)
    write_tokenizer(target)
    write_toy_drafter(out / "drafter")                                   # healthy: ids (1, 2) of 4 layers
    write_toy_drafter(out / "drafter-ids-out-of-range", target_layer_ids=(1, 7))
    write_toy_drafter(out / "drafter-fc-width", fc_width=3 * TOY["hidden_size"])  # fc.weight [64, 192], 2 ids


if __name__ == "__main__":
    main(Path(sys.argv[1]))
