"""Rules of the distributions check (DistributionsCheck in the package): installed distributions.

Judges the stack's versions, its requirements as the installed metadata states them (vLLM pins torch
exactly), duplicate dist-infos, RECORD integrity of the stack, paths two distributions install (overlaps.py), and
metadata too broken to read.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from dflash_doctor.checks.python.codes import (
    DISTRIBUTIONS_DUPLICATE,
    DISTRIBUTIONS_FILE_NOT_REGULAR,
    DISTRIBUTIONS_METADATA_BROKEN,
    DISTRIBUTIONS_RECORD_BROKEN,
    DISTRIBUTIONS_RECORD_ESCAPES,
    DISTRIBUTIONS_RECORD_MISMATCH,
    DISTRIBUTIONS_RECORD_MISSING,
    DISTRIBUTIONS_REQUIREMENT_MISSING,
    DISTRIBUTIONS_REQUIREMENT_UNMET,
    DISTRIBUTIONS_REQUIREMENTS_OK,
    DISTRIBUTIONS_SERVE_PATH_UNREAD,
    DISTRIBUTIONS_STACK,
)
from dflash_doctor.checks.python.kernel_packages import broken_by, shared_files, unmet_cause
from dflash_doctor.checks.python.overlaps import overlap_findings
from dflash_doctor.checks.python.requirements import STACK, VERIFIED, requirements_of, unmet_requirements
from dflash_doctor.checks.remedy import Installer
from dflash_doctor.facts.python.envfacts import canonical, release, release_within
from dflash_doctor.facts.python.environment_shapes import Distribution, Distributions, Target
from dflash_doctor.facts.python.vllm_serve_path import import_names, matches
from dflash_doctor.facts.python.vllm_serve_path import unmet_requirements as requirements_unmet
from dflash_doctor.facts.python.vllm_source_shapes import ServeImport, VllmServeImports
from dflash_doctor.knowledge.stack import OPTIONAL_AT_SERVE
from dflash_doctor.knowledge.vllm_imports import IMPORTED_AT_ENGINE_START, IMPORTED_THROUGH, EngineStartImport
from dflash_doctor.model import JSON, Finding, Remediation, Status

if TYPE_CHECKING:
    from packaging.requirements import Requirement


def distribution_findings(dists: Distributions, target: Target, serve: VllmServeImports | None) -> Iterator[Finding]:
    """The distributions check's judgement; `serve` is what `vllm serve` imports on its way up (None in a report
    saved before it was collected: vLLM's requirements are then judged on the stack as before)."""
    installer = Installer.for_target(target)
    marker_env = target.marker_environment
    yield _stack_versions(dists)
    yield from _serve_path_unread(serve)
    yield from _broken_metadata(dists, installer)
    yield from _requirements(dists, marker_env, installer, _serve_path(serve, dists), target.environ.values)
    yield from _duplicates(dists)
    yield from _record_integrity(dists, installer)
    yield from _record_escapes(dists, installer)
    yield from _not_regular(dists, installer)
    yield from shared_files(dists, installer)
    yield from overlap_findings(dists, installer)
    yield from broken_by(dists, marker_env, installer)


def _stack_versions(dists: Distributions) -> Finding:
    versions = {name: dists.version(name) for name in STACK}
    present = [f"{name} {v}" for name, v in versions.items() if v]
    absent = [name for name, v in versions.items() if not v]
    title = "stack: " + (", ".join(present) if present else "none of the serving stack is installed")
    return DISTRIBUTIONS_STACK.finding(
        Status.PASS,
        title=title,
        detail=("not installed: " + ", ".join(absent)) if absent else "",
        evidence={"versions": versions, "locations": {n: d.location for n in STACK if (d := dists.get(n))}},
    )


