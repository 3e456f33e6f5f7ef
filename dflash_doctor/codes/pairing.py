"""Codes of the DFlash failures users reported since release (checks drafter_pairing and serve_pairing):
each id is its check's id and a name."""

from dflash_doctor.codes import Code

CODES = (
    # drafter: context, layer_types
    Code("drafter.context-shorter-than-served", "The drafter's context is shorter than the served one",
         "The drafter's max_position_embeddings (after rope scaling) is below --max-model-len (or the target's own "
         "length). On the V2 model runner (vLLM's default from 0.29; the only one in 0.34) the first request longer "
         "than the drafter's context reads past its rotary cache and the engine dies with a CUDA illegal memory "
         "access (vLLM #57941, PR #57964); on the V1 runner drafting stops for such requests. Serve with "
         "--max-model-len no longer than the drafter's context, or raise the drafter's max_position_embeddings as "
         "PR #57964 does."),
    Code("drafter.layer-types-length", "layer_types and num_hidden_layers disagree",
         "transformers refuses a config whose layer_types does not have one entry per layer (\"`num_hidden_layers` "
         "(N) must be equal to the number of layer types (M)\"), so vLLM never builds the drafter. Take layer_types "
         "from the publisher's config.json."),
    # drafter: auxiliary hidden states
    Code("drafter.target-no-aux-hidden-states", "The target's model class does not expose auxiliary hidden states",
         "DFlash reads hidden states from inside the target; the installed vLLM checks that the target's class "
         "implements SupportsEagle3 (read from its runner and the class's bases) and otherwise stops at start with "
         "\"Model does not support EAGLE3 interface\" (vLLM PR #45546). Use a vLLM whose class for this "
         "architecture implements it, or another target."),
    # drafter: quantization
    Code("drafter.quantized-attention", "A quantized drafter with quantized q/k/v",
         "The installed vLLM's DFlash drafter slices qkv_proj.weight raw for its fused context K/V and applies "
         "F.linear, bypassing the quantization method: FP8 q/k/v stop the start-up profiling run with \"expected "
         "mat1 and mat2 to have the same dtype\", packed 4-bit with an AttributeError (vLLM #51581, #53116). Serve "
         "the BF16 drafter, or one quantized with self_attn left out."),
    Code("drafter.quantized-acceptance", "The pair's quantization lowers acceptance",
         "An AWQ target gives the drafter other hidden states than the BF16 target it was trained on, and a "
         "per-tensor FP8 drafter loses its scales on the fused context path: both start, and acceptance falls, to "
         "near zero in reports (z-lab/dflash #52, #152; vLLM #51581). Measure acceptance, or serve the BF16 drafter "
         "and a BF16/FP8-block target."),
    Code("drafter.fp8-kernel", "FP8 weights on a GPU without FP8 tensor cores",
         "Below sm_89 the installed vLLM runs FP8 checkpoints through its Marlin weight-only kernel (W8A16), read "
         "from its fp8.py; below the FP8 method's minimum capability (7.5) it refuses to start."),
    # drafter: layer counts
    Code("drafter.made-for", "The drafter was made for another target",
         "The drafter's README (its base_model) names the target it was trained for, and its layer ids, fc "
         "width or hidden size do not fit this target: vLLM fails late (\"mat1 and mat2 shapes cannot be "
         "multiplied\", vLLM PR #48113) or drafts badly. Serve the named target, or the drafter made for this one."),
    # drafter: weights files
    Code("drafter.weights-file", "vLLM would not load the drafter's weights file",
         "vLLM loads every *.safetensors whatever its name; with model.safetensors.index.json only the files its "
         "weight_map names, and with a consolidated*.safetensors file only those (Mistral format). A renamed file "
         "that an index does not list, or a leftover consolidated file, is never read. No renaming is needed "
         "otherwise."),
    # serve-command: parsers and flags
    Code("serve-command.reasoning-parser", "The reasoning parser is registered",
         "--reasoning-parser names a parser the installed vLLM registers (vllm/reasoning/__init__.py)."),
    Code("serve-command.tool-parser", "The tool-call parser is registered",
         "--tool-call-parser names a parser the installed vLLM registers (vllm/tool_parsers/__init__.py)."),
    Code("serve-command.unknown-reasoning-parser", "The reasoning parser is not registered",
         "vLLM checks --reasoning-parser against its registry before the engine starts and stops with KeyError "
         "\"invalid reasoning parser: NAME (chose from { ... })\". The registry is read from the installed vLLM's "
         "vllm/reasoning/__init__.py; a --reasoning-parser-plugin may add names (then a warning)."),
    Code("serve-command.unknown-tool-parser", "The tool-call parser is not registered",
         "With --enable-auto-tool-choice vLLM checks --tool-call-parser against its registry and stops with KeyError "
         "\"invalid tool call parser: NAME (chose from { ... })\"; without it the parser is not checked and parses "
         "nothing (a warning). The registry is read from the installed vLLM's vllm/tool_parsers/__init__.py."),
    Code("serve-command.auto-tool-choice-without-parser", "--enable-auto-tool-choice without --tool-call-parser",
         "vLLM stops before loading anything: \"Error: --enable-auto-tool-choice requires --tool-call-parser\". Name "
         "the parser for the target's tool-call format, or drop the flag."),
    Code("serve-command.trust-remote-code-needed", "A config.json loads only with --trust-remote-code",
         "The config's model_type is in neither vLLM's own config registry nor the installed transformers, so only "
         "its auto_map code can load it, and transformers refuses remote code without trust_remote_code. Add "
         "--trust-remote-code after reading that code. A known model_type with an auto_map needs nothing."),
    Code("serve-command.multimodal-target", "A multimodal target served without --language-model-only",
         "vLLM builds and loads the vision tower and reserves encoder memory; DFlash drafts text only. "
         "--language-model-only sets every modality limit to 0 and vLLM skips the tower (read from the installed "
         "vLLM's config/multimodal.py)."),
    Code("serve-command.language-model-only", "--language-model-only and what it does here",
         "On a multimodal target it skips the vision tower (text only); on a text-only target it changes nothing; "
         "a vLLM without the flag stops at its parser."),
    Code("serve-command.known-bad-combination", "A DFlash combination reported broken in this vLLM version",
         "A combination users reported failing with DFlash, judged only for the vLLM versions it applies to "
         "(knowledge/dflash_reports.py KNOWN_BAD, each with its issue): CUDA graphs under concurrency on 0.22.1 "
         "(z-lab/dflash #146, --enforce-eager), zero prefix-cache hits with DFlash2 (z-lab/dflash #165, vLLM "
         "#54360), DFlash2's candidate selector only on the V2 runner (club-3090 #1064), and acceptance collapsing "
         "at long contexts when the drafter's sliding window is not applied (vLLM PR #40898)."),
)
