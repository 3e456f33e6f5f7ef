"""The options of a run, shared by every command that runs the doctor (the default run, serve, baseline,
fleet): the parsers, the checks on numbers, archs and output paths, and --profile. A wrong option is a
`UsageError` (one line on stderr, exit 2) before anything runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from dflash_doctor import __version__
from dflash_doctor.commands.profiles import ProfileError, apply, load_profiles
from dflash_doctor.documents import writer
from dflash_doctor.documents.jsondoc import shown_path
from dflash_doctor.knowledge.archs import MAX_TARGET_ARCHS, parse_target_archs
from dflash_doctor.request import Request, RequestError

__all__ = ["MAX_TIMEOUT_S", "OUTPUT_OPTIONS", "Parser", "UsageError", "add_render_options", "check_count",
           "check_number", "check_output_paths", "error_line", "parse_run_args", "request_of", "run_parser", "split_names",
           "tell", "unknown_command", "usage_error"]

SUBCOMMANDS = ("judge", "list", "explain", "profiles", "serve", "baseline", "merge", "fleet", "fix", "live")
"""The commands' names, for the run parser's help and the unknown-command error (`commands.COMMANDS` maps
the same names to the commands, a test keeps them equal)."""
OUTPUT_OPTIONS = ("json", "junit", "markdown")
MAX_TIMEOUT_S = 86_400.0  # a day: past this a per-probe timeout means "never", which is not a timeout


UsageError = RequestError
"""Wrong command line or unusable input file: reported on stderr, exit 2 (a request that cannot be run)."""


def error_line(text: str, words: Sequence[str] | None = None) -> str:
    """A usage error as the one line it is on stderr: what it quotes of the command line (`words`, default
    sys.argv) with its secrets masked as the reports mask them (`--api-key K` put before `serve --`, a token in a
    mistyped option's value), its control characters shown as escapes and no `##[` in it (a CI log's
    workflow command, from a saved report's text, say)."""
    return _stderr_lines([text.rstrip("\n")], words)


def tell(text: str) -> None:
    """Write `text` to stderr, each of its lines as `error_line` writes one: stderr is a terminal or a CI log, and
    what the doctor says there quotes paths, exceptions and the command line (secrets masked, controls escaped)."""
    sys.stderr.write(_stderr_lines(text.rstrip("\n").split("\n")))
    sys.stderr.flush()


def _stderr_lines(lines: Sequence[str], words: Sequence[str] | None = None) -> str:
    """Each of `lines` made safe for stderr (one line each: a line break in one is shown as an escape), with one
    redactor for all of them."""
    # error messages only: the redactor and its patterns (~20 ms) stay out of every command's start
    from dflash_doctor.render.text import no_legacy_command, visible
    from dflash_doctor.report.redact import Redactor, given_secrets

    given = [str(w) for w in (sys.argv[1:] if words is None else words)]
    redactor = Redactor.for_this_machine(keep_hosts=True, secrets=given_secrets(given))
    return "".join(no_legacy_command(visible(redactor.secrets(line))) + "\n"
                   for line in lines)


class Parser(argparse.ArgumentParser):
    """argparse's parser whose command-line error is one line on stderr (exit 2): the message, the closest
    option to a mistyped one, and where the usage is, not the whole usage block (through `error_line`)."""

    _words: Sequence[str] | None = None

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: Any = None) -> tuple[Any, list[str]]:
        self._words = None if args is None else [str(w) for w in args]
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        self.exit(2, error_line(f"{self.prog}: error: {message}{self._closest(message)} (try '{self.prog} --help')",
                                self._words))

    def _closest(self, message: str) -> str:
        prefix = "unrecognized arguments: "
        if not message.startswith(prefix):
            return ""
        known = sorted(self._option_string_actions)
        for word in message[len(prefix):].split():
            if not word.startswith("-"):
                continue
            close = difflib.get_close_matches(word.split("=", 1)[0], known, n=1, cutoff=0.75)
            if close:
                return f"; did you mean {close[0]}?"
        return ""


def unknown_command(word: str) -> str:
    """The usage error for `dflash-doctor WORD` where WORD is no command: the closest one, and all of them."""
    close = difflib.get_close_matches(word, SUBCOMMANDS, n=1, cutoff=0.5)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    return error_line(f"dflash-doctor: error: unknown command {word!r}{hint} (commands: {', '.join(SUBCOMMANDS)}; "
                      "try 'dflash-doctor --help')")


def split_names(values: Sequence[str] | None) -> list[str]:
    return [part.strip() for value in values or () for part in value.split(",") if part.strip()]


