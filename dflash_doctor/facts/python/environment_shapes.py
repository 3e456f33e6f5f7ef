"""The shapes of the sections `facts.python.environment` collects: target, sys_path, distributions, resolution.

What the environment probe (facts/probes/environment.py) writes, field by field. A field the probe
leaves out in some cases (a distribution whose METADATA is unreadable has no `requires`) reads as its
default here; a field that is absent for a reason a check judges is `None` by default.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import field
from functools import cached_property
from typing import Any, ClassVar, Protocol, TypeVar

from dflash_doctor.facts.python.envfacts import canonical
from dflash_doctor.facts.shape import Shape, frozen_dataclass

__all__ = [
    "Claim", "Distribution", "Distributions", "Escape", "FileError", "HashMismatch", "ImportExtension",
    "ImportExtensions", "Integrity", "Libc", "NotRegular", "Overlaps", "Portion", "PortionContents", "ProbeRun", "Record",
    "Resolution", "Resolved", "Shadowed", "SizeMismatch", "SysPath", "SysPathEntry", "Target", "TargetEnviron",
    "WheelExtension",
]


@frozen_dataclass(frozen=True)
class ProbeRun(Shape):
    """How a probe's process went (`facts.probes.ProbeOutcome.as_facts`)."""

    returncode: int | None = None
    signal: str | None = None
    """The signal's name ("SIGSEGV") when one ended the process."""
    timed_out: bool = False
    stderr: str = ""
    duration_s: float = 0.0
    error: str | None = None


@frozen_dataclass(frozen=True)
class Libc(Shape):
    name: str | None = None
    version: str | None = None


@frozen_dataclass(frozen=True)
class TargetEnviron(Shape):
    names: list[str] = field(default_factory=list)
    """Every variable's name; values only for the allowed ones, scrubbed."""
    values: dict[str, str] = field(default_factory=dict)


@frozen_dataclass(frozen=True)
class Target(Shape):
    """The target interpreter: which one, what kind of environment, what it runs on."""

    SECTION: ClassVar[str] = "target"

    executable: str = ""
    python_version: str = ""
    implementation: str = ""
    platform: str = ""
    machine: str = ""
    extension_suffixes: list[str] = field(default_factory=list)
    soabi: str | None = None
    prefix: str = ""
    base_prefix: str = ""
    env_kind: str = ""
    """"uv", "conda", "venv" or "system"."""
    pyvenv_cfg: dict[str, str] | None = None
    libc: Libc = field(default_factory=Libc)
    cwd: str = ""
    user_site: str | None = None
    user_site_enabled: bool = False
    environ: TargetEnviron = field(default_factory=TargetEnviron)
    marker_environment: dict[str, str] = field(default_factory=dict)
    environment_roots: list[str] = field(default_factory=list)
    python: str = ""
    """The interpreter the doctor was pointed at (`--python`), as given."""
    probe: ProbeRun = field(default_factory=ProbeRun)


@frozen_dataclass(frozen=True)
class SysPathEntry(Shape):
    path: str = ""
    kind: str = ""
    exists: bool = False
    site_dir: bool | None = None
    """Whether `site` read the .pth files in it (a site directory, the enabled user site); None in older reports."""


@frozen_dataclass(frozen=True)
class SysPath(Shape):
    SECTION: ClassVar[str] = "sys_path"

    entries: list[SysPathEntry] = field(default_factory=list)


@frozen_dataclass(frozen=True)
class FileError(Shape):
    """A metadata file (METADATA, RECORD) that could not be read, and why."""

    file: str = ""
    error: str = ""


@frozen_dataclass(frozen=True)
class SizeMismatch(Shape):
    """A file whose size on disk differs from the one RECORD lists."""

    path: str = ""
    record: int | None = None
    disk: int | None = None


@frozen_dataclass(frozen=True)
class HashMismatch(Shape):
    """A file whose sha256 differs from the one RECORD lists (--verify-hashes)."""

    path: str = ""


@frozen_dataclass(frozen=True)
class NotRegular(Shape):
    """A file RECORD lists that is a FIFO, a device or a socket on disk."""

    path: str = ""
    kind: str = ""


@frozen_dataclass(frozen=True)
class Escape(Shape):
    """A RECORD line that resolves outside the environment."""

    line: int | None = None
    path: str = ""
    resolves_to: str = ""


@frozen_dataclass(frozen=True)
class Integrity(Shape):
    """A stack distribution's RECORD checked against the disk (lists capped, counts whole)."""

    files: int = 0
    checked: int = 0
    hashed: bool = False
    missing: list[str] = field(default_factory=list)
    missing_count: int = 0
    size_mismatch: list[SizeMismatch] = field(default_factory=list)
    size_mismatch_count: int = 0
    hash_mismatch: list[HashMismatch] = field(default_factory=list)
    hash_mismatch_count: int = 0
    not_regular: list[NotRegular] = field(default_factory=list)
    not_regular_count: int = 0
    shared: int = 0
    """Paths another verified distribution lists too: left out of the size and hash comparison (see
    Distributions.shared_files), missing ones still counted."""


