"""Facts for the serve layer: the command line, the port, and what the installed vLLM's source says.

- `serve_args`: the `vllm serve` command the user will run (Context.options["serve"]), parsed by vLLM's own
  parser in the target interpreter when vLLM imports there (probe `vllm_args`), else by the documented
  subset (`dflash_doctor.facts.serve.serve_args`); the facts name the parser. Also whether the port can be bound,
  and the overrides a CI user gives instead of GPU facts.
- `vllm_dflash`: what the installed vLLM accepts for DFlash, read from its source without importing it: the
  DFlash architectures in its registry, its speculative methods, the version-dependent rules (by the marker
  text recorded in knowledge.dflash), and the attention backend it would pick for each compute capability
  (its `_get_backend_priorities` and each backend's `supports_*` methods, evaluated on constants).

Context.options keys read here: "serve" = {"argv": [...], "vllm_parser": bool (default True), "validate":
bool (default True: vLLM's create_engine_config and attention selector, on the machine's GPUs or a simulated
platform, see `simulated_platform`), "gpus": int, "gpu_memory_gib": float}; "model", "drafter" (see
collectors.models).
"""

from __future__ import annotations

import ast
import contextlib
import errno
import os
import socket
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from dflash_doctor.context import Context
from dflash_doctor.facts.gpu.nvml_shapes import Gpu
from dflash_doctor.facts.modelfiles import refused_files
from dflash_doctor.facts.models.models import hub_cache, resolve_model_path
from dflash_doctor.facts.models.models_shapes import Models
from dflash_doctor.facts.probes import ProbeJob, ProbeOutcome, run_probe
from dflash_doctor.facts.python.environment_shapes import Distributions, Target
from dflash_doctor.facts.python.vllm_source import vllm_package_dir
from dflash_doctor.facts.safefile import environment_roots
from dflash_doctor.facts.serve.serve_args import merge_spec_flags, parse_serve_command
from dflash_doctor.facts.serve.serve_shapes import ServeArgs, VllmDflash
from dflash_doctor.facts.serve.vllm_environ import read_vllm_environ
from dflash_doctor.facts.serve.vllm_pairing import VllmSources, read_vllm_pairing, target_architectures
from dflash_doctor.facts.shape import Collected, by_section
from dflash_doctor.knowledge.archs import parse_target_archs
from dflash_doctor.knowledge.dflash import (
    BATCH_HUGE_MARKER,
    DFLASH_MODEL_FILE,
    FLASH_ATTN_QUANTIZED_KV,
    LAYER_IDS_PLUS_ONE_MARKER,
    MASK_TOP_LEVEL_MARKER,
    NON_CAUSAL_SCOPE,
    SAMPLE_FROM_ANCHOR_MARKER,
    SLIDING_WINDOW_MARKER,
    SPEC_BUDGET_RULE_A,
    SPEC_BUDGET_RULE_B,
    SPEC_BUDGET_RULES,
    TARGET_HIDDEN_SIZE_NULL,
    YARN_ALREADY_SCALED_MARKER,
)
from dflash_doctor.knowledge.dflash_reports import (
    DRAFTER_CONTEXT_RAISED,
    PADDED_VOCAB_V2,
    ROPE_LAYOUT_FROM_TARGET,
    SPECULATORS_DFLASH,
    SPECULATORS_LAUNCH,
)
from dflash_doctor.knowledge.vllm import DEVICE_QUERY_OPS
from dflash_doctor.units import GIB

__all__ = ["CAPABILITIES", "collect_args", "collect_vllm", "head_sizes_of", "port_facts", "read_vllm_dflash"]

ENV_NAMES = ("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "VLLM_USE_V2_MODEL_RUNNER", "HF_HUB_OFFLINE", "HF_HOME",
             "HF_HUB_CACHE", "CUDA_VISIBLE_DEVICES")
MAX_ENVIRON_NAMES = 512


def device_queries() -> list[dict[str, Any]]:
    """knowledge.vllm.DEVICE_QUERY_OPS as the vllm_args probe takes it (it answers them on a simulated platform
    where the module that registers them cannot load)."""
    return [{"first": first, "last": last, "module": module, "op": op, "true_on": [list(r) for r in ranges]}
            for first, last, module, op, ranges in DEVICE_QUERY_OPS.value]



def vllm_environ_names(environ: Mapping[str, str]) -> list[str]:
    """The `VLLM_*` names in the environment `vllm serve` gets (vLLM's validate_environ judges each): names
    only, a value may be a secret (VLLM_API_KEY)."""
    return sorted(n for n in environ if n.startswith("VLLM_"))[:MAX_ENVIRON_NAMES]


