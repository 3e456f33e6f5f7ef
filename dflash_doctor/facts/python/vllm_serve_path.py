"""What `vllm serve` imports on its way up, read from the installed vLLM's own files (AST, never an import).

From the `vllm` console script's module (the dist-info's entry_points.txt) and the modules `vllm serve` loads
by name (knowledge.vllm_imports.SERVE_LOADED_BY_NAME), the scan follows vLLM's module-level imports from module
to module, and records every package outside vLLM that one of those modules imports, with how it is reached:

- "serve": an unconditional module-level import, reached through unconditional ones: a missing package stops
  `vllm serve` before it serves;
- "conditional": under an `if` (or a loop, or an except branch) on the way;
- "guarded": inside a `try` whose `except` catches ImportError (or a `suppress(ImportError)`): vLLM goes on.

`if TYPE_CHECKING:` blocks are never run. vLLM's deferred imports, `name = LazyLoader("name", globals(),
"module")` (vllm/utils/import_utils.py), count where the module evaluates `name.attr` while it is imported: a
class body, a decorator, a default, an annotation on a Python that evaluates them (before 3.14, without
`from __future__ import annotations`); vllm 0.20.1's backend_guidance.py imports llguidance so, through a
dataclass field's annotation. Imports inside functions are not followed (they run when the function
does), but for the requirements of vLLM that are not met, the scan names where vLLM's files import them
(`elsewhere`), for the finding to say what needs them. Only function bodies are skipped when a module is read
(a quick cut of the text by lines at column 0, checked, and parsed whole whenever the cut is in doubt, or the
module uses LazyLoader): the parser's cost is in the bodies. On the real vLLM 0.20.1 wheel: 641 modules, 7.2 MB,
0.5-0.7 s on a loaded 2-core machine, against 3.0 s parsing them whole.

Bounded: files of at most MAX_FILE_BYTES, regular files only, MAX_MODULES modules and BUDGET_S seconds; a scan
cut short says so (`complete` false) and the judgement then claims nothing the scan did not see.
"""

from __future__ import annotations

import ast
import os
import re
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from packaging.version import InvalidVersion, Version

from dflash_doctor.context import Context, SourceReader
from dflash_doctor.facts.pysource import SourceError, parse_module, without_blocks
from dflash_doctor.facts.python.envfacts import applicable_requirements, canonical
from dflash_doctor.facts.python.environment_shapes import Distributions, Target
from dflash_doctor.facts.python.vllm_source import vllm_package_dir
from dflash_doctor.facts.python.vllm_source_shapes import VllmServeImports
from dflash_doctor.facts.safefile import UnsafeFile, environment_roots, read_regular
from dflash_doctor.facts.shape import Collected, by_section
from dflash_doctor.knowledge.vllm_imports import (
    REQUIREMENT_IMPORT_NAMES,
    SERVE_ENTRY_POINT,
    SERVE_LOADED_BY_NAME,
)

__all__ = ["BUDGET_S", "collect", "import_names", "matches", "scan_serve_path", "unmet_requirements"]

MAX_FILE_BYTES = 2_000_000
MAX_MODULES = 4000
BUDGET_S = 10.0
ELSEWHERE_BUDGET_S = 10.0
MAX_SITES = 4
MAX_CHAIN = 12

REACH = ("serve", "conditional", "guarded")
_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


# ------------------------------------------------------------------------------------------ reading one module


def _class_level_import(block: str) -> bool:
    """A class block with an import at its body's own indentation (the first indented line's)."""
    if not block.startswith("class"):
        return False
    first = _FIRST_INDENTED.search(block)
    if first is None:
        return False
    indent = "\n" + first.group(1)
    return indent + "import " in block or indent + "from " in block


_FIRST_INDENTED = re.compile(r"\n([ \t]+)\S")


def _module_level_text(text: str) -> str | None:
    """`text` with the lines of every top-level function (and decorator, and class without a class-level import)
    blanked, line numbers kept; None when the cut is in doubt (`pysource.without_blocks`)."""
    return without_blocks(text, keep=_class_level_import)


