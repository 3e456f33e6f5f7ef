"""A Markdown report to paste into a GitHub issue.

A verdict line with the environment fingerprint (so that tickets from one environment can be grouped),
a summary table (one row per check), the findings that did not pass with their remediation commands, and
the facts each check judged in collapsible `<details>` blocks. The report is redacted before it gets
here. GitHub caps an issue body at 65,536 characters, so the facts are cut to fit, with a note to attach
the JSON report (`--json`) for the rest.

Every value from the report goes through `text.markdown` for its place (inline text, a table cell, a code span,
a fenced block) and every fix through `text.shell_line`: nothing in a title, an exception or a path adds a
heading, a link, an image, HTML or a table cell, and a fix is one line that runs only what it shows.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

from dflash_doctor.documents import writer
from dflash_doctor.model import CheckResult
from dflash_doctor.render.grouping import CheckView, Node, arrange, line_title, raised_text
from dflash_doctor.render.text import detail_lines, markdown, shell_line

__all__ = ["render", "summary", "write"]

MARKS = {"pass": "✅ pass", "warn": "⚠️ warn", "fail": "❌ fail", "error": "🛑 error", "skip": "➖ skip"}
BODY_LIMIT = 60_000
FACTS_LIMIT_PER_CHECK = 12_000


def _cell(text: Any) -> str:
    return markdown(str(text), "cell")


def _prose(text: Any) -> str:
    return markdown(str(text))


def _code(text: Any) -> str:
    return markdown(str(text), "code")


def _fence(body: str, lang: str = "") -> str:
    return markdown(body, "block", lang)


def _verdict(report: Mapping[str, Any]) -> str:
    summary = report.get("summary") or {}
    if summary.get("error"):
        word = "ERROR"
    elif summary.get("fail"):
        word = "FAIL"
    elif summary.get("warn"):
        word = "WARN"
    else:
        word = "PASS"
    return f"{word} (exit {summary.get('exit_code', 0)})"


def _arranged(report: Mapping[str, Any]) -> list[tuple[Mapping[str, Any], CheckView]]:
    """The checks in the order to show them (decisive first), each with its grouped findings."""
    checks = [c for c in report.get("checks") or () if isinstance(c, Mapping)]
    arrangement = arrange([CheckResult.from_dict(c) for c in checks])
    return [(checks[view.index], view) for view in arrangement.checks]


def summary(report: Mapping[str, Any]) -> str:
    """The verdict and the one-row-per-check table (also what goes into a GitHub job summary)."""
    tool = report.get("tool") or {}
    target = report.get("target") or {}
    fingerprint = (report.get("fingerprint") or {}).get("id", "?")
    lines = [f"### dflash-doctor: {_verdict(report)}", ""]
    meta = [f"dflash-doctor {_prose(tool.get('version', ''))}",
            f"Python {_prose(target.get('python_version'))} ({_prose(target.get('env_kind'))})",
            _code(target.get("platform")),
            f"environment fingerprint {_code(fingerprint)}"]
    lines.append(" · ".join(meta))
    if report.get("partial"):
        lines += ["", "> **Partial report**: the doctor did not finish; see the `doctor` row."]
    lines += ["", "| check | layer | status | finding |", "|---|---|---|---|"]
    for check, view in _arranged(report):
        head = view.headline
        if head is not None:
            title = line_title(head.finding.title, str(check.get("title", check.get("id"))))
            finding = f"{_cell(title)} {_cell('`' + head.finding.id + '`')}"
        else:
            finding = "follows from " + ", ".join(f"{_cell('`' + c.finding.id + '`')} ({_cell(c.check.title)})"
                                                  for c in view.causes_elsewhere)
        lines.append(f"| {_cell(check.get('title', check.get('id')))} | {_cell(check.get('layer'))} | "
                     f"{MARKS.get(str(check.get('status')), _cell(check.get('status')))} | {finding} |")
    counts = report.get("summary") or {}
    lines += ["", ", ".join(f"{counts.get(s, 0)} {s}" for s in ("pass", "warn", "fail", "error", "skip"))]
    return "\n".join(lines)


def _consequences(cause: Node, depth: int, fixes: frozenset[str]) -> list[str]:
    lines: list[str] = []
    fixes = fixes | {r.command for r in cause.finding.remediation}
    for node in cause.consequences:
        if not node.problem:
            continue
        found = node.finding
        where = f" in **{_prose(node.check.title)}**" if node.check is not cause.check else ""
        indent = "  " * depth
        lines.append(f"{indent}- {MARKS.get(found.status.value, '')} {_prose(found.title)} {_code(found.id)}{where}")
        raised = raised_text(found)
        if raised:
            lines.append(f"{indent}  raises: {_code(raised)}")
        for step in found.remediation:
            if step.command not in fixes:
                lines.append(f"{indent}  fix: {_code(shell_line(step.command, prompt=''))}")
        lines += _consequences(node, depth + 1, fixes)
    return lines


def _findings_section(report: Mapping[str, Any]) -> list[str]:
    lines: list[str] = []
    for check, view in _arranged(report):
        for node in view.roots:
            finding = node.finding
            if not node.problem:
                continue
            lines += ["", f"#### {MARKS.get(finding.status.value, '')} {_prose(finding.title)}", "",
                      (f"{_code(finding.id)} in **{_prose(check.get('title', check.get('id')))}** "
                       f"(explain: {_code('dflash-doctor explain ' + finding.id)})")]
            if finding.detail:
                lines += ["", _fence("\n".join(detail_lines(finding.detail)))]
            raised = raised_text(finding)
            if raised:
                lines += ["", f"Raises: {_code(raised)}"]
            if finding.remediation:
                lines += ["", "**Fix:**", ""]
                for step in finding.remediation:
                    lines.append(_fence(shell_line(step.command, prompt=""), "console"))
                    if step.why:
                        lines.append(f"_{_prose(step.why)}_")
                    if step.verified:
                        lines.append(f"Verified: {_prose(step.verified)}")
                    if step.applied:
                        lines.append(f"**Applied:** {_prose(step.applied)}")
                    lines.append("")
            following = _consequences(node, 0, frozenset())
            if following:
                lines += ["", f"**Follows from {_code(finding.id)}:**", "", *following]
    intro = "The decisive findings first; what follows from each is listed under it."
    return ["", "### Findings that did not pass", "", intro, *(lines or ["", "None."])]


def _facts_section(report: Mapping[str, Any], budget: int) -> list[str]:
    lines = ["", "### Facts", ""]
    shown: set[str] = set()
    omitted: list[str] = []
    for check in report.get("checks") or ():
        for name, facts in (check.get("facts") or {}).items():
            if name in shown:
                continue  # checks share sections; print each once
            shown.add(name)
            if budget < 1_000:
                omitted.append(name)
                continue
            text = json.dumps(facts, indent=1, sort_keys=True, default=str)
            limit = min(FACTS_LIMIT_PER_CHECK, budget - 500)
            note = ""
            if len(text) > limit:
                note = f"\n\n_cut at {limit:,} of {len(text):,} characters: attach the JSON report (`--json`)._"
                text = text[:limit] + "\n..."
            block = ["<details>", f"<summary><code>{markdown(str(name), 'html')}</code> (judged by {markdown(str(check.get('id')), 'html')})</summary>",
                     "", _fence(text, "json") + note, "", "</details>"]
            budget -= sum(len(b) + 1 for b in block)
            lines += block
    if omitted:
        lines += ["", (f"_Not shown, to stay under GitHub's size limit: {', '.join(omitted)}. "
                       "Attach the JSON report (`--json`)._")]
    return lines


def render(report: Mapping[str, Any]) -> str:
    head = [summary(report)]
    head += _findings_section(report)
    text = "\n".join(head)
    options = report.get("options") or {}
    tail = ["", "<details><summary>how this report was made</summary>", "",
            _fence(json.dumps({"options": options, "redaction": report.get("redaction"),
                               "fingerprint": report.get("fingerprint")}, indent=1, default=str), "json"),
            "", "</details>"]
    facts = _facts_section(report, BODY_LIMIT - len(text) - sum(len(t) for t in tail) - 200)
    return "\n".join([text, *facts, *tail]) + "\n"


def write(report: Mapping[str, Any], path: str) -> None:
    text = render(report)
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        writer.replace(path, text, writer.MARKDOWN)
