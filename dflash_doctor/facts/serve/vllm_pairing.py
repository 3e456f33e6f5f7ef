"""What the installed vLLM says about the rest of a DFlash serve command, read from its source (AST and
plain text, never an import): the reasoning and tool-call parsers it registers, whether it knows
`--language-model-only`, which model runner serves DFlash by default, which of the target's architectures
implement the interface DFlash's auxiliary hidden states need, the model types its own config registry
knows, the FP8 method's minimum compute capability and fallback kernel, and whether its DFlash drafter
slices `qkv_proj.weight` raw (vLLM #51581), and whether a guard on the layers' quant method keeps a quantized
drafter off that slice (0.31.0+). Each value is None where the source could not be read or does
not say: the checks then say what they could not tell.

The facts land in the `vllm_dflash` section under "pairing" (facts.serve.serve.read_vllm_dflash)."""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Sequence
from typing import Any

from dflash_doctor.facts.models.models_shapes import Models
from dflash_doctor.facts.pysource import SourceError, parse_module
from dflash_doctor.facts.safefile import read_regular
from dflash_doctor.knowledge.dflash_formats import CONFIDENTIAL_COMPUTE, DOMINO_HEAD
from dflash_doctor.knowledge.dflash_reports import (
    FUSED_KV_GUARD,
    PARSER_REGISTRIES,
)

__all__ = ["MAX_SOURCE_BYTES", "VllmSources", "assigned_value", "read_vllm_pairing"]

MAX_SOURCE_BYTES = 4_000_000
MAX_BASE_DEPTH = 8


class VllmSources:
    """The source files of one vLLM package (`root` is its `vllm/` directory), shared by facts.serve.serve and this
    module: each file is read once (a regular file, at most MAX_SOURCE_BYTES) and parsed at most once."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._texts: dict[str, str | None] = {}
        self._trees: dict[str, ast.Module | None] = {}

    def text(self, rel: str) -> str | None:
        """The file `rel` (relative to the package) as text; None when it cannot be read."""
        if rel not in self._texts:
            try:
                data: bytes | None = read_regular(os.path.join(self.root, rel), MAX_SOURCE_BYTES)
            except OSError:
                data = None
            self._texts[rel] = data.decode("utf-8", "replace") if data is not None else None
        return self._texts[rel]

    def tree(self, rel: str) -> ast.Module | None:
        """The file parsed; None when it cannot be read or the parser refuses it in any way (a null byte,
        nesting too deep: facts.pysource.SourceError)."""
        if rel not in self._trees:
            text = self.text(rel)
            try:
                self._trees[rel] = parse_module(text, rel) if text is not None else None
            except SourceError:
                self._trees[rel] = None
        return self._trees[rel]


class _Trees:
    """The package's parsed files as this module reads them: a file the parser refuses in any way is None."""

    def __init__(self, sources: VllmSources) -> None:
        self.sources = sources
        self.root = sources.root
        self.refused: set[str] = set()

    def module(self, module: str) -> str:
        """The file of a module path ("model_executor/models/qwen3"): the .py, else the package's __init__."""
        rel = f"{module}.py"
        return rel if os.path.isfile(os.path.join(self.root, rel)) else f"{module}/__init__.py"

    def get(self, rel: str) -> ast.Module | None:
        if rel in self.refused:
            return None
        try:
            return self.sources.tree(rel)
        except (ValueError, RecursionError):
            self.refused.add(rel)
            return None


