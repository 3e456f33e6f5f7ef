"""The python layer's finding codes: one constant per id, with its title and explanation.

Ids are `<check-id>.<name>` for the checks of this package: distributions, namespaces, imports (the rotary
import), import-surface and extensions. A failing import is judged by one helper for the imports and the
extensions checks (import_failures.classify): it reports under each check's own id, with the explanation written
once under imports.* (IMPORT_CAUSES and EXTENSION_CAUSES hand it the codes; codes/aliases.py maps their v1 ids).
"""

from __future__ import annotations

from dataclasses import replace

from dflash_doctor.codes import Code
from dflash_doctor.shape import frozen_dataclass

__all__ = ["CODES", "EXTENSION_CAUSES", "IMPORT_CAUSES", "CauseCodes"]

BROKEN_FLASH_ATTN = (
    "vLLM imports `flash_attn.ops.triton.rotary` when it builds every rotary-embedding layer. How it guards that "
    "import depends on the version: 0.18-0.23 check only `find_spec('flash_attn') is not None` and then import "
    "unguarded, so anything the import raises kills `vllm serve` at engine start; 0.24 and later wrap it in "
    "`suppress(ModuleNotFoundError)`, which survives a missing module but not an ImportError such as `undefined "
    "symbol`. The doctor reads the guard from the installed vLLM's source."
)

# distributions
DISTRIBUTIONS_STACK = Code(
    "distributions.stack", "Versions of the serving stack",
    "Lists the installed versions of torch, triton, vllm, the flash-attention family, flashinfer, "
    "transformers and nvidia-ml-py, as importlib.metadata sees them (the first copy on sys.path).")
DISTRIBUTIONS_REQUIREMENTS_OK = Code(
    "distributions.requirements-ok", "The stack's requirements are satisfied",
    "Every Requires-Dist of the installed stack distributions (markers evaluated for the target "
    "interpreter) is met by an installed version.")
DISTRIBUTIONS_REQUIREMENT_UNMET = Code(
    "distributions.requirement-unmet", "A stack distribution requires another version",
    "Read from the installed METADATA. vLLM pins torch exactly (e.g. vllm 0.20.1 requires torch==2.11.0) "
    "because its compiled kernels link against that torch's C++ ABI; a different torch gives `undefined "
    "symbol` at import, or subtle failures. Install the required version, or reinstall the requirer so the "
    "installer resolves them together. For vLLM's requirements, as for requirement-missing: a failure when "
    "`vllm serve` imports the package on its way up, a warning when it does not.")
DISTRIBUTIONS_REQUIREMENT_MISSING = Code(
    "distributions.requirement-missing", "A stack distribution's requirement is not installed",
    "A Requires-Dist of an installed stack distribution names a distribution that is not installed at all. "
    "Install it (the command names the target interpreter). Every requirement of vLLM is judged by what "
    "`vllm serve` imports on its way up, read from the installed vLLM's own files (vllm_serve_imports: the "
    "module-level imports followed from the `vllm` console script's module, main()'s imports, and the modules "
    "it loads by name, knowledge.vllm_imports.SERVE_LOADED_BY_NAME): a failure when one of those modules "
    "imports it unconditionally (fastapi, torch, transformers: `vllm serve` stops with ModuleNotFoundError), or, "
    "for one that is missing, when a package those modules import requires it too (fastapi 0.165 requires "
    "opentelemetry-api and imports it at module level) or imports it (knowledge.vllm_imports.IMPORTED_THROUGH); a "
    "warning in pip check's words when none does, or only under a condition, or inside a try that catches the "
    "ImportError, naming the modules of vLLM that import it (they fail when used). A report saved before that "
    "scan existed judges vLLM's requirements on the stack as it did (flashinfer-python a warning, "
    "knowledge.stack.OPTIONAL_AT_SERVE).")
DISTRIBUTIONS_DUPLICATE = Code(
    "distributions.duplicate", "Two installed copies of one distribution",
    "Two dist-info (or egg-info) directories of the same name are on sys.path. Python imports the first; "
    "pip and uv may see the other; uninstalling one leaves the other's files mixed in. Remove the stale one. "
    "A copy the system package manager owns (INSTALLER says debian or rpm, or it lies in Debian's "
    "/usr/lib/python3/dist-packages) is never deleted by hand: the fix asks dpkg (or rpm) which package owns "
    "it, for apt (or dnf) to remove or upgrade. When every copy is that manager's and the same version in one "
    "directory (Debian's python3-cryptography ships both a dist-info and an egg-info), nothing is shadowed, "
    "and the finding passes.")
DISTRIBUTIONS_METADATA_BROKEN = Code(
    "distributions.metadata-broken", "A distribution's METADATA cannot be read",
    "The METADATA (or PKG-INFO) file is missing, not UTF-8, or lacks Name/Version. Installers cannot see, "
    "upgrade or uninstall the distribution. Remove its dist-info directory and reinstall it.")
