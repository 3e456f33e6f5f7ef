"""The Python layer's facts (judged by checks.python): the target interpreter (`interpreter`), its environment
(`environment`: target, sys_path, distributions, resolution) and the rules for reading it (`envfacts`), the
real imports tried in it (`imports`), the kernel packages' files outside their distributions (`kernel_files`),
and the installed vLLM's imports of them, read from its source (`vllm_scan`, `vllm_source`,
`vllm_serve_path`)."""
