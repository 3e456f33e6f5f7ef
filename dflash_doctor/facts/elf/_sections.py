"""Find sections by name or type without building every section object.

pyelftools' `iter_sections()` and `get_section_by_name()` construct each section in the file, and building
the `.gnu.hash` section parses its whole bucket and chain arrays through `construct`: about 0.1 s for
libtorch_cuda.so (a 1 GB library), paid again on every iteration. Reading only the section headers and
constructing the one section asked for keeps a scan of libtorch_cuda.so at a third of the time.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pyelftools is imported where a file is opened (symbols.open_elf): 30 ms a run that opens none
    from elftools.construct.lib.container import Container
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import Section

__all__ = ["section_by_name", "sections_of_type"]


def _headers(elf: ELFFile) -> Iterator[tuple[int, Container]]:
    # _get_section_header is private but has been there since pyelftools 0.2x; it parses one header.
    for index in range(elf.num_sections()):
        yield index, elf._get_section_header(index)


def sections_of_type(elf: ELFFile, *types: str) -> Iterator[Section]:
    """The sections whose sh_type is one of `types` ("SHT_DYNSYM", ...), in file order."""
    for index, header in _headers(elf):
        if header["sh_type"] in types:
            yield elf.get_section(index)


def section_by_name(elf: ELFFile, name: str) -> Section | None:
    """The first section named `name`, or None."""
    for index, header in _headers(elf):
        if elf._get_section_name(header) == name:
            return elf.get_section(index)
    return None
