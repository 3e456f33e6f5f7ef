"""`dflash-doctor serve [options] [--exec] -- vllm serve MODEL [flags...]`: judge the exact serve command.

Runs the whole doctor (the Python stack, the GPUs, the kernels) plus the model and serve layers against the
command after `--`: the target and drafter it names, its flags (read by the installed vLLM's own parser when
vLLM imports in the target, else by a documented subset), the GPUs and the port.

With --exec, when nothing fails, the doctor's process is replaced by the command itself (os.execvp: argv and
environment exactly as given), so that `ENTRYPOINT ["dflash-doctor", "serve", "--exec", "--", "vllm",
"serve"]` gates a container; when something fails it exits 1 and nothing starts.

Without GPUs (a CI machine), `--gpus N --gpu-memory GIB` stand in for the serving GPUs' count and memory and
`--target-arch sm_86` for their architecture.

Exit codes: as `dflash-doctor`; 2 for a wrong command line (no `--`, nothing after it); with --exec, the
serve command's own exit code (the doctor is gone), or 127 when it cannot be started.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from dflash_doctor.sections import Collector

__all__ = ["SERVE_CHECKS", "SERVE_COLLECTORS", "main", "parser"]

# The checks and collectors this command needs; used directly until they are registered (sections.py
# BUILTIN_COLLECTORS, registry.py BUILTIN_CHECKS), after which the registered ones are used.
SERVE_CHECKS: tuple[tuple[str, str], ...] = (
    ("model-files", "dflash_doctor.checks.model_files:ModelFilesCheck"),
    ("drafter", "dflash_doctor.checks.drafter:DrafterCheck"),
    ("drafter-attention", "dflash_doctor.checks.drafter_attention:DrafterAttentionCheck"),
    ("serve-command", "dflash_doctor.checks.serve:ServeCommandCheck"),
    ("serve-resources", "dflash_doctor.checks.serve:ServeResourcesCheck"),
)
SERVE_COLLECTORS: tuple[Collector, ...] = (
    Collector("serve-args", ("serve_args",), "dflash_doctor.collectors.serve:collect_args"),
    Collector("models", ("models",), "dflash_doctor.collectors.models:collect", requires=("serve_args",)),
    Collector("vllm-dflash", ("vllm_dflash",), "dflash_doctor.collectors.serve:collect_vllm",
              requires=("distributions", "resolution", "models")),
    Collector("nvml", ("gpu",), "dflash_doctor.collectors.nvml:collect"),
)


def parser() -> argparse.ArgumentParser:
    from dflash_doctor.cli import run_parser

    p = run_parser(prog="dflash-doctor serve")
    p.usage = "dflash-doctor serve [options] [--exec] -- vllm serve MODEL [flags...]"
    p.description = __doc__.split("\n\n")[0] if __doc__ else None
    group = p.add_argument_group("serve")
    group.add_argument("--exec", action="store_true",
                       help="when nothing fails, replace this process with the serve command (argv and env untouched)")
    group.add_argument("--gpus", type=int, metavar="N", help="judge against N GPUs instead of the ones NVML lists")
    group.add_argument("--gpu-memory", type=float, metavar="GIB", help="memory of each of those GPUs, in GiB")
    group.add_argument("--vllm-validate", action="store_true",
                       help="also run vLLM's own config validation (create_engine_config) in the target")
    group.add_argument("--no-vllm-parser", action="store_true",
                       help="read the command with the documented subset even when vLLM imports")
    return p


def _split_command(argv: Sequence[str]) -> tuple[list[str], list[str]] | None:
    words = list(argv)
    if "--" not in words:
        return None
    at = words.index("--")
    return words[:at], words[at + 1 :]


def _names(values: Sequence[str] | None) -> list[str]:
    return [part.strip() for value in values or () for part in value.split(",") if part.strip()]


def _registered() -> tuple[list[Any], list[Collector]]:
    """The serve checks and collectors that are not registered yet (to be added for this run)."""
    import importlib

    from dflash_doctor.registry import load_checks
    from dflash_doctor.sections import all_collectors

    loaded, _ = load_checks()
    ids = {lc.check.id for lc in loaded}
    checks = []
    for name, target in SERVE_CHECKS:
        if name not in ids:
            module, _, attr = target.partition(":")
            checks.append(getattr(importlib.import_module(module), attr)())
    provided = {s for c in all_collectors() for s in c.provides}
    collectors = [c for c in SERVE_COLLECTORS if not set(c.provides) <= provided]
    return checks, collectors


def _run(args: argparse.Namespace, options: dict[str, Any]) -> Any:
    """The doctor's run with the serve checks; through cli.run_doctor once they are registered."""
    from dflash_doctor import cli

    missing_checks, missing_collectors = _registered()
    if not missing_checks and not missing_collectors:
        return cli.run_doctor(args, options=options, handle_signals=True)
    from dflash_doctor.check import Context
    from dflash_doctor.model import CheckResult, Status, exit_code
    from dflash_doctor.redact import redact_report
    from dflash_doctor.report import build, host_info
    from dflash_doctor.runner import select
    from dflash_doctor.sections import all_collectors
    from dflash_doctor.supervise import run_checks

    started = time.monotonic()
    only, skip = _names(args.only), _names(args.skip)
    registered, problems = cli.load_selected([], [], sys.stderr)
    everything = registered + missing_checks
    known = {c.id for c in everything} | {c.layer for c in everything}
    unknown = [n for n in only + skip if n not in known]
    if unknown:
        raise cli.UsageError(f"unknown check or layer: {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    checks = select(everything, only, skip)
    ctx = Context(python=args.python, cwd=os.getcwd(), no_gpu=args.no_gpu,
                  target_archs=tuple(_names(args.target_arch)), verify_hashes=args.verify_hashes,
                  timeout_s=args.timeout, options=options)
    outcome = run_checks(checks, ctx, handle_signals=True, collectors=all_collectors() + missing_collectors)
    results = ([CheckResult("plugins", "doctor", "Check plugins", Status.ERROR, tuple(problems))]
               if problems else []) + outcome.results
    if outcome.stopped is not None:
        results.append(outcome.stopped)
    extra: dict[str, Any] = {"wall_s": round(time.monotonic() - started, 3),
                             "options": {"no_gpu": bool(args.no_gpu), "target_archs": list(ctx.target_archs),
                                         "only": only, "skip": skip, "strict": bool(args.strict)}}
    if outcome.partial:
        extra["partial"] = True
    report = redact_report(build(results, outcome.sections, args.python, bool(args.strict), extra, host=host_info()),
                           keep_hosts=bool(args.keep_hosts))
    rendered = [CheckResult.from_dict(c) for c in report["checks"]]
    return cli.DoctorRun(report, rendered, exit_code(results, bool(args.strict)), outcome.sections, outcome.lingering)


def main(argv: Sequence[str]) -> int:
    from dflash_doctor import cli

    split = _split_command(argv)
    p = parser()
    if split is None and any(a in ("-h", "--help") for a in argv):
        p.print_help(sys.stdout)
        return 0
    if split is None or not split[1]:
        p.print_usage(sys.stderr)
        sys.stderr.write("dflash-doctor serve: error: give the serve command after --, e.g. "
                         "dflash-doctor serve -- vllm serve MODEL --speculative-config '{...}'\n")
        return 2
    doctor_argv, command = split
    try:
        args = cli.parse_run_args(doctor_argv, p)
        options = {"serve": {"argv": command, "gpus": args.gpus, "gpu_memory_gib": args.gpu_memory,
                             "validate": bool(args.vllm_validate), "vllm_parser": not args.no_vllm_parser}}
        run = _run(args, options)
    except cli.UsageError as exc:
        sys.stderr.write(f"dflash-doctor serve: error: {exc}\n")
        return 2
    code: int = cli.emit(run, args)
    sys.stdout.flush()
    sys.stderr.flush()
    if run.lingering:  # a collector ignored the stop: never start the server on a partial verdict
        os._exit(code or 1)
    if not args.exec:
        return code
    if code != 0:
        sys.stderr.write(f"dflash-doctor serve: not starting `{' '.join(command)}`: the checks above failed\n")
        return code
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"dflash-doctor serve: cannot start {command[0]!r}: {exc.strerror or exc}\n")
        return 127
    return 127  # not reached: execvp does not return
