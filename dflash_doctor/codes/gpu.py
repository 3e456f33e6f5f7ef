"""Codes of the GPU layers: the GPUs (NVML), the CUDA stack (torch, Triton) and the kernels."""

from dflash_doctor.codes import Code

_RESET = ("Stop every process on that GPU, then reset it (`sudo nvidia-smi -r -i N`), or reboot. A reset clears "
          "pending states; it needs root and no process on the GPU.")

CODES = (
    # the GPUs, through NVML in the doctor's own process
    Code("gpu.ok", "The GPUs, as NVML sees them",
         "Lists each GPU with its compute capability (sm_XY), memory and the driver's version, read through NVML "
         "(nvidia-ml-py) without creating a CUDA context."),
    Code("gpu.nvml-library-missing", "No NVIDIA driver library (libnvidia-ml.so.1)",
         "NVML, which ships with the NVIDIA driver, could not be loaded: the dynamic loader finds no "
         "libnvidia-ml.so.1. Either no NVIDIA driver is installed on this machine, or this is a container started "
         "without the GPU runtime (`docker run --gpus all` with the NVIDIA Container Toolkit), which mounts the "
         "driver's libraries and /dev/nvidia* into it. Without it nothing can use a GPU here. On a machine meant to "
         "have no GPU (a CI image build), run the doctor with --no-gpu."),
    Code("gpu.driver-not-loaded", "The NVIDIA kernel module is not loaded",
         "The driver's user-space library is installed but NVML answered NVML_ERROR_DRIVER_NOT_LOADED: the nvidia "
         "kernel module is not running (no /proc/driver/nvidia/version). Typical after installing a driver without "
         "rebooting, with Secure Boot refusing an unsigned module, or with the kernel updated past the module built "
         "for it. Load it (`sudo modprobe nvidia`) or reboot; `dmesg | grep -i nvidia` says why it did not load."),
    Code("gpu.driver-library-mismatch", "The driver library and kernel module versions differ",
         "NVML answered 'Driver/library version mismatch': the user-space driver (libnvidia-ml, libcuda) was "
         "upgraded but the running kernel module is the old one. Every CUDA program fails until the module is "
         "reloaded; reboot (or unload and reload the nvidia modules with nothing using them)."),
    Code("gpu.nvml-no-permission", "No permission to use the GPU devices",
         "NVML answered NVML_ERROR_NO_PERMISSION: this user cannot open /dev/nvidia*. Add the user to the group "
         "that owns them (often `video`), or run in a container given the GPUs."),
    Code("gpu.nvml-failed", "NVML could not be queried",
         "NVML raised an error the doctor has no specific diagnosis for (or nvidia-ml-py is missing from the "
         "doctor's own environment, or NVML did not answer in time). The error is in the evidence; "
         "`nvidia-smi` usually prints the same."),
    Code("gpu.no-devices", "The driver is loaded but lists no GPU",
         "NVML works but reports zero GPUs: the GPUs are not passed into this container or VM, or they fell off the "
         "bus (`dmesg | grep -i xid`)."),
    Code("gpu.visible", "The GPUs vLLM will see",
         "CUDA_VISIBLE_DEVICES (or its absence) resolved against the GPUs NVML lists, with CUDA's rules: which "
         "physical GPU each cuda:N will be, in order."),
    Code("gpu.visible-none", "CUDA_VISIBLE_DEVICES hides every GPU",
         "CUDA_VISIBLE_DEVICES is set, but to a value that leaves no GPU visible (empty, -1, a first entry that "
         "names no GPU, or a repeated entry, which hides them all). torch then sees no CUDA device and `vllm serve` "
         "fails. Unset it or list the GPUs to use."),
    Code("gpu.visible-unknown-device", "CUDA_VISIBLE_DEVICES names a GPU that does not exist",
         "An entry of CUDA_VISIBLE_DEVICES names no GPU on this machine (an index past the last GPU, a UUID no GPU "
         "has, an ambiguous UUID prefix). CUDA stops reading the list there: that entry and every one after it "
         "are ignored, so fewer GPUs are visible than listed, and a --tensor-parallel-size sized for the list "
         "fails."),
    Code("gpu.visible-duplicate", "CUDA_VISIBLE_DEVICES lists a GPU twice",
         "A repeated entry makes CUDA (and torch's NVML-based count, which mirrors it) see no device at all, so "
         "`vllm serve` finds no GPU. List each GPU once."),
    Code("gpu.visible-uuid-vllm", "vLLM cannot map these CUDA_VISIBLE_DEVICES entries",
         "vLLM maps each CUDA_VISIBLE_DEVICES entry to a physical GPU for its NVML queries. Up to 0.23 it calls "
         "int() on the entry, so GPU UUIDs raise ValueError at start-up; from 0.24 it looks a UUID up with "
         "nvmlDeviceGetHandleByUUID, which needs the whole UUID, so the prefixes CUDA accepts still fail. Use the "
         "indices (the fix shows them) or whole UUIDs with vLLM 0.24 or later."),
    Code("gpu.visible-mig", "CUDA_VISIBLE_DEVICES names MIG devices",
         "The entries are MIG device ids. A CUDA process enumerates only one MIG device, so vLLM runs on one MIG "
         "slice, without tensor parallelism across slices."),
    Code("gpu.device-order", "GPU indices may differ between CUDA and nvidia-smi",
         "The machine has GPUs of different models and CUDA_DEVICE_ORDER is not PCI_BUS_ID. CUDA numbers devices "
         "fastest first by default, nvidia-smi and NVML by PCI bus id, so an index in CUDA_VISIBLE_DEVICES may "
         "select another GPU than the nvidia-smi row of that number. Set CUDA_DEVICE_ORDER=PCI_BUS_ID (vLLM warns "
         "about the same)."),
    Code("gpu.memory-held", "Other processes hold memory on a GPU vLLM will use",
         "Processes other than the doctor hold memory on a visible GPU. vLLM reserves a fraction of the GPU's "
         "total memory (--gpu-memory-utilization, default 0.92 in vLLM 0.20) and refuses to start when less than "
         "that is free ('Free memory on device ... is less than desired GPU memory utilization'); with less, the "
         "KV cache is smaller. Stop them, pick other GPUs, or lower --gpu-memory-utilization."),
    Code("gpu.reset-pending", "A GPU needs a reset: memory pages or rows are pending retirement",
         "NVML reports retired pages pending (before Ampere) or a row remapping pending (Ampere and later): the "
         "GPU found uncorrectable memory errors and will retire the bad memory at its next reset. Until then it is "
         "running on memory known to be bad. " + _RESET),
    Code("gpu.row-remap-failure", "A GPU's row remapping has failed",
         "NVML reports that a row remapping failed: the GPU has no spare rows left for its bad memory. NVIDIA "
         "treats this as a reason to replace the GPU; take it out of service."),
    Code("gpu.ecc-uncorrected", "Uncorrected ECC errors since the driver loaded",
         "The volatile uncorrected ECC error count is not zero: the GPU's memory returned data it could not "
         "correct since the driver was last loaded. Work that touched it may have been corrupted. Watch the "
         "count (`nvidia-smi -q -d ECC`), and reset or service the GPU if it grows."),
    Code("gpu.mig-enabled", "MIG is enabled on a GPU vLLM will use",
         "Multi-Instance GPU mode splits the GPU into MIG devices, and a CUDA process enumerates only one of them. "
         "vLLM then runs on one slice, with the slice's memory, and cannot use tensor parallelism across slices. "
         "Disable MIG (`sudo nvidia-smi -i N -mig 0`, then reset) to serve on the whole GPU."),
    Code("gpu.mig-pending", "A MIG mode change is waiting for a GPU reset",
         "The MIG mode set for the GPU differs from the one in effect; it changes at the next GPU reset. " + _RESET),
    # the CUDA stack, in the target interpreter
    Code("cuda-stack.ok", "torch's CUDA build works with this driver and these GPUs",
         "torch initialized CUDA, sees the GPUs the driver and CUDA_VISIBLE_DEVICES give it, was compiled for "
         "each one's architecture (SASS), and Triton finds ptxas and libcuda."),
    Code("cuda-stack.no-gpu", "No GPU: the CUDA stack was not checked",
         "The GPU check found no usable NVIDIA driver or GPU (its finding says which), so there is nothing for "
         "torch's CUDA build to run on."),
    Code("cuda-stack.probe-failed", "The CUDA-stack probe did not finish",
         "The subprocess that imports torch and initializes CUDA in the target was killed by a signal, timed out, "
         "or printed no facts. The stderr in the evidence says where it stopped; a crash inside `import torch` or "
         "CUDA initialization is itself the problem."),
    Code("cuda-stack.torch-absent", "torch is not installed in the target",
         "There is no torch to check against the GPU. vLLM needs it; the distributions check reports what "
         "requires it."),
    Code("cuda-stack.torch-import-failed", "`import torch` fails in the target",
         "torch is installed but importing it raises; the exception is in the evidence. Reinstall torch."),
    Code("cuda-stack.torch-cpu-build", "torch is a CPU-only (or ROCm) build",
         "torch.version.cuda is None: this torch cannot use NVIDIA GPUs (a CPU wheel, often pulled from PyPI on "
         "a platform or by a resolver that chose it). Install a CUDA build from the PyTorch index for a CUDA the "
         "driver supports."),
    Code("cuda-stack.driver-too-old", "The driver is too old for torch's CUDA",
         "torch was built against a CUDA whose major version the installed driver does not support, so CUDA "
         "initialization fails ('The NVIDIA driver on your system is too old', cudaErrorInsufficientDriver). Two "
         "ways out: install a torch built for a CUDA the driver supports (the PyTorch index has one per CUDA "
         "version; vLLM pins the torch version, and its own wheel must match that CUDA too), or install a newer "
         "driver (at least the one the CUDA release notes list for torch's CUDA)."),
    Code("cuda-stack.init-failed", "torch cannot initialize CUDA",
         "torch.cuda.is_available() is False (or raises) although the driver lists GPUs; torch's own message and "
         "cuInit's error are in the evidence (common: a container without /dev/nvidia-uvm, a GPU in a bad state, "
         "CUDA_VISIBLE_DEVICES hiding every GPU)."),
    Code("cuda-stack.device-count-mismatch", "torch sees a different number of GPUs than expected",
         "torch.cuda.device_count() differs from the number of GPUs NVML lists after applying CUDA_VISIBLE_DEVICES: "
         "a GPU is hidden from CUDA (cgroup device rules, a partly passed-through container) or the variable is "
         "read differently than intended."),
    Code("cuda-stack.arch-not-covered", "torch has no kernels for a GPU's architecture",
         "torch.cuda.get_arch_list() holds no SASS for the GPU's compute capability (same major, lower or equal "
         "minor) and no PTX it could JIT: every kernel launch fails with 'no kernel image is available for "
         "execution on the device'. Install a torch build whose arch list covers the GPU (e.g. sm_120 needs a CUDA "
         "12.8+ build), or build torch with TORCH_CUDA_ARCH_LIST including it."),
    Code("cuda-stack.arch-ptx-only", "torch covers a GPU only through PTX JIT",
         "torch was compiled for no SASS that runs on this GPU, only PTX the driver can JIT-compile: the first "
         "launch of every kernel compiles it (slow start), and a driver older than torch's CUDA cannot JIT that "
         "PTX at all (CUDA_ERROR_UNSUPPORTED_PTX_VERSION). Prefer a torch build with SASS for this arch."),
    Code("cuda-stack.triton-absent", "Triton is not installed",
         "torch's compiler (torch.compile, used by vLLM) and vLLM's Triton kernels need Triton on NVIDIA GPUs. "
         "Install the Triton version torch requires."),
    Code("cuda-stack.triton-import-failed", "`import triton` fails in the target",
         "Triton is installed but importing it raises; the exception is in the evidence. torch.compile and vLLM's "
         "Triton kernels fail the same way. Reinstall the Triton version torch requires."),
    Code("cuda-stack.triton-ptxas-missing", "Triton cannot find ptxas",
         "Triton compiles kernels to PTX and then runs ptxas (its bundled copy, or $TRITON_PTXAS_PATH) to make "
         "GPU code. It found none that runs, so every Triton kernel fails to compile. The evidence lists where it "
         "looked; reinstall Triton, or point TRITON_PTXAS_PATH at a CUDA toolkit's ptxas."),
    Code("cuda-stack.triton-libcuda-missing", "Triton cannot find libcuda.so.1",
         "Triton links its launcher against libcuda.so.1, found through $TRITON_LIBCUDA_PATH, `ldconfig -p` or "
         "LD_LIBRARY_PATH. None has it, so every Triton kernel launch fails ('libcuda.so cannot found!'). Run "
         "`sudo ldconfig` after installing the driver, or set TRITON_LIBCUDA_PATH to the directory holding it."),
    # the kernels, in the target interpreter, one process per family
    Code("kernels.ok", "The kernels compute the right numbers on this GPU",
         "Each kernel that runs here was compared with an fp32 reference computed on the same GPU from the same "
         "inputs (a small causal problem, head sizes 128 and 64, fp16 and bf16), and stayed within the tolerance "
         "of 2 units in the last place of its dtype at the problem's scale. First-run (compile) and warm times are "
         "in the evidence."),
    Code("kernels.family-ok", "One kernel family computes the right numbers",
         "Every case of this kernel family stayed within tolerance; the cases, errors and times are in the "
         "evidence."),
    Code("kernels.no-gpu", "No GPU: the kernels were not run",
         "The GPU check found no usable driver or GPU (its finding says which), so no kernel could run; fix that "
         "first."),
    Code("kernels.no-cuda", "torch cannot use CUDA here: the kernels were not run",
         "The CUDA-stack check found that torch cannot run on the GPU (its finding says why)."),
    Code("kernels.not-installed", "A kernel package is not installed: its kernels were not run",
         "The package this family comes from (flash-attn, vLLM) is not installed in the target, so there is "
         "nothing of it to run. vLLM does not need flash-attn on CUDA: it uses its bundled flash-attention."),
    Code("kernels.not-importable", "A kernel package is installed but does not import",
         "The package is installed but the import the stack makes fails; the import check's finding explains why. "
         "Its kernels were not run."),
    Code("kernels.unsupported", "A kernel family declines this GPU or dtype by design",
         "The kernel refuses this compute capability or dtype with its own message (e.g. flash-attn v2 needs "
         "Ampere or newer; torch's SDPA flash backend has no kernel for some archs). That is a limit of the "
         "kernel, not a broken install; vLLM picks another backend there."),
    Code("kernels.wrong-result", "A kernel computes wrong numbers on this GPU",
         "The kernel ran but its output differs from the fp32 reference by more than the tolerance (or is not "
         "finite). A kernel built for another arch or CUDA, a miscompiled Triton kernel, or a broken GPU gives "
         "this. vLLM would serve wrong tokens without an error."),
    Code("kernels.error", "A kernel fails on this GPU",
         "The kernel raised a CUDA error (e.g. 'no kernel image is available for execution on the device', an "
         "illegal memory access) or another exception; the text is in the evidence."),
    Code("kernels.out-of-memory", "A kernel ran out of GPU memory",
         "The small test problem (a few MB) could not allocate GPU memory: the GPU is full, usually because other "
         "processes hold it (the GPU check lists them)."),
    Code("kernels.crashed", "A kernel probe process died or hung",
         "The subprocess running this kernel family was killed by a signal or did not finish in time. The doctor "
         "ran it apart, so the rest of the report stands; the stderr in the evidence shows where it stopped."),
)
