"""The guard vLLM puts around its flash_attn imports, read from real vLLM source, judged against real exceptions."""

from __future__ import annotations

import pytest
from vllm_sources import vllm_source

from dflash_doctor.checks.python.guards import evaluate_test, judge_site
from dflash_doctor.facts.python.vllm_scan import scan_package, scan_source
from dflash_doctor.knowledge.vllm_imports import EXTERNAL_KERNEL_MODULES, SERVING_PATH_SITES

NAMESPACE_MISS = ("ModuleNotFoundError", "ImportError", "Exception", "BaseException")  # No module named 'flash_attn.ops'
UNDEFINED_SYMBOL = ("ImportError", "Exception", "BaseException")  # flash_attn_2_cuda...so: undefined symbol
SERVING_FILES = tuple(sorted({path for path, _ in SERVING_PATH_SITES.value}))


def rotary_site(version: str) -> dict:
    scan = scan_package(str(vllm_source(version)), EXTERNAL_KERNEL_MODULES.value, SERVING_FILES)
    sites = [s for s in scan["sites"] if s["module"] == "flash_attn.ops.triton.rotary"]
    assert len(sites) == 1, scan
    return sites[0]


@pytest.mark.parametrize("version", ["0.20.1", "0.22.0"])
def test_find_spec_guard_of_vllm_before_0_24_lets_a_namespace_flash_attn_kill_serve(version: str) -> None:
    site = rotary_site(version)
    assert any(g["kind"] == "if" and "find_spec('flash_attn')" in g["test"] for g in site["guards"])
    assert judge_site(site, NAMESPACE_MISS, {"flash_attn": True}).outcome == "raises"
    assert judge_site(site, UNDEFINED_SYMBOL, {"flash_attn": True}).outcome == "raises"


@pytest.mark.parametrize("version", ["0.20.1", "0.24.0"])
def test_absent_flash_attn_is_harmless_in_every_version(version: str) -> None:
    site = rotary_site(version)
    verdict = judge_site(site, NAMESPACE_MISS, {"flash_attn": False})
    assert verdict.outcome in ("skipped", "caught")


def test_suppress_in_vllm_0_24_survives_a_namespace_package_but_not_an_undefined_symbol() -> None:
    site = rotary_site("0.24.0")
    assert site["statement"] == "import_module('flash_attn.ops.triton.rotary')"
    caught = judge_site(site, NAMESPACE_MISS, {"flash_attn": True})
    assert caught.outcome == "caught" and caught.caught_by is not None and caught.caught_by.catches == ["ModuleNotFoundError"]
    assert judge_site(site, UNDEFINED_SYMBOL, {"flash_attn": True}).outcome == "raises"


def test_a_process_killed_by_a_signal_is_caught_by_no_guard() -> None:
    site = rotary_site("0.24.0")
    assert judge_site(site, ("<signal>",), {"flash_attn": True}).outcome == "raises"


def test_full_scan_of_vllm_0_24_finds_guarded_external_imports_quickly() -> None:
    scan = scan_package(str(vllm_source("0.24.0")), EXTERNAL_KERNEL_MODULES.value)
    assert scan["errors"] == []
    assert scan["files_scanned"] > 1500
    modules = {s["module"].split(".")[0] for s in scan["sites"]}
    assert {"flash_attn", "flashinfer"} <= modules


@pytest.mark.parametrize(
    ("test", "resolves", "expected"),
    [
        ("find_spec('flash_attn') is not None", {"flash_attn": True}, True),
        ("find_spec('flash_attn') is not None", {"flash_attn": False}, False),
        ("not current_platform.is_cpu() and find_spec('flash_attn') is not None", {"flash_attn": True}, True),
        ("current_platform.is_rocm()", {}, False),
        ("some_flag and current_platform.is_cuda()", {}, None),
        ("some_flag or current_platform.is_cuda()", {}, True),
    ],
)
def test_guard_tests_are_evaluated_for_a_cuda_box(test: str, resolves: dict, expected: bool | None) -> None:
    assert evaluate_test(test, resolves) is expected


def test_try_except_import_error_catches_a_module_not_found_but_type_checking_never_runs() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import flash_attn\n"
        "try:\n    from flash_attn import flash_attn_varlen_func\nexcept ImportError:\n    pass\n"
    )
    typing_only, guarded = scan_source(source, "x.py", ["flash_attn"])
    assert judge_site(typing_only, NAMESPACE_MISS, {"flash_attn": True}).outcome == "skipped"
    assert judge_site(guarded, NAMESPACE_MISS, {"flash_attn": True}).outcome == "caught"
