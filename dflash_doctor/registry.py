"""Finds the checks, built-in and third-party, and builds the table of their finding codes.

The built-ins are `BUILTIN_CHECKS`, the check classes imported from their layer packages, in the order they
are judged and shown in (pyproject.toml declares the same classes as entry points of the group
`dflash_doctor.checks`, which a test keeps equal; docs/how-it-works.md counts the files adding a check touches).
Every check subclasses `dflash_doctor.check.Check`, and this module reads only what that class declares. Third-party checks come from the same entry-point group. A third-party check is a guest (`dflash_doctor.guest`): it is loaded in a
process of its own, bounded in time, anything it raises is caught, and what it declares is validated before
it runs; the plugins load side by side. Setting DFLASH_DOCTOR_DISABLE_PLUGIN_AUTOLOAD=1 keeps only the
built-ins, for reproducible CI runs (as pytest's PYTEST_DISABLE_PLUGIN_AUTOLOAD does).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata

from dflash_doctor.check import Check
from dflash_doctor.checks import fix
from dflash_doctor.checks.fabric import FabricCheck
from dflash_doctor.checks.fix import BaselineCheck
from dflash_doctor.checks.gpu import ArchCoverageCheck, CudaStackCheck, GpuCheck, KernelsCheck
from dflash_doctor.checks.live import LiveCheck
from dflash_doctor.checks.models import DrafterAttentionCheck, DrafterCheck, ModelFilesCheck
from dflash_doctor.checks.python import (
    DistributionsCheck,
    ExtensionsCheck,
    ImportSurfaceCheck,
    KernelPackagesCheck,
    NamespaceCheck,
    RotaryImportCheck,
)
from dflash_doctor.checks.serve import ServeCommandCheck, ServeResourcesCheck
from dflash_doctor.codes import Code, core, table, with_aliases
from dflash_doctor.guest import RESERVED_IDS, Declared, declare, wrap
from dflash_doctor.model import Finding, Status
from dflash_doctor.shape import frozen_dataclass

__all__ = ["AUTOLOAD_ENV", "BUILTIN_CHECKS", "CODES", "GROUP", "LoadedCheck", "PluginError", "code_table",
           "load_checks"]

BUILTIN_CHECKS: tuple[type[Check], ...] = (
    DistributionsCheck,
    NamespaceCheck,
    RotaryImportCheck,
    ImportSurfaceCheck,
    ExtensionsCheck,
    KernelPackagesCheck,
    GpuCheck,
    ArchCoverageCheck,
    CudaStackCheck,
    KernelsCheck,
    ModelFilesCheck,
    DrafterCheck,
    DrafterAttentionCheck,
    ServeCommandCheck,
    ServeResourcesCheck,
    FabricCheck,
    LiveCheck,
    BaselineCheck,
)
"""The built-in checks in their declared order: the order they are judged and shown in."""


def code_table(checks: Iterable[Check | type[Check]]) -> dict[str, Code]:
    """Every finding id the doctor can report with these checks: the doctor's own codes, each check's
    `codes`, the fix layer's that no check emits (fleet comparisons, source-build prerequisites), and each check's copy of
    a code shared under the v1 alias table. A plugin that declares no `codes` adds none."""
    return with_aliases(table(core.CODES, *(c.codes for c in checks), fix.FLEET_CODES, fix.BUILD_CODES))


CODES: Mapping[str, Code] = code_table(BUILTIN_CHECKS)
"""The table of the built-in checks (what `dflash-doctor explain` reads)."""

RESERVED_PREFIXES = frozenset({*RESERVED_IDS, *(check.id for check in BUILTIN_CHECKS),
                               *(code_id.split(".", 1)[0] for code_id in CODES)})
"""What a plugin's check id may not begin with: its findings (`<its id>.<name>`) would be the doctor's own
(`doctor.interrupted`, `fleet.*`) or a built-in check's."""
GROUP = "dflash_doctor.checks"
AUTOLOAD_ENV = "DFLASH_DOCTOR_DISABLE_PLUGIN_AUTOLOAD"
OWN_DISTRIBUTION = "dflash-doctor"
LOAD_TIMEOUT_S = 60.0
"""How long one plugin's import may take (a run passes its --timeout)."""


@frozen_dataclass(frozen=True)
class LoadedCheck:
    check: Check
    origin: str
    """"builtin" or the distribution that provided it."""


