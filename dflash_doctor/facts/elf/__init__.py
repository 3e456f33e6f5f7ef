"""Static facts about compiled extensions, read from their ELF files without loading them.

`scan_library(path)` answers, for one `.so`: which GPU architectures its fatbin carries as SASS and as
PTX (fatbin.py), which glibc/libstdc++ symbol versions it requires, which libraries it needs and which
libtorch/libc10 symbols it leaves undefined (symbols.py). Nothing here imports torch or dlopens anything;
a 750 MB libcublasLt costs a few hundred kilobytes of header reads.
"""

from __future__ import annotations

import os
from typing import Any

from dflash_doctor.facts.elf.fatbin import read_fatbin
from dflash_doctor.facts.elf.symbols import (
    ElfError,
    dynamic_facts,
    exported_symbols,
    machine_runtime_versions,
    missing_symbols,
    open_elf,
    unmet_versions,
)

__all__ = [
    "ElfError",
    "exported_symbols",
    "machine_runtime_versions",
    "missing_symbols",
    "scan_library",
    "unmet_versions",
]


def _empty(path: str, error: str | None) -> dict[str, Any]:
    return {
        "path": path,
        "fatbin": None,
        "needs_versions": {},
        "needed": [],
        "runpath": [],
        "undefined": [],
        "undefined_total": 0,
        "missing": None,
        "missing_total": None,
        "error": error,
    }


def scan_library(path: str | os.PathLike[str], exports: set[str] | None = None) -> dict[str, Any]:
    """JSON-able facts about one shared library; never raises for a bad file.

    `exports`: the union of exported_symbols() of the installed libtorch/libc10 libraries; when given,
    "missing" lists the undefined torch symbols none of them exports (the import would fail with
    "undefined symbol: ...").

    {"path", "fatbin": {"section", "sass", "ptx", "lto", "other", "ptx_isa", "entries", "containers",
                        "compressed", "compressed_entries", "problems"} | None (no CUDA device code),
     "needs_versions": {"GLIBC": "2.32", "GLIBCXX": "3.4.30", "CXXABI": "1.3.13"},
     "needed": [DT_NEEDED], "runpath": [RUNPATH or RPATH entries],
     "undefined": [mangled c10::/at::/torch::/caffe2:: and THP* symbols left undefined, at most 200],
     "undefined_total": n, "missing": [...] | None, "missing_total": n | None,
     "error": "<path>: <what is wrong>" | None}
    """
    name = os.fspath(path)
    try:
        with open_elf(name) as (elf, buf):
            facts = _empty(name, None)
            facts["fatbin"] = read_fatbin(elf, buf)
            facts.update(dynamic_facts(elf, buf, name, exports))
            return facts
    except ElfError as exc:
        return _empty(name, str(exc))
    except Exception as exc:  # noqa: BLE001 - a malformed table deep in the file is a fact, not a crash
        return _empty(name, f"{name}: unreadable ELF ({type(exc).__name__}: {exc})")