@frozen_dataclass(frozen=True)
class Record(Shape):
    """A distribution's RECORD: whether it is there, and what reading it found."""

    present: bool = False
    error: FileError | None = None
    """When RECORD could not be read."""
    files: int | None = None
    integrity: Integrity | None = None
    file: str | None = None
    escapes: list[Escape] = field(default_factory=list)
    """RECORD lines that point outside the environment."""
    escapes_count: int = 0


@frozen_dataclass(frozen=True)
class Claim(Shape):
    """A file a distribution's RECORD lists under a watched top-level name, with its state on disk."""

    path: str = ""
    hash: str | None = None
    size: int | None = None
    disk_hash: str | None = None
    disk_error: str | None = None


@frozen_dataclass(frozen=True)
class WheelExtension(Shape):
    path: str = ""
    module: str = ""
    abi_tag: str | None = None
    """Another interpreter's ABI tag left in the file name (`cpython-312-x86_64-linux-gnu`)."""


@frozen_dataclass(frozen=True)
class Distribution(Shape):
    """One installed distribution (a .dist-info or .egg-info directory)."""

    location: str = ""
    dist_info: str = ""
    format: str = ""
    name: str = ""
    version: str | None = None
    canonical: str = ""
    """The PEP 503 name (`facts.python.envfacts.canonical`)."""
    metadata_error: FileError | None = None
    """METADATA unreadable: name and version are then guessed from the directory."""
    requires: list[str] = field(default_factory=list)
    requires_python: str | None = None
    installer: str | None = None
    installed_at: float | None = None
    """The mtime of its RECORD (else INSTALLER, METADATA): installers write RECORD last, so it orders installs."""
    editable: bool = False
    direct_url: str | None = None
    record: Record = field(default_factory=Record)
    top_levels: list[str] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)
    extensions: list[WheelExtension] = field(default_factory=list)
    libraries: list[str] = field(default_factory=list)
    wheel_tags: list[str] = field(default_factory=list)

    def label(self) -> str:
        return f"{self.name} {self.version}" if self.version else self.name


@frozen_dataclass(frozen=True)
class Shadowed(Shape):
    """The file a RECORD lists for an extension module that another file shadows, and whose RECORD it is."""

    path: str = ""
    distribution: str = ""


@frozen_dataclass(frozen=True)
class ImportExtension(Shape):
    """A stack extension module the import system finds that no RECORD lists (or that shadows one)."""

    module: str = ""
    path: str = ""
    resolves_to: str = ""
    finder: str | None = None
    file: str = ""
    shadows: Shadowed | None = None


@frozen_dataclass(frozen=True)
class ImportExtensions(Shape):
    names: list[str] = field(default_factory=list)
    found: list[ImportExtension] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)


@frozen_dataclass(frozen=True)
class SharedClaimant(Shape):
    """A distribution that lists paths another one lists too."""

    name: str = ""
    version: str | None = None
    dist_info: str = ""
    installer: str | None = None
    installed_at: float | None = None
    """The mtime of its RECORD (written last by an installer): the later one was installed last."""


@frozen_dataclass(frozen=True)
class DifferingFile(Shape):
    """A shared path whose RECORD hashes differ: each claimant's hash, and the hash of the file on disk."""

    path: str = ""
    hashes: dict[str, str] = field(default_factory=dict)
    """canonical name -> its RECORD's "sha256=..." for the path."""
    disk_hash: str | None = None
    """"sha256=..."; None when the file is missing; "not hashed: why" for one that is not opened."""


@frozen_dataclass(frozen=True)
class SharedFiles(Shape):
    """Paths that two or more distributions list in their RECORDs: in `Distributions.shared_files` the verified ones
    (the stack, the kernel packages), in `Distributions.overlaps` any."""

    distributions: list[SharedClaimant] = field(default_factory=list)
    paths: int = 0
    differing: list[DifferingFile] = field(default_factory=list)
    """Capped (200); differing_count counts them all."""
    differing_count: int = 0
    sample: list[str] = field(default_factory=list)
    """The first shared paths (10; overlaps only)."""
    empty: int = 0
    """Shared paths every claimant's RECORD lists as empty files (size 0: an empty `__init__.py`; overlaps only)."""

    def holding(self, name: str) -> list[DifferingFile]:
        """The differing paths whose bytes on disk are `name`'s (by canonical name)."""
        key = canonical(name)
        return [f for f in self.differing if f.disk_hash is not None and f.hashes.get(key) == f.disk_hash]


@frozen_dataclass(frozen=True)
class Overlaps(Shape):
    """The paths any two installed distributions both list in their RECORDs, grouped by the names that list them
    (from the RECORD rows the environment probe read for the distributions; groups capped at 200)."""

    groups: list[SharedFiles] = field(default_factory=list)
    paths_left_out: int = 0
    """Shared paths of further sets of names, past the cap on groups."""


