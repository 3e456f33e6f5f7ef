"""How vLLM's `vllm serve` parser reads a command line, per release: the forms the doctor's own reading (the
fallback where vLLM's parser cannot run, facts.serve.serve_args) must read as vLLM does.

Read from the PyPI sdists 0.18.0 .. 0.34.0 (tests/test_release_matrix.py holds the doctor's reading to each
MATRIX release's own `create_speculative_config` and `FlexibleArgumentParser`). Ranges are ``(first, last_read)``.
"""

from __future__ import annotations

from typing import Any

from dflash_doctor.knowledge import Fact

__all__ = ["ABBREVIATIONS", "CONFIG_FILE", "SPEC_FLAGS"]

SPEC_FLAGS: Fact[dict[str, Any]] = Fact(
    value={
        "range": ("0.22.0", "0.34.0"),
        # flag -> (the speculative config's key, EngineArgs' field)
        "flags": {"--spec-method": ("method", "spec_method"), "--spec-model": ("model", "spec_model"),
                  "--spec-tokens": ("num_speculative_tokens", "spec_tokens")},
        "conflict": "{flag} and --speculative-config['{key}'] are mutually exclusive",
    },
    source="vllm/engine/arg_utils.py: EngineArgs.add_cli_args adds `--spec-method`, `--spec-model` and "
    "`--spec-tokens` (from SpeculativeConfig's `method`, `model` and `num_speculative_tokens`; 0.22.0 lines "
    "1463-1467, 0.34.0 lines 1899-1904); EngineArgs.create_speculative_config puts each one given into the "
    "speculative config under its key, first creating the config when --speculative-config was not given, and "
    "raises `ValueError(f\"{flag} and --speculative-config['{key}'] are mutually exclusive\")` when the config "
    "already has that key (0.22.0 lines 1668-1680, 0.34.0 lines 2141-2153; the same loop, byte for byte, in "
    "every release 0.22.0 .. 0.34.0). 0.21.0 and older have neither the flags nor the loop: their parser "
    "refuses them as unrecognized arguments",
    read_from="vllm sdists 0.21.0, 0.22.0, 0.22.1, 0.23.0, 0.24.0, 0.25.1, 0.26.0, 0.27.1, 0.28.0, 0.29.0, "
    "0.30.0, 0.33.0, 0.34.0",
)

CONFIG_FILE: Fact[dict[str, Any]] = Fact(
    value={"range": ("0.18.0", "0.34.0"), "extensions": ("yaml", "yml"), "false_as_no_flag_since": "0.28.0"},
    source="vllm/utils/argparse_utils.py FlexibleArgumentParser.parse_args: `if \"--config\" in args: args = "
    "self._pull_args_from_config(args)` (the exact word only, before underscores become dashes); "
    "_pull_args_from_config asserts one `--config`, raises \"No config file specified!\" when it is the last "
    "word, and puts the file's arguments after the model (or first, without one), before the rest of the "
    "command, so the command's own flags win; load_config_file refuses an extension other than yaml/yml "
    "(\"Config file must be of a yaml/yml type\"), reads it with yaml.safe_load and turns each key into "
    "`--key`: true -> `--key`, false -> nothing (0.18.0 .. 0.27.1), `--no-key` where the parser has it (0.28.0 and later: `elif (no_key := f\"--no-{key}\") in self._option_string_actions`), a list -> `--key "
    "item ...`, a mapping -> `--key JSON`, anything else -> `--key str(value)` (0.34.0 lines 371-372, 516-673; "
    "0.20.1 lines 298-299, 443-590)",
    read_from="vllm sdists 0.20.1, 0.22.1, 0.24.0, 0.26.0, 0.29.0, 0.30.0, 0.33.0, 0.34.0",
)

ABBREVIATIONS: Fact[dict[str, Any]] = Fact(
    value={"range": ("0.18.0", "0.34.0"), "allow_abbrev": True},
    source="no release sets `allow_abbrev` (grep over vllm/ of each sdist finds none), so FlexibleArgumentParser "
    "keeps argparse's default: an unambiguous prefix of a long option is that option (`--max-model 4096` is "
    "`--max-model-len 4096`, `--spec-mod=D` is `--spec-model D`), an ambiguous one is an error",
    read_from="vllm sdists 0.20.1, 0.22.1, 0.24.0, 0.29.0, 0.33.0, 0.34.0; CPython 3.11 argparse",
)
