"""Rules of the namespaces check (NamespaceCheck in the package): the flash_attn namespace.

Who owns which files under flash_attn/ (RECORD), how `flash_attn` resolves on the target's sys.path
(regular package or namespace, which directories, and what a directory no distribution owns holds), what
shadows it, and the files that flash-attn and flash-attn-4 both claim. Whether a namespace `flash_attn` is fatal depends on the installed vLLM: we
judge it by the guard its own source puts around the rotary import (see dflash_doctor.checks.python.guards).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator, Mapping
from typing import Any

from dflash_doctor.checks.python.codes import (
    NAMESPACES_ABSENT,
    NAMESPACES_CUTE_OVERLAP,
    NAMESPACES_INCOMPLETE,
    NAMESPACES_LEFTOVER,
    NAMESPACES_OK,
    NAMESPACES_SHADOWED,
    NAMESPACES_V4_WITHOUT_V2,
)
from dflash_doctor.checks.python.guards import judge_site
from dflash_doctor.checks.python.namespace_layout import (
    ABSENT_IS_SKIPPED,
    Portion,
    contents_phrase,
    describe_namespace,
    namespace_portions,
    removal_remediation,
    shown_files,
    where_on_path,
)
from dflash_doctor.checks.remedy import Installer, uninstall_remediation
from dflash_doctor.facts.python.environment_shapes import Distribution, Distributions, Resolved
from dflash_doctor.facts.python.vllm_source_shapes import ImportSite, VllmSource
from dflash_doctor.knowledge.flash_attn import EXTEND_PATH_FIRST_RELEASE, FA2_RELEASES_SHIPPING_CUTE, V2_SPEC
from dflash_doctor.knowledge.vllm_imports import SERVING_PATH_SITES
from dflash_doctor.model import STOPS_SERVE, Finding, Remediation, Status

INIT = "flash_attn/__init__.py"
MODULE_NOT_FOUND_MRO = ("ModuleNotFoundError", "ImportError", "Exception", "BaseException")


def namespace_findings(dists: Distributions, resolution: Resolved, vllm_source: VllmSource,
                       installer: Installer) -> list[Finding]:
    """The namespaces check's judgement of how `flash_attn` resolves (`resolution`) and who owns its files."""
    claimants = _claimants(dists)
    findings = [
        *_shadowing(resolution, claimants),
        *_v4_without_v2(dists, resolution, claimants, vllm_source, installer),
        *_unowned_portions(dists, resolution, vllm_source),
        *_cute_overlap(dists, claimants, installer),
    ]
    if not findings:
        findings.append(_healthy(dists, resolution, claimants, vllm_source))
    return findings


def _claimants(dists: Distributions) -> dict[str, Distribution]:
    """Distributions that install anything under flash_attn/, by canonical name."""
    return {d.canonical: d for d in dists.seen() if any(c.path.startswith("flash_attn/") for c in d.claims)}


def _owner_of_init(claimants: Mapping[str, Distribution]) -> Distribution | None:
    """The distribution whose flash_attn/__init__.py is on disk (an uninstall of another may have deleted it)."""
    return next((d for d in claimants.values() if any(c.path == INIT and c.disk_hash for c in d.claims)), None)


def _healthy(dists: Distributions, resolution: Resolved, claimants: Mapping[str, Distribution],
             vllm_source: VllmSource) -> Finding:
    if not resolution.found:
        return NAMESPACES_ABSENT.finding(
            Status.PASS,
            title=(f"flash_attn is not installed: vLLM {vllm_source.version}'s guarded import skips it and uses its "
                   "bundled flash-attention") if vllm_source.installed else
            f"neither flash_attn nor vLLM is installed here; {ABSENT_IS_SKIPPED}",
        )
    if resolution.namespace:
        # Every directory of it is owned, by distributions other than flash-attn-4, none with __init__.py.
        portions = namespace_portions(resolution, dists)
        status, consequence = _vllm_consequence(vllm_source)
        return NAMESPACES_INCOMPLETE.finding(
            status,
            title=f"flash_attn is a namespace package {describe_namespace(portions)} — {consequence}",
            detail="No installed distribution provides flash_attn/__init__.py, so flash_attn.ops does not exist. "
            "Reinstall the distribution that should provide it (--force-reinstall --no-deps puts its files back).",
            evidence={"search_locations": resolution.search_locations,
                      "portions": [_portion_evidence(p) for p in portions]},
        )
    owner = _owner_of_init(claimants)
    owner_label = owner.label() if owner else "no installed distribution"
    return NAMESPACES_OK.finding(
        Status.PASS,
        title=f"flash_attn is a regular package from {owner_label} ({resolution.origin})",
        evidence={"origin": resolution.origin, "claimants": sorted(d.label() for d in claimants.values())},
    )


