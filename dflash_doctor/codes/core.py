"""Codes the doctor itself emits, whatever the layer."""

from dflash_doctor.codes import Code

PLUGIN_FOREIGN_IDS = Code(
    "doctor.plugin-foreign-ids", "A third-party check reported findings under ids that are not its own",
    "A plugin may report findings only under its own check's id (`<its check id>.<name>`): a finding under the "
    "doctor's own ids (`doctor.interrupted`) or a built-in check's (`distributions.ok`) would speak for them, and "
    "a reader, a CI gate or a baseline comparison that goes by id would take the plugin's word for the doctor's "
    "(a `doctor.interrupted` makes a complete run look stopped). The doctor dropped those findings; this one "
    "names the ids the plugin used. Its check is an error and the doctor exits 1. "
    "Report it to the plugin's authors (its findings must begin with its check id), or set "
    "DFLASH_DOCTOR_DISABLE_PLUGIN_AUTOLOAD=1.")
"""Built by the guest that runs the plugin (`dflash_doctor.guest`), hence named."""

CODES = (
    Code("doctor.check-crashed", "A check raised an exception",
         "The doctor could not complete this check: its own code raised. This is a bug in the check, not a "
         "problem with your environment. The traceback is in the finding's detail; please attach the JSON report "
         "to a bug report."),
    Code("doctor.facts-unavailable", "Facts a check needs could not be collected",
         "The probe or collector that gathers this check's facts failed (the target interpreter could not be "
         "started, it crashed, or a collector raised), or, in a saved report judged again, the section is missing or "
         "does not have its declared shape (the detail names the field). The check could not judge anything. The "
         "detail says why; fix that (e.g. a wrong --python path) and run again."),
    Code("doctor.facts-partial", "A check judged without facts it reads when they are there",
         "A section this check reads when it was collected (it sharpens a verdict or a remedy) is there but "
         "unusable: its collector raised (the detail says what), or, in a saved report judged again, it does not "
         "have its declared shape. The check judged without it, so what it would have shown is not judged: an "
         "error (exit 1), never a quiet pass. Fix the cause the finding names and run again; a collector that "
         "raised is a bug in the doctor: please attach the JSON report to a bug report."),
    Code("doctor.skipped-no-gpu", "Skipped: --no-gpu",
         "This check needs a GPU and --no-gpu was given (as in a CI image build). Nothing was judged."),
    Code("doctor.plugin-failed", "A third-party check could not be loaded",
         "A distribution registered a check under the `dflash_doctor.checks` entry-point group, but loading it "
         "raised (anything, `SystemExit` included), did not finish within --timeout, or it is not a check. Fix or uninstall that plugin, or set DFLASH_DOCTOR_DISABLE_PLUGIN_AUTOLOAD=1 "
         "to run only the built-in checks."),
    Code("doctor.plugin-invalid", "A third-party check declares something the doctor cannot use",
         "A check registered under the `dflash_doctor.checks` entry-point group loaded, but what it declares is not "
         "usable: its `id` or `layer` is not a lower-case name (letters, digits, '.', '_', '-'), its `title` is not "
         "a non-empty string, `needs` or `after` is not a set of names, `requires_gpu` is not a bool, its id is "
         "taken or reserved, or its `judge` returned something other than `Finding` objects with valid ids, a finding "
         "whose evidence is not JSON data or nests deeper than 16 levels, or more than 1000 findings (the first "
         "1000 are kept). The "
         "finding names the plugin and its entry point; fix the plugin, or uninstall it."),
    Code("doctor.plugin-crashed", "A third-party check raised while judging",
         "A plugin's `judge` raised, and the doctor caught it, whatever it was: an exception, `SystemExit` (a "
         "`sys.exit()` call) or `KeyboardInterrupt`; or the process it judges in (a child of the doctor's "
         "interpreter) died (a segfault, `os._exit`), wrote more than its cap, or gave no answer the doctor can "
         "read (the title says which; the detail holds the end of what it printed). Its check is an error and "
         "the doctor exits 1; the other "
         "checks ran as usual. This is a bug in the plugin (the finding names it and its entry point): report it "
         "to its authors, or set DFLASH_DOCTOR_DISABLE_PLUGIN_AUTOLOAD=1 to run only the built-in checks."),
    PLUGIN_FOREIGN_IDS,
    Code("doctor.plugin-timeout", "A third-party check did not finish within --timeout",
         "A plugin's `judge` was still running after --timeout seconds. A check only judges facts already "
         "collected, so it should take milliseconds; the doctor killed the process it judges in (whatever it "
         "was doing, a C call that holds the GIL included) and reports its check as an error. Report it to the "
         "plugin's authors, or set DFLASH_DOCTOR_DISABLE_PLUGIN_AUTOLOAD=1."),
    # ------------------------------------------------------------------ the doctor's own run
    Code("doctor.interrupted", "The doctor was stopped before it finished",
         "The doctor received SIGTERM or SIGINT (a CI job's timeout, a Ctrl-C) while it was collecting facts, or, "
         "with --verify-fixes, while it was asking the installer about the fixes. The report is partial: checks "
         "whose facts had been collected were judged, the rest are marked `doctor.incomplete`; installers that were "
         "asked were stopped, and the fixes are not checked. If a probe hung, the facts it was collecting name the "
         "interpreter; run again with a lower --timeout to see which probe it was."),
    Code("doctor.crashed", "The doctor itself failed during the run",
         "Code of the doctor outside any single check raised (the runner, a reporter, the baseline comparison). "
         "This is a bug in the doctor, not a problem with your environment. The report is partial; the "
         "traceback is in the finding's detail. Please attach the JSON report to a bug report."),
    Code("doctor.incomplete", "Not judged: the run stopped first",
         "This check's facts were not collected before the doctor stopped (see `doctor.interrupted` or "
         "`doctor.crashed` in the same report). Nothing was judged; run the doctor again."),
)
