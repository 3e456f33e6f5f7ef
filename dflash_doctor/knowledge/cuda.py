"""CUDA compatibility rules: which GPU code runs on which compute capability, and which driver a CUDA
runtime needs.

`dflash_doctor.knowledge.archs` implements the code-compatibility rules below; the GPU layer uses the driver tables.
Where a rule was also confirmed against the toolchain itself, the note says so: nvcc/ptxas 13.0.88
refuse exactly the PTX-to-SASS pairs the rules forbid (`nvcc -gencode arch=compute_90a,code=sm_100a`:
"ptxas fatal: Program with .target 'sm_90a' cannot be compiled to future architecture";
`arch=compute_100f,code=sm_120`: "Incompatible code generation requested"), and accept the ones they allow
(`compute_100f` -> `sm_103`, `compute_100` -> `sm_120`).
"""

from __future__ import annotations

from typing import Final

from dflash_doctor.knowledge import Fact

__all__ = [
    "CUDA_VERSION_ENCODING",
    "DRIVER_LIBRARIES",
    "FAMILY_MEMBERS",
    "MINOR_VERSION_COMPAT_DRIVER",
    "PTX_ARCH_SPECIFIC",
    "PTX_FAMILY_SPECIFIC",
    "PTX_FORWARD_COMPATIBLE",
    "SASS_ARCH_SPECIFIC",
    "SASS_FAMILY_SPECIFIC",
    "SASS_WITHIN_MAJOR",
    "TEGRA_COMPUTE_CAPABILITIES",
    "TOOLKIT_DRIVER_VERSIONS",
    "decode_cuda_version",
    "driver_version_tuple",
    "is_driver_library",
    "min_driver_for_cuda",
]

_PROG_GUIDE = "NVIDIA CUDA C++ Programming Guide"
_PROG_GUIDE_READ = "CUDA C++ Programming Guide 12.9 (legacy guide, still published with CUDA 13.x)"
_FAMILY_BLOG = (
    "NVIDIA technical blog 'NVIDIA Blackwell and NVIDIA CUDA 12.9 Introduce Family-Specific Architecture "
    "Features' (2025)"
)

# ---------------------------------------------------------------------------------------------------------
# SASS (cubin) compatibility
# ---------------------------------------------------------------------------------------------------------

SASS_WITHIN_MAJOR: Fact[str] = Fact(
    value="sm_XY SASS runs on compute capability X.Z for Z >= Y, never on another major version",
    source=f"{_PROG_GUIDE}, 'Binary Compatibility' (Programming Interface > Compilation with NVCC): "
    "'A cubin object generated for compute capability X.y will only execute on devices of compute "
    "capability X.z where z>=y.'",
    read_from=_PROG_GUIDE_READ,
    note="The same section: 'Binary compatibility is supported only for the desktop. It is not supported "
    "for Tegra. Also, the binary compatibility between desktop and Tegra is not supported.' "
    "See TEGRA_COMPUTE_CAPABILITIES.",
)

SASS_ARCH_SPECIFIC: Fact[str] = Fact(
    value="sm_XYa SASS runs only on compute capability exactly X.Y",
    source=f"{_PROG_GUIDE}, Compute Capabilities > 'Feature Availability' > 'Architecture-Specific "
    "Features': architecture-specific targets (the 'a' suffix, introduced with compute capability 9.0) "
    "use features 'not guaranteed to be available' on later architectures; code built for them runs only "
    "on that exact compute capability. PTX ISA, '.target' directive: 'Target architectures with suffix "
    '"a", such as sm_90a, include architecture-accelerated features that are supported on the specified '
    "architecture only, hence such targets do not follow the onion layer model.'",
    read_from=f"{_PROG_GUIDE_READ}; PTX ISA 8.x",
)

SASS_FAMILY_SPECIFIC: Fact[str] = Fact(
    value="sm_XYf SASS runs on the members of its family: compute capability X.Z for Z >= Y",
    source=f"{_FAMILY_BLOG}; {_PROG_GUIDE}, 'Feature Availability' > 'Family-Specific Features': the 'f' "
    "suffix (CUDA 12.9+) targets the feature set shared by a family of GPUs of one major version; code "
    "for sm_100f runs on compute capability 10.0 and 10.3, sm_103f on 10.3 only, sm_120f on 12.0 and "
    "12.1. See FAMILY_MEMBERS.",
    read_from=f"{_PROG_GUIDE_READ}; blog as published May 2025",
    note="nvcc 13.0.88 accepts arch=compute_100f,code=sm_103 and refuses code=sm_110f/sm_120 from "
    "compute_100f, and compute_103f -> sm_100f (lower minor).",
)

