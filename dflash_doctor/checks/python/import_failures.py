"""Reads an import's real exception (from the try_import probe) and names its cause, with the fix.

Shared by the rotary-import, import-surface and extensions checks: the same `undefined symbol` means
the same thing wherever it surfaces.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import field, replace
from typing import Any

from dflash_doctor.checks.gpu.devices import no_driver_finding
from dflash_doctor.checks.python.codes import DISTRIBUTIONS_REQUIREMENT_MISSING, CauseCodes
from dflash_doctor.checks.python.namespace_layout import (
    TOP,
    describe_namespace,
    explain_layout,
    namespace_portions,
)
from dflash_doctor.checks.python.requirements import unmet_requirements
from dflash_doctor.checks.remedy import Installer, flash_attn_source_build, quote
from dflash_doctor.codes import Code
from dflash_doctor.facts.gpu.nvml_shapes import Gpu
from dflash_doctor.facts.python.envfacts import canonical
from dflash_doctor.facts.python.environment_shapes import Distributions, Resolution
from dflash_doctor.facts.python.imports_shapes import ImportFacts, ImportProcess, StackVersions
from dflash_doctor.knowledge.cuda import is_driver_library
from dflash_doctor.knowledge.stack import is_torch_library
from dflash_doctor.model import Remediation, Status
from dflash_doctor.shape import frozen_dataclass

__all__ = ["Cause", "ImportContext", "classify", "exception_mro", "literal_exception"]

SIGNAL_MRO = ("<signal>",)


@frozen_dataclass(frozen=True)
class Cause:
    code: Code
    """The code the judging check gives this cause (one of the CauseCodes it passed to `classify`:
    imports.undefined-symbol for the rotary import, extensions.undefined-symbol for an extension)."""
    summary: str
    evidence: Mapping[str, Any] = field(default_factory=dict)
    remediation: tuple[Remediation, ...] = ()
    detail: str = ""
    """Why, in a sentence or two, where the summary cannot say it all."""
    status: Status | None = None
    """A status the circumstances settle whatever guards the import (skip: it cannot be tried here); None: the
    check judges the consequence."""
    follows: Code | str = ""
    """The code (or id) of another finding of the same report this one follows from (Finding.cause)."""
    driver_library: str = ""
    """The NVIDIA driver's library the loader did not find, when that is the cause (libcuda.so.1)."""


@frozen_dataclass(frozen=True)
class ImportContext:
    """What a failing import is judged against: the target's distributions and how its top-level names resolve,
    the installer its fixes name, the NVML section (None when not collected; `skipped` under --no-gpu), which says
    whether a missing driver library is expected here, and the target's marker environment (for its unmet
    requirements)."""

    dists: Distributions
    resolution: Resolution
    installer: Installer
    gpu: Gpu | None = None
    marker_env: Mapping[str, str] = field(default_factory=dict)


def literal_exception(result: ImportFacts) -> str:
    """The words the user will see: the exception as Python prints its last line, or how the process ended."""
    exception = result.exception
    if exception:
        return f"{exception.type}: {exception.message}"
    process = result.process or ImportProcess()
    return str(process.error or process.signal or "")


def exception_mro(result: ImportFacts) -> tuple[str, ...] | None:
    """The exception's class names as a guard would match them; None when the import worked."""
    if result.ok:
        return None
    exception = result.exception
    if exception:
        return tuple(exception.mro or (exception.type,))
    return SIGNAL_MRO  # no exception object: killed, hung or never started; nothing can catch that


def _message(result: ImportFacts) -> str:
    exception = result.exception
    if exception is None:
        return ""
    return "\n".join([exception.message] + [c.message for c in exception.chain])


