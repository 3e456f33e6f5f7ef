"""Layer: imports, for real, in the target interpreter.

- The exact `from flash_attn.ops.triton.rotary import apply_rotary` vLLM runs at engine start.
- Every import of an external kernel package in the installed vLLM's source, judged by the exception
  the target really raises against the guard vLLM puts around it.
- Every compiled extension module of the stack, loaded on its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from dflash_doctor.check import Facts
from dflash_doctor.envfacts import Distributions
from dflash_doctor.guards import judge_site
from dflash_doctor.knowledge.vllm_imports import SERVING_PATH_SITES
from dflash_doctor.model import Finding, Status
from dflash_doctor.remedy import Installer

from .import_failures import classify, exception_mro


def _resolves(resolution: Mapping[str, Any]) -> dict[str, bool]:
    return {name: bool(r.get("found")) for name, r in resolution.items()}


def _serving_site(site: Mapping[str, Any]) -> bool:
    return any(site["file"] == path and site["module"].split(".")[0] == top for path, top in SERVING_PATH_SITES.value)


class RotaryImportCheck:
    id: ClassVar[str] = "imports"
    layer: ClassVar[str] = "python"
    title: ClassVar[str] = "flash_attn rotary import"
    needs: ClassVar[frozenset[str]] = frozenset(
        {"target", "distributions", "resolution", "rotary_import", "vllm_source"}
    )
    after: ClassVar[frozenset[str]] = frozenset()
    requires_gpu: ClassVar[bool] = False

    def judge(self, facts: Facts) -> Iterable[Finding]:
        result = facts["rotary_import"]
        resolution = facts["resolution"]
        statement = "from flash_attn.ops.triton.rotary import apply_rotary"
        if result.get("ok"):
            versions = result.get("versions") or {}
            return [Finding(
                id="import.rotary-ok",
                status=Status.PASS,
                title=f"`{statement}` works ({result.get('file')})",
                evidence={"file": result.get("file"), "seconds": result.get("seconds"), "versions": versions},
            )]
        if not (resolution.get("flash_attn") or {}).get("found"):
            return [Finding(
                id="import.rotary-absent",
                status=Status.PASS,
                title=f"`{statement}`: flash_attn is not installed, so vLLM's guarded import skips it",
            )]
        dists = Distributions(facts["distributions"])
        cause = classify(result, dists, resolution, Installer.for_target(facts["target"]))
        status, consequence = _consequence(facts["vllm_source"], exception_mro(result), _resolves(resolution),
                                           cause.code == "import.namespace-package")
        return [Finding(
            id=cause.code,
            status=status,
            title=f"`{statement}` fails: {cause.summary}",
            detail=consequence,
            evidence={**cause.evidence, "statement": statement},
            remediation=cause.remediation,
            cause=cause.follows,
        )]


def _consequence(vllm_source: Mapping[str, Any], mro: tuple[str, ...] | None,
                 resolves: Mapping[str, bool], namespace_only: bool) -> tuple[Status, str]:
    if not vllm_source.get("installed"):
        if namespace_only:
            return Status.WARN, ("vLLM is not installed here; vLLM 0.18-0.23 would die at engine start on this, "
                                 "later versions would run without the flash-attn rotary path.")
        return Status.FAIL, "vLLM is not installed here, but this flash-attn cannot be imported the way vLLM imports it."
    sites = [s for s in vllm_source.get("sites") or [] if _serving_site(s) and s["module"].startswith("flash_attn.ops")]
    version = vllm_source.get("version")
    if not sites:
        return Status.WARN, f"vLLM {version} does not import flash_attn.ops on its serving path."
    for site in sites:
        verdict = judge_site(site, mro, resolves)
        where = f"{site['file']}:{site['line']}"
        if verdict.outcome in ("raises", "maybe-raises"):
            return Status.FAIL, f"vLLM {version} imports it at {where} and nothing catches this: `vllm serve` dies at engine start."
        if verdict.outcome == "caught" and verdict.caught_by:
            caught = verdict.caught_by
            return Status.WARN, (f"vLLM {version} catches it at {where} ({caught['kind']} "
                                 f"{', '.join(caught['catches'])}): it serves, without the flash-attn rotary path.")
    return Status.WARN, f"vLLM {version} does not reach this import on CUDA."


class ImportSurfaceCheck:
    id: ClassVar[str] = "import-surface"
    layer: ClassVar[str] = "python"
    title: ClassVar[str] = "vLLM's external kernel imports"
    needs: ClassVar[frozenset[str]] = frozenset(
        {"target", "distributions", "resolution", "vllm_surface", "surface_imports"}
    )
    after: ClassVar[frozenset[str]] = frozenset()
    requires_gpu: ClassVar[bool] = False

    def judge(self, facts: Facts) -> Iterable[Finding]:
        source = facts["vllm_surface"]
        if not source.get("installed"):
            return [Finding(id="surface.no-vllm", status=Status.SKIP, title="vLLM is not installed: no import surface to check")]
        if not source.get("root"):
            return [Finding(id="surface.no-source", status=Status.WARN,
                            title=f"vLLM {source.get('version')} is installed but its package directory was not found")]
        resolution = facts["resolution"]
        resolves = _resolves(resolution)
        outcomes = {(r["module"], tuple(r.get("names") or ())): r for r in facts["surface_imports"].get("imports", [])}
        dists = Distributions(facts["distributions"])
        installer = Installer.for_target(facts["target"])
        findings: list[Finding] = []
        for (module, names), result in sorted(outcomes.items()):
            if result.get("ok"):
                continue
            top = module.split(".", 1)[0]
            absent = not resolves.get(top, False)
            sites = [s for s in source["sites"] if s["module"] == module and tuple(s["names"]) == names]
            verdicts = [(s, judge_site(s, exception_mro(result), resolves)) for s in sites]
            raising = [(s, v) for s, v in verdicts if v.outcome in ("raises", "maybe-raises")]
            if not raising or (absent and not any(_serving_site(s) for s, _ in raising)):
                continue  # guarded, or an optional package simply not installed
            cause = classify(result, dists, resolution, installer)
            serving = [s for s, _ in raising if _serving_site(s)]
            shown = serving or [s for s, _ in raising]
            findings.append(Finding(
                id="surface.unguarded-failure",
                status=Status.FAIL if serving else Status.WARN,
                title=f"vLLM {source.get('version')} imports {module} at "
                + ", ".join(f"{s['file']}:{s['line']}" for s in shown[:3])
                + f" and it fails here: {cause.summary}",
                detail=("This import is on `vllm serve`'s path and no guard around it catches this exception."
                        if serving else "No guard around it catches this exception; it raises if vLLM reaches it "
                        "(on CUDA, for a feature that uses the package)."),
                evidence={**cause.evidence, "sites": [{k: s[k] for k in ("file", "line", "where", "guards")} for s in shown]},
                remediation=cause.remediation,
                cause=cause.follows,
            ))
        if not findings:
            findings.append(Finding(
                id="surface.ok",
                status=Status.PASS,
                title=f"vLLM {source.get('version')}: {len(source['sites'])} imports of external kernel packages "
                f"({len(outcomes)} modules) all resolve or are guarded against what they raise here",
                evidence={"modules": sorted({m for m, _ in outcomes}), "files_parsed": source.get("files_parsed")},
            ))
        return findings


class ExtensionsCheck:
    id: ClassVar[str] = "extensions"
    layer: ClassVar[str] = "python"
    title: ClassVar[str] = "Compiled extensions load"
    needs: ClassVar[frozenset[str]] = frozenset({"target", "distributions", "resolution", "extensions"})
    after: ClassVar[frozenset[str]] = frozenset()
    requires_gpu: ClassVar[bool] = False

    def judge(self, facts: Facts) -> Iterable[Finding]:
        items = facts["extensions"].get("items") or []
        if not items:
            return [Finding(id="extensions.none", status=Status.SKIP,
                            title="no compiled extension modules in the stack besides torch's own")]
        dists = Distributions(facts["distributions"])
        installer = Installer.for_target(facts["target"])
        findings = []
        loaded = []
        for result in items:
            if result.get("refused"):
                findings.append(_refused(result))
                continue
            if result.get("ok"):
                loaded.append(result["module"])
                continue
            cause = classify(result, dists, facts["resolution"], installer)
            findings.append(Finding(
                id=cause.code,
                status=Status.FAIL,
                title=f"{result['distribution']}: extension {result['module']} does not load: {cause.summary}",
                evidence={**cause.evidence, "path": result.get("path"), "found_by": result.get("found_by", "record")},
                remediation=cause.remediation,
            ))
        untracked = [r for r in items if r.get("found_by") == "import-system" and not r.get("refused")]
        if untracked:
            findings.append(_untracked(untracked))
        if loaded:
            findings.insert(0, Finding(id="extensions.ok", status=Status.PASS,
                                       title=f"{len(loaded)} compiled extension(s) load: {', '.join(sorted(loaded)[:6])}"
                                       + (" ..." if len(loaded) > 6 else "")))
        return findings


def _refused(result: Mapping[str, Any]) -> Finding:
    how = ("found by the import system, not in any RECORD" if result.get("found_by") == "import-system"
           else "listed in RECORD")
    return Finding(
        id="extensions.not-loaded",
        status=Status.FAIL,
        title=f"{result.get('distribution')}: extension {result['module']} ({how}) was not loaded: {result['refused']}",
        detail="Only regular files inside the environment are loaded: a FIFO blocks whoever opens it, a device "
        "or a path outside the environment is no extension of this stack. `import` of this module meets the "
        "same file.",
        evidence={"module": result["module"], "path": result.get("path"), "found_by": result.get("found_by"),
                  "why": result["refused"]},
    )


def _untracked(results: list[Mapping[str, Any]]) -> Finding:
    names = ", ".join(f"{r['module']} ({r.get('path')})" for r in results[:4]) + (" ..." if len(results) > 4 else "")
    shadowing = [r for r in results if r.get("shadows")]
    detail = ("`import` loads these files, but no installed RECORD lists them: a `pip install -e` or `setup.py "
              "develop` build, or a build copied in by hand. No installer verifies, upgrades or removes them with "
              "their distribution. They were judged like the stack's other extensions: loaded here, and read for "
              "their GPU architectures and the torch symbols they need (arch-coverage).")
    if shadowing:
        detail += " " + "; ".join(f"{r['module']} shadows {r['shadows'].get('path')}, which "
                                  f"{r['shadows'].get('distribution')}'s RECORD lists" for r in shadowing[:3]) + "."
    return Finding(
        id="extensions.untracked",
        status=Status.WARN,
        title=f"{len(results)} compiled extension(s) found by the import system, not in any RECORD: {names}",
        detail=detail,
        evidence={"extensions": [{k: r.get(k) for k in ("module", "path", "distribution", "finder", "shadows", "ok")}
                                 for r in results]},
    )
