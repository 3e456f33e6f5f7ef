# Probe: runs inside the TARGET interpreter, standard library only, Python 3.8+.
# Collects the static facts of the environment without importing any of its packages: the
# interpreter, sys.path, every distribution's metadata and RECORD, who owns which files of the
# flash-attention family, and how `flash_attn` resolves. Prints one JSON document after the marker.
import base64
import contextlib
import csv
import email.message
import email.parser
import hashlib
import importlib.machinery
import importlib.util
import io
import json
import os
import platform
import re
import site
import stat
import sys
import sysconfig
from typing import IO, TYPE_CHECKING, AbstractSet, Any, Callable, Dict, List, Optional, Set, Tuple, TypeVar

if TYPE_CHECKING:  # the prelude's, which probe_source puts before this script
    from ._prelude import emit, environ_as_given, error_text, file_kind, forbidden, read_arguments

ARGS = read_arguments()
STACK: Set[str] = set(ARGS.get("stack", []))
WATCHED_TOPS: List[str] = ARGS.get("watched_top_levels", [])  # flash_attn, hopper, flash_attn_2_cuda, ...
WATCHED_SET = frozenset(WATCHED_TOPS)
VERIFY_HASHES = bool(ARGS.get("verify_hashes", False))
HASH_ALWAYS: Set[str] = set(ARGS.get("hash_always", []))  # small distributions whose every file is hashed
# Kernel packages vLLM and flash-attn-4 load at run time: their RECORDs are verified like the stack's, and the
# paths they share with another verified distribution are compared (knowledge.kernel_wheels).
KERNELS: Set[str] = set(ARGS.get("kernels", []))
ENV_ALLOW: Dict[str, Any] = ARGS.get("env_allow", {})
SPEC_NAMES: List[str] = ARGS.get("find_spec", [])
EXTENSION_NAMES: List[str] = ARGS.get("extension_modules", [])  # the stack's extension modules known by name

# Nothing under /dev, /proc or /sys is opened, read or hashed, whatever a RECORD line or a symlink says (the
# prelude's `forbidden`).
MAX_TEXT_BYTES = 64 << 20  # METADATA, RECORD and the rest: torch's RECORD is about 2 MB
MAX_SHOWN = 20
# RECORD lines read per distribution: torch's RECORD has about 20,000; every line is a row checked (and for the stack
# a file looked at) in this process, so a RECORD of millions of short lines would take it past a GB and its timeout.
MAX_RECORD_LINES = 200_000
# A METADATA's fields, before the description that follows them (which is not read): torch's come to a few KB, an
# old PKG-INFO with its description folded into a field to a few hundred KB. Parsed, a field takes some hundred
# bytes, so 60 MB of `Requires-Dist:` lines took this process past a GB.
MAX_METADATA_FIELD_BYTES = 4 << 20
MAX_REQUIRES = 10_000  # vLLM lists about 60


Row = Tuple[str, str, Optional[int], int]
"""A RECORD line: (path, hash, size or None, line number)."""
KeptRow = Tuple[str, str, Optional[int], int, str, Optional[os.stat_result]]
"""A RECORD line inside the environment (`confine`): the row, the file's real path and its stat (None: missing)."""
Fact = Dict[str, Any]
"""A distribution's facts (`describe_distribution`)."""


def canonical(name: str) -> str:
    # packaging's canonicalize_name (PEP 503), copied: a probe runs in the target with the standard library only.
    return re.sub(r"[-_.]+", "-", name).lower()


def os_error(exc: OSError) -> str:
    return f"{type(exc).__name__}: {exc.strerror or exc}"


def open_regular(path: str) -> Tuple[Optional[IO[bytes]], Optional[str]]:
    """(binary file, None) or (None, error). Only a regular file outside /dev, /proc and /sys is opened, and
    with O_NONBLOCK, so that a FIFO (even one swapped in after a stat) cannot block the probe."""
    real = os.path.realpath(path)
    if forbidden(real):
        return None, f"resolves to {real}: never read"
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        return None, os_error(exc)
    try:
        mode = os.fstat(fd).st_mode
    except OSError as exc:
        os.close(fd)
        return None, os_error(exc)
    if not stat.S_ISREG(mode):
        os.close(fd)
        return None, f"{file_kind(mode)}, not a regular file: never read"
    return os.fdopen(fd, "rb"), None


Read = TypeVar("Read")


def read_regular(path: str, read: Callable[[IO[bytes]], Read]) -> Tuple[Optional[Read], Optional[str]]:
    """(what `read` made of the file, None) or (None, error): never raises OSError, never blocks (`open_regular`)."""
    handle, error = open_regular(path)
    if handle is None:
        return None, error
    try:
        with handle:
            return read(handle), None
    except OSError as exc:
        return None, os_error(exc)


def read_text(path: str) -> Tuple[Optional[str], Optional[str]]:
    """(text, error): never raises, never blocks, never reads more than MAX_TEXT_BYTES."""
    raw, error = read_regular(path, lambda handle: handle.read(MAX_TEXT_BYTES + 1))
    if raw is None:
        return None, error
    if len(raw) > MAX_TEXT_BYTES:
        return None, f"larger than {MAX_TEXT_BYTES >> 20} MiB"
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 text ({exc.reason} at byte {exc.start})"


def sha256_of(handle: IO[bytes]) -> str:
    digest = hashlib.sha256()
    for block in iter(lambda: handle.read(1 << 20), b""):
        digest.update(block)
    return "sha256=" + base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()


def file_sha256(path: str) -> Tuple[Optional[str], Optional[str]]:
    """("sha256=...", None) or (None, error)."""
    return read_regular(path, sha256_of)


# ---------------------------------------------------------------- where the environment's files may live


