"""The live layer's facts (judged by checks.live): what a running vLLM server answers (`live`)."""
