"""The serve layer's facts (judged by checks.serve and checks.models): the `vllm serve` command, parsed by
vLLM's parser in the target or by the doctor's documented subset (`serve`, `serve_args`, `serve_config_file`),
and what the installed vLLM's source says of DFlash, its parsers and its environment (`vllm_pairing`,
`vllm_environ`)."""