# A site directory as installers lay it out under a prefix: PREFIX/lib/python3.12/site-packages, lib64/...,
# Debian's PREFIX/lib/python3/dist-packages and PREFIX/local/lib/python3.12/dist-packages (PREFIX/local).
SITE_LAYOUT = re.compile(r"/(?:lib|lib64)/python\d+(?:\.\d+)?t?/(?:site|dist)-packages$")
SCHEME_KEYS = ("purelib", "platlib", "scripts", "data", "include", "platinclude")
PREFIX_WALK = 6  # how far up from a site directory a pyvenv.cfg is looked for


def site_prefix(site_dir: str) -> Optional[str]:
    """The prefix an installer installed into when it wrote `site_dir` (a real path): the directory holding
    lib/pythonX.Y/site-packages (or dist-packages), else the nearest ancestor holding pyvenv.cfg; None when
    neither, or when that would be / or under /dev, /proc, /sys (a prefix's data directory is the prefix itself:
    / would make everything the environment)."""
    match = SITE_LAYOUT.search(site_dir)
    prefix = site_dir[:match.start()] if match else None
    if prefix is None:
        parent = site_dir
        for _ in range(PREFIX_WALK):
            parent = os.path.dirname(parent)
            if os.path.isfile(os.path.join(parent, "pyvenv.cfg")):
                prefix = parent
                break
            if parent == "/":
                break
    if not prefix or prefix == "/" or forbidden(prefix):
        return None
    return prefix


def prefix_scheme(prefix: str, site_dir: str) -> List[str]:
    """The install-scheme directories (site-packages, scripts, data, headers) of `prefix`, computed by this
    interpreter's sysconfig: those of every scheme whose site-packages is `site_dir`, else those of the default
    scheme (a layout no scheme names, such as dist-packages under a prefix made by `pip install --root`)."""

    config = {"base": prefix, "platbase": prefix, "installed_base": prefix, "installed_platbase": prefix,
              "userbase": prefix}
    matched, default = [], []
    for scheme in [None] + list(sysconfig.get_scheme_names()):
        try:
            paths = sysconfig.get_paths(scheme, vars=config) if scheme else sysconfig.get_paths(vars=config)
        except (KeyError, ValueError, OSError):
            continue
        dirs = [paths[key] for key in SCHEME_KEYS if paths.get(key)]
        if scheme is None:
            default = dirs
        elif any(os.path.realpath(paths.get(key) or "") == site_dir for key in ("purelib", "platlib")):
            matched += dirs
    return matched or default


def editable_projects(site_dir: str, children: List[str]) -> List[str]:
    """The project directories of the editable installs in `site_dir` (their direct_url.json): the installer
    points the import system there (a `.pth` line, setuptools' finder), so their files are the environment's."""
    projects = []
    for child in children:
        if not child.endswith(".dist-info"):
            continue
        url = direct_url(os.path.join(site_dir, child)) or {}
        where = url.get("url") if isinstance(url, dict) else None
        if not (isinstance(where, str) and where.startswith("file://") and isinstance(url.get("dir_info"), dict)
                and url["dir_info"].get("editable")):
            continue
        path = where[len("file://"):]
        if path.startswith("/") and os.path.isdir(path):
            projects.append(path)
    return projects


def environment_roots() -> List[str]:
    """The directories the environment's files may resolve into, as the installers see them (real paths):
    this interpreter's install scheme and every sys.path entry (where the import system loads from), and for
    each site directory on sys.path (its own, the base interpreter's with --system-site-packages, the user
    site, one a `.pth` line adds) the scheme directories of the prefix it belongs to: its site-packages,
    scripts, data and headers. A RECORD line inside any of them is an installer's ordinary output (a console
    script in that prefix's bin/); one that resolves anywhere else is never opened, hashed or loaded. Editable
    installs add their project directories."""

    paths = sysconfig.get_paths()
    roots = [paths.get(key) for key in SCHEME_KEYS]
    roots += [sys.prefix, sys.exec_prefix]
    # site.getsitepackages() is missing from old virtualenv's site.py: AttributeError.
    sites = list(getattr(site, "getsitepackages", list)())
    if site.ENABLE_USER_SITE:
        sites.append(site.getusersitepackages())
    cwd = os.path.realpath(os.getcwd())
    entries = [entry for entry in sys.path if entry and os.path.realpath(entry) != cwd]
    roots += sites + entries
    seen = set()
    for entry in sites + entries:
        real = os.path.realpath(entry)
        if real in seen or forbidden(real):
            continue
        seen.add(real)
        try:
            children = os.listdir(real)
        except OSError:
            continue
        holds_distributions = any(child.endswith((".dist-info", ".egg-info")) for child in children)
        if not (holds_distributions or SITE_LAYOUT.search(real)):
            continue  # the stdlib, a source tree on PYTHONPATH: a root of its own, no prefix
        prefix = site_prefix(real)
        if prefix is not None:
            roots += [prefix] + prefix_scheme(prefix, real)
        roots += editable_projects(real, children)
    real_roots = []
    for root in roots:
        if root:
            resolved = os.path.realpath(root).rstrip("/") or "/"
            if resolved not in real_roots and not forbidden(resolved):
                real_roots.append(resolved)
    return real_roots




ROOTS: List[str] = []  # environment_roots(), computed in main(): it reads each site's distributions
ROOT_PREFIXES: Tuple[str, ...] = ()


def inside(real: str) -> bool:
    return not forbidden(real) and (real.startswith(ROOT_PREFIXES) or real in ROOTS)


