# Probe: runs inside the TARGET interpreter, standard library only at top level, Python 3.8+.
# Parses a `vllm serve` command line with the installed vLLM's own parser (make_arg_parser on a
# FlexibleArgumentParser, exactly as `vllm serve` builds it), turns it into AsyncEngineArgs as
# `vllm serve` does, and reports the resulting fields. With "validate", it then runs vLLM's own config
# validation (create_engine_config, which reads the model configs but loads no weights) and asks vLLM's
# attention selector which backend the target's and the drafter's layers get.
#
# With "platform", vLLM runs on a simulated CUDA platform made from the doctor's facts (the GPUs NVML
# lists, or --target-arch/--gpus/--gpu-memory on a machine without them): a subclass of vLLM's own
# CudaPlatformBase whose device queries answer from those facts; every decision stays vLLM's code. Where
# the CUDA driver is absent (a CI image build), vLLM's compiled modules that need it (libcuda.so) cannot
# load; they are stood in for by empty modules whose functions refuse to run, and each is named in the
# facts. Nothing else is faked. When vLLM does not import here, it says why and the doctor falls back to
# its own rules.
import contextlib
import dataclasses
import errno
import importlib
import importlib.util
import inspect
import io
import json
import logging
import os
import sys
import time
import types
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Set, Tuple

if TYPE_CHECKING:  # the prelude's, which probe_source puts before this script
    from ._prelude import describe, emit, error_text, guard_extensions, read_arguments

ARGS = read_arguments()

ENGINE_FIELDS = (
    "model", "tokenizer", "skip_tokenizer_init", "trust_remote_code", "dtype", "max_model_len",
    "tensor_parallel_size", "pipeline_parallel_size", "max_num_batched_tokens", "max_num_seqs",
    "gpu_memory_utilization", "enable_chunked_prefill", "speculative_config", "language_model_only",
    "attention_backend", "kv_cache_dtype", "distributed_executor_backend", "data_parallel_size",
    "max_num_scheduled_tokens", "performance_mode", "reasoning_parser", "reasoning_parser_plugin",
    "enforce_eager", "enable_prefix_caching", "spec_method", "spec_model", "spec_tokens",
)
FRONTEND_FIELDS = ("port", "host", "headless", "tool_call_parser", "tool_parser_plugin", "enable_auto_tool_choice")
# What a library the CUDA driver provides looks like in a loader's error.
DRIVER_LIBRARIES = ("libcuda.so", "libnvidia-ml.so")


def jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        pass
    name = getattr(value, "name", None)
    if isinstance(name, str):  # an enum member, e.g. AttentionBackendEnum.FLASH_ATTN
        return name
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [jsonable(v) for v in value]
    return str(value)


# ------------------------------------------------------------------------------------ extension guard


class DriverAbsent(types.ModuleType):
    """Stands in for a compiled module of vLLM that needs the CUDA driver, on a machine without one: it
    imports, and anything taken from it refuses to run."""

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("__"):
            raise AttributeError(name)
        module = self.__name__

        def absent(*_args: Any, **_kwargs: Any) -> Any:
            raise RuntimeError(f"{module}.{name} needs the CUDA driver, which this machine does not have")

        absent.__name__ = name
        return absent


StandIn = Callable[[Any, ImportError], Optional[types.ModuleType]]
"""The extension guard's stand-in: (spec, the loader's ImportError) -> a module to use instead, or None."""


def driver_absent(stood_in: List[Dict[str, str]]) -> StandIn:
    """The extension guard's stand-in (the prelude's guard_extensions): one of vLLM's compiled modules that fails
    only for want of the CUDA driver is replaced by a DriverAbsent module and named in `stood_in`."""

    def stand_in(spec: Any, exc: ImportError) -> Optional[types.ModuleType]:
        if not spec.name.startswith("vllm.") or not any(lib in str(exc) for lib in DRIVER_LIBRARIES):
            return None
        stood_in.append({"module": spec.name, "error": str(exc)[:500]})
        return DriverAbsent(spec.name)

    return stand_in


# ---------------------------------------------------------------------------- device queries answered

LIBRARIES: List[Any] = []  # torch.library fragments registered here: kept alive, or torch drops their ops


def _release(text: object) -> Tuple[int, ...]:
    parts = []
    for part in str(text or "").split("+")[0].split("."):
        digits = "".join(c for c in part if c.isdigit()) if part[:1].isdigit() else ""
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def answering_device_queries(stand_in: StandIn, queries: Optional[List[Dict[str, Any]]],
                             answered: List[Dict[str, Any]]) -> StandIn:
    """The extension guard's stand-in, and then: where the module stood in for registers ops that answer a
    device query from the GPU's capability alone (knowledge.vllm DEVICE_QUERY_OPS: `queries`, for the installed
    release), each is registered as the real module registers it (torch.library, the same namespace and
    schema) and answers as the release's own source does for the capability vLLM asks about; each is named in
    `answered`, with what it was asked and what it said. An op the machine already has is left alone."""

    def guard(spec: Any, exc: ImportError) -> Optional[types.ModuleType]:
        module = stand_in(spec, exc)
        if module is not None:
            with contextlib.suppress(Exception):
                answer_ops(spec.name, queries or [], answered)
        return module

    return guard


