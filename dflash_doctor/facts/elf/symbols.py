"""Dynamic-linking facts of an ELF shared library, read with pyelftools and never by loading it.

- which GLIBC_/GLIBCXX_/CXXABI_ symbol versions it requires (`.gnu.version_r`): the
  "version `GLIBCXX_3.4.32' not found" failure, seen before the import;
- its DT_NEEDED libraries and RPATH/RUNPATH;
- which libtorch/libc10 symbols it leaves undefined, and which symbols a torch library exports: the
  "undefined symbol: _ZN3c10..." failure of an extension built against another torch;
- the machine's glibc and libstdc++ versions, to compare with the above.

Symbol tables are read straight from an mmap with `struct.iter_unpack` at the offsets pyelftools gives:
pyelftools' per-symbol objects take ~100 us each, and libtorch_cpu exports well over 100k symbols.
"""

from __future__ import annotations

import ctypes.util
import mmap
import os
import platform
import re
import shutil
import stat
import struct
import subprocess
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from dflash_doctor.facts.elf._sections import sections_of_type
from dflash_doctor.facts.safefile import UnsafeFile, open_regular

if TYPE_CHECKING:  # pyelftools is imported where a file is opened (open_elf): 30 ms a run that opens none
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import Section

__all__ = [
    "MAX_UNDEFINED",
    "ElfError",
    "defined_versions",
    "dynamic_facts",
    "exported_symbols",
    "machine_runtime_versions",
    "missing_symbols",
    "open_elf",
    "required_versions",
    "unmet_versions",
    "version_tuple",
]

Buffer: TypeAlias = bytes | mmap.mmap

MAX_UNDEFINED: Final = 200
VERSIONED_PREFIXES: Final = ("GLIBC", "GLIBCXX", "CXXABI")
_VERSION_RE: Final = re.compile(r"^(GLIBC|GLIBCXX|CXXABI)_(\d+(?:\.\d+)*)$")
# Itanium-mangled names in torch's C++ namespaces (c10::, at::, torch::, caffe2::), with the special-name
# prefixes for vtables, typeinfo, guard variables and TLS wrappers, plus torch's global THP* functions.
_TORCH_SYMBOL: Final = re.compile(rb"^_Z(?:(?:T[VISTHW]|GV)?N[rVKRO]*(?:3c10|2at|5torch|6caffe2)\d|\d+THP)")

_SHN_UNDEF: Final = 0
_STB_GLOBAL, _STB_WEAK, _STB_GNU_UNIQUE = 1, 2, 10
_STT_SECTION, _STT_FILE = 3, 4
_STV_HIDDEN, _STV_INTERNAL = 2, 1


