"""The JSON report as a document: built from the run's results, redacted before it leaves the machine, validated
and read back to be judged again (`document`), and the masking of secrets in it and in every message (`redact`).
Files and their schemas are `dflash_doctor.documents`; the views made from a report are `dflash_doctor.render`."""
