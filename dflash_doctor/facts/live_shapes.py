"""The declared shape of the `live` section (facts.live): what a running server answered. The parts are
maps whose keys follow facts/live.py (each endpoint's status, seconds and error; the parsed metrics'
counters; the workload and its figures), free-form because they carry what the server sent."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from dflash_doctor.facts.shape import Shape

__all__ = ["Live"]


@dataclass(frozen=True)
class Live(Shape):
    SECTION: ClassVar[str] = "live"

    given: bool = False
    """Whether a server was named (`live URL`, `serve --exec --live`); nothing else is there when not."""
    url: str | None = None
    api_key_env: str | None = None
    api_key_set: bool = False
    """Whether the variable named a key; the key itself is never stored."""
    server: dict[str, Any] | None = None
    """The server `serve --exec --live` started: its PID, command, exit status and log tail."""
    health: dict[str, Any] = field(default_factory=dict)
    models: dict[str, Any] = field(default_factory=dict)
    metric_names: dict[str, Any] = field(default_factory=dict)
    metrics_before: dict[str, Any] | None = None
    metrics_after: dict[str, Any] | None = None
    workload: dict[str, Any] = field(default_factory=dict)
    vllm: dict[str, Any] = field(default_factory=dict)
    context: dict[str, Any] = field(default_factory=dict)
    malformed: list[dict[str, Any]] = field(default_factory=list)
    """Fields of the server's answers that did not have their type (read as absent): answer, field, expected,
    found (the first wrong value's JSON type), times."""
    baseline: dict[str, Any] | None = None
    seconds: float | None = None
