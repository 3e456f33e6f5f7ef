"""Rules of the `serve-command` check for the rest of a DFlash serve command: the reasoning and tool-call
parsers against the installed vLLM's registries, --enable-auto-tool-choice without a parser, a config.json
that needs --trust-remote-code, a multimodal target with or without --language-model-only, and the
known-bad combinations of DFlash with other settings, each only for the vLLM versions it applies to
(knowledge.dflash_reports.KNOWN_BAD). Every remediation is the user's own command with one thing changed.

`serve_rules(command)` gives the rules as callables over the command's view (checks.serve.view.ServeCommand),
for the serve-command check's rule loop (checks.serve.command)."""

from __future__ import annotations

import difflib
from collections.abc import Callable

from dflash_doctor.checks.argv import with_flag, with_switch, without_flag
from dflash_doctor.checks.models.drafter_attention import choose_backend
from dflash_doctor.checks.models.drafter_pairing import model_runner, pairing_facts
from dflash_doctor.checks.models.model_views import architectures, text_config, version_tuple
from dflash_doctor.checks.remedy import join
from dflash_doctor.checks.serve.codes import (
    AUTO_TOOL_CHOICE_WITHOUT_PARSER,
    FP8_KV_FLOAT16,
    KNOWN_BAD_COMBINATION,
    LANGUAGE_MODEL_ONLY,
    MULTIMODAL_TARGET,
    REASONING_PARSER,
    TOOL_PARSER,
    TRUST_REMOTE_CODE_NEEDED,
    UNKNOWN_REASONING_PARSER,
    UNKNOWN_TOOL_PARSER,
)
from dflash_doctor.checks.serve.newest import hybrid_prefix_cache
from dflash_doctor.checks.serve.settings import MULTIMODAL_PREFIX_WORDS, size_gib
from dflash_doctor.checks.serve.view import ServeCommand
from dflash_doctor.facts.serve.serve_shapes import LanguageModelOnly, ParserRegistry, TransformersTypes
from dflash_doctor.knowledge.dflash_reports import (
    AUTO_TOOL_CHOICE_RULE,
    FP8_QUERY_NEEDS_BFLOAT16,
    KNOWN_BAD,
    PARSER_VALIDATION,
    TRUST_REMOTE_CODE_RULE,
    KnownBad,
)
from dflash_doctor.knowledge.dflash_reports import LANGUAGE_MODEL_ONLY as LANGUAGE_MODEL_ONLY_RULE
from dflash_doctor.model import Finding, Remediation, Status

__all__ = ["serve_rules"]


def serve_rules(c: ServeCommand) -> tuple[Callable[[], list[Finding]], ...]:
    return (lambda: _parsers(c), lambda: _remote_code(c), lambda: _multimodal(c), lambda: _known_bad(c),
            lambda: _fp8_query_float16(c), lambda: hybrid_prefix_cache(c))


# ------------------------------------------------------------------------- fp8 queries, float16 output


def _served_dtype(c: ServeCommand) -> str | None:
    """The target's dtype as vLLM serves it: --dtype, else the config's (float32 checkpoints go to bfloat16)."""
    wanted = c.fields.dtype or "auto"
    if wanted != "auto":
        return {"half": "float16", "float": "float32"}.get(wanted, wanted)
    text = text_config(c.target)
    stored = next((v for v in (text.value("torch_dtype"), text.value("dtype")) if isinstance(v, str)), None)
    return "bfloat16" if stored == "float32" else str(stored) if stored else None


def _target_backend(c: ServeCommand, cc: str) -> tuple[str | None, str]:
    """The target's attention backend on `cc` and who said so: vLLM's own selector where it ran, else the
    doctor's reading of the installed source (checks.drafter_attention.choose_backend)."""
    major, minor = (int(x) for x in cc.split("."))
    for judged in c.serve.vllm_parser.attention or []:
        if judged.capability == [major, minor] and judged.target is not None:
            return judged.target.backend, "vLLM's own attention selector"
    if c.vllm is None or c.vllm.attention is None:
        return None, ""
    head = text_config(c.target).head_dim
    pick = choose_backend(c.vllm.attention, cc, False, [head] if head else [], c.fields.attention_backend or None,
                          kv_cache_dtype=c.fields.kv_cache_dtype or "auto", vllm=c.vllm)
    return pick["chosen"], "the installed vLLM's backend priorities"


