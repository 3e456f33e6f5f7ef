"""What the distributions rules share: which distributions are the stack and its kernel packages, and how a
distribution's Requires-Dist is read against the target (markers evaluated, a version against a specifier).

The lowest module of the python layer's distribution rules: distributions.py (the stack's requirements, RECORD
integrity) and kernel_packages.py (shared files, broken pins) both read requirements through it, and
import_failures.py asks it which torch an installed distribution requires.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from dflash_doctor.facts.python.envfacts import applicable_requirements, canonical
from dflash_doctor.facts.python.environment_shapes import Distribution, Distributions
from dflash_doctor.facts.python.vllm_serve_path import unmet_requirements as requirements_unmet
from dflash_doctor.knowledge.kernel_wheels import KERNEL_DISTRIBUTIONS
from dflash_doctor.knowledge.stack import STACK_DISTRIBUTIONS

if TYPE_CHECKING:
    from packaging.requirements import Requirement

__all__ = ["KERNELS", "STACK", "VERIFIED", "requirements_of", "satisfies", "unmet_requirements"]

STACK = tuple(canonical(n) for n in STACK_DISTRIBUTIONS.value)
"""The serving stack's distributions (knowledge.stack.STACK_DISTRIBUTIONS), by canonical name."""
KERNELS = tuple(canonical(n) for n in KERNEL_DISTRIBUTIONS.value)
"""The kernel packages vLLM and flash-attn-4 load at run time (knowledge.kernel_wheels)."""
VERIFIED = STACK + tuple(n for n in KERNELS if n not in STACK)
"""The distributions whose RECORDs are verified: the stack and the kernel packages it loads at run time."""


def satisfies(requirement: Requirement, found: str) -> bool:
    """Whether the installed version `found` meets the requirement's specifier (pre-releases included); True
    for a version that is not PEP 440, which cannot be judged: say nothing rather than guess."""
    try:
        return requirement.specifier.contains(Version(found), prereleases=True)
    except InvalidVersion:
        return True


def requirements_of(dist: Distribution, marker_env: Mapping[str, str]) -> Iterator[Requirement]:
    """The distribution's Requires-Dist that apply to the target (no extra); unparsable lines are skipped."""
    yield from applicable_requirements(dist.requires, marker_env)


def unmet_requirements(dists: Distributions, marker_env: Mapping[str, str]) -> list[tuple[Distribution, Requirement, str | None]]:
    """The stack's requirements on each other that the installed versions do not meet: (requirer,
    requirement, installed version or None when absent). Each is a distributions.requirement-unmet/-missing finding."""
    unmet: list[tuple[Distribution, Requirement, str | None]] = []
    for name in STACK:
        dist = dists.get(name)
        if dist is not None:
            # the stack's requirements on each other; the rest is `pip check`'s domain
            unmet += [(dist, requirement, found) for requirement, found in requirements_unmet(dists, marker_env, name)
                      if canonical(requirement.name) in STACK]
    return unmet
