"""Profiles: named sets of run options, kept as data.

A profile says what a run means. `ci` is "this image is right for that hardware": no GPU on the build
machine, every warning fails, and the hardware must be named with --target-arch. Users add their own in
the `pyproject.toml` of the project they are in (`find_pyproject`) or in a file given with `--config`:

    [tool.dflash-doctor.profiles.a10-image]      # in a --config file, [profiles.a10-image] also works
    description = "The A10 serving image"
    extends = "ci"
    target-arch = ["sm_86"]
    skip = ["models"]

Keys are the run options' long names (dashes or underscores); `require` lists options that must end up
set, from the profile or the command line. Options given on the command line win over the profile.
A file's profile never takes a built-in's name (`ci`, `ticket`): that is an error naming the file, so that a
pyproject.toml cannot quietly change what `--profile ticket` runs or where it writes. --config overrides
pyproject.toml by name. The report records the profile and the file it came from (`options.profile_origin`).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any

from dflash_doctor.documents.jsondoc import read_text, shown_path
from dflash_doctor.shape import frozen_dataclass

__all__ = ["BUILTIN_PROFILES", "Profile", "ProfileError", "apply", "find_pyproject", "load_profiles"]

TOOL_KEY = "dflash-doctor"
# Options a profile may not set: they choose the profile, or are not run options at all.
NOT_SETTABLE = frozenset({"help", "version", "profile", "config"})


class ProfileError(Exception):
    """A profile or config file that cannot be used; the message names the file and the fix."""


@frozen_dataclass(frozen=True)
class Profile:
    name: str
    description: str
    options: Mapping[str, Any] = field(default_factory=dict)
    """Run options by argparse destination (`no_gpu`, `target_arch`, ...)."""
    require: tuple[str, ...] = ()
    origin: str = "built-in"
    extends: str | None = None

    def as_flags(self) -> str:
        words = []
        for dest, value in self.options.items():
            flag = "--" + dest.replace("_", "-")
            if value is True:
                words.append(flag)
            elif isinstance(value, list):
                words.extend(f"{flag} {v}" for v in value)
            elif value not in (False, None):
                words.append(f"{flag} {value}")
        words.extend(f"(requires --{r.replace('_', '-')})" for r in self.require)
        return " ".join(words)


BUILTIN_PROFILES: tuple[Profile, ...] = (
    Profile(
        "ci",
        "This image is right for that hardware: no GPU needed, warnings fail, the target GPU archs must be "
        "named (--target-arch sm_86).",
        {"no_gpu": True, "strict": True},
        require=("target_arch",),
    ),
    Profile(
        "ticket",
        "What a maintainer needs on a bug ticket: every fact, RECORD hashes verified, a Markdown report to "
        "paste and the JSON report to attach.",
        {"verbose": True, "verify_hashes": True, "markdown": "dflash-doctor-report.md",
         "json": "dflash-doctor-report.json"},
    ),
)


def _toml_load(path: Path) -> dict[str, Any]:
    # Here, not at the top: TOML is read for profiles only (--profile, --config, `dflash-doctor profiles`), not on
    # every start; and on Python 3.10 the reader is the tomli package, which may be absent (a ProfileError says so).
    try:
        import tomllib  # type: ignore[import-not-found,unused-ignore]
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[import-not-found,no-redef,unused-ignore]
        except ModuleNotFoundError:
            raise ProfileError(f"{path}: reading TOML needs Python 3.11+ or the tomli package "
                               "(python -m pip install tomli)") from None
    text = read_text(str(path), "config file", ProfileError)
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{shown_path(str(path))}: not valid TOML ({exc})") from exc
    except RecursionError:
        raise ProfileError(f"{shown_path(str(path))}: not usable TOML (nested too deeply)") from None
    except ValueError as exc:  # an integer of thousands of digits, say
        raise ProfileError(f"{shown_path(str(path))}: not usable TOML ({exc})") from None
    return data


def _table(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """data[key] when it is a table; an empty one otherwise (`tool = 1` holds no profiles)."""
    value = data.get(key)
    return value if isinstance(value, Mapping) else {}


def find_pyproject(start: Path) -> Path | None:
    """The pyproject.toml of the project the user is in: the nearest from `start` upwards, looking no further
    than the repository root (a directory holding .git) and never into a directory the user does not own (/tmp,
    /, a shared mount: anyone may have put a pyproject.toml there). One the user does not own is not read."""
    user = os.geteuid()
    for directory in (start, *start.parents):
        candidate = directory / "pyproject.toml"
        try:
            if directory.stat().st_uid != user:
                return None
            if candidate.is_file():
                return candidate if candidate.stat().st_uid == user else None
            if os.path.lexists(directory / ".git"):
                return None
        except OSError:  # a directory the user may not search: no project found
            return None
    return None


def _option_kinds(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {a.dest: a for a in parser._actions if a.dest not in NOT_SETTABLE and a.dest != argparse.SUPPRESS}


def _coerce(value: Any, action: argparse.Action, where: str) -> Any:
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        if not isinstance(value, bool):
            raise ProfileError(f"{where}: expected true or false, got {value!r}")
        return value
    if isinstance(action, argparse._AppendAction):
        values = value if isinstance(value, list) else [value]
        if not all(isinstance(v, str) for v in values):
            raise ProfileError(f"{where}: expected a string or a list of strings, got {value!r}")
        return list(values)
    if isinstance(value, (dict, list)):
        raise ProfileError(f"{where}: expected a single value, got {value!r}")
    if action.choices is not None and value not in action.choices:
        raise ProfileError(f"{where}: {value!r} is not one of {', '.join(map(str, action.choices))}")
    if action.type is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ProfileError(f"{where}: expected a number, got {value!r}")
        return float(value)
    return str(value)


def _profiles_from(table: Any, origin: Path, parser: argparse.ArgumentParser, prefix: str) -> list[Profile]:
    if table is None:
        return []
    if not isinstance(table, Mapping):
        raise ProfileError(f"{origin}: [{prefix}] must be a table of profiles")
    kinds = _option_kinds(parser)
    found = []
    for name, body in table.items():
        where = f"{origin}: [{prefix}.{name}]"
        if not isinstance(body, Mapping):
            raise ProfileError(f"{where} must be a table")
        options: dict[str, Any] = {}
        require: tuple[str, ...] = ()
        for key, value in body.items():
            dest = key.replace("-", "_")
            if key in ("description", "extends"):
                continue
            if key == "require":
                names = value if isinstance(value, list) else [value]
                unknown = [n for n in names if str(n).replace("-", "_") not in kinds]
                if unknown:
                    raise ProfileError(f"{where}: require names unknown options: {', '.join(map(str, unknown))}")
                require = tuple(str(n).replace("-", "_") for n in names)
                continue
            if dest not in kinds:
                known = ", ".join(sorted(d.replace("_", "-") for d in kinds))
                raise ProfileError(f"{where}: unknown option {key!r} (known: {known})")
            options[dest] = _coerce(value, kinds[dest], f"{where} {key}")
        found.append(Profile(str(name), str(body.get("description", "")), options, require, str(origin),
                             str(body["extends"]) if body.get("extends") else None))
    return found


def _add(profiles: dict[str, Profile], found: Sequence[Profile]) -> None:
    """Add a file's profiles, later ones replacing earlier ones by name; a built-in's name is an error."""
    builtin = {p.name for p in BUILTIN_PROFILES}
    for p in found:
        if p.name in builtin:
            raise ProfileError(f"{p.origin}: profile {p.name!r} is built in and cannot be redefined; give yours "
                               f"another name (it may say extends = \"{p.name}\")")
        profiles[p.name] = p


def load_profiles(parser: argparse.ArgumentParser, config: str | None = None,
                  cwd: Path | None = None) -> dict[str, Profile]:
    """Every profile, later sources overriding earlier ones by name; `extends` resolved."""
    profiles = {p.name: p for p in BUILTIN_PROFILES}
    pyproject = find_pyproject(cwd or Path.cwd())
    if pyproject is not None:
        text = read_text(str(pyproject), "pyproject.toml", ProfileError)
        if f"tool.{TOOL_KEY}" in text or f'tool."{TOOL_KEY}"' in text:
            tool = _table(_table(_toml_load(pyproject), "tool"), TOOL_KEY)
            _add(profiles, _profiles_from(tool.get("profiles"), pyproject, parser, f"tool.{TOOL_KEY}.profiles"))
    if config is not None:
        path = Path(os.path.abspath(config))
        data = _toml_load(path)
        table = data.get("profiles")
        prefix = "profiles"
        if table is None:
            table = _table(_table(data, "tool"), TOOL_KEY).get("profiles")
            prefix = f"tool.{TOOL_KEY}.profiles"
        if table is None:
            raise ProfileError(f"{config}: no [profiles.NAME] or [tool.{TOOL_KEY}.profiles.NAME] table")
        _add(profiles, _profiles_from(table, path, parser, prefix))
    return {name: _resolve(name, profiles, ()) for name in profiles}


def _resolve(name: str, profiles: Mapping[str, Profile], seen: Sequence[str]) -> Profile:
    profile = profiles[name]
    if profile.extends is None:
        return profile
    if profile.extends in seen or profile.extends == name:
        raise ProfileError(f"{profile.origin}: profile {name!r} extends itself ({' -> '.join([*seen, name])})")
    if profile.extends not in profiles:
        raise ProfileError(f"{profile.origin}: profile {name!r} extends unknown profile {profile.extends!r}")
    base = _resolve(profile.extends, profiles, (*seen, name))
    return Profile(profile.name, profile.description or base.description, {**base.options, **profile.options},
                   tuple(dict.fromkeys((*base.require, *profile.require))), profile.origin, profile.extends)


def apply(profile: Profile, args: argparse.Namespace, parser: argparse.ArgumentParser) -> list[str]:
    """Set the profile's options where the command line left the default; return what is still missing."""
    for dest, value in profile.options.items():
        if getattr(args, dest, None) == parser.get_default(dest):
            setattr(args, dest, value)
    return [dest for dest in profile.require if getattr(args, dest, None) in (None, False, [], "")]
