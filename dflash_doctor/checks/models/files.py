"""Layer: the model files. Both directories are there and readable, config.json parses, every safetensors
header is sound, the index and the shards agree, the target has its tokenizer."""

from __future__ import annotations

from collections.abc import Iterator

from dflash_doctor.check import Facts
from dflash_doctor.checks.models.codes import (
    FILES_CONFIG_BROKEN,
    FILES_CONFIG_INCOMPLETE,
    FILES_DIR_MISSING,
    FILES_DIR_UNREADABLE,
    FILES_INDEX_MISMATCH,
    FILES_NO_WEIGHTS,
    FILES_NOT_DOWNLOADED,
    FILES_NOT_GIVEN,
    FILES_OK,
    FILES_TOKENIZER_MISSING,
    FILES_WEIGHTS_BROKEN,
)
from dflash_doctor.checks.models.model_views import not_given
from dflash_doctor.checks.remedy import quote
from dflash_doctor.codes import Code
from dflash_doctor.facts.models.models_shapes import Model, ModelDir, Models
from dflash_doctor.model import Finding, Remediation, Status
from dflash_doctor.units import gib

__all__ = ["judge_model_files"]




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
            yield FILES_NOT_DOWNLOADED.finding(Status.WARN,
                          f"{role} {name!r} is not a local directory and not in the Hugging Face cache "
                          f"({cache.cache}): vLLM would download it at start, the doctor cannot check it",
                          evidence={"given": name, "hf_cache": cache.to_json()},
                          remediation=(Remediation(f"huggingface-cli download {quote(str(name))}",
                                                   "download it first, so the doctor (and an offline vLLM) can read it"),))
        else:
            given = resolved.given or name
            relative = not given.startswith("/")  # an absolute path is looked up as it is, from anywhere
            yield FILES_DIR_MISSING.finding(Status.FAIL,
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
        yield FILES_DIR_MISSING.finding(Status.FAIL, f"{role} path {path} {what}",
                      evidence={"path": path, "blocks_judgement": True})
        return
    if not resolved.readable:
        yield FILES_DIR_UNREADABLE.finding(Status.FAIL,
                      f"{role} directory {path} is not readable by this user",
                      evidence={"path": path, "blocks_judgement": True},
                      remediation=(Remediation(f"chmod -R a+rX -- {quote(path)}", "let the serving user read the files"),))
        return
    directory = model.dir if model.dir is not None else ModelDir()
    for problem in directory.problems:
        kind = problem.kind
        yield _problem_code(kind).finding(
            Status.FAIL, f"{role}: {problem.message}",
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
            yield FILES_CONFIG_INCOMPLETE.finding(Status.FAIL,
                          f"{role} {config.file}{where} lacks {', '.join(missing)}",
                          detail="vLLM builds the model from these keys; a hand-written config.json must carry them.",
                          evidence={"file": config.file, "missing": missing, "blocks_judgement": True})
    if role == "target" and config is not None and not directory.tokenizer_files:
        yield FILES_TOKENIZER_MISSING.finding(Status.FAIL,
                      f"target {path} has no tokenizer files (tokenizer.json, tokenizer_config.json, ...): vLLM "
                      "loads the tokenizer from the model directory",
                      evidence={"path": path},
                      remediation=(Remediation("vllm serve ... --tokenizer TOKENIZER_DIR",
                                               "point vLLM at the tokenizer, or copy the tokenizer files in"),))


def _problem_code(kind: str) -> Code:
    if kind in ("missing-dir", "not-a-dir"):
        return FILES_DIR_MISSING
    if kind in ("unreadable", "not-a-file"):
        return FILES_DIR_UNREADABLE
    if kind in ("missing-config", "bad-json", "too-large"):
        return FILES_CONFIG_BROKEN
    if kind in ("missing-shard", "bad-index", "index-tensor-missing", "unindexed-tensor", "duplicate-tensor"):
        return FILES_INDEX_MISMATCH
    if kind == "no-weights":
        return FILES_NO_WEIGHTS
    return FILES_WEIGHTS_BROKEN


def _summary(model: Model) -> Finding:
    weights = model.weights
    return FILES_OK.finding(Status.PASS,
        f"{model.role} {model.resolved.path}: {weights.tensor_count} tensors, {len(weights.files)} safetensors "
        f"file(s), {gib(weights.total_bytes, digits=2)}, headers read in {model.seconds * 1000:.0f} ms",
        evidence={"layout": weights.layout, "dtypes": {d: t.to_json() for d, t in weights.dtypes.items()},
                  "source": model.resolved.source},
    )


def judge_model_files(facts: Facts, title: str) -> list[Finding]:
    """The model-files check: each given model's directory, config.json, weights and tokenizer."""
    models = facts.section(Models)
    if not models.given:
        return not_given(FILES_NOT_GIVEN, title, "model or drafter directory")
    findings: list[Finding] = []
    for model in (models.target, models.drafter):
        if model is None:
            continue
        own = list(_directory_findings(model))
        findings.extend(own if own else [_summary(model)])
    return findings
