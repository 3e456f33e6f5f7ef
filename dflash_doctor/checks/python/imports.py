"""Rules of the imports, import-surface and extensions checks: imports, for real, in the target interpreter.

- The exact `from flash_attn.ops.triton.rotary import apply_rotary` vLLM runs at engine start.
- Every import of an external kernel package in the installed vLLM's source, judged by the exception
  the target really raises against the guard vLLM puts around it.
- Every compiled extension module of the stack, loaded on its own.
"""

from __future__ import annotations

from collections.abc import Mapping

from dflash_doctor.checks.python.codes import (
    EXTENSION_CAUSES,
    EXTENSIONS_NEEDS_DRIVER,
    EXTENSIONS_NONE,
    EXTENSIONS_NOT_LOADED,
    EXTENSIONS_OK,
    EXTENSIONS_UNTRACKED,
    IMPORT_CAUSES,
    IMPORT_SURFACE_NO_SOURCE,
    IMPORT_SURFACE_NO_VLLM,
    IMPORT_SURFACE_OK,
    IMPORT_SURFACE_UNGUARDED_FAILURE,
    IMPORT_SURFACE_UNREAD,
    IMPORTS_NAMESPACE_PACKAGE,
    IMPORTS_ROTARY_ABSENT,
    IMPORTS_ROTARY_OK,
)
from dflash_doctor.checks.python.extension_abi import other_python_findings
from dflash_doctor.checks.python.guards import judge_site
from dflash_doctor.checks.python.import_failures import (
    Cause,
    ImportContext,
    classify,
    exception_mro,
    literal_exception,
)
from dflash_doctor.checks.python.namespace_layout import ABSENT_IS_SKIPPED
from dflash_doctor.facts.python.environment_shapes import Resolution, Target
from dflash_doctor.facts.python.imports_shapes import (
    ExtensionFacts,
    ImportFacts,
    RotaryImport,
    SurfaceImports,
)
from dflash_doctor.facts.python.vllm_source_shapes import ImportSite, VllmSource, VllmSurface
from dflash_doctor.knowledge.vllm_imports import SERVING_PATH_SITES
from dflash_doctor.model import STOPS_SERVE, Finding, Status


def _resolves(resolution: Resolution) -> dict[str, bool]:
    return {name: r.found for name, r in resolution.names.items()}


def _detail(result: ImportFacts, *more: str) -> str:
    """The literal exception first (the words the user will see from vLLM), then why it matters."""
    return "\n".join(line for line in (literal_exception(result), *more) if line)


def _serving_site(site: ImportSite) -> bool:
    return any(site.file == path and site.module.split(".")[0] == top for path, top in SERVING_PATH_SITES.value)


def rotary_findings(result: RotaryImport, context: ImportContext, vllm_source: VllmSource) -> list[Finding]:
    """The imports check's judgement of vLLM's `from flash_attn.ops.triton.rotary import apply_rotary`, as the
    target ran it, against the guard the installed vLLM puts around it."""
    resolution = context.resolution
    statement = "from flash_attn.ops.triton.rotary import apply_rotary"
    if result.ok:
        versions = result.versions.to_json() if result.versions is not None else {}
        return [IMPORTS_ROTARY_OK.finding(
            Status.PASS,
            title=f"`{statement}` works ({result.file})",
            evidence={"file": result.file, "seconds": result.seconds, "versions": versions},
        )]
    if not resolution.of("flash_attn").found:
        return [IMPORTS_ROTARY_ABSENT.finding(
            Status.PASS,
            title=f"`{statement}`: flash_attn is not installed, so vLLM {vllm_source.version}'s guarded import "
            "skips it" if vllm_source.installed else
            f"`{statement}`: neither flash_attn nor vLLM is installed here; {ABSENT_IS_SKIPPED}",
        )]
    cause = classify(result, context, IMPORT_CAUSES)
    if cause.status is not None:
        status, consequence = cause.status, cause.detail
    else:
        status, consequence = _consequence(vllm_source, exception_mro(result), _resolves(resolution),
                                           cause.code is IMPORTS_NAMESPACE_PACKAGE)
        consequence = "\n".join(filter(None, (cause.detail, consequence)))
    return [cause.code.finding(
        status,
        title=f"`{statement}` fails: {cause.summary}",
        detail=_detail(result, consequence),
        evidence={**cause.evidence, "statement": statement},
        remediation=cause.remediation,
        cause=cause.follows,
    )]