def answer_ops(module: str, queries: List[Dict[str, Any]], answered: List[Dict[str, Any]]) -> None:
    vllm = sys.modules.get("vllm")
    version = _release(getattr(vllm, "__version__", None))
    wanted = [q for q in queries if q.get("module") == module and version
              and _release(q.get("first")) <= version <= _release(q.get("last"))]
    if not wanted:
        return
    import torch  # the target's, which vLLM imported first: this runs while vLLM's own modules are imported

    for query in wanted:
        namespace, _, name = str(query.get("op") or "").partition("::")
        if not namespace or not name:
            continue
        try:
            getattr(getattr(torch.ops, namespace), name)
            continue  # registered by a module that did load
        except (AttributeError, RuntimeError):
            pass
        ranges = [(int(low), int(high)) for low, high in query.get("true_on") or []]
        record: Dict[str, Any] = {"op": query["op"], "rule": " or ".join(f"{low} <= capability < {high}" for low, high in ranges)
                  or "false", "asked": [], "answers": []}

        def answer(cuda_device_capability: int, _ranges: List[Tuple[int, int]] = ranges,
                   _record: Dict[str, Any] = record) -> bool:
            value = any(low <= int(cuda_device_capability) < high for low, high in _ranges)
            if len(_record["asked"]) < 16:
                _record["asked"].append(int(cuda_device_capability))
                _record["answers"].append(value)
            return value

        library = torch.library.Library(namespace, "FRAGMENT")
        library.define(f"{name}(int cuda_device_capability) -> bool")
        library.impl(name, answer, "CompositeExplicitAutograd")
        LIBRARIES.append(library)
        answered.append(record)


# ----------------------------------------------------------------------------------- simulated platform


SIMULATED: Dict[str, Optional[List[int]]] = {"capability": None}  # the capability the simulated platform answers with now


def simulate_platform(platforms: Any, given: Dict[str, Any]) -> Dict[str, Any]:
    """Make vLLM's current platform (`platforms`: vllm.platforms) a CUDA platform whose device queries answer
    from `given` (the doctor's facts). Returns the facts of what was simulated."""
    from vllm.platforms import cuda, interface  # here: only a simulated platform takes these

    capabilities = given.get("capabilities") or []
    count = given.get("count")
    memory = given.get("memory_bytes")
    SIMULATED["capability"] = capabilities[0] if capabilities else None

    class SimulatedCudaPlatform(cuda.CudaPlatformBase):  # type: ignore[misc]  # vLLM's class, Any here
        @classmethod
        def get_device_capability(cls, device_id: int = 0) -> Any:
            capability = SIMULATED["capability"]
            return interface.DeviceCapability(major=capability[0], minor=capability[1]) if capability else None

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            capability = SIMULATED["capability"]
            name: str = given.get("name") or (f"simulated sm_{capability[0]}{capability[1]} GPU" if capability
                                              else "simulated GPU")
            return name

        @classmethod
        def get_device_uuid(cls, device_id: int = 0) -> str:
            return f"GPU-simulated-{device_id}"

        @classmethod
        def get_device_total_memory(cls, device_id: int = 0) -> int:
            if memory is None:  # vLLM then takes the defaults it takes for a device it cannot query
                raise RuntimeError("the simulated GPU's memory is not known (give --gpu-memory)")
            return int(memory)

        @classmethod
        def is_fully_connected(cls, physical_device_ids: List[int]) -> bool:
            return True

        @classmethod
        def device_count(cls) -> int:
            return int(count) if count else 1

        @classmethod
        def log_warnings(cls) -> None:
            return None

    already = getattr(platforms, "_current_platform", None)
    platforms._current_platform = SimulatedCudaPlatform()
    return {"kind": "simulated", "cls": type(platforms._current_platform).__name__,
            "capability": SIMULATED["capability"], "count": count, "memory_bytes": memory,
            "name": platforms._current_platform.get_device_name(),
            "replaced": type(already).__name__ if already is not None else None,
            "simulated_from": given.get("simulated_from") or {}}


def real_platform(platforms: Any) -> Dict[str, Any]:
    current_platform = platforms.current_platform
    facts: Dict[str, Any] = {"kind": "real", "cls": type(current_platform).__name__, "device_type": None, "capability": None,
             "count": None, "name": None}
    with contextlib.suppress(Exception):
        facts["device_type"] = current_platform.device_type
        capability = current_platform.get_device_capability()
        facts["capability"] = [capability.major, capability.minor] if capability is not None else None
        facts["count"] = current_platform.device_count()
        facts["name"] = current_platform.get_device_name()
    return facts