def _broken_metadata(dists: Distributions, installer: Installer) -> Iterator[Finding]:
    for dist in dists.items:
        for problem, code in ((dist.metadata_error, DISTRIBUTIONS_METADATA_BROKEN),
                              (dist.record.error, DISTRIBUTIONS_RECORD_BROKEN)):
            if not problem:
                continue
            is_stack = dist.canonical in STACK
            yield code.finding(
                Status.FAIL if is_stack or code is DISTRIBUTIONS_METADATA_BROKEN else Status.WARN,
                title=f"{dist.label()}: {problem.file} is unreadable: {problem.error}",
                detail="pip, uv and importlib.metadata read this file; while it is broken they cannot "
                "see, upgrade or uninstall the distribution cleanly.",
                evidence={"file": problem.file, "error": problem.error, "location": dist.location},
                remediation=_reinstall(dist, installer),
            )


def _reinstall(dist: Distribution, installer: Installer) -> tuple[Remediation, ...]:
    dist_info = shlex.quote(dist.dist_info)
    spec = f"{dist.name}=={dist.version}" if dist.version else dist.name
    return (
        Remediation(f"rm -rf {dist_info}", "remove the broken metadata by hand: no installer can read it"),
        Remediation(installer.install(spec, reinstall=True, no_deps=True), "then install the distribution again"),
    )


def _requirements(
    dists: Distributions, marker_env: Mapping[str, str], installer: Installer, serve: VllmServeImports | None,
    environ: Mapping[str, str],
) -> Iterator[Finding]:
    unmet = unmet_requirements(dists, marker_env)
    by_serve_path: list[Finding] = []
    if serve is not None:
        # vLLM's requirements, all of them, are judged by what `vllm serve` imports; the rest as before
        unmet = [u for u in unmet if canonical(u[0].name) != "vllm"]
        by_serve_path = list(_vllm_requirements(dists, marker_env, installer, serve, environ))
    if not unmet and not by_serve_path:
        yield DISTRIBUTIONS_REQUIREMENTS_OK.finding(
            Status.PASS,
            title="every requirement of the installed stack is satisfied",
        )
        return
    yield from by_serve_path
    for dist, requirement, found in unmet:
        spec = f"{requirement.name}{requirement.specifier}"
        optional = OPTIONAL_AT_SERVE.value.get(canonical(requirement.name)) \
            if found is None and canonical(dist.name) == "vllm" else None
        if found is None:
            title = f"{dist.label()} requires {spec}, which is not installed"
            if optional is not None:
                title += (f": `vllm serve` starts without it (vLLM looks for {optional[0]} before importing it); "
                          f"{optional[1]} fail when used")
        else:
            title = f"{dist.label()} requires {spec}, found {found}"
        yield _unmet_finding(
            dists, marker_env, dist, requirement, found,
            status=Status.WARN if optional is not None else Status.FAIL,
            title=title,
            detail="Read from the installed METADATA (Requires-Dist)."
            + (f" {OPTIONAL_AT_SERVE.source}." if optional is not None else "")
            + (" Compiled extensions built against the required torch fail with `undefined symbol` against "
               "another one." if canonical(requirement.name) == "torch" and requirement.specifier else ""),
            evidence={"requirer": dist.name, "requirer_version": dist.version, "requirement": str(requirement),
                      "found": found},
            remediation=(
                Remediation(installer.install(spec), f"install the {requirement.name} that {dist.label()} requires"),
                Remediation(
                    installer.install(f"{dist.name}=={dist.version}", reinstall=True),
                    f"or let the installer resolve {dist.name}'s requirements again",
                ),
            ),
        )


def _unmet_finding(dists: Distributions, marker_env: Mapping[str, str], requirer: Distribution,
                   requirement: Requirement, found: str | None, *, status: Status, title: str, detail: str,
                   evidence: dict[str, JSON], remediation: tuple[Remediation, ...]) -> Finding:
    """requirement-missing when `found` is None; else requirement-unmet, with the install that brought the other
    version named in its title and evidence where an installed distribution requires that version."""
    if found is None:
        return DISTRIBUTIONS_REQUIREMENT_MISSING.finding(status, title, detail, evidence=evidence,
                                                         remediation=remediation)
    cause = unmet_cause(dists, requirer, requirement, found, marker_env)
    if cause is not None:
        title, evidence = f"{title}: {cause.phrase()}", {**evidence, **cause.evidence()}
    return DISTRIBUTIONS_REQUIREMENT_UNMET.finding(status, title, detail, evidence=evidence, remediation=remediation)