class Resolver:
    """Real paths of files listed in RECORD, with their stat: one lstat per directory (resolved once, from its
    resolved parent) and one per file; a stat too only for a symlink."""

    def __init__(self) -> None:
        self.dirs: Dict[str, str] = {}

    def directory(self, path: str) -> str:
        real = self.dirs.get(path)
        if real is None:
            parent, name = os.path.split(path)
            if parent == path or not name:
                real = path
            else:
                candidate = self.directory(parent).rstrip("/") + "/" + name
                try:
                    is_link = stat.S_ISLNK(os.lstat(candidate).st_mode)
                except OSError:
                    is_link = False
                real = os.path.realpath(candidate) if is_link else candidate
            self.dirs[path] = real
        return real

    def __call__(self, full: str) -> Tuple[str, Optional[os.stat_result]]:
        head, _, tail = full.rpartition("/")
        candidate = self.directory(head).rstrip("/") + "/" + tail
        try:
            info = os.lstat(candidate)
        except OSError:
            return candidate, None
        if stat.S_ISLNK(info.st_mode):
            real = os.path.realpath(candidate)
            try:
                return real, os.stat(real)
            except OSError:
                return real, None
        return candidate, info


# ---------------------------------------------------------------- the interpreter


def pyvenv_cfg() -> Optional[Dict[str, str]]:
    path = os.path.join(sys.prefix, "pyvenv.cfg")
    text, _ = read_text(path)
    if text is None:
        return None
    cfg = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            cfg[key.strip()] = value.strip()
    return cfg


def env_kind(cfg: Optional[Dict[str, str]]) -> str:
    if cfg is not None and "uv" in cfg:
        return "uv"
    if os.path.isdir(os.path.join(sys.prefix, "conda-meta")):
        return "conda"
    if sys.prefix != getattr(sys, "base_prefix", sys.prefix) or cfg is not None:
        return "venv"
    return "system"


def environ_facts() -> Dict[str, Any]:
    environ = environ_as_given()  # without what the doctor set to run this probe
    names = sorted(environ)
    exact = set(ENV_ALLOW.get("names", []))
    prefixes = tuple(ENV_ALLOW.get("prefixes", []))
    secret = re.compile(ENV_ALLOW.get("secret_pattern", "(?!)"), re.IGNORECASE)
    values = {}
    for name in names:
        if secret.search(name):
            continue
        if name in exact or name.startswith(prefixes):
            values[name] = environ[name]
    return {"names": names, "values": values}


def marker_environment() -> Dict[str, str]:
    impl = sys.implementation
    version = "{}.{}.{}".format(*impl.version[:3])
    if impl.version.releaselevel != "final":
        version += impl.version.releaselevel[0] + str(impl.version.serial)
    return {
        "implementation_name": impl.name,
        "implementation_version": version,
        "os_name": os.name,
        "platform_machine": platform.machine(),
        "platform_release": platform.release(),
        "platform_system": platform.system(),
        "platform_version": platform.version(),
        "python_full_version": platform.python_version(),
        "platform_python_implementation": platform.python_implementation(),
        "python_version": ".".join(platform.python_version_tuple()[:2]),
        "sys_platform": sys.platform,
    }


def classify_path(entry: str, pythonpath: List[str], stdlib_dirs: List[str], site_dirs: List[str],
                  user_site: Optional[str]) -> str:
    if entry == "":
        return "cwd"
    real = os.path.realpath(entry)
    if real == os.path.realpath(os.getcwd()):
        return "cwd"
    if any(real == os.path.realpath(p) for p in pythonpath):
        return "pythonpath"
    if user_site and real == os.path.realpath(user_site):
        return "user-site"
    if any(real == os.path.realpath(p) for p in site_dirs):
        return "site"
    if any(real == os.path.realpath(p) for p in stdlib_dirs):
        return "stdlib"
    return "other"


def target_facts() -> Dict[str, Any]:
    cfg = pyvenv_cfg()
    libc_name, libc_version = platform.libc_ver()
    user_site: Optional[str] = None
    with contextlib.suppress(Exception):  # an old virtualenv's site.py; then there is no user site
        user_site = site.getusersitepackages()
    return {
        "executable": sys.executable,
        "python_version": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        # The file names this interpreter imports extension modules from, and its ABI tag: an extension
        # named for another one (X.cpython-312-x86_64-linux-gnu.so on 3.11) is invisible to its import system.
        "extension_suffixes": list(importlib.machinery.EXTENSION_SUFFIXES),
        "soabi": sysconfig.get_config_var("SOABI"),
        "prefix": sys.prefix,
        "base_prefix": getattr(sys, "base_prefix", sys.prefix),
        "env_kind": env_kind(cfg),
        "pyvenv_cfg": cfg,
        "libc": {"name": libc_name, "version": libc_version},
        "cwd": os.getcwd(),
        "user_site": user_site,
        "user_site_enabled": bool(site.ENABLE_USER_SITE),
        "environ": environ_facts(),
        "marker_environment": marker_environment(),
    }


def sys_path_facts(user_site: Optional[str]) -> List[Dict[str, Any]]:
    pythonpath = [p for p in environ_as_given().get("PYTHONPATH", "").split(os.pathsep) if p]
    paths = sysconfig.get_paths()
    stdlib_dirs = [paths.get("stdlib", ""), paths.get("platstdlib", "")]
    site_dirs = [paths.get("purelib", ""), paths.get("platlib", "")]
    with contextlib.suppress(Exception):  # missing from an old virtualenv's site.py
        site_dirs += site.getsitepackages()
    # The directories site.addsitedir read .pth files in: the site directories, and the user site when enabled
    # (a site directory also on PYTHONPATH is classified "pythonpath" above, yet its .pth files were read).
    pth_dirs = {os.path.realpath(p) for p in site_dirs if p}
    if user_site and site.ENABLE_USER_SITE:
        pth_dirs.add(os.path.realpath(user_site))
    return [
        {
            "path": entry,
            "kind": classify_path(entry, pythonpath, stdlib_dirs, site_dirs, user_site),
            "exists": os.path.isdir(entry or "."),
            "site_dir": not sys.flags.no_site and os.path.realpath(entry or ".") in pth_dirs,
        }
        for entry in sys.path
    ]


