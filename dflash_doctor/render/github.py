"""GitHub Actions workflow commands: one annotation per finding that did not pass.

Format (docs.github.com, "Workflow commands for GitHub Actions"; the runner's parser is
`ActionCommand.TryParseV2` in actions/runner): `::error title=TITLE::MESSAGE`, where the message escapes
`%`, CR and LF as `%25`, `%0D`, `%0A`, and a property value escapes `:` and `,` too (`%3A`, `%2C`).
fail and error become `::error`, warn `::warning` (`::error` under --strict, where it fails the job),
skip `::notice`. A summary line follows; when `$GITHUB_STEP_SUMMARY` names a file, the Markdown summary
table is appended to it, so the job's summary page shows the verdict.

`command` is this medium's one way out: each line of a message and each property is first made visible
(`text.visible`: no control character of the inputs reaches the log), then escaped; a fix is one line
(`text.shell_line`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import IO, Any

from dflash_doctor.documents import writer
from dflash_doctor.render import markdown
from dflash_doctor.render.text import detail_lines, shell_line, visible

__all__ = ["annotation_items", "escape_data", "escape_property", "render", "render_lines"]

LEVELS = {"fail": "error", "error": "error", "warn": "warning", "skip": "notice"}
MESSAGE_LINES = 12
_BREAKS = "\r\n"


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(level: str, message: str, **properties: str) -> str:
    """One workflow command. Line breaks stay what they are (escaped, as the runner reads them); every other
    control character, in the message or a property, is shown as its escape, never acted on."""
    props = ",".join(f"{key}={escape_property(visible(value, keep=_BREAKS))}" for key, value in properties.items()
                     if value)
    data = visible(message, keep=_BREAKS)
    return f"::{level}{' ' + props if props else ''}::{escape_data(data)}"


def _message(finding: Mapping[str, Any]) -> str:
    """The annotation's lines, each field one line of its own (a newline in a title is shown, not a new line)."""
    lines = [str(finding.get("title", ""))]
    if finding.get("cause"):
        lines.append(f"follows from {finding.get('cause')} (fix that first)")
    detail = str(finding.get("detail") or "").strip()
    if detail:
        lines += detail_lines(detail, MESSAGE_LINES)
    for step in finding.get("remediation") or ():
        lines.append(f"fix: {shell_line(str(step.get('command')))}")
        if step.get("verified"):
            lines.append(f"verified: {step.get('verified')}")
    lines.append(f"(dflash-doctor explain {finding.get('id')})")
    return "\n".join(visible(line) for line in lines)


def annotation_items(report: Mapping[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(level, title, message) for every finding that did not pass, in report order."""
    strict = bool((report.get("options") or {}).get("strict"))
    for check in report.get("checks") or ():
        for finding in check.get("findings") or ():
            level = LEVELS.get(str(finding.get("status")))
            if level is None:
                continue
            if strict and level == "warning":
                level = "error"
            title = f"dflash-doctor: {check.get('title', check.get('id'))} [{finding.get('id')}]"
            yield level, title, _message(finding)


def render_lines(report: Mapping[str, Any]) -> Iterator[str]:
    for level, title, message in annotation_items(report):
        yield command(level, message, title=title)
    summary = report.get("summary") or {}
    counts = ", ".join(f"{summary.get(s, 0)} {s}" for s in ("pass", "warn", "fail", "error", "skip"))
    fingerprint = (report.get("fingerprint") or {}).get("id", "")
    partial = " · PARTIAL report" if report.get("partial") else ""
    yield visible(f"dflash-doctor: {counts} · exit {summary.get('exit_code', 0)} · fingerprint {fingerprint}{partial}")


def render(report: Mapping[str, Any], stream: IO[str]) -> None:
    for line in render_lines(report):
        stream.write(line + "\n")
    stream.flush()
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:
        try:
            writer.append(step_summary, markdown.summary(report) + "\n")
        except OSError:
            pass  # the annotations are written; a missing summary file must not fail the gate
