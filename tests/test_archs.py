"""Which compiled GPU code runs on which compute capability: the rules of knowledge/cuda.py as specs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from dflash_doctor.knowledge import Fact
from dflash_doctor.knowledge import cuda as facts
from dflash_doctor.knowledge.archs import (
    Arch,
    arch_sort_key,
    compute_capability,
    coverage,
    parse_arch,
    parse_target_archs,
    ptx_jit_possible,
    sass_runs_on,
)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("sm_86", Arch("sm", 8, 6, "")),
        ("sm_90a", Arch("sm", 9, 0, "a")),
        ("sm_100f", Arch("sm", 10, 0, "f")),
        ("sm_121", Arch("sm", 12, 1, "")),
        ("compute_90", Arch("compute", 9, 0, "")),
        ("compute_120a", Arch("compute", 12, 0, "a")),
        ("SM_75", Arch("sm", 7, 5, "")),
    ],
)
def test_arch_names_parse_with_the_last_digit_as_minor(name: str, expected: Arch) -> None:
    assert parse_arch(name) == expected
    assert str(parse_arch(name)) == name.lower()


@pytest.mark.parametrize("bad", ["sm86", "sm_8", "sm_90b", "gfx90a", "compute_", ""])
def test_malformed_arch_names_are_value_errors(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_arch(bad)


@pytest.mark.parametrize(
    ("spelling", "cc"),
    [
        ("sm_90a", (9, 0)),
        ("compute_100f", (10, 0)),
        ("8.6", (8, 6)),
        ("12.0", (12, 0)),
        ("89", (8, 9)),
        ((10, 3), (10, 3)),
    ],
)
def test_compute_capability_accepts_arch_names_and_cc_spellings(
    spelling: str | tuple[int, int], cc: tuple[int, int]
) -> None:
    assert compute_capability(spelling) == cc


def test_target_arch_option_lists_unique_capabilities_in_order() -> None:
    assert parse_target_archs("sm_86,sm_90a, 9.0 12.0") == [(8, 6), (9, 0), (12, 0)]
    with pytest.raises(ValueError):
        parse_target_archs(" , ")


def test_arch_names_sort_numerically_not_lexically() -> None:
    names = ["sm_100", "sm_90a", "sm_80", "sm_90", "sm_120", "sm_86"]
    assert sorted(names, key=arch_sort_key) == ["sm_80", "sm_86", "sm_90", "sm_90a", "sm_100", "sm_120"]


# --- SASS --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sass", "cc", "runs"),
    [
        ("sm_80", (8, 0), True),
        ("sm_80", (8, 6), True),  # later minor of the same major
        ("sm_80", (8, 9), True),
        ("sm_86", (8, 0), False),  # never backwards
        ("sm_80", (9, 0), False),  # never across majors
        ("sm_90", (10, 0), False),
        ("sm_100", (10, 3), True),
        ("sm_120", (12, 1), True),
        ("sm_100", (12, 0), False),
    ],
)
def test_plain_sass_runs_on_same_major_equal_or_later_minor(
    sass: str, cc: tuple[int, int], runs: bool
) -> None:
    assert sass_runs_on(sass, cc) is runs


@pytest.mark.parametrize(
    ("sass", "cc", "runs"),
    [
        ("sm_90a", (9, 0), True),
        ("sm_100a", (10, 0), True),
        ("sm_100a", (10, 3), False),
        ("sm_120a", (12, 1), False),
        ("sm_90a", (10, 0), False),
    ],
)
def test_arch_specific_sass_runs_only_on_exactly_its_capability(
    sass: str, cc: tuple[int, int], runs: bool
) -> None:
    assert sass_runs_on(sass, cc) is runs


@pytest.mark.parametrize(
    ("sass", "cc", "runs"),
    [
        ("sm_100f", (10, 0), True),
        ("sm_100f", (10, 3), True),
        ("sm_103f", (10, 0), False),
        ("sm_100f", (11, 0), False),
        ("sm_100f", (12, 0), False),
        ("sm_120f", (12, 1), True),
    ],
)
def test_family_specific_sass_runs_within_its_family(sass: str, cc: tuple[int, int], runs: bool) -> None:
    assert sass_runs_on(sass, cc) is runs


def test_family_rule_reproduces_the_documented_family_table() -> None:
    every_cc = {cc for members in facts.FAMILY_MEMBERS.value.values() for cc in members}
    for family, members in facts.FAMILY_MEMBERS.value.items():
        assert {cc for cc in every_cc if sass_runs_on(f"sm_{family}", cc)} == set(members)
        assert {cc for cc in every_cc if ptx_jit_possible(f"compute_{family}", cc)} == set(members)


def test_tegra_sass_runs_only_on_its_exact_capability() -> None:
    assert sass_runs_on("sm_87", (8, 7)) is True
    assert sass_runs_on("sm_80", (8, 7)) is False  # desktop Ampere cubin on Orin
    assert sass_runs_on("sm_87", (8, 9)) is False  # Orin cubin on desktop Ada


def test_sass_questions_about_ptx_names_are_value_errors() -> None:
    with pytest.raises(ValueError):
        sass_runs_on("compute_90", (9, 0))
    with pytest.raises(ValueError):
        ptx_jit_possible("sm_90", (9, 0))


# --- PTX ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ptx", "cc", "jit"),
    [
        ("compute_80", (8, 0), True),
        ("compute_80", (9, 0), True),  # forward across majors: the point of PTX
        ("compute_80", (12, 1), True),
        ("compute_90", (8, 9), False),  # never backwards
        ("compute_120", (10, 0), False),
        ("compute_90a", (9, 0), True),
        ("compute_90a", (10, 0), False),  # arch-specific PTX is not forward compatible
        ("compute_100a", (10, 3), False),
        ("compute_100f", (10, 3), True),
        ("compute_100f", (11, 0), False),
        ("compute_100f", (12, 0), False),
    ],
)
def test_ptx_jit_rules(ptx: str, cc: tuple[int, int], jit: bool) -> None:
    assert ptx_jit_possible(ptx, cc) is jit


NVCC = shutil.which("nvcc")


@pytest.mark.skipif(NVCC is None, reason="nvcc not on PATH")
@pytest.mark.parametrize(
    ("ptx", "sass"),
    [
        ("compute_100f", "sm_103"),
        ("compute_100f", "sm_120"),
        ("compute_90a", "sm_100a"),
        ("compute_100", "sm_120"),
    ],
)
def test_ptx_rules_agree_with_what_ptxas_will_compile(tmp_path: Path, ptx: str, sass: str) -> None:
    """The offline compiler applies the same PTX-to-SASS compatibility as the driver's JIT."""
    assert NVCC is not None
    source = tmp_path / "k.cu"
    source.write_text("__global__ void k(int* p) { *p = 1; }\n")
    done = subprocess.run(
        [NVCC, "-cubin", "-gencode", f"arch={ptx},code={sass}", "-o", str(tmp_path / "k.cubin"), str(source)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode == 0) is ptx_jit_possible(ptx, compute_capability(sass)), done.stderr


# --- coverage ----------------------------------------------------------------------------------------------


def test_coverage_prefers_a_runnable_cubin_over_ptx() -> None:
    assert coverage(["sm_80", "sm_90a"], ["compute_90"], (9, 0)) == {"status": "sass", "by": "sm_90a"}


def test_coverage_picks_the_closest_cubin_of_the_major() -> None:
    assert coverage(["sm_80", "sm_86"], [], (8, 9)) == {"status": "sass", "by": "sm_86"}


def test_coverage_falls_back_to_ptx_jit_with_the_newest_usable_ptx() -> None:
    got = coverage(["sm_80", "sm_90a"], ["compute_80", "compute_90"], (12, 0))
    assert got == {"status": "ptx-jit", "by": "compute_90"}


def test_coverage_is_none_when_neither_cubin_nor_ptx_fits() -> None:
    # the classic flash-attn wheel built for sm_80/sm_90a on a Blackwell GPU
    assert coverage(["sm_80", "sm_90a"], ["compute_90a"], "sm_100") == {"status": "none", "by": None}


# --- knowledge ---------------------------------------------------------------------------------------------


def test_every_cuda_fact_names_its_source() -> None:
    found = [v for v in vars(facts).values() if isinstance(v, Fact)]
    assert len(found) >= 10
    for fact in found:
        assert fact.source and fact.read_from


@pytest.mark.parametrize(
    ("encoded", "text"), [(12080, "12.8"), (13000, "13.0"), (11020, "11.2"), (9020, "9.2")]
)
def test_cuda_driver_version_encoding_decodes(encoded: int, text: str) -> None:
    assert facts.decode_cuda_version(encoded) == text


@pytest.mark.parametrize(
    ("cuda", "driver"),
    [
        ("12.8", "570.26"),
        ("12.9", "575.51.03"),
        ("13.0", "580.65.06"),
        ("12.4", "550.54.14"),
        ("11.8", "520.61.05"),
        ("12.6.3", "560.28.03"),
    ],
)
def test_minimum_driver_for_a_cuda_runtime_is_its_ga_driver(cuda: str, driver: str) -> None:
    assert facts.min_driver_for_cuda(cuda) == driver


def test_unknown_cuda_version_has_no_minimum_driver() -> None:
    assert facts.min_driver_for_cuda("99.9") is None


def test_driver_versions_compare_numerically() -> None:
    assert facts.driver_version_tuple("570.124.06") > facts.driver_version_tuple("570.26")