# Compute capabilities the backend choice is evaluated for (every CUDA GPU vLLM runs on has one of these).
CAPABILITIES = ("7.0", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.3", "11.0", "12.0", "12.1")


# ------------------------------------------------------------------------------------------ serve_args


def port_facts(host: str | None, port: int | None) -> dict[str, Any]:
    """Can vLLM bind (host or "", port)? It binds with SO_REUSEADDR and SO_REUSEPORT
    (vllm/entrypoints/openai/api_server.py create_server_socket), so a listener that also set SO_REUSEPORT
    would not stop it: the port would be shared. Both bind attempts are made, and closed at once."""
    facts: dict[str, Any] = {"host": host, "port": port, "free": None, "shared_listener": None, "error": None}
    if not isinstance(port, int) or not 0 <= port <= 65535:
        facts["error"] = f"not a TCP port: {port!r}"
        return facts
    address = host or ""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET

    def bind(reuse_port: bool) -> OSError | None:
        try:
            sock = socket.socket(family, socket.SOCK_STREAM)
        except OSError as exc:
            return exc
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if reuse_port and hasattr(socket, "SO_REUSEPORT"):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind((address, port))
            return None
        except OSError as exc:
            return exc
        finally:
            sock.close()

    plain = bind(reuse_port=False)
    if plain is None:
        facts["free"] = True
        return facts
    facts["free"] = False
    facts["error"] = f"[Errno {plain.errno}] {plain.strerror}" if plain.errno else str(plain)
    facts["errno"] = errno.errorcode.get(plain.errno or 0)
    if plain.errno == errno.EADDRINUSE:
        facts["shared_listener"] = bind(reuse_port=True) is None
    return facts


# The validation probe runs offline and leaves no trace: no download (the models are read where they are), no
# usage report, no bytecode (the probes' own -B). The probe sets these before it imports vLLM.
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
           "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "PYTHONDONTWRITEBYTECODE": "1"}


def _roots(earlier: Mapping[str, object]) -> list[str] | None:
    return environment_roots(Target.read(earlier.get(Target.SECTION)))


def simulated_platform(serve: Mapping[str, Any], target_archs: Sequence[str],
                       gpu: Gpu | None) -> dict[str, Any] | None:
    """The GPUs vLLM's validation is to see, or None to let vLLM detect the machine's own.

    vLLM detects the GPUs itself where NVML lists some and the user gave nothing in their place; otherwise
    (a CI image build, or --target-arch/--gpus/--gpu-memory given) it runs on a simulated CUDA platform made of
    these facts: the architectures from --target-arch else NVML's, the count from --gpus else NVML's, the
    memory from --gpu-memory else NVML's; what is known from neither stays unknown (vLLM's own fallbacks)."""
    devices = gpu.devices if gpu is not None else []
    given = [n for n, v in (("--target-arch", target_archs), ("--gpus", serve.get("gpus")),
                            ("--gpu-memory", serve.get("gpu_memory_gib"))) if v]
    if devices and not given:
        return None
    sources: dict[str, str] = {}
    capabilities: list[list[int]] = []
    for spec in target_archs:
        try:
            capabilities += [[cc[0], cc[1]] for cc in parse_target_archs(spec) if [cc[0], cc[1]] not in capabilities]
        except ValueError:
            continue
    if capabilities:
        sources["capability"] = "--target-arch"
    elif devices and devices[0].compute_capability is not None:
        capabilities = [list(devices[0].compute_capability)[:2]]
        sources["capability"] = "NVML"
    count = serve.get("gpus")
    if count:
        sources["count"] = "--gpus"
    elif devices:
        count, sources["count"] = len(devices), "NVML"
    memory: int | None = None
    if serve.get("gpu_memory_gib"):
        memory, sources["memory"] = int(float(serve["gpu_memory_gib"]) * GIB), "--gpu-memory"
    elif devices and devices[0].memory is not None:
        memory, sources["memory"] = devices[0].memory.total, "NVML"
    name = devices[0].name if devices and sources.get("capability") == "NVML" else None
    return {"capabilities": capabilities, "count": count, "memory_bytes": memory, "name": name,
            "simulated_from": sources}


def models_read_by_validation(subset: Mapping[str, Any]) -> list[str]:
    """The model names vLLM's validation reads, as the command gives them: the served model, the directories its
    --tokenizer and --hf-config-path name, and the speculative config's "model" (the probe holds vLLM's own
    reading of the command to these: probes/vllm_args.py `unchecked_models`)."""
    spec = (subset.get("speculative_config") or {}).get("value")
    fields = subset.get("fields") or {}
    names = [*(fields.get(name) for name in ("model", "tokenizer", "hf_config_path")),
             spec.get("model") if isinstance(spec, dict) else None]
    return list(dict.fromkeys(n for n in names if isinstance(n, str) and n))


def refused_for_validation(names: Sequence[str], cwd: str) -> list[dict[str, Any]]:
    """The files of those models that the doctor refuses to read (facts.modelfiles.refused_files: its own caps):
    vLLM's validation, which would read them whole, is not given the command then."""
    refused: list[dict[str, Any]] = []
    for name in names:
        resolved = resolve_model_path(name, cwd)
        ref = (resolved.get("hf_cache") or {}).get("ref_refused")
        if ref:  # huggingface_hub reads the cache's ref whole, before any file of the model
            refused.append(dict(ref))
        if resolved["path"] is not None and resolved["is_dir"]:
            refused.extend({"file": p["file"], "kind": p["kind"], "message": p["message"]}
                           for p in refused_files(resolved["path"]))
    return refused


@contextlib.contextmanager
def model_code_home(run: bool) -> Iterator[dict[str, str] | None]:
    """With --run-model-code: the environment the validation runs the model's code in, a HOME, XDG and Hugging
    Face modules cache in a directory of the doctor's own, removed after. The Hugging Face hub cache and vLLM's
    cache stay the user's, where the models and vLLM's learned model classes are read (offline; vLLM's writes
    there are kept unsaved)."""
    if not run:
        yield None
        return
    user = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="dflash-doctor-model-code-", ignore_cleanup_errors=True) as sandbox:
        home = os.path.join(sandbox, "home")
        os.mkdir(home, 0o700)
        yield {"HOME": home, "XDG_CACHE_HOME": os.path.join(home, ".cache"),
               "XDG_CONFIG_HOME": os.path.join(home, ".config"), "XDG_DATA_HOME": os.path.join(home, ".local", "share"),
               "HF_HOME": os.path.join(home, ".cache", "huggingface"),
               "HF_MODULES_CACHE": os.path.join(home, ".cache", "huggingface", "modules"),
               "TMPDIR": sandbox, "HF_HUB_CACHE": hub_cache(user),
               "VLLM_CACHE_ROOT": user.get("VLLM_CACHE_ROOT") or os.path.join(
                   user.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "vllm")}


