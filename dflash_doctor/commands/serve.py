"""`dflash-doctor serve [options] [--exec] -- vllm serve MODEL [flags...]`: judge the exact serve command.

Runs the whole doctor (the Python stack, the GPUs, the kernels) plus the model and serve layers against the
command after `--`: the target and drafter it names, its flags (read by the installed vLLM's own parser when
vLLM imports in the target, else by a documented subset), the GPUs and the port.

With --exec, when nothing fails, the doctor's process is replaced by the command itself (os.execv: arguments and
environment exactly as given), run by the program that was judged: the target interpreter's own `vllm` console
script, or the target interpreter (`commands.serve_program`), never another `vllm` found on PATH; so that `ENTRYPOINT ["dflash-doctor", "serve", "--exec", "--", "vllm",
"serve"]` gates a container; when something fails it exits 1 and nothing starts.

When vLLM imports in the target, the command is read by vLLM's own parser and judged by vLLM's own config
validation (create_engine_config) and attention selector, for the target and the drafter; the report says
which verdicts are vLLM's and which the doctor's rules'. Without GPUs (a CI machine), `--gpus N --gpu-memory
GIB` stand in for the serving GPUs' count and memory and `--target-arch sm_86` for their architecture: vLLM
then runs on a simulated CUDA platform made of those facts (only the device queries are simulated).

With --exec --live, the command starts in the background instead (its own session, output to a log file),
the doctor waits for its /health (bounded by --live-wait), runs `dflash-doctor live` against it, prints that
report and leaves the server running, its PID and log stated; a start that dies is reported with the last
lines of its log.

Exit codes: as `dflash-doctor`; 2 for a wrong command line (no `--`, nothing after it); with --exec, the
serve command's own exit code (the doctor is gone), 127 when it cannot be started, 126 when its program is not
the one judged (a `vllm` that is not the target's, another interpreter); with --exec --live,
the live report's exit code.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from dflash_doctor import pipeline
from dflash_doctor.commands import options as run_options
from dflash_doctor.commands.live import _serve_url, add_live_options, live_options, start_and_check
from dflash_doctor.commands.options import run_parser, tell
from dflash_doctor.commands.output import emit, exit_if_lingering, live_progress
from dflash_doctor.commands.serve_program import NotJudged, judged_program
from dflash_doctor.facts.serve.serve_shapes import MAX_GPU_MEMORY_GIB, MAX_GPUS
from dflash_doctor.report.redact import Redactor, argv_secrets, given_secrets

__all__ = ["main", "parser"]

def parser() -> argparse.ArgumentParser:
    p = run_parser(prog="dflash-doctor serve")
    p.usage = "dflash-doctor serve [options] [--exec] -- vllm serve MODEL [flags...]"
    p.description = __doc__.split("\n\n")[0] if __doc__ else None
    group = p.add_argument_group("serve")
    group.add_argument("--exec", action="store_true",
                       help="when nothing fails, replace this process with the serve command (argv and env untouched)")
    group.add_argument("--gpus", type=int, metavar="N", help="judge against N GPUs instead of the ones NVML lists")
    group.add_argument("--gpu-memory", type=float, metavar="GIB", help="memory of each of those GPUs, in GiB")
    group.add_argument("--vllm-validate", action="store_true", help=argparse.SUPPRESS)  # now the default; kept for old scripts
    group.add_argument("--no-vllm-validate", action="store_true",
                       help="only parse the command with vLLM's parser: skip vLLM's own config validation "
                       "(create_engine_config) and attention selector, which run by default when vLLM imports")
    group.add_argument("--run-model-code", action="store_true",
                       help="let vLLM's validation run the model's own code (config.json auto_map, with "
                       "--trust-remote-code), with a HOME of the doctor's own and outbound connections refused; "
                       "by default the validation stops before it")
    group.add_argument("--no-vllm-parser", action="store_true",
                       help="read the command with the documented subset even when vLLM imports")
    live = p.add_argument_group("live (with --exec --live: start the server, check it running, leave it running)")
    live.add_argument("--live", action="store_true",
                      help="with --exec: start the command in the background, wait for /health, run `dflash-doctor "
                      "live` against it and leave it running (its PID is stated)")
    live.add_argument("--live-wait", type=float, default=900.0, metavar="S",
                      help="seconds to wait for /health to answer 200 (default 900)")

    add_live_options(live, prefix="live-")
    return p


def _split_command(argv: Sequence[str]) -> tuple[list[str], list[str]] | None:
    words = list(argv)
    if "--" not in words:
        return None
    at = words.index("--")
    return words[:at], words[at + 1 :]


def main(argv: Sequence[str]) -> int:
    split = _split_command(argv)
    p = parser()
    if split is None and any(a in ("-h", "--help") for a in argv):
        p.print_help(sys.stdout)
        return 0
    if split is None or not split[1]:
        p.print_usage(sys.stderr)
        tell("dflash-doctor serve: error: give the serve command after --, e.g. "
             "dflash-doctor serve -- vllm serve MODEL --speculative-config '{...}'\n")
        return 2
    doctor_argv, command = split
    live_check: Any = None  # with --live: the live check's options, read and checked before anything runs
    try:
        args = run_options.parse_run_args(doctor_argv, p)

        run_options.check_count(args.gpus, "--gpus", 1, MAX_GPUS)
        if args.gpu_memory is not None:
            run_options.check_number(args.gpu_memory, "--gpu-memory", unit="GiB", most=MAX_GPU_MEMORY_GIB)
        if args.live and not args.exec:
            raise run_options.UsageError("--live needs --exec (the doctor starts the server, then checks it)")
        if args.live:
            run_options.check_number(args.live_wait, "--live-wait", most=86_400)
            for name, example in (("json", "report.json"), ("junit", "report.xml"), ("markdown", "report.md")):
                if getattr(args, name, None) == "-":
                    raise run_options.UsageError(
                        f"--{name} - with --live would write two reports (the preflight's, then the live one) to "
                        f"standard output: give a file (--{name} {example} writes the preflight's report there and "
                        f"the live one beside it, with .live before the extension)")
            live_check = live_options(args, _serve_url(command),
                                      serve_argv=[str(w) for w in argv_secrets(list(command))])
        options = {"serve": {"argv": command, "gpus": args.gpus, "gpu_memory_gib": args.gpu_memory,
                             "validate": not args.no_vllm_validate, "vllm_parser": not args.no_vllm_parser,
                             "run_model_code": args.run_model_code}}
        request = run_options.request_of(args, options=options)
        with live_progress(args) as on_event:
            run = pipeline.run(request, handle_signals=True, on_event=on_event)
    except run_options.UsageError as exc:
        tell(run_options.error_line(f"dflash-doctor serve: error: {exc}"))
        return 2
    code: int = emit(run, args)
    sys.stdout.flush()
    sys.stderr.flush()
    exit_if_lingering(run, code or 1)  # a collector ignored the stop: never start the server on a partial verdict
    if not args.exec:
        return code

    try:
        if code != 0:
            raise NotJudged("the checks above failed", code)
        program = judged_program(command, request.interpreter, args.timeout)
    except NotJudged as exc:

        redactor = Redactor.for_this_machine(keep_hosts=True, secrets=given_secrets(command))
        shown = redactor.secrets(" ".join(argv_secrets(command)))
        tell(f"dflash-doctor serve: not starting `{shown}`: {exc}\n")
        return exc.code
    if args.live:
        return start_and_check(args, program, live_check)
    try:
        os.execv(program[0], program)
    except OSError as exc:
        tell(f"dflash-doctor serve: cannot start {command[0]!r}: {exc.strerror or exc}\n")
        return 127
    return 127  # not reached: execvp does not return