DISTRIBUTIONS_RECORD_BROKEN = Code(
    "distributions.record-broken", "A distribution's RECORD cannot be read",
    "RECORD is not valid CSV with three fields a row, or is unreadable. Uninstall cannot remove the files, "
    "and the doctor cannot verify them. Reinstall the distribution.")
DISTRIBUTIONS_RECORD_MISSING = Code(
    "distributions.record-missing", "A stack distribution has no RECORD",
    "Without RECORD its files cannot be verified or cleanly uninstalled (often a manual copy or an old "
    "installer). Reinstall it with pip or uv.")
DISTRIBUTIONS_RECORD_MISMATCH = Code(
    "distributions.record-mismatch", "Installed files differ from RECORD",
    "Files listed in the distribution's RECORD are missing, or their size (or, with --verify-hashes, their "
    "sha256) differs: another distribution installed the same paths, or they were edited by hand. Reinstall "
    "the distribution with --no-deps to put its own files back.")
DISTRIBUTIONS_RECORD_ESCAPES = Code(
    "distributions.record-escapes", "A RECORD line points outside the environment",
    "A line of the distribution's RECORD resolves outside the environment's directories: the sys.path "
    "entries, and for each site directory (the environment's own, the base interpreter's with "
    "--system-site-packages, the user site, one a `.pth` line adds) the install-scheme directories of the "
    "prefix it belongs to (its site-packages, scripts, headers and data), and the project directories of "
    "editable installs. A console script in the base interpreter's bin/ is inside; `..` out of all of them, "
    "an absolute path elsewhere, a symlink out, or /dev, /proc, /sys is not. No installer writes such a "
    "line. The doctor never "
    "opens, hashes or loads that file (a `flash_attn/../../../../tmp/x/evil.so` line would otherwise have "
    "its constructor run by the extension probe), and an uninstall would delete it. Reinstall the "
    "distribution from a source you trust.")
DISTRIBUTIONS_FILE_COLLISION = Code(
    "distributions.file-collision", "Two verified distributions install the same paths with different bytes",
    "Two distributions of the stack or its kernel packages (knowledge.kernel_wheels.KERNEL_DISTRIBUTIONS) list "
    "the same files in their RECORDs with different sha256: whichever was installed last overwrote the other's, "
    "silently, and uninstalling either deletes files the other still lists. Only the paths whose RECORD hashes "
    "differ are hashed. The two halves of `nvidia-cutlass-dsl[cu13]` before 4.6 are such a pair "
    "(nvidia-cutlass-dsl-libs-base and -libs-cu13 4.5.2, pinned by vLLM 0.22.0-0.25.1, share 180 paths, 99 of "
    "them with other bytes): where the base's files won, vLLM's CuTe DSL kernels fail (`mlir_global_dtors() "
    "missing 1 required positional argument: 'data'`, vllm #44949; `from cutlass.cute.core import "
    "increment_coord` fails, ai-dynamo/dynamo #11775; malformed `_mma` PTX, NVIDIA/cutlass #3170). Fix: "
    "reinstall -libs-cu13 with --force-reinstall --no-deps so its files win, or vLLM 0.26.0 or later "
    "(nvidia-cutlass-dsl 4.6.0, where one wheel holds the CuTe sources). A pass where the -libs-cu13 files are "
    "in place; a warning for another pair, naming whose bytes are on disk. flash_attn/ is the namespaces "
    "check's (namespaces.cute-overlap).")
DISTRIBUTIONS_SHARED_PATHS = Code(
    "distributions.shared-paths", "Two installed distributions install the same paths",
    "Any two installed distributions, whoever they are, whose RECORDs list the same files (read from the RECORD rows "
    "the doctor reads for every distribution; not a list of names). The one installed last overwrote the other's "
    "files, silently, and an uninstall deletes every path its RECORD lists, so uninstalling either deletes files the "
    "other still lists. The finding says, for the paths whose RECORD sha256 differ, whose bytes are on disk (the "
    "file's sha256 against each RECORD's; only those files are hashed, at most 1,000 per run and 64 MiB each, only "
    "regular files inside the environment). tokenspeed-fa4 4.0.0.post20260923 and flash-attn-4 4.0.0b40 share 48 "
    "flash_attn/cute/ paths, 36 with other bytes; tokenspeed-quack 0.6.4.post20260923 and quack-kernels 0.6.5 share "
    "all 113 of quack/, one with other bytes. A failure where no serving-stack distribution's bytes are on disk at "
    "such a path (the stack runs another distribution's code, or files it lists are gone); a warning where they are, "
    "or the bytes are the same and a stack or kernel distribution is one of them (an uninstall of the other deletes "
    "its files); a pass where only other distributions share identical bytes (opencensus and opencensus-context "
    "share the `opencensus/__init__.py` of a pkg_resources namespace). Fix: uninstall the one you do not need, then "
    "reinstall (--force-reinstall --no-deps) the other, and every distribution whose paths that uninstall deletes, so "
    "that their own files are back. Pairs of the stack and its kernel packages whose bytes differ are "
    "`distributions.file-collision`'s (and flash-attn with flash-attn-4 `namespaces.cute-overlap`'s).")