# ------------------------------------------------------------------------------------ attention backends


def selector_module() -> Any:
    """vLLM's attention selector module, imported when the selector is first asked (as vLLM imports it: when it
    builds the model's layers, after the validation)."""
    try:
        from vllm.v1.attention import selector
    except ImportError:  # where it was before vLLM moved it under v1/
        from vllm.attention import selector
    return selector


def _replace(obj: Any, **changes: Any) -> Any:
    try:
        from vllm.config import replace
    except ImportError:  # a release without vllm.config.replace: the dataclasses' own
        replace = dataclasses.replace
    return replace(obj, **changes)


def drafter_config(config: Any) -> Tuple[Any, Dict[str, Any]]:
    """The config the drafter's layers are built under, as this release's DFlash proposer makes it: its
    non-causal flag, the speculative config's own attention backend and KV cache dtype where the release has
    them. Releases without `AttentionConfig.use_non_causal` derive non-causality inside the selector from the
    speculative method, from the config as it is."""
    spec = config.speculative_config
    attention = config.attention_config
    if not hasattr(attention, "use_non_causal"):
        return config, {"use_non_causal": "from the speculative method"}
    hf_config = spec.draft_model_config.hf_config
    try:
        from vllm.model_executor.models.qwen3_dflash import dflash_has_any_non_causal

        non_causal = bool(dflash_has_any_non_causal(hf_config))
    except ImportError:
        dflash = getattr(hf_config, "dflash_config", None) or {}
        non_causal = not bool(dflash.get("causal", False)) if isinstance(dflash, dict) else True
    changes: Dict[str, Any] = {"use_non_causal": non_causal}
    if hasattr(spec, "attention_backend"):
        changes["backend"] = spec.attention_backend
    updates = {"attention_config": _replace(attention, **changes)}
    kv = getattr(spec, "kv_cache_dtype", None)
    if kv is not None:
        updates["cache_config"] = _replace(config.cache_config, cache_dtype=kv)
    inputs = {k: jsonable(v) for k, v in changes.items()}
    inputs["kv_cache_dtype"] = jsonable(kv) if kv is not None else None
    return _replace(config, **updates), inputs


def select_backend(config: Any, model_config: Any) -> Dict[str, Any]:
    from vllm.config import set_current_vllm_config

    get_attn_backend = selector_module().get_attn_backend
    values = {"head_size": model_config.get_head_size(), "dtype": model_config.dtype,
              "kv_cache_dtype": config.cache_config.cache_dtype, "use_mla": bool(getattr(model_config, "use_mla", False))}
    accepted = inspect.signature(get_attn_backend).parameters
    spec = getattr(config, "speculative_config", None)
    derived = not hasattr(config.attention_config, "use_non_causal") and getattr(spec, "method", None) == "dflash"
    kwargs = {k: v for k, v in values.items() if k in accepted}
    out: Dict[str, Any] = {"backend": None, "error": None,
                           "inputs": {"head_size": values["head_size"], "dtype": str(values["dtype"]).replace("torch.", ""),
                      "kv_cache_dtype": jsonable(values["kv_cache_dtype"]), "backend_asked": jsonable(
                          getattr(config.attention_config, "backend", None))}}
    if derived:  # these releases make every layer non-causal under DFlash (selector.get_attn_backend)
        out["inputs"]["use_non_causal"] = "from the speculative method"
    try:
        with set_current_vllm_config(config):
            backend = get_attn_backend(**kwargs)
        out["backend"] = backend.get_name() if hasattr(backend, "get_name") else getattr(backend, "__name__", None)
    except Exception as exc:  # noqa: BLE001 - vLLM's own refusal is the fact
        out["error"] = describe(exc)
    return out


def attention(config: Any, capability: Optional[List[int]]) -> Dict[str, Any]:
    out: Dict[str, Any] = {"capability": capability, "target": None, "drafter": None}
    with contextlib.suppress(Exception):
        out["target"] = select_backend(config, config.model_config)
    spec = getattr(config, "speculative_config", None)
    if spec is None or getattr(spec, "draft_model_config", None) is None:
        return out
    try:
        drafter, inputs = drafter_config(config)
        out["drafter"] = select_backend(drafter, spec.draft_model_config)
        out["drafter"]["inputs"].update(inputs)
    except Exception as exc:  # noqa: BLE001
        out["drafter"] = {"backend": None, "error": describe(exc), "inputs": {}}
    return out


# ------------------------------------------------------------------------------------------------ main

# Where `vllm serve` takes make_arg_parser from (vllm/entrypoints/cli/serve.py of each release): 0.33 and later,
# 0.29 to 0.32, and before.
PARSER_MODULES = ("vllm.entrypoints.common.cli_args", "vllm.entrypoints.launchers.cli_args",
                  "vllm.entrypoints.openai.cli_args")


