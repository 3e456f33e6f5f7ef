"""Layer: the model files. The target and the DFlash drafter, judged from their files alone.

- `model-files`: both directories are there and readable, config.json parses, every safetensors header is
  sound, the index and the shards agree, the target has its tokenizer.
- `drafter`: the drafter fits this target and this vLLM: architecture in the installed registry,
  `dflash_config.mask_token_id` inside the target's vocabulary, `target_layer_ids` present, in range,
  increasing and not the uniform-spacing guess, the fc width the target provides, every tensor's shape
  against the drafter's own config, vocabulary and dtype against the target's; the version-dependent rules
  (sliding window, sample_from_anchor, how vLLM reads the ids) as the installed vLLM's source says.
- `drafter-attention`: which attention backend the installed vLLM picks for the drafter's non-causal
  attention on this GPU, from its own selection code (collectors.serve).

Paths come from Context.options["model"] / ["drafter"] or the serve command; with neither, each check says
it was skipped.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, TypeGuard

from dflash_doctor.archs import compute_capability
from dflash_doctor.check import Facts
from dflash_doctor.envfacts import version_tuple
from dflash_doctor.knowledge.dflash import (
    ATTENTION_FALLBACK,
    DRAFTER_REGISTRY_ARCH,
    FC_INPUT_RULE,
    LAYER_IDS_PLUS_ONE_MARKER,
    MASK_HIDDEN_FORBIDDEN,
    MASK_TOKEN_RULE,
    NON_CAUSAL_SCOPE,
    SAMPLE_FROM_ANCHOR_MARKER,
    SLIDING_WINDOW_MARKER,
    SPEC_BLOCK,
    TARGET_HIDDEN_SIZE_NULL,
    TARGET_LAYER_IDS_REQUIRED,
    UNIFORM_LAYER_HEURISTIC,
    WEIGHT_LOADER_STRICT,
    uniform_layer_ids,
)
from dflash_doctor.model import CheckResult, Finding, Remediation, Status
from dflash_doctor.remedy import Installer

__all__ = [
    "DrafterAttentionCheck",
    "DrafterCheck",
    "ModelFilesCheck",
    "expected_drafter_tensors",
    "gpu_view",
    "installer_for",
    "optional_section",
    "text_config",
    "version_tuple",
]

GIB = float(1 << 30)
SLIDING = "sliding_attention"
FLOAT_DTYPES = {"F16": "float16", "BF16": "bfloat16", "F32": "float32"}
MAX_LISTED = 12


# ------------------------------------------------------------------------------------------- helpers


def optional_section(facts: Facts, name: str) -> Any:
    """A section the check can judge without: None when absent or when its collector failed."""
    value = facts.raw(name)
    if not isinstance(value, Mapping) or "_error" in value:
        return None
    return value


def installer_for(facts: Facts) -> Installer:
    """Install commands that name the target interpreter (remedy.Installer)."""
    target = optional_section(facts, "target")
    return Installer.for_target(target) if target else Installer("python3")


def text_config(model: Mapping[str, Any] | None) -> dict[str, Any]:
    config = ((model or {}).get("dir") or {}).get("config") or {}
    return dict(config.get("text") or {})


def _config_file(model: Mapping[str, Any]) -> str:
    config = ((model.get("dir") or {}).get("config") or {})
    return str(config.get("file") or f"{(model.get('resolved') or {}).get('path') or model.get('name')}/config.json")


def _drafter_keys(model: Mapping[str, Any]) -> dict[str, Any]:
    return dict((((model.get("dir") or {}).get("config") or {}).get("drafter")) or {})


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _vllm_label(vllm: Mapping[str, Any] | None) -> str:
    if not vllm or not vllm.get("installed"):
        return "vLLM (not installed in the target)"
    return f"vLLM {vllm.get('version') or '?'}"


def _marker(vllm: Mapping[str, Any] | None, name: str) -> bool | None:
    """Whether the installed vLLM's source has this marker; None when there is no source to read."""
    if not vllm or not vllm.get("root"):
        return None
    marker = (vllm.get("markers") or {}).get(name) or {}
    if not marker.get("readable", True):
        return None
    return bool(marker.get("found"))


def _head_dim(text: Mapping[str, Any]) -> int | None:
    head_dim, hidden, heads = text.get("head_dim"), text.get("hidden_size"), text.get("num_attention_heads")
    if _is_int(head_dim):
        return int(head_dim)
    if _is_int(hidden) and _is_int(heads) and heads > 0:
        return int(hidden) // int(heads)
    return None


def _spec_value(serve: Mapping[str, Any] | None) -> dict[str, Any]:
    value = ((serve or {}).get("speculative_config") or {}).get("value")
    return value if isinstance(value, dict) else {}


def _not_given(check_title: str, what: str) -> list[Finding]:
    return [Finding(
        "models.not-given", Status.SKIP, f"{check_title}: skipped, no {what} given",
        detail="Give the directories with `dflash-doctor serve -- vllm serve MODEL --speculative-config "
        "'{\"method\": \"dflash\", \"model\": DRAFTER, ...}'` (or the model/drafter options), and the model checks "
        "read their config.json and safetensors headers.",
    )]


def _skip_if_broken(facts: Facts, title: str) -> list[Finding] | None:
    models = facts["models"]
    for role in ("drafter", "target"):
        model = models.get(role) or {}
        if not (model.get("dir") or {}).get("config"):
            return [Finding("models.not-judged", Status.SKIP,
                            f"{title}: not judged, the {role} {model.get('name')!r} could not be read (see Model files)",
                            detail="The drafter is compared with its target from both config.json files and the "
                            "drafter's safetensors headers; without them nothing can be compared.")]
    prior: CheckResult | None = facts.prior.get("model-files")
    if prior is None:
        return None
    broken = [f for f in prior.findings if f.status is Status.FAIL and f.evidence.get("blocks_judgement")]
    if not broken:
        return None
    return [Finding("models.not-judged", Status.SKIP,
                    f"{title}: not judged, the model files are broken ({broken[0].title})",
                    detail="Fix the model-files findings first; the drafter cannot be compared with its target "
                    "without a readable config.json and weights.",
                    evidence={"blocking": [f.id for f in broken]})]


# --------------------------------------------------------------------------------------- model-files