# ---------------------------------------------------------------- distributions


def parse_metadata(dist_dir: str, is_egg: bool) -> Tuple[Optional[email.message.Message], Optional[Dict[str, Any]]]:
    meta_path = os.path.join(dist_dir, "PKG-INFO" if is_egg else "METADATA")
    text, error = read_text(meta_path)
    if text is None:
        return None, {"file": meta_path, "error": error}
    end = re.search(r"\r?\n\r?\n", text)  # the blank line that ends the fields
    fields = text if end is None else text[:end.start() + 1]
    if len(fields) > MAX_METADATA_FIELD_BYTES:
        return None, {"file": meta_path, "error": f"its fields come to more than {MAX_METADATA_FIELD_BYTES >> 20} MiB"}
    try:
        message = email.parser.Parser().parsestr(fields, headersonly=True)
    except Exception as exc:  # noqa: BLE001 - email is lenient, but be sure
        return None, {"file": meta_path, "error": f"unparseable: {exc}"}
    name, version = message.get("Name"), message.get("Version")
    if not name or not version:
        return None, {"file": meta_path, "error": "no Name or Version field"}
    if len(message.get_all("Requires-Dist") or ()) > MAX_REQUIRES:
        return None, {"file": meta_path, "error": f"more than {MAX_REQUIRES} Requires-Dist fields"}
    return message, None


def parse_record(dist_dir: str) -> Tuple[Optional[List[Row]], Optional[Dict[str, Any]]]:
    """(rows, error): rows are (path, hash, size, line number) with size None when absent."""
    path = os.path.join(dist_dir, "RECORD")
    if not os.path.lexists(path):
        return None, None
    text, error = read_text(path)
    if text is None:
        return None, {"file": path, "error": error}
    if text.count("\n") > MAX_RECORD_LINES:
        return None, {"file": path, "error": f"more than {MAX_RECORD_LINES} lines"}
    rows = []
    try:
        for lineno, row in enumerate(csv.reader(io.StringIO(text)), 1):
            if not row:
                continue
            if len(row) != 3:
                return None, {"file": path, "error": f"line {lineno} has {len(row)} fields, expected 3"}
            file_path, file_hash, size = row
            if size and not size.isdigit():
                return None, {"file": path, "error": f"line {lineno}: size {size!r} is not a number"}
            rows.append((file_path, file_hash, int(size) if size else None, lineno))
    except csv.Error as exc:
        return None, {"file": path, "error": f"malformed CSV: {exc}"}
    return rows, None


def direct_url(dist_dir: str) -> Any:
    text, _ = read_text(os.path.join(dist_dir, "direct_url.json"))
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


# Called for every RECORD line of the environment (150,000 in a serving environment, torch's alone 20,000): kept
# to a few string operations each.
def top_of(rel_path: str) -> str:
    return (rel_path.replace("\\", "/") if "\\" in rel_path else rel_path).partition("/")[0]


def watched(rel: str) -> bool:
    top = top_of(rel)
    return top in WATCHED_SET or top.partition(".")[0] in WATCHED_SET


def plain(rel: str) -> bool:
    """A relative path that os.path.normpath leaves as it is (no `.` or `..` segment, no `//`, no trailing `/`):
    joined to a normalized directory by a `/`, it is already the normalized path."""
    return bool(rel) and rel[0] not in "./" and rel[-1] not in "./" and "//" not in rel and "/." not in rel


def confine(location: str, rows: List[Row], opened: Callable[[Row], bool]) -> Tuple[List[KeptRow], List[Dict[str, Any]]]:
    """Split RECORD rows into those inside the environment, as (path, hash, size, line, real path, stat or
    None when missing), and those that escape it to something that exists (`..`, an absolute path, a
    symlink out, /dev, /proc).
    `opened(row)`: the file will be opened or stat'ed, so symlinks are resolved; other rows are judged by their
    normalized path."""
    resolver = Resolver()
    absolute = os.path.abspath(location)
    real_location = os.path.realpath(location)
    # A plain path below a location inside the environment is inside it too: kept without normpath and the roots
    # compared again (most lines of every RECORD).
    location_inside = real_location != "/" and inside(real_location)
    kept: List[KeptRow] = []
    escapes: List[Dict[str, Any]] = []
    for row in rows:
        rel = row[0]
        info = None
        if opened(row):
            if (".." in rel and ".." in rel.replace("\\", "/").split("/")) or rel.startswith("/"):
                # `..` after a symlinked directory goes where the kernel goes: resolve the path as written.
                real = os.path.realpath(os.path.join(absolute, rel))
                try:
                    info = os.stat(real)
                except OSError:
                    pass
            else:
                full = absolute + "/" + rel
                real, info = resolver(os.path.normpath(full) if ("//" in rel or "./" in rel) else full)
        elif location_inside and plain(rel):
            kept.append(row + (real_location + "/" + rel, None))
            continue
        else:
            real = os.path.normpath(os.path.join(real_location, rel))
        if inside(real):
            kept.append(row + (real, info))
        elif os.path.lexists(real):
            escapes.append({"line": row[3], "path": rel, "resolves_to": real})
        # A line that leaves the environment for nothing is never opened, and `pip install --target` writes
        # such lines for console scripts (`../../bin/x` from the target directory): no risk, no finding.
    return kept, escapes