def _fp8_query_float16(c: ServeCommand) -> list[Finding]:
    rule = FP8_QUERY_NEEDS_BFLOAT16.value
    kv = c.fields.kv_cache_dtype or "auto"
    if kv not in rule["kv_cache_dtypes"] or c.vllm is None or not c.vllm.installed or \
            version_tuple(c.vllm.version) < version_tuple(rule["since"]):
        return []
    dtype = _served_dtype(c)
    if dtype != "float16" or text_config(c.target).head_dim == 512:
        return []
    out: list[Finding] = []
    for cc in c.ccs:
        if not cc.startswith(f"{rule['compute_capability_major']}."):
            continue
        backend, said = _target_backend(c, cc)
        if backend != rule["backend"]:
            continue
        sm = "sm_" + cc.replace(".", "")
        out.append(FP8_KV_FLOAT16.finding(
            Status.FAIL,
            f"{c.label} on {sm}: --kv-cache-dtype {kv} with a float16 model: FlashAttention 3 gets the query in fp8 "
            "and writes only bfloat16, so the engine starts and dies on the first request ("
            f"\"{rule['engine_error']}\")",
            detail=f"{FP8_QUERY_NEEDS_BFLOAT16.source}. The backend is {backend}, from {said}.",
            evidence={"cc": cc, "kv_cache_dtype": kv, "dtype": dtype, "backend": backend, "backend_from": said},
            remediation=(Remediation(with_flag(c.argv, "--dtype", "bfloat16"),
                                     "serve in bfloat16: FlashAttention 3 takes the fp8 query and writes bfloat16"),
                         Remediation(with_flag(c.argv, "--kv-cache-dtype", "auto"),
                                     "or keep float16 and the model's own KV cache dtype"))))
    return out


# ------------------------------------------------------------------------------------------ parsers


def _parsers(c: ServeCommand) -> list[Finding]:
    registries = pairing_facts(c.vllm).parsers
    out: list[Finding] = []
    auto = bool(c.fields.enable_auto_tool_choice)
    tool = c.fields.tool_call_parser or None
    if auto and not tool:
        out.append(AUTO_TOOL_CHOICE_WITHOUT_PARSER.finding(Status.FAIL,
                           f"--enable-auto-tool-choice without --tool-call-parser: vLLM stops before loading anything "
                           f"(\"{AUTO_TOOL_CHOICE_RULE.value}\")",
                           detail=AUTO_TOOL_CHOICE_RULE.source, evidence={"argv": c.argv},
                           remediation=_tool_fixes(c, registries.tool)))
    for kind, flag, plugin_flag, plugin, name, registry, known, unknown in (
            ("reasoning", "--reasoning-parser", "--reasoning-parser-plugin", c.fields.reasoning_parser_plugin,
             c.fields.reasoning_parser or None, registries.reasoning, REASONING_PARSER, UNKNOWN_REASONING_PARSER),
            ("tool", "--tool-call-parser", "--tool-parser-plugin", c.fields.tool_parser_plugin, tool, registries.tool,
             TOOL_PARSER, UNKNOWN_TOOL_PARSER)):
        if name is None or registry is None:
            continue
        names = registry.names
        if name in names:
            out.append(known.finding(Status.PASS,
                               f"{flag} {name} is registered in {c.label} ({registry.file})"
                               + ("" if kind == "reasoning" or auto else
                                  "; without --enable-auto-tool-choice it parses no tool calls"),
                               evidence={"parser": name, "file": registry.file}))
            continue
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
        checked = kind == "reasoning" or auto
        status = Status.WARN if plugin or not checked else Status.FAIL
        message = PARSER_VALIDATION.value[kind].format(name=name, choices=",".join(names))
        title = (f"{flag} {name!r} is not a parser {c.label} registers ({registry.file})"
                 + (f": vLLM stops at start with KeyError \"{message[:160]}...\"" if status is Status.FAIL else
                    f"; {plugin_flag} {plugin} may register it" if plugin else
                    "; vLLM checks it only with --enable-auto-tool-choice, and parses no tool calls without it")
                 + (f"; did you mean {' or '.join(close)}?" if close else ""))
        fixes = tuple(Remediation(with_flag(c.argv, flag, choice), f"the registered parser closest to {name!r}")
                      for choice in close[:2])
        out.append(unknown.finding(status, title,
                           detail=f"{PARSER_VALIDATION.source}. Registered: {', '.join(names)}.",
                           evidence={"parser": name, "registered": names, "file": registry.file,
                                     "plugin": plugin},
                           remediation=fixes))
    return out


