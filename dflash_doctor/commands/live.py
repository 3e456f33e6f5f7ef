"""`dflash-doctor live URL`: a running vLLM server's health and its DFlash acceptance.

Reads /health and /v1/models, then /metrics before and after a small fixed greedy workload sent through
/v1/completions (bounded tokens, per-request and total time), and judges the speculative-decoding counters'
differences: mean acceptance length, acceptance rate, the per-position curve, draft tokens per step and
throughput. A collapse fails and names its likely causes; --baseline compares with a saved `live --json`
report of the same prompts. The report (JSON, JUnit, Markdown) is like every other, and `dflash-doctor judge`
judges it again. The API key is read from the environment variable --api-key-env names; it is sent to the
server only, never printed or stored.

`live URL -- vllm serve ...` names the command the server was started with: the served max_model_len and
number of speculative tokens are then judged against the requested ones.

Exit codes: 0 no fail; 1 a fail (with --strict, a warn too); 2 a wrong command line or an unreadable
--prompts/--baseline file.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from dflash_doctor import __version__, pipeline
from dflash_doctor.checks.live.metrics import figures
from dflash_doctor.commands.options import (
    OUTPUT_OPTIONS,
    Parser,
    UsageError,
    check_count,
    check_number,
    check_output_paths,
    tell,
    usage_error,
)
from dflash_doctor.commands.output import emit, exit_if_lingering
from dflash_doctor.documents import writer
from dflash_doctor.documents.jsondoc import parse_json, shown_path
from dflash_doctor.facts import proctree
from dflash_doctor.facts.live.live import (
    DEFAULT_PROMPTS,
    MAX_PROMPT_CHARS,
    MAX_PROMPTS,
    LiveOptions,
    _flag,
    get,
    split_url,
)
from dflash_doctor.facts.live.live_shapes import Live
from dflash_doctor.facts.safefile import read_regular
from dflash_doctor.report import document as report_module
from dflash_doctor.report.redact import Redactor, given_secrets
from dflash_doctor.request import Request
from dflash_doctor.runner import Signals, Stopped, spare
from dflash_doctor.shape import ShapeError

__all__ = ["add_live_options", "live_options", "main", "parser", "run_live"]

MAX_FILE = 2**20


def add_live_options(p: argparse.ArgumentParser | argparse._ArgumentGroup, prefix: str = "") -> None:
    p.add_argument(f"--{prefix}api-key-env", metavar="NAME", dest="api_key_env",
                   help="environment variable holding the server's API key (sent as a bearer token, never shown)")
    p.add_argument(f"--{prefix}prompts", metavar="FILE", dest="prompts",
                   help="the workload's prompts: a JSON list of strings, or one prompt per line (default: 8 built-in)")
    p.add_argument(f"--{prefix}requests", type=int, default=8, metavar="N", dest="requests",
                   help="completions to send, cycling through the prompts (default 8)")
    p.add_argument(f"--{prefix}max-tokens", type=int, default=64, metavar="N", dest="max_tokens",
                   help="max_tokens of each completion (default 64)")
    p.add_argument(f"--{prefix}request-timeout", type=float, default=30.0, metavar="S", dest="request_timeout",
                   help="seconds for each request, /health and /metrics included (default 30)")
    p.add_argument(f"--{prefix}budget", type=float, default=120.0, metavar="S", dest="budget",
                   help="seconds for the whole workload; no request starts after it (default 120)")
    p.add_argument(f"--{prefix}baseline", metavar="FILE", dest="live_baseline",
                   help="a saved `dflash-doctor live --json` report of the same prompts: warn on a drop in acceptance")


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="dflash-doctor live", description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--version", action="version", version=f"dflash-doctor {__version__}")
    p.add_argument("url", metavar="URL", help="the server, e.g. http://127.0.0.1:8000")
    add_live_options(p)
    p.add_argument("--python", metavar="PATH", default=sys.executable,
                   help="the interpreter whose vLLM source names the metrics (default: this one)")
    p.add_argument("--json", metavar="PATH", help="write the JSON report to PATH ('-': stdout, and nothing else there)")
    p.add_argument("--junit", metavar="PATH", help="also write JUnit XML to PATH")
    p.add_argument("--markdown", metavar="PATH", help="also write a Markdown report to PATH")
    p.add_argument("-v", "--verbose", action="store_true", help="show passing findings, evidence and facts")
    p.add_argument("--strict", action="store_true", help="exit 1 on warnings too")
    p.add_argument("--no-color", action="store_true", help="plain ASCII output")
    p.add_argument("--format", choices=("terminal", "github"), default="terminal")
    p.add_argument("--keep-hosts", action="store_true", help="do not redact hostnames and IP addresses in reports")
    return p


def _prompts(path: str) -> tuple[str, ...]:
    try:
        raw = read_regular(path, MAX_FILE + 1)
    except OSError as exc:
        raise UsageError(f"--prompts {shown_path(path)}: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE:
        raise UsageError(f"--prompts {shown_path(path)}: larger than {MAX_FILE} bytes")
    text = raw.decode("utf-8", "replace")
    try:
        data = parse_json(text)  # bounded in depth and digits (a list of prompts is one level deep)
    except ValueError:
        data = None
    if isinstance(data, list):
        if not all(isinstance(p, str) for p in data):
            raise UsageError(f"--prompts {shown_path(path)}: a JSON list must hold only strings")
        prompts = [p for p in data if p.strip()]
    else:
        prompts = [line for line in text.splitlines() if line.strip()]
    if not prompts:
        raise UsageError(f"--prompts {shown_path(path)}: no prompt in it")
    if len(prompts) > MAX_PROMPTS or any(len(p) > MAX_PROMPT_CHARS for p in prompts):
        raise UsageError(f"--prompts {shown_path(path)}: at most {MAX_PROMPTS} prompts of {MAX_PROMPT_CHARS} "
                         "characters (the workload is a small fixed check, not a benchmark)")
    return tuple(prompts)


def _baseline(path: str) -> dict[str, Any]:
    """The figures of a saved live report, for the comparison (UsageError when it is not one)."""

    try:
        saved = report_module.load(path)
    except report_module.ReportError as exc:
        raise UsageError(f"--baseline: {exc}") from None
    live = report_module.sections_of(saved).get("live")
    if not isinstance(live, dict) or live.get("given") is not True or "metrics_after" not in live:
        raise UsageError(f"--baseline {shown_path(path)}: not a report of `dflash-doctor live` (no live facts)")
    try:
        facts = Live.from_json(live)
    except ShapeError as exc:
        raise UsageError(f"--baseline {shown_path(path)}: {exc}") from None
    created = saved.get("created") or saved.get("generated")
    return {"path": shown_path(path), "digest": facts.workload.digest, "figures": figures(facts),
            "created": created if isinstance(created, str) else None}


def live_options(args: argparse.Namespace, url: str, serve_argv: Sequence[str] | None = None) -> Any:
    try:
        split_url(url)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    check_count(args.requests, "--requests", 1, 1000)  # the workload is a small check
    check_count(args.max_tokens, "--max-tokens", 1, 100_000)
    check_number(args.request_timeout, "--request-timeout", most=3600)
    check_number(args.budget, "--budget", most=86_400)
    if args.api_key_env is not None and not args.api_key_env.replace("_", "").isalnum():
        raise UsageError(f"--api-key-env {args.api_key_env!r}: give the NAME of an environment variable")
    prompts = _prompts(args.prompts) if args.prompts else DEFAULT_PROMPTS
    return LiveOptions(url=url.rstrip("/") if "://" in url else "http://" + url.rstrip("/"),
                       api_key_env=args.api_key_env, prompts=prompts,
                       prompts_source=os.path.basename(args.prompts) if args.prompts else "built-in",
                       requests=args.requests, max_tokens=args.max_tokens, timeout_s=args.request_timeout,
                       budget_s=args.budget, baseline=_baseline(args.live_baseline) if args.live_baseline else None,
                       serve_argv=list(serve_argv) if serve_argv else None)


def run_live(args: argparse.Namespace, options: Any, last_words: str = "", secrets: Sequence[str] = ()) -> int:
    """Run the live check (and nothing else) as a doctor run, and write/render its report like every other.
    `last_words` go to stderr after the report; `secrets` (the serve command's) are masked in it by value. A run stopped while a request hung (its thread still waiting
    on the server) ends the process here: Python's exit would wait for that thread."""
    request = Request(python=args.python, cwd=os.getcwd(), no_gpu=True, timeout_s=max(60.0, float(args.request_timeout)),
                      only=("live",), strict=bool(args.strict), keep_hosts=bool(args.keep_hosts),
                      verify_fixes=bool(getattr(args, "verify_fixes", False)), options={"live": options},
                      secrets=tuple(secrets))
    run = pipeline.run(request, handle_signals=True)
    code: int = emit(run, args)
    if last_words:
        tell(last_words)
    exit_if_lingering(run, code)
    return code