def assigned_value(tree: ast.Module, name: str) -> ast.expr | None:
    """The value a module-level `name = ...` (or `name: T = ...`) assigns."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return node.value
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            return node.value
    return None


def _registered_names(trees: _Trees, rel: str, table: str, manager: str) -> list[str] | None:
    """The names a parser package registers: the keys of its lazy table, and every
    `@Manager.register_module("name")` / `Manager.register_lazy_module(name="...")` with a literal name."""
    tree = trees.get(rel)
    if tree is None:
        return None
    names: list[str] = []
    value = assigned_value(tree, table)
    if isinstance(value, ast.Dict):
        names += [k.value for k in value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        owner = node.func.value
        if not (isinstance(owner, ast.Name) and owner.id == manager and node.func.attr in
                ("register_module", "register_lazy_module")):
            continue
        literal = [a.value for a in node.args[:1] if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        literal += [k.value.value for k in node.keywords if k.arg in ("name", "module_name")
                    and isinstance(k.value, ast.Constant) and isinstance(k.value.value, str)]
        names += literal
    if value is None and not names:
        return None
    return sorted(set(names))


def _parsers(trees: _Trees) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for kind, (rels, table, manager) in PARSER_REGISTRIES.value.items():
        for rel in rels:
            names = _registered_names(trees, rel, table, manager)
            if names is not None:
                found[kind] = {"names": names, "file": f"vllm/{rel}"}
                break
        else:
            found[kind] = None
    return found


def _language_model_only(sources: VllmSources) -> dict[str, Any]:
    text = sources.text("config/multimodal.py")
    if text is None:
        return {"known": None, "file": None}
    interfaces = sources.text("model_executor/models/interfaces.py") or ""
    return {"known": "language_model_only" in text, "file": "vllm/config/multimodal.py",
            "zero_limits": "if self.language_model_only:" in text,
            # SupportsMultiModal._mark_tower_model: a tower whose modalities all have limit 0 is never built
            "skips_tower": "def _mark_tower_model" in interfaces and "get_limit_per_prompt(m) == 0" in interfaces}


def _string_set(node: ast.expr | None) -> list[str] | None:
    if isinstance(node, ast.Call) and node.args:  # frozenset({...})
        node = node.args[0]
    if isinstance(node, (ast.Set, ast.List, ast.Tuple)):
        return sorted(e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str))
    return None


def _runner(trees: _Trees) -> dict[str, Any]:
    """Which model runner serves DFlash: 'v2-only' (no V1 GPU runner in the package), 'v2-for-archs' (V2 by
    default for the listed target architectures, VLLM_USE_V2_MODEL_RUNNER overrides), 'v2-default' (V2
    unless VLLM_USE_V2_MODEL_RUNNER=0 or a feature V2 lacks), 'v1-default' (V2 only
    when VLLM_USE_V2_MODEL_RUNNER=1), or None when the source says neither."""
    v1 = os.path.isfile(os.path.join(trees.root, "v1/worker/gpu_model_runner.py"))
    v2 = os.path.isfile(os.path.join(trees.root, "v1/worker/gpu/model_runner.py"))
    if v2 and not v1:
        return {"kind": "v2-only", "file": "vllm/v1/worker/gpu/model_runner.py", "default_archs": None}
    tree = trees.get("config/vllm.py")
    if tree is None or not v2:
        return {"kind": "v1-default" if v1 and not v2 else None, "file": None, "default_archs": None}
    archs = _string_set(assigned_value(tree, "DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES"))
    if archs is not None:
        return {"kind": "v2-for-archs", "file": "vllm/config/vllm.py", "default_archs": archs}
    if _returns_true_last(tree, "use_v2_model_runner"):
        return {"kind": "v2-default", "file": "vllm/config/vllm.py", "default_archs": None}
    sources = trees.sources
    text = (sources.text("config/vllm.py") or "") + (sources.text("v1/worker/gpu_worker.py") or "")
    if "def use_v2_model_runner" in text or "VLLM_USE_V2_MODEL_RUNNER" in text:
        return {"kind": "v1-default", "file": "vllm/config/vllm.py", "default_archs": None}
    return {"kind": None, "file": None, "default_archs": None}


def _returns_true_last(tree: ast.Module, name: str) -> bool:
    """Whether a function or method `name` ends with `return True` (vLLM 0.29+'s use_v2_model_runner: V2
    unless VLLM_USE_V2_MODEL_RUNNER=0 or a feature V2 lacks)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name and node.body:
            last = node.body[-1]
            return isinstance(last, ast.Return) and isinstance(last.value, ast.Constant) and last.value.value is True
    return False


