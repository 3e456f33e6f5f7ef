"""Layer: imports, for real, in the target interpreter.

- The exact `from flash_attn.ops.triton.rotary import apply_rotary` vLLM runs at engine start.
- Every import of an external kernel package in the installed vLLM's source, judged by the exception
  the target really raises against the guard vLLM puts around it.
- Every compiled extension module of the stack, loaded on its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import ClassVar

from dflash_doctor.check import Facts
from dflash_doctor.checks.python.extension_abi import other_python_findings
from dflash_doctor.checks.python.guards import judge_site
from dflash_doctor.checks.python.import_failures import Cause, classify, exception_mro, literal_exception
from dflash_doctor.checks.python.namespaces import ABSENT_IS_SKIPPED, BROKEN_FLASH_ATTN
from dflash_doctor.checks.remedy import Installer
from dflash_doctor.codes import Code
from dflash_doctor.facts.environment_shapes import Distributions, Resolution, Target
from dflash_doctor.facts.imports_shapes import (
    ExtensionFacts,
    Extensions,
    ImportFacts,
    RotaryImport,
    SurfaceImports,
)
from dflash_doctor.facts.nvml_shapes import Gpu
from dflash_doctor.facts.vllm_source_shapes import ImportSite, VllmSource, VllmSurface
from dflash_doctor.knowledge.vllm_imports import SERVING_PATH_SITES
from dflash_doctor.model import STOPS_SERVE, Finding, Status

CODES: tuple[Code, ...] = (
    # imports
    Code("imports.rotary-ok", "The rotary import vLLM makes works",
         "`from flash_attn.ops.triton.rotary import apply_rotary` succeeded in the target interpreter."),
    Code("imports.rotary-absent", "flash_attn is absent; vLLM skips its rotary import",
         "flash_attn is not installed, so vLLM's guarded rotary import is skipped and vLLM uses its own path."),
    Code("imports.namespace-package", "The import fails: flash_attn is a namespace package",
         "The import raised ModuleNotFoundError for a flash_attn submodule because flash_attn is a namespace "
         "package (see namespaces.v4-without-v2). " + BROKEN_FLASH_ATTN),
    Code("imports.undefined-symbol", "A compiled extension was built against another torch",
         "The import raised `undefined symbol: _ZN3c10...`: the extension (typically flash_attn_2_cuda) was built "
         "against a torch with another C++ ABI or version than the installed one. Because flash_attn/__init__.py "
         "imports it, even the pure-Triton flash_attn.ops.triton.rotary fails. Rebuild it against the installed "
         "torch (FLASH_ATTENTION_FORCE_BUILD=TRUE, --no-build-isolation) or install the release wheel whose name "
         "matches this torch's major.minor, CUDA major and cxx11abi. " + BROKEN_FLASH_ATTN),
    Code("imports.extension-missing", "flash-attn was built without its CUDA extension",
         "flash_attn_2_cuda is not installed (the wheel was built with FLASH_ATTENTION_SKIP_CUDA_BUILD, or the "
         "build failed quietly). flash_attn/__init__.py imports it unguarded (2.8.3 and 2.8.3.post2), so every "
         "flash_attn import raises ModuleNotFoundError: vLLM 0.24 and later survive that, 0.18-0.23 do not. "
         "Build flash-attn with its extension against the installed torch."),
    Code("imports.dependency-missing", "The import needs a package that is not installed",
         "The module imports torch, triton or another package that is not installed in the target, or links a "
         "library of torch's (libc10.so, libtorch_cuda.so) while torch is not installed. Where an installed "
         "distribution requires torch, this finding follows from distributions.requirement-missing and its fix is that "
         "one's: install the torch it requires, not a loader path."),
    Code("imports.glibc-too-old", "An extension needs a newer glibc/libstdc++",
         "The extension was linked on a newer system (flash-attn's release wheels from 2.8.0.post2 on are built "
         "on Ubuntu 22.04 and need GLIBC 2.32+). Build from source on this system, or use an older wheel."),
    Code("imports.library-not-found", "A shared library the extension links is missing",
         "The dynamic loader could not find a library the extension needs (often libcudart.so.N or libc10.so). "
         "Install the matching CUDA runtime or torch, or fix LD_LIBRARY_PATH."),
    Code("imports.driver-library-missing", "An extension needs the NVIDIA driver's library, and it is not there",
         "The dynamic loader could not find a library of the NVIDIA driver (libcuda.so.1, libnvidia-ml.so.1, "
         "libnvidia-ptxjitcompiler.so.1, ...): these come with the driver, not with an image or a wheel. On a GPU "
         "host it is installed with the driver; in a container the NVIDIA container runtime mounts it when the "
         "container starts with GPUs and the `compute` capability. When the gpu check finds no driver at all, "
         "this finding follows from that one (its `cause`), and the fix is the driver. On a machine without GPUs "
         "(a CI image build), run with --no-gpu: the load is then not tried as a failure (imports.needs-driver)."),
    Code("imports.needs-driver", "Not loaded here: it needs the NVIDIA driver's library (--no-gpu)",
         "Under --no-gpu (a CI image build, a machine without GPUs), an extension that fails to load only because a "
         "library of the NVIDIA driver (libcuda.so.1, libnvidia-ml.so.1, ...) is absent is skipped, not failed: "
         "the NVIDIA container runtime provides those libraries at run time, and an image must not ship them. "
         "A missing library the image must ship (libcudart, libnvrtc, libcublas, torch's libraries) still fails "
         "(imports.library-not-found). The loader stops at the first library it cannot find, so run the doctor "
         "where the GPUs are to load these extensions for real."),
    Code("imports.crashed", "The import killed the interpreter",
         "Importing the module killed the process with a signal (e.g. SIGSEGV). The doctor ran it in a "
         "subprocess, so this is a finding, not a crash. Reinstall the package; if it persists, the stderr in the "
         "evidence is what to report upstream."),
    Code("imports.timeout", "The import hung",
         "Importing the module did not finish within the timeout (--timeout). Something in its import hangs: a "
         "lock, a network call, a driver call."),
    Code("imports.failed", "The import failed",
         "The import raised an exception the doctor has no specific diagnosis for; the exception and traceback "
         "are in the evidence."),
    Code("import-surface.no-vllm", "vLLM is not installed", "There is no vLLM source to read imports from."),
    Code("import-surface.no-source", "vLLM's package directory was not found",
         "vLLM is installed (its dist-info is there) but the doctor could not find its package directory."),
    Code("import-surface.ok", "vLLM's external kernel imports are all safe here",
         "Every import of an external kernel package in the installed vLLM's source either works in the target or "
         "is guarded against the exception it raises there."),
    Code("import-surface.unguarded-failure", "vLLM imports a package that fails here, and nothing catches it",
         "The installed vLLM's source imports this module, the import raises in the target, and no guard around "
         "the import (try/except, suppress, find_spec, platform test) catches that exception. On the serving path "
         "this stops `vllm serve`; elsewhere it raises when that feature is used. Under --no-gpu, an import that fails "
         "only because a library of the NVIDIA driver (libcuda.so.1) is absent is a skip: the container runtime "
         "provides it at run time (see imports.needs-driver)."),
    Code("extensions.none", "No compiled extensions to load",
         "The stack has no compiled extension modules besides torch's own."),
    Code("extensions.not-loaded", "An extension file was not loaded: not a regular file, or outside the environment",
         "The stack's extension module resolves to a FIFO, a device, a socket, or a path outside the environment "
         "(/dev, /proc, /sys, or out of the site directories for a RECORD line). Loading it would block or run code "
         "from elsewhere, so the doctor does not; `import` of the module meets the same file. Reinstall the "
         "distribution, or remove what the import system finds."),
    Code("extensions.untracked", "An extension the import system finds that no RECORD lists",
         "`import flash_attn_2_cuda` (or vllm._C, ...) loads whatever the import system finds first: a source "
         "build, `pip install -e`, `setup.py develop`, a build copied in by hand. The doctor resolves each of the "
         "stack's extension modules without importing it (each package level's search path, no __init__ run) and "
         "judges the files no RECORD lists like the others: loaded in the target, read for GPU architectures and "
         "torch symbols. No installer verifies, upgrades or removes these files; when one shadows the file a "
         "RECORD lists, the RECORD's file is not the one that runs."),
    Code("extensions.other-python", "An extension is built for another Python",
         "The file's name carries another interpreter's ABI tag (`_C.cpython-312-x86_64-linux-gnu.so` under "
         "CPython 3.11): the import system looks only for this interpreter's EXTENSION_SUFFIXES "
         "(`.cpython-311-x86_64-linux-gnu.so`, `.abi3.so`, `.so`), so the module does not exist here. When the "
         "installed wheel itself was built for another Python (its WHEEL tags say so), this fails: reinstall, and "
         "the installer picks the wheel built for this interpreter. When a wheel that fits ships such a file (vLLM "
         "0.20.1's abi3 wheel has DeepGEMM's `_C.cpython-312-x86_64-linux-gnu.so`), it warns: whatever imports "
         "that module fails on this Python, and reinstalling the same release does not change that: the fix is an "
         "environment of the Python the file is built for, or (vLLM's DeepGEMM) a release that ships the file "
         "for this Python, or VLLM_USE_DEEP_GEMM=0 so that vLLM does not select it."),
    Code("extensions.ok", "Compiled extensions load",
         "Each compiled extension module of the stack loaded in its own subprocess, after torch."),
)


def _resolves(resolution: Resolution) -> dict[str, bool]:
    return {name: r.found for name, r in resolution.names.items()}


def _classify(result: ImportFacts, facts: Facts, dists: Distributions, installer: Installer) -> Cause:
    """classify(), with what the circumstances add: whether a GPU is expected here (the NVML section) and the
    target's marker environment (for its unmet requirements)."""
    target = facts.optional_section(Target)
    return classify(result, dists, facts.section(Resolution), installer, gpu=facts.optional_section(Gpu),
                    marker_env=target.marker_environment if target is not None else None)