def _serve_path(serve: VllmServeImports | None, dists: Distributions) -> VllmServeImports | None:
    """The scan of what `vllm serve` imports, when it can judge vLLM's requirements: it read the installed vLLM
    (the one Python sees) to the end. Else None: vLLM's requirements are judged as before the scan existed."""
    vllm = dists.get("vllm")
    if serve is None or vllm is None or serve.root is None or not serve.complete or not serve.imports:
        return None
    return serve


def _serve_path_unread(serve: VllmServeImports | None) -> Iterator[Finding]:
    """The modules on the way up the scan could not read: what they import was not seen, so a requirement judged
    a warning (not imported on the way up) may be imported there. An error, never a quiet pass: exit 1."""
    if serve is None or not serve.errors:
        return
    first = serve.errors[0]
    more = len(serve.errors) - 1
    yield DISTRIBUTIONS_SERVE_PATH_UNREAD.finding(
        Status.ERROR,
        title=f"`vllm serve`'s way up could not be read to the end: {first.file}: {first.error}"
        + (f" (and {more} more file{'s' if more > 1 else ''})" if more > 0 else ""),
        detail="What these modules import was not seen: a requirement of vLLM judged a warning below (not imported "
        "on the way up) may be imported there, and the rest of the scan went on without them.",
        evidence={"errors": [{"file": e.file, "error": e.error} for e in serve.errors]},
    )


_REACH_WORDS = {
    "conditional": "imports it only under a condition on its way up",
    "guarded": "imports it on its way up inside a try whose except catches the ImportError",
}


