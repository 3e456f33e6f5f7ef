# Probe prelude: runs inside the TARGET interpreter, standard library only. `probes.probe_source` puts it in front
# of every probe script, and the doctor carries it into the Python processes a probe starts (below), so that one
# definition holds in every process the doctor's questions run in. It parses on Python 2.7 too (the handshake
# must answer there); the guard is installed on Python 3 only.
#
# (a) The working directory leaves sys.path before anything is imported. `python -c` and `python -m` put it first
#     on sys.path (PYTHONSAFEPATH, which the doctor sets, stops that from Python 3.11 on; older ones ignore it),
#     so a contextlib.py or json.py there would run in the probe. `vllm serve`'s console script never has it on
#     its path (its first entry is the script's own directory), so neither does a probe. The process keeps it
#     as its working directory: the serve command's relative model paths resolve against it.
# (b) The extension guard: every extension module the import system is about to load in this process is checked
#     first (`refuse_file`); dlopen runs a library's constructors before Python sees it, so only a regular file
#     that resolves inside the environment's roots is loaded when a module's name found it.
# (c) Carried into child processes: the doctor makes a directory of its own holding this file as
#     sitecustomize.py and puts it first on the probe's PYTHONPATH, which every Python process the probe starts
#     inherits (vLLM's model-registry subprocess, `sys.executable -m ...`, multiprocessing's spawned workers).
#     There it installs the same guard with the roots the probe's guard had (passed on in DFLASH_DOCTOR_PROBE),
#     then runs the environment's own sitecustomize, if any, takes the doctor's directory off sys.path again and,
#     where the interpreter ignores PYTHONSAFEPATH (before 3.11), takes the working directory `-c` or `-m` puts
#     first off sys.path before the first import after it. A child started with -E, -I or -S reads none of this.
# (d) What the probe scripts share is defined here once (their arguments, their JSON document after the marker, an
#     exception as a fact, the files never opened): a script uses these names as its own, and defines none of them
#     again (tests/test_probe_prelude.py). The script imports them from this module under TYPE_CHECKING only, for
#     the type checker: the package itself is never imported in the target.
import sys

MYPY = False
if MYPY:  # the type checker's names: this file parses on Python 2.7 too, which has no typing module
    from typing import Any, Callable, Dict, Iterable, List, Optional, Set  # noqa: F401 - in type comments

# The one environment variable the doctor and this prelude share (JSON): "carrier", the doctor's directory on
# PYTHONPATH; "added", the variables the doctor set that the user had not; "roots", the guard's roots as the
# probe's guard had them (absent: this process's own), for the processes it starts.
PROBE_VARIABLE = "DFLASH_DOCTOR_PROBE"

if sys.path and sys.path[0] == "":  # `python -c` on a Python that ignores PYTHONSAFEPATH: the working directory
    del sys.path[0]

import json  # only now that the working directory is off sys.path
import os
import stat
import sysconfig
import traceback

if sys.version_info[0] >= 3:  # noqa: UP036 - 2.7 has no importlib.machinery; the guard is for Python 3 only
    import importlib.machinery
    import importlib.util

MARKER = "@@dflash-doctor-facts@@"
"""The line before a probe's JSON document (probes.MARKER): what an imported module prints on its own is never
taken for facts."""
FORBIDDEN = ("/dev", "/proc", "/sys")
"""Never opened, read, hashed or loaded, whatever a RECORD line or a symlink says (facts.safefile's rule, which the
doctor applies in its own process)."""
_FORBIDDEN_BELOW = tuple(root + "/" for root in FORBIDDEN)

GUARD = {"roots": None, "stand_in": None}  # type: Dict[str, Any]
"""This process's guard: the roots a module's name may find extension files in, and what stands in for one that
fails to load (a callable (spec, exc) -> module or None)."""
_OWN_ROOTS = object()  # `guard_extensions`' default: this interpreter's own roots


# ---------------------------------------------------------------------------- (d) what the probe scripts share


def read_arguments():
    # type: () -> Dict[str, Any]
    """The probe's arguments (a JSON object): on stdin, never in argv, where `ps` would show a serve command's
    --api-key; or as argv[1] in a job forked from the shared target process."""
    given = json.loads(sys.argv[1] if len(sys.argv) > 1 else (sys.stdin.read() or "{}"))  # type: Dict[str, Any]
    return given


def emit(facts, allow_nan=True):
    # type: (Dict[str, Any], bool) -> None
    """Print `facts`, the probe's JSON document, after the marker (a value JSON has no type for as its str)."""
    sys.stdout.write("\n" + MARKER + "\n" + json.dumps(facts, default=str, allow_nan=allow_nan) + "\n")
    sys.stdout.flush()