def _detail(result: ImportFacts, *more: str) -> str:
    """The literal exception first (the words the user will see from vLLM), then why it matters."""
    return "\n".join(line for line in (literal_exception(result), *more) if line)


def _serving_site(site: ImportSite) -> bool:
    return any(site.file == path and site.module.split(".")[0] == top for path, top in SERVING_PATH_SITES.value)


class RotaryImportCheck:
    id: ClassVar[str] = "imports"
    layer: ClassVar[str] = "python"
    title: ClassVar[str] = "flash_attn rotary import"
    codes: ClassVar[tuple[Code, ...]] = tuple(c for c in CODES if c.id.startswith("imports."))
    needs: ClassVar[frozenset[str]] = frozenset(
        {"target", "distributions", "resolution", "rotary_import", "vllm_source", "gpu"}
    )
    after: ClassVar[frozenset[str]] = frozenset()
    requires_gpu: ClassVar[bool] = False

    def judge(self, facts: Facts) -> Iterable[Finding]:
        result = facts.section(RotaryImport)
        resolution = facts.section(Resolution)
        statement = "from flash_attn.ops.triton.rotary import apply_rotary"
        if result.ok:
            versions = result.versions.to_json() if result.versions is not None else {}
            return [Finding(
                id="imports.rotary-ok",
                status=Status.PASS,
                title=f"`{statement}` works ({result.file})",
                evidence={"file": result.file, "seconds": result.seconds, "versions": versions},
            )]
        flash_attn = resolution.names.get("flash_attn")
        if flash_attn is None or not flash_attn.found:
            vllm_source = facts.section(VllmSource)
            return [Finding(
                id="imports.rotary-absent",
                status=Status.PASS,
                title=f"`{statement}`: flash_attn is not installed, so vLLM {vllm_source.version}'s guarded import "
                "skips it" if vllm_source.installed else
                f"`{statement}`: neither flash_attn nor vLLM is installed here; {ABSENT_IS_SKIPPED}",
            )]
        dists = facts.section(Distributions)
        cause = _classify(result, facts, dists, Installer.for_target(facts.section(Target)))
        if cause.status is not None:
            status, consequence = cause.status, cause.detail
        else:
            status, consequence = _consequence(facts.section(VllmSource), exception_mro(result), _resolves(resolution),
                                               cause.code == "imports.namespace-package")
            consequence = "\n".join(filter(None, (cause.detail, consequence)))
        return [Finding(
            id=cause.code,
            status=status,
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
    if not sites:
        return Status.WARN, f"vLLM {version} does not import flash_attn.ops on its serving path."
    for site in sites:
        verdict = judge_site(site, mro, resolves)
        where = f"{site.file}:{site.line}"
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
    codes: ClassVar[tuple[Code, ...]] = tuple(c for c in CODES if c.id.startswith("import-surface."))
    needs: ClassVar[frozenset[str]] = frozenset(
        {"target", "distributions", "resolution", "vllm_surface", "surface_imports", "gpu"}
    )
    after: ClassVar[frozenset[str]] = frozenset()
    requires_gpu: ClassVar[bool] = False

    def judge(self, facts: Facts) -> Iterable[Finding]:
        source = facts.section(VllmSurface)
        if not source.installed:
            return [Finding(id="import-surface.no-vllm", status=Status.SKIP, title="vLLM is not installed: no import surface to check")]
        if not source.root:
            return [Finding(id="import-surface.no-source", status=Status.WARN,
                            title=f"vLLM {source.version} is installed but its package directory was not found")]
        resolves = _resolves(facts.section(Resolution))
        outcomes = {(r.module, tuple(r.names)): r for r in facts.section(SurfaceImports).imports}
        dists = facts.section(Distributions)
        installer = Installer.for_target(facts.section(Target))
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
            cause = _classify(result, facts, dists, installer)
            serving = [s for s, _ in raising if _serving_site(s)]
            shown = serving or [s for s, _ in raising]
            status = cause.status or (Status.FAIL if serving else Status.WARN)
            findings.append(Finding(
                id="import-surface.unguarded-failure",
                status=status,
                title=f"vLLM {source.version} imports {module} at "
                + ", ".join(f"{s.file}:{s.line}" for s in shown[:3])
                + f" and it fails here: {cause.summary}",
                detail=_detail(result, cause.detail, "This import is on `vllm serve`'s path and no guard around it "
                               "catches this exception." if serving else "No guard around it catches this "
                               "exception; it raises if vLLM reaches it (on CUDA, for a feature that uses the "
                               "package)."),
                evidence={**cause.evidence, "cause_code": cause.code,
                          "sites": [{"file": s.file, "line": s.line, "where": s.where,
                                     "guards": [g.to_json() for g in s.guards]} for s in shown],
                          STOPS_SERVE: bool(serving) and status is Status.FAIL},
                remediation=cause.remediation,
                cause=cause.follows,
            ))
        if not findings:
            findings.append(Finding(
                id="import-surface.ok",
                status=Status.PASS,
                title=f"vLLM {source.version}: {len(source.sites)} imports of external kernel packages "
                f"({len(outcomes)} modules) all resolve or are guarded against what they raise here",
                evidence={"modules": sorted({m for m, _ in outcomes}), "files_parsed": source.files_parsed},
            ))
        return findings


class ExtensionsCheck:
    id: ClassVar[str] = "extensions"
    layer: ClassVar[str] = "python"
    title: ClassVar[str] = "Compiled extensions load"
    codes: ClassVar[tuple[Code, ...]] = tuple(c for c in CODES if c.id.startswith("extensions."))
    needs: ClassVar[frozenset[str]] = frozenset({"target", "distributions", "resolution", "extensions", "gpu"})
    after: ClassVar[frozenset[str]] = frozenset()
    requires_gpu: ClassVar[bool] = False

    def judge(self, facts: Facts) -> Iterable[Finding]:
        items = facts.section(Extensions).items
        if not items:
            return [Finding(id="extensions.none", status=Status.SKIP,
                            title="no compiled extension modules in the stack besides torch's own")]
        dists = facts.section(Distributions)
        target = facts.section(Target)
        installer = Installer.for_target(target)
        findings = other_python_findings(items, dists, target, installer)
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
            cause = _classify(result, facts, dists, installer)
            if cause.code == "imports.needs-driver":
                needs_driver.setdefault(str(cause.evidence.get("library")), []).append((result, cause))
                continue
            findings.append(Finding(
                id=cause.id_for(ExtensionsCheck.id),
                status=cause.status or Status.FAIL,
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
            findings.insert(0, Finding(id="extensions.ok", status=Status.PASS,
                                       title=f"{len(loaded)} compiled extension(s) load: {', '.join(sorted(loaded)[:6])}"
                                       + (" ..." if len(loaded) > 6 else "")))
        return findings


def _refused(result: ExtensionFacts) -> Finding:
    if result.record_line:
        how = f"listed in {result.record_line.get('record')} line {result.record_line.get('line')}, found by the import system"
    elif result.found_by == "import-system":
        how = "found by the import system, not in any RECORD"
    else:
        how = "listed in RECORD"
    return Finding(
        id="extensions.not-loaded",
        status=Status.FAIL,
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
        detail += " " + "; ".join(f"{r.module} shadows {(r.shadows or {}).get('path')}, which "
                                  f"{(r.shadows or {}).get('distribution')}'s RECORD lists" for r in shadowing[:3]) + "."
    return Finding(
        id="extensions.untracked",
        status=Status.WARN,
        title=f"{len(results)} compiled extension(s) found by the import system, not in any RECORD: {names}",
        detail=detail,
        evidence={"extensions": [{"module": r.module, "path": r.path, "distribution": r.distribution,
                                  "finder": r.finder, "shadows": r.shadows, "ok": r.ok} for r in results]},
    )


def _needs_driver(library: str, group: list[tuple[ExtensionFacts, Cause]]) -> Finding:
    """One finding for the extensions that only the NVIDIA driver's `library` keeps from loading here."""
    modules = sorted(result.module for result, _ in group)
    owners = sorted({str(result.distribution) for result, _ in group})
    first, cause = group[0]
    return Finding(
        id=cause.id_for(ExtensionsCheck.id),
        status=cause.status or Status.SKIP,
        title=f"{', '.join(owners)}: {len(modules)} extension(s) need {library}, the NVIDIA driver's library, "
        f"which a machine without GPUs (--no-gpu) lacks; not loaded here: {', '.join(modules[:6])}"
        + (" ..." if len(modules) > 6 else ""),
        detail=_detail(first, cause.detail),
        evidence={"library": library, "driver_library": True,
                  "extensions": [{"module": r.module, "distribution": r.distribution, "path": r.path,
                                  "exception": c.evidence.get("exception")} for r, c in group]},
    )
