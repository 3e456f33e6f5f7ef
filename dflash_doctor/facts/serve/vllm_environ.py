"""Which environment variables the installed vLLM refuses or warns about, read from its source (AST, never an
import): what its own `validate_environ` checks before `create_engine_config` builds anything.

- where the check lives: `vllm/envs.py validate_environ` (0.18 to 0.30), `vllm/platforms/interface.py
  Platform.validate_environ` (0.33 on), called by `EngineArgs.create_engine_config` with
  `--fail-on-environ-validation`'s value (`hard_fail`);
- `known`: the keys of `envs.environment_variables` (a `VLLM_*` variable outside them is "Unknown vLLM
  environment variable detected": a warning, an error under `hard_fail`);
- `removed`: `envs.removed_environment_variables` (0.34 on), name -> migration hint (setting one raises
  "NAME has been removed. HINT");
- `refused_values`: a variable the function tests by name and refuses unless it has one of a few values
  (0.34.0: `VLLM_USE_V2_MODEL_RUNNER` other than "1" raises "... is no longer supported: Model Runner V1 has
  been removed"), with the message's text.

The facts land in the `vllm_dflash` section under "environ" (facts.serve.serve.read_vllm_dflash); None where the
source could not be read or has no `validate_environ`."""

from __future__ import annotations

import ast
from typing import Any

from dflash_doctor.facts.serve.vllm_pairing import VllmSources, assigned_value

__all__ = ["MAX_KNOWN", "read_vllm_environ"]

MAX_KNOWN = 4096  # envs.environment_variables held about 400 names in 0.34.0
MAX_REMOVED = 256
MAX_TEXT = 1000
# Where each release keeps the check, newest first (arg_utils.py create_engine_config calls it).
PLACES = (("platforms/interface.py", "Platform.validate_environ"), ("envs.py", "validate_environ"))


def read_vllm_environ(sources: VllmSources) -> dict[str, Any] | None:
    place = _validator(sources)
    envs = sources.tree("envs.py")
    if place is None or envs is None:
        return None
    rel, qualname, function = place
    known = _dict_keys(assigned_value(envs, "environment_variables"))
    removed_node = assigned_value(envs, "removed_environment_variables")
    removed = _dict_texts(removed_node) if removed_node is not None else None
    return {"validated_by": f"vllm/{rel} {qualname}", "known": known[:MAX_KNOWN] if known is not None else None,
            "removed": removed, "refused_values": _refused_values(function),
            "unknown_prefix": "VLLM_" if _checks_prefix(function) else None}


def _validator(sources: VllmSources) -> tuple[str, str, ast.FunctionDef] | None:
    for rel, qualname in PLACES:
        tree = sources.tree(rel)
        if tree is None:
            continue
        *owners, name = qualname.split(".")
        body: list[ast.stmt] = tree.body
        for owner in owners:
            body = next((n.body for n in body if isinstance(n, ast.ClassDef) and n.name == owner), [])
        found = next((n for n in body if isinstance(n, ast.FunctionDef) and n.name == name), None)
        if found is not None:
            return rel, qualname, found
    return None


def _dict_keys(node: ast.expr | None) -> list[str] | None:
    if not isinstance(node, ast.Dict):
        return None
    return [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]


def _dict_texts(node: ast.expr) -> dict[str, str] | None:
    if not isinstance(node, ast.Dict):
        return None
    out: dict[str, str] = {}
    for key, value in zip(node.keys, node.values):
        if isinstance(key, ast.Constant) and isinstance(key.value, str) and len(out) < MAX_REMOVED:
            out[key.value] = _text(value)
    return out


def _text(node: ast.expr) -> str:
    """A string literal or f-string as its text, `{...}` where a value is formatted in."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value[:MAX_TEXT]
    if isinstance(node, ast.JoinedStr):
        parts = [v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "{" + (
            v.value.id if isinstance(v, ast.FormattedValue) and isinstance(v.value, ast.Name) else "...") + "}"
            for v in node.values]
        return "".join(parts)[:MAX_TEXT]
    return ""


def _refused_values(function: ast.FunctionDef) -> list[dict[str, Any]]:
    """`if env == "NAME": if value != "V": raise E(f"...")`: NAME is refused unless it is V."""
    out: list[dict[str, Any]] = []
    for node in ast.walk(function):
        if not isinstance(node, ast.If):
            continue
        name = _compared(node.test, ast.Eq)
        if name is None:
            continue
        for inner in node.body:
            if not isinstance(inner, ast.If):
                continue
            accepted = _compared(inner.test, ast.NotEq)
            raised = next((s for s in inner.body if isinstance(s, ast.Raise)), None)
            if accepted is None or raised is None:
                continue
            call = raised.exc
            message = _text(call.args[0]) if isinstance(call, ast.Call) and call.args else ""
            out.append({"name": name, "accepted": [accepted], "message": message})
    return out


def _compared(test: ast.expr, op: type[ast.cmpop]) -> str | None:
    """`x == "TEXT"` (op Eq) or `x != "TEXT"` (op NotEq): the text."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], op):
        right = test.comparators[0]
        if isinstance(right, ast.Constant) and isinstance(right.value, str):
            return right.value
    return None


def _checks_prefix(function: ast.FunctionDef) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "startswith"
               and n.args and isinstance(n.args[0], ast.Constant) and n.args[0].value == "VLLM_"
               for n in ast.walk(function))
