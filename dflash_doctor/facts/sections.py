"""Fact collectors, and which fact sections each provides.

A collector gathers one or more sections of facts, either in the doctor's own process (files, NVML)
or by running a probe in the target interpreter. Checks name the sections they judge; the runner runs
only the collectors those sections need. Collectors are named by dotted path and imported only when
needed, which keeps the doctor's start-up cheap.

Third-party collectors register under the entry-point group `dflash_doctor.collectors`: the entry
point's value is a `Collector`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any

__all__ = ["Collector", "BUILTIN_COLLECTORS", "collectors_for", "COLLECTOR_GROUP", "HOST_SECTIONS", "SHARED_IMPORTS"]

COLLECTOR_GROUP = "dflash_doctor.collectors"

# Sections whose probes import the target's stack. They run as forked children of one target process
# per run (`facts.probes.TargetHost`) that imported SHARED_IMPORTS first: a cold `import torch` costs seconds,
# and each probe importing it again made the cost scale with the stack (one import per extension).
HOST_SECTIONS = frozenset({"rotary_import", "surface_imports", "extensions", "cuda_stack", "kernels"})
SHARED_IMPORTS = ("torch",)

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
        module_name, _, attr = self.function.partition(":")
        module = __import__(module_name, fromlist=[attr])
        fn: CollectFn = getattr(module, attr)
        return fn


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
        "rotary-import",
        ("rotary_import",),
        "dflash_doctor.facts.imports:collect_rotary",
    ),
    Collector(
        "surface-imports",
        ("surface_imports",),
        "dflash_doctor.facts.imports:collect_surface",
        requires=("vllm_surface",),
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
    Collector("serve-args", ("serve_args",), "dflash_doctor.facts.serve:collect_args"),
    Collector("models", ("models",), "dflash_doctor.facts.models:collect", requires=("serve_args",)),
    Collector("vllm-dflash", ("vllm_dflash",), "dflash_doctor.facts.serve:collect_vllm",
              requires=("distributions", "resolution", "models")),
    Collector("live", ("live",), "dflash_doctor.facts.live:collect"),
)


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
