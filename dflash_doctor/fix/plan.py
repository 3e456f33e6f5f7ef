"""The plan of `dflash-doctor fix`: which fixes it runs, in which order, and which it leaves out, and why.

One step per distinct first-ranked fix (checks.verify ranked them) of a failing finding that is a cause of its
own. Then the steps have to hang together, as one plan for one machine:

- Order: what stops `vllm serve` first goes first. A step whose finding, or a finding that follows from it
  (render.grouping resolves the causes), stops `vllm serve` (`model.stops_serve`: an import on its serving path
  that raises here) comes before the others; within each, the order of the checks.
- Dropped, each with why (`Step.dropped`, shown in the plan and in `fix --json` under "dropped"):
  - a step that puts in a distribution that another step removes, or whose findings are all requirements of a
    distribution that another step removes (`pip install torch` "for flash-attn-4" beside the uninstall of
    flash-attn-4): the other step undoes it;
  - a step that installs a CUDA build of torch (knowledge.stack.TORCH_CUDA_WHEELS: several GB) when the run was
    told there is no GPU (--no-gpu) and not which GPUs the environment is for (--target-arch): nothing would run
    it. Told --target-arch (an image built on a machine without GPUs), it stays;
  - a step that uninstalls a distribution whose RECORD lists paths another installed distribution lists too
    (facts `distributions.overlaps`) and does not reinstall that other one: the uninstall deletes its files.

What a step installs and removes is read from the installer's own answer (facts.fix.dryrun) where there is one, and
else from the command and the installed metadata: the names it installs, and (without --no-deps) what the
installed distributions it reinstalls require and the environment lacks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from dflash_doctor.facts.fix.dryrun import parse_command
from dflash_doctor.facts.fix.dryrun_shapes import DryRunItem, DryRuns, InstalledDist, SegmentRun
from dflash_doctor.facts.python.envfacts import canonical
from dflash_doctor.fix.verify import VERIFIED_STATUSES, marker_applies
from dflash_doctor.knowledge.stack import TORCH_CUDA_WHEELS, TORCH_PYPI_IS_CUDA_ON
from dflash_doctor.model import CheckResult, Finding, Remediation, stops_serve
from dflash_doctor.render.grouping import Node, arrange
from dflash_doctor.shape import frozen_dataclass

__all__ = ["Effect", "Step", "decide", "deletes_others", "effect", "failing_cause", "failing_keys", "plan", "worse"]

FAILING = VERIFIED_STATUSES  # a failing finding: one whose fixes the dry runs verify, for the plan to pick from
# Installer options that choose where packages come from: torch from elsewhere may be any build.
_OTHER_SOURCES = ("-i", "--index-url", "--extra-index-url", "-f", "--find-links", "--no-index", "--torch-backend")


@dataclass
class Step:
    command: str
    remediation: Remediation
    findings: list[tuple[str, str, str]]  # (check, finding id, title)
    order: int
    stops_serve: bool = False  # one of its findings, or one that follows from them, stops `vllm serve`
    dropped: str = ""  # why the plan leaves it out ("" when it is a step)
    applied: str = ""
    returncode: int | None = None
    duration_s: float = 0.0
    output: str = ""
    snapshot: str = ""
    touched: list[str] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = {"command": self.command, "verified": self.remediation.verified,
                "changes": list(self.remediation.changes),
                "findings": [{"check": c, "id": i, "title": t} for c, i, t in self.findings],
                "stops_serve": self.stops_serve}
        if self.dropped:
            return {**data, "dropped": self.dropped}
        return {**data, "applied": self.applied, "returncode": self.returncode,
                "duration_s": round(self.duration_s, 3), "output": self.output, "snapshot": self.snapshot,
                "left_different": self.differences}


def failing_keys(results: Sequence[CheckResult]) -> set[tuple[str, str, str]]:
    return {(r.id, f.id, f.title) for r in results for f in r.findings if f.status in FAILING}


def failing_cause(results: Sequence[CheckResult]) -> Callable[[Finding], bool]:
    """Whether a finding of `results` fails as a cause of its own: failing, and not the consequence (`cause`) of
    another failing finding there. Only such a finding's fix is a step."""
    failing_ids = {f.id for r in results for f in r.findings if f.status in FAILING}
    return lambda f: f.status in FAILING and not (f.cause and f.cause in failing_ids)


# --------------------------------------------------------------------------- what a step does


@frozen_dataclass(frozen=True)
class Effect:
    """What a command does to the environment's distributions (canonical names)."""

    installs: frozenset[str]  # the distributions it names to install
    removes: frozenset[str]
    cuda: str  # why it installs a CUDA build of torch; "" when it does not, or that is not known


def _requirement(word: str) -> Requirement | None:
    try:
        return Requirement(word)
    except InvalidRequirement:
        return None  # a path, a URL: nothing to say about it by name


