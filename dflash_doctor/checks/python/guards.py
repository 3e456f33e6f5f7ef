"""Judges whether a guarded import survives the exception the target really raises.

Pure functions over facts: an import site from `vllm_scan` (its guards, innermost first), whether
each module resolves in the target (`find_spec`, as the environment probe saw it), and the exception
the import raised there (its class and MRO names). We evaluate the guard the way vLLM would on a CUDA
machine: `find_spec(...)` by the recorded resolution, `current_platform.is_cuda()` true and the other
`is_*()` platform tests false; anything else is unknown.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from typing import Any

from dflash_doctor.facts.pysource import SourceError, parse_expression
from dflash_doctor.facts.python.vllm_source_shapes import Guard, ImportSite
from dflash_doctor.shape import frozen_dataclass

__all__ = ["Verdict", "evaluate_test", "judge_site"]

# What `current_platform.<name>()` returns on an NVIDIA GPU box.
CUDA_PLATFORM = {"is_cuda": True, "is_cuda_alike": True, "is_rocm": False, "is_cpu": False, "is_xpu": False,
                 "is_tpu": False, "is_hpu": False, "is_neuron": False, "is_out_of_tree": False}


@frozen_dataclass(frozen=True)
class Verdict:
    reached: bool | None
    """Whether the import statement runs on a CUDA box (None: cannot tell from the source)."""
    caught_by: Guard | None
    """The guard that catches the exception, if one does (as the scan recorded it)."""
    outcome: str
    """"ok" (imports), "skipped" (guard keeps it from running), "caught", "raises", "maybe-raises"."""


def evaluate_test(test: str, resolves: Mapping[str, bool]) -> bool | None:
    """Evaluate an `if` test for a CUDA box; None where it depends on anything else."""
    try:
        tree = parse_expression(test).body
    except SourceError:
        return None
    return _eval(tree, resolves)


def _spec_arg(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name in ("find_spec", "_has_module", "has_module", "is_installed") and isinstance(node.args[0].value, str):
            return str(node.args[0].value)
    return None


def _found(module: str, resolves: Mapping[str, bool]) -> bool | None:
    # find_spec of a dotted name imports the parent; we record top-level resolution only.
    return resolves.get(module.split(".", 1)[0]) if "." not in module else resolves.get(module)


def _eval(node: ast.AST, resolves: Mapping[str, bool]) -> bool | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _eval(node.operand, resolves)
        return None if inner is None else not inner
    if isinstance(node, ast.BoolOp):
        values = [_eval(v, resolves) for v in node.values]
        if isinstance(node.op, ast.And):
            if False in values:
                return False
            return None if None in values else True
        if True in values:
            return True
        return None if None in values else False
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.comparators[0], ast.Constant):
        module = _spec_arg(node.left)
        if module is not None and node.comparators[0].value is None:
            found = _found(module, resolves)
            if found is None:
                return None
            return found if isinstance(node.ops[0], ast.IsNot) else (not found if isinstance(node.ops[0], ast.Is) else None)
        return None
    if isinstance(node, ast.Call):
        module = _spec_arg(node)
        if module is not None:
            return _found(module, resolves)
        name = node.func.attr if isinstance(node.func, ast.Attribute) else ""
        if name in CUDA_PLATFORM:
            return CUDA_PLATFORM[name]
    return None


def _catches(guard: Guard, exception_mro: Sequence[str]) -> bool:
    return any(name in exception_mro for name in guard.catches)


def judge_site(site: ImportSite | Mapping[str, Any], exception_mro: Sequence[str] | None,
               resolves: Mapping[str, bool]) -> Verdict:
    """What happens at this import site on a CUDA box, given the exception its import raises (None: ok).

    `site` is one of a vllm_source or vllm_surface section's sites (or a scan's own, as `vllm_scan` writes it).
    A process killed by a signal has no exception to catch: pass exception_mro=["<signal>"].
    """
    if not isinstance(site, ImportSite):
        site = ImportSite.from_json(site, "import site")
    reached: bool | None = True
    for guard in site.guards:  # innermost first
        if guard.kind == "type-checking":
            return Verdict(False, None, "skipped")
        if guard.kind == "if":
            value = evaluate_test(guard.test or "", resolves)
            taken = value if guard.branch != "orelse" else (None if value is None else not value)
            if taken is False:
                return Verdict(False, None, "skipped")
            if taken is None:
                reached = None
    if exception_mro is None:
        return Verdict(reached, None, "ok")
    for guard in site.guards:
        if guard.kind in ("try", "suppress") and _catches(guard, exception_mro):
            return Verdict(reached, guard, "caught")
    return Verdict(reached, None, "raises" if reached else "maybe-raises")
