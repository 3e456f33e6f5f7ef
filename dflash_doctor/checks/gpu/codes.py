"""The GPU layer's finding codes: one constant per id, with its title and explanation.

Ids are `<check-id>.<name>` for the checks of this package: gpu (NVML's devices and their health),
arch-coverage (the compiled GPU code of the stack), cuda-stack (torch's CUDA build and Triton) and kernels (the
kernels run against a reference).
"""

from __future__ import annotations

from dflash_doctor.codes import Code

__all__ = ["CODES"]

_RESET = ("Stop every process on that GPU, then reset it (`sudo nvidia-smi -r -i N`), or reboot. A reset clears "
          "pending states; it needs root and no process on the GPU.")

# the GPUs, through NVML in the doctor's own process
GPU_OK = Code(
    "gpu.ok", "The GPUs, as NVML sees them",
    "Lists each GPU with its compute capability (sm_XY), memory and the driver's version, read through NVML "
    "(nvidia-ml-py) without creating a CUDA context.")
GPU_NVML_LIBRARY_MISSING = Code(
    "gpu.nvml-library-missing", "No NVIDIA driver library (libnvidia-ml.so.1)",
    "NVML, which ships with the NVIDIA driver, could not be loaded: the dynamic loader finds no "
    "libnvidia-ml.so.1. Either no NVIDIA driver is installed on this machine, or this is a container started "
    "without the GPU runtime (`docker run --gpus all` with the NVIDIA Container Toolkit), which mounts the "
    "driver's libraries and /dev/nvidia* into it. Without it nothing can use a GPU here. On a machine meant to "
    "have no GPU (a CI image build), run the doctor with --no-gpu.")
GPU_DRIVER_NOT_LOADED = Code(
    "gpu.driver-not-loaded", "The NVIDIA kernel module is not loaded",
    "The driver's user-space library is installed but NVML answered NVML_ERROR_DRIVER_NOT_LOADED: the nvidia "
    "kernel module is not running (no /proc/driver/nvidia/version). Typical after installing a driver without "
    "rebooting, with Secure Boot refusing an unsigned module, or with the kernel updated past the module built "
    "for it. Load it (`sudo modprobe nvidia`) or reboot; `dmesg | grep -i nvidia` says why it did not load.")
GPU_DRIVER_LIBRARY_MISMATCH = Code(
    "gpu.driver-library-mismatch", "The driver library and kernel module versions differ",
    "NVML answered 'Driver/library version mismatch': the user-space driver (libnvidia-ml, libcuda) was "
    "upgraded but the running kernel module is the old one. Every CUDA program fails until the module is "
    "reloaded; reboot (or unload and reload the nvidia modules with nothing using them).")
GPU_NVML_NO_PERMISSION = Code(
    "gpu.nvml-no-permission", "No permission to use the GPU devices",
    "NVML answered NVML_ERROR_NO_PERMISSION: this user cannot open /dev/nvidia*. Add the user to the group "
    "that owns them (often `video`), or run in a container given the GPUs.")
GPU_NVML_FAILED = Code(
    "gpu.nvml-failed", "NVML could not be queried",
    "NVML raised an error the doctor has no specific diagnosis for (or nvidia-ml-py is missing from the "
    "doctor's own environment, or NVML did not answer in time). The error is in the evidence; "
    "`nvidia-smi` usually prints the same.")
GPU_NO_DEVICES = Code(
    "gpu.no-devices", "The driver is loaded but lists no GPU",
    "NVML works but reports zero GPUs: the GPUs are not passed into this container or VM, or they fell off the "
    "bus (`dmesg | grep -i xid`).")
GPU_VISIBLE = Code(
    "gpu.visible", "The GPUs vLLM will see",
    "CUDA_VISIBLE_DEVICES (or its absence) resolved against the GPUs NVML lists, with CUDA's rules: which "
    "physical GPU each cuda:N will be, in order.")
GPU_VISIBLE_NONE = Code(
    "gpu.visible-none", "CUDA_VISIBLE_DEVICES hides every GPU",
    "CUDA_VISIBLE_DEVICES is set, but to a value that leaves no GPU visible (empty, -1, a first entry that "
    "names no GPU, or a repeated entry, which hides them all). torch then sees no CUDA device and `vllm serve` "
    "fails. Unset it or list the GPUs to use.")