def _parse(text: str, keep_functions: bool) -> ast.Module:
    if not keep_functions:
        cut = _module_level_text(text)
        if cut is not None:
            try:
                return parse_module(cut)
            except SourceError:
                pass  # the cut went wrong somewhere: the whole text decides
    return parse_module(text)


def _catches_import_error(node: ast.Try) -> bool:
    for handler in node.handlers:
        if handler.type is None:
            return True
        types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        if any((t.id if isinstance(t, ast.Name) else t.attr if isinstance(t, ast.Attribute) else "")
               in _IMPORT_ERRORS for t in types):
            return True
    return False


def _suppresses_import_error(node: ast.With | ast.AsyncWith) -> bool:
    for item in node.items:
        call = item.context_expr
        if isinstance(call, ast.Call) and (getattr(call.func, "id", None) or getattr(call.func, "attr", None)) \
                == "suppress" and any((getattr(a, "id", None) or getattr(a, "attr", None)) in _IMPORT_ERRORS
                                      for a in call.args):
            return True
    return False


def _weaker(a: str, b: str) -> str:
    return a if REACH.index(a) >= REACH.index(b) else b


def _imports(body: Iterable[ast.stmt], reach: str) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    """The import statements that run when `body` runs at module level, each with how surely it runs."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, reach
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        elif isinstance(node, ast.ClassDef):
            yield from _imports(node.body, reach)
        elif isinstance(node, ast.If):
            if "TYPE_CHECKING" in ast.unparse(node.test):
                negated = isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not)
                yield from _imports(node.body if negated else node.orelse, reach)
                continue
            yield from _imports(node.body, _weaker(reach, "conditional"))
            yield from _imports(node.orelse, _weaker(reach, "conditional"))
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            body_reach = _weaker(reach, "guarded") if _catches_import_error(node) else reach  # type: ignore[arg-type]
            yield from _imports(node.body, body_reach)  # type: ignore[attr-defined]
            yield from _imports(node.orelse, body_reach)  # type: ignore[attr-defined]
            for handler in node.handlers:  # type: ignore[attr-defined]
                yield from _imports(handler.body, _weaker(reach, "conditional"))
            yield from _imports(node.finalbody, reach)  # type: ignore[attr-defined]
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            yield from _imports(node.body, _weaker(reach, "guarded") if _suppresses_import_error(node) else reach)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            yield from _imports([*node.body, *node.orelse], _weaker(reach, "conditional"))
        elif isinstance(node, ast.Match):
            for case in node.cases:
                yield from _imports(case.body, _weaker(reach, "conditional"))


def _lazy_bindings(body: Iterable[ast.stmt], reach: str) -> Iterator[tuple[str, str, str, int]]:
    """vLLM's deferred imports, `name = LazyLoader("name", globals(), "module")` (vllm/utils/import_utils.py):
    (name, module, reach, line). The module is imported when `name.attr` is first evaluated."""
    for node in body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                and (getattr(node.value.func, "id", None) or getattr(node.value.func, "attr", None)) == "LazyLoader" \
                and len(node.value.args) >= 3 and isinstance(node.value.args[2], ast.Constant) \
                and isinstance(node.value.args[2].value, str):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    yield target.id, node.value.args[2].value, reach, node.lineno
        elif isinstance(node, ast.If):
            if "TYPE_CHECKING" in ast.unparse(node.test):
                negated = isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not)
                yield from _lazy_bindings(node.body if negated else node.orelse, reach)
                continue
            yield from _lazy_bindings([*node.body, *node.orelse], _weaker(reach, "conditional"))
        elif isinstance(node, ast.Try):
            yield from _lazy_bindings([*node.body, *node.orelse, *node.finalbody], reach)


def _evaluated_at_import(body: Iterable[ast.stmt], annotations: bool) -> Iterator[ast.AST]:
    """The expressions a module evaluates when it is imported: not function bodies nor lambdas, but
    decorators, defaults, class bodies, and annotations where they are evaluated (`annotations`)."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from node.decorator_list
            yield from (d for d in [*node.args.defaults, *node.args.kw_defaults] if d is not None)
            if annotations:
                args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs,
                        *([node.args.vararg] if node.args.vararg else []), *([node.args.kwarg] if node.args.kwarg else [])]
                yield from (a.annotation for a in args if a.annotation is not None)
                if node.returns is not None:
                    yield node.returns
        elif isinstance(node, ast.ClassDef):
            yield from node.decorator_list
            yield from node.bases
            yield from (k.value for k in node.keywords)
            yield from _evaluated_at_import(node.body, annotations)
        elif isinstance(node, ast.AnnAssign):
            if annotations:
                yield node.annotation
            if node.value is not None:
                yield node.value
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from _evaluated_at_import(node.orelse, annotations)
        else:
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(node, field, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], (ast.stmt, ast.excepthandler)):
                    yield from _evaluated_at_import(
                        [s for h in inner for s in (h.body if isinstance(h, ast.ExceptHandler) else [h])],
                        annotations)
            for field, value in ast.iter_fields(node):
                if field not in ("body", "orelse", "finalbody", "handlers") and isinstance(value, ast.AST):
                    yield value


