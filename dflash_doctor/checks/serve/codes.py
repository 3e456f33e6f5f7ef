"""The finding codes of the serve layer: one constant per id, with its title and explanation.

`serve-command.*` for the `vllm serve` command line, judged before it runs; `serve-resources.*` for what the
machine must offer it (GPUs, memory, the port)."""

from __future__ import annotations

from dflash_doctor.codes import Code

__all__ = ["CODES", "COMMAND_CODES", "RESOURCES_CODES"]

# serve-command
NOT_GIVEN = Code("serve-command.not-given", "No serve command to check",
    "Run `dflash-doctor serve -- vllm serve MODEL [flags]` with the exact command.")
NOT_A_SERVE_COMMAND = Code("serve-command.not-a-serve-command", "The command after -- is not vllm serve",
    "The doctor judges `vllm serve MODEL [flags]` or `python -m vllm.entrypoints.openai.api_server --model MODEL "
    "[flags]`.")
VLLM_NEWER_THAN_VERIFIED = Code(
    "serve-command.vllm-newer-than-verified", "The installed vLLM is newer than the rules were checked against",
    "The doctor's version-dependent rules are held in CI to the code of each vLLM release up to the one named "
    "(knowledge.dflash_reports.RULES_VERIFIED_THROUGH). A newer vLLM may have changed what they encode: "
    "vLLM's own parser and config validation (run by default when vLLM imports) are the judge: where vLLM "
    "accepts the command, a rule's fail that restates vLLM's validation is shown as a warning; the doctor's "
    "other rules are what that release's predecessor does. Upgrade the doctor when a newer one is out.")
PARSED = Code("serve-command.parsed", "Which parser read the command",
    "When vLLM imports in the target interpreter, the doctor parses the command with vLLM's own parser "
    "(make_arg_parser + AsyncEngineArgs.from_cli_args), so every flag of the installed version counts. "
    "Otherwise it reads a documented subset: --tensor-parallel-size, --pipeline-parallel-size, "
    "--max-model-len, --max-num-batched-tokens, --max-num-seqs, --gpu-memory-utilization, --dtype, "
    "--speculative-config, --enable-chunked-prefill, --trust-remote-code, --language-model-only, --port, "
    "--host, --tokenizer, --skip-tokenizer-init, --attention-backend, --kv-cache-dtype, --spec-method, "
    "--spec-model, --spec-tokens (merged into the speculative config as vLLM merges them), read in every form "
    "vLLM's parser takes: `--flag value`, `--flag=value`, underscores for dashes, a flag's unambiguous prefix, "
    "`--config FILE.yaml` (read with PyYAML where the doctor has it). Where vLLM's own config validation ran "
    "and accepted the command, the rules judge what it resolved (the parallel sizes, max_model_len after its "
    "reductions, dtype, KV cache dtype, the drafter, k, draft TP, the model runner). A vLLM that imports "
    "but hangs or dies before it answers (bounded by --timeout) is a warning: `vllm serve` may do the same.")
VLLM_PARSER_REJECTED = Code("serve-command.vllm-parser-rejected", "vLLM's own parser rejects the command",
    "The installed vLLM's argument parser exits on this command line (an unknown flag, a bad value, invalid "
    "JSON). `vllm serve` would stop the same way.")
FLAG_INVALID = Code("serve-command.flag-invalid", "A flag has a value vLLM would refuse",
    "A value that does not parse (a non-integer size, an unknown dtype, a speculative config that is not a JSON "
    "object).")
FLAGS_UNCHECKED = Code("serve-command.flags-unchecked", "Flags outside the doctor's subset",
    "Without vLLM's own parser, flags outside the documented subset are not checked; a typo would only show when "
    "vLLM starts.")
MODEL_MISSING = Code("serve-command.model-missing", "The command names no model",
    "`vllm serve MODEL`: without a model vLLM serves its built-in default, not your target.")
