"""The static facts of the target environment, from one probe run in the target interpreter."""

from __future__ import annotations

from collections.abc import Mapping

from dflash_doctor.context import Context
from dflash_doctor.facts.probes import run_probe
from dflash_doctor.facts.python.environment_args import probe_args
from dflash_doctor.facts.python.environment_shapes import Distributions, Resolution, SysPath, Target
from dflash_doctor.facts.secrets import scrub_values
from dflash_doctor.facts.shape import Collected, SectionFailure, by_section


def collect(ctx: Context, _earlier: Mapping[str, object]) -> Collected:
    args = probe_args(ctx.verify_hashes)
    # Asked already by the run's head start (facts.head_start) when it asked the same, else now.
    outcome = ctx.head_start.take_environment(ctx.python, args, ctx.timeout_s, ctx.cwd) if ctx.head_start else None
    if outcome is None:
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
