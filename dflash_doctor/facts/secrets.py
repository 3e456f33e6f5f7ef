"""Which environment variables a report may show, and what a secret looks like.

The environment collector gathers variables by this allow-list and drops values shaped like credentials;
the redaction of whole reports (render/redact.py) builds on the same patterns.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["ENV_ALLOW_NAMES", "ENV_ALLOW_PREFIXES", "REDACTED", "SECRET_NAME", "SECRET_VALUE", "env_allow_args",
           "scrub_values"]

ENV_ALLOW_NAMES = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_HOME",
    "CUDA_PATH",
    "PYTHONPATH",
    "PYTHONNOUSERSITE",
    "LD_LIBRARY_PATH",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "TRITON_PTXAS_PATH",
    "TRITON_LIBCUDA_PATH",
    "FLASH_ATTENTION_ARCH",
)
ENV_ALLOW_PREFIXES = ("VLLM_", "NCCL_", "TORCH_", "CUDA_", "FLASH_ATTN", "FLASHINFER_", "PYTORCH_")
SECRET_NAME = r"(KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE)"
SECRET_VALUE = re.compile(
    r"(hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_\-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}"
    r"|AKIA[0-9A-Z]{16}|(?i:bearer)\s+[A-Za-z0-9._\-]{16,}|[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@)"
)
REDACTED = "<redacted>"


def env_allow_args() -> dict[str, object]:
    """The allow-list as the environment probe takes it (the probe cannot import this module)."""
    return {"names": list(ENV_ALLOW_NAMES), "prefixes": list(ENV_ALLOW_PREFIXES), "secret_pattern": SECRET_NAME}


def scrub_values(values: Mapping[str, str]) -> dict[str, str]:
    """Drop any allow-listed value that is shaped like a credential all the same."""
    return {k: (REDACTED if SECRET_VALUE.search(v) else v) for k, v in values.items()}