def _cuda_from_default_index(args: Sequence[str], requirements: Sequence[Requirement],
                             installed: Mapping[str, InstalledDist], environment: Mapping[str, str]) -> str:
    """Without the installer's answer: whether an install would take torch from the default index where that is
    a CUDA build (knowledge.stack.TORCH_PYPI_IS_CUDA_ON): torch named, or required by a distribution it
    reinstalls with its dependencies, and not installed."""
    platform = (environment.get("platform_system", ""), environment.get("platform_machine", ""))
    if platform not in TORCH_PYPI_IS_CUDA_ON.value or "torch" in installed:
        return ""
    if any(a.split("=", 1)[0] in _OTHER_SOURCES for a in args):
        return ""
    where = f"torch from PyPI on {platform[0]} {platform[1]} is a CUDA build"
    for requirement in requirements:
        if canonical(requirement.name) == "torch":
            if any("+cpu" in str(s) for s in requirement.specifier):
                return ""
            return f"it installs {requirement} and {where}"
        if "--no-deps" in args:
            continue
        dist = installed.get(canonical(requirement.name))
        for line in dist.requirements if dist else ():
            needed = _requirement(line)
            if needed is not None and canonical(needed.name) == "torch" and marker_applies(needed, environment):
                return f"it reinstalls {requirement.name} with its requirements, which include {needed} (not installed), and {where}"
    return ""


def effect(command: str, item: DryRunItem | None, installed: Sequence[InstalledDist],
           environment: Mapping[str, str]) -> Effect:
    """What `command` installs and removes: from its dry run (`item`, facts.fix.dryrun) where the installer answered,
    else from the command's words and the installed distributions' metadata."""

    by_name = {canonical(d.name or ""): d for d in installed}
    facts = item.segments if item is not None else []
    installs: set[str] = set()
    removes: set[str] = set()
    cuda: list[str] = []
    for i, segment in enumerate(parse_command(command) or ()):
        answer = facts[i] if i < len(facts) else SegmentRun()
        if segment.kind == "uninstall":
            removes.update(canonical(n) for n in segment.names)
            removes.update(canonical(e.name) for e in answer.remove)
            continue
        if segment.kind != "install":
            continue
        requirements = [r for r in (_requirement(n) for n in segment.names) if r is not None]
        installs.update(canonical(r.name) for r in requirements)
        if answer.status == "resolved":
            put_in = [canonical(e.name) for e in answer.install]
            libraries = [n for n in put_in if n.startswith(TORCH_CUDA_WHEELS.value)]
            if libraries:
                cuda.append(f"it installs {', '.join(libraries[:3])}{' and more' if len(libraries) > 3 else ''} "
                            "(the CUDA libraries of a CUDA build of torch)")
        else:
            found = _cuda_from_default_index(segment.args, requirements, by_name, environment)
            if found:
                cuda.append(found)
    return Effect(frozenset(installs), frozenset(removes), "; ".join(cuda))


# --------------------------------------------------------------------------- the plan


def _serve_stoppers(results: Sequence[CheckResult]) -> set[int]:
    """The ids (object identities) of the findings that stop `vllm serve` or lead to one that does."""

    found: set[int] = set()

    def visit(node: Node) -> bool:
        below = [visit(child) for child in node.consequences]  # every node visited
        stops = stops_serve(node.finding) or any(below)
        if stops:
            found.add(id(node.finding))
        return stops

    for view in arrange(results).checks:
        for root in view.roots:
            visit(root)
    return found


def _requirers(result_findings: Sequence[Finding]) -> set[str]:
    """The distributions whose requirements the findings are about (evidence `requirer`), when all are."""
    names = {canonical(str(f.evidence.get("requirer") or "")) for f in result_findings
             if isinstance(f.evidence, Mapping)}
    return set() if "" in names or not names else names