DISTRIBUTIONS_REQUIREMENT_BROKEN_BY = Code(
    "distributions.requirement-broken-by", "An installed distribution's requirement broke another's pin",
    "A kernel package that vLLM or flash-attn-4 loads (apache-tvm-ffi, nvidia-cutlass-dsl, quack-kernels ...) "
    "is installed at a version one installed distribution's Requires-Dist excludes, and another installed "
    "distribution requires that version: installing it (with its dependencies) broke the first's pin. "
    "flash-attn-4 4.0.0b36 requires apache-tvm-ffi>=0.1.11 and nvidia-cutlass-dsl>=4.6.2 while vLLM "
    "0.20.0-0.25.1 pin apache-tvm-ffi==0.1.9 (and 0.22.0-0.25.1 nvidia-cutlass-dsl==4.5.2): nvidia-cutlass-dsl "
    "4.6 with tvm-ffi 0.1.9 fails with `make_kwargs_wrapper() got an unexpected keyword argument "
    "'map_dataclass_to_tuple'`; 4.6 removed cute.core.ThrMma that older quack-kernels use. The finding names "
    "the distribution whose requirement the installed version meets, and the one installed last (RECORD "
    "times) when they show the order. Fix: a vLLM whose pins agree (0.27 pins apache-tvm-ffi==0.1.11), or "
    "remove the distribution that brought the other version, or put back the pinned version.")
DISTRIBUTIONS_FILE_NOT_REGULAR = Code(
    "distributions.file-not-regular", "A file RECORD lists is a FIFO, a device or a socket",
    "A file of a stack distribution is not a regular file on disk: a FIFO blocks whoever opens it (an import "
    "hangs), a device such as /dev/zero never ends. The doctor does not open it. Reinstall the distribution "
    "to put its own files back.")
DISTRIBUTIONS_SERVE_PATH_UNREAD = Code(
    "distributions.serve-path-unread", "Modules on `vllm serve`'s way up could not be read",
    "The scan of what `vllm serve` imports on its way up (vllm_serve_imports) could not read some of vLLM's "
    "modules: the parser refused them (a syntax this Python does not know, a null byte, an expression nested "
    "thousands deep that CPython's parser gives up on with MemoryError), or they are not regular files or lie "
    "outside the environment. The scan went on through the rest of vLLM, but what those modules import was not "
    "seen: a requirement of vLLM that is not met and that the scan judged a warning (not imported on the way up) "
    "may be imported by one of them. The doctor cannot tell, so this is an error (exit 1), never a quiet pass; it "
    "names the files and why. If the target's Python cannot parse them either, `vllm serve` fails importing them: "
    "reinstall vLLM.")

# imports, import-surface, extensions
IMPORTS_ROTARY_OK = Code(
    "imports.rotary-ok", "The rotary import vLLM makes works",
    "`from flash_attn.ops.triton.rotary import apply_rotary` succeeded in the target interpreter.")
IMPORTS_ROTARY_ABSENT = Code(
    "imports.rotary-absent", "flash_attn is absent; vLLM skips its rotary import",
    "flash_attn is not installed, so vLLM's guarded rotary import is skipped and vLLM uses its own path.")
IMPORTS_NAMESPACE_PACKAGE = Code(
    "imports.namespace-package", "The import fails: flash_attn is a namespace package",
    "The import raised ModuleNotFoundError for a flash_attn submodule because flash_attn is a namespace "
    "package (see namespaces.v4-without-v2). " + BROKEN_FLASH_ATTN)
IMPORTS_UNDEFINED_SYMBOL = Code(
    "imports.undefined-symbol", "A compiled extension was built against another torch",
    "The import raised `undefined symbol: _ZN3c10...`: the extension (typically flash_attn_2_cuda) was built "
    "against a torch with another C++ ABI or version than the installed one. Because flash_attn/__init__.py "
    "imports it, even the pure-Triton flash_attn.ops.triton.rotary fails. Rebuild it against the installed "
    "torch (FLASH_ATTENTION_FORCE_BUILD=TRUE, --no-build-isolation) or install the release wheel whose name "
    "matches this torch's major.minor, CUDA major and cxx11abi. " + BROKEN_FLASH_ATTN)
