"""The `vllm serve` command line, read without vLLM: a documented subset of its flags.

Used when vLLM's own parser cannot run in the target interpreter (see `dflash_doctor.facts.probes.vllm_args`);
the facts say which parser read the command. The subset follows vLLM 0.20.1's parser
(`vllm/engine/arg_utils.py` EngineArgs.add_cli_args, `vllm/entrypoints/openai/cli_args.py`,
`vllm/utils/argparse_utils.py` FlexibleArgumentParser):

- `vllm serve MODEL [flags]`, or `python -m vllm.entrypoints.openai.api_server --model MODEL [flags]`;
- `--flag value` and `--flag=value`; underscores in a flag name read as dashes (`--max_model_len`);
- `--speculative-config '{json}'` (alias `-sc`), and `--speculative-config.KEY VALUE` for one key;
- `--spec-method`, `--spec-model`, `--spec-tokens` (vLLM 0.22.0 and later), merged into the speculative config as
  vLLM's `create_speculative_config` merges them, a key given both ways being vLLM's "mutually exclusive" error
  (knowledge.vllm_cli SPEC_FLAGS; `merge_spec_flags`);
- `--config FILE.yaml`: the file's keys as flags, after the model and before the rest (facts.serve.serve_config_file);
- a long flag's unambiguous prefix (`--max-model 4096`), as argparse's allow_abbrev, which no vLLM release turns
  off (knowledge.vllm_cli ABBREVIATIONS); read within the subset, so a prefix that only vLLM's other flags make
  ambiguous is read as the subset's flag;
- `k/m/g/t` (decimal) and `K/M/G/T` (binary) suffixes for `--max-model-len` and
  `--max-num-batched-tokens`; `--max-model-len auto` (or -1) leaves it to the model;
- booleans as `--flag` / `--no-flag`;
- `--api-key K1 [K2 ...]`: a list (`api_key: list[str]` in vllm/entrypoints/openai/cli_args.py FrontendArgs, which
  vllm/engine/arg_utils.py get_kwargs turns into `nargs="+"`): every word up to the next flag is a key, none of
  them the model; `--api-key=K` is one; `--api-k` is `--api-key` (argparse takes a flag's prefix). The keys are
  secrets: the facts say only that the flag was given.

Flags outside the subset are listed as unknown (the subset cannot check them), never rejected.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dflash_doctor.documents.jsondoc import parse_json
from dflash_doctor.facts.secrets import secret_nargs
from dflash_doctor.facts.serve.serve_config_file import pull_config_file
from dflash_doctor.knowledge.vllm_cli import SPEC_FLAGS

__all__ = ["FLAGS", "LIST_FLAGS", "SPEC_FLAG_FIELDS", "SUBSET", "merge_spec_flags", "parse_serve_command",
           "split_program"]

DTYPES = ("auto", "half", "float16", "bfloat16", "float", "float32")


def _int(text: str) -> int:
    value: int = int(text)
    return value


MAX_PARALLEL_SIZE = 65_536
"""--tensor-parallel-size and --pipeline-parallel-size at most this: a world larger than any cluster is a flag
error, and nothing is built per rank from a number past it."""


def _parallel_size(text: str) -> int:
    value = int(text)
    if value > MAX_PARALLEL_SIZE:
        raise ValueError(f"more than {MAX_PARALLEL_SIZE} (a world larger than any cluster)")
    return value


def _human_int(text: str) -> int:
    """vllm/utils/argparse_utils.py human_readable_int: 25.6k = 25600, 1K = 1024."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", text.strip())
    if not match:
        return int(text)
    number, suffix = match.groups()
    if suffix in "kmgt":
        return int(float(number) * 10 ** (3 * ("kmgt".index(suffix) + 1)))
    if "." in number:
        raise ValueError(f"decimals are not allowed with binary suffixes like {suffix}")
    return int(number) * (1 << (10 * ("KMGT".index(suffix) + 1)))


def _human_int_or_auto(text: str) -> int | None:
    if text.strip().lower() in ("auto", "-1"):
        return None
    return _human_int(text)


def _float(text: str) -> float:
    return float(text)


