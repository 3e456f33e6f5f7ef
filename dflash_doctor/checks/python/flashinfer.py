"""Rules of the kernel-packages check for FlashInfer: its three distributions' versions judged as
flashinfer/jit/env.py compares them at import (knowledge.flashinfer.FLASHINFER_VERSION_CHECK), the variable that
skips that comparison, and the JIT cache's libraries against torch's CUDA and the driver's."""

from __future__ import annotations

import os
from collections.abc import Iterator

from packaging.version import InvalidVersion, Version

from dflash_doctor.checks.python.codes import (
    KERNEL_PACKAGES_FLASHINFER_ALIGNED,
    KERNEL_PACKAGES_FLASHINFER_CHECK_BYPASSED,
    KERNEL_PACKAGES_FLASHINFER_SKEW,
    KERNEL_PACKAGES_JIT_CACHE_CUDA,
)
from dflash_doctor.checks.remedy import Installer, join
from dflash_doctor.facts.gpu.nvml_shapes import Gpu
from dflash_doctor.facts.python.environment_shapes import Distribution, Distributions, TargetEnviron
from dflash_doctor.facts.python.kernel_files_shapes import CachedLibrary, FlashinferJitCache
from dflash_doctor.knowledge.flashinfer import (
    FLASHINFER_JIT_CACHE,
    FLASHINFER_KERNEL_WHEELS,
    FLASHINFER_VERSION_CHECK,
)
from dflash_doctor.model import Finding, Remediation, Status
from dflash_doctor.shape import frozen_dataclass

__all__ = ["Skew", "flashinfer_findings", "jit_cache_findings", "skews"]


_READ = f"Read in flashinfer/jit/env.py of {FLASHINFER_VERSION_CHECK.read_from}"


def _version(text: str | None) -> Version | None:
    try:
        return Version(text) if text else None
    except InvalidVersion:
        return None


@frozen_dataclass(frozen=True)
class Skew:
    """A kernel distribution whose version `import flashinfer` refuses (or, from 0.7.2, ignores)."""

    dist: Distribution
    flashinfer: str

    @property
    def is_cubin(self) -> bool:
        return self.dist.canonical == FLASHINFER_VERSION_CHECK.value.cubin


def _accepts(kind: str, version: str, flashinfer: str) -> bool:
    """flashinfer/jit/env.py's comparison, on the version strings as the distributions' METADATA states them."""
    rule = FLASHINFER_VERSION_CHECK.value
    if kind == rule.cubin:
        return version == flashinfer
    release = _version(flashinfer)
    if release is not None and release >= Version(rule.jit_prefix_plus_from):
        return version == flashinfer or version.startswith(flashinfer + "+")
    return version.startswith(flashinfer)


def _set(environ: TargetEnviron, name: str) -> bool:
    """Set as `os.getenv(name)` is truthy: any non-empty value (a value the report scrubbed counts as set)."""
    return bool(environ.values.get(name)) or (name in environ.names and name not in environ.values)


def skews(dists: Distributions, environ: TargetEnviron) -> list[Skew]:
    """The kernel distributions flashinfer's import would compare and refuse, in cubin, jit-cache order."""
    rule = FLASHINFER_VERSION_CHECK.value
    python = dists.get("flashinfer-python")
    if python is None or not python.version or python.version == rule.unknown_version or python.editable:
        return []
    release = _version(python.version)
    cubin_dir_first = release is not None and release >= Version(rule.cubin_dir_first_from)
    found = []
    for kind in (rule.cubin, rule.jit_cache):
        dist = dists.get(kind)
        if dist is None or not dist.version:
            continue
        if kind == rule.cubin and cubin_dir_first and _set(environ, rule.cubin_dir):
            continue  # FLASHINFER_CUBIN_DIR is read instead of the package: no comparison
        if not _accepts(kind, dist.version, python.version):
            found.append(Skew(dist, python.version))
    return found