def _lazy_imports(tree: ast.Module, annotations: bool) -> Iterator[tuple[str, str, int]]:
    """The LazyLoader imports a module triggers while it is imported: (module, reach, line of the use)."""
    bindings = {name: (module, reach, line) for name, module, reach, line in _lazy_bindings(tree.body, "serve")}
    if not bindings:
        return
    if any(isinstance(n, ast.ImportFrom) and n.module == "__future__" and any(a.name == "annotations" for a in n.names)
           for n in tree.body):
        annotations = False
    triggered: set[str] = set()
    for expression in _evaluated_at_import(tree.body, annotations):
        stack = [expression]
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Lambda):
                continue
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bindings \
                    and node.value.id not in triggered:
                triggered.add(node.value.id)
                module, reach, _ = bindings[node.value.id]
                yield module, reach, node.lineno
            stack.extend(ast.iter_child_nodes(node))


# ------------------------------------------------------------------------------------------ the walk


class _Package:
    """The installed vLLM package as modules: names to files, each file read (bounded) and parsed once."""

    def __init__(self, root: str, roots: Sequence[str] | None, files: SourceReader | None = None) -> None:
        self.root = root
        self.env_roots = roots
        self.files = files
        self.name = os.path.basename(root.rstrip("/"))
        self.parent = os.path.dirname(root.rstrip("/"))
        self._files: dict[str, str | None] = {}
        self.files_parsed = 0
        self.bytes_read = 0
        self.errors: list[dict[str, str]] = []

    def file(self, module: str) -> str | None:
        if module not in self._files:
            found = None
            if module == self.name or module.startswith(self.name + "."):
                base = os.path.join(self.parent, *module.split("."))
                for candidate in (base + ".py", os.path.join(base, "__init__.py")):
                    # not isfile: a FIFO or a device named like a module is found, then refused by read_regular
                    if os.path.lexists(candidate) and not os.path.isdir(candidate):
                        found = candidate
                        break
            self._files[module] = found
        return self._files[module]

    def is_package(self, module: str) -> bool:
        path = self.file(module)
        return path is not None and path.endswith("__init__.py")

    def tree(self, module: str, keep_functions: bool = False) -> ast.Module | None:
        path = self.file(module)
        if path is None:
            return None
        try:
            raw = (self.files.read(path, MAX_FILE_BYTES, self.env_roots) if self.files is not None
                   else read_regular(path, MAX_FILE_BYTES, self.env_roots))
        except (UnsafeFile, OSError) as exc:
            self.errors.append({"file": path, "error": getattr(exc, "reason", None) or f"{type(exc).__name__}: {exc}"})
            return None
        self.bytes_read += len(raw)
        self.files_parsed += 1
        # a LazyLoader import is triggered by a use that may sit in a function's signature: read those whole
        keep_functions = keep_functions or b"LazyLoader(" in raw
        try:
            return _parse(raw.decode("utf-8", "replace"), keep_functions)
        except SourceError as exc:  # one file the parser refuses is a fact about it: the walk goes on
            self.errors.append({"file": path, "error": str(exc)})
            return None

    def rel(self, module: str) -> str:
        path = self.file(module)
        return os.path.relpath(path, self.parent) if path else module.replace(".", "/") + ".py"


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".") if is_package else module.split(".")[:-1]
    parts = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
    return ".".join([*parts, *([node.module] if node.module else [])])