def _vllm_requirements(dists: Distributions, marker_env: Mapping[str, str], installer: Installer,
                       serve: VllmServeImports, environ: Mapping[str, str]) -> Iterator[Finding]:
    """Each requirement of vLLM that no installed version meets: a failure when `vllm serve` imports it on its
    way up (the scan in facts.python.vllm_serve_path), a warning in pip check's words otherwise, naming what needs
    it."""
    vllm = dists.get("vllm")
    if vllm is None:
        return
    unmet = requirements_unmet(dists, marker_env, "vllm")
    reached = _reached_distributions(dists, serve) if any(found is None for _, found in unmet) else []
    required_by: dict[str, tuple[Distribution, ServeImport]] | None = None  # read once, when first asked
    for requirement, found in unmet:
        names = import_names(requirement.name, dists)
        sites = [e for e in serve.imports if any(matches(e.module, e.names, n) for n in names)]
        site = min(sites, key=lambda e: ("serve", "conditional", "guarded").index(e.reach), default=None)
        through = _imported_through(requirement.name, serve) if found is None and (
            site is None or site.reach != "serve") else None
        if through is not None:
            site = through
        engine_start = IMPORTED_AT_ENGINE_START.value.get(canonical(requirement.name))
        at_start = _imported_at_engine_start(engine_start, names, vllm.version, serve, environ) \
            if found is None and (site is None or site.reach != "serve") else None
        if at_start is not None:
            site = at_start
        if found is None and (site is None or site.reach != "serve"):
            if required_by is None:
                required_by = _required_on_the_way_up(reached, marker_env)
            needed_by = required_by.get(canonical(requirement.name))
        else:
            needed_by = None
        if needed_by is not None:
            site = needed_by[1]
        spec = f"{requirement.name}{requirement.specifier}"
        pip_words = (f"{vllm.label()} requires {spec}, which is not installed" if found is None
                     else f"{vllm.label()} requires {spec}, found {found}")
        fatal = site is not None and site.reach == "serve"
        if fatal and site is not None:
            # the module that is missing: the requirement's own import name, not the package that imports it
            missing = next((n for n in names if matches(site.module, site.names, n)), names[0])
            title = pip_words
            via = (f"`vllm serve` imports {site.module} on its way up, which imports {requirement.name} "
                   f"({IMPORTED_THROUGH.value[canonical(requirement.name)][1]}; knowledge.vllm_imports.IMPORTED_THROUGH)"
                   if through is not None else
                   f"`vllm serve` imports {site.module} when the engine starts: {engine_start.what} unless "
                   f"{engine_start.variable}=0 (knowledge.vllm_imports.IMPORTED_AT_ENGINE_START, vLLM {vllm.version})"
                   if at_start is not None and engine_start is not None else
                   f"`vllm serve` imports {site.module} on its way up, and {needed_by[0].label()} requires "
                   f"{requirement.name} too (its own Requires-Dist)" if needed_by is not None else
                   f"`vllm serve` imports {site.module} on its way up")
            detail = (f"{via}{'' if at_start is not None else ', unconditionally'}: {site.file}:{site.line}, "
                      f"reached from {_route(site)}. "
                      + (f"It stops with `ModuleNotFoundError: No module named '{missing.split('.')[0]}'` "
                         "before it serves." if found is None else
                         "It runs against a version vLLM was not released with."))
        else:
            title = f"{pip_words}; {_not_on_the_way_up(site, serve, names)}"
            detail = (f"The doctor followed the module-level imports of {serve.modules_reached} modules of vLLM from "
                      f"`{serve.entry}` and the modules `vllm serve` loads by name "
                      f"({', '.join(r.module for r in serve.roots if r.found)}); "
                      + (f"{site.file}:{site.line} ({_REACH_WORDS[site.reach]}), reached from {_route(site)}. "
                         if site is not None else f"none imports {' or '.join(names)}. ")
                      + "What imports it fails when used, as pip check would warn.")
        if canonical(requirement.name) == "torch" and requirement.specifier and found is not None:
            detail += (" Compiled extensions built against the required torch fail with `undefined symbol` against "
                       "another one.")
        yield _unmet_finding(
            dists, marker_env, vllm, requirement, found,
            status=Status.FAIL if fatal else Status.WARN,
            title=title,
            detail="Read from the installed METADATA (Requires-Dist). " + detail,
            evidence={"requirer": vllm.name, "requirer_version": vllm.version, "requirement": str(requirement),
                      "found": found, "import_names": names,
                      "serve_path": ({"reach": site.reach, "module": site.module, "file": site.file,
                                      "line": site.line, "chain": list(site.chain)} if site is not None else None)},
            remediation=(
                Remediation(installer.install(spec), f"install the {requirement.name} that {vllm.label()} requires"),
                Remediation(installer.install(f"{vllm.name}=={vllm.version}", reinstall=True),
                            f"or let the installer resolve {vllm.name}'s requirements again"),
                *((Remediation(f"export {engine_start.variable}=0",
                               f"or serve without it: vLLM {vllm.version} then does not import {requirement.name} "
                               "at engine start"),) if at_start is not None and engine_start is not None else ()),
            ),
        )


def _reached_distributions(dists: Distributions, serve: VllmServeImports) -> list[tuple[Distribution, ServeImport]]:
    """The installed distributions `vllm serve` imports unconditionally on its way up, each with where."""
    on_the_way_up = [e for e in serve.imports if e.reach == "serve"]
    # An import can import a name only under the name's own top-level package: each distribution's names are
    # matched against those imports alone, the first in the scan's order kept (a serving environment: 250
    # distributions, 1,000 imports).
    by_top: dict[str, list[int]] = {}
    for index, e in enumerate(on_the_way_up):
        by_top.setdefault(e.module.split(".", 1)[0], []).append(index)
    reached = []
    for dist in dists.seen():
        if dist.canonical == "vllm":
            continue
        names = import_names(dist.name, dists)
        candidates = sorted({i for n in names for i in by_top.get(n.split(".", 1)[0], ())})
        site = next((on_the_way_up[i] for i in candidates
                     if any(matches(on_the_way_up[i].module, on_the_way_up[i].names, n) for n in names)), None)
        if site is not None:
            reached.append((dist, site))
    return reached


