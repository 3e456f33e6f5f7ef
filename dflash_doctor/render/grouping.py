"""What to show first: the decisive findings, each with the findings that follow from it.

A finding names its cause (`Finding.cause`, the id of another finding in the same report). Renderers
show a cause with its consequences nested under it, wherever in the report they are, and the checks in
order of what decides the verdict: checks with a failing (or erroring) cause first, then those with a
warning of their own, then checks whose problems all follow from a finding elsewhere, then the rest in
declared order; within each, first a check whose finding (or one that follows from it) stops `vllm serve`
(`model.stops_serve`: a fatal import on its serving path before a missing requirement). The doctor's own
results (layer "doctor") come after the others of their tier, so that the first finding shown is the one to
fix first.

A cause that names no finding in the report, a cycle of causes, or a problem "following from" a finding
that passed is shown as a finding of its own: a report never hides a problem and never breaks rendering.
Pure functions on results; nothing here prints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from dflash_doctor.model import CheckResult, Finding, Status, stops_serve
from dflash_doctor.shape import frozen_dataclass

__all__ = ["Arrangement", "CheckView", "Node", "arrange", "is_problem", "line_title", "raised_text"]

QUOTE_CHARS = 600
_TIER = {Status.PASS: 0, Status.SKIP: 0, Status.WARN: 2, Status.FAIL: 3, Status.ERROR: 3}


def is_problem(status: Status) -> bool:
    return status in (Status.WARN, Status.FAIL, Status.ERROR)


@dataclass(eq=False)
class Node:
    """A finding, where it is, and the findings that follow from it (decisive first)."""

    finding: Finding
    check: CheckResult
    weight: int
    """The highest status rank of the finding and everything that follows from it."""
    cause: Node | None = None
    consequences: list[Node] = field(default_factory=list)

    @property
    def problem(self) -> bool:
        """It, or something that follows from it, is a warning, a failure or an error."""
        return self.weight >= Status.WARN.rank

    def descendants(self) -> list[Node]:
        found: list[Node] = []
        for child in self.consequences:
            found += [child, *child.descendants()]
        return found


@frozen_dataclass(frozen=True)
class CheckView:
    result: CheckResult
    index: int
    """Its position in the results as given."""
    roots: tuple[Node, ...]
    """Its findings that follow from no other finding in the report, decisive first (their consequences
    nested in them)."""
    followers: tuple[tuple[Finding, Node], ...]
    """Its findings that follow, in the end, from a finding of another check: (finding, that root)."""

    @property
    def headline(self) -> Node | None:
        """The finding for the check's line: its decisive one, unless all its problems follow from elsewhere."""
        if not self.roots:
            return None
        if not self.roots[0].problem and self.causes_elsewhere:
            return None
        return self.roots[0]

    @property
    def causes_elsewhere(self) -> list[Node]:
        """The roots in other checks its problems follow from, each once, in order."""
        seen: list[Node] = []
        for finding, root in self.followers:
            if is_problem(finding.status) and all(root is not s for s in seen):
                seen.append(root)
        return seen


@frozen_dataclass(frozen=True)
class Arrangement:
    checks: tuple[CheckView, ...]
    """In the order to show them."""
    decisive: Node | None
    """The first finding to fix: the first problem among the roots, in that order."""


def _status_at(rank: int) -> Status:
    return next(s for s in Status if s.rank == rank)


def _shared_evidence(consequence: Finding, cause: Finding) -> int:
    """How many plain values (strings, numbers) the two findings' evidence holds under the same key."""
    theirs = cause.evidence if isinstance(cause.evidence, Mapping) else {}
    ours = consequence.evidence if isinstance(consequence.evidence, Mapping) else {}
    return sum(1 for key, value in ours.items()
               if isinstance(value, (str, int, float)) and not isinstance(value, bool) and theirs.get(key) == value)