def describe(exc, frames=6, chars=4000):
    # type: (BaseException, int, int) -> Dict[str, Any]
    """An exception as a fact: its class, the names of the classes in its MRO, its message, and the tail of its
    traceback (the last `frames` entries, at most `chars` characters)."""
    listed = traceback.format_exception(type(exc), exc, exc.__traceback__)
    return {
        "type": type(exc).__name__,
        "mro": [c.__name__ for c in type(exc).__mro__],
        "message": str(exc)[:4000],
        "traceback": "".join(listed[-frames:])[-chars:],
    }


def error_text(exc):
    # type: (BaseException) -> str
    """An exception in one line of a fact: "ValueError: its message"."""
    return type(exc).__name__ + ": " + str(exc)


def forbidden(real):
    # type: (str) -> bool
    """`real` (a resolved path) is under /dev, /proc or /sys."""
    return real in FORBIDDEN or real.startswith(_FORBIDDEN_BELOW)


def file_kind(mode):
    # type: (int) -> str
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"


# ------------------------------------------------------------------------------------ (a) to (c): the guard


def _probe_settings():
    # type: () -> Dict[str, Any]
    try:
        settings = json.loads(os.environ.get(PROBE_VARIABLE) or "{}")  # type: object
    except ValueError:
        return {}
    return settings if isinstance(settings, dict) else {}


def _forget_carrier():
    # type: () -> None
    """Take the doctor's directory off sys.path: the target's path is reported and searched as the user has it."""
    carrier = _probe_settings().get("carrier")
    if carrier:
        sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or ".") != carrier]


def own_roots():
    # type: () -> List[str]
    """The directories this interpreter's import system may load from: its sys.path entries and its install
    scheme (real paths). Where the doctor computed the environment's roots, a probe passes those instead."""
    dirs = set()  # type: Set[str]
    for entry in list(sys.path) + list(sysconfig.get_paths().values()):
        if entry and os.path.isdir(entry):
            dirs.add(os.path.realpath(entry))
    return sorted(dirs)


def _under(path, root):
    # type: (str, str) -> bool
    return path == root or path.startswith(root.rstrip("/") + "/")


def searched(path, roots):
    # type: (str, Optional[Iterable[str]]) -> bool
    """Whether the import system would find `path` by a module's name: it lies (as given, links not followed)
    in one of this process's sys.path entries or the environment's roots. A file loaded by an explicit path
    instead (Triton's compiled launcher in its cache, ~/.triton/cache/.../cuda_utils.so) is the loading
    code's own choice, made as it runs; the guard is for what a name finds."""
    given = os.path.abspath(path)
    return any(_under(given, os.path.abspath(d)) for d in [e for e in sys.path if e] + list(roots or ()))


def refuse_file(path, roots):
    # type: (str, Optional[List[str]]) -> Optional[str]
    """Why an extension file must not be loaded (its constructors would run), or None. `roots` None: the
    environment's roots are not known, and only what is never a library (/dev, /proc, /sys, no regular file) is
    refused."""
    real = os.path.realpath(path)
    if forbidden(real):
        return path + " resolves to " + real
    if roots is not None and searched(path, roots) and not any(_under(real, r) for r in roots):
        return path + " resolves to " + real + ", outside the environment"
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None  # the loader's own error says it best
    if not stat.S_ISREG(mode):
        return path + " is not a regular file"
    return None