_PROBLEM_FIX = {
    "missing-config": "copy the model's config.json into the directory (from the publisher's repository)",
    "bad-json": "the file is not valid JSON: download it again",
    "truncated": "the file is shorter than its header says: the download or copy was interrupted; download it "
    "again (`huggingface-cli download REPO --local-dir DIR` resumes)",
    "header-past-eof": "the header length points past the end of the file: download the file again",
    "header-too-large": "the header claims more than the 100 MB the safetensors reader accepts: the file is "
    "corrupt or not safetensors; download it again",
    "header-too-small": "the file is too short to be safetensors: download it again",
    "missing-shard": "a shard the index lists is not in the directory: download the missing shard",
    "overlap": "two tensors share bytes: the file is corrupt (or hand-made); download it again",
    "gap": "the header leaves bytes unindexed between tensors, which safetensors refuses; download it again",
    "size-mismatch": "a tensor's byte span does not match its dtype and shape; download the file again",
    "no-weights": "no weights in the directory: download the model's *.safetensors files",
    "missing-dir": "the directory does not exist: check the path (relative paths are relative to where vllm "
    "serve runs)",
}
_BLOCKING = {"missing-dir", "not-a-dir", "unreadable", "missing-config", "bad-json", "too-large", "not-a-file",
             "no-weights"}


def _directory_findings(model: Mapping[str, Any]) -> Iterator[Finding]:
    role, name = model.get("role"), model.get("name")
    resolved = model.get("resolved") or {}
    if resolved.get("path") is None:
        cache = resolved.get("hf_cache")
        if cache:
            yield Finding("models.not-downloaded", Status.WARN,
                          f"{role} {name!r} is not a local directory and not in the Hugging Face cache "
                          f"({cache.get('cache')}): vLLM would download it at start, the doctor cannot check it",
                          evidence={"given": name, "hf_cache": cache},
                          remediation=(Remediation(f"huggingface-cli download {name}",
                                                   "download it first, so the doctor (and an offline vLLM) can read it"),))
        else:
            yield Finding("models.dir-missing", Status.FAIL,
                          f"{role} directory {name!r} does not exist (looked in {resolved.get('given')!r} "
                          "relative to the working directory)",
                          evidence={"given": name, "blocks_judgement": True},
                          remediation=(Remediation(f"ls -ld {name}", "check the path; vLLM resolves it from its own "
                                                   "working directory"),))
        return
    path = resolved["path"]
    if not resolved.get("exists") or not resolved.get("is_dir"):
        what = "is not a directory" if resolved.get("exists") else "does not exist"
        yield Finding("models.dir-missing", Status.FAIL, f"{role} path {path} {what}",
                      evidence={"path": path, "blocks_judgement": True})
        return
    if not resolved.get("readable"):
        yield Finding("models.dir-unreadable", Status.FAIL,
                      f"{role} directory {path} is not readable by this user",
                      evidence={"path": path, "blocks_judgement": True},
                      remediation=(Remediation(f"chmod -R a+rX {path}", "let the serving user read the files"),))
        return
    directory = model.get("dir") or {}
    problems = directory.get("problems") or []
    for problem in problems:
        kind = str(problem.get("kind"))
        yield Finding(
            f"models.{_problem_code(kind)}", Status.FAIL, f"{role}: {problem.get('message')}",
            detail=_PROBLEM_FIX.get(kind, "the model files are inconsistent; download them again"),
            evidence={"file": problem.get("file"), "kind": kind, "tensor": problem.get("tensor"),
                      "blocks_judgement": kind in _BLOCKING},
        )
    config = directory.get("config")
    if config is not None:
        text = config.get("text") or {}
        required = ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size")
        missing = [k for k in required if not _is_int(text.get(k))]
        if missing:
            where = f" (text config under {config.get('text_from')})" if config.get("text_from") else ""
            yield Finding("models.config-incomplete", Status.FAIL,
                          f"{role} {config.get('file')}{where} lacks {', '.join(missing)}",
                          detail="vLLM builds the model from these keys; a hand-written config.json must carry them.",
                          evidence={"file": config.get("file"), "missing": missing, "blocks_judgement": True})
    if role == "target" and config is not None and not directory.get("tokenizer_files"):
        yield Finding("models.tokenizer-missing", Status.FAIL,
                      f"target {path} has no tokenizer files (tokenizer.json, tokenizer_config.json, ...): vLLM "
                      "loads the tokenizer from the model directory",
                      evidence={"path": path},
                      remediation=(Remediation("vllm serve ... --tokenizer TOKENIZER_DIR",
                                               "point vLLM at the tokenizer, or copy the tokenizer files in"),))


def _problem_code(kind: str) -> str:
    if kind in ("missing-dir", "not-a-dir"):
        return "dir-missing"
    if kind in ("unreadable", "not-a-file"):
        return "dir-unreadable"
    if kind in ("missing-config", "bad-json", "too-large"):
        return "config-broken"
    if kind in ("missing-shard", "bad-index", "index-tensor-missing", "unindexed-tensor", "duplicate-tensor"):
        return "index-mismatch"
    if kind == "no-weights":
        return "no-weights"
    return "weights-broken"


def _summary(model: Mapping[str, Any]) -> Finding:
    weights = ((model.get("dir") or {}).get("weights")) or {}
    files = weights.get("files") or []
    path = (model.get("resolved") or {}).get("path")
    return Finding(
        "models.files-ok", Status.PASS,
        f"{model.get('role')} {path}: {weights.get('tensor_count', 0)} tensors, {len(files)} safetensors file(s), "
        f"{(weights.get('total_bytes') or 0) / GIB:.2f} GiB, headers read in {model.get('seconds', 0) * 1000:.0f} ms",
        evidence={"layout": weights.get("layout"), "dtypes": weights.get("dtypes"),
                  "source": (model.get("resolved") or {}).get("source")},
    )


class ModelFilesCheck:
    id: ClassVar[str] = "model-files"
    layer: ClassVar[str] = "models"
    title: ClassVar[str] = "Model files"
    needs: ClassVar[frozenset[str]] = frozenset({"models"})
    after: ClassVar[frozenset[str]] = frozenset()
    requires_gpu: ClassVar[bool] = False

    def judge(self, facts: Facts) -> Iterable[Finding]:
        models = facts["models"]
        if not models.get("given"):
            return _not_given(self.title, "model or drafter directory")
        findings: list[Finding] = []
        for role in ("target", "drafter"):
            model = models.get(role)
            if model is None:
                continue
            own = list(_directory_findings(model))
            findings.extend(own if own else [_summary(model)])
        return findings