def serve_parser_factory() -> Any:
    missing = []
    for name in PARSER_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if not exc.name or not (name == exc.name or name.startswith(exc.name + ".")):
                # the module is there, something it imports is not: that is the fact
                raise
            missing.append(name)
            continue
        return module.make_arg_parser
    raise ImportError("make_arg_parser is in none of " + ", ".join(missing))



@contextlib.contextmanager
def recording_bindings(parser: Any, words: List[str], bound: Dict[str, List[int]]) -> Iterator[None]:
    """While parsing `words`, record in `bound` the positions of the words each destination of vLLM's parser takes
    (dest -> positions; the doctor masks those of a secret one, `api_key`, wherever they appear). argparse gives
    every word it binds to the action's type conversion; the word is found by identity, else by its text (the
    value of `--flag=value`, a word FlexibleArgumentParser rewrote). Positions only: no value leaves the probe."""
    where: Dict[int, List[int]] = {}
    texts: Dict[str, List[int]] = {}
    seen: Set[Tuple[str, int]] = set()
    for at, word in enumerate(words):
        where.setdefault(id(word), []).append(at)
        texts.setdefault(word, []).append(at)
        if isinstance(word, str) and word.startswith("-") and "=" in word:
            texts.setdefault(word.split("=", 1)[1], []).append(at)

    def recorder(action: Any) -> Callable[[str], Any]:
        convert = parser._registry_get("type", action.type, action.type)

        def typed(text: str) -> Any:
            found = where.get(id(text))
            if not (found and words[found[0]] is text) and text is not action.default:
                found = texts.get(text)
            for at in found or ():
                if (action.dest, at) not in seen:
                    seen.add((action.dest, at))
                    bound.setdefault(action.dest, []).append(at)
            return convert(text)

        typed.__name__ = getattr(action.type, "__name__", repr(action.type))
        return typed

    kept = [(action, action.type) for action in parser._actions]
    try:
        for action, _ in kept:
            action.type = recorder(action)
        yield
    finally:
        for action, original in kept:
            action.type = original


def main() -> None:
    os.environ.update(ARGS.get("environ") or {})  # offline, no usage report: before vLLM reads them
    sys.dont_write_bytecode = True
    run()


