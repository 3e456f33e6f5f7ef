"""flash-attention family: what each distribution installs, what v2 checks at run time, how its wheels are
built and named, and what FA3 / FA4 accept.

Every fact was read from the released artifact itself where one exists:

* flash-attn 2.8.3, 2.8.3.post1, 2.8.3.post2: the PyPI sdists ``flash_attn-<ver>.tar.gz`` (PyPI carries only
  sdists for flash-attn; binary wheels are on the GitHub releases page). sha256 of the sdists read:
  2.8.3 ``1e71dd64...``, 2.8.3.post1 ``55d5103e...``, 2.8.3.post2 ``d0f9f0b0...`` (2.8.3.post2 is dated
  2026-10-14 in the archive and has no tag in the repository snapshot used below).
* the Dao-AILab/flash-attention repository snapshot at HEAD 0251105a (2026-08-15, ``__version__ = "2.8.4"``,
  unreleased), tags v2.8.3 (060c9188) and v2.8.3.post1 (a8aa52b1).
* flash-attn-4 4.0.0b36: the PyPI wheel ``flash_attn_4-4.0.0b36-py3-none-any.whl`` (528,175 bytes,
  sha256 ``b6f0e2a2...``).
* flash-attn-cute 0.0.1: the PyPI wheel (1,400 bytes, sha256 ``ed380fa5...``).

The doctor reads installed metadata (RECORD, top_level.txt) and source first; these facts are what it
cannot read there (what a *release* contains, the meaning of a message, what to tell the user to run).
"""

from __future__ import annotations

from dflash_doctor.knowledge import Fact

__all__ = [
    "BUILD_ENV_VARS",
    "BUILD_NEEDS_NO_BUILD_ISOLATION",
    "CUTE_EXCLUDED_FIRST_RELEASE",
    "DISTRIBUTIONS",
    "EXTEND_PATH_FIRST_RELEASE",
    "FA2_CUDA_ARCHS_DEFAULT",
    "FA2_CUDA_ARCHS_ENV",
    "FA2_EMBEDS_PTX",
    "FA2_GENCODE_MIN_NVCC",
    "FA2_HEAD_DIM_MULTIPLE",
    "FA2_INIT_IMPORTS_EXTENSION",
    "FA2_INIT_IMPORT_GUARD",
    "FA2_MAX_HEAD_DIM",
    "FA2_MIN_COMPUTE_CAPABILITY",
    "FA2_MIN_NVCC",
    "FA2_RELEASES_SHIPPING_CUTE",
    "FA2_RELEASES_SHIPPING_HOPPER",
    "FA2_RUNTIME_MESSAGES",
    "FA2_SUPPORTED_DTYPES",
    "FA2_TOP_LEVELS",
    "FA2_WHEEL_BUILD_OS",
    "FA2_WHEEL_MIN_GLIBC",
    "FA3_GENCODES",
    "FA3_MIN_NVCC",
    "FA3_ON_PYPI",
    "FA3_TOP_LEVELS",
    "FA4_ARCH_OVERRIDE_ENV",
    "FA4_BWD_ARCH_MAJORS",
    "FA4_FWD_ARCH_MAJORS",
    "FA4_PACKAGES",
    "FA4_REQUIRES_DIST",
    "FA4_VERSION_ATTRIBUTE",
    "FLASH_ATTN_CUTE_TOP_LEVELS",
    "PREBUILT_WHEEL_CUDA_BINS",
    "PREBUILT_WHEEL_FILENAME",
    "PREBUILT_WHEEL_URL",
    "ROTARY_APPLY_SIGNATURE",
    "ROTARY_MODULE",
    "ROTARY_MODULE_IMPORTS",
    "V2_SPEC",
]

_SDIST_283 = "flash-attn 2.8.3 PyPI sdist (tag v2.8.3, 060c9188)"
_SDIST_283_POST2 = "flash-attn 2.8.3.post2 PyPI sdist (sha256 d0f9f0b0..., no tag in the 0251105a snapshot)"
_ALL_283 = "flash-attn 2.8.3, 2.8.3.post1 and 2.8.3.post2 PyPI sdists"
_HEAD = "flash-attention HEAD 0251105a (2026-08-15, __version__ 2.8.4, unreleased)"
_FA4_WHEEL = "flash-attn-4 4.0.0b36 PyPI wheel (sha256 b6f0e2a2...)"

# ---------------------------------------------------------------------------------------------------------
# Distributions and the import names they install
# ---------------------------------------------------------------------------------------------------------