# ------------------------------------------------------------------------------------------- drafter


def expected_drafter_tensors(config: Mapping[str, Any], keys: Mapping[str, Any]) -> dict[str, list[int]] | None:
    """The tensors vLLM's DFlashQwen3ForCausalLM loads, by name, with their shapes (knowledge.dflash)."""
    values = [config.get(k) for k in ("hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size")]
    values.append(config.get("num_key_value_heads", config.get("num_attention_heads")))
    values.append(_head_dim(config))
    if not all(_is_int(v) for v in values):
        return None
    hidden, heads, layers, inter, kv_heads, head_dim = (int(v) for v in values)  # type: ignore[arg-type]
    dflash = _dflash_config(keys)
    shapes: dict[str, list[int]] = {"hidden_norm.weight": [hidden], "norm.weight": [hidden]}
    if dflash.get("use_aux_hidden_state", True):
        ids = dflash.get("target_layer_ids", dflash.get("layer_ids"))
        count = len(ids) if isinstance(ids, list) else layers
        declared = keys.get("target_hidden_size")
        width = declared if _is_int(declared) else hidden
        shapes["fc.weight"] = [hidden, count * width]
    bias = bool(config.get("attention_bias"))
    for i in range(layers):
        p = f"layers.{i}"
        shapes.update({
            f"{p}.input_layernorm.weight": [hidden], f"{p}.post_attention_layernorm.weight": [hidden],
            f"{p}.self_attn.q_proj.weight": [heads * head_dim, hidden],
            f"{p}.self_attn.k_proj.weight": [kv_heads * head_dim, hidden],
            f"{p}.self_attn.v_proj.weight": [kv_heads * head_dim, hidden],
            f"{p}.self_attn.o_proj.weight": [hidden, heads * head_dim],
            f"{p}.self_attn.q_norm.weight": [head_dim], f"{p}.self_attn.k_norm.weight": [head_dim],
            f"{p}.mlp.gate_proj.weight": [inter, hidden], f"{p}.mlp.up_proj.weight": [inter, hidden],
            f"{p}.mlp.down_proj.weight": [hidden, inter],
        })
        if bias:
            shapes.update({f"{p}.self_attn.q_proj.bias": [heads * head_dim],
                           f"{p}.self_attn.k_proj.bias": [kv_heads * head_dim],
                           f"{p}.self_attn.v_proj.bias": [kv_heads * head_dim],
                           f"{p}.self_attn.o_proj.bias": [hidden]})
    return shapes


def _dflash_config(keys: Mapping[str, Any]) -> dict[str, Any]:
    """vLLM merges eagle_config, then dflash_config over it (qwen3_dflash.py DFlashQwen3Model.__init__)."""
    merged: dict[str, Any] = {}
    for key in ("eagle_config", "dflash_config"):
        value = keys.get(key)
        if isinstance(value, dict):
            merged.update(value)
    return merged