VLLM_MISSING = Code("serve-command.vllm-missing", "vLLM is not installed in the inspected interpreter",
    "The doctor inspects --python (default: its own interpreter). Point it at the interpreter that runs vllm "
    "serve.")
NO_SPECULATIVE_CONFIG = Code("serve-command.no-speculative-config", "The command does not enable DFlash",
    "Without --speculative-config vLLM serves the target alone.")
SPEC_JSON = Code("serve-command.spec-json", "--speculative-config is not a JSON object",
    "vLLM parses the value as JSON; shell quoting often breaks it. Quote it with single quotes and use double "
    "quotes inside.")
SPEC_INVALID = Code("serve-command.spec-invalid", "--speculative-config has a key vLLM refuses",
    "'tensor_parallel_size' is refused: 'Please pass draft_tensor_parallel_size instead.'")
SPEC_METHOD = Code("serve-command.spec-method", "The speculative method is missing or not DFlash",
    "Without \"method\", vLLM picks dflash only when 'dflash' is in the drafter's path and otherwise loads it as "
    "a plain draft model; a method the installed vLLM does not list fails validation. DFlash first shipped in "
    "vLLM 0.20.0.")
SPEC_FLAGS_CONFLICT = Code("serve-command.spec-flags-conflict",
    "--spec-method/--spec-model/--spec-tokens repeat a key of --speculative-config",
    "vLLM 0.22.0 and later merge --spec-method, --spec-model and --spec-tokens into the speculative config "
    "(EngineArgs.create_speculative_config, vllm/engine/arg_utils.py) and refuse one whose key the config already "
    "has: \"--spec-model and --speculative-config['model'] are mutually exclusive\", before anything is served. "
    "Give each setting once: in the JSON or as its flag.")
SPEC_FLAGS_UNKNOWN = Code("serve-command.spec-flags-unknown", "The installed vLLM has no --spec-* flags",
    "--spec-method, --spec-model and --spec-tokens first shipped in vLLM 0.22.0; 0.21.0 and older refuse them as "
    "unrecognized arguments. Put the settings in --speculative-config, or upgrade vLLM.")
SPEC_MODEL_MISSING = Code("serve-command.spec-model-missing", "--speculative-config names no drafter",
    "DFlash needs \"model\": the drafter's directory or repo id.")
SPEC_K_MISSING = Code("serve-command.spec-k-missing", "num_speculative_tokens is missing",
    "DFlash drafters have no n_predict, and vLLM never reads their block_size, so vLLM refuses to start: 'A "
    "speculative model was provided, but neither `speculative_token_tree` nor `num_speculative_tokens` was "
    "provided'. Use block_size - 1 (15 for b16 drafters).")
SPEC_K_INVALID = Code("serve-command.spec-k-invalid", "num_speculative_tokens is not a positive integer",
    "vLLM's SpeculativeConfig takes only num_speculative_tokens > 0: 'Input should be greater than 0'.")
SPEC_DRAFT_TP = Code("serve-command.spec-draft-tp", "draft_tensor_parallel_size is neither 1 nor the target's",
    "vLLM: 'cannot be other value than 1 or target model tensor_parallel_size'.")
SPEC_OK = Code("serve-command.spec-ok", "The speculative config is complete",
    "Method, drafter, num_speculative_tokens and the draft tensor-parallel size are valid.")
DRAFTER_BROKEN = Code("serve-command.drafter-broken", "The drafter in the speculative config fails its checks",
    "See the drafter check's findings: each is a reason this command would fail or draft badly.")
MAX_MODEL_LEN = Code("serve-command.max-model-len", "--max-model-len exceeds the target's own maximum",
    "vLLM derives a maximum from the target's config (max_position_embeddings scaled by rope_scaling, capped by "
    "tokenizer_config's model_max_length) and refuses a larger --max-model-len unless "
    "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, which risks NaNs past the trained length.")
SCHEDULER = Code("serve-command.scheduler", "The batch limits break vLLM's scheduler rules",
    "SchedulerConfig.verify_max_model_len: without chunked prefill, --max-num-batched-tokens must be at least "
    "--max-model-len; always at least --max-num-seqs. The doctor applies vLLM's defaults (which depend on the "
    "first GPU's memory) to the flags you leave out.")
