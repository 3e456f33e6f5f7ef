"""Reads an import's real exception (from the try_import probe) and names its cause, with the fix.

Shared by the rotary-import, import-surface and extensions checks: the same `undefined symbol` means
the same thing wherever it surfaces.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from dflash_doctor.envfacts import Distributions
from dflash_doctor.model import Remediation
from dflash_doctor.remedy import Installer, flash_attn_source_build

from .namespace_common import TOP, describe_namespace, explain_layout, namespace_portions

__all__ = ["Cause", "classify", "exception_mro"]

SIGNAL_MRO = ("<signal>",)


@dataclass(frozen=True)
class Cause:
    code: str
    summary: str
    evidence: Mapping[str, Any] = field(default_factory=dict)
    remediation: tuple[Remediation, ...] = ()
    follows: str = ""
    """The finding this failure follows from (Finding.cause), "" when the exception is its own cause."""


def exception_mro(result: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The exception's class names as a guard would match them; None when the import worked."""
    if result.get("ok"):
        return None
    exception = result.get("exception")
    if exception:
        return tuple(exception.get("mro") or (exception.get("type"),))
    return SIGNAL_MRO  # no exception object: killed, hung or never started; nothing can catch that


def _message(result: Mapping[str, Any]) -> str:
    exception = result.get("exception") or {}
    parts = [str(exception.get("message", ""))] + [str(c.get("message", "")) for c in exception.get("chain") or []]
    return "\n".join(parts)


def classify(result: Mapping[str, Any], dists: Distributions, resolution: Mapping[str, Any],
             installer: Installer) -> Cause:
    """Name why `result`'s import failed (the caller has checked that it did).

    For a module of flash_attn, also say where flash_attn comes from when that is the cause (a namespace
    package, a copy no distribution owns), and rank first the one line that removes it: uninstalling the
    flash-attention distributions nothing requires, with what the uninstall leaves, so that vLLM's guard finds
    no flash_attn at all.
    """
    cause = _classify(result, dists, resolution, installer)
    if str(result.get("module")).split(".", 1)[0] != TOP:
        return cause
    layout = explain_layout(dists, resolution.get(TOP) or {}, installer)
    if layout is None:
        return cause
    summary = cause.summary
    if layout.summary and layout.summary not in summary:
        summary = f"{layout.summary}: {summary}"
    fixes = ((layout.fix,) if layout.fix else ()) + tuple(r for r in cause.remediation if r != layout.fix)
    return replace(cause, summary=summary, remediation=fixes, follows=layout.cause,
                   evidence={**cause.evidence, "flash_attn": layout.summary} if layout.summary else cause.evidence)


def _classify(result: Mapping[str, Any], dists: Distributions, resolution: Mapping[str, Any],
              installer: Installer) -> Cause:
    process = result.get("process") or {}
    module = str(result.get("module"))
    if process.get("timed_out"):
        return Cause("import.timeout", f"`import {module}` hung ({process.get('error')})",
                     {"stderr": process.get("stderr", "")})
    if process.get("signal"):
        return Cause("import.crashed", f"`import {module}` killed the interpreter with {process['signal']}",
                     {"signal": process["signal"], "stderr": process.get("stderr", "")})
    exception = result.get("exception")
    if not exception:
        return Cause("import.failed", f"`import {module}` {process.get('error') or 'failed without an exception'}",
                     {"process": process})
    message = _message(result)
    kind = str(exception.get("type"))
    missing = exception.get("name")
    evidence = {"exception": f"{kind}: {exception.get('message')}", "traceback": exception.get("traceback", "")}

    if symbol := re.search(r"undefined symbol: (\S+)", message):
        return _undefined_symbol(symbol.group(1), result, dists, installer, evidence)
    if glibc := re.search(r"version [`']((GLIBC|GLIBCXX|CXXABI)_[\d.]+)' not found", message):
        return Cause(
            "import.glibc-too-old",
            f"`import {module}` needs {glibc.group(1)}, which this system's C/C++ runtime lacks",
            {**evidence, "required": glibc.group(1)},
            (Remediation("ldd --version | head -1", "see the host's glibc: the wheel was built on a newer system"),),
        )
    if library := re.search(r"(lib[\w.+-]+\.so[\w.]*): cannot open shared object file", message):
        return Cause(
            "import.library-not-found",
            f"`import {module}` cannot load {library.group(1)}",
            {**evidence, "library": library.group(1)},
            (Remediation(f"ldconfig -p | grep {library.group(1).split('.so')[0]}",
                         "see whether the dynamic loader knows the library at all"),),
        )
    if kind == "ModuleNotFoundError" and missing:
        top = str(missing).split(".", 1)[0]
        resolved = resolution.get(top) or {}
        if top == "flash_attn" and resolved.get("namespace"):
            portions = namespace_portions(resolved, dists)
            return Cause(
                "import.namespace-package",
                f"`{missing}` does not exist: flash_attn is a namespace package {describe_namespace(portions)}",
                {**evidence, "search_locations": resolved.get("search_locations"),
                 "portions": [{"path": p.path, "owners": [d.label() for d in p.owners]} for p in portions]},
            )
        if missing == "flash_attn_2_cuda":
            return Cause(
                "import.extension-missing",
                "flash_attn_2_cuda is not installed: this flash-attn was built without its CUDA extension",
                evidence,
                (Remediation(
                    flash_attn_source_build(installer, f"flash-attn=={dists.version('flash-attn')}", max_jobs=None),
                    "build flash-attn with its CUDA extension against the installed torch",
                ),),
            )
        if top != module.split(".", 1)[0]:
            return Cause(
                "import.dependency-missing",
                f"`import {module}` needs `{top}`, which is not installed",
                {**evidence, "missing": top},
                (Remediation(installer.install(top), f"install {top}"),) if top in ("torch", "triton", "einops") else (),
            )
    return Cause("import.failed", f"`import {module}` raised {kind}: {exception.get('message')}", evidence)


def _undefined_symbol(symbol: str, result: Mapping[str, Any], dists: Distributions, installer: Installer,
                      evidence: Mapping[str, Any]) -> Cause:
    versions = result.get("versions") or {}
    torch = versions.get("torch") or dists.version("torch")
    owner = "flash-attn" if "flash_attn" in str(result.get("module")) or "flash_attn" in symbol else None
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
        "import.undefined-symbol",
        f"`import {result.get('module')}`: undefined symbol {symbol} — built against another torch than the "
        f"installed {torch}",
        {**evidence, "symbol": symbol, "torch": torch, "torch_cuda": versions.get("torch_cuda"),
         "torch_cxx11_abi": versions.get("torch_cxx11_abi")},
        tuple(remediation),
    )


def _prebuilt_wheel_name(version: str | None, versions: Mapping[str, Any]) -> str | None:
    """flash-attention's release wheel name for this torch (setup.py's CachedWheelsCommand scheme)."""
    torch, cuda, abi = versions.get("torch"), versions.get("torch_cuda"), versions.get("torch_cxx11_abi")
    python = versions.get("python_tag")
    if not (version and torch and cuda and abi is not None and python):
        return None
    torch_mm = ".".join(str(torch).split("+")[0].split(".")[:2])
    return f"flash_attn-{version}+cu{str(cuda).split('.')[0]}torch{torch_mm}cxx11abi{str(bool(abi)).upper()}-{python}-{python}-linux_x86_64.whl"