class _Drafter:
    """The drafter judged against its target and the installed vLLM; one method per rule."""

    def __init__(self, drafter: Mapping[str, Any], target: Mapping[str, Any] | None,
                 vllm: Mapping[str, Any] | None, serve: Mapping[str, Any] | None, installer: Installer) -> None:
        self.drafter, self.target, self.vllm, self.serve = drafter, target, vllm, serve
        self.installer = installer
        self.file = _config_file(drafter)
        self.path = (drafter.get("resolved") or {}).get("path")
        self.config = text_config(drafter)
        self.keys = _drafter_keys(drafter)
        self.dflash = _dflash_config(self.keys)
        self.target_config = text_config(target)
        self.weights = ((drafter.get("dir") or {}).get("weights")) or {}
        self.tensors: dict[str, Any] = dict(self.weights.get("tensors") or {})
        self.label = _vllm_label(vllm)
        self.ok: list[str] = []

    def findings(self) -> list[Finding]:
        out: list[Finding] = []
        for rule in (self.architecture, self.mask_token, self.layer_ids, self.hidden_sizes, self.fc,
                     self.tensors_match, self.vocabulary, self.dtype, self.block, self.attention_kinds,
                     self.target_kind):
            out.extend(rule())
        if not any(f.status in (Status.FAIL, Status.WARN) for f in out):
            out.insert(0, Finding("drafter.ok", Status.PASS,
                                  f"drafter {self.path} fits target {(self.target or {}).get('name')} for {self.label}: "
                                  + "; ".join(self.ok)))
        elif self.ok:
            out.append(Finding("drafter.checked", Status.PASS, "what holds: " + "; ".join(self.ok)))
        return out

    # -- rules ------------------------------------------------------------------------------------

    def architecture(self) -> list[Finding]:
        archs = self.keys.get("architectures") or ((self.drafter.get("dir") or {}).get("config") or {}).get(
            "architectures")
        if not isinstance(archs, list) or not archs:
            return [Finding("drafter.architecture-unknown", Status.FAIL, f"{self.file} has no \"architectures\" list",
                            detail=f"vLLM looks the drafter up by architecture; DFlash drafters say "
                            f"[\"{DRAFTER_REGISTRY_ARCH.value}\"].",
                            evidence={"file": self.file})]
        renamed = [a if str(a).startswith("DFlash") or str(a).endswith("DFlash") else f"DFlash{a}" for a in archs]
        vllm = self.vllm or {}
        if vllm.get("root") and not vllm.get("has_dflash"):
            return [Finding("drafter.vllm-without-dflash", Status.FAIL,
                            f"{self.label} has no DFlash support (no qwen3_dflash.py): DFlash first shipped in vLLM 0.20.0",
                            evidence={"vllm_root": vllm.get("root")},
                            remediation=(Remediation(self.installer.install("vllm>=0.20.1"), "upgrade vLLM in the serving env"),))]
        known = vllm.get("dflash_archs") if vllm.get("registry_readable") else [DRAFTER_REGISTRY_ARCH.value]
        if not any(a in (known or []) for a in renamed):
            return [Finding("drafter.architecture-unknown", Status.FAIL,
                            f"{self.file}: architectures {archs} (looked up as {renamed}) are not in {self.label}'s "
                            f"registry, which accepts {known}",
                            detail="vLLM renames a drafter's architecture to DFlash{arch} unless it starts or ends "
                            "with DFlash, then looks it up in its model registry; an unknown name fails at start.",
                            evidence={"file": self.file, "architectures": archs, "accepted": known},
                            remediation=(Remediation(f"set \"architectures\": [\"{DRAFTER_REGISTRY_ARCH.value}\"] in "
                                                     f"{self.file}", "the name every released DFlash drafter uses"),))]
        self.ok.append(f"architecture {archs[0]}")
        return []

    def mask_token(self) -> list[Finding]:
        mask = self.dflash.get("mask_token_id")
        vocab = self.target_config.get("vocab_size")
        fix = Remediation(f"add \"dflash_config\": {{\"mask_token_id\": ID, ...}} to {self.file}",
                          "take ID from the drafter publisher's config.json (the target tokenizer's mask token)")
        if "mask_token_id" not in self.dflash:
            top = self.keys.get("mask_token_id")
            accepts_top = _marker(self.vllm, "mask_top_level")
            if top is not None and accepts_top:
                return [Finding("drafter.mask-token-top-level", Status.WARN,
                                f"{self.file} gives mask_token_id at the top level, not in dflash_config: {self.label} "
                                "accepts that, vLLM 0.20-0.24 do not",
                                evidence={"file": self.file, "mask_token_id": top}, remediation=(fix,))]
            found = f" (a top-level mask_token_id {top} is there, which {self.label} does not read)" if top is not None else ""
            return [Finding("drafter.mask-token-missing", Status.FAIL,
                            f"{self.file} has no dflash_config.mask_token_id{found}: vLLM stops at start with "
                            "\"the draft model config must have `pard_token`, `ptd_token_id`, or "
                            "`dflash_config.mask_token_id` specified in its config.json\"",
                            detail=MASK_TOKEN_RULE.source, evidence={"file": self.file}, remediation=(fix,))]
        if not _is_int(mask):
            return [Finding("drafter.mask-token-invalid", Status.FAIL,
                            f"{self.file}: dflash_config.mask_token_id is {mask!r}, not an integer token id",
                            evidence={"file": self.file}, remediation=(fix,))]
        if _is_int(vocab) and not 0 <= mask < vocab:
            return [Finding("drafter.mask-token-out-of-vocab", Status.FAIL,
                            f"{self.file}: dflash_config.mask_token_id {mask} is outside the target's vocabulary "
                            f"(vocab_size {vocab}): the mask embedding lookup indexes past the table",
                            detail=MASK_TOKEN_RULE.note,
                            evidence={"file": self.file, "mask_token_id": mask, "target_vocab_size": vocab},
                            remediation=(fix,))]
        self.ok.append(f"mask_token_id {mask}")
        return []

    def layer_ids(self) -> list[Finding]:
        ids = self.dflash.get("target_layer_ids")
        depth = self.target_config.get("num_hidden_layers")
        publisher = Remediation(f"copy dflash_config.target_layer_ids from the drafter publisher's own config.json "
                                f"into {self.file}", "the ids the drafter was trained on; never recompute them")
        if ids is None:
            elsewhere = [k for k in ("layer_ids",) if k in self.dflash] + \
                [k for k in ("target_layer_ids",) if k in self.keys]
            hint = f" ({' and '.join(elsewhere)} found elsewhere: vLLM's target side does not read them)" if elsewhere else ""
            return [Finding("drafter.layer-ids-missing", Status.FAIL,
                            f"{self.file} has no dflash_config.target_layer_ids{hint}: vLLM would fall back to "
                            "EAGLE-3's default layers, which no DFlash drafter was trained on",
                            detail=TARGET_LAYER_IDS_REQUIRED.value + ". " + TARGET_LAYER_IDS_REQUIRED.source,
                            evidence={"file": self.file}, remediation=(publisher,))]
        if not isinstance(ids, list) or not ids or not all(_is_int(i) for i in ids):
            return [Finding("drafter.layer-ids-invalid", Status.FAIL,
                            f"{self.file}: dflash_config.target_layer_ids is {ids!r}, not a list of integers",
                            evidence={"file": self.file}, remediation=(publisher,))]
        problems: list[str] = []
        if _is_int(depth):
            outside = [i for i in ids if not 0 <= i < depth]
            if outside:
                problems.append(f"{outside} outside [0, {depth}) for a {depth}-layer target")
        if any(b <= a for a, b in itertools.pairwise(ids)):
            problems.append("not strictly increasing" + (" (repeats)" if len(set(ids)) != len(ids) else ""))
        trained_for = self.keys.get("num_target_layers")
        if problems:
            also = (f"; the drafter says num_target_layers {trained_for}: it was made for another target"
                    if _is_int(trained_for) and _is_int(depth) and trained_for != depth else "")
            return [Finding("drafter.layer-ids-invalid", Status.FAIL,
                            f"{self.file}: target_layer_ids {ids} are {'; '.join(problems)}{also}",
                            detail="vLLM records the target's hidden state after each listed layer; an id the target "
                            "does not have is never recorded, the fc input comes up short, and the first forward "
                            "pass fails (vLLM 0.34: \"target_layer_ids reference layers that do not exist in the "
                            "target model\").",
                            evidence={"file": self.file, "target_layer_ids": ids, "target_layers": depth},
                            remediation=(publisher,))]
        findings: list[Finding] = []
        if _is_int(trained_for) and _is_int(depth) and trained_for != depth:
            findings.append(Finding("drafter.target-depth-mismatch", Status.WARN,
                                    f"{self.file} says num_target_layers {trained_for}, the target has {depth} layers: "
                                    "this drafter was trained for another target",
                                    evidence={"file": self.file, "num_target_layers": trained_for, "target_layers": depth}))
        draft_layers = self.config.get("num_hidden_layers")
        if _is_int(depth):
            guesses = {tuple(uniform_layer_ids(depth, n)) for n in {len(ids), draft_layers} if _is_int(n) and n > 0}
            if tuple(ids) in guesses:
                findings.append(Finding(
                    "drafter.layer-ids-heuristic", Status.WARN,
                    f"{self.file}: target_layer_ids {ids} are exactly the uniform-spacing formula for a {depth}-layer "
                    "target: they look computed, not trained",
                    detail=f"{UNIFORM_LAYER_HEURISTIC.value}. {UNIFORM_LAYER_HEURISTIC.note} Sources: "
                    f"{UNIFORM_LAYER_HEURISTIC.source}.",
                    evidence={"file": self.file, "target_layer_ids": ids}, remediation=(publisher,)))
        if _marker(self.vllm, "layer_ids_plus_one") is False and (self.vllm or {}).get("has_dflash"):
            findings.append(Finding(
                "drafter.layer-ids-vllm-offset", Status.WARN,
                f"{self.label} passes target_layer_ids to the target as they are: every id reads the output of the "
                "layer before the one the drafter was trained on (fixed in vLLM 0.22.0); acceptance suffers",
                detail=LAYER_IDS_PLUS_ONE_MARKER.source,
                remediation=(Remediation(self.installer.install("vllm>=0.22.0"), "a vLLM that adds 1 to DFlash's layer ids"),)))
        self.ok.append(f"target_layer_ids {ids}")
        return findings

    def hidden_sizes(self) -> list[Finding]:
        hidden, target_hidden = self.config.get("hidden_size"), self.target_config.get("hidden_size")
        findings: list[Finding] = []
        if "target_hidden_size" in self.keys and self.keys["target_hidden_size"] is None \
                and _marker(self.vllm, "target_hidden_size_null_ok") is not True:
            findings.append(Finding("drafter.target-hidden-size-null", Status.FAIL,
                                    f"{self.file} has \"target_hidden_size\": null: {self.label} multiplies it "
                                    "(None * n) when building fc and stops with a TypeError",
                                    detail=TARGET_HIDDEN_SIZE_NULL.source, evidence={"file": self.file},
                                    remediation=(Remediation(f"delete the target_hidden_size line from {self.file}",
                                                             "or set it to the target's hidden_size"),)))
        declared = self.keys.get("target_hidden_size")
        if _is_int(declared) and _is_int(target_hidden) and declared != target_hidden:
            findings.append(Finding("drafter.hidden-size-mismatch", Status.FAIL,
                                    f"{self.file}: target_hidden_size {declared}, but the target's hidden_size is "
                                    f"{target_hidden}", evidence={"file": self.file}))
        elif not _is_int(declared) and _is_int(hidden) and _is_int(target_hidden) and hidden != target_hidden:
            findings.append(Finding("drafter.hidden-size-mismatch", Status.FAIL,
                                    f"{self.file}: hidden_size {hidden} differs from the target's {target_hidden} and "
                                    "no target_hidden_size says otherwise: this drafter belongs to another target",
                                    detail="The drafter embeds its queries with the target's embedding table and reads "
                                    "its hidden states; both are the target's width.",
                                    evidence={"file": self.file, "hidden_size": hidden, "target_hidden_size": target_hidden}))
        return findings

    def fc(self) -> list[Finding]:
        if not self.dflash.get("use_aux_hidden_state", True):
            return []
        ids = self.dflash.get("target_layer_ids", self.dflash.get("layer_ids"))
        hidden, target_hidden = self.config.get("hidden_size"), self.target_config.get("hidden_size")
        declared = self.keys.get("target_hidden_size")
        width = declared if _is_int(declared) else hidden
        tensor = self.tensors.get("fc.weight")
        if not isinstance(ids, list) or not _is_int(width) or tensor is None:
            return []  # reported by layer_ids / tensors_match
        shape = list(tensor.get("shape") or [])
        config_in = len(ids) * width
        provided = len(ids) * target_hidden if _is_int(target_hidden) else None
        where = f"{self.path}/{tensor.get('file')}"
        if shape != [hidden, config_in]:
            return [Finding("drafter.fc-width", Status.FAIL,
                            f"{where}: fc.weight is {shape}, but {self.file} makes vLLM build it as [{hidden}, "
                            f"{config_in}] = [hidden_size, {len(ids)} target_layer_ids x {width}]",
                            detail=f"{FC_INPUT_RULE.value}. The weight loader refuses a shape that differs "
                            "(vLLM's default_weight_loader asserts equal shapes). Either target_layer_ids has the "
                            "wrong length (taken from another drafter) or the weights are from another model.",
                            evidence={"file": where, "shape": shape, "expected": [hidden, config_in],
                                      "target_layer_ids": ids},
                            remediation=(Remediation(f"compare {self.file} with the publisher's config.json",
                                                     "the fc width fixes how many layer ids the drafter was trained on"),))]
        if provided is not None and provided != config_in:
            return [Finding("drafter.fc-width", Status.FAIL,
                            f"the target provides {len(ids)} x {target_hidden} = {provided} features, fc.weight "
                            f"takes {config_in}", evidence={"file": where, "provided": provided, "expected": config_in})]
        self.ok.append(f"fc.weight {shape} = {len(ids)} x {width}")
        return []

    def tensors_match(self) -> list[Finding]:
        if not self.tensors and not self.weights.get("tensor_count"):
            return []  # no weights: model-files says so
        findings: list[Finding] = []
        names = {n.replace("midlayer.", "layers.0.", 1) if n.startswith("midlayer.") else n: n for n in self.tensors}
        mask_hidden = [n for n in names.values() if MASK_HIDDEN_FORBIDDEN.value in n]
        if mask_hidden:
            findings.append(Finding("drafter.mask-hidden", Status.FAIL,
                                    f"{self.path} ships {mask_hidden[0]}: vLLM asserts \"DFlash should use mask_token_id "
                                    "to embed the padding hidden state\" while loading",
                                    detail=MASK_HIDDEN_FORBIDDEN.source, evidence={"tensors": mask_hidden},
                                    remediation=(Remediation("use the publisher's DFlash checkpoint", "this one was "
                                                             "exported for another runtime"),)))
        prefixed = [n for n in names if n.startswith("model.")]
        if prefixed:
            findings.append(Finding("drafter.tensor-prefix", Status.FAIL,
                                    f"{self.path}: {len(prefixed)} tensors start with 'model.' (e.g. {prefixed[0]}); "
                                    "vLLM adds that prefix itself and finds no parameter 'model.model....'",
                                    evidence={"tensors": prefixed[:MAX_LISTED]},
                                    remediation=(Remediation("re-save the drafter without the 'model.' prefix",
                                                             "DFlash drafters name tensors layers.N..., fc, norm"),)))
        config = ((self.drafter.get("dir") or {}).get("config") or {})
        if "quantization_config" in (config.get("keys") or []):
            self.ok.append("quantized weights (names and shapes not judged)")
            return findings
        expected = expected_drafter_tensors(self.config, self.keys)
        if expected is None:
            return findings
        optional = {"embed_tokens.weight", "lm_head.weight", "d2t", "t2d"}
        missing = sorted(set(expected) - set(names))
        unexpected = sorted(n for n in names if n not in expected and n not in optional
                            and not n.startswith("model.") and MASK_HIDDEN_FORBIDDEN.value not in n)
        wrong = [(n, names[n]) for n in sorted(set(expected) & set(names))
                 if list(self.tensors[names[n]].get("shape") or []) != expected[n]]
        if missing:
            findings.append(Finding("drafter.tensor-missing", Status.FAIL,
                                    f"{self.path}: {len(missing)} tensors the config implies are missing: "
                                    f"{', '.join(missing[:6])}" + (" ..." if len(missing) > 6 else ""),
                                    detail="vLLM stops with \"Following weights were not initialized from checkpoint\". "
                                    "num_hidden_layers or attention_bias in config.json may not match the weights.",
                                    evidence={"missing": missing[:MAX_LISTED], "file": self.file}))
        if unexpected:
            findings.append(Finding("drafter.tensor-unexpected", Status.FAIL,
                                    f"{self.path}: {len(unexpected)} tensors match no parameter of vLLM's DFlash drafter: "
                                    f"{', '.join(unexpected[:6])}" + (" ..." if len(unexpected) > 6 else ""),
                                    detail=f"vLLM stops with \"There is no module or parameter named ...\". "
                                    f"{WEIGHT_LOADER_STRICT.source}",
                                    evidence={"unexpected": unexpected[:MAX_LISTED]}))
        for name, stored in wrong[:MAX_LISTED]:
            if name == "fc.weight":
                continue  # the fc rule explains it better
            info = self.tensors[stored]
            findings.append(Finding("drafter.tensor-shape", Status.FAIL,
                                    f"{self.path}/{info.get('file')}: {stored} is {info.get('shape')}, {self.file} "
                                    f"implies {expected[name]}",
                                    detail="The weight loader asserts equal shapes; the config.json was likely written "
                                    "for another model (head_dim, heads, intermediate_size).",
                                    evidence={"tensor": stored, "shape": info.get("shape"), "expected": expected[name]}))
        if not (missing or unexpected or wrong):
            self.ok.append(f"{len(expected)} tensors match config.json")
        return findings

    def vocabulary(self) -> list[Finding]:
        vocab, target_vocab = self.config.get("vocab_size"), self.target_config.get("vocab_size")
        draft_vocab = self.keys.get("draft_vocab_size")
        own_head = "d2t" in self.tensors and "lm_head.weight" in self.tensors
        if _is_int(draft_vocab) and _is_int(target_vocab) and draft_vocab != target_vocab and not own_head:
            return [Finding("drafter.vocab-mismatch", Status.FAIL,
                            f"{self.file}: draft_vocab_size {draft_vocab} differs from the target's {target_vocab} "
                            "but the drafter lacks its own lm_head and d2t mapping",
                            evidence={"file": self.file})]
        if _is_int(vocab) and _is_int(target_vocab) and vocab != target_vocab:
            return [Finding("drafter.vocab-mismatch", Status.FAIL,
                            f"{self.file}: vocab_size {vocab} differs from the target's {target_vocab}: the drafter "
                            "shares the target's embedding and lm_head, so it was made for another tokenizer",
                            evidence={"file": self.file, "vocab_size": vocab, "target_vocab_size": target_vocab})]
        embed = self.tensors.get("embed_tokens.weight")
        if embed is not None and _is_int(vocab) and _is_int(self.config.get("hidden_size")) and \
                list(embed.get("shape") or []) != [vocab, self.config["hidden_size"]]:
            return [Finding("drafter.tensor-shape", Status.FAIL,
                            f"{self.path}: embed_tokens.weight is {embed.get('shape')}, config implies "
                            f"[{vocab}, {self.config['hidden_size']}]", evidence={"tensor": "embed_tokens.weight"})]
        if _is_int(vocab):
            self.ok.append(f"vocab {vocab}")
        return []

    def dtype(self) -> list[Finding]:
        stored = {FLOAT_DTYPES[d] for d in (self.weights.get("dtypes") or {}) if d in FLOAT_DTYPES}
        fields = ((self.serve or {}).get("fields") or {})
        wanted = fields.get("dtype") if fields.get("dtype") not in (None, "auto") else None
        target_dtype = self.target_config.get("torch_dtype") or self.target_config.get("dtype")
        serving = {"half": "float16", "float": "float32"}.get(str(wanted), wanted) or target_dtype
        if serving == "float32" and not wanted:
            serving = "bfloat16"  # --dtype auto downcasts float32 checkpoints (knowledge.dflash DTYPE_AUTO_DOWNCAST)
        if serving == "float16" and stored & {"bfloat16", "float32"}:
            return [Finding("drafter.dtype", Status.WARN,
                            f"{self.path} stores {', '.join(sorted(stored))} weights; vLLM serves the drafter in the "
                            "target's float16: values past float16's range overflow",
                            evidence={"stored": sorted(stored), "serving": serving})]
        if stored:
            self.ok.append(f"dtype {'/'.join(sorted(stored))} served as {serving or 'the target dtype'}")
        return []

    def block(self) -> list[Finding]:
        block = self.keys.get("block_size", self.dflash.get("block_size"))
        spec = _spec_value(self.serve)
        k = spec.get("num_speculative_tokens")
        if not _is_int(block):
            return []
        if _is_int(k) and k > block - 1:
            return [Finding("drafter.block-size", Status.WARN,
                            f"num_speculative_tokens {k} is above block_size - 1 = {block - 1} ({self.file}): the "
                            "drafter drafts past the block it was trained on",
                            detail=f"{SPEC_BLOCK.value}. {SPEC_BLOCK.note}",
                            evidence={"block_size": block, "num_speculative_tokens": k},
                            remediation=(Remediation(f"--speculative-config '{{..., \"num_speculative_tokens\": {block - 1}}}'",
                                                     "one anchor plus block_size - 1 masks fill the trained block"),))]
        self.ok.append(f"block_size {block}" + (f" (k={k})" if _is_int(k) else f" (serve with k={block - 1})"))
        return []

    def attention_kinds(self) -> list[Finding]:
        findings: list[Finding] = []
        layer_types = self.config.get("layer_types") or []
        sliding = self.dflash.get("use_swa") or (isinstance(layer_types, list) and SLIDING in layer_types)
        window = self.dflash.get("swa_window_size", self.config.get("sliding_window"))
        if sliding:
            required, reads = _marker(self.vllm, "sliding_window_required"), _marker(self.vllm, "reads_layer_types")
            if window is None and required is not False:
                findings.append(Finding("drafter.sliding-window-missing", Status.FAIL,
                                        f"{self.file}: sliding-attention layers but no window (dflash_config.swa_window_size "
                                        "or sliding_window): vLLM stops with \"DFlash sliding attention requires a "
                                        "window size\"", detail=SLIDING_WINDOW_MARKER.source, evidence={"file": self.file},
                                        remediation=(Remediation(f"set dflash_config.swa_window_size in {self.file}",
                                                                 "from the publisher's config"),)))
            elif reads is False:
                findings.append(Finding("drafter.sliding-ignored", Status.WARN,
                                        f"{self.label} ignores layer_types for DFlash drafters: the drafter's sliding-window "
                                        "layers run full attention, unlike training",
                                        detail=SLIDING_WINDOW_MARKER.source))
        if self.dflash.get("sample_from_anchor"):
            refused = _marker(self.vllm, "sample_from_anchor_refused")
            findings.append(Finding(
                "drafter.sample-from-anchor", Status.WARN if refused is False else Status.FAIL,
                f"{self.file}: dflash_config.sample_from_anchor is true: "
                + ("vLLM refuses it (\"sample_from_anchor=True is not supported for DFlash. DFlash uses a fixed 1+N "
                   "query layout where the anchor is the bonus token.\")" if refused is not False else
                   f"{self.label} ignores the key and drafts with the anchor as the bonus token"),
                detail=SAMPLE_FROM_ANCHOR_MARKER.source, evidence={"file": self.file}))
        return findings

    def target_kind(self) -> list[Finding]:
        supported = (self.vllm or {}).get("aux_supported_model_types")
        model_type = self.target_config.get("model_type") or \
            (((self.target or {}).get("dir") or {}).get("config") or {}).get("model_type")
        if not supported or not isinstance(model_type, str):
            return []
        if any(s in model_type for s in supported):
            return []
        return [Finding("drafter.target-unsupported", Status.FAIL,
                        f"{self.label} runs DFlash only on targets whose model_type contains one of {supported}; this "
                        f"target's is {model_type!r}: \"dflash is only supported for ... models\"",
                        evidence={"model_type": model_type, "supported": supported})]


