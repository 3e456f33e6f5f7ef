# Probe: runs inside the TARGET interpreter, standard library only, Python 3.8+.
# Performs one import exactly as the serving stack would (e.g. `from flash_attn.ops.triton.rotary
# import apply_rotary`), optionally after importing `preload` modules (extensions need torch's
# libraries loaded first), or loads one extension file directly; or, given `imports`, several such
# imports one after another, each reported as it completes. Reports the real exception: its class,
# MRO, message, cause chain and the tail of its traceback, plus where each module came from.
import importlib
import importlib.machinery
import importlib.util
import os
import re
import struct
import sys
import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Set, Tuple

if TYPE_CHECKING:  # the prelude's, which probe_source puts before this script
    from ._prelude import describe, emit, guard_extensions, read_arguments, refuse_file

ARGS = read_arguments()


def import_failure(exc: BaseException) -> Dict[str, Any]:
    """`describe`'s, with what an ImportError names (the module, the file) and the exceptions it came from."""
    chain: List[Dict[str, str]] = []
    seen: Set[int] = set()
    current = exc.__cause__ or exc.__context__
    while current is not None and id(current) not in seen and len(chain) < 5:
        seen.add(id(current))
        chain.append({"type": type(current).__name__, "message": str(current)[:2000]})
        current = current.__cause__ or current.__context__
    facts = describe(exc)
    facts.update(name=getattr(exc, "name", None), path=getattr(exc, "path", None), chain=chain)
    return facts


def elf_dynamic(path: str) -> Optional[Tuple[List[str], List[str]]]:
    """(DT_NEEDED names, RPATH/RUNPATH directories) of an ELF64 little-endian file; None when it is not one or
    cannot be read. Every offset and size read from the file is checked against the file's size."""
    try:
        if not os.path.isfile(path):
            return None
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            head = handle.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return None
            shoff = struct.unpack_from("<Q", head, 0x28)[0]
            shentsize, shnum = struct.unpack_from("<HH", head, 0x3A)
            if shentsize < 64 or shnum == 0 or shoff + shnum * shentsize > size:
                return None
            handle.seek(shoff)
            table = handle.read(shnum * shentsize)
            # sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size, sh_link, ...
            sections = [struct.unpack_from("<IIQQQQI", table, i * shentsize) for i in range(shnum)]
            dynamic = next((sec for sec in sections if sec[1] == 6), None)  # SHT_DYNAMIC
            if dynamic is None or dynamic[6] >= shnum:
                return None
            strtab = sections[dynamic[6]]
            if dynamic[4] + dynamic[5] > size or strtab[4] + strtab[5] > size:
                return None
            handle.seek(dynamic[4])
            entries = handle.read(dynamic[5])
            handle.seek(strtab[4])
            strings = handle.read(strtab[5])
    except (OSError, struct.error):
        return None

    def string(offset: int) -> str:
        end = strings.find(b"\0", offset)
        return strings[offset:end if end >= 0 else len(strings)].decode("utf-8", "replace")

    needed: List[str] = []
    paths: List[str] = []
    for i in range(0, len(entries) - 15, 16):
        tag, value = struct.unpack_from("<qQ", entries, i)
        if tag == 0:  # DT_NULL
            break
        if tag == 1 and value < len(strings):  # DT_NEEDED
            needed.append(string(value))
        elif tag in (15, 29) and value < len(strings):  # DT_RPATH, DT_RUNPATH
            origin = os.path.dirname(os.path.abspath(path))
            paths.extend(p.replace("$ORIGIN", origin).replace("${ORIGIN}", origin)
                         for p in string(value).split(":") if p)
    return needed, paths


def library_lookup(path: str) -> Optional[List[Dict[str, Any]]]:
    """After the loader gave up on one library of `path`: where each library it needs is, as far as this
    process can tell. The loader stops at the first library it cannot find, so the others are looked up here:
    already loaded (torch's), in the file's RPATH/RUNPATH, or found by dlopen (LD_LIBRARY_PATH, ld.so.cache,
    the default directories). None where none of those finds it."""
    # Here, not at the top: a Python built without libffi has no ctypes, and the import this probe reports on
    # must not fail for want of what only this lookup, after a failed load, uses.
    import ctypes

    dynamic = elf_dynamic(path)
    if dynamic is None:
        return None
    needed, search = dynamic
    loaded: Set[str] = set()
    try:
        with open("/proc/self/maps") as maps:
            loaded = {line.rsplit("/", 1)[-1].strip() for line in maps if "/" in line}
    except OSError:
        pass
    found = []
    for name in needed[:256]:
        where: Optional[str] = None
        if name in loaded:
            where = "loaded"
        else:
            where = next((os.path.join(d, name) for d in search if os.path.isfile(os.path.join(d, name))), None)
        if where is None:
            try:
                ctypes.CDLL(name)
                where = "dlopen"
            except OSError:
                where = None
        found.append({"name": name, "found": where})
    return found