class ElfError(Exception):
    """A file that cannot be read as an ELF shared library; str() names the file."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


@contextmanager
def open_elf(path: str | os.PathLike[str]) -> Iterator[tuple[ELFFile, mmap.mmap]]:
    """Open `path` as ELF, with an mmap of the whole file for zero-copy reads. Raises ElfError only."""
    from elftools.elf.elffile import ELFFile

    name = os.fspath(path)
    try:
        # Only a regular file, opened with O_NONBLOCK: a FIFO named like a library must not block the doctor.
        handle = open_regular(name)
    except UnsafeFile as exc:
        raise ElfError(name, exc.reason) from None
    except OSError as exc:
        raise ElfError(name, f"cannot open: {exc.strerror or exc}") from None
    with handle:
        try:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise ElfError(name, "not a regular file")
            if info.st_size < 4 or handle.read(4) != b"\x7fELF":
                raise ElfError(name, "not an ELF file (no \\x7fELF magic)")
            mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as exc:
            raise ElfError(name, f"cannot read: {exc.strerror or exc}") from None
        with mapped:
            try:
                handle.seek(0)
                elf = ELFFile(handle)
            except Exception as exc:  # noqa: BLE001 - pyelftools raises ELFError, construct and struct errors
                raise ElfError(name, f"malformed or truncated ELF ({type(exc).__name__}: {exc})") from None
            yield elf, mapped


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def _max_versions(names: Iterable[str]) -> dict[str, str]:
    best: dict[str, str] = {}
    for name in names:
        match = _VERSION_RE.match(name)
        if match is None:  # GLIBC_PRIVATE, GLIBC_ABI_DT_RELR: no number to compare
            continue
        prefix, version = match.groups()
        if prefix not in best or version_tuple(version) > version_tuple(best[prefix]):
            best[prefix] = version
    return best


def required_versions(elf: ELFFile) -> dict[str, str]:
    """Highest GLIBC/GLIBCXX/CXXABI version the file requires (`.gnu.version_r`), per prefix."""
    names: list[str] = []
    from elftools.elf.gnuversions import GNUVerNeedSection

    for section in sections_of_type(elf, "SHT_GNU_verneed"):
        if isinstance(section, GNUVerNeedSection):
            for _verneed, auxiliaries in section.iter_versions():
                names.extend(aux.name for aux in auxiliaries)
    return _max_versions(names)


def defined_versions(elf: ELFFile) -> dict[str, str]:
    """Highest GLIBC/GLIBCXX/CXXABI version the file defines (`.gnu.version_d`): what a libc/libstdc++
    provides."""
    names: list[str] = []
    from elftools.elf.gnuversions import GNUVerDefSection

    for section in sections_of_type(elf, "SHT_GNU_verdef"):
        if isinstance(section, GNUVerDefSection):
            for _verdef, auxiliaries in section.iter_versions():
                names.extend(aux.name for aux in auxiliaries)
    return _max_versions(names)


def unmet_versions(needs: dict[str, str], provides: dict[str, str]) -> dict[str, dict[str, str | None]]:
    """The requirements `provides` does not meet: {"GLIBCXX": {"needs": "3.4.32", "provides": "3.4.30"}}."""
    unmet: dict[str, dict[str, str | None]] = {}
    for prefix, version in needs.items():
        have = provides.get(prefix)
        if have is None or version_tuple(have) < version_tuple(version):
            unmet[prefix] = {"needs": version, "provides": have}
    return unmet


def _dynamic_tags(elf: ELFFile) -> dict[str, list[str]]:
    from elftools.elf.dynamic import DynamicSection

    tags: dict[str, list[str]] = {"needed": [], "runpath": [], "rpath": [], "soname": []}
    for section in sections_of_type(elf, "SHT_DYNAMIC"):
        if not isinstance(section, DynamicSection):
            continue
        for tag in section.iter_tags():
            kind = tag.entry.d_tag
            # pyelftools sets the string of a tag as an attribute named after it (tag.needed, tag.runpath)
            if kind == "DT_NEEDED":
                tags["needed"].append(str(getattr(tag, "needed", "")))
            elif kind == "DT_RUNPATH":
                tags["runpath"].extend(p for p in str(getattr(tag, "runpath", "")).split(":") if p)
            elif kind == "DT_RPATH":
                tags["rpath"].extend(p for p in str(getattr(tag, "rpath", "")).split(":") if p)
            elif kind == "DT_SONAME":
                tags["soname"].append(str(getattr(tag, "soname", "")))
    return tags


def _dynsym(elf: ELFFile) -> Section | None:
    return next(sections_of_type(elf, "SHT_DYNSYM"), None)


def _iter_dynamic_symbols(elf: ELFFile, buf: Buffer, path: str) -> Iterator[tuple[bytes, int, int, int, int]]:
    """(name, binding, type, section index, visibility) for each `.dynsym` entry, read from the mmap."""
    symtab = _dynsym(elf)
    if symtab is None:
        return
    strtab = elf.get_section(symtab["sh_link"])
    is64 = elf.elfclass == 64
    layout = struct.Struct(("<" if elf.little_endian else ">") + ("IBBHQQ" if is64 else "IIIBBH"))
    entsize = symtab["sh_entsize"] or layout.size
    start, size = symtab["sh_offset"], symtab["sh_size"]
    str_start, str_end = strtab["sh_offset"], strtab["sh_offset"] + strtab["sh_size"]
    if start + size > len(buf) or str_end > len(buf) or entsize < layout.size:
        raise ElfError(path, "dynamic symbol table lies past the end of the file (truncated)")
    for pos in range(start, start + size - entsize + 1, entsize):
        if is64:
            name_off, info, other, shndx, _value, _size = layout.unpack_from(buf, pos)
        else:
            name_off, _value, _size, info, other, shndx = layout.unpack_from(buf, pos)
        name_start = str_start + name_off
        name_end = buf.find(b"\0", name_start, str_end)
        name = buf[name_start : name_end if name_end >= 0 else str_end]
        yield name, info >> 4, info & 0xF, shndx, other & 0x3


def _exported(elf: ELFFile, buf: Buffer, path: str) -> set[str]:
    return {
        name.decode("utf-8", "replace")
        for name, bind, kind, shndx, vis in _iter_dynamic_symbols(elf, buf, path)
        if name
        and shndx != _SHN_UNDEF
        and bind in (_STB_GLOBAL, _STB_WEAK, _STB_GNU_UNIQUE)
        and kind not in (_STT_SECTION, _STT_FILE)
        and vis not in (_STV_HIDDEN, _STV_INTERNAL)
    }


def _undefined_torch(elf: ELFFile, buf: Buffer, path: str) -> list[str]:
    # Weak references resolve to NULL when missing and never fail the load; only strong ones matter.
    return sorted(
        {
            name.decode("utf-8", "replace")
            for name, bind, _kind, shndx, _vis in _iter_dynamic_symbols(elf, buf, path)
            if shndx == _SHN_UNDEF and bind == _STB_GLOBAL and _TORCH_SYMBOL.match(name)
        }
    )


def dynamic_facts(elf: ELFFile, buf: Buffer, path: str, exports: set[str] | None = None) -> dict[str, Any]:
    """needs_versions, needed, rpath/runpath and the (capped) undefined torch symbols of an opened ELF;
    with `exports` (what the installed torch libraries export) also the ones none of them provides,
    computed over all undefined symbols before capping."""
    tags = _dynamic_tags(elf)
    undefined = _undefined_torch(elf, buf, path)
    missing = None if exports is None else missing_symbols(undefined, exports)
    return {
        "needs_versions": required_versions(elf),
        "needed": tags["needed"],
        "runpath": tags["runpath"] or tags["rpath"],
        "undefined": undefined[:MAX_UNDEFINED],
        "undefined_total": len(undefined),
        "missing": None if missing is None else missing[:MAX_UNDEFINED],
        "missing_total": None if missing is None else len(missing),
    }


def exported_symbols(path: str | os.PathLike[str]) -> set[str]:
    """Names of the symbols a shared library defines for others (`.dynsym`: defined, global/weak/unique,
    default or protected visibility). Raises ElfError (naming the file) on anything that is not a
    readable ELF."""
    name = os.fspath(path)
    with open_elf(name) as (elf, buf):
        try:
            return _exported(elf, buf, name)
        except ElfError:
            raise
        except Exception as exc:  # noqa: BLE001 - a malformed table is a fact about the file
            raise ElfError(name, f"unreadable dynamic symbol table ({type(exc).__name__}: {exc})") from None


def missing_symbols(undefined: Iterable[str], exported: set[str]) -> list[str]:
    """The undefined symbols no provider exports: what the dynamic loader will report as missing."""
    return sorted(set(undefined) - exported)


# ---------------------------------------------------------------------------------------------------------
# The machine's runtime libraries
# ---------------------------------------------------------------------------------------------------------

_LIBSTDCXX: Final = "libstdc++.so.6"


def _glibc_version() -> tuple[str | None, str]:
    try:
        value = os.confstr("CS_GNU_LIBC_VERSION")  # "glibc 2.36"
    except (AttributeError, ValueError, OSError):
        value = None
    if value and value.startswith("glibc "):
        return value.split()[1], "os.confstr(CS_GNU_LIBC_VERSION)"
    lib, version = platform.libc_ver()
    if lib == "glibc" and version:
        return version, "platform.libc_ver()"
    return None, "not glibc (os.confstr and platform.libc_ver found none)"


def _machine(path: str) -> str | None:
    try:
        with open_elf(path) as (elf, _buf):
            return str(elf["e_machine"]) + f"/{elf.elfclass}"
    except ElfError:
        return None


def _ldconfig_paths() -> list[str]:
    tool = shutil.which("ldconfig") or next(
        (p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if os.path.exists(p)), None
    )
    if tool is None:
        return []
    try:
        listing = subprocess.run([tool, "-p"], capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    # "\tlibstdc++.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libstdc++.so.6"
    return [
        line.split("=>", 1)[1].strip()
        for line in listing.splitlines()
        if line.strip().startswith(_LIBSTDCXX + " ") and "=>" in line
    ]


def _executable_rpath(executable: str) -> list[str]:
    """The interpreter's DT_RPATH (not RUNPATH): it applies to every library the process loads, which is
    how a conda env's own libstdc++ shadows the system one."""
    try:
        with open_elf(executable) as (elf, _buf):
            tags = _dynamic_tags(elf)
    except ElfError:
        return []
    if tags["runpath"]:
        return []
    origin = os.path.dirname(os.path.realpath(executable))
    return [p.replace("$ORIGIN", origin).replace("${ORIGIN}", origin) for p in tags["rpath"]]


