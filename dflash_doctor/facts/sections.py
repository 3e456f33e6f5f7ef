"""Fact collectors, and which fact sections each provides.

A collector gathers one or more sections of facts, either in the doctor's own process (files, NVML)
or by running a probe in the target interpreter. Checks name the sections they judge; the runner runs
only the collectors those sections need. A collector is an object that holds its function (imported here,
so a reader or a tool follows the runner to it); this module is imported only by a run, not by the command line.

Each section a built-in collector provides has one declared shape: a frozen dataclass (`dflash_doctor.shape.Shape`)
in the `*_shapes.py` module next to its collector, named in its collector's row (`Collector.of`), from which
`SECTION_SHAPES` and the sections of the target process (`TARGET_PROCESS_SECTIONS`, `TORCH_SECTIONS`) are derived.
Checks, reporters, the fingerprint and the fleet read facts through these shapes (`Facts.section(Shape)`,
`Shape.read(data)`), never by re-deriving a dict's shape. A new section: declare its shape there, with a default for
every key an older report may lack, and name it in its collector's row (tests/test_fact_shapes.py checks the real
output).

A collector returns its sections typed: each an instance of its shape (`Shape.collected` reads a probe's JSON into
it), or a `SectionFailure` where it could not collect one (`Collected`); the run holds them so, and a section's
JSON is written only with the report (`shape.section_json`).

Third-party collectors register under the entry-point group `dflash_doctor.collectors`: the entry
point's value is a `Collector` (its function a callable; "module:function", the older form, is still read). Its
function may return plain JSON (`PluginCollectFn`), read when the run takes it (`facts.collect.accept`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import metadata
from typing import Any, Literal

from dflash_doctor.facts.fabric import fabric
from dflash_doctor.facts.fabric.fabric_shapes import Fabric
from dflash_doctor.facts.fix import baseline
from dflash_doctor.facts.fix.baseline_shapes import BaselineFacts, FileHashes
from dflash_doctor.facts.gpu import archs, cuda, nvml
from dflash_doctor.facts.gpu.archs_shapes import ArchCoverage
from dflash_doctor.facts.gpu.cuda_shapes import CudaStack, Kernels
from dflash_doctor.facts.gpu.nvml_shapes import Gpu
from dflash_doctor.facts.live import live
from dflash_doctor.facts.live.live_shapes import Live
from dflash_doctor.facts.models import models
from dflash_doctor.facts.models.models_shapes import Models
from dflash_doctor.facts.probes import SHARED_IMPORTS
from dflash_doctor.facts.python import environment, imports, kernel_files, vllm_serve_path, vllm_source
from dflash_doctor.facts.python.environment_shapes import Distributions, Resolution, SysPath, Target
from dflash_doctor.facts.python.imports_shapes import Extensions, RotaryImport, SurfaceImports
from dflash_doctor.facts.python.kernel_files_shapes import KernelFiles
from dflash_doctor.facts.python.vllm_source_shapes import VllmServeImports, VllmSource, VllmSurface
from dflash_doctor.facts.serve import serve
from dflash_doctor.facts.serve.serve_shapes import ServeArgs, VllmDflash
from dflash_doctor.shape import Collected, Shape, frozen_dataclass

__all__ = ["BUILTIN_COLLECTORS", "COLLECTOR_GROUP", "SECTION_SHAPES", "SHARED_IMPORTS", "TARGET_PROCESS_SECTIONS",
           "TORCH_SECTIONS", "CollectFn", "Collected", "Collector", "PluginCollectFn", "Process",
           "collectors_for", "shape_of"]

COLLECTOR_GROUP = "dflash_doctor.collectors"

Process = Literal["doctor", "target", "torch"]
"""Where a collector's work runs: "doctor", in the doctor's own process (files, NVML) or a probe of its own;
"target", a probe forked from the run's one target process (`facts.probes.SharedTargetProcess`) that imported the
target's stack (SHARED_IMPORTS) first; "torch", such a probe that uses torch itself (the GPU layers)."""

CollectFn = Callable[..., Collected]
"""A built-in collector: function(context, earlier_sections) -> Collected; partial ones also take `wanted=`.
`earlier_sections` holds the sections it requires as the run holds them (read with `Shape.read`)."""
PluginCollectFn = Callable[..., Mapping[str, Any]]
"""A third-party collector's function, which may return plain JSON for its sections (`facts.collect.accept`)."""