FAMILY_MEMBERS: Fact[dict[str, tuple[tuple[int, int], ...]]] = Fact(
    value={
        "100f": ((10, 0), (10, 3)),
        "103f": ((10, 3),),
        "110f": ((11, 0),),
        "120f": ((12, 0), (12, 1)),
        "121f": ((12, 1),),
    },
    source=f"{_FAMILY_BLOG}, table of family-specific targets and the compute capabilities they run on; "
    f"{_PROG_GUIDE} 'Family-Specific Features'.",
    read_from="blog as published May 2025; CUDA 13.0 target list (nvcc --list-gpu-code: sm_100, sm_103, "
    "sm_110, sm_120, sm_121)",
    note="Every row equals the general rule (same major, minor >= Y) applied to the compute capabilities "
    "that exist; archs.py implements the rule, tests check it against this table.",
)

TEGRA_COMPUTE_CAPABILITIES: Fact[frozenset[tuple[int, int]]] = Fact(
    value=frozenset({(3, 2), (5, 3), (6, 2), (7, 2), (8, 7), (10, 1), (11, 0)}),
    source=f"{_PROG_GUIDE}, 'Binary Compatibility': binary compatibility 'is not supported for Tegra' nor "
    "between desktop and Tegra; Tegra compute capabilities from the Compute Capabilities table "
    "(TK1 3.2, TX1 5.3, TX2 6.2, Xavier 7.2, Orin 8.7, Thor 10.1 renamed 11.0 in CUDA 13.0).",
    read_from=_PROG_GUIDE_READ,
    note="So SASS runs on a Tegra GPU only when built for exactly its compute capability.",
)

# ---------------------------------------------------------------------------------------------------------
# PTX (JIT) compatibility
# ---------------------------------------------------------------------------------------------------------

PTX_FORWARD_COMPATIBLE: Fact[str] = Fact(
    value="compute_XY PTX JIT-compiles for any compute capability >= X.Y",
    source=f"{_PROG_GUIDE}, 'PTX Compatibility': 'PTX code produced for some specific compute capability "
    "can always be compiled to binary code of greater or equal compute capability.'",
    read_from=_PROG_GUIDE_READ,
    note="nvcc 13.0.88 accepts arch=compute_100,code=sm_120 and refuses arch=compute_120,code=sm_100. "
    "The driver must also know the PTX ISA version (a driver older than the toolkit that wrote the PTX "
    "fails with CUDA_ERROR_UNSUPPORTED_PTX_VERSION): see the fatbin's ptx_isa list.",
)

PTX_ARCH_SPECIFIC: Fact[str] = Fact(
    value="compute_XYa PTX compiles only for compute capability exactly X.Y (not forward compatible)",
    source="PTX ISA, '.target' directive: for 'a' targets 'PTX code generated for such targets cannot be "
    f"run on later generation devices'; {_PROG_GUIDE} 'Architecture-Specific Features'.",
    read_from="PTX ISA 8.x (quoted in LLVM review D155851); CUDA C++ Programming Guide 12.9",
    note="ptxas 13.0.88: \"Program with .target 'sm_90a' cannot be compiled to future architecture\" for "
    "compute_90a -> sm_100a, and the same for compute_100a -> sm_103a.",
)

PTX_FAMILY_SPECIFIC: Fact[str] = Fact(
    value="compute_XYf PTX compiles for its family members only: compute capability X.Z for Z >= Y",
    source=f"{_FAMILY_BLOG}; PTX ISA 8.8 family-specific targets ('f' suffix).",
    read_from="blog as published May 2025; PTX ISA 8.8",
    note="nvcc 13.0.88: compute_100f -> sm_103 accepted, -> sm_110f and sm_120 refused.",
)

# ---------------------------------------------------------------------------------------------------------
# Driver versions
# ---------------------------------------------------------------------------------------------------------

_RELEASE_NOTES = "NVIDIA CUDA Toolkit Release Notes"

