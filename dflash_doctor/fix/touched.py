"""What a step of `dflash-doctor fix` will touch inside the target environment, read from the installer's dry
run of its command and the installed distributions' RECORD files: the paths its snapshot copies before the
step runs. A command fix must not run gives None and the reason."""

from __future__ import annotations

import os
from collections.abc import Sequence

from dflash_doctor.facts.fix.dryrun import parse_command, read_record_paths
from dflash_doctor.facts.fix.dryrun_shapes import DryRunItem, InstalledDist, SegmentRun
from dflash_doctor.facts.python.envfacts import canonical
from dflash_doctor.facts.python.environment_shapes import Target
from dflash_doctor.facts.safefile import under
from dflash_doctor.knowledge.flash_attn import DISTRIBUTIONS, FA2_TOP_LEVELS

__all__ = ["environment_roots", "touched_paths"]


def environment_roots(target: Target | None) -> list[str]:
    """The directories of the target's own environment: a venv's prefix; else the roots under its prefix."""
    if target is None or not target.prefix:
        return []
    if target.env_kind in ("venv", "uv"):
        return [target.prefix]
    return [r for r in target.environment_roots if r.startswith(target.prefix.rstrip(os.sep) + os.sep)]


def touched_paths(command: str, item: DryRunItem | None, installed: Sequence[InstalledDist],
                  roots: Sequence[str], python: str) -> tuple[list[str] | None, str]:
    """What the command will touch inside the environment (None and why when fix must not run it)."""

    segments = parse_command(command)
    if segments is None:
        return None, "not a command fix runs (only installs, uninstalls, leftover cleanups and moves)"
    if any(s.python and s.python != python for s in segments):
        return None, "it names another interpreter than the target"
    by_name = {canonical(d.name or ""): d for d in installed}
    paths: list[str] = []
    site_dirs = sorted({d.location for d in installed if d.location and under(d.location, roots)})

    def add_dist(dist: InstalledDist) -> None:
        location = dist.location or ""
        record, _ = read_record_paths(str(dist.dist_info), location)
        paths.extend(record)
        paths.append(str(dist.dist_info))
        paths.extend(os.path.join(location, t) for t in dist.tops)

    facts = item.segments if item is not None else []
    for i, segment in enumerate(segments):
        seg_facts = facts[i] if i < len(facts) else SegmentRun()
        if segment.kind in ("cleanup", "move"):
            source = segment.paths[0]
            if not under(os.path.normpath(source), roots):
                return None, f"{source} is outside the target environment"
            paths.append(source)
            continue
        if seg_facts.status not in ("resolved", "simulated"):
            return None, "the installer was not asked what it would do: " + (seg_facts.reason or "no dry run")
        names = [str(n) for n in segment.names] if segment.kind == "uninstall" else []
        names += [e.name for e in seg_facts.install]
        names += [e.name for e in seg_facts.remove]
        for name in names:
            key = canonical(name)
            if key in by_name:
                add_dist(by_name[key])
            tops = {key.replace("-", "_"), DISTRIBUTIONS.value.get(key, "")}
            if key == "flash-attn":
                tops.update(FA2_TOP_LEVELS.value)
            for dist in installed:  # whoever shares those top-level names is touched too
                if tops & set(dist.tops):
                    add_dist(dist)
            paths.extend(os.path.join(site, top) for site in site_dirs for top in tops if top)
        paths.extend(left.directory for left in seg_facts.left_behind)
    inside = sorted({os.path.normpath(p) for p in paths if p and under(os.path.normpath(p), roots)})
    return inside, ""
