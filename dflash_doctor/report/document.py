"""The JSON report (schema dflash-doctor/report/v1): built from results, and read back to judge again.

Every report carries the environment fingerprint (`fingerprint.of_sections`) and, when the doctor could
not finish, `"partial": true`. `finish` gives the report as it may leave the machine: redacted
(`dflash_doctor.report.redact`), and, where the facts break the report, the report of what is certain.
"""

from __future__ import annotations

import platform
import socket
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from dflash_doctor import __version__
from dflash_doctor.codes.aliases import upgrade_findings
from dflash_doctor.documents.jsondoc import load_document, validate_document
from dflash_doctor.facts.fingerprint import of_sections
from dflash_doctor.facts.python.environment_shapes import Target
from dflash_doctor.model import CheckResult, exit_code, failure_result, summarize
from dflash_doctor.report.redact import redact_report
from dflash_doctor.shape import section_of_json

__all__ = [
    "SCHEMA",
    "ReportError",
    "build",
    "check_ids",
    "exit_code_of",
    "finish",
    "host_info",
    "host_of",
    "load",
    "options_of",
    "sections_of",
    "target_python",
    "validate",
]

SCHEMA = "dflash-doctor/report/v1"


class ReportError(Exception):
    """A saved report that cannot be read; the message names the file."""


def _target_summary(sections: Mapping[str, object], python: str) -> dict[str, Any]:
    target = Target.read(sections.get("target"))
    if target is None:
        return {"python": python, "python_version": None, "platform": None, "env_kind": None}
    return {
        "python": python,
        "executable": target.executable or None,
        "python_version": target.python_version or None,
        "platform": target.platform or None,
        "env_kind": target.env_kind or None,
    }


def build(
    results: Sequence[CheckResult],
    sections: Mapping[str, object],
    python: str,
    strict: bool = False,
    extra: Mapping[str, Any] | None = None,
    host: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    target = _target_summary(sections, python)
    try:
        fingerprint: dict[str, Any] | None = of_sections(sections)
    except Exception:  # noqa: BLE001 - facts too broken to hash: the report goes out without a fingerprint
        fingerprint = None
    summary: dict[str, Any] = dict(summarize(results))
    summary["exit_code"] = exit_code(results, strict)
    report: dict[str, Any] = {
        "schema": SCHEMA,
        "tool": {"name": "dflash-doctor", "version": __version__, "python": platform.python_version()},
        "created": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "target": target,
        "summary": summary,
        "checks": _checks_with_facts_once(results),
    }
    if fingerprint is not None:
        report["fingerprint"] = fingerprint
    if host is not None:
        report["host"] = dict(host)
    report.update(extra or {})
    return report


def finish(
    results: Sequence[CheckResult],
    sections: Mapping[str, object],
    python: str,
    strict: bool,
    extra: dict[str, Any],
    host: Mapping[str, Any] | None,
    keep_hosts: bool = False,
    secrets: Sequence[str] = (),
) -> tuple[dict[str, Any], list[CheckResult] | None]:
    """The report as it may leave the machine (redacted; `secrets` masked by value), and None; where the facts
    break the report, the report of what is certain (the results without their facts, and the doctor's failure,
    marked partial) and those results."""
    try:
        return redact_report(build(results, sections, python, strict, extra, host), keep_hosts, secrets=secrets), None
    except Exception as exc:  # noqa: BLE001 - the facts broke the report: write what is certain, and why
        kept = [replace(r, facts={}) for r in results if r.id != "doctor"]
        kept.append(failure_result(exc, "building the report"))
        extra["partial"] = True
        return redact_report(build(kept, {}, python, strict, extra, host), keep_hosts, secrets=secrets), kept


def host_info() -> dict[str, Any]:
    """Which machine a report comes from (redaction turns the name into a stable pseudonym)."""
    try:
        name = socket.gethostname() or "localhost"
    except OSError:
        name = "localhost"
    return {"name": name}


def load(path: str) -> dict[str, Any]:
    """A saved report, checked against the shipped schema (report-v1.json): the accessors below rely on it.
    Its findings' v1 ids are renamed to the current ones (`codes.aliases`)."""
    report = load_document(path, SCHEMA, "report", ReportError)
    upgrade_findings(report)
    return report


def validate(data: Any, source: str) -> dict[str, Any]:
    """A report received as data (from another node), checked and renamed as `load` does a file."""
    report = validate_document(data, source, SCHEMA, "report", ReportError)
    upgrade_findings(report)
    return report


# Typed reads of a loaded report: the schema guarantees each shape they return.


def check_ids(report: Mapping[str, Any]) -> set[str]:
    return {str(check["id"]) for check in report["checks"]}


def target_python(report: Mapping[str, Any]) -> str:
    return str(report["target"]["python"])


def options_of(report: Mapping[str, Any]) -> dict[str, Any]:
    """The run options the report was made with (no_gpu, target_archs, strict, profile, baseline, ...)."""
    options = report.get("options")
    return dict(options) if isinstance(options, Mapping) else {}


def host_of(report: Mapping[str, Any]) -> dict[str, Any] | None:
    host = report.get("host")
    return dict(host) if isinstance(host, Mapping) else None


def exit_code_of(report: Mapping[str, Any]) -> int:
    return int(report["summary"]["exit_code"])


def _checks_with_facts_once(results: Sequence[CheckResult]) -> list[dict[str, Any]]:
    """Each fact section is saved once, under the first check that judges it.

    A dozen checks read the distributions of a 300-distribution environment; repeating it under each made
    a bug-ticket report of megabytes. `sections_of` merges the sections back across the checks."""
    saved: set[str] = set()
    checks = []
    for result in results:
        # Only the sections not saved yet are written out (a section's JSON form is made once).
        data = replace(result, facts={n: v for n, v in dict(result.facts).items() if n not in saved}).to_dict()
        saved.update(data["facts"])
        checks.append(data)
    return checks


def sections_of(report: Mapping[str, Any]) -> dict[str, object]:
    """Every fact section the report saved, merged across its checks (a failed one as its `SectionFailure`)."""
    sections: dict[str, object] = {}
    for check in report.get("checks", []):
        facts = check.get("facts") if isinstance(check, Mapping) else None
        if isinstance(facts, Mapping):
            sections.update({name: section_of_json(name, value) for name, value in facts.items()})
    return sections