TOKEN_BUDGET = Code("serve-command.token-budget", "The DFlash token budget",
    "vLLM 0.20-0.24 reserve (num_speculative_tokens - 1) x max_num_seqs draft slots out of "
    "--max-num-batched-tokens and stop when nothing is left to schedule ('max_num_scheduled_tokens is set to "
    "... which does not allow any tokens to be scheduled'); with max_num_seqs defaulting to 1024 on GPUs of "
    "70 GiB or more, k = 15 needs more than 14336 tokens (so through 0.27.1). From 0.28 nothing is reserved: "
    "vLLM stops only when max_num_batched_tokens <= k ('VllmConfig does not have enough slots...'; k + 1 from "
    "0.33, which also caps running sequences at max_num_batched_tokens // (k + 1)), and warns under 8192 "
    "tokens.")
HEADS_TP = Code("serve-command.heads-tp", "Attention heads do not divide by the tensor-parallel size",
    "'Total number of attention heads (...) must be divisible by tensor parallel size (...).' The drafter is "
    "checked against its own draft tensor-parallel size.")
KV_HEADS_TP = Code("serve-command.kv-heads-tp", "KV heads and the tensor-parallel size do not divide",
    "vLLM asserts that the KV heads divide by TP, or TP by the KV heads (each is then replicated).")
VLLM_VALIDATION = Code("serve-command.vllm-validation", "vLLM's own config validation",
    "When vLLM imports in the target, the doctor runs vLLM's create_engine_config on the exact command (configs "
    "only, no weights, offline) and quotes its verdict. Without the serving GPUs (a CI image build), vLLM "
    "runs on a simulated CUDA platform made of the facts: NVML's GPUs, or --target-arch, --gpus and "
    "--gpu-memory; only the device queries are simulated, and vLLM's compiled modules that need the CUDA "
    "driver are stood in for (named in the facts). Where vLLM's code needs one of those at import (some "
    "releases query compiled ops while inspecting the model), its validation cannot finish there: skip, and "
    "the doctor's rules judge. --no-vllm-validate turns it off.")
ENVIRON_REFUSED = Code("serve-command.environ-refused",
    "An environment variable the installed vLLM refuses",
    "vLLM checks the environment before it builds any config (`validate_environ`: vllm/envs.py through 0.30, "
    "vllm/platforms/interface.py from 0.33, called first by create_engine_config) and stops `vllm serve` on: a "
    "variable of `envs.removed_environment_variables` (0.34.0: VLLM_MARLIN_INPUT_DTYPE, \"has been removed\"), "
    "VLLM_USE_V2_MODEL_RUNNER set to anything but 1 on 0.34.0 (\"is no longer supported: Model Runner V1 has been "
    "removed\"), and, with --fail-on-environ-validation, any `VLLM_*` variable it does not know. Judged by vLLM's "
    "own function where it imports, else from the lists read in the installed release's source. Unset the "
    "variable (or follow vLLM's hint) before `vllm serve`.")
ENVIRON_UNKNOWN = Code("serve-command.environ-unknown", "A VLLM_* variable the installed vLLM does not know",
    "A `VLLM_*` variable outside the installed release's `envs.environment_variables` is ignored, with only a "
    "log line (\"Unknown vLLM environment variable detected\"): a typo, or a variable an older or newer release "
    "reads, does nothing. With --fail-on-environ-validation vLLM refuses to start instead "
    "(serve-command.environ-refused).")
VLLM_ATTENTION = Code("serve-command.vllm-attention", "vLLM's attention selector for the target and the drafter",
    "vLLM's own attention selector (get_attn_backend) is asked which backend the target's and the drafter's "
    "layers get, with the drafter's inputs as the installed release's DFlash proposer sets them (non-causal "
    "attention, its KV cache dtype and backend), on each architecture judged. 'No valid attention backend "
    "found' is a fail quoting vLLM's reasons per backend; an fp8 KV cache with a non-causal drafter is the "
    "usual cause (FlashAttention 2 on sm_8x does not take an fp8 KV cache; FlexAttention takes no fp8; Triton "
    "has no non-causal path in several releases).")
