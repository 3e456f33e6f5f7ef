"""Layer: the model files. Both directories are there and readable, config.json parses, every safetensors
header is sound, the index and the shards agree, the target has its tokenizer."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, ClassVar

from dflash_doctor.check import Facts
from dflash_doctor.facts.models_shapes import Models
from dflash_doctor.model import Finding, Remediation, Status
from dflash_doctor.units import gib

from .model_common import _is_int, _not_given

__all__ = ["ModelFilesCheck"]


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
            yield Finding("model-files.not-downloaded", Status.WARN,
                          f"{role} {name!r} is not a local directory and not in the Hugging Face cache "
                          f"({cache.get('cache')}): vLLM would download it at start, the doctor cannot check it",
                          evidence={"given": name, "hf_cache": cache},
                          remediation=(Remediation(f"huggingface-cli download {name}",
                                                   "download it first, so the doctor (and an offline vLLM) can read it"),))
        else:
            yield Finding("model-files.dir-missing", Status.FAIL,
                          f"{role} directory {name!r} does not exist (looked in {resolved.get('given')!r} "
                          "relative to the working directory)",
                          evidence={"given": name, "blocks_judgement": True},
                          remediation=(Remediation(f"ls -ld {name}", "check the path; vLLM resolves it from its own "
                                                   "working directory"),))
        return
    path = resolved["path"]
    if not resolved.get("exists") or not resolved.get("is_dir"):
        what = "is not a directory" if resolved.get("exists") else "does not exist"
        yield Finding("model-files.dir-missing", Status.FAIL, f"{role} path {path} {what}",
                      evidence={"path": path, "blocks_judgement": True})
        return
    if not resolved.get("readable"):
        yield Finding("model-files.dir-unreadable", Status.FAIL,
                      f"{role} directory {path} is not readable by this user",
                      evidence={"path": path, "blocks_judgement": True},
                      remediation=(Remediation(f"chmod -R a+rX {path}", "let the serving user read the files"),))
        return
    directory = model.get("dir") or {}
    problems = directory.get("problems") or []
    for problem in problems:
        kind = str(problem.get("kind"))
        yield Finding(
            f"model-files.{_problem_code(kind)}", Status.FAIL, f"{role}: {problem.get('message')}",
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
            yield Finding("model-files.config-incomplete", Status.FAIL,
                          f"{role} {config.get('file')}{where} lacks {', '.join(missing)}",
                          detail="vLLM builds the model from these keys; a hand-written config.json must carry them.",
                          evidence={"file": config.get("file"), "missing": missing, "blocks_judgement": True})
    if role == "target" and config is not None and not directory.get("tokenizer_files"):
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


def _summary(model: Mapping[str, Any]) -> Finding:
    weights = ((model.get("dir") or {}).get("weights")) or {}
    files = weights.get("files") or []
    path = (model.get("resolved") or {}).get("path")
    return Finding(
        "model-files.files-ok", Status.PASS,
        f"{model.get('role')} {path}: {weights.get('tensor_count', 0)} tensors, {len(files)} safetensors file(s), "
        f"{gib(weights.get('total_bytes') or 0, digits=2)}, headers read in {model.get('seconds', 0) * 1000:.0f} ms",
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