def _vllm_args(ctx: Context, job: dict[str, Any], models: Sequence[str]) -> tuple[ProbeOutcome, dict[str, Any]]:
    """The vllm_args probe on `job`, vLLM's validation given only models whose files the doctor does not refuse
    (`models` are looked at first; the probe validates no other)."""
    refused = refused_for_validation(models, ctx.cwd)
    asked = job["validate"]
    job.update(checked_models=list(models), validate=job["validate"] and not refused,
               refused_files=[r["file"] for r in refused])  # opened by nothing in the probe, its parser included
    with model_code_home(job["model_code"]) as sandbox:
        ran = {**job, "environ": {**OFFLINE, **sandbox}} if sandbox is not None else job
        # In the run's one target process when there is one (its torch is imported already), else alone.
        outcome = (ctx.target_process.submit(ProbeJob("vllm_args", "vllm_args", ran)).result()
                   if ctx.target_process is not None
                   else run_probe(ctx.python, "vllm_args", ran, timeout_s=ctx.timeout_s, cwd=ctx.cwd))
    data = outcome.data if isinstance(outcome.data, dict) else {}
    if refused and asked:
        data["not_validated"] = {"reason": "refused-files", "models": [], "files": refused}
    return outcome, data


def _parsed_spec(parsed: Mapping[str, Any], raw: str | None) -> dict[str, Any]:
    """The speculative config as vLLM's parser left it, with --spec-method/--spec-model/--spec-tokens merged as
    vLLM's create_speculative_config merges them (the parser keeps them apart until then)."""
    given = parsed.get("speculative_config")
    merged, from_flags, conflict = merge_spec_flags(given if isinstance(given, dict) else None, parsed)
    return {"given": merged is not None, "raw": raw, "value": merged, "error": None, "from_flags": from_flags,
            "conflict": conflict}


def collect_args(ctx: Context, earlier: Mapping[str, object]) -> Collected:
    options = ctx.options or {}
    serve = options.get("serve") or {}
    assume = {"gpus": serve.get("gpus"), "gpu_memory_gib": serve.get("gpu_memory_gib"),
              "target_archs": list(ctx.target_archs)}
    if not serve.get("argv"):
        return by_section(ServeArgs.collected({"given": False, "assume": assume}))
    started = time.monotonic()
    argv = [str(a) for a in serve["argv"]]
    subset = parse_serve_command(argv, ctx.cwd)
    facts: dict[str, Any] = {"given": True, "argv": argv, "cwd": ctx.cwd, "assume": assume,
                             "environ": {n: os.environ.get(n) for n in ENV_NAMES},
                             "vllm_environ": vllm_environ_names(os.environ)}
    vllm_parser: dict[str, Any] = {"tried": False}
    parsed: Mapping[str, Any] | None = None
    if subset["program_error"] is None and serve.get("vllm_parser", True):
        platform = simulated_platform(serve, ctx.target_archs, Gpu.read(earlier.get(Gpu.SECTION)))
        validate = bool(serve.get("validate", True))
        model_code = validate and bool(serve.get("run_model_code"))
        job = {"args": subset["args"], "validate": validate, "platform": platform, "roots": _roots(earlier),
               "environ": OFFLINE, "checked_models": [], "model_code": model_code,
               "device_queries": device_queries() if platform else []}
        outcome, data = _vllm_args(ctx, job, models_read_by_validation(subset))
        unchecked = (data.get("not_validated") or {}).get("models") or []
        if data.get("available") and unchecked:
            # vLLM's parser read models the doctor's own reading did not find (a --config file): now looked at,
            # the validation runs on them (once more: vLLM's reading is what it will read).
            outcome, data = _vllm_args(ctx, job, [*job["checked_models"], *unchecked])
        vllm_parser = {"tried": True, "available": bool(data.get("available")), "version": data.get("version"),
                       "import_error": data.get("import_error"), "parser_error": data.get("parser_error"),
                       "parse_error": data.get("parse_error"),
                       "validation": data.get("validation"), "validating": bool(data.get("validating")),
                       "platform": data.get("platform"),
                       "attention": data.get("attention"), "given": data.get("given") or [],
                       "not_validated": data.get("not_validated"), "model_code_run": model_code,
                       "environ": data.get("environ"), "skipped_parts": data.get("skipped_parts") or [],
                       "bound": data.get("bound") or {}, "process": outcome.as_facts()}
        if data.get("available") and isinstance(data.get("fields"), dict):
            parsed = data["fields"]
    if parsed is not None:
        facts.update(parser="vllm", fields=dict(parsed), flags_given=vllm_parser["given"], unknown_flags=[],
                     errors=[], program=subset["program"], program_error=None,
                     speculative_config=_parsed_spec(parsed, subset["speculative_config"]["raw"]))
    else:
        facts.update(parser="subset", **{k: subset[k] for k in ("fields", "flags_given", "unknown_flags", "errors",
                                                                  "program", "program_error", "speculative_config",
                                                                  "config_file", "abbreviated")})
    facts["vllm_parser"] = vllm_parser
    fields = facts["fields"]
    port = fields.get("port")
    facts["port"] = port_facts(fields.get("host"), port if isinstance(port, int) else 8000)
    facts["seconds"] = round(time.monotonic() - started, 3)
    return by_section(ServeArgs.collected(facts))