FP8_KV_FLOAT16 = Code("serve-command.fp8-kv-float16", "An fp8 KV cache with a float16 model on FlashAttention 3",
    "With --kv-cache-dtype fp8 (or fp8_e4m3), vLLM quantizes each query to fp8 for a backend that takes quantized "
    "queries; on sm_90 that is FlashAttention 3, whose kernel writes an fp8 query's output only as bfloat16. "
    "A float16 model then passes validation, starts, and dies on its first request: 'RuntimeError: For "
    "FP16/BF16 input, output must have the same dtype as inputs. For FP8 input, output must have dtype BF16' "
    "(recorded on an H200 with vLLM 0.20.1, fixtures/engine/11). Serve with --dtype bfloat16 (scenario 12 "
    "serves), or keep the model's own KV cache dtype. Sources: knowledge/dflash_reports.py "
    "FP8_QUERY_NEEDS_BFLOAT16.")
MODEL_CODE_NOT_RUN = Code("serve-command.model-code-not-run", "vLLM's validation stopped before the model's own code",
    "With --trust-remote-code, vLLM's create_engine_config loads the classes a model directory's config.json "
    "names in auto_map: transformers copies its configuration_*.py / modeling_*.py into ~/.cache/huggingface/"
    "modules and executes them, with the user's HOME and network. A preflight does not run a model "
    "repository's code: the doctor's validation refuses transformers' dynamic-module loading before any file "
    "is copied or executed, so the part of vLLM's validation that needs that code was not run, and vLLM's "
    "parser and the doctor's rules judge the command. `dflash-doctor serve --run-model-code` runs it, with a "
    "HOME, XDG dirs and Hugging Face modules cache in a directory of the doctor's own (removed after) and "
    "outbound connections refused inside the probe (Python's socket audit events: native code and "
    "processes the code starts are not covered; read the code first).")
VALIDATION_NOT_RUN = Code("serve-command.vllm-validation-not-run", "vLLM's validation was not given the command",
    "vLLM's create_engine_config reads the models' files whole (transformers reads all of config.json). When "
    "the doctor refused one of those files (a config.json or index over its size cap, a safetensors header over "
    "the safetensors limit, a file that is not a regular file: the models check names it), or when vLLM's parser "
    "read a model the doctor did not look at first, vLLM's validation is not run on the command: a file that "
    "the doctor would not read could take gigabytes of memory, or block, in vLLM's. The doctor's rules judge.")
JUDGED_BY = Code("serve-command.judged-by", "Which verdicts are vLLM's own and which the doctor's rules",
    "Says which findings of this check came from vLLM's own code (its parser, create_engine_config, its attention "
    "selector) and on which platform (the machine's GPUs, or a simulated one and where its facts came from), "
    "and which from the doctor's rules; where vLLM's validation accepted the command, the rules judged the values "
    "it resolved (in the evidence).")
SPECULATORS_LAUNCH = Code(
    "serve-command.speculators-launch", "`vllm serve` names a speculators drafter: vLLM serves its verifier",
    "vLLM reads a served model whose config.json has \"speculators_config\" as a drafter "
    "(transformers_utils/config.py maybe_override_with_speculators): it serves the verifier named in "
    "speculators_config.verifier.name_or_path, with the directory as the drafter and the first proposal "
    "method's speculative_tokens as num_speculative_tokens. The doctor judges that pair. Before vLLM 0.29 a "
    "--speculative-config given beside it is dropped; from 0.29 its keys are merged, except method and model.")
