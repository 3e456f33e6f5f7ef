"""vLLM's own modules, compiled from a release's sdist without importing vLLM, torch or CUDA.

`SourceVllm(version, stubs)` builds a `vllm` package in memory, module by module, statement by statement:
every top-level function, class and constant whose definition needs only other vLLM definitions and the
standard library is compiled from the release's source; `from vllm.x import y` is followed into the
release's own `vllm/x.py`. What needs the machine is left out or replaced by `stubs` (module name -> names):
torch is a stand-in whose attributes are named sentinels (dtypes compare by identity, as torch's do), the
platform is a simulated one, compiled extensions are declared present as in the release's CUDA wheel.
Statements that cannot run without the machine (a top-level `if current_platform.is_cuda():` import of a
kernel, a try/except around a compiled extension) are skipped; a function that later needs one of the
names they would have bound fails with NameError instead of answering wrongly.

Every decision still runs the release's own code; decorators are dropped except classmethod, staticmethod
and property (functools.cache and friends only memoize, and would keep one simulated GPU's answers).
"""

from __future__ import annotations
import __future__

import ast
import copy
import importlib
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

from vllm_sources import vllm_source

_KEEP_DECORATORS = {"classmethod", "staticmethod", "property"}


class _Sentinel:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name

    def __getattr__(self, name: str) -> _Sentinel:
        return _Sentinel(f"{self.name}.{name}")

    def __getitem__(self, _: Any) -> _Sentinel:
        return self

    def __call__(self, *_: Any, **__: Any) -> _Sentinel:
        return self

    def __or__(self, _: Any) -> _Sentinel:
        return self

    __ror__ = __or__


class _Torch(ModuleType):
    """torch as far as class bodies and signatures touch it: `torch.bfloat16` is one named object."""

    def __init__(self) -> None:
        super().__init__("torch")
        self._seen: dict[str, _Sentinel] = {}

    def __getattr__(self, name: str) -> _Sentinel:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._seen.setdefault(name, _Sentinel(f"torch.{name}"))


class OnceLogger:
    """vLLM's logger (debug_once, info_once, warning_once besides the usual), keeping what it is told at
    warning level and above in `warnings` (the message, %-formatted as logging would)."""

    def __init__(self) -> None:
        self.warnings: list[str] = []

    def __getattr__(self, name: str) -> Any:
        def log(message: Any = "", *args: Any, **_: Any) -> None:
            if name.startswith(("warning", "error")):
                self.warnings.append(str(message) % args if args else str(message))
        return log