def flashinfer_findings(dists: Distributions, environ: TargetEnviron, installer: Installer,
                        torch_cuda: str | None) -> Iterator[Finding]:
    python = dists.get("flashinfer-python")
    if python is None or not python.version:
        return
    rule = FLASHINFER_VERSION_CHECK.value
    found = skews(dists, environ)
    kernels = [d for name in (rule.cubin, rule.jit_cache) if (d := dists.get(name)) is not None]
    if not found:
        present = ", ".join(d.label() for d in kernels) or "no flashinfer-cubin or flashinfer-jit-cache"
        yield KERNEL_PACKAGES_FLASHINFER_ALIGNED.finding(
            Status.PASS, title=f"flashinfer-python {python.version} with {present}",
            detail="" if kernels else "FlashInfer downloads cubins and JIT-compiles kernels at first use.",
            evidence={"flashinfer-python": python.version, **{d.name: d.version for d in kernels}},
        )
        return
    release = _version(python.version)
    raises = release is None or release <= Version(rule.raises_through)
    bypassed = _set(environ, rule.bypass)
    names = "; ".join(f"{s.dist.name} {s.dist.version} beside flashinfer-python {s.flashinfer}" for s in found)
    evidence = {"flashinfer-python": python.version, "location": python.location,
                "skewed": [{"name": s.dist.name, "version": s.dist.version, "location": s.dist.location}
                           for s in found],
                rule.bypass: environ.values.get(rule.bypass) if bypassed else None}
    remediation = _realign(found, installer, torch_cuda, dists)
    if bypassed:
        yield KERNEL_PACKAGES_FLASHINFER_CHECK_BYPASSED.finding(
            Status.FAIL,
            title=f"{rule.bypass} is set and {names}: flashinfer loads the stale kernels",
            detail=f"With {rule.bypass} set flashinfer skips its version comparison and loads the other "
            f"version's kernels, which fault at run time: {'; '.join(rule.symptoms)}. Align the versions "
            f"(below), then unset {rule.bypass} where the serve is launched. {_READ}.",
            evidence=evidence,
            remediation=(*remediation, Remediation(f"unset {rule.bypass}",
                                                   "and stop setting it where `vllm serve` is launched")),
        )
        return
    what = (f"`import flashinfer` raises RuntimeError: \"{found[0].dist.name} version ({found[0].dist.version}) "
            f"does not match flashinfer version ({found[0].flashinfer})\"" if raises else
            "flashinfer ignores it with a warning: cubins are downloaded on demand and kernels JIT-compiled at "
            "startup (minutes, and the network or nvcc)")
    yield KERNEL_PACKAGES_FLASHINFER_SKEW.finding(
        Status.FAIL if raises else Status.WARN,
        title=f"{names}: {what.split(':')[0]}",
        detail=f"{what}. flashinfer-python {python.version} {'raises' if raises else 'ignores'} (0.5-"
        f"{rule.raises_through} raise, {rule.ignores_from} and later ignore). vLLM's wheels pin flashinfer-python "
        f"alone, so an upgrade leaves the old kernel wheels behind. {_READ}.",
        evidence=evidence,
        remediation=remediation,
    )


def _realign(found: list[Skew], installer: Installer, torch_cuda: str | None,
             dists: Distributions) -> tuple[Remediation, ...]:
    """Install the matching kernel wheels from the index that has them; `vllm download-kernels` where the installed
    vLLM has it; or uninstall the stale ones (flashinfer then downloads cubins / JIT-compiles at first use)."""
    wheels = FLASHINFER_KERNEL_WHEELS.value
    steps = []
    for skew in found:
        public = (_version(skew.flashinfer) or Version("0")).public
        if skew.is_cubin:
            on_pypi = (_version(public) or Version("0")) <= Version(wheels.pypi_cubin_last)
            index = () if on_pypi else ("--index-url", wheels.index)
            steps.append(Remediation(installer.install(*index, f"{skew.dist.name}=={public}", no_deps=True),
                                     f"install flashinfer-cubin {public}, flashinfer-python's own version"
                                     + ("" if on_pypi else f" (FlashInfer's index {wheels.index}: PyPI's "
                                        f"flashinfer-cubin stops at {wheels.pypi_cubin_last})")))
            continue
        label = _jit_cache_label(skew.dist.version or "", torch_cuda)
        if label:
            url = wheels.jit_cache_index.format(label=label)
            steps.append(Remediation(
                installer.install("--index-url", url, f"{skew.dist.name}=={public}+{label}", no_deps=True),
                f"install flashinfer-jit-cache {public}+{label} from FlashInfer's index {url} (not on PyPI)"))
    vllm = _version(dists.version("vllm"))
    if vllm is not None and vllm >= Version(wheels.download_kernels_from):
        steps.append(Remediation(join([installer.python, "-m", "vllm.entrypoints.cli.main", "download-kernels"]),
                                 f"or let vLLM {dists.version('vllm')} install the kernel wheels that match "
                                 "(`vllm download-kernels`, from FlashInfer's index)"))
    stale = [s.dist.name for s in found]
    steps.append(Remediation(installer.uninstall(*stale),
                             f"or remove {' and '.join(stale)}: flashinfer then downloads cubins into its cache and "
                             "JIT-compiles kernels at first use"))
    return tuple(steps)


