"""The declared shape of the dry-run facts (facts.fix.dryrun), typed to the leaves.

What a run with --verify-fixes keeps in its report under `dry_runs` (beside the fact sections, not one of
them): the target interpreter, the installed distributions the judgement needs, the marker environment,
and for each remediation command asked about, each of its `&&`-joined segments with what the installer
said (what it would install and remove) or what the simulation found (what an uninstall leaves behind, what
a move or cleanup touches); with `build` (facts.fix.build_env_shapes) when a command installs something. A run
whose dry runs stopped keeps only `error`. fix.verify reads them through `DryRuns.from_json`, once;
every field has a default, so an older report (without `env_kind`, `build`) loads.
"""

from __future__ import annotations

from dataclasses import field
from typing import ClassVar

from dflash_doctor.facts.fix.build_env_shapes import BuildEnv
from dflash_doctor.facts.shape import Shape, frozen_dataclass

__all__ = ["DryRunItem", "DryRuns", "Install", "InstalledDist", "LeftBehind", "Removal", "SegmentRun", "Unavailable"]

BUILDS_FROM_SOURCE = ("sdist", "directory", "vcs")
"""The `Install.source` values that build the distribution."""


@frozen_dataclass(frozen=True)
class InstalledDist(Shape):
    """What the judgement needs of an installed distribution (facts.fix.dryrun.installed_summary): null where the
    distributions section did not say (a METADATA that could not be read has no `requires`)."""

    name: str | None = None
    version: str | None = None
    requires: list[str] | None = None
    location: str | None = None
    dist_info: str | None = None
    top_levels: list[str] | None = None

    @property
    def requirements(self) -> list[str]:
        return self.requires or []

    @property
    def tops(self) -> list[str]:
        return self.top_levels or []


@frozen_dataclass(frozen=True)
class Install(Shape):
    """A distribution the installer would put in (pip's report, uv's `+ name==version` lines)."""

    name: str = ""
    version: str = ""
    source: str = "unknown"
    """wheel | sdist | directory | vcs | unknown."""
    requested: bool = False

    @property
    def builds(self) -> bool:
        return self.source in BUILDS_FROM_SOURCE


@frozen_dataclass(frozen=True)
class Removal(Shape):
    """A distribution that would go: uv's `- name==version` lines, or an uninstall simulated from its RECORD
    (with how many files its RECORD lists)."""

    name: str = ""
    version: str = ""
    files: int | None = None


@frozen_dataclass(frozen=True)
class LeftBehind(Shape):
    """A top-level directory an uninstall touches, and what stays of it."""

    directory: str = ""
    stays: bool = False
    owned_by_others: int = 0
    """Files of distributions that stay."""
    bytecode: int = 0
    """`__pycache__` files no distribution lists."""
    unowned: list[str] = field(default_factory=list)
    """Other files no distribution lists (the first few, relative to `directory`)."""
    unowned_count: int = 0
    init_stays: bool = False
    directories: int = 0


@frozen_dataclass(frozen=True)
class Unavailable(Shape):
    """A requirement of an install that no configured index has (pip: "No matching distribution found for"), and
    which distribution the command asks for requires it (its Requires-Dist, from pip's report of it alone)."""

    requirement: str = ""
    required_by: str | None = None
    """"vllm 0.34.0"; None when the command asks for it itself, or pip did not say."""
    requires_dist: str | None = None
    """The Requires-Dist line that asks for it."""


@frozen_dataclass(frozen=True)
class SegmentRun(Shape):
    """One segment of a command (install | uninstall | move | cleanup; "?" when the command was not asked
    about) and what asking about it found: `status` resolved | simulated | failed | not-checked, and why."""

    kind: str = ""
    tool: str = ""
    status: str = ""
    reason: str = ""
    installer_version: str | None = None
    """pip's version (a pip install)."""
    argv: list[str] = field(default_factory=list)
    """The installer's own command line (an install)."""
    returncode: int | None = None
    duration_s: float | None = None
    stderr: str = ""
    install: list[Install] = field(default_factory=list)
    remove: list[Removal] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    """Names an uninstall gives that are not installed."""
    left_behind: list[LeftBehind] = field(default_factory=list)
    moves: list[str] = field(default_factory=list)
    cleans: list[str] = field(default_factory=list)
    unavailable: Unavailable | None = None
    """A failed install: the requirement no configured index has, and who requires it."""


@frozen_dataclass(frozen=True)
class DryRunItem(Shape):
    """One remediation command and its segments' answers."""

    command: str = ""
    segments: list[SegmentRun] = field(default_factory=list)


@frozen_dataclass(frozen=True)
class DryRuns(Shape):
    """The report's `dry_runs`."""

    SECTION: ClassVar[str] = "dry_runs"

    python: str = ""
    env_kind: str | None = None
    timeout_s: float | None = None
    wall_s: float | None = None
    installed: list[InstalledDist] = field(default_factory=list)
    marker_environment: dict[str, str] = field(default_factory=dict)
    items: list[DryRunItem] = field(default_factory=list)
    build: BuildEnv | None = None
    error: str | None = None
    """Why the dry runs stopped (then nothing else is kept)."""
