"""The environment fingerprint: a stable hash of what decides behaviour.

Two bug tickets with the same fingerprint come from environments that should behave alike: the same
NVIDIA driver, the same GPUs (by compute capability), the same Python on the same machine type, and the
same serving stack (distribution names and exact versions). Paths, host names, times and everything the
doctor judged are left out, so the fingerprint is stable across runs, boxes and redaction, and changes
when any of its inputs does. A part that was not collected (no GPU facts under --no-gpu) is recorded as
null, which is itself part of the identity: an image on a build machine is not yet the same
environment as that image on a GPU box.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from dflash_doctor.facts import envsummary

__all__ = ["PREFIX", "fingerprint", "inputs", "of_sections"]

PREFIX = "dfp1-"
"""Versioned: a change to what goes into the hash changes the prefix, never silently the meaning."""


def inputs(sections: Mapping[str, object]) -> dict[str, Any]:
    drv = envsummary.driver(sections)
    gpu_list = envsummary.gpus(sections)
    python = envsummary.python(sections)
    stack = envsummary.stack_versions(sections)
    return {
        "python": None if python is None else {"version": python["version"], "machine": python["machine"]},
        "driver": drv,
        "compute_capabilities": None if gpu_list is None else sorted(str(g["cc"]) for g in gpu_list),
        "stack": None if stack is None else {name: version for name, version in sorted(stack.items()) if version},
    }


def fingerprint(data: Mapping[str, Any]) -> str:
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return PREFIX + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def of_sections(sections: Mapping[str, object]) -> dict[str, Any]:
    """{"id": "dfp1-...", "inputs": {...}} as stored in every report."""
    data = inputs(sections)
    return {"id": fingerprint(data), "inputs": data}
