"""Judging what a remediation would really do: `resolves | would-break | needs-build | fails | not-checked`.

A pure function of the dry-run facts (`facts.fix.dryrun`: what the target's installer said, or the simulated
uninstall) and the installed distributions saved with them, so a saved report is judged the same again.

- fails: the installer could not resolve it (no version matches, metadata that does not build: where a
  requirement of what it installs is on no configured index, which distribution requires it and, where known, the
  index that publishes it: vLLM 0.34.0's flashinfer-python==0.7.3), a name it
  uninstalls is not installed, or an uninstall leaves the top-level directory it meant to remove on
  sys.path (still a namespace package: what `pip uninstall flash-attn-4` alone does);
- not-checked: the installer was not asked, or did not answer within --timeout (offline), and why; a report
  gives every remediation nobody checked this (`mark_unchecked`), with how to check it;
- would-break: after it, a distribution that stays no longer meets a requirement it met before
  (`vllm 0.20.1 requires torch==2.11.0; torch would be 2.13.0`), loses one, or the command puts in a
  version of a distribution that leaves another's requirement on it unmet;
- needs-build: it resolves, and a distribution would be built from its sdist (hours for flash-attn);
- resolves: it resolves to wheels only, or an uninstall/move leaves nothing behind.

Remediations of one finding are then ranked (stably, keeping a `...`-continued sequence together): a fix
that resolves first, one that would break another requirement or fails last.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from dflash_doctor.checks.fix.build_prereqs import CHECK_ID, judge_build, prefix
from dflash_doctor.checks.remedy import quote
from dflash_doctor.facts.fix.dryrun import NOT_AN_INSTALLER_COMMAND, parse_command
from dflash_doctor.facts.fix.dryrun_shapes import DryRunItem, DryRuns, InstalledDist, LeftBehind, SegmentRun
from dflash_doctor.facts.python.envfacts import canonical
from dflash_doctor.facts.shape import ShapeError
from dflash_doctor.knowledge.installers import INDEXES_BEYOND_PYPI
from dflash_doctor.model import CheckResult, Finding, Remediation, Status

__all__ = ["NOT_AN_INSTALLER_COMMAND", "RANK", "judge_item", "mark_unchecked", "marker_applies", "rank", "read_dry_runs",
           "unchecked_reason", "verified_commands", "verify_results"]

RANK = {"resolves": 0, "needs-build": 1, "not-checked": 2, "would-break": 3, "fails": 4}
VERIFIED_STATUSES = (Status.FAIL, Status.ERROR)


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def marker_applies(requirement: Requirement, environment: Mapping[str, str]) -> bool:
    """Whether a requirement's marker holds in `environment` (no extra); an unreadable marker counts as holding."""
    if requirement.marker is None:
        return True
    try:
        return bool(requirement.marker.evaluate({**environment, "extra": ""}))
    except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
        return True


def _breaks(installed: Sequence[InstalledDist], before: Mapping[str, str], after: Mapping[str, str | None],
            environment: Mapping[str, str]) -> list[str]:
    """Requirements of distributions that stay which hold now and would not after the change.
    `before`: canonical name -> installed version; `after`: canonical name -> new version, or None when it
    would be removed."""
    broken: list[str] = []
    for dist in installed:
        name = canonical(dist.name or "")
        if name in after:
            continue  # replaced or removed itself: the installer resolved its requirements
        for line in dist.requirements:
            try:
                requirement = Requirement(line)
            except InvalidRequirement:
                continue
            dep = canonical(requirement.name)
            if dep not in after or not marker_applies(requirement, environment):
                continue
            now, then = before.get(dep), after[dep]
            held = now is not None and _meets(requirement, now)
            who = f"{dist.name} {dist.version}"
            if then is None:
                if held:
                    broken.append(f"{who} requires {requirement}; it would be removed")
            elif not _meets(requirement, then):
                # It held and would not, or the command puts in a version that leaves it unmet.
                broken.append(f"{who} requires {requirement}; {requirement.name} would be {then}"
                              + ("" if held else f" (now {now or 'not installed'})"))
    return broken


def _meets(requirement: Requirement, version: str) -> bool:
    parsed = _version(version)
    return parsed is not None and requirement.specifier.contains(parsed, prereleases=True)


_HOW = {"wheel": "wheel", "sdist": "sdist: builds from source", "directory": "local directory: builds",
        "vcs": "version control: builds"}


def _left_behind(left: LeftBehind, changes: list[str], fails: list[str]) -> None:
    """What an uninstall leaves of a top-level directory: a change, and a failure when it stays importable."""
    if not left.stays:
        changes.append(f"{left.directory}/ goes")
        return
    held = []
    if left.owned_by_others:
        held.append(f"{left.owned_by_others} file(s) other distributions own")
    if left.unowned_count:
        held.append(f"{left.unowned_count} file(s) no distribution owns: " + ", ".join(left.unowned))
    if left.bytecode and not held:
        held.append(f"{left.bytecode} bytecode file(s) in __pycache__")
    what = "; ".join(held) or "nothing"
    changes.append(f"{left.directory}/ stays ({what})")
    if not left.owned_by_others and not left.init_stays:
        fails.append(f"{left.directory}/ stays behind holding {what}: a directory on sys.path without "
                     "__init__.py is still importable as a namespace package")