class DrafterCheck:
    id: ClassVar[str] = "drafter"
    layer: ClassVar[str] = "models"
    title: ClassVar[str] = "DFlash drafter against its target"
    needs: ClassVar[frozenset[str]] = frozenset({"models", "vllm_dflash", "serve_args", "target"})
    after: ClassVar[frozenset[str]] = frozenset({"model-files"})
    requires_gpu: ClassVar[bool] = False

    def judge(self, facts: Facts) -> Iterable[Finding]:
        models = facts["models"]
        drafter, target = models.get("drafter"), models.get("target")
        if drafter is None:
            return _not_given(self.title, "drafter directory")
        if target is None:
            return _not_given(self.title, "target directory to compare the drafter with")
        blocked = _skip_if_broken(facts, self.title)
        if blocked is not None:
            return blocked
        return _Drafter(drafter, target, optional_section(facts, "vllm_dflash"), optional_section(facts, "serve_args"),
                        installer_for(facts)).findings()


# --------------------------------------------------------------------------------- drafter-attention


def gpu_view(facts: Facts) -> dict[str, Any]:
    """The GPUs vLLM will see: {"available", "why", "devices" (visible, in CUDA order), "ccs", "source"}.

    --gpus/--gpu-memory (a CI user's stand-in for the serving GPUs) win; else the NVML facts (section "gpu")
    filtered by CUDA_VISIBLE_DEVICES; else only the compute capabilities of --target-arch, without count or
    memory ("available" False)."""
    serve = optional_section(facts, "serve_args") or {}
    assume = serve.get("assume") or {}
    ccs: list[str] = []
    for arch in assume.get("target_archs") or []:
        try:
            major, minor = compute_capability(arch)
        except ValueError:
            continue
        ccs.append(f"{major}.{minor}")
    raw = facts.raw("gpu")
    nvml_devices: list[Mapping[str, Any]] | None = None
    view: dict[str, Any] = {"available": False, "why": "no GPU facts were collected", "devices": [], "source": None}
    if isinstance(raw, Mapping) and "_error" in raw:
        view["why"] = f"the GPU facts could not be collected: {raw['_error']}"
    elif isinstance(raw, Mapping) and raw.get("skipped"):
        view["why"] = f"GPUs not probed ({raw['skipped']}); pass --gpus N --gpu-memory GIB for the serving GPUs"
    elif isinstance(raw, Mapping) and not (raw.get("nvml") or {}).get("ok"):
        error = (raw.get("nvml") or {}).get("error") or {}
        view["why"] = f"NVML is not usable here ({error.get('name') or error.get('kind')}: {error.get('message')})"
    elif isinstance(raw, Mapping):
        from dflash_doctor.checks.gpu_common import resolve_visible  # type: ignore[import-not-found,unused-ignore]

        devices = raw.get("devices") or []
        visible = resolve_visible((raw.get("environ") or {}).get("CUDA_VISIBLE_DEVICES"), devices)
        by_index = {d.get("index"): d for d in devices}
        nvml_devices = [by_index[i] for i in visible.gpus if i in by_index]
        view = {"available": True, "why": None, "devices": nvml_devices, "source": "nvml",
                "cuda_visible_devices": visible.value}
    count, memory = assume.get("gpus"), assume.get("gpu_memory_gib")
    if count or memory:
        n = int(count) if count else len(nvml_devices or []) or 1
        cc = [int(p) for p in ccs[0].split(".")] if ccs else (
            (nvml_devices or [{}])[0].get("compute_capability") if nvml_devices else None)
        size = int(float(memory) * GIB) if memory else None
        view = {"available": True, "why": None, "source": "assumed",
                "assumed": {"gpus": count, "gpu_memory_gib": memory, "target_archs": assume.get("target_archs")},
                "devices": [{"index": i, "name": "assumed GPU", "compute_capability": cc,
                             "memory": {"total": size, "used": 0, "free": size, "reserved": 0} if size else None,
                             "processes": []} for i in range(n)]}
    view["ccs"] = sorted({f"{d['compute_capability'][0]}.{d['compute_capability'][1]}"
                          for d in view["devices"] if d.get("compute_capability")}) or ccs
    return view


