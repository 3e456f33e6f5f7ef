"""Rendering: the views made from the JSON report (terminal, JSON, Markdown, JUnit, GitHub annotations, the fleet
view); the report itself and its redaction are `dflash_doctor.report`. Only the terminal reporter imports rich."""