def record_integrity(rows: List[KeptRow], hash_all: bool, shared: AbstractSet[str] = frozenset()) -> Dict[str, Any]:
    """Compare RECORD with the disk. Returns counts and the (capped) list of mismatches. `shared`: paths another
    distribution lists too; their bytes are compared in shared_files, not here (missing still counts)."""
    missing, size_mismatch, hash_mismatch, not_regular = [], [], [], []
    checked = 0
    for rel, rec_hash, size, _line, real, info in rows:
        if rel.endswith(".pyc") or not rec_hash:
            continue  # bytecode is derived; RECORD and directory rows carry no hash
        if info is None:
            missing.append(rel)
            continue
        if not stat.S_ISREG(info.st_mode):
            not_regular.append({"path": rel, "kind": file_kind(info.st_mode)})
            continue
        if rel in shared:
            continue
        checked += 1
        if size is not None and info.st_size != size:
            size_mismatch.append({"path": rel, "record": size, "disk": info.st_size})
            continue
        if hash_all and rec_hash.startswith("sha256="):
            disk, _ = file_sha256(real)
            if disk != rec_hash:
                hash_mismatch.append({"path": rel})
    integrity: Dict[str, Any] = {"files": len(rows), "checked": checked, "hashed": bool(hash_all)}
    for name, found in (("missing", missing), ("size_mismatch", size_mismatch), ("hash_mismatch", hash_mismatch),
                        ("not_regular", not_regular)):
        integrity[name] = found[:50]
        integrity[name + "_count"] = len(found)
    integrity["shared"] = len(shared)
    return integrity


def watched_claims(rows: List[KeptRow]) -> List[Dict[str, Any]]:
    """Files this distribution claims under the watched top-level names, with disk state."""
    claims = []
    for rel, rec_hash, size, _line, real, _info in rows:
        if not watched(rel) or rel.endswith(".pyc") or "__pycache__" in rel:
            continue
        disk_hash, error = file_sha256(real)
        claim = {"path": rel, "hash": rec_hash or None, "size": size, "disk_hash": disk_hash}
        if error and os.path.lexists(real):
            claim["disk_error"] = error
        claims.append(claim)
    return claims


# PEP 3149 / PEP 384 tags in an extension's file name: cpython-311-x86_64-linux-gnu, cpython-313t-...,
# pypy39-pp73-..., abi3, cp311-win_amd64.
FOREIGN_ABI_TAG = re.compile(r"\.((?:cpython-|cp|pypy|graalpy)\d+[-\w]*|abi3)$")


def wheel_tags(dist_dir: str) -> Optional[List[str]]:
    """The `Tag:` lines of the dist-info's WHEEL file (what the installed wheel was built for); None when absent."""
    raw, _ = read_regular(os.path.join(dist_dir, "WHEEL"), lambda handle: handle.read(65536))
    if raw is None:
        return None
    text = raw.decode("utf-8", "replace")
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Tag:")][:64]


def compiled_files(location: str, rows: List[KeptRow]) -> Tuple[List[Dict[str, str]], List[str]]:
    """Extension modules (importable, with their module names) and other shared libraries; only regular
    files inside the environment (`rows` are confined already)."""

    suffixes = sorted(importlib.machinery.EXTENSION_SUFFIXES, key=len, reverse=True)
    extensions, libraries = [], []
    for rel, _, _, _, _real, info in rows:
        if not (rel.endswith((".so", ".pyd")) or ".so." in rel) or info is None:
            continue
        if not stat.S_ISREG(info.st_mode):
            continue
        # The module name of the path as the import system would walk it: `flash_attn/../x.so` is `x`.
        norm = os.path.normpath(rel).replace("\\", "/")
        if norm.startswith("../") or os.path.isabs(norm) or norm.split("/", 1)[0].endswith(".data"):
            libraries.append(rel)
            continue
        suffix = next((s for s in suffixes if norm.endswith(s)), None)
        base = os.path.basename(norm)
        if suffix and not base.startswith("lib"):
            stem = norm[: -len(suffix)]
            # Only the bare ".so" matched: a tag left in the stem names another interpreter's ABI
            # (_C.cpython-312-x86_64-linux-gnu.so seen from 3.11). The module is `_C`, not `_C.cpython-312-...`.
            foreign = FOREIGN_ABI_TAG.search(stem) if suffix in (".so", ".pyd") else None
            module = (stem[: foreign.start()] if foreign else stem).replace("/", ".")
            extension = {"path": rel, "module": module}
            if foreign:
                extension["abi_tag"] = foreign.group(1)
            extensions.append(extension)
        else:
            libraries.append(rel)
    return extensions, libraries


def scan_distributions() -> List[Fact]:
    dists = []
    seen_dirs = set()
    for entry in sys.path:
        if entry == "" or os.path.realpath(entry) == os.path.realpath(os.getcwd()):
            # The working directory is on sys.path only for `python -c` and `python -m`, not for the
            # `vllm` console script; a source checkout's egg-info there is not part of the environment.
            # (Import shadowing from it is still judged, from the resolution facts.)
            continue
        location = entry
        try:
            names = sorted(os.listdir(location))
        except OSError:
            continue
        real_location = os.path.realpath(location)
        if real_location in seen_dirs:
            continue
        seen_dirs.add(real_location)
        for child in names:
            is_egg = child.endswith(".egg-info")
            if not (child.endswith(".dist-info") or is_egg):
                continue
            dist_dir = os.path.join(location, child)
            if not os.path.isdir(dist_dir):
                continue
            dists.append(describe_distribution(location, dist_dir, is_egg))
    return dists


VERIFIED_ROWS: Dict[int, List[KeptRow]] = {}  # id(distribution fact) -> its confined RECORD rows, for the distributions whose files are verified
RECORD_ROWS: Dict[int, Dict[str, List[KeptRow]]] = {}  # id(distribution fact) -> {top-level name: its confined RECORD rows}, every distribution's, until shared_files()
MAX_SHARED_SHOWN = 200
# What overlaps() reads of the disk: only the paths two distributions list with different sha256, each file at most
# MAX_OVERLAP_FILE_BYTES (a larger one is not hashed, and says so), at most MAX_OVERLAP_HASHED files in all.
MAX_OVERLAP_FILE_BYTES = 64 << 20
MAX_OVERLAP_HASHED = 1000
MAX_OVERLAP_GROUPS = 200
OVERLAP_SAMPLE = 10