def main(argv: Sequence[str]) -> int:
    words = list(argv)
    # `live URL -- vllm serve ...`: the command the server was started with, so that what it serves is judged
    # against what was asked for (max_model_len, num_speculative_tokens).
    serve_argv = words[words.index("--") + 1:] if "--" in words else None
    args = parser().parse_args(words[:words.index("--")] if "--" in words else words)
    try:
        check_output_paths(args)
        options = live_options(args, args.url, serve_argv)
    except UsageError as exc:
        return usage_error(exc)
    try:
        return run_live(args, options)
    except UsageError as exc:
        return usage_error(exc)


def _serve_url(command: Sequence[str]) -> str:
    """Where `vllm serve` listens: its --host (a wildcard address is reached on loopback) and --port (8000)."""

    host = _flag(command, "--host") or "127.0.0.1"
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    port = _flag(command, "--port") or "8000"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _tail(path: str, lines: int = 25) -> list[str]:
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, os.path.getsize(path) - 65536))
            text = handle.read().decode("utf-8", "replace")
    except OSError as exc:
        return [f"(log unreadable: {exc.strerror or exc})"]
    redactor = Redactor.for_this_machine(keep_hosts=True)
    return [redactor.secrets(line)[:400] for line in text.splitlines()[-lines:]]


