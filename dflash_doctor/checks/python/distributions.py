"""Layer: installed distributions.

Judges the stack's versions, its requirements as the installed metadata states them (vLLM pins torch
exactly), duplicate dist-infos, RECORD integrity of the stack, and metadata too broken to read.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Iterator, Mapping
from typing import ClassVar

from dflash_doctor.check import Facts
from dflash_doctor.checks.python.kernel_packages import broken_by, named_cause, shared_files
from dflash_doctor.checks.python.requirements import STACK, VERIFIED, requirements_of, unmet_requirements
from dflash_doctor.checks.remedy import Installer
from dflash_doctor.codes import Code
from dflash_doctor.facts.envfacts import canonical
from dflash_doctor.facts.environment_shapes import Distribution, Distributions, Target
from dflash_doctor.facts.vllm_serve_path import import_names, matches
from dflash_doctor.facts.vllm_serve_path import unmet_requirements as requirements_unmet
from dflash_doctor.facts.vllm_source_shapes import ServeImport, VllmServeImports
from dflash_doctor.knowledge.stack import OPTIONAL_AT_SERVE
from dflash_doctor.knowledge.vllm_imports import IMPORTED_THROUGH
from dflash_doctor.model import Finding, Remediation, Status

CODES: tuple[Code, ...] = (
    # distributions
    Code("distributions.stack", "Versions of the serving stack",
         "Lists the installed versions of torch, triton, vllm, the flash-attention family, flashinfer, "
         "transformers and nvidia-ml-py, as importlib.metadata sees them (the first copy on sys.path)."),
    Code("distributions.requirements-ok", "The stack's requirements are satisfied",
         "Every Requires-Dist of the installed stack distributions (markers evaluated for the target "
         "interpreter) is met by an installed version."),
    Code("distributions.requirement-unmet", "A stack distribution requires another version",
         "Read from the installed METADATA. vLLM pins torch exactly (e.g. vllm 0.20.1 requires torch==2.11.0) "
         "because its compiled kernels link against that torch's C++ ABI; a different torch gives `undefined "
         "symbol` at import, or subtle failures. Install the required version, or reinstall the requirer so the "
         "installer resolves them together. For vLLM's requirements, as for requirement-missing: a failure when "
         "`vllm serve` imports the package on its way up, a warning when it does not."),
    Code("distributions.requirement-missing", "A stack distribution's requirement is not installed",
         "A Requires-Dist of an installed stack distribution names a distribution that is not installed at all. "
         "Install it (the command names the target interpreter). Every requirement of vLLM is judged by what "
         "`vllm serve` imports on its way up, read from the installed vLLM's own files (vllm_serve_imports: the "
         "module-level imports followed from the `vllm` console script's module, main()'s imports, and the modules "
         "it loads by name, knowledge.vllm_imports.SERVE_LOADED_BY_NAME): a failure when one of those modules "
         "imports it unconditionally (fastapi, torch, transformers: `vllm serve` stops with ModuleNotFoundError), or, "
         "for one that is missing, when a package those modules import requires it too (fastapi 0.165 requires "
         "opentelemetry-api and imports it at module level) or imports it (knowledge.vllm_imports.IMPORTED_THROUGH); a "
         "warning in pip check's words when none does, or only under a condition, or inside a try that catches the "
         "ImportError, naming the modules of vLLM that import it (they fail when used). A report saved before that "
         "scan existed judges vLLM's requirements on the stack as it did (flashinfer-python a warning, "
         "knowledge.stack.OPTIONAL_AT_SERVE)."),
    Code("distributions.duplicate", "Two installed copies of one distribution",
         "Two dist-info (or egg-info) directories of the same name are on sys.path. Python imports the first; "
         "pip and uv may see the other; uninstalling one leaves the other's files mixed in. Remove the stale one. "
         "A copy the system package manager owns (INSTALLER says debian or rpm, or it lies in Debian's "
         "/usr/lib/python3/dist-packages) is never deleted by hand: the fix asks dpkg (or rpm) which package owns "
         "it, for apt (or dnf) to remove or upgrade. When every copy is that manager's and the same version in one "
         "directory (Debian's python3-cryptography ships both a dist-info and an egg-info), nothing is shadowed, "
         "and the finding passes."),
    Code("distributions.metadata-broken", "A distribution's METADATA cannot be read",
         "The METADATA (or PKG-INFO) file is missing, not UTF-8, or lacks Name/Version. Installers cannot see, "
         "upgrade or uninstall the distribution. Remove its dist-info directory and reinstall it."),
    Code("distributions.record-broken", "A distribution's RECORD cannot be read",
         "RECORD is not valid CSV with three fields a row, or is unreadable. Uninstall cannot remove the files, "
         "and the doctor cannot verify them. Reinstall the distribution."),
    Code("distributions.record-missing", "A stack distribution has no RECORD",
         "Without RECORD its files cannot be verified or cleanly uninstalled (often a manual copy or an old "
         "installer). Reinstall it with pip or uv."),
    Code("distributions.record-mismatch", "Installed files differ from RECORD",
         "Files listed in the distribution's RECORD are missing, or their size (or, with --verify-hashes, their "
         "sha256) differs: another distribution installed the same paths, or they were edited by hand. Reinstall "
         "the distribution with --no-deps to put its own files back."),
    Code("distributions.record-escapes", "A RECORD line points outside the environment",
         "A line of the distribution's RECORD resolves outside the environment's directories: the sys.path "
         "entries, and for each site directory (the environment's own, the base interpreter's with "
         "--system-site-packages, the user site, one a `.pth` line adds) the install-scheme directories of the "
         "prefix it belongs to (its site-packages, scripts, headers and data), and the project directories of "
         "editable installs. A console script in the base interpreter's bin/ is inside; `..` out of all of them, "
         "an absolute path elsewhere, a symlink out, or /dev, /proc, /sys is not. No installer writes such a "
         "line. The doctor never "
         "opens, hashes or loads that file (a `flash_attn/../../../../tmp/x/evil.so` line would otherwise have "
         "its constructor run by the extension probe), and an uninstall would delete it. Reinstall the "
         "distribution from a source you trust."),
    Code("distributions.file-collision", "Two verified distributions install the same paths with different bytes",
         "Two distributions of the stack or its kernel packages (knowledge.kernel_wheels.KERNEL_DISTRIBUTIONS) list "
         "the same files in their RECORDs with different sha256: whichever was installed last overwrote the other's, "
         "silently, and uninstalling either deletes files the other still lists. Only the paths whose RECORD hashes "
         "differ are hashed. The two halves of `nvidia-cutlass-dsl[cu13]` before 4.6 are such a pair "
         "(nvidia-cutlass-dsl-libs-base and -libs-cu13 4.5.2, pinned by vLLM 0.22.0-0.25.1, share 180 paths, 99 of "
         "them with other bytes): where the base's files won, vLLM's CuTe DSL kernels fail (`mlir_global_dtors() "
         "missing 1 required positional argument: 'data'`, vllm #44949; `from cutlass.cute.core import "
         "increment_coord` fails, ai-dynamo/dynamo #11775; malformed `_mma` PTX, NVIDIA/cutlass #3170). Fix: "
         "reinstall -libs-cu13 with --force-reinstall --no-deps so its files win, or vLLM 0.26.0 or later "
         "(nvidia-cutlass-dsl 4.6.0, where one wheel holds the CuTe sources). A pass where the -libs-cu13 files are "
         "in place; a warning for another pair, naming whose bytes are on disk. flash_attn/ is the namespaces "
         "check's (namespaces.cute-overlap)."),
    Code("distributions.requirement-broken-by", "An installed distribution's requirement broke another's pin",
         "A kernel package that vLLM or flash-attn-4 loads (apache-tvm-ffi, nvidia-cutlass-dsl, quack-kernels ...) "
         "is installed at a version one installed distribution's Requires-Dist excludes, and another installed "
         "distribution requires that version: installing it (with its dependencies) broke the first's pin. "
         "flash-attn-4 4.0.0b36 requires apache-tvm-ffi>=0.1.11 and nvidia-cutlass-dsl>=4.6.2 while vLLM "
         "0.20.0-0.25.1 pin apache-tvm-ffi==0.1.9 (and 0.22.0-0.25.1 nvidia-cutlass-dsl==4.5.2): nvidia-cutlass-dsl "
         "4.6 with tvm-ffi 0.1.9 fails with `make_kwargs_wrapper() got an unexpected keyword argument "
         "'map_dataclass_to_tuple'`; 4.6 removed cute.core.ThrMma that older quack-kernels use. The finding names "
         "the distribution whose requirement the installed version meets, and the one installed last (RECORD "
         "times) when they show the order. Fix: a vLLM whose pins agree (0.27 pins apache-tvm-ffi==0.1.11), or "
         "remove the distribution that brought the other version, or put back the pinned version."),
    Code("distributions.file-not-regular", "A file RECORD lists is a FIFO, a device or a socket",
         "A file of a stack distribution is not a regular file on disk: a FIFO blocks whoever opens it (an import "
         "hangs), a device such as /dev/zero never ends. The doctor does not open it. Reinstall the distribution "
         "to put its own files back."),
)

class DistributionsCheck:
    id: ClassVar[str] = "distributions"
    layer: ClassVar[str] = "python"
    title: ClassVar[str] = "Installed distributions"
    codes: ClassVar[tuple[Code, ...]] = tuple(c for c in CODES if c.id.startswith("distributions."))
    needs: ClassVar[frozenset[str]] = frozenset({"target", "distributions"})
    # Judged better with: what `vllm serve` imports on its way up (a report saved before it was collected is
    # judged without it).
    wants: ClassVar[frozenset[str]] = frozenset({"vllm_serve_imports"})
    after: ClassVar[frozenset[str]] = frozenset()
    requires_gpu: ClassVar[bool] = False

    def judge(self, facts: Facts) -> Iterable[Finding]:
        target = facts.section(Target)
        dists = facts.section(Distributions)
        installer = Installer.for_target(target)
        yield _stack_versions(dists)
        yield from _broken_metadata(dists, installer)
        yield from (named_cause(f, dists, target.marker_environment)
                    for f in _requirements(dists, target.marker_environment, installer,
                                           _serve_path(facts.optional_section(VllmServeImports), dists)))
        yield from _duplicates(dists)
        yield from _record_integrity(dists, installer)
        yield from _record_escapes(dists, installer)
        yield from _not_regular(dists, installer)
        yield from shared_files(dists, installer)
        yield from broken_by(dists, target.marker_environment, installer)


def _stack_versions(dists: Distributions) -> Finding:
    versions = {name: dists.version(name) for name in STACK}
    present = [f"{name} {v}" for name, v in versions.items() if v]
    absent = [name for name, v in versions.items() if not v]
    title = "stack: " + (", ".join(present) if present else "none of the serving stack is installed")
    return Finding(
        id="distributions.stack",
        status=Status.PASS,
        title=title,
        detail=("not installed: " + ", ".join(absent)) if absent else "",
        evidence={"versions": versions, "locations": {n: d.location for n in STACK if (d := dists.get(n))}},
    )


def _broken_metadata(dists: Distributions, installer: Installer) -> Iterator[Finding]:
    for dist in dists.items:
        for problem, code in ((dist.metadata_error, "distributions.metadata-broken"), (dist.record.error, "distributions.record-broken")):
            if not problem:
                continue
            is_stack = dist.canonical in STACK
            yield Finding(
                id=code,
                status=Status.FAIL if is_stack or code == "distributions.metadata-broken" else Status.WARN,
                title=f"{dist.label()}: {problem['file']} is unreadable: {problem['error']}",
                detail="pip, uv and importlib.metadata read this file; while it is broken they cannot "
                "see, upgrade or uninstall the distribution cleanly.",
                evidence={"file": problem["file"], "error": problem["error"], "location": dist.location},
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
    dists: Distributions, marker_env: Mapping[str, str], installer: Installer, serve: VllmServeImports | None
) -> Iterator[Finding]:
    unmet = unmet_requirements(dists, marker_env)
    by_serve_path: list[Finding] = []
    if serve is not None:
        # vLLM's requirements, all of them, are judged by what `vllm serve` imports; the rest as before
        unmet = [u for u in unmet if canonical(u[0].name) != "vllm"]
        by_serve_path = list(_vllm_requirements(dists, marker_env, installer, serve))
    if not unmet and not by_serve_path:
        yield Finding(
            id="distributions.requirements-ok",
            status=Status.PASS,
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
        yield Finding(
            id="distributions.requirement-unmet" if found is not None else "distributions.requirement-missing",
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


def _serve_path(serve: VllmServeImports | None, dists: Distributions) -> VllmServeImports | None:
    """The scan of what `vllm serve` imports, when it can judge vLLM's requirements: it read the installed vLLM
    (the one Python sees) to the end. Else None: vLLM's requirements are judged as before the scan existed."""
    vllm = dists.get("vllm")
    if serve is None or vllm is None or serve.root is None or not serve.complete or not serve.imports:
        return None
    return serve


