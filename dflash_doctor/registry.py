"""Finds the checks: built-in and third-party, through one path.

Both come from the entry-point group `dflash_doctor.checks`; the built-ins are the ones this
distribution itself declares. A third-party check is a guest (`dflash_doctor.guest`): its import is
bounded in time, anything it raises is caught, and what it declares is validated before it runs. Setting DFLASH_DOCTOR_DISABLE_PLUGIN_AUTOLOAD=1 keeps only those, for
reproducible CI runs (as pytest's PYTEST_DISABLE_PLUGIN_AUTOLOAD does).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import metadata

from dflash_doctor.check import Check
from dflash_doctor.checks import BUILTIN_CHECKS
from dflash_doctor.guest import Overtime, Raised, bounded, declaration_problems, wrap
from dflash_doctor.model import Finding, Status

__all__ = ["GROUP", "AUTOLOAD_ENV", "LoadedCheck", "PluginError", "load_checks", "BUILTIN_CHECKS"]

GROUP = "dflash_doctor.checks"
AUTOLOAD_ENV = "DFLASH_DOCTOR_DISABLE_PLUGIN_AUTOLOAD"
OWN_DISTRIBUTION = "dflash-doctor"
LOAD_TIMEOUT_S = 60.0
"""How long one plugin's import may take (a run passes its --timeout)."""


@dataclass(frozen=True)
class LoadedCheck:
    check: Check
    origin: str
    """"builtin" or the distribution that provided it."""


@dataclass(frozen=True)
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


class _Invalid(Exception):
    pass


def _load(target: str) -> type:
    module_name, _, attr = target.partition(":")
    module = __import__(module_name, fromlist=[attr])
    obj: type = getattr(module, attr)
    return obj


def _instantiate(obj: object) -> Check:
    check = obj() if isinstance(obj, type) else obj
    if not isinstance(check, Check):
        missing = [a for a in ("id", "layer", "title", "needs", "judge") if not hasattr(check, a)]
        raise TypeError(f"not a dflash-doctor check (missing {', '.join(missing) or 'attributes'})")
    return check


def _load_plugin(ep: metadata.EntryPoint, origin: str, timeout_s: float) -> Check:
    """A third-party check: imported, instantiated and validated as a guest (bounded, nothing escapes)."""

    def load() -> Check:
        loaded = ep.load()
        plugin = loaded() if isinstance(loaded, type) else loaded
        problems = declaration_problems(plugin)
        if problems:
            raise _Invalid("; ".join(problems))
        return wrap(plugin, origin, ep.value, timeout_s)

    return bounded(load, timeout_s, ep.name)


def load_checks(autoload: bool | None = None,
                timeout_s: float = LOAD_TIMEOUT_S) -> tuple[list[LoadedCheck], list[PluginError]]:
    """Every check, built-ins first, each at most once by id; a plugin that fails to load, hangs in its
    import or declares something unusable is reported as a PluginError (at most `timeout_s` each)."""
    if autoload is None:
        autoload = os.environ.get(AUTOLOAD_ENV, "") in ("", "0")
    entries = [
        ep
        for ep in metadata.entry_points(group=GROUP)
        if autoload or _distribution_name(ep) == OWN_DISTRIBUTION
    ]
    # Built-ins the installed metadata does not declare (none when installed; all from a bare source tree, and
    # the newer ones from a source tree run over an older editable install) come from the table itself.
    own = {ep.name for ep in entries if _distribution_name(ep) == OWN_DISTRIBUTION}
    entries = [metadata.EntryPoint(name, value, GROUP) for name, value in BUILTIN_CHECKS if name not in own] + entries

    loaded: list[LoadedCheck] = []
    errors: list[PluginError] = []
    seen: set[str] = set()
    declared = [name for name, _ in BUILTIN_CHECKS]

    def order(ep: metadata.EntryPoint) -> tuple[int, int]:
        if _distribution_name(ep) in (OWN_DISTRIBUTION, None):
            return (0, declared.index(ep.name) if ep.name in declared else len(declared))
        return (1, 0)  # plugins after the built-ins, in the order they were found

    for ep in sorted(entries, key=order):
        origin = _distribution_name(ep) or "builtin"
        if origin == OWN_DISTRIBUTION:
            origin = "builtin"
        try:
            check = _instantiate(ep.load()) if origin == "builtin" else _load_plugin(ep, origin, timeout_s)
        except Raised as exc:  # a broken plugin must not take the doctor down, whatever it raises
            invalid = isinstance(exc.exception, _Invalid)
            reason = str(exc.exception) if invalid else str(exc)
            errors.append(PluginError(ep.name, origin, reason, ep.value, invalid=invalid))
            continue
        except Overtime as exc:
            errors.append(PluginError(ep.name, origin, f"loading it did not finish ({exc})", ep.value))
            continue
        except Exception as exc:  # noqa: BLE001 - a built-in that fails to load is reported the same way
            errors.append(PluginError(ep.name, origin, f"{type(exc).__name__}: {exc}", ep.value))
            continue
        if check.id in seen:
            errors.append(PluginError(ep.name, origin, f"check id {check.id!r} is already taken", ep.value,
                                      invalid=True))
            continue
        seen.add(check.id)
        loaded.append(LoadedCheck(check, origin))
    return loaded, errors


def _distribution_name(ep: metadata.EntryPoint) -> str | None:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return None
    name: str | None = dist.metadata["Name"]
    return name.lower().replace("_", "-") if name else None
