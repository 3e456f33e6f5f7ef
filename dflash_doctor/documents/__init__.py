"""The doctor's own documents (reports, baselines, fleet summaries) as files: read safely (`jsondoc`), validated
against the JSON Schemas shipped in `schema/` (`docschema`) and written (`writer`). What a report holds is
`dflash_doctor.report`."""