# ------------------------------------------------------------------------------- reading vLLM's source


class _Unknown(Exception):
    """The expression depends on something the doctor cannot know without running vLLM."""


class _Capability(tuple):  # type: ignore[type-arg]
    """DeviceCapability: compares as (major, minor), exposes .major and .minor."""

    @property
    def major(self) -> int:
        return int(self[0])

    @property
    def minor(self) -> int:
        return int(self[1])


class _ClassLevel(NamedTuple):
    """One class of a backend's chain: its methods and its constant class attributes."""

    methods: dict[str, ast.FunctionDef]
    attributes: dict[str, Any]


class _Evaluator:
    """Evaluates the small constant logic of vLLM's backend selection: comparisons, if/else, returns of
    lists of enum members. Anything else (a call into CUDA, a module-level cache) is `_Unknown`."""

    def __init__(self, methods: Mapping[str, ast.FunctionDef] | None = None,
                 chain: Sequence[_ClassLevel] = ()) -> None:
        """`chain`: the class and its bases as vLLM resolves them, most derived first; `cls.name` and
        `cls.method()` look up from the top, `super().method()` from below the method being run."""
        self.chain = list(chain) or [_ClassLevel(dict(methods or {}), {})]
        self.methods = {name: f for level in reversed(self.chain) for name, f in level.methods.items()}
        self._levels: list[int] = []

    def _lookup(self, name: str, below: int = -1) -> tuple[int, ast.FunctionDef] | None:
        for index, level in enumerate(self.chain):
            if index > below and name in level.methods:
                return index, level.methods[name]
        return None

    def call(self, function: ast.FunctionDef, values: Mapping[str, Any], level: int | None = None) -> Any:
        env = {a.arg: values[a.arg] for a in function.args.args + function.args.kwonlyargs if a.arg in values}
        if level is None:
            found = self._lookup(function.name)
            level = found[0] if found is not None and found[1] is function else 0
        self._levels.append(level)
        try:
            kind, value = self._run(function.body, env)
        finally:
            self._levels.pop()
        if kind != "return":
            raise _Unknown("no return")
        return value

    def _call_method(self, found: tuple[int, ast.FunctionDef] | None, node: ast.Call,
                     env: Mapping[str, Any]) -> Any:
        if found is None:
            raise _Unknown("method")
        level, function = found
        params = [a.arg for a in function.args.args if a.arg != "cls"]
        values = dict(zip(params, (self.eval(arg, env) for arg in node.args)))
        values.update({k.arg: self.eval(k.value, env) for k in node.keywords if k.arg})
        return self.call(function, values, level)

    def _run(self, body: Sequence[ast.stmt], env: dict[str, Any]) -> tuple[str, Any]:
        for statement in body:
            if isinstance(statement, ast.Return):
                return "return", self.eval(statement.value, env) if statement.value is not None else None
            if isinstance(statement, ast.If):
                branch = statement.body if self.eval(statement.test, env) else statement.orelse
                kind, value = self._run(branch, env)
                if kind == "return":
                    return kind, value
            elif isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
                    and isinstance(statement.targets[0], ast.Name):
                try:
                    env[statement.targets[0].id] = self.eval(statement.value, env)
                except _Unknown:
                    env.pop(statement.targets[0].id, None)
            elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
                continue  # a docstring
            elif isinstance(statement, (ast.Pass, ast.Import, ast.ImportFrom)):
                continue
            else:
                raise _Unknown(type(statement).__name__)
        return "fall", None

    def eval(self, node: ast.AST | None, env: Mapping[str, Any]) -> Any:  # one case per node type
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in env:
                return env[node.id]
            raise _Unknown(node.id)
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id.endswith("BackendEnum"):
                return node.attr
            if isinstance(node.value, ast.Name) and node.value.id == "cls" and node.value.id not in env:
                for level in self.chain:
                    if node.attr in level.attributes:
                        return level.attributes[node.attr]
                raise _Unknown(node.attr)
            base = self.eval(node.value, env)
            if isinstance(base, _Capability) and node.attr in ("major", "minor"):
                return getattr(base, node.attr)
            raise _Unknown(node.attr)
        if isinstance(node, ast.Compare):
            left = self.eval(node.left, env)
            for op, right_node in zip(node.ops, node.comparators):
                right = self.eval(right_node, env)
                if not _compare(op, left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.BoolOp):
            if isinstance(node.op, ast.And):
                result: Any = True
                for value in node.values:
                    result = self.eval(value, env)
                    if not result:
                        return result
                return result
            for value in node.values:
                result = self.eval(value, env)
                if result:
                    return result
            return result
        if isinstance(node, ast.UnaryOp):
            operand = self.eval(node.operand, env)
            if isinstance(node.op, ast.Not):
                return not operand
            if isinstance(node.op, ast.USub):
                return -operand
            raise _Unknown("unary")
        if isinstance(node, ast.BinOp):
            left, right = self.eval(node.left, env), self.eval(node.right, env)
            operations: dict[type[ast.operator], Callable[[], Any]] = {ast.Mod: lambda: left % right, ast.Add: lambda: left + right,
                          ast.Sub: lambda: left - right, ast.Mult: lambda: left * right,
                          ast.FloorDiv: lambda: left // right}
            for kind, apply in operations.items():
                if isinstance(node.op, kind):
                    return apply()
            raise _Unknown("binop")
        if isinstance(node, ast.IfExp):
            return self.eval(node.body if self.eval(node.test, env) else node.orelse, env)
        if isinstance(node, (ast.List, ast.Tuple)):
            items: list[Any] = []
            for element in node.elts:
                if isinstance(element, ast.Starred):
                    items.extend(self.eval(element.value, env))
                else:
                    items.append(self.eval(element, env))
            return items
        if isinstance(node, ast.Call):
            return self._call(node, env)
        raise _Unknown(type(node).__name__)

    def _call(self, node: ast.Call, env: Mapping[str, Any]) -> Any:
        func = node.func
        if isinstance(func, ast.Name) and func.id == "DeviceCapability" and not node.keywords:
            return _Capability(self.eval(arg, env) for arg in node.args)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "cls":
            return self._call_method(self._lookup(func.attr), node, env)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call) \
                and isinstance(func.value.func, ast.Name) and func.value.func.id == "super" and not func.value.args:
            return self._call_method(self._lookup(func.attr, self._levels[-1] if self._levels else 0), node, env)
        if isinstance(func, ast.Attribute) and func.attr in ("startswith", "endswith") and not node.keywords:
            text = self.eval(func.value, env)
            args = [self.eval(arg, env) for arg in node.args]
            if isinstance(text, str) and all(isinstance(a, (str, tuple)) for a in args):
                return getattr(text, func.attr)(*args)
        raise _Unknown("call")