IMPORTS_EXTENSION_MISSING = Code(
    "imports.extension-missing", "flash-attn was built without its CUDA extension",
    "flash_attn_2_cuda is not installed (the wheel was built with FLASH_ATTENTION_SKIP_CUDA_BUILD, or the "
    "build failed quietly). flash_attn/__init__.py imports it unguarded (2.8.3 and 2.8.3.post2), so every "
    "flash_attn import raises ModuleNotFoundError: vLLM 0.24 and later survive that, 0.18-0.23 do not. "
    "Build flash-attn with its extension against the installed torch.")
IMPORTS_DEPENDENCY_MISSING = Code(
    "imports.dependency-missing", "The import needs a package that is not installed",
    "The module imports torch, triton or another package that is not installed in the target, or links a "
    "library of torch's (libc10.so, libtorch_cuda.so) while torch is not installed. Where an installed "
    "distribution requires torch, this finding follows from distributions.requirement-missing and its fix is that "
    "one's: install the torch it requires, not a loader path.")
IMPORTS_GLIBC_TOO_OLD = Code(
    "imports.glibc-too-old", "An extension needs a newer glibc/libstdc++",
    "The extension was linked on a newer system (flash-attn's release wheels from 2.8.0.post2 on are built "
    "on Ubuntu 22.04 and need GLIBC 2.32+). Build from source on this system, or use an older wheel.")
IMPORTS_LIBRARY_NOT_FOUND = Code(
    "imports.library-not-found", "A shared library the extension links is missing",
    "The dynamic loader could not find a library the extension needs (often libcudart.so.N or libc10.so). "
    "Install the matching CUDA runtime or torch, or fix LD_LIBRARY_PATH.")
IMPORTS_DRIVER_LIBRARY_MISSING = Code(
    "imports.driver-library-missing", "An extension needs the NVIDIA driver's library, and it is not there",
    "The dynamic loader could not find a library of the NVIDIA driver (libcuda.so.1, libnvidia-ml.so.1, "
    "libnvidia-ptxjitcompiler.so.1, ...): these come with the driver, not with an image or a wheel. On a GPU "
    "host it is installed with the driver; in a container the NVIDIA container runtime mounts it when the "
    "container starts with GPUs and the `compute` capability. When the gpu check finds no driver at all, "
    "this finding follows from that one (its `cause`), and the fix is the driver. On a machine without GPUs "
    "(a CI image build), run with --no-gpu: the load is then not tried as a failure (imports.needs-driver).")
IMPORTS_NEEDS_DRIVER = Code(
    "imports.needs-driver", "Not loaded here: it needs the NVIDIA driver's library (--no-gpu)",
    "Under --no-gpu (a CI image build, a machine without GPUs), an extension that fails to load only because a "
    "library of the NVIDIA driver (libcuda.so.1, libnvidia-ml.so.1, ...) is absent is skipped, not failed: "
    "the NVIDIA container runtime provides those libraries at run time, and an image must not ship them. "
    "A missing library the image must ship (libcudart, libnvrtc, libcublas, torch's libraries) still fails "
    "(imports.library-not-found). The loader stops at the first library it cannot find, so run the doctor "
    "where the GPUs are to load these extensions for real.")
IMPORTS_CRASHED = Code(
    "imports.crashed", "The import killed the interpreter",
    "Importing the module killed the process with a signal (e.g. SIGSEGV). The doctor ran it in a "
    "subprocess, so this is a finding, not a crash. Reinstall the package; if it persists, the stderr in the "
    "evidence is what to report upstream.")
IMPORTS_TIMEOUT = Code(
    "imports.timeout", "The import hung",
    "Importing the module did not finish within the timeout (--timeout). Something in its import hangs: a "
    "lock, a network call, a driver call.")
IMPORTS_FAILED = Code(
    "imports.failed", "The import failed",
    "The import raised an exception the doctor has no specific diagnosis for; the exception and traceback "
    "are in the evidence.")
IMPORT_SURFACE_NO_VLLM = Code(
    "import-surface.no-vllm", "vLLM is not installed", "There is no vLLM source to read imports from.")
IMPORT_SURFACE_NO_SOURCE = Code(
    "import-surface.no-source", "vLLM's package directory was not found",
    "vLLM is installed (its dist-info is there) but the doctor could not find its package directory.")
IMPORT_SURFACE_OK = Code(
    "import-surface.ok", "vLLM's external kernel imports are all safe here",
    "Every import of an external kernel package in the installed vLLM's source either works in the target or "
    "is guarded against the exception it raises there.")