DISTRIBUTIONS: Fact[dict[str, str]] = Fact(
    value={
        "flash-attn": "flash_attn",
        "flash-attn-4": "flash_attn_4",
        "flash-attn-3": "flash_attn_3",
        "flash-attn-cute": "flash_attn_cute",
    },
    source="Normalized PyPI project name -> the Name its metadata records: setup.py PACKAGE_NAME = "
    "'flash_attn' (v2); flash-attn-4 wheel METADATA 'Name: flash-attn-4' (dist-info dir flash_attn_4-*); "
    "hopper/setup.py PACKAGE_NAME = 'flash_attn_3' (FA3); flash-attn-cute wheel METADATA "
    "'Name: flash_attn_cute'",
    read_from=f"{_ALL_283}; {_FA4_WHEEL}; flash-attn-cute 0.0.1 wheel; {_HEAD} hopper/setup.py",
    note="FA3 (flash-attn-3) is not on PyPI: `pip index versions flash_attn_3` finds no distribution; it is "
    "built from hopper/ or taken from GitHub. flash-attn-4 has only pre-releases on PyPI (4.0.0b3..b36).",
)

FA2_TOP_LEVELS: Fact[tuple[str, ...]] = Fact(
    value=("flash_attn", "hopper", "flash_attn_2_cuda"),
    source="setup.py: packages=find_packages(exclude=('build','csrc','include','tests','dist','docs',"
    "'benchmarks','flash_attn.egg-info')) finds the packages flash_attn and hopper (hopper/__init__.py "
    'exists, `__version__ = "3.0.0.b1"`); the sdist\'s flash_attn.egg-info/top_level.txt lists '
    "'flash_attn' and 'hopper'. The compiled extension is a TOP-LEVEL module: "
    'CUDAExtension(name="flash_attn_2_cuda", ...) (setup.py:228), i.e. '
    "site-packages/flash_attn_2_cuda.cpython-3XY-<plat>.so, not inside flash_attn/",
    read_from=_ALL_283,
    note="The sdist top_level.txt omits flash_attn_2_cuda only because the sdist is made with "
    "FLASH_ATTENTION_SKIP_CUDA_BUILD=TRUE (no ext_modules). 'hopper' is a stray top-level package holding "
    "FA3 sources, tests and a setup.py; third-party installs show site-packages/hopper/test_flash_attn.py "
    "for flash-attn 2.8.3. HEAD 0251105a still does not exclude 'hopper'.",
)

FA2_RELEASES_SHIPPING_HOPPER: Fact[tuple[str, ...]] = Fact(
    value=("2.8.3", "2.8.3.post1", "2.8.3.post2"),
    source="find_packages() in setup.py run over each extracted sdist returns ['flash_attn', 'hopper', "
    "...]; hopper/__init__.py was added by 7f67966c 'FA3 initial code release' (2024-07-11), first tag "
    "containing it v2.6.2",
    read_from=f"{_ALL_283}; git tag --contains 7f67966c in the 0251105a snapshot",
    note="Only the releases listed were read; every release since v2.6.2 most likely ships it too.",
)

FA2_RELEASES_SHIPPING_CUTE: Fact[tuple[str, ...]] = Fact(
    value=("2.8.3", "2.8.3.post1", "2.8.3.post2"),
    source="setup.py find_packages() does not exclude flash_attn.cute, so flash_attn/cute/ (21 .py files, "
    "an old FA4 snapshot) is installed by flash-attn and collides with flash-attn-4's flash_attn/cute/",
    read_from=_ALL_283,
    note="The exclusion ('flash_attn.cute', 'flash_attn.cute.*') exists only at HEAD, from d51a4a16 "
    "'Add FA4 publishing strategy (#2282)'. See CUTE_EXCLUDED_FIRST_RELEASE.",
)

CUTE_EXCLUDED_FIRST_RELEASE: Fact[str | None] = Fact(
    value=None,
    source="setup.py packages=find_packages(exclude=(...)): 'flash_attn.cute' is excluded at HEAD "
    "(setup.py:777-778, commit d51a4a16, #2282) but not in any PyPI release, including 2.8.3.post2 "
    "(setup.py:534-545 of that sdist excludes only build/csrc/include/tests/dist/docs/benchmarks/"
    "flash_attn.egg-info)",
    read_from=f"{_SDIST_283_POST2}; {_HEAD}",
    note="None = no flash-attn release on PyPI keeps flash_attn/cute out of its install (as of 2.8.3.post2).",
)