SPECULATORS_VERIFIER_REFUSED = Code(
    "serve-command.speculators-verifier-refused", "vLLM 0.33+ refuses the speculators drafter's verifier",
    "From vLLM 0.33.0, `vllm serve SPECULATORS_DIR` serves the verifier only when it names a remote Hub "
    "repository: a local path, an invalid repo id or no verifier stops vLLM with \"Speculators verifier must "
    "name a remote model repository. Select local verifiers explicitly with --model and "
    "--speculative-config.\" Serve the target explicitly: `vllm serve TARGET --speculative-config "
    "'{\"method\": \"dflash\", \"model\": \"SPECULATORS_DIR\", \"num_speculative_tokens\": K}'`.")
SPECULATORS_NO_VERIFIER = Code(
    "serve-command.speculators-no-verifier", "The speculators drafter names no verifier vLLM can serve",
    "`vllm serve SPECULATORS_DIR` serves speculators_config.verifier.name_or_path; a config without it, without "
    "the proposal method's speculative_tokens, speculators_model_type or transformer_layer_config stops vLLM "
    "(\"Invalid speculators config structure\", \"Must provide transformer_layer_config\"), and before 0.33 a "
    "null verifier leaves it with no model to serve. Name the target explicitly.")
REASONING_PARSER = Code("serve-command.reasoning-parser", "The reasoning parser is registered",
    "--reasoning-parser names a parser the installed vLLM registers (vllm/reasoning/__init__.py).")
TOOL_PARSER = Code("serve-command.tool-parser", "The tool-call parser is registered",
    "--tool-call-parser names a parser the installed vLLM registers (vllm/tool_parsers/__init__.py).")
UNKNOWN_REASONING_PARSER = Code("serve-command.unknown-reasoning-parser", "The reasoning parser is not registered",
    "vLLM checks --reasoning-parser against its registry before the engine starts and stops with KeyError "
    "\"invalid reasoning parser: NAME (chose from { ... })\". The registry is read from the installed vLLM's "
    "vllm/reasoning/__init__.py; a --reasoning-parser-plugin may add names (then a warning).")
UNKNOWN_TOOL_PARSER = Code("serve-command.unknown-tool-parser", "The tool-call parser is not registered",
    "With --enable-auto-tool-choice vLLM checks --tool-call-parser against its registry and stops with KeyError "
    "\"invalid tool call parser: NAME (chose from { ... })\"; without it the parser is not checked and parses "
    "nothing (a warning). The registry is read from the installed vLLM's vllm/tool_parsers/__init__.py.")
AUTO_TOOL_CHOICE_WITHOUT_PARSER = Code(
    "serve-command.auto-tool-choice-without-parser", "--enable-auto-tool-choice without --tool-call-parser",
    "vLLM stops before loading anything: \"Error: --enable-auto-tool-choice requires --tool-call-parser\". Name "
    "the parser for the target's tool-call format, or drop the flag.")
TRUST_REMOTE_CODE_NEEDED = Code(
    "serve-command.trust-remote-code-needed", "A config.json loads only with --trust-remote-code",
    "The config's model_type is in neither vLLM's own config registry nor the installed transformers, so only its "
    "auto_map code can load it, and transformers refuses remote code without trust_remote_code. Add "
    "--trust-remote-code after reading that code. A known model_type with an auto_map needs nothing.")
MULTIMODAL_TARGET = Code(
    "serve-command.multimodal-target", "A multimodal target served without --language-model-only",
    "vLLM builds and loads the vision tower and reserves encoder memory; DFlash drafts text only. "
    "--language-model-only sets every modality limit to 0 and vLLM skips the tower (read from the installed "
    "vLLM's config/multimodal.py).")
LANGUAGE_MODEL_ONLY = Code("serve-command.language-model-only", "--language-model-only and what it does here",
    "On a multimodal target it skips the vision tower (text only); on a text-only target it changes nothing; a "
    "vLLM without the flag stops at its parser.")
