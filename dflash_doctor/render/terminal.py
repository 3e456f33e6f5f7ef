"""The terminal view: one line per check, details and remediation under what is not passing.

Colour and Unicode marks on a TTY; plain ASCII when stdout is not a terminal or NO_COLOR is set, so CI
logs stay readable. Every line leaves through its medium's function (`text.screen` on a terminal,
`text.log_line` in plain mode), every fix through `text.shell_line`: nothing the checks, plugins and probes
wrote reaches the screen raw. The decisive findings come first, each with what follows from it nested under
it (`grouping`); the footer names the finding to start with. A fix nobody could check with the installer
says why once, in the footer, not under each fix. With `verbose`, passing findings, evidence and facts are
shown too.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import IO, Any

from rich.console import Console
from rich.style import Style
from rich.text import Text as RichText

from dflash_doctor.facts.fix.dryrun import NOT_AN_INSTALLER_COMMAND
from dflash_doctor.model import CheckResult, Finding, Status
from dflash_doctor.render.gpu_summary import gpu_lines
from dflash_doctor.render.grouping import CheckView, Node, arrange, is_problem, line_title, raised_text
from dflash_doctor.render.plain import plain_output
from dflash_doctor.render.text import detail_lines, log_line, screen, shell_line

__all__ = ["TerminalReporter", "make_console", "plain_output", "raised_text"]

class Text(RichText):
    """A line of the view: every string comes in through `text.screen`, so that what the checks, plugins and probes
    wrote shows its control characters as escapes (rich alone would send ESC, C1 and bidi controls as they are,
    and drop CR, BS, BEL, VT and FF without a trace)."""

    def __init__(self, text: str = "", style: str | Style = "", **kwargs: Any) -> None:
        super().__init__(screen(text), style, **kwargs)

    def append(self, text: str | RichText, style: str | Style | None = None) -> Text:
        super().append(screen(text) if isinstance(text, str) else text, style)
        return self


MARKS_UNICODE = {Status.PASS: "✓", Status.WARN: "!", Status.FAIL: "✗", Status.SKIP: "-", Status.ERROR: "☠"}
MARKS_ASCII = {Status.PASS: "ok", Status.WARN: "warn", Status.FAIL: "FAIL", Status.SKIP: "skip", Status.ERROR: "ERROR"}
STYLES = {Status.PASS: "green", Status.WARN: "yellow", Status.FAIL: "bold red", Status.SKIP: "dim", Status.ERROR: "bold magenta"}
EVIDENCE_CHARS = 600


def make_console(stream: IO[str] | None = None, plain: bool | None = None) -> Console:
    stream = stream or sys.stdout
    plain = plain_output(stream) if plain is None else plain
    return Console(
        file=stream,
        no_color=plain,
        force_terminal=not plain and stream.isatty(),
        highlight=False,
        emoji=False,
        width=None if not plain else 200,
        soft_wrap=plain,
    )


class TerminalReporter:
    def __init__(self, console: Console, plain: bool, verbose: bool = False) -> None:
        self.console = console
        self.plain = plain
        self.verbose = verbose
        self.marks = MARKS_ASCII if plain else MARKS_UNICODE
        self.dot = " · "
        self.dash = " — "
        self.installer_asked = False
        self.unchecked: dict[str, None] = {}  # why fixes were not checked, said once in the footer

    def mark(self, status: Status) -> Text:
        label = f"[{self.marks[status]}]"
        return Text(f"{label:<8}" if self.plain else label, style=STYLES[status])

    def render(self, report: Mapping[str, Any], results: Sequence[CheckResult]) -> None:
        for line in self.lines(report, results):
            # Plain output is ASCII to the last byte and holds no workflow command, whatever the checks, plugins
            # and probes wrote; a terminal gets no control character of theirs.
            self.console.print(RichText(log_line(line.plain)) if self.plain else line)

    def lines(self, report: Mapping[str, Any], results: Sequence[CheckResult]) -> Iterator[Text]:
        target = report.get("target") or {}
        tool = report.get("tool") or {}
        header = Text(f"dflash-doctor {tool.get('version', '')}", style="bold")
        header.append(f"{self.dot}{target.get('python')}", style="")
        if target.get("python_version"):
            header.append(f" (Python {target.get('python_version')}, {target.get('env_kind')})")
        yield header
        dry_runs = report.get("dry_runs")
        self.installer_asked = isinstance(dry_runs, Mapping) and not dry_runs.get("error")
        if report.get("judged_from"):
            yield Text(f"judged again from {report['judged_from']}", style="dim")

        for text in gpu_lines(report):  # each GPU with its arch, memory and coverage, at a glance
            yield Text("  " + text)
        yield Text("")
        arrangement = arrange(results)
        for view in arrangement.checks:
            yield from self.check_lines(view)
        yield Text("")
        for why in self.unchecked:
            yield Text(f"fixes not checked with the installer: {why}", style="dim")
        yield self.summary_line(report, results)
        decisive = arrangement.decisive
        if decisive is not None:
            line = Text("start with: ", style="bold")
            line.append(f"{decisive.finding.title}  [{decisive.finding.id}]")
            line.append(f" ({decisive.check.title})", style="dim")
            following = [n for n in decisive.descendants() if is_problem(n.finding.status)]
            if following:
                line.append(f"; {len(following)} more follow from it")
            yield line
            yield Text(f"Explain a finding: dflash-doctor explain {decisive.finding.id}", style="dim")
        fingerprint = (report.get("fingerprint") or {}).get("id") or "not computed"
        partial = f"{self.dot}PARTIAL report (the doctor did not finish)" if report.get("partial") else ""
        yield Text(f"environment fingerprint: {fingerprint}{partial}")

    def _shown(self, status: Status) -> bool:
        return self.verbose or status not in (Status.PASS, Status.SKIP)

    def check_lines(self, view: CheckView) -> Iterator[Text]:
        result = view.result
        headline = view.headline
        line = self.mark(result.status)
        line.append(f" {result.title}", style="bold")
        if headline is not None:
            line.append(f"{self.dash}{line_title(headline.finding.title, result.title)}")
            if headline.finding.status is not Status.PASS or self.verbose:
                line.append(f"  [{headline.finding.id}]", style="dim")
        else:
            causes = view.causes_elsewhere
            count = sum(1 for f, _ in view.followers if is_problem(f.status))
            if count:
                line.append(f"{self.dash}{count} finding{'s follow' if count != 1 else ' follows'} from "
                            + ", ".join(f"{c.finding.id} ({c.check.title})" for c in causes) + ", shown there")
            elif view.followers:
                # Only skips (or passes) that follow from a problem elsewhere: the first says why.
                first, root = view.followers[0]
                line.append(f"{self.dash}{line_title(first.title, result.title)}")
                line.append(f"  [{first.id}, follows from {root.finding.id}]", style="dim")
        if self.verbose:
            line.append(f"  ({result.duration_s:.2f} s)", style="dim")
        yield line
        if result.status in (Status.PASS, Status.SKIP) and not self.verbose:
            return
        for node in view.roots:
            if not (self._shown(node.finding.status) or node.problem):
                continue
            if node is headline:
                yield from self.body_lines(node.finding)  # its title is already on the check's line
            else:
                yield from self.finding_lines(node.finding)
            yield from self.consequence_lines(node, 1)
        if self.verbose:
            for finding, root in view.followers:
                if not is_problem(finding.status) and not (headline is None and finding is view.followers[0][0]):
                    yield Text(f"    [{finding.id}] follows from {root.finding.id}, shown there", style="dim")
        if self.verbose and result.facts:
            yield Text("    facts: " + _compact(result.facts, 2 * EVIDENCE_CHARS), style="dim")

    def finding_lines(self, finding: Finding) -> Iterator[Text]:
        line = Text("    ")
        line.append_text(self.mark(finding.status))
        line.append(f" {finding.title}")
        line.append(f"  [{finding.id}]", style="dim")
        yield line
        yield from self.body_lines(finding)

    def consequence_lines(self, cause: Node, depth: int, shown: frozenset[str] = frozenset()) -> Iterator[Text]:
        """What follows from `cause`, nested under it: one line each (with -v their details too); a fix is
        shown only where it differs from the cause's."""
        fixes = shown | {r.command for r in cause.finding.remediation}
        indent = "        " + "  " * (depth - 1)  # part of the cause's body, one step deeper per link
        for node in cause.consequences:
            finding = node.finding
            if not (self._shown(finding.status) or node.problem):
                continue
            line = Text(indent)
            line.append_text(self.mark(finding.status))
            line.append(f" {finding.title}")
            line.append(f"  [{finding.id}]", style="dim")
            where = f" in {node.check.title}" if node.check is not cause.check else ""
            line.append(f"  follows from {cause.finding.id}{where}", style="dim")
            yield line
            pad = indent + "    "
            if self.verbose:
                for paragraph in detail_lines(finding.detail, 12):
                    yield Text(f"{pad}{paragraph}")
                if finding.evidence:
                    yield Text(f"{pad}evidence: " + _compact(finding.evidence, EVIDENCE_CHARS), style="dim")
            else:
                raised = raised_text(finding)
                if raised:
                    yield Text(f"{pad}raises: {raised}")
            extra = [r for r in finding.remediation if r.command not in fixes]
            if extra:
                yield Text(f"{pad}fix:", style="bold")
                for step in extra:
                    yield Text(f"{pad}  {shell_line(step.command, ascii_only=self.plain)}", style="cyan")
            yield from self.consequence_lines(node, depth + 1, fixes)

    def body_lines(self, finding: Finding) -> Iterator[Text]:
        if finding.detail and (finding.status is not Status.PASS or self.verbose):
            for paragraph in detail_lines(finding.detail, 12):
                yield Text(f"        {paragraph}", style="")
        raised = raised_text(finding)
        if raised and finding.status is not Status.PASS:
            yield Text(f"        raises: {raised}")
        if self.verbose and finding.evidence:
            yield Text("        evidence: " + _compact(finding.evidence, EVIDENCE_CHARS), style="dim")
        if finding.remediation:
            yield Text("        fix:", style="bold")
            for step in finding.remediation:
                yield Text(f"          {shell_line(step.command, ascii_only=self.plain)}", style="cyan")
                if step.why:
                    yield Text(f"            # {step.why}", style="dim")
                if step.verified and not self._said_once(step.verified):
                    yield Text(f"            verified: {step.verified}", style="dim")
                    for change in step.changes if self.verbose else ():
                        yield Text(f"              {change}", style="dim")
                if step.applied:
                    yield Text(f"            applied: {step.applied}", style="bold")

    def _said_once(self, verified: str) -> bool:
        """A fix nobody could check for a reason of the whole run (the installer was not asked, or it is no
        installer command) says so once, in the footer, rather than under every fix; a fix the installer was
        asked about and did not answer for says why under it."""

        kind, _, why = verified.partition(": ")
        if kind != "not-checked":
            return False
        if why == NOT_AN_INSTALLER_COMMAND:
            return True
        if self.installer_asked:
            return False
        self.unchecked[why] = None
        return True

    def summary_line(self, report: Mapping[str, Any], results: Sequence[CheckResult]) -> Text:
        summary = report.get("summary") or {}
        parts = [f"{summary.get(s.value, 0)} {s.value}" for s in (Status.PASS, Status.WARN, Status.FAIL, Status.ERROR, Status.SKIP)]
        line = Text("summary: ", style="bold")
        line.append(", ".join(parts))
        if "wall_s" in report:
            line.append(f"{self.dot}{report['wall_s']:.2f} s")
        line.append(f"{self.dot}exit {summary.get('exit_code', 0)}")
        return line


def _compact(data: Any, limit: int) -> str:
    text = json.dumps(data, default=str, sort_keys=True)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"