def _registry(trees: _Trees) -> dict[str, tuple[str, str]]:
    """Architecture -> (module, class) from every dict literal of model_executor/models/registry.py."""
    tree = trees.get("model_executor/models/registry.py")
    found: dict[str, tuple[str, str]] = {}
    if tree is None:
        return found
    for node in tree.body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if not isinstance(value, ast.Dict):
            continue
        for key, item in zip(value.keys, value.values):
            if isinstance(key, ast.Constant) and isinstance(key.value, str) and isinstance(item, ast.Tuple) \
                    and len(item.elts) >= 2 and all(isinstance(e, ast.Constant) and isinstance(e.value, str)
                                                    for e in item.elts[:2]):
                module, cls = item.elts[0].value, item.elts[1].value  # type: ignore[attr-defined]
                found.setdefault(key.value, (str(module), str(cls)))
    return found


def _module_file(root: str, module: str) -> str | None:
    """A module name of vLLM's registry ("qwen3", or a dotted one) as a file relative to the package."""
    base = module.replace(".", "/")
    own = base.removeprefix("vllm/")
    for rel in (f"model_executor/models/{base}.py", f"model_executor/models/{base}/__init__.py", f"{own}.py",
                f"{own}/__init__.py"):
        if os.path.isfile(os.path.join(root, rel)):
            return rel
    return None


def _module_level(body: Sequence[ast.stmt]) -> list[ast.stmt]:
    """The statements that run at import: the module's own, and those inside its if/try blocks (a platform
    switch such as `if TYPE_CHECKING or current_platform.is_cuda(): from .nvidia.model import ...`), in order."""
    found: list[ast.stmt] = []
    for node in body:
        found.append(node)
        if isinstance(node, ast.If):
            found += _module_level(node.body) + _module_level(node.orelse)
        elif isinstance(node, ast.Try):
            found += _module_level(node.body)
    return found


def _imported_from(tree: ast.Module, rel: str, name: str) -> tuple[str, str] | None:
    """Where `name` in the module `rel` comes from: (file relative to the package, name there)."""
    package = os.path.dirname(rel)
    for node in _module_level(tree.body):
        if not isinstance(node, ast.ImportFrom):
            continue
        for alias in node.names:
            if (alias.asname or alias.name) != name:
                continue
            if node.level:
                parts = package.split("/") if package else []
                parts = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
                module = "/".join(parts + (node.module.split(".") if node.module else []))
            elif node.module and node.module.startswith("vllm."):
                module = node.module[len("vllm."):].replace(".", "/")
            else:
                return None
            return (module, alias.name)
    return None


def _implements(trees: _Trees, rel: str, cls: str, interface: str, flag: str, depth: int = 0,
                seen: set[tuple[str, str]] | None = None) -> tuple[bool | None, str]:
    """Whether class `cls` of file `rel` names `interface` among its bases (followed through the modules it
    imports them from) or sets `flag = True` in its body; with the base it was found through."""
    seen = seen if seen is not None else set()
    if (rel, cls) in seen or depth > MAX_BASE_DEPTH:
        return False, ""
    seen.add((rel, cls))
    tree = trees.get(rel)
    if tree is None:
        return None, ""
    node = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls), None)
    if node is None:
        origin = _imported_from(tree, rel, cls)
        return _implements(trees, trees.module(origin[0]), origin[1], interface, flag, depth + 1, seen) \
            if origin else (None, "")
    for item in node.body:
        targets = item.targets if isinstance(item, ast.Assign) else [item.target] if isinstance(item, ast.AnnAssign) else []
        value = item.value if isinstance(item, (ast.Assign, ast.AnnAssign)) else None
        if any(isinstance(t, ast.Name) and t.id == flag for t in targets) and isinstance(value, ast.Constant):
            return bool(value.value), f"{cls}.{flag}"
    unknown = False
    for base in node.bases:
        name = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else None
        if name is None:
            continue
        if name == interface:
            return True, cls
        own = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)
        origin = None if own is not None else _imported_from(tree, rel, name)
        where = (rel, name) if own is not None else (trees.module(origin[0]), origin[1]) if origin else None
        if where is None:
            continue
        found, via = _implements(trees, where[0], where[1], interface, flag, depth + 1, seen)
        if found:
            return True, via
        unknown |= found is None
    return (None if unknown else False), ""


