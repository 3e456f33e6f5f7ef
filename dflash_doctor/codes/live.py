"""Codes of the live layer: a running vLLM server's health and its DFlash acceptance (`dflash-doctor live URL`)."""

from dflash_doctor.codes import Code

CODES = (
    Code("live.not-given", "No running server to check",
         "The live check runs against a server: `dflash-doctor live http://HOST:PORT`, or `dflash-doctor serve --exec "
         "--live -- vllm serve ...`, which starts the server and checks it."),
    Code("live.unreachable", "The server did not answer /health",
         "The connection was refused, timed out, or what answered was not HTTP. Nothing else was measured. Check the "
         "host and port (vllm serve's --host/--port, default 8000) and that the server finished starting."),
    Code("live.unhealthy", "/health answered but not 200",
         "vLLM's /health answers 200 while its engine runs; an error status means the engine died or a proxy in front "
         "refuses the request."),
    Code("live.healthy", "/health answered 200",
         "The server is up and its engine alive (vLLM answers /health with 200 only while the engine runs)."),
    Code("live.models", "The models the server lists",
         "/v1/models: the served model's id and root. vLLM does not list the drafter there; the drafter comes from the "
         "serve command when the doctor started the server (`serve --exec --live`)."),
    Code("live.models-unreadable", "/v1/models listed no model",
         "Without a model id the doctor cannot send its workload. A 401 means the server wants an API key: name the "
         "environment variable that holds it with --api-key-env (the key itself is never printed or stored)."),
    Code("live.workload-failed", "The doctor's workload requests failed",
         "The fixed greedy /v1/completions requests returned errors or timed out; the counters then say little. The "
         "finding quotes the errors."),
    Code("live.metrics-unreadable", "/metrics could not be read",
         "vLLM serves Prometheus metrics at /metrics; without them the doctor cannot measure speculation. A proxy may "
         "hide the path, or the answer was not Prometheus text."),
    Code("live.no-spec-metrics", "The server exposes no speculative-decoding metrics",
         "vLLM registers vllm:spec_decode_num_drafts, _num_draft_tokens, _num_accepted_tokens and "
         "_num_accepted_tokens_per_pos only when a speculative config is given (vllm/v1/spec_decode/metrics.py): "
         "speculation is off, or the vLLM is older than these counters."),
    Code("live.no-drafts", "The drafter proposed nothing during the workload",
         "The spec-decode counters did not move while the doctor's requests ran: speculation is configured but was "
         "not used."),
    Code("live.acceptance", "DFlash drafts are accepted",
         "Mean acceptance length = 1 + accepted / drafts (vLLM's metrics.py docstring), acceptance rate = accepted / "
         "draft tokens, the per-position curve = accepted at position i / drafts, over the doctor's fixed greedy "
         "workload."),
    Code("live.acceptance-low", "DFlash acceptance is low",
         "A mean acceptance length under 1.6: speculation keeps little of what it costs. z-lab/dflash#52 reports 1.5 "
         "for a quantized pair against 3+ unquantized."),
    Code("live.collapse", "DFlash acceptance collapsed",
         "A mean acceptance length near 1 (under 1.2) or position 0 accepted under 10% of the time: the drafter does "
         "not track the target, and serving is slower than without speculation, silently. Known causes, in the order "
         "named: target_layer_ids read with the other vLLM version's offset (vLLM PRs #40727, #42704; sglang #37475), "
         "a quantized target or drafter (z-lab/dflash#52), FlashInfer non-causal drafts under CUDA graphs (vLLM PR "
         "#48167), long contexts (vLLM #54691). The finding lists the facts that point at each, and the fixes."),
    Code("live.baseline", "Acceptance holds against the baseline",
         "The mean acceptance length is within 10% of the saved run given with --baseline (same prompts)."),
    Code("live.baseline-drop", "Acceptance dropped against the baseline",
         "More than 10% lower mean acceptance length than the saved run (same prompts, greedy): the drafter, its "
         "config, the vLLM version or the serve flags changed. Both figures are in the finding."),
    Code("live.baseline-different-workload", "The baseline ran another workload",
         "The --baseline report's prompts, request count or token limit differ from this run's: acceptance depends "
         "on the prompts, so the figures are not compared."),
    Code("live.server-died", "The server started by serve --exec --live died",
         "`vllm serve` exited before /health answered; the finding quotes the last lines of its log."),
    Code("live.server-not-ready", "The server started by serve --exec --live did not become healthy in time",
         "/health did not answer 200 within --live-wait seconds; the server is left running (its PID is stated)."),
)