def arrange(results: Sequence[CheckResult]) -> Arrangement:
    entries = [(ci, fi) for ci, result in enumerate(results) for fi in range(len(result.findings))]

    def finding(entry: tuple[int, int]) -> Finding:
        return results[entry[0]].findings[entry[1]]

    by_id: dict[str, list[tuple[int, int]]] = {}
    for entry in entries:
        by_id.setdefault(finding(entry).id, []).append(entry)

    parent: dict[tuple[int, int], tuple[int, int]] = {}
    for entry in entries:
        current = finding(entry)
        if not current.cause:
            continue
        candidates = [c for c in by_id.get(current.cause, []) if c != entry]
        # A problem never hides under a finding that passed: it is shown as a finding of its own then.
        if is_problem(current.status):
            candidates = [c for c in candidates if is_problem(finding(c).status)]
        if candidates:
            same_check = [c for c in candidates if c[0] == entry[0]]
            # Several findings may carry the cause's id (one `distributions.requirement-missing` per missing
            # requirement): the cause is the one whose evidence agrees with the consequence's most
            # (the same requirement, the same distribution); a tie keeps the report's order.
            parent[entry] = max(same_check or candidates, key=lambda c: _shared_evidence(current, finding(c)))

    for entry in entries:  # cut every cycle of causes where it closes
        path = [entry]
        while path[-1] in parent:
            next_cause = parent[path[-1]]
            if next_cause in path:
                del parent[path[-1]]
                break
            path.append(next_cause)

    children: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for child, cause in parent.items():
        children.setdefault(cause, []).append(child)

    weights: dict[tuple[int, int], int] = {}

    def weight(entry: tuple[int, int]) -> int:
        if entry not in weights:
            weights[entry] = max([finding(entry).status.rank, *(weight(c) for c in children.get(entry, ()))])
        return weights[entry]

    def following(entry: tuple[int, int]) -> int:
        return sum(1 + following(c) for c in children.get(entry, ()))  # acyclic now

    def stops(entry: tuple[int, int]) -> bool:
        """It, or a finding that follows from it, stops `vllm serve` (model.stops_serve)."""
        return stops_serve(finding(entry)) or any(stops(c) for c in children.get(entry, ()))

    def order(entry: tuple[int, int]) -> tuple[int, bool, int, int, int, int]:
        # Worst first; among equals, what stops `vllm serve`, then the one more findings follow from; then as reported.
        return (-weight(entry), not stops(entry), -finding(entry).status.rank, -following(entry), entry[0], entry[1])

    def node(entry: tuple[int, int], cause: Node | None) -> Node:
        built = Node(finding(entry), results[entry[0]], weight(entry), cause)
        built.consequences = [node(c, built) for c in sorted(children.get(entry, ()), key=order)]
        return built

    def root_of(entry: tuple[int, int]) -> tuple[int, int]:
        while entry in parent:
            entry = parent[entry]
        return entry

    roots = {e: node(e, None) for e in sorted((e for e in entries if e not in parent), key=order)}
    views: list[tuple[tuple[int, int, bool, int, int], CheckView]] = []
    for ci, result in enumerate(results):
        own = tuple(n for e, n in roots.items() if e[0] == ci)
        followers = tuple((finding(e), roots[root_of(e)]) for e in entries
                          if e[0] == ci and e in parent and root_of(e)[0] != ci)
        tier = max((_TIER[_status_at(n.weight)] for n in own), default=0)
        doctor = 1 if result.layer == "doctor" else 0
        serve = not any(stops(e) for e in roots if e[0] == ci)
        if tier:
            key = (0, -tier, serve, doctor, ci)
        elif _TIER[result.status]:
            key = (1, -_TIER[result.status], serve, doctor, ci)
        else:
            key = (2, 0, serve, 0, ci)
        views.append((key, CheckView(result, ci, own, followers)))
    ordered = tuple(view for _, view in sorted(views, key=lambda kv: kv[0]))
    decisive = next((n for view in ordered for n in view.roots if n.problem), None)
    return Arrangement(ordered, decisive)


def raised_text(finding: Finding) -> str:
    """The exception a finding quotes (`evidence["exception"]`: a string or {"type", "message"}), as the
    user will read it from vLLM, unless the title or detail already quotes it; "" when there is none."""
    exception = finding.evidence.get("exception") if isinstance(finding.evidence, Mapping) else None
    if isinstance(exception, Mapping):
        kind, message = exception.get("type"), exception.get("message")
        exception = f"{kind}: {message}" if kind and message else (message or kind)
    if not isinstance(exception, str) or not exception.strip():
        return ""
    lines = exception.strip().splitlines()
    text = lines[0][:QUOTE_CHARS] + (" ..." if len(lines) > 1 or len(lines[0]) > QUOTE_CHARS else "")
    message = text.split(": ", 1)[-1]
    if message and (message in finding.title or message in finding.detail):
        return ""
    return text


def line_title(text: str, check_title: str) -> str:
    """A finding's title for its check's line, without the check's title (or a short name for it) in
    front: "Model files: skipped, ..." -> "skipped, ...", "compiled GPU code not judged: ..." (in
    "Compiled GPU code") -> "not judged: ...", "serve command: skipped, ..." -> "skipped, ..."."""
    if text.lower().startswith(check_title.lower()) and text[len(check_title):len(check_title) + 1] in (" ", ":"):
        rest = text[len(check_title):].lstrip(" :-")
        if rest:
            return rest
    named, colon, rest = text.partition(": ")
    if colon and rest.startswith("skipped") and len(named) <= len(check_title) + 20:
        return rest
    return text