IMPORT_SURFACE_UNREAD = Code(
    "import-surface.unread", "Files of the installed vLLM could not be read",
    "The scan of the installed vLLM's source for imports of external kernel packages could not read some files: "
    "the parser refused them (a syntax this Python does not know, a null byte, an expression nested thousands "
    "deep that CPython's parser gives up on with MemoryError), or they are not regular files. The rest of vLLM "
    "was scanned and judged; what those files import was not, so this is an error (exit 1), never a quiet "
    "pass. The finding names each file and why; if the target's Python cannot parse them either, reinstall vLLM.")
IMPORT_SURFACE_UNGUARDED_FAILURE = Code(
    "import-surface.unguarded-failure", "vLLM imports a package that fails here, and nothing catches it",
    "The installed vLLM's source imports this module, the import raises in the target, and no guard around "
    "the import (try/except, suppress, find_spec, platform test) catches that exception. On the serving path "
    "this stops `vllm serve`; elsewhere it raises when that feature is used. Under --no-gpu, an import that fails "
    "only because a library of the NVIDIA driver (libcuda.so.1) is absent is a skip: the container runtime "
    "provides it at run time (see imports.needs-driver).")
EXTENSIONS_NONE = Code(
    "extensions.none", "No compiled extensions to load",
    "The stack has no compiled extension modules besides torch's own.")
EXTENSIONS_NOT_LOADED = Code(
    "extensions.not-loaded", "An extension file was not loaded: not a regular file, or outside the environment",
    "The stack's extension module resolves to a FIFO, a device, a socket, or a path outside the environment "
    "(/dev, /proc, /sys, or out of the site directories for a RECORD line). Loading it would block or run code "
    "from elsewhere, so the doctor does not; `import` of the module meets the same file. Reinstall the "
    "distribution, or remove what the import system finds.")
EXTENSIONS_UNTRACKED = Code(
    "extensions.untracked", "An extension the import system finds that no RECORD lists",
    "`import flash_attn_2_cuda` (or vllm._C, ...) loads whatever the import system finds first: a source "
    "build, `pip install -e`, `setup.py develop`, a build copied in by hand. The doctor resolves each of the "
    "stack's extension modules without importing it (each package level's search path, no __init__ run) and "
    "judges the files no RECORD lists like the others: loaded in the target, read for GPU architectures and "
    "torch symbols. No installer verifies, upgrades or removes these files; when one shadows the file a "
    "RECORD lists, the RECORD's file is not the one that runs.")
EXTENSIONS_OTHER_PYTHON = Code(
    "extensions.other-python", "An extension is built for another Python",
    "The file's name carries another interpreter's ABI tag (`_C.cpython-312-x86_64-linux-gnu.so` under "
    "CPython 3.11): the import system looks only for this interpreter's EXTENSION_SUFFIXES "
    "(`.cpython-311-x86_64-linux-gnu.so`, `.abi3.so`, `.so`), so the module does not exist here. When the "
    "installed wheel itself was built for another Python (its WHEEL tags say so), this fails: reinstall, and "
    "the installer picks the wheel built for this interpreter. When a wheel that fits ships such a file (vLLM "
    "0.20.1's abi3 wheel has DeepGEMM's `_C.cpython-312-x86_64-linux-gnu.so`), it warns: whatever imports "
    "that module fails on this Python, and reinstalling the same release does not change that: the fix is an "
    "environment of the Python the file is built for, or (vLLM's DeepGEMM) a release that ships the file "
    "for this Python, or VLLM_USE_DEEP_GEMM=0 so that vLLM does not select it.")
EXTENSIONS_OK = Code(
    "extensions.ok", "Compiled extensions load",
    "Each compiled extension module of the stack loaded in its own subprocess, after torch.")

# the flash_attn namespace
NAMESPACES_ABSENT = Code(
    "namespaces.absent", "flash_attn is not installed",
    "No flash_attn on the target's sys.path. vLLM then uses its bundled flash-attention "
    "(vllm.vllm_flash_attn) on CUDA; its guarded import of the external package is skipped: 0.18-0.23 "
    "import only when find_spec('flash_attn') finds it, 0.24 and later catch the ModuleNotFoundError. When "
    "vLLM is not installed either, the finding says so: nothing in the environment imports flash_attn yet.")
NAMESPACES_OK = Code(
    "namespaces.ok", "flash_attn is a regular package",
    "flash_attn resolves to a regular package (with __init__.py) owned by an installed distribution.")
NAMESPACES_SHADOWED = Code(
    "namespaces.shadowed", "A stray flash_attn shadows the installed one",
    "A flash_attn package or module that belongs to no installed distribution comes earlier on sys.path "
    "(the working directory, PYTHONPATH, the user site). Python imports it instead of the installed one. "
    "Move it away or fix the path.")
