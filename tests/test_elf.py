"""The ELF layer read on real binaries: CUDA kernels compiled here with nvcc for a known set of
architectures, and tiny C/C++ libraries compiled with gcc/g++ for the symbol-version and undefined-symbol
facts. Nothing is faked but the damaged files."""

from __future__ import annotations

import glob
import json
import os
import platform
import re
import shutil
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from dflash_doctor.facts.elf import (
    ElfError,
    exported_symbols,
    machine_runtime_versions,
    missing_symbols,
    scan_library,
    unmet_versions,
)
from dflash_doctor.facts.elf.fatbin import parse_containers

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not on PATH")
needs_gcc = pytest.mark.skipif(
    shutil.which("gcc") is None or shutil.which("g++") is None, reason="no gcc/g++"
)

KERNEL = """
__global__ void add(float* a, const float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] += b[i];
}
extern "C" void launch(float* a, const float* b, int n) { add<<<(n + 255) / 256, 256>>>(a, b, n); }
"""

# -gencode sets: (arch, code) -> what the fatbin must list
HOPPER = ["arch=compute_80,code=sm_80", "arch=compute_90a,code=sm_90a", "arch=compute_90,code=compute_90"]
BLACKWELL = [
    "arch=compute_100f,code=[sm_100f,compute_100f]",
    "arch=compute_120a,code=compute_120a",
    "arch=compute_90,code=lto_90",
]
MANGLED_C10_WARN = "_ZN3c1015warn_deprecatedEPKci"  # c10::warn_deprecated(char const*, int)


def _gencode(codes: list[str]) -> list[str]:
    return [arg for code in codes for arg in ("-gencode", code)]


# Builds every nvcc since CUDA 11 can do; the family-specific (`f`) targets need CUDA 12.9+.
OPTIONAL_BUILDS = {"blackwell"}


@pytest.fixture(scope="session")
def cuda_libs() -> dict[str, Path]:
    """Shared libraries (and one -rdc object) built once per machine and nvcc, in the test cache
    (`realenv.nvcc_builds`); the tests read them and never write there."""
    if NVCC is None:
        pytest.skip("nvcc not on PATH")
    from realenv import nvcc_builds

    shared = ["-shared", "-Xcompiler", "-fPIC"]
    builds = {
        "raw": [*shared, *_gencode(HOPPER), "-Xfatbin", "-compress=false"],
        "compressed": [*shared, *_gencode(HOPPER), "-Xfatbin", "-compress-all"],
        "blackwell": [*shared, *_gencode(BLACKWELL)],
        "rdc": ["-c", "-rdc=true", "-Xcompiler", "-fPIC", "-gencode", "arch=compute_86,code=sm_86"],
    }
    return nvcc_builds(NVCC, KERNEL, builds, frozenset(OPTIONAL_BUILDS), outputs={"rdc": "rdc.o"})


def _built(libs: dict[str, Path], name: str) -> Path:
    if name not in libs:
        pytest.skip(f"this nvcc cannot build the {name} targets (family-specific archs need CUDA 12.9+)")
    return libs[name]


def _section(path: Path, name: str) -> tuple[int, int, int]:
    with open(path, "rb") as handle:
        section = ELFFile(handle).get_section_by_name(name)
        assert section is not None
        return section["sh_offset"], section["sh_size"], section["sh_addr"]