def _required_on_the_way_up(reached: list[tuple[Distribution, ServeImport]],
                            marker_env: Mapping[str, str]) -> dict[str, tuple[Distribution, ServeImport]]:
    """Each requirement (canonical name) of a distribution `vllm serve` imports on its way up, with the first such
    distribution and where it is imported (Requires-Dist, markers evaluated, no extra): fastapi 0.13x imports
    opentelemetry-api at module level, which vLLM's own files import only inside a try. Every Requires-Dist is
    parsed once, however many requirements of vLLM are unmet."""
    required: dict[str, tuple[Distribution, ServeImport]] = {}
    for dist, site in reached:
        for theirs in requirements_of(dist, marker_env):
            required.setdefault(canonical(theirs.name), (dist, site))
    return required


def _imported_at_engine_start(known: EngineStartImport | None, names: list[str], vllm_version: str | None,
                              serve: VllmServeImports, environ: Mapping[str, str]) -> ServeImport | None:
    """Where vLLM imports a requirement when the engine starts, inside a function the scan of the way up does not
    follow (knowledge.vllm_imports.IMPORTED_AT_ENGINE_START): the file's own import site as the scan found it, for a
    release among those read, in the environment the serve gets (vLLM reads the variable as `bool(int(value))`)."""
    if known is None or not release_within(vllm_version, known.oldest, known.newest):
        return None
    value = environ.get(known.variable)
    if value is None:
        got, on_from = release(vllm_version), release(known.default_on_from)
        if got is None or on_from is None or got < on_from:
            return None
    else:
        try:
            if int(value.strip()) == 0:
                return None
        except ValueError:
            pass  # a value int() refuses: vLLM stops on it before it serves anyway
    for name in names:
        found = serve.elsewhere.get(name.split(".", 1)[0])
        site = next((s for s in found.sites if s.file == known.vllm_file and s.scope == "module"), None) \
            if found else None
        if site is not None:
            return ServeImport(module=name, reach="serve", file=site.file, line=site.line, chain=list(known.route))
    return None


def _imported_through(requirement: str, serve: VllmServeImports) -> ServeImport | None:
    """Where `vllm serve` imports, on its way up, the package that imports `requirement` (a fact the scan of
    vLLM's files cannot see: knowledge.vllm_imports.IMPORTED_THROUGH)."""
    known = IMPORTED_THROUGH.value.get(canonical(requirement))
    if known is None:
        return None
    return next((e for e in serve.imports if e.reach == "serve" and matches(e.module, e.names, known[0])), None)


def _route(site: ServeImport) -> str:
    chain = list(site.chain)
    return " > ".join(chain) if len(chain) <= 4 else " > ".join([chain[0], "...", *chain[-2:]])


def _not_on_the_way_up(site: ServeImport | None, serve: VllmServeImports, names: list[str]) -> str:
    """The warning's words: what `vllm serve` does with it, and what needs it."""
    if site is not None:
        return f"`vllm serve` {_REACH_WORDS[site.reach]} ({site.file}:{site.line})"
    head = "`vllm serve` does not import it on the serve path"
    users = [(n, serve.elsewhere.get(n.split(".", 1)[0])) for n in names]
    found = [(n, e) for n, e in users if e is not None and e.files]
    if not found:
        if serve.elsewhere_complete and all(e is not None for _, e in users):
            return f"{head}; no module of vLLM imports {' or '.join(names)}"
        return head
    _, elsewhere = found[0]
    shown = sorted({s.file for s in elsewhere.sites})
    more = elsewhere.files - len(shown)
    return (f"{head}; it is needed for {', '.join(shown)}" + (f" and {more} more module{'s' if more > 1 else ''}"
                                                             if more > 0 else "")
            + " (they import it when used)"
            + ("" if serve.elsewhere_complete else "; the search of vLLM's files stopped at its time limit"))