def claimed_paths(dists: List[Fact]) -> Dict[str, List[Tuple[Fact, KeptRow]]]:
    """{real path: [(fact, row)]} of the RECORD paths that two distributions could share: only rows under a top-level
    name (or `..`, the scripts) that another distribution in the same directory also installs into, so that torch's
    20,000 rows are never looked at unless something else writes into torch/. Bytecode and unhashed rows left out."""
    places = {}  # location -> its real path: one realpath per site directory, not one per distribution
    for fact in dists:
        if fact["location"] not in places:
            places[fact["location"]] = os.path.realpath(fact["location"])
    listed = [(fact, places[fact["location"]], RECORD_ROWS[id(fact)]) for fact in dists if id(fact) in RECORD_ROWS]
    by_top: Dict[Tuple[str, str], Set[int]] = {}
    for fact, place, rows_by_top in listed:
        for top in rows_by_top:
            by_top.setdefault((place, top), set()).add(id(fact))
    claims: Dict[str, List[Tuple[Fact, KeptRow]]] = {}
    for fact, place, rows_by_top in listed:
        for top, rows in rows_by_top.items():
            if len(by_top[(place, top)]) < 2:
                continue  # nothing else installs there: torch's 20,000 rows under torch/ are never looked at
            for row in rows:
                rel = row[0]
                if rel.endswith(".pyc") or not row[1] or "__pycache__/" in rel:
                    continue
                claims.setdefault(row[4], []).append((fact, row))
    return claims


class DiskHashes:
    """The sha256 of the files shared_files() compares, each read once; only regular files that resolve inside the
    environment are opened. For the overlaps of any distributions (`capped`), within MAX_OVERLAP_HASHED files of at
    most MAX_OVERLAP_FILE_BYTES each; the verified distributions' shared paths are hashed whole, as they always were
    (at most MAX_SHARED_SHOWN per group: distributions.file-collision judges every one of them)."""

    def __init__(self) -> None:
        self.known: Dict[str, str] = {}
        self.hashed = 0

    def __call__(self, real: str, capped: bool = True) -> Optional[str]:
        known = self.known.get(real)
        if known is None or (not capped and known.startswith("not hashed: past the")) or (
                not capped and known.startswith("not hashed: ") and "MiB cap" in known):
            known = self.known[real] = self.read(real, capped) or ""
        return known or None

    def read(self, path: str, capped: bool) -> Optional[str]:
        real = os.path.realpath(path)
        if not inside(real):
            return f"not hashed: resolves to {real}, outside the environment"
        try:
            info = os.stat(real)
        except OSError:
            return None  # missing
        if not stat.S_ISREG(info.st_mode):
            return "not hashed: " + file_kind(info.st_mode)
        if capped and info.st_size > MAX_OVERLAP_FILE_BYTES:
            return f"not hashed: {info.st_size} bytes, over the {MAX_OVERLAP_FILE_BYTES >> 20} MiB cap"
        if capped and self.hashed >= MAX_OVERLAP_HASHED:
            return f"not hashed: past the {MAX_OVERLAP_HASHED} files hashed per run"
        self.hashed += 1
        disk, error = file_sha256(real)
        return disk or ("not hashed: " + str(error))


def claimant(fact: Fact) -> Dict[str, Any]:
    return {"name": fact["name"], "version": fact.get("version"), "dist_info": fact["dist_info"],
            "installer": fact.get("installer"), "installed_at": fact.get("installed_at")}


def add_shared_path(groups: Dict[Tuple[str, ...], Dict[str, Any]], owners: List[Tuple[Fact, KeptRow]],
                    disk_hashes: DiskHashes, overlaps: bool = False) -> None:
    """Count one path that `owners` (two or more names) list in the group of those names; for one whose RECORD hashes
    differ, each one's hash and the hash of the file on disk."""
    names = tuple(sorted({fact["canonical"] for fact, _ in owners}))
    group = groups.get(names)
    if group is None:
        group = groups[names] = {"distributions": [
            claimant(f) for f in sorted({id(f): f for f, _ in owners}.values(), key=lambda f: f["canonical"])],
            "paths": 0, "differing": [], "differing_count": 0}
        if overlaps:
            group.update({"sample": [], "empty": 0})
    group["paths"] += 1
    rel = owners[0][1][0]
    if overlaps:
        if len(group["sample"]) < OVERLAP_SAMPLE:
            group["sample"].append(rel)
        if all(row[2] == 0 for _, row in owners):
            group["empty"] += 1
    hashes = {fact["canonical"]: row[1] for fact, row in owners}
    if len(set(hashes.values())) < 2:
        return
    group["differing_count"] += 1
    if len(group["differing"]) < MAX_SHARED_SHOWN:
        group["differing"].append({"path": rel, "hashes": hashes,
                                   "disk_hash": disk_hashes(owners[0][1][4], capped=overlaps)})