EXTEND_PATH_FIRST_RELEASE: Fact[str | None] = Fact(
    value=None,
    source="flash_attn/__init__.py: `from pkgutil import extend_path` / `__path__ = extend_path(__path__, "
    "__name__)` (commit 4219765d 'Fix FA2 + FA4 co-existence (#2331)', 2026-03-11) is at HEAD only; the "
    '__init__.py of 2.8.3, 2.8.3.post1 and 2.8.3.post2 is `__version__ = "2.8.3[.postN]"` followed by the '
    "plain import of flash_attn.flash_attn_interface, with no extend_path",
    read_from=f"{_ALL_283}; {_HEAD}",
    note="None = no PyPI release carries extend_path (newest read: 2.8.3.post2). 4219765d is on main and the "
    "fa4-v4.0.0.beta10+ tags only; 2.8.3.post1/post2 were cut from a side branch off v2.8.3.",
)

FA4_PACKAGES: Fact[tuple[str, ...]] = Fact(
    value=("flash_attn.cute",),
    source="flash-attn-4 wheel: the only files outside its dist-info are flash_attn/cute/*.py (no "
    "flash_attn/__init__.py); top_level.txt 'flash_attn'. flash_attn/cute/pyproject.toml: "
    '[tool.setuptools] packages = ["flash_attn.cute"], package-dir = {"flash_attn.cute" = "."}',
    read_from=f"{_FA4_WHEEL}; {_HEAD} flash_attn/cute/pyproject.toml",
    note="Installed alone, flash_attn is an implicit namespace package: find_spec('flash_attn').origin is "
    "None and `import flash_attn.ops.triton.rotary` raises ModuleNotFoundError (No module named "
    "'flash_attn.ops').",
)

FA3_TOP_LEVELS: Fact[dict[str, tuple[str, ...]]] = Fact(
    value={
        "v2.8.3": ("flash_attn_3", "flash_attn_interface"),
        "HEAD": ("flash_attn_3", "flash_attn_interface", "flash_attn_config"),
    },
    source="hopper/setup.py: CUDAExtension(name=f\"{PACKAGE_NAME}._C\") with PACKAGE_NAME = 'flash_attn_3' "
    "(so flash_attn_3/_C.abi3.so); py_modules=['flash_attn_interface'] at v2.8.3 (hopper/setup.py:636); "
    "py_modules=['flash_attn_interface', 'flash_attn_config'] plus the package hopper/flash_attn_3/ "
    "(__init__.py, flash_attn_config.py, flash_attn_interface.py) at HEAD (hopper/setup.py:824; "
    "flash_attn_config.py is generated at build time, setup.py:128)",
    read_from=f"{_SDIST_283} hopper/setup.py; {_HEAD} hopper/setup.py",
    note="Both install a TOP-LEVEL module flash_attn_interface, which `import flash_attn_3._C`s. The "
    "flash_attn_3/ package and flash_attn_config came with 002cce0a '[FA3] uv installation support "
    "(#2458)' (2026-07-02). python_requires '>=3.8' and abi3 cp39 at v2.8.3; '>=3.10' and cp310 at HEAD.",
)

FA3_ON_PYPI: Fact[bool] = Fact(
    value=False,
    source="`pip index versions flash_attn_3` -> 'No matching distribution found'",
    read_from="PyPI as queried on this project's research host (flash-attn newest 2.8.3.post2)",
    note="README: 'Requirements: H100 / H800 GPU, CUDA >= 12.3'; install from hopper/ (`python setup.py "
    "install`) or via uv git subdirectory; import with `from flash_attn_3 import flash_attn_interface`.",
)

FLASH_ATTN_CUTE_TOP_LEVELS: Fact[tuple[str, ...]] = Fact(
    value=("flash_attn_cute",),
    source="flash-attn-cute 0.0.1 wheel: 5 files, flash_attn_cute/__init__.py (65 bytes) + dist-info; "
    "METADATA 'Summary: Flash Attention CUTE - package coming soon', 'Development Status :: 1 - Planning'",
    read_from="flash-attn-cute 0.0.1 PyPI wheel (the only version on PyPI)",
    note="A name-holding placeholder: it installs nothing under flash_attn/. The 'flash-attn-cute' 0.1.0 "
    "named in v2.8.3's flash_attn/cute/pyproject.toml was never published under that version.",
)

# ---------------------------------------------------------------------------------------------------------
# flash_attn/__init__.py and the rotary entry point vLLM imports
# ---------------------------------------------------------------------------------------------------------

