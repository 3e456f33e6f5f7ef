"""Remediation commands that fit the target environment.

Commands name the target interpreter (`/root/ml-env/bin/python3 -m pip ...`), or use
`uv pip ... --python PY` where the environment was made by uv (pyvenv.cfg says so; such environments
usually have no pip). Arguments are quoted for a POSIX shell, so version specifiers survive pasting.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dflash_doctor.knowledge.archs_advice import FA2_ARCHS_ENV

__all__ = ["Installer", "flash_attn_source_build"]


SPECIFIER_CHARS = set("<>=!~*[];, ")


def quote(word: str) -> str:
    """shlex.quote, and always quote version specifiers: `'torch==2.11.0'` reads as one argument."""
    if SPECIFIER_CHARS & set(word) and not word.startswith("-"):
        return "'" + word.replace("'", "'\\''") + "'"
    return shlex.quote(word)


def _join(words: Iterable[str]) -> str:
    return " ".join(quote(w) for w in words)


@dataclass(frozen=True)
class Installer:
    python: str
    uv: bool = False

    @classmethod
    def for_target(cls, target: Mapping[str, Any]) -> Installer:
        python = str(target.get("python") or target.get("executable") or "python3")
        return cls(python=python, uv=target.get("env_kind") == "uv")

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
        if self.uv:
            words = ["uv", "pip", "install", "--python", self.python, *flags, *specs]
        else:
            words = [self.python, "-m", "pip", "install", *flags, *specs]
        prefix = " ".join(f"{k}={quote(v)}" for k, v in (env or {}).items())
        return (prefix + " " if prefix else "") + _join(words)

    def uninstall(self, *names: str) -> str:
        if self.uv:
            return _join(["uv", "pip", "uninstall", "--python", self.python, *names])
        return _join([self.python, "-m", "pip", "uninstall", "-y", *names])

    def run(self, *args: str) -> str:
        """A command run with the target interpreter itself."""
        return _join([self.python, *args])


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
