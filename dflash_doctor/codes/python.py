"""Codes of the Python layers: distributions, the flash_attn namespace, imports."""

from dflash_doctor.codes import Code

_BROKEN_FLASH_ATTN = (
    "vLLM imports `flash_attn.ops.triton.rotary` when it builds every rotary-embedding layer. How it guards that "
    "import depends on the version: 0.18-0.23 check only `find_spec('flash_attn') is not None` and then import "
    "unguarded, so anything the import raises kills `vllm serve` at engine start; 0.24 and later wrap it in "
    "`suppress(ModuleNotFoundError)`, which survives a missing module but not an ImportError such as `undefined "
    "symbol`. The doctor reads the guard from the installed vLLM's source."
)

CODES = (
    # distributions
    Code("distributions.stack", "Versions of the serving stack",
         "Lists the installed versions of torch, triton, vllm, the flash-attention family, flashinfer, "
         "transformers and nvidia-ml-py, as importlib.metadata sees them (the first copy on sys.path)."),
    Code("distributions.requirements-ok", "The stack's requirements are satisfied",
         "Every Requires-Dist of the installed stack distributions (markers evaluated for the target "
         "interpreter) is met by an installed version."),
    Code("distributions.requirement-unmet", "A stack distribution requires another version",
         "Read from the installed METADATA. vLLM pins torch exactly (e.g. vllm 0.20.1 requires torch==2.11.0) "
         "because its compiled kernels link against that torch's C++ ABI; a different torch gives `undefined "
         "symbol` at import, or subtle failures. Install the required version, or reinstall the requirer so the "
         "installer resolves them together."),
    Code("distributions.requirement-missing", "A stack distribution's requirement is not installed",
         "A Requires-Dist of an installed stack distribution names a distribution that is not installed at all. "
         "Install it (the command names the target interpreter)."),
    Code("distributions.duplicate", "Two installed copies of one distribution",
         "Two dist-info (or egg-info) directories of the same name are on sys.path. Python imports the first; "
         "pip and uv may see the other; uninstalling one leaves the other's files mixed in. Remove the stale one."),
    Code("distributions.metadata-broken", "A distribution's METADATA cannot be read",
         "The METADATA (or PKG-INFO) file is missing, not UTF-8, or lacks Name/Version. Installers cannot see, "
         "upgrade or uninstall the distribution. Remove its dist-info directory and reinstall it."),
    Code("distributions.record-broken", "A distribution's RECORD cannot be read",
         "RECORD is not valid CSV with three fields a row, or is unreadable. Uninstall cannot remove the files, "
         "and the doctor cannot verify them. Reinstall the distribution."),
    Code("distributions.record-missing", "A stack distribution has no RECORD",
         "Without RECORD its files cannot be verified or cleanly uninstalled (often a manual copy or an old "
         "installer). Reinstall it with pip or uv."),
    Code("distributions.record-mismatch", "Installed files differ from RECORD",
         "Files listed in the distribution's RECORD are missing, or their size (or, with --verify-hashes, their "
         "sha256) differs: another distribution installed the same paths, or they were edited by hand. Reinstall "
         "the distribution with --no-deps to put its own files back."),
    Code("distributions.record-escapes", "A RECORD line points outside the environment",
         "A line of the distribution's RECORD resolves outside the environment's directories (site-packages, the "
         "scripts, headers and data directories of its install scheme, the sys.path entries): `..` out of them, an "
         "absolute path, a symlink out, or /dev, /proc, /sys. No installer writes such a line. The doctor never "
         "opens, hashes or loads that file (a `flash_attn/../../../../tmp/x/evil.so` line would otherwise have "
         "its constructor run by the extension probe), and an uninstall would delete it. Reinstall the "
         "distribution from a source you trust."),
    Code("distributions.file-not-regular", "A file RECORD lists is a FIFO, a device or a socket",
         "A file of a stack distribution is not a regular file on disk: a FIFO blocks whoever opens it (an import "
         "hangs), a device such as /dev/zero never ends. The doctor does not open it. Reinstall the distribution "
         "to put its own files back."),
    # the flash_attn namespace
    Code("namespaces.absent", "flash_attn is not installed",
         "No flash_attn on the target's sys.path. vLLM then uses its bundled flash-attention "
         "(vllm.vllm_flash_attn) on CUDA; its guarded import of the external package is skipped."),
    Code("namespaces.ok", "flash_attn is a regular package",
         "flash_attn resolves to a regular package (with __init__.py) owned by an installed distribution."),
    Code("namespaces.shadowed", "A stray flash_attn shadows the installed one",
         "A flash_attn package or module that belongs to no installed distribution comes earlier on sys.path "
         "(the working directory, PYTHONPATH, the user site). Python imports it instead of the installed one. "
         "Move it away or fix the path."),
    Code("namespaces.v4-without-v2", "flash-attn-4 without flash-attn v2: flash_attn is a namespace package",
         "`pip install flash-attn` can resolve to flash-attn-4 (the CuTe-DSL rewrite), which installs only "
         "flash_attn/cute/ and no flash_attn/__init__.py. flash_attn then is an implicit namespace package: "
         "find_spec('flash_attn') is not None, but flash_attn.ops does not exist. " + _BROKEN_FLASH_ATTN +
         " Fix: uninstall flash-attn-4 if nothing needs it, or install flash-attn v2 beside it and then reinstall "
         "flash-attn-4's own files on top."),
    Code("namespaces.leftover", "A flash_attn directory no distribution owns makes flash_attn a namespace package",
         "A directory named flash_attn on sys.path without __init__.py is a namespace portion, whoever left it: "
         "`pip uninstall flash-attn-4` leaves an empty site-packages/flash_attn/ (pip removes a directory whole "
         "only when it lists a file directly in it) and __pycache__ bytecode other interpreters wrote; a source "
         "checkout or a copy leaves one in the working directory or on PYTHONPATH. find_spec('flash_attn') then "
         "is not None, yet flash_attn.ops does not exist. " + _BROKEN_FLASH_ATTN + " Fix: delete it when it holds "
         "nothing but empty directories and __pycache__ bytecode (the remediation's find deletes only those), or "
         "move it aside when it holds other files."),
    Code("namespaces.incomplete", "flash_attn is a namespace package of installed distributions without __init__.py",
         "Every directory of the namespace flash_attn belongs to an installed distribution, but none of them "
         "installs flash_attn/__init__.py (it was deleted, or another distribution's uninstall removed it). "
         + _BROKEN_FLASH_ATTN + " Reinstall the distribution that provides flash_attn/__init__.py."),
    Code("namespaces.cute-overlap", "flash-attn and flash-attn-4 both install flash_attn/cute/",
         "flash-attn 2.8.3 (and 2.8.3.post2) ship a stale copy of flash_attn/cute/ at 20 of the paths flash-attn-4 "
         "installs. The one installed last overwrote the other's files, and uninstalling either deletes files the "
         "other lists. v2 never imports flash_attn/cute, so the environment works while flash-attn-4's bytes are on "
         "disk (warn) and is broken where v2's stale copy won or files are gone (fail). No released v2 coexists "
         "cleanly yet (the extend_path fix, flash-attention #2331, is unreleased)."),
    # imports
    Code("imports.rotary-ok", "The rotary import vLLM makes works",
         "`from flash_attn.ops.triton.rotary import apply_rotary` succeeded in the target interpreter."),
    Code("imports.rotary-absent", "flash_attn is absent; vLLM skips its rotary import",
         "flash_attn is not installed, so vLLM's guarded rotary import is skipped and vLLM uses its own path."),
    Code("imports.namespace-package", "The import fails: flash_attn is a namespace package",
         "The import raised ModuleNotFoundError for a flash_attn submodule because flash_attn is a namespace "
         "package (see namespaces.v4-without-v2). " + _BROKEN_FLASH_ATTN),
    Code("imports.undefined-symbol", "A compiled extension was built against another torch",
         "The import raised `undefined symbol: _ZN3c10...`: the extension (typically flash_attn_2_cuda) was built "
         "against a torch with another C++ ABI or version than the installed one. Because flash_attn/__init__.py "
         "imports it, even the pure-Triton flash_attn.ops.triton.rotary fails. Rebuild it against the installed "
         "torch (FLASH_ATTENTION_FORCE_BUILD=TRUE, --no-build-isolation) or install the release wheel whose name "
         "matches this torch's major.minor, CUDA major and cxx11abi. " + _BROKEN_FLASH_ATTN),
    Code("imports.extension-missing", "flash-attn was built without its CUDA extension",
         "flash_attn_2_cuda is not installed (the wheel was built with FLASH_ATTENTION_SKIP_CUDA_BUILD, or the "
         "build failed quietly). flash_attn/__init__.py imports it unguarded (2.8.3 and 2.8.3.post2), so every "
         "flash_attn import raises ModuleNotFoundError: vLLM 0.24 and later survive that, 0.18-0.23 do not. "
         "Build flash-attn with its extension against the installed torch."),
    Code("imports.dependency-missing", "The import needs a package that is not installed",
         "The module imports torch, triton or another package that is not installed in the target, or links a "
         "library of torch's (libc10.so, libtorch_cuda.so) while torch is not installed. Where an installed "
         "distribution requires torch, this finding follows from distributions.requirement-missing and its fix is that "
         "one's: install the torch it requires, not a loader path."),
    Code("imports.glibc-too-old", "An extension needs a newer glibc/libstdc++",
         "The extension was linked on a newer system (flash-attn's release wheels from 2.8.0.post2 on are built "
         "on Ubuntu 22.04 and need GLIBC 2.32+). Build from source on this system, or use an older wheel."),
    Code("imports.library-not-found", "A shared library the extension links is missing",
         "The dynamic loader could not find a library the extension needs (often libcudart.so.N or libc10.so). "
         "Install the matching CUDA runtime or torch, or fix LD_LIBRARY_PATH."),
    Code("imports.driver-library-missing", "An extension needs the NVIDIA driver's library, and it is not there",
         "The dynamic loader could not find a library of the NVIDIA driver (libcuda.so.1, libnvidia-ml.so.1, "
         "libnvidia-ptxjitcompiler.so.1, ...): these come with the driver, not with an image or a wheel. On a GPU "
         "host it is installed with the driver; in a container the NVIDIA container runtime mounts it when the "
         "container starts with GPUs and the `compute` capability. When the gpu check finds no driver at all, "
         "this finding follows from that one (its `cause`), and the fix is the driver. On a machine without GPUs "
         "(a CI image build), run with --no-gpu: the load is then not tried as a failure (imports.needs-driver)."),
    Code("imports.needs-driver", "Not loaded here: it needs the NVIDIA driver's library (--no-gpu)",
         "Under --no-gpu (a CI image build, a machine without GPUs), an extension that fails to load only because a "
         "library of the NVIDIA driver (libcuda.so.1, libnvidia-ml.so.1, ...) is absent is skipped, not failed: "
         "the NVIDIA container runtime provides those libraries at run time, and an image must not ship them. "
         "A missing library the image must ship (libcudart, libnvrtc, libcublas, torch's libraries) still fails "
         "(imports.library-not-found). The loader stops at the first library it cannot find, so run the doctor "
         "where the GPUs are to load these extensions for real."),
    Code("imports.crashed", "The import killed the interpreter",
         "Importing the module killed the process with a signal (e.g. SIGSEGV). The doctor ran it in a "
         "subprocess, so this is a finding, not a crash. Reinstall the package; if it persists, the stderr in the "
         "evidence is what to report upstream."),
    Code("imports.timeout", "The import hung",
         "Importing the module did not finish within the timeout (--timeout). Something in its import hangs: a "
         "lock, a network call, a driver call."),
    Code("imports.failed", "The import failed",
         "The import raised an exception the doctor has no specific diagnosis for; the exception and traceback "
         "are in the evidence."),
    Code("import-surface.no-vllm", "vLLM is not installed", "There is no vLLM source to read imports from."),
    Code("import-surface.no-source", "vLLM's package directory was not found",
         "vLLM is installed (its dist-info is there) but the doctor could not find its package directory."),
    Code("import-surface.ok", "vLLM's external kernel imports are all safe here",
         "Every import of an external kernel package in the installed vLLM's source either works in the target or "
         "is guarded against the exception it raises there."),
    Code("import-surface.unguarded-failure", "vLLM imports a package that fails here, and nothing catches it",
         "The installed vLLM's source imports this module, the import raises in the target, and no guard around "
         "the import (try/except, suppress, find_spec, platform test) catches that exception. On the serving path "
         "this stops `vllm serve`; elsewhere it raises when that feature is used. Under --no-gpu, an import that fails "
         "only because a library of the NVIDIA driver (libcuda.so.1) is absent is a skip: the container runtime "
         "provides it at run time (see imports.needs-driver)."),
    Code("extensions.none", "No compiled extensions to load",
         "The stack has no compiled extension modules besides torch's own."),
    Code("extensions.not-loaded", "An extension file was not loaded: not a regular file, or outside the environment",
         "The stack's extension module resolves to a FIFO, a device, a socket, or a path outside the environment "
         "(/dev, /proc, /sys, or out of the site directories for a RECORD line). Loading it would block or run code "
         "from elsewhere, so the doctor does not; `import` of the module meets the same file. Reinstall the "
         "distribution, or remove what the import system finds."),
    Code("extensions.untracked", "An extension the import system finds that no RECORD lists",
         "`import flash_attn_2_cuda` (or vllm._C, ...) loads whatever the import system finds first: a source "
         "build, `pip install -e`, `setup.py develop`, a build copied in by hand. The doctor resolves each of the "
         "stack's extension modules without importing it (each package level's search path, no __init__ run) and "
         "judges the files no RECORD lists like the others: loaded in the target, read for GPU architectures and "
         "torch symbols. No installer verifies, upgrades or removes these files; when one shadows the file a "
         "RECORD lists, the RECORD's file is not the one that runs."),
    Code("extensions.other-python", "An extension is built for another Python",
         "The file's name carries another interpreter's ABI tag (`_C.cpython-312-x86_64-linux-gnu.so` under "
         "CPython 3.11): the import system looks only for this interpreter's EXTENSION_SUFFIXES "
         "(`.cpython-311-x86_64-linux-gnu.so`, `.abi3.so`, `.so`), so the module does not exist here. When the "
         "installed wheel itself was built for another Python (its WHEEL tags say so), this fails: reinstall, and "
         "the installer picks the wheel built for this interpreter. When a wheel that fits ships such a file (vLLM "
         "0.20.1's abi3 wheel has DeepGEMM's `_C.cpython-312-x86_64-linux-gnu.so`), it warns: whatever imports "
         "that module fails on this Python, and only another Python version changes that."),
    Code("extensions.ok", "Compiled extensions load",
         "Each compiled extension module of the stack loaded in its own subprocess, after torch."),
)
