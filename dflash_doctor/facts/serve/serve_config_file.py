"""`vllm serve MODEL --config FILE.yaml`, read as vLLM's FlexibleArgumentParser reads it (knowledge.vllm_cli
CONFIG_FILE): the file's keys become flags, put after the model and before the rest of the command, so the
command's own flags win.

The doctor reads the file only where vLLM's own parser cannot run (the fallback, facts.serve.serve_args). YAML is read
with PyYAML's safe_load where the doctor's interpreter has PyYAML (vLLM reads it with the same function); without
it the file is named as not read. The file is a regular file of at most MAX_BYTES, and what it holds is walked
at most MAX_NODES values and MAX_DEPTH deep before it becomes flags (YAML anchors can repeat a mapping without
end)."""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Sequence
from typing import Any

from dflash_doctor.documents.jsondoc import MAX_DEPTH
from dflash_doctor.facts.safefile import read_regular
from dflash_doctor.knowledge.vllm_cli import CONFIG_FILE

__all__ = ["MAX_BYTES", "MAX_NODES", "pull_config_file"]

MAX_BYTES = 1 << 20
"""A serve config of more than 1 MiB is not read (vLLM's own examples are a few hundred bytes)."""
MAX_NODES = 100_000


def pull_config_file(args: Sequence[str], cwd: str | None) -> tuple[list[str], dict[str, Any] | None]:
    """(the arguments with the config file's flags in place of `--config FILE`, facts about the file or None when
    the command has no `--config`). The facts: "path", "loaded" (bool), "error" (vLLM's own refusal: a flag error),
    "unread" (why the doctor could not read it: not vLLM's verdict), "keys" (the file's keys, in order)."""
    words = list(args)
    if "--config" not in words:  # the exact word only, as vLLM: `--config=FILE` is an ordinary flag to argparse
        return words, None
    facts: dict[str, Any] = {"path": None, "loaded": False, "error": None, "unread": None, "keys": []}
    index = words.index("--config")
    if words.count("--config") > 1:
        facts["error"] = "More than one config file specified!"  # vLLM's assertion
        return _without(words, index), facts
    if index == len(words) - 1:
        facts["error"] = "No config file specified! Please check your command-line arguments."
        return words[:index], facts
    path = words[index + 1]
    facts["path"] = path
    rest = _without(words, index)
    extension = path.split(".")[-1]
    if extension not in CONFIG_FILE.value["extensions"]:
        facts["error"] = f"Config file must be of a yaml/yml type. {extension} supplied"
        return rest, facts
    config, problem = _load(path, cwd)
    if problem is not None:
        facts.update(problem)
        return rest, facts
    if not isinstance(config, dict):
        facts["error"] = (f"{path}: holds a YAML {type(config).__name__}, not a mapping of flags "
                          "(vLLM calls config.items() on it)")
        return rest, facts
    facts["loaded"] = True
    facts["keys"] = [str(k) for k in config]
    flags = _as_flags(config)
    model_in_cli = bool(words) and not words[0].startswith("-")
    if model_in_cli and index > 0:
        return [words[0], *flags, *words[1:index], *words[index + 2:]], facts
    return [*flags, *words[:index], *words[index + 2:]], facts


def _without(words: list[str], index: int) -> list[str]:
    return words[:index] + words[index + 2:]


def _load(path: str, cwd: str | None) -> tuple[Any, dict[str, Any] | None]:
    """The file's YAML value, or (None, the facts that say why not)."""
    try:
        yaml: Any = importlib.import_module("yaml")
    except ImportError:
        return None, {"unread": "PyYAML is not installed where the doctor runs, so it cannot read the file as "
                                "vLLM does (yaml.safe_load)"}
    where = os.path.join(cwd, path) if cwd and not os.path.isabs(path) else path
    try:
        data = read_regular(where, MAX_BYTES + 1)
    except OSError as exc:  # UnsafeFile included: str() names the file
        return None, {"error": f"Unable to read the config file at {path}: {exc}"}
    if len(data) > MAX_BYTES:
        return None, {"unread": f"{path} is larger than {MAX_BYTES} bytes, more than the doctor reads"}
    try:
        value = yaml.safe_load(data.decode("utf-8", errors="replace"))
    except Exception as exc:  # noqa: BLE001 - PyYAML's errors (and a recursion) are the file's fault
        return None, {"error": f"{path}: not valid YAML: {type(exc).__name__}: {str(exc)[:300]}"}
    if not _bounded(value):
        return None, {"unread": f"{path} holds more than {MAX_NODES} values or nests deeper than {MAX_DEPTH}"}
    return value, None


def _bounded(value: Any) -> bool:
    """At most MAX_NODES values, MAX_DEPTH deep, counting a value each time it is reached (anchors included)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    seen = 0
    while stack:
        node, depth = stack.pop()
        seen += 1
        if seen > MAX_NODES or depth > MAX_DEPTH:
            return False
        if isinstance(node, dict):
            stack.extend((child, depth + 1) for child in node.values())
        elif isinstance(node, list):
            stack.extend((child, depth + 1) for child in node)
    return True


def _as_flags(config: dict[Any, Any]) -> list[str]:
    """load_config_file's flags: true -> --key, false -> --no-key (0.28.0 and later, where the parser has it; the
    doctor's reading keeps it: False is also the fields' default), a list -> --key item..., a mapping -> --key
    JSON, anything else -> --key str(value)."""
    flags: list[str] = []
    for key, value in config.items():
        name = f"--{key}"
        if isinstance(value, bool):
            flags.append(name if value else f"--no-{key}")
        elif isinstance(value, list):
            if value:
                flags.extend([name, *(str(item) for item in value)])
        elif isinstance(value, dict):
            flags.extend([name, json.dumps(value, default=str)])
        else:
            flags.extend([name, str(value)])
    return flags
