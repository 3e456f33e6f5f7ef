"""Toy target + DFlash drafters whose acceptance is known before vLLM runs (for `dflash-doctor live`).

Usage: python3 scripts/engine/live_models.py OUT_DIR   (needs numpy, safetensors, tokenizers)

Every decoder layer of target and drafters has zero weights, so it adds nothing to the residual stream,
which stays the token's embedding (all ones, for every token). The target's final norm weight is zero: its
hidden state is zero, all logits are 0, and greedy decoding picks token 0, always. The drafter shares the
target's embed_tokens and lm_head (vLLM's DFlash loader, when the drafter has none); lm_head's row 7 is all
ones and every other row zero, so:
- drafter `live-accepted`: final norm weight zero -> logits all 0 -> token 0, the target's token: every draft
  token is accepted (mean acceptance length 1 + k);
- drafter `live-rejected`: final norm weight one -> hidden all ones -> logit 64 for token 7, 0 elsewhere ->
  token 7, never the target's: every draft is rejected (mean acceptance length 1.0).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from make_models import edit_tensors, write_tokenizer
from toymodels import TOY, write_toy_drafter, write_toy_target

PUSHED_TOKEN = 7


def main(out: Path) -> None:
    h, v = TOY["hidden_size"], TOY["vocab_size"]
    target = write_toy_target(out / "live-target", tokenizer=False, shards=1)
    write_tokenizer(target)
    lm_head = np.zeros((v, h), dtype="float16")
    lm_head[PUSHED_TOKEN] = 1.0
    edit_tensors(target / "model.safetensors", **{"model.embed_tokens.weight": np.ones((v, h), dtype="float16"),
                                           "lm_head.weight": lm_head})
    write_toy_drafter(out / "live-accepted")
    rejected = write_toy_drafter(out / "live-rejected")
    edit_tensors(rejected / "model.safetensors", **{"norm.weight": np.ones((h,), dtype="float16")})


if __name__ == "__main__":
    main(Path(sys.argv[1]))
