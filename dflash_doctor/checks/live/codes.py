"""The live check's finding codes: one constant per id, with its title and explanation."""

from __future__ import annotations

from dflash_doctor.codes import Code

__all__ = [
    "ACCEPTANCE", "ACCEPTANCE_LOW", "ANSWER_MALFORMED", "BASELINE", "BASELINE_DIFFERENT_WORKLOAD",
    "BASELINE_DROP", "CODES", "COLLAPSE", "COUNTERS_BACKWARDS", "COUNTERS_INVALID", "HEALTHY",
    "METRICS_UNREADABLE", "MODELS", "MODELS_UNREADABLE", "NOT_GIVEN", "NO_DRAFTS", "NO_SPEC_METRICS",
    "SERVED_CONFIG", "SERVED_CONTEXT_SHORTER", "SERVED_K_DIFFERS", "SERVER_DIED", "SERVER_NOT_READY",
    "UNHEALTHY", "UNREACHABLE", "WORKLOAD_FAILED",
]

NOT_GIVEN = Code(
    "live.not-given", "No running server to check",
    "The live check runs against a server: `dflash-doctor live http://HOST:PORT`, or `dflash-doctor serve --exec "
    "--live -- vllm serve ...`, which starts the server and checks it.")
UNREACHABLE = Code(
    "live.unreachable", "The server did not answer /health",
    "The connection was refused, timed out, or what answered was not HTTP. Nothing else was measured. Check the "
    "host and port (vllm serve's --host/--port, default 8000) and that the server finished starting.")
UNHEALTHY = Code(
    "live.unhealthy", "/health answered but not 200",
    "vLLM's /health answers 200 while its engine runs; an error status means the engine died or a proxy in front "
    "refuses the request.")
HEALTHY = Code(
    "live.healthy", "/health answered 200",
    "The server is up and its engine alive (vLLM answers /health with 200 only while the engine runs).")
MODELS = Code(
    "live.models", "The models the server lists",
    "/v1/models: the served model's id and root. vLLM does not list the drafter there; the drafter comes from the "
    "serve command when the doctor started the server (`serve --exec --live`).")
MODELS_UNREADABLE = Code(
    "live.models-unreadable", "/v1/models listed no model",
    "Without a model id the doctor cannot send its workload. A 401 means the server wants an API key: name the "
    "environment variable that holds it with --api-key-env (the key itself is never printed or stored).")
WORKLOAD_FAILED = Code(
    "live.workload-failed", "The doctor's workload requests failed",
    "The fixed greedy /v1/completions requests returned errors or timed out; the counters then say little. The "
    "finding quotes the errors.")
METRICS_UNREADABLE = Code(
    "live.metrics-unreadable", "/metrics could not be read",
    "vLLM serves Prometheus metrics at /metrics; without them the doctor cannot measure speculation. A proxy may "
    "hide the path, or the answer was not Prometheus text.")
NO_SPEC_METRICS = Code(
    "live.no-spec-metrics", "The server exposes no speculative-decoding metrics",
    "vLLM registers vllm:spec_decode_num_drafts, _num_draft_tokens, _num_accepted_tokens and "
    "_num_accepted_tokens_per_pos only when a speculative config is given (vllm/v1/spec_decode/metrics.py): "
    "speculation is off, or the vLLM is older than these counters.")
NO_DRAFTS = Code(
    "live.no-drafts", "The drafter proposed nothing during the workload",
    "The spec-decode counters did not move while the doctor's requests ran: speculation is configured but was "
    "not used.")
ANSWER_MALFORMED = Code(
    "live.answer-malformed", "The server answered fields of the wrong type",
    "A field of /v1/models (data, id, root, parent, max_model_len) or of a /v1/completions answer (usage, "
    "usage.completion_tokens, usage.prompt_tokens) did not have the type vLLM's OpenAI server gives it. The "
    "finding names each field, what was expected and what came; the doctor read those fields as absent, so "
    "the figures that use them may be missing. Something other than vLLM, or a proxy that rewrites answers, "
    "is answering.")
COUNTERS_INVALID = Code(
    "live.counters-invalid", "The speculative-decoding counters are not counts",
    "A Prometheus counter is a whole number that only grows from 0. NaN, +Inf/-Inf, a negative or fractional "
    "value (or a sum of samples out of range) in /metrics means the server's metrics are broken or rewritten "
    "on the way; acceptance cannot be measured from them, and the doctor fails rather than pass a number "
    "computed from NaN. The finding names each counter and its value.")
COUNTERS_BACKWARDS = Code(
    "live.counters-backwards", "The speculative-decoding counters went backwards",
    "A counter was lower in /metrics after the workload than before it: the server restarted in between, or "
    "several servers answer at one address (a load balancer, each scrape from another replica). The "
    "differences are not the workload's, so acceptance is not judged; measure again against one server.")