def _tool_fixes(c: ServeCommand, registry: ParserRegistry | None) -> tuple[Remediation, ...]:
    names = list(registry.names) if registry is not None else []
    model = str(text_config(c.target).value("model_type") or "").lower()
    guess = next((n for n in names if model and n.split("_")[0] in model), None) or "PARSER"
    fixes = [Remediation(with_flag(c.argv, "--tool-call-parser", guess),
                         f"name the parser for the target's tool-call format (registered: {', '.join(names[:12])}"
                         + (" ..." if len(names) > 12 else "") + ")" if names else
                         "name the parser for the target's tool-call format")]
    fixes.append(Remediation(join(without_flag(c.argv, "--enable-auto-tool-choice", False)),
                             "or serve without automatic tool choice"))
    return tuple(fixes)


# ---------------------------------------------------------------------------------- trust-remote-code


def _remote_code(c: ServeCommand) -> list[Finding]:
    if c.fields.trust_remote_code:
        return []
    pairing = pairing_facts(c.vllm)
    registry = set(pairing.config_registry or [])
    transformers = (pairing.transformers or TransformersTypes()).model_types
    out: list[Finding] = []
    for role, model in (("target", c.target), ("drafter", c.drafter)):
        config = model.config if model is not None else None
        if config is None:
            continue
        auto_map = config.auto_map
        model_type = config.model_type
        # Only an AutoConfig entry gives transformers remote code for the config itself (an AutoModel entry alone,
        # as on the DFlash drafters, is never used by vLLM).
        if not auto_map or "AutoConfig" not in auto_map or not isinstance(model_type, str):
            continue
        if model_type in registry or (transformers is not None and model_type in transformers):
            continue
        known = "the installed transformers does not know it either" if transformers is not None else \
            "the transformers beside vLLM could not be read to tell whether it knows it"
        out.append(TRUST_REMOTE_CODE_NEEDED.finding(
                           Status.FAIL if transformers is not None else Status.WARN,
                           f"{role} {config.file}: model_type {model_type!r} is not in {c.label}'s own config "
                           f"registry and {known}; its auto_map ({', '.join(auto_map[:4])}) is the only way to load "
                           "it, and vLLM refuses remote code without --trust-remote-code",
                           detail=f"{TRUST_REMOTE_CODE_RULE.value}. {TRUST_REMOTE_CODE_RULE.source}.",
                           evidence={"file": config.file, "model_type": model_type, "auto_map": auto_map},
                           remediation=(Remediation(with_switch(c.argv, "--trust-remote-code"),
                                                    "run the model's own code (read it first: it runs in the server)"),)))
    return out


# -------------------------------------------------------------------------------------- multimodal


def _multimodal(c: ServeCommand) -> list[Finding]:
    directory = c.target.dir if c.target is not None else None
    config = directory.config if directory is not None else None
    processor = list(directory.processor_files) if directory is not None else []
    vision = config is not None and config.vision_config
    flag = bool(c.fields.language_model_only)
    facts = pairing_facts(c.vllm).language_model_only or LanguageModelOnly()
    known = facts.known
    skips = facts.skips_tower is not False
    if not (vision or processor):
        if flag:
            return [LANGUAGE_MODEL_ONLY.finding(Status.PASS,
                            "--language-model-only on a text-only target: it changes nothing")]
        return []
    why = ", ".join(([f"{config.file if config else None} has vision_config"] if vision else []) + processor)
    tower = sum(n for p, n in ((c.target.prefix_bytes if c.target else None) or {}).items()
                if any(w in p for w in MULTIMODAL_PREFIX_WORDS))
    size = f" ({size_gib(tower)} of weights)" if tower else ""
    if flag and known is False:
        return [LANGUAGE_MODEL_ONLY.finding(Status.FAIL,
                        f"--language-model-only is not a flag {c.label} knows: its parser stops at start",
                        detail=LANGUAGE_MODEL_ONLY_RULE.source,
                        remediation=(Remediation(join(without_flag(c.argv, "--language-model-only", False)),
                                                 "drop the flag this vLLM does not have"),))]
    if flag:
        return [LANGUAGE_MODEL_ONLY.finding(Status.PASS,
                        f"multimodal target ({why}) served with --language-model-only: {c.label} "
                        + (f"builds no vision tower{size} and accepts text only" if skips else
                           "accepts text only (every modality limit 0); its source shows no skipping of the tower"),
                        detail=LANGUAGE_MODEL_ONLY_RULE.value)]
    return [MULTIMODAL_TARGET.finding(Status.WARN,
                    f"the target is multimodal ({why}) and served without --language-model-only: {c.label} builds and "
                    f"loads its vision tower{size} and reserves encoder memory that DFlash's text drafting never uses"
                    + ("" if skips else "; with the flag it refuses image inputs (its source shows no skipping of "
                       "the tower)"),
                    detail=f"{LANGUAGE_MODEL_ONLY_RULE.value}. {LANGUAGE_MODEL_ONLY_RULE.source}.",
                    evidence={"why": why, "tower_bytes": tower},
                    remediation=(Remediation(with_switch(c.argv, "--language-model-only"),
                                             "for text-only serving: the memory goes to the KV cache"),)
                    if known is not False else ())]


