"""Remediation commands that fit the target environment.

Commands name the target interpreter (`/root/ml-env/bin/python3 -m pip ...`), or use
`uv pip ... --python PY` where the environment was made by uv (pyvenv.cfg says so; such environments
usually have no pip). Arguments are quoted for a POSIX shell, so version specifiers survive pasting.

Every value a command takes from the environment, a file or a report (a path, a library name read from an ELF
file, a weights file named in an index, a model name from a README) goes through `quote` (or `join`, `export`),
whether the remediation is a command or a sentence that names a file: a user pastes either into a shell, and a
name like `w$(touch${IFS}PWNED).safetensors` must stay a name there.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from dflash_doctor.check import Facts
from dflash_doctor.facts.python.environment_shapes import Distribution, Distributions, Target
from dflash_doctor.knowledge.archs_advice import FA2_ARCHS_ENV
from dflash_doctor.knowledge.installers import BYTECODE_GLOB, INDEXES_BEYOND_PYPI, VLLM_PINS_OFF_PYPI
from dflash_doctor.model import Remediation
from dflash_doctor.shape import frozen_dataclass

__all__ = ["Installer", "export", "flash_attn_source_build", "index_for", "installer_for", "join", "leftover_dirs",
           "quote", "remove_leftovers", "uninstall_remediation"]


SPECIFIER_CHARS = set("<>=!~*[];, ")


def quote(word: str) -> str:
    """shlex.quote, and always quote version specifiers: `'torch==2.11.0'` reads as one argument."""
    if SPECIFIER_CHARS & set(word) and not word.startswith("-"):
        return "'" + word.replace("'", "'\\''") + "'"
    return shlex.quote(word)


def join(words: Iterable[str]) -> str:
    """The words as one shell command line, each quoted (`quote`)."""
    return " ".join(quote(w) for w in words)


def export(name: str, value: object) -> str:
    """`export NAME=VALUE`, the value quoted (`NAME` is the doctor's own constant)."""
    return f"export {name}={quote(str(value))}"


@frozen_dataclass(frozen=True)
class Installer:
    python: str
    uv: bool = False

    @classmethod
    def for_target(cls, target: Target | None) -> Installer:
        """Commands for the target interpreter (`python3` when its facts are missing)."""
        if target is None:
            return cls(python="python3")
        return cls(python=target.python or target.executable or "python3", uv=target.env_kind == "uv")

    def install(
        self,
        *specs: str,
        no_build_isolation: bool = False,
        no_deps: bool = False,
        reinstall: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> str:
        flags: list[str] = []
        if reinstall:
            flags += ["--reinstall"] if self.uv else ["--force-reinstall"]
        if no_deps:
            flags.append("--no-deps")
        if no_build_isolation:
            flags.append("--no-build-isolation")
        for url in dict.fromkeys(url for spec in specs for url in index_for(spec)):
            flags += ["--extra-index-url", url]
        if self.uv:
            words = ["uv", "pip", "install", "--python", self.python, *flags, *specs]
        else:
            words = [self.python, "-m", "pip", "install", *flags, *specs]
        prefix = " ".join(f"{k}={quote(v)}" for k, v in (env or {}).items())
        return (prefix + " " if prefix else "") + join(words)

    def uninstall(self, *names: str, leftovers: Iterable[str] = ()) -> str:
        """Uninstall `names`; with pip, then remove what pip leaves of the directories `leftovers`
        (absolute paths of top-level directories no remaining distribution owns): see remove_leftovers."""
        if self.uv:  # knowledge.installers.UV_UNINSTALL_LEAVES: nothing
            return join(["uv", "pip", "uninstall", "--python", self.python, *names])
        command = join([self.python, "-m", "pip", "uninstall", "-y", *names])
        cleanup = remove_leftovers(leftovers)
        return f"{command} && {cleanup}" if cleanup else command

    def run(self, *args: str) -> str:
        """A command run with the target interpreter itself."""
        return join([self.python, *args])


def index_for(spec: str) -> list[str]:
    """The indexes beyond PyPI an install of `spec` needs: where `spec` admits only vLLM releases whose exact pins
    PyPI cannot satisfy (knowledge.installers.VLLM_PINS_OFF_PYPI: `vllm==0.34.0`, `vllm>=0.34`), the index that
    publishes each pin (INDEXES_BEYOND_PYPI). A spec that also admits an earlier release needs none: pip backtracks
    to it."""
    try:
        requirement = Requirement(spec)
    except InvalidRequirement:
        return []
    if canonicalize_name(requirement.name) != "vllm" or not requirement.specifier:
        return []
    off = [v for v in VLLM_PINS_OFF_PYPI.value if requirement.specifier.contains(v, prereleases=True)]
    earliest = min(off, key=lambda v: tuple(int(p) for p in v.split(".")), default=None)
    if earliest is None or _admits_earlier(requirement, earliest):
        return []
    pins = [Requirement(pin) for pin in VLLM_PINS_OFF_PYPI.value[earliest]]
    return [INDEXES_BEYOND_PYPI.value[canonicalize_name(p.name)] for p in pins
            if canonicalize_name(p.name) in INDEXES_BEYOND_PYPI.value]


def _admits_earlier(requirement: Any, release: str) -> bool:
    """Whether the specifier admits a release before `release` (its patch and minor predecessors, down to 0.1.0)."""
    major, minor, patch = (int(p) for p in release.split("."))
    candidates = [f"{major}.{minor}.{p}" for p in range(patch)] + [f"{major}.{m}.{p}" for m in range(minor)
                                                                   for p in range(6)]
    return any(requirement.specifier.contains(v, prereleases=True) for v in candidates)


def remove_leftovers(directories: Iterable[str]) -> str:
    """Delete, under each directory that still exists, bytecode caches and then every empty directory.

    `__pycache__/*.pyc` is a cache Python never imports without its source (knowledge.installers.BYTECODE_GLOB);
    any other file stays, and so does every directory above it, so nothing a user or a distribution owns is
    removed. `find -depth` visits a directory after its contents, so a tree emptied this way goes whole.
    Empty when there is nothing to clean (the command then is the uninstall alone).
    """
    steps = []
    for directory in dict.fromkeys(directories):
        where = shlex.quote(directory)
        steps.append(f"if [ -d {where} ]; then find {where} -depth \\( -type f -path "
                     f"{shlex.quote(BYTECODE_GLOB.value)} -o -type d -empty \\) -delete; fi")
    return " && ".join(steps)


def flash_attn_source_build(installer: Installer, spec: str, *, archs: Iterable[str] = (),
                            max_jobs: int | None = 4) -> str:
    """Build flash-attn v2 from source against the torch already installed (knowledge.flash_attn:
    BUILD_NEEDS_NO_BUILD_ISOLATION, BUILD_ENV_VARS). FLASH_ATTENTION_FORCE_BUILD stops setup.py from
    downloading a prebuilt wheel, which is what the build is there to replace; MAX_JOBS bounds the compile's
    memory; `archs` (e.g. "80", "120") sets FLASH_ATTN_CUDA_ARCHS."""
    env = {FA2_ARCHS_ENV.value: ";".join(archs)} if archs else {}
    env["FLASH_ATTENTION_FORCE_BUILD"] = "TRUE"
    if max_jobs is not None:
        env["MAX_JOBS"] = str(max_jobs)
    return installer.install(spec, no_build_isolation=True, reinstall=True, no_deps=True, env=env)


def installer_for(facts: Facts, python: Any = None) -> Installer:
    """Install commands that name the target interpreter (remedy.Installer): its environment facts, else the
    interpreter a probe ran in (`python`), else `python3`."""
    target = facts.optional_section(Target)
    if target is not None:
        return Installer.for_target(target)
    return Installer(str(python) if python else "python3")


def _norm(path: str) -> str:
    return posixpath.normpath(path) if path else path


def leftover_dirs(dists: Distributions, removed: Iterable[Distribution]) -> list[str]:
    """Top-level directories of `removed` that no remaining distribution in the same place installs into:
    what pip may leave behind (knowledge.installers.PIP_UNINSTALL_LEAVES), absolute."""
    removed = list(removed)
    gone = {d.canonical for d in removed}
    kept = [d for d in dists.seen() if d.canonical not in gone]
    found = []
    for dist in removed:
        for top in dist.top_levels:
            if "." in top:
                continue  # a module or an extension file, not a directory
            if any(_norm(k.location) == _norm(dist.location) and top in k.top_levels
                   for k in kept):
                continue
            found.append(posixpath.join(dist.location, top))
    return found


def uninstall_remediation(dists: Distributions, removed: Sequence[Distribution], installer: Installer,
                          why: str) -> Remediation:
    """Uninstall `removed`, then (pip) remove the directories the uninstall leaves."""
    return Remediation(installer.uninstall(*(d.canonical for d in removed), leftovers=leftover_dirs(dists, removed)),
                       why)
