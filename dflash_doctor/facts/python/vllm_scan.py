"""Reads the installed vLLM's source (AST, never an import) for its imports of external kernel packages.

For every `import flash_attn...`, `from flash_attn... import ...` and `import_module("flash_attn...")`
(and the same for the other external packages named in knowledge.vllm), it records where it is and
what guards it: the enclosing try/except and the exception types it catches, `with suppress(...)`,
`if find_spec(...)` / platform conditions (as expressions, judged later by `dflash_doctor.checks.python.guards`),
`if TYPE_CHECKING`, and whether it runs at module import or inside a function.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterator, Sequence
from typing import Any

from dflash_doctor.context import SourceReader
from dflash_doctor.facts.pysource import SourceError, parse_module, without_blocks
from dflash_doctor.facts.safefile import UnsafeFile, read_regular

__all__ = ["scan_package", "scan_source"]

MAX_FILE_BYTES = 2_000_000


def scan_package(root: str, modules: Sequence[str], only: Sequence[str] | None = None,
                 files: SourceReader | None = None) -> dict[str, Any]:
    """Scan every .py under `root` (the vllm package directory) for imports of `modules`.

    `only` limits the scan to these paths relative to root's parent (e.g. "vllm/model_executor/..."). `files`: the
    run's reader (`Context.sources`), which reads each file once for every scan of the run."""
    alternatives = b"|".join(re.escape(m.encode()) for m in modules)
    # An import line of one of them (the file's first line, or one after a newline: a search with a literal first
    # character is faster than one anchored with ^), or an import_module call naming one.
    line = rb"[ \t]*(?:from|import)[ \t]+(?:" + alternatives + rb")\b"
    first_line, later_line = re.compile(line), re.compile(b"\n" + line)
    called = re.compile(rb"import_module\(\s*[\"'](?:" + alternatives + rb")\b")
    # the cheap filter's words: a module whose name holds another's (flash_attn_interface, flash_attn) is found by it
    words = tuple(m.encode() for m in modules if not any(o != m and o in m for o in modules))
    sites: list[dict[str, Any]] = []
    errors: list[dict[str, str]] = []
    scanned = parsed = 0
    for path in _python_files(root, only, files):
        scanned += 1
        try:
            # a FIFO named like a module must not block the scan
            raw = files.read(path, MAX_FILE_BYTES) if files is not None else read_regular(path, MAX_FILE_BYTES)
        except UnsafeFile as exc:
            errors.append({"file": path, "error": exc.reason})
            continue
        except OSError as exc:
            errors.append({"file": path, "error": f"{type(exc).__name__}: {exc.strerror or exc}"})
            continue
        if not any(w in raw for w in words) or not (first_line.match(raw) or later_line.search(raw)
                                                     or called.search(raw)):
            continue  # the cheap filter: most files never mention these packages
        parsed += 1
        rel = os.path.relpath(path, os.path.dirname(root))
        try:
            sites.extend(scan_source(raw.decode("utf-8", "replace"), rel, modules))
        except SourceError as exc:  # one file the parser refuses is a fact about it; the scan goes on
            errors.append({"file": path, "error": str(exc)})
        except RecursionError:  # a statement nested too deep to print back (ast.unparse)
            errors.append({"file": path, "error": "RecursionError: nested too deep to read"})
    return {"root": root, "files_scanned": scanned, "files_parsed": parsed, "sites": sites, "errors": errors}


def _python_files(root: str, only: Sequence[str] | None, files: SourceReader | None = None) -> Iterator[str]:
    if only is not None:
        parent = os.path.dirname(root)
        yield from (os.path.join(parent, rel) for rel in only if os.path.isfile(os.path.join(parent, rel)))
        return
    if files is not None:
        yield from files.python_files(root)
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        yield from (os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".py"))


def scan_source(source: str, filename: str, modules: Sequence[str]) -> list[dict[str, Any]]:
    """The import sites of `modules` in `source`. Only the top-level functions and classes whose text names one
    of `modules` (or calls `import_module`/`__import__`), and in those classes only such methods, are parsed with
    what runs at module level and in the class bodies: the others hold no site, and parsing them was most of the
    scan's time (vLLM's attention backends are large files, most of their methods naming no kernel package)."""
    words = (*modules, "import_module(", "__import__(")
    # A block with a character outside ASCII is kept: the parser reads a name in NFKC form (`\ufb02ash_attn` is
    # flash_attn), which the words are not matched against.
    cut = without_blocks(source, keep=lambda block: not block.isascii() or any(w in block for w in words),
                         members=True)
    try:
        tree = parse_module(source if cut is None else cut, filename)
    except SourceError:
        if cut is None:
            raise
        tree = parse_module(source, filename)  # the cut went wrong somewhere: the whole text decides
    return list(_walk(tree, source.splitlines(), filename, set(modules)))


def _top(module: str) -> str:
    return module.split(".", 1)[0]


def _imported(node: ast.AST, wanted: set[str]) -> list[tuple[str, list[str]]]:
    """(module, names) pairs this node imports from the wanted packages."""
    if isinstance(node, ast.Import):
        return [(a.name, []) for a in node.names if _top(a.name) in wanted]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and _top(node.module) in wanted:
        return [(node.module, [a.name for a in node.names])]
    if isinstance(node, ast.Call) and _call_name(node.func) in ("import_module", "__import__") \
            and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
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


_STATEMENT_LISTS = ("body", "orelse", "handlers", "finalbody", "cases")


def _walk(tree: ast.Module, lines: list[str], filename: str, wanted: set[str]) -> Iterator[dict[str, Any]]:
    """Visit statements only (imports are statements), keeping the chain of enclosing blocks.

    Walking every expression node of vLLM's larger files costs seconds; statements are a few percent of
    the nodes. Expression-level `import_module("...")` calls are looked for only in statements whose
    text mentions them.
    """
    chain: list[tuple[ast.AST, str]] = []

    def site(node: ast.AST, module: str, names: list[str]) -> dict[str, Any]:
        guards = [g for parent, field in reversed(chain) if (g := _guard(parent, field))]
        functions = [p.name for p, _ in chain if isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        in_function = any(isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef)) for p, _ in chain)
        return {
            "file": filename,
            "line": getattr(node, "lineno", 0),
            "module": module,
            "names": names,
            "statement": ast.unparse(node).split("\n")[0],
            "scope": "function" if in_function else "module",
            "where": ".".join(functions) or "<module>",
            "guards": guards,  # innermost first
        }

    def visit(node: ast.AST) -> Iterator[dict[str, Any]]:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for module, names in _imported(node, wanted):
                yield site(node, module, names)
            return
        compound = False
        for field in _STATEMENT_LISTS:
            children = getattr(node, field, None)
            if not isinstance(children, list) or not children or not isinstance(children[0], ast.AST):
                continue
            compound = True
            chain.append((node, field))
            for child in children:
                yield from visit(child)
            chain.pop()
        end = getattr(node, "end_lineno", None)
        if not compound and end is not None:
            text = "\n".join(lines[node.lineno - 1 : end])  # type: ignore[attr-defined]
            if "import_module(" in text or "__import__(" in text:
                for call in ast.walk(node):
                    for module, names in _imported(call, wanted):
                        yield site(call, module, names)

    yield from visit(tree)
