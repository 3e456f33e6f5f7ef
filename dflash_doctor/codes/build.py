"""Codes of the source-build prerequisites (checks.build_prereqs), judged for a fix that builds from source."""

from dflash_doctor.codes import Code

_WHEN = ("Judged when a fix of a failing finding would build a distribution from source (the installer's dry run "
         "resolved it to an sdist), or failed to resolve it for want of the CUDA toolchain. ")

CODES = (
    Code("build-prerequisites.ready", "Everything a source build needs is there",
         _WHEN + "nvcc matches torch's CUDA major, CUDA_HOME, ninja and a C++ compiler are found. The finding says "
         "the MAX_JOBS that fits in the free memory (9 GiB a job: flash-attn 2.8.3's setup.py), the archs to build "
         "(FLASH_ATTN_CUDA_ARCHS: the GPUs here or --target-arch) and an estimate of the build time from "
         "flash-attn's README (3-5 min on 64 cores), scaled by archs and cores."),
    Code("build-prerequisites.module-missing", "A build imports a module the environment does not have",
         _WHEN + "A build with --no-build-isolation (how flash-attn must be built, against the installed torch) "
         "sees only the environment's own packages; the installer's dry run stopped in setup.py at `No module named "
         "X` (flash-attn 2.8.3's setup.py imports packaging, psutil and ninja besides torch). Install it first."),
    Code("build-prerequisites.torch-missing", "A build against torch, and torch is not installed",
         _WHEN + "flash-attn's setup.py imports torch and builds against the installed one (--no-build-isolation). "
         "Install the torch your serving stack pins first."),
    Code("build-prerequisites.torch-cpu", "A CUDA build against a CPU build of torch",
         _WHEN + "torch.version.cuda is None: torch's cpp_extension cannot build a CUDA extension against it. "
         "Install the CUDA build of torch your serving stack pins."),
    Code("build-prerequisites.nvcc-missing", "No nvcc for a CUDA build",
         _WHEN + "No nvcc on PATH or under CUDA_HOME. Install the CUDA toolkit whose release matches "
         "torch.version.cuda and put its bin/ on PATH, or install a prebuilt wheel instead."),
    Code("build-prerequisites.nvcc-mismatch", "nvcc's CUDA major differs from torch's",
         _WHEN + "torch's cpp_extension raises a RuntimeError when nvcc's CUDA major differs from "
         "torch.version.cuda's (a different minor only warns): the build stops before it compiles anything. "
         "Point CUDA_HOME and PATH at a toolkit of torch's CUDA release."),
    Code("build-prerequisites.cuda-home-missing", "No CUDA install for torch's cpp_extension to find",
         _WHEN + "Neither CUDA_HOME/CUDA_PATH, nor an nvcc on PATH, nor /usr/local/cuda: flash-attn's setup.py "
         "fails at once ('CUDA_HOME environment variable is not set'), even when pip only prepares its metadata."),
    Code("build-prerequisites.ninja-missing", "No ninja: a build one file at a time",
         _WHEN + "Without ninja, torch's build compiles serially: flash-attn's README says about 2 hours. "
         "`pip install ninja` into the target environment."),
    Code("build-prerequisites.compiler-missing", "No C++ compiler",
         _WHEN + "nvcc hands host code to the system C++ compiler (CXX, c++, g++ or clang++); none was found."),
    Code("build-prerequisites.memory-low", "Less free memory than one compile job needs",
         _WHEN + "Each compile job peaks at about 9 GiB (flash-attn 2.8.3's setup.py); with less available the "
         "build may be killed for memory even with MAX_JOBS=1 (flash-attention issues #389, #1038, #1581)."),
)