def _shadowing(resolution: Resolved, claimants: Mapping[str, Distribution]) -> Iterator[Finding]:
    """A flash_attn found on sys.path before (or instead of) the installed one."""
    installed_dirs = {d.location.rstrip("/") for d in claimants.values()}
    for portion in resolution.portions:
        if portion.kind == "namespace-portion":
            continue  # a bare directory only joins a namespace; a regular package later still wins
        if portion.entry.rstrip("/") in installed_dirs:
            return  # the first regular candidate is an installed distribution's: nothing shadows it
        where = "the current directory" if portion.entry in ("", ".") else portion.entry
        yield NAMESPACES_SHADOWED.finding(
            Status.FAIL,
            title=f"flash_attn is shadowed by {portion.path} ({portion.kind}, from {where} on sys.path)",
            detail="Python imports the first flash_attn on sys.path; this one belongs to no installed "
            "distribution (a source checkout, a stray copy in the working directory, PYTHONPATH or the "
            "user site), so the installed flash-attn is never used.",
            evidence={"shadow": portion.to_json(), "installed_in": sorted(installed_dirs)},
            remediation=(
                Remediation(f"mv {shlex.quote(portion.path)} {shlex.quote(portion.path + '.disabled')}",
                            "move the stray copy out of the way (or run from another directory, or fix PYTHONPATH)"),
            ),
        )
        return


def _rotary_sites(vllm_source: VllmSource) -> list[ImportSite]:
    serving = {path for path, _ in SERVING_PATH_SITES.value}
    return [s for s in vllm_source.sites if s.file in serving and s.module.startswith("flash_attn.ops")]


def _v4_without_v2(dists: Distributions, resolution: Resolved, claimants: Mapping[str, Distribution],
                   vllm_source: VllmSource, installer: Installer) -> Iterator[Finding]:
    v4 = claimants.get("flash-attn-4") or dists.get("flash-attn-4")
    if v4 is None or _owner_of_init(claimants) is not None:
        return
    if not resolution.namespace:
        return  # something else provides a regular flash_attn (shadowing reports it)
    status, consequence = _vllm_consequence(vllm_source)
    needed_by = [d.label() for d in dists.requiring("flash-attn-4")]
    remediation = []
    if not needed_by:
        remediation.append(uninstall_remediation(
            dists, [v4], installer,
            "nothing installed requires flash-attn-4: without it flash_attn is absent and vLLM's guard falls back "
            "cleanly" + ("" if installer.uv else "; the directories pip's uninstall leaves (an empty flash_attn/, "
                         "stale __pycache__) go too, else they keep flash_attn a namespace package"),
        ))
    remediation.append(Remediation(
        installer.install(V2_SPEC.value, no_build_isolation=True),
        "or install flash-attn v2 beside it, built against the installed torch (no release coexists cleanly "
        "yet: v2 overwrites flash-attn-4's files under flash_attn/cute) ...",
    ))
    remediation.append(Remediation(
        installer.install(f"flash-attn-4=={v4.version}", reinstall=True, no_deps=True),
        "... then put flash-attn-4's own files back on top (v2 does not use flash_attn/cute)",
    ))
    yield NAMESPACES_V4_WITHOUT_V2.finding(
        status,
        title=f"{v4.label()} installs flash_attn/cute only and flash-attn v2 is absent: flash_attn is a namespace "
        f"package without flash_attn.ops — {consequence}",
        detail="flash-attn-4 ships flash_attn/cute/ and no flash_attn/__init__.py, so `flash_attn` resolves as "
        "a namespace package: find_spec('flash_attn') is not None, yet `flash_attn.ops` does not exist."
        + (f" Required by: {', '.join(needed_by)}." if needed_by else ""),
        evidence={"search_locations": resolution.search_locations, "flash_attn_4": v4.version,
                  "required_by": needed_by, "vllm": vllm_source.version,
                  "vllm_sites": [f"{s.file}:{s.line}" for s in _rotary_sites(vllm_source)],
                  STOPS_SERVE: status is Status.FAIL},
        remediation=tuple(remediation),
    )