def _compare(op: ast.cmpop, left: Any, right: Any) -> bool:
    table: dict[type[ast.cmpop], Callable[[], Any]] = {ast.Eq: lambda: left == right, ast.NotEq: lambda: left != right, ast.Lt: lambda: left < right,
             ast.LtE: lambda: left <= right, ast.Gt: lambda: left > right, ast.GtE: lambda: left >= right,
             ast.In: lambda: left in right, ast.NotIn: lambda: left not in right,
             ast.Is: lambda: left is right, ast.IsNot: lambda: left is not right}
    for kind, apply in table.items():
        if isinstance(op, kind):
            return bool(apply())
    raise _Unknown("compare")


def _functions(tree: ast.AST, name: str) -> list[ast.FunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name]


def _registry_archs(sources: VllmSources) -> list[str] | None:
    tree = sources.tree("model_executor/models/registry.py")
    if tree is None:
        return None
    names: set[str] = set()
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
            node.target if isinstance(node, ast.AnnAssign) else None
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if not isinstance(target, ast.Name) or not isinstance(value, ast.Dict):
            continue
        if target.id in ("_PREVIOUSLY_SUPPORTED_MODELS", "_OOT_SUPPORTED_MODELS"):
            continue
        names.update(k.value for k in value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))
    return sorted(names)


def _literal_values(tree: ast.Module, name: str, seen: set[str] | None = None) -> list[str]:
    """The strings of `name = Literal[...]`, following names of other Literal aliases in the module."""
    seen = seen or set()
    if name in seen:
        return []
    seen.add(name)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            value = node.value
            if isinstance(value, ast.Subscript):
                inner = value.slice
                elements = inner.elts if isinstance(inner, ast.Tuple) else [inner]
                found: list[str] = []
                for element in elements:
                    if isinstance(element, ast.Constant) and isinstance(element.value, str):
                        found.append(element.value)
                    elif isinstance(element, ast.Name):
                        found.extend(_literal_values(tree, element.id, seen))
                return found
    return []