def _dtype(text: str) -> str:
    if text not in DTYPES:
        raise ValueError(f"invalid choice {text!r} (choose from {', '.join(DTYPES)})")
    return text


def _str(text: str) -> str:
    return text


def _json_object(text: str) -> dict[str, Any]:
    value = parse_json(text)  # bounded: a 100,000-deep or 5,000-digit --speculative-config is an error, not a crash
    if not isinstance(value, dict):
        raise ValueError(f"a JSON object is required, got a JSON {type(value).__name__}")  # noqa: TRY004 - argparse-style
    return value


# flag -> (field, converter); None as converter: a boolean (--flag / --no-flag).
FLAGS: dict[str, tuple[str, Callable[[str], Any] | None]] = {
    "--model": ("model", _str),
    "--tensor-parallel-size": ("tensor_parallel_size", _parallel_size),
    "-tp": ("tensor_parallel_size", _parallel_size),
    "--pipeline-parallel-size": ("pipeline_parallel_size", _parallel_size),
    "-pp": ("pipeline_parallel_size", _parallel_size),
    "--max-model-len": ("max_model_len", _human_int_or_auto),
    "--max-num-batched-tokens": ("max_num_batched_tokens", _human_int),
    "--max-num-seqs": ("max_num_seqs", _int),
    "--gpu-memory-utilization": ("gpu_memory_utilization", _float),
    "--dtype": ("dtype", _dtype),
    "--speculative-config": ("speculative_config", _json_object),
    "-sc": ("speculative_config", _json_object),
    "--enable-chunked-prefill": ("enable_chunked_prefill", None),
    "--trust-remote-code": ("trust_remote_code", None),
    "--language-model-only": ("language_model_only", None),
    "--port": ("port", _int),
    "--host": ("host", _str),
    "--tokenizer": ("tokenizer", _str),
    "--skip-tokenizer-init": ("skip_tokenizer_init", None),
    "--attention-backend": ("attention_backend", _str),
    "--kv-cache-dtype": ("kv_cache_dtype", _str),
    "--reasoning-parser": ("reasoning_parser", _str),
    "--reasoning-parser-plugin": ("reasoning_parser_plugin", _str),
    "--tool-call-parser": ("tool_call_parser", _str),
    "--tool-parser-plugin": ("tool_parser_plugin", _str),
    "--enable-auto-tool-choice": ("enable_auto_tool_choice", None),
    "--enforce-eager": ("enforce_eager", None),
    "--spec-method": ("spec_method", _str),
    "--spec-model": ("spec_model", _str),
    "--spec-tokens": ("spec_tokens", _int),
}

# --spec-method/--spec-model/--spec-tokens: flag -> (the speculative config's key, the field), vLLM's own table.
SPEC_FLAG_FIELDS: dict[str, tuple[str, str]] = dict(SPEC_FLAGS.value["flags"])

# Flags whose value is a list (argparse nargs="+"); their values are secrets, never kept in the facts.
LIST_FLAGS: dict[str, str] = {"--api-key": "api_key"}

# What the report calls the documented subset (one name per field).
SUBSET: tuple[str, ...] = tuple(dict.fromkeys([*(f for f in FLAGS if f.startswith("--")), *LIST_FLAGS]))

_DEFAULTS: dict[str, Any] = {
    "tensor_parallel_size": 1,
    "pipeline_parallel_size": 1,
    "max_model_len": None,
    "max_num_batched_tokens": None,
    "max_num_seqs": None,
    "gpu_memory_utilization": None,
    "dtype": "auto",
    "speculative_config": None,
    "enable_chunked_prefill": None,
    "trust_remote_code": False,
    "language_model_only": False,
    "port": 8000,
    "host": None,
    "tokenizer": None,
    "skip_tokenizer_init": False,
    "attention_backend": None,
    "kv_cache_dtype": "auto",
    "reasoning_parser": None,
    "reasoning_parser_plugin": None,
    "tool_call_parser": None,
    "tool_parser_plugin": None,
    "enable_auto_tool_choice": False,
    "enforce_eager": False,
    "spec_method": None,
    "spec_model": None,
    "spec_tokens": None,
}