TOOLKIT_DRIVER_VERSIONS: Fact[tuple[tuple[str, str, str], ...]] = Fact(
    # (release, CUDA major.minor, minimum Linux x86_64 driver)
    value=(
        ("CUDA 13.1", "13.1", "590.44.01"),
        ("CUDA 13.0 Update 2", "13.0", "580.95.05"),
        ("CUDA 13.0 Update 1", "13.0", "580.82.07"),
        ("CUDA 13.0 GA", "13.0", "580.65.06"),
        ("CUDA 12.9 Update 1", "12.9", "575.57.08"),
        ("CUDA 12.9 GA", "12.9", "575.51.03"),
        ("CUDA 12.8 Update 1", "12.8", "570.124.06"),
        ("CUDA 12.8 GA", "12.8", "570.26"),
        ("CUDA 12.6 Update 3", "12.6", "560.35.05"),
        ("CUDA 12.6 Update 2", "12.6", "560.35.03"),
        ("CUDA 12.6 Update 1", "12.6", "560.35.03"),
        ("CUDA 12.6 GA", "12.6", "560.28.03"),
        ("CUDA 12.5 Update 1", "12.5", "555.42.06"),
        ("CUDA 12.5 GA", "12.5", "555.42.02"),
        ("CUDA 12.4 Update 1", "12.4", "550.54.15"),
        ("CUDA 12.4 GA", "12.4", "550.54.14"),
        ("CUDA 12.3 Update 1", "12.3", "545.23.08"),
        ("CUDA 12.3 GA", "12.3", "545.23.06"),
        ("CUDA 12.2 Update 2", "12.2", "535.104.05"),
        ("CUDA 12.2 Update 1", "12.2", "535.86.09"),
        ("CUDA 12.2 GA", "12.2", "535.54.03"),
        ("CUDA 12.1 Update 1", "12.1", "530.30.02"),
        ("CUDA 12.1 GA", "12.1", "530.30.02"),
        ("CUDA 12.0 Update 1", "12.0", "525.85.12"),
        ("CUDA 12.0 GA", "12.0", "525.60.13"),
        ("CUDA 11.8 GA", "11.8", "520.61.05"),
        ("CUDA 11.7 Update 1", "11.7", "515.48.07"),
        ("CUDA 11.7 GA", "11.7", "515.43.04"),
        ("CUDA 11.6 Update 2", "11.6", "510.47.03"),
        ("CUDA 11.6 Update 1", "11.6", "510.47.03"),
        ("CUDA 11.6 GA", "11.6", "510.39.01"),
        ("CUDA 11.5 Update 2", "11.5", "495.29.05"),
        ("CUDA 11.5 Update 1", "11.5", "495.29.05"),
        ("CUDA 11.5 GA", "11.5", "495.29.05"),
        ("CUDA 11.4 Update 4", "11.4", "470.82.01"),
        ("CUDA 11.4 Update 3", "11.4", "470.82.01"),
        ("CUDA 11.4 Update 2", "11.4", "470.57.02"),
        ("CUDA 11.4 Update 1", "11.4", "470.57.02"),
        ("CUDA 11.4.0 GA", "11.4", "470.42.01"),
        ("CUDA 11.3.1 Update 1", "11.3", "465.19.01"),
        ("CUDA 11.3.0 GA", "11.3", "465.19.01"),
        ("CUDA 11.2.2 Update 2", "11.2", "460.32.03"),
        ("CUDA 11.2.1 Update 1", "11.2", "460.32.03"),
        ("CUDA 11.2.0 GA", "11.2", "460.27.03"),
        ("CUDA 11.1.1 Update 1", "11.1", "455.32"),
        ("CUDA 11.1 GA", "11.1", "455.23"),
        ("CUDA 11.0.3 Update 1", "11.0", "450.51.06"),
        ("CUDA 11.0.2 GA", "11.0", "450.51.05"),
        ("CUDA 10.2.89", "10.2", "440.33"),
    ),
    source=f"{_RELEASE_NOTES}, Table 3 'CUDA Toolkit and Corresponding Driver Versions' (the 'Toolkit "
    "Driver Version' column, Linux x86_64)",
    read_from="CUDA Toolkit 13.1 release notes",
    note="The driver a toolkit release shipped with: with it (or newer) everything in that release works, "
    "including JIT of PTX that release produced. An older driver of the same major branch can still run "
    "the runtime through minor version compatibility (MINOR_VERSION_COMPAT_DRIVER), without newer-PTX JIT.",
)

MINOR_VERSION_COMPAT_DRIVER: Fact[dict[int, str]] = Fact(
    value={13: "580", 12: "525.60.13", 11: "450.80.02"},
    source=f"{_RELEASE_NOTES}, Table 2 'CUDA Toolkit and Minimum Required Driver Version for CUDA Minor "
    "Version Compatibility' (13.x: >= 580; 12.x: >= 525.60.13; 11.x: >= 450.80.02)",
    read_from="CUDA Toolkit 12.x and 13.1 release notes",
    note="13.1's table gives the 13.x floor as the branch only ('>= 580'). Under minor version "
    "compatibility, PTX from a newer toolkit than the driver cannot be JIT-compiled.",
)