def shared_files(dists: List[Fact]) -> Tuple[List[Dict[str, Any]], Dict[str, Any]]:
    """Verify the RECORDs of the stack and the kernel packages, and find the paths two distributions list.

    Returns (shared_files, overlaps). shared_files: the paths two verified distributions (the stack, the kernel
    packages) list, grouped by the verified names that list them. overlaps: the paths any two distributions list,
    grouped by all the names that list them. For each group: how many paths, and for those whose RECORD hashes differ,
    each one's hash and the hash on disk. Only those paths are hashed (where every hash agrees, the bytes are the same
    whoever won), within DiskHashes' bounds.

    Sets each verified distribution's record.integrity, where a path another distribution lists too is left out of
    its size and hash comparison: whichever was installed last holds it, which is an overlap, not a change by hand.
    """
    claims = claimed_paths(dists)
    RECORD_ROWS.clear()
    disk_hashes = DiskHashes()
    shared: Dict[int, Set[str]] = {}  # id(fact) -> rel paths shared with another distribution
    verified_groups: Dict[Tuple[str, ...], Dict[str, Any]] = {}
    all_groups: Dict[Tuple[str, ...], Dict[str, Any]] = {}
    overlap_count = 0
    for owners in claims.values():
        if len({fact["canonical"] for fact, _ in owners}) < 2:
            continue  # one distribution's own (or two copies of one name: the duplicates check's)
        for fact, row in owners:
            shared.setdefault(id(fact), set()).add(row[0])
        verified = [(fact, row) for fact, row in owners if id(fact) in VERIFIED_ROWS]
        if len({fact["canonical"] for fact, _ in verified}) >= 2:
            add_shared_path(verified_groups, verified, disk_hashes)
        names = tuple(sorted({fact["canonical"] for fact, _ in owners}))
        if names in all_groups or len(all_groups) < MAX_OVERLAP_GROUPS:
            add_shared_path(all_groups, owners, disk_hashes, overlaps=True)
        else:
            overlap_count += 1
    for fact in dists:
        rows = VERIFIED_ROWS.pop(id(fact), None)
        if rows is not None:
            canon = fact["canonical"]
            fact["record"]["integrity"] = record_integrity(rows, VERIFY_HASHES or canon in HASH_ALWAYS,
                                                           shared.get(id(fact), set()))
    return list(verified_groups.values()), {"groups": list(all_groups.values()), "paths_left_out": overlap_count}


def dist_info_mtime(dist_dir: str) -> Optional[float]:
    """When the installer wrote the dist-info (its RECORD, written last): the order of installs."""
    for name in ("RECORD", "INSTALLER", "METADATA"):
        try:
            return os.stat(os.path.join(dist_dir, name)).st_mtime
        except OSError:
            continue
    return None


def describe_distribution(location: str, dist_dir: str, is_egg: bool) -> Fact:
    fact: Fact = {"location": location, "dist_info": dist_dir, "format": "egg-info" if is_egg else "dist-info"}
    message, meta_error = parse_metadata(dist_dir, is_egg)
    if message is None:  # and meta_error says why
        guess = os.path.basename(dist_dir).rsplit(".", 1)[0].split("-")
        fact.update({"name": guess[0], "version": guess[1] if len(guess) > 1 else None, "metadata_error": meta_error})
    else:
        fact.update({
            "name": message["Name"],
            "version": message["Version"],
            "requires": message.get_all("Requires-Dist") or [],
            "requires_python": message.get("Requires-Python"),
        })
    canon = canonical(fact["name"])
    fact["canonical"] = canon
    installer, _ = read_text(os.path.join(dist_dir, "INSTALLER"))
    fact["installer"] = installer.strip() if installer else None
    fact["installed_at"] = dist_info_mtime(dist_dir)
    url = direct_url(dist_dir)
    fact["editable"] = bool(url and url.get("dir_info", {}).get("editable"))
    fact["direct_url"] = url.get("url") if url else None
    rows, record_error = (None, None) if is_egg else parse_record(dist_dir)
    fact["record"] = {"present": rows is not None, "error": record_error}
    if rows is not None:
        fact["record"]["files"] = len(rows)
        tops = {top_of(r[0]) for r in rows}  # once per row: torch's RECORD has about 20,000
        fact["top_levels"] = sorted(t for t in tops if not t.endswith((".dist-info", ".data")) and t not in ("..", "__pycache__"))
        is_stack = canon in STACK
        verified = is_stack or canon in KERNELS
        kept, escapes = confine(location, rows, lambda row: verified or watched(row[0]))
        if escapes:
            fact["record"].update({"file": os.path.join(dist_dir, "RECORD"), "escapes": escapes[:MAX_SHOWN],
                                   "escapes_count": len(escapes)})
        claims = watched_claims(kept)
        if claims:
            fact["claims"] = claims
        if verified:
            # The integrity is computed once every distribution is read (shared_files): a path two of them list
            # is judged as a collision, not as this one's file changed on disk.
            VERIFIED_ROWS[id(fact)] = kept
        rows_by_top: Dict[str, List[KeptRow]] = {}  # for overlaps: the paths any two distributions list, by their top-level names
        for row in kept:
            rows_by_top.setdefault(top_of(row[0]), []).append(row)
        RECORD_ROWS[id(fact)] = rows_by_top
        if is_stack:
            fact["extensions"], fact["libraries"] = compiled_files(location, kept)
            if any("abi_tag" in ext for ext in fact["extensions"]):
                fact["wheel_tags"] = wheel_tags(dist_dir)
    return fact


# ---------------------------------------------------------------- import resolution (no import)


PORTION_FILES_LISTED = 20  # files named in the facts, per directory
PORTION_ENTRIES_WALKED = 5000  # a namespace portion is walked this far, no further


def portion_contents(path: str) -> Dict[str, Any]:
    """What a directory without __init__.py holds, without opening a file or following a link.

    Bytecode is `.pyc` inside `__pycache__` (PEP 3147: never imported without its source); every other
    file is listed (sorted, capped), and counted. `complete` is False when the walk stopped early.
    """
    other: List[str] = []
    bytecode, other_count, dirs, walked = 0, 0, 0, 0
    complete = True
    for root, subdirs, names in os.walk(path, onerror=lambda _exc: None):
        subdirs.sort()
        dirs += len(subdirs)
        in_cache = os.path.basename(root) == "__pycache__"
        for child in sorted(names):
            walked += 1
            if in_cache and child.endswith(".pyc"):
                bytecode += 1
                continue
            other_count += 1
            if len(other) < PORTION_FILES_LISTED:
                other.append(os.path.relpath(os.path.join(root, child), path))
        walked += len(subdirs)
        if walked > PORTION_ENTRIES_WALKED:
            complete = False
            break
    return {"files": other, "file_count": other_count, "bytecode_count": bytecode, "dir_count": dirs,
            "complete": complete}


