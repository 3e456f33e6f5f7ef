"""Layer: the model files. Both directories are there and readable, config.json parses, every safetensors
header is sound, the index and the shards agree, the target has its tokenizer."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import ClassVar

from dflash_doctor.check import Facts
from dflash_doctor.checks.models.common import _not_given
from dflash_doctor.checks.remedy import quote
from dflash_doctor.codes import Code
from dflash_doctor.facts.models_shapes import Model, ModelDir, Models
from dflash_doctor.model import Finding, Remediation, Status
from dflash_doctor.units import gib

__all__ = ["ModelFilesCheck"]


CODES: tuple[Code, ...] = (
    # model files
    Code("model-files.not-given", "No model or drafter directory to check",
         "The model checks read the target's and the drafter's config.json and safetensors headers; none was "
         "given. `dflash-doctor serve -- vllm serve MODEL --speculative-config '{...\"model\": DRAFTER...}'` gives "
         "both."),
    Code("model-files.files-ok", "The model directory reads cleanly",
         "config.json parses, every safetensors header passes the reference reader's rules (length, JSON, "
         "contiguous offsets, sizes matching dtype x shape, file length), and the index agrees with the shards."),
    Code("model-files.dir-missing", "The model directory does not exist",
         "vLLM treats a name that exists on disk as a local directory, otherwise as a Hugging Face repo id. A "
         "mistyped local path therefore becomes a download attempt (or an error offline). Relative paths are "
         "resolved from the directory vllm serve runs in."),
    Code("model-files.dir-unreadable", "The model directory or a file in it cannot be read",
         "The serving user cannot read the directory or a file (permissions, a dangling link, a FIFO). vLLM fails "
         "while loading. Fix the permissions (chmod -R a+rX DIR)."),
    Code("model-files.not-downloaded", "The model is a repo id that is not in the Hugging Face cache",
         "vLLM would download it at start; the doctor checks only files on disk. Download it first "
         "(huggingface-cli download REPO) so it can be checked and so an offline start works."),
    Code("model-files.config-broken", "config.json is missing or not valid JSON",
         "vLLM builds the model from config.json; without it nothing loads. Download the publisher's config.json "
         "again."),
    Code("model-files.config-incomplete", "config.json lacks keys vLLM builds the model from",
         "num_hidden_layers, hidden_size, num_attention_heads and vocab_size (in the nested text_config of a "
         "multimodal model) are required. A hand-written config.json that lacks them fails at model construction."),
    Code("model-files.weights-broken", "A safetensors file is corrupt",
         "The file's header or length breaks the safetensors format (huggingface/safetensors tensor.rs "
         "read_metadata and Metadata::validate): truncated download, a header length past the end, a header claim "
         "over 100 MB, overlapping or gapped offsets, or a byte span that does not match dtype x shape. vLLM fails "
         "while loading, after minutes. Download the file again."),
    Code("model-files.index-mismatch", "model.safetensors.index.json and the shards disagree",
         "A shard the index names is missing, or a tensor sits in another shard than the index says, or appears "
         "twice. Download the missing shard, or the whole snapshot again."),
    Code("model-files.no-weights", "The directory has no weight files",
         "No *.safetensors (or other weight files) in the model directory: vLLM has nothing to load."),
    Code("model-files.tokenizer-missing", "The target has no tokenizer files",
         "vLLM loads the tokenizer from the model directory unless --tokenizer is given. Copy tokenizer.json and "
         "tokenizer_config.json in, or pass --tokenizer."),
)


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
    "too-many-shards": "more safetensors files than any published checkpoint has: only the first ones were read; "
    "remove the files that are not this model's",
    "bad-index": "model.safetensors.index.json cannot be used (malformed, or far larger than any real index): "
    "download it again",
}
_BLOCKING = {"missing-dir", "not-a-dir", "unreadable", "missing-config", "bad-json", "too-large", "not-a-file",
             "no-weights"}


def _directory_findings(model: Model) -> Iterator[Finding]:
    role, name = model.role, model.name
    resolved = model.resolved
    if resolved.path is None:
        cache = resolved.hf_cache
        if cache is not None:
            yield Finding("model-files.not-downloaded", Status.WARN,
                          f"{role} {name!r} is not a local directory and not in the Hugging Face cache "
                          f"({cache.cache}): vLLM would download it at start, the doctor cannot check it",
                          evidence={"given": name, "hf_cache": cache.to_json()},
                          remediation=(Remediation(f"huggingface-cli download {quote(str(name))}",
                                                   "download it first, so the doctor (and an offline vLLM) can read it"),))
        else:
            given = resolved.given or name
            relative = not given.startswith("/")  # an absolute path is looked up as it is, from anywhere
            yield Finding("model-files.dir-missing", Status.FAIL,
                          f"{role} directory {name!r} does not exist"
                          + (f" (looked in {given!r} relative to the working directory)" if relative else ""),
                          evidence={"given": name, "blocks_judgement": True},
                          remediation=(Remediation(f"ls -ld -- {quote(given)}", "check the path"
                                                   + ("; vLLM resolves it from its own working directory"
                                                      if relative else "")),))
        return
    path = resolved.path
    if not resolved.exists or not resolved.is_dir:
        what = "is not a directory" if resolved.exists else "does not exist"
        yield Finding("model-files.dir-missing", Status.FAIL, f"{role} path {path} {what}",
                      evidence={"path": path, "blocks_judgement": True})
        return
    if not resolved.readable:
        yield Finding("model-files.dir-unreadable", Status.FAIL,
                      f"{role} directory {path} is not readable by this user",
                      evidence={"path": path, "blocks_judgement": True},
                      remediation=(Remediation(f"chmod -R a+rX -- {quote(path)}", "let the serving user read the files"),))
        return
    directory = model.dir if model.dir is not None else ModelDir()
    for problem in directory.problems:
        kind = problem.kind
        yield Finding(
            f"model-files.{_problem_code(kind)}", Status.FAIL, f"{role}: {problem.message}",
            detail=_PROBLEM_FIX.get(kind, "the model files are inconsistent; download them again"),
            evidence={"file": problem.file, "kind": kind, "tensor": problem.tensor,
                      "blocks_judgement": kind in _BLOCKING},
        )
    config = directory.config
    if config is not None:
        required = ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size")
        missing = [k for k in required if config.text.int(k) is None]
        if missing:
            where = f" (text config under {config.text_from})" if config.text_from else ""
            yield Finding("model-files.config-incomplete", Status.FAIL,
                          f"{role} {config.file}{where} lacks {', '.join(missing)}",
                          detail="vLLM builds the model from these keys; a hand-written config.json must carry them.",
                          evidence={"file": config.file, "missing": missing, "blocks_judgement": True})
    if role == "target" and config is not None and not directory.tokenizer_files:
        yield Finding("model-files.tokenizer-missing", Status.FAIL,
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


def _summary(model: Model) -> Finding:
    weights = model.weights
    return Finding(
        "model-files.files-ok", Status.PASS,
        f"{model.role} {model.resolved.path}: {weights.tensor_count} tensors, {len(weights.files)} safetensors "
        f"file(s), {gib(weights.total_bytes, digits=2)}, headers read in {model.seconds * 1000:.0f} ms",
        evidence={"layout": weights.layout, "dtypes": {d: t.to_json() for d, t in weights.dtypes.items()},
                  "source": model.resolved.source},
    )


class ModelFilesCheck:
    id: ClassVar[str] = "model-files"
    layer: ClassVar[str] = "models"
    title: ClassVar[str] = "Model files"
    codes: ClassVar[tuple[Code, ...]] = tuple(c for c in CODES if c.id.startswith("model-files."))
    needs: ClassVar[frozenset[str]] = frozenset({"models"})
    after: ClassVar[frozenset[str]] = frozenset()
    requires_gpu: ClassVar[bool] = False

    def judge(self, facts: Facts) -> Iterable[Finding]:
        models = facts.section(Models)
        if not models.given:
            return _not_given(self.id, self.title, "model or drafter directory")
        findings: list[Finding] = []
        for model in (models.target, models.drafter):
            if model is None:
                continue
            own = list(_directory_findings(model))
            findings.extend(own if own else [_summary(model)])
        return findings
