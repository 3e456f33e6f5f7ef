"""Which environment variables a report may show, what a secret looks like, and which secrets the doctor was given.

The environment collector gathers variables by this allow-list and drops values shaped like credentials;
the redaction of whole reports (report/redact.py) builds on the same patterns, and masks by value every secret
found by `argv_secret_values` (a serve command line) and `environ_secret_values` (the environment).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # a type only: the run's head start (facts.head_start) reads the allow-list before the shapes load
    from dflash_doctor.facts.serve.serve_shapes import ServeArgs

__all__ = ["ENV_ALLOW_NAMES", "ENV_ALLOW_PREFIXES", "LIST_SECRET_FLAGS", "REDACTED", "SECRET_FLAGS", "SECRET_NAME",
           "SECRET_VALUE", "argv_secret_spans", "argv_secret_values", "bound_secret_values", "env_allow_args",
           "environ_secret_values", "json_secret_values", "names_a_path", "scrub_values", "secret_flag", "secret_key",
           "secret_nargs"]

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

# vLLM's serve flags that carry a secret, with how many of the words after them its parser gives them (argparse
# nargs): `api_key: list[str] | None` (vllm/entrypoints/openai/cli_args.py FrontendArgs, 0.18.0-0.22.0) becomes
# `nargs="+"` (vllm/engine/arg_utils.py get_kwargs: a list type is nargs "+"), so `--api-key K1 K2` gives two
# keys, every word up to the next flag; `--hf-token` is `nargs="?", const=True` (EngineArgs.add_cli_args): the
# next word, when it is no flag. vLLM's parser takes any unambiguous prefix of a flag (argparse's allow_abbrev):
# `--api-k K` is `--api-key K` to vLLM.
SECRET_FLAGS: dict[str, str] = {"--api-key": "+", "--hf-token": "?"}
LIST_SECRET_FLAGS = frozenset(f for f, nargs in SECRET_FLAGS.items() if nargs == "+")
# vLLM flags (0.20.1's parser) whose names hold a secret's word and whose values are none: counts and booleans.
NOT_SECRET_FLAGS = frozenset({"--allow-credentials", "--no-allow-credentials", "--dbo-decode-token-threshold",
                              "--dbo-prefill-token-threshold", "--long-prefill-token-threshold",
                              "--return-tokens-as-token-ids", "--no-return-tokens-as-token-ids"})
# A command-line flag whose name says it carries a secret: one of its words (split at - _ .) is key(s), token,
# secret(s), password(s), credential(s) or auth (--api-key, --api-keys, --hf-token, --db-password,
# --speculative-config.api_key), or tokens after hf, api, auth, access, bearer, refresh or session (--hf-tokens,
# not --max-num-batched-tokens), unless its last word says the value is where the secret lives (--api-key-file,
# --ssl-keyfile: a path).
SECRET_FLAG_NAME = (r"--(?:[a-z0-9]+[-_.])*?(?:api[-_]?keys?|keys?|token|secrets?|passwords?|passwd|credentials?"
                    r"|auth|authorization|(?:hf|api|auth|access|bearer|refresh|session)[-_.]tokens)(?:[-_.][a-z0-9]+)*")
_SECRET_FLAG_WORD = re.compile(rf"(?i){SECRET_FLAG_NAME}")
_PATH_WORDS = frozenset({"file", "path", "dir", "directory"})
# argparse reads a word that looks like a negative number as a value (vLLM's parser has no such option).
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
# Keys of a JSON object (a flag's JSON value, a config) whose value is a secret. `token` alone, or at the end
# after one of these words: `bos_token`, `pad_token` and `max_tokens` are a tokenizer's and a request's, not secrets.
_SECRET_KEYS = ("api_key", "apikey", "access_key", "secret", "secret_key", "client_secret", "password", "passwd",
                "credential", "credentials", "token", "hf_token", "access_token", "auth_token", "api_token",
                "bearer_token", "refresh_token", "session_token", "authorization")
_TOKEN_OWNERS = ("hf", "access", "auth", "api", "bearer", "refresh", "session")
# A value given as a secret is masked wherever it appears, so a short one would mask ordinary words: below this
# many characters it is masked only where it stands as a flag's value (`argv_secret_spans`, `Redactor.secrets`).
MIN_SECRET_CHARS = 4
# An environment variable is a secret by its name alone (SECRET_NAME), a guess: its value is masked everywhere
# only when it is long enough to be a key and is not a path (SSH_AUTH_SOCK=/tmp/ssh-.../agent.1).
MIN_ENV_SECRET_CHARS = 8
_NOT_SECRET_ENV = frozenset({"TOKENIZERS_PARALLELISM"})


def names_a_path(flag: str) -> bool:
    return re.split(r"[-_.]", flag.lower())[-1] in _PATH_WORDS


def secret_flag(word: str) -> bool:
    """Whether `word` is a flag (no `=value`) whose name says its value is a secret (SECRET_FLAG_NAME)."""
    return _SECRET_FLAG_WORD.fullmatch(word) is not None and not names_a_path(word) \
        and _vllm_flag(word) not in NOT_SECRET_FLAGS


def _vllm_flag(flag: str) -> str:
    """The flag as vLLM's FlexibleArgumentParser reads it: underscores are dashes up to the first dot."""
    head, dot, tail = flag.partition(".")
    return head.replace("_", "-").lower() + dot + tail