def _eagle3(trees: _Trees, archs: Sequence[str]) -> dict[str, Any]:
    """The interface DFlash's auxiliary hidden states need, as the installed runner checks it, and whether each
    of `archs` implements it."""
    facts: dict[str, Any] = {"interface": None, "checked_in": None, "archs": {}}
    for rel in ("v1/worker/gpu/spec_decode/eagle/eagle3_utils.py", "v1/worker/gpu_model_runner.py"):
        text = trees.sources.text(rel)
        match = re.search(r"if not (supports_\w+)\((?:self\.get_model\(\)|model)\)", text or "")
        if match:
            facts["checked_in"] = f"vllm/{rel}"
            break
    else:
        return facts
    interfaces = trees.sources.text("model_executor/models/interfaces.py") or ""
    function = match.group(1)
    found = re.search(rf"def {function}\([^)]*\)[^:]*:\s*(?:\"\"\"[^\"]*\"\"\"\s*)?return isinstance\(model, (\w+)\)",
                      interfaces)
    interface = found.group(1) if found else None
    if interface is None:
        return facts
    facts["interface"] = interface
    registry = _registry(trees)
    for arch in archs[:8]:
        entry = registry.get(arch)
        if entry is None:
            facts["archs"][arch] = {"registered": False, "implements": None}
            continue
        module_rel = _module_file(trees.root, entry[0])
        if module_rel is None:
            facts["archs"][arch] = {"registered": True, "class": entry[1], "implements": None}
            continue
        # the class attribute that says it too has the check's name (`supports_eagle3 = True`)
        implements, via = _implements(trees, module_rel, entry[1], interface, function)
        facts["archs"][arch] = {"registered": True, "class": entry[1], "file": f"vllm/{module_rel}",
                                "implements": implements, "via": via}
    return facts


def _rope_layouts(trees: _Trees, archs: Sequence[str]) -> dict[str, Any]:
    """Each target architecture's RoPE layout in its vLLM model file: "interleaved" when a rotary embedding is
    built with `is_neox_style=False` (vLLM 0.28.0 copies the first one it finds onto the DFlash drafter), "neox" when
    the file builds one with get_rope and never names is_neox_style (get_rope's default), else None."""
    registry = _registry(trees)
    found: dict[str, Any] = {}
    for arch in archs[:8]:
        entry = registry.get(arch)
        module_rel = _module_file(trees.root, entry[0]) if entry is not None else None
        text = trees.sources.text(module_rel) if module_rel is not None else None
        layout = None
        if text is not None:
            if re.search(r"is_neox_style\s*=\s*False\b", text):
                layout = "interleaved"
            elif "get_rope(" in text and "is_neox_style" not in text:
                layout = "neox"
        found[arch] = {"file": f"vllm/{module_rel}" if module_rel else None, "layout": layout}
    return found


def _config_registry(trees: _Trees) -> list[str] | None:
    tree = trees.get("transformers_utils/config.py")
    value = assigned_value(tree, "_CONFIG_REGISTRY") if tree is not None else None
    if isinstance(value, ast.Call):
        return sorted({k.arg for k in value.keywords if k.arg} | {
            k.value for a in value.args if isinstance(a, ast.Dict) for k in a.keys
            if isinstance(k, ast.Constant) and isinstance(k.value, str)})
    if isinstance(value, ast.Dict):
        return sorted(k.value for k in value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))
    return None


