"""The golden baseline: the expected state of an environment, saved once and compared on every run.

`dflash-doctor baseline save FILE` records what decides behaviour (the Python, the driver range, the
GPUs' compute capabilities, every distribution with its exact version, the sha256 of every file the
serving stack's distributions installed, and the GPU archs their compiled code carries);
`dflash-doctor --baseline FILE` compares the live environment with it and turns each difference into a
failing finding whose detail is a diff: what was expected, what is there. This is how an image pipeline
keeps a known-good box known-good.

The baseline is facts like any other (facts.fix.baseline): the document in the file the user named, and the sha256 of
the files of each distribution it holds hashes of, read now (the `file_hashes` section). The baseline check
(`BaselineCheck`, checks.fix) judges them after the other checks, reading the rest of the environment from the
run's sections through `envsummary` (the GPU and arch layers where they were collected, "not compared" where
they were not); the report saves both sections, so a saved report is judged again on the hashes its run read.
Nothing here reads a file: `current_state` and `compare` (a pure function of two states) judge facts.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from dflash_doctor import __version__
from dflash_doctor.check import Facts
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
from dflash_doctor.documents import writer
from dflash_doctor.facts import envsummary
from dflash_doctor.facts.fingerprint import of_sections
from dflash_doctor.facts.fix.baseline_shapes import (
    Baseline,
    BaselineFacts,
    DistributionState,
    DriverState,
    FileHashes,
    GpuState,
    HashedFiles,
    LibraryArchs,
    PythonState,
    Tool,
)
from dflash_doctor.facts.fix.file_hashes import OWN
from dflash_doctor.facts.gpu.nvml_shapes import Gpu
from dflash_doctor.facts.python.environment_shapes import Target, Versions
from dflash_doctor.model import Finding, Remediation, Status

__all__ = ["compare", "current_state", "default_driver_range", "judge_baseline", "save"]

DIFF_LINES = 30


def default_driver_range(version: str | None) -> str | None:
    """The driver branch a box was validated on: 570.124.06 -> "==570.*"."""
    if not version:
        return None
    major = version.split(".", 1)[0]
    return f"=={major}.*" if major.isdigit() else f"=={version}"


def current_state(sections: Mapping[str, object], *, driver_range: str | None = None,
                  target_archs: Iterable[str] = ()) -> Baseline:
    """The state of the environment the sections describe; file hashes from their `file_hashes` section
    (facts.fix.file_hashes), for the distributions it holds."""
    versions = Versions.of(envsummary.section(sections, "distributions"))
    hashes = FileHashes.read(sections.get(FileHashes.SECTION)) or FileHashes()
    distributions: dict[str, DistributionState] | None = None
    if versions is not None:
        distributions = {}
        for name, dist in sorted(versions.seen().items()):
            if name == OWN:  # the doctor itself is not part of the environment it judges
                continue
            hashed = hashes.distributions.get(name) or HashedFiles()
            distributions[name] = DistributionState(name=dist.name, version=dist.version, files=hashed.files,
                                                    files_digest=hashed.files_digest)
    gpu = Gpu.read(sections.get(Gpu.SECTION))
    driver = gpu.driver_version or None if gpu is not None else None
    cuda = gpu.cuda_driver_version or None if gpu is not None else None
    gpu_list = envsummary.gpus(sections)
    python = envsummary.python(sections)
    coverage = envsummary.arch_coverage(sections)
    return Baseline(
        created=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        tool=Tool(version=__version__),
        fingerprint=of_sections(sections)["id"],
        python=None if python is None else PythonState(**python),
        driver=None if driver is None and cuda is None else DriverState(
            version=driver, cuda=cuda, range=driver_range or default_driver_range(driver)),
        gpus=None if gpu_list is None else GpuState(compute_capabilities=sorted(str(g["cc"]) for g in gpu_list),
                                                    names=[g["name"] for g in gpu_list]),
        target_archs=list(target_archs),
        distributions=distributions,
        arch_coverage=None if coverage is None else {lib: LibraryArchs(sass=k["sass"], ptx=k["ptx"])
                                                     for lib, k in coverage.items()},
    )


def save(path: str, state: Baseline) -> None:
    writer.replace(path, json.dumps(state.to_json(), indent=1, sort_keys=True) + "\n", writer.JSON_DOCUMENT)


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


def _python_findings(expected: Baseline, current: Baseline, source: str) -> list[Finding]:
    want, have = expected.python, current.python
    if want is None or have is None or want == PythonState() or have == PythonState() or want == have:
        return []
    return [BASELINE_PYTHON_DRIFT.finding(Status.FAIL, f"Python: {want.label} expected, {have.label} found",
                                          _diff(source, [want.label], [have.label]),
                                          evidence={"expected": want.to_json(), "found": have.to_json()})]


def _gpu_findings(expected: Baseline, current: Baseline, source: str) -> tuple[list[Finding], list[str]]:
    findings: list[Finding] = []
    skipped: list[str] = []
    want_driver, have_driver = expected.driver, current.driver
    if want_driver is not None:
        if have_driver is None:
            skipped.append("driver")
        else:
            spec, version = want_driver.accepted, have_driver.version
            if not _in_range(version, spec):
                findings.append(BASELINE_GPU_DRIFT.finding(
                    Status.FAIL, f"NVIDIA driver {version} is outside the baseline's range {spec}",
                    _diff(source, [f"driver {spec} (saved on {want_driver.version})"], [f"driver {version}"]),
                    evidence={"expected_range": spec, "expected": want_driver.version, "found": version}))
    want_gpus, have_gpus = expected.gpus, current.gpus
    if want_gpus is not None:
        if have_gpus is None:
            skipped.append("GPUs")
        else:
            want_cc, have_cc = want_gpus.compute_capabilities, have_gpus.compute_capabilities
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


def _distribution_findings(expected: Baseline, current: Baseline, hashes: FileHashes, source: str,
                           installer: Installer) -> tuple[list[Finding], list[str], int]:
    want = expected.distributions or {}
    have = current.distributions or {}
    findings: list[Finding] = []
    skipped: list[str] = []
    files_compared = 0
    for name in sorted(set(want) | set(have)):
        w, h = want.get(name), have.get(name)
        if w is not None and h is not None and w.version == h.version:
            if w.files is None:
                continue
            hashed = hashes.distributions.get(name)
            if hashed is None:
                skipped.append(f"{name} files")
                continue
            if hashed.files is None:
                findings.append(BASELINE_FILE_DRIFT.finding(
                    Status.FAIL, f"{w.label}: its RECORD is gone or unreadable, files cannot be checked",
                    _diff(source, [f"{name} RECORD"], []), evidence={"distribution": name},
                    remediation=(Remediation(installer.install(w.pin, reinstall=True, no_deps=True),
                                             "reinstall the recorded version"),)))
                continue
            files_compared += len(w.files)
            if w.files_digest and w.files_digest == hashed.files_digest:
                continue
            findings.extend(_file_finding(name, w, w.files, hashed.files, source, installer))
            continue
        shown = (w or h or DistributionState()).name or name
        if w is not None and h is not None:
            title = f"{shown}: {w.version} expected, {h.version} installed"
            fix = Remediation(installer.install(f"{shown}=={w.version}"), "install the recorded version")
        elif w is not None:
            title = f"{shown} {w.version} is in the baseline but not installed"
            fix = Remediation(installer.install(f"{shown}=={w.version}"), "install the recorded version")
        else:
            title = f"{shown} {h.version if h else ''} is installed but not in the baseline"
            fix = Remediation(installer.uninstall(str(shown)), "remove what the baseline does not have")
        findings.append(BASELINE_VERSION_DRIFT.finding(
            Status.FAIL, title,
            _diff(source, [w.label] if w else [], [h.label] if h else []),
            evidence={"distribution": name, "expected": w.version if w else None, "found": h.version if h else None},
            remediation=(fix, _rebaseline(source, installer.python))))
    return findings, skipped, files_compared


def _file_finding(name: str, want: DistributionState, w_files: Mapping[str, str | None],
                  h_files: Mapping[str, str | None], source: str, installer: Installer) -> list[Finding]:
    changed = sorted(p for p in set(w_files) & set(h_files) if w_files[p] != h_files[p] and h_files[p] is not None)
    missing = sorted(p for p in w_files if p not in h_files or (h_files[p] is None and w_files[p] is not None))
    added = sorted(p for p in h_files if p not in w_files)
    if not (changed or missing or added):
        return []
    removed_lines = [f"{p}  {w_files[p]}" for p in changed] + [f"{p}  {w_files[p]}" for p in missing]
    added_lines = [f"{p}  {h_files[p]}" for p in changed] + [f"{p}  {h_files[p]}" for p in added]
    parts = [f"{len(changed)} changed" if changed else "", f"{len(missing)} missing" if missing else "",
             f"{len(added)} new" if added else ""]
    return [BASELINE_FILE_DRIFT.finding(
        Status.FAIL,
        f"{want.label}: files differ from the baseline ({', '.join(p for p in parts if p)})",
        _diff(source, removed_lines, added_lines, len(removed_lines) + len(added_lines)),
        evidence={"distribution": name, "changed": changed[:50], "missing": missing[:50], "new": added[:50],
                  "changed_count": len(changed), "missing_count": len(missing), "new_count": len(added)},
        remediation=(Remediation(installer.install(want.pin, reinstall=True, no_deps=True),
                                 "put back the files the recorded version installs"),
                     _rebaseline(source, installer.python)))]


def _owner(library: str, distributions: Mapping[str, DistributionState]) -> DistributionState | None:
    return next((d for d in distributions.values() if library in (d.files or {})), None)


def _arch_findings(expected: Baseline, current: Baseline, source: str,
                   installer: Installer) -> tuple[list[Finding], list[str]]:
    want, have = expected.arch_coverage, current.arch_coverage
    if want is None:
        return [], []
    if have is None:
        return [], ["arch coverage"]
    findings = []
    for library in sorted(set(want) | set(have)):
        w = want.get(library) or LibraryArchs()
        h = have.get(library) or LibraryArchs()
        lost = [a for a in w.all if a not in h.all]
        gained = [a for a in h.all if a not in w.all]
        if not lost and not gained:
            continue
        if library not in have:
            title = f"{library}: the library is gone (it carried {', '.join(lost)})"
        elif lost:
            title = f"{library}: no longer carries {', '.join(lost)}" + (f" (now also {', '.join(gained)})" if gained else "")
        else:
            title = f"{library}: now also carries {', '.join(gained)}"
        owner = _owner(library, expected.distributions or {})
        fixes = []
        if owner is not None:
            fixes.append(Remediation(installer.install(owner.pin, reinstall=True, no_deps=True),
                                     "reinstall the build the baseline recorded"))
        fixes.append(_rebaseline(source, installer.python))
        findings.append(BASELINE_ARCH_DRIFT.finding(
            Status.FAIL, title,
            _diff(source, [f"{library}  {' '.join(w.all)}"], [f"{library}  {' '.join(h.all)}"] if library in have else []),
            evidence={"library": library, "missing": lost, "added": gained}, remediation=tuple(fixes)))
    return findings, []


def compare(expected: Baseline, current: Baseline, hashes: FileHashes, source: str,
            installer: Installer) -> list[Finding]:
    """Every difference between the baseline and the current state (its files as `hashes` read them), as
    findings (pure)."""
    findings = _python_findings(expected, current, source)
    gpu, skipped = _gpu_findings(expected, current, source)
    findings += gpu
    dists, skipped_files, files_compared = _distribution_findings(expected, current, hashes, source, installer)
    findings += dists
    archs, skipped_archs = _arch_findings(expected, current, source, installer)
    findings += archs
    skipped += skipped_archs
    if skipped_files:
        skipped.append(f"file hashes ({len(skipped_files)} distributions)")
    if not findings:
        n_dists = len(expected.distributions or {})
        n_libs = len(expected.arch_coverage or {})
        findings.append(BASELINE_MATCH.finding(
            Status.PASS,
            f"matches {source}: {n_dists} distributions, {files_compared} files, {n_libs} libraries' archs",
            evidence={"fingerprint": current.fingerprint, "files_compared": files_compared}))
    if skipped:
        findings.append(BASELINE_NOT_COMPARED.finding(
            Status.SKIP, f"not compared: {', '.join(skipped)} (not collected in this run)",
            "The baseline records these, this run did not collect them (--no-gpu, a saved report, or no arch "
            "layer). Run on the hardware, from the live environment, to compare them.",
            evidence={"not_compared": skipped}))
    return findings


def judge_baseline(facts: Facts) -> list[Finding]:
    """The baseline check: the state the facts describe (the files as their `file_hashes` section read them),
    compared with the baseline their `baseline` section holds (a file that could not be read: SectionError)."""
    given = facts.section(BaselineFacts)
    if given.expected is None:
        why = ("no baseline was given (--baseline FILE)" if not given.file else
               f"the report holds no copy of {given.file} (saved by an older doctor); give it again with --baseline")
        return [BASELINE_NOT_COMPARED.finding(Status.SKIP, f"not compared: {why}", evidence={"file": given.file})]
    source = given.file or ""
    current = current_state(facts)
    installer = Installer.for_target(Target.read(envsummary.section(facts, "target")))
    hashes = FileHashes.read(facts.get(FileHashes.SECTION)) or FileHashes()
    return compare(given.expected, current, hashes, source, installer)
