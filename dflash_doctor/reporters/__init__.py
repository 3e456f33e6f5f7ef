"""Reporters render results; only the terminal reporter imports rich."""