def _transformers_model_types(root: str, package: str | None) -> dict[str, Any]:
    """The model types the installed transformers knows without remote code (CONFIG_MAPPING_NAMES of
    models/auto/configuration_auto.py); `package` is its directory, else the one beside vLLM."""
    base = package or os.path.join(os.path.dirname(root), "transformers")
    rel = os.path.join(base, "models", "auto", "configuration_auto.py")
    try:
        text = read_regular(rel, MAX_SOURCE_BYTES).decode("utf-8", "replace")
        tree = parse_module(text, rel)
    except (OSError, SourceError):
        return {"file": None, "model_types": None}
    value = assigned_value(tree, "CONFIG_MAPPING_NAMES")
    if isinstance(value, ast.Call) and value.args:
        value = value.args[0]
    types: list[str] = []
    if isinstance(value, (ast.List, ast.Tuple)):
        for element in value.elts:
            if isinstance(element, ast.Tuple) and element.elts and isinstance(element.elts[0], ast.Constant):
                types.append(str(element.elts[0].value))
    elif isinstance(value, ast.Dict):
        types = [str(k.value) for k in value.keys if isinstance(k, ast.Constant)]
    return {"file": rel, "model_types": sorted(types) if types else None}


def _fp8(trees: _Trees) -> dict[str, Any]:
    tree = trees.get("model_executor/layers/quantization/fp8.py")
    facts: dict[str, Any] = {"min_capability": None, "marlin_fallback": None, "native_from": None}
    if tree is None:
        return facts
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "get_min_capability":
            returns = [n.value for n in ast.walk(node) if isinstance(n, ast.Return)]
            if len(returns) == 1 and isinstance(returns[0], ast.Constant) and isinstance(returns[0].value, int):
                facts["min_capability"] = returns[0].value
            break
    text = trees.sources.text("model_executor/layers/quantization/fp8.py") or ""
    facts["marlin_fallback"] = "Marlin" in text or "marlin" in text
    platform = trees.sources.text("platforms/cuda.py") or ""
    native = re.search(r"def supports_fp8\(cls\) -> bool:\s*return cls\.has_device_capability\((\d+)\)", platform)
    facts["native_from"] = int(native.group(1)) if native else None
    return facts


def _is_raw_kv_slice(node: ast.AST) -> bool:
    """`a.qkv_proj.weight[a.q_size :]`: the K/V rows of the fused QKV weight, read as a plain tensor."""
    if not (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice)):
        return False
    value, lower = node.value, node.slice.lower
    return (isinstance(value, ast.Attribute) and value.attr == "weight" and isinstance(value.value, ast.Attribute)
            and value.value.attr == "qkv_proj" and isinstance(lower, ast.Attribute) and lower.attr == "q_size")


def _names(node: ast.AST) -> set[str]:
    return {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute))}


def _function(trees: _Trees, rel: str, name: str, depth: int = 0) -> ast.FunctionDef | None:
    """The module-level function `name` of file `rel`, followed through a `from ... import` once."""
    tree = trees.get(rel)
    if tree is None or depth > 1:
        return None
    own = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
    if own is not None:
        return own
    origin = _imported_from(tree, rel, name)
    return _function(trees, trees.module(origin[0]), origin[1], depth + 1) if origin else None


def _asks_quant_method(trees: _Trees, rel: str, test: ast.expr) -> bool:
    """Whether an `if` test asks the layers' quant method before the raw weight is read: it names
    FUSED_KV_GUARD's class itself (0.31.0-0.33.0: `if all(isinstance(proj.quant_method,
    UnquantizedLinearMethod) ...)`) or calls a function that does (0.34.0: `if _reads_raw_weights(...)`)."""
    if FUSED_KV_GUARD.value in _names(test):
        return True
    called = [n.func.id for n in ast.walk(test) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    for name in called:
        function = _function(trees, rel, name)
        if function is not None and FUSED_KV_GUARD.value in _names(function):
            return True
    return False


def _raw_kv_slices(trees: _Trees, rel: str, tree: ast.Module) -> list[dict[str, Any]]:
    """Each raw K/V slice of the file: its line and the guard around it (the `if` test's source), or None."""
    found: list[dict[str, Any]] = []

    def visit(node: ast.AST, guard: str | None) -> None:
        if _is_raw_kv_slice(node):
            found.append({"line": getattr(node, "lineno", 0), "guard": guard})
            return
        if isinstance(node, ast.If) and guard is None and _asks_quant_method(trees, rel, node.test):
            visit(node.test, None)
            for statement in node.body:
                visit(statement, ast.unparse(node.test)[:200])
            for statement in node.orelse:
                visit(statement, None)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, guard)

    visit(tree, None)
    return found[:16]