API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"


def split_program(argv: Sequence[str]) -> tuple[list[str], list[str], str | None]:
    """(program words, the arguments vLLM's serve parser reads, an error) for a serve command line."""
    words = list(argv)
    if len(words) >= 2 and os.path.basename(words[0]) == "vllm" and words[1] == "serve":
        return words[:2], words[2:], None
    if API_SERVER_MODULE in words:
        at = words.index(API_SERVER_MODULE)
        if at >= 1 and words[at - 1] == "-m":
            return words[: at + 1], words[at + 1 :], None
    shown = " ".join(words[:3]) or "(nothing)"
    return [], words, (f"`{shown}` is not a `vllm serve` command: expected `vllm serve MODEL [flags]` or "
                       f"`python -m {API_SERVER_MODULE} --model MODEL [flags]`")


def merge_spec_flags(spec: dict[str, Any] | None, fields: Mapping[str, Any]
                     ) -> tuple[dict[str, Any] | None, list[str], str | None]:
    """vLLM's `EngineArgs.create_speculative_config` (0.22.0 .. 0.34.0, knowledge.vllm_cli SPEC_FLAGS): each of
    --spec-method, --spec-model, --spec-tokens given (not None in `fields`) goes into the speculative config under
    its key, the config made when there was none; a key the config has already is vLLM's ValueError, raised at the
    first such flag. Returns (the merged config, the flags merged, vLLM's error message or None)."""
    merged = dict(spec) if spec is not None else None
    merged_flags: list[str] = []
    for flag, (key, field) in SPEC_FLAG_FIELDS.items():
        value = fields.get(field)
        if value is None:
            continue
        if merged is None:
            merged = {}
        if key in merged:
            return merged, merged_flags, str(SPEC_FLAGS.value["conflict"]).format(flag=flag, key=key)
        merged[key] = value
        merged_flags.append(flag)
    return merged, merged_flags, None


def _abbreviation(flag: str) -> tuple[str | None, list[str]]:
    """argparse's allow_abbrev for a long flag that is not one of the subset's: (the one subset flag it is a prefix
    of, or None; every subset flag it is a prefix of)."""
    if not flag.startswith("--") or len(flag) < 3 or "." in flag:
        return None, []
    names = [*(f for f in FLAGS if f.startswith("--")), *(f"--no-{f[2:]}" for f, (_, c) in FLAGS.items()
                                                         if c is None and f.startswith("--")), *LIST_FLAGS]
    matches = [name for name in names if name.startswith(flag)]
    return (matches[0] if len(matches) == 1 else None), matches


def _normalise(flag: str) -> str:
    """FlexibleArgumentParser reads `--max_model_len` as `--max-model-len`."""
    if flag.startswith("--"):
        head, dot, tail = flag.partition(".")
        return head.replace("_", "-") + dot + tail
    return flag