def run() -> None:
    started = time.monotonic()
    facts: Dict[str, Any] = {"available": False, "version": None, "import_error": None, "parser_error": None, "parse_error": None,
             "fields": None, "given": [], "validation": None, "platform": None, "attention": None}

    def done() -> None:
        facts["seconds"] = round(time.monotonic() - started, 3)
        emit(facts)

    refuse_opening(ARGS.get("refused_files") or [])
    given_platform = ARGS.get("platform")
    stood_in: Optional[List[Dict[str, str]]] = None
    stand_in: Optional[StandIn] = None
    answered: List[Dict[str, Any]] = []
    if given_platform:
        stood_in = []
        stand_in = answering_device_queries(driver_absent(stood_in), ARGS.get("device_queries"), answered)
    roots = ARGS.get("roots")
    if ARGS.get("model_code") and roots is not None and os.environ.get("HF_MODULES_CACHE"):
        # --run-model-code: the model's own modules, copied by transformers into the doctor's temporary
        # HF_MODULES_CACHE, are what the user asked to run; nothing else outside the environment is
        roots = [*roots, os.path.realpath(os.environ["HF_MODULES_CACHE"])]
    guard_extensions(roots, stand_in)
    try:
        # vLLM, and the modules of it that the later steps share, imported once, here. What a single later step
        # uses (the usage context, the model registry, the attention selector) is imported in that step, when
        # vLLM itself imports it: here, it would run before the refusals, and its failure would hide the parse.
        import vllm
        from vllm import envs, platforms  # only definitions: the platform is resolved when first asked for

        facts["version"] = getattr(vllm, "__version__", None)
        if given_platform:
            facts["platform"] = simulate_platform(platforms, given_platform)
            facts["platform"]["stood_in"] = stood_in
            facts["platform"]["answered"] = answered
        try:
            from vllm.utils.argparse_utils import FlexibleArgumentParser
        except ImportError:  # before vLLM 0.11 it lived in vllm.utils
            from vllm.utils import FlexibleArgumentParser
        from vllm.engine import arg_utils

        make_arg_parser = serve_parser_factory()
    except BaseException as exc:  # noqa: BLE001 - any failure to import vLLM is a fact
        facts["import_error"] = describe(exc)
        return done()
    facts["available"] = True
    if not given_platform:
        facts["platform"] = real_platform(platforms)
    try:
        # Building the parser already builds config defaults: on an unsimulated machine without a GPU, a
        # CUDA build of vLLM raises here ("Failed to infer device type"), as `vllm serve --help` does.
        parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    except Exception as exc:  # noqa: BLE001 - reported, and the doctor reads the command itself
        facts["parser_error"] = describe(exc)
        return done()
    captured = io.StringIO()
    words = list(ARGS.get("args") or [])
    facts["bound"] = {}
    try:
        with contextlib.redirect_stderr(captured), contextlib.redirect_stdout(io.StringIO()), \
                recording_bindings(parser, words, facts["bound"]):
            args = parser.parse_args(words)
    except SystemExit as exc:
        facts["parse_error"] = captured.getvalue().strip()[-4000:] or f"the parser exited with code {exc.code}"
        return done()
    except Exception as exc:  # noqa: BLE001 - a parser bug is reported, not raised
        facts["parse_error"] = error_text(exc)
        return done()
    if getattr(args, "model_tag", None) is not None:  # vllm/entrypoints/cli/serve.py does the same
        args.model = args.model_tag
    defaults = {name: parser.get_default(name) for name in vars(args)}
    facts["given"] = sorted(n for n, v in vars(args).items() if v != defaults.get(n) and n != "model_tag")
    try:
        engine_args = arg_utils.AsyncEngineArgs.from_cli_args(args)
    except Exception as exc:  # noqa: BLE001
        facts["parse_error"] = "AsyncEngineArgs.from_cli_args: " + error_text(exc)
        return done()
    fields = {name: jsonable(getattr(engine_args, name, None)) for name in ENGINE_FIELDS}
    for name in FRONTEND_FIELDS:
        fields[name] = jsonable(getattr(args, name, None))
    facts["fields"] = fields
    if not ARGS.get("validate"):
        return done()
    try:
        facts["environ"] = environ_verdict(engine_args, platforms, envs)
    except Exception as exc:  # noqa: BLE001 - a release whose check cannot be found or run: said, not raised
        facts["environ"] = {"function": None, "hard_fail": False, "error": None, "warnings": [],
                            "not_run": describe(exc)}
    unchecked = unchecked_models(engine_args, ARGS.get("checked_models"))
    if unchecked:
        facts["not_validated"] = {"reason": "unchecked-models", "models": unchecked, "files": []}
        return done()
    # What is known so far, in case the validation outlasts the timeout (the last document written counts).
    facts["validating"] = True
    done()
    facts["validating"] = False
    model_code: List[Dict[str, Any]] = []
    connections: List[Dict[str, Any]] = []
    unlooked: List[str] = []
    hold_to_checked(ARGS.get("checked_models"), unlooked, arg_utils)
    if ARGS.get("model_code"):
        refuse_connections(connections)
    else:
        refuse_model_code(model_code)
    try:
        from vllm.usage.usage_lib import UsageContext

        keep_model_info_unsaved()
        inspect_model_classes_here()
        config = engine_args.create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)
    except UncheckedModel:
        facts["not_validated"] = {"reason": "unchecked-models", "models": unlooked, "files": []}
        return done()
    except BaseException as exc:  # noqa: BLE001 - vLLM's own verdict, whatever it raises
        facts["validation"] = {"ok": False, "error": None if isinstance(exc, ModelCodeRefused) else describe(exc),
                               "model_code": model_code, "refused_connections": connections,
                               "model_info_learned": MODEL_INFO_LEARNED}
        facts["skipped_parts"] = skipped_parts(exc, stood_in)
        return done()
    facts["validation"] = {"ok": not model_code, "error": None, "served": served(config, envs), "model_code": model_code,
                           "refused_connections": connections, "model_info_learned": MODEL_INFO_LEARNED}
    if model_code:  # vLLM went on without what the refused code would have given: not its verdict on the command
        return done()
    capabilities = (given_platform or {}).get("capabilities") or [None]
    facts["attention"] = []
    if given_platform and not given_platform.get("capabilities"):
        return done()  # a simulated GPU of no known architecture: the selector would only guess
    for capability in capabilities:  # the validation ran on the first; the selector is asked for each
        if capability is not None:
            SIMULATED["capability"] = capability
            clear_selector_cache()
        facts["attention"].append(attention(config, capability or (facts["platform"] or {}).get("capability")))
    return done()