def _jit_cache_label(installed: str, torch_cuda: str | None) -> str | None:
    """The CUDA label of the jit-cache wheel to install: the installed one's (`+cu129`), else the newest published
    one of torch's CUDA major not newer than torch's CUDA (flashinfer's `_resolve_jit_cache_cuda_version`)."""
    _, plus, local = installed.partition("+")
    if plus and local.startswith("cu") and local[2:].isdigit():
        return local
    torch = _version(torch_cuda)
    if torch is None:
        return None
    usable = [v for s in FLASHINFER_KERNEL_WHEELS.value.jit_cache_cuda
              if (v := Version(s)).major == torch.major and v <= torch]
    return f"cu{max(usable).major}{max(usable).minor}" if usable else None


def jit_cache_findings(cache: FlashinferJitCache | None, gpu: Gpu | None) -> Iterator[Finding]:
    """Each CUDA runtime major the cached libraries need, against torch's CUDA and the driver's."""
    if cache is None or not cache.libraries:
        return
    torch = _version(cache.torch_cuda)
    driver = _version(gpu.cuda_driver_version if gpu is not None else None)
    by_major: dict[int, list[CachedLibrary]] = {}
    for library in cache.libraries:
        for name in library.cudart:
            tail = name.rsplit(".", 1)[-1]
            if tail.isdigit():
                by_major.setdefault(int(tail), []).append(library)
    where = f"{cache.version_dir} (the {cache.base_from} cache flashinfer {cache.flashinfer_version} reads)"
    foreign = {major: libs for major, libs in by_major.items()
               if (torch is not None and major != torch.major) or (driver is not None and major > driver.major)}
    evidence = {"directory": cache.directory, "version_dir": cache.version_dir, "base_from": cache.base_from,
                "torch_cuda": cache.torch_cuda, "driver_cuda": gpu.cuda_driver_version if gpu else None,
                "read": len(cache.libraries), "found": cache.found, "skipped": cache.skipped,
                "by_runtime": {f"libcudart.so.{m}": [lib.path for lib in libs[:10]] for m, libs in by_major.items()}}
    if not foreign:
        if by_major:
            yield KERNEL_PACKAGES_JIT_CACHE_CUDA.finding(
                Status.PASS,
                title=f"FlashInfer's JIT cache {where}: {len(cache.libraries)} libraries, CUDA runtime "
                + ", ".join(f"{m}" for m in sorted(by_major))
                + (f", torch's CUDA major ({cache.torch_cuda})" if torch is not None else
                   ", judged against the driver's CUDA alone (torch's CUDA not known)" if driver is not None else
                   ": not judged (neither torch's CUDA nor the driver's is known)"),
                evidence=evidence)
        return
    for major, libs in sorted(foreign.items()):
        too_new = driver is not None and major > driver.major
        cause = (f"the driver supports CUDA {driver} only: `cudaErrorInsufficientDriver` when they run" if too_new
                 else f"torch is CUDA {cache.torch_cuda}: two CUDA runtimes in one process, and libcudart.so.{major} "
                 "must be found beside torch's")
        lib_dir = os.path.dirname(os.path.dirname(libs[0].path))
        yield KERNEL_PACKAGES_JIT_CACHE_CUDA.finding(
            Status.FAIL if too_new else Status.WARN,
            title=f"{len(libs)} libraries in FlashInfer's JIT cache need libcudart.so.{major}: {cause}",
            detail=f"Read from {where}: {os.path.basename(libs[0].path)} and the others were built by a CUDA "
            f"{major} toolkit (ELF DT_NEEDED); flashinfer loads them from there on every start "
            f"({FLASHINFER_JIT_CACHE.value.symptom}; layout read in {FLASHINFER_JIT_CACHE.read_from}).",
            evidence={**evidence, "libraries": [lib.path for lib in libs[:20]], "cached_ops": lib_dir},
            remediation=(Remediation(join(["rm", "-rf", cache.version_dir]),
                                     f"remove flashinfer {cache.flashinfer_version}'s JIT cache (the user's cache, "
                                     "outside the environment) so it is rebuilt; set CUDA_HOME to a toolkit of "
                                     f"torch's CUDA {cache.torch_cuda or ''} first".rstrip()),),
        )