def _targets(node: ast.Import | ast.ImportFrom, module: str, pkg: _Package) -> list[tuple[str, list[str]]]:
    """(module imported, names taken from it) for one statement, absolute."""
    if isinstance(node, ast.Import):
        return [(alias.name, []) for alias in node.names]
    return [(_absolute(node, module, pkg.is_package(module)), [alias.name for alias in node.names])]


def _statements(tree: ast.Module | None, module: str, pkg: _Package, entry_module: str, entry_function: str,
                annotations: bool) -> list[tuple[str, list[str], str, int]]:
    """(module imported, names, reach, line) for each import `module` runs while it is imported."""
    body: list[ast.stmt] = list(tree.body) if tree is not None else []
    if tree is not None and module == entry_module and entry_function:
        body += [s for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and node.name == entry_function for s in node.body]
    statements = [(target, names, statement_reach, node.lineno)
                  for node, statement_reach in _imports(body, "serve")
                  for target, names in _targets(node, module, pkg)]
    if tree is not None:
        statements += [(target, [], lazy_reach, line) for target, lazy_reach, line in _lazy_imports(tree, annotations)]
    return statements


def scan_serve_path(root: str, entry: str, loaded_by_name: Sequence[str], annotations: bool = True,
                    budget_s: float = BUDGET_S, roots: Sequence[str] | None = None,
                    files: SourceReader | None = None) -> dict[str, Any]:
    """Walk vLLM's module-level imports from `entry` ("module:function") and `loaded_by_name`.

    `annotations`: whether the target's Python evaluates annotations when a def or class runs (before 3.14).
    `roots`: the environment's directories (target.environment_roots); a file that resolves outside them is
    never opened (a symlink out of the package). `files`: the run's reader (`Context.sources`)."""
    started = time.perf_counter()
    pkg = _Package(root, roots, files)
    entry_module, _, entry_function = entry.partition(":")
    reach_of: dict[str, str] = {}
    came_from: dict[str, tuple[str, int]] = {}
    parsed: dict[str, list[tuple[str, list[str], str, int]]] = {}
    external: dict[str, dict[str, Any]] = {}
    starts = [{"module": m, "found": pkg.file(m) is not None} for m in [entry_module, *loaded_by_name]]
    queue: list[str] = []
    complete = True

    def reach(module: str, how: str, via: str | None, line: int) -> None:
        if pkg.file(module) is None:
            return
        old = reach_of.get(module)
        if old is not None and REACH.index(old) <= REACH.index(how):
            return
        reach_of[module] = how
        if via is not None:
            came_from[module] = (via, line)
        queue.append(module)

    def chain(module: str) -> list[str]:
        out = [module]
        while module in came_from and len(out) < MAX_CHAIN:
            module = came_from[module][0]
            out.append(module)
        return list(reversed(out))

    for item in starts:
        if item["found"]:
            reach(str(item["module"]), "serve", None, 0)
    while queue:
        if len(reach_of) > MAX_MODULES or time.perf_counter() - started > budget_s:
            complete = False
            break
        module = queue.pop()
        how = reach_of[module]
        parents = module.split(".")
        for i in range(1, len(parents)):  # importing a.b.c runs a/__init__ and a/b/__init__ first
            reach(".".join(parents[:i]), how, module, 0)
        if module not in parsed:
            tree = pkg.tree(module, keep_functions=module == entry_module)
            try:
                parsed[module] = _statements(tree, module, pkg, entry_module, entry_function, annotations)
            except RecursionError:  # a test nested too deep to print back (ast.unparse): a fact about the file
                pkg.errors.append({"file": pkg.file(module) or module, "error": "RecursionError: nested too deep to read"})
                parsed[module] = []
        for target, names, statement_reach, lineno in parsed[module]:
            effective = _weaker(how, statement_reach)
            top = target.split(".", 1)[0]
            if top == pkg.name:
                reach(target, effective, module, lineno)
                for name in names:
                    if pkg.file(f"{target}.{name}") is not None:
                        reach(f"{target}.{name}", effective, module, lineno)
                continue
            if not top or top in sys.stdlib_module_names or top == "__future__":
                continue
            known = external.get(target)
            if known is not None and REACH.index(known["reach"]) <= REACH.index(effective):
                continue
            external[target] = {"module": target, "names": names[:8], "reach": effective,
                                "file": pkg.rel(module), "line": lineno, "chain": chain(module)}
    return {
        "root": root,
        "entry": entry,
        "roots": starts,
        "complete": complete,
        "modules_reached": len(reach_of),
        "files_parsed": pkg.files_parsed,
        "bytes_read": pkg.bytes_read,
        "seconds": round(time.perf_counter() - started, 3),
        "imports": sorted(external.values(), key=lambda e: (REACH.index(e["reach"]), e["module"])),
        "errors": pkg.errors[:20],
    }


