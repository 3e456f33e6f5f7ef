"""Judging a source build before it starts: are its prerequisites there, how many jobs fit in memory, which
archs to build, how long it will take. Pure: a function of `facts.fix.build_env`'s facts.

Findings (`build-prerequisites.*`): each missing or mismatched prerequisite, with its own fix; or one pass
finding saying the build is ready, with MAX_JOBS, FLASH_ATTN_CUDA_ARCHS and the time estimate (and where each
figure comes from, knowledge.builds).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Any

from dflash_doctor.checks.fix.codes import (
    BUILD_COMPILER_MISSING,
    BUILD_CUDA_HOME_MISSING,
    BUILD_MEMORY_LOW,
    BUILD_MODULE_MISSING,
    BUILD_NINJA_MISSING,
    BUILD_NVCC_MISMATCH,
    BUILD_NVCC_MISSING,
    BUILD_READY,
    BUILD_TORCH_CPU,
    BUILD_TORCH_MISSING,
)
from dflash_doctor.checks.remedy import Installer, export, quote
from dflash_doctor.facts.fix.build_env_shapes import BuildEnv
from dflash_doctor.knowledge.builds import (
    BUILD_MINUTES_64_CORES,
    JOB_PEAK_RAM_GB,
    NINJA_REQUIRED,
    NVCC_MAJOR_MUST_MATCH,
    NVCC_THREADS_DEFAULT,
)
from dflash_doctor.knowledge.flash_attn import FA2_CUDA_ARCHS_DEFAULT
from dflash_doctor.model import Finding, Remediation, Status
from dflash_doctor.shape import frozen_dataclass
from dflash_doctor.units import GIB, gib

__all__ = ["BuildPlan", "judge_build"]

CHECK_ID = "build-prerequisites"

CUDA_ARCHIVE = "https://developer.nvidia.com/cuda-toolkit-archive"


@frozen_dataclass(frozen=True)
class BuildPlan:
    env: dict[str, str]  # what goes in front of the build command
    summary: str  # one line for `verified: needs-build: {...}`
    findings: tuple[Finding, ...] = field(default_factory=tuple)

    @property
    def missing(self) -> tuple[str, ...]:
        """What the build lacks: the findings that do not pass, by their id without the check's."""
        return _missing(self.findings)

    @property
    def ready(self) -> bool:
        return not self.missing


def _missing(findings: Sequence[Finding]) -> tuple[str, ...]:
    return tuple(f.id.split(".", 1)[1] for f in findings if f.status is not Status.PASS)