def _find_libstdcxx(executable: str) -> tuple[str | None, str]:
    """The libstdc++.so.6 `executable` would load, in the dynamic loader's search order."""
    for directory in _executable_rpath(executable):
        candidate = os.path.join(directory, _LIBSTDCXX)
        if os.path.isfile(candidate):
            return candidate, "DT_RPATH of " + executable
    for directory in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
        candidate = os.path.join(directory, _LIBSTDCXX)
        if directory and os.path.isfile(candidate):
            return candidate, "LD_LIBRARY_PATH"
    ours = _machine(executable)
    cached = _ldconfig_paths()
    for candidate in cached:  # the cache lists every ABI (x86-64, i386, ...): take the interpreter's
        if ours is None or _machine(candidate) == ours:
            return candidate, "ldconfig -p"
    found = ctypes.util.find_library("stdc++")
    if found:
        for directory in (
            "/lib64",
            "/usr/lib64",
            "/lib",
            "/usr/lib",
            "/usr/lib/x86_64-linux-gnu",
            "/usr/lib/aarch64-linux-gnu",
        ):
            candidate = os.path.join(directory, found)
            if os.path.isfile(candidate):
                return candidate, "ctypes.util.find_library"
    return None, "not found (rpath, LD_LIBRARY_PATH, ldconfig -p, find_library)"