def classify(result: ImportFacts, context: ImportContext, codes: CauseCodes) -> Cause:
    """Name why `result`'s import failed (the caller has checked that it did), with the code the judging check
    gives that cause (`codes`: IMPORT_CAUSES for the rotary import, EXTENSION_CAUSES for an extension).

    For a module of flash_attn, also say where flash_attn comes from when that is the cause (a namespace
    package, a copy no distribution owns), and rank first the one line that removes it: uninstalling the
    flash-attention distributions nothing requires, with what the uninstall leaves, so that vLLM's guard finds
    no flash_attn at all.
    """
    cause = _classify(result, context, codes)
    if result.module.split(".", 1)[0] != TOP:
        return cause
    layout = explain_layout(context.dists, context.resolution.of(TOP), context.installer)
    if layout is None:
        return cause
    summary = cause.summary
    if layout.summary and layout.summary not in summary:
        summary = f"{layout.summary}: {summary}"
    fixes = ((layout.fix,) if layout.fix else ()) + tuple(r for r in cause.remediation if r != layout.fix)
    return replace(cause, summary=summary, remediation=fixes, follows=layout.cause or cause.follows,
                   evidence={**cause.evidence, "flash_attn": layout.summary} if layout.summary else cause.evidence)


def _classify(result: ImportFacts, context: ImportContext, codes: CauseCodes) -> Cause:
    dists, resolution, installer = context.dists, context.resolution, context.installer
    process = result.process or ImportProcess()
    module = result.module
    if process.timed_out:
        return Cause(codes.timeout, f"`import {module}` hung ({process.error})", {"stderr": process.stderr})
    if process.signal:
        return Cause(codes.crashed, f"`import {module}` killed the interpreter with {process.signal}",
                     {"signal": process.signal, "stderr": process.stderr})
    exception = result.exception
    if not exception:
        return Cause(codes.failed, f"`import {module}` {process.error or 'failed without an exception'}",
                     {"process": result.process.to_json() if result.process else {}})
    message = _message(result)
    kind = exception.type
    missing = exception.name
    evidence = {"exception": f"{kind}: {exception.message}", "traceback": exception.traceback}

    if symbol := re.search(r"undefined symbol: (\S+)", message):
        return _undefined_symbol(symbol.group(1), result, dists, installer, evidence, codes)
    if glibc := re.search(r"version [`']((GLIBC|GLIBCXX|CXXABI)_[\d.]+)' not found", message):
        return Cause(
            codes.glibc_too_old,
            f"`import {module}` needs {glibc.group(1)}, which this system's C/C++ runtime lacks",
            {**evidence, "required": glibc.group(1)},
            (Remediation("ldd --version | head -1", "see the host's glibc: the wheel was built on a newer system"),),
        )
    if library := re.search(r"(lib[\w.+-]+\.so[\w.]*): cannot open shared object file", message):
        name = library.group(1)
        if is_driver_library(name):
            # The loader stops at the first library it cannot find: one the image must ship may be missing too.
            unfound = [lib.name for lib in result.libraries or [] if not lib.found and not is_driver_library(lib.name)]
            if not unfound:
                return _driver_library(name, module, context.gpu, {**evidence, "library": name}, codes)
            torch_libraries = [lib for lib in unfound if is_torch_library(lib)]
            if torch_libraries and dists.get("torch") is None:
                # The image lacks torch itself, not a library path: the fix is torch.
                return _torch_absent(torch_libraries[0], module, context,
                                     {**evidence, "library": torch_libraries[0], "driver_library_missing": name}, codes)
            return Cause(
                codes.library_not_found,
                f"`import {module}` cannot load {unfound[0]}"
                + (f" (nor {', '.join(unfound[1:])})" if unfound[1:] else "")
                + f"; the loader stopped earlier at {name}, the NVIDIA driver's library",
                {**evidence, "library": unfound[0], "also_missing": unfound[1:], "driver_library_missing": name,
                 "libraries": [lib.to_json() for lib in result.libraries or []]},
                (Remediation(_loader_lookup(unfound[0]),
                             "see whether the dynamic loader knows the library at all"),),
                detail=f"{name} comes with the NVIDIA driver (provided at run time), but {unfound[0]} is not the "
                "driver's: the image must ship it.",
            )
        if is_torch_library(name) and dists.get("torch") is None:
            return _torch_absent(name, module, context, {**evidence, "library": name}, codes)
        return Cause(
            codes.library_not_found,
            f"`import {module}` cannot load {library.group(1)}",
            {**evidence, "library": library.group(1)},
            (Remediation(_loader_lookup(library.group(1)),
                         "see whether the dynamic loader knows the library at all"),),
        )
    if kind == "ModuleNotFoundError" and missing:
        top = missing.split(".", 1)[0]
        resolved = resolution.of(top)
        if top == "flash_attn" and resolved.namespace:
            portions = namespace_portions(resolved, dists)
            return Cause(
                codes.namespace_package,
                f"`{missing}` does not exist: flash_attn is a namespace package {describe_namespace(portions)}",
                {**evidence, "search_locations": resolved.search_locations,
                 "portions": [{"path": p.path, "owners": [d.label() for d in p.owners]} for p in portions]},
            )
        if missing == "flash_attn_2_cuda":
            return Cause(
                codes.extension_missing,
                "flash_attn_2_cuda is not installed: this flash-attn was built without its CUDA extension",
                evidence,
                (Remediation(
                    flash_attn_source_build(installer, f"flash-attn=={dists.version('flash-attn')}", max_jobs=None),
                    "build flash-attn with its CUDA extension against the installed torch",
                ),),
            )
        if top != module.split(".", 1)[0]:
            return Cause(
                codes.dependency_missing,
                f"`import {module}` needs `{top}`, which is not installed",
                {**evidence, "missing": top},
                (Remediation(installer.install(top), f"install {top}"),) if top in ("torch", "triton", "einops") else (),
            )
    return Cause(codes.failed, f"`import {module}` raised {kind}: {exception.message}", evidence)


