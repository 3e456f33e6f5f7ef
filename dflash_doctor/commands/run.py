"""The default command, `dflash-doctor [options]`: run the doctor, then write and render its report.

Exit codes: 0 no fail and no error; 1 any fail or error (with --strict, any warn too; a partial report
is an error: SIGTERM or SIGINT once stops the run and writes the partial report, with one line on stderr);
2 the command line or an input file was wrong (argparse's own convention), nothing judged; 128 + the
signal's number (143, 130) when a second SIGTERM/SIGINT ends the doctor before it wrote the report.

Every output (terminal, --json, --junit, --markdown, --format github) is made from one redacted report.
The command line becomes a `Request` (`options.request_of`); the run itself is `dflash_doctor.pipeline.run`,
which every command that runs the doctor calls; `commands.output` writes and renders what it gives.
"""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Sequence

from dflash_doctor.commands.options import UsageError, parse_run_args, request_of, tell, usage_error
from dflash_doctor.commands.output import emit, exit_if_lingering, live_progress
from dflash_doctor.facts import head_start

__all__ = ["main"]


def main(argv: Sequence[str]) -> int:
    try:
        args = parse_run_args(argv)
        request = request_of(args)
    except UsageError as exc:
        return usage_error(exc)
    # The target's first processes start now (facts.head_start), and the doctor's checks and collectors (~0.3 s of
    # imports, which they need nothing of) load while they run: imported here, not at the module's top, for that.
    with head_start.start(request) as early:
        from dflash_doctor import pipeline

        gc.freeze()  # what was just imported lives as long as the process (see cli)
        try:
            with live_progress(args) as on_event:
                run = pipeline.run(dataclasses.replace(request, head_start=early), handle_signals=True,
                                   on_event=on_event)
        except UsageError as exc:
            return usage_error(exc)
    stop = next((f for r in run.results if r.id == "doctor" for f in r.findings if f.id == "doctor.interrupted"), None)
    code = emit(run, args)
    if stop is not None:
        tell(f"dflash-doctor: {stop.title} (exit {code})\n")
    exit_if_lingering(run, code)
    return code