def _fused_kv(trees: _Trees) -> dict[str, Any] | None:
    """The drafter files (`*_dflash.py`, `*_dspark.py`) that slice `qkv_proj.weight` raw for the fused context
    K/V (vLLM #51581), each slice with the guard that keeps a quantized layer off it, and the registry's
    architectures served by each such file."""
    models = os.path.join(trees.root, "model_executor", "models")
    try:
        names = sorted(n for n in os.listdir(models) if n.endswith(("_dflash.py", "_dspark.py")))[:64]
    except OSError:
        return None
    files: dict[str, list[dict[str, Any]]] = {}
    unread: list[str] = []
    for name in names:
        rel = f"model_executor/models/{name}"
        tree = trees.get(rel)
        if tree is None:
            unread.append(f"vllm/{rel}")
            continue
        slices = _raw_kv_slices(trees, rel, tree)
        if slices:
            files[f"vllm/{rel}"] = slices
    archs = {arch: f"vllm/{served}" for arch, (module, _cls) in _registry(trees).items()
             if (served := _module_file(trees.root, module)) is not None
             and served.endswith(("_dflash.py", "_dspark.py"))}
    return {"files": files, "archs": dict(sorted(archs.items())[:64]), "unread": unread}


# Where each release resolves a DFlash layer's causality, newest layout first (knowledge.dflash_formats.CAUSALITY_KEYS).
_CAUSALITY_FUNCTIONS = (("model_executor/models/qwen3_dflash.py", "_dflash_layer_causal"),
                        ("model_executor/models/qwen3_dflash.py", "_resolve_layer_attention"),
                        ("v1/worker/gpu/spec_decode/dflash/utils.py", "get_dflash_causal"),
                        ("v1/spec_decode/dflash.py", "__init__"))


def _causality(trees: _Trees) -> dict[str, Any]:
    """Which of the drafter's causality keys the installed vLLM reads (`is_causal`, `dflash_config.causal`,
    `layer_types`), from the function that resolves it: the first of _CAUSALITY_FUNCTIONS whose body reads
    `.get("causal")` or `is_causal`. `keys` [] where none does (0.20.1-0.22.1: every layer non-causal); `file`
    None and `keys` None where the source could not be read."""
    unreadable = False
    for rel, name in _CAUSALITY_FUNCTIONS:
        tree = trees.get(rel)
        if tree is None:
            unreadable |= os.path.isfile(os.path.join(trees.root, rel))
            continue
        for node in ast.walk(tree):
            if not (isinstance(node, ast.FunctionDef) and node.name == name):
                continue
            constants = {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
            reads_causal = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get"
                               and n.args and isinstance(n.args[0], ast.Constant) and n.args[0].value == "causal"
                               for n in ast.walk(node))
            if not (reads_causal or "is_causal" in constants):
                continue
            keys = [key for key, read in (("is_causal", "is_causal" in constants),
                                          ("dflash_config.causal", reads_causal),
                                          ("layer_types", "layer_types" in constants or "layer_types" in _names(node)))
                    if read]
            return {"file": f"vllm/{rel}", "function": name, "keys": keys}
    return {"file": None, "function": None, "keys": None if unreadable else []}


def _domino_runtime(trees: _Trees) -> list[str] | None:
    """The drafter files (`*_dflash.py`) that name the Domino head's GRU (`prefix_gru`): a release that runs
    it. [] in every release read (0.20.1-0.34.0); None where the models directory cannot be listed."""
    models = os.path.join(trees.root, "model_executor", "models")
    try:
        names = sorted(n for n in os.listdir(models) if n.endswith("_dflash.py"))[:64]
    except OSError:
        return None
    head = DOMINO_HEAD.value[0]
    return [f"vllm/model_executor/models/{n}" for n in names
            if head in (trees.sources.text(f"model_executor/models/{n}") or "")]


