"""The fabric layer's facts (judged by checks.fabric): NVML's view of the GPUs a tensor-parallel serve spans,
the peer-copy and NCCL probes (`fabric`), and the machine around them (`machine`)."""
