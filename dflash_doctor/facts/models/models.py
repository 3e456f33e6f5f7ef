"""Facts about the target model and the DFlash drafter, from their files alone (no torch, no vLLM).

Where the paths come from, in order: `Context.options["model"]` / `options["drafter"]` (a plain run given
model directories), else the parsed serve command (`serve_args`: the model, and the speculative config's
`model`). A name that is not a local path is looked up in the Hugging Face cache the way vLLM would find a
downloaded model; if it is not there, the facts say so and nothing is read.

The drafter keeps its whole tensor table (a few dozen tensors; past MAX_TENSORS_KEPT, the ones its checks read
and counts). The target keeps only a summary: bytes per top-level name prefix (so the language model can be
told from a vision tower; at most MAX_GROUPS prefixes), the landmark tensors, and counts; a 60 GB target costs
one small read per shard.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Mapping
from typing import Any

from dflash_doctor.context import Context
from dflash_doctor.documents.jsondoc import parse_json
from dflash_doctor.facts.modelfiles import read_model_dir
from dflash_doctor.facts.models.models_shapes import Models
from dflash_doctor.facts.safefile import UnsafeFile, read_regular
from dflash_doctor.facts.serve.serve_shapes import ServeArgs
from dflash_doctor.facts.shape import Collected, by_section

__all__ = ["SECTION", "collect", "describe_model", "hub_cache", "prefix_of", "resolve_model_path"]

SECTION = "models"
TOKENIZER_CONFIG_MAX_BYTES = 16 * 1024 * 1024
REF_MAX_BYTES = 4096
"""The most of a Hugging Face cache ref (refs/main: a commit hash) the doctor reads."""
# Other files vLLM reads from a drafter directory (0.34.0 qwen3_dflash.py _read_mask_embedding).
DRAFTER_EXTRA_FILES = ("mask_embedding.pt",)


def resolve_model_path(name: str, cwd: str, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Where a model name leads: a local directory (as vLLM sees it: a path that exists), else a snapshot
    in the Hugging Face cache (HF_HUB_CACHE, HF_HOME/hub, ~/.cache/huggingface/hub; refs/main)."""
    env = os.environ if environ is None else environ
    local = name if os.path.isabs(name) else os.path.join(cwd, name)
    facts: dict[str, Any] = {"given": name, "path": None, "source": None, "exists": False, "is_dir": False,
                             "readable": False, "hf_cache": None}
    if os.path.lexists(local):
        facts.update(path=os.path.normpath(local), source="local")
    else:
        facts["hf_cache"] = _hf_snapshot(name, env)
        snapshot = facts["hf_cache"].get("snapshot") if facts["hf_cache"] else None
        if snapshot:
            facts.update(path=snapshot, source="hf-cache")
    path = facts["path"]
    if path is not None:
        try:
            mode = os.stat(path).st_mode
            facts["exists"] = True
            facts["is_dir"] = stat.S_ISDIR(mode)
            facts["readable"] = os.access(path, os.R_OK | (os.X_OK if facts["is_dir"] else 0))
        except OSError as exc:
            facts["error"] = exc.strerror or str(exc)
    return facts