GPU_VISIBLE_UNKNOWN_DEVICE = Code(
    "gpu.visible-unknown-device", "CUDA_VISIBLE_DEVICES names a GPU that does not exist",
    "An entry of CUDA_VISIBLE_DEVICES names no GPU on this machine (an index past the last GPU, a UUID no GPU "
    "has, an ambiguous UUID prefix). CUDA stops reading the list there: that entry and every one after it "
    "are ignored, so fewer GPUs are visible than listed, and a --tensor-parallel-size sized for the list "
    "fails.")
GPU_VISIBLE_DUPLICATE = Code(
    "gpu.visible-duplicate", "CUDA_VISIBLE_DEVICES lists a GPU twice",
    "A repeated entry makes CUDA (and torch's NVML-based count, which mirrors it) see no device at all, so "
    "`vllm serve` finds no GPU. List each GPU once.")
GPU_VISIBLE_UUID_VLLM = Code(
    "gpu.visible-uuid-vllm", "vLLM cannot map these CUDA_VISIBLE_DEVICES entries",
    "vLLM maps each CUDA_VISIBLE_DEVICES entry to a physical GPU for its NVML queries. Up to 0.23 it calls "
    "int() on the entry, so GPU UUIDs raise ValueError at start-up; from 0.24 it looks a UUID up with "
    "nvmlDeviceGetHandleByUUID, which needs the whole UUID, so the prefixes CUDA accepts still fail. Use the "
    "indices (the fix shows them) or whole UUIDs with vLLM 0.24 or later.")
GPU_VISIBLE_MIG = Code(
    "gpu.visible-mig", "CUDA_VISIBLE_DEVICES names MIG devices",
    "The entries are MIG device ids. A CUDA process enumerates only one MIG device, so vLLM runs on one MIG "
    "slice, without tensor parallelism across slices.")
GPU_DEVICE_ORDER = Code(
    "gpu.device-order", "GPU indices may differ between CUDA and nvidia-smi",
    "The machine has GPUs of different models and CUDA_DEVICE_ORDER is not PCI_BUS_ID. CUDA numbers devices "
    "fastest first by default, nvidia-smi and NVML by PCI bus id, so an index in CUDA_VISIBLE_DEVICES may "
    "select another GPU than the nvidia-smi row of that number. Set CUDA_DEVICE_ORDER=PCI_BUS_ID (vLLM warns "
    "about the same).")
GPU_MEMORY_HELD = Code(
    "gpu.memory-held", "Other processes hold memory on a GPU vLLM will use",
    "Processes other than the doctor hold memory on a visible GPU. vLLM reserves a fraction of the GPU's "
    "total memory (--gpu-memory-utilization, default 0.92 in vLLM 0.20) and refuses to start when less than "
    "that is free ('Free memory on device ... is less than desired GPU memory utilization'); with less, the "
    "KV cache is smaller. Stop them, pick other GPUs, or lower --gpu-memory-utilization.")
GPU_RESET_PENDING = Code(
    "gpu.reset-pending", "A GPU needs a reset: memory pages or rows are pending retirement",
    "NVML reports retired pages pending (before Ampere) or a row remapping pending (Ampere and later): the "
    "GPU found uncorrectable memory errors and will retire the bad memory at its next reset. Until then it is "
    "running on memory known to be bad. " + _RESET)
GPU_ROW_REMAP_FAILURE = Code(
    "gpu.row-remap-failure", "A GPU's row remapping has failed",
    "NVML reports that a row remapping failed: the GPU has no spare rows left for its bad memory. NVIDIA "
    "treats this as a reason to replace the GPU; take it out of service.")
GPU_ECC_UNCORRECTED = Code(
    "gpu.ecc-uncorrected", "Uncorrected ECC errors since the driver loaded",
    "The volatile uncorrected ECC error count is not zero: the GPU's memory returned data it could not "
    "correct since the driver was last loaded. Work that touched it may have been corrupted. DCGM's health "
    "watch fails a GPU on any volatile double-bit error, and so does the doctor. Check the count and the "
    "row remapping (`nvidia-smi -q -d ECC,ROW_REMAPPER`), reset the GPU, and service it if errors recur.")
