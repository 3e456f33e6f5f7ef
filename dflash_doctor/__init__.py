"""dflash-doctor: finds what would break `vllm serve` with DFlash speculative decoding, before it runs."""

__version__ = "0.1.0"
