"""Which flash-attn v2 to recommend, and how it lives beside flash-attn-4. (Reviewed against the releases on PyPI.)"""

from __future__ import annotations

from dflash_doctor.knowledge import Fact

V2_SPEC: Fact[str] = Fact(
    value="flash-attn<3",
    note="flash-attn v2 provides flash_attn/__init__.py and flash_attn.ops.triton.rotary; its setup.py imports "
    "torch, so it builds only with --no-build-isolation against the torch already installed",
    source="flash-attention setup.py (`import torch` at module level) and README (`pip install flash-attn "
    "--no-build-isolation`)",
    read_from="flash-attention v2.8.3 (060c9188) and the flash_attn-2.8.3.post2 sdist on PyPI",
)

V2_SHIPS_STALE_CUTE: Fact[bool] = Fact(
    value=True,
    note="v2 wheels install flash_attn/cute/ (21 files in 2.8.3, 20 of them at the same paths as flash-attn-4 "
    "4.0.0b36, all with other bytes) and a top-level hopper/ package; installing one over the other overwrites "
    "those files, and uninstalling either deletes them",
    source="setup.py find_packages() excludes flash_attn.cute only from commit d51a4a16 (#2282) on, which no "
    "release carries; measured by installing both real wheels with pip and uv (tests/test_flash_attn_scenarios.py)",
    read_from="flash_attn-2.8.3 and 2.8.3.post2 sdists, flash_attn_4-4.0.0b36 wheel",
)

NO_RELEASED_COEXISTENCE: Fact[bool] = Fact(
    value=True,
    note="flash-attention's fix for FA2 + FA4 co-existence (pkgutil.extend_path in flash_attn/__init__.py, commit "
    "4219765d, #2331) is in no release on PyPI: 2.8.3 and 2.8.3.post2 ship a plain regular package",
    source="flash_attn/__init__.py of both sdists (no extend_path, pkgutil or declare_namespace anywhere)",
    read_from="flash_attn-2.8.3.tar.gz (sha256 1e71dd64...) and flash_attn-2.8.3.post2.tar.gz (sha256 d0f9f0b0...)",
)
