"""The finding ids of schema v1, and what each is called now.

Release 1 named findings by layer (`surface.*`, `models.*`, `cuda.*`, `import.*` shared by three checks);
now every id is `<check-id>.<name>`, so the id says which check emitted it. Saved v1 documents (reports,
fleet merges of them, engine recordings) keep their ids: `explain`, `judge`, `merge` and `fleet` map them
with this table. An old id the shared helpers emitted for several checks maps to one new id per check;
which one a finding becomes follows from the check it sits under.

This file is the table itself: tools/rename_finding_ids.py never rewrites it (rename-finding-ids: skip).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["V1_ALIASES", "current_id", "current_ids", "upgrade_findings"]

V1_ALIASES: Mapping[str, tuple[str, ...]] = {
"archs.covered": ("arch-coverage.covered",),
    "archs.no-device-code": ("arch-coverage.no-device-code",),
    "archs.no-kernel-image": ("arch-coverage.no-kernel-image",),
    "archs.no-target": ("arch-coverage.no-target",),
    "archs.optional-no-kernel-image": ("arch-coverage.optional-no-kernel-image",),
    "archs.ptx-jit-only": ("arch-coverage.ptx-jit-only",),
    "archs.runtime-ok": ("arch-coverage.runtime-ok",),
    "archs.runtime-too-old": ("arch-coverage.runtime-too-old",),
    "archs.symbols-ok": ("arch-coverage.symbols-ok",),
    "archs.target-arch-invalid": ("arch-coverage.target-arch-invalid",),
    "archs.undefined-symbol": ("arch-coverage.undefined-symbol",),
    "attention.backend": ("drafter-attention.backend",),
    "attention.no-gpu-facts": ("drafter-attention.no-gpu-facts",),
    "attention.no-vllm": ("drafter-attention.no-vllm",),
    "attention.none-valid": ("drafter-attention.none-valid",),
    "attention.selected-invalid": ("drafter-attention.selected-invalid",),
    "attention.unknown": ("drafter-attention.unknown",),
    "cuda.arch-not-covered": ("cuda-stack.arch-not-covered",),
    "cuda.arch-ptx-only": ("cuda-stack.arch-ptx-only",),
    "cuda.device-count-mismatch": ("cuda-stack.device-count-mismatch",),
    "cuda.driver-too-old": ("cuda-stack.driver-too-old",),
    "cuda.init-failed": ("cuda-stack.init-failed",),
    "cuda.no-gpu": ("cuda-stack.no-gpu",),
    "cuda.ok": ("cuda-stack.ok",),
    "cuda.probe-failed": ("cuda-stack.probe-failed",),
    "cuda.torch-absent": ("cuda-stack.torch-absent",),
    "cuda.torch-cpu-build": ("cuda-stack.torch-cpu-build",),
    "cuda.torch-import-failed": ("cuda-stack.torch-import-failed",),
    "cuda.triton-absent": ("cuda-stack.triton-absent",),
    "cuda.triton-import-failed": ("cuda-stack.triton-import-failed",),
    "cuda.triton-libcuda-missing": ("cuda-stack.triton-libcuda-missing",),
    "cuda.triton-ptxas-missing": ("cuda-stack.triton-ptxas-missing",),
    "dist.duplicate": ("distributions.duplicate",),
    "dist.file-not-regular": ("distributions.file-not-regular",),
    "dist.metadata-broken": ("distributions.metadata-broken",),
    "dist.record-broken": ("distributions.record-broken",),
    "dist.record-escapes": ("distributions.record-escapes",),
    "dist.record-mismatch": ("distributions.record-mismatch",),
    "dist.record-missing": ("distributions.record-missing",),
    "dist.requirement-missing": ("distributions.requirement-missing",),
    "dist.requirement-unmet": ("distributions.requirement-unmet",),
    "dist.requirements-ok": ("distributions.requirements-ok",),
    "dist.stack": ("distributions.stack",),
    "import.crashed": ("imports.crashed", "extensions.crashed"),
    "import.dependency-missing": ("imports.dependency-missing", "extensions.dependency-missing"),
    "import.driver-library-missing": ("imports.driver-library-missing", "extensions.driver-library-missing"),
    "import.extension-missing": ("imports.extension-missing", "extensions.extension-missing"),
    "import.failed": ("imports.failed", "extensions.failed"),
    "import.glibc-too-old": ("imports.glibc-too-old", "extensions.glibc-too-old"),
    "import.library-not-found": ("imports.library-not-found", "extensions.library-not-found"),
    "import.namespace-package": ("imports.namespace-package", "extensions.namespace-package"),
    "import.needs-driver": ("imports.needs-driver", "extensions.needs-driver"),
    "import.rotary-absent": ("imports.rotary-absent",),
    "import.rotary-ok": ("imports.rotary-ok",),
    "import.timeout": ("imports.timeout", "extensions.timeout"),
    "import.undefined-symbol": ("imports.undefined-symbol", "extensions.undefined-symbol"),
    "models.config-broken": ("model-files.config-broken",),
    "models.config-incomplete": ("model-files.config-incomplete",),
    "models.dir-missing": ("model-files.dir-missing",),
    "models.dir-unreadable": ("model-files.dir-unreadable",),
    "models.files-ok": ("model-files.files-ok",),
    "models.index-mismatch": ("model-files.index-mismatch",),
    "models.no-weights": ("model-files.no-weights",),
    "models.not-downloaded": ("model-files.not-downloaded",),
    "models.not-given": ("model-files.not-given", "drafter.not-given", "drafter-attention.not-given"),
    "models.not-judged": ("drafter.not-judged",),
    "models.tokenizer-missing": ("model-files.tokenizer-missing",),
    "models.weights-broken": ("model-files.weights-broken",),
    "namespace.absent": ("namespaces.absent",),
    "namespace.cute-overlap": ("namespaces.cute-overlap",),
    "namespace.incomplete": ("namespaces.incomplete",),
    "namespace.leftover": ("namespaces.leftover",),
    "namespace.ok": ("namespaces.ok",),
    "namespace.shadowed": ("namespaces.shadowed",),
    "namespace.v4-without-v2": ("namespaces.v4-without-v2",),
    "serve.drafter-broken": ("serve-command.drafter-broken",),
    "serve.flag-invalid": ("serve-command.flag-invalid",),
    "serve.flags-unchecked": ("serve-command.flags-unchecked",),
    "serve.gpu-facts-unavailable": ("serve-resources.gpu-facts-unavailable",),
    "serve.heads-tp": ("serve-command.heads-tp",),
    "serve.kv-cache": ("serve-resources.kv-cache",),
    "serve.kv-heads-tp": ("serve-command.kv-heads-tp",),
    "serve.max-model-len": ("serve-command.max-model-len",),
    "serve.memory": ("serve-resources.memory",),
    "serve.memory-held": ("serve-resources.memory-held",),
    "serve.memory-unknown": ("serve-resources.memory-unknown",),
    "serve.memory-weights": ("serve-resources.memory-weights",),
    "serve.model-missing": ("serve-command.model-missing",),
    "serve.no-speculative-config": ("serve-command.no-speculative-config",),
    "serve.not-a-serve-command": ("serve-command.not-a-serve-command",),
    "serve.not-given": ("serve-command.not-given", "serve-resources.not-given"),
    "serve.parsed": ("serve-command.parsed",),
    "serve.port-in-use": ("serve-resources.port-in-use",),
    "serve.port-ok": ("serve-resources.port-ok",),
    "serve.scheduler": ("serve-command.scheduler",),
    "serve.spec-draft-tp": ("serve-command.spec-draft-tp",),
    "serve.spec-invalid": ("serve-command.spec-invalid",),
    "serve.spec-json": ("serve-command.spec-json",),
    "serve.spec-k-invalid": ("serve-command.spec-k-invalid",),
    "serve.spec-k-missing": ("serve-command.spec-k-missing",),
    "serve.spec-method": ("serve-command.spec-method",),
    "serve.spec-model-missing": ("serve-command.spec-model-missing",),
    "serve.spec-ok": ("serve-command.spec-ok",),
    "serve.token-budget": ("serve-command.token-budget",),
    "serve.vllm-missing": ("serve-command.vllm-missing",),
    "serve.vllm-parser-rejected": ("serve-command.vllm-parser-rejected",),
    "serve.vllm-validation": ("serve-command.vllm-validation",),
    "serve.world-size": ("serve-resources.world-size",),
    "surface.no-source": ("import-surface.no-source",),
    "surface.no-vllm": ("import-surface.no-vllm",),
    "surface.ok": ("import-surface.ok",),
    "surface.unguarded-failure": ("import-surface.unguarded-failure",),
}
"""Each v1 id that changed, and its new ids; the first is the one it became where the check is not known."""


def current_ids(finding_id: str) -> tuple[str, ...]:
    """What `finding_id` is called now: its new ids if it is a v1 id that changed, else itself."""
    return V1_ALIASES.get(finding_id, (finding_id,))


def current_id(finding_id: str, check_id: str | None = None) -> str:
    """The id a finding saved under `check_id` has now (idempotent: a current id maps to itself)."""
    new = current_ids(finding_id)
    if check_id is not None:
        for candidate in new:
            if candidate.startswith(check_id + "."):
                return candidate
    return new[0]


def upgrade_findings(report: Mapping[str, Any]) -> None:
    """Rename, in place, the v1 ids of a loaded report's findings and their `cause` references."""
    checks = [c for c in report.get("checks") or () if isinstance(c, dict)]
    renamed: dict[str, str] = {}
    for check in checks:
        for finding in check.get("findings") or ():
            if isinstance(finding, dict) and isinstance(finding.get("id"), str):
                old = finding["id"]
                finding["id"] = renamed[old] = current_id(old, str(check.get("id")))
    for check in checks:
        for finding in check.get("findings") or ():
            if isinstance(finding, dict) and isinstance(finding.get("cause"), str) and finding["cause"]:
                finding["cause"] = renamed.get(finding["cause"], current_id(finding["cause"]))
