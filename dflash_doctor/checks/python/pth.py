"""Rules of the kernel-packages check for `.pth` files: a distribution installed where Python never reads its
`.pth` (a `pip install --target` directory, a PYTHONPATH layer), judged by what that .pth would have added
(its path lines against sys.path) and by the packages it provides (knowledge.site_pth.PTH_PROVIDES) as the
target resolves them."""

from __future__ import annotations

import os
from collections.abc import Iterator

from dflash_doctor.checks.python.codes import KERNEL_PACKAGES_PTH_NOT_READ
from dflash_doctor.checks.remedy import Installer, quote
from dflash_doctor.facts.python.environment_shapes import Resolution
from dflash_doctor.facts.python.kernel_files_shapes import PthFile
from dflash_doctor.knowledge.site_pth import PTH_PROVIDES
from dflash_doctor.model import Finding, Remediation, Status

__all__ = ["pth_findings"]


def pth_findings(pth_files: list[PthFile], resolution: Resolution, installer: Installer) -> Iterator[Finding]:
    unread = [pth for pth in pth_files if not pth.processed and not pth.error]
    if pth_files and not unread:
        yield KERNEL_PACKAGES_PTH_NOT_READ.finding(
            Status.PASS, title=f"{len(pth_files)} .pth files of installed distributions, each in a site directory",
            evidence={"files": [pth.file for pth in pth_files[:20]]})
    for pth in unread:
        # the packages it provides that the target looked up (a report saved before `cutlass` was looked up has
        # none: its path lines alone are judged then)
        provides = [name for name in PTH_PROVIDES.value.get(pth.name, ()) if name in resolution.names]
        unresolved = [name for name in provides if not resolution.of(name).found]
        missing = [line for line in pth.lines if line.path is not None and not line.on_sys_path and line.exists]
        imports = [line for line in pth.lines if line.path is None]
        if provides and not unresolved:
            continue  # what it provides resolves some other way (its directory on PYTHONPATH, another install)
        if not provides and not missing:
            continue  # an import line of a .pth not in PTH_PROVIDES: what it does is not known, nothing said
        what = (f"`import {unresolved[0]}` fails: No module named '{unresolved[0]}'" if unresolved else
                "what it adds to sys.path is missing")
        where = {"pythonpath": "a PYTHONPATH directory", "cwd": "the working directory"}.get(
            pth.location_kind, "a directory that is not a site directory")
        spec = f"{pth.distribution}=={pth.version}" if pth.version else pth.distribution
        remediation = [Remediation(installer.install(spec, no_deps=True, reinstall=True),
                                   f"install {pth.distribution} into the environment's site-packages, where "
                                   f"Python reads {pth.name}")]
        if missing:
            paths = os.pathsep.join(line.path or "" for line in missing)
            remediation.append(Remediation(f"export PYTHONPATH={quote(paths)}\"${{PYTHONPATH:+:$PYTHONPATH}}\"",
                                           f"or put what {pth.name} names on PYTHONPATH where the serve is launched"))
        yield KERNEL_PACKAGES_PTH_NOT_READ.finding(
            Status.FAIL if unresolved else Status.WARN,
            title=f"{pth.distribution} {pth.version or ''} is installed in {where} ({pth.location}), where Python "
            f"never reads its {pth.name}: {what}".replace("  ", " "),
            detail=f"Python reads .pth files only in site directories; {pth.location} came onto sys.path as "
            f"'{pth.location_kind}'. {pth.name} holds "
            + "; ".join(f"line {line.line}: {line.text}" for line in pth.lines[:4])
            + f". Read in {PTH_PROVIDES.read_from}.",
            evidence={"distribution": pth.distribution, "version": pth.version, "file": pth.file,
                      "location_kind": pth.location_kind, "unresolved": unresolved,
                      "paths_not_on_sys_path": [line.path for line in missing],
                      "import_lines": [line.text for line in imports]},
            remediation=tuple(remediation),
        )