def parse_serve_command(argv: Sequence[str], cwd: str | None = None) -> dict[str, Any]:
    """Facts about a serve command line, read by the documented subset (`cwd`: where `vllm serve` runs, for a
    relative `--config FILE`). Never raises on bad input."""
    program, given_args, program_error = split_program(argv)
    args, config_file = pull_config_file(given_args, cwd)
    fields: dict[str, Any] = dict(_DEFAULTS)
    fields["model"] = None
    given: list[str] = []
    unknown: list[str] = []
    errors: list[dict[str, str]] = []
    abbreviated: dict[str, str] = {}
    if config_file is not None and config_file["error"]:
        errors.append({"flag": "--config", "message": f"--config: {config_file['error']}"})
    elif config_file is not None and config_file["unread"]:
        unknown.append("--config")
    spec: dict[str, Any] = {"given": False, "raw": None, "value": None, "error": None, "from_flags": [],
                            "conflict": None}
    dotted: dict[str, Any] = {}
    positional: list[str] = []
    index = 0
    while index < len(args):
        word = args[index]
        index += 1
        if not word.startswith("-") or word == "-":
            positional.append(word)
            continue
        flag, has_value, inline = word.partition("=")
        flag = _normalise(flag)
        if flag.startswith(("--speculative-config.", "-sc.")):
            key = flag.split(".", 1)[1]
            value_text = inline if has_value else (args[index] if index < len(args) else None)
            if not has_value:
                index += 1
            if value_text is None:
                errors.append({"flag": flag, "message": f"{flag} expects a value"})
                continue
            try:
                dotted[key] = parse_json(value_text)
            except ValueError:
                dotted[key] = value_text
            given.append("speculative_config")
            continue
        # A prefix of a list flag that reaches into its last word is that flag (argparse's allow_abbrev: `--api-k`;
        # `--api-` could be `--api-server-count` too).
        listed = next((f for f in LIST_FLAGS if f.startswith(flag) and len(flag) > f.rfind("-") + 1), None)
        if listed or secret_nargs(flag) == "+":
            # nargs="+": `--flag=V` is one value; else every word up to the next flag (argparse's greedy match). Any
            # other flag whose values may be secrets (`--api-keys`, `--api`) is read the same way, listed as
            # unknown: its values are never taken for the model.
            count = 1 if has_value else 0
            while not has_value and index < len(args) and not args[index].startswith("-"):
                count += 1
                index += 1
            if not listed:
                unknown.append(flag)
            elif count:
                given.append(LIST_FLAGS[listed])
            else:
                errors.append({"flag": flag, "message": f"{flag} expects at least one value"})
            continue
        if flag not in FLAGS:
            full, matches = _abbreviation(flag)
            if len(matches) > 1:
                errors.append({"flag": flag, "message": f"ambiguous option: {flag} could match {', '.join(matches)}"})
                if not has_value and index < len(args) and not args[index].startswith("-"):
                    index += 1
                continue
            if full is not None and full != flag:
                abbreviated[flag] = full
                flag = full
        negated = flag.startswith("--no-") and f"--{flag[5:]}" in FLAGS and FLAGS[f"--{flag[5:]}"][1] is None
        known = FLAGS.get(f"--{flag[5:]}" if negated else flag)
        if known is None:
            unknown.append(flag)
            # An unknown flag's value (if any) is not a positional argument: skip one word that is not a flag.
            if not has_value and index < len(args) and not args[index].startswith("-"):
                index += 1
            continue
        field, convert = known
        if convert is None:
            if has_value:
                errors.append({"flag": flag, "message": f"{flag} takes no value (got {inline!r})"})
                continue
            fields[field] = not negated
            given.append(field)
            continue
        if not has_value:
            if index >= len(args):
                errors.append({"flag": flag, "message": f"{flag} expects a value"})
                continue
            inline = args[index]
            index += 1
        if field == "speculative_config":
            spec.update(given=True, raw=inline)
        try:
            fields[field] = convert(inline)
        except (ValueError, TypeError, OverflowError) as exc:  # OverflowError: 1e400k is past float's range
            message = f"{flag} {inline[:80]!r}: {exc}"
            if field == "speculative_config":
                spec["error"] = str(exc)
                message = f"{flag} is not a valid JSON object: {exc}"
            errors.append({"flag": flag, "message": message})
            continue
        given.append(field)
    if dotted:
        base = fields["speculative_config"] if isinstance(fields["speculative_config"], dict) else {}
        fields["speculative_config"] = {**base, **dotted}
        spec["given"] = True
    if spec["error"] is None:
        merged, spec["from_flags"], spec["conflict"] = merge_spec_flags(
            fields["speculative_config"] if spec["given"] else None, fields)
        if merged is not None:
            fields["speculative_config"] = merged
            spec.update(given=True, value=merged)
    if positional:
        if len(positional) > 1:
            errors.append({"flag": "MODEL", "message": f"more than one positional argument: {positional}"})
        # vllm/entrypoints/cli/serve.py: `if args.model_tag is not None: args.model = args.model_tag`.
        fields["model"] = positional[0]
    return {
        "parser": "subset",
        "program": program,
        "program_error": program_error,
        "args": list(given_args),
        "fields": fields,
        "flags_given": sorted(set(given)),
        "unknown_flags": unknown,
        "errors": errors,
        "speculative_config": spec,
        "config_file": config_file,
        "abbreviated": abbreviated,
    }