NAMESPACES_V4_WITHOUT_V2 = Code(
    "namespaces.v4-without-v2", "flash-attn-4 without flash-attn v2: flash_attn is a namespace package",
    "`pip install flash-attn` can resolve to flash-attn-4 (the CuTe-DSL rewrite), which installs only "
    "flash_attn/cute/ and no flash_attn/__init__.py. flash_attn then is an implicit namespace package: "
    "find_spec('flash_attn') is not None, but flash_attn.ops does not exist. " + BROKEN_FLASH_ATTN +
    " Fix: uninstall flash-attn-4 if nothing needs it, or install flash-attn v2 beside it and then reinstall "
    "flash-attn-4's own files on top.")
NAMESPACES_LEFTOVER = Code(
    "namespaces.leftover", "A flash_attn directory no distribution owns makes flash_attn a namespace package",
    "A directory named flash_attn on sys.path without __init__.py is a namespace portion, whoever left it: "
    "`pip uninstall flash-attn-4` leaves an empty site-packages/flash_attn/ (pip removes a directory whole "
    "only when it lists a file directly in it) and __pycache__ bytecode other interpreters wrote; a source "
    "checkout or a copy leaves one in the working directory or on PYTHONPATH. find_spec('flash_attn') then "
    "is not None, yet flash_attn.ops does not exist. " + BROKEN_FLASH_ATTN + " Fix: delete it when it holds "
    "nothing but empty directories and __pycache__ bytecode (the remediation's find deletes only those), or "
    "move it aside when it holds other files.")
NAMESPACES_INCOMPLETE = Code(
    "namespaces.incomplete", "flash_attn is a namespace package of installed distributions without __init__.py",
    "Every directory of the namespace flash_attn belongs to an installed distribution, but none of them "
    "installs flash_attn/__init__.py (it was deleted, or another distribution's uninstall removed it). "
    + BROKEN_FLASH_ATTN + " Reinstall the distribution that provides flash_attn/__init__.py.")
NAMESPACES_CUTE_OVERLAP = Code(
    "namespaces.cute-overlap", "flash-attn and flash-attn-4 both install flash_attn/cute/",
    "flash-attn 2.8.3 (and 2.8.3.post2) ship a stale copy of flash_attn/cute/ at 20 of the paths flash-attn-4 "
    "installs. The one installed last overwrote the other's files, and uninstalling either deletes files the "
    "other lists. v2 never imports flash_attn/cute, so the environment works while flash-attn-4's bytes are on "
    "disk (warn) and is broken where v2's stale copy won or files are gone (fail). No released v2 coexists "
    "cleanly yet (the extend_path fix, flash-attention #2331, is unreleased).")

# The same failing import under the extensions check: the imports check's explanation, under its own id
# (the v1 alias table, codes/aliases.py, maps import.* to both).
EXTENSIONS_CRASHED = replace(IMPORTS_CRASHED, id="extensions.crashed")
EXTENSIONS_DEPENDENCY_MISSING = replace(IMPORTS_DEPENDENCY_MISSING, id="extensions.dependency-missing")
EXTENSIONS_DRIVER_LIBRARY_MISSING = replace(IMPORTS_DRIVER_LIBRARY_MISSING, id="extensions.driver-library-missing")
EXTENSIONS_EXTENSION_MISSING = replace(IMPORTS_EXTENSION_MISSING, id="extensions.extension-missing")
EXTENSIONS_FAILED = replace(IMPORTS_FAILED, id="extensions.failed")
EXTENSIONS_GLIBC_TOO_OLD = replace(IMPORTS_GLIBC_TOO_OLD, id="extensions.glibc-too-old")
EXTENSIONS_LIBRARY_NOT_FOUND = replace(IMPORTS_LIBRARY_NOT_FOUND, id="extensions.library-not-found")
EXTENSIONS_NAMESPACE_PACKAGE = replace(IMPORTS_NAMESPACE_PACKAGE, id="extensions.namespace-package")
EXTENSIONS_NEEDS_DRIVER = replace(IMPORTS_NEEDS_DRIVER, id="extensions.needs-driver")
EXTENSIONS_TIMEOUT = replace(IMPORTS_TIMEOUT, id="extensions.timeout")
EXTENSIONS_UNDEFINED_SYMBOL = replace(IMPORTS_UNDEFINED_SYMBOL, id="extensions.undefined-symbol")


@frozen_dataclass(frozen=True)
class CauseCodes:
    """The codes one check gives the causes of a failing import (import_failures.classify names the cause)."""

    crashed: Code
    dependency_missing: Code
    driver_library_missing: Code
    extension_missing: Code
    failed: Code
    glibc_too_old: Code
    library_not_found: Code
    namespace_package: Code
    needs_driver: Code
    timeout: Code
    undefined_symbol: Code


