"""`dflash-doctor fix`: apply the first-ranked remediation of each failing finding, proving each step.

1. Run the doctor, and ask the target's installer what each failing finding's fixes would do (the dry runs
   of `--verify-fixes`); the first-ranked fix of each failing finding that is a cause of its own is a step:
   what stops `vllm serve` first, then in the order of the checks; a step another step undoes, or a CUDA build
   of torch for a run told there is no GPU, is left out, and the plan says why (fix.plan).
2. Show the plan and ask (`--yes` for CI; with stdin not a terminal and no `--yes`, exit 2, nothing done).
3. For each step: skip it when the installer said it fails or would break another requirement, when it was not
   asked (offline: what it would touch is unknown), or when it is not a command fix knows (only installs,
   uninstalls, leftover cleanups and moves that name the target environment); stop at the first source
   build unless `--allow-build`. Otherwise snapshot what it will touch (fix.snapshot), run the command
   exactly as shown (`bash -c`), run the doctor again, and keep the step only when its findings no longer
   fail and no check got worse (a higher status, or more failing findings); else restore the snapshot.
4. Print the checks before and after, side by side (`--json PATH`: the plan and each step's outcome).

`fix --undo [SNAPSHOT]` restores the environment from the snapshots of a fix run (the newest for this
interpreter when none is named), last step first, and says what, if anything, still differs. It restores only
inside the environment roots the interpreter reports now, and only after every snapshot of the run passed
fix.snapshot_schema (read safely, its schema, every path inside those roots); else exit 2, nothing changed.

Exit codes: 0 nothing fails after; 1 something still fails (or a restore left differences); 2 a wrong
command line, a plan that needed a yes it could not ask for, or a snapshot `--undo` will not trust.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from dflash_doctor import pipeline
from dflash_doctor.checks.python.overlaps import partners
from dflash_doctor.checks.remedy import join
from dflash_doctor.commands.options import (
    UsageError,
    parse_run_args,
    request_of,
    run_parser,
    split_names,
    tell,
    usage_error,
)
from dflash_doctor.context import Context
from dflash_doctor.facts.fix import dryrun
from dflash_doctor.facts.fix.dryrun_shapes import DryRuns
from dflash_doctor.facts.python import environment
from dflash_doctor.facts.python.environment_shapes import Distributions, Target
from dflash_doctor.fix import snapshot
from dflash_doctor.fix.plan import Step, decide, failing_cause, failing_keys, plan, worse
from dflash_doctor.fix.touched import environment_roots, touched_paths
from dflash_doctor.fix.verify import judge_item, mark_unchecked, verify_results
from dflash_doctor.model import CheckResult, Finding
from dflash_doctor.process import safe_path_environ
from dflash_doctor.render import json_report
from dflash_doctor.render.plain import plain_output
from dflash_doctor.render.text import log_line, screen, shell_line, visible
from dflash_doctor.report.redact import redact_report
from dflash_doctor.shape import SectionFailure

__all__ = ["main"]

FIX_FORMAT = "dflash-doctor/fix/v1"
STEP_TIMEOUT_S = 4 * 3600.0  # a source build of flash-attn takes hours (knowledge.flash_attn.BUILD_ENV_VARS)
UNASKED = ("fix asks the installer about the first fix of each failing cause, and about the others only when that "
           "one does not resolve; to check: dflash-doctor --verify-fixes")


def fix_parser() -> argparse.ArgumentParser:
    parser = run_parser("dflash-doctor fix")
    parser.description = ("Apply the first-ranked fix of each failing finding, after showing the plan: each step "
                          "snapshotted, re-checked, and rolled back when it does not clear its finding.")
    parser.add_argument("--yes", action="store_true", help="apply the plan without asking (needed when stdin is not a terminal)")
    parser.add_argument("--allow-build", action="store_true", help="also run a step that builds from source (hours)")
    parser.add_argument("--snapshots", metavar="DIR",
                        help="where to keep snapshots (default: $DFLASH_DOCTOR_SNAPSHOTS or ~/.local/state/dflash-doctor/fix)")
    parser.add_argument("--undo", nargs="?", const="", metavar="SNAPSHOT",
                        help="restore the environment from a fix run's snapshots (default: the newest for --python)")
    return parser


# --------------------------------------------------------------------------- running


def _archs(args: argparse.Namespace) -> list[str]:
    return split_names(args.target_arch)


def _dry_runs(results: Sequence[CheckResult], sections: Mapping[str, object], python: str,
              args: argparse.Namespace) -> DryRuns:
    """Ask the installer about the fixes the plan may pick, where it matters: the first fix of each failing cause,
    and the others of a finding only when its first does not resolve (a first fix that resolves is ranked first
    whatever the others say, so asking about them would cost index time for nothing)."""

    fails_itself = failing_cause(results)
    causes = [f for r in results for f in r.findings if fails_itself(f) and f.remediation]

    def ask(commands: list[str]) -> DryRuns:
        return dryrun.collect(commands, sections, python=python, timeout_s=args.timeout, cwd=os.getcwd(),
                              target_archs=_archs(args))

    first = ask([f.remediation[0].command for f in causes])
    said = {i.command: judge_item(i, first.installed, first.marker_environment)[0] for i in first.items}
    rest = [r.command for f in causes if said.get(f.remediation[0].command) != "resolves" for r in f.remediation[1:]]
    if not rest:
        return first
    more = ask([c for c in rest if c not in said])
    return replace(first, items=[*first.items, *more.items],
                   build=first.build if first.build is not None else more.build)


def _doctor(args: argparse.Namespace) -> pipeline.Run:
    """The doctor's run, as fix needs it: no baseline, and fix asks the installer itself."""
    return pipeline.run(request_of(args, verify_fixes=False, baseline=None))