@pytest.fixture(scope="session")
def relocated(cuda_libs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """The raw library with `.nv_fatbin` renamed away (only `.nvFatBinSegment` leads to the data), and a
    copy whose wrappers hold 0 in place of the data address, as lld leaves them (address in .rela.dyn)."""
    if shutil.which("objcopy") is None:
        pytest.skip("objcopy not on PATH")
    moved = tmp_path_factory.mktemp("relocated") / "libmoved.so"
    subprocess.run(
        ["objcopy", "--rename-section", ".nv_fatbin=.rodata.moved", str(cuda_libs["raw"]), str(moved)],
        check=True,
    )
    zeroed = moved.with_name("libzeroed.so")
    shutil.copy(moved, zeroed)
    offset, size, _addr = _section(zeroed, ".nvFatBinSegment")
    with open(zeroed, "r+b") as handle:
        for wrapper in range(offset, offset + size, 24):
            handle.seek(wrapper + 8)
            handle.write(bytes(8))
    yield {"moved": moved, "zeroed": zeroed}


# ---------------------------------------------------------------------------------------------------------
# fatbin: the architectures nvcc was asked for, no more and no less
# ---------------------------------------------------------------------------------------------------------


@needs_nvcc
def test_uncompressed_build_lists_exactly_its_sass_and_ptx(cuda_libs: dict[str, Path]) -> None:
    fatbin = scan_library(cuda_libs["raw"])["fatbin"]
    assert fatbin["section"] == ".nv_fatbin"
    assert fatbin["sass"] == ["sm_80", "sm_90a"]
    assert fatbin["ptx"] == ["compute_90"]
    assert fatbin["lto"] == [] and fatbin["other"] == []
    assert fatbin["compressed"] is False and fatbin["compressed_entries"] == 0
    assert fatbin["problems"] == []


@needs_nvcc
def test_compressed_build_reads_archs_from_entry_headers_and_flags_compression(
    cuda_libs: dict[str, Path],
) -> None:
    fatbin = scan_library(cuda_libs["compressed"])["fatbin"]
    assert fatbin["sass"] == ["sm_80", "sm_90a"]
    assert fatbin["ptx"] == ["compute_90"]
    assert fatbin["compressed"] is True
    assert fatbin["compressed_entries"] == fatbin["entries"]
    assert fatbin["problems"] == []


@needs_nvcc
def test_ptx_isa_version_of_the_compiling_toolkit_is_reported(cuda_libs: dict[str, Path]) -> None:
    ptx_isa = scan_library(cuda_libs["raw"])["fatbin"]["ptx_isa"]
    assert len(ptx_isa) == 1 and re.fullmatch(r"\d+\.\d+", ptx_isa[0])
    assert tuple(map(int, ptx_isa[0].split("."))) >= (7, 0)


@needs_nvcc
def test_family_and_arch_specific_suffixes_and_lto_ir_are_kept_apart(cuda_libs: dict[str, Path]) -> None:
    fatbin = scan_library(_built(cuda_libs, "blackwell"))["fatbin"]
    assert fatbin["sass"] == ["sm_100f"]
    assert fatbin["ptx"] == ["compute_100f", "compute_120a"]
    assert fatbin["lto"] == ["lto_90"]
    assert fatbin["problems"] == []


@needs_nvcc
def test_relocatable_object_is_read_from_nv_relfatbin(cuda_libs: dict[str, Path]) -> None:
    fatbin = scan_library(cuda_libs["rdc"])["fatbin"]
    assert fatbin["section"] == "__nv_relfatbin"
    assert fatbin["sass"] == ["sm_86"]


@needs_nvcc
def test_without_nv_fatbin_the_wrapper_segment_leads_to_the_data(relocated: dict[str, Path]) -> None:
    fatbin = scan_library(relocated["moved"])["fatbin"]
    assert fatbin["section"] == ".nvFatBinSegment"
    assert (fatbin["sass"], fatbin["ptx"]) == (["sm_80", "sm_90a"], ["compute_90"])
    assert fatbin["problems"] == []


@needs_nvcc
def test_wrapper_addresses_left_to_dynamic_relocations_are_resolved(relocated: dict[str, Path]) -> None:
    fatbin = scan_library(relocated["zeroed"])["fatbin"]
    assert (fatbin["sass"], fatbin["ptx"]) == (["sm_80", "sm_90a"], ["compute_90"])


def _cuobjdump() -> str | None:
    found = shutil.which("cuobjdump") or next(iter(sorted(glob.glob("/usr/local/cuda*/bin/cuobjdump"))), None)
    return found


def _cuobjdump_listing(tool: str, path: Path) -> tuple[set[str], set[str]]:
    elf = subprocess.run([tool, "--list-elf", str(path)], capture_output=True, text=True, check=True).stdout
    ptx = subprocess.run([tool, "--list-ptx", str(path)], capture_output=True, text=True, check=True).stdout
    cubins = set(re.findall(r"\.(sm_\d+[af]?)\.cubin$", elf, re.MULTILINE))
    modules = {"compute_" + m[3:] for m in re.findall(r"\.(sm_\d+[af]?)\.ptx$", ptx, re.MULTILINE)}
    return cubins, modules


@needs_nvcc
@pytest.mark.skipif(_cuobjdump() is None, reason="cuobjdump not installed (/usr/local/cuda*/bin, PATH)")
@pytest.mark.parametrize("build", ["raw", "compressed", "blackwell"])
def test_arch_lists_agree_with_cuobjdump(cuda_libs: dict[str, Path], build: str) -> None:
    tool = _cuobjdump()
    assert tool is not None
    library = _built(cuda_libs, build)
    cubins, modules = _cuobjdump_listing(tool, library)
    fatbin = scan_library(library)["fatbin"]
    # cuobjdump --list-elf names an sm_100f cubin "sm_100" (its --dump-elf says sm_100f).
    assert {re.sub(r"f$", "", s) for s in fatbin["sass"]} == {re.sub(r"f$", "", s) for s in cubins}
    assert set(fatbin["ptx"]) == modules


@needs_nvcc
def test_a_truncated_fatbin_keeps_the_entries_before_the_cut_and_says_so(cuda_libs: dict[str, Path]) -> None:
    offset, size, _addr = _section(cuda_libs["raw"], ".nv_fatbin")
    data = cuda_libs["raw"].read_bytes()[offset : offset + size]
    whole = parse_containers(data, 0, len(data))
    assert whole.problems == []
    cut = parse_containers(data[: len(data) - 100], 0, len(data) - 100)
    assert 0 < len(cut.entries) <= len(whole.entries)
    assert any("truncated" in p for p in cut.problems)


def test_bytes_between_containers_are_reported_not_fatal() -> None:
    entry = struct.pack("<HHIQIIHHIIIQQQ", 2, 0x0101, 64, 8, 0, 0, 8, 1, 86, 0, 0, 0x11, 0, 0) + bytes(8)
    container = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(entry)) + entry
    data = container + bytes(16) + b"garbage!" + container
    parse = parse_containers(data, 0, len(data))
    assert [e.target for e in parse.entries] == ["sm_86", "sm_86"]
    assert parse.containers == 2
    assert len(parse.problems) == 1 and "not a fatbin container" in parse.problems[0]