IMPORT_CAUSES = CauseCodes(crashed=IMPORTS_CRASHED, dependency_missing=IMPORTS_DEPENDENCY_MISSING, driver_library_missing=IMPORTS_DRIVER_LIBRARY_MISSING, extension_missing=IMPORTS_EXTENSION_MISSING, failed=IMPORTS_FAILED, glibc_too_old=IMPORTS_GLIBC_TOO_OLD, library_not_found=IMPORTS_LIBRARY_NOT_FOUND, namespace_package=IMPORTS_NAMESPACE_PACKAGE, needs_driver=IMPORTS_NEEDS_DRIVER, timeout=IMPORTS_TIMEOUT, undefined_symbol=IMPORTS_UNDEFINED_SYMBOL)
EXTENSION_CAUSES = CauseCodes(crashed=EXTENSIONS_CRASHED, dependency_missing=EXTENSIONS_DEPENDENCY_MISSING, driver_library_missing=EXTENSIONS_DRIVER_LIBRARY_MISSING, extension_missing=EXTENSIONS_EXTENSION_MISSING, failed=EXTENSIONS_FAILED, glibc_too_old=EXTENSIONS_GLIBC_TOO_OLD, library_not_found=EXTENSIONS_LIBRARY_NOT_FOUND, namespace_package=EXTENSIONS_NAMESPACE_PACKAGE, needs_driver=EXTENSIONS_NEEDS_DRIVER, timeout=EXTENSIONS_TIMEOUT, undefined_symbol=EXTENSIONS_UNDEFINED_SYMBOL)

KERNEL_PACKAGES_NONE = Code(
    "kernel-packages.none", "No FlashInfer and no .pth file to judge",
    "Neither flashinfer-python nor a distribution with a `.pth` file is installed: nothing for this check.")
KERNEL_PACKAGES_FLASHINFER_ALIGNED = Code(
    "kernel-packages.flashinfer-aligned", "FlashInfer's distributions are at one version",
    "flashinfer-python with flashinfer-cubin and flashinfer-jit-cache at the versions flashinfer/jit/env.py accepts "
    "(cubin: the same version string; jit-cache: the same version with its `+cuXYZ` label), read from their "
    "METADATA without importing anything; or flashinfer-python alone, which then downloads cubins and JIT-compiles "
    "kernels at first use.")
KERNEL_PACKAGES_FLASHINFER_SKEW = Code(
    "kernel-packages.flashinfer-skew", "flashinfer-cubin or flashinfer-jit-cache is at another version",
    "`import flashinfer` compares flashinfer-cubin's version with its own, string for string, and "
    "flashinfer-jit-cache's (which carries a `+cu129` label) by prefix. FlashInfer 0.5-0.7.1 raise `RuntimeError: "
    "flashinfer-cubin version (0.6.13) does not match flashinfer version (0.6.18)` at import, so `vllm serve` "
    "dies where it loads FlashInfer; 0.7.2 and later ignore the package with a warning and download cubins or "
    "JIT-compile kernels at startup (minutes, and the network or nvcc). It happens on upgrades: vLLM's wheels pin "
    "flashinfer-python only (from 0.26 setup.py leaves flashinfer-cubin out, since PyPI's stops at 0.6.13), so "
    "`pip install -U vllm` leaves the old cubin and jit-cache behind. Fix: install the matching kernel wheels from "
    "FlashInfer's index (https://flashinfer.ai/whl, jit-cache at https://flashinfer.ai/whl/cuXYZ), or `vllm "
    "download-kernels` (vLLM 0.33 and later), or uninstall the stale package. Rules and releases: "
    "knowledge.flashinfer.FLASHINFER_VERSION_CHECK.")
KERNEL_PACKAGES_FLASHINFER_CHECK_BYPASSED = Code(
    "kernel-packages.flashinfer-check-bypassed", "FLASHINFER_DISABLE_VERSION_CHECK hides a FlashInfer skew",
    "With FLASHINFER_DISABLE_VERSION_CHECK set to any non-empty value (`0` too: flashinfer reads `os.getenv`), "
    "flashinfer loads the kernels of a flashinfer-cubin or flashinfer-jit-cache of another version, and they fault "
    "at run time: illegal memory access, `init(): Expected 8 but got 9 arguments` (lightseekorg/tokenspeed #284). "
    "The variable is in many launch scripts. Align the versions, then unset it.")
KERNEL_PACKAGES_JIT_CACHE_CUDA = Code(
    "kernel-packages.jit-cache-cuda", "FlashInfer's JIT cache holds libraries of another CUDA major",
    "FlashInfer's JIT builds its kernels with the nvcc it finds and links them with `-lcudart`, into "
    "`$FLASHINFER_WORKSPACE_BASE` (else the home directory) `/.cache/flashinfer/<version>/<archs>/cached_ops/`, and "
    "loads them from there on every later start. A library built by another CUDA toolkit needs its libcudart.so.N "
    "(read from its ELF DT_NEEDED): where the driver's CUDA is older than N the sampler fails with "
    "`cudaErrorInsufficientDriver` (flashinfer #5145, #3229); where torch is of another CUDA major the process "
    "mixes two CUDA runtimes. The cache is the user's, outside the environment: remove the version's directory so "
    "the JIT rebuilds, with CUDA_HOME at a toolkit of torch's CUDA.")