FA2_INIT_IMPORT_GUARD: Fact[str | None] = Fact(
    value=None,
    source='flash_attn/__init__.py lines 1-3: `__version__ = "2.8.3"` then `from '
    "flash_attn.flash_attn_interface import (flash_attn_func, ...)` with NO try/except; HEAD "
    "0251105a is the same below its extend_path lines",
    read_from=f"{_ALL_283}; {_HEAD}",
    note="None = unguarded. A `try: ... except ModuleNotFoundError: pass` around that import exists only on "
    "unmerged commits 715919cb (2026-04-01, ModuleNotFoundError) and dc4e37cf (2026-05-23, ImportError), "
    "contained in no branch or tag of the snapshot. So with flash-attn 2.8.3.x ANY failure to load "
    "flash_attn_2_cuda propagates out of `import flash_attn.<anything>`: a missing .so as "
    "ModuleNotFoundError(\"No module named 'flash_attn_2_cuda'\"), an ABI break as ImportError('... "
    "undefined symbol: ...'), an old libc as ImportError(\"... version `GLIBC_2.32' not found\").",
)

FA2_INIT_IMPORTS_EXTENSION: Fact[tuple[str, ...]] = Fact(
    value=("flash_attn", "flash_attn.flash_attn_interface", "torch", "flash_attn_2_cuda"),
    source="flash_attn/__init__.py:3 imports flash_attn.flash_attn_interface, whose line 15 is `import "
    "flash_attn_2_cuda as flash_attn_gpu` (after `import torch`), unless "
    "FLASH_ATTENTION_TRITON_AMD_ENABLE=TRUE selects flash_attn_triton_amd instead",
    read_from=_ALL_283,
    note="Import chain of ANY flash_attn submodule, in order: a package's __init__ runs before its "
    "submodules, so `import flash_attn.ops.triton.rotary` (pure Triton) first loads torch and the CUDA "
    "extension. Checked with stubs: a flash_attn_2_cuda raising ImportError('undefined symbol') escapes "
    "`with suppress(ModuleNotFoundError): import_module('flash_attn.ops.triton.rotary')`; a missing one is "
    "suppressed.",
)

ROTARY_MODULE: Fact[str] = Fact(
    value="flash_attn.ops.triton.rotary",
    source="flash_attn/ops/triton/rotary.py (flash_attn/ops/__init__.py and "
    "flash_attn/ops/triton/__init__.py "
    "exist, both empty)",
    read_from=_ALL_283,
    note="Identical file in 2.8.3 and 2.8.3.post2.",
)

ROTARY_MODULE_IMPORTS: Fact[tuple[str, ...]] = Fact(
    value=("torch", "triton", "triton.language"),
    source="flash_attn/ops/triton/rotary.py lines 1-9 ('# As of 2025-04-23, we require triton >= 3.0'); "
    "the kernel is launched through torch.library.wrap_triton(rotary_kernel) (line 159)",
    read_from=_ALL_283,
)

ROTARY_APPLY_SIGNATURE: Fact[str] = Fact(
    value="apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, "
    "seqlen_offsets: Union[int, torch.Tensor] = 0, cu_seqlens: Optional[torch.Tensor] = None, "
    "max_seqlen: Optional[int] = None, interleaved=False, inplace=False, conjugate=False) -> torch.Tensor",
    source="flash_attn/ops/triton/rotary.py:102-112",
    read_from=_ALL_283,
    note="Asserts (lines 129-147): max_seqlen given with cu_seqlens; sin.shape == cos.shape; 'rotary_dim "
    "must be <= headdim'; 'Only support headdim <= 256'; 'seqlen_ro must be >= seqlen'; tensor "
    "seqlen_offsets of shape (batch,) and dtype int32/int64.",
)

# ---------------------------------------------------------------------------------------------------------
# v2 run-time checks (csrc/flash_attn/flash_api.cpp) — they fire on the first kernel call, not at import
# ---------------------------------------------------------------------------------------------------------

FA2_MIN_COMPUTE_CAPABILITY: Fact[tuple[int, int]] = Fact(
    value=(8, 0),
    source="csrc/flash_attn/flash_api.cpp:369-370 (mha_fwd; same in varlen_fwd, bwd, varlen_bwd, "
    'fwd_kvcache): `bool is_sm8x_min = cc_major >= 8; TORCH_CHECK(is_sm8x_min, "FlashAttention only '
    'supports Ampere GPUs or newer.");`',
    read_from=f"{_SDIST_283}; {_SDIST_283_POST2}",
    note="Turing (sm_75) is refused; the README points to the separate flash-attention-turing repo.",
)