def environ_verdict(engine_args: Any, platforms: Any, envs: Any) -> Optional[Dict[str, Any]]:
    """vLLM's own validate_environ on this process's environment (the serve's, with the doctor's offline
    variables), run on its own as create_engine_config runs it first (`--fail-on-environ-validation` is its
    hard_fail): the error it raises and the warnings it logs. None where the release has no such function.
    `platforms`, `envs`: vllm.platforms and vllm.envs."""
    hard_fail = bool(getattr(engine_args, "fail_on_environ_validation", False))
    function = getattr(platforms.current_platform, "validate_environ", None)
    where = "vllm/platforms/interface.py Platform.validate_environ"
    if function is None:
        function = getattr(envs, "validate_environ", None)
        where = "vllm/envs.py validate_environ"
    if function is None:
        return None
    verdict: Dict[str, Any] = {"function": where, "hard_fail": hard_fail, "error": None, "warnings": []}

    class Kept(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING and len(verdict["warnings"]) < 64:
                verdict["warnings"].append(record.getMessage()[:500])

    kept = Kept()
    loggers = [logging.getLogger(name) for name in ("vllm.envs", "vllm.platforms.interface")]
    for logger in loggers:
        logger.addHandler(kept)
    try:
        function(hard_fail)
    except Exception as exc:  # noqa: BLE001 - vLLM's own refusal is the fact
        verdict["error"] = describe(exc)
    finally:
        for logger in loggers:
            logger.removeHandler(kept)
    return verdict


# The parts of create_engine_config in the order it builds them (0.33.0 and 0.34.0 engine/arg_utils.py), each from
# the ones before: (part, function, its frame's name). validate_environ runs before them all (environ_verdict).
ENGINE_PARTS = (("model", "EngineArgs.create_model_config", "create_model_config"),
                ("speculative", "EngineArgs.create_speculative_config", "create_speculative_config"),
                ("scheduler", "SchedulerConfig", None))


def skipped_parts(exc: BaseException, stood_in: Optional[List[Dict[str, str]]]) -> List[Dict[str, Any]]:
    """Where vLLM's validation stopped at a compiled module stood in for (no CUDA driver): the part it stopped
    in, and the later parts it never reached, each built from what could not be built."""
    if not stood_in:
        return []
    frames: Set[str] = set()
    tb = exc.__traceback__
    while tb is not None:
        frames.add(tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    stopped = [at for at, (_, _, frame) in enumerate(ENGINE_PARTS) if frame in frames]
    if not stopped:
        return []
    at = stopped[-1]
    where = ENGINE_PARTS[at][1]
    out = [{"part": ENGINE_PARTS[at][0], "function": where, "ok": False, "error": None,
            "skipped": "stopped: a compiled module it needs cannot load without the CUDA driver"}]
    out += [{"part": part, "function": function, "ok": False, "error": None,
             "skipped": f"not reached: create_engine_config builds it after {where}"}
            for part, function, _ in ENGINE_PARTS[at + 1:]]
    return out


class ModelCodeRefused(BaseException):
    """Raised where transformers would copy a model repository's own code (auto_map's configuration_*.py,
    modeling_*.py) into its modules cache or execute it. A BaseException, so that vLLM's and transformers'
    `except Exception` fallbacks do not swallow it and go on as if the class were simply absent."""


def refuse_model_code(refused: List[Dict[str, Any]]) -> None:
    """transformers' dynamic-module loading refuses, before any file is copied or executed: every class
    reference goes through get_cached_module_file (copies the files to HF_MODULES_CACHE) and get_class_in_module
    (executes them), both looked up in their module when called; `refused` gets what was asked."""
    try:
        from transformers import dynamic_module_utils as loading
    except Exception:  # noqa: BLE001 - without transformers there is no dynamic-module loading to refuse
        return

    def refusing(name: str, model_at: int, file_at: int) -> Callable[..., Any]:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            def given(at: int, *keywords: str) -> Optional[str]:
                value = args[at] if len(args) > at else next((kwargs[k] for k in keywords if k in kwargs), None)
                return str(value) if value is not None else None

            if len(refused) < 16:
                refused.append({"call": name, "model": given(model_at, "pretrained_model_name_or_path"),
                                "file": given(file_at, "module_file", "class_reference", "module_path")})
            raise ModelCodeRefused(f"{name}: the model's own code is not run by the doctor's validation")

        return refuse

    for name, model_at, file_at in (("get_class_from_dynamic_module", 1, 0), ("get_cached_module_file", 0, 1),
                                    ("get_class_in_module", 1, 0), ("create_dynamic_module", 0, 0)):
        if hasattr(loading, name):
            setattr(loading, name, refusing(name, model_at, file_at))


REFUSALS = [0]
"""How many times this process's refusals (a file, a connection) have been raised: an attempt that met one is not
tried again where they do not reach (`inspect_model_classes_here`)."""


def refuse_opening(files: List[Any]) -> None:
    """From here on this process opens none of `files` (those the doctor refused to read: over its caps, not
    regular files), by any name that leads to them: vLLM's parser reads some of them too (huggingface_hub reads a
    repo id's cache ref whole in AsyncEngineArgs.from_cli_args), and a refused file is never handed to it."""
    refused: Set[str] = set()
    for name in files:
        if isinstance(name, str) and name:
            refused.update((os.path.abspath(name), os.path.realpath(name)))
    if not refused:
        return

    def hook(event: str, args: Tuple[Any, ...]) -> None:
        if event != "open" or not args or not isinstance(args[0], (str, bytes)):
            return
        path = os.path.abspath(os.fsdecode(args[0]))
        if path in refused or os.path.realpath(path) in refused:
            REFUSALS[0] += 1
            raise PermissionError(errno.EACCES, "the doctor refused to read it (over its caps, or not a regular "
                                  "file), and hands it to no reader", path)

    sys.addaudithook(hook)


CONNECTION_EVENTS = ("socket.connect", "socket.sendto", "socket.sendmsg")


def refuse_connections(refused: List[Dict[str, Any]]) -> None:
    """From here on this process opens no connection and sends no datagram (Python's audit events for
    connect, sendto and sendmsg, on any socket family, raise): the model's code runs with no network. Native
    code calling the C library directly, and processes it starts, are not covered."""
    def hook(event: str, args: Tuple[Any, ...]) -> None:
        if event in CONNECTION_EVENTS:
            if len(refused) < 16:
                refused.append({"event": event, "address": str(args[1] if len(args) > 1 else None)[:200]})
            REFUSALS[0] += 1
            raise ConnectionRefusedError(errno.ECONNREFUSED, "connections are refused while the doctor's "
                                         "validation runs the model's code")

    sys.addaudithook(hook)


class UncheckedModel(BaseException):
    """vLLM's validation was about to read a model the doctor did not look at first."""


def hold_to_checked(checked: Optional[List[str]], unlooked: List[str], arg_utils: Any) -> None:
    """`vllm serve SPECULATORS_DIR`: vLLM's validation serves the verifier the directory's config names
    (maybe_override_with_speculators of `arg_utils`, vllm.engine.arg_utils, before it reads the verifier's
    config). One the doctor did not look at stops the validation (UncheckedModel), named in `unlooked`, for the
    doctor to look at and ask again."""
    if checked is None:
        return
    override = getattr(arg_utils, "maybe_override_with_speculators", None)
    if override is None:
        return

    def held(*args: Any, **kwargs: Any) -> Any:
        result = override(*args, **kwargs)
        model = result[0] if isinstance(result, tuple) and result else None
        if isinstance(model, str) and model not in checked:
            unlooked.append(model)
            raise UncheckedModel(model)
        return result

    arg_utils.maybe_override_with_speculators = held


def unchecked_models(engine_args: Any, checked: Optional[List[str]]) -> List[str]:
    """The models vLLM's validation would read (the served model, the directories --tokenizer and
    --hf-config-path name, the speculative config's model) that the doctor did not look at before (its files over
    its caps are not to be handed to vLLM): [] when `checked` is None."""
    if checked is None:
        return []
    spec = getattr(engine_args, "speculative_config", None)
    names = [getattr(engine_args, name, None) for name in ("model", "tokenizer", "hf_config_path")]
    names.append(spec.get("model") if isinstance(spec, dict) else None)
    names.append(getattr(engine_args, "spec_model", None))  # --spec-model (0.22.0+), merged in create_speculative_config
    unchecked: List[str] = []
    for name in names:
        if isinstance(name, str) and name and name not in checked and name not in unchecked:
            unchecked.append(name)
    return unchecked


def keep_model_info_unsaved() -> None:
    """vLLM learns a model class's interface in a second interpreter of its own (registry
    `_run_in_subprocess`, which sees the machine's platform, not the simulated one) unless its cache under
    VLLM_CACHE_ROOT has it, and then saves it there (`_save_modelinfo_to_cache`, which imports vLLM's model
    loader to write it). The doctor reads that cache as vLLM does and writes nothing to it; on a simulated
    platform that import would also ask compiled ops the machine cannot load. Learning it stays vLLM's code."""
    with contextlib.suppress(Exception):
        from vllm.model_executor.models import registry

        for value in list(vars(registry).values()):
            if isinstance(value, type) and "_save_modelinfo_to_cache" in vars(value):
                value._save_modelinfo_to_cache = lambda *_args, **_kwargs: None  # type: ignore[attr-defined]


MODEL_INFO_LEARNED: Dict[str, str] = {}
"""Model class -> where this validation had vLLM learn its interface: "here" or "subprocess" (vLLM's own)."""


def class_name_of(fn: Callable[[], Any]) -> str:
    """The class_name of the registered model the inspecting function closes over (vLLM's lambda over self)."""
    for cell in getattr(fn, "__closure__", None) or ():
        with contextlib.suppress(ValueError):
            name = getattr(cell.cell_contents, "class_name", None)
            if isinstance(name, str):
                return name
    return "?"


def inspect_model_classes_here() -> None:
    """Where vLLM's cache does not know a model class, vLLM learns its interface
    (`_ModelInfo.from_model_cls(self.load_model_cls())`, in `_LazyRegisteredModel.inspect_model_cls`, 0.18.0 to
    0.34.0) in an interpreter it starts for that alone (`_run_in_subprocess`, so that vLLM's own process does not
    initialise CUDA before it starts its workers), which imports torch and vLLM again: as long as the validation
    itself, paid twice. This process starts no workers and ends after the validation, so that one function runs
    here, in vLLM's own code, under the refusals and stand-ins the validation has; where it raises here, vLLM's
    subprocess runs it as before, unless it met one of the refusals (that error is vLLM's to report: the subprocess
    has none of them). Anything else vLLM runs in a subprocess (0.34.0's whole-registry
    `fill_model_info_cache`) stays there."""
    with contextlib.suppress(Exception):
        from vllm.model_executor.models import registry

        in_subprocess = registry._run_in_subprocess

        def here_first(fn: Callable[[], Any]) -> Any:
            names = getattr(getattr(fn, "__code__", None), "co_names", ())
            if "from_model_cls" not in names or "load_model_cls" not in names:
                return in_subprocess(fn)
            name = class_name_of(fn)
            refusals = REFUSALS[0]
            try:
                info = fn()
            except Exception:  # vLLM's subprocess says what it says
                if REFUSALS[0] != refusals:
                    raise  # it met a refusal here (a file, a connection): not tried where the refusals do not reach
                MODEL_INFO_LEARNED[name] = "subprocess"
                return in_subprocess(fn)
            MODEL_INFO_LEARNED[name] = "here"
            return info

        registry._run_in_subprocess = here_first


def clear_selector_cache() -> None:
    with contextlib.suppress(Exception):
        selector_module()._cached_get_attn_backend.cache_clear()


def settled(out: Dict[str, Any], **reads: Callable[[], Any]) -> None:
    """out[name] = read(), for each read of a value of vLLM's config that it has (one that raises is left out)."""
    for name, read in reads.items():
        with contextlib.suppress(Exception):
            out[name] = read()


def served(config: Any, envs: Any) -> Dict[str, Any]:
    """What vLLM settled on: the numbers its validation derived or lowered (`envs`: vllm.envs)."""
    out: Dict[str, Any] = {}
    settled(out, max_model_len=lambda: config.model_config.max_model_len,
            max_num_batched_tokens=lambda: config.scheduler_config.max_num_batched_tokens,
            max_num_seqs=lambda: config.scheduler_config.max_num_seqs)
    with contextlib.suppress(Exception):
        spec = config.speculative_config
        if spec is not None:
            out["method"] = jsonable(spec.method)
            out["num_speculative_tokens"] = spec.num_speculative_tokens
            out["draft_max_model_len"] = spec.draft_model_config.max_model_len
    settled(out, kv_cache_dtype=lambda: jsonable(config.cache_config.cache_dtype))
    out.update(resolved_values(config, envs))
    return out


def resolved_values(config: Any, envs: Any) -> Dict[str, Any]:
    """The rest of what vLLM resolved, for the doctor's rules to judge instead of their own reading of the command:
    the target and drafter vLLM serves, the draft TP, the dtype ("auto" resolved), the parallel sizes, and the GPU
    model runner this release serves the config with. A value vLLM's config does not have is left out."""
    out: Dict[str, Any] = {}
    settled(out, model=lambda: config.model_config.model,
            dtype=lambda: str(config.model_config.dtype).replace("torch.", ""),
            enforce_eager=lambda: bool(config.model_config.enforce_eager),
            enable_prefix_caching=lambda: bool(config.cache_config.enable_prefix_caching))
    with contextlib.suppress(Exception):
        parallel = config.parallel_config
        out.update(tensor_parallel_size=parallel.tensor_parallel_size,
                   pipeline_parallel_size=parallel.pipeline_parallel_size,
                   data_parallel_size=parallel.data_parallel_size)
    with contextlib.suppress(Exception):
        spec = config.speculative_config
        if spec is not None:
            out["draft_model"] = spec.model
            draft_parallel = getattr(spec, "draft_parallel_config", None)
            tp = getattr(draft_parallel, "tensor_parallel_size", None) if draft_parallel is not None else None
            out["draft_tensor_parallel_size"] = tp if tp is not None else spec.draft_tensor_parallel_size
    with contextlib.suppress(Exception):
        out["model_runner"], out["model_runner_from"] = model_runner(config, envs)
    return out


def model_runner(config: Any, envs: Any) -> Tuple[str, str]:
    """("v1" or "v2", what said so): VllmConfig.use_v2_model_runner where the release has it (0.22 .. 0.33);
    else V2 where V1's GPU runner is gone (0.34: vllm/v1/worker/gpu_model_runner.py removed); else (0.20, 0.21)
    envs.VLLM_USE_V2_MODEL_RUNNER (of `envs`, vllm.envs), which gpu_worker.py reads."""
    if hasattr(type(config), "use_v2_model_runner"):
        return ("v2" if config.use_v2_model_runner else "v1"), "VllmConfig.use_v2_model_runner"
    if importlib.util.find_spec("vllm.v1.worker.gpu_model_runner") is None:
        return "v2", "only runner"
    return ("v2" if envs.VLLM_USE_V2_MODEL_RUNNER else "v1"), "envs.VLLM_USE_V2_MODEL_RUNNER"


main()