def _needs_non_causal(dflash: Mapping[str, Any], vllm: Mapping[str, Any] | None) -> bool:
    """From 0.23 a drafter with dflash_config.causal true runs causal attention (v1/spec_decode/dflash.py)."""
    return not (_marker(vllm, "dflash_causal_key") and dflash.get("causal") is True)


def choose_backend(attention: Mapping[str, Any], cc: str, non_causal: bool, head_sizes: Sequence[int],
                   explicit: str | None) -> dict[str, Any]:
    """The backend vLLM's selection picks, evaluated from its source facts; reasons for the ones it skips."""
    row = (attention.get("priorities") or {}).get(cc) or {}
    order = row.get("non_causal" if non_causal else "causal")
    result: dict[str, Any] = {"cc": cc, "order": order, "chosen": None, "certain": True, "skipped": {},
                              "explicit": explicit}
    if not order:
        result["certain"] = False
        return result
    candidates = [explicit] if explicit else order
    for name in candidates:
        info = (attention.get("backends") or {}).get(name) or {}
        reasons: list[str] = []
        unknown = False
        cc_ok = (info.get("capability") or {}).get(cc)
        if cc_ok is False:
            reasons.append(f"compute capability {cc} not supported")
        unknown |= cc_ok is None
        if non_causal:
            if info.get("non_causal") is False:
                reasons.append("non-causal attention not supported")
            unknown |= info.get("non_causal") is None
        for size in head_sizes:
            ok = (info.get("head_size") or {}).get(str(size))
            if ok is False:
                reasons.append(f"head size {size} not supported")
            unknown |= ok is None
        if not info:
            reasons.append("not found in this vLLM")
        if reasons:
            result["skipped"][name] = reasons
            continue
        result["chosen"], result["certain"] = name, not unknown
        return result
    return result


