"""The codes of the fix layer: the golden baseline a run is compared with, the comparisons across a fleet of hosts
(`dflash-doctor merge`, `fleet`), and a source build's prerequisites (judged for a fix that builds from source)."""

from __future__ import annotations

from dflash_doctor.codes import Code

__all__ = ["BASELINE_CODES", "BUILD_CODES", "CODES", "FLEET_CODES"]

# ------------------------------------------------------------------ golden baseline and fleets of hosts
BASELINE_MATCH = Code("baseline.match", "The environment matches the golden baseline",
                      "Every part of the environment recorded in the baseline file (driver range, GPUs' compute "
                      "capabilities, Python, the distributions and their exact versions, the stack's file hashes, the arch "
                      "coverage of its compiled code) is as it was when the baseline was saved.")
BASELINE_VERSION_DRIFT = Code("baseline.version-drift", "A distribution changed version, appeared or disappeared since the baseline",
                              "The baseline records every installed distribution with its exact version. One differs now: an "
                              "upgrade, a downgrade, a package installed or removed after the known-good state was recorded. In an "
                              "image pipeline this usually means an unpinned dependency resolved differently. Pin it back (the "
                              "remediation installs the recorded version), or, if the change is intended and tested, save a new "
                              "baseline with `dflash-doctor baseline save FILE`.")
BASELINE_FILE_DRIFT = Code("baseline.file-drift", "Files of a stack distribution changed since the baseline",
                           "The distribution has the same version as in the baseline, but files it installed have a different "
                           "sha256 now, are gone, or new ones appeared. Something wrote into site-packages after install: a "
                           "patch step in a Dockerfile, a second installer overwriting shared files (flash-attn's namespace), a "
                           "rebuilt wheel published under the same version. Reinstall the distribution, or save a new baseline "
                           "if the change is intended.")
BASELINE_ARCH_DRIFT = Code("baseline.arch-drift", "Compiled code covers different GPU archs than in the baseline",
                           "A library of the stack carries SASS or PTX for a different set of GPU architectures than when the "
                           "baseline was saved. A missing arch means kernels that ran on that GPU will fail to load there "
                           "(`no kernel image is available for execution on the device`). Usually a wheel was rebuilt with "
                           "another TORCH_CUDA_ARCH_LIST or taken from another index; install the recorded build.")
BASELINE_GPU_DRIFT = Code("baseline.gpu-drift", "Driver or GPUs differ from the baseline",
                          "The NVIDIA driver is outside the range the baseline allows, or the GPUs' compute capabilities "
                          "differ. The same image on other hardware is a different environment: check it against a baseline "
                          "saved on that hardware.")
BASELINE_PYTHON_DRIFT = Code("baseline.python-drift", "The Python interpreter differs from the baseline",
                             "The target interpreter's version or the machine architecture differs from the baseline's. Every "
                             "compiled wheel depends on both.")
BASELINE_NOT_COMPARED = Code("baseline.not-compared", "A part of the baseline could not be compared",
                             "The baseline records facts this run did not collect (GPU facts under --no-gpu, file hashes when "
                             "judging a saved report, arch coverage from a doctor without the arch layer). That part was not "
                             "compared; run on the hardware, or from the live environment, to compare it.")
FLEET_STACK_DRIFT = Code("fleet.stack-drift", "The serving stack differs between hosts",
                         "Hosts of one fleet run different versions of a stack distribution (or some lack it). vLLM workers "
                         "on one cluster must agree on torch, vLLM and the attention kernels; a node that differs fails or "
                         "produces different results. The hosts that differ from the majority are named; align them.")
FLEET_ENVIRONMENT_DRIFT = Code("fleet.environment-drift", "Python, driver, GPUs or the doctor differ between hosts",
                               "Hosts of one fleet differ in the Python interpreter, the NVIDIA driver, the GPUs' compute "
                               "capabilities or the version of dflash-doctor that examined them. Mixed GPUs in one vLLM deployment need "
                               "kernels for every arch; a different doctor version may judge differently. The minority hosts are named.")
FLEET_FINDING_DRIFT = Code("fleet.finding-drift", "A check came out differently on some hosts",
                           "The same check passed on some hosts and not on others. The hosts named are the minority; their "
                           "per-host report has the finding's detail and remediation.")
FLEET_HOST_FAILING = Code("fleet.host-failing", "The doctor found problems on a host",
                          "The host's own report has failing checks or errors; see its findings.")
FLEET_NO_REPORT = Code("fleet.no-report", "A host gave no report",
                       "The doctor could not run on this host (the Ray task failed or timed out, the node died) or its "
                       "report file could not be read. Nothing is known about it.")