def _shell(command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=STEP_TIMEOUT_S,
                          check=False, stdin=subprocess.DEVNULL, env=safe_path_environ(os.environ))


def _confirm(steps: Sequence[Step], args: argparse.Namespace, out: TextIO) -> int | None:
    """None: go ahead; else the exit code."""
    if args.yes:
        return None
    try:
        tty = sys.stdin.isatty()
    except (AttributeError, ValueError):
        tty = False
    if not tty:
        tell("dflash-doctor fix: stdin is not a terminal, so it cannot ask: pass --yes to apply this plan\n")
        return 2
    out.write(f"Apply {len(steps)} step(s)? [y/N] ")
    out.flush()
    answer = sys.stdin.readline().strip().lower()
    if answer not in ("y", "yes"):
        out.write("nothing changed\n")
        return 1
    return None


def _status_table(before: Sequence[CheckResult], after: Sequence[CheckResult], out: TextIO) -> None:
    now = {r.id: r for r in after}
    width = max((len(r.id) for r in before), default=5)
    out.write(f"\n{'check':<{width}}  before  after\n")
    for result in before:
        later = now.get(result.id)
        out.write(f"{result.id:<{width}}  {result.status.value:<6}  {later.status.value if later else '-'}\n")


def _annotate(results: Sequence[CheckResult], steps: Sequence[Step]) -> list[CheckResult]:
    applied = {s.command: s.applied for s in steps if s.applied}

    def one(f: Finding) -> Finding:
        if not any(r.command in applied for r in f.remediation):
            return f
        return replace(f, remediation=tuple(replace(r, applied=applied[r.command]) if r.command in applied else r
                                            for r in f.remediation))

    return [replace(r, findings=tuple(one(f) for f in r.findings)) for r in results]


def _show_dropped(dropped: Sequence[Step], out: TextIO) -> None:
    if dropped:
        out.write(f"left out of the plan ({len(dropped)}):\n")
    for step in dropped:
        out.write(f"  - {_shown(step.command)}\n")
        out.write(f"     for: {'; '.join(f'{t}  [{i}]' for _, i, t in step.findings)}\n")
        out.write(f"     left out: {step.dropped}\n")


def _plan_document(python: str, steps: Sequence[Step], dropped: Sequence[Step],
                   unfixable: Sequence[tuple[str, str, str]]) -> dict[str, Any]:
    return {"schema": FIX_FORMAT, "python": python, "steps": [s.to_dict() for s in steps],
            "dropped": [s.to_dict() for s in dropped],
            "unfixable": [{"check": c, "id": i, "title": t} for c, i, t in unfixable]}


def _write_json(path: str, document: Mapping[str, Any]) -> None:
    try:
        json_report.write(document, path)
    except OSError as exc:  # what the writer refuses (a link planted there since the start, say): one line
        tell(f"dflash-doctor: cannot write the fix report: {exc}\n")
        return
    if path != "-":
        tell(f"dflash-doctor: fix report written to {os.path.abspath(path)}\n")


def _liveenvironment_roots(args: argparse.Namespace) -> list[str]:
    """The target's environment roots as its interpreter reports them now (the environment probe), never as a
    snapshot claims them: `fix --undo` restores inside these only."""

    sections = environment.collect(Context(python=str(args.python), cwd=os.getcwd(), timeout_s=args.timeout), {})
    facts = sections.get(Target.SECTION)
    if isinstance(facts, SectionFailure):
        raise UsageError(f"fix --undo: cannot ask {args.python} where its environment is: {facts.reason}")
    roots = environment_roots(Target.read(facts))
    if not roots:
        raise UsageError(f"fix --undo: {args.python} reports no environment directory to restore into")
    return roots