# ------------------------------------------------------------------------------------------ requirements


def import_names(requirement: str, dists: Distributions) -> list[str]:
    """The names a requirement of vLLM is imported by: the knowledge table (names that differ, namespace
    packages), else the installed distribution's top-level names (RECORD), else its name with '-' as '_'."""
    name = canonical(requirement)
    known = REQUIREMENT_IMPORT_NAMES.value.get(name)
    if known:
        return list(known)
    dist = dists.get(name)
    if dist is not None:
        tops = sorted({t[:-3] if t.endswith(".py") else t.split(".", 1)[0] for t in dist.top_levels})
        tops = [t for t in tops if t.isidentifier() and t not in ("bin", "include", "share", "lib", "tests")]
        if tops:
            return tops
    return [name.replace("-", "_").replace(".", "_")]


def matches(module: str, names: Sequence[str], import_name: str) -> bool:
    """Whether an import of `module` (taking `names` from it) imports `import_name` (a dotted name too)."""
    candidates = [module, *(f"{module}.{n}" for n in names)]
    return any(c == import_name or c.startswith(import_name + ".") for c in candidates)


def unmet_requirements(dists: Distributions, marker_env: Mapping[str, str],
                       requirer: str = "vllm") -> list[tuple[Any, str | None]]:
    """`requirer`'s requirements (markers evaluated, no extras) that no installed version meets:
    (packaging Requirement, installed version or None when it is not installed)."""

    dist = dists.get(requirer)
    if dist is None:
        return []
    unmet: list[tuple[Any, str | None]] = []
    for requirement in applicable_requirements(dist.requires, marker_env):
        found = dists.version(requirement.name)
        if found is None:
            unmet.append((requirement, None))
            continue
        try:
            if requirement.specifier and not requirement.specifier.contains(Version(found), prereleases=True):
                unmet.append((requirement, found))
        except InvalidVersion:
            continue
    return unmet


_IMPORT_LINE = r"([ \t]*)(?:from|import)[ \t]+({names})\b"


def imported_elsewhere(root: str, names: Sequence[str], budget_s: float = ELSEWHERE_BUDGET_S,
                       roots: Sequence[str] | None = None, files: SourceReader | None = None) -> dict[str, Any]:
    """Where vLLM's files import `names` at all: how many files, and up to MAX_SITES of them ({"file", "line",
    "scope"}: the first import line of each, those at module level first). A plain line search: an import line's
    indentation says whether it sits in a block (a function, a class, a try or an if) or at module level. One pass of
    the line pattern a file (searching each name first cost a pass a name: more, with twenty names)."""
    started = time.perf_counter()
    wanted = sorted(set(names))
    if not wanted:
        return {"names": {}, "complete": True}
    per_file: dict[str, list[dict[str, Any]]] = {n: [] for n in wanted}
    line = _IMPORT_LINE.format(names="|".join(re.escape(n) for n in wanted)).encode()
    # Searched from the newline before each line (a literal first character: twice as fast as ^ with MULTILINE),
    # the file's first line on its own.
    first_line, later_line = re.compile(line), re.compile(b"\n" + line)
    parent = os.path.dirname(root.rstrip("/"))
    complete = True
    for index, path in enumerate(_python_files(root, files)):
        if index % 64 == 0 and time.perf_counter() - started > budget_s:
            complete = False
            break
        try:
            raw = files.read(path, MAX_FILE_BYTES, roots) if files is not None else read_regular(path, MAX_FILE_BYTES, roots)
        except OSError:
            continue
        first: dict[str, dict[str, Any]] = {}
        found_at = [(0, m) for m in [first_line.match(raw)] if m is not None]
        found_at += [(m.start() + 1, m) for m in later_line.finditer(raw)]
        for start, match in found_at:
            name = match.group(2).decode()
            scope = "block" if match.group(1) else "module"
            if name not in first or (scope == "module" and first[name]["scope"] == "block"):
                first[name] = {"file": os.path.relpath(path, parent),
                               "line": raw.count(b"\n", 0, start) + 1, "scope": scope}
        for name, site in first.items():
            per_file[name].append(site)
    found = {name: {"files": len(sites), "sites": sorted(sites, key=lambda s: (s["scope"] != "module", s["file"]))
                    [:MAX_SITES]} for name, sites in per_file.items()}
    return {"names": found, "complete": complete}