# ---------------------------------------------------------------------------------------------------------
# Symbol versions, DT_NEEDED, undefined torch symbols
# ---------------------------------------------------------------------------------------------------------

GLIBC_SOURCE = """
#include <sys/random.h>
long fill(void* buf, unsigned long n) { return getrandom(buf, n, 0); }  /* getrandom@GLIBC_2.25 */
"""

EXTENSION_SOURCE = """
#include <string>
namespace c10 {
void warn_deprecated(const char* what, int level);        // defined by libc10, not here
void optional_hook() __attribute__((weak));               // weak: a missing one never fails the load
}
std::string describe(int level) {
    std::string message = "level " + std::to_string(level);
    c10::warn_deprecated(message.c_str(), level);
    if (c10::optional_hook) c10::optional_hook();
    return message;
}
"""

PROVIDER_SOURCE = """
namespace c10 {
void warn_deprecated(const char*, int) {}
__attribute__((visibility("hidden"))) void internal_only() {}
void use() { internal_only(); }
}
"""


@pytest.fixture(scope="session")
def host_libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if shutil.which("gcc") is None or shutil.which("g++") is None:
        pytest.skip("gcc/g++ not on PATH")
    out = tmp_path_factory.mktemp("host")
    specs = {
        "glibc": ("gcc", "c", GLIBC_SOURCE),
        "ext": ("g++", "cpp", EXTENSION_SOURCE),
        "c10": ("g++", "cpp", PROVIDER_SOURCE),
    }
    paths: dict[str, Path] = {}
    for name, (compiler, ext, text) in specs.items():
        source = out / f"{name}.{ext}"
        source.write_text(text)
        paths[name] = out / f"lib{name}.so"
        subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", str(paths[name]), str(source)], check=True)
    return paths


@needs_gcc
def test_glibc_requirement_is_the_highest_versioned_function_called(host_libs: dict[str, Path]) -> None:
    facts = scan_library(host_libs["glibc"])
    assert facts["error"] is None
    assert facts["needs_versions"]["GLIBC"] == "2.25"
    assert "libc.so.6" in facts["needed"]


@needs_gcc
def test_library_without_cuda_code_has_no_fatbin(host_libs: dict[str, Path]) -> None:
    assert scan_library(host_libs["glibc"])["fatbin"] is None


@needs_gcc
def test_cxx_extension_requires_glibcxx_and_cxxabi_that_this_host_provides(
    host_libs: dict[str, Path],
) -> None:
    facts = scan_library(host_libs["ext"])
    assert {"GLIBCXX", "CXXABI"} <= facts["needs_versions"].keys()
    assert "libstdc++.so.6" in facts["needed"]
    assert unmet_versions(facts["needs_versions"], machine_runtime_versions()["provides"]) == {}


@needs_gcc
def test_undefined_lists_only_strong_torch_namespace_symbols(host_libs: dict[str, Path]) -> None:
    facts = scan_library(host_libs["ext"])
    assert facts["undefined"] == [MANGLED_C10_WARN]  # not std::, not the weak c10::optional_hook
    assert facts["undefined_total"] == 1


@needs_gcc
def test_exported_symbols_are_the_defined_visible_ones(host_libs: dict[str, Path]) -> None:
    exported = exported_symbols(host_libs["c10"])
    assert MANGLED_C10_WARN in exported
    assert "_ZN3c1013internal_onlyEv" not in exported  # hidden visibility
    assert not any(name.startswith("_ZNSt") for name in exported)


@needs_gcc
def test_missing_symbols_are_undefined_ones_no_provider_exports(host_libs: dict[str, Path]) -> None:
    undefined = scan_library(host_libs["ext"])["undefined"]
    assert missing_symbols(undefined, exported_symbols(host_libs["c10"])) == []
    assert missing_symbols(undefined, exported_symbols(host_libs["glibc"])) == [MANGLED_C10_WARN]


