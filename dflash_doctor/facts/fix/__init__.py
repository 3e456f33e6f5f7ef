"""The fix layer's facts (judged by checks.fix and dflash_doctor.fix): the golden baseline and the hashes of
the files it holds (`baseline`, `file_hashes`), what a remediation would do, asked of the target's installer
(`dryrun`), and what a source build would find (`build_env`)."""
