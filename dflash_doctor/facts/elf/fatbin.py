"""Find the CUDA fat binary inside a host ELF and list the GPU code it carries, reading headers only.

NVIDIA publishes no specification of the container. Section and wrapper names come from the toolkit's
own `include/fatbinary_section.h` (CUDA 13.0); the layout matches the public readers of the format and
was checked field by field on nvcc 13.0.88 output (plain, `-Xfatbin -compress-all`, `-compress=false`,
sm_90a/sm_100f/compute_100f/lto_90 builds) and on cuBLAS 12.8.4.1 (libcublas, libcublasLt: 2,918
containers), where the arch lists equal `cuobjdump --list-elf --list-ptx` 13.2 entry for entry.

All integers little-endian.

Where the fatbin lives (fatbinary_section.h):
    `.nv_fatbin`        executable fatbin data, what the runtime registers and loads.
    `__nv_relfatbin`    relocatable fatbin (`-rdc=true` objects, and shared libraries built with it),
                        input to device linking; used only when `.nv_fatbin` is absent (cuobjdump's
                        default is the same).
    `.nvFatBinSegment`  one wrapper per registered fatbin (`__fatBinC_Wrapper_t`, 24 bytes):
                          u32 magic 0x466243B1 | u32 version (1; 2 = device-linked) |
                          u64 address of the fatbin data | u64 filename / prelinked fatbin list
                        followed when the data section has been renamed or merged away.

Container (a section holds one or more back to back; cuBLASLt has thousands):
    0x00 u32 magic        0xBA55ED50
    0x04 u16 version      1
    0x06 u16 header_size  16; entries start at container + header_size
    0x08 u64 fat_size     bytes of entries after the header

Entry (header, then its payload):
    0x00 u16 kind         1 PTX, 2 ELF (a cubin: SASS), 8 LTO-IR (NVVM IR from -code=lto_XY);
                          other kinds are counted and reported as "kind<N>"
    0x02 u16 version      0x0101
    0x04 u32 header_size  64; 80 for PTX, 96/112 for sm_100+ cubins (CUDA 12.8+), 120 for LTO-IR;
                          the payload starts at entry + header_size
    0x08 u64 payload_size padded to 8; the next entry starts at entry + header_size + payload_size
    0x10 u32 compressed payload size (0 when stored raw)
    0x14 u32 (0; 0x40 when the header is longer than 64 bytes)
    0x18 u16 minor, 0x1a u16 major: PTX ISA version for PTX ("9.0"), cubin ABI for ELF ("1.8")
    0x1c u32 arch         SM number: 80, 90, 100, 120 (the suffix is in the flags)
    0x20 u32 name offset, 0x24 u32 name length (0 in nvcc output)
    0x28 u64 flags        0x1 64-bit | 0x2 debug | 0x10 Linux host |
                          0x1000, 0x2000 compressed (NVIDIA's LZ-style; cuBLAS 12.8 cubins) |
                          0x8000 zstd-compressed (CUDA 12.8+; payload starts 28 b5 2f fd) |
                          0x10000 on LTO-IR that cuobjdump cannot read ("Can't deobfuscate entry") |
                          0x100000 architecture-specific: sm_90a / compute_90a |
                          0x200000 family-specific: sm_100f / compute_100f |
                          0x1000000 on sm_100+ entries from CUDA 12.8+ (meaning unknown; ignored)
    0x30 u64 (0 for SASS/PTX)
    0x38 u64 uncompressed payload size (0 when stored raw)

A compressed entry still names its arch in the header, so nothing is ever decompressed. cuobjdump 13.2
lists an sm_100f cubin as "sm_100" in --list-elf (its --dump-elf says "arch = sm_100f"); this reader
keeps the suffix.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from dflash_doctor.facts.elf._sections import section_by_name, sections_of_type
from dflash_doctor.knowledge.archs import arch_sort_key
from dflash_doctor.shape import frozen_dataclass

if TYPE_CHECKING:
    from elftools.elf.elffile import ELFFile

__all__ = [
    "FATBIN_MAGIC",
    "WRAPPER_MAGIC",
    "FatbinEntry",
    "FatbinParse",
    "fatbin_facts",
    "parse_containers",
    "read_fatbin",
]

FATBIN_MAGIC: Final = 0xBA55ED50
WRAPPER_MAGIC: Final = 0x466243B1
_MAGIC_BYTES: Final = struct.pack("<I", FATBIN_MAGIC)

_CONTAINER: Final = struct.Struct("<IHHQ")
_ENTRY: Final = struct.Struct("<HHIQIIHHIIIQQQ")  # the 64-byte base every entry header starts with
_WRAPPER: Final = struct.Struct("<IIQQ")

KIND_PTX: Final = 1
KIND_ELF: Final = 2
KIND_LTO: Final = 8

FLAG_COMPRESSED: Final = 0x1000 | 0x2000 | 0x8000
FLAG_ARCH_SPECIFIC: Final = 0x100000
FLAG_FAMILY_SPECIFIC: Final = 0x200000

DATA_SECTION: Final = ".nv_fatbin"
RELOCATABLE_SECTION: Final = "__nv_relfatbin"
WRAPPER_SECTION: Final = ".nvFatBinSegment"

_MAX_PROBLEMS: Final = 20


# What the parser reads from: bytes, or an mmap of the whole file (sliced headers only, never copied).
Buffer: TypeAlias = bytes | mmap.mmap


@frozen_dataclass(frozen=True)
class FatbinEntry:
    kind: int
    arch: int
    flags: int
    version: tuple[int, int]
    header_size: int
    payload_size: int

    @property
    def compressed(self) -> bool:
        return bool(self.flags & FLAG_COMPRESSED)

    @property
    def suffix(self) -> str:
        if self.flags & FLAG_ARCH_SPECIFIC:
            return "a"
        if self.flags & FLAG_FAMILY_SPECIFIC:
            return "f"
        return ""

    @property
    def target(self) -> str:
        """`sm_90a` for a cubin, `compute_90` for PTX, `lto_90` for LTO-IR, `kind<N>_<arch>` otherwise."""
        prefix = {KIND_ELF: "sm", KIND_PTX: "compute", KIND_LTO: "lto"}.get(self.kind, f"kind{self.kind}")
        return f"{prefix}_{self.arch}{self.suffix}"


@dataclass
class FatbinParse:
    entries: list[FatbinEntry] = field(default_factory=list)
    containers: int = 0
    problems: list[str] = field(default_factory=list)

    def problem(self, message: str) -> None:
        if len(self.problems) < _MAX_PROBLEMS:
            self.problems.append(message)


def parse_containers(buf: Buffer, start: int, end: int, *, out: FatbinParse | None = None) -> FatbinParse:
    """Parse the containers in buf[start:end]. Never raises on bad data: damage becomes a problem string
    and parsing stops at the damaged container (entries read before it are kept)."""
    result = out if out is not None else FatbinParse()
    end = min(end, len(buf))
    pos = start
    while pos + _CONTAINER.size <= end:
        magic, _version, header_size, fat_size = _CONTAINER.unpack_from(buf, pos)
        if magic != FATBIN_MAGIC:
            # Containers are normally contiguous; tolerate alignment padding, report anything else.
            nxt = buf.find(_MAGIC_BYTES, pos + 1, end)
            gap_end = end if nxt < 0 else nxt
            if buf[pos : min(gap_end, pos + 4096)].strip(b"\0"):  # look, don't copy a huge gap
                result.problem(f"{gap_end - pos} bytes that are not a fatbin container at +{pos:#x}")
            if nxt < 0:
                break
            pos = nxt
            continue
        if header_size < _CONTAINER.size:
            result.problem(f"container at +{pos:#x} has header size {header_size}")
            break
        result.containers += 1
        container_end = pos + header_size + fat_size
        if container_end > end:
            result.problem(
                f"container at +{pos:#x} claims {fat_size} bytes, {container_end - end} more than there are "
                "(truncated)"
            )
            container_end = end
        _parse_entries(buf, pos + header_size, container_end, result)
        pos = container_end
    return result


def _parse_entries(buf: Buffer, pos: int, end: int, result: FatbinParse) -> None:
    while pos < end:
        if pos + _ENTRY.size > end:
            result.problem(f"entry header at +{pos:#x} runs past its container (truncated)")
            return
        (
            kind,
            _ver,
            header_size,
            payload_size,
            _csize,
            _x,
            minor,
            major,
            arch,
            _no,
            _nl,
            flags,
            _z,
            _usize,
        ) = _ENTRY.unpack_from(buf, pos)
        if header_size < _ENTRY.size:
            result.problem(f"entry at +{pos:#x} has header size {header_size}")
            return
        result.entries.append(FatbinEntry(kind, arch, flags, (major, minor), header_size, payload_size))
        nxt = pos + header_size + payload_size
        if nxt > end:
            result.problem(
                f"entry at +{pos:#x} ({result.entries[-1].target}) runs past its container (truncated)"
            )
            return
        pos = nxt


def fatbin_facts(parse: FatbinParse, section: str) -> dict[str, Any]:
    """JSON-able summary: sorted, de-duplicated arch lists and counts."""
    entries = parse.entries
    by_kind: dict[int, set[str]] = {}
    for entry in entries:
        by_kind.setdefault(entry.kind, set()).add(entry.target)
    ptx_isa = {f"{e.version[0]}.{e.version[1]}" for e in entries if e.kind == KIND_PTX}
    other = sorted(
        t for kind, targets in by_kind.items() if kind not in (KIND_ELF, KIND_PTX, KIND_LTO) for t in targets
    )
    return {
        "section": section,
        "sass": sorted(by_kind.get(KIND_ELF, ()), key=arch_sort_key),
        "ptx": sorted(by_kind.get(KIND_PTX, ()), key=arch_sort_key),
        "lto": sorted(by_kind.get(KIND_LTO, ()), key=arch_sort_key),
        "other": other,
        "ptx_isa": sorted(ptx_isa, key=lambda v: tuple(int(p) for p in v.split("."))),
        "entries": len(entries),
        "containers": parse.containers,
        "compressed": any(e.compressed for e in entries),
        "compressed_entries": sum(1 for e in entries if e.compressed),
        "problems": list(parse.problems),
    }


def read_fatbin(elf: ELFFile, buf: Buffer) -> dict[str, Any] | None:
    """The fatbin facts of an opened ELF, or None when it carries no CUDA device code.

    `buf` is the whole file (an mmap): only the container and entry headers are touched.
    """
    for name in (DATA_SECTION, RELOCATABLE_SECTION):
        section = section_by_name(elf, name)
        if section is None:
            continue
        parse = FatbinParse()
        if section["sh_type"] == "SHT_NOBITS":
            parse.problem(f"section {name} has no data in the file (stripped debug file?)")
            return fatbin_facts(parse, name)
        offset, size = section["sh_offset"], section["sh_size"]
        if offset + size > len(buf):
            parse.problem(
                f"section {name} ends {offset + size - len(buf)} bytes past the end of the file (truncated)"
            )
        parse_containers(buf, offset, offset + size, out=parse)
        return fatbin_facts(parse, name)
    wrappers = section_by_name(elf, WRAPPER_SECTION)
    if wrappers is not None:
        parse = _follow_wrappers(elf, buf, wrappers["sh_offset"], wrappers["sh_size"], wrappers["sh_addr"])
        return fatbin_facts(parse, WRAPPER_SECTION)
    return None


def _follow_wrappers(elf: ELFFile, buf: Buffer, offset: int, size: int, section_address: int) -> FatbinParse:
    """Parse the containers the `.nvFatBinSegment` wrappers point at (addresses -> file offsets via PT_LOAD)."""
    parse = FatbinParse()
    if elf.elfclass != 64 or not elf.little_endian:
        parse.problem(f"{WRAPPER_SECTION} wrappers of a {elf.elfclass}-bit ELF are not read")
        return parse
    loads = [
        (seg["p_vaddr"], seg["p_filesz"], seg["p_offset"])
        for seg in elf.iter_segments()
        if seg["p_type"] == "PT_LOAD"
    ]
    end = min(offset + size, len(buf))
    # (wrapper position, address of its data field, the address stored there)
    wrappers: list[tuple[int, int, int]] = []
    for pos in range(offset, end - _WRAPPER.size + 1, _WRAPPER.size):
        magic, _version, address, _names = _WRAPPER.unpack_from(buf, pos)
        if magic == WRAPPER_MAGIC:
            wrappers.append((pos, section_address + pos - offset + 8, address))
    if any(address == 0 for _pos, _field, address in wrappers):
        # Linkers that leave RELATIVE addends out of the section (lld) store 0: take them from .rela.dyn.
        addends = _relative_addends(elf, buf, {field for _pos, field, address in wrappers if address == 0})
        wrappers = [(pos, fld, address or addends.get(fld, 0)) for pos, fld, address in wrappers]
    seen: set[int] = set()
    for pos, _field, address in wrappers:
        if address in seen:
            continue
        seen.add(address)
        file_offset = next(
            (off + address - va for va, filesz, off in loads if va <= address < va + filesz), None
        )
        if file_offset is None:
            # An unrelocated object (address 0) or an address outside the file: nothing to read.
            parse.problem(
                f"{WRAPPER_SECTION} wrapper at +{pos:#x} points at {address:#x}, outside the file's segments"
            )
            continue
        if file_offset + _CONTAINER.size > len(buf):
            parse.problem(f"fatbin at +{file_offset:#x} lies past the end of the file (truncated)")
            continue
        magic, _v, header_size, fat_size = _CONTAINER.unpack_from(buf, file_offset)
        if magic != FATBIN_MAGIC:
            parse.problem(
                f"{WRAPPER_SECTION} wrapper points at +{file_offset:#x}, which is not a fatbin container"
            )
            continue
        parse_containers(buf, file_offset, file_offset + header_size + fat_size, out=parse)
    if not seen:
        parse.problem(f"{WRAPPER_SECTION} holds no fatbin wrapper")
    return parse


_RELATIVE_TYPES: Final = {8, 1027}  # R_X86_64_RELATIVE, R_AARCH64_RELATIVE
_RELA64: Final = struct.Struct("<QQq")


def _relative_addends(elf: ELFFile, buf: Buffer, fields: set[int]) -> dict[int, int]:
    """Addends of the RELATIVE relocations that target `fields` (64-bit little-endian RELA only)."""
    found: dict[int, int] = {}
    for section in sections_of_type(elf, "SHT_RELA"):
        if not section["sh_flags"] & 0x2:  # SHF_ALLOC: dynamic relocs
            continue
        start = section["sh_offset"]
        stop = min(start + section["sh_size"], len(buf))
        view = memoryview(buf)[start : stop - (stop - start) % _RELA64.size]
        try:
            for r_offset, r_info, r_addend in _RELA64.iter_unpack(view):
                if r_offset in fields and r_info & 0xFFFFFFFF in _RELATIVE_TYPES:
                    found[r_offset] = r_addend
        finally:
            view.release()
    return found