@needs_gcc
def test_scan_against_torch_exports_names_the_symbols_the_import_would_miss(
    host_libs: dict[str, Path],
) -> None:
    assert scan_library(host_libs["ext"])["missing"] is None  # not asked
    provided = scan_library(host_libs["ext"], exports=exported_symbols(host_libs["c10"]))
    assert (provided["missing"], provided["missing_total"]) == ([], 0)
    other_torch = scan_library(host_libs["ext"], exports=exported_symbols(host_libs["glibc"]))
    assert (other_torch["missing"], other_torch["missing_total"]) == ([MANGLED_C10_WARN], 1)


@needs_gcc
def test_scan_result_is_json_serialisable(host_libs: dict[str, Path]) -> None:
    facts = scan_library(host_libs["ext"])
    assert json.loads(json.dumps(facts)) == facts


# ---------------------------------------------------------------------------------------------------------
# Bad input: a structured error naming the file, never an exception
# ---------------------------------------------------------------------------------------------------------


def test_text_file_named_so_is_an_error_naming_the_file(tmp_path: Path) -> None:
    bogus = tmp_path / "x.so"
    bogus.write_text("INPUT(-lfoo)\n")  # a linker script, as some distros ship libc.so
    facts = scan_library(bogus)
    assert facts["error"] is not None and str(bogus) in facts["error"] and "not an ELF" in facts["error"]
    assert facts["fatbin"] is None


@needs_gcc
@pytest.mark.parametrize("keep", [16, 64, 0.5])
def test_truncated_elf_is_an_error_naming_the_file(
    host_libs: dict[str, Path], tmp_path: Path, keep: float
) -> None:
    data = host_libs["ext"].read_bytes()
    cut = tmp_path / "cut.so"
    cut.write_bytes(data[: int(len(data) * keep) if keep < 1 else int(keep)])
    facts = scan_library(cut)
    assert facts["error"] is not None and str(cut) in facts["error"]


@pytest.mark.parametrize("make", ["missing", "directory", "empty"])
def test_unopenable_paths_are_errors_naming_the_file(tmp_path: Path, make: str) -> None:
    path = tmp_path / "lib.so"
    if make == "directory":
        path.mkdir()
    elif make == "empty":
        path.write_bytes(b"")
    facts = scan_library(path)
    assert facts["error"] is not None and str(path) in facts["error"]


def test_exported_symbols_of_a_non_elf_raises_elf_error_naming_the_file(tmp_path: Path) -> None:
    bogus = tmp_path / "x.so"
    bogus.write_text("not a library")
    with pytest.raises(ElfError) as info:
        exported_symbols(bogus)
    assert info.value.path == str(bogus) and str(bogus) in str(info.value)


# ---------------------------------------------------------------------------------------------------------
# The host
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="not a glibc host")
def test_machine_runtime_versions_report_glibc_and_libstdcxx() -> None:
    host = machine_runtime_versions()
    assert host["errors"] == []
    assert host["provides"]["GLIBC"] == (os.confstr("CS_GNU_LIBC_VERSION") or "").split()[-1]
    assert re.fullmatch(r"3\.4\.\d+", host["provides"]["GLIBCXX"])
    assert re.fullmatch(r"1\.3(\.\d+)?", host["provides"]["CXXABI"])
    assert os.path.isfile(host["libstdcxx"]["path"])


def test_unmet_versions_names_what_the_host_lacks() -> None:
    provides = {"GLIBC": "2.31", "GLIBCXX": "3.4.28"}
    needs = {"GLIBC": "2.28", "GLIBCXX": "3.4.30", "CXXABI": "1.3.13"}
    assert unmet_versions(needs, provides) == {
        "GLIBCXX": {"needs": "3.4.30", "provides": "3.4.28"},
        "CXXABI": {"needs": "1.3.13", "provides": None},
    }


def test_a_fifo_named_like_a_library_is_an_error_at_once_not_a_hang(tmp_path: Path) -> None:
    """open() of a FIFO blocks until a writer comes; the reader opens with O_NONBLOCK and checks the file kind.
    In a process of its own, so that a reader that blocks fails the test instead of hanging it."""
    fifo = tmp_path / "flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so"
    os.mkfifo(fifo)
    code = ("import sys\nfrom dflash_doctor.facts.elf import ElfError, exported_symbols, scan_library\n"
            "print(scan_library(sys.argv[1])['error'])\n"
            "try:\n    exported_symbols(sys.argv[1])\nexcept ElfError as exc:\n    print(exc)\n")
    proc = subprocess.run([sys.executable, "-c", code, str(fifo)], capture_output=True, text=True, timeout=20,
                          check=False)
    assert proc.stdout.splitlines() == [f"{fifo}: a FIFO, not a regular file: never opened"] * 2, proc.stderr
