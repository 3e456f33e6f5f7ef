"""The golden baseline a run is compared with, as facts: the document in the file the user named
(`Context.options["baseline"]`) and the sha256 of the files of each distribution it holds hashes of, read now.

A collector like any other (facts.sections): it provides the `baseline` and `file_hashes` sections, which the
baseline check (checks.fix.baseline) judges after the others, and the report saves, so `judge REPORT.json`
compares again on the hashes this run read. `load` reads a baseline file for the commands that take one.
"""

from __future__ import annotations

from collections.abc import Mapping

from dflash_doctor.context import Context
from dflash_doctor.documents.jsondoc import load_document
from dflash_doctor.facts.fix import file_hashes
from dflash_doctor.facts.fix.baseline_shapes import SCHEMA, Baseline, BaselineFacts
from dflash_doctor.shape import Collected, ShapeError, by_section

__all__ = ["BaselineError", "collect", "load", "section"]


class BaselineError(Exception):
    """A baseline file that cannot be used; the message names the file."""


def load(path: str) -> Baseline:
    """A baseline file, checked against the shipped schema (baseline-v1.json), then read into its shape."""
    data = load_document(path, SCHEMA, "baseline", BaselineError, "; make one with `dflash-doctor baseline save FILE`")
    try:
        return Baseline.from_json(data, "baseline")
    except ShapeError as exc:
        raise BaselineError(f"{path}: not a usable baseline: {exc}") from None


def section(path: str | None) -> BaselineFacts:
    """The `baseline` section for the file at `path` (None: no baseline given); BaselineError for a file that
    cannot be used."""
    return BaselineFacts(file=path or None, expected=load(path) if path else None)


def collect(ctx: Context, earlier: Mapping[str, object]) -> Collected:
    """{"baseline": the document, "file_hashes": the hashes of the distributions it holds hashes of}."""
    path = ctx.options.get("baseline")
    expected = load(str(path)) if path else None
    return by_section(BaselineFacts(file=str(path) if path else None, expected=expected),
                      file_hashes.collect(earlier, expected.hashed_names() if expected is not None else []))