def _strip(node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
    node.decorator_list = [d for d in node.decorator_list
                           if isinstance(d, ast.Name) and d.id in _KEEP_DECORATORS]


class SourceVllm:
    def __init__(self, version: str, stubs: Mapping[str, Mapping[str, Any]]) -> None:
        self.version = version
        self.root: Path = vllm_source(version)
        self.stubs = {name: dict(values) for name, values in stubs.items()}
        self.modules: dict[str, ModuleType] = {}
        self.torch = _Torch()

    # ------------------------------------------------------------------------------------------ modules

    def _file(self, name: str) -> Path | None:
        rel = Path(*name.split(".")[1:])
        if name == "vllm":
            return self.root / "__init__.py"
        for candidate in (self.root / rel.with_suffix(".py"), self.root / rel / "__init__.py"):
            if candidate.is_file():
                return candidate
        return None

    def module(self, name: str) -> ModuleType:
        if name in self.modules:
            return self.modules[name]
        module = ModuleType(name)
        module.__dict__["__name__"] = name
        self.modules[name] = module
        stubs = self.stubs.get(name, {})
        module.__dict__.update(stubs)
        path = self._file(name)
        if path is not None:
            module.__dict__["__file__"] = str(path)
            if path.name == "__init__.py":
                module.__path__ = [str(path.parent)]
            self._fill(module, ast.parse(path.read_text()), name if path.name == "__init__.py"
                       else name.rpartition(".")[0])
        module.__dict__.update(stubs)  # the stand-ins win over whatever the source bound
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(self.module(parent), child, module)
        return module

    def load(self, name: str) -> ModuleType:
        return self.module(name)

    def get(self, name: str, attr: str) -> Any:
        value = getattr(self.load(name), attr)
        return value._value() if isinstance(value, _LazyClass) else value

    def _attr(self, source: str, attr: str) -> Any:
        if source == "torch" or source.startswith("torch."):
            return getattr(self.torch, attr)
        if source == "vllm" or source.startswith("vllm."):
            module = self.module(source)
            if attr in module.__dict__:
                value = module.__dict__[attr]
                if isinstance(value, _LazyClass):
                    try:
                        return value._value()
                    except NameError:
                        return _MISSING
                return value
            if self._file(f"{source}.{attr}") is not None:
                return self.module(f"{source}.{attr}")
            return _MISSING
        if not _stdlib(source):
            return _MISSING  # a third-party package (numpy, transformers, ...): the name is left out
        try:
            return getattr(importlib.import_module(source), attr)
        except (ImportError, AttributeError):
            return _MISSING

    def _import(self, name: str) -> Any:
        if name == "torch" or name.startswith("torch."):
            return self.torch
        if name == "vllm" or name.startswith("vllm."):
            return self.module(name)
        if not _stdlib(name):
            return _MISSING
        try:
            return importlib.import_module(name)
        except ImportError:
            return _MISSING

    def _fill(self, module: ModuleType, tree: ast.Module, package: str) -> None:
        scope = module.__dict__
        for node in tree.body:
            if isinstance(node, ast.ImportFrom):
                source = node.module or ""
                if node.level:
                    base = package.split(".")
                    base = base[:len(base) - node.level + 1]
                    source = ".".join(base + ([source] if source else []))
                for alias in node.names:
                    if alias.name == "*":
                        continue
                    bind = alias.asname or alias.name
                    if source == "vllm" or source.startswith("vllm."):
                        # followed when first used: eagerly it would compile most of vLLM
                        scope[bind] = _Lazy(self, scope, source, alias.name, bind)
                        continue
                    value = self._attr(source, alias.name)
                    if value is not _MISSING:
                        scope[bind] = value
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("vllm") and alias.asname:
                        scope[alias.asname] = _Lazy(self, scope, alias.name, None, alias.asname)
                        continue
                    value = self._import(alias.name)
                    if value is _MISSING:
                        continue
                    if alias.asname:
                        scope[alias.asname] = value
                    else:
                        top = alias.name.split(".")[0]
                        scope[top] = self._import(top)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                _strip(node)  # compiled when first called, like the classes
                scope[node.name] = _LazyClass(self, scope, node, module.__name__)
            elif isinstance(node, ast.ClassDef):
                # compiled when first used: most classes of a module (kernels' Impl, metadata builders) never are
                scope[node.name] = _LazyClass(self, scope, node, module.__name__)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                try:
                    self._exec(node, scope, module.__name__)
                except Exception:  # noqa: BLE001, S110 - needs the machine: left out
                    pass

    def _exec(self, node: ast.stmt | list[ast.stmt], scope: dict[str, Any], name: str) -> None:
        code = compile(ast.Module(body=node if isinstance(node, list) else [node], type_ignores=[]), f"<vllm {self.version} {name}>", "exec",
                       flags=__future__.annotations.compiler_flag, dont_inherit=True)
        exec(code, scope)  # noqa: S102 - the release's own definition, compiled from its own source

    def _class(self, node: ast.ClassDef, scope: dict[str, Any], name: str) -> None:
        bases = []
        for base in node.bases:
            try:
                _settle(base, scope)
                value = eval(compile(ast.Expression(base), "<base>", "eval"), scope)
            except Exception:  # noqa: BLE001, S112 - a base that needs the machine (Generic[T] of torch, ...)
                continue
            if isinstance(value, type) or hasattr(value, "__mro_entries__") or value is NamedTuple:
                bases.append(base)
        body: list[ast.stmt] = []
        whole: list[ast.stmt] = [item for item in node.body if isinstance(
            item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Assign, ast.AnnAssign))]
        for item in whole:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                _strip(item)
        try:
            self._exec(self._classdef(node, bases, whole), scope, name)
            return
        except Exception:  # noqa: BLE001, S110 - some attribute needs the machine: statement by statement
            pass
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                _strip(item)
                body.append(item)
            elif isinstance(item, (ast.Assign, ast.AnnAssign)):
                if isinstance(item, ast.AnnAssign) and item.value is None:
                    body.append(item)
                    continue
                trial = dict(scope)
                try:
                    self._exec(item, trial, name)
                except Exception:  # noqa: BLE001, S112 - a class attribute that needs the machine
                    continue
                body.append(item)
        try:
            self._exec(self._classdef(node, bases, body), scope, name)
        except Exception:  # noqa: BLE001, S110 - a class whose body needs the machine: left out
            pass

    @staticmethod
    def _classdef(node: ast.ClassDef, bases: list[ast.expr], body: list[ast.stmt]) -> ast.ClassDef:
        made = copy.copy(node)  # keeps whatever fields this Python's ClassDef has (type_params from 3.12)
        made.bases, made.keywords, made.decorator_list = bases, [], []
        made.body = body or [ast.Pass()]
        return made

    @contextmanager
    def installed(self) -> Iterator[None]:
        """The release's modules as `vllm.*` while its code runs: functions import lazily (`from vllm.config
        import get_current_vllm_config` inside a body), and those imports compile the module from source."""
        saved = {name: module for name, module in sys.modules.items() if name == "vllm" or name.startswith("vllm.")}
        for name in saved:
            del sys.modules[name]
        finder = _Finder(self)
        sys.modules.update(self.modules)
        sys.meta_path.insert(0, finder)
        try:
            yield
        finally:
            sys.meta_path.remove(finder)
            for name in [n for n in sys.modules if n == "vllm" or n.startswith("vllm.")]:
                del sys.modules[name]
            sys.modules.update(saved)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, release: SourceVllm) -> None:
        self.release = release

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != "vllm" and not fullname.startswith("vllm."):
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return self.release.load(spec.name)

    def exec_module(self, module: ModuleType) -> None:
        return None