def _max_jobs(build: BuildEnv) -> tuple[int, str]:
    cores = build.cores or 1
    free = build.mem_available_bytes
    if build.max_jobs_env:
        return int(build.max_jobs_env) if build.max_jobs_env.isdigit() else 1, "MAX_JOBS already set"
    by_cores = max(1, cores // 2)
    if free is None:
        return by_cores, f"{cores} cores // 2 (free memory unknown)"
    by_memory = int(free / GIB / JOB_PEAK_RAM_GB.value)
    jobs = max(1, min(by_cores, by_memory))
    return jobs, (f"min({cores} cores // 2, {gib(free, 0)} free / {JOB_PEAK_RAM_GB.value} GiB a job: "
                  "flash-attn 2.8.3 setup.py)")


def _minutes(archs: int, cores: int, jobs: int) -> tuple[int, int]:
    low, high = BUILD_MINUTES_64_CORES.value
    used = max(1, min(cores, jobs * NVCC_THREADS_DEFAULT.value))
    default_archs = len(FA2_CUDA_ARCHS_DEFAULT.value["2.8.3"])
    scale = (archs / default_archs) * (64 / used)
    return max(1, round(low * scale)), max(1, round(high * scale))


def judge_build(build: BuildEnv | Mapping[str, Any], *, python: str, uv: bool, what: str,
                missing_modules: Sequence[str] = ()) -> BuildPlan:
    """The plan for building `what` (e.g. "flash-attn 2.8.3") with what `build` says is on this machine
    (facts.fix.build_env, read through its shape: a mapping that does not have it raises ShapeError);
    `missing_modules`: what the build's own setup.py failed to import (the installer's dry run said so)."""
    if not isinstance(build, BuildEnv):
        build = BuildEnv.from_json(build)
    installer = Installer(python=python, uv=uv)
    findings: list[Finding] = []
    for module in dict.fromkeys(m for m in missing_modules if m != "torch"):
        findings.append(BUILD_MODULE_MISSING.finding(
            Status.FAIL,
            f"building {what} imports {module}, which the environment does not have",
            f"A build with --no-build-isolation sees only the environment's own packages, and the installer's dry "
            f"run stopped in setup.py: No module named '{module}'.", evidence={"module": module},
            remediation=(Remediation(installer.install(module), f"what {what}'s setup.py imports before it builds"),)))
    torch = build.torch
    torch_cuda = torch.cuda
    nvcc, release = build.nvcc, build.nvcc_release
    evidence = {"nvcc": nvcc, "nvcc_release": release, "cuda_home": build.cuda_home, "ninja": build.ninja,
                "cxx": build.cxx, "cores": build.cores, "mem_available_bytes": build.mem_available_bytes,
                "torch_cuda": torch_cuda}
    if not torch.installed or "torch" in missing_modules:
        findings.append(BUILD_TORCH_MISSING.finding(Status.FAIL,
                                f"building {what} needs torch in the environment, and torch is not installed",
                                "flash-attn's setup.py imports torch (it is built with --no-build-isolation, against "
                                "the torch already installed).", evidence=evidence))
    elif not torch_cuda:
        findings.append(BUILD_TORCH_CPU.finding(Status.FAIL,
                                f"building {what} needs a CUDA build of torch; torch {torch.version} is a CPU "
                                "build (torch.version.cuda is None)",
                                "torch's cpp_extension compiles CUDA extensions only against a torch built with CUDA.",
                                evidence=evidence))
    if not nvcc:
        findings.append(BUILD_NVCC_MISSING.finding(
            Status.FAIL,
            f"building {what} needs nvcc, and there is none on PATH or under CUDA_HOME",
            f"Install the CUDA toolkit {torch_cuda or 'matching torch.version.cuda'} ({CUDA_ARCHIVE}) and put its "
            f"bin/ on PATH. {NVCC_MAJOR_MUST_MATCH.value}.", evidence=evidence,
            remediation=(Remediation("export CUDA_HOME=/usr/local/cuda && export PATH=\"$CUDA_HOME/bin:$PATH\"",
                         f"after installing the CUDA toolkit {torch_cuda or ''} from {CUDA_ARCHIVE}: where torch's "
                         "cpp_extension looks for it"),)))
    elif torch_cuda and release and release.split(".")[0] != torch_cuda.split(".")[0]:
        findings.append(BUILD_NVCC_MISMATCH.finding(
            Status.FAIL,
            f"nvcc is CUDA {release} and torch is built with CUDA {torch_cuda}: the build stops at once "
            "(the CUDA majors differ)", f"{NVCC_MAJOR_MUST_MATCH.value}.", evidence=evidence,
            remediation=(Remediation(f"{export('CUDA_HOME', f'/usr/local/cuda-{torch_cuda}')} && export PATH=\"$CUDA_HOME/bin:$PATH\"",
                         f"a CUDA {torch_cuda} toolkit (install it from {CUDA_ARCHIVE} when that directory does "
                         "not exist)"),)))
    if not build.cuda_home:
        findings.append(BUILD_CUDA_HOME_MISSING.finding(
            Status.FAIL,
            "CUDA_HOME is not set and torch's cpp_extension finds no CUDA install (no nvcc on PATH, no "
            f"/usr/local/cuda): building {what} fails while preparing its metadata",
            "flash-attn's setup.py raises 'OSError: CUDA_HOME environment variable is not set'.", evidence=evidence,
            cause=BUILD_NVCC_MISSING if not nvcc else ""))
    if not build.ninja:
        findings.append(BUILD_NINJA_MISSING.finding(Status.FAIL,
                                f"building {what} without ninja compiles one file at a time: about 2 hours",
                                NINJA_REQUIRED.value, evidence=evidence, remediation=(Remediation(installer.install("ninja"),
                                                                              "the parallel build flash-attn's README asks for"),)))
    if not build.cxx:
        findings.append(BUILD_COMPILER_MISSING.finding(Status.FAIL,
                                f"building {what} needs a C++ compiler, and there is none (CXX, c++, g++, clang++)",
                                "nvcc hands host code to the system C++ compiler.", evidence=evidence,
                                remediation=(Remediation("apt-get install -y g++", "Debian and Ubuntu; another distribution's "
                                             "package manager elsewhere"),)))
    jobs, jobs_why = _max_jobs(build)
    free = build.mem_available_bytes
    if free is not None and free < JOB_PEAK_RAM_GB.value * GIB:
        findings.append(BUILD_MEMORY_LOW.finding(
            Status.WARN,
            f"{gib(free)} of memory is available, less than one compile job's peak "
            f"({JOB_PEAK_RAM_GB.value} GiB): building {what} may be killed for memory even with MAX_JOBS=1",
            JOB_PEAK_RAM_GB.source, evidence=evidence))
    archs = build.archs
    env = {"MAX_JOBS": str(jobs)}
    if archs:
        env["FLASH_ATTN_CUDA_ARCHS"] = ";".join(archs)
    count = len(archs) or len(FA2_CUDA_ARCHS_DEFAULT.value["2.8.3"])
    low, high = _minutes(count, build.cores or 1, jobs)
    arch_text = (f"FLASH_ATTN_CUDA_ARCHS={';'.join(archs)} (from {build.archs_from})" if archs
                 else f"all {count} default archs (no GPU seen and no --target-arch)")
    estimate = (f"about {low}-{high} min ({count} arch(s), {jobs} job(s) on {build.cores} cores; flash-attn "
                "README: 3-5 min on 64 cores with ninja)")
    summary = (f"{what} from source; MAX_JOBS={jobs} ({jobs_why}); {arch_text}; {estimate}")
    missing = _missing(findings)
    if missing:
        summary += "; missing: " + ", ".join(missing)
    else:
        findings.append(BUILD_READY.finding(Status.PASS,
                                f"building {what}: nvcc {release} (torch CUDA {torch_cuda}), CUDA_HOME "
                                f"{build.cuda_home}, ninja, {build.cxx}; {summary}", "", evidence=evidence))
    return BuildPlan(env, summary, tuple(findings))


def prefix(env: Mapping[str, str], command: str) -> str:
    """`command` with the build's environment in front (what is set there already stays)."""
    words = [f"{k}={quote(v)}" for k, v in env.items() if f"{k}=" not in command]
    return " ".join([*words, command]) if words else command
