# Probe: runs inside the TARGET interpreter, standard library only at top level, Python 3.8+.
# Parses a `vllm serve` command line with the installed vLLM's own parser (make_arg_parser on a
# FlexibleArgumentParser, exactly as `vllm serve` builds it), turns it into AsyncEngineArgs as
# `vllm serve` does, and reports the resulting fields. With "validate", it also runs vLLM's own
# config validation (create_engine_config), which reads the model configs but loads no weights.
# When vLLM does not import here, it says why and the doctor falls back to its documented subset.
import contextlib
import io
import json
import sys
import time
import traceback

MARKER = "@@dflash-doctor-facts@@"
# Arguments come on stdin (never in argv, where `ps` would show a serve command's --api-key), or as
# argv[1] in a job forked from the shared host.
ARGS = json.loads(sys.argv[1] if len(sys.argv) > 1 else (sys.stdin.read() or "{}"))

ENGINE_FIELDS = (
    "model", "tokenizer", "skip_tokenizer_init", "trust_remote_code", "dtype", "max_model_len",
    "tensor_parallel_size", "pipeline_parallel_size", "max_num_batched_tokens", "max_num_seqs",
    "gpu_memory_utilization", "enable_chunked_prefill", "speculative_config", "language_model_only",
    "attention_backend", "kv_cache_dtype", "distributed_executor_backend", "data_parallel_size",
    "max_num_scheduled_tokens", "performance_mode", "reasoning_parser", "reasoning_parser_plugin",
    "enforce_eager", "enable_prefix_caching",
)
FRONTEND_FIELDS = ("port", "host", "headless", "tool_call_parser", "tool_parser_plugin", "enable_auto_tool_choice")


def describe(exc):
    return {
        "type": type(exc).__name__,
        "mro": [c.__name__ for c in type(exc).__mro__],
        "message": str(exc)[:4000],
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-6:])[-4000:],
    }


def jsonable(value):
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


def emit(facts):
    sys.stdout.write("\n" + MARKER + "\n" + json.dumps(facts, default=str) + "\n")
    sys.stdout.flush()


def main():
    started = time.monotonic()
    facts = {"available": False, "version": None, "import_error": None, "parser_error": None, "parse_error": None,
             "fields": None, "given": [], "validation": None}
    try:
        import vllm

        facts["version"] = getattr(vllm, "__version__", None)
        try:
            from vllm.utils.argparse_utils import FlexibleArgumentParser
        except ImportError:  # before vLLM 0.11 it lived in vllm.utils
            from vllm.utils import FlexibleArgumentParser
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.entrypoints.openai.cli_args import make_arg_parser
    except BaseException as exc:  # noqa: BLE001 - any failure to import vLLM is a fact
        facts["import_error"] = describe(exc)
        facts["seconds"] = round(time.monotonic() - started, 3)
        emit(facts)
        return
    facts["available"] = True
    try:
        # Building the parser already builds config defaults: without a GPU, a CUDA build of vLLM
        # raises here ("Failed to infer device type"), as `vllm serve --help` does on that machine.
        parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    except Exception as exc:  # noqa: BLE001 - reported, and the doctor reads the command itself
        facts["parser_error"] = describe(exc)
        facts["seconds"] = round(time.monotonic() - started, 3)
        emit(facts)
        return
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured), contextlib.redirect_stdout(io.StringIO()):
            args = parser.parse_args(list(ARGS.get("args") or []))
    except SystemExit as exc:
        facts["parse_error"] = captured.getvalue().strip()[-4000:] or f"the parser exited with code {exc.code}"
        facts["seconds"] = round(time.monotonic() - started, 3)
        emit(facts)
        return
    except Exception as exc:  # noqa: BLE001 - a parser bug is reported, not raised
        facts["parse_error"] = f"{type(exc).__name__}: {exc}"
        emit(facts)
        return
    if getattr(args, "model_tag", None) is not None:  # vllm/entrypoints/cli/serve.py does the same
        args.model = args.model_tag
    defaults = {name: parser.get_default(name) for name in vars(args)}
    facts["given"] = sorted(n for n, v in vars(args).items() if v != defaults.get(n) and n != "model_tag")
    try:
        engine_args = AsyncEngineArgs.from_cli_args(args)
    except Exception as exc:  # noqa: BLE001
        facts["parse_error"] = f"AsyncEngineArgs.from_cli_args: {type(exc).__name__}: {exc}"
        emit(facts)
        return
    fields = {name: jsonable(getattr(engine_args, name, None)) for name in ENGINE_FIELDS}
    for name in FRONTEND_FIELDS:
        fields[name] = jsonable(getattr(args, name, None))
    facts["fields"] = fields
    if ARGS.get("validate"):
        try:
            from vllm.usage.usage_lib import UsageContext

            engine_args.create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)
            facts["validation"] = {"ok": True, "error": None}
        except BaseException as exc:  # noqa: BLE001 - vLLM's own verdict, whatever it raises
            facts["validation"] = {"ok": False, "error": describe(exc)}
    facts["seconds"] = round(time.monotonic() - started, 3)
    emit(facts)


main()