def _undo(args: argparse.Namespace, out: TextIO) -> int:
    root = Path(args.snapshots) if args.snapshots else snapshot.snapshot_root()
    run_dir = Path(args.undo) if args.undo else snapshot.latest(args.python, root)
    if run_dir is None:
        raise UsageError(f"fix --undo: no fix snapshot for {args.python} under {root}")
    # Every snapshot is read, checked against its schema and confined to the live environment before anything
    # is touched: a snapshot that fails is a usage error, with nothing changed.
    try:
        steps = snapshot.load_run(run_dir, FIX_FORMAT, str(args.python))
        roots = _liveenvironment_roots(args)
        snaps = [snapshot.load(run_dir / step_dir, str(args.python)) for step_dir in reversed(steps)]
        snapshot.confine(snaps, roots)
    except snapshot.SnapshotError as exc:
        raise UsageError(f"fix --undo: {exc}") from None
    left: list[str] = []
    for snap in snaps:
        try:
            left = snapshot.apply(snap, roots)
        except (OSError, snapshot.SnapshotError) as exc:
            out.write(f"the restore of {snap.directory} stopped: {exc}\n")
            return 1
        out.write(f"restored {snap.directory} (before: {snap.command})\n")
    if left:
        out.write("still different from the snapshot:\n" + "".join(f"  {d}\n" for d in left[:50]))
        return 1
    out.write(f"the environment is as it was before the fix run {run_dir.name}\n")
    if args.json:
        _write_json(args.json, {"schema": FIX_FORMAT, "undo": str(run_dir), "left_different": left})
    return 0


def _shown(command: str) -> str:
    """A step's command as one line to paste (render.text.shell_line), ASCII so that either view shows it whole."""

    return shell_line(command, ascii_only=True)


class _Plain:
    """Where fix writes its lines, each through its medium's function, as the report's are: `text.log_line` when
    not a terminal or NO_COLOR (ASCII, no workflow command), `text.screen` on a terminal."""

    def __init__(self, stream: TextIO, plain: bool) -> None:
        self.stream, self.plain = stream, plain

    def write(self, text: str) -> int:
        shown = log_line if self.plain else screen
        return self.stream.write("\n".join(shown(line) for line in text.split("\n")))

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self.stream.flush()


def main(argv: Sequence[str]) -> int:
    try:
        args = parse_run_args(argv, fix_parser())
        stream = sys.stderr if args.json == "-" else sys.stdout
        out: Any = _Plain(stream, bool(args.no_color) or plain_output(stream))
        if args.undo is not None:
            return _undo(args, out)
        return _fix(args, out)
    except UsageError as exc:
        return usage_error(exc)