_REACH_WORDS = {
    "conditional": "imports it only under a condition on its way up",
    "guarded": "imports it on its way up inside a try whose except catches the ImportError",
}


def _vllm_requirements(dists: Distributions, marker_env: Mapping[str, str], installer: Installer,
                       serve: VllmServeImports) -> Iterator[Finding]:
    """Each requirement of vLLM that no installed version meets: a failure when `vllm serve` imports it on its
    way up (the scan in facts.vllm_serve_path), a warning in pip check's words otherwise, naming what needs it."""
    vllm = dists.get("vllm")
    if vllm is None:
        return
    unmet = requirements_unmet(dists, marker_env, "vllm")
    reached = _reached_distributions(dists, serve) if any(found is None for _, found in unmet) else []
    for requirement, found in unmet:
        names = import_names(requirement.name, dists)
        sites = [e for e in serve.imports if any(matches(e.module, e.names, n) for n in names)]
        site = min(sites, key=lambda e: ("serve", "conditional", "guarded").index(e.reach), default=None)
        through = _imported_through(requirement.name, serve) if found is None and (
            site is None or site.reach != "serve") else None
        if through is not None:
            site = through
        needed_by = _required_on_the_way_up(requirement.name, reached, marker_env) \
            if found is None and (site is None or site.reach != "serve") else None
        if needed_by is not None:
            site = needed_by[1]
        spec = f"{requirement.name}{requirement.specifier}"
        pip_words = (f"{vllm.label()} requires {spec}, which is not installed" if found is None
                     else f"{vllm.label()} requires {spec}, found {found}")
        fatal = site is not None and site.reach == "serve"
        if fatal and site is not None:
            title = pip_words
            via = (f"`vllm serve` imports {site.module} on its way up, which imports {requirement.name} "
                   f"({IMPORTED_THROUGH.value[canonical(requirement.name)][1]}; knowledge.vllm_imports.IMPORTED_THROUGH)"
                   if through is not None else
                   f"`vllm serve` imports {site.module} on its way up, and {needed_by[0].label()} requires "
                   f"{requirement.name} too (its own Requires-Dist)" if needed_by is not None else
                   f"`vllm serve` imports {site.module} on its way up")
            detail = (f"{via}, unconditionally: {site.file}:{site.line}, reached from {_route(site)}. "
                      + ("It stops with ModuleNotFoundError before it serves." if found is None else
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
        yield Finding(
            id="distributions.requirement-unmet" if found is not None else "distributions.requirement-missing",
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
            ),
        )


def _reached_distributions(dists: Distributions, serve: VllmServeImports) -> list[tuple[Distribution, ServeImport]]:
    """The installed distributions `vllm serve` imports unconditionally on its way up, each with where."""
    on_the_way_up = [e for e in serve.imports if e.reach == "serve"]
    reached = []
    for dist in dists.seen():
        if dist.canonical == "vllm":
            continue
        names = import_names(dist.name, dists)
        site = next((e for e in on_the_way_up for n in names if matches(e.module, e.names, n)), None)
        if site is not None:
            reached.append((dist, site))
    return reached


def _required_on_the_way_up(requirement: str, reached: list[tuple[Distribution, ServeImport]],
                            marker_env: Mapping[str, str]) -> tuple[Distribution, ServeImport] | None:
    """A distribution `vllm serve` imports on its way up that requires `requirement` itself (its Requires-Dist,
    markers evaluated, no extra): fastapi 0.13x imports opentelemetry-api at module level, which vLLM's own files
    import only inside a try."""
    wanted = canonical(requirement)
    for dist, site in reached:
        if any(canonical(theirs.name) == wanted for theirs in requirements_of(dist, marker_env)):
            return dist, site
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
            yield Finding(
                id="distributions.duplicate",
                status=Status.PASS,
                title=f"{first.name}: {where}, all from the system package manager ({managers[0]}): one version in "
                "one directory, nothing shadowed; leave them to it",
                evidence={"copies": [{"version": d.version, "dist_info": d.dist_info, "package_manager": m}
                                     for d, m in zip(copies, managers)]},
            )
            continue
        yield Finding(
            id="distributions.duplicate",
            status=Status.FAIL if is_stack and not one_place else Status.WARN,
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
                yield Finding(
                    id="distributions.record-missing",
                    status=Status.WARN,
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
        sample = [*integrity.missing[:3], *(m["path"] for m in integrity.size_mismatch[:3]),
                  *(m["path"] for m in integrity.hash_mismatch[:3])]
        yield Finding(
            id="distributions.record-mismatch",
            status=Status.FAIL if integrity.missing_count else Status.WARN,
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
        yield Finding(
            id="distributions.record-escapes",
            status=Status.FAIL if dist.canonical in STACK else Status.WARN,
            title=f"{dist.label()}: {record_file} line {first['line']} points outside the environment: "
            f"{first['path']} resolves to {first['resolves_to']}{more}",
            detail="An installer writes only inside the prefix it installs into (its site-packages, scripts, headers "
            "and data directories); the doctor takes those of every site directory on sys.path as the environment. "
            "A RECORD line that leaves all of them (`..`, an absolute path, a symlink out, /dev, /proc) was "
            "written by hand or by something hostile: the doctor never opens, hashes or loads such a file, and an "
            "uninstall would delete it. Reinstall the distribution from a source you trust.",
            evidence={"record": record_file, "distribution": dist.name, "version": dist.version,
                      "lines": list(escapes), "count": count},
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
        shown = ", ".join(f"{item['path']} is {item['kind']}" for item in odd[:3])
        yield Finding(
            id="distributions.file-not-regular",
            status=Status.FAIL,
            title=f"{dist.label()}: {count} file(s) in RECORD are not regular files: {shown}"
            + (" ..." if count > 3 else ""),
            detail="A FIFO blocks whoever opens it (an `import` hangs), a device is no file of a wheel. The doctor "
            "does not open them. Put the distribution's own files back.",
            evidence={"dist_info": dist.dist_info, "files": list(odd), "count": count,
                      "location": dist.location},
            remediation=(
                Remediation(installer.install(f"{dist.name}=={dist.version}", reinstall=True, no_deps=True),
                            f"put {dist.label()}'s own files back"),
            ),
        )

