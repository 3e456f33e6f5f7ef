"""Serving conditions of the newest DFlash releases that the command alone does not show: prefix caching with an
eagle-family draft on a hybrid target (vLLM #53505, read from the installed scheduler and KV cache coordinator),
and NVIDIA Confidential Computing under tensor parallelism (NVML's state, as vLLM 0.34 reads it). The facts come
from facts.serve.vllm_pairing and the NVML section; the hard-coded rest is in knowledge.dflash_formats."""

from __future__ import annotations

from dflash_doctor.check import Facts
from dflash_doctor.checks.models.drafter_pairing import pairing_facts
from dflash_doctor.checks.models.model_views import architectures
from dflash_doctor.checks.remedy import join
from dflash_doctor.checks.serve.codes import CONFIDENTIAL_COMPUTE_MODE, HYBRID_PREFIX_CACHE
from dflash_doctor.checks.serve.view import ServeCommand
from dflash_doctor.facts.gpu.nvml_shapes import Gpu
from dflash_doctor.facts.serve.serve_shapes import ServeArgs, VllmDflash
from dflash_doctor.knowledge.dflash_formats import CONFIDENTIAL_COMPUTE
from dflash_doctor.knowledge.dflash_formats import HYBRID_PREFIX_CACHE as HYBRID_RULE
from dflash_doctor.model import Finding, Remediation, Status

__all__ = ["confidential_compute", "hybrid_prefix_cache"]

# The methods vLLM's use_eagle() counts among those that read the target's hidden states (config/speculative.py).
EAGLE_FAMILY_DRAFTS = ("dflash", "dspark")
# What turns KV offload on (engine/arg_utils.py, 0.20.1-0.34.0): a size, or an offloading KV connector.
KV_OFFLOAD_SIZE = "--kv-offloading-size"
KV_TRANSFER_CONFIG = "--kv-transfer-config"


def _words(argv: list[str]) -> list[str]:
    return [w.split("=", 1)[0].replace("_", "-") for w in argv]


def hybrid_prefix_cache(c: ServeCommand) -> list[Finding]:
    facts = pairing_facts(c.vllm).hybrid_prefix_cache
    method = str(c.spec.method or "").lower()
    if facts is None or not c.spec.given or method not in EAGLE_FAMILY_DRAFTS:
        return []
    if not facts.backs_off or facts.aligned is not False:
        return []
    hybrid = [a for a in architectures(c.target) if (facts.archs.get(a) and facts.archs[a].hybrid)]
    if not hybrid:
        return []
    words = _words(c.argv)
    caching = c.fields.enable_prefix_caching is not False and "--no-enable-prefix-caching" not in words
    offload = [w for w in words if w == KV_OFFLOAD_SIZE]
    offload += [KV_TRANSFER_CONFIG for i, w in enumerate(words) if w == KV_TRANSFER_CONFIG
                and "Offloading" in (c.argv[i] + (c.argv[i + 1] if i + 1 < len(c.argv) else ""))]
    if not caching and not offload:
        return []
    what = " and ".join(p for p, on in (("prefix caching", caching), ("KV offload", bool(offload))) if on)
    arch = hybrid[0]
    return [HYBRID_PREFIX_CACHE.finding(Status.WARN,
        f"{what} with {method} on a hybrid target ({arch}, {facts.archs[arch].file}: IsHybrid): {c.label}'s "
        "scheduler backs the cached position off one block for the draft and its KV cache coordinator does not align "
        "the Mamba checkpoints to it (no drop_eagle_checkpoint_block): every lookup hits 0, each request pays its "
        f"full prefill (vLLM #53505; affected {HYBRID_RULE.value[0]}..{HYBRID_RULE.value[1]} as read, fixed in 0.30.0)",
        detail=f"{HYBRID_RULE.source}.",
        evidence={"method": method, "target": arch, "vllm_files": facts.files, "prefix_caching": caching,
                  "kv_offload_flags": offload},
        remediation=(Remediation("upgrade vLLM to 0.30.0 or later", "its coordinator aligns the Mamba checkpoints "
                                 "to the draft's backoff"),
                     Remediation(join([*c.argv, "--no-enable-prefix-caching"]) if caching else join(c.argv),
                                 "or serve without prefix caching, which hits nothing here anyway")))]


def confidential_compute(facts: Facts, tp: int) -> list[Finding]:
    """NVIDIA Confidential Computing as the installed vLLM resolves it (NVML's ccFeature, VLLM_CONFIDENTIAL_COMPUTE
    overriding it where the release reads it): with TP > 1 a warning, with one GPU a note."""
    gpu = facts.optional_section(Gpu)
    state = gpu.conf_compute if gpu is not None else None
    serve = facts.optional_section(ServeArgs)
    vllm = facts.optional_section(VllmDflash)
    rule = pairing_facts(vllm).confidential_compute
    env = CONFIDENTIAL_COMPUTE.value["env"]
    forced = (gpu.environ.get(env) if gpu is not None else None) or (
        serve.environ.get(env) if serve is not None else None)
    reads_override = rule is not None and rule.override
    if forced is not None and reads_override:
        on, why = forced == "1", f"{env}={forced!r} overrides NVML"
    elif state is not None and state.on is not None:
        on, why = state.on, f"NVML nvmlSystemGetConfComputeState: ccFeature {state.cc_feature}"
    else:
        return []
    if not on:
        return []
    label = f"vLLM {vllm.version}" if vllm is not None and vllm.version else "vLLM"
    handles = (f"{label} detects it ({rule.file}) and copies host-to-device through staging buffers without UVA"
               if rule is not None and rule.detects else
               f"{label} does not detect it (no {CONFIDENTIAL_COMPUTE.value['nvml_call']} in its platforms/cuda.py: "
               "before 0.34.0), so its non-blocking copies run host-synchronous")
    if tp > 1:
        return [CONFIDENTIAL_COMPUTE_MODE.finding(Status.WARN,
            f"NVIDIA Confidential Computing is on ({why}) and TP {tp} is planned: GPU-to-GPU traffic is encrypted and "
            f"bounced through the copy engines (no plain P2P), so every all-reduce pays for it; {handles}",
            detail=f"{CONFIDENTIAL_COMPUTE.source}.",
            evidence={"conf_compute": state.to_json() if state is not None else None, "override": forced,
                      "tensor_parallel_size": tp},
            remediation=(Remediation("serve on one GPU where the model fits, or measure TP throughput under CC",
                                     "with PPCIe mode (HGX H100/H200 8-GPU) NVLink traffic is not encrypted"),))]
    return [CONFIDENTIAL_COMPUTE_MODE.finding(Status.PASS,
        f"NVIDIA Confidential Computing is on ({why}), on one GPU: {handles}",
        detail=f"{CONFIDENTIAL_COMPUTE.source}.")]