GPU_THROTTLED = Code(
    "gpu.throttled", "A GPU's clocks are held down for power or heat",
    "NVML's clock event reasons say the GPU is slowing its clocks now: the power-scaling algorithm holding "
    "it under its power limit (SwPowerCap), or thermal and hardware slowdowns (SW/HW thermal slowdown, HW "
    "slowdown, HW power brake), or its temperature is at or above its own slowdown threshold. DCGM's health "
    "watches warn on the same. On an idle GPU none of them should be active: check cooling, the power "
    "supply and `nvidia-smi -q -d PERFORMANCE,TEMPERATURE`. Decode throughput drops with the clocks.")
GPU_POWER_CAPPED = Code(
    "gpu.power-capped", "A GPU's power limit is below the board's default",
    "The power limit in effect (or the one the driver enforces) is lower than the limit the board boots "
    "with, so under load the clocks are held lower than the GPU can run. It was set with `nvidia-smi -pl`, "
    "by the system, or by a datacenter power policy. Restore it with `sudo nvidia-smi -i N -pl DEFAULT_W` "
    "if the lower limit is not intended.")
GPU_PCIE_LINK_DEGRADED = Code(
    "gpu.pcie-link-degraded", "A GPU's PCIe link is narrower or older than it could be",
    "The PCIe link trained narrower than the GPU and slot support (x8 where x16 is possible), or the slot is "
    "of an older PCIe generation than the GPU (a Gen5 GPU in a Gen3 slot). Each halving halves host-to-GPU "
    "copies (model loading, CPU offload) and, without NVLink, the peer-to-peer bandwidth tensor parallelism "
    "all-reduces over. Reseat the card or move it to a full-width slot of its generation; DCGM's PCIe "
    "diagnostic fails a GPU on the same.")
GPU_HOST_LIMITS = Code(
    "gpu.host-limits", "The host's open-file and locked-memory limits",
    "The doctor's RLIMIT_NOFILE and RLIMIT_MEMLOCK, which a vLLM started from the same shell inherits, and "
    "the transparent huge page mode. vLLM raises its soft open-file limit to 65535 itself but cannot pass "
    "the hard limit: below it, many connections end in `OSError: [Errno 24] Too many open files` (warned). "
    "NCCL over InfiniBand/RoCE pins the memory it registers and needs memlock unlimited; on one host it "
    "does not (reported, not judged).")
GPU_MIG_ENABLED = Code(
    "gpu.mig-enabled", "MIG is enabled on a GPU vLLM will use",
    "Multi-Instance GPU mode splits the GPU into MIG devices, and a CUDA process enumerates only one of them. "
    "vLLM then runs on one slice, with the slice's memory, and cannot use tensor parallelism across slices. "
    "Disable MIG (`sudo nvidia-smi -i N -mig 0`, then reset) to serve on the whole GPU.")
GPU_MIG_PENDING = Code(
    "gpu.mig-pending", "A MIG mode change is waiting for a GPU reset",
    "The MIG mode set for the GPU differs from the one in effect; it changes at the next GPU reset. " + _RESET)

# the stack's compiled GPU code, read from its ELF files
ARCH_COVERAGE_COVERED = Code(
    "arch-coverage.covered", "The stack's GPU code covers the GPUs",
    "Every library of the stack that carries CUDA device code (flash-attn, vLLM's kernels, torch's "
    "libtorch_cuda) has SASS that runs on each GPU, or on each --target-arch: read from the `.nv_fatbin` "
    "section of the installed files, nothing loaded. SASS built for sm_XY runs on compute capability X.Z "
    "for Z >= Y, never across major versions; sm_90a-style code only on exactly that GPU. Libraries that "
    "their owner uses only on some GPUs (vLLM's FA3 on 9.x, FlashMLA) are counted as 'used only on other "
    "GPUs'. `dflash-doctor -v` lists each library's architectures.")
ARCH_COVERAGE_PTX_JIT_ONLY = Code(
    "arch-coverage.ptx-jit-only", "A library reaches this GPU only through PTX JIT",
    "The library has no SASS that runs on this GPU, only PTX for an older architecture. The driver "
    "JIT-compiles the PTX when a kernel module first loads: seconds to minutes for a large library on each "
    "start (the driver's compute cache keeps the result), and it works only with a driver that knows the "
    "PTX ISA version. It runs, slowly at first. A build with SASS for the GPU avoids it: for flash-attn, "
    "FLASH_ATTN_CUDA_ARCHS with 80, 90, 100 or 120 and a build from source.")
