"""Rules of the `distributions` check for the kernel packages vLLM and flash-attn-4 load at run time
(knowledge.kernel_wheels): paths two verified distributions both install with different bytes
(distributions.file-collision: the nvidia-cutlass-dsl[cu13] halves), and a kernel pin that another installed
distribution's requirement broke (distributions.requirement-broken-by). Their codes are in checks.distributions."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from dflash_doctor.checks.python.codes import (
    DISTRIBUTIONS_FILE_COLLISION,
    DISTRIBUTIONS_REQUIREMENT_BROKEN_BY,
)
from dflash_doctor.checks.python.requirements import KERNELS, STACK, VERIFIED, requirements_of, satisfies
from dflash_doctor.checks.remedy import Installer
from dflash_doctor.facts.python.envfacts import canonical, release_within
from dflash_doctor.facts.python.environment_shapes import (
    DifferingFile,
    Distribution,
    Distributions,
    SharedClaimant,
)
from dflash_doctor.knowledge.kernel_wheels import CUTLASS_DSL_SPLIT, PIN_SKEWS
from dflash_doctor.knowledge.vllm_imports import NEVER_IMPORTED
from dflash_doctor.model import Finding, Remediation, Status
from dflash_doctor.shape import frozen_dataclass

if TYPE_CHECKING:
    from packaging.requirements import Requirement

__all__ = ["BreakCause", "broken_by", "shared_files", "unmet_cause"]


def shared_files(dists: Distributions, installer: Installer) -> Iterator[Finding]:
    """Paths two verified distributions both list, with different bytes: whose are on disk (the probe hashed only
    those paths)."""
    split = CUTLASS_DSL_SPLIT.value
    for group in dists.shared_files:
        differing = [f for f in group.differing if not f.path.startswith("flash_attn/")]  # namespaces.cute-overlap
        claimants = {canonical(c.name): c for c in group.distributions}
        if not differing or len(claimants) < 2:
            continue
        holders = {name: group.holding(name) for name in claimants}
        neither = [f.path for f in differing if not any(f in held for held in holders.values())]
        ordered = sorted(claimants.values(), key=lambda c: c.installed_at or 0.0)
        last = ordered[-1] if all(c.installed_at for c in ordered) else None
        names = " and ".join(f"{c.name} {c.version}" for c in claimants.values())
        count = group.differing_count
        evidence: dict[str, Any] = {
            "distributions": [{"name": c.name, "version": c.version, "dist_info": c.dist_info,
                               "installed_at": c.installed_at, "holds": len(holders[n])}
                              for n, c in claimants.items()],
            "shared": group.paths, "differing": count, "held_by_neither": neither[:20],
            "installed_last": last.name if last else None,
            "sample": [f.path for f in differing[:5]],
        }
        order = f" ({last.name} was installed last)" if last else ""
        if {canonical(split.base), canonical(split.winner)} <= set(claimants):
            yield _cutlass_split(claimants[canonical(split.winner)], claimants[canonical(split.base)],
                                 holders, group.paths, count, neither, order, last, evidence, installer)
            continue
        on_disk = [claimants[n] for n, held in holders.items() if held and len(held) == len(differing)]
        whose = f"the files on disk are {on_disk[0].name}'s" if on_disk else (
            "the files on disk are a mix" + (f", {len(neither)} of them neither's" if neither else ""))
        yield DISTRIBUTIONS_FILE_COLLISION.finding(
            Status.WARN,
            title=f"{names} both install {group.paths} paths, {count} with different bytes: {whose}{order}",
            detail="The distribution installed last overwrote the other's files, silently; uninstalling either "
            "deletes files the other still lists in its RECORD. Reinstall (--no-deps) the one whose files the "
            "environment needs.",
            evidence=evidence,
            remediation=tuple(
                Remediation(installer.install(f"{c.name}=={c.version}", reinstall=True, no_deps=True),
                            f"put {c.name} {c.version}'s own files back at the shared paths")
                for c in claimants.values() if c.version and not (on_disk and c is on_disk[0])),
        )


def _cutlass_split(winner: SharedClaimant, base: SharedClaimant, holders: Mapping[str, list[DifferingFile]],
                   shared: int, count: int, neither: list[str], order: str, last: SharedClaimant | None,
                   evidence: dict[str, Any], installer: Installer) -> Finding:
    """The two halves of nvidia-cutlass-dsl[cu13] (knowledge.kernel_wheels.CUTLASS_DSL_SPLIT)."""
    split = CUTLASS_DSL_SPLIT.value
    held = len(holders[canonical(winner.name)])
    pair = f"{winner.name} {winner.version} and {base.name} {base.version}"
    if held == count and not neither:
        return DISTRIBUTIONS_FILE_COLLISION.finding(
            Status.PASS,
            title=f"{pair} share {shared} paths, {count} with different bytes: {winner.name}'s files are in place"
            + order,
            detail=f"{base.name} was installed first and its files were overwritten, as `nvidia-cutlass-dsl[cu13]` "
            f"needs. Uninstalling {base.name} would delete {winner.name}'s files at the shared paths; a reinstall "
            f"of {base.name} alone would put its own back. {CUTLASS_DSL_SPLIT.source}.",
            evidence=evidence,
        )
    spec = f"{winner.name}=={winner.version}"
    base_held = len(holders[canonical(base.name)])
    whose = [f"{base_held} hold {base.name}'s" + (", installed last" if last is not None and last.name == base.name else "")
             ] if base_held else []
    if neither:
        whose.append(f"{len(neither)} neither's")
    symptoms = "; ".join(split.symptoms)
    return DISTRIBUTIONS_FILE_COLLISION.finding(
        Status.FAIL,
        title=f"{winner.name} {winner.version}: {count - held} of the {shared} paths it shares with {base.name} "
        f"{base.version} do not hold its files" + (f" ({', '.join(whose)})" if whose else "")
        + ": CuTe DSL kernels run the CUDA-12 base build",
        detail=f"`nvidia-cutlass-dsl[cu13]` installs both halves into nvidia_cutlass_dsl/; the one installed last "
        f"wins, silently. With {base.name}'s files in place vLLM's CuTe DSL kernels fail: {symptoms}. "
        f"nvidia-cutlass-dsl {split.fixed_in_cutlass_dsl} (vLLM {split.fixed_in_vllm} and later) ships the "
        f"CuTe sources in one wheel. {CUTLASS_DSL_SPLIT.source}.",
        evidence=evidence,
        remediation=(
            Remediation(installer.install(spec, reinstall=True, no_deps=True),
                        f"put {winner.name}'s files back over {base.name}'s (what vLLM's own Docker image does)"),
            Remediation(installer.install(f"vllm>={split.fixed_in_vllm}"),
                        f"or a vLLM that pins nvidia-cutlass-dsl {split.fixed_in_cutlass_dsl} or later, whose "
                        "halves no longer share files"),
        ),
    )


def broken_by(dists: Distributions, marker_env: Mapping[str, str], installer: Installer) -> Iterator[Finding]:
    """A kernel package at a version one verified distribution's Requires-Dist excludes: which installed
    distribution requires that version, and which was installed last."""
    for requirer in dists.seen():
        if requirer.canonical not in VERIFIED:
            continue
        for requirement in requirements_of(requirer, marker_env):
            name = canonical(requirement.name)
            if name not in KERNELS or name in STACK or not requirement.specifier:
                continue  # the stack's pins on each other are requirement-unmet's (named_cause adds the cause)
            found = dists.get(name)
            if found is None or found.version is None or satisfies(requirement, found.version):
                continue
            cause = BreakCause.of(dists, requirer, name, found.version, marker_env)
            spec = f"{requirement.name}{requirement.specifier}"
            culprit = cause.culprit
            symptom = PIN_SKEWS.value.symptoms.get(name)
            remediation = [Remediation(installer.install(spec),
                                       f"put back the {requirement.name} that {requirer.label()} pins"
                                       + (f" (then {culprit[0].name}'s requirement is unmet: remove it if nothing "
                                          "needs it)" if culprit else ""))]
            if culprit is not None:
                remediation.append(Remediation(
                    f"{installer.uninstall(culprit[0].name)} && {installer.install(spec)}",
                    f"or remove {culprit[0].label()}, which brought {name} {found.version}, and put back the pinned one"))
            unused = _unused_by_vllm(requirer, dists)
            yield DISTRIBUTIONS_REQUIREMENT_BROKEN_BY.finding(
                Status.FAIL if unused is None else Status.WARN,
                title=f"{requirer.label()} requires {spec}, found {found.version}: {cause.phrase()}"
                + (f"; `vllm serve` does not import it ({unused})" if unused is not None else ""),
                detail="Read from each installed distribution's METADATA (Requires-Dist) and the times their "
                "installers wrote RECORD. " + (f"This skew fails at run time: {symptom}. " if symptom else "")
                + (f"No vLLM release read imports {requirer.name}'s code: what else imports it fails "
                   f"({NEVER_IMPORTED.source}; {NEVER_IMPORTED.read_from}). " if unused is not None else "")
                + f"{PIN_SKEWS.source}.",
                evidence={"requirer": requirer.name, "requirer_version": requirer.version,
                          "requirement": str(requirement), "found": found.version, **cause.evidence()},
                remediation=tuple(remediation),
            )


def _unused_by_vllm(requirer: Distribution, dists: Distributions) -> str | None:
    """Why `vllm serve` never loads `requirer` (knowledge.vllm_imports.NEVER_IMPORTED), where the installed vLLM is
    among the releases read; None where it may."""
    known = NEVER_IMPORTED.value.get(requirer.canonical)
    vllm = dists.get("vllm")
    if known is None or vllm is None:
        return None
    module, oldest, newest = known
    return f"vLLM {vllm.version} imports no {module}" if release_within(vllm.version, oldest, newest) else None


@frozen_dataclass(frozen=True)
class BreakCause:
    """Who brought the version that breaks `requirer`'s pin: the installed distributions whose Requires-Dist
    the found version meets (oldest install first), the last of them, and whether it came after the requirer."""

    requirer: Distribution
    found: str
    wanting: tuple[tuple[Distribution, Requirement], ...]
    after: bool

    @classmethod
    def of(cls, dists: Distributions, requirer: Distribution, name: str, found: str,
           marker_env: Mapping[str, str]) -> BreakCause:
        wanting = [(other, theirs) for other in dists.seen() if other is not requirer
                   for theirs in requirements_of(other, marker_env)
                   if canonical(theirs.name) == name and theirs.specifier and satisfies(theirs, found)]
        wanting.sort(key=lambda w: w[0].installed_at or 0.0)
        times = [d.installed_at for d, _ in wanting] + [requirer.installed_at]
        after = bool(wanting and all(times) and (wanting[-1][0].installed_at or 0) > (requirer.installed_at or 0))
        return cls(requirer, found, tuple(wanting), after)

    @property
    def culprit(self) -> tuple[Distribution, Requirement] | None:
        return self.wanting[-1] if self.wanting else None

    def phrase(self) -> str:
        if self.culprit is None:
            return f"no installed distribution requires {self.found}: it was installed by hand"
        dist, requirement = self.culprit
        return (f"{dist.label()} requires {requirement.name}{requirement.specifier}"
                + (f" and was installed after {self.requirer.name}" if self.after else ""))

    def evidence(self) -> dict[str, Any]:
        return {"required_by": [{"name": d.name, "version": d.version, "requirement": str(r),
                                 "installed_at": d.installed_at} for d, r in self.wanting],
                "installed_after_requirer": self.after}


def unmet_cause(dists: Distributions, requirer: Distribution, requirement: Requirement, found: str,
                marker_env: Mapping[str, str]) -> BreakCause | None:
    """Who brought the installed version `found` that does not meet `requirer`'s requirement (a
    distributions.requirement-unmet finding names it): None when no installed distribution requires it."""
    cause = BreakCause.of(dists, requirer, canonical(requirement.name), found, marker_env)
    return cause if cause.culprit is not None else None
