"""Merging per-host reports into one fleet view (schema dflash-doctor/fleet/v1).

Reports may come from anywhere (ssh, Slurm, a Kubernetes DaemonSet, `dflash-doctor fleet --ray`). Each
is reduced to a small `HostSummary` as soon as it is read, so merging a thousand hosts holds a thousand
summaries, never a thousand reports. `merge` is a pure function of the summaries: a hosts x checks table,
the findings whose status is not the same on every host, and the drift of the environment (serving stack
versions, Python, driver, GPUs, the doctor's own version). Where hosts disagree, the most common value is
the fleet's and the other hosts are singled out as having drifted; a tie goes to the value of the first
host given (the head node, in a Ray fleet).
"""

from __future__ import annotations

import gc
import json
import os
import sys
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from dflash_doctor import __version__
from dflash_doctor.documents import writer
from dflash_doctor.facts import envsummary
from dflash_doctor.report.document import ReportError, load, sections_of

__all__ = ["SCHEMA", "HostSummary", "merge", "summarize", "summarize_file", "summarize_files", "unreachable"]

SCHEMA = "dflash-doctor/fleet/v1"
ABSENT = "absent"
MAX_JOBS = 8
PARALLEL_FROM = 64  # below this, starting processes costs more than it saves
NO_REPORT = "no report"


@dataclass
class HostSummary:
    label: str
    source: str
    fingerprint: str | None = None
    tool_version: str | None = None
    exit_code: int | None = None
    partial: bool = False
    checks: dict[str, str] = field(default_factory=dict)
    check_titles: dict[str, str] = field(default_factory=dict)
    findings: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    environment: dict[str, str] = field(default_factory=dict)
    """What may drift, as strings: "stack:torch" -> "2.9.0" / "absent", "python", "driver", "gpus",
    "dflash-doctor"."""
    info: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


def summarize(report: Mapping[str, Any], source: str, label: str | None = None) -> HostSummary:
    found = report.get("host")
    host: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    summary = report.get("summary") or {}
    sections = sections_of(report)
    out = HostSummary(
        label=label or str(host.get("label") or host.get("name") or Path(source).stem),
        source=source,
        fingerprint=(report.get("fingerprint") or {}).get("id"),
        tool_version=(report.get("tool") or {}).get("version"),
        exit_code=summary.get("exit_code"),
        partial=bool(report.get("partial")),
        info={k: v for k, v in host.items() if k not in ("name", "label")},
    )
    for check in report.get("checks") or ():
        if not isinstance(check, Mapping):
            continue
        cid = str(check.get("id"))
        out.checks[cid] = str(check.get("status"))
        out.check_titles[cid] = str(check.get("title", cid))
        for finding in check.get("findings") or ():
            if isinstance(finding, Mapping):
                out.findings[(cid, str(finding.get("id")))] = (str(finding.get("status")), str(finding.get("title")))
    stack = envsummary.stack_versions(sections)
    for name, version in (stack or {}).items():
        out.environment[f"stack:{name}"] = version or ABSENT
    python = envsummary.python(sections)
    if python:
        out.environment["python"] = f"{python.get('version')} {python.get('machine')}"
    drv = envsummary.driver(sections)
    if drv:
        out.environment["driver"] = str(drv.get("version"))
    gpus = envsummary.gpus(sections)
    if gpus is not None:
        out.environment["gpus"] = ", ".join(sorted(str(g["cc"]) for g in gpus)) or "none"
    if out.tool_version:
        out.environment["dflash-doctor"] = out.tool_version
    return out


def unreachable(label: str, source: str, why: str, info: Mapping[str, Any] | None = None) -> HostSummary:
    return HostSummary(label=label, source=source, error=why, info=dict(info or {}))


def summarize_file(path: str) -> HostSummary:
    """One report file as a summary; an unreadable one becomes a host with an error naming the file."""
    enabled = gc.isenabled()
    gc.disable()  # a parsed report is a tree: reference counting frees it, the cycle collector only costs time
    try:
        try:
            report = load(path)
        except ReportError as exc:
            return unreachable(Path(path).stem, path, str(exc))
        return summarize(report, path)
    finally:
        if enabled:
            gc.enable()