def judge_item(item: DryRunItem, installed: Sequence[InstalledDist],
               environment: Mapping[str, str] | None = None) -> tuple[str, tuple[str, ...]]:
    """(verified, changes) for one command's dry-run facts."""
    environment = environment or {}
    # A distribution whose version its METADATA did not give reads "None" here, as it always has: installed,
    # at no version a requirement can meet.
    versions = {canonical(d.name or ""): str(d.version) for d in installed}
    changes: list[str] = []
    after: dict[str, str | None] = {}
    builds: list[str] = []
    fails: list[str] = []
    unchecked: list[str] = []
    for segment in item.segments:
        if segment.status == "not-checked":
            unchecked.append(segment.reason or "not asked")
            continue
        if segment.status == "failed":
            fails.append(_failed(segment))
            continue
        for removal in segment.remove:
            after.setdefault(canonical(removal.name), None)
            changes.append(f"remove {removal.name} {removal.version}"
                           + (f" ({removal.files} files)" if removal.files is not None else ""))
        for entry in segment.install:
            name = canonical(entry.name)
            new, old = entry.version, versions.get(name)
            after[name] = new
            how = _HOW.get(entry.source, "source unknown")
            if old is None:
                verb = "install"
            else:
                ov, nv = _version(old), _version(new)
                verb = "reinstall" if old == new else "upgrade" if ov and nv and nv > ov else "downgrade"
            changes.append(f"{verb} {entry.name} " + (f"{old} -> {new}" if old and old != new else new) + f" ({how})")
            if entry.builds:
                builds.append(f"{entry.name} {new}")
        for left in segment.left_behind:
            _left_behind(left, changes, fails)
        changes.extend(f"move {moved} to {moved}.disabled" for moved in segment.moves)
    if fails:
        return "fails: " + "; ".join(fails), tuple(changes)
    if unchecked:
        return "not-checked: " + "; ".join(unchecked), tuple(changes)
    broken = _breaks(installed, versions, after, environment)
    if broken:
        return f"would-break: [{'; '.join(broken)}]", tuple(changes)
    if builds:
        return f"needs-build: {{{', '.join(builds)} from source}}", tuple(changes)
    return "resolves", tuple(changes)


def _failed(segment: SegmentRun) -> str:
    """Why an install fails: the installer's words, and where a requirement is on no configured index, who requires
    it (its own Requires-Dist, facts.fix.dryrun) and the index that publishes it (knowledge.installers)."""
    reason = segment.reason or "the installer failed"
    missing = segment.unavailable
    if missing is None:
        return reason
    try:
        name = canonical(Requirement(missing.requirement).name)
    except InvalidRequirement:
        name = ""
    index = INDEXES_BEYOND_PYPI.value.get(name)
    index = index if index and index not in segment.argv else None
    if not missing.required_by and not index:
        return reason  # the command asks for it itself: the installer's words say it all
    said = (f"{missing.required_by} requires {missing.requirement}"
            + (" (its Requires-Dist)" if missing.requires_dist else "") + ", which no configured index has"
            if missing.required_by else f"{missing.requirement} is on no configured index")
    if index:
        said += f"; {name} publishes it on {index}: add --extra-index-url {index}"
    return f"{said} ({reason})"


def rank(verified: str) -> int:
    return RANK.get(verified.split(":", 1)[0].strip(), RANK["not-checked"])


def _groups(remediation: Sequence[Remediation]) -> list[list[Remediation]]:
    """Steps that continue the one before (`why` starting with '...') stay with it."""
    groups: list[list[Remediation]] = []
    for step in remediation:
        if groups and step.why.startswith("..."):
            groups[-1].append(step)
        else:
            groups.append([step])
    return groups


def _group_rank(group: Sequence[Remediation]) -> int:
    return max((rank(s.verified) for s in group if s.verified), default=RANK["not-checked"])


def verified_commands(results: Iterable[CheckResult]) -> list[str]:
    """The remediation commands worth asking the installer about: those of failing findings."""
    return list(dict.fromkeys(r.command for result in results for f in result.findings
                              if f.status in VERIFIED_STATUSES for r in f.remediation))


def _finding(finding: Finding, by_command: Mapping[str, tuple[str, tuple[str, ...]]],
             rewritten: Mapping[str, str]) -> Finding:
    if not finding.remediation or not any(r.command in by_command for r in finding.remediation):
        return finding
    steps = tuple(replace(r, command=rewritten.get(r.command, r.command), verified=by_command[r.command][0],
                          changes=by_command[r.command][1])
                  if r.command in by_command else r for r in finding.remediation)
    ordered = sorted(_groups(steps), key=_group_rank)
    return replace(finding, remediation=tuple(s for g in ordered for s in g))


