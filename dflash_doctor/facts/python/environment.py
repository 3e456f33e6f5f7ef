"""The static facts of the target environment, from one probe run in the target interpreter."""

from __future__ import annotations

from collections.abc import Mapping

from dflash_doctor.context import Context
from dflash_doctor.facts.probes import run_probe
from dflash_doctor.facts.python.environment_shapes import Distributions, Resolution, SysPath, Target
from dflash_doctor.facts.secrets import env_allow_args, scrub_values
from dflash_doctor.facts.shape import Collected, SectionFailure, by_section
from dflash_doctor.knowledge.kernel_wheels import KERNEL_DISTRIBUTIONS
from dflash_doctor.knowledge.stack import (
    FLASH_ATTN_FAMILY,
    STACK_DISTRIBUTIONS,
    STACK_EXTENSION_MODULES,
    WATCHED_TOP_LEVELS,
)

# Top-level names whose resolution (without importing) the checks judge.
RESOLVED_NAMES = ("flash_attn", "flash_attn_2_cuda", "flash_attn_3", "vllm", "torch", "triton", "flashinfer",
                  "cutlass")


def collect(ctx: Context, _earlier: Mapping[str, object]) -> Collected:
    args = {
        "stack": list(STACK_DISTRIBUTIONS.value),
        "hash_always": list(FLASH_ATTN_FAMILY.value),
        "kernels": list(KERNEL_DISTRIBUTIONS.value),
        "watched_top_levels": list(WATCHED_TOP_LEVELS.value),
        "verify_hashes": ctx.verify_hashes,
        "env_allow": env_allow_args(),
        "find_spec": list(RESOLVED_NAMES),
        "extension_modules": sorted(STACK_EXTENSION_MODULES.value),
    }
    outcome = run_probe(ctx.python, "environment", args, timeout_s=ctx.timeout_s, cwd=ctx.cwd)
    if not outcome.ok:
        reason = f"the environment probe in {ctx.python} {outcome.error}"
        if outcome.stderr.strip():
            reason += f"; stderr: {outcome.stderr.strip()[-600:]}"
        return {shape.SECTION: SectionFailure(shape.SECTION, reason)
                for shape in (Target, SysPath, Distributions, Resolution)}
    data = dict(outcome.data)
    target = dict(data["target"])
    target["python"] = ctx.python
    environ = dict(target.get("environ") or {})
    environ["values"] = scrub_values(environ.get("values") or {})
    target["environ"] = environ
    target["probe"] = outcome.as_facts()
    return by_section(
        Target.collected(target),
        SysPath.collected({"entries": data["sys_path"]}),
        # import_extensions: the stack's extension modules the import system finds that no RECORD lists.
        # shared_files: the paths two verified distributions (the stack, the kernel packages) both list;
        # overlaps: the paths any two installed distributions both list, from the same RECORD rows.
        Distributions.collected({"items": data["distributions"],
                                 "import_extensions": data.get("import_extensions") or {},
                                 "shared_files": data.get("shared_files") or [], "overlaps": data.get("overlaps")}),
        Resolution.collected(data["resolution"]),
    )
