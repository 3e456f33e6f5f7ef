"""Codes of the serve layer: the `vllm serve` command line and what the host must offer it."""

from dflash_doctor.codes import Code

CODES = (
    Code("serve-command.not-given", "No serve command to check",
         "Run `dflash-doctor serve -- vllm serve MODEL [flags]` with the exact command."),
    Code("serve-command.not-a-serve-command", "The command after -- is not vllm serve",
         "The doctor judges `vllm serve MODEL [flags]` or `python -m vllm.entrypoints.openai.api_server --model "
         "MODEL [flags]`."),
    Code("serve-command.parsed", "Which parser read the command",
         "When vLLM imports in the target interpreter, the doctor parses the command with vLLM's own parser "
         "(make_arg_parser + AsyncEngineArgs.from_cli_args), so every flag of the installed version counts. "
         "Otherwise it reads a documented subset: --tensor-parallel-size, --pipeline-parallel-size, "
         "--max-model-len, --max-num-batched-tokens, --max-num-seqs, --gpu-memory-utilization, --dtype, "
         "--speculative-config, --enable-chunked-prefill, --trust-remote-code, --language-model-only, --port, "
         "--host, --tokenizer, --skip-tokenizer-init, --attention-backend, --kv-cache-dtype."),
    Code("serve-command.vllm-parser-rejected", "vLLM's own parser rejects the command",
         "The installed vLLM's argument parser exits on this command line (an unknown flag, a bad value, invalid "
         "JSON). `vllm serve` would stop the same way."),
    Code("serve-command.flag-invalid", "A flag has a value vLLM would refuse",
         "A value that does not parse (a non-integer size, an unknown dtype, a speculative config that is not a "
         "JSON object)."),
    Code("serve-command.flags-unchecked", "Flags outside the doctor's subset",
         "Without vLLM's own parser, flags outside the documented subset are not checked; a typo would only show "
         "when vLLM starts."),
    Code("serve-command.model-missing", "The command names no model",
         "`vllm serve MODEL`: without a model vLLM serves its built-in default, not your target."),
    Code("serve-command.vllm-missing", "vLLM is not installed in the inspected interpreter",
         "The doctor inspects --python (default: its own interpreter). Point it at the interpreter that runs "
         "vllm serve."),
    Code("serve-command.no-speculative-config", "The command does not enable DFlash",
         "Without --speculative-config vLLM serves the target alone."),
    Code("serve-command.spec-json", "--speculative-config is not a JSON object",
         "vLLM parses the value as JSON; shell quoting often breaks it. Quote it with single quotes and use double "
         "quotes inside."),
    Code("serve-command.spec-invalid", "--speculative-config has a key vLLM refuses",
         "'tensor_parallel_size' is refused: 'Please pass draft_tensor_parallel_size instead.'"),
    Code("serve-command.spec-method", "The speculative method is missing or not DFlash",
         "Without \"method\", vLLM picks dflash only when 'dflash' is in the drafter's path and otherwise loads it "
         "as a plain draft model; a method the installed vLLM does not list fails validation. DFlash first shipped "
         "in vLLM 0.20.0."),
    Code("serve-command.spec-model-missing", "--speculative-config names no drafter",
         "DFlash needs \"model\": the drafter's directory or repo id."),
    Code("serve-command.spec-k-missing", "num_speculative_tokens is missing",
         "DFlash drafters have no n_predict, and vLLM never reads their block_size, so vLLM refuses to start: "
         "'A speculative model was provided, but neither `speculative_token_tree` nor `num_speculative_tokens` was "
         "provided'. Use block_size - 1 (15 for b16 drafters)."),
    Code("serve-command.spec-k-invalid", "num_speculative_tokens is not a positive integer",
         "vLLM's SpeculativeConfig takes only num_speculative_tokens > 0: 'Input should be greater than 0'."),
    Code("serve-command.spec-draft-tp", "draft_tensor_parallel_size is neither 1 nor the target's",
         "vLLM: 'cannot be other value than 1 or target model tensor_parallel_size'."),
    Code("serve-command.spec-ok", "The speculative config is complete",
         "Method, drafter, num_speculative_tokens and the draft tensor-parallel size are valid."),
    Code("serve-command.drafter-broken", "The drafter in the speculative config fails its checks",
         "See the drafter check's findings: each is a reason this command would fail or draft badly."),
    Code("serve-command.max-model-len", "--max-model-len exceeds the target's own maximum",
         "vLLM derives a maximum from the target's config (max_position_embeddings scaled by rope_scaling, capped "
         "by tokenizer_config's model_max_length) and refuses a larger --max-model-len unless "
         "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, which risks NaNs past the trained length."),
    Code("serve-command.scheduler", "The batch limits break vLLM's scheduler rules",
         "SchedulerConfig.verify_max_model_len: without chunked prefill, --max-num-batched-tokens must be at least "
         "--max-model-len; always at least --max-num-seqs. The doctor applies vLLM's defaults (which depend on the "
         "first GPU's memory) to the flags you leave out."),
    Code("serve-command.token-budget", "The DFlash token budget",
         "vLLM 0.20-0.24 reserve (num_speculative_tokens - 1) x max_num_seqs draft slots out of "
         "--max-num-batched-tokens and stop when nothing is left to schedule ('max_num_scheduled_tokens is set to "
         "... which does not allow any tokens to be scheduled'); with max_num_seqs defaulting to 1024 on GPUs of 70 "
         "GiB or more, k = 15 needs more than 14336 tokens. vLLM 0.34 stops when max_num_batched_tokens <= k + 1 "
         "('VllmConfig does not have enough slots...') and caps running sequences at max_num_batched_tokens // "
         "(k + 1)."),
    Code("serve-command.heads-tp", "Attention heads do not divide by the tensor-parallel size",
         "'Total number of attention heads (...) must be divisible by tensor parallel size (...).' The drafter is "
         "checked against its own draft tensor-parallel size."),
    Code("serve-command.kv-heads-tp", "KV heads and the tensor-parallel size do not divide",
         "vLLM asserts that the KV heads divide by TP, or TP by the KV heads (each is then replicated)."),
    Code("serve-command.vllm-validation", "vLLM's own config validation",
         "With --vllm-validate and vLLM importable in the target, the doctor runs vLLM's create_engine_config on "
         "the command (configs only, no weights) and reports its verdict beside its own."),
    Code("serve-resources.world-size", "Tensor x pipeline parallel size against the visible GPUs",
         "vLLM: 'World size (...) is larger than the number of available GPUs (...) in this node.' The GPUs are "
         "those NVML lists, filtered by CUDA_VISIBLE_DEVICES as CUDA reads it (or --gpus)."),
    Code("serve-resources.gpu-facts-unavailable", "GPU count and memory were not judged",
         "No GPU facts here (no NVML, no driver). On a CI machine, give the serving GPUs' shape with --gpus N "
         "--gpu-memory GIB to judge these rules."),
    Code("serve-resources.memory", "Weights fit the GPUs, with room for the KV cache",
         "Per GPU: the target's weights / (TP x PP) plus the drafter's / draft TP, at the serving dtype, against "
         "total memory x --gpu-memory-utilization. What is left holds the KV cache and activations; the doctor "
         "cannot know the activation peak before vLLM profiles it, so the room is an upper bound."),
    Code("serve-resources.memory-held", "Other processes hold memory vLLM asks for",
         "vLLM requests total x --gpu-memory-utilization at start and stops if less is free: 'Free memory on "
         "device ... on startup is less than desired GPU memory utilization'."),
    Code("serve-resources.memory-weights", "The weights alone exceed vLLM's memory budget",
         "No room is left for the KV cache: 'No available memory for the cache blocks'. Use more GPUs (TP), a "
         "higher --gpu-memory-utilization, or a quantized model."),
    Code("serve-resources.kv-cache", "One max-length sequence does not fit the KV cache",
         "After the weights, the KV cache must hold one --max-model-len sequence for the target and the drafter: "
         "'To serve at least one request with the models's max seq len (...), (...) KV cache is needed, which is "
         "larger than the available KV cache memory'."),
    Code("serve-resources.memory-unknown", "GPU memory not judged",
         "The target's weights were not read, so their size is unknown."),
    Code("serve-resources.port-ok", "The port is free",
         "The doctor bound the address and port vLLM will listen on, without SO_REUSEPORT, and closed it again: "
         "nothing else listens there."),
    Code("serve-resources.port-in-use", "The port is taken",
         "vLLM binds (host, port) with SO_REUSEADDR and SO_REUSEPORT only after loading the model: a port held by "
         "another server fails it late, and one held by another SO_REUSEPORT listener (another vLLM) is silently "
         "shared. Stop the holder or pick another --port."),
)