def add_render_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", metavar="PATH", help="write the JSON report to PATH ('-': stdout, and nothing else there)")
    parser.add_argument("-v", "--verbose", action="store_true", help="show passing findings, evidence and facts")
    parser.add_argument("--strict", action="store_true", help="exit 1 on warnings too")
    parser.add_argument("--only", action="append", metavar="IDS", help="only these check ids or layers (comma-separated)")
    parser.add_argument("--skip", action="append", metavar="IDS", help="skip these check ids or layers (comma-separated)")
    parser.add_argument("--no-color", action="store_true", help="plain ASCII output (also when NO_COLOR is set or not a TTY)")
    parser.add_argument("--junit", metavar="PATH", help="also write JUnit XML (one testcase per check) to PATH")
    parser.add_argument("--markdown", metavar="PATH", help="also write a Markdown report for a bug ticket to PATH")
    parser.add_argument("--format", choices=("terminal", "github"), default="terminal",
                        help="github: workflow annotations (::error ...) for GitHub Actions instead of the terminal view")
    parser.add_argument("--keep-hosts", action="store_true", help="do not redact hostnames and IP addresses in reports")
    parser.add_argument("--baseline", metavar="FILE",
                        help="compare with a golden baseline (from `dflash-doctor baseline save FILE`); any drift fails")


def run_parser(prog: str = "dflash-doctor") -> argparse.ArgumentParser:
    parser = Parser(
        prog=prog,
        description="Finds what would break `vllm serve` with DFlash speculative decoding, before it runs. "
        f"Subcommands: {', '.join(SUBCOMMANDS)} (see `dflash-doctor SUBCOMMAND --help`).",
    )
    parser.add_argument("--version", action="version", version=f"dflash-doctor {__version__}")
    parser.add_argument("--python", metavar="PATH", default=sys.executable,
                        help="the interpreter whose environment to inspect (default: this one)")
    parser.add_argument("--no-gpu", action="store_true", help="skip the checks that need a GPU (CI image builds)")
    parser.add_argument("--target-arch", action="append", metavar="ARCHS",
                        help="GPU archs to judge compiled code against without a GPU, e.g. sm_86,sm_90")
    parser.add_argument("--verify-hashes", action="store_true", help="compare every stack file's sha256 with RECORD")
    parser.add_argument("--timeout", type=float, default=60.0, metavar="S", help="per-probe timeout in seconds (default 60)")
    parser.add_argument("--verify-fixes", action="store_true",
                        help="ask the target's installer what each fix of a failing finding would do (pip/uv --dry-run; "
                        "needs the package index, each call bounded by --timeout)")
    parser.add_argument("--profile", metavar="NAME",
                        help="a named set of options, e.g. ci (--no-gpu --strict, --target-arch required); "
                        "see `dflash-doctor profiles`")
    parser.add_argument("--config", metavar="FILE",
                        help="a TOML file with [profiles.NAME] tables (pyproject.toml's [tool.dflash-doctor] is read too)")
    add_render_options(parser)
    return parser


def check_number(value: Any, flag: str, *, unit: str = "seconds", allow_zero: bool = False,
                 most: float = MAX_TIMEOUT_S) -> float:
    """A number (of seconds) from the command line or a profile: finite, > 0 (or >= 0), at most `most`."""
    low = "0 or more" if allow_zero else "more than 0"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < 0 or (value == 0 and not allow_zero) or value > most:
        raise UsageError(f"{flag} {value}: give a number of {unit}, {low} and at most {most:g}")
    return float(value)