# The scheduler's one-block backoff for eagle-family drafts (DFlash, DSpark), in _mamba_block_aligned_split.
_BACKOFF = re.compile(r"if self\.use_eagle\w*:\s*last_cache_position = max\(last_cache_position - block_size, 0\)")
# The coordinator aligning Mamba checkpoints to that backoff (0.30.0: "Match Mamba checkpoints to Eagle's attention
# replay boundary").
_ALIGNED = "drop_eagle_checkpoint_block"


def _hybrid_prefix_cache(trees: _Trees, archs: Sequence[str]) -> dict[str, Any]:
    """vLLM #53505 as the installed source shows it: whether the scheduler backs off one block for eagle-family
    drafts on Mamba layers (`backs_off`), whether the KV cache coordinator aligns the Mamba checkpoints to it
    (`aligned`), and which of the target's architectures vLLM's registry serves as hybrid (IsHybrid)."""
    scheduler = trees.sources.text("v1/core/sched/scheduler.py")
    coordinator = trees.sources.text("v1/core/kv_cache_coordinator.py")
    registry = _registry(trees)
    hybrid: dict[str, Any] = {}
    for arch in archs[:8]:
        entry = registry.get(arch)
        module_rel = _module_file(trees.root, entry[0]) if entry is not None else None
        if entry is None or module_rel is None:
            hybrid[arch] = {"hybrid": None, "file": None}
            continue
        found, _via = _implements(trees, module_rel, entry[1], "IsHybrid", "is_hybrid")
        hybrid[arch] = {"hybrid": found, "file": f"vllm/{module_rel}"}
    return {"backs_off": bool(_BACKOFF.search(scheduler)) if scheduler is not None else None,
            "aligned": _ALIGNED in coordinator if coordinator is not None else None,
            "files": ["vllm/v1/core/sched/scheduler.py", "vllm/v1/core/kv_cache_coordinator.py"],
            "archs": hybrid}


def _confidential_compute(sources: VllmSources) -> dict[str, Any]:
    """Whether the installed vLLM detects NVIDIA Confidential Computing (platforms/cuda.py asks NVML's
    nvmlSystemGetConfComputeState, 0.34.0) and reads its override (envs.py VLLM_CONFIDENTIAL_COMPUTE)."""
    platform, envs = sources.text("platforms/cuda.py"), sources.text("envs.py")
    rule = CONFIDENTIAL_COMPUTE.value
    return {"detects": rule["nvml_call"] in platform if platform is not None else None,
            "override": rule["env"] in envs if envs is not None else None, "file": "vllm/platforms/cuda.py"}


def read_vllm_pairing(sources: VllmSources, target_archs: Sequence[str] = (),
                      transformers: str | None = None) -> dict[str, Any]:
    """The facts of the module docstring for the vLLM package `sources` reads; `transformers` is the installed
    transformers package directory when the distributions facts name one."""
    trees = _Trees(sources)
    archs = [a for a in target_archs if isinstance(a, str)]
    fused = _fused_kv(trees)
    return {
        "parsers": _parsers(trees),
        "language_model_only": _language_model_only(sources),
        "runner": _runner(trees),
        "eagle3": _eagle3(trees, archs),
        "rope_layouts": _rope_layouts(trees, archs),
        "config_registry": _config_registry(trees),
        "transformers": _transformers_model_types(sources.root, transformers),
        "fp8": _fp8(trees),
        "fused_kv_raw_weight": sorted(f for f, slices in fused["files"].items() if any(
            s["guard"] is None for s in slices)) if fused is not None else None,
        "fused_kv": fused,
        "causality": _causality(trees),
        "domino_runtime": _domino_runtime(trees),
        "hybrid_prefix_cache": _hybrid_prefix_cache(trees, archs),
        "confidential_compute": _confidential_compute(sources),
    }


def target_architectures(models: Models) -> list[str]:
    return models.target.architectures[:8] if models.target is not None else []
