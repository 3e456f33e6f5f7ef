"""The doctor's own documents (reports, baselines, fleet summaries): the report built from results and read back
(`report`), masked before it leaves the machine (`redact`), read safely (`jsondoc`), validated against the JSON
Schemas shipped in `schema/` (`docschema`) and written (`writer`)."""