KERNEL_PACKAGES_PTH_NOT_READ = Code(
    "kernel-packages.pth-not-read", "A distribution's .pth file is never read",
    "Python reads `.pth` files only in site directories (site-packages, the user site). A distribution installed "
    "with `pip install --target` or into a directory on PYTHONPATH keeps its `.pth` there unread: what it would "
    "add to sys.path is missing. nvidia-cutlass-dsl makes `cutlass` importable only through "
    "`nvidia_cutlass_dsl.pth` (4.5) or `nvidia_cutlass_dsl_packages.pth` (4.8), so such an install gives `No "
    "module named 'cutlass'` (NVIDIA/cutlass #3001, #3034). Judged from sys.path, the RECORD and the .pth's lines; "
    "a failure where a package the .pth provides does not resolve. Fix: install it into the environment's "
    "site-packages, or put the directories the .pth names on PYTHONPATH.")

CODES: tuple[Code, ...] = (
    DISTRIBUTIONS_STACK,
    DISTRIBUTIONS_REQUIREMENTS_OK,
    DISTRIBUTIONS_REQUIREMENT_UNMET,
    DISTRIBUTIONS_REQUIREMENT_MISSING,
    DISTRIBUTIONS_DUPLICATE,
    DISTRIBUTIONS_METADATA_BROKEN,
    DISTRIBUTIONS_RECORD_BROKEN,
    DISTRIBUTIONS_RECORD_MISSING,
    DISTRIBUTIONS_RECORD_MISMATCH,
    DISTRIBUTIONS_RECORD_ESCAPES,
    DISTRIBUTIONS_FILE_COLLISION,
    DISTRIBUTIONS_SHARED_PATHS,
    DISTRIBUTIONS_REQUIREMENT_BROKEN_BY,
    DISTRIBUTIONS_FILE_NOT_REGULAR,
    DISTRIBUTIONS_SERVE_PATH_UNREAD,
    IMPORTS_ROTARY_OK,
    IMPORTS_ROTARY_ABSENT,
    IMPORTS_NAMESPACE_PACKAGE,
    IMPORTS_UNDEFINED_SYMBOL,
    IMPORTS_EXTENSION_MISSING,
    IMPORTS_DEPENDENCY_MISSING,
    IMPORTS_GLIBC_TOO_OLD,
    IMPORTS_LIBRARY_NOT_FOUND,
    IMPORTS_DRIVER_LIBRARY_MISSING,
    IMPORTS_NEEDS_DRIVER,
    IMPORTS_CRASHED,
    IMPORTS_TIMEOUT,
    IMPORTS_FAILED,
    IMPORT_SURFACE_NO_VLLM,
    IMPORT_SURFACE_NO_SOURCE,
    IMPORT_SURFACE_OK,
    IMPORT_SURFACE_UNGUARDED_FAILURE,
    IMPORT_SURFACE_UNREAD,
    EXTENSIONS_NONE,
    EXTENSIONS_NOT_LOADED,
    EXTENSIONS_UNTRACKED,
    EXTENSIONS_OTHER_PYTHON,
    EXTENSIONS_OK,
    NAMESPACES_ABSENT,
    NAMESPACES_OK,
    NAMESPACES_SHADOWED,
    NAMESPACES_V4_WITHOUT_V2,
    NAMESPACES_LEFTOVER,
    NAMESPACES_INCOMPLETE,
    NAMESPACES_CUTE_OVERLAP,
    EXTENSIONS_CRASHED,
    EXTENSIONS_DEPENDENCY_MISSING,
    EXTENSIONS_DRIVER_LIBRARY_MISSING,
    EXTENSIONS_EXTENSION_MISSING,
    EXTENSIONS_FAILED,
    EXTENSIONS_GLIBC_TOO_OLD,
    EXTENSIONS_LIBRARY_NOT_FOUND,
    EXTENSIONS_NAMESPACE_PACKAGE,
    EXTENSIONS_NEEDS_DRIVER,
    EXTENSIONS_TIMEOUT,
    EXTENSIONS_UNDEFINED_SYMBOL,
    KERNEL_PACKAGES_NONE,
    KERNEL_PACKAGES_FLASHINFER_ALIGNED,
    KERNEL_PACKAGES_FLASHINFER_SKEW,
    KERNEL_PACKAGES_FLASHINFER_CHECK_BYPASSED,
    KERNEL_PACKAGES_JIT_CACHE_CUDA,
    KERNEL_PACKAGES_PTH_NOT_READ,
)