def guard_extensions(roots=_OWN_ROOTS, stand_in=None):
    # type: (Any, Optional[Callable[[Any, ImportError], Any]]) -> None
    """Check every extension module this process is about to load, whoever asks for it (the probe's import, one
    a package's __init__ imports, a preload), against `roots` (default: this interpreter's own; None: not known);
    `stand_in(spec, exc)` may give a module to use instead of one whose loader failed with ImportError (it is
    then not executed). Called again, it changes the roots and the stand-in; the loader is wrapped once. The
    roots go on to the Python processes this one starts (through the doctor's sitecustomize)."""
    GUARD["roots"] = own_roots() if roots is _OWN_ROOTS else (list(roots) if roots is not None else None)
    GUARD["stand_in"] = stand_in
    settings = _probe_settings()
    if settings:  # started by the doctor: children take these roots
        settings["roots"] = GUARD["roots"]
        os.environ[PROBE_VARIABLE] = json.dumps(settings)
    loader = importlib.machinery.ExtensionFileLoader
    # Wrapped once per process: a job forked from the target process runs this prelude again.
    create = getattr(loader.create_module, "_dflash_doctor_original", loader.create_module)
    execute = getattr(loader.exec_module, "_dflash_doctor_original", loader.exec_module)

    def create_module(self, spec):
        # type: (Any, Any) -> Any
        refused = refuse_file(self.path, GUARD["roots"])
        if refused:
            raise ImportError("not loaded: " + refused, name=spec.name, path=self.path)
        try:
            return create(self, spec)
        except ImportError as exc:
            module = GUARD["stand_in"](spec, exc) if GUARD["stand_in"] is not None else None
            if module is None:
                raise
            module._dflash_doctor_stand_in = True
            return module

    def exec_module(self, module):
        # type: (Any, Any) -> None
        if not vars(module).get("_dflash_doctor_stand_in"):
            execute(self, module)

    create_module._dflash_doctor_original = create  # type: ignore[attr-defined]
    exec_module._dflash_doctor_original = execute  # type: ignore[attr-defined]
    loader.create_module = create_module  # type: ignore[method-assign]
    loader.exec_module = exec_module  # type: ignore[method-assign]
    for source in (importlib.machinery.SourceFileLoader, importlib.machinery.SourcelessFileLoader):
        _guard_source(source)


def _guard_source(loader):
    # type: (Any) -> None
    """Python source (or bytecode) is code too: a module whose file resolves outside the roots is not run."""
    execute = getattr(loader.exec_module, "_dflash_doctor_original", loader.exec_module)

    def exec_module(self, module):
        # type: (Any, Any) -> None
        path = getattr(self, "path", None)
        refused = refuse_file(path, GUARD["roots"]) if isinstance(path, str) else None
        if refused:
            raise ImportError("not loaded: " + refused, name=module.__name__, path=path)
        execute(self, module)

    exec_module._dflash_doctor_original = execute  # type: ignore[attr-defined]
    loader.exec_module = exec_module


def environ_as_given():
    # type: () -> Dict[str, str]
    """This process's environment as the user gave it: without what the doctor added to run the probe (its
    directory on PYTHONPATH, PYTHONSAFEPATH, DFLASH_DOCTOR_PROBE), for facts that report the environment."""
    environ = dict(os.environ)
    settings = _probe_settings()
    if not settings:
        return environ
    del environ[PROBE_VARIABLE]
    added = settings.get("added") or []
    for name in added:
        if name != "PYTHONPATH":
            environ.pop(name, None)
    carrier = settings.get("carrier")
    entries = environ.get("PYTHONPATH", "").split(os.pathsep)
    if carrier and entries[0] == carrier:
        if "PYTHONPATH" in added:
            environ.pop("PYTHONPATH", None)
        else:
            environ["PYTHONPATH"] = os.pathsep.join(entries[1:])
    return environ


class _WorkingDirectoryOff:
    """On the meta path of a process a probe started, on a Python before 3.11, run with `-c` or `-m`: these insert
    the working directory first on sys.path after sitecustomize has run; this takes it off again at the first
    import after that (runpy's, for `-m`), before any finder looks there, and leaves. Entries that were there
    before (PYTHONPATH's) stay."""

    def __init__(self, before):
        # type: (Iterable[str]) -> None
        self.before = set(before)

    def find_spec(self, *_args, **_kwargs):
        # type: (*Any, **Any) -> None
        first = sys.path[0] if sys.path else None
        if first is not None and first not in self.before and \
                os.path.realpath(first or ".") == os.path.realpath(os.getcwd()):
            del sys.path[0]
            if self in sys.meta_path:
                sys.meta_path.remove(self)


def _as_sitecustomize():
    # type: () -> None
    """(c): this file is sitecustomize.py in the doctor's directory, in a process the probe started."""
    _forget_carrier()
    if sys.version_info < (3, 11) and sys.argv[:1] in (["-c"], ["-m"]):
        sys.meta_path.insert(0, _WorkingDirectoryOff(sys.path))
    found = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if found is not None and found.loader is not None:  # the environment's own, as site would have run it
        # The import of this file then gives that module (the import system reads sys.modules at its end). It
        # runs before the guard, as site runs it before a probe's prelude (Debian's links to /etc).
        module = importlib.util.module_from_spec(found)
        sys.modules["sitecustomize"] = module
        found.loader.exec_module(module)
    guard_extensions(_probe_settings().get("roots", _OWN_ROOTS))


if sys.version_info[0] >= 3:  # noqa: UP036 - the handshake runs on 2.7 too
    if __name__ == "sitecustomize":
        _as_sitecustomize()
    else:
        _forget_carrier()  # already, unless the interpreter runs without its site (-S)
        guard_extensions()
