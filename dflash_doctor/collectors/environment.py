"""The static facts of the target environment, from one probe run in the target interpreter."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dflash_doctor.check import Context
from dflash_doctor.knowledge.stack import FLASH_ATTN_FAMILY, STACK_DISTRIBUTIONS, WATCHED_TOP_LEVELS
from dflash_doctor.probe import run_probe
from dflash_doctor.redact import env_allow_args, scrub_values

# Top-level names whose resolution (without importing) the checks judge.
RESOLVED_NAMES = ("flash_attn", "flash_attn_2_cuda", "flash_attn_3", "vllm", "torch", "triton", "flashinfer")


def collect(ctx: Context, _earlier: Mapping[str, Any]) -> dict[str, Any]:
    args = {
        "stack": list(STACK_DISTRIBUTIONS.value),
        "hash_always": list(FLASH_ATTN_FAMILY.value),
        "watched_top_levels": list(WATCHED_TOP_LEVELS.value),
        "verify_hashes": ctx.verify_hashes,
        "env_allow": env_allow_args(),
        "find_spec": list(RESOLVED_NAMES),
    }
    outcome = run_probe(ctx.python, "environment", args, timeout_s=ctx.timeout_s, cwd=ctx.cwd)
    if not outcome.ok:
        reason = f"the environment probe in {ctx.python} {outcome.error}"
        if outcome.stderr.strip():
            reason += f"; stderr: {outcome.stderr.strip()[-600:]}"
        return {s: {"_error": reason} for s in ("target", "sys_path", "distributions", "resolution")}
    data = dict(outcome.data)
    target = dict(data["target"])
    target["python"] = ctx.python
    environ = dict(target.get("environ") or {})
    environ["values"] = scrub_values(environ.get("values") or {})
    target["environ"] = environ
    target["probe"] = outcome.as_facts()
    return {
        "target": target,
        "sys_path": {"entries": data["sys_path"]},
        "distributions": {"items": data["distributions"]},
        "resolution": data["resolution"],
    }
