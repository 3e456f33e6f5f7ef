"""The user's own command line with one thing changed: every remediation that edits a command is that command,
quoted for the shell, not a generic one (the serve, drafter and fabric checks share these)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from dflash_doctor.checks.remedy import join

__all__ = ["with_flag", "with_spec", "with_switch", "without_flag"]


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def without_flag(argv: Sequence[str], flag: str, takes_value: bool) -> list[str]:
    """`argv` without `flag` (and its value when it takes one, given as a separate word)."""
    out: list[str] = []
    skip = False
    for word in argv:
        if skip:
            skip = False
            continue
        if word == flag:
            skip = takes_value
            continue
        if word.startswith(flag + "="):
            continue
        out.append(word)
    return out


def with_flag(argv: Sequence[str], flag: str, value: Any) -> str:
    """The user's own serve command with `flag` set to `value` (replaced where given, else appended),
    quoted for the shell: a remediation to paste, not a fragment to splice in by hand."""
    return join([*without_flag(argv, flag, takes_value=True), flag, str(value)])


def with_switch(argv: Sequence[str], flag: str) -> str:
    """The user's own command with a boolean `flag` added once, quoted for the shell."""
    words = [w for w in argv if w != flag]
    return join([*words, flag])


_SPEC_FLAGS = ("--speculative-config", "-sc")
# The flags vLLM 0.22.0 and later merge into the speculative config (knowledge.vllm_cli SPEC_FLAGS).
_SPEC_KEY_FLAGS = ("--spec-method", "--spec-model", "--spec-tokens")


def _is_spec_flag(word: str) -> bool:
    """--speculative-config in any spelling vLLM reads: `-sc`, underscores, `=VALUE`, and `.KEY` for one key; and
    --spec-method/--spec-model/--spec-tokens, whose keys the replacing config holds (vLLM refuses a key given
    both ways). A long flag's unambiguous prefix is that flag, as argparse reads it."""
    flag = word.partition("=")[0]
    head = flag.partition(".")[0]
    name = head.replace("_", "-") if head.startswith("--") else head
    if name in _SPEC_FLAGS or name in _SPEC_KEY_FLAGS:
        return True
    if not name.startswith("--spec") or "." in flag:
        return False
    return len([f for f in (*_SPEC_FLAGS, *_SPEC_KEY_FLAGS) if f.startswith(name)]) == 1


def with_spec(argv: Sequence[str], spec: Mapping[str, Any]) -> str:
    """The user's own serve command with its speculative config replaced by `spec` (every --speculative-config,
    -sc, --speculative-config.KEY and --spec-method/--spec-model/--spec-tokens given is dropped, one
    --speculative-config JSON appended), quoted for the shell."""
    words = list(argv)
    out: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if _is_spec_flag(word):
            i += 1 if "=" in word else 2
            continue
        out.append(word)
        i += 1
    out += ["--speculative-config", json.dumps(dict(spec))]
    return join(out)