ARCH_COVERAGE_NO_KERNEL_IMAGE = Code(
    "arch-coverage.no-kernel-image", "A library has no code for this GPU",
    "The library carries neither SASS that runs on the GPU's compute capability nor PTX the driver could "
    "compile for it. It may still import, but its first kernel launch fails with 'no kernel image is "
    "available for execution on the device' (CUDA error 209), inside `vllm serve`. Typical causes: a "
    "flash-attn built with a FLASH_ATTN_CUDA_ARCHS that missed this GPU (a value like '86' builds nothing; "
    "'80' covers every 8.x GPU), a torch build for an older CUDA that cannot compile for Blackwell "
    "(sm_100/sm_120 need CUDA 12.8), or a GPU older than the library supports (flash-attn 2 needs compute "
    "capability 8.0). Also raised when the only code is PTX of an ISA newer than the driver (PTX ISA 9.0 "
    "needs a CUDA 13.0 driver): the JIT fails with CUDA_ERROR_UNSUPPORTED_PTX_VERSION. The remediation "
    "names the rebuild or the build to install.")
ARCH_COVERAGE_OPTIONAL_NO_KERNEL_IMAGE = Code(
    "arch-coverage.optional-no-kernel-image", "An optional library has no code for this GPU",
    "A library that only some models or quantization methods use (vLLM's FlashMLA for MLA models, "
    "QuTLASS for fp_quant) has no code for this GPU. Serving other models is unaffected; those features "
    "fail at their first kernel launch.")
ARCH_COVERAGE_NO_TARGET = Code(
    "arch-coverage.no-target", "No GPU and no --target-arch: coverage not judged",
    "There is no GPU to judge compiled code against (--no-gpu, or NVML found none) and no --target-arch "
    "was given. In a CI image build, pass the GPUs the image will run on: `--target-arch sm_86,sm_90`. "
    "The C/C++ runtime and torch-symbol checks of the same libraries still ran.")
ARCH_COVERAGE_TARGET_ARCH_INVALID = Code(
    "arch-coverage.target-arch-invalid", "--target-arch is not a list of GPU architectures",
    "The --target-arch value could not be read. Give SASS names or compute capabilities, comma-separated: "
    "sm_86,sm_90 or 8.6,9.0 (sm_90a is read as 9.0).")
ARCH_COVERAGE_NO_DEVICE_CODE = Code(
    "arch-coverage.no-device-code", "No library of the stack carries CUDA device code",
    "None of the scanned libraries has a `.nv_fatbin`: typically a CPU build of torch without vLLM or "
    "flash-attn. Nothing to judge for GPU architectures.")
ARCH_COVERAGE_RUNTIME_OK = Code(
    "arch-coverage.runtime-ok", "The host's C and C++ runtime is new enough",
    "Every scanned library's GLIBC_, GLIBCXX_ and CXXABI_ version requirements (read from its "
    "`.gnu.version_r`) are met by this host's glibc and by the libstdc++ the target interpreter loads.")
ARCH_COVERAGE_RUNTIME_TOO_OLD = Code(
    "arch-coverage.runtime-too-old", "A library needs a newer glibc or libstdc++ than this host has",
    "The library was linked on a newer system: its import fails with \"version `GLIBC_2.32' not found\" "
    "(or GLIBCXX_/CXXABI_). flash-attn's release wheels from 2.8.0.post1 on are built on Ubuntu 22.04 and "
    "need GLIBC 2.32 (flash-attn#1708, #2225). glibc cannot be upgraded inside a Python environment: build "
    "the library on this host (flash-attn: FLASH_ATTENTION_FORCE_BUILD=TRUE with --no-build-isolation), or "
    "run on a newer base image. For GLIBCXX, a newer libstdc++ also works.")
ARCH_COVERAGE_UNDEFINED_SYMBOL = Code(
    "arch-coverage.undefined-symbol", "A library needs torch symbols the installed torch does not export",
    "The library leaves libtorch/libc10 symbols undefined that none of the installed torch's libraries "
    "export: it was built against another torch version, CUDA variant or C++ ABI. Its import fails with "
    "`undefined symbol: _ZN3c10...`, and so does everything that imports it (flash_attn/__init__.py "
    "imports flash_attn_2_cuda). Predicted from the ELF files, before anything is imported. Rebuild it "
    "against the installed torch, or install the torch it was built for.")