def summarize_files(paths: Iterable[str], jobs: int | None = None) -> Iterator[HostSummary]:
    """Summaries in the order given. Many files are parsed on several processes (JSON parsing is the cost);
    each process holds one report at a time."""
    paths = list(paths)
    jobs = jobs if jobs is not None else min(os.cpu_count() or 1, MAX_JOBS)
    if jobs <= 1 or len(paths) < PARALLEL_FROM:
        yield from map(summarize_file, paths)
        return
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        yield from pool.map(summarize_file, paths, chunksize=max(1, min(32, len(paths) // (jobs * 4))))


def _unique_labels(hosts: Sequence[HostSummary]) -> None:
    counts = Counter(h.label for h in hosts)
    for host in hosts:
        if counts[host.label] > 1:
            node = host.info.get("ray", {}).get("node_id") if isinstance(host.info.get("ray"), Mapping) else None
            host.label = f"{host.label}/{str(node)[:8]}" if node else f"{host.label} [{Path(host.source).name}]"
    seen: Counter[str] = Counter()
    for host in hosts:  # still equal (same file name in two directories): number them
        seen[host.label] += 1
        if seen[host.label] > 1:
            host.label = f"{host.label} #{seen[host.label]}"


def _majority(values: Mapping[str, str], order: Sequence[str]) -> str:
    counts = Counter(values.values())
    best = max(counts.values())
    return next(values[h] for h in order if h in values and counts[values[h]] == best)


def _groups(values: Mapping[str, str], majority: str) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for host, value in values.items():
        grouped.setdefault(value, []).append(host)
    return dict(sorted(grouped.items(), key=lambda kv: (kv[0] != majority, -len(kv[1]), kv[0])))


def merge(hosts: Sequence[HostSummary], allow_drift: bool = False) -> dict[str, Any]:
    """The fleet view: JSON-able, schema dflash-doctor/fleet/v1."""
    hosts = list(hosts)
    _unique_labels(hosts)
    order = [h.label for h in hosts]
    reported = [h for h in hosts if h.error is None]
    check_ids: list[str] = []
    titles: dict[str, str] = {}
    for host in reported:
        for cid in host.checks:
            if cid not in titles:
                check_ids.append(cid)
                titles[cid] = host.check_titles.get(cid, cid)

    drift: list[dict[str, Any]] = []
    env_keys = sorted({k for h in reported for k in h.environment}, key=lambda k: (not k.startswith("stack:"), k))
    for key in env_keys:
        values = {h.label: h.environment.get(key, "not collected") for h in reported}
        if len(set(values.values())) <= 1:
            continue
        majority = _majority(values, order)
        grouped = _groups(values, majority)
        drift.append({
            "kind": "stack" if key.startswith("stack:") else "environment",
            "what": key.split(":", 1)[1] if key.startswith("stack:") else key,
            "majority": majority,
            "values": grouped,
            "outliers": [h for v, hs in grouped.items() if v != majority for h in hs],
        })

    differing: list[dict[str, Any]] = []
    keys: list[tuple[str, str]] = []
    seen_keys: set[tuple[str, str]] = set()
    for host in reported:
        for finding_key in host.findings:
            if finding_key not in seen_keys:
                seen_keys.add(finding_key)
                keys.append(finding_key)
    for cid, fid in keys:
        statuses = {h.label: h.findings.get((cid, fid), (ABSENT, ""))[0] for h in reported if cid in h.checks}
        # A passing finding that is absent elsewhere is the other side of a finding that did not pass
        # (namespaces.absent here, namespaces.v4-without-v2 there): the latter tells the story.
        if len(set(statuses.values())) <= 1 or set(statuses.values()) <= {"pass", ABSENT}:
            continue
        majority = _majority(statuses, order)
        grouped = _groups(statuses, majority)
        examples = {}
        for status, labels in grouped.items():
            host = next(h for h in reported if h.label == labels[0])
            if (cid, fid) in host.findings:
                examples[status] = host.findings[(cid, fid)][1]
        differing.append({"check": cid, "finding": fid, "majority": majority, "statuses": grouped,
                          "titles": examples, "outliers": [h for s, hs in grouped.items() if s != majority for h in hs]})

    fingerprints: dict[str, list[str]] = {}
    for host in reported:
        fingerprints.setdefault(host.fingerprint or "unknown", []).append(host.label)
    fp_majority = _majority({h.label: h.fingerprint or "unknown" for h in reported}, order) if reported else None

    reasons: dict[str, list[str]] = {h.label: [] for h in hosts}
    for item in drift:
        for value, labels in item["values"].items():
            if value != item["majority"]:
                for label in labels:
                    reasons[label].append(f"{item['what']} {value} (fleet: {item['majority']})")
    for item in differing:
        for status, labels in item["statuses"].items():
            if status != item["majority"]:
                for label in labels:
                    reasons[label].append(f"{item['check']}/{item['finding']} {status} (fleet: {item['majority']})")

    host_rows = []
    for host in hosts:
        row: dict[str, Any] = {"label": host.label, "source": host.source, "fingerprint": host.fingerprint,
                               "exit_code": host.exit_code, "partial": host.partial,
                               "checks": {cid: host.checks.get(cid, ABSENT) for cid in check_ids},
                               "drifted": bool(reasons[host.label]), "drift": reasons[host.label]}
        if host.error is not None:
            row.update({"error": host.error, "checks": {cid: NO_REPORT for cid in check_ids}, "exit_code": None})
        if host.info:
            row["info"] = host.info
        host_rows.append(row)

    failing = [h.label for h in hosts if h.error is not None or h.exit_code not in (0,) or h.partial]
    drifted = [h.label for h in hosts if reasons[h.label]]
    code = 1 if failing or (drifted and not allow_drift) else 0
    return {
        "schema": SCHEMA,
        "tool": {"name": "dflash-doctor", "version": __version__},
        "created": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "summary": {"hosts": len(hosts), "reported": len(reported), "failing": len(failing),
                    "drifted": len(drifted), "fingerprints": len(fingerprints), "exit_code": code,
                    "allow_drift": allow_drift},
        "checks": [{"id": cid, "title": titles[cid]} for cid in check_ids],
        "hosts": host_rows,
        "fingerprints": [{"id": fp, "hosts": labels, "majority": fp == fp_majority}
                         for fp, labels in sorted(fingerprints.items(), key=lambda kv: (kv[0] != fp_majority, -len(kv[1])))],
        "drift": drift,
        "differing_findings": differing,
        "failing_hosts": failing,
        "drifted_hosts": drifted,
    }


def write_json(view: Mapping[str, Any], path: str) -> None:
    text = json.dumps(view, indent=1) + "\n"
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        writer.replace(path, text, writer.JSON_DOCUMENT)
