"""Fact collectors, and which fact sections each provides.

A collector gathers one or more sections of facts, either in the doctor's own process (files, NVML)
or by running a probe in the target interpreter. Checks name the sections they judge; the runner runs
only the collectors those sections need. Collectors are named by dotted path and imported only when
needed, which keeps the doctor's start-up cheap.

Each section a built-in collector provides has one declared shape: a frozen dataclass (`facts.shape.Shape`)
in the `*_shapes.py` module next to its collector, listed in `SECTION_SHAPES`. Checks, reporters, the
fingerprint and the fleet read facts through these shapes (`Facts.section(Shape)`, `Shape.read(data)`),
never by re-deriving a dict's shape. A new section: declare its shape there, with a default for every key
an older report may lack, and add it to `SECTION_SHAPES` (tests/test_fact_shapes.py checks the real output).

Third-party collectors register under the entry-point group `dflash_doctor.collectors`: the entry
point's value is a `Collector`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from dflash_doctor.shape import Shape

__all__ = ["BUILTIN_COLLECTORS", "COLLECTOR_GROUP", "HOST_SECTIONS", "SECTION_SHAPES", "SHARED_IMPORTS", "TORCH_SECTIONS",
           "Collector",
           "collectors_for", "shape_of"]

COLLECTOR_GROUP = "dflash_doctor.collectors"

# Sections whose probes import the target's stack. They run as forked children of one target process
# per run (`facts.probes.TargetHost`) that imported SHARED_IMPORTS first: a cold `import torch` costs seconds,
# and each probe importing it again made the cost scale with the stack (one import per extension).
HOST_SECTIONS = frozenset({"rotary_import", "surface_imports", "extensions", "cuda_stack", "kernels", "serve_args"})
SHARED_IMPORTS = ("torch",)
# The sections whose probes use torch itself (the GPU layers). The others reach torch only through a stack
# package that loads it (knowledge.stack.TORCH_USERS): without one installed, the shared process imports nothing.
TORCH_SECTIONS = frozenset({"cuda_stack", "kernels"})

CollectFn = Callable[..., Mapping[str, Any]]
"""function(context, earlier_sections) -> {section: facts}; partial ones also take `wanted=`."""


@dataclass(frozen=True)
class Collector:
    name: str
    provides: tuple[str, ...]
    function: str
    """"module:function", called as function(context, earlier_sections) -> {section: facts}."""
    requires: tuple[str, ...] = ()
    """Sections that must be collected first (passed in as earlier_sections)."""
    partial: bool = False
    """Called with `wanted=` (the sections of `provides` the run needs), for a collector whose
    sections share one costly step but need not all be collected."""

    def load(self) -> CollectFn:
        fn: CollectFn = _named(self.function)
        return fn


def _named(spec: str) -> Any:
    """What a "module:attribute" string names, its module imported."""
    module_name, _, attr = spec.partition(":")
    return getattr(__import__(module_name, fromlist=[attr]), attr)


BUILTIN_COLLECTORS: tuple[Collector, ...] = (
    Collector(
        "environment",
        ("target", "sys_path", "distributions", "resolution"),
        "dflash_doctor.facts.environment:collect",
    ),
    Collector(
        "vllm-source",
        ("vllm_source",),
        "dflash_doctor.facts.vllm_source:collect",
        requires=("distributions", "resolution"),
    ),
    Collector(
        "vllm-surface",
        ("vllm_surface",),
        "dflash_doctor.facts.vllm_source:collect_surface",
        requires=("distributions", "resolution"),
    ),
    Collector(
        "vllm-serve-imports",
        ("vllm_serve_imports",),
        "dflash_doctor.facts.vllm_serve_path:collect",
        requires=("distributions", "resolution", "target"),
    ),
    Collector(
        "rotary-import",
        ("rotary_import",),
        "dflash_doctor.facts.imports:collect_rotary",
        requires=("target",),
    ),
    Collector(
        "surface-imports",
        ("surface_imports",),
        "dflash_doctor.facts.imports:collect_surface",
        requires=("vllm_surface", "target"),
    ),
    Collector(
        "extensions",
        ("extensions",),
        "dflash_doctor.facts.imports:collect_extensions",
        requires=("target", "distributions", "resolution"),
    ),
    Collector("nvml", ("gpu",), "dflash_doctor.facts.nvml:collect"),
    Collector("arch-coverage", ("arch_coverage",), "dflash_doctor.facts.archs:collect",
              requires=("distributions", "target")),
    Collector("cuda", ("cuda_stack", "kernels"), "dflash_doctor.facts.cuda:collect", partial=True),
    Collector("serve-args", ("serve_args",), "dflash_doctor.facts.serve:collect_args", requires=("target", "gpu")),
    Collector("models", ("models",), "dflash_doctor.facts.models:collect", requires=("serve_args",)),
    Collector("vllm-dflash", ("vllm_dflash",), "dflash_doctor.facts.serve:collect_vllm",
              requires=("distributions", "resolution", "models")),
    Collector("fabric", ("fabric",), "dflash_doctor.facts.fabric:collect", requires=("gpu", "serve_args")),
    Collector("live", ("live",), "dflash_doctor.facts.live:collect"),
)


# The declared shape of each section the built-in collectors provide, "module:Class" (a `facts.shape.Shape`
# in the `*_shapes.py` module next to the collector). Checks read a section through it: facts.section(Target).
SECTION_SHAPES: Mapping[str, str] = {
    "target": "dflash_doctor.facts.environment_shapes:Target",
    "sys_path": "dflash_doctor.facts.environment_shapes:SysPath",
    "distributions": "dflash_doctor.facts.environment_shapes:Distributions",
    "resolution": "dflash_doctor.facts.environment_shapes:Resolution",
    "vllm_source": "dflash_doctor.facts.vllm_source_shapes:VllmSource",
    "vllm_surface": "dflash_doctor.facts.vllm_source_shapes:VllmSurface",
    "vllm_serve_imports": "dflash_doctor.facts.vllm_source_shapes:VllmServeImports",
    "rotary_import": "dflash_doctor.facts.imports_shapes:RotaryImport",
    "surface_imports": "dflash_doctor.facts.imports_shapes:SurfaceImports",
    "extensions": "dflash_doctor.facts.imports_shapes:Extensions",
    "gpu": "dflash_doctor.facts.nvml_shapes:Gpu",
    "arch_coverage": "dflash_doctor.facts.archs_shapes:ArchCoverage",
    "cuda_stack": "dflash_doctor.facts.cuda_shapes:CudaStack",
    "kernels": "dflash_doctor.facts.cuda_shapes:Kernels",
    "serve_args": "dflash_doctor.facts.serve_shapes:ServeArgs",
    "models": "dflash_doctor.facts.models_shapes:Models",
    "vllm_dflash": "dflash_doctor.facts.serve_shapes:VllmDflash",
    "fabric": "dflash_doctor.facts.fabric_shapes:Fabric",
    "live": "dflash_doctor.facts.live_shapes:Live",
}


def shape_of(section: str) -> type[Shape] | None:
    """The declared shape of a built-in section (None for a third-party collector's)."""
    spec = SECTION_SHAPES.get(section)
    if spec is None:
        return None
    shape: type[Shape] = _named(spec)
    return shape


def all_collectors() -> list[Collector]:
    found = list(BUILTIN_COLLECTORS)
    for ep in metadata.entry_points(group=COLLECTOR_GROUP):
        try:
            collector = ep.load()
        except Exception:
            continue
        if isinstance(collector, Collector):
            found.append(collector)
    return found


def collectors_for(sections: set[str], available: list[Collector] | None = None) -> list[Collector]:
    """The collectors needed for `sections`, with what they require, in dependency order."""
    by_section = {s: c for c in (available or all_collectors()) for s in c.provides}
    ordered: list[Collector] = []

    def visit(section: str) -> None:
        collector = by_section.get(section)
        if collector is None or collector in ordered:
            return
        for needed in collector.requires:
            visit(needed)
        if collector not in ordered:
            ordered.append(collector)

    for section in sorted(sections):
        visit(section)
    return ordered
