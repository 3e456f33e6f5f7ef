"""The terminal view: one line per check, details and remediation under what is not passing.

Colour and Unicode marks on a TTY; plain ASCII when stdout is not a terminal or NO_COLOR is set, so CI
logs stay readable. With `verbose`, passing findings, evidence and facts are shown too.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import IO, Any

from rich.console import Console
from rich.text import Text

from dflash_doctor.model import CheckResult, Finding, Status

MARKS_UNICODE = {Status.PASS: "✓", Status.WARN: "!", Status.FAIL: "✗", Status.SKIP: "-", Status.ERROR: "☠"}
MARKS_ASCII = {Status.PASS: "ok", Status.WARN: "warn", Status.FAIL: "FAIL", Status.SKIP: "skip", Status.ERROR: "ERROR"}
STYLES = {Status.PASS: "green", Status.WARN: "yellow", Status.FAIL: "bold red", Status.SKIP: "dim", Status.ERROR: "bold magenta"}
EVIDENCE_CHARS = 600


def plain_output(stream: IO[str]) -> bool:
    return bool(os.environ.get("NO_COLOR")) or not stream.isatty()


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

    def mark(self, status: Status) -> Text:
        label = f"[{self.marks[status]}]"
        return Text(f"{label:<8}" if self.plain else label, style=STYLES[status])

    def render(self, report: Mapping[str, Any], results: Sequence[CheckResult]) -> None:
        for line in self.lines(report, results):
            self.console.print(line)

    def lines(self, report: Mapping[str, Any], results: Sequence[CheckResult]) -> Iterator[Text]:
        target = report.get("target") or {}
        tool = report.get("tool") or {}
        header = Text(f"dflash-doctor {tool.get('version', '')}", style="bold")
        header.append(f" · {target.get('python')}", style="")
        if target.get("python_version"):
            header.append(f" (Python {target.get('python_version')}, {target.get('env_kind')})")
        yield header
        if report.get("judged_from"):
            yield Text(f"judged again from {report['judged_from']}", style="dim")
        from dflash_doctor.reporters.gpu_summary import gpu_lines

        for text in gpu_lines(report):  # each GPU with its arch, memory and coverage, at a glance
            yield Text("  " + text)
        yield Text("")
        for result in results:
            yield from self.check_lines(result)
        yield Text("")
        yield self.summary_line(report, results)
        failing = [f for r in results for f in r.findings if f.status in (Status.FAIL, Status.ERROR, Status.WARN)]
        if failing:
            yield Text(f"Explain a finding: dflash-doctor explain {failing[0].id}", style="dim")

    def check_lines(self, result: CheckResult) -> Iterator[Text]:
        headline = _headline(result)
        line = self.mark(result.status)
        line.append(f" {result.title}", style="bold")
        if headline:
            line.append(f" — {headline.title}")
            if headline.status is not Status.PASS or self.verbose:
                line.append(f"  [{headline.id}]", style="dim")
        if self.verbose:
            line.append(f"  ({result.duration_s:.2f} s)", style="dim")
        yield line
        if result.status in (Status.PASS, Status.SKIP) and not self.verbose:
            return
        for finding in result.findings:
            if finding.status in (Status.PASS, Status.SKIP) and not self.verbose:
                continue
            if finding is headline:
                yield from self.body_lines(finding)  # its title is already on the check's line
            else:
                yield from self.finding_lines(finding)
        if self.verbose and result.facts:
            yield Text("    facts: " + _compact(result.facts, 2 * EVIDENCE_CHARS), style="dim")

    def finding_lines(self, finding: Finding) -> Iterator[Text]:
        line = Text("    ")
        line.append_text(self.mark(finding.status))
        line.append(f" {finding.title}")
        line.append(f"  [{finding.id}]", style="dim")
        yield line
        yield from self.body_lines(finding)

    def body_lines(self, finding: Finding) -> Iterator[Text]:
        if finding.detail and (finding.status is not Status.PASS or self.verbose):
            for paragraph in finding.detail.strip().splitlines()[:12]:
                yield Text(f"        {paragraph}", style="")
        if self.verbose and finding.evidence:
            yield Text("        evidence: " + _compact(finding.evidence, EVIDENCE_CHARS), style="dim")
        if finding.remediation:
            yield Text("        fix:", style="bold")
            for step in finding.remediation:
                yield Text(f"          $ {step.command}", style="cyan")
                if step.why:
                    yield Text(f"            # {step.why}", style="dim")

    def summary_line(self, report: Mapping[str, Any], results: Sequence[CheckResult]) -> Text:
        summary = report.get("summary") or {}
        parts = [f"{summary.get(s.value, 0)} {s.value}" for s in (Status.PASS, Status.WARN, Status.FAIL, Status.ERROR, Status.SKIP)]
        line = Text("summary: ", style="bold")
        line.append(", ".join(parts))
        if "wall_s" in report:
            line.append(f" · {report['wall_s']:.2f} s")
        line.append(f" · exit {summary.get('exit_code', 0)}")
        return line


def _headline(result: CheckResult) -> Finding | None:
    if not result.findings:
        return None
    return max(result.findings, key=lambda f: f.status.rank)


def _compact(data: Any, limit: int) -> str:
    text = json.dumps(data, default=str, sort_keys=True)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"