def hub_cache(env: Mapping[str, str]) -> str:
    """The Hugging Face hub cache `env` names (HF_HUB_CACHE, HF_HOME/hub, ~/.cache/huggingface/hub)."""
    return env.get("HF_HUB_CACHE") or os.path.join(
        env.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface"), "hub")


def _hf_snapshot(name: str, env: Mapping[str, str]) -> dict[str, Any] | None:
    parts = name.split("/")
    if len(parts) != 2 or not all(parts) or name.startswith((".", "~")):
        return None  # not a repo id (org/name; /models/x is a path): a missing local path
    cache = hub_cache(env)
    repo = os.path.join(cache, f"models--{parts[0]}--{parts[1]}")
    found: dict[str, Any] = {"cache": cache, "repo_dir": repo, "snapshot": None, "revision": None}
    ref = os.path.join(repo, "refs", "main")
    try:  # a ref is a commit hash: a FIFO or /dev/zero planted there neither blocks nor floods the doctor
        size = os.stat(ref).st_size
        if size > REF_MAX_BYTES:  # nor does a sparse gigabyte (huggingface_hub, in vLLM, reads the ref whole)
            found["ref_refused"] = {"file": ref, "kind": "too-large",
                                    "message": f"{ref}: {size} bytes; refusing to read more than {REF_MAX_BYTES}"}
            return found
        revision = read_regular(ref, REF_MAX_BYTES).decode("utf-8", "replace").strip()
    except UnsafeFile as exc:
        found["ref_refused"] = {"file": ref, "kind": "not-a-file", "message": str(exc)}
        return found
    except OSError:
        return found
    snapshot = os.path.join(repo, "snapshots", revision)
    found["revision"] = revision
    if os.path.isdir(snapshot):
        found["snapshot"] = snapshot
    return found


def prefix_of(tensor: str) -> str:
    """The part of a tensor name that says which module tree it belongs to: `model.layers`, `model.visual`,
    `lm_head`, `mtp`; layer numbers never appear."""
    parts = tensor.split(".")
    if parts[0] == "model" and len(parts) > 2:
        return ".".join(parts[:2])
    return parts[0]


def _tokenizer_config(root: str) -> dict[str, Any] | None:
    path = os.path.join(root, "tokenizer_config.json")
    try:
        if os.path.getsize(path) > TOKENIZER_CONFIG_MAX_BYTES:
            return {"file": path, "error": "too large to read"}
        # A regular file only (a FIFO would block the doctor), bounded in depth as in size.
        data = parse_json(read_regular(path, TOKENIZER_CONFIG_MAX_BYTES + 1).decode("utf-8"))
    except FileNotFoundError:
        return None
    except UnsafeFile as exc:
        return {"file": path, "error": exc.reason}
    except (OSError, ValueError) as exc:
        return {"file": path, "error": f"{type(exc).__name__}: {exc}"}
    if not isinstance(data, dict):
        return {"file": path, "error": "not a JSON object"}
    length = data.get("model_max_length")
    return {"file": path, "model_max_length": length if isinstance(length, (int, float)) else None}


def describe_model(name: str, cwd: str, role: str, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Facts about one model directory; `role` "drafter" keeps every tensor, "target" a summary."""
    resolved = resolve_model_path(name, cwd, environ)
    facts: dict[str, Any] = {"role": role, "name": name, "resolved": resolved, "dir": None}
    path = resolved["path"]
    if path is None or not resolved["exists"] or not resolved["is_dir"]:
        return facts
    started = time.monotonic()
    target = role == "target"
    model_dir = read_model_dir(path, keep_tensors=not target, group=prefix_of if target else None)
    weights = model_dir["weights"]
    if target:
        facts["prefix_bytes"] = weights.pop("groups", {})
    else:
        facts["extra_files"] = [n for n in DRAFTER_EXTRA_FILES if os.path.exists(os.path.join(path, n))]
    facts["dir"] = model_dir
    facts["tokenizer_config"] = _tokenizer_config(path)
    facts["seconds"] = round(time.monotonic() - started, 4)
    return facts


def _names(ctx: Context, earlier: Mapping[str, object]) -> tuple[str | None, str | None, str | None]:
    options = ctx.options or {}
    target, drafter = options.get("model"), options.get("drafter")
    if target or drafter:
        return (str(target) if target else None), (str(drafter) if drafter else None), "options"
    serve = ServeArgs.read(earlier.get(ServeArgs.SECTION))
    if serve is None or not serve.given:
        return None, None, None
    spec = serve.speculative_config.value
    spec_model = spec.get("model") if isinstance(spec, dict) else None
    # The drafter vLLM's own validation resolved (the command's --speculative-config or --spec-model), where it ran.
    resolved = serve.resolved.draft_model if serve.resolved is not None else None
    drafter = resolved if resolved else spec_model
    return serve.fields.model, drafter if isinstance(drafter, str) else None, "serve"


def speculators_launch(model: Mapping[str, Any], cwd: str) -> dict[str, Any] | None:
    """`vllm serve SPECULATORS_DIR`: what vLLM's maybe_override_with_speculators (transformers_utils/config.py)
    reads from a served model whose config.json has a "speculators_config": the verifier it serves instead
    (speculators_config.verifier.name_or_path), the drafter (the directory itself) and k (the first proposal
    method's speculative_tokens). None for any other model. Whether the installed vLLM accepts the verifier is
    the check's to judge (checks.serve_speculators)."""
    config = ((model.get("dir") or {}).get("config") or {})
    speculators = (config.get("drafter") or {}).get("speculators_config")
    if speculators is None:
        return None
    verifier_block = speculators.get("verifier") if isinstance(speculators, dict) else None
    verifier = verifier_block.get("name_or_path") if isinstance(verifier_block, dict) else None
    methods = speculators.get("proposal_methods") if isinstance(speculators, dict) else None
    first = methods[0] if isinstance(methods, list) and methods and isinstance(methods[0], dict) else {}
    local = os.path.join(cwd, verifier) if isinstance(verifier, str) and verifier else None
    drafter_keys = config.get("drafter") or {}
    return {
        "model": model.get("name"),
        "file": config.get("file"),
        "verifier_key": isinstance(verifier_block, dict) and "name_or_path" in verifier_block,
        "verifier": verifier if isinstance(verifier, str) else None,
        "verifier_type": type(verifier).__name__,
        # vLLM 0.33+: Path(verifier).exists() or .is_symlink(), relative to the directory vllm serve runs in
        "verifier_exists": bool(local and os.path.lexists(local)),
        "speculative_tokens_key": "speculative_tokens" in first,
        "speculative_tokens": first.get("speculative_tokens"),
        "method_key": "speculators_model_type" in drafter_keys,
        "method": drafter_keys.get("speculators_model_type"),
        "layer_config": "transformer_layer_config" in (config.get("keys") or []),
    }


def collect(ctx: Context, earlier: Mapping[str, object]) -> Collected:
    started = time.monotonic()
    target, drafter, source = _names(ctx, earlier)
    facts: dict[str, Any] = {"given": bool(target or drafter), "source": source, "target": None, "drafter": None,
                             "speculators_launch": None}
    if target:
        facts["target"] = describe_model(target, ctx.cwd, "target")
        launch = speculators_launch(facts["target"], ctx.cwd) if source == "serve" else None
        if launch is not None:
            # vLLM serves the verifier the drafter's config names, with the served directory as the drafter (and
            # this directory, not any --speculative-config "model", is the drafter in every release).
            facts["speculators_launch"] = launch
            drafter = target
            verifier = launch["verifier"]
            facts["target"] = describe_model(verifier, ctx.cwd, "target") if verifier else None
    if drafter:
        facts["drafter"] = describe_model(drafter, ctx.cwd, "drafter")
    facts["seconds"] = round(time.monotonic() - started, 4)
    return by_section(Models.collected(facts))