ACCEPTANCE = Code(
    "live.acceptance", "DFlash drafts are accepted",
    "Mean acceptance length = 1 + accepted / drafts (vLLM's metrics.py docstring), acceptance rate = accepted / "
    "draft tokens, the per-position curve = accepted at position i / drafts, over the doctor's fixed greedy "
    "workload.")
ACCEPTANCE_LOW = Code(
    "live.acceptance-low", "DFlash acceptance is low",
    "A mean acceptance length under 1.6: speculation keeps little of what it costs. z-lab/dflash#52 reports 1.5 "
    "for a quantized pair against 3+ unquantized.")
COLLAPSE = Code(
    "live.collapse", "DFlash acceptance collapsed",
    "A mean acceptance length near 1 (under 1.2) or position 0 accepted under 10% of the time: the drafter does "
    "not track the target, and serving is slower than without speculation, silently. Known causes, in the order "
    "named: target_layer_ids read with the other vLLM version's offset (vLLM PRs #40727, #42704; sglang #37475), "
    "a quantized target or drafter (z-lab/dflash#52), FlashInfer non-causal drafts under CUDA graphs (vLLM PR "
    "#48167), long contexts (vLLM #54691). The finding lists the facts that point at each, and the fixes.")
BASELINE = Code(
    "live.baseline", "Acceptance holds against the baseline",
    "The mean acceptance length is within 10% of the saved run given with --baseline (same prompts).")
BASELINE_DROP = Code(
    "live.baseline-drop", "Acceptance dropped against the baseline",
    "More than 10% lower mean acceptance length than the saved run (same prompts, greedy): the drafter, its "
    "config, the vLLM version or the serve flags changed. Both figures are in the finding.")
BASELINE_DIFFERENT_WORKLOAD = Code(
    "live.baseline-different-workload", "The baseline ran another workload",
    "The --baseline report's prompts, request count or token limit differ from this run's: acceptance depends "
    "on the prompts, so the figures are not compared.")
SERVED_CONFIG = Code(
    "live.served-config", "The server serves what the command asked for",
    "/v1/models' max_model_len (vLLM's ModelCard, the engine's model_config.max_model_len) equals the requested "
    "--max-model-len, and the speculative-decoding counters have one position per requested "
    "num_speculative_tokens (vLLM labels vllm:spec_decode_num_accepted_tokens_per_pos with positions 0..k-1). "
    "The requested values come from the serve command: `serve --exec --live`, or `live URL -- vllm serve ...`.")
SERVED_CONTEXT_SHORTER = Code(
    "live.served-context-shorter", "The server serves a shorter context than was asked for",
    "/v1/models says max_model_len is below the requested --max-model-len: requests longer than it are refused "
    "(\"maximum context length is ... tokens\"). vLLM 0.33+ lowers the served length to a drafter's whose RoPE "
    "cannot grow (YaRN, longrope...) on the V2 runner, with only a log line (VllmConfig."
    "_limit_max_model_len_to_draft). Serve a drafter made for the requested context, or ask for the served "
    "length explicitly so that clients know it.")
SERVED_K_DIFFERS = Code(
    "live.served-k-differs", "The server drafts another number of tokens than was asked for",
    "The per-position acceptance counters have another number of positions than the requested "
    "num_speculative_tokens: vLLM took k from somewhere else (a speculators drafter served as `vllm serve "
    "DIR` before vLLM 0.29 drops the --speculative-config given beside it and uses the checkpoint's "
    "speculative_tokens), or the server was started with another command.")
SERVER_DIED = Code(
    "live.server-died", "The server started by serve --exec --live died",
    "`vllm serve` exited before /health answered; the finding quotes the last lines of its log.")
SERVER_NOT_READY = Code(
    "live.server-not-ready", "The server started by serve --exec --live did not become healthy in time",
    "/health did not answer 200 within --live-wait seconds; the server is left running (its PID is stated).")

CODES: tuple[Code, ...] = (
    NOT_GIVEN,
    UNREACHABLE,
    UNHEALTHY,
    HEALTHY,
    MODELS,
    MODELS_UNREADABLE,
    WORKLOAD_FAILED,
    METRICS_UNREADABLE,
    NO_SPEC_METRICS,
    NO_DRAFTS,
    ANSWER_MALFORMED,
    COUNTERS_INVALID,
    COUNTERS_BACKWARDS,
    ACCEPTANCE,
    ACCEPTANCE_LOW,
    COLLAPSE,
    BASELINE,
    BASELINE_DROP,
    BASELINE_DIFFERENT_WORKLOAD,
    SERVED_CONFIG,
    SERVED_CONTEXT_SHORTER,
    SERVED_K_DIFFERS,
    SERVER_DIED,
    SERVER_NOT_READY,
)
