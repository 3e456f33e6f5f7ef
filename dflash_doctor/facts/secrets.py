"""Which environment variables a report may show, what a secret looks like, and which secrets the doctor was given.

The environment collector gathers variables by this allow-list and drops values shaped like credentials;
the redaction of whole reports (render/redact.py) builds on the same patterns, and masks by value every secret
found by `argv_secret_values` (a serve command line) and `environ_secret_values` (the environment).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["ENV_ALLOW_NAMES", "ENV_ALLOW_PREFIXES", "LIST_SECRET_FLAGS", "REDACTED", "SECRET_NAME", "SECRET_VALUE",
           "argv_secret_values", "env_allow_args", "environ_secret_values", "json_secret_values", "names_a_path",
           "scrub_values", "secret_flag", "secret_key"]

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


# ------------------------------------------------------------------------------- secrets the doctor was given

# A command-line flag whose name says it carries a secret: one of its words (split at - _ .) is key, token,
# secret, password, credential or auth (--api-key, --hf-token, --db-password, --speculative-config.api_key),
# unless its last word says the value is where the secret lives (--api-key-file, --ssl-keyfile: a path).
SECRET_FLAG_NAME = (r"--(?:[a-z0-9]+[-_.])*?(?:api[-_]?key|key|token|secret|password|passwd|credentials?|auth"
                    r"|authorization)(?:[-_.][a-z0-9]+)*")
_SECRET_FLAG_WORD = re.compile(rf"(?i){SECRET_FLAG_NAME}")
_PATH_WORDS = frozenset({"file", "path", "dir", "directory"})
# Secret flags that take a list: vLLM's `api_key: list[str] | None` (vllm/entrypoints/openai/cli_args.py,
# FrontendArgs, 0.18.0-0.22.0) becomes `nargs="+"` (vllm/engine/arg_utils.py get_kwargs: a list type is
# nargs "+"), so `--api-key K1 K2` gives two keys, and every word after it up to the next flag is one.
LIST_SECRET_FLAGS = frozenset({"--api-key"})
# Keys of a JSON object (a flag's JSON value, a config) whose value is a secret. `token` alone, or at the end
# after one of these words: `bos_token`, `pad_token` and `max_tokens` are a tokenizer's and a request's, not secrets.
_SECRET_KEYS = ("api_key", "apikey", "access_key", "secret", "secret_key", "client_secret", "password", "passwd",
                "credential", "credentials", "token", "hf_token", "access_token", "auth_token", "api_token",
                "bearer_token", "refresh_token", "session_token", "authorization")
_TOKEN_OWNERS = ("hf", "access", "auth", "api", "bearer", "refresh", "session")
# A value given as a secret is masked wherever it appears, so a short one would mask ordinary words: below this
# many characters it is masked only where it stands as a flag's value (`argv_secrets`, `Redactor.secrets`).
MIN_SECRET_CHARS = 4
# An environment variable is a secret by its name alone (SECRET_NAME), a guess: its value is masked everywhere
# only when it is long enough to be a key and is not a path (SSH_AUTH_SOCK=/tmp/ssh-.../agent.1).
MIN_ENV_SECRET_CHARS = 8
_NOT_SECRET_ENV = frozenset({"TOKENIZERS_PARALLELISM"})


def names_a_path(flag: str) -> bool:
    return re.split(r"[-_.]", flag.lower())[-1] in _PATH_WORDS


def secret_flag(word: str) -> bool:
    """Whether `word` is a flag (no `=value`) whose value, the next word, is a secret."""
    return _SECRET_FLAG_WORD.fullmatch(word) is not None and not names_a_path(word)


def _secret_valued(flag: str) -> bool:
    """`--hf-token`, and a dotted flag's secret key (`-sc.api_key`, `--speculative-config.api_key`)."""
    return secret_flag(flag) or (flag.startswith("-") and "." in flag and secret_key(flag.rsplit(".", 1)[1]))


def secret_key(key: str) -> bool:
    """Whether a JSON object's `key` names a secret (`api_key`, `hf_token`, `password`; not `bos_token`)."""
    words = re.split(r"[-_.]", key.lower())
    if "_".join(words[-2:]) in _SECRET_KEYS and (words[-1] != "token" or len(words) == 1 or words[-2] in _TOKEN_OWNERS):
        return True
    return words[-1] in _SECRET_KEYS and words[-1] != "token" or words == ["token"]


def json_secret_values(value: Any, depth: int = 0) -> list[str]:
    """Every string (or number) under a secret-named key of JSON-like `value`, at any depth."""
    found: list[str] = []
    if depth > 64:
        return found
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str) and secret_key(key) and isinstance(item, (str, int, float)) \
                    and not isinstance(item, bool):
                found.append(str(item))
            elif isinstance(item, (Mapping, list)):
                found += json_secret_values(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            found += json_secret_values(item, depth + 1)
    return found


def _json_words(word: str) -> list[str]:
    text = word.strip()
    if not text.startswith(("{", "[")) or len(text) > 1_000_000:
        return []
    try:
        return json_secret_values(json.loads(text))
    except (ValueError, RecursionError):
        return []


def argv_secret_values(argv: Sequence[str]) -> list[str]:
    """The secrets a command line carries: each secret flag's value (`--hf-token V`, `--hf-token=V`; every value
    of a list flag: `--api-key K1 K2`), and each secret-named key's value in a JSON flag value
    (`--speculative-config '{"api_key": "K"}'`, `-sc.api_key K`)."""
    found: list[str] = []
    words = [str(w) for w in argv]
    at = 0
    while at < len(words):
        word = words[at]
        at += 1
        flag, has_value, inline = word.partition("=")
        if flag.startswith("-"):
            if has_value:
                if _secret_valued(flag):
                    found.append(inline)
                else:
                    found += _json_words(inline)
                continue
            if _secret_valued(flag):
                norm = flag.replace("_", "-")
                while at < len(words) and not words[at].startswith("-"):
                    found.append(words[at])
                    at += 1
                    if norm not in LIST_SECRET_FLAGS:
                        break
            continue
        found += _json_words(word)
    return [v for v in dict.fromkeys(found) if v]


def environ_secret_values(environ: Mapping[str, str], names: Iterable[str] = ()) -> list[str]:
    """Values of the environment that are secrets: every variable named in `names` (the doctor was told it holds
    a key: `--api-key-env`), and every one whose name says secret (VLLM_API_KEY, HF_TOKEN, OPENAI_API_KEY) that is
    long enough to be one and not a path."""
    told = [environ[n] for n in names if environ.get(n)]
    named = re.compile(SECRET_NAME, re.IGNORECASE)
    guessed = [v for n, v in environ.items() if n not in _NOT_SECRET_ENV and named.search(n)
               and len(v) >= MIN_ENV_SECRET_CHARS and not v.startswith(("/", "unix:")) and not v.isdigit()]
    return list(dict.fromkeys(told + guessed))