class DrafterAttentionCheck:
    id: ClassVar[str] = "drafter-attention"
    layer: ClassVar[str] = "models"
    title: ClassVar[str] = "Attention backend for the drafter"
    needs: ClassVar[frozenset[str]] = frozenset({"models", "vllm_dflash", "serve_args", "gpu"})
    after: ClassVar[frozenset[str]] = frozenset()
    requires_gpu: ClassVar[bool] = False

    def judge(self, facts: Facts) -> Iterable[Finding]:
        models = facts["models"]
        drafter = models.get("drafter")
        if drafter is None or not text_config(drafter):
            return _not_given(self.title, "readable drafter")
        vllm = optional_section(facts, "vllm_dflash")
        if not vllm or not vllm.get("root"):
            return [Finding("attention.no-vllm", Status.SKIP,
                            f"{self.title}: {_vllm_label(vllm)}: no vLLM source to read its backend selection from",
                            detail=f"Without it, the rule of thumb: {ATTENTION_FALLBACK.source}.")]
        gpus = gpu_view(facts)
        ccs = gpus["ccs"]
        if not ccs:
            return [Finding("attention.no-gpu-facts", Status.SKIP,
                            f"{self.title}: no compute capability known ({gpus['why'] or 'the GPUs report none'})",
                            detail="Run on the GPU host, or name the GPU with --target-arch (e.g. sm_86).")]
        keys = _drafter_keys(drafter)
        dflash = _dflash_config(keys)
        all_layers = _marker(vllm, "non_causal_all_layers") is True
        head_sizes = [h for h in {_head_dim(text_config(drafter)),
                                  _head_dim(text_config(models.get("target"))) if all_layers else None} if h]
        spec = _spec_value(optional_section(facts, "serve_args"))
        fields = ((optional_section(facts, "serve_args") or {}).get("fields") or {})
        explicit = fields.get("attention_backend") if all_layers else spec.get("attention_backend")
        attention = vllm.get("attention") or {}
        non_causal = _needs_non_causal(dflash, vllm)
        scope = "every attention layer (target and drafter)" if all_layers else "the drafter's attention"
        findings: list[Finding] = []
        for cc in ccs:
            if cc not in (attention.get("priorities") or {}):
                findings.append(Finding("attention.unknown", Status.WARN,
                                        f"{_vllm_label(vllm)}: the backend choice for compute capability {cc} could not be "
                                        "read from its source", evidence={"cc": cc}))
                continue
            pick = choose_backend(attention, cc, non_causal, head_sizes, str(explicit) if explicit else None)
            evidence = {"cc": cc, "order": pick["order"], "skipped": pick["skipped"], "head_sizes": head_sizes,
                        "non_causal_scope": scope, "source": attention.get("source"), "explicit": explicit}
            sm = "sm_" + cc.replace(".", "")
            if pick["chosen"] is None:
                if explicit:
                    title = (f"{_vllm_label(vllm)} on {sm}: the selected attention backend {explicit} is not valid for "
                             f"{scope}: {'; '.join(pick['skipped'].get(str(explicit), ['unknown']))}")
                    code = "attention.selected-invalid"
                else:
                    title = f"{_vllm_label(vllm)} on {sm}: no attention backend supports {scope} with non-causal attention"
                    code = "attention.none-valid"
                findings.append(Finding(code, Status.FAIL, title, detail=NON_CAUSAL_SCOPE.source, evidence=evidence,
                                        remediation=(Remediation("--speculative-config '{..., \"attention_backend\": "
                                                                 "\"FLASH_ATTN\"}'" if not all_layers else
                                                                 "--attention-backend FLASH_ATTN",
                                                                 "FlashAttention supports non-causal attention from sm_80"),)))
                continue
            skipped = "; ".join(f"{n}: {', '.join(r)}" for n, r in pick["skipped"].items())
            findings.append(Finding(
                "attention.backend", Status.PASS if pick["certain"] else Status.WARN,
                f"{_vllm_label(vllm)} on {sm} picks {pick['chosen']} for {scope}"
                + (" (non-causal supported)" if non_causal else " (causal drafter)")
                + (f"; skipped {skipped}" if skipped else "")
                + ("" if pick["certain"] else "; some of its conditions could not be evaluated from source"),
                detail=f"{NON_CAUSAL_SCOPE.source} Order and support read from {vllm.get('root')}.",
                evidence=evidence))
        return findings
