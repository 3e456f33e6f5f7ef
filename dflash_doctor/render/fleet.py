"""Rendering a fleet view: a plain-text table for terminals and CI logs, Markdown, GitHub annotations.

Plain text, not rich: a fleet table is read in logs more often than on a terminal, and a thousand hosts
are shown as groups of identical rows (with a count and example hosts), not a thousand lines. Each medium's
text leaves through its one function: `text.log_line` for the table, `text.markdown` (`_cell`) for Markdown,
`github.command` for annotations.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import IO, Any

from dflash_doctor.render.github import command
from dflash_doctor.render.markdown import _cell
from dflash_doctor.render.text import log_line

__all__ = ["github_lines", "markdown", "text_lines"]

MARK = {"pass": "ok", "warn": "warn", "fail": "FAIL", "error": "ERROR", "skip": "skip", "absent": "-",
        "no report": "NO REPORT"}
MD_MARK = {"ok": "✅", "warn": "⚠️", "FAIL": "❌", "ERROR": "🛑", "skip": "➖", "-": "–", "NO REPORT": "🛑 no report"}
GROUP_ABOVE = 40
EXAMPLES = 3


def _rows(view: Mapping[str, Any]) -> list[tuple[str, list[str], bool, int]]:
    """(label, cells, drifted, count); identical rows grouped when the fleet is large."""
    checks = [c["id"] for c in view["checks"]]
    fp_names = {fp["id"]: chr(ord("A") + i) if i < 26 else str(i) for i, fp in enumerate(view["fingerprints"])}
    rows = []
    for host in view["hosts"]:
        cells = [fp_names.get(host.get("fingerprint") or "unknown", "?")]
        cells += [MARK.get(host["checks"].get(c, "absent"), host["checks"].get(c, "")) for c in checks]
        cells.append("-" if host.get("exit_code") is None else str(host["exit_code"]))
        rows.append((host["label"], cells, bool(host.get("drifted")) or host.get("error") is not None, 1))
    if len(rows) <= GROUP_ABOVE:
        return rows
    grouped: dict[tuple[str, ...], list[tuple[str, list[str], bool, int]]] = {}
    for row in rows:
        grouped.setdefault((*row[1], str(row[2])), []).append(row)
    out = []
    for members in sorted(grouped.values(), key=lambda m: -len(m)):
        names = ", ".join(m[0] for m in members[:EXAMPLES]) + (", ..." if len(members) > EXAMPLES else "")
        out.append((f"{len(members)} hosts: {names}" if len(members) > 1 else members[0][0], members[0][1],
                    members[0][2], len(members)))
    return out


def text_lines(view: Mapping[str, Any]) -> Iterator[str]:
    summary = view["summary"]
    yield (f"dflash-doctor merge: {summary['hosts']} hosts, {summary['failing']} failing, {summary['drifted']} drifted, "
           f"{summary['fingerprints']} environment fingerprint(s) · exit {summary['exit_code']}")
    yield ""
    headers = ["host", "env", *[c["id"] for c in view["checks"]], "exit"]
    rows = _rows(view)
    width = [max([len(headers[0])] + [len(r[0]) + 2 for r in rows])]
    width += [max(len(h), *(len(r[1][i]) for r in rows)) for i, h in enumerate(headers[1:])] if rows else \
        [len(h) for h in headers[1:]]
    yield "  ".join(h.ljust(w) for h, w in zip(headers, width))
    for label, cells, drifted, _count in rows:
        name = f"{label} *" if drifted else label
        yield "  ".join(v.ljust(w) for v, w in zip([name, *cells], width)).rstrip()
    yield ""
    yield "env: " + ", ".join(
        f"{chr(ord('A') + i) if i < 26 else i} = {fp['id']} ({len(fp['hosts'])} hosts{', fleet' if fp['majority'] else ''})"
        for i, fp in enumerate(view["fingerprints"]))
    if view["drift"]:
        yield ""
        yield "Drift across hosts (the fleet's value first):"
        for item in view["drift"]:
            parts = [f"{value} on {_hosts(labels)}" for value, labels in item["values"].items()]
            yield f"  {item['what']}: " + "; ".join(parts)
    if view["differing_findings"]:
        yield ""
        yield "Findings that differ between hosts:"
        for item in view["differing_findings"]:
            parts = [f"{status} on {_hosts(labels)}" for status, labels in item["statuses"].items()]
            yield f"  {item['check']} / {item['finding']}: " + "; ".join(parts)
            for status, title in item["titles"].items():
                if status != item["majority"]:
                    yield f"      {status}: {title}"
    broken = [h for h in view["hosts"] if h.get("error")]
    if broken:
        yield ""
        yield "Hosts without a report:"
        for host in broken:
            yield f"  {host['label']}: {host['error']}"
    outliers = [h for h in view["hosts"] if h.get("drift")]
    if outliers:
        yield ""
        yield f"Drifted from the rest ({len(outliers)}):"
        for host in outliers[:50]:
            yield f"  {host['label']}: " + "; ".join(host["drift"][:6])
        if len(outliers) > 50:
            yield f"  ... and {len(outliers) - 50} more (see --json)"


def _hosts(labels: list[str]) -> str:
    if len(labels) <= EXAMPLES:
        return f"{len(labels)} host{'s' if len(labels) > 1 else ''} ({', '.join(labels)})"
    return f"{len(labels)} hosts ({', '.join(labels[:EXAMPLES])}, ...)"


def render_text(view: Mapping[str, Any], stream: IO[str]) -> None:
    for line in text_lines(view):
        stream.write(log_line(line) + "\n")
    stream.flush()


def markdown(view: Mapping[str, Any]) -> str:
    summary = view["summary"]
    verdict = "FAIL" if summary["exit_code"] else "PASS"
    lines = [f"### dflash-doctor fleet: {verdict} (exit {summary['exit_code']})", "",
             (f"{summary['hosts']} hosts · {summary['failing']} failing · {summary['drifted']} drifted · "
              f"{summary['fingerprints']} environment fingerprint(s)"), ""]
    checks = [c["id"] for c in view["checks"]]
    lines += ["| host | env | " + " | ".join(_cell(c) for c in checks) + " | exit |",
              "|---|---|" + "---|" * len(checks) + "---|"]
    for label, cells, drifted, _count in _rows(view):
        marks = [MD_MARK.get(c, _cell(c)) for c in cells[1:-1]]
        name = f"**{_cell(label)}** ⚠️" if drifted else _cell(label)
        lines.append(f"| {name} | {cells[0]} | " + " | ".join(marks) + f" | {cells[-1]} |")
    if view["drift"]:
        lines += ["", "#### Drift across hosts", "", "| what | fleet | differs |", "|---|---|---|"]
        for item in view["drift"]:
            others = "; ".join(f"{_cell(v)}: {_cell(_hosts(hs))}" for v, hs in item["values"].items() if v != item["majority"])
            lines.append(f"| {_cell(item['what'])} | {_cell(item['majority'])} | {others} |")
    if view["differing_findings"]:
        lines += ["", "#### Findings that differ", "", "| check / finding | fleet | differs |", "|---|---|---|"]
        for item in view["differing_findings"]:
            others = "; ".join(f"{_cell(s)}: {_cell(_hosts(hs))}" for s, hs in item["statuses"].items() if s != item["majority"])
            lines.append(f"| {_cell('`' + str(item['check']) + '`')} / {_cell('`' + str(item['finding']) + '`')} | "
                         f"{_cell(item['majority'])} | {others} |")
    lines += ["", "<details><summary>environment fingerprints</summary>", ""]
    lines += [f"- {_cell('`' + str(fp['id']) + '`')}: {_cell(_hosts(fp['hosts']))}" for fp in view["fingerprints"]]
    lines += ["", "</details>", ""]
    return "\n".join(lines)


def github_lines(view: Mapping[str, Any]) -> Iterator[str]:
    for item in view["drift"]:
        kind = "fleet.stack-drift" if item["kind"] == "stack" else "fleet.environment-drift"
        message = f"{item['what']}: fleet has {item['majority']}; " + "; ".join(
            f"{v} on {_hosts(hs)}" for v, hs in item["values"].items() if v != item["majority"])
        yield command("error", message, title=f"dflash-doctor fleet: {item['what']} differs [{kind}]")
    for item in view["differing_findings"]:
        message = f"{item['check']} / {item['finding']}: fleet is {item['majority']}; " + "; ".join(
            f"{s} on {_hosts(hs)}" for s, hs in item["statuses"].items() if s != item["majority"])
        yield command("error", message, title=f"dflash-doctor fleet: {item['check']} differs [fleet.finding-drift]")
    for host in view["hosts"]:
        if host.get("error"):
            yield command("error", f"{host['label']}: {host['error']}",
                          title="dflash-doctor fleet: no report [fleet.no-report]")
        elif host.get("exit_code") or host.get("partial"):
            bad = [c for c, s in host["checks"].items() if s in ("fail", "error")]
            yield command("error", f"{host['label']}: {', '.join(bad) or 'failing'}",
                          title="dflash-doctor fleet: host failing [fleet.host-failing]")
    summary = view["summary"]
    yield (f"dflash-doctor fleet: {summary['hosts']} hosts, {summary['failing']} failing, {summary['drifted']} "
           f"drifted · exit {summary['exit_code']}")
