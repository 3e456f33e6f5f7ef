"""Codes for the doctor's own run (partial reports), the golden baseline and fleets of hosts."""

from dflash_doctor.codes import Code

CODES = (
    # ------------------------------------------------------------------ the doctor's own run
    Code("doctor.interrupted", "The doctor was stopped before it finished",
         "The doctor received SIGTERM or SIGINT (a CI job's timeout, a Ctrl-C) while it was collecting facts. "
         "The report is partial: checks whose facts had been collected were judged, the rest are marked "
         "`doctor.incomplete`. If a probe hung, the facts it was collecting name the interpreter; run again with "
         "a lower --timeout to see which probe it was."),
    Code("doctor.crashed", "The doctor itself failed during the run",
         "Code of the doctor outside any single check raised (the runner, a reporter, the baseline comparison). "
         "This is a bug in the doctor, not a problem with your environment. The report is partial; the "
         "traceback is in the finding's detail. Please attach the JSON report to a bug report."),
    Code("doctor.incomplete", "Not judged: the run stopped first",
         "This check's facts were not collected before the doctor stopped (see `doctor.interrupted` or "
         "`doctor.crashed` in the same report). Nothing was judged; run the doctor again."),
    # ------------------------------------------------------------------ golden baseline
    Code("baseline.match", "The environment matches the golden baseline",
         "Every part of the environment recorded in the baseline file (driver range, GPUs' compute "
         "capabilities, Python, the distributions and their exact versions, the stack's file hashes, the arch "
         "coverage of its compiled code) is as it was when the baseline was saved."),
    Code("baseline.version-drift", "A distribution changed version, appeared or disappeared since the baseline",
         "The baseline records every installed distribution with its exact version. One differs now: an "
         "upgrade, a downgrade, a package installed or removed after the known-good state was recorded. In an "
         "image pipeline this usually means an unpinned dependency resolved differently. Pin it back (the "
         "remediation installs the recorded version), or, if the change is intended and tested, save a new "
         "baseline with `dflash-doctor baseline save FILE`."),
    Code("baseline.file-drift", "Files of a stack distribution changed since the baseline",
         "The distribution has the same version as in the baseline, but files it installed have a different "
         "sha256 now, are gone, or new ones appeared. Something wrote into site-packages after install: a "
         "patch step in a Dockerfile, a second installer overwriting shared files (flash-attn's namespace), a "
         "rebuilt wheel published under the same version. Reinstall the distribution, or save a new baseline "
         "if the change is intended."),
    Code("baseline.arch-drift", "Compiled code covers different GPU archs than in the baseline",
         "A library of the stack carries SASS or PTX for a different set of GPU architectures than when the "
         "baseline was saved. A missing arch means kernels that ran on that GPU will fail to load there "
         "(`no kernel image is available for execution on the device`). Usually a wheel was rebuilt with "
         "another TORCH_CUDA_ARCH_LIST or taken from another index; install the recorded build."),
    Code("baseline.gpu-drift", "Driver or GPUs differ from the baseline",
         "The NVIDIA driver is outside the range the baseline allows, or the GPUs' compute capabilities "
         "differ. The same image on other hardware is a different environment: check it against a baseline "
         "saved on that hardware."),
    Code("baseline.python-drift", "The Python interpreter differs from the baseline",
         "The target interpreter's version or the machine architecture differs from the baseline's. Every "
         "compiled wheel depends on both."),
    Code("baseline.not-compared", "A part of the baseline could not be compared",
         "The baseline records facts this run did not collect (GPU facts under --no-gpu, file hashes when "
         "judging a saved report, arch coverage from a doctor without the arch layer). That part was not "
         "compared; run on the hardware, or from the live environment, to compare it."),
    # ------------------------------------------------------------------ fleets
    Code("fleet.stack-drift", "The serving stack differs between hosts",
         "Hosts of one fleet run different versions of a stack distribution (or some lack it). vLLM workers "
         "on one cluster must agree on torch, vLLM and the attention kernels; a node that differs fails or "
         "produces different results. The hosts that differ from the majority are named; align them."),
    Code("fleet.environment-drift", "Python, driver, GPUs or the doctor differ between hosts",
         "Hosts of one fleet differ in the Python interpreter, the NVIDIA driver, the GPUs' compute "
         "capabilities or the version of dflash-doctor that examined them. Mixed GPUs in one vLLM deployment need "
         "kernels for every arch; a different doctor version may judge differently. The minority hosts are named."),
    Code("fleet.finding-drift", "A check came out differently on some hosts",
         "The same check passed on some hosts and not on others. The hosts named are the minority; their "
         "per-host report has the finding's detail and remediation."),
    Code("fleet.host-failing", "The doctor found problems on a host",
         "The host's own report has failing checks or errors; see its findings."),
    Code("fleet.no-report", "A host gave no report",
         "The doctor could not run on this host (the Ray task failed or timed out, the node died) or its "
         "report file could not be read. Nothing is known about it."),
)
