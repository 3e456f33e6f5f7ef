"""Fact collectors: each gathers sections of facts, in-process or through a probe in the target."""
