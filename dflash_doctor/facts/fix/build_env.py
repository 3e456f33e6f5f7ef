"""What a source build of a CUDA extension (flash-attn 2) would find on this machine, before it starts.

Facts only, gathered the way torch's `cpp_extension` looks for them (knowledge.builds.TORCH_CUDA_HOME_SEARCH),
without importing torch: `CUDA_HOME`/`CUDA_PATH`, the `nvcc` on PATH or under CUDA_HOME and the CUDA release it
reports, `ninja` (the target's bin directory first, where `pip install ninja` puts it), a C++ compiler (`CXX`,
`c++`, `g++`, `clang++`), the memory available (/proc/meminfo MemAvailable) and the cores this process may use,
torch's CUDA (`cuda = '12.8'` in the installed torch/version.py, read as text), and the GPUs' archs (NVML facts,
or --target-arch). Each tool is asked for its version with a timeout.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from dflash_doctor.facts.fix.build_env_shapes import BuildEnv
from dflash_doctor.facts.gpu.nvml_shapes import Gpu
from dflash_doctor.facts.python.environment_shapes import Distributions
from dflash_doctor.facts.safefile import read_regular
from dflash_doctor.knowledge.archs import parse_target_archs

__all__ = ["collect", "read_torch_cuda", "torch_cuda"]

VERSION_TIMEOUT_S = 10.0
MAX_VERSION_PY_BYTES: Final = 64 * 1024
_TORCH_CUDA_RE: Final = re.compile(r"^cuda\s*(?::[^=\n]*)?=\s*(?:'([^']*)'|\"([^\"]*)\"|None)", re.MULTILINE)
"""The line torch's build writes into torch/version.py: `cuda: Optional[str] = '12.8'` (`= None` for a CPU build)."""


def _version(argv: Sequence[str], timeout_s: float) -> str | None:
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s, check=False,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (proc.stdout or proc.stderr).strip()
    return text[:400] if proc.returncode == 0 else None


def read_torch_cuda(version_py: str | os.PathLike[str], limit: int = MAX_VERSION_PY_BYTES,
                    roots: Iterable[str] | None = None) -> tuple[bool, str | None]:
    """`torch.version.cuda` as torch/version.py says it, read as text (never imported; a regular file, at most
    `limit` bytes, inside `roots` when given): (whether the file has the line, the string it sets, None for
    `None`). Raises OSError as safefile.read_regular does."""
    text = read_regular(version_py, limit, roots).decode("utf-8", "replace")
    match = _TORCH_CUDA_RE.search(text)
    return (True, match.group(1) or match.group(2)) if match else (False, None)


def torch_cuda(distributions: Distributions) -> dict[str, Any]:
    """torch's version and `torch.version.cuda`, read from torch/version.py (no import; bounded read)."""
    for dist in distributions.items:
        if (dist.canonical or dist.name) != "torch":
            continue
        path = os.path.join(dist.location, "torch", "version.py")
        try:
            if not os.path.isfile(path):
                return {"installed": True, "version": dist.version, "cuda": None, "error": f"{path}: missing"}
            _, cuda = read_torch_cuda(path)
        except OSError as exc:
            return {"installed": True, "version": dist.version, "cuda": None, "error": f"{path}: {exc.strerror}"}
        return {"installed": True, "version": dist.version, "cuda": cuda, "file": path}
    return {"installed": False, "version": None, "cuda": None}


def _meminfo() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii", errors="replace") as fh:
            for line in fh.read(64 * 1024).splitlines():
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _archs(sections: Mapping[str, object], target_archs: Sequence[str]) -> list[str]:
    """The archs to build for, as FLASH_ATTN_CUDA_ARCHS writes them ("90"): --target-arch, else the GPUs here."""

    found: list[str] = []
    for spec in target_archs:
        try:
            found += [f"{major}{minor}" for major, minor in parse_target_archs(spec)]
        except ValueError:
            continue
    if not found:
        gpu = Gpu.read(sections.get(Gpu.SECTION))
        for device in gpu.devices if gpu is not None else ():
            cc = device.compute_capability
            if cc is not None and len(cc) == 2:
                found.append(f"{cc[0]}{cc[1]}")
    return list(dict.fromkeys(found))


def collect(sections: Mapping[str, object], *, python: str, target_archs: Sequence[str] = (),
            environ: Mapping[str, str] | None = None, timeout_s: float = VERSION_TIMEOUT_S) -> BuildEnv:
    """What a source build would find here (`sections`: the run's, for torch and the GPUs)."""
    environ = os.environ if environ is None else environ
    path = environ.get("PATH", "")
    cuda_home_env = environ.get("CUDA_HOME") or environ.get("CUDA_PATH") or None
    nvcc = shutil.which("nvcc", path=path)
    if nvcc is None and cuda_home_env and os.path.isfile(os.path.join(cuda_home_env, "bin", "nvcc")):
        nvcc = os.path.join(cuda_home_env, "bin", "nvcc")
    cuda_home = cuda_home_env or (os.path.dirname(os.path.dirname(nvcc)) if nvcc else None) or \
        ("/usr/local/cuda" if os.path.exists("/usr/local/cuda") else None)
    nvcc_said = _version([nvcc, "--version"], timeout_s) if nvcc else None
    release = re.search(r"release (\d+)\.(\d+)", nvcc_said or "")
    bin_dir = os.path.dirname(python)
    ninja = shutil.which("ninja", path=os.pathsep.join([bin_dir, path]))
    compilers = [c for c in (environ.get("CXX"), "c++", "g++", "clang++") if c]
    cxx = next((found for c in compilers if (found := shutil.which(c, path=path))), None)
    cxx_said = _version([cxx, "--version"], timeout_s) if cxx else None
    distributions = Distributions.read(sections.get(Distributions.SECTION)) or Distributions()
    return BuildEnv.collected({
        "cuda_home": cuda_home, "cuda_home_from": "CUDA_HOME/CUDA_PATH" if cuda_home_env else
        ("nvcc on PATH" if nvcc and cuda_home else ("/usr/local/cuda" if cuda_home else None)),
        "nvcc": nvcc, "nvcc_release": f"{release.group(1)}.{release.group(2)}" if release else None,
        "ninja": ninja, "ninja_version": _version([ninja, "--version"], timeout_s) if ninja else None,
        "cxx": cxx, "cxx_version": (cxx_said or "").splitlines()[0] if cxx_said else None,
        "mem_available_bytes": _meminfo(), "cores": _cores(),
        "torch": torch_cuda(distributions),
        "archs": _archs(sections, target_archs), "archs_from": "--target-arch" if target_archs else "GPUs (NVML)",
        "max_jobs_env": environ.get("MAX_JOBS"),
    })
