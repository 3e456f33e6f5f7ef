"""Names, requirements and versions of distributions, read with `packaging` in the doctor's process."""

from __future__ import annotations

from importlib import metadata

import pytest

from dflash_doctor.facts.python.envfacts import canonical, release, requirement_name, version_tuple
from dflash_doctor.facts.python.environment_shapes import Distributions


@pytest.mark.parametrize(("text", "name"), [
    ("flash_attn>=2.8", "flash-attn"),
    ("Flash.Attn-4[cu13] ; python_version >= '3.10'", "flash-attn-4"),
    ("torch @ https://download.pytorch.org/whl/cu130/torch-2.11.0.whl", "torch"),
    ("nvidia-cutlass-dsl (>=4.3)", "nvidia-cutlass-dsl"),
    ("not a requirement ===", None),
])
def test_a_requirement_names_its_distribution_as_pep_508_reads_it(text: str, name: str | None) -> None:
    assert requirement_name(text) == name


@pytest.mark.parametrize(("version", "parts"), [
    ("0.20.1", (0, 20, 1)), ("0.24.0rc1", (0, 24, 0)), ("2.11.0+cu130", (2, 11, 0)),
    ("1!0.3", (0, 3)), ("0.25.0.dev12+g1234abc", (0, 25, 0)), ("unknown", None), (None, None),
])
def test_the_release_of_a_distribution_version(version: str | None, parts: tuple[int, ...] | None) -> None:
    assert release(version) == parts


@pytest.mark.parametrize(("text", "parts"), [
    ("12.8", (12, 8)), ("580.159.04", (580, 159, 4)), ("2.32", (2, 32)), ("0.11.1rc1", (0, 11, 1)),
    ("0.24.0.dev5+g1234", (0, 24, 0)), ("12.4.1+cu124", (12, 4, 1)), ("1rc1", (1,)), ("rc1", ()), ("", ()), (None, ()),
])
def test_a_tool_version_is_ordered_by_its_leading_numbers(text: str | None, parts: tuple[int, ...]) -> None:
    assert version_tuple(text) == parts


def test_the_requirers_of_a_distribution_are_found_from_real_installed_metadata() -> None:
    # The doctor's own environment: pytest requires pluggy, whatever the spelling of the name.
    items = [{"name": d.metadata["Name"], "canonical": canonical(d.metadata["Name"]), "version": d.version,
              "requires": d.requires or []} for d in metadata.distributions()]
    dists = Distributions.from_json({"items": items})
    assert "pytest" in [d.canonical for d in dists.requiring("Pluggy")]
    assert canonical("Flash_Attn.4") == "flash-attn-4"


def test_a_requirer_is_found_by_the_name_pep_508_reads_in_every_installed_requires_dist_line() -> None:
    # `requiring` reads each line's leading name without parsing it whole: the same name the parser reads wherever
    # the line parses, and the leading name (as ever) where it does not.
    import re

    from dflash_doctor.facts.python.environment_shapes import _required_name

    lines = {r for d in metadata.distributions() for r in d.requires or []}
    lines |= {"foo (>=1.0.*)", "foo- >=1", " foo", "foo.bar-", "Foo.Bar_baz[x]>=1", "foo @ https://x/y.whl", "-foo", "",
              "foo ; extra == 'x'", "foo.[x]", "a--b c", "foo\tbar", "not a requirement ==="}
    assert len(lines) > 50
    for line in lines:
        parsed = requirement_name(line)
        leading = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line)
        assert _required_name(line) == (parsed if parsed is not None else canonical(leading[1]) if leading else None), line


def test_lines_for_an_extra_are_left_out_as_packaging_leaves_them_out_and_a_url_keeps_its_own_semicolon() -> None:
    # `_applicable` leaves a line whose whole marker is `extra == "x"` unparsed; packaging decides every other line.
    from packaging.requirements import InvalidRequirement, Requirement

    from dflash_doctor.facts.python.envfacts import applicable_requirements

    lines = ["a; extra == 'x'", 'b ; extra=="y"', "c>=1 ; extra == \"z\" ", "d; extra == ''", "e; python_version >= '3'",
             "f @ https://example.org/f.whl;extra==\"a\"", "g @ https://example.org/g.whl ; extra == 'a'",
             "h; extra == 'x' and python_version >= '3'", "i", "j; 'x' == extra", "k; extra == 'x'\n"]
    env = {"python_version": "3.11", "python_full_version": "3.11.7", "sys_platform": "linux",
           "platform_system": "Linux", "platform_machine": "x86_64", "implementation_name": "cpython",
           "platform_python_implementation": "CPython", "os_name": "posix", "platform_release": "",
           "platform_version": "", "implementation_version": "3.11.7"}
    expected = []
    for line in lines:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if requirement.marker is None or requirement.marker.evaluate({**env, "extra": ""}):
            expected.append(requirement.name)
    assert [r.name for r in applicable_requirements(lines, env)] == expected
    assert "f" in expected  # the `;` is the URL's: no marker, so it applies