def _python_files(root: str, files: SourceReader | None) -> list[str]:
    if files is not None:
        return files.python_files(root)
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        found += [os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".py")]
    return found


# ------------------------------------------------------------------------------------------ the collector


def _entry_point(dist_info: str | None, roots: Sequence[str] | None) -> tuple[str, str]:
    """The `vllm` console script's "module:function" from entry_points.txt, and where it was read."""
    if dist_info:
        path = os.path.join(dist_info, "entry_points.txt")
        try:
            text = read_regular(path, 1_000_000, roots).decode("utf-8", "replace")
        except OSError:
            text = ""
        section = ""
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("["):
                section = line.strip("[]").strip()
            elif section == "console_scripts" and "=" in line:
                name, _, value = line.partition("=")
                if name.strip() == "vllm" and ":" in value:
                    return value.split("[", 1)[0].strip(), path
    return SERVE_ENTRY_POINT.value, "knowledge.vllm_imports.SERVE_ENTRY_POINT"


def collect(ctx: Context, earlier: Mapping[str, object]) -> Collected:
    dists = Distributions.read(earlier.get(Distributions.SECTION)) or Distributions()
    vllm = dists.get("vllm")
    root = vllm_package_dir(earlier)
    if root is None:
        return by_section(VllmServeImports.collected({"installed": vllm is not None,
                                                      "version": vllm.version if vllm else None, "root": None}))
    target = Target.read(earlier.get(Target.SECTION))
    env_roots = environment_roots(target)
    entry, entry_from = _entry_point(vllm.dist_info if vllm else None, env_roots)
    marker_env = target.marker_environment if target is not None else {}
    version = marker_env.get("python_version") or ""
    annotations = not version or tuple(int(p) for p in version.split(".")[:2] if p.isdigit()) < (3, 14)
    scan = scan_serve_path(root, entry, [m for m, _ in SERVE_LOADED_BY_NAME.value], annotations, roots=env_roots,
                           files=ctx.sources)
    # Where vLLM imports the requirements that are not met, when `vllm serve` does not on its way up: for the
    # finding to name what needs them. Nothing to look for on a healthy machine.
    looked_for = sorted({name for requirement, _ in unmet_requirements(dists, marker_env)
                         for name in import_names(requirement.name, dists)
                         if not any(e["reach"] == "serve" and matches(e["module"], e["names"], name)
                                    for e in scan["imports"])})
    started = time.perf_counter()
    elsewhere = imported_elsewhere(root, [n.split(".", 1)[0] for n in looked_for], roots=env_roots,
                                   files=ctx.sources) if looked_for else None
    return by_section(VllmServeImports.collected({
        "installed": True, "version": vllm.version if vllm else None, **scan, "entry_from": entry_from,
        "elsewhere": elsewhere["names"] if elsewhere else {},
        "elsewhere_complete": elsewhere["complete"] if elsewhere else True,
        "elsewhere_seconds": round(time.perf_counter() - started, 3),
    }))