FA2_SUPPORTED_DTYPES: Fact[tuple[str, ...]] = Fact(
    value=("float16", "bfloat16"),
    source="csrc/flash_attn/flash_api.cpp:373-374: TORCH_CHECK(q_dtype == torch::kFloat16 || q_dtype == "
    'torch::kBFloat16, "FlashAttention only support fp16 and bf16 data type")',
    read_from=f"{_SDIST_283}; {_SDIST_283_POST2}",
)

FA2_MAX_HEAD_DIM: Fact[int] = Fact(
    value=256,
    source='csrc/flash_attn/flash_api.cpp:393: TORCH_CHECK(head_size <= 256, "FlashAttention forward only '
    'supports head dimension at most 256"); backward (line 830): "FlashAttention backward only supports '
    'head dimension at most 256"',
    read_from=f"{_SDIST_283}; {_SDIST_283_POST2}",
)

FA2_HEAD_DIM_MULTIPLE: Fact[int] = Fact(
    value=8,
    source='csrc/flash_attn/flash_api.cpp:394: TORCH_CHECK(head_size % 8 == 0, "query, key, value, and out_ '
    'must have a head_size that is a multiple of 8"); backward (line 829): "head_size should be a '
    'multiple of 8"',
    read_from=f"{_SDIST_283}; {_SDIST_283_POST2}",
)

FA2_RUNTIME_MESSAGES: Fact[dict[str, str]] = Fact(
    value={
        "compute_capability": "FlashAttention only supports Ampere GPUs or newer.",
        "dtype": "FlashAttention only support fp16 and bf16 data type",
        "head_dim_max_fwd": "FlashAttention forward only supports head dimension at most 256",
        "head_dim_max_bwd": "FlashAttention backward only supports head dimension at most 256",
        "head_dim_multiple_fwd": "query, key, value, and out_ must have a head_size that is a multiple of 8",
        "head_dim_multiple_bwd": "head_size should be a multiple of 8",
        "nvcc_too_old": "FlashAttention is only supported on CUDA 11.7 and above.",
    },
    source="csrc/flash_attn/flash_api.cpp TORCH_CHECK texts (lines 370, 374, 393, 394, 829, 830); "
    "setup.py:175 "
    "for the build-time nvcc message",
    read_from=f"{_SDIST_283}; {_SDIST_283_POST2}",
)

# ---------------------------------------------------------------------------------------------------------
# v2 build: architectures, toolchain
# ---------------------------------------------------------------------------------------------------------

FA2_CUDA_ARCHS_ENV: Fact[str] = Fact(
    value="FLASH_ATTN_CUDA_ARCHS",
    source='setup.py:69-70: def cuda_archs(): return os.getenv("FLASH_ATTN_CUDA_ARCHS", ...).split(";")',
    read_from=f"{_ALL_283}; {_HEAD}",
)

FA2_CUDA_ARCHS_DEFAULT: Fact[dict[str, tuple[str, ...]]] = Fact(
    value={
        "2.8.3": ("80", "90", "100", "120"),
        "2.8.3.post1": ("80", "90", "100", "120"),
        "2.8.3.post2": ("80", "90", "100", "120"),
        "HEAD": ("80", "90", "100", "110", "120"),
    },
    source='setup.py:70 `os.getenv("FLASH_ATTN_CUDA_ARCHS", "80;90;100;120")` in the three sdists; '
    'HEAD setup.py:74 `"80;90;100;110;120"`',
    read_from=f"{_ALL_283}; {_HEAD}",
    note="2.8.3.post2 has the 2.8.3 default, not HEAD's: its setup.py is identical to 2.8.3.post1's, which "
    "differs from 2.8.3 only in the CUDA-13 wheel binning (see PREBUILT_WHEEL_CUDA_BINS).",
)

FA2_EMBEDS_PTX: Fact[dict[str, bool]] = Fact(
    value={"2.8.3": False, "2.8.3.post1": False, "2.8.3.post2": False, "HEAD": True},
    source="setup.py:180-191 emits only `-gencode arch=compute_XX,code=sm_XX` (SASS) for 80/90/100/120; "
    "HEAD add_cuda_gencodes() (setup.py:101-151) adds `arch=compute_{newest},code=compute_{newest}` (PTX "
    "for the newest requested arch), uses compute_100f/compute_120f on nvcc >= 12.9 and maps 110 to "
    "sm_101 below CUDA 13.0",
    read_from=f"{_ALL_283}; {_HEAD}",
    note="Released v2 wheels therefore hold SASS for sm_80, sm_90, sm_100, sm_120 only: they run on 8.x "
    "(>= 8.0), 9.0, 10.x and 12.x by the within-major rule, and on nothing newer.",
)

