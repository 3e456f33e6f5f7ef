"""What decides how an environment behaves, read back from any report's facts.

The fingerprint, the golden baseline and the fleet merge all need the same few facts: the Python and
the machine, the NVIDIA driver, the GPUs' compute capabilities, the serving stack's distributions and
versions, and which GPU archs the stack's compiled code carries. This is the one place that knows in
which fact sections those live. The GPU and arch layers name their sections independently of this
module, so each reader tries the names in `SECTION_NAMES` and reads a few spellings of each field;
a section that is absent, or stored as `{"_error": ...}`, reads as "not collected" (None), never as
an error.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from dflash_doctor.facts.envfacts import canonical
from dflash_doctor.knowledge.stack import STACK_DISTRIBUTIONS

__all__ = [
    "SECTION_NAMES",
    "STACK",
    "arch_coverage",
    "driver",
    "gpus",
    "python",
    "section",
    "site_relative",
    "stack_versions",
]

# Adjust here when the GPU and arch layers settle on their section names; first found wins.
SECTION_NAMES: Mapping[str, tuple[str, ...]] = {
    "gpu": ("gpu", "nvml", "gpus"),
    "cuda": ("cuda_stack", "cuda"),
    "arch": ("arch_coverage", "archs", "kernels"),
    "distributions": ("distributions",),
    "target": ("target",),
}

STACK: tuple[str, ...] = tuple(canonical(n) for n in STACK_DISTRIBUTIONS.value)

_SITE_DIRS = ("site-packages/", "dist-packages/")


def _list(value: Any) -> list[Any]:
    """Facts are free-form (a saved report may hold anything): a list where one is read, else nothing."""
    return value if isinstance(value, list) else []


def section(sections: Mapping[str, Any], kind: str) -> Any:
    """The first collected section of `kind`, or None (absent, or failed to collect)."""
    for name in SECTION_NAMES[kind]:
        value = sections.get(name)
        if value is None or (isinstance(value, Mapping) and "_error" in value):
            continue
        return value
    return None


def python(sections: Mapping[str, Any]) -> dict[str, Any] | None:
    target = section(sections, "target")
    if not isinstance(target, Mapping):
        return None
    return {
        "version": target.get("python_version"),
        "implementation": target.get("implementation"),
        "machine": target.get("machine"),
    }


def stack_versions(sections: Mapping[str, Any], names: tuple[str, ...] = STACK) -> dict[str, str | None] | None:
    """{canonical name: version or None (not installed)} for the stack; None if not collected.

    The first distribution of a name in sys.path order is the one that counts (importlib.metadata's rule).
    """
    versions = all_versions(sections)
    if versions is None:
        return None
    return {name: versions.get(name) for name in names}


def all_versions(sections: Mapping[str, Any]) -> dict[str, str] | None:
    dists = section(sections, "distributions")
    if not isinstance(dists, Mapping):
        return None
    found: dict[str, str] = {}
    for item in _list(dists.get("items")):
        if not isinstance(item, Mapping) or not item.get("name"):
            continue
        found.setdefault(canonical(str(item["name"])), str(item.get("version")))
    return found


# ------------------------------------------------------------------------------------------ GPU facts

_DRIVER_KEYS = ("driver_version", "driver", "nvidia_driver")
_CUDA_DRIVER_KEYS = ("cuda_driver_version", "cuda_driver", "cuda_version")
_GPU_LIST_KEYS = ("gpus", "devices")


def _first(mapping: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        value = mapping.get(key)
        if isinstance(value, Mapping):
            value = value.get("version")
        if value not in (None, ""):
            return value
    return None


def driver(sections: Mapping[str, Any]) -> dict[str, str | None] | None:
    """{"version": "570.124.06", "cuda": "12.8"} from the GPU section, or None when not collected."""
    gpu = section(sections, "gpu")
    if not isinstance(gpu, Mapping):
        return None
    version = _first(gpu, _DRIVER_KEYS)
    cuda = _first(gpu, _CUDA_DRIVER_KEYS)
    if version is None and cuda is None:
        return None
    return {"version": None if version is None else str(version), "cuda": None if cuda is None else str(cuda)}


def _cc(item: Mapping[str, Any]) -> str | None:
    value = item.get("compute_capability", item.get("cc"))
    if value is None and "major" in item and "minor" in item:
        value = (item["major"], item["minor"])
    if isinstance(value, Mapping):
        value = (value.get("major"), value.get("minor"))
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return f"{value[0]}.{value[1]}"
    if isinstance(value, (str, int, float)):
        text = str(value)
        return text if "." in text else (f"{text[:-1]}.{text[-1]}" if text.isdigit() and len(text) > 1 else text)
    return None


def gpus(sections: Mapping[str, Any]) -> list[dict[str, str | None]] | None:
    """[{"name", "cc"}] in device order from the GPU section; [] for a box without GPUs; None if not
    collected."""
    gpu = section(sections, "gpu")
    if isinstance(gpu, list):
        items: Any = gpu
    elif isinstance(gpu, Mapping):
        items = next((gpu[k] for k in _GPU_LIST_KEYS if isinstance(gpu.get(k), list)), None)
        if items is None:
            return None
    else:
        return None
    out = []
    for item in _list(items):
        if isinstance(item, Mapping):
            name = item.get("name")
            out.append({"name": None if name is None else str(name), "cc": _cc(item)})
    return out


# ------------------------------------------------------------------------------------------ arch coverage


def site_relative(path: str) -> str:
    """A library path as it is inside site-packages, so that the same wheel reads the same on every box."""
    text = path.replace("\\", "/")
    for marker in _SITE_DIRS:
        at = text.rfind(marker)
        if at >= 0:
            return text[at + len(marker):]
    return text


def _arch_nodes(node: Any, owner: str | None) -> Iterator[tuple[str | None, Mapping[str, Any]]]:
    if isinstance(node, Mapping):
        here = node.get("path") or node.get("library") or node.get("file")
        own = site_relative(str(here)) if isinstance(here, str) else None
        if isinstance(node.get("sass"), list) or isinstance(node.get("ptx"), list):
            yield own or owner, node
        elif own and "fatbin" in node and node["fatbin"] is None:
            yield own, {}  # a scanned library without device code: it covers no arch, and that is a fact
        for key, child in node.items():
            if isinstance(child, (Mapping, list)):
                # Without a path of its own, a mapping's key names what lies under it ({"lib.so": {...}}).
                inner = own or (str(key) if isinstance(child, Mapping) and key not in ("fatbin",) else owner)
                yield from _arch_nodes(child, inner)
    elif isinstance(node, list):
        for child in node:
            yield from _arch_nodes(child, owner)


def arch_coverage(sections: Mapping[str, Any]) -> dict[str, dict[str, list[str]]] | None:
    """{library (site-relative): {"sass": [...], "ptx": [...]}} from the arch section, or None.

    Reads any nesting in which objects carry `sass`/`ptx` lists next to (or under) a `path`: the shape
    of `dflash_doctor.facts.elf.scan_library` and of lists of such scans.
    """
    archs = section(sections, "arch")
    if archs is None:
        return None
    coverage: dict[str, dict[str, set[str]]] = {}
    for label, node in _arch_nodes(archs, None):
        entry = coverage.setdefault(label or "?", {"sass": set(), "ptx": set()})
        for kind in ("sass", "ptx"):
            entry[kind].update(str(a) for a in _list(node.get(kind)))
    return {lib: {k: sorted(v, key=_arch_key) for k, v in kinds.items()} for lib, kinds in sorted(coverage.items())}


def _arch_key(name: str) -> tuple[int, str]:
    digits = re.search(r"(\d+)", name)
    return (int(digits.group(1)) if digits else 0, name)
