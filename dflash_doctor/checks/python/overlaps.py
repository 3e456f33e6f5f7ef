"""A rule of the `distributions` check: paths any two installed distributions both install
(distributions.shared-paths), whoever they are, from the RECORD rows the environment probe reads for every
distribution (facts `distributions.overlaps`), never from a list of names.

For each set of distributions that list the same paths: how many, whose bytes are on disk where their RECORD hashes
differ (the probe hashed only those files), which uninstall deletes whose files, and a remediation that removes all
but one and puts back the files of everyone that uninstall touches. Pairs of the stack and its kernel packages whose
bytes differ are judged by distributions.file-collision (and flash-attn with flash-attn-4 by namespaces.cute-overlap).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from dflash_doctor.checks.python.codes import DISTRIBUTIONS_SHARED_PATHS
from dflash_doctor.checks.python.requirements import STACK, VERIFIED
from dflash_doctor.checks.remedy import Installer
from dflash_doctor.facts.python.envfacts import canonical
from dflash_doctor.facts.python.environment_shapes import (
    DifferingFile,
    Distributions,
    SharedClaimant,
    SharedFiles,
)
from dflash_doctor.model import Finding, Remediation, Status
from dflash_doctor.shape import frozen_dataclass

__all__ = ["SharedPaths", "overlap_findings", "partners"]


def partners(dists: Distributions) -> dict[str, dict[str, int]]:
    """{canonical name: {canonical name of another distribution: how many paths both list}}: whose files an
    uninstall of each deletes, from every group of the overlaps facts."""
    found: dict[str, dict[str, int]] = {}
    for group in dists.overlaps.groups if dists.overlaps is not None else ():
        names = [canonical(c.name) for c in group.distributions]
        for name in names:
            mine = found.setdefault(name, {})
            for other in names:
                if other != name:
                    mine[other] = mine.get(other, 0) + group.paths
    return found


@frozen_dataclass(frozen=True)
class SharedPaths:
    """One group of the overlaps facts, read for judgement."""

    group: SharedFiles
    claimants: dict[str, SharedClaimant]  # canonical name -> claimant, in the probe's (name) order
    holders: dict[str, list[DifferingFile]]  # canonical name -> the differing paths that hold its bytes

    @classmethod
    def of(cls, group: SharedFiles) -> SharedPaths:
        claimants = {canonical(c.name): c for c in group.distributions}
        return cls(group, claimants, {name: group.holding(name) for name in claimants})

    @property
    def judged_elsewhere(self) -> bool:
        """Every claimant is verified and some bytes differ: distributions.file-collision's (and
        namespaces.cute-overlap's for flash_attn/)."""
        return all(name in VERIFIED for name in self.claimants) and self.group.differing_count > 0

    @property
    def missing(self) -> list[str]:
        return [f.path for f in self.group.differing if f.disk_hash is None]

    @property
    def unread(self) -> list[DifferingFile]:
        return [f for f in self.group.differing if f.disk_hash is not None and f.disk_hash.startswith("not hashed")]

    @property
    def neither(self) -> list[str]:
        """Differing paths, hashed, whose bytes are no claimant's."""
        held = {f.path for files in self.holders.values() for f in files}
        return [f.path for f in self.group.differing
                if f.disk_hash is not None and not f.disk_hash.startswith("not hashed") and f.path not in held]

    def last(self) -> SharedClaimant | None:
        ordered = sorted(self.claimants.values(), key=lambda c: c.installed_at or 0.0)
        return ordered[-1] if all(c.installed_at for c in ordered) else None

    def stack_lost(self) -> list[str]:
        """Differing paths a serving-stack claimant lists where no stack claimant's bytes are on disk (another
        distribution's are, or none): the stack runs code it was not released with, or misses files."""
        stack = [n for n in self.claimants if n in STACK]
        if not stack:
            return []
        held = {f.path for n in stack for f in self.holders[n]}
        return [f.path for f in self.group.differing
                if f.path not in held and not (f.disk_hash or "").startswith("not hashed")]