def _loader_lookup(library: str) -> str:
    """`ldconfig -p | grep NAME`: the library's name up to `.so`, quoted (it is read from an ELF file)."""
    return f"ldconfig -p | grep -F -- {quote(library.split('.so')[0])}"


def _driver_library(name: str, module: str, gpu: Gpu | None, evidence: Mapping[str, Any], codes: CauseCodes) -> Cause:
    """A library of the NVIDIA driver (libcuda.so.1, libnvidia-ml.so.1): not the image's to ship."""
    provided = (f"{name} comes with the NVIDIA driver: on a GPU host it is installed with the driver, and in a "
                "container the NVIDIA container runtime mounts it (NVIDIA_DRIVER_CAPABILITIES compute,utility) "
                "when the container starts with GPUs. An image must not ship it.")
    if gpu is not None and gpu.skipped:
        return Cause(
            codes.needs_driver,
            f"`import {module}` needs {name}, the NVIDIA driver's library, which a machine without GPUs lacks "
            "(--no-gpu): not loaded here",
            {**evidence, "driver_library": True},
            detail=provided + " So it cannot be loaded on this machine; run the doctor where the GPUs are to load it.",
            status=Status.SKIP,
            driver_library=name,
        )
    cause = None
    if gpu is not None:
        cause = no_driver_finding(gpu)  # the finding the gpu check gives for the same facts
    if cause is not None:
        return Cause(
            codes.driver_library_missing,
            f"`import {module}` cannot load {name}: there is no NVIDIA driver here ({cause.id})",
            {**evidence, "driver_library": True},
            detail=provided + " Without a driver, nothing that needs it loads; on a machine without GPUs (a CI "
            "image build), run with --no-gpu.",
            follows=cause.id,
            driver_library=name,
        )
    driver = f" ({gpu.driver_version})" if gpu and gpu.driver_version else ""
    return Cause(
        codes.driver_library_missing,
        f"`import {module}` cannot load {name}, the NVIDIA driver's library"
        + (f", although the driver{driver} answers" if gpu else ""),
        {**evidence, "driver_library": True},
        (Remediation(_loader_lookup(name), "see whether the dynamic loader knows the "
                     "driver's library; after installing a driver on a host, `sudo ldconfig` registers it"),),
        detail=provided + (" The driver answers here, but the target's dynamic loader does not find "
                           f"{name}: in a container, the runtime mounts it only with the `compute` capability."
                           if gpu else ""),
        driver_library=name,
    )