def _duplicates(dists: Distributions) -> Iterator[Finding]:
    for name, copies in sorted(dists.duplicates().items()):
        first = copies[0]
        is_stack = name in STACK
        managers = [_package_manager(d) for d in copies]
        one_place = len({(d.location.rstrip("/"), d.version) for d in copies}) == 1
        if one_place:
            where = (f"{len(copies)} metadata directories for {first.version} in {first.location} ("
                     + ", ".join(d.dist_info.rstrip("/").rsplit("/", 1)[-1] for d in copies) + ")")
        else:
            where = f"{len(copies)} installed copies " + ", ".join(f"{d.version} in {d.location}" for d in copies)
        if one_place and all(managers):
            yield DISTRIBUTIONS_DUPLICATE.finding(
                Status.PASS,
                title=f"{first.name}: {where}, all from the system package manager ({managers[0]}): one version in "
                "one directory, nothing shadowed; leave them to it",
                evidence={"copies": [{"version": d.version, "dist_info": d.dist_info, "package_manager": m}
                                     for d, m in zip(copies, managers)]},
            )
            continue
        yield DISTRIBUTIONS_DUPLICATE.finding(
            Status.FAIL if is_stack and not one_place else Status.WARN,
            title=f"{first.name}: {where}",
            detail=f"Python imports the one first on sys.path ({first.label()} in {first.location}); "
            "the installers see them differently, and uninstalling one leaves the other's files mixed in."
            + (" A copy the system package manager owns is its to remove: never delete its files by hand."
               if any(managers[1:]) else ""),
            evidence={"copies": [{"version": d.version, "dist_info": d.dist_info, "package_manager": m}
                                 for d, m in zip(copies, managers)]},
            remediation=tuple(_remove_copy(d, m) for d, m in zip(copies[1:], managers[1:])),
        )


_DPKG_INSTALLERS = frozenset({"debian", "dpkg", "apt"})
_RPM_INSTALLERS = frozenset({"rpm", "dnf", "yum"})


def _package_manager(dist: Distribution) -> str | None:
    """"dpkg" or "rpm" when the system package manager installed `dist` (its INSTALLER file, or Debian's own
    dist-packages directories under /usr/lib, which pip never writes to), else None."""
    installer = (dist.installer or "").strip().lower()
    location = dist.location.rstrip("/")
    debian_dir = location == "/usr/lib/python3/dist-packages" or (
        location.startswith("/usr/lib/python3.") and location.endswith("/dist-packages") and location.count("/") == 4)
    if installer in _DPKG_INSTALLERS or debian_dir:
        return "dpkg"
    if installer in _RPM_INSTALLERS:
        return "rpm"
    return None


def _remove_copy(dist: Distribution, manager: str | None) -> Remediation:
    path = shlex.quote(dist.dist_info)
    if manager == "dpkg":
        return Remediation(f"dpkg -S {path}",
                           f"{dist.label()} belongs to a Debian package: this names it; remove or upgrade that "
                           "package with apt (sudo apt-get remove PACKAGE), never its files by hand")
    if manager == "rpm":
        return Remediation(f"rpm -qf {path}",
                           f"{dist.label()} belongs to an RPM package: this names it; remove or upgrade that "
                           "package with dnf (sudo dnf remove PACKAGE), never its files by hand")
    return Remediation(f"rm -rf {path}", f"remove the shadowed metadata of {dist.label()}")