KNOWN_BAD_COMBINATION = Code(
    "serve-command.known-bad-combination", "A DFlash combination reported broken in this vLLM version",
    "A combination users reported failing with DFlash, judged only for the vLLM versions it applies to "
    "(knowledge/dflash_reports.py KNOWN_BAD, each with its issue): CUDA graphs under concurrency on 0.22.1 "
    "(z-lab/dflash #146, --enforce-eager), zero prefix-cache hits with DFlash2 (z-lab/dflash #165, vLLM "
    "#54360), DFlash2's candidate selector only on the V2 runner (club-3090 #1064), acceptance collapsing at "
    "long contexts when the drafter's sliding window is not applied (vLLM PR #40898), and, on sm_80 only, "
    "DFlash2's out-of-bounds read after about 11k decode steps under sampling (vLLM #55279, 0.27.1 on). An "
    "entry bound to an arch is judged from the GPU facts (NVML, or --target-arch/--gpus), and not at all "
    "without them.")
HYBRID_PREFIX_CACHE = Code(
    "serve-command.hybrid-prefix-cache", "Prefix caching with DFlash or DSpark on a hybrid target hits nothing",
    "On a hybrid target (Mamba or linear-attention layers, vLLM's IsHybrid) with an eagle-family draft (DFlash, "
    "DFlash2, DSpark), the scheduler backs the cacheable position off one block for the draft's volatile last block, "
    "and before vLLM 0.30.0 the KV cache coordinator kept Mamba checkpoints where that position never lands: every "
    "prefix-cache lookup (and KV offload) hits 0, with no error (vLLM #53505, fixed by commit fa5017a5 after 0.29.0). "
    "The doctor reads the backoff from the installed scheduler (v1/core/sched/scheduler.py) and the alignment from "
    "the coordinator (v1/core/kv_cache_coordinator.py, drop_eagle_checkpoint_block from 0.30.0), and whether the "
    "target is hybrid from its model class. Upgrade vLLM, or do not count on prefix caching there.")

# serve-resources
CONFIDENTIAL_COMPUTE_MODE = Code(
    "serve-resources.confidential-compute", "NVIDIA Confidential Computing is on",
    "In NVIDIA Confidential Computing mode the GPU's memory is protected from the host: host-to-device copies go "
    "through staging buffers (vLLM 0.34 detects the mode through NVML's nvmlSystemGetConfComputeState, turns UVA "
    "off and stages its copies; VLLM_CONFIDENTIAL_COMPUTE overrides the detection), and traffic between GPUs is "
    "encrypted and bounced through the copy engines, with no plain peer-to-peer. With tensor parallelism every "
    "all-reduce pays for it: a warning where TP > 1 is planned, a note on one GPU. The state is read from NVML by "
    "the doctor (the gpu section's conf_compute).")
WORLD_SIZE = Code("serve-resources.world-size", "Tensor x pipeline parallel size against the visible GPUs",
    "vLLM: 'World size (...) is larger than the number of available GPUs (...) in this node.' The GPUs are those "
    "NVML lists, filtered by CUDA_VISIBLE_DEVICES as CUDA reads it (or --gpus).")
GPU_FACTS_UNAVAILABLE = Code("serve-resources.gpu-facts-unavailable", "GPU count and memory were not judged",
    "No GPU facts here (no NVML, no driver). On a CI machine, give the serving GPUs' shape with --gpus N "
    "--gpu-memory GIB to judge these rules.")
MEMORY = Code("serve-resources.memory", "Weights fit the GPUs, with room for the KV cache",
    "Per GPU: the target's weights / (TP x PP) plus the drafter's / draft TP, at the serving dtype, against total "
    "memory x --gpu-memory-utilization. What is left holds the KV cache and activations; the doctor cannot "
    "know the activation peak before vLLM profiles it, so the room is an upper bound.")
MEMORY_HELD = Code("serve-resources.memory-held", "Other processes hold memory vLLM asks for",
    "vLLM requests total x --gpu-memory-utilization at start and stops if less is free: 'Free memory on device "
    "... on startup is less than desired GPU memory utilization'.")
