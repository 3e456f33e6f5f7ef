"""The knowledge tables for flash-attention and vLLM: every fact carries its source and the version it was
read from, every value has the type its annotation promises, and the version tables are well formed.

The facts that can be re-derived from source are re-derived from the real sdists, straight out of the
tarball: vLLM's and flash-attn's, downloaded from PyPI once into the test cache
(``$DFLASH_DOCTOR_TEST_CACHE``, default ``~/.cache/dflash-doctor-tests``; ``python3 tests/warm_cache.py``
fills it ahead of a run).
"""

from __future__ import annotations

import ast
import itertools
import re
import tarfile
import types
import typing
from pathlib import Path
from typing import Any, Union

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version
from vllm_sources import pypi_sdist

from dflash_doctor.knowledge import Fact
from dflash_doctor.knowledge import flash_attn as fa
from dflash_doctor.knowledge import vllm as vl

MODULES = (fa, vl)


def _facts(module: types.ModuleType) -> dict[str, Fact[Any]]:
    return {name: obj for name, obj in vars(module).items() if isinstance(obj, Fact)}


ALL_FACTS = [(m.__name__.rsplit(".", 1)[1], name, f) for m in MODULES for name, f in _facts(m).items()]
FACT_IDS = [f"{mod}.{name}" for mod, name, _ in ALL_FACTS]


def _conforms(value: Any, tp: Any) -> bool:
    """`value` is an instance of the (generic) type `tp`: str, int, bool, None, tuple[...], dict[...], X | Y."""
    if tp is Any:
        return True
    if tp is None or tp is type(None):
        return value is None
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (Union, types.UnionType):
        return any(_conforms(value, a) for a in args)
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_conforms(v, args[0]) for v in value)
        return len(value) == len(args) and all(_conforms(v, a) for v, a in zip(value, args))
    if origin is dict:
        return isinstance(value, dict) and all(
            _conforms(k, args[0]) and _conforms(v, args[1]) for k, v in value.items()
        )
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(tp, type):
        return isinstance(value, tp)
    raise AssertionError(f"test cannot check type {tp!r}")


# --- invariants of every fact --------------------------------------------------------------------------


def test_modules_have_facts_and_docstrings() -> None:
    for module in MODULES:
        assert (module.__doc__ or "").strip(), module.__name__
        assert len(_facts(module)) >= 10, module.__name__


@pytest.mark.parametrize(("module", "name", "fact"), ALL_FACTS, ids=FACT_IDS)
def test_fact_has_source_and_version(module: str, name: str, fact: Fact[Any]) -> None:
    assert re.fullmatch(r"[A-Z][A-Z0-9_]*", name), f"{name}: facts are UPPER_CASE constants"
    assert isinstance(fact.source, str) and fact.source.strip(), f"{name}: empty source"
    assert isinstance(fact.read_from, str) and fact.read_from.strip(), f"{name}: empty read_from"
    assert isinstance(fact.note, str)
    assert "pending" not in fact.read_from.lower(), f"{name}: unreviewed"
    # read_from names a version or a commit: some digit-dot version or hex id
    assert re.search(r"\d+\.\d+|[0-9a-f]{7,}", fact.read_from), f"{name}: read_from names no version"


@pytest.mark.parametrize(("module", "name", "fact"), ALL_FACTS, ids=FACT_IDS)
def test_fact_value_matches_annotation(module: str, name: str, fact: Fact[Any]) -> None:
    mod = fa if module == "flash_attn" else vl
    hints = typing.get_type_hints(mod)
    assert name in hints, f"{name} has no Fact[...] annotation"
    annotation = hints[name]
    assert typing.get_origin(annotation) is Fact, f"{name}: annotated {annotation!r}, not Fact[...]"
    (value_type,) = typing.get_args(annotation)
    assert _conforms(fact.value, value_type), f"{name}: {fact.value!r} is not a {value_type!r}"


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_all_lists_exactly_the_facts(module: types.ModuleType) -> None:
    exported = set(module.__all__)
    assert len(exported) == len(module.__all__), "duplicate in __all__"
    assert exported == set(_facts(module)), exported ^ set(_facts(module))


