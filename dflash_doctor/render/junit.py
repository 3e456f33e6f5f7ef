"""JUnit XML for CI test reporters: one testcase per check.

The document validates against both schemas the common readers follow: the Jenkins xUnit plugin's
`junit-10.xsd` and Windy Road's `JUnit.xsd` (Apache Ant's format, which GitLab and the GitHub Actions
test-report actions read). That fixes the shape: a bare `<testsuites>` root; one `<testsuite>` with
`id`, `package`, `hostname` and a timestamp without zone; `<properties>` first, `<system-out>` and
`<system-err>` last; at most one `<failure>`, `<error>` or `<skipped>` per testcase, carrying the
finding titles in `message` and the details and remediation commands in its body.

A check that failed becomes `<failure>`, one the doctor could not complete `<error>`, a skipped one
`<skipped>`. A warning fails the testcase only under --strict (as it fails the exit code); otherwise it
passes and is listed in the suite's system-out.

Every text leaves through `_clean`: control characters, bidi and invisible format characters and lone
surrogates shown as their escapes (`text.visible`; a body's own line breaks kept), a fix as one line
(`text.shell_line`).
"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from typing import Any

from dflash_doctor.documents import writer
from dflash_doctor.render.text import detail_lines, shell_line, visible

__all__ = ["render", "write"]

# XML 1.0 allows neither most C0 controls nor lone surrogates (`visible` shows those) nor these.
_NOT_XML = re.compile("[\ufffe\uffff]")
_ELEMENT = {"fail": "failure", "error": "error", "skip": "skipped"}


def _clean(text: Any, lines: bool = False) -> str:
    """`text` for an attribute (one line), or with `lines` for an element's body (its line breaks kept)."""

    return _NOT_XML.sub("\ufffd", visible(str(text), keep="\n" if lines else ""))


def _time(seconds: Any) -> str:
    try:
        return f"{max(float(seconds), 0.0):.3f}"
    except (TypeError, ValueError):
        return "0.000"


def _finding_block(finding: Mapping[str, Any]) -> str:
    lines = [f"[{finding.get('status')}] {finding.get('title')}  ({finding.get('id')})"]
    if finding.get("cause"):
        lines.append(f"    follows from: {finding.get('cause')} (fix that first)")
    if finding.get("detail"):
        lines += ["    " + line for line in detail_lines(str(finding["detail"]))]
    for step in finding.get("remediation") or ():
        lines.append(f"    fix: {shell_line(str(step.get('command')))}")
        if step.get("why"):
            lines.append(f"         # {step.get('why')}")
        if step.get("verified"):
            lines.append(f"         verified: {step.get('verified')}")
        if step.get("applied"):
            lines.append(f"         applied: {step.get('applied')}")
    return "\n".join(visible(line) for line in lines)  # each field one line: a newline in a title is shown


def _outcome(check: Mapping[str, Any], strict: bool) -> str | None:
    status = check.get("status")
    if status == "warn":
        return "failure" if strict else None
    return _ELEMENT.get(str(status))


def render(report: Mapping[str, Any]) -> bytes:
    checks: Sequence[Mapping[str, Any]] = report.get("checks") or []
    options = report.get("options") or {}
    strict = bool(options.get("strict"))
    outcomes = [_outcome(c, strict) for c in checks]
    fingerprint = (report.get("fingerprint") or {}).get("id", "")
    root = ET.Element("testsuites")
    suite = ET.SubElement(root, "testsuite", {
        "name": "dflash-doctor",
        "package": "dflash-doctor",
        "id": "0",
        "hostname": _clean((report.get("host") or {}).get("name") or "localhost"),
        "timestamp": str(report.get("created", "1970-01-01T00:00:00Z")).rstrip("Z")[:19],
        "tests": str(len(checks)),
        "failures": str(outcomes.count("failure")),
        "errors": str(outcomes.count("error")),
        "skipped": str(outcomes.count("skipped")),
        "time": _time(report.get("wall_s", sum(float(c.get("duration_s") or 0) for c in checks))),
    })
    properties = ET.SubElement(suite, "properties")
    target = report.get("target") or {}
    tool = report.get("tool") or {}
    for name, value in (("dflash-doctor.version", tool.get("version")), ("fingerprint", fingerprint),
                        ("python", target.get("python")), ("python_version", target.get("python_version")),
                        ("env_kind", target.get("env_kind")), ("exit_code", (report.get("summary") or {}).get("exit_code")),
                        ("partial", bool(report.get("partial")))):
        if value is not None:
            text = str(value).lower() if isinstance(value, bool) else value
            ET.SubElement(properties, "property", {"name": name, "value": _clean(text)})
    warnings: list[str] = []
    for check, outcome in zip(checks, outcomes):
        case = ET.SubElement(suite, "testcase", {
            "classname": f"dflash_doctor.{check.get('layer') or 'doctor'}",
            "name": _clean(f"{check.get('id')}: {check.get('title', check.get('id'))}"),
            "time": _time(check.get("duration_s")),
        })
        findings = check.get("findings") or []
        if outcome is None:
            warnings += [_clean(f"{check.get('id')}: ") + _finding_block(f) for f in findings if f.get("status") == "warn"]
            continue
        wanted = {"failure": ("fail", "error", "warn") if strict else ("fail", "error"),
                  "error": ("error", "fail", "warn"), "skipped": ("skip",)}[outcome]
        shown = [f for f in findings if f.get("status") in wanted] or list(findings)
        attrs = {"message": _clean("; ".join(str(f.get("title")) for f in shown))}
        if outcome != "skipped":
            attrs["type"] = _clean(",".join(dict.fromkeys(str(f.get("id")) for f in shown)))
        element = ET.SubElement(case, outcome, attrs)
        element.text = _clean("\n\n".join(_finding_block(f) for f in shown), lines=True)
    out = [f"dflash-doctor {tool.get('version', '')}: exit {(report.get('summary') or {}).get('exit_code')}",
           f"environment fingerprint: {fingerprint}"]
    if report.get("partial"):
        out.append("PARTIAL REPORT: the doctor did not finish (see the 'doctor' testcase)")
    if warnings:
        out += ["", "warnings (not failing without --strict):", *warnings]
    ET.SubElement(suite, "system-out").text = _clean("\n".join(out), lines=True)
    ET.SubElement(suite, "system-err").text = ""
    ET.indent(root)
    data: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return data + b"\n"


def write(report: Mapping[str, Any], path: str) -> None:
    data = render(report)
    if path == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        writer.replace(path, data, writer.XML)
