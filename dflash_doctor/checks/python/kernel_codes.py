"""The finding codes of the kernel-packages check (KernelPackagesCheck in the package): FlashInfer's three
distributions and its JIT cache, and the `.pth` files that make kernel packages importable."""

from __future__ import annotations

from dflash_doctor.codes import Code

__all__ = [
    "KERNEL_PACKAGES_CODES", "KERNEL_PACKAGES_FLASHINFER_ALIGNED", "KERNEL_PACKAGES_FLASHINFER_CHECK_BYPASSED",
    "KERNEL_PACKAGES_FLASHINFER_SKEW", "KERNEL_PACKAGES_JIT_CACHE_CUDA", "KERNEL_PACKAGES_NONE",
    "KERNEL_PACKAGES_PTH_NOT_READ",
]

KERNEL_PACKAGES_NONE = Code(
    "kernel-packages.none", "No FlashInfer and no .pth file to judge",
    "Neither flashinfer-python nor a distribution with a `.pth` file is installed: nothing for this check.")
KERNEL_PACKAGES_FLASHINFER_ALIGNED = Code(
    "kernel-packages.flashinfer-aligned", "FlashInfer's distributions are at one version",
    "flashinfer-python with flashinfer-cubin and flashinfer-jit-cache at the versions flashinfer/jit/env.py accepts "
    "(cubin: the same version string; jit-cache: the same version with its `+cuXYZ` label), read from their "
    "METADATA without importing anything; or flashinfer-python alone, which then downloads cubins and JIT-compiles "
    "kernels at first use.")
KERNEL_PACKAGES_FLASHINFER_SKEW = Code(
    "kernel-packages.flashinfer-skew", "flashinfer-cubin or flashinfer-jit-cache is at another version",
    "`import flashinfer` compares flashinfer-cubin's version with its own, string for string, and "
    "flashinfer-jit-cache's (which carries a `+cu129` label) by prefix. FlashInfer 0.5-0.7.1 raise `RuntimeError: "
    "flashinfer-cubin version (0.6.13) does not match flashinfer version (0.6.18)` at import, so `vllm serve` "
    "dies where it loads FlashInfer; 0.7.2 and later ignore the package with a warning and download cubins or "
    "JIT-compile kernels at startup (minutes, and the network or nvcc). It happens on upgrades: vLLM's wheels pin "
    "flashinfer-python only (from 0.26 setup.py leaves flashinfer-cubin out, since PyPI's stops at 0.6.13), so "
    "`pip install -U vllm` leaves the old cubin and jit-cache behind. Fix: install the matching kernel wheels from "
    "FlashInfer's index (https://flashinfer.ai/whl, jit-cache at https://flashinfer.ai/whl/cuXYZ), or `vllm "
    "download-kernels` (vLLM 0.33 and later), or uninstall the stale package. Rules and releases: "
    "knowledge.flashinfer.FLASHINFER_VERSION_CHECK.")
KERNEL_PACKAGES_FLASHINFER_CHECK_BYPASSED = Code(
    "kernel-packages.flashinfer-check-bypassed", "FLASHINFER_DISABLE_VERSION_CHECK hides a FlashInfer skew",
    "With FLASHINFER_DISABLE_VERSION_CHECK set to any non-empty value (`0` too: flashinfer reads `os.getenv`), "
    "flashinfer loads the kernels of a flashinfer-cubin or flashinfer-jit-cache of another version, and they fault "
    "at run time: illegal memory access, `init(): Expected 8 but got 9 arguments` (lightseekorg/tokenspeed #284). "
    "The variable is in many launch scripts. Align the versions, then unset it.")
KERNEL_PACKAGES_JIT_CACHE_CUDA = Code(
    "kernel-packages.jit-cache-cuda", "FlashInfer's JIT cache holds libraries of another CUDA major",
    "FlashInfer's JIT builds its kernels with the nvcc it finds and links them with `-lcudart`, into "
    "`$FLASHINFER_WORKSPACE_BASE` (else the home directory) `/.cache/flashinfer/<version>/<archs>/cached_ops/`, and "
    "loads them from there on every later start. A library built by another CUDA toolkit needs its libcudart.so.N "
    "(read from its ELF DT_NEEDED): where the driver's CUDA is older than N the sampler fails with "
    "`cudaErrorInsufficientDriver` (flashinfer #5145, #3229); where torch is of another CUDA major the process "
    "mixes two CUDA runtimes. The cache is the user's, outside the environment: remove the version's directory so "
    "the JIT rebuilds, with CUDA_HOME at a toolkit of torch's CUDA.")
KERNEL_PACKAGES_PTH_NOT_READ = Code(
    "kernel-packages.pth-not-read", "A distribution's .pth file is never read",
    "Python reads `.pth` files only in site directories (site-packages, the user site). A distribution installed "
    "with `pip install --target` or into a directory on PYTHONPATH keeps its `.pth` there unread: what it would "
    "add to sys.path is missing. nvidia-cutlass-dsl makes `cutlass` importable only through "
    "`nvidia_cutlass_dsl.pth` (4.5) or `nvidia_cutlass_dsl_packages.pth` (4.8), so such an install gives `No "
    "module named 'cutlass'` (NVIDIA/cutlass #3001, #3034). Judged from sys.path, the RECORD and the .pth's lines; "
    "a failure where a package the .pth provides does not resolve. Fix: install it into the environment's "
    "site-packages, or put the directories the .pth names on PYTHONPATH.")

KERNEL_PACKAGES_CODES: tuple[Code, ...] = (
    KERNEL_PACKAGES_NONE,
    KERNEL_PACKAGES_FLASHINFER_ALIGNED,
    KERNEL_PACKAGES_FLASHINFER_SKEW,
    KERNEL_PACKAGES_FLASHINFER_CHECK_BYPASSED,
    KERNEL_PACKAGES_JIT_CACHE_CUDA,
    KERNEL_PACKAGES_PTH_NOT_READ,
)