def _fix(args: argparse.Namespace, out: TextIO) -> int:
    first = _doctor(args)
    sections = first.sections
    target = Target.read(sections.get("target"))
    python = str(args.python)
    dry = _dry_runs(first.raw_results, sections, python, args)
    before = verify_results(first.raw_results, dry)
    roots = environment_roots(target)
    items = {i.command: i for i in dry.items}
    # A build's command carries MAX_JOBS and FLASH_ATTN_CUDA_ARCHS in front of the one the installer was asked about.
    commands = {r.command for result in before for f in result.findings for r in f.remediation}
    items.update({command: items[c] for command in commands for c in list(items) if command.endswith(" " + c)})
    # Which distributions list paths another lists too: a step whose uninstall deletes another's files, without
    # reinstalling it, is left out of the plan (its snapshot would restore them, but only after the re-check).
    dists = Distributions.read(sections.get(Distributions.SECTION))
    steps, dropped, unfixable = plan(before, dry, items=items, gpu_expected=not (args.no_gpu and not _archs(args)),
                                     shared_with=partners(dists) if dists is not None else {})
    out.write(f"dflash-doctor fix | {visible(python)}\n")
    if not steps:
        out.write("nothing to fix: no failing finding offers a fix\n" if unfixable or dropped or first.exit_code
                  else "nothing fails\n")
        _show_dropped(dropped, out)
        out.writelines(f"  no fix offered: {key[2]}  [{key[1]}]\n" for key in unfixable)
        if args.json:
            _write_json(args.json, _plan_document(python, steps, dropped, unfixable))
        return first.exit_code
    out.write(f"plan ({len(steps)} step(s); environment: {', '.join(roots) or '?'}):\n")
    for n, step in enumerate(steps, 1):
        out.write(f"  {n}. {_shown(step.command)}\n")
        out.write(f"     for: {'; '.join(f'{t}  [{i}]' for _, i, t in step.findings)}"
                  + ("  (stops `vllm serve`)" if step.stops_serve else "") + "\n")
        out.write(f"     verified: {step.remediation.verified or 'not-checked: not an installer command'}\n")
        out.writelines(f"       {change}\n" for change in step.remediation.changes)
    _show_dropped(dropped, out)
    out.writelines(f"  (no fix offered: {key[2]}  [{key[1]}])\n" for key in unfixable)
    answer = _confirm(steps, args, out)
    if answer is not None:
        if args.json:  # the plan, as shown, with nothing applied
            _write_json(args.json, _plan_document(python, steps, dropped, unfixable))
        return answer

    snapshots = Path(args.snapshots) if args.snapshots else snapshot.snapshot_root()
    created = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    run_dir = snapshots / f"{created}-{os.getpid()}"
    meta: dict[str, Any] = {"format": FIX_FORMAT, "python": python, "created": created, "steps_taken": []}

    def save_meta() -> None:
        snapshot.write_private(run_dir / "fix.json", json.dumps(meta, indent=1) + "\n")

    try:
        snapshot.private_dir(run_dir)  # owner-only: the copies may hold anything the environment holds
        save_meta()
    except (OSError, snapshot.SnapshotError) as exc:
        raise UsageError(f"fix: cannot keep snapshots in {run_dir}: {exc}") from None
    undo = join(["dflash-doctor", "fix", "--python", python, "--undo", str(run_dir)])
    out.write(f"snapshots: {visible(str(run_dir))}  (undo: {_shown(undo)})\n")
    current = before
    latest: pipeline.Run | None = first  # the doctor's run of the environment as it is now; None once a step rolled back
    stopped = False
    for n, step in enumerate(steps, 1):
        step.applied, stopped = decide(step.remediation.verified, allow_build=args.allow_build, stopped=stopped)
        if not step.applied and not set(step.findings) & failing_keys(current):
            step.applied = "skipped: an earlier step cleared its finding"
        if step.applied:
            out.write(f"step {n}: {step.applied}\n")
            continue
        touched, why = touched_paths(step.command, items.get(step.command), dry.installed, roots, python)
        if touched is None:
            step.applied = f"skipped: {why}"
            out.write(f"step {n}: {step.applied}\n")
            continue
        step.touched = touched
        step_dir = f"step-{n}"
        try:
            snapshot.take(run_dir / step_dir, python=python, roots=roots, touched=touched, command=step.command,
                          uv=target is not None and target.env_kind == "uv")
        except (OSError, snapshot.SnapshotError) as exc:  # nothing was run: a step without its snapshot is not taken
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            step.applied = f"skipped: its snapshot could not be written ({reason})"
            out.write(f"step {n}: {step.applied}\n")
            continue
        meta["steps_taken"].append(step_dir)
        save_meta()
        step.snapshot = str(run_dir / step_dir)
        out.write(f"step {n}: {_shown(step.command)}\n")
        started = time.monotonic()
        try:
            proc = _shell(step.command)
            step.returncode, step.output = proc.returncode, (proc.stdout + proc.stderr)[-2000:]
        except subprocess.TimeoutExpired:
            step.returncode, step.output = None, f"did not finish within {STEP_TIMEOUT_S:g} s"
        step.duration_s = time.monotonic() - started
        reason = ""
        if step.returncode != 0:
            reason = f"the command exited {step.returncode}: {step.output.strip().splitlines()[-1] if step.output.strip() else ''}"
        else:
            again = _doctor(args)
            still = [k for k in step.findings if k in failing_keys(again.raw_results)]
            got_worse = worse(current, again.raw_results)
            if still:
                reason = "its finding still fails: " + "; ".join(f"{t} [{i}]" for _, i, t in still)
            elif got_worse:
                reason = "another check got worse: " + "; ".join(got_worse)
            else:
                step.applied = "cleared"
                current = again.raw_results
                latest = again
        if reason:
            try:
                step.differences = snapshot.restore(run_dir / step_dir, roots)
            except (OSError, snapshot.SnapshotError) as exc:
                step.differences = [f"the restore stopped: {exc}"]
            step.applied = f"rolled-back: {reason}"
            latest = None
        out.write(f"  {step.applied}  ({step.duration_s:.1f} s)\n")
        out.writelines(f"  still different after the rollback: {line}\n" for line in step.differences[:20])
    last = latest if latest is not None else _doctor(args)
    _status_table(before, last.raw_results, out)
    out.write(f"\nafter: {last.report['summary']['fail']} failing check(s); "
              f"undo every step: dflash-doctor fix --python {python} --undo {run_dir}\n")
    if args.json:
        _write_json(args.json, {
            **_plan_document(python, steps, dropped, unfixable), "snapshots": str(run_dir),
            "before": {r.id: r.status.value for r in before},
            "after": {r.id: r.status.value for r in last.raw_results},
            "after_findings": {r.id: {f.id: f.status.value for f in r.findings} for r in last.raw_results},
            "report": redact_report({"checks": [r.to_dict() for r in mark_unchecked(_annotate(before, steps), UNASKED)]})})
    return last.exit_code