def _consequence(vllm_source: VllmSource, mro: tuple[str, ...] | None,
                 resolves: Mapping[str, bool], namespace_only: bool) -> tuple[Status, str]:
    if not vllm_source.installed:
        if namespace_only:
            return Status.WARN, ("vLLM is not installed here; vLLM 0.18-0.23 would die at engine start on this, "
                                 "later versions would run without the flash-attn rotary path.")
        return Status.FAIL, "vLLM is not installed here, but this flash-attn cannot be imported the way vLLM imports it."
    sites = [s for s in vllm_source.sites if _serving_site(s) and s.module.startswith("flash_attn.ops")]
    version = vllm_source.version
    if not sites and vllm_source.errors:  # what the unread file imports is not known: never a quiet verdict
        unread = vllm_source.errors[0]
        return Status.ERROR, (f"vLLM {version}'s serving-path file {unread.file} could not be read ({unread.error}): "
                              "whether it imports flash_attn.ops is not known.")
    if not sites:
        return Status.WARN, f"vLLM {version} does not import flash_attn.ops on its serving path."
    for site in sites:
        verdict = judge_site(site, mro, resolves)
        where = f"{site.file}:{site.line}"
        if verdict.outcome in ("raises", "maybe-raises"):
            return Status.FAIL, f"vLLM {version} imports it at {where} and nothing catches this: `vllm serve` dies at engine start."
        if verdict.outcome == "caught" and verdict.caught_by:
            caught = verdict.caught_by
            return Status.WARN, (f"vLLM {version} catches it at {where} ({caught.kind} "
                                 f"{', '.join(caught.catches)}): it serves, without the flash-attn rotary path.")
    return Status.WARN, f"vLLM {version} does not reach this import on CUDA."


def surface_findings(source: VllmSurface, imports: SurfaceImports, context: ImportContext) -> list[Finding]:
    """The import-surface check's judgement: each import of an external kernel package in the installed vLLM's
    source that fails in the target, against the guards around it."""
    if not source.installed:
        return [IMPORT_SURFACE_NO_VLLM.finding(Status.SKIP, title="vLLM is not installed: no import surface to check")]
    if not source.root:
        return [IMPORT_SURFACE_NO_SOURCE.finding(Status.WARN,
                        title=f"vLLM {source.version} is installed but its package directory was not found")]
    resolves = _resolves(context.resolution)
    outcomes = {(r.module, tuple(r.names)): r for r in imports.imports}
    findings: list[Finding] = []
    for (module, names), result in sorted(outcomes.items(), key=lambda item: item[0]):
        if result.ok:
            continue
        top = module.split(".", 1)[0]
        absent = not resolves.get(top, False)
        sites = [s for s in source.sites if s.module == module and tuple(s.names) == names]
        verdicts = [(s, judge_site(s, exception_mro(result), resolves)) for s in sites]
        raising = [(s, v) for s, v in verdicts if v.outcome in ("raises", "maybe-raises")]
        if not raising or (absent and not any(_serving_site(s) for s, _ in raising)):
            continue  # guarded, or an optional package simply not installed
        cause = classify(result, context, IMPORT_CAUSES)
        serving = [s for s, _ in raising if _serving_site(s)]
        shown = serving or [s for s, _ in raising]
        status = cause.status or (Status.FAIL if serving else Status.WARN)
        findings.append(IMPORT_SURFACE_UNGUARDED_FAILURE.finding(
            status,
            title=f"vLLM {source.version} imports {module} at "
            + ", ".join(f"{s.file}:{s.line}" for s in shown[:3])
            + f" and it fails here: {cause.summary}",
            detail=_detail(result, cause.detail, "This import is on `vllm serve`'s path and no guard around it "
                           "catches this exception." if serving else "No guard around it catches this "
                           "exception; it raises if vLLM reaches it (on CUDA, for a feature that uses the "
                           "package)."),
            evidence={**cause.evidence, "cause_code": cause.code.id,
                      "sites": [{"file": s.file, "line": s.line, "where": s.where,
                                 "guards": [g.to_json() for g in s.guards]} for s in shown],
                      STOPS_SERVE: bool(serving) and status is Status.FAIL},
            remediation=cause.remediation,
            cause=cause.follows,
        ))
    if source.errors:  # what those files import was not judged: an error, never a quiet pass
        first, more = source.errors[0], len(source.errors) - 1
        findings.append(IMPORT_SURFACE_UNREAD.finding(
            Status.ERROR,
            title=f"vLLM {source.version}: {first.file} could not be read ({first.error})"
            + (f", and {more} more file{'s' if more > 1 else ''}" if more > 0 else "")
            + ": its imports of external kernel packages are not judged",
            evidence={"errors": [{"file": e.file, "error": e.error} for e in source.errors]}))
    if not findings:
        findings.append(IMPORT_SURFACE_OK.finding(
            Status.PASS,
            title=f"vLLM {source.version}: {len(source.sites)} imports of external kernel packages "
            f"({len(outcomes)} modules) all resolve or are guarded against what they raise here",
            evidence={"modules": sorted({m for m, _ in outcomes}), "files_parsed": source.files_parsed},
        ))
    return findings


