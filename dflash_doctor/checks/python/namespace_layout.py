"""Where `flash_attn` comes from, who owns each directory of it, and what removes a broken one.

Shared by the namespace check (which judges the layout) and the import checks (whose failing rotary import
names the layout as its cause, with the same fix). Pure functions over the environment facts: the
resolution of `flash_attn` (its portions on sys.path, and what each directory without __init__.py holds)
and every distribution's RECORD claims.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Sequence

from dflash_doctor.checks.python.codes import (
    NAMESPACES_INCOMPLETE,
    NAMESPACES_LEFTOVER,
    NAMESPACES_SHADOWED,
    NAMESPACES_V4_WITHOUT_V2,
)
from dflash_doctor.checks.remedy import Installer, remove_leftovers, uninstall_remediation
from dflash_doctor.codes import Code
from dflash_doctor.facts.python.environment_shapes import (
    Distribution,
    Distributions,
    PortionContents,
    Resolved,
)
from dflash_doctor.facts.python.environment_shapes import Portion as PortionFacts
from dflash_doctor.knowledge.stack import FLASH_ATTN_FAMILY
from dflash_doctor.model import Remediation
from dflash_doctor.shape import frozen_dataclass

__all__ = [
    "ABSENT_IS_SKIPPED",
    "TOP",
    "Layout",
    "Portion",
    "contents_phrase",
    "describe_namespace",
    "explain_layout",
    "family_uninstall",
    "namespace_portions",
    "regular_package",
    "removal_remediation",
    "shown_files",
    "uninstall_remediation",
    "where_on_path",
]

TOP = "flash_attn"
ABSENT_IS_SKIPPED = "every vLLM from 0.18 on skips its flash_attn import when flash_attn is absent"
"""What a missing flash_attn does to vLLM (no release dies of it: see codes.BROKEN_FLASH_ATTN for the guards)."""
INIT = f"{TOP}/__init__.py"
SHOWN_FILES = 3


def _norm(path: str) -> str:
    return posixpath.normpath(path) if path else path


@frozen_dataclass(frozen=True)
class Portion:
    """One directory (or module) on sys.path that `import flash_attn` finds."""

    facts: PortionFacts
    owners: tuple[Distribution, ...]
    """Installed distributions whose RECORD lists files in it."""

    @property
    def path(self) -> str:
        return self.facts.path

    @property
    def entry(self) -> str:
        return self.facts.entry

    @property
    def contents(self) -> PortionContents | None:
        return self.facts.contents

    @property
    def holds_only_bytecode(self) -> bool:
        """Nothing but directories and `__pycache__/*.pyc`, as far as the probe walked (all of it)."""
        return self.contents is not None and self.contents.complete and not self.contents.file_count


def _owners(entry: str, dists: Distributions) -> tuple[Distribution, ...]:
    where = _norm(entry)
    return tuple(d for d in dists.seen() if where and _norm(d.location) == where
                 and any(c.path.startswith(f"{TOP}/") for c in d.claims))


def namespace_portions(resolution: Resolved, dists: Distributions) -> list[Portion]:
    """The directories without __init__.py that make up a namespace `flash_attn`, in sys.path order."""
    return [Portion(p, _owners(p.entry, dists)) for p in resolution.portions if p.kind == "namespace-portion"]


def regular_package(resolution: Resolved, dists: Distributions) -> Portion | None:
    """The regular package (or module) that `import flash_attn` loads, when it is one."""
    if not resolution.found or resolution.namespace:
        return None
    origin = _norm(resolution.origin or "")
    for portion in resolution.portions:
        if portion.kind == "namespace-portion":
            continue
        path = _norm(portion.path)
        if origin in (path, posixpath.join(path, "__init__.py")) or not origin:
            return Portion(portion, _owners(portion.entry, dists))
    return None


def where_on_path(portion: Portion) -> str:
    return "the current directory" if portion.entry in ("", ".") else portion.entry


def shown_files(contents: PortionContents) -> str:
    files = contents.files
    more = contents.file_count - len(files[:SHOWN_FILES])
    return ", ".join(files[:SHOWN_FILES]) + (f" and {more} more" if more > 0 else "")


def contents_phrase(portion: Portion) -> str:
    """What an unowned directory holds: nothing, only bytecode, or (a few of) its files."""
    contents = portion.contents
    if contents is None:
        return "its contents were not recorded"
    if contents.file_count:
        return f"it holds {contents.file_count} file(s) no distribution owns: {shown_files(contents)}"
    if not contents.complete:
        return "it holds more than the doctor walked"
    if contents.bytecode_count:
        return f"it holds only __pycache__ ({contents.bytecode_count} .pyc file(s) whose source is gone)"
    return "it holds nothing" + (" but empty directories" if contents.dir_count else "")


def describe_namespace(portions: Sequence[Portion]) -> str:
    """One phrase per directory of a namespace flash_attn: whose it is, or what it holds."""
    parts = []
    for portion in portions:
        if portion.owners:
            owners = " and ".join(d.label() for d in portion.owners)
            parts.append(f"{portion.path} ({owners}'s files, no {INIT})")
        else:
            parts.append(f"{portion.path} (no installed distribution owns it; {contents_phrase(portion)})")
    return "made of " + "; ".join(parts) if parts else "with no directory recorded"



def removal_remediation(portion: Portion) -> Remediation:
    """A directory no distribution owns: deleted when it holds nothing but bytecode, moved aside otherwise."""
    if portion.holds_only_bytecode:
        return Remediation(remove_leftovers([portion.path]),
                           "delete it: it holds nothing but empty directories and bytecode whose source is gone")
    quoted = shlex.quote(portion.path)
    return Remediation(f"mv {quoted} {shlex.quote(portion.path + '.disabled')}",
                       "move it off the import path (its files are kept, under a name Python cannot import)")


def family_uninstall(dists: Distributions, portions: Sequence[Portion]) -> list[Distribution]:
    """The flash-attention distributions that install into `portions` and that nothing installed requires:
    uninstalling them leaves vLLM without any flash_attn, which its guard handles."""
    family = {d for d in FLASH_ATTN_FAMILY.value}
    owners = {d.canonical: d for p in portions for d in p.owners}
    chosen = [d for name, d in owners.items() if name in family]
    removed = {d.canonical for d in chosen}
    needed = [d for d in chosen if any(r.canonical not in removed for r in dists.requiring(d.name))]
    return [] if needed or len(chosen) != len(owners) else chosen


@frozen_dataclass(frozen=True)
class Layout:
    """Why a failing `import flash_attn...` finds what it finds, and the one line that removes it."""

    cause: Code | None
    """The namespace finding this follows from (None when the import's own exception is the cause)."""
    summary: str
    """Where flash_attn comes from, for a title ("" when it is an installed distribution's regular package)."""
    fix: Remediation | None
    """Remove what makes the import fail, leaving no flash_attn (which vLLM's guard skips); None when something
    installed requires what would go."""


def explain_layout(dists: Distributions, resolution: Resolved, installer: Installer) -> Layout | None:
    """From the resolution of `flash_attn` alone: what it is made of and what removes it (None: not found)."""
    if not resolution.found:
        return None
    # knowledge.vllm: ROTARY_GUARD_SITE (forward_cuda uses the bundled copy), REQUIRES_EXTERNAL_FLASH_ATTN (False)
    why_absent = ("with no flash_attn at all, vLLM's find_spec guard skips the import, and on CUDA vLLM serves "
                  "rotary from its bundled vllm.vllm_flash_attn (it does not require flash-attn)")
    if resolution.namespace:
        portions = namespace_portions(resolution, dists)
        owned = [p for p in portions if p.owners]
        steps: list[str] = []
        fixable = True
        removed = family_uninstall(dists, owned) if owned else []
        if owned and not removed:
            fixable = False
        if removed:
            steps.append(uninstall_remediation(dists, removed, installer, "").command)
        steps += [removal_remediation(p).command for p in portions if not p.owners]
        names = ", ".join(d.label() for d in removed)
        why = (f"uninstall {names} (nothing installed requires it) and remove " if removed else "remove ") + \
            "every directory that makes flash_attn a namespace package: " + why_absent
        owners = {d.canonical for p in owned for d in p.owners}
        cause = (NAMESPACES_V4_WITHOUT_V2 if "flash-attn-4" in owners
                 else NAMESPACES_LEFTOVER if len(owned) < len(portions) else NAMESPACES_INCOMPLETE)
        return Layout(cause, f"flash_attn is a namespace package {describe_namespace(portions)}",
                      Remediation(" && ".join(steps), why) if fixable and steps else None)
    package = regular_package(resolution, dists)
    if package is None:
        return Layout(None, "", None)
    if not package.owners:
        return Layout(NAMESPACES_SHADOWED,
                      f"flash_attn is {package.path}, from {where_on_path(package)} on sys.path, which no installed "
                      "distribution owns (a source checkout or a stray copy)",
                      removal_remediation(package))
    removed = family_uninstall(dists, [package])
    if not removed:
        return Layout(None, "", None)
    names = ", ".join(d.label() for d in removed)
    return Layout(None, "", uninstall_remediation(
        dists, removed, installer,
        f"nothing installed requires {names}: uninstall it (and what the uninstall leaves); {why_absent}"))