def _end_session(proc: Any, grace_s: float = 15.0) -> str:
    """End the server's session (its engine processes with it): SIGTERM, then SIGKILL after `grace_s`. Ended means
    every process of its group is gone, not only the server: an engine process still exiting when the doctor
    returns would outlive the stop it reports."""

    for signum, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, signum)
        except ProcessLookupError:
            pass
        except PermissionError:
            return "could not be stopped (permission denied): stop it with kill " + str(proc.pid)
        deadline = time.monotonic() + wait_s
        try:
            proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue
        if _group_gone(proc.pid, deadline):
            return "was stopped" if signum == signal.SIGTERM else f"was killed (no exit {grace_s:g} s after SIGTERM)"
    return "did not exit after SIGKILL: check it with ps " + str(proc.pid)


def _group_gone(pgid: int, deadline: float) -> bool:
    """Whether process group `pgid` has no running process left by `deadline` (`proctree.group_running`). Without
    /proc to read, the server's own exit has to do."""
    while proctree.group_running(pgid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def start_and_check(args: argparse.Namespace, command: Sequence[str], options: Any) -> int:
    """`serve --exec --live`: start the command in its own session, wait for /health, check it, leave it running.
    `options`: the live check's, from `live_options(args, _serve_url(command), ...)` before the preflight."""


    url = _serve_url(command)
    fd, log = writer.new_log(prefix="vllm-serve-", suffix=".log")
    started = time.monotonic()
    try:
        proc = subprocess.Popen(list(command), stdout=fd, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    except OSError as exc:
        tell(f"dflash-doctor serve: cannot start {command[0]!r}: {exc.strerror or exc}\n")
        return 127
    finally:
        os.close(fd)  # the server holds its own copy
    tell(f"dflash-doctor serve: started `{command[0]} ...` as PID {proc.pid} (log: {log}); "
         f"waiting up to {args.live_wait:g} s for {url}/health\n")
    spare(proc.pid)  # a stop during the live checks ends the doctor's probes, never the server
    server: dict[str, Any] = {"pid": proc.pid, "log": log, "url": url}
    # Ctrl-C and SIGTERM stop the wait as they stop a run (without this, SIGTERM would end the doctor on the
    # spot and leave the server it started running on its own).
    signals = Signals(True)
    signals.install()
    try:
        while True:
            status = proc.poll()
            if status is not None:
                server.update({"exit_status": status, "seconds": round(time.monotonic() - started, 1),
                               "log_tail": _tail(log)})
                break
            if get(url, "/health", None, 5.0, 4096).status == 200:
                server.update({"ready": True, "seconds": round(time.monotonic() - started, 1)})
                break
            if time.monotonic() - started > args.live_wait:
                server.update({"ready": False, "seconds": round(time.monotonic() - started, 1), "log_tail": _tail(log)})
                break
            time.sleep(1.0)
    except Stopped as stop:
        # The user gave up before the server was up: it goes too, with whatever it started in its session.
        how = _end_session(proc)
        tell(f"dflash-doctor serve: stopped by {stop.args[0]} while waiting for {url}/health; "
             f"the server (PID {proc.pid}) {how} (log: {log})\n")
        return 128 + stop.signum
    finally:
        signals.restore()
    options = dataclasses.replace(options, server=server)
    for name in OUTPUT_OPTIONS:  # the preflight's report is there already: the live one beside it
        path = getattr(args, name, None)
        if path and path != "-":
            root, ext = os.path.splitext(path)
            setattr(args, name, f"{root}.live{ext}")
    left = (f"dflash-doctor serve: the server is left running: PID {proc.pid} at {url} "
            f"(log: {log}; stop it with: kill {proc.pid})\n") if server.get("exit_status") is None else ""

    return run_live(args, options, last_words=left, secrets=given_secrets(command))