def overlap_findings(dists: Distributions, installer: Installer) -> Iterator[Finding]:
    overlaps = dists.overlaps
    if overlaps is None:
        return  # a report saved before the overlaps were collected
    groups = [SharedPaths.of(g) for g in overlaps.groups if len(g.distributions) >= 2]
    if not groups:
        yield DISTRIBUTIONS_SHARED_PATHS.finding(
            Status.PASS, title=f"no two of the {len(dists.items)} installed distributions install the same path",
            detail="Read from every distribution's RECORD.")
        return
    shared_with = partners(dists)
    identical: list[SharedPaths] = []
    for shared in groups:
        if shared.judged_elsewhere:
            continue
        group = shared.group
        verified = [n for n in shared.claimants if n in VERIFIED]
        if not group.differing_count and (not verified or group.empty == group.paths):
            identical.append(shared)
            continue
        yield _finding(shared, shared_with, installer)
    if identical:
        yield _identical(identical, overlaps.paths_left_out)


def _names(claimants: Iterable[SharedClaimant]) -> str:
    labels = [f"{c.name} {c.version}" if c.version else c.name for c in claimants]
    return ", ".join(labels[:-1]) + " and " + labels[-1] if len(labels) > 1 else "".join(labels)


def _where(group: SharedFiles) -> str:
    tops = sorted({p.split("/", 1)[0] + ("/" if "/" in p else "") for p in group.sample})
    return ", ".join(tops[:3]) + (" ..." if len(tops) > 3 else "")


def _finding(shared: SharedPaths, shared_with: Mapping[str, Mapping[str, int]], installer: Installer) -> Finding:
    group, claimants = shared.group, shared.claimants
    count = group.differing_count
    last = shared.last()
    held = {n: len(files) for n, files in shared.holders.items()}
    missing, unread, neither = shared.missing, shared.unread, shared.neither
    lost = shared.stack_lost()
    if count:
        parts = [f"{held[n]} hold{'s' if held[n] == 1 else ''} {c.name}'s bytes" for n, c in claimants.items()
                 if held[n]]
        parts += [f"{len(neither)} neither's"] if neither else []
        parts += [f"{len(missing)} are missing"] if missing else []
        parts += [f"{len(unread)} not hashed"] if unread else []
        shown = len(group.differing)
        whose = (", ".join(parts) or "none hashed") + (f" (of the first {shown})" if shown < count else "")
        title = (f"{_names(claimants.values())} install the same {group.paths} paths ({_where(group)}), {count} "
                 f"with other bytes: {whose}")
    else:
        title = (f"{_names(claimants.values())} install the same {group.paths} paths ({_where(group)}), with the "
                 "same bytes")
    if last is not None:
        title += f"; {last.name} was installed last"
    stack_names = [c.name for n, c in claimants.items() if n in STACK]
    detail = ("The distribution installed last overwrote the others' files at these paths, silently. "
              if count else "The bytes are the same whoever won, so nothing runs differently today. ")
    if lost:
        detail += (f"At {len(lost)} of them the bytes on disk are no serving-stack distribution's "
                   f"({' or '.join(stack_names)}): it runs another distribution's code, or misses files. ")
    detail += ("An uninstall deletes every path its RECORD lists: " + "; ".join(
        f"uninstalling {c.name} deletes the {group.paths} files that {_names(o for m, o in claimants.items() if m != n)} "
        f"{'list' if len(claimants) > 2 else 'lists'} too" for n, c in claimants.items()) + ". ")
    detail += ("Fix: uninstall the one you do not need, then reinstall (--force-reinstall --no-deps) the other, so "
               "that its own files are back; the remediations keep each in turn, the serving stack's first.")
    evidence: dict[str, Any] = {
        "distributions": [{"name": c.name, "version": c.version, "dist_info": c.dist_info, "installer": c.installer,
                           "installed_at": c.installed_at, "holds": held[n]} for n, c in claimants.items()],
        "shared": group.paths, "differing": count, "identical": group.paths - count, "sample": group.sample,
        "missing": missing[:20], "held_by_neither": neither[:20], "not_hashed": [{"path": f.path, "why": (f.disk_hash or "").removeprefix("not hashed: ")} for f in unread[:20]],
        "stack_not_on_disk": lost[:20], "installed_last": last.name if last else None,
        "uninstall_deletes": {c.name: {o.name: group.paths for m, o in claimants.items() if m != n}
                              for n, c in claimants.items()},
    }
    status = Status.FAIL if lost else Status.WARN
    return DISTRIBUTIONS_SHARED_PATHS.finding(status, title=title, detail=detail, evidence=evidence,
                                              remediation=_keep_each(shared, shared_with, installer))