def _aux_supported(tree: ast.Module | None) -> list[str] | None:
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "aux_hidden_states_supported"
                                                for t in node.targets) and isinstance(node.value, ast.List):
            return [e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return None


_MARKERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "layer_ids_plus_one": (LAYER_IDS_PLUS_ONE_MARKER.value, ("v1/worker/gpu_model_runner.py",
                                                             "v1/worker/gpu/spec_decode/eagle/eagle3_utils.py")),
    "mask_top_level": (MASK_TOP_LEVEL_MARKER.value, ("v1/worker/gpu/spec_decode/utils.py",)),
    "sample_from_anchor_refused": (SAMPLE_FROM_ANCHOR_MARKER.value, ("v1/worker/gpu/spec_decode/dflash/speculator.py",)),
    "sliding_window_required": (SLIDING_WINDOW_MARKER.value, ("model_executor/models/qwen3_dflash.py",)),
    "reads_layer_types": ("layer_types", ("model_executor/models/qwen3_dflash.py",)),
    "target_hidden_size_null_ok": (TARGET_HIDDEN_SIZE_NULL.value, ("model_executor/models/qwen3_dflash.py",)),
    "spec_budget_a": (SPEC_BUDGET_RULE_A.value, ("config/vllm.py",)),
    "spec_budget_b": (SPEC_BUDGET_RULE_B.value, ("config/vllm.py",)),
    "spec_budget_subtracts": (SPEC_BUDGET_RULES.value["subtracts_marker"], ("config/vllm.py",)),
    "spec_budget_draft_seqs": (SPEC_BUDGET_RULES.value["draft_seqs_marker"], ("config/vllm.py",)),
    "non_causal_all_layers": (NON_CAUSAL_SCOPE.value["all-layers"], ("v1/attention/selector.py",)),
    "drafter_own_backend": (NON_CAUSAL_SCOPE.value["drafter-own-backend"], ("v1/spec_decode/llm_base_proposer.py",)),
    "drafter_own_backend_v2": (NON_CAUSAL_SCOPE.value["drafter-own-backend-v2"],
                               ("v1/worker/gpu/spec_decode/dflash/utils.py",)),
    "batch_huge_tier": (BATCH_HUGE_MARKER.value, ("engine/arg_utils.py",)),
    "yarn_already_scaled": (YARN_ALREADY_SCALED_MARKER.value, ("config/model.py",)),
    "draft_context_raised": (DRAFTER_CONTEXT_RAISED.value["override_marker"], ("config/speculative.py",)),
    "limit_to_draft": (DRAFTER_CONTEXT_RAISED.value["limiter_marker"], ("config/vllm.py",)),
    "speculators_aux_minus_one": (SPECULATORS_DFLASH.value["aux_minus_one_marker"],
                                  ("transformers_utils/configs/speculators/algos.py",)),
    "speculators_sample_from_anchor": (SPECULATORS_DFLASH.value["optional_keys"]["sample_from_anchor"][0],
                                       ("transformers_utils/configs/speculators/algos.py",)),
    "speculators_causal": (SPECULATORS_DFLASH.value["optional_keys"]["causal"][0],
                           ("transformers_utils/configs/speculators/algos.py",)),
    "speculators_verifier_remote_only": (SPECULATORS_LAUNCH.value["remote_only_marker"], ("transformers_utils/config.py",)),
    "speculators_user_spec_merged": (SPECULATORS_LAUNCH.value["merge_marker"], ("transformers_utils/config.py",)),
    "speculators_dflash2_as_dflash": (SPECULATORS_LAUNCH.value["dflash2_marker"],
                                      ("transformers_utils/configs/speculators/base.py",)),
    "v2_lm_head_kept_for_vocab_remap": (PADDED_VOCAB_V2.value["marker"], ("v1/worker/gpu/spec_decode/dflash/utils.py",)),
    "rope_layout_from_target": (ROPE_LAYOUT_FROM_TARGET.value["marker"],
                                ("v1/worker/gpu/spec_decode/dflash/utils.py", "v1/spec_decode/dflash.py")),
    "dflash2_conv_block_from_k": ("block_size=1 + speculative_config.num_speculative_tokens",
                                  ("model_executor/models/qwen3_dflash2.py",)),
    "multi_kv_group_v2": ("if self._dflash_needs_multi_kv_group():", ("config/vllm.py",)),
    "v2_dense_unquantized_only": ("return not model_config.is_moe and not model_config.is_quantized",
                                  ("config/vllm.py",)),
    "v2_dense_default": ("or not model_config.is_moe", ("config/vllm.py",)),
    "fa4_fp8_kv": (FLASH_ATTN_QUANTIZED_KV.value["fa4_marker"], ("v1/attention/backends/fa_utils.py",)),
    "dflash_causal_key": ('.get("causal"', ("v1/spec_decode/dflash.py", "model_executor/models/qwen3_dflash.py")),
}


def _markers(sources: VllmSources) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for name, (needle, files) in _MARKERS.items():
        where = None
        for rel in files:
            text = sources.text(rel)
            if text is not None and needle in text:
                where = rel
                break
        # any() stops at the first readable file, never past the one the needle was found in
        found[name] = {"found": where is not None, "file": where,
                       "readable": any(sources.text(rel) is not None for rel in files)}
    return found