def secret_nargs(flag: str) -> str | None:
    """How vLLM's parser would give secrets to `flag` (a word without `=value`), judged from its name alone:
    "+" every word after it up to the next flag, "?" the next word, None: its value is no secret.

    A known secret flag (SECRET_FLAGS) or any prefix of one (`--api-k`, `--hf-tok`: argparse's allow_abbrev; an
    ambiguous one too, which vLLM refuses); a dotted flag's secret key (`-sc.api_key`); and, conservatively, a flag
    whose name says secret (`--api-keys`, `--db-password`): every word after it."""
    name = _vllm_flag(flag)
    if name.startswith("--") and len(name) > 2 and "." not in name:
        for known, nargs in SECRET_FLAGS.items():
            if known.startswith(name):
                return nargs
        if any(known.startswith(name) for known in NOT_SECRET_FLAGS):
            return None
        return "+" if secret_flag(name) else None
    if name.startswith("-") and "." in name and secret_key(name.rsplit(".", 1)[1]):
        return "?"
    return None


def _a_value(word: object) -> bool:
    """Whether argparse would read `word` as a value rather than a flag."""
    return isinstance(word, str) and (not word.startswith("-") or word == "-" or " " in word
                                      or _NEGATIVE_NUMBER.match(word) is not None)


@functools.lru_cache(maxsize=4096)  # asked of every key of a report, most of them many times
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


def argv_secret_spans(words: Sequence[object]) -> list[tuple[int, str]]:
    """(position, secret) for each word of a command line that holds a secret as vLLM's parser would bind it,
    judged from the words alone (`secret_nargs`): the words after a secret flag (`--api-key K1 K2`, `--api-k K`,
    `--hf-token T`), the value of `--flag=V` (the word's text after `=`)."""
    found: list[tuple[int, str]] = []
    at = 0
    while at < len(words):
        word = words[at]
        at += 1
        if not isinstance(word, str) or _a_value(word):
            continue
        flag, has_value, inline = word.partition("=")
        nargs = secret_nargs(flag)
        if nargs is None:
            continue
        if has_value:
            found.append((at - 1, inline))
            continue
        while at < len(words) and _a_value(words[at]):
            found.append((at, str(words[at])))
            at += 1
            if nargs == "?":
                break
    return found


def argv_secret_values(argv: Sequence[str]) -> list[str]:
    """The secrets a command line carries: each secret flag's value (`argv_secret_spans`), and each secret-named
    key's value in a JSON flag value (`--speculative-config '{"api_key": "K"}'`)."""
    words = [str(w) for w in argv]
    found = [value for _, value in argv_secret_spans(words)]
    for word in words:
        flag, has_value, inline = word.partition("=")
        found += _json_words(inline if has_value and flag.startswith("-") else word)
    return [v for v in dict.fromkeys(found) if v]


def bound_secret_values(serve_args: ServeArgs) -> list[str]:
    """The secrets vLLM's own parser found in the serve command: the words it bound to a destination whose name
    says secret (`api_key`, `hf_token`: `secret_key`), as the vllm_args probe reports them (`vllm_parser.bound`:
    each destination's positions among the words after the program, `vllm serve`). The text after `=` of a
    `--flag=V` word."""
    argv, offset = serve_args.argv, len(serve_args.program)
    found: list[str] = []
    for dest, positions in serve_args.vllm_parser.bound.items():
        if not secret_key(dest):
            continue
        for at in positions:
            if 0 <= offset + at < len(argv):
                word = argv[offset + at]
                flag, has_value, inline = word.partition("=")
                found.append(inline if has_value and flag.startswith("-") else word)
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