def _record_integrity(dists: Distributions, installer: Installer) -> Iterator[Finding]:
    for name in VERIFIED:
        dist = dists.get(name)
        if dist is None:
            continue
        record = dist.record
        if not record.present:
            if dist.format == "dist-info" and not record.error:
                yield DISTRIBUTIONS_RECORD_MISSING.finding(
                    Status.WARN,
                    title=f"{dist.label()} has no RECORD: its files cannot be verified or cleanly uninstalled",
                    evidence={"dist_info": dist.dist_info},
                    remediation=(
                        Remediation(
                            installer.install(f"{dist.name}=={dist.version}", reinstall=True, no_deps=True),
                            "reinstall so that the installer writes a RECORD",
                        ),
                    ),
                )
            continue
        integrity = record.integrity
        if integrity is None:
            continue
        problems = integrity.missing_count + integrity.size_mismatch_count + integrity.hash_mismatch_count
        if not problems:
            continue
        parts = []
        if integrity.missing_count:
            parts.append(f"{integrity.missing_count} missing")
        changed = integrity.size_mismatch_count + integrity.hash_mismatch_count
        if changed:
            parts.append(f"{changed} changed on disk")
        sample = [*integrity.missing[:3], *(m.path for m in integrity.size_mismatch[:3]),
                  *(m.path for m in integrity.hash_mismatch[:3])]
        yield DISTRIBUTIONS_RECORD_MISMATCH.finding(
            Status.FAIL if integrity.missing_count else Status.WARN,
            title=f"{dist.label()}: {', '.join(parts)} of {integrity.files} files listed in RECORD"
            + (f" (e.g. {', '.join(sample[:3])})" if sample else ""),
            detail="Files were deleted or overwritten after installation: by another distribution that "
            "installs the same paths, or by hand. "
            + ("Sizes were compared; pass --verify-hashes to compare every sha256." if not integrity.hashed else ""),
            evidence={"dist_info": dist.dist_info, **integrity.to_json()},
            remediation=(
                Remediation(
                    installer.install(f"{dist.name}=={dist.version}", reinstall=True, no_deps=True),
                    f"put {dist.label()}'s own files back",
                ),
            ),
        )


def _record_escapes(dists: Distributions, installer: Installer) -> Iterator[Finding]:
    """RECORD lines that resolve outside the environment: never opened, hashed or loaded."""
    for dist in dists.items:
        record = dist.record
        escapes = record.escapes
        if not escapes:
            continue
        count = record.escapes_count or len(escapes)
        first = escapes[0]
        record_file = record.file or f"{dist.dist_info}/RECORD"
        more = f" (and {count - 1} more line{'s' if count > 2 else ''})" if count > 1 else ""
        yield DISTRIBUTIONS_RECORD_ESCAPES.finding(
            Status.FAIL if dist.canonical in STACK else Status.WARN,
            title=f"{dist.label()}: {record_file} line {first.line} points outside the environment: "
            f"{first.path} resolves to {first.resolves_to}{more}",
            detail="An installer writes only inside the prefix it installs into (its site-packages, scripts, headers "
            "and data directories); the doctor takes those of every site directory on sys.path as the environment. "
            "A RECORD line that leaves all of them (`..`, an absolute path, a symlink out, /dev, /proc) was "
            "written by hand or by something hostile: the doctor never opens, hashes or loads such a file, and an "
            "uninstall would delete it. Reinstall the distribution from a source you trust.",
            evidence={"record": record_file, "distribution": dist.name, "version": dist.version,
                      "lines": [escape.to_json() for escape in escapes], "count": count},
            remediation=(
                Remediation(installer.install(f"{dist.name}=={dist.version}" if dist.version else dist.name,
                                              reinstall=True, no_deps=True),
                            f"reinstall {dist.label()} so that its RECORD lists only its own files"),
            ),
        )


def _not_regular(dists: Distributions, installer: Installer) -> Iterator[Finding]:
    """Files RECORD lists that are FIFOs, devices or sockets now: never opened."""
    for name in VERIFIED:
        dist = dists.get(name)
        if dist is None:
            continue
        integrity = dist.record.integrity
        odd = integrity.not_regular if integrity is not None else []
        if not odd or integrity is None:
            continue
        count = integrity.not_regular_count or len(odd)
        shown = ", ".join(f"{item.path} is {item.kind}" for item in odd[:3])
        yield DISTRIBUTIONS_FILE_NOT_REGULAR.finding(
            Status.FAIL,
            title=f"{dist.label()}: {count} file(s) in RECORD are not regular files: {shown}"
            + (" ..." if count > 3 else ""),
            detail="A FIFO blocks whoever opens it (an `import` hangs), a device is no file of a wheel. The doctor "
            "does not open them. Put the distribution's own files back.",
            evidence={"dist_info": dist.dist_info, "files": [item.to_json() for item in odd], "count": count,
                      "location": dist.location},
            remediation=(
                Remediation(installer.install(f"{dist.name}=={dist.version}", reinstall=True, no_deps=True),
                            f"put {dist.label()}'s own files back"),
            ),
        )