FA2_GENCODE_MIN_NVCC: Fact[dict[str, str]] = Fact(
    value={"80": "11.7", "90": "11.8", "100": "12.8", "120": "12.8"},
    source="setup.py:179-191: sm_80 unconditionally (the build refuses nvcc < 11.7), sm_90 if "
    "bare_metal_version >= 11.8, sm_100 and sm_120 if >= 12.8; an arch whose nvcc floor is not met is "
    "silently skipped",
    read_from=_ALL_283,
)

FA2_MIN_NVCC: Fact[str] = Fact(
    value="11.7",
    source='setup.py:172-177: `if bare_metal_version < Version("11.7"): raise '
    'RuntimeError("FlashAttention '
    "is only supported on CUDA 11.7 and above.  Note: make sure nvcc has a supported version by running "
    'nvcc -V.")`',
    read_from=_ALL_283,
)

# ---------------------------------------------------------------------------------------------------------
# v2 release wheels (GitHub releases page)
# ---------------------------------------------------------------------------------------------------------

PREBUILT_WHEEL_FILENAME: Fact[str] = Fact(
    value="flash_attn-{version}+cu{cuda_major}torch{torch_major}.{torch_minor}cxx11abi{TRUE|FALSE}"
    "-cp{py}-cp{py}-linux_{machine}.whl",
    source='setup.py get_wheel_url() (2.8.3: line 464; post1/post2: line 469): f"{PACKAGE_NAME}-'
    "{flash_version}+cu{cuda_version}torch{torch_version}cxx11abi{cxx11_abi}-{python_version}-"
    '{python_version}-{platform_name}.whl" with cuda_version = the binned torch.version.cuda major, '
    'torch_version = f"{major}.{minor}" of torch.__version__, cxx11_abi = '
    "str(torch._C._GLIBCXX_USE_CXX11_ABI).upper(), platform_name = f'linux_{platform.uname().machine}'",
    read_from=_ALL_283,
    note="The CUDA in the name comes from the INSTALLED TORCH (torch.version.cuda), not from nvcc. Example: "
    "flash_attn-2.8.3+cu12torch2.8cxx11abiTRUE-cp311-cp311-linux_x86_64.whl",
)

PREBUILT_WHEEL_URL: Fact[str] = Fact(
    value="https://github.com/Dao-AILab/flash-attention/releases/download/v{version}/{wheel_filename}",
    source='setup.py:55-57 BASE_WHEEL_URL = "https://github.com/Dao-AILab/flash-attention/releases/download/'
    '{tag_name}/{wheel_name}" with tag_name=f"v{flash_version}"; CachedWheelsCommand.run prints '
    '"Guessing wheel URL: " and on HTTPError/URLError prints "Precompiled wheel not found. Building from '
    'source..."',
    read_from=_ALL_283,
)

PREBUILT_WHEEL_CUDA_BINS: Fact[dict[str, dict[int, str]]] = Fact(
    value={
        "2.8.3": {11: "11.8", 12: "12.3", 13: "12.3"},
        "2.8.3.post1": {11: "11.8", 12: "12.3", 13: "13.0"},
        "2.8.3.post2": {11: "11.8", 12: "12.3", 13: "13.0"},
    },
    source='setup.py get_wheel_url(): 2.8.3 line 459 `parse("11.8") if torch_cuda_version.major == 11 '
    'else parse("12.3")` (so a CUDA-13 torch asks for a cu12 wheel); post1/post2 lines 460-464 add '
    '`else: parse("13.0")` (commit 035c7231, #2618); only the major goes into the name',
    read_from=_ALL_283,
)

FA2_WHEEL_BUILD_OS: Fact[dict[str, str]] = Fact(
    value={
        "v2.8.0": "ubuntu-20.04",
        "v2.8.0.post1": "ubuntu-22.04",
        "v2.8.3": "ubuntu-22.04",
        "v2.8.3.post1": "ubuntu-22.04",
    },
    source=".github/workflows/publish.yml build matrix `os:` at each tag; the switch is 71f7ac25 '[CI] "
    "Compile with ubuntu-22.04 instead of ubuntu-20.04' (2025-06-14), first contained in tag v2.8.0.post1",
    read_from="flash-attention tags v2.8.0, v2.8.0.post1, v2.8.0.post2, v2.8.3, v2.8.3.post1 (snapshot "
    "0251105a)",
    note="PyPI lists no 2.8.0.post1, so the first PyPI-visible version with ubuntu-22.04 wheels is "
    "2.8.0.post2 (users in #1708 report exactly that one). 2.8.3.post2's workflow was not readable (no tag).",
)