def machine_runtime_versions(executable: str | None = None) -> dict[str, Any]:
    """What this machine's C and C++ runtimes provide to `executable` (default: this interpreter), as facts:

    {"provides": {"GLIBC": "2.36", "GLIBCXX": "3.4.30", "CXXABI": "1.3.13"},
     "glibc": {"version", "read_from"}, "libstdcxx": {"path", "found_by"}, "errors": [...]}

    `provides` compares directly with scan_library()["needs_versions"] via unmet_versions(). Pass the target
    interpreter: a conda Python's DT_RPATH makes its processes load the env's own libstdc++.
    """
    executable = executable or sys.executable
    errors: list[str] = []
    glibc, glibc_from = _glibc_version()
    provides: dict[str, str] = {"GLIBC": glibc} if glibc else {}
    if glibc is None:
        errors.append(glibc_from)
    path, found_by = _find_libstdcxx(executable)
    if path is None:
        errors.append(f"{_LIBSTDCXX} {found_by}")
    else:
        try:
            with open_elf(path) as (elf, _buf):
                defined = defined_versions(elf)
            provides.update({k: v for k, v in defined.items() if k in ("GLIBCXX", "CXXABI")})
        except ElfError as exc:
            errors.append(str(exc))
    return {
        "provides": provides,
        "glibc": {"version": glibc, "read_from": glibc_from},
        "libstdcxx": {"path": path, "found_by": found_by},
        "executable": executable,
        "errors": errors,
    }
