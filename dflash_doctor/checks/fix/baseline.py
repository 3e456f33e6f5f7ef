"""The golden baseline: the expected state of an environment, saved once and compared on every run.

`dflash-doctor baseline save FILE` records what decides behaviour (the Python, the driver range, the
GPUs' compute capabilities, every distribution with its exact version, the sha256 of every file the
serving stack's distributions installed, and the GPU archs their compiled code carries);
`dflash-doctor --baseline FILE` compares the live environment with it and turns each difference into a
failing finding whose detail is a diff: what was expected, what is there. This is how an image pipeline
keeps a known-good box known-good.

Facts come from the report's sections through `envsummary` (so the GPU and arch layers are read when
they are there, and recorded as "not collected" when they are not). File hashes are a fact section of
their own, `file_hashes`, collected by `dflash_doctor.facts.file_hashes` (each stack distribution's
RECORD, and the files it lists) before judging, and saved with the baseline's result, so a saved report
is judged against a baseline on the hashes its run read. Nothing here reads a file of the environment:
`current_state` and the comparison (`compare`, a pure function of two states) judge facts.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from dflash_doctor import __version__
from dflash_doctor.checks.fix.codes import (
    BASELINE_ARCH_DRIFT,
    BASELINE_FILE_DRIFT,
    BASELINE_GPU_DRIFT,
    BASELINE_MATCH,
    BASELINE_NOT_COMPARED,
    BASELINE_PYTHON_DRIFT,
    BASELINE_VERSION_DRIFT,
)
from dflash_doctor.checks.remedy import Installer, quote
from dflash_doctor.documents.jsondoc import load_document
from dflash_doctor.facts import envsummary
from dflash_doctor.facts.environment_shapes import Target
from dflash_doctor.facts.file_hashes import SECTION as FILE_HASHES
from dflash_doctor.facts.file_hashes import first_of_each_name
from dflash_doctor.facts.fingerprint import of_sections
from dflash_doctor.model import CheckResult, Finding, Remediation, Status, worst

__all__ = ["SCHEMA", "BaselineError", "compare", "current_state", "default_driver_range", "hashed_names", "judge",
           "load", "save"]

SCHEMA = "dflash-doctor/baseline/v1"
DIFF_LINES = 30


class BaselineError(Exception):
    """A baseline file that cannot be used; the message names the file."""


def default_driver_range(version: str | None) -> str | None:
    """The driver branch a box was validated on: 570.124.06 -> "==570.*"."""
    if not version:
        return None
    major = version.split(".", 1)[0]
    return f"=={major}.*" if major.isdigit() else f"=={version}"


def hashed_names(expected: Mapping[str, Any]) -> list[str]:
    """The distributions whose file hashes a baseline holds: those to collect hashes of to compare with it."""
    return [n for n, d in (expected.get("distributions") or {}).items() if d.get("files") is not None]


def current_state(sections: Mapping[str, Any], *, driver_range: str | None = None,
                  target_archs: Iterable[str] = ()) -> dict[str, Any]:
    """The state of the environment the sections describe; file hashes from their `file_hashes` section
    (`facts.file_hashes.with_file_hashes`), for the distributions it holds."""
    first = first_of_each_name(sections)
    distributions: dict[str, Any] | None = None
    if first is not None:
        section = sections.get(FILE_HASHES)
        hashed = section.get("distributions") if isinstance(section, Mapping) else None
        hashed = hashed if isinstance(hashed, Mapping) else {}
        distributions = {}
        for name, item in sorted(first.items()):
            version = item.get("version")
            entry: dict[str, Any] = {"name": str(item.get("name")), "version": None if version is None else str(version)}
            if isinstance(hashed.get(name), Mapping):
                entry["files"] = hashed[name].get("files")
                entry["files_digest"] = hashed[name].get("files_digest")
            distributions[name] = entry
    drv = envsummary.driver(sections)
    gpu_list = envsummary.gpus(sections)
    return {
        "schema": SCHEMA,
        "created": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "tool": {"name": "dflash-doctor", "version": __version__},
        "fingerprint": of_sections(sections)["id"],
        "python": envsummary.python(sections),
        "driver": None if drv is None else {**drv, "range": driver_range or default_driver_range(drv.get("version"))},
        "gpus": None if gpu_list is None else {
            "compute_capabilities": sorted(str(g["cc"]) for g in gpu_list),
            "names": [g["name"] for g in gpu_list],
        },
        "target_archs": list(target_archs),
        "distributions": distributions,
        "arch_coverage": envsummary.arch_coverage(sections),
    }


def save(path: str, state: Mapping[str, Any]) -> None:
    Path(path).write_text(json.dumps(state, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def load(path: str) -> dict[str, Any]:
    """A baseline file, checked against the shipped schema (baseline-v1.json), which `compare` relies on."""
    return load_document(path, SCHEMA, "baseline", BaselineError,
                         "; make one with `dflash-doctor baseline save FILE`")


# ------------------------------------------------------------------------------------------ comparing


def _diff(source: str, removed: Iterable[str], added: Iterable[str], total: int | None = None) -> str:
    lines = [f"--- expected ({source})", "+++ found"]
    lines += [f"- {line}" for line in removed] + [f"+ {line}" for line in added]
    body = lines[: DIFF_LINES + 2]
    hidden = (total if total is not None else len(lines) - 2) - (len(body) - 2)
    if hidden > 0:
        body.append(f"  ... and {hidden} more")
    return "\n".join(body)


def _rebaseline(source: str, python: str) -> Remediation:
    return Remediation(f"dflash-doctor baseline save {quote(source)} --python {quote(python)}",
                       "if this change is intended and tested: record it as the new baseline")


def _python_findings(expected: Mapping[str, Any], current: Mapping[str, Any], source: str) -> list[Finding]:
    want, have = expected.get("python"), current.get("python")
    if not want or not have:
        return []
    keys = ("version", "implementation", "machine")
    if all(want.get(k) == have.get(k) for k in keys):
        return []
    def label(p: Mapping[str, Any]) -> str:
        return f"{p.get('implementation')} {p.get('version')} on {p.get('machine')}"

    return [BASELINE_PYTHON_DRIFT.finding(Status.FAIL, f"Python: {label(want)} expected, {label(have)} found",
                    _diff(source, [label(want)], [label(have)]), evidence={"expected": dict(want), "found": dict(have)})]


def _gpu_findings(expected: Mapping[str, Any], current: Mapping[str, Any], source: str) -> tuple[list[Finding], list[str]]:
    findings: list[Finding] = []
    skipped: list[str] = []
    want_driver, have_driver = expected.get("driver"), current.get("driver")
    if want_driver:
        if not have_driver:
            skipped.append("driver")
        else:
            spec, version = want_driver.get("range") or f"=={want_driver.get('version')}", have_driver.get("version")
            if not _in_range(version, spec):
                findings.append(BASELINE_GPU_DRIFT.finding(
                    Status.FAIL, f"NVIDIA driver {version} is outside the baseline's range {spec}",
                    _diff(source, [f"driver {spec} (saved on {want_driver.get('version')})"], [f"driver {version}"]),
                    evidence={"expected_range": spec, "expected": want_driver.get("version"), "found": version}))
    want_gpus, have_gpus = expected.get("gpus"), current.get("gpus")
    if want_gpus:
        if not have_gpus:
            skipped.append("GPUs")
        else:
            want_cc, have_cc = list(want_gpus.get("compute_capabilities") or []), list(have_gpus.get("compute_capabilities") or [])
            if want_cc != have_cc:
                findings.append(BASELINE_GPU_DRIFT.finding(
                    Status.FAIL,
                    f"GPUs' compute capabilities {', '.join(have_cc) or 'none'} differ from the baseline's "
                    f"{', '.join(want_cc) or 'none'}",
                    _diff(source, [f"GPU {cc}" for cc in want_cc], [f"GPU {cc}" for cc in have_cc]),
                    evidence={"expected": want_cc, "found": have_cc}))
    return findings, skipped


def _in_range(version: str | None, spec: str) -> bool:
    if version is None:
        return False
    try:
        return SpecifierSet(spec).contains(Version(version), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return spec.lstrip("=") == version


def _distribution_findings(expected: Mapping[str, Any], current: Mapping[str, Any], source: str,
                           installer: Installer) -> tuple[list[Finding], list[str], int]:
    want: Mapping[str, Any] = expected.get("distributions") or {}
    have: Mapping[str, Any] = current.get("distributions") or {}
    findings: list[Finding] = []
    skipped: list[str] = []
    files_compared = 0
    for name in sorted(set(want) | set(have)):
        w, h = want.get(name), have.get(name)
        if w is not None and h is not None and w.get("version") == h.get("version"):
            if w.get("files") is None:
                continue
            if "files" not in h:
                skipped.append(f"{name} files")
                continue
            if h.get("files") is None:
                findings.append(BASELINE_FILE_DRIFT.finding(
                    Status.FAIL, f"{w.get('name')} {w.get('version')}: its RECORD is gone or "
                    "unreadable, files cannot be checked", _diff(source, [f"{name} RECORD"], []),
                    evidence={"distribution": name}, remediation=(Remediation(installer.install(f"{w.get('name')}=={w.get('version')}",
                                                                           reinstall=True, no_deps=True),
                                                         "reinstall the recorded version"),)))
                continue
            files_compared += len(w["files"])
            if w.get("files_digest") and w.get("files_digest") == h.get("files_digest"):
                continue
            findings.extend(_file_finding(name, w, h, source, installer))
            continue
        label_w = f"{w.get('name')} {w.get('version')}" if w else None
        label_h = f"{h.get('name')} {h.get('version')}" if h else None
        shown = (w or h or {}).get("name") or name
        if w and h:
            title = f"{shown}: {w.get('version')} expected, {h.get('version')} installed"
            fix = Remediation(installer.install(f"{shown}=={w.get('version')}"), "install the recorded version")
        elif w:
            title = f"{shown} {w.get('version')} is in the baseline but not installed"
            fix = Remediation(installer.install(f"{shown}=={w.get('version')}"), "install the recorded version")
        else:
            title = f"{shown} {h.get('version') if h else ''} is installed but not in the baseline"
            fix = Remediation(installer.uninstall(str(shown)), "remove what the baseline does not have")
        findings.append(BASELINE_VERSION_DRIFT.finding(
            Status.FAIL, title,
            _diff(source, [label_w] if label_w else [], [label_h] if label_h else []),
            evidence={"distribution": name, "expected": w.get("version") if w else None, "found": h.get("version") if h else None},
            remediation=(fix, _rebaseline(source, installer.python))))
    return findings, skipped, files_compared


def _file_finding(name: str, want: Mapping[str, Any], have: Mapping[str, Any], source: str,
                  installer: Installer) -> list[Finding]:
    w_files: Mapping[str, Any] = want["files"]
    h_files: Mapping[str, Any] = have["files"]
    changed = sorted(p for p in set(w_files) & set(h_files) if w_files[p] != h_files[p] and h_files[p] is not None)
    missing = sorted(p for p in w_files if p not in h_files or (h_files.get(p) is None and w_files[p] is not None))
    added = sorted(p for p in h_files if p not in w_files)
    if not (changed or missing or added):
        return []
    removed_lines = [f"{p}  {w_files[p]}" for p in changed] + [f"{p}  {w_files[p]}" for p in missing]
    added_lines = [f"{p}  {h_files[p]}" for p in changed] + [f"{p}  {h_files[p]}" for p in added]
    parts = [f"{len(changed)} changed" if changed else "", f"{len(missing)} missing" if missing else "",
             f"{len(added)} new" if added else ""]
    label = f"{want.get('name')} {want.get('version')}"
    return [BASELINE_FILE_DRIFT.finding(
        Status.FAIL,
        f"{label}: files differ from the baseline ({', '.join(p for p in parts if p)})",
        _diff(source, removed_lines, added_lines, len(removed_lines) + len(added_lines)),
        evidence={"distribution": name, "changed": changed[:50], "missing": missing[:50], "new": added[:50],
         "changed_count": len(changed), "missing_count": len(missing), "new_count": len(added)},
        remediation=(Remediation(installer.install(f"{want.get('name')}=={want.get('version')}", reinstall=True, no_deps=True),
                     "put back the files the recorded version installs"), _rebaseline(source, installer.python)))]


def _owner(library: str, distributions: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Any] | None:
    return next((d for d in distributions.values() if library in (d.get("files") or {})), None)


def _arch_findings(expected: Mapping[str, Any], current: Mapping[str, Any], source: str,
                   installer: Installer) -> tuple[list[Finding], list[str]]:
    want, have = expected.get("arch_coverage"), current.get("arch_coverage")
    if want is None:
        return [], []
    if have is None:
        return [], ["arch coverage"]
    findings = []
    for library in sorted(set(want) | set(have)):
        w = want.get(library) or {"sass": [], "ptx": []}
        h = have.get(library) or {"sass": [], "ptx": []}
        lost = [a for k in ("sass", "ptx") for a in w.get(k, []) if a not in h.get(k, [])]
        gained = [a for k in ("sass", "ptx") for a in h.get(k, []) if a not in w.get(k, [])]
        if not lost and not gained:
            continue
        if library not in have:
            title = f"{library}: the library is gone (it carried {', '.join(lost)})"
        elif lost:
            title = f"{library}: no longer carries {', '.join(lost)}" + (f" (now also {', '.join(gained)})" if gained else "")
        else:
            title = f"{library}: now also carries {', '.join(gained)}"
        owner = _owner(library, expected.get("distributions") or {})
        fixes = []
        if owner:
            fixes.append(Remediation(installer.install(f"{owner.get('name')}=={owner.get('version')}", reinstall=True,
                                                       no_deps=True), "reinstall the build the baseline recorded"))
        fixes.append(_rebaseline(source, installer.python))
        findings.append(BASELINE_ARCH_DRIFT.finding(
            Status.FAIL, title,
            _diff(source, [f"{library}  {' '.join(w.get('sass', []) + w.get('ptx', []))}"],
                  [f"{library}  {' '.join(h.get('sass', []) + h.get('ptx', []))}"] if library in have else []),
            evidence={"library": library, "missing": lost, "added": gained}, remediation=tuple(fixes)))
    return findings, []


def compare(expected: Mapping[str, Any], current: Mapping[str, Any], source: str,
            installer: Installer) -> list[Finding]:
    """Every difference between the baseline and the current state, as findings (pure)."""
    findings = _python_findings(expected, current, source)
    gpu, skipped = _gpu_findings(expected, current, source)
    findings += gpu
    dists, skipped_files, files_compared = _distribution_findings(expected, current, source, installer)
    findings += dists
    archs, skipped_archs = _arch_findings(expected, current, source, installer)
    findings += archs
    skipped += skipped_archs
    if skipped_files:
        skipped.append(f"file hashes ({len(skipped_files)} distributions)")
    if not findings:
        n_dists = len(expected.get("distributions") or {})
        n_libs = len(expected.get("arch_coverage") or {})
        findings.append(BASELINE_MATCH.finding(
            Status.PASS,
            f"matches {source}: {n_dists} distributions, {files_compared} files, {n_libs} libraries' archs",
            evidence={"fingerprint": current.get("fingerprint"), "files_compared": files_compared}))
    if skipped:
        findings.append(BASELINE_NOT_COMPARED.finding(
            Status.SKIP, f"not compared: {', '.join(skipped)} (not collected in this run)",
            "The baseline records these, this run did not collect them (--no-gpu, a saved report, or no arch "
            "layer). Run on the hardware, from the live environment, to compare them.",
            evidence={"not_compared": skipped}))
    return findings


def judge(expected: Mapping[str, Any], sections: Mapping[str, Any], source: str) -> CheckResult:
    """The baseline check: the state the sections describe (with the `file_hashes` section where it was
    collected: a run collects the hashes `hashed_names(expected)` names first), compared with `expected`."""
    current = current_state(sections)
    installer = Installer.for_target(Target.read(envsummary.section(sections, "target")))
    findings = tuple(compare(expected, current, source, installer))
    facts = {"baseline": {
        "file": source,
        "expected_fingerprint": expected.get("fingerprint"),
        "found_fingerprint": current.get("fingerprint"),
        "expected_created": expected.get("created"),
    }}
    if isinstance(sections.get(FILE_HASHES), Mapping):
        facts[FILE_HASHES] = sections[FILE_HASHES]  # saved with the report: `judge --baseline` reads it again
    status = worst(f.status for f in findings)
    if status is Status.SKIP:  # nothing drifted, a part was not compared
        status = Status.PASS
    return CheckResult("baseline", "baseline", f"Golden baseline ({Path(source).name})", status, findings, facts)