def _keep_each(shared: SharedPaths, shared_with: Mapping[str, Mapping[str, int]],
               installer: Installer) -> tuple[Remediation, ...]:
    """The remediations: first, where the serving stack shares the paths with others, keep every stack claimant and
    remove the others; then keep each claimant alone (the stack's first, then the kernel packages'). Each uninstalls
    the ones removed, then reinstalls with --force-reinstall --no-deps, one at a time in the order they were
    installed, the ones kept and every other distribution whose paths that uninstall deletes, so that each one's own
    files are back."""
    claimants = shared.claimants
    order = sorted(claimants, key=lambda n: (n not in STACK, n not in VERIFIED, n))
    stack = [n for n in order if n in STACK]
    keeps = ([stack] if stack and len(stack) < len(order) else []) + [[n] for n in order]
    known = {canonical(c.name): c for c in claimants.values()}
    remedies: list[Remediation] = []
    seen: set[tuple[str, ...]] = set()
    for keep in keeps:
        if tuple(keep) in seen or any(not claimants[n].version for n in keep):
            continue
        seen.add(tuple(keep))
        removed = [n for n in order if n not in keep]
        touched = {other for n in removed for other in shared_with.get(n, {})} - set(removed)
        back = sorted((known[n] for n in touched | set(keep) if n in known and known[n].version),
                      key=lambda c: c.installed_at or 0.0)
        outside = sorted(n for n in touched if n not in known)
        command = " && ".join([installer.uninstall(*(claimants[n].name for n in removed)),
                               *(installer.install(f"{c.name}=={c.version}", reinstall=True, no_deps=True)
                                 for c in back)])
        why = (f"keep {' and '.join(claimants[n].name for n in keep)}: remove "
               f"{_names(claimants[n] for n in removed)}, then put back the files the uninstall deletes "
               f"({', '.join(c.name for c in back)}, in the order they were installed)")
        if outside:
            why += f"; it deletes paths of {', '.join(outside)} too: reinstall them as well"
        remedies.append(Remediation(command, why))
    return tuple(remedies)


def _identical(groups: list[SharedPaths], left_out: int) -> Finding:
    shown = "; ".join(f"{_names(g.claimants.values())} ({g.group.paths} path{'s' if g.group.paths > 1 else ''}: "
                      f"{', '.join(g.group.sample[:2])})" for g in groups[:5])
    more = f" and {len(groups) - 5} more" if len(groups) > 5 else ""
    return DISTRIBUTIONS_SHARED_PATHS.finding(
        Status.PASS,
        title=f"{len(groups)} set{'s' if len(groups) > 1 else ''} of distributions outside the serving stack install "
        f"the same paths with the same bytes: {shown}{more}",
        detail="The bytes are the same whoever installed last (a pkg_resources namespace `__init__.py`, an empty "
        "file). An uninstall of one deletes them from the others too; reinstall the others with --force-reinstall "
        "--no-deps after it." + (f" {left_out} more shared paths were not grouped (the cap on groups)."
                                 if left_out else ""),
        evidence={"groups": [{"distributions": [c.name for c in g.claimants.values()], "shared": g.group.paths,
                              "sample": g.group.sample} for g in groups[:50]], "count": len(groups)},
    )