ARCH_COVERAGE_SYMBOLS_OK = Code(
    "arch-coverage.symbols-ok", "The stack's torch symbols all resolve",
    "Every libtorch/libc10 symbol the scanned libraries need is exported by the installed torch's "
    "libraries.")

# the CUDA stack, in the target interpreter
CUDA_STACK_OK = Code(
    "cuda-stack.ok", "torch's CUDA build works with this driver and these GPUs",
    "torch initialized CUDA, sees the GPUs the driver and CUDA_VISIBLE_DEVICES give it, was compiled for "
    "each one's architecture (SASS), and Triton finds ptxas and libcuda.")
CUDA_STACK_NO_GPU = Code(
    "cuda-stack.no-gpu", "No GPU: the CUDA stack was not checked",
    "The GPU check found no usable NVIDIA driver or GPU (its finding says which), so there is nothing for "
    "torch's CUDA build to run on.")
CUDA_STACK_PROBE_FAILED = Code(
    "cuda-stack.probe-failed", "The CUDA-stack probe did not finish",
    "The subprocess that imports torch and initializes CUDA in the target was killed by a signal, timed out, "
    "or printed no facts. The stderr in the evidence says where it stopped; a crash inside `import torch` or "
    "CUDA initialization is itself the problem.")
CUDA_STACK_TORCH_ABSENT = Code(
    "cuda-stack.torch-absent", "torch is not installed in the target",
    "There is no torch to check against the GPU. vLLM needs it; the distributions check reports what "
    "requires it.")
CUDA_STACK_TORCH_IMPORT_FAILED = Code(
    "cuda-stack.torch-import-failed", "`import torch` fails in the target",
    "torch is installed but importing it raises; the exception is in the evidence. Reinstall torch.")
CUDA_STACK_TORCH_CPU_BUILD = Code(
    "cuda-stack.torch-cpu-build", "torch is a CPU-only (or ROCm) build",
    "torch.version.cuda is None: this torch cannot use NVIDIA GPUs (a CPU wheel, often pulled from PyPI on "
    "a platform or by a resolver that chose it). Install a CUDA build from the PyTorch index for a CUDA the "
    "driver supports.")
CUDA_STACK_DRIVER_TOO_OLD = Code(
    "cuda-stack.driver-too-old", "The driver is too old for torch's CUDA",
    "torch was built against a CUDA whose major version the installed driver does not support, so CUDA "
    "initialization fails ('The NVIDIA driver on your system is too old', cudaErrorInsufficientDriver). Two "
    "ways out: install a torch built for a CUDA the driver supports (the PyTorch index has one per CUDA "
    "version; vLLM pins the torch version, and its own wheel must match that CUDA too), or install a newer "
    "driver (at least the one the CUDA release notes list for torch's CUDA).")
CUDA_STACK_INIT_FAILED = Code(
    "cuda-stack.init-failed", "torch cannot initialize CUDA",
    "torch.cuda.is_available() is False (or raises) although the driver lists GPUs; torch's own message and "
    "cuInit's error are in the evidence (common: a container without /dev/nvidia-uvm, a GPU in a bad state, "
    "CUDA_VISIBLE_DEVICES hiding every GPU).")
CUDA_STACK_DEVICE_COUNT_MISMATCH = Code(
    "cuda-stack.device-count-mismatch", "torch sees a different number of GPUs than expected",
    "torch.cuda.device_count() differs from the number of GPUs NVML lists after applying CUDA_VISIBLE_DEVICES: "
    "a GPU is hidden from CUDA (cgroup device rules, a partly passed-through container) or the variable is "
    "read differently than intended.")
CUDA_STACK_ARCH_NOT_COVERED = Code(
    "cuda-stack.arch-not-covered", "torch has no kernels for a GPU's architecture",
    "torch.cuda.get_arch_list() holds no SASS for the GPU's compute capability (same major, lower or equal "
    "minor) and no PTX it could JIT: every kernel launch fails with 'no kernel image is available for "
    "execution on the device'. Install a torch build whose arch list covers the GPU (e.g. sm_120 needs a CUDA "
    "12.8+ build), or build torch with TORCH_CUDA_ARCH_LIST including it.")