# -------------------------------------------------------------------------------------- known bad


def _in_range(version: str | None, entry: KnownBad) -> bool:
    got = version_tuple(str(version or ""))
    if not got:
        return False
    return version_tuple(entry.first) <= got and (entry.last is None or got <= version_tuple(entry.last))


def _is_dflash2(c: ServeCommand) -> bool:
    method = str(c.spec.method or "").lower()
    return any("DFlash2" in a for a in architectures(c.drafter)) or "dflash2" in method


def _known_bad(c: ServeCommand) -> list[Finding]:
    if c.vllm is None or not c.vllm.installed or not c.spec.given:
        return []
    version = c.vllm.version
    archs = architectures(c.target)
    out: list[Finding] = []
    for entry in KNOWN_BAD.value:
        if not _in_range(version, entry):
            continue
        on = _on_arch(c, entry)
        if on is None:
            continue
        hit, fix, cause = _applies(c, entry, archs)
        if not hit:
            continue
        span = f"{entry.first}..{entry.last}" if entry.last else f"{entry.first} and later (no fix released as read)"
        out.append(KNOWN_BAD_COMBINATION.finding(Status.WARN,
                           f"{c.label}{on} (affected: {span}): {entry.title}",
                           detail=f"Reported in {entry.source}.",
                           evidence={"id": entry.id, "versions": [entry.first, entry.last], "vllm": version,
                                     **({"arch": list(entry.arch), "gpus": c.gpus.source,
                                         "compute_capabilities": c.ccs} if entry.arch else {})},
                           remediation=(fix,) if fix else (), cause=cause))
    return out


def _on_arch(c: ServeCommand, entry: KnownBad) -> str | None:
    """"" for an entry of any GPU; " on sm_80" where the GPU facts (NVML, --target-arch, --gpus) name one of the
    entry's compute capabilities; None where they name none of them, or there are no GPU facts to tell."""
    if not entry.arch:
        return ""
    hits = sorted(set(entry.arch) & set(c.ccs))
    return " on " + ", ".join("sm_" + cc.replace(".", "") for cc in hits) if hits else None


def _applies(c: ServeCommand, entry: KnownBad, archs: list[str]) -> tuple[bool, Remediation | None, str]:
    if entry.condition == "cuda-graphs":
        if c.fields.enforce_eager:
            return False, None, ""
        return True, Remediation(with_switch(c.argv, "--enforce-eager"), "no CUDA graphs: slower, but it does "
                                 "not crash under load"), ""
    if entry.condition == "prefix-caching-dflash2":
        # vLLM's own parser gives the field; the documented subset leaves the flag unknown, so read argv too.
        if not _is_dflash2(c) or c.fields.enable_prefix_caching is False or any(
                w.replace("_", "-") == "--no-enable-prefix-caching" for w in c.argv):
            return False, None, ""
        return True, None, ""
    if entry.condition == "dflash2-on-v1":
        runner, _ = model_runner(c.vllm, archs, c.serve.environ, text_config(c.drafter).layer_types, c.target,
                                 c.serve.resolved)
        if not _is_dflash2(c) or runner != "v1":
            return False, None, ""
        return True, Remediation("VLLM_USE_V2_MODEL_RUNNER=1 " + join(c.argv),
                                 "the V2 runner runs DFlash2's candidate selector"), ""
    if entry.condition == "dflash2":
        return _is_dflash2(c), None, ""
    if entry.condition == "no-drafter-window":
        drafter = c.prior.get("drafter")
        ignored = drafter is not None and any(f.id == "drafter.sliding-ignored" for f in drafter.findings)
        return ignored, None, "drafter.sliding-ignored" if ignored else ""
    return False, None, ""