@frozen_dataclass(frozen=True)
class PluginError:
    name: str
    origin: str
    reason: str
    entry_point: str = ""
    """The entry point's value, "module:attr"."""
    invalid: bool = False
    """It loaded, but what it declares is not usable (rather than: loading it raised or hung)."""

    def finding(self) -> Finding:
        """The `error` finding that reports this plugin in a run."""
        where = f"{self.entry_point} from {self.origin}" if self.entry_point else self.origin
        if self.invalid:
            return Finding(id="doctor.plugin-invalid", status=Status.ERROR,
                           title=f"check plugin {self.name!r} ({where}) is invalid: {self.reason}",
                           evidence={"plugin": self.name, "origin": self.origin, "entry_point": self.entry_point})
        return Finding(id="doctor.plugin-failed", status=Status.ERROR,
                       title=f"check plugin {self.name!r} from {self.origin} could not be loaded: {self.reason}",
                       detail=f"entry point: {self.name} = {self.entry_point}" if self.entry_point else "",
                       evidence={"plugin": self.name, "origin": self.origin, "entry_point": self.entry_point})


def _instantiate(obj: object) -> Check:
    check = obj() if isinstance(obj, type) else obj
    if not isinstance(check, Check):
        missing = [a for a in ("id", "layer", "title", "needs", "judge") if not hasattr(check, a)]
        raise TypeError(f"not a dflash-doctor check (missing {', '.join(missing) or 'attributes'})")
    return check


def load_checks(autoload: bool | None = None,
                timeout_s: float = LOAD_TIMEOUT_S) -> tuple[list[LoadedCheck], list[PluginError]]:
    """Every check, built-ins first, each at most once by id; a plugin that fails to load, hangs in its
    import or declares something unusable is reported as a PluginError (the plugins load side by side, each in
    a process of its own that is killed after `timeout_s`)."""
    if autoload is None:
        autoload = os.environ.get(AUTOLOAD_ENV, "") in ("", "0")
    # The built-ins are this distribution's own entry points: taken from BUILTIN_CHECKS, whatever an installed
    # copy's metadata says (an editable install made before a check was added, or a source tree without any).
    names: dict[int, str | None] = {}

    def distribution(ep: metadata.EntryPoint) -> str | None:  # one metadata read per distribution, not per entry point
        key = id(getattr(ep, "dist", None))
        if key not in names:
            names[key] = _distribution_name(ep)
        return names[key]

    guests = [ep for ep in metadata.entry_points(group=GROUP)
              if autoload and distribution(ep) not in (OWN_DISTRIBUTION, None)]

    loaded: list[LoadedCheck] = []
    errors: list[PluginError] = []
    seen: set[str] = set()
    guests_declared: dict[int, Declared] = {}
    if guests:  # each in a guest process of its own, side by side: a hung one costs `timeout_s`, not each
        with ThreadPoolExecutor(max_workers=min(8, len(guests))) as pool:
            for ep, result in zip(guests, pool.map(lambda e: declare(e.name, e.value, timeout_s), guests)):
                guests_declared[id(ep)] = result
    for builtin in BUILTIN_CHECKS:
        check = _instantiate(builtin)
        seen.add(check.id)
        loaded.append(LoadedCheck(check, "builtin"))
    for ep in guests:  # plugins after the built-ins, in the order they were found
        origin = _origin(ep)
        try:
            guest = guests_declared[id(ep)]
            if guest.declarations is None:  # a broken plugin must not take the doctor down, whatever it does
                errors.append(PluginError(ep.name, origin, guest.reason, ep.value, invalid=guest.invalid))
                continue
            check = wrap(guest.declarations, ep.name, origin, ep.value, timeout_s)
        except Exception as exc:  # noqa: BLE001
            errors.append(PluginError(ep.name, origin, f"{type(exc).__name__}: {exc}", ep.value))
            continue
        if check.id in seen:
            errors.append(PluginError(ep.name, origin, f"check id {check.id!r} is already taken", ep.value,
                                      invalid=True))
            continue
        if check.id.split(".", 1)[0] in RESERVED_PREFIXES:
            errors.append(PluginError(ep.name, origin, f"check id {check.id!r} is reserved: ids beginning "
                                      f"{check.id.split('.', 1)[0] + '.'!r} are the doctor's or a built-in check's",
                                      ep.value, invalid=True))
            continue
        seen.add(check.id)
        loaded.append(LoadedCheck(check, origin))
    return loaded, errors


def _origin(ep: metadata.EntryPoint) -> str:
    """"builtin" or the distribution that provides the entry point."""
    origin = _distribution_name(ep) or "builtin"
    return "builtin" if origin == OWN_DISTRIBUTION else origin


def _distribution_name(ep: metadata.EntryPoint) -> str | None:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return None
    name: str | None = dist.metadata["Name"]
    return name.lower().replace("_", "-") if name else None