_NEEDS_TOOLCHAIN = ("CUDA_HOME", "nvcc", "No module named ")
_NO_MODULE = re.compile(r"No module named '([A-Za-z0-9_.]+)'")


def read_dry_runs(dry_runs: DryRuns | Mapping[str, Any] | None) -> tuple[DryRuns | None, str]:
    """The dry-run facts read through their shape, once: (the facts, "") or (None, why not): None when the run
    kept none (no --verify-fixes; a saved `dry_runs` that is not an object counts as none, as it always has), or
    the field that does not have its shape."""
    if isinstance(dry_runs, DryRuns):
        return dry_runs, ""
    try:
        return DryRuns.from_json(dry_runs), ""
    except ShapeError as exc:
        if not exc.where:
            return None, ""
        return None, f"the saved dry runs are malformed ({exc.where}: {exc.problem})"


def verify_results(results: Sequence[CheckResult], dry_runs: DryRuns | Mapping[str, Any]) -> list[CheckResult]:
    """Each remediation with dry-run facts gets `verified` and `changes`; each finding's are ranked. A fix that
    builds from source gets MAX_JOBS and FLASH_ATTN_CUDA_ARCHS in its command and its prerequisites judged
    (checks.build_prereqs), as a `build-prerequisites` result after the others; so does a fix whose resolution
    failed for want of the CUDA toolchain (flash-attn's setup.py needs it to say even its metadata).
    Dry runs that do not have their shape verify nothing: the results stay as they were, and `unchecked_reason`
    says which field is malformed."""

    facts, _ = read_dry_runs(dry_runs)
    if facts is None:
        return list(results)
    build = facts.build
    python, uv = facts.python, facts.env_kind == "uv"
    by_command: dict[str, tuple[str, tuple[str, ...]]] = {}
    rewritten: dict[str, str] = {}
    build_findings: dict[str, Finding] = {}
    for item in facts.items:
        command = item.command
        verified, changes = judge_item(item, facts.installed, facts.marker_environment)
        builds = [f"{e.name} {e.version}" for seg in item.segments for e in seg.install if e.builds]
        toolchain = verified.startswith("fails") and any(m in verified for m in _NEEDS_TOOLCHAIN)
        if build is not None and (verified.startswith("needs-build") or toolchain):
            what = ", ".join(builds) or ", ".join(seg_names(item)) or "the package"
            plan = judge_build(build, python=python, uv=uv, what=what,
                               missing_modules=[m.split(".")[0] for m in _NO_MODULE.findall(verified)])
            for found in plan.findings:
                build_findings.setdefault(found.id, found)
            if verified.startswith("needs-build"):
                verified = f"needs-build: {{{plan.summary}}}"
                rewritten[command] = prefix(plan.env, command)
            else:
                if plan.missing:
                    verified += f" (build prerequisites missing: {', '.join(plan.missing)})"
        by_command[command] = (verified, changes)
    out = [replace(r, findings=tuple(_finding(f, by_command, rewritten) for f in r.findings)) for r in results]
    if build_findings and build is not None:
        status = max((f.status for f in build_findings.values()), key=lambda s: s.rank)
        out.append(CheckResult(CHECK_ID, "python", "Source-build prerequisites", status,
                               tuple(build_findings.values()), facts={"build": build.to_json()}))
    return out


def unchecked_reason(dry_runs: Any, python: str) -> str:
    """Why a run's remediations that carry no `verified` were not checked, and how to check them: `dry_runs` is
    what the run kept of the dry runs (the report's `dry_runs`: None without --verify-fixes)."""
    how = f"to check: dflash-doctor --python {quote(python)} --verify-fixes"
    facts, malformed = read_dry_runs(dry_runs)
    if malformed:
        return f"{malformed}; {how}"
    if facts is None:
        return f"the installer was not asked (no --verify-fixes); {how}"
    if facts.error:
        return f"the dry runs stopped ({facts.error}); {how}"
    return "--verify-fixes asks the installer only about the fixes of failing findings"


def mark_unchecked(results: Sequence[CheckResult], why: str) -> list[CheckResult]:
    """Each remediation without `verified` gets `not-checked: WHY` (NOT_AN_INSTALLER_COMMAND for a command the
    installer cannot be asked about), so that a reader, and a JSON consumer, tells a fix nobody checked from
    one the installer vouched for."""

    def one(step: Remediation) -> Remediation:
        if step.verified:
            return step
        reason = why if parse_command(step.command) is not None else NOT_AN_INSTALLER_COMMAND
        return replace(step, verified=f"not-checked: {reason}")

    def finding(f: Finding) -> Finding:
        if all(r.verified for r in f.remediation):
            return f
        return replace(f, remediation=tuple(one(r) for r in f.remediation))

    return [replace(r, findings=tuple(finding(f) for f in r.findings)) for r in results]


def seg_names(item: DryRunItem) -> list[str]:
    """The requirement words of an item's install segments (for naming what would be built)."""

    segments = parse_command(item.command) or []
    return [n for s in segments if s.kind == "install" for n in s.names]