CUDA_VERSION_ENCODING: Fact[str] = Fact(
    value="1000 * major + 10 * minor",
    source="cuda_runtime_api.h, cudaDriverGetVersion: 'The version is returned as (1000 x major + 10 x "
    "minor). For example, CUDA 9.2 would be represented by 9020.' NVML nvmlSystemGetCudaDriverVersion "
    "returns the same encoding (nvml.h NVML_CUDA_DRIVER_VERSION_MAJOR(v) = v/1000, "
    "NVML_CUDA_DRIVER_VERSION_MINOR(v) = (v%1000)/10).",
    read_from="/usr/local/cuda-13.0/include/cuda_runtime_api.h (CUDA 13.0.88); nvml.h",
)


def decode_cuda_version(encoded: int) -> str:
    """Decode cudaDriverGetVersion / nvmlSystemGetCudaDriverVersion: 12080 -> "12.8"."""
    if encoded <= 0:
        raise ValueError(f"not an encoded CUDA version: {encoded!r}")
    return f"{encoded // 1000}.{(encoded % 1000) // 10}"


def driver_version_tuple(version: str) -> tuple[int, ...]:
    """Split a driver version for numeric comparison: 570.124.06 -> (570, 124, 6)."""
    try:
        return tuple(int(part) for part in version.strip().split("."))
    except ValueError:
        raise ValueError(f"not a driver version: {version!r}") from None


_GA_DRIVER: Final[dict[str, str]] = {}
for _release, _cuda, _driver in TOOLKIT_DRIVER_VERSIONS.value:
    # The lowest driver listed for a major.minor is its GA row.
    if _cuda not in _GA_DRIVER or driver_version_tuple(_driver) < driver_version_tuple(_GA_DRIVER[_cuda]):
        _GA_DRIVER[_cuda] = _driver


def min_driver_for_cuda(cuda: str) -> str | None:
    """Minimum Linux driver for a CUDA runtime "major.minor" (its GA row in Table 3), None when unknown."""
    parts = cuda.strip().split(".")
    key = ".".join(parts[:2]) if len(parts) >= 2 else cuda.strip()
    return _GA_DRIVER.get(key)


# ---------------------------------------------------------------------------------------------------------
# The driver's user-space libraries
# ---------------------------------------------------------------------------------------------------------

DRIVER_LIBRARIES: Fact[tuple[str, ...]] = Fact(
    # Library names without their version suffix: libcuda.so matches libcuda.so.1 and libcuda.so.580.95.05.
    value=(
        # utility_libs
        "libnvidia-ml.so", "libnvidia-cfg.so", "libnvidia-nscq.so",
        # compute_libs
        "libcuda.so", "libcudadebugger.so", "libnvidia-opencl.so", "libnvidia-gpucomp.so",
        "libnvidia-ptxjitcompiler.so", "libnvidia-fatbinaryloader.so", "libnvidia-allocator.so",
        "libnvidia-compiler.so", "libnvidia-pkcs11.so", "libnvidia-pkcs11-openssl3.so", "libnvidia-nvvm.so",
        "libnvidia-tileiras.so",
    ),
    source="NVIDIA/libnvidia-container src/nvc_info.c, the `utility_libs` and `compute_libs` arrays: the "
    "driver libraries nvidia-container-cli mounts into a container for the driver capabilities `utility` "
    "('Management library', libnvidia-ml.so) and `compute` ('CUDA driver library', libcuda.so; 'PTX-SASS JIT "
    "compiler (used by libcuda)', libnvidia-ptxjitcompiler.so; ...). NVIDIA Container Toolkit docs, "
    "'Specialized Configurations with Docker' > 'Driver Capabilities': NVIDIA_DRIVER_CAPABILITIES `compute` is "
    "'required for CUDA and OpenCL applications', `utility` 'for using nvidia-smi and NVML'.",
    read_from="libnvidia-container main (commit 00b4b47e); NVIDIA Container Toolkit documentation (latest)",
    note="These come with the driver, matched to the kernel module, and must not be baked into an image: on a "
    "machine without a GPU (a CI image build) they are absent, and the container runtime provides them when the "
    "container starts with GPUs. The CUDA toolkit's own libraries (libcudart, libnvrtc, libcublas, ...) and "
    "torch's (libtorch_cuda, libc10_cuda) are not on this list: the image must ship them. The nvidia/cuda "
    "images set NVIDIA_DRIVER_CAPABILITIES=compute,utility; an image that narrows it gets no libcuda.",
)


def is_driver_library(name: str) -> bool:
    """Whether a library name (`libcuda.so.1`, a path to one) is one of the driver's own libraries."""
    base = name.rsplit("/", 1)[-1]
    return any(base == lib or base.startswith(lib + ".") for lib in DRIVER_LIBRARIES.value)