def test_facts_are_frozen() -> None:
    with pytest.raises(AttributeError):
        fa.FA2_MAX_HEAD_DIM.value = 512  # type: ignore[misc]


# --- version tables ------------------------------------------------------------------------------------

RANGE_TABLES = [
    vl.ROTARY_FLASH_ATTN_GUARD,
    vl.DFLASH_TARGET_MODEL_TYPE_ALLOWLIST,
    vl.DFLASH_MASK_TOKEN_LOOKUP,
    vl.DFLASH_TARGET_LAYER_IDS_PLUS_ONE,
    vl.SPEC_DECODE_SLOT_RULES,
    vl.DFLASH_MAX_DRAFT_SEQS,
    vl.NON_CAUSAL_BACKENDS,
    vl.DFLASH_NON_CAUSAL_SCOPE,
]


@pytest.mark.parametrize("table", RANGE_TABLES, ids=lambda f: f.source[:40])
def test_version_ranges_are_ordered(table: Fact[Any]) -> None:
    for entry in table.value:
        first, last = Version(entry[0]), Version(entry[1])
        assert first <= last, entry
    firsts = [Version(e[0]) for e in table.value]
    assert firsts == sorted(firsts)


@pytest.mark.parametrize(
    "table",
    [
        vl.ROTARY_FLASH_ATTN_GUARD,
        vl.DFLASH_TARGET_LAYER_IDS_PLUS_ONE,
        vl.SPEC_DECODE_SLOT_RULES,
        vl.NON_CAUSAL_BACKENDS,
        vl.DFLASH_NON_CAUSAL_SCOPE,
    ],
    ids=lambda f: f.source[:40],
)
def test_version_ranges_do_not_overlap(table: Fact[Any]) -> None:
    entries = table.value
    for prev, cur in itertools.pairwise(entries):
        assert Version(prev[1]) < Version(cur[0]), (prev[:2], cur[:2])


def test_rotary_guard_table_covers_dflash_releases() -> None:
    kinds = {e[2] for e in vl.ROTARY_FLASH_ATTN_GUARD.value}
    assert kinds == {"find_spec", "find_spec_not_cpu", "suppress_module_not_found"}
    first = vl.ROTARY_FLASH_ATTN_GUARD.value[0][0]
    assert Version(first) <= Version(vl.DFLASH_FIRST_RELEASE.value)
    for _, _, kind, code in vl.ROTARY_FLASH_ATTN_GUARD.value:
        assert "flash_attn" in code
        assert ("suppress(ModuleNotFoundError)" in code) == (kind == "suppress_module_not_found")


def test_plain_version_facts_parse() -> None:
    Version(vl.DFLASH_FIRST_RELEASE.value)
    Version(vl.ATTENTION_BACKEND_ENV_REMOVED_IN.value)
    Version(vl.DRAFT_ATTENTION_BACKEND_FIELD.value)
    for v in (fa.EXTEND_PATH_FIRST_RELEASE.value, fa.CUTE_EXCLUDED_FIRST_RELEASE.value):
        assert v is None or Version(v)
    for key in (*vl.TORCH_PINS.value, *vl.WHEEL_PLATFORM_TAGS.value, *fa.FA2_RELEASES_SHIPPING_CUTE.value):
        Version(key)


# --- flash-attn values ---------------------------------------------------------------------------------


def test_distribution_names_agree_with_stack() -> None:
    from dflash_doctor.knowledge import stack

    assert set(fa.DISTRIBUTIONS.value) == set(stack.FLASH_ATTN_FAMILY.value)


def test_top_level_names_are_identifiers() -> None:
    names = [*fa.FA2_TOP_LEVELS.value, *fa.FLASH_ATTN_CUTE_TOP_LEVELS.value]
    names += [n for v in fa.FA3_TOP_LEVELS.value.values() for n in v]
    names += [p.split(".")[0] for p in fa.FA4_PACKAGES.value]
    assert all(n.isidentifier() for n in names), names
    assert "flash_attn_2_cuda" in fa.FA2_TOP_LEVELS.value
    assert fa.FA4_PACKAGES.value == ("flash_attn.cute",)