_MISSING: Any = object()


class _Lazy:
    """A name imported from another vLLM module, compiled when first used; it then replaces itself in the
    importing module's globals, so later look-ups find the real object."""

    def __init__(self, release: SourceVllm, scope: dict[str, Any], source: str, attr: str | None, bind: str) -> None:
        self._where = (release, scope, source, attr, bind)

    def _value(self) -> Any:
        release, scope, source, attr, bind = self._where
        value = release.module(source) if attr is None else release._attr(source, attr)
        if value is _MISSING:
            raise NameError(f"{source}.{attr} is not defined without the machine")
        if scope.get(bind) is self:
            scope[bind] = value
        return value

    def __getattr__(self, name: str) -> Any:
        if name == "_where":
            raise AttributeError(name)
        return getattr(self._value(), name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._value()(*args, **kwargs)

    def __instancecheck__(self, instance: Any) -> bool:
        return isinstance(instance, self._value())

    def __getitem__(self, key: Any) -> Any:
        return self._value()[key]

    def __iter__(self) -> Any:
        return iter(self._value())

    def __eq__(self, other: object) -> bool:
        return bool(self._value() == other)

    def __hash__(self) -> int:
        return hash(self._value())


class _LazyClass(_Lazy):
    """A class or function of this module, compiled when first used (then replaced by itself in the module's
    globals)."""

    def __init__(self, release: SourceVllm, scope: dict[str, Any],
                 node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef, module: str) -> None:
        self._node = (release, scope, node, module)

    def _value(self) -> Any:
        release, scope, node, module = self._node
        if scope.get(node.name) is self:
            del scope[node.name]
            if isinstance(node, ast.ClassDef):
                release._class(node, scope, module)
            else:
                try:
                    release._exec(node, scope, module)
                except Exception:  # noqa: BLE001, S110 - a default value that needs the machine: left out
                    pass
        if node.name not in scope or isinstance(scope[node.name], _LazyClass):
            scope[node.name] = self
            raise NameError(f"{module}.{node.name} cannot be compiled without the machine")
        return scope[node.name]

    def __getattr__(self, name: str) -> Any:
        if name == "_node":
            raise AttributeError(name)
        return getattr(self._value(), name)


def _settle(node: ast.expr, scope: dict[str, Any]) -> None:
    """Names a class statement evaluates at once (its bases) must be the real objects, not _Lazy ones."""
    for name in ast.walk(node):
        if isinstance(name, ast.Name) and isinstance(scope.get(name.id), _Lazy):
            scope[name.id]._value()


def _stdlib(name: str) -> bool:
    """Only the standard library (and typing_extensions, its backport) is imported for real."""
    top = name.split(".")[0]
    return top in sys.stdlib_module_names or top == "typing_extensions"
