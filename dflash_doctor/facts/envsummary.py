"""What decides how an environment behaves, read back from any report's facts.

The fingerprint, the golden baseline and the fleet merge all need the same few facts: the Python and
the machine, the NVIDIA driver, the GPUs' compute capabilities, the serving stack's distributions and
versions, and which GPU archs the stack's compiled code carries. Each is read through its section's
declared shape (`facts.sections.SECTION_SHAPES`); a section that is absent, failed to collect, or not of its
shape (a saved report may hold anything) reads as "not collected" (None), never as an error.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from dflash_doctor.facts.gpu.archs_shapes import ArchCoverage
from dflash_doctor.facts.gpu.nvml_shapes import Gpu
from dflash_doctor.facts.python.envfacts import canonical
from dflash_doctor.facts.python.environment_shapes import Distributions, Target, Versions
from dflash_doctor.facts.shape import SectionFailure, section_of_json
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

# The section each kind of fact lives in (the `SECTION` of its shape).
SECTION_NAMES: Mapping[str, tuple[str, ...]] = {
    "gpu": (Gpu.SECTION,),
    "arch": (ArchCoverage.SECTION,),
    "kernels": ("kernels",),
    "distributions": (Distributions.SECTION,),
    "target": (Target.SECTION,),
}

STACK: tuple[str, ...] = tuple(canonical(n) for n in STACK_DISTRIBUTIONS.value)

_SITE_DIRS = ("site-packages/", "dist-packages/")


def _list(value: Any) -> list[Any]:
    """Facts are free-form (a saved report may hold anything): a list where one is read, else nothing."""
    return value if isinstance(value, list) else []


def section(sections: Mapping[str, object], kind: str) -> Any:
    """The first collected section of `kind`, as stored, or None (absent, or failed to collect)."""
    for name in SECTION_NAMES[kind]:
        value = section_of_json(name, sections.get(name))
        if value is None or isinstance(value, SectionFailure):
            continue
        return value
    return None


def python(sections: Mapping[str, object]) -> dict[str, Any] | None:
    target = Target.read(sections.get(Target.SECTION))
    if target is None:
        return None
    return {"version": target.python_version, "implementation": target.implementation, "machine": target.machine}


def stack_versions(sections: Mapping[str, object], names: tuple[str, ...] = STACK) -> dict[str, str | None] | None:
    """{canonical name: version or None (not installed)} for the stack; None if not collected.

    The first distribution of a name in sys.path order is the one that counts (importlib.metadata's rule).
    """
    versions = all_versions(sections)
    if versions is None:
        return None
    return {name: versions.get(name) for name in names}


def all_versions(sections: Mapping[str, object]) -> dict[str, str] | None:
    """{canonical name: version} of every distribution Python sees; None if not collected."""
    versions = Versions.of(sections.get(Distributions.SECTION))
    if versions is None:
        return None
    return {name: str(dist.version) for name, dist in versions.seen().items()}


# ------------------------------------------------------------------------------------------ GPU facts


def driver(sections: Mapping[str, object]) -> dict[str, str | None] | None:
    """{"version": "570.124.06", "cuda": "12.8"} from the GPU section, or None when not collected."""
    gpu = Gpu.read(sections.get(Gpu.SECTION))
    if gpu is None:
        return None
    version = gpu.driver_version or None
    cuda = gpu.cuda_driver_version or None
    if version is None and cuda is None:
        return None
    return {"version": version, "cuda": cuda}


def gpus(sections: Mapping[str, object]) -> list[dict[str, str | None]] | None:
    """[{"name", "cc"}] in device order from the GPU section; [] for a box without GPUs; None if not
    collected (under --no-gpu the section says only that it was skipped)."""
    gpu = Gpu.read(sections.get(Gpu.SECTION))
    if gpu is None or gpu.skipped is not None:
        return None
    return [{"name": device.name,
             "cc": (f"{device.compute_capability[0]}.{device.compute_capability[1]}"
                    if device.compute_capability is not None and len(device.compute_capability) == 2 else None)}
            for device in gpu.devices]


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


def arch_coverage(sections: Mapping[str, object]) -> dict[str, dict[str, list[str]]] | None:
    """{library (site-relative): {"sass": [...], "ptx": [...]}} from the arch section, or None.

    Reads any nesting in which objects carry `sass`/`ptx` lists next to (or under) a `path`: the shape
    of `dflash_doctor.facts.elf.scan_library` and of lists of such scans.
    """
    coverage_facts = ArchCoverage.read(sections.get(ArchCoverage.SECTION))
    if coverage_facts is None:
        # A run of the kernel probes alone (no arch scan) has always read as "no library carries code".
        return {} if section(sections, "kernels") is not None else None
    archs = coverage_facts.to_json()
    coverage: dict[str, dict[str, set[str]]] = {}
    for label, node in _arch_nodes(archs, None):
        entry = coverage.setdefault(label or "?", {"sass": set(), "ptx": set()})
        for kind in ("sass", "ptx"):
            entry[kind].update(str(a) for a in _list(node.get(kind)))
    return {lib: {k: sorted(v, key=_arch_key) for k, v in kinds.items()} for lib, kinds in sorted(coverage.items())}


def _arch_key(name: str) -> tuple[int, str]:
    digits = re.search(r"(\d+)", name)
    return (int(digits.group(1)) if digits else 0, name)