def extension_findings(items: list[ExtensionFacts], target: Target, context: ImportContext) -> list[Finding]:
    """The extensions check's judgement: each compiled extension module of the stack, loaded on its own in the
    target (or refused), and those built for another Python."""
    if not items:
        return [EXTENSIONS_NONE.finding(Status.SKIP,
                        title="no compiled extension modules in the stack besides torch's own")]
    findings = other_python_findings(items, context.dists, target, context.installer)
    loaded = []
    needs_driver: dict[str, list[tuple[ExtensionFacts, Cause]]] = {}
    for result in items:
        if result.refused:
            findings.append(_refused(result))
            continue
        if result.ok:
            loaded.append(result.module)
            continue
        if result.abi_tag:
            continue  # judged above: not a module of this interpreter
        cause = classify(result, context, EXTENSION_CAUSES)
        if cause.code is EXTENSIONS_NEEDS_DRIVER:
            needs_driver.setdefault(cause.driver_library, []).append((result, cause))
            continue
        findings.append(cause.code.finding(
            cause.status or Status.FAIL,
            title=f"{result.distribution}: extension {result.module} does not load: {cause.summary}",
            detail=_detail(result, cause.detail),
            evidence={**cause.evidence, "path": result.path, "found_by": result.found_by or "record"},
            remediation=cause.remediation,
            cause=cause.follows,
        ))
    findings.extend(_needs_driver(library, group) for library, group in sorted(needs_driver.items()))
    untracked = [r for r in items if r.found_by == "import-system" and not r.refused]
    if untracked:
        findings.append(_untracked(untracked))
    if loaded:
        findings.insert(0, EXTENSIONS_OK.finding(Status.PASS,
                                   title=f"{len(loaded)} compiled extension(s) load: {', '.join(sorted(loaded)[:6])}"
                                   + (" ..." if len(loaded) > 6 else "")))
    return findings


def _refused(result: ExtensionFacts) -> Finding:
    if result.record_line:
        how = f"listed in {result.record_line.record} line {result.record_line.line}, found by the import system"
    elif result.found_by == "import-system":
        how = "found by the import system, not in any RECORD"
    else:
        how = "listed in RECORD"
    return EXTENSIONS_NOT_LOADED.finding(
        Status.FAIL,
        title=f"{result.distribution}: extension {result.module} ({how}) was not loaded: {result.refused}",
        detail="Only regular files inside the environment are loaded: a FIFO blocks whoever opens it, a device "
        "or a path outside the environment is no extension of this stack. `import` of this module meets the "
        "same file.",
        evidence={"module": result.module, "path": result.path, "found_by": result.found_by,
                  "why": result.refused},
    )


def _untracked(results: list[ExtensionFacts]) -> Finding:
    names = ", ".join(f"{r.module} ({r.path})" for r in results[:4]) + (" ..." if len(results) > 4 else "")
    shadowing = [r for r in results if r.shadows]
    detail = ("`import` loads these files, but no installed RECORD lists them: a `pip install -e` or `setup.py "
              "develop` build, or a build copied in by hand. No installer verifies, upgrades or removes them with "
              "their distribution. They were judged like the stack's other extensions: loaded here, and read for "
              "their GPU architectures and the torch symbols they need (arch-coverage).")
    if shadowing:
        detail += " " + "; ".join(f"{r.module} shadows {r.shadows.path}, which {r.shadows.distribution}'s RECORD lists"
                                  for r in shadowing[:3] if r.shadows is not None) + "."
    return EXTENSIONS_UNTRACKED.finding(
        Status.WARN,
        title=f"{len(results)} compiled extension(s) found by the import system, not in any RECORD: {names}",
        detail=detail,
        evidence={"extensions": [{"module": r.module, "path": r.path, "distribution": r.distribution,
                                  "finder": r.finder, "shadows": r.shadows.to_json() if r.shadows else None, "ok": r.ok} for r in results]},
    )


def _needs_driver(library: str, group: list[tuple[ExtensionFacts, Cause]]) -> Finding:
    """One finding for the extensions that only the NVIDIA driver's `library` keeps from loading here."""
    modules = sorted(result.module for result, _ in group)
    owners = sorted({str(result.distribution) for result, _ in group})
    first, cause = group[0]
    return cause.code.finding(
        cause.status or Status.SKIP,
        title=f"{', '.join(owners)}: {len(modules)} extension(s) need {library}, the NVIDIA driver's library, "
        f"which a machine without GPUs (--no-gpu) lacks; not loaded here: {', '.join(modules[:6])}"
        + (" ..." if len(modules) > 6 else ""),
        detail=_detail(first, cause.detail),
        evidence={"library": library, "driver_library": True,
                  "extensions": [{"module": r.module, "distribution": r.distribution, "path": r.path,
                                  "exception": literal_exception(r) if r.exception else None} for r, _ in group]},
    )
