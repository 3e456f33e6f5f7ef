"""What one run of the doctor is asked to do: a `Request`, made from the command line by each command
(`commands.options.request_of`) and run by `dflash_doctor.pipeline`. Nothing below the command line sees
argparse."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import field
from typing import Any

from dflash_doctor.context import Context, HeadStart
from dflash_doctor.shape import frozen_dataclass

__all__ = ["Request", "RequestError", "absolute"]


def absolute(path: str) -> str:
    """The path as given, made absolute against the working directory. Symlinks are kept: a venv's
    bin/python is a symlink to the base interpreter, and only its own path starts the venv."""
    return os.path.abspath(os.path.expanduser(path))


class RequestError(Exception):
    """A request that cannot be run (a wrong option, an unusable input file, an unknown check name): reported
    on stderr in one line, exit 2, nothing judged."""


@frozen_dataclass(frozen=True)
class Request:
    """One run: which environment, which checks, and what to do after judging."""

    python: str
    """The target interpreter; "" in a fleet task: the interpreter that runs the doctor on that node."""
    cwd: str
    no_gpu: bool = False
    target_archs: tuple[str, ...] = ()
    verify_hashes: bool = False
    timeout_s: float = 60.0
    only: tuple[str, ...] = ()
    """Check ids or layers to run (none: all)."""
    skip: tuple[str, ...] = ()
    strict: bool = False
    """A warning fails the run too."""
    keep_hosts: bool = False
    """Hostnames and addresses stay in the report (not redacted)."""
    baseline: str | None = None
    """A golden baseline file to compare with (checks.fix.baseline)."""
    verify_fixes: bool = False
    """Ask the target's installer what each failing finding's fixes would do (fix.verify)."""
    profile: str | None = None
    """The profile applied, as the report records it."""
    profile_origin: str | None = None
    """Where that profile came from: "built-in", or the file that defined it."""
    options: Mapping[str, Any] = field(default_factory=dict)
    """Options for the layers that take them (e.g. "serve": the serve command line, "live": the live check's);
    a check that runs only when asked for runs when its id is among them."""
    host: Mapping[str, Any] = field(default_factory=dict)
    """Merged into the report's host record (a fleet node's)."""
    secrets: tuple[str, ...] = ()
    """Masked by value in every output, beside those found in `options`."""
    head_start: HeadStart | None = field(default=None, compare=False, repr=False)
    """What the run started before it imported its checks (`facts.head_start`); not an option: never recorded."""

    @property
    def interpreter(self) -> str:
        """The target interpreter as an absolute path ("": the interpreter running the doctor)."""
        return absolute(self.python or sys.executable)

    @property
    def context(self) -> Context:
        """What the collectors are given: the baseline file among the options (facts.fix.baseline reads it)."""
        options = {**self.options, **({"baseline": self.baseline} if self.baseline else {})}
        return Context(python=self.python, cwd=self.cwd, no_gpu=self.no_gpu, target_archs=self.target_archs,
                       verify_hashes=self.verify_hashes, timeout_s=self.timeout_s, options=options,
                       head_start=self.head_start)

    def asked(self) -> set[str]:
        """The checks and layers asked for by name: in --only, or by their options (a check that runs only when
        asked for, `on_request`: the live server check, the baseline)."""
        return {*self.only, *self.options, *(["baseline"] if self.baseline else [])}

    def recorded_options(self) -> dict[str, Any]:
        """The options as the report records them (`options` of the JSON report)."""
        return {"no_gpu": self.no_gpu, "target_archs": list(self.target_archs), "only": list(self.only),
                "skip": list(self.skip), "strict": self.strict, "profile": self.profile,
                "profile_origin": self.profile_origin, "baseline": self.baseline}
