"""What is gathered: the collectors (one module per group of fact sections, in-process or through a probe
in the target), the collector registry (`sections`), the stdlib-only probe scripts (`probes/`), and the
readers of files the stack ships (`elf/`, `modelfiles/`, `vllm_scan`, `serve_args`)."""