# ------------------------------------------------------------------ a source build's prerequisites
_WHEN = ("Judged when a fix of a failing finding would build a distribution from source (the installer's dry run "
         "resolved it to an sdist), or failed to resolve it for want of the CUDA toolchain. ")

BUILD_READY = Code("build-prerequisites.ready", "Everything a source build needs is there",
                   _WHEN + "nvcc matches torch's CUDA major, CUDA_HOME, ninja and a C++ compiler are found. The finding says "
                   "the MAX_JOBS that fits in the free memory (9 GiB a job: flash-attn 2.8.3's setup.py), the archs to build "
                   "(FLASH_ATTN_CUDA_ARCHS: the GPUs here or --target-arch) and an estimate of the build time from "
                   "flash-attn's README (3-5 min on 64 cores), scaled by archs and cores.")
BUILD_MODULE_MISSING = Code("build-prerequisites.module-missing", "A build imports a module the environment does not have",
                            _WHEN + "A build with --no-build-isolation (how flash-attn must be built, against the installed torch) "
                            "sees only the environment's own packages; the installer's dry run stopped in setup.py at `No module named "
                            "X` (flash-attn 2.8.3's setup.py imports packaging, psutil and ninja besides torch). Install it first.")
BUILD_TORCH_MISSING = Code("build-prerequisites.torch-missing", "A build against torch, and torch is not installed",
                           _WHEN + "flash-attn's setup.py imports torch and builds against the installed one (--no-build-isolation). "
                           "Install the torch your serving stack pins first.")
BUILD_TORCH_CPU = Code("build-prerequisites.torch-cpu", "A CUDA build against a CPU build of torch",
                       _WHEN + "torch.version.cuda is None: torch's cpp_extension cannot build a CUDA extension against it. "
                       "Install the CUDA build of torch your serving stack pins.")
BUILD_NVCC_MISSING = Code("build-prerequisites.nvcc-missing", "No nvcc for a CUDA build",
                          _WHEN + "No nvcc on PATH or under CUDA_HOME. Install the CUDA toolkit whose release matches "
                          "torch.version.cuda and put its bin/ on PATH, or install a prebuilt wheel instead.")
BUILD_NVCC_MISMATCH = Code("build-prerequisites.nvcc-mismatch", "nvcc's CUDA major differs from torch's",
                           _WHEN + "torch's cpp_extension raises a RuntimeError when nvcc's CUDA major differs from "
                           "torch.version.cuda's (a different minor only warns): the build stops before it compiles anything. "
                           "Point CUDA_HOME and PATH at a toolkit of torch's CUDA release.")
BUILD_CUDA_HOME_MISSING = Code("build-prerequisites.cuda-home-missing", "No CUDA install for torch's cpp_extension to find",
                               _WHEN + "Neither CUDA_HOME/CUDA_PATH, nor an nvcc on PATH, nor /usr/local/cuda: flash-attn's setup.py "
                               "fails at once ('CUDA_HOME environment variable is not set'), even when pip only prepares its metadata.")
BUILD_NINJA_MISSING = Code("build-prerequisites.ninja-missing", "No ninja: a build one file at a time",
                           _WHEN + "Without ninja, torch's build compiles serially: flash-attn's README says about 2 hours. "
                           "`pip install ninja` into the target environment.")
BUILD_COMPILER_MISSING = Code("build-prerequisites.compiler-missing", "No C++ compiler",
                              _WHEN + "nvcc hands host code to the system C++ compiler (CXX, c++, g++ or clang++); none was found.")
BUILD_MEMORY_LOW = Code("build-prerequisites.memory-low", "Less free memory than one compile job needs",
                        _WHEN + "Each compile job peaks at about 9 GiB (flash-attn 2.8.3's setup.py); with less available the "
                        "build may be killed for memory even with MAX_JOBS=1 (flash-attention issues #389, #1038, #1581).")

BASELINE_CODES = (BASELINE_MATCH, BASELINE_VERSION_DRIFT, BASELINE_FILE_DRIFT, BASELINE_ARCH_DRIFT, BASELINE_GPU_DRIFT, BASELINE_PYTHON_DRIFT, BASELINE_NOT_COMPARED)
FLEET_CODES = (FLEET_STACK_DRIFT, FLEET_ENVIRONMENT_DRIFT, FLEET_FINDING_DRIFT, FLEET_HOST_FAILING, FLEET_NO_REPORT)
BUILD_CODES = (BUILD_READY, BUILD_MODULE_MISSING, BUILD_TORCH_MISSING, BUILD_TORCH_CPU, BUILD_NVCC_MISSING, BUILD_NVCC_MISMATCH, BUILD_CUDA_HOME_MISSING, BUILD_NINJA_MISSING, BUILD_COMPILER_MISSING, BUILD_MEMORY_LOW)
CODES = (*BASELINE_CODES, *FLEET_CODES, *BUILD_CODES)