def _backend_classes(sources: VllmSources) -> dict[str, tuple[str, str]]:
    """AttentionBackendEnum member -> (file relative to the vllm package, class name)."""
    tree = sources.tree("v1/attention/backends/registry.py")
    found: dict[str, tuple[str, str]] = {}
    if tree is None:
        return found
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "AttentionBackendEnum":
            for item in node.body:
                if isinstance(item, ast.Assign) and len(item.targets) == 1 and isinstance(item.targets[0], ast.Name) \
                        and isinstance(item.value, ast.Constant) and isinstance(item.value.value, str):
                    module, _, cls = item.value.value.rpartition(".")
                    if module.startswith("vllm."):
                        found[item.targets[0].id] = (module[len("vllm."):].replace(".", "/") + ".py", cls)
    return found


def _class_chain(sources: VllmSources, rel: str, cls: str) -> list[_ClassLevel]:
    """`cls` and its bases as vLLM resolves them: its own, then its bases in the same module, then
    AttentionBackend's defaults (v1/attention/backend.py); each with its methods and constant attributes."""
    chain: list[_ClassLevel] = []
    todo: list[tuple[str, str]] = [(rel, cls)]
    seen: set[tuple[str, str]] = set()
    base_done = False
    while todo or not base_done:
        if not todo:
            todo, base_done = [("v1/attention/backend.py", "AttentionBackend")], True
        file, name = todo.pop(0)
        if (file, name) in seen:
            continue
        seen.add((file, name))
        tree = sources.tree(file)
        if tree is None:
            continue
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                methods = {i.name: i for i in node.body if isinstance(i, ast.FunctionDef)}
                chain.append(_ClassLevel(methods, _class_constants(node)))
                todo.extend((file, b.id) for b in node.bases if isinstance(b, ast.Name))
    return chain


def _class_constants(node: ast.ClassDef) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for item in node.body:
        target = item.targets[0] if isinstance(item, ast.Assign) and len(item.targets) == 1 else \
            item.target if isinstance(item, ast.AnnAssign) else None
        value = item.value if isinstance(item, (ast.Assign, ast.AnnAssign)) else None
        if isinstance(target, ast.Name) and value is not None:
            try:
                found[target.id] = ast.literal_eval(value)
            except ValueError:
                continue
    return found


def _class_methods(sources: VllmSources, rel: str, cls: str) -> dict[str, ast.FunctionDef]:
    methods: dict[str, ast.FunctionDef] = {}
    for level in _class_chain(sources, rel, cls):
        for name, function in level.methods.items():
            methods.setdefault(name, function)
    return methods


def _kv_combination_reason(methods: Mapping[str, ast.FunctionDef]) -> str | None:
    """The reason a backend's supports_combination gives a quantized KV cache it cannot run ("FP8 KV cache
    requires FA3 on SM90 or FA4 on SM100"), vLLM's own words, read from its source."""
    function = methods.get("supports_combination")
    if function is None:
        return None
    for node in ast.walk(function):
        if isinstance(node, ast.If) and len(node.body) == 1 and isinstance(node.body[0], ast.Return):
            test = ast.unparse(node.test)
            value = node.body[0].value
            if "is_quantized_kv_cache" in test and "use_mm_prefix" not in test \
                    and isinstance(value, ast.Constant) and isinstance(value.value, str):
                return value.value
    return None


def _try(function: ast.FunctionDef | None, evaluator: _Evaluator, values: Mapping[str, Any]) -> Any:
    if function is None:
        return None
    try:
        return evaluator.call(function, values)
    except (_Unknown, TypeError, ValueError, ZeroDivisionError):
        return None


def _attention(sources: VllmSources, head_sizes: Sequence[int]) -> dict[str, Any]:
    tree = sources.tree("platforms/cuda.py")
    functions = _functions(tree, "_get_backend_priorities") if tree is not None else []
    facts: dict[str, Any] = {"source": "platforms/cuda.py _get_backend_priorities", "readable": bool(functions),
                             "priorities": {}, "backends": {}, "head_sizes": list(head_sizes)}
    if not functions:
        return facts
    evaluator = _Evaluator()
    cache_tree = sources.tree("config/cache.py")
    kv_dtypes = (_literal_values(cache_tree, "CacheDType") if cache_tree is not None else []) or ["auto"]
    facts["kv_cache_dtypes"] = kv_dtypes
    facts["flash_attn_builds"] = _flash_attn_builds(sources.root)
    named: set[str] = set()
    for cc in CAPABILITIES:
        major, minor = (int(p) for p in cc.split("."))
        row: dict[str, Any] = {}
        for non_causal in (True, False):
            values = {"use_mla": False, "device_capability": _Capability((major, minor)), "num_heads": None,
                      "kv_cache_dtype": None, "use_non_causal": non_causal, "use_mm_prefix": False,
                      "use_sparse": False, "has_sink": False, "head_size": head_sizes[0] if head_sizes else None}
            order = _try(functions[0], evaluator, values)
            row["non_causal" if non_causal else "causal"] = order if isinstance(order, list) else None
            named.update(order if isinstance(order, list) else [])
        facts["priorities"][cc] = row
    classes = _backend_classes(sources)
    for backend in sorted(named):
        if backend not in classes:
            facts["backends"][backend] = {"file": None}
            continue
        rel, cls = classes[backend]
        chain = _class_chain(sources, rel, cls)
        own = _Evaluator(chain=chain)
        methods = own.methods
        facts["backends"][backend] = {
            "file": rel, "class": cls,
            "non_causal": _try(methods.get("supports_non_causal"), own, {}),
            # True/False where the method decides from constants; None where it asks the FlashAttention build
            # or the GPU (FlashAttention's quantized KV cache: the check applies knowledge.dflash's rule)
            "kv_cache_dtype": {dtype: _try(methods.get("supports_kv_cache_dtype"), own, {"kv_cache_dtype": dtype})
                               for dtype in kv_dtypes},
            "kv_combination_reason": _kv_combination_reason(methods),
            "capability": {cc: _try(methods.get("supports_compute_capability"), own,
                                    {"capability": _Capability(int(p) for p in cc.split("."))})
                           for cc in CAPABILITIES},
            "head_size": {str(h): _try(methods.get("supports_head_size"), own, {"head_size": h}) for h in head_sizes},
        }
    return facts