def _torch_absent(name: str, module: str, context: ImportContext, evidence: Mapping[str, Any],
                  codes: CauseCodes) -> Cause:
    """A torch library (libc10.so, libtorch_cuda.so) the extension links, and torch is not installed: the fix is
    torch, not the loader's search path."""
    installer = context.installer
    wanted = [(dist, requirement) for dist, requirement, found in unmet_requirements(context.dists, context.marker_env)
              if found is None and canonical(requirement.name) == "torch"]
    if wanted:
        dist, requirement = wanted[0]
        spec = f"{requirement.name}{requirement.specifier}"
        return Cause(
            codes.dependency_missing,
            f"`import {module}` needs {name}, which torch installs, and torch is not installed "
            f"({dist.label()} requires {spec})",
            {**evidence, "missing": "torch", "requirement": str(requirement), "requirer": dist.name},
            (Remediation(installer.install(spec), f"install the torch that {dist.label()} requires"),),
            detail=f"Extensions built against torch find {name} because `import torch` loaded it first.",
            follows=DISTRIBUTIONS_REQUIREMENT_MISSING,
        )
    return Cause(
        codes.dependency_missing,
        f"`import {module}` needs {name}, which torch installs, and torch is not installed",
        {**evidence, "missing": "torch"},
        (Remediation(installer.install("torch"), "install torch (the version this extension was built against)"),),
        detail=f"Extensions built against torch find {name} because `import torch` loaded it first.",
    )


def _undefined_symbol(symbol: str, result: ImportFacts, dists: Distributions, installer: Installer,
                      evidence: Mapping[str, Any], codes: CauseCodes) -> Cause:
    versions = result.versions or StackVersions()
    torch = versions.torch or dists.version("torch")
    owner = "flash-attn" if "flash_attn" in result.module or "flash_attn" in symbol else None
    remediation: list[Remediation] = []
    if owner and dists.get(owner):
        version = dists.version(owner)
        remediation.append(Remediation(
            flash_attn_source_build(installer, f"{owner}=={version}"),
            f"rebuild {owner} {version} from source against the installed torch {torch}",
        ))
        wheel = _prebuilt_wheel_name(version, versions)
        if wheel:
            remediation.insert(0, Remediation(
                installer.install(f"https://github.com/Dao-AILab/flash-attention/releases/download/v{version}/{wheel}",
                                  reinstall=True, no_deps=True),
                "or install the prebuilt wheel built for this torch, CUDA and C++ ABI, if the release has one",
            ))
    return Cause(
        codes.undefined_symbol,
        f"`import {result.module}`: undefined symbol {symbol} — built against another torch than the "
        f"installed {torch}",
        {**evidence, "symbol": symbol, "torch": torch, "torch_cuda": versions.torch_cuda,
         "torch_cxx11_abi": versions.torch_cxx11_abi},
        tuple(remediation),
    )


def _prebuilt_wheel_name(version: str | None, versions: StackVersions) -> str | None:
    """flash-attention's release wheel name for this torch (setup.py's CachedWheelsCommand scheme)."""
    torch, cuda, abi = versions.torch, versions.torch_cuda, versions.torch_cxx11_abi
    python = versions.python_tag
    if not (version and torch and cuda and abi is not None and python):
        return None
    torch_mm = ".".join(str(torch).split("+")[0].split(".")[:2])
    return f"flash_attn-{version}+cu{str(cuda).split('.')[0]}torch{torch_mm}cxx11abi{str(bool(abi)).upper()}-{python}-{python}-linux_x86_64.whl"
