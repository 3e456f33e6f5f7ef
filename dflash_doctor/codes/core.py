"""Codes the doctor itself emits, whatever the layer."""

from dflash_doctor.codes import Code

CODES = (
    Code("doctor.check-crashed", "A check raised an exception",
         "The doctor could not complete this check: its own code raised. This is a bug in the check, not a "
         "problem with your environment. The traceback is in the finding's detail; please attach the JSON report "
         "to a bug report."),
    Code("doctor.facts-unavailable", "Facts a check needs could not be collected",
         "The probe or collector that gathers this check's facts failed (the target interpreter could not be "
         "started, it crashed, or a collector raised). The check could not judge anything. The detail says why; "
         "fix that (e.g. a wrong --python path) and run again."),
    Code("doctor.skipped-no-gpu", "Skipped: --no-gpu",
         "This check needs a GPU and --no-gpu was given (as in a CI image build). Nothing was judged."),
    Code("doctor.plugin-failed", "A third-party check could not be loaded",
         "A distribution registered a check under the `dflash_doctor.checks` entry-point group, but loading it "
         "raised or it is not a check. Fix or uninstall that plugin, or set DFLASH_DOCTOR_DISABLE_PLUGIN_AUTOLOAD=1 "
         "to run only the built-in checks."),
)