def test_fa2_arch_tables() -> None:
    assert set(fa.FA2_CUDA_ARCHS_DEFAULT.value) == set(fa.FA2_EMBEDS_PTX.value)
    for archs in fa.FA2_CUDA_ARCHS_DEFAULT.value.values():
        assert archs and all(a.isdigit() for a in archs)
        assert set(archs) - {"110"} <= set(fa.FA2_GENCODE_MIN_NVCC.value)
    for nvcc in fa.FA2_GENCODE_MIN_NVCC.value.values():
        assert Version(nvcc) >= Version(fa.FA2_MIN_NVCC.value)
    assert fa.FA2_MIN_COMPUTE_CAPABILITY.value == (8, 0)
    assert fa.FA2_MAX_HEAD_DIM.value % fa.FA2_HEAD_DIM_MULTIPLE.value == 0
    assert (
        fa.FA2_RUNTIME_MESSAGES.value["compute_capability"]
        == "FlashAttention only supports Ampere GPUs or newer."
    )


def test_fa4_arch_majors() -> None:
    fwd, bwd = fa.FA4_FWD_ARCH_MAJORS.value, fa.FA4_BWD_ARCH_MAJORS.value
    assert list(fwd) == sorted(fwd) and list(bwd) == sorted(bwd)
    assert set(bwd) <= set(fwd)


def test_fa4_requirements_parse() -> None:
    names = {Requirement(r).name for r in fa.FA4_REQUIRES_DIST.value}
    assert {"torch", "nvidia-cutlass-dsl"} <= names


def test_prebuilt_wheel_name_template() -> None:
    template = fa.PREBUILT_WHEEL_FILENAME.value
    name = (
        template.replace("{version}", "2.8.3")
        .replace("{cuda_major}", "12")
        .replace("{torch_major}.{torch_minor}", "2.8")
        .replace("{TRUE|FALSE}", "TRUE")
        .replace("{py}", "311")
        .replace("{machine}", "x86_64")
    )
    assert name == "flash_attn-2.8.3+cu12torch2.8cxx11abiTRUE-cp311-cp311-linux_x86_64.whl"
    assert "{wheel_filename}" in fa.PREBUILT_WHEEL_URL.value and "v{version}" in fa.PREBUILT_WHEEL_URL.value
    for bins in fa.PREBUILT_WHEEL_CUDA_BINS.value.values():
        assert set(bins) == {11, 12, 13}


def test_build_env_vars() -> None:
    for var in ("FLASH_ATTENTION_FORCE_BUILD", "MAX_JOBS", "FLASH_ATTN_CUDA_ARCHS"):
        assert var in fa.BUILD_ENV_VARS.value
    assert fa.FA2_CUDA_ARCHS_ENV.value in fa.BUILD_ENV_VARS.value
    assert fa.BUILD_NEEDS_NO_BUILD_ISOLATION.value is True


# --- vLLM values ---------------------------------------------------------------------------------------


def test_backend_names() -> None:
    names = {n for v in vl.ATTENTION_BACKEND_PRIORITY.value.values() for n in v}
    assert all(re.fullmatch(r"[A-Z][A-Z0-9_]*", n) for n in names)
    for _, _, backends in vl.NON_CAUSAL_BACKENDS.value:
        assert set(backends) <= names
    assert vl.ATTENTION_BACKEND_CLI_FLAG.value == "--attention-backend"


def test_pins_parse() -> None:
    for pins in vl.TORCH_PINS.value.values():
        assert "torch" in pins
        for spec in pins.values():
            SpecifierSet(spec)


def test_dflash_registry_follows_architecture_rule() -> None:
    for arch in vl.DFLASH_REGISTRY.value:
        assert arch.startswith("DFlash") or arch.endswith("DFlash")


# --- re-derived from the real artifacts, when cached ---------------------------------------------------


def _members_text(archive_path: Path, *members: str) -> dict[str, str]:
    """The named members of a .tar.gz, read in one streaming pass that stops once all are found."""
    wanted, found = set(members), {}
    with tarfile.open(archive_path, "r|gz") as archive:
        for info in archive:
            if info.name in wanted:
                extracted = archive.extractfile(info)
                assert extracted is not None, info.name
                found[info.name] = extracted.read().decode()
                if len(found) == len(wanted):
                    break
    assert set(found) == wanted, wanted - set(found)
    return found