def portions(name: str) -> List[Dict[str, Any]]:
    """Every sys.path entry that holds something importable as top-level `name`, in path order."""
    found = []
    for index, entry in enumerate(sys.path):
        base = entry or os.getcwd()
        pkg = os.path.join(base, name)
        if os.path.isfile(os.path.join(pkg, "__init__.py")):
            found.append({"index": index, "entry": entry, "kind": "package", "path": pkg})
        elif os.path.isdir(pkg):
            found.append({"index": index, "entry": entry, "kind": "namespace-portion", "path": pkg,
                          "contents": portion_contents(pkg)})
        if os.path.isfile(pkg + ".py"):
            found.append({"index": index, "entry": entry, "kind": "module", "path": pkg + ".py"})
        try:
            for child in os.listdir(base):
                if child.startswith(name + ".") and child.endswith((".so", ".pyd")):
                    found.append({"index": index, "entry": entry, "kind": "extension", "path": os.path.join(base, child)})
        except OSError:
            pass
    return found


def resolve(name: str) -> Dict[str, Any]:
    try:
        spec = importlib.util.find_spec(name)
    except Exception as exc:  # noqa: BLE001 - a broken finder on the path is itself a fact
        return {"found": False, "error": error_text(exc)}
    if spec is None:
        return {"found": False}
    locations = list(spec.submodule_search_locations or []) if spec.submodule_search_locations is not None else None
    is_namespace = spec.submodule_search_locations is not None and spec.origin in (None, "namespace")
    return {
        "found": True,
        "origin": spec.origin if spec.origin != "namespace" else None,
        "namespace": is_namespace,
        "search_locations": locations,
    }


def spec_without_import(name: str) -> Tuple[Any, Optional[str], Optional[str]]:
    """(spec, finder name, error) for a possibly dotted module name, without importing anything.

    importlib.util.find_spec("vllm._C") would import vllm (and torch with it). Instead ask each meta-path
    finder, level by level, with the parent's submodule_search_locations as the path: the search the import
    system makes, minus running any package's __init__. (A package that edits its own __path__ at import
    time is searched as installed.)"""
    parts = name.split(".")
    path = None
    spec = None
    finder_name = None
    for depth in range(1, len(parts) + 1):
        fullname = ".".join(parts[:depth])
        spec = None
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            try:
                spec = find(fullname, path)
            except Exception as exc:  # noqa: BLE001 - a broken finder on the path is itself a fact
                who = getattr(finder, "__name__", None) or type(finder).__name__
                return None, None, f"{who}.find_spec({fullname!r}): {type(exc).__name__}: {exc}"
            if spec is not None:
                finder_name = getattr(finder, "__name__", None) or type(finder).__name__
                break
        if spec is None:
            return None, None, None
        if depth < len(parts):
            if spec.submodule_search_locations is None:
                return None, None, None  # a module, not a package: it has no submodules
            path = list(spec.submodule_search_locations)
    return spec, finder_name, None


def import_system_extensions(names: List[str], dists: List[Fact]) -> Dict[str, Any]:
    """The stack's extension modules as the import system finds them, and only those no RECORD lists (a
    `pip install -e`, `setup.py develop`, a build copied in by hand) or that shadow the file RECORD lists."""

    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    recorded: Set[str] = set()
    by_module: Dict[str, Dict[str, str]] = {}
    wanted = list(names)
    for dist in dists:
        for ext in dist.get("extensions") or ():
            full = os.path.join(dist["location"], ext["path"])
            recorded.add(os.path.realpath(full))
            by_module.setdefault(ext["module"], {"path": full, "distribution": dist["name"]})
            wanted.append(ext["module"])
    found, errors = [], []
    for name in sorted(set(wanted)):
        spec, finder_name, error = spec_without_import(name)
        if error:
            errors.append({"module": name, "error": error})
            continue
        origin = getattr(spec, "origin", None) if spec is not None else None
        is_extension = isinstance(getattr(spec, "loader", None), importlib.machinery.ExtensionFileLoader) or (
            isinstance(origin, str) and origin.endswith(suffixes))
        if not is_extension or not isinstance(origin, str):
            continue
        real = os.path.realpath(origin)
        if real in recorded:
            continue
        try:
            mode = os.stat(origin).st_mode
            kind = "regular" if stat.S_ISREG(mode) else file_kind(mode)
        except OSError as exc:
            kind = f"{type(exc).__name__}: {exc.strerror or exc}"
        found.append({"module": name, "path": origin, "resolves_to": real, "finder": finder_name,
                      "file": kind if not forbidden(real) else f"resolves to {real}",
                      "shadows": by_module.get(name)})
    return {"names": sorted(set(wanted)), "found": found, "errors": errors}


def main() -> None:
    global ROOTS, ROOT_PREFIXES
    ROOTS = environment_roots()
    ROOT_PREFIXES = tuple("/" if root == "/" else root + "/" for root in ROOTS)
    target = target_facts()
    target["environment_roots"] = ROOTS
    dists = scan_distributions()
    shared, overlaps = shared_files(dists)
    facts = {
        "target": target,
        "sys_path": sys_path_facts(target["user_site"]),
        "distributions": dists,
        "shared_files": shared,
        "overlaps": overlaps,
        "import_extensions": import_system_extensions(EXTENSION_NAMES, [d for d in dists if d["canonical"] in STACK]),
        "resolution": {name: dict(resolve(name), portions=portions(name)) for name in SPEC_NAMES},
    }
    emit(facts)


main()