CUDA_STACK_ARCH_PTX_ONLY = Code(
    "cuda-stack.arch-ptx-only", "torch covers a GPU only through PTX JIT",
    "torch was compiled for no SASS that runs on this GPU, only PTX the driver can JIT-compile: the first "
    "launch of every kernel compiles it (slow start), and a driver older than torch's CUDA cannot JIT that "
    "PTX at all (CUDA_ERROR_UNSUPPORTED_PTX_VERSION). Prefer a torch build with SASS for this arch.")
CUDA_STACK_TRITON_ABSENT = Code(
    "cuda-stack.triton-absent", "Triton is not installed",
    "torch's compiler (torch.compile, used by vLLM) and vLLM's Triton kernels need Triton on NVIDIA GPUs. "
    "Install the Triton version torch requires.")
CUDA_STACK_TRITON_IMPORT_FAILED = Code(
    "cuda-stack.triton-import-failed", "`import triton` fails in the target",
    "Triton is installed but importing it raises; the exception is in the evidence. torch.compile and vLLM's "
    "Triton kernels fail the same way. Reinstall the Triton version torch requires.")
CUDA_STACK_TRITON_PTXAS_MISSING = Code(
    "cuda-stack.triton-ptxas-missing", "Triton cannot find ptxas",
    "Triton compiles kernels to PTX and then runs ptxas (its bundled copy, or $TRITON_PTXAS_PATH) to make "
    "GPU code. It found none that runs, so every Triton kernel fails to compile. The evidence lists where it "
    "looked; reinstall Triton, or point TRITON_PTXAS_PATH at a CUDA toolkit's ptxas.")
CUDA_STACK_TRITON_LIBCUDA_MISSING = Code(
    "cuda-stack.triton-libcuda-missing", "Triton cannot find libcuda.so.1",
    "Triton links its launcher against libcuda.so.1, found through $TRITON_LIBCUDA_PATH, `ldconfig -p` or "
    "LD_LIBRARY_PATH. None has it, so every Triton kernel launch fails ('libcuda.so cannot found!'). Run "
    "`sudo ldconfig` after installing the driver, or set TRITON_LIBCUDA_PATH to the directory holding it.")

# the kernels, in the target interpreter, one process per family
KERNELS_OK = Code(
    "kernels.ok", "The kernels compute the right numbers on this GPU",
    "Each kernel that runs here was compared with an fp32 reference computed on the same GPU from the same "
    "inputs (a small causal problem, head sizes 128 and 64, fp16 and bf16), and stayed within the tolerance "
    "of 2 units in the last place of its dtype at the problem's scale. First-run (compile) and warm times are "
    "in the evidence.")
KERNELS_FAMILY_OK = Code(
    "kernels.family-ok", "One kernel family computes the right numbers",
    "Every case of this kernel family stayed within tolerance; the cases, errors and times are in the "
    "evidence.")
KERNELS_NO_GPU = Code(
    "kernels.no-gpu", "No GPU: the kernels were not run",
    "The GPU check found no usable driver or GPU (its finding says which), so no kernel could run; fix that "
    "first.")
KERNELS_NO_CUDA = Code(
    "kernels.no-cuda", "torch cannot use CUDA here: the kernels were not run",
    "The CUDA-stack check found that torch cannot run on the GPU (its finding says why).")
KERNELS_NOT_INSTALLED = Code(
    "kernels.not-installed", "A kernel package is not installed: its kernels were not run",
    "The package this family comes from (flash-attn, vLLM) is not installed in the target, so there is "
    "nothing of it to run. vLLM does not need flash-attn on CUDA: it uses its bundled flash-attention.")
KERNELS_NOT_IMPORTABLE = Code(
    "kernels.not-importable", "A kernel package is installed but does not import",
    "The package is installed but the import the stack makes fails; the import check's finding explains why. "
    "Its kernels were not run.")
KERNELS_UNSUPPORTED = Code(
    "kernels.unsupported", "A kernel family declines this GPU or dtype by design",
    "The kernel refuses this compute capability or dtype with its own message (e.g. flash-attn v2 needs "
    "Ampere or newer; torch's SDPA flash backend has no kernel for some archs). That is a limit of the "
    "kernel, not a broken install; vLLM picks another backend there.")
