"""The check plugin API (`Context`, what a run was asked, lives below it in `dflash_doctor.context`).

A check declares a stable id, the layer it belongs to, a title, the fact sections it judges, what it
needs to run (the target interpreter, a GPU, other checks' results), and judges facts into findings.
Checks never collect facts themselves: collectors (see `dflash_doctor.facts.sections`) do, so that a saved
report can be judged again with nothing but its facts.

Every built-in check subclasses `Check`, the one declared base (its docstring lists every attribute and its
default). A third-party check is published under the entry-point group `dflash_doctor.checks`, exactly as the
built-in ones are; it may subclass `Check` or only carry the same attributes: `dflash_doctor.guest` validates what
it declares (the one place a check's attributes are read without this class's guarantee) and wraps it.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from dflash_doctor.context import Context
from dflash_doctor.model import CheckResult, Finding
from dflash_doctor.shape import SectionFailure, Shape, section_json, section_of_json

if TYPE_CHECKING:
    from dflash_doctor.codes import Code

__all__ = ["Check", "Context", "Facts", "SectionError"]


S = TypeVar("S", bound="Shape")


class SectionError(Exception):
    """A fact section a check needs could not be collected (or, read from a saved report, does not have its
    declared shape); the check becomes an `error` result naming the section."""

    def __init__(self, section: str, reason: str, what: str = "could not be collected") -> None:
        super().__init__(f"facts {section!r} {what}: {reason}")
        self.section = section
        self.reason = reason
        self.what = what


# Sections read through their shapes, by the identity of the stored data: each check gets a Facts of its own
# over the same data, and a 300-distribution environment is worth reading once.
_LOADED: dict[tuple[int, type[Shape]], tuple[Any, Any]] = {}
_LOADED_MAX = 64
_LOADED_LOCK = threading.Lock()  # a stopped run judges again while its worker thread may still be judging


class Facts(Mapping[str, Any]):
    """Collected fact sections by name, plus the results of the checks that ran before.

    A section is held as collected: an instance of its shape, or (a saved report's, a third-party collector's)
    JSON, read through its shape when a check asks. A section that failed to collect is a `SectionFailure`
    (in JSON, its marker: `shape.section_of_json`); reading it raises `SectionError`, which the runner turns into
    an `error` result naming the section.
    """

    def __init__(self, sections: Mapping[str, object], prior: Mapping[str, CheckResult] | None = None) -> None:
        self._sections = {name: section_of_json(name, value) for name, value in sections.items()}
        self.prior: Mapping[str, CheckResult] = dict(prior or {})
        self.unavailable: dict[str, str] = {}
        """The sections read as optional that were there but unusable (their collector failed, or not of their
        shape), with why: the check judged without them, and the runner says so (never a quiet pass)."""

    def __getitem__(self, name: str) -> Any:
        value = self._sections[name]
        if isinstance(value, SectionFailure):
            raise SectionError(name, value.reason)
        return value

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._sections)

    def __len__(self) -> int:
        return len(self._sections)

    def optional(self, name: str) -> Any:
        """A section the check can judge without (it only sharpens a verdict or a remedy): None when it
        was not collected or its collector failed."""
        value = self._sections.get(name)
        if isinstance(value, SectionFailure):
            self.unavailable[name] = value.reason
            return None
        return value

    def section(self, shape: type[S]) -> S:
        """The section `shape.SECTION`, read through its declared shape (`dflash_doctor.shape`).

        Raises `SectionError` when the section was not collected or does not have the shape (a saved
        report's facts edited by hand, or from another tool): the check becomes an `error` result
        that names the section and the field."""
        name = shape.SECTION
        if name not in self._sections:
            raise SectionError(name, "not among the facts")
        return _load(name, shape, self[name])

    def optional_section(self, shape: type[S]) -> S | None:
        """A section the check can judge without, read through its shape: None when it was not collected,
        its collector failed, or it does not have the shape."""
        value = self.optional(shape.SECTION)
        if value is None:
            return None
        try:
            return _load(shape.SECTION, shape, value)
        except SectionError as exc:
            self.unavailable[shape.SECTION] = exc.reason
            return None

    def raw(self, name: str) -> object:
        """The section as stored, a failure included (for saving into a report: `shape.section_json`)."""
        return self._sections.get(name)


def _load(name: str, shape: type[S], value: Any) -> S:
    if isinstance(value, shape):
        return value
    if isinstance(value, Shape):  # another shape of the section (a third party's): read from its JSON form
        value = section_json(value)
    with _LOADED_LOCK:
        cached = _LOADED.get((id(value), shape))
    if cached is not None and cached[0] is value:
        return cached[1]  # type: ignore[no-any-return]
    try:
        loaded = shape.from_json(value, name)
    except ValueError as exc:  # facts.shape.ShapeError: "facts 'x' are malformed: FIELD: PROBLEM"
        reason = str(exc).split(": ", 1)[-1]
        raise SectionError(name, reason, "do not have their declared shape") from exc
    with _LOADED_LOCK:
        if len(_LOADED) >= _LOADED_MAX:
            _LOADED.pop(next(iter(_LOADED)))
        _LOADED[(id(value), shape)] = (value, loaded)
    return loaded


class Check(ABC):
    """The one declared contract of a check: subclass it, set `id`, `layer`, `title` and `needs`, and write
    `judge`; every other attribute has a default here, and the registry, the runner and the pipeline read only
    what this class declares.

    Attributes (class attributes):

    - `id` (str, required): stable, lower-case, dashed ("namespaces"); it prefixes the check's finding ids.
    - `layer` (str, required): the layer of the stack ("python", "gpu", "kernels", "models", "serve", or a
      plugin's own); `--only`/`--skip` select by it as by the id.
    - `title` (str, required): what the check judges, as the report shows it.
    - `needs` (frozenset of section names, required): the fact sections `judge` reads; they are collected
      before it runs, and a section that could not be collected makes it an `error` result naming the section.
      A check reads a section through its shape (`facts.section(Shape)`): `Shape.SECTION` is in `needs`.
    - `wants` (default: none): sections it reads when they are there (`facts.optional_section(Shape)`): collected
      with the rest; the check judges without one that is missing, and the runner says so.
    - `after` (default: none): ids of checks whose results this one reads (`facts.prior`); they run first, and
      selecting this check pulls them in.
    - `requires_gpu` (default: False): skipped, unjudged, under `--no-gpu`.
    - `on_request` (default: False): runs only when asked for by its id or layer (`--only live`), never in a
      plain run.
    - `judged_apart` (default: False): judged in a process of its own (a third-party check), so the runner may
      judge several side by side.
    - `codes` (default: none): the finding `Code`s the check reports, for `dflash-doctor explain` and the docs'
      tables; a plugin may leave it empty.

    `judge(facts)` returns the findings (at least one); it never collects facts itself.
    """

    id: ClassVar[str]
    layer: ClassVar[str]
    title: ClassVar[str]
    needs: ClassVar[frozenset[str]]
    wants: ClassVar[frozenset[str]] = frozenset()
    after: ClassVar[frozenset[str]] = frozenset()
    requires_gpu: ClassVar[bool] = False
    on_request: ClassVar[bool] = False
    judged_apart: ClassVar[bool] = False
    codes: ClassVar[tuple[Code, ...]] = ()

    @abstractmethod
    def judge(self, facts: Facts) -> Iterable[Finding]:
        """The findings of these facts (at least one)."""