def _flash_attn_builds(root: str) -> dict[str, bool] | None:
    """Which FlashAttention versions this vLLM carries (vllm_flash_attn/flash_attn_interface.py: FA2 and FA3 are
    the compiled `_vllm_fa2_C`/`_vllm_fa3_C`, FA4 is `cute/interface.py`); None where neither extension is there
    at all (a source tree, an sdist): then as in vLLM's CUDA wheels, which carry all three."""
    directory = os.path.join(root, "vllm_flash_attn")
    try:
        names = os.listdir(directory)
    except OSError:
        return None
    fa2, fa3 = (any(n.startswith(f"_vllm_fa{v}_C") and n.endswith(".so") for n in names) for v in (2, 3))
    if not (fa2 or fa3):
        return None
    return {"fa2": fa2, "fa3": fa3, "fa4": os.path.isfile(os.path.join(directory, "cute", "interface.py"))}


def head_sizes_of(models: Models) -> list[int]:
    sizes: list[int] = []
    for model in (models.drafter, models.target):
        text = model.config.text_raw if model is not None and model.config is not None else {}
        head_dim, hidden, heads = text.get("head_dim"), text.get("hidden_size"), text.get("num_attention_heads")
        if not isinstance(head_dim, int) and isinstance(hidden, int) and isinstance(heads, int) and heads > 0:
            head_dim = hidden // heads
        if isinstance(head_dim, int) and head_dim not in sizes:
            sizes.append(head_dim)
    return sizes


def read_vllm_dflash(root: str, head_sizes: Sequence[int] = (), target_archs: Sequence[str] = (),
                     transformers: str | None = None) -> dict[str, Any]:
    """What the vLLM package at `root` (the `vllm/` directory) accepts for DFlash, from its source; "pairing"
    is what it says of the rest of the serve command and of the target's architectures (facts.serve.vllm_pairing)."""
    sources = VllmSources(root)
    model_file = DFLASH_MODEL_FILE.value.split("vllm/", 1)[1]
    archs = _registry_archs(sources)
    spec_tree = sources.tree("config/speculative.py")
    return {
        "root": root,
        "has_dflash": os.path.isfile(os.path.join(root, model_file)),
        "registry_readable": archs is not None,
        "dflash_archs": [a for a in archs or [] if "DFlash" in a],
        "methods": _literal_values(spec_tree, "SpeculativeMethod") if spec_tree is not None else None,
        "aux_supported_model_types": _aux_supported(spec_tree),
        "markers": _markers(sources),
        "attention": _attention(sources, head_sizes),
        "pairing": read_vllm_pairing(sources, target_archs, transformers),
        "environ": read_vllm_environ(sources),
    }


def collect_vllm(_ctx: Context, earlier: Mapping[str, object]) -> Collected:
    started = time.monotonic()
    dists = Distributions.read(earlier.get(Distributions.SECTION)) or Distributions()
    dist = dists.get("vllm")
    root = vllm_package_dir(earlier)
    models = Models.read(earlier.get(Models.SECTION))
    facts: dict[str, Any] = {"installed": dist is not None or root is not None,
                             "version": dist.version if dist else None, "root": root}
    if root is not None and (models is None or not models.given):
        facts["skipped"] = "no model, drafter or serve command given: vLLM's DFlash rules were not read"
    elif root is not None and models is not None:
        transformers = dists.get("transformers")
        package = os.path.join(transformers.location, "transformers") if transformers else None
        facts.update(read_vllm_dflash(root, head_sizes_of(models), target_architectures(models),
                                      package if package and os.path.isdir(package) else None))
        facts["version"] = facts["version"] or _version_from_source(root)
    facts["seconds"] = round(time.monotonic() - started, 3)
    return by_section(VllmDflash.collected(facts))


def _version_from_source(root: str) -> str | None:
    text = VllmSources(root).text("_version.py") or ""
    for line in text.splitlines():
        if line.startswith(("__version__", "version")) and "=" in line:
            value = line.split("=", 1)[1].strip().strip("'\"")
            if value and value[0].isdigit():
                return value
    return None