MEMORY_WEIGHTS = Code("serve-resources.memory-weights", "The weights alone exceed vLLM's memory budget",
    "No room is left for the KV cache: 'No available memory for the cache blocks'. Use more GPUs (TP), a higher "
    "--gpu-memory-utilization, or a quantized model.")
KV_CACHE = Code("serve-resources.kv-cache", "One max-length sequence does not fit the KV cache",
    "After the weights, the KV cache must hold one --max-model-len sequence for the target and the drafter: 'To "
    "serve at least one request with the models's max seq len (...), (...) KV cache is needed, which is "
    "larger than the available KV cache memory'.")
MEMORY_UNKNOWN = Code("serve-resources.memory-unknown", "GPU memory not judged",
    "The target's weights were not read, so their size is unknown.")
PORT_OK = Code("serve-resources.port-ok", "The port is free",
    "The doctor bound the address and port vLLM will listen on, without SO_REUSEPORT, and closed it again: "
    "nothing else listens there.")
PORT_IN_USE = Code("serve-resources.port-in-use", "The port is taken",
    "vLLM binds (host, port) with SO_REUSEADDR and SO_REUSEPORT only after loading the model: a port held by "
    "another server fails it late, and one held by another SO_REUSEPORT listener (another vLLM) is silently "
    "shared. Stop the holder or pick another --port.")
RESOURCES_NOT_GIVEN = Code("serve-resources.not-given", "No serve command to check",
    "Run `dflash-doctor serve -- vllm serve MODEL [flags]` with the exact command.")

COMMAND_CODES: tuple[Code, ...] = (
    NOT_GIVEN,
    NOT_A_SERVE_COMMAND,
    VLLM_NEWER_THAN_VERIFIED,
    PARSED,
    VLLM_PARSER_REJECTED,
    FLAG_INVALID,
    FLAGS_UNCHECKED,
    SPEC_FLAGS_CONFLICT,
    SPEC_FLAGS_UNKNOWN,
    MODEL_MISSING,
    VLLM_MISSING,
    NO_SPECULATIVE_CONFIG,
    SPEC_JSON,
    SPEC_INVALID,
    SPEC_METHOD,
    SPEC_MODEL_MISSING,
    SPEC_K_MISSING,
    SPEC_K_INVALID,
    SPEC_DRAFT_TP,
    SPEC_OK,
    DRAFTER_BROKEN,
    MAX_MODEL_LEN,
    SCHEDULER,
    TOKEN_BUDGET,
    HEADS_TP,
    KV_HEADS_TP,
    VLLM_VALIDATION,
    ENVIRON_REFUSED,
    ENVIRON_UNKNOWN,
    MODEL_CODE_NOT_RUN,
    VALIDATION_NOT_RUN,
    VLLM_ATTENTION,
    FP8_KV_FLOAT16,
    JUDGED_BY,
    SPECULATORS_LAUNCH,
    SPECULATORS_VERIFIER_REFUSED,
    SPECULATORS_NO_VERIFIER,
    REASONING_PARSER,
    TOOL_PARSER,
    UNKNOWN_REASONING_PARSER,
    UNKNOWN_TOOL_PARSER,
    AUTO_TOOL_CHOICE_WITHOUT_PARSER,
    TRUST_REMOTE_CODE_NEEDED,
    MULTIMODAL_TARGET,
    LANGUAGE_MODEL_ONLY,
    KNOWN_BAD_COMBINATION,
    HYBRID_PREFIX_CACHE,
)
RESOURCES_CODES: tuple[Code, ...] = (
    WORLD_SIZE,
    CONFIDENTIAL_COMPUTE_MODE,
    GPU_FACTS_UNAVAILABLE,
    MEMORY,
    MEMORY_HELD,
    MEMORY_WEIGHTS,
    KV_CACHE,
    MEMORY_UNKNOWN,
    PORT_OK,
    PORT_IN_USE,
    RESOURCES_NOT_GIVEN,
)
CODES: tuple[Code, ...] = (*COMMAND_CODES, *RESOURCES_CODES)