@frozen_dataclass(frozen=True)
class Collector:
    name: str
    provides: tuple[str, ...]
    function: CollectFn | PluginCollectFn | str
    """Called as function(context, earlier_sections) -> {section: facts} (`CollectFn`; a third party's may return
    JSON, `PluginCollectFn`). A third-party collector may still name it as "module:function" (the older form),
    imported when it runs."""
    requires: tuple[str, ...] = ()
    """Sections that must be collected first (passed in as earlier_sections)."""
    partial: bool = False
    """Called with `wanted=` (the sections of `provides` the run needs), for a collector whose
    sections share one costly step but need not all be collected."""
    after: tuple[str, ...] = ()
    """Sections to wait for when the run collects them anyway (never collected for this one, nor passed in): an
    order between two collectors that compete for one resource, the one on the run's critical path first."""
    shapes: tuple[type[Shape], ...] = ()
    """The declared shape of each section in `provides`, in its order (`Collector.of` derives `provides` from
    them); a third-party collector may declare none."""
    process: Process = "doctor"
    """Where its probes run (see `Process`)."""

    @classmethod
    def of(cls, name: str, shapes: tuple[type[Shape], ...], function: CollectFn | str, **options: Any) -> Collector:
        """A collector whose sections are its shapes' (`Shape.SECTION`): the one place a built-in section is named."""
        return cls(name, tuple(shape.SECTION for shape in shapes), function, shapes=shapes, **options)

    def load(self) -> CollectFn | PluginCollectFn:
        if not isinstance(self.function, str):
            return self.function
        module_name, _, attr = self.function.partition(":")
        fn: PluginCollectFn = getattr(__import__(module_name, fromlist=[attr]), attr)
        return fn


BUILTIN_COLLECTORS: tuple[Collector, ...] = (
    Collector.of("environment", (Target, SysPath, Distributions, Resolution), environment.collect),
    Collector.of("vllm-source", (VllmSource,), vllm_source.collect, requires=("distributions", "resolution")),
    Collector.of("vllm-surface", (VllmSurface,), vllm_source.collect_surface, requires=("distributions", "resolution")),
    Collector.of(
        "vllm-serve-imports",
        (VllmServeImports,),
        vllm_serve_path.collect,
        requires=("distributions", "resolution", "target"),
        # Both scans parse in the doctor's own process, where one thread runs Python at a time: side by side, each
        # ends when both have. The kernel-import scan is on the critical path (its imports are tried in the target
        # once torch is in); this one is judged only at the end. It then reads the files the other has read.
        after=("vllm_surface",),
    ),
    Collector.of("rotary-import", (RotaryImport,), imports.collect_rotary, requires=("target",), process="target"),
    Collector.of("surface-imports", (SurfaceImports,), imports.collect_surface,
                 requires=("vllm_surface", "target", "distributions", "sys_path"), process="target"),
    Collector.of("extensions", (Extensions,), imports.collect_extensions,
                 requires=("target", "distributions", "resolution"), process="target"),
    Collector.of("kernel-files", (KernelFiles,), kernel_files.collect, requires=("target", "sys_path", "distributions")),
    Collector.of("nvml", (Gpu,), nvml.collect),
    Collector.of("arch-coverage", (ArchCoverage,), archs.collect, requires=("distributions", "target")),
    Collector.of("cuda", (CudaStack, Kernels), cuda.collect, partial=True, process="torch"),
    Collector.of("serve-args", (ServeArgs,), serve.collect_args, requires=("target", "gpu"), process="target"),
    Collector.of("models", (Models,), models.collect, requires=("serve_args",)),
    Collector.of("vllm-dflash", (VllmDflash,), serve.collect_vllm, requires=("distributions", "resolution", "models")),
    Collector.of("fabric", (Fabric,), fabric.collect, requires=("gpu", "serve_args"), process="torch"),
    Collector.of("live", (Live,), live.collect),
    Collector.of("baseline", (BaselineFacts, FileHashes), baseline.collect, requires=("target", "distributions")),
)

SECTION_SHAPES: Mapping[str, type[Shape]] = {
    shape.SECTION: shape for collector in BUILTIN_COLLECTORS for shape in collector.shapes}
"""The declared shape of each section the built-in collectors provide (a `Shape` in the `*_shapes.py` module
next to the collector), from the collectors' rows. Checks read a section through it: facts.section(Target)."""
TARGET_PROCESS_SECTIONS = frozenset(s for c in BUILTIN_COLLECTORS if c.process != "doctor" for s in c.provides)
"""Sections whose probes import the target's stack: forked children of the run's one target process."""
TORCH_SECTIONS = frozenset(s for c in BUILTIN_COLLECTORS if c.process == "torch" for s in c.provides)
"""The sections whose probes use torch itself (the GPU layers). The others reach torch only through a stack
package that loads it (knowledge.stack.TORCH_USERS): without one installed, the shared process imports nothing."""


def shape_of(section: str) -> type[Shape] | None:
    """The declared shape of a built-in section (None for a third-party collector's)."""
    return SECTION_SHAPES.get(section)


def all_collectors() -> list[Collector]:
    found = list(BUILTIN_COLLECTORS)
    for ep in metadata.entry_points(group=COLLECTOR_GROUP):
        try:
            collector = ep.load()
        except Exception:  # noqa: BLE001, S112 - a third-party collector that does not load is left out of the run
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
