"""The doctor's own documents (reports, baselines, fleet summaries): reading them safely (`jsondoc`) and
validating them against the JSON Schemas shipped in `schema/` (`docschema`)."""