KERNELS_WRONG_RESULT = Code(
    "kernels.wrong-result", "A kernel computes wrong numbers on this GPU",
    "The kernel ran but its output differs from the fp32 reference by more than the tolerance (or is not "
    "finite). A kernel built for another arch or CUDA, a miscompiled Triton kernel, or a broken GPU gives "
    "this. vLLM would serve wrong tokens without an error.")
KERNELS_ERROR = Code(
    "kernels.error", "A kernel fails on this GPU",
    "The kernel raised a CUDA error (e.g. 'no kernel image is available for execution on the device', an "
    "illegal memory access) or another exception; the text is in the evidence.")
KERNELS_OUT_OF_MEMORY = Code(
    "kernels.out-of-memory", "A kernel ran out of GPU memory",
    "The small test problem (a few MB) could not allocate GPU memory: the GPU is full, usually because other "
    "processes hold it (the GPU check lists them).")
KERNELS_CRASHED = Code(
    "kernels.crashed", "A kernel probe process died or hung",
    "The subprocess running this kernel family was killed by a signal or did not finish in time. The doctor "
    "ran it apart, so the rest of the report stands; the stderr in the evidence shows where it stopped.")

CODES: tuple[Code, ...] = (
    GPU_OK,
    GPU_NVML_LIBRARY_MISSING,
    GPU_DRIVER_NOT_LOADED,
    GPU_DRIVER_LIBRARY_MISMATCH,
    GPU_NVML_NO_PERMISSION,
    GPU_NVML_FAILED,
    GPU_NO_DEVICES,
    GPU_VISIBLE,
    GPU_VISIBLE_NONE,
    GPU_VISIBLE_UNKNOWN_DEVICE,
    GPU_VISIBLE_DUPLICATE,
    GPU_VISIBLE_UUID_VLLM,
    GPU_VISIBLE_MIG,
    GPU_DEVICE_ORDER,
    GPU_MEMORY_HELD,
    GPU_RESET_PENDING,
    GPU_ROW_REMAP_FAILURE,
    GPU_ECC_UNCORRECTED,
    GPU_THROTTLED,
    GPU_POWER_CAPPED,
    GPU_PCIE_LINK_DEGRADED,
    GPU_HOST_LIMITS,
    GPU_MIG_ENABLED,
    GPU_MIG_PENDING,
    ARCH_COVERAGE_COVERED,
    ARCH_COVERAGE_PTX_JIT_ONLY,
    ARCH_COVERAGE_NO_KERNEL_IMAGE,
    ARCH_COVERAGE_OPTIONAL_NO_KERNEL_IMAGE,
    ARCH_COVERAGE_NO_TARGET,
    ARCH_COVERAGE_TARGET_ARCH_INVALID,
    ARCH_COVERAGE_NO_DEVICE_CODE,
    ARCH_COVERAGE_RUNTIME_OK,
    ARCH_COVERAGE_RUNTIME_TOO_OLD,
    ARCH_COVERAGE_UNDEFINED_SYMBOL,
    ARCH_COVERAGE_SYMBOLS_OK,
    CUDA_STACK_OK,
    CUDA_STACK_NO_GPU,
    CUDA_STACK_PROBE_FAILED,
    CUDA_STACK_TORCH_ABSENT,
    CUDA_STACK_TORCH_IMPORT_FAILED,
    CUDA_STACK_TORCH_CPU_BUILD,
    CUDA_STACK_DRIVER_TOO_OLD,
    CUDA_STACK_INIT_FAILED,
    CUDA_STACK_DEVICE_COUNT_MISMATCH,
    CUDA_STACK_ARCH_NOT_COVERED,
    CUDA_STACK_ARCH_PTX_ONLY,
    CUDA_STACK_TRITON_ABSENT,
    CUDA_STACK_TRITON_IMPORT_FAILED,
    CUDA_STACK_TRITON_PTXAS_MISSING,
    CUDA_STACK_TRITON_LIBCUDA_MISSING,
    KERNELS_OK,
    KERNELS_FAMILY_OK,
    KERNELS_NO_GPU,
    KERNELS_NO_CUDA,
    KERNELS_NOT_INSTALLED,
    KERNELS_NOT_IMPORTABLE,
    KERNELS_UNSUPPORTED,
    KERNELS_WRONG_RESULT,
    KERNELS_ERROR,
    KERNELS_OUT_OF_MEMORY,
    KERNELS_CRASHED,
)