def check_count(value: Any, flag: str, least: int, most: int) -> int | None:
    """A count from the command line (None: not given): an integer from `least` to `most` (what is plausible:
    nothing the doctor builds one of per unit may grow past it)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < least or value > most:
        shown = str(value) if not isinstance(value, int) or abs(value) < 10**30 else f"{str(value)[:12]}... "
        raise UsageError(f"{flag} {shown}: give a whole number, at least {least} and at most {most}")
    return value


def _check_target_archs(values: Sequence[str] | None) -> None:
    total = 0
    for value in values or ():
        try:
            total += len(parse_target_archs(value))
        except ValueError as exc:
            raise UsageError(f"--target-arch {shown_path(value)!r}: {exc}") from None
        if total > MAX_TARGET_ARCHS:
            raise UsageError(f"--target-arch: more than {MAX_TARGET_ARCHS} architectures; name the GPUs this "
                             "environment will run on (e.g. sm_86,sm_90)")


def _check_run_options(args: argparse.Namespace) -> None:
    """The options a run takes, whether from the command line or a profile: wrong ones are usage errors,
    before anything runs (not findings after it)."""
    args.timeout = check_number(args.timeout, "--timeout")
    _check_target_archs(args.target_arch)
    if getattr(args, "python", None) is not None:
        from dflash_doctor.facts.python.interpreter import (
            absolute,  # ~15 ms, and every command imports this module
        )

        if not args.python:
            raise UsageError("--python: give the path of an interpreter")
        args.python = absolute(args.python)


def check_output_paths(args: argparse.Namespace) -> None:
    """Fail before a long run, not after it, when an output cannot be written."""

    for option in OUTPUT_OPTIONS:
        path = getattr(args, option, None)
        if not path or path == "-":
            continue
        shown = shown_path(path)
        try:
            parent = Path(path).expanduser().resolve().parent
            if Path(path).expanduser().is_dir():
                raise UsageError(f"--{option} {shown}: is a directory; give a file name")
            parent_is_dir = parent.is_dir()
        except (OSError, ValueError) as exc:
            raise UsageError(f"--{option} {shown}: {getattr(exc, 'strerror', None) or exc}") from None
        if not parent_is_dir:
            raise UsageError(f"--{option} {shown}: directory {shown_path(str(parent))} does not exist")
        if not os.access(parent, os.W_OK):
            raise UsageError(f"--{option} {shown}: directory {shown_path(str(parent))} is not writable")

        try:
            writer.check(path, {"json": writer.JSON_DOCUMENT, "junit": writer.XML}.get(option, writer.MARKDOWN))
        except writer.WriteError as exc:
            raise UsageError(f"--{option} {exc}") from None
    if args.json == "-" and "-" in (getattr(args, "junit", None), getattr(args, "markdown", None)):
        raise UsageError("only one of --json, --junit, --markdown can write to stdout ('-')")


def parse_run_args(argv: Sequence[str], parser: argparse.ArgumentParser | None = None) -> argparse.Namespace:
    """Parse a run's options and apply --profile; UsageError for a bad profile, config or output path."""
    parser = parser or run_parser()
    args = parser.parse_args(list(argv))
    args.profile_applied = args.profile_origin = None
    if args.profile is not None or args.config is not None:
        try:
            profiles = load_profiles(parser, args.config)
        except ProfileError as exc:
            raise UsageError(str(exc)) from exc
        if args.profile is not None:
            profile = profiles.get(args.profile)
            if profile is None:
                raise UsageError(f"unknown profile {args.profile!r} (known: {', '.join(sorted(profiles))}; "
                                 "see `dflash-doctor profiles`)")
            missing = apply(profile, args, parser)
            if missing:
                flags = ", ".join("--" + m.replace("_", "-") for m in missing)
                example = " (e.g. --target-arch sm_86)" if "target_arch" in missing else ""
                raise UsageError(f"profile {profile.name!r} requires {flags}{example}")
            args.profile_applied, args.profile_origin = profile.name, profile.origin
    _check_run_options(args)
    check_output_paths(args)
    return args


def request_of(args: argparse.Namespace, **changes: Any) -> Request:
    """The run the parsed command line asks for (`parse_run_args`); `changes` replace fields of it (e.g. the
    serve command line as `options`). Below this, nothing sees argparse."""
    request = Request(
        python=args.python or "", cwd=os.getcwd(), no_gpu=bool(args.no_gpu), target_archs=tuple(split_names(args.target_arch)),
        verify_hashes=bool(args.verify_hashes), timeout_s=float(args.timeout), only=tuple(split_names(args.only)),
        skip=tuple(split_names(args.skip)), strict=bool(args.strict), keep_hosts=bool(args.keep_hosts),
        baseline=args.baseline, verify_fixes=bool(getattr(args, "verify_fixes", False)),
        profile=getattr(args, "profile_applied", None), profile_origin=getattr(args, "profile_origin", None))
    request = dataclasses.replace(request, **changes)
    if request.baseline:
        check_baseline(request.baseline)
    return request


def check_baseline(path: str) -> None:
    """Before the run: --baseline FILE must be a usable baseline (the run's collector reads it again)."""
    from dflash_doctor.facts.fix.baseline import (  # reads with `packaging` (~60 ms): only when a baseline is read
        BaselineError,
        load,
    )

    try:
        load(path)
    except BaselineError as exc:
        raise UsageError(str(exc)) from None


def usage_error(exc: UsageError) -> int:
    tell(f"dflash-doctor: error: {exc}")
    return 2
