"""Reads the installed vLLM's source (AST, never an import) for its imports of external kernel packages.

For every `import flash_attn...`, `from flash_attn... import ...` and `import_module("flash_attn...")`
(and the same for the other external packages named in knowledge.vllm), it records where it is and
what guards it: the enclosing try/except and the exception types it catches, `with suppress(...)`,
`if find_spec(...)` / platform conditions (as expressions, judged later by `dflash_doctor.guards`),
`if TYPE_CHECKING`, and whether it runs at module import or inside a function.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["scan_package", "scan_source"]

MAX_FILE_BYTES = 2_000_000


def scan_package(root: str, modules: Sequence[str]) -> dict[str, Any]:
    """Scan every .py under `root` (the vllm package directory) for imports of `modules`."""
    needles = tuple(m.encode() for m in modules)
    sites: list[dict[str, Any]] = []
    errors: list[dict[str, str]] = []
    scanned = parsed = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for filename in sorted(filenames):
            if not filename.endswith(".py"):
                continue
            path = os.path.join(dirpath, filename)
            scanned += 1
            try:
                with open(path, "rb") as handle:
                    raw = handle.read(MAX_FILE_BYTES)
            except OSError as exc:
                errors.append({"file": path, "error": f"{type(exc).__name__}: {exc.strerror or exc}"})
                continue
            if not any(n in raw for n in needles):
                continue  # the cheap filter: most files never mention these packages
            parsed += 1
            rel = os.path.relpath(path, os.path.dirname(root))
            try:
                sites.extend(scan_source(raw.decode("utf-8", "replace"), rel, modules))
            except SyntaxError as exc:
                errors.append({"file": path, "error": f"SyntaxError: {exc.msg} (line {exc.lineno})"})
    return {"root": root, "files_scanned": scanned, "files_parsed": parsed, "sites": sites, "errors": errors}


def scan_source(source: str, filename: str, modules: Sequence[str]) -> list[dict[str, Any]]:
    tree = ast.parse(source, filename=filename)
    wanted = set(modules)
    return [site for site in _walk(tree, [], filename, wanted)]


def _top(module: str) -> str:
    return module.split(".", 1)[0]


def _imported(node: ast.AST, wanted: set[str]) -> list[tuple[str, list[str]]]:
    """(module, names) pairs this node imports from the wanted packages."""
    if isinstance(node, ast.Import):
        return [(a.name, []) for a in node.names if _top(a.name) in wanted]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and _top(node.module) in wanted:
        return [(node.module, [a.name for a in node.names])]
    if isinstance(node, ast.Call) and _call_name(node.func) in ("import_module", "__import__"):
        if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            module = node.args[0].value
            if _top(module) in wanted:
                return [(module, [])]
    return []


def _call_name(func: ast.AST) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _exception_names(handler: ast.ExceptHandler) -> list[str]:
    if handler.type is None:
        return ["BaseException"]
    nodes = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return [_call_name(n) or ast.unparse(n) for n in nodes]


def _guard(parent: ast.AST, field: str) -> dict[str, Any] | None:
    """The guard that `parent` puts around a child in its `field`, if any."""
    if isinstance(parent, ast.Try) and field == "body":
        names = [n for h in parent.handlers for n in _exception_names(h)]
        return {"kind": "try", "catches": names, "line": parent.lineno}
    if isinstance(parent, (ast.With, ast.AsyncWith)) and field == "body":
        caught = [
            _call_name(a) or ast.unparse(a)
            for item in parent.items
            if isinstance(item.context_expr, ast.Call) and _call_name(item.context_expr.func) == "suppress"
            for a in item.context_expr.args
        ]
        if caught:
            return {"kind": "suppress", "catches": caught, "line": parent.lineno}
        return None
    if isinstance(parent, (ast.If, ast.IfExp)) and field in ("body", "orelse"):
        test = ast.unparse(parent.test)
        kind = "type-checking" if "TYPE_CHECKING" in test else "if"
        return {"kind": kind, "test": test, "branch": field, "line": parent.lineno}
    if isinstance(parent, ast.BoolOp) and field == "values":
        return {"kind": "if", "test": ast.unparse(parent), "branch": "operand", "line": parent.lineno}
    return None


def _walk(node: ast.AST, stack: list[tuple[ast.AST, str]], filename: str, wanted: set[str]) -> Iterator[dict[str, Any]]:
    for module, names in _imported(node, wanted):
        guards = [g for parent, field in reversed(stack) if (g := _guard(parent, field))]
        functions = [p.name for p, _ in stack if isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        in_function = any(isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef)) for p, _ in stack)
        yield {
            "file": filename,
            "line": getattr(node, "lineno", 0),
            "module": module,
            "names": names,
            "statement": ast.unparse(node) if isinstance(node, ast.Call) else ast.unparse(node).split("\n")[0],
            "scope": "function" if in_function else "module",
            "where": ".".join(functions) or "<module>",
            "guards": guards,  # innermost first
        }
    for field, value in ast.iter_fields(node):
        children = value if isinstance(value, list) else [value]
        for child in children:
            if isinstance(child, ast.AST):
                yield from _walk(child, [*stack, (node, field)], filename, wanted)