def module_files(prefixes: Set[str], module: str) -> Dict[str, Optional[str]]:
    """Where the top-level packages of interest, and each package on the way to `module`, came from
    (not every submodule they loaded: torch alone loads hundreds)."""
    parts = module.split(".")
    chain = {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
    files = {}
    for name, loaded in list(sys.modules.items()):
        if name in chain or (name in prefixes and "." not in name):
            files[name] = getattr(loaded, "__file__", None)
    return files


def versions() -> Dict[str, Any]:
    found: Dict[str, Any] = {"python_tag": "cp{}{}".format(*sys.version_info[:2])}
    torch = sys.modules.get("torch")
    if torch is not None:
        version = getattr(torch, "version", None)
        found["torch"] = getattr(torch, "__version__", None)
        found["torch_cuda"] = getattr(version, "cuda", None)
        found["torch_git"] = getattr(version, "git_version", None)
        c_module = getattr(torch, "_C", None)
        found["torch_cxx11_abi"] = getattr(c_module, "_GLIBCXX_USE_CXX11_ABI", None)
    triton = sys.modules.get("triton")
    if triton is not None:
        found["triton"] = getattr(triton, "__version__", None)
    return found


def run_one(spec: Dict[str, Any], preloaded: List[Dict[str, Any]]) -> Dict[str, Any]:
    module = spec["module"]
    names = spec.get("names") or []
    facts: Dict[str, Any] = {"module": module, "names": names, "preload": preloaded, "ok": False}
    started = time.monotonic()
    # The prelude's guard checks every extension module this process loads, whoever asks for it: the import's
    # own, one its package's __init__ imports, a preload's (and those of the processes it starts).
    guard_extensions(spec.get("roots"))
    try:
        if spec.get("file"):
            refused = refuse_file(spec["file"], spec.get("roots"))
            if refused:
                raise ImportError("not loaded: " + refused)
            # Load an extension file directly, without running its parent packages' __init__.
            loader = importlib.machinery.ExtensionFileLoader(module, spec["file"])
            found = importlib.util.spec_from_file_location(module, spec["file"], loader=loader)
            assert found is not None  # a loader was given
            loaded = importlib.util.module_from_spec(found)
            loader.exec_module(loaded)
        elif names:
            # The statement itself, so that the exception is exactly the one the stack would see.
            exec(f"from {module} import {', '.join(names)}", {})  # noqa: S102 - the statement as the stack writes it
            loaded = sys.modules[module]
        else:
            loaded = importlib.import_module(module)
        facts["ok"] = True
        facts["file"] = getattr(loaded, "__file__", None)
    except BaseException as exc:  # noqa: BLE001 - the import's failure, whatever it raises, is the fact
        facts["exception"] = import_failure(exc)
    facts["seconds"] = round(time.monotonic() - started, 4)
    if spec.get("file") and re.search(r"cannot open shared object file", str((facts.get("exception") or {}).get("message"))):
        facts["libraries"] = library_lookup(spec["file"])
    facts["loaded"] = module_files(set(ARGS.get("report_modules") or [module.split(".", 1)[0]]), module)
    facts["versions"] = versions()
    return facts


def main() -> None:
    batch = ARGS.get("imports")
    guard_extensions((batch[0] if batch else {}).get("roots") if batch is not None else ARGS.get("roots"))
    preloaded: List[Dict[str, Any]] = []
    for name in ARGS.get("preload") or []:
        try:
            importlib.import_module(name)
            preloaded.append({"module": name, "ok": True})
        except BaseException as exc:  # noqa: BLE001 - a missing torch is itself the finding
            preloaded.append({"module": name, "ok": False, "exception": import_failure(exc)})
    if batch is None:
        emit(run_one(ARGS, preloaded))
        return
    # A batch: imports of one package, one after another, each reported as soon as it is done, so that
    # a crash or hang is pinned on the import in flight and the ones before it keep their facts.
    for index, spec in enumerate(batch):
        facts = run_one(spec, preloaded)
        facts["index"] = index
        emit(facts)


main()
