"""Distributions that make a top-level package importable only through a `.pth` file, and where Python reads
`.pth` files at all.

Python's `site` module processes `.pth` files only in the site directories it adds (`site.addsitedir`: the
prefix's site-packages, the user site); a directory on PYTHONPATH, one a `.pth` line adds, or one a
`pip install --target` filled is put on sys.path as it is, its `.pth` files never read.
"""

from __future__ import annotations

from collections.abc import Mapping

from dflash_doctor.knowledge import Fact

__all__ = ["PTH_PROVIDES"]


PTH_PROVIDES: Fact[Mapping[str, tuple[str, ...]]] = Fact(
    value={
        "nvidia_cutlass_dsl.pth": ("cutlass",),
        "nvidia_cutlass_dsl_packages.pth": ("cutlass",),
    },
    source="nvidia_cutlass_dsl_libs_base-4.5.2 (cp311 manylinux_2_28): nvidia_cutlass_dsl.pth holds the path line "
    "'nvidia_cutlass_dsl/python_packages', where cutlass/__init__.py is (nvidia_cutlass_dsl/python_packages/cutlass/); "
    "nvidia_cutlass_dsl-4.8.0-py3-none-any (10 KB, the top-level wheel, its only file besides the dist-info): "
    "nvidia_cutlass_dsl_packages.pth, the import line `import sys, os, nvidia_cutlass_dsl; sys.path.insert(0, "
    "os.path.join(nvidia_cutlass_dsl.__path__[0], 'dsl_packages'))`; 'No module named cutlass' where the .pth is not "
    "processed: NVIDIA/cutlass #3001, #3034 (research notes field-2026-12-c section 2). Python's site.py: "
    "addsitedir() reads the .pth files of a site directory, addpackage() runs lines that start with 'import' and "
    "appends the others, joined to the site directory, when they exist",
    read_from="nvidia-cutlass-dsl-libs-base 4.5.2 and nvidia-cutlass-dsl 4.8.0 wheels (PyPI, 2026-12-04); CPython "
    "3.11 Lib/site.py",
    note="A .pth not listed here is judged by its path lines alone (whether they are on sys.path); its import lines "
    "are left alone, their effect unknown (setuptools' distutils-precedence.pth is one).",
)