FA2_WHEEL_MIN_GLIBC: Fact[str] = Fact(
    value="2.32",
    source="Dao-AILab/flash-attention issues #1708 and #1762 ('ImportError: /lib64/libc.so.6: version "
    "`GLIBC_2.32' not found (required by .../flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so)', "
    "v2.8.0.post2 wheels on Ubuntu 20.04 / glibc 2.31) and #2225 (2.8.2 wheel on Ubuntu 20); all open, no "
    "maintainer fix. publish.yml comment: 'Using ubuntu-22.04 instead of 24.04 for more compatibility "
    "(glibc)'",
    read_from="issues #1708, #1762, #2225 as stored (2025-06..2026-03); publish.yml at "
    "v2.8.0.post1..v2.8.3.post1",
    note="Applies to release wheels built on ubuntu-22.04 (see FA2_WHEEL_BUILD_OS); users are pointed to "
    "2.7.4.post1 or a source build. A source build links against the host glibc.",
)

# ---------------------------------------------------------------------------------------------------------
# v2 build from source: remediation facts
# ---------------------------------------------------------------------------------------------------------

BUILD_NEEDS_NO_BUILD_ISOLATION: Fact[bool] = Fact(
    value=True,
    source="setup.py:22 `import torch` at top level, no pyproject.toml declaring torch as a build "
    "requirement; README: `pip install flash-attn --no-build-isolation`",
    read_from=_ALL_283,
    note="Reproduced: `pip download --no-deps --no-binary :all: flash-attn==2.8.3.post2` (pip 23.2.1, no "
    "torch in the build env) fails in 'Getting requirements to build wheel' with ModuleNotFoundError: No "
    "module named 'torch'.",
)

BUILD_ENV_VARS: Fact[dict[str, str]] = Fact(
    value={
        "FLASH_ATTENTION_FORCE_BUILD": "TRUE: skip the prebuilt-wheel download and compile (default FALSE)",
        "FLASH_ATTENTION_SKIP_CUDA_BUILD": "TRUE: build no CUDA extension (used for the sdist; default "
        "FALSE)",
        "FLASH_ATTENTION_FORCE_CXX11_ABI": "TRUE: set torch._C._GLIBCXX_USE_CXX11_ABI = True for the build",
        "FLASH_ATTN_CUDA_ARCHS": "';'-separated SM list to compile, default '80;90;100;120'",
        "MAX_JOBS": "parallel compile jobs; if unset, min(cpu_count//2, free_GB/9), at least 1",
        "NVCC_THREADS": "nvcc --threads, default '4'",
        "FLASH_ATTN_LOCAL_VERSION": "appended as '+<local>' to the package version",
        "BUILD_TARGET": "auto | cuda | rocm (default auto)",
    },
    source="setup.py: lines 40 (BUILD_TARGET), 61-64 (FORCE_BUILD, SKIP_CUDA_BUILD, FORCE_CXX11_ABI), "
    "70 (FLASH_ATTN_CUDA_ARCHS), 124 (NVCC_THREADS), 433 (FLASH_ATTN_LOCAL_VERSION), 509-521 (MAX_JOBS)",
    read_from=f"{_SDIST_283} (line numbers); same variables in {_SDIST_283_POST2}",
    note="The boolean switches compare against the exact string 'TRUE'. README: without ninja the build "
    "'can take a very long time (2h)'; with ninja '3-5 minutes on a 64-core machine'; "
    "`MAX_JOBS=4 pip install flash-attn --no-build-isolation` for machines with < 96 GB RAM.",
)


# ---------------------------------------------------------------------------------------------------------
# flash-attn-4 (CuTe DSL)
# ---------------------------------------------------------------------------------------------------------

FA4_FWD_ARCH_MAJORS: Fact[tuple[int, ...]] = Fact(
    value=(8, 9, 10, 11, 12),
    source="flash_attn/cute/interface.py:845 in _flash_attn_fwd: `assert arch // 10 in [8, 9, 10, 11, 12], "
    '"Unsupported compute capability. Supported: 8.x, 9.x, 10.x, 11.x, 12.x"` (arch = major*10+minor '
    "from _get_device_arch(), interface.py:101)",
    read_from=_FA4_WHEEL,
    note="A run-time assertion on the first call, not an import-time check. interface.py:1775 raises "
    "ValueError with the same list when no kernel class matches.",
)

FA4_BWD_ARCH_MAJORS: Fact[tuple[int, ...]] = Fact(
    value=(9, 10, 11, 12),
    source="flash_attn/cute/interface.py:2288 in _flash_attn_bwd: `assert arch // 10 in [9, 10, 11, 12], "
    '"Unsupported compute capability. Supported: 9.x, 10.x, 11.x, 12.x"`',
    read_from=_FA4_WHEEL,
    note="The sparse-MLA backward (interface.py:3230) accepts 10.x and 11.x only. Serving uses forward only.",
)

