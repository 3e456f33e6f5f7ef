"""Layer: what the machine must offer `vllm serve` (check `serve-resources`).

Enough GPUs for TP x PP, weights per GPU plus the drafter within each GPU's memory x
--gpu-memory-utilization (memory other processes hold counted), room for one max_model_len sequence of
KV cache, and a free port. The rules and their sources are in knowledge.dflash and knowledge.gpu.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from dflash_doctor.check import Facts
from dflash_doctor.checks.argv import with_flag
from dflash_doctor.checks.models.model_views import (
    gpu_view,
    text_config,
)
from dflash_doctor.checks.remedy import quote
from dflash_doctor.checks.serve.codes import (
    GPU_FACTS_UNAVAILABLE,
    KV_CACHE,
    MEMORY,
    MEMORY_HELD,
    MEMORY_UNKNOWN,
    MEMORY_WEIGHTS,
    PORT_IN_USE,
    PORT_OK,
    RESOURCES_NOT_GIVEN,
    WORLD_SIZE,
)
from dflash_doctor.checks.serve.newest import confidential_compute
from dflash_doctor.checks.serve.settings import (
    DTYPE_BYTES,
    MULTIMODAL_PREFIX_WORDS,
    effective_settings,
    gpu_tier,
    int_or,
    not_given,
    size_gib,
)
from dflash_doctor.facts.gpu.nvml_shapes import GpuDevice
from dflash_doctor.facts.models.models_shapes import Model, Models, Weights
from dflash_doctor.facts.serve.serve_shapes import ServeArgs, ServeFields, VllmDflash
from dflash_doctor.knowledge.dflash import (
    KV_CACHE_ONE_SEQUENCE,
    WORLD_SIZE_RULE,
)
from dflash_doctor.knowledge.gpu import VLLM_FREE_MEMORY_CHECK
from dflash_doctor.model import Finding, Remediation, Status

__all__ = ["resources_findings"]


def _served_bytes(model: Model | None, dtype_bytes: int, language_only: bool) -> tuple[int, list[str]]:
    """Bytes the model's weights take on the GPUs: floating-point tensors at the serving dtype, quantized ones
    as stored; with --language-model-only, without the vision/audio towers; never MTP heads."""
    weights = model.weights if model is not None else Weights()
    dropped: list[str] = []
    total = 0
    for dtype, info in weights.dtypes.items():
        stored = info.bytes
        bits = {"F16": 16, "BF16": 16, "F32": 32, "F64": 64}.get(dtype)
        total += stored * dtype_bytes * 8 // bits if bits else stored
    stored_total = weights.total_bytes
    scale = total / stored_total if stored_total else 1.0  # stored -> served bytes, for the prefix totals
    for prefix, size in ((model.prefix_bytes if model is not None else None) or {}).items():
        towers = language_only and any(w in prefix for w in MULTIMODAL_PREFIX_WORDS)
        if towers or prefix.startswith("mtp"):
            total -= int(size * scale)
            dropped.append(prefix)
    return max(total, 0), dropped


def _serving_dtype_bytes(fields: ServeFields, target: Model | None) -> int:
    wanted = fields.dtype
    if wanted not in (None, "auto"):
        return DTYPE_BYTES.get(str(wanted), 2)
    stored = text_config(target).torch_dtype
    return 2 if stored in (None, "float32") else DTYPE_BYTES.get(str(stored), 2)


def _kv_bytes_per_token(model: Model | None, tp: int, pp: int, kv_bytes: int,
                        max_model_len: int) -> float:
    """KV cache per token of context, per GPU, for one model: 2 x KV heads on this rank x head_dim x bytes, for
    each attention layer on this pipeline stage; a sliding layer holds at most its window."""
    text = text_config(model)
    layers, heads = text.int("num_hidden_layers") or 0, text.int("num_attention_heads") or 0
    kv = int_or(text.int("num_key_value_heads"), heads)
    head_dim = int_or(text.int("head_dim"), (text.int("hidden_size") or 0) // heads if heads else 0)
    if not (layers and kv and head_dim):
        return 0.0
    per_layer = 2 * max(1, kv // tp) * head_dim * kv_bytes
    listed = text.layer_types
    window = text.int("sliding_window")
    # Counted, never expanded: num_hidden_layers comes from config.json and may say 10**12.
    if listed is not None:
        kinds = listed[:layers]
        full = sum(1 for kind in kinds if kind == "full_attention" or kind is None)
        sliding = sum(1 for kind in kinds if kind == "sliding_attention")
    else:
        full, sliding = layers, 0
    share = min(window, max_model_len) / max_model_len if window and max_model_len else 1.0
    total = _as_float(per_layer * full) + _as_float(per_layer * sliding) * share
    return total / max(1, pp)


def _as_float(value: int) -> float:
    """An int from config.json arithmetic as a float; beyond float's range, infinity (never OverflowError)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf


def resources_findings(facts: Facts) -> list[Finding]:
    """The serve-resources check's findings."""
    return _Resources().judge(facts)


class _Resources:
    def judge(self, facts: Facts) -> list[Finding]:
        serve = facts.section(ServeArgs).as_resolved()  # what vLLM resolved, where its validation ran
        if not serve.given or serve.program_error:
            return not_given(RESOURCES_NOT_GIVEN)
        argv = list(serve.argv)
        fields = serve.fields
        findings = list(self._port(serve))
        gpus = gpu_view(facts)
        if not gpus.available:
            findings.append(GPU_FACTS_UNAVAILABLE.finding(Status.SKIP,
                                    f"GPU count and memory not judged: {gpus.why}",
                                    detail="On a machine without the serving GPUs, pass their shape: `dflash-doctor "
                                    "serve --gpus 2 --gpu-memory 48 -- vllm serve ...`."))
            return findings
        tp, pp = fields.tp, fields.pp
        devices = gpus.devices
        world = tp * pp
        where = "assumed with --gpus" if gpus.source == "assumed" else (
            f"visible with CUDA_VISIBLE_DEVICES={gpus.cuda_visible_devices!r}"
            if gpus.cuda_visible_devices is not None else "on this host")
        if world > len(devices):
            findings.append(WORLD_SIZE.finding(Status.FAIL,
                                    f"\"World size ({world}) is larger than the number of available GPUs ({len(devices)}) "
                                    f"in this node.\" (--tensor-parallel-size {tp} x --pipeline-parallel-size {pp}; "
                                    f"{len(devices)} GPU(s) {where})",
                                    detail=WORLD_SIZE_RULE.source,
                                    evidence={"world_size": world, "gpus": [d.index for d in devices]},
                                    remediation=(Remediation(with_flag(argv, "--tensor-parallel-size", max(1, len(devices) // pp)),
                                                             "fit the GPUs there are"),
                                                 Remediation("export CUDA_VISIBLE_DEVICES=...", "or make more visible"))))
            return findings
        findings.append(WORLD_SIZE.finding(Status.PASS,
                                f"TP {tp} x PP {pp} = {world} of {len(devices)} GPU(s) {where}"))
        findings.extend(confidential_compute(facts, tp))
        findings.extend(self._memory(facts, fields, devices[:world], tp, pp))
        return findings

    def _port(self, serve: ServeArgs) -> list[Finding]:
        port = serve.port
        host = port.host or "0.0.0.0"
        if port.free:
            return [PORT_OK.finding(Status.PASS, f"port {port.port} on {host} is free")]
        shared = port.shared_listener
        return [PORT_IN_USE.finding(Status.FAIL,
                        f"port {port.port} on {host} cannot be bound ({port.error})"
                        + (": another SO_REUSEPORT listener holds it, so vLLM would share the port with it" if shared
                           else ": vLLM would fail after loading the model"),
                        evidence=port.to_json(),
                        remediation=(Remediation(f"ss -ltnp {quote(f'sport = :{port.port}')}", "see who holds it"),
                                     Remediation(with_flag(list(serve.argv), "--port", 8001), "or serve on another port")))]

    def _memory(self, facts: Facts, fields: ServeFields, devices: Sequence[GpuDevice], tp: int,
                pp: int) -> list[Finding]:
        serve = facts.section(ServeArgs).as_resolved()  # what vLLM resolved, where its validation ran
        argv = list(serve.argv)
        models = facts.optional_section(Models) or Models()
        target, drafter = models.target, models.drafter
        if target is None or not target.weights.total_bytes:
            return [MEMORY_UNKNOWN.finding(Status.SKIP, "GPU memory not judged: the target's weights were not read")]
        spec = serve.speculative_config
        util = fields.gpu_memory_utilization if fields.gpu_memory_utilization is not None \
            else VLLM_FREE_MEMORY_CHECK.value
        dtype_bytes = _serving_dtype_bytes(fields, target)
        target_bytes, dropped = _served_bytes(target, dtype_bytes, bool(fields.language_model_only))
        own_tp = spec.integer("draft_tensor_parallel_size")
        draft_tp = own_tp if own_tp is not None else tp
        drafter_bytes, _ = _served_bytes(drafter, dtype_bytes, False) if drafter else (0, [])
        per_gpu = target_bytes / (tp * pp) + drafter_bytes / max(1, draft_tp)
        vllm = facts.optional_section(VllmDflash)
        settings = effective_settings(fields, target, gpu_tier(devices[0], vllm), vllm)
        mml = settings.max_model_len or 0
        kv_dtype = fields.kv_cache_dtype
        kv_bytes = 1 if kv_dtype is not None and kv_dtype.startswith("fp8") else dtype_bytes
        per_token = (_kv_bytes_per_token(target, tp, pp, kv_bytes, mml or 1)
                     + (_kv_bytes_per_token(drafter, max(1, draft_tp), 1, kv_bytes, mml or 1) if drafter else 0.0))
        findings: list[Finding] = []
        evidence = {"gpu_memory_utilization": util, "target_bytes": target_bytes, "drafter_bytes": drafter_bytes,
                    "weights_per_gpu": int(per_gpu), "max_model_len": mml,
                    # JSON has no infinity: a per-token size past float's range (an absurd config) is left out
                    "kv_bytes_per_token": per_token if math.isfinite(per_token) else None,
                    "excluded_prefixes": dropped, "tp": tp, "pp": pp}
        worst_room: float | None = None
        for device in devices:
            memory = device.memory
            if memory is None or memory.total <= 0:
                continue
            # What CUDA (and so vLLM) calls total excludes the driver's reservation NVML reports separately.
            total = memory.total - (memory.reserved or 0)
            free = memory.free
            budget = math.ceil(total * util)
            name = f"GPU {device.index} ({device.name})"
            if free < budget:
                others = [f"{p.name or '?'} (pid {p.pid}, {size_gib(p.used_bytes)})" for p in device.processes if not p.own]
                findings.append(MEMORY_HELD.finding(Status.FAIL,
                    f"{name}: {size_gib(free)} of {size_gib(total)} free, below --gpu-memory-utilization {util} = {size_gib(budget)}: "
                    "vLLM stops with \"Free memory on device ... on startup is less than desired GPU memory utilization\""
                    + (f"; held by {', '.join(others)}" if others else ""),
                    detail=VLLM_FREE_MEMORY_CHECK.source,
                    evidence={**evidence, "device": device.index, "free": free, "budget": budget},
                    remediation=(Remediation(with_flag(argv, "--gpu-memory-utilization", f"{max(0.05, (free / total) - 0.01):.2f}"),
                                             "ask for no more than is free"),
                                 Remediation("nvidia-smi", "or stop what holds the memory"))))
                continue
            room = budget - per_gpu
            worst_room = room if worst_room is None else min(worst_room, room)
            if room <= 0:
                findings.append(MEMORY_WEIGHTS.finding(Status.FAIL,
                    f"{name}: the weights need {size_gib(per_gpu)} per GPU (target {size_gib(target_bytes)} / {tp * pp} + drafter "
                    f"{size_gib(drafter_bytes)} / {draft_tp}), more than {util} x {size_gib(total)} = {size_gib(budget)}: "
                    "\"No available memory for the cache blocks\"",
                    detail=KV_CACHE_ONE_SEQUENCE.source, evidence={**evidence, "device": device.index},
                    remediation=(Remediation(with_flag(argv, "--tensor-parallel-size", tp * 2), "spread the weights over more GPUs"),)))
            elif mml and per_token and per_token * mml > room:
                findings.append(KV_CACHE.finding(Status.FAIL,
                    f"{name}: after {size_gib(per_gpu)} of weights, {size_gib(room)} is left, but one {mml}-token sequence needs "
                    f"{size_gib(per_token * mml)} of KV cache: \"To serve at least one request with the models's max seq len "
                    f"({mml}), ... KV cache is needed, which is larger than the available KV cache memory\"",
                    detail=KV_CACHE_ONE_SEQUENCE.source, evidence={**evidence, "device": device.index},
                    remediation=((Remediation(with_flag(argv, "--max-model-len", int(room / per_token)), "a length that fits"),)
                                 if room / per_token >= 1 else ())
                    + (Remediation(with_flag(argv, "--gpu-memory-utilization", 0.95), "or give vLLM more of each GPU"),)))
        if not findings and worst_room is not None:
            tokens = int(worst_room / per_token) if per_token else None
            findings.append(MEMORY.finding(Status.PASS,
                f"weights {size_gib(per_gpu)} per GPU (target {size_gib(target_bytes)} / {tp * pp}"
                + (f" + drafter {size_gib(drafter_bytes)} / {draft_tp}" if drafter else "")
                + f") leave at most {size_gib(worst_room)} of {util} x GPU memory for KV cache and activations"
                + (f": about {tokens} tokens of KV cache, {tokens // mml if mml else '?'} sequence(s) of {mml}"
                   if tokens else ""),
                detail=KV_CACHE_ONE_SEQUENCE.note, evidence={**evidence, "room": int(worst_room)}))
        return findings