def _portion_evidence(portion: Portion) -> dict[str, Any]:
    return {"path": portion.path, "on_path_from": where_on_path(portion),
            "owners": [d.label() for d in portion.owners],
            "contents": portion.contents.to_json() if portion.contents is not None else {}}


def _unowned_portions(dists: Distributions, resolution: Resolved, vllm_source: VllmSource) -> Iterator[Finding]:
    """A directory without __init__.py that no distribution owns makes flash_attn a namespace package all the
    same: what an uninstall left behind, or a stray directory in the working directory or on PYTHONPATH."""
    if not resolution.namespace:
        return  # a regular flash_attn later on the path wins over any namespace portion
    portions = namespace_portions(resolution, dists)
    for portion in portions:
        if portion.owners:
            continue
        status, consequence = _vllm_consequence(vllm_source)
        contents = portion.contents
        yield NAMESPACES_LEFTOVER.finding(
            status,
            title=f"{portion.path} has no __init__.py and no installed distribution owns it "
            f"({contents_phrase(portion)}): flash_attn is a namespace package without flash_attn.ops — "
            f"{consequence}",
            detail="A directory on sys.path without __init__.py is a namespace portion, whoever left it: "
            "find_spec('flash_attn') is not None, yet `flash_attn.ops` does not exist. `pip uninstall` leaves "
            "such a directory behind (an empty flash_attn/ after flash-attn-4, or __pycache__ with bytecode other "
            "interpreters wrote); a source checkout or a copy leaves one in the working directory or on PYTHONPATH. "
            f"This one is on sys.path from {where_on_path(portion)}."
            + (f" Files in it: {shown_files(contents)}." if contents is not None and contents.file_count else ""),
            evidence={**_portion_evidence(portion), "search_locations": resolution.search_locations,
                      "vllm": vllm_source.version,
                      "vllm_sites": [f"{s.file}:{s.line}" for s in _rotary_sites(vllm_source)],
                      STOPS_SERVE: status is Status.FAIL},
            remediation=(removal_remediation(portion),),
        )


def _vllm_consequence(vllm_source: VllmSource) -> tuple[Status, str]:
    """FAIL when vLLM's serving path imports flash_attn.ops where a namespace package lets it through: it stops
    `vllm serve` (evidence STOPS_SERVE); WARN otherwise."""
    if not vllm_source.installed:
        return Status.WARN, "vLLM is not installed here; vLLM 0.18-0.23 would die at engine start on it"
    sites = _rotary_sites(vllm_source)
    version = vllm_source.version
    if not sites and vllm_source.errors:  # what the unread file imports is not known: never a quiet verdict
        unread = vllm_source.errors[0]
        return Status.ERROR, (f"vLLM {version}'s serving-path file {unread.file} could not be read ({unread.error}): "
                              "whether it imports flash_attn.ops is not known")
    if not sites:
        return Status.WARN, f"vLLM {version} does not import flash_attn.ops on its serving path"
    verdicts = [(s, judge_site(s, MODULE_NOT_FOUND_MRO, {"flash_attn": True})) for s in sites]
    fatal = [s for s, v in verdicts if v.outcome in ("raises", "maybe-raises")]
    if fatal:
        site = fatal[0]
        guard = next((g for g in site.guards if g.kind == "if"), None)
        why = f"behind `if {guard.test}`" if guard else "unguarded"
        return Status.FAIL, (f"vLLM {version} dies at engine start: {site.file}:{site.line} imports "
                             f"{site.module} {why}, which a namespace package passes")
    caught = next((v.caught_by for _, v in verdicts if v.caught_by), None)
    if caught:
        return Status.WARN, (f"vLLM {version} survives (its {caught.kind}({', '.join(caught.catches)}) "
                             "absorbs the ModuleNotFoundError) but its flash-attn rotary path is off")
    return Status.WARN, f"vLLM {version} never reaches the import on CUDA"