def deletes_others(effect: Effect, shared_with: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    """{removed distribution: {another one whose paths its uninstall deletes: how many}} for the distributions the
    step removes and the others it neither removes nor reinstalls (`shared_with`: overlaps.partners)."""
    found: dict[str, dict[str, int]] = {}
    for removed in sorted(effect.removes):
        others = {other: n for other, n in shared_with.get(removed, {}).items()
                  if other not in effect.removes and other not in effect.installs}
        if others:
            found[removed] = others
    return found


def plan(results: Sequence[CheckResult], dry_runs: DryRuns | None = None, *,
         items: Mapping[str, DryRunItem] | None = None,
         gpu_expected: bool = True,
         shared_with: Mapping[str, Mapping[str, int]] | None = None,
         ) -> tuple[list[Step], list[Step], list[tuple[str, str, str]]]:
    """(steps, dropped steps, failing causes with no fix). `dry_runs`: the dry-run facts (for the installed
    distributions and the marker environment); `items`: each command's dry-run item; `gpu_expected`: False when
    the run was told there is no GPU and not which GPUs the environment is for; `shared_with`: which installed
    distributions list paths another lists too (checks.python.overlaps.partners)."""
    fails_itself = failing_cause(results)
    stoppers = _serve_stoppers(results)
    steps: dict[str, Step] = {}
    about: dict[str, list[Finding]] = {}
    unfixable: list[tuple[str, str, str]] = []
    for order, result in enumerate(results):
        for finding in result.findings:
            if not fails_itself(finding):
                continue
            key = (result.id, finding.id, finding.title)
            if not finding.remediation:
                unfixable.append(key)
                continue
            first = finding.remediation[0]
            step = steps.setdefault(first.command, Step(first.command, first, [], order))
            step.findings.append(key)
            step.stops_serve = step.stops_serve or id(finding) in stoppers
            about.setdefault(first.command, []).append(finding)
    ordered = sorted(steps.values(), key=lambda s: (not s.stops_serve, s.order))

    dry = dry_runs or DryRuns()
    installed, environment = dry.installed, dry.marker_environment
    effects = {s.command: effect(s.command, (items or {}).get(s.command), installed, environment) for s in ordered}
    # A CUDA build no GPU will run is left out; the steps that stay can undo another (which is then left out,
    # whatever else is said of it: an undone step is pointless on any machine).
    heavy = {s.command: effects[s.command].cuda for s in ordered if effects[s.command].cuda and not gpu_expected}
    # A step whose uninstall deletes files another distribution lists, without reinstalling it, is left out first: it
    # neither runs nor undoes another step.
    deleting = {s.command: deletes_others(effects[s.command], shared_with or {}) for s in ordered}
    undone_by: dict[str, tuple[Step, str]] = {}
    removers: set[str] = set()  # the steps that undo another stay (so the plan never names a step it left out)
    for step in ordered:
        if step.command in removers or deleting[step.command]:
            continue
        mine, requirers = effects[step.command], _requirers(about[step.command])
        for other in ordered:
            if other is step or other.command in heavy or other.command in undone_by or deleting[other.command]:
                continue
            removes = effects[other.command].removes
            if mine.installs & removes:
                what = f"removes {', '.join(sorted(mine.installs & removes))}, which it installs"
                undone_by[step.command] = (other, what)
            elif requirers and requirers <= removes:
                what = f"removes {', '.join(sorted(requirers))}, whose requirements it is for"
                undone_by[step.command] = (other, what)
            if step.command in undone_by:
                removers.add(other.command)
                break
    for step in ordered:
        if deleting[step.command]:
            step.dropped = "; ".join(
                f"it uninstalls {removed}, whose RECORD lists {sum(others.values())} paths "
                f"{', '.join(sorted(others))} list{'s' if len(others) == 1 else ''} too: the uninstall deletes "
                f"{'its' if len(others) == 1 else 'their'} files and the step does not reinstall "
                f"{'it' if len(others) == 1 else 'them'} (distributions.shared-paths names the fix that does)"
                for removed, others in deleting[step.command].items())
        if step.dropped:
            continue
        if step.command in undone_by:
            step.dropped = "undone"  # said below, with the other step's number in the plan
        elif step.command in heavy:
            step.dropped = (f"a CUDA build of torch (several GB) for a run told there is no GPU (--no-gpu, no "
                            f"--target-arch): {heavy[step.command]}; pass --target-arch for the GPUs this "
                            "environment is for to keep it")
    kept = [s for s in ordered if not s.dropped]
    for command, (other, what) in undone_by.items():
        steps[command].dropped = f"step {kept.index(other) + 1} {what}"
    return kept, [s for s in ordered if s.dropped], unfixable


def decide(verified: str, *, allow_build: bool, stopped: bool) -> tuple[str, bool]:
    """Whether a step runs ("") or is skipped (and why), and whether the plan stops there: at the first source
    build without --allow-build, every later step is skipped too."""
    kind = verified.split(":", 1)[0]
    if stopped:
        return "skipped: an earlier step needs a source build (--allow-build)", True
    if kind in ("fails", "would-break"):
        return f"skipped: the installer says it {'fails' if kind == 'fails' else 'would break another requirement'}", False
    if kind == "needs-build" and not allow_build:
        return "skipped: it builds from source (hours); pass --allow-build to run it", True
    return "", False


def worse(before: Sequence[CheckResult], after: Sequence[CheckResult]) -> list[str]:
    """What got worse from `before` to `after`: a check with a higher status, or more failing findings."""
    old = {r.id: r for r in before}
    found = []
    for result in after:
        prior = old.get(result.id)
        if prior is None:
            continue
        n_before = sum(f.status in FAILING for f in prior.findings)
        n_after = sum(f.status in FAILING for f in result.findings)
        if result.status.rank > prior.status.rank or n_after > n_before:
            found.append(f"{result.id}: {prior.status.value} ({n_before} failing) -> {result.status.value} "
                         f"({n_after} failing)")
    return found