def _rotary_guard_kind(source: str) -> str:
    """Classify ApplyRotaryEmb.__init__'s guard around the flash_attn rotary import."""
    tree = ast.parse(source)
    init = next(
        n
        for cls in ast.walk(tree)
        if isinstance(cls, ast.ClassDef) and cls.name == "ApplyRotaryEmb"
        for n in cls.body
        if isinstance(n, ast.FunctionDef) and n.name == "__init__"
    )
    for node in ast.walk(init):
        if isinstance(node, ast.With) and any(
            isinstance(i.context_expr, ast.Call)
            and getattr(i.context_expr.func, "id", None) == "suppress"
            and [getattr(a, "id", None) for a in i.context_expr.args] == ["ModuleNotFoundError"]
            for i in node.items
        ):
            return "suppress_module_not_found"
        if isinstance(node, ast.If) and "find_spec('flash_attn')" in ast.unparse(node.test):
            return "find_spec_not_cpu" if "is_cpu" in ast.unparse(node.test) else "find_spec"
    raise AssertionError("no flash_attn guard found")


ROTARY_CASES = sorted({v for e in vl.ROTARY_FLASH_ATTN_GUARD.value for v in e[:2]}, key=Version)


@pytest.mark.parametrize("version", ROTARY_CASES)
def test_rotary_guard_matches_real_vllm_source(version: str) -> None:
    sdist = pypi_sdist("vllm", version)
    member = f"vllm-{version}/vllm/model_executor/layers/rotary_embedding/common.py"
    source = _members_text(sdist, member)[member]
    expected = next(
        kind
        for first, last, kind, _ in vl.ROTARY_FLASH_ATTN_GUARD.value
        if Version(first) <= Version(version) <= Version(last)
    )
    assert _rotary_guard_kind(source) == expected


FA2_SDISTS = ("2.8.3", "2.8.3.post1", "2.8.3.post2")


@pytest.mark.parametrize("version", FA2_SDISTS)
def test_fa2_release_facts_match_real_sdist(version: str) -> None:
    sdist = pypi_sdist("flash-attn", version)
    root = f"flash_attn-{version}"
    names = (
        f"{root}/flash_attn/__init__.py",
        f"{root}/setup.py",
        f"{root}/flash_attn.egg-info/top_level.txt",
    )
    texts = _members_text(sdist, *names)
    init, setup, top_level = texts[names[0]], texts[names[1]], texts[names[2]].split()

    # FA2_INIT_IMPORT_GUARD / EXTEND_PATH_FIRST_RELEASE: plain import, no try, no extend_path
    tree = ast.parse(init)
    assert not any(isinstance(n, ast.Try) for n in ast.walk(tree))
    assert "extend_path" not in init
    assert any(
        isinstance(n, ast.ImportFrom) and n.module == "flash_attn.flash_attn_interface" for n in tree.body
    )
    assert fa.FA2_INIT_IMPORT_GUARD.value is None and fa.EXTEND_PATH_FIRST_RELEASE.value is None

    # FA2_CUDA_ARCHS_DEFAULT and FA2_EMBEDS_PTX
    default = re.search(r'os\.getenv\("FLASH_ATTN_CUDA_ARCHS", "([0-9;]+)"\)', setup)
    assert default is not None
    assert tuple(default.group(1).split(";")) == fa.FA2_CUDA_ARCHS_DEFAULT.value[version]
    assert ("code=compute_" in setup) == fa.FA2_EMBEDS_PTX.value[version]

    # FA2_RELEASES_SHIPPING_CUTE / _HOPPER, FA2_TOP_LEVELS
    assert "flash_attn.cute" not in setup
    assert version in fa.FA2_RELEASES_SHIPPING_CUTE.value
    assert set(top_level) == {"flash_attn", "hopper"} <= set(fa.FA2_TOP_LEVELS.value)
    assert 'name="flash_attn_2_cuda"' in setup

    # BUILD_NEEDS_NO_BUILD_ISOLATION: torch is imported at module level
    assert any(
        isinstance(n, ast.Import) and any(a.name == "torch" for a in n.names) for n in ast.parse(setup).body
    )