def _cute_overlap(dists: Distributions, claimants: Mapping[str, Distribution],
                  installer: Installer) -> Iterator[Finding]:
    v2, v4 = claimants.get("flash-attn"), claimants.get("flash-attn-4")
    if v2 is None or v4 is None:
        return
    v2_claims = {c.path: c for c in v2.claims}
    shared = [(v2_claims[c.path], c) for c in v4.claims if c.path in v2_claims]
    if not shared:
        return
    holds_v4 = [a.path for a, b in shared if b.disk_hash and b.disk_hash == b.hash != a.hash]
    holds_v2 = [a.path for a, b in shared if a.disk_hash and a.disk_hash == a.hash != b.hash]
    same = [a.path for a, b in shared if a.hash == b.hash]
    missing = [a.path for a, b in shared if a.disk_hash is None]
    # flash-attn v2 never imports flash_attn/cute; flash-attn-4 is nothing but. So the environment works
    # while flash-attn-4's bytes are the ones on disk, and is broken where v2's stale copy won.
    broken = bool(holds_v2 or missing)
    remediation: tuple[Remediation, ...]
    if broken:
        remediation = (
            Remediation(installer.install(f"flash-attn-4=={v4.version}", reinstall=True, no_deps=True),
                        "put flash-attn-4's files back on top of v2's stale copies"),
            Remediation(installer.uninstall(v4.name),
                        "or, if nothing uses flash-attn-4, remove it ..."),
            Remediation(installer.install(f"flash-attn=={v2.version}", reinstall=True, no_deps=True,
                                          no_build_isolation=True),
                        "... and reinstall flash-attn so that its own RECORD matches the disk again"),
        )
    else:
        remediation = (
            Remediation(f"{installer.uninstall(v4.name)} && "
                        f"{installer.install(f'flash-attn=={v2.version}', reinstall=True, no_deps=True, no_build_isolation=True)}",
                        "when you remove flash-attn-4 later, reinstall flash-attn right after: the uninstall deletes "
                        "files both claim"),
        )
    yield NAMESPACES_CUTE_OVERLAP.finding(
        Status.FAIL if broken else Status.WARN,
        title=f"{v2.label()} and {v4.label()} both claim {len(shared)} files under flash_attn/cute/: "
        f"{len(holds_v4)} hold flash-attn-4's bytes, {len(holds_v2)} hold flash-attn's"
        + (f", {len(missing)} are missing" if missing else ""),
        detail="Whichever was installed last overwrote the other's files. "
        + ("flash-attn v2's stale copy of flash_attn/cute won, so flash-attn-4 runs old code against its new "
           "dependencies. " if holds_v2 else "")
        + ("Files both claim are gone (an uninstall of one deleted them). " if missing else "")
        + "Uninstalling either one deletes files the other lists in its RECORD. "
        + (f"Every flash-attn release on PyPI ({', '.join(FA2_RELEASES_SHIPPING_CUTE.value)}) ships that stale "
           "copy; " + FA2_RELEASES_SHIPPING_CUTE.note if broken else ""),
        evidence={"shared": len(shared), "hold_flash_attn_4": holds_v4[:20], "hold_flash_attn": holds_v2[:20],
                  "identical_in_both": len(same), "missing": missing[:20],
                  "released_fix": EXTEND_PATH_FIRST_RELEASE.value},
        remediation=remediation,
    )