FA4_ARCH_OVERRIDE_ENV: Fact[tuple[str, ...]] = Fact(
    value=("FLASH_ATTENTION_ARCH", "CUTE_DSL_ARCH"),
    source="flash_attn/cute/interface.py:101-116 _get_device_arch(): FLASH_ATTENTION_ARCH (e.g. 'sm_80' or "
    "'80') selects the kernel; CUTE_DSL_ARCH sets the compilation target; otherwise "
    "torch.cuda.get_device_capability()",
    read_from=_FA4_WHEEL,
)

FA4_REQUIRES_DIST: Fact[tuple[str, ...]] = Fact(
    value=(
        "nvidia-cutlass-dsl>=4.6.2",
        "torch",
        "einops",
        "typing_extensions",
        "apache-tvm-ffi<0.2,>=0.1.11",
        "torch-c-dlpack-ext",
        "quack-kernels>=0.5.3",
    ),
    source="flash_attn_4-4.0.0b36.dist-info/METADATA Requires-Dist (unconditional ones); extras: cu13 -> "
    "nvidia-cutlass-dsl[cu13]>=4.6.2, dev -> pytest, pytest-xdist, ruff; Requires-Python >=3.10",
    read_from=_FA4_WHEEL,
    note="HEAD 0251105a's flash_attn/cute/pyproject.toml says apache-tvm-ffi>=0.1.12,<0.2: the b36 wheel "
    "was not built from that commit.",
)

FA4_VERSION_ATTRIBUTE: Fact[str] = Fact(
    value="0.0.0",
    source='flash_attn/cute/__init__.py:5-8: `try: __version__ = version("fa4") except '
    'PackageNotFoundError: __version__ = "0.0.0"`; the distribution is named flash-attn-4, so the lookup '
    "of 'fa4' fails",
    read_from=_FA4_WHEEL,
    note="Read the version with importlib.metadata.version('flash-attn-4'), never "
    "flash_attn.cute.__version__.",
)

# ---------------------------------------------------------------------------------------------------------
# FA3 (hopper/)
# ---------------------------------------------------------------------------------------------------------

FA3_GENCODES: Fact[dict[str, str]] = Fact(
    value={
        "default": "arch=compute_90a,code=sm_90a",
        "*_sm80.cu": "arch=compute_80,code=sm_80",
        "*_sm100.cu": "arch=compute_100a,code=sm_100a",
    },
    source="hopper/setup.py: cc_flag 'arch=compute_90a,code=sm_90a' (v2.8.3 line 441, HEAD line 558); the "
    "ninja rules compile files ending in _sm80.cu with compute_80/sm_80 (v2.8.3 line 151, HEAD line 206) "
    "and _sm100.cu with compute_100a/sm_100a (v2.8.3 line 155, HEAD line 210); "
    "FLASH_ATTENTION_DISABLE_SM80=TRUE drops the sm_80 kernels",
    read_from=f"{_SDIST_283} hopper/setup.py; {_HEAD} hopper/setup.py",
    note="sm_90a SASS runs on compute capability 9.0 only; Ampere runs only the sm_80 kernels. No PTX.",
)

FA3_MIN_NVCC: Fact[str] = Fact(
    value="12.3",
    source='hopper/setup.py: `if bare_metal_version < Version("12.3"): raise '
    'RuntimeError("FlashAttention-3 '
    'is only supported on CUDA 12.3 and above")` (v2.8.3 line 398-399, HEAD 508-509)',
    read_from=f"{_SDIST_283} hopper/setup.py; {_HEAD} hopper/setup.py",
)

# ---------------------------------------------------------------------------------------------------------
# What to recommend
# ---------------------------------------------------------------------------------------------------------

V2_SPEC: Fact[str] = Fact(
    value="flash-attn<3",
    source="flash-attention setup.py (`import torch` at module level, setup.py:22) and README "
    "(`pip install flash-attn --no-build-isolation`): v2 provides flash_attn/__init__.py and "
    "flash_attn.ops.triton.rotary, and builds only against the torch already installed",
    read_from=_ALL_283,
    note="Beside flash-attn-4 it overwrites the files they share under flash_attn/cute (FA2_RELEASES_SHIPPING_CUTE) "
    "until a release carries EXTEND_PATH_FIRST_RELEASE and CUTE_EXCLUDED_FIRST_RELEASE.",
)
