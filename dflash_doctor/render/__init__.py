"""Rendering: the JSON report and what is made from it (terminal, JSON, Markdown, JUnit, GitHub annotations,
the fleet view), its redaction and the environment fingerprint. Only the terminal reporter imports rich."""
