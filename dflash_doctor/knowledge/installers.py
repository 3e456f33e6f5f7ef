"""What pip and uv leave on disk when they uninstall, which a remediation must clean up after them.

Read from pip's source and observed with real uninstalls of the flash-attn-4 4.0.0b36 wheel on this
project's CI machine (pip 23.2.1, the one Python 3.11.7's ensurepip installs, and uv 0.13.9).
"""

from __future__ import annotations

from dflash_doctor.knowledge import Fact

__all__ = ["BYTECODE_GLOB", "INDEXES_BEYOND_PYPI", "PIP_DRY_RUN_REPORT_MIN", "PIP_UNINSTALL_LEAVES", "UV_UNINSTALL_LEAVES",
           "VLLM_PINS_OFF_PYPI"]

PIP_UNINSTALL_LEAVES: Fact[str] = Fact(
    value="a top-level directory that holds no file of its own, and bytecode other interpreters wrote",
    source="src/pip/_internal/req/req_uninstall.py: compress_for_rename() removes a directory whole only when "
    "it is the parent of a listed file and every file under it is listed; flash-attn-4 lists no file directly "
    "in flash_attn/ (only flash_attn/cute/...), so flash_attn/ is never one and stays, empty. "
    "UninstallPathSet.add() adds cache_from_source(path) for each .py: the current interpreter's "
    "non-optimized .pyc only, so `*.opt-1.pyc` (python -O) and other interpreters' .pyc stay in __pycache__",
    read_from="pip 23.2.1 (ensurepip of Python 3.11.7); `pip uninstall -y flash-attn-4` left an empty "
    "site-packages/flash_attn/ (and flash_attn/cute/__pycache__/*.cpython-311.opt-1.pyc after python -O "
    "compiled it); the bug report saw the same empty directory with pip 26.3",
    note="An empty directory on sys.path is a namespace portion: find_spec('flash_attn') is not None.",
)

UV_UNINSTALL_LEAVES: Fact[str] = Fact(
    value="nothing: the emptied directories and their __pycache__ go too",
    source="uv pip uninstall --python PY flash-attn-4, run after `python -O -m compileall` wrote 56 .opt-1.pyc "
    "files under flash_attn/cute/__pycache__: site-packages/flash_attn/ no longer exists",
    read_from="uv 0.13.9",
)

BYTECODE_GLOB: Fact[str] = Fact(
    value="*/__pycache__/*.pyc",
    source="PEP 3147 ('If the py source file is missing, the pyc file inside __pycache__ will be ignored') and "
    "importlib's SourceFileLoader, which reads __pycache__/<name>.<tag>.pyc only for an existing <name>.py: "
    "bytecode there is a cache Python rebuilds from the source, never importable on its own",
    read_from="PEP 3147; CPython 3.8-3.13 importlib._bootstrap_external",
)

PIP_DRY_RUN_REPORT_MIN: Fact[str] = Fact(
    value="22.2",
    source="pip's NEWS.rst, 22.2 (2022-07-21): 'Add --dry-run option to pip install, to let it print what it "
    "would install but not actually change anything in the target environment' (#11096) and 'Add "
    "--report to the install command to generate a json report of what was installed' (#10771); the "
    "report's `install` list (metadata, download_info, requested) is its 'Installation Report' format, "
    "version 1",
    read_from="pip 22.2 release notes; the report format as pip 23.2.1 writes it on this project's CI machine",
)


INDEXES_BEYOND_PYPI: Fact[dict[str, str]] = Fact(
    value={"flashinfer-python": "https://flashinfer.ai/whl/", "flashinfer-cubin": "https://flashinfer.ai/whl/"},
    source="vLLM 0.34.0 setup.py (get_requirements, CUDA): flashinfer-cubin and flashinfer-jit-cache are 'Not on PyPI "
    "(only https://flashinfer.ai/whl), so they cannot be wheel dependencies'; FlashInfer's installation page "
    "(docs.flashinfer.ai/installation.html) installs its wheels from that index (`--index-url "
    "https://flashinfer.ai/whl/cu129` for flashinfer-jit-cache, one directory per CUDA); `pip download --no-deps "
    "flashinfer-python==0.7.3` from PyPI: 'No matching distribution found' (PyPI lists 0.7.2.post1, then 0.7.4)",
    read_from="vllm-0.34.0.tar.gz setup.py; pip 23.2.1 against PyPI, 2026-12-04",
    note="Where a requirement of an install is on no configured index, the index that publishes that distribution "
    "is named by these. flashinfer.ai could not be reached from the machine these were checked on: that "
    "flashinfer-python 0.7.3 is there is the research notes' reading (field-2026-12-c: 'Getting 0.34.0 needs "
    "--extra-index-url https://flashinfer.ai/whl/').",
)
"""Distribution -> the package index (beyond PyPI) that publishes releases PyPI does not have."""

VLLM_PINS_OFF_PYPI: Fact[dict[str, tuple[str, ...]]] = Fact(
    value={"0.34.0": ("flashinfer-python==0.7.3",)},
    source="vllm-0.34.0 wheel METADATA: `Requires-Dist: flashinfer-python==0.7.3` (requirements/cuda.txt); PyPI has "
    "no flashinfer-python 0.7.3 (`pip download --no-deps flashinfer-python==0.7.3`: 'No matching distribution "
    "found'; `pip index versions`: ... 0.7.2.post1, 0.7.4), so `pip install vllm==0.34.0` fails and a plain "
    "`pip install vllm` backtracks to 0.33.0, which pins flashinfer-python 0.7.2.post1",
    read_from="vllm-0.34.0-cp38-abi3-manylinux_2_28_x86_64.whl; PyPI, 2026-12-04",
)
"""vLLM release -> its exact pins PyPI cannot satisfy (INDEXES_BEYOND_PYPI names where they are)."""
