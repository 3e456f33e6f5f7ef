"""The GPU layer's facts (judged by checks.gpu): NVML's driver and devices (`nvml`), the GPU architectures and
runtime versions the stack's compiled libraries need (`archs`), and the CUDA stack and kernels run in the
target (`cuda`)."""
