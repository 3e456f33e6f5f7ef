"""Extension modules named for another interpreter: `_C.cpython-312-x86_64-linux-gnu.so` on CPython 3.11.

The import system finds an extension module only in a file whose name ends with one of the interpreter's
`importlib.machinery.EXTENSION_SUFFIXES` (PEP 3149): 3.11 looks for `_C.cpython-311-x86_64-linux-gnu.so`,
`_C.abi3.so` and `_C.so`, never `_C.cpython-312-x86_64-linux-gnu.so`. Such a file is not a module of this
interpreter at all. Either the whole wheel was built for another Python (reinstalling fetches the right
one), or a wheel that fits ships one file for one Python only (vLLM 0.20.1's abi3 wheel has DeepGEMM's
`_C.cpython-312-x86_64-linux-gnu.so`): then what imports it fails on this Python, whatever is reinstalled.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from dflash_doctor.checks.python.codes import (
    EXTENSIONS_OTHER_PYTHON,
)
from dflash_doctor.checks.remedy import Installer, quote
from dflash_doctor.facts.python.environment_shapes import Distribution, Distributions, Target
from dflash_doctor.facts.python.imports_shapes import ExtensionFacts
from dflash_doctor.knowledge.vllm_imports import VENDORED_DEEP_GEMM
from dflash_doctor.model import Finding, Remediation, Status

__all__ = ["interpreter_label", "other_python_findings"]


def interpreter_label(target: Target) -> str:
    """"CPython 3.11" for the target interpreter."""
    version = ".".join((target.python_version or "?").split(".")[:2])
    return f"{target.implementation or 'Python'} {version}"


def _tag_label(tag: str) -> str:
    """"CPython 3.12" for cpython-312-x86_64-linux-gnu or cp312; the tag itself when it is not CPython's."""
    match = re.match(r"(?:cpython-|cp)(\d)(\d+)", tag)
    return f"CPython {match.group(1)}.{match.group(2)}" if match else tag


def _python_of(target: Target) -> tuple[int, int] | None:
    match = re.match(r"(\d+)\.(\d+)", target.python_version)
    return (int(match.group(1)), int(match.group(2))) if match else None


def wheel_fits(tags: Sequence[str], target: Target) -> bool | None:
    """Whether any of a wheel's tags (WHEEL's `Tag:` lines) is for the target's Python version; None: unknown.

    Only the Python and ABI parts are compared (cp311-cp311, cp38-abi3 from 3.8 on, py3-none); the platform
    was the installer's to match."""
    python = _python_of(target)
    if not tags or python is None:
        return None
    for tag in tags:
        parts = tag.split("-")
        if len(parts) != 3:
            continue
        interpreters, abis = parts[0].split("."), parts[1].split(".")
        for interpreter in interpreters:
            if interpreter in ("py3", f"py{python[0]}", f"py{python[0]}{python[1]}"):
                return True
            match = re.fullmatch(r"cp(\d)(\d+)", interpreter)
            if not match:
                continue
            version = (int(match.group(1)), int(match.group(2)))
            if version == python or ("abi3" in abis and version[0] == python[0] and version <= python):
                return True
    return False


def _elsewhere(dist: Distribution, module: str, built_for: str, here: str,
               installer: Installer) -> tuple[Remediation, ...]:
    """Where the module does load: an environment of the Python the file is for, or (from the knowledge)
    a release that ships it for this Python, or vLLM without the feature."""
    steps = []
    python = built_for.removeprefix("CPython ")
    if re.fullmatch(r"\d+\.\d+", python):
        steps.append(Remediation(
            f"python{python} -m venv VENV && VENV/bin/python -m pip install {quote(f'{dist.name}=={dist.version}')}",
            f"serve from a {built_for} environment (VENV: a new directory), the one Python this file loads on"))
    if dist.canonical == "vllm" and module.startswith("vllm.third_party.deep_gemm."):
        minor = here.removeprefix("CPython ")
        ships = [v for v, pythons in VENDORED_DEEP_GEMM.value.items() if minor in pythons and v != dist.version]
        if ships:
            steps.append(Remediation(installer.install(f"vllm=={ships[0]}"),
                                     f"or move to vLLM {ships[0]}, whose wheel ships DeepGEMM's _C for {here} "
                                     "(an upgrade brings its own torch pin)"))
        steps.append(Remediation(
            "export VLLM_USE_DEEP_GEMM=0",
            "or keep this environment and turn DeepGEMM off before `vllm serve`: with it on (the default), vLLM "
            "selects DeepGEMM's FP8 kernels on GPUs it supports and raises \"DeepGEMM backend is not available "
            "or outdated\" here"))
    return tuple(steps)


def other_python_findings(items: Iterable[ExtensionFacts], dists: Distributions, target: Target,
                          installer: Installer) -> list[Finding]:
    items = list(items)
    importable = {(i.distribution, i.module) for i in items if not i.abi_tag}
    here = interpreter_label(target)
    suffixes = target.extension_suffixes
    findings = []
    for item in items:
        tag = item.abi_tag
        if not tag or (item.distribution, item.module) in importable:
            continue  # a file for another Python beside this one's own: the import takes this one's
        owner = item.distribution or ""
        dist = dists.get(owner)
        label = dist.label() if dist else owner
        built_for = _tag_label(tag)
        file_name = (item.path or "").rsplit("/", 1)[-1]
        tags = dist.wheel_tags if dist else []
        fits = wheel_fits(tags, target)
        looks_for = (f"{here} loads extension modules only from files ending in {', '.join(suffixes)}"
                     if suffixes else f"{here} does not load extension modules tagged {tag}")
        first = f"`import {item.module}` finds no module: {file_name} is built for {built_for}, and {looks_for}."
        evidence = {"path": item.path, "module": item.module, "abi_tag": tag, "built_for": built_for,
                    "interpreter": here, "extension_suffixes": suffixes, "wheel_tags": tags}
        if fits is False:
            findings.append(EXTENSIONS_OTHER_PYTHON.finding(
                Status.FAIL,
                title=f"{label} was installed from a wheel built for {built_for} ({', '.join(tags)}): this "
                f"interpreter is {here} and cannot import its extension {item.module}",
                detail=first + f"\nReinstalling lets the installer pick the wheel built for {here}.",
                evidence=evidence,
                remediation=(Remediation(
                    installer.install(f"{dist.name}=={dist.version}" if dist and dist.version else owner,
                                      reinstall=True, no_deps=True),
                    f"reinstall the wheel built for {here}"),) if dist else (),
            ))
        else:
            wheel = f"{label}'s wheel ({', '.join(tags)}) fits {here}" if fits else f"{label}"
            findings.append(EXTENSIONS_OTHER_PYTHON.finding(
                Status.WARN,
                title=f"{wheel} but ships {item.module} only as {file_name}, built for {built_for}: "
                f"{item.module} cannot be imported on {here}",
                detail=first + f"\nWhatever imports {item.module} fails on {here}; a {built_for} environment "
                "can load it. "
                + ("Reinstalling the same release does not change it: its wheel has no such file for "
                   f"{here}." if fits else "Its WHEEL file does not say which Python the wheel was for: "
                   "reinstalling helps only if it was another one."),
                evidence=evidence,
                remediation=_elsewhere(dist, item.module, built_for, here, installer) if dist else (),
            ))
    return findings