@frozen_dataclass(frozen=True)
class Distributions(Shape):
    SECTION: ClassVar[str] = "distributions"

    items: list[Distribution] = field(default_factory=list)
    """In sys.path order: the first of a name is the one importlib.metadata (and Python) sees."""
    import_extensions: ImportExtensions = field(default_factory=ImportExtensions)
    shared_files: list[SharedFiles] = field(default_factory=list)
    overlaps: Overlaps | None = None
    """None in a report saved before the overlaps were collected: nothing is said of them then."""

    @cached_property
    def _first(self) -> dict[str, Distribution]:
        return _first_of_each_name(self.items)

    def get(self, name: str) -> Distribution | None:
        """The distribution of that name Python sees (the first on sys.path), or None."""
        return self._first.get(canonical(name))

    def version(self, name: str) -> str | None:
        dist = self.get(name)
        return dist.version if dist else None

    def seen(self) -> Iterator[Distribution]:
        """One per name: the one Python sees."""
        return iter(self._first.values())

    def duplicates(self) -> dict[str, list[Distribution]]:
        """Names installed more than once, each with its copies in sys.path order."""
        groups: dict[str, list[Distribution]] = {}
        for dist in self.items:
            groups.setdefault(canonical(dist.name), []).append(dist)
        return {name: dists for name, dists in groups.items() if len(dists) > 1}

    def requiring(self, name: str) -> list[Distribution]:
        """Installed distributions that declare a requirement on `name` (any marker, any extra)."""
        wanted = canonical(name)
        return [dist for dist in self.seen() if any(_required_name(r) == wanted for r in dist.requires)]


@frozen_dataclass(frozen=True)
class NamedVersion(Shape):
    """A distribution's name and version, read without the rest of it."""

    name: str = ""
    version: str | None = None


@frozen_dataclass(frozen=True)
class Versions(Shape):
    """The distributions section read for its names and versions alone: the fingerprint and the fleet summary of
    a 300-distribution environment need none of its files, requirements or shared paths (read with
    `Versions.of(sections.get(Distributions.SECTION))`)."""

    items: list[NamedVersion] = field(default_factory=list)

    @classmethod
    def of(cls, section: Any) -> Versions | None:
        """The distributions section, as a run or a report holds it, read for its names and versions (None: not
        collected, or not of its shape): a collected `Distributions` gives them without its JSON."""
        if isinstance(section, Distributions):
            return cls(items=[NamedVersion(name=dist.name, version=dist.version) for dist in section.items])
        return cls.read(section)

    def seen(self) -> dict[str, NamedVersion]:
        """{canonical name: the one Python sees of that name (the first on sys.path)}, nameless ones left out."""
        return {name: dist for name, dist in _first_of_each_name(self.items).items() if name}


class _Named(Protocol):
    @property
    def name(self) -> str: ...


_N = TypeVar("_N", bound=_Named)


def _first_of_each_name(items: Iterable[_N]) -> dict[str, _N]:
    """{canonical name: the first item of that name}: in sys.path order, the one Python sees."""
    first: dict[str, _N] = {}
    for item in items:
        first.setdefault(canonical(item.name), item)
    return first


_LEADING_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _required_name(requirement: str) -> str | None:
    """The name a Requires-Dist line names: its leading name, whether the rest parses or not (`foo (>=1.0.*)`,
    written by older tools, does not). PEP 508's parser (packaging's) reads the same name where the line parses:
    its name token is this one, and a token this one extends past it (`foo-` before a space) leaves the line
    unparsed. So no line is parsed whole for its name: a serving environment has 1,200 of them."""
    match = _LEADING_NAME.match(requirement)
    return canonical(match.group(1)) if match else None


@frozen_dataclass(frozen=True)
class PortionContents(Shape):
    """What a namespace portion directory holds (files listed up to a cap, counts whole)."""

    files: list[str] = field(default_factory=list)
    file_count: int = 0
    bytecode_count: int = 0
    dir_count: int = 0
    complete: bool = False


@frozen_dataclass(frozen=True)
class Portion(Shape):
    """A sys.path entry that holds something importable under the name."""

    index: int = 0
    entry: str = ""
    kind: str = ""
    """"package", "namespace-portion", "module" or "extension"."""
    path: str = ""
    contents: PortionContents | None = None


@frozen_dataclass(frozen=True)
class Resolved(Shape):
    """How a top-level name resolves (importlib.util.find_spec, nothing imported)."""

    found: bool = False
    error: str | None = None
    origin: str | None = None
    namespace: bool = False
    search_locations: list[str] | None = None
    portions: list[Portion] = field(default_factory=list)


@frozen_dataclass(frozen=True)
class Resolution(Shape):
    SECTION: ClassVar[str] = "resolution"
    WHOLE: ClassVar[str] = "names"

    names: dict[str, Resolved] = field(default_factory=dict)

    def of(self, name: str) -> Resolved:
        """How the top-level `name` resolves (not found when it was not looked up)."""
        return self.names.get(name) or Resolved()
