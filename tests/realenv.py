"""Real environments for tests: real PyPI wheels, real venvs, real installers.

The doctor inspects what an installer really leaves on disk (dist-info, RECORD, namespace
packages, files claimed twice), so tests build that state with pip and uv instead of
imitating it. Only the GPU is missing.

Third-party artifacts are cached OUTSIDE the repo, in ``$DFLASH_DOCTOR_TEST_CACHE``
(default ``~/.cache/dflash-doctor-tests``). The first run downloads and builds; later runs,
and concurrent pytest workers (an fcntl lock per artifact), reuse the cache.
``python tests/realenv.py`` warms the cache ahead of a test run.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import fcntl
import hashlib
import io
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import version as _dist_version
from pathlib import Path
from typing import Literal

from packaging.version import Version

REPO_ROOT = Path(__file__).resolve().parent.parent

FA4_VERSION = "4.0.0b36"
FA2_VERSION = "2.8.3"

# Pinned so that a cached artifact is provably the one PyPI served (pip also checks PyPI's own
# hash while downloading); a mismatch means the cache was tampered with or is stale.
KNOWN_SHA256 = {
    "flash_attn_4-4.0.0b36-py3-none-any.whl": "b6f0e2a264334cb1b59289ddd309c7c76d3a8d184268316b43403e51ba8795d2",
    "flash_attn-2.8.3.tar.gz": "1e71dd64a9e0280e0447b8a0c2541bad4bf6ac65bdeaa2f90e51a9e57de0370d",
    "flash_attn-2.8.3.post2.tar.gz": "d0f9f0b08a986cdeadbffcf5ec8b3a8f514366c68ad1853d3ab061bc83cc340b",
}

# flash-attn's setup.py imports torch and packaging and `wheel.bdist_wheel`; it needs nothing
# else once the CUDA extension is skipped (psutil and ninja only serve the extension build).
# torch 2.13.0 is the CPU build that pip takes from this machine's disk (Python 3.11); any other
# torch, or uv, would download gigabytes. The rest are pinned so the built wheel is reproducible.
BUILDER_REQUIREMENTS = ("torch==2.13.0", "setuptools==84.2.1", "wheel==0.48.0", "packaging==26.4")

# Build the pure-Python part of flash-attn from its sdist: FORCE_BUILD stops setup.py from
# fetching a prebuilt CUDA wheel from GitHub, SKIP_CUDA_BUILD drops the extension.
# SOURCE_DATE_EPOCH makes the wheel byte-reproducible.
FA2_BUILD_ENV = {
    "FLASH_ATTENTION_FORCE_BUILD": "TRUE",
    "FLASH_ATTENTION_SKIP_CUDA_BUILD": "TRUE",
    "SOURCE_DATE_EPOCH": "315532800",
}

# --no-build-isolation: the build must see the builder's torch. --use-pep517: otherwise pip 23
# takes the legacy `setup.py` path, where setuptools honours setup_requires and fetches psutil
# and ninja from the network (they only serve the CUDA build).
_FA2_PIP_BUILD_ARGS = ("--no-build-isolation", "--use-pep517")

# Bodies for hand-built modules that misbehave on import, as real as it gets without a GPU.
SEGFAULT_ON_IMPORT = "import ctypes\nctypes.string_at(0)\n"
HANG_ON_IMPORT = "import time\nwhile True:\n    time.sleep(1)\n"

EnvKind = Literal["venv", "uv"]
Installer = Literal["pip", "uv"]

# Leaking these from the test process would make a target interpreter see the host's packages.
_LEAKY_VARS = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "VIRTUAL_ENV",
               "CONDA_PREFIX", "PIP_TARGET", "PIP_PREFIX", "PIP_USER", "PIP_PYTHON")


# --------------------------------------------------------------------------- cache


def cache_dir() -> Path:
    """The wheel/builder cache; refuses to live inside the repo (nothing third-party goes there)."""
    raw = os.environ.get("DFLASH_DOCTOR_TEST_CACHE") or "~/.cache/dflash-doctor-tests"
    path = Path(raw).expanduser().resolve()
    if path == REPO_ROOT or REPO_ROOT in path.parents:
        raise RuntimeError(f"DFLASH_DOCTOR_TEST_CACHE={path} is inside the repo {REPO_ROOT}")
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def _locked(name: str) -> Iterator[None]:
    """Serialise producers of one cached artifact across processes (pytest-xdist, parallel CI)."""
    lock_dir = cache_dir() / "locks"
    lock_dir.mkdir(exist_ok=True)
    with open(lock_dir / f"{name}.lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _check_known_hash(path: Path) -> None:
    expected = KNOWN_SHA256.get(path.name)
    if expected is not None and _sha256(path) != expected:
        raise RuntimeError(f"{path} does not have the sha256 PyPI published ({expected}); delete it")


def _clean_environ(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _LEAKY_VARS}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1", UV_PYTHON_DOWNLOADS="never",
               UV_NO_PROGRESS="1")
    env.update(extra or {})
    return env


def _run(argv: Sequence[str | Path], *, env: Mapping[str, str] | None = None, cwd: Path | None = None,
         timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run a tool; on failure raise with its output, so a broken setup is readable in pytest.

    It runs from the cache dir unless told otherwise: a build tool's stray files never land in the repo.
    """
    proc = subprocess.run([str(a) for a in argv], check=False, env=_clean_environ(env), cwd=cwd or cache_dir(),
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(command_failure(proc.args, proc.returncode, proc.stdout, proc.stderr))
    return proc


def command_failure(args: str | Sequence[object], returncode: int | None, stdout: str | bytes | None,
                    stderr: str | bytes | None, *, timeout: float | None = None, tail: int = 4000) -> str:
    """What a failed command said, for a test failure: the command, how it ended, the tail of its output.

    `returncode` None: it was stopped after `timeout` seconds. An output that is None was not captured: it went to
    the test's own stdout or stderr, which pytest shows as the test's captured output."""
    command = args if isinstance(args, str) else shlex.join(str(a) for a in args)
    if returncode is None:
        ended = f"timed out after {timeout} s"
    elif returncode < 0:
        ended = f"killed by signal {-returncode}"
    else:
        ended = f"exit status {returncode}"

    def last(output: str | bytes | None) -> str:
        if output is None:
            return "(not captured)"
        text = output.decode(errors="replace") if isinstance(output, bytes) else output
        return text if len(text) <= tail else f"[... {len(text) - tail} characters before]\n{text[-tail:]}"

    return f"command failed ({ended}): {command}\n--- stdout\n{last(stdout)}\n--- stderr\n{last(stderr)}"


def _host_pip() -> list[str]:
    """The test interpreter's pip, driving other interpreters through `--python` (pip >= 22.3)."""
    if Version(_dist_version("pip")) < Version("22.3"):
        raise RuntimeError("pip >= 22.3 is needed for `pip --python`; run: python -m pip install -U pip")
    return [sys.executable, "-m", "pip"]


def uv_bin() -> Path:
    """The uv executable of the `uv` PyPI package (a test dependency), else the one on PATH."""
    try:
        import uv  # type: ignore[import-untyped,unused-ignore]

        return Path(uv.find_uv_bin())
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found is None:
            raise RuntimeError("uv is not installed; run: python -m pip install uv") from None
        return Path(found)


# --------------------------------------------------------------------------- real wheels


def fa4_wheel(version: str = FA4_VERSION) -> Path:
    """The real flash-attn-4 wheel from PyPI (pure Python; installs only flash_attn/cute/)."""
    dest = cache_dir() / "pypi"
    with _locked(f"flash-attn-4-{version}"):
        found = sorted(dest.glob(f"flash_attn_4-{version}-*.whl"))
        if not found:
            with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
                _run([*_host_pip(), "download", f"flash-attn-4=={version}", "--no-deps",
                      "--only-binary", ":all:", "-d", tmp])
                dest.mkdir(exist_ok=True)
                for whl in Path(tmp).glob("*.whl"):
                    os.replace(whl, dest / whl.name)
            found = sorted(dest.glob(f"flash_attn_4-{version}-*.whl"))
        _check_known_hash(found[0])
        return found[0]


def fa2_builder_python() -> Path:
    """A cached venv with torch (CPU) able to run flash-attn's setup.py."""
    key = f"fa2-builder-py{sys.version_info[0]}{sys.version_info[1]}-" + "-".join(
        r.replace("==", "") for r in BUILDER_REQUIREMENTS)
    root = cache_dir() / "builders" / key
    python = root / "bin" / "python"
    marker = root / ".realenv-complete"
    with _locked(key):
        if marker.exists() and python.exists():
            return python
        shutil.rmtree(root, ignore_errors=True)  # a half-made builder from an interrupted run
        # No pip inside: the host pip drives it through --python, which saves an ensurepip.
        _run([sys.executable, "-m", "venv", "--without-pip", root])
        _run([*_host_pip(), "--python", python, "install", *BUILDER_REQUIREMENTS], timeout=1800)
        marker.write_text("\n".join(BUILDER_REQUIREMENTS) + "\n")
        return python


def fa2_sdist(version: str = FA2_VERSION) -> Path:
    """The real flash-attn sdist from PyPI (pip prepares its metadata, so setup.py needs torch)."""
    dest = cache_dir() / "pypi"
    name = f"flash_attn-{version}.tar.gz"
    with _locked(f"flash-attn-sdist-{version}"):
        if not (dest / name).exists():
            builder = fa2_builder_python()
            with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
                _run([*_host_pip(), "--python", builder, "download", f"flash-attn=={version}",
                      "--no-deps", "--no-binary", ":all:", *_FA2_PIP_BUILD_ARGS, "-d", tmp],
                     env=FA2_BUILD_ENV)
                dest.mkdir(exist_ok=True)
                os.replace(Path(tmp) / name, dest / name)
        _check_known_hash(dest / name)
        return dest / name


def fa2_wheel(version: str = FA2_VERSION) -> Path:
    """flash-attn built from its PyPI sdist without the CUDA extension: a pure py3-none-any wheel
    that installs flash_attn/ (with flash_attn/cute/) and a top-level hopper/, as the real one does."""
    dest = cache_dir() / "built"
    target = dest / f"flash_attn-{version}-py3-none-any.whl"
    with _locked(f"flash-attn-wheel-{version}"):
        if not target.exists():
            sdist = fa2_sdist(version)
            builder = fa2_builder_python()
            with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
                # --no-cache-dir: pip's wheel cache might hold a build made with other settings.
                _run([*_host_pip(), "--python", builder, "wheel", "--no-deps", *_FA2_PIP_BUILD_ARGS,
                      "--no-cache-dir", "-w", tmp, sdist], env=FA2_BUILD_ENV, timeout=1800)
                built = list(Path(tmp).glob("*.whl"))
                if [w.name for w in built] != [target.name]:
                    raise RuntimeError(f"expected {target.name}, the build produced {built}")
                _check_pure(built[0])
                dest.mkdir(exist_ok=True)
                os.replace(built[0], target)
        return target


def _check_pure(wheel: Path) -> None:
    """A wheel with a compiled file would mean the CUDA extension sneaked into the build."""
    names = wheel_files(wheel)
    compiled = [n for n in names if n.endswith((".so", ".pyd", ".dylib"))]
    wheel_meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/WHEEL")))
    if compiled or b"Root-Is-Purelib: true" not in wheel_meta:
        raise RuntimeError(f"{wheel.name} is not pure Python: {compiled or wheel_meta.decode()}")


def wheel_files(wheel: Path) -> list[str]:
    """Every path in a wheel archive (what an installer will put under site-packages)."""
    with zipfile.ZipFile(wheel) as zf:
        return [n for n in zf.namelist() if not n.endswith("/")]


def nvcc_builds(nvcc: str | Path, source: str, builds: Mapping[str, Sequence[str]],
                optional: frozenset[str] = frozenset(), *, outputs: Mapping[str, str] | None = None) -> dict[str, Path]:
    """`source` compiled by `nvcc` once per build's arguments, in parallel, made once per machine and nvcc in the
    cache (not once per xdist worker: a set took 20 s of two cores). Returns name -> the built file, `lib{name}.so`
    unless `outputs` names it; a build in `optional` that nvcc cannot make is left out. Tests read the files and
    write nothing there."""
    version = _run([nvcc, "--version"]).stdout
    key = "nvcc-" + hashlib.sha256(
        f"{nvcc}\n{version}\n{source}\n{sorted((n, list(a)) for n, a in builds.items())}\n{outputs}".encode()
    ).hexdigest()[:16]
    out = cache_dir() / "nvcc-builds" / key
    names = {name: (outputs or {}).get(name, f"lib{name}.so") for name in builds}
    with _locked(key):
        if not (out / "built.txt").exists():
            work = out.with_name(key + ".making")
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
            (work / "kernel.cu").write_text(source)
            procs = {name: subprocess.Popen([str(nvcc), *args, "-o", str(work / names[name]), str(work / "kernel.cu")],
                                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=work)
                     for name, args in builds.items()}
            built = []
            for name, proc in procs.items():
                output, _ = proc.communicate(timeout=600)
                if proc.returncode != 0 and name in optional:
                    continue
                if proc.returncode != 0:
                    raise RuntimeError(f"nvcc {name} failed:\n{output.decode(errors='replace')}")
                built.append(name)
            (work / "built.txt").write_text("\n".join(built) + "\n")
            shutil.rmtree(out, ignore_errors=True)
            os.replace(work, out)
    return {name: out / names[name] for name in (out / "built.txt").read_text().split()}


# --------------------------------------------------------------------------- hand-built wheels


def _escape(component: str) -> str:
    # Wheel filename / dist-info escaping from the binary distribution format spec.
    return re.sub(r"[-_.]+", "_", component).lower()


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(dest_dir: Path, name: str, version: str, files: Mapping[str, str | bytes],
                requires: Sequence[str] = (), entry_points: Mapping[str, Mapping[str, str]] | None = None,
                metadata_extra: str = "", tag: str = "py3-none-any") -> Path:
    """Write a spec-conforming wheel (METADATA, WHEEL, entry_points.txt, RECORD with hashes).

    `files` maps archive paths (e.g. "myplugin/__init__.py") to contents. Deterministic: the
    same arguments give a byte-identical wheel.
    """
    version = str(Version(version))  # normalised, as installers will report it
    dist_info = f"{_escape(name)}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    metadata += "".join(f"Requires-Dist: {req}\n" for req in requires)
    metadata += metadata_extra if not metadata_extra or metadata_extra.endswith("\n") else metadata_extra + "\n"
    purelib = tag.endswith("-none-any")
    generated: dict[str, str | bytes] = {
        f"{dist_info}/METADATA": metadata,
        f"{dist_info}/WHEEL": (f"Wheel-Version: 1.0\nGenerator: dflash-doctor-tests\n"
                               f"Root-Is-Purelib: {'true' if purelib else 'false'}\nTag: {tag}\n"),
    }
    if entry_points:
        generated[f"{dist_info}/entry_points.txt"] = "".join(
            f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n"
            for group, eps in entry_points.items())
    for path in files:
        if path.startswith("/") or ".." in path.split("/") or path in generated or path == f"{dist_info}/RECORD":
            raise ValueError(f"bad or reserved wheel path: {path!r}")
    # The spec asks for .dist-info last in the archive and RECORD as its last member.
    ordered = sorted(files.items()) + sorted(generated.items())
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")

    dest_dir.mkdir(parents=True, exist_ok=True)
    wheel_path = dest_dir / f"{_escape(name)}-{version.replace('-', '_')}-{tag}.whl"
    with zipfile.ZipFile(wheel_path, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, content in ordered:
            data = content.encode() if isinstance(content, str) else content
            _write_member(zf, path, data)
            writer.writerow([path, _record_hash(data), len(data)])
        writer.writerow([f"{dist_info}/RECORD", "", ""])
        _write_member(zf, f"{dist_info}/RECORD", record.getvalue().encode())
    return wheel_path


def _write_member(zf: zipfile.ZipFile, path: str, data: bytes) -> None:
    info = zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0))
    info.external_attr = 0o644 << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    zf.writestr(info, data)


# --------------------------------------------------------------------------- environments


@dataclass(frozen=True)
class Env:
    """A target environment, as `dflash-doctor --python` sees it."""

    root: Path
    python: Path
    site_packages: Path
    kind: EnvKind

    def run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run the env's interpreter for real, from its own root so no repo dir lands on sys.path."""
        return subprocess.run([str(self.python), *args], check=False, cwd=self.root, env=_clean_environ(),
                              capture_output=True, text=True, timeout=timeout)

    def run_code(self, code: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return self.run("-c", code, timeout=timeout)


@dataclass(frozen=True)
class Installed:
    """What an install did: the installer, how long it took, how many .pyc files it wrote."""

    installer: Installer
    argv: list[str]
    seconds: float
    pyc_written: int


def make_venv(parent: Path, kind: EnvKind = "venv", *, name: str = "env", with_pip: bool = False) -> Env:
    """A fresh, empty venv under `parent`.

    "venv": `python -m venv --without-pip` (stdlib, fast), or with `with_pip` the pip that the
    interpreter's ensurepip bundles (offline; a copy of a template made once, see `_copy_venv`), so that a
    remediation's `PY -m pip ...` runs as pasted.
    "uv": made by `uv venv`, so its pyvenv.cfg carries the `uv = ...` line. Both use the interpreter
    running the tests.
    """
    root = parent / name
    if kind == "venv" and with_pip:
        _copy_venv(_venv_with_pip_template(), root)
    elif kind == "venv":
        _run([sys.executable, "-m", "venv", "--without-pip", root])
    elif kind == "uv":
        _run([uv_bin(), "venv", "--quiet", "--no-config", "--python", sys.executable, root])
    else:
        raise ValueError(f"unknown venv kind {kind!r}")
    python = root / "bin" / "python"
    # Ask the interpreter rather than guess the layout (lib vs lib64, version dir).
    purelib = _run([python, "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    return Env(root=root, python=python, site_packages=Path(purelib.stdout.strip()), kind=kind)


def _venv_with_pip_template() -> Path:
    """`python -m venv ROOT` made once per interpreter and pip bundle, in the cache: its ensurepip (pip unpacked and
    compiled, 4 to 20 s on two busy cores) is paid once, not by every test that pastes a `-m pip` remediation."""
    import ensurepip

    bundled = ensurepip.version()
    tag = hashlib.sha256(f"{os.path.realpath(sys.executable)}\n{sys.version}\n{bundled}".encode()).hexdigest()[:12]
    key = f"venv-with-pip-py{sys.version_info[0]}{sys.version_info[1]}-pip{bundled}-{tag}"
    root = cache_dir() / "templates" / key
    marker = root.parent / f"{key}.complete"
    with _locked(key):
        if not (marker.exists() and (root / "bin" / "python").exists()):
            shutil.rmtree(root, ignore_errors=True)
            _run([sys.executable, "-m", "venv", root])
            marker.write_text(f"{sys.executable} -m venv {root}\n")
    return root


def _copy_venv(template: Path, root: Path) -> None:
    """Copy a venv to `root` and make it the one `python -m venv ROOT` makes there.

    What a venv holds of its own path: pyvenv.cfg's `command`, the activate scripts and the `#!` of pip's console
    scripts. Those are rewritten, and the RECORD rows of rewritten files get their new hash and size, as pip writes
    them for a script it makes there. Links stay links (bin/python, lib64); file times are kept, so the bytecode
    stays valid for its sources (the interpreter fixes a code object's file name when it loads it)."""
    shutil.copytree(template, root, symlinks=True)
    old, new = os.fsencode(template), os.fsencode(root)
    rewritten: dict[Path, bytes] = {}
    for path in [root / "pyvenv.cfg", *sorted((root / "bin").iterdir())]:
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if old in data:
            stat = path.stat()
            data = data.replace(old, new)
            path.write_bytes(data)
            os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
            rewritten[path] = data
    _fix_record_rows(root, rewritten)


def _fix_record_rows(root: Path, rewritten: Mapping[Path, bytes]) -> None:
    """Give the RECORD rows of files rewritten under `root` their new sha256 and size, times kept."""
    if not rewritten:
        return
    for record in root.glob("lib/python*/site-packages/*.dist-info/RECORD"):
        site = record.parent.parent
        rows = list(csv.reader(io.StringIO(record.read_text())))
        changed = False
        for row in rows:
            if len(row) != 3:
                continue
            data = rewritten.get(Path(os.path.normpath(site / row[0])))
            if data is not None:
                row[1], row[2] = _record_hash(data), str(len(data))
                changed = True
        if changed:
            stat = record.stat()
            text = io.StringIO()
            csv.writer(text, lineterminator="\n").writerows(rows)
            record.write_text(text.getvalue())
            os.utime(record, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def _count_pyc(path: Path) -> int:
    return sum(1 for _ in path.rglob("*.pyc"))


def install(env: Env, *wheels_or_specs: Path | str, installer: Installer = "pip",
            compile_bytecode: bool | None = None, extra_args: Sequence[str] = ()) -> Installed:
    """Install into `env` with a real installer, run from the host against the env's interpreter.

    Local wheel files install offline (`--no-index --no-deps`): what lands in site-packages is
    exactly those wheels. Requirement strings go to the index and pull their dependencies.
    `compile_bytecode=None` keeps the installer's default (pip compiles .pyc, uv does not).
    """
    items = [str(w) for w in wheels_or_specs]
    offline = all(Path(i).is_file() for i in items)
    if installer == "pip":
        argv = [*_host_pip(), "--python", str(env.python), "install", "--quiet"]
        if compile_bytecode is False:
            argv.append("--no-compile")
    elif installer == "uv":
        # --link-mode copy: uv's default hardlinks from its cache, and a test that edits an
        # installed file must not corrupt that cache.
        argv = [str(uv_bin()), "pip", "install", "--quiet", "--no-config", "--link-mode", "copy",
                "--python", str(env.python)]
        if compile_bytecode:
            argv.append("--compile-bytecode")
    else:
        raise ValueError(f"unknown installer {installer!r}")
    if offline:
        argv += ["--no-index", "--no-deps"]
    argv += [*extra_args, *items]
    before = _count_pyc(env.site_packages)
    start = time.perf_counter()
    # the kept change is a tab-separated manifest: an env whose path holds a tab or a line break (the hostile-name
    # tests) gets the real installer every time
    plain_root = not any(c in str(env.root) for c in "\t\n\r")
    if offline and plain_root and all(cache_dir() in Path(i).resolve().parents for i in items):
        _memoized_install(env, argv, installer)
    else:
        _run(argv, cwd=env.root)
    seconds = time.perf_counter() - start
    return Installed(installer, argv, seconds, _count_pyc(env.site_packages) - before)


# --------------------------------------------------------------------------- installs made once


_ROOT_MARK = b"\x00env-root\x00"
# A large file's digest in `_tree`, by the file as it stands (its root, device, inode, size, mtime and ctime: a
# write, chmod, utime or new link changes one of them): an env holding the 1.9 GB of flashinfer-cubin is read whole
# before each install into it otherwise. Only files of `_DIGEST_KEPT_FROM` bytes or more outside a dist-info, which
# no test edits: the file system's clock is coarse (a few ms), and a small file a test rewrites at once with as
# many bytes could keep its times. This process's own; filled by `_tree` and by `_apply_install`.
_DIGESTS: dict[tuple[bytes, int, int, int, int, int], str] = {}
_DIGEST_KEPT_FROM = 64 << 10


def _digest_key(own: bytes, rel: str, st: os.stat_result) -> tuple[bytes, int, int, int, int, int] | None:
    if st.st_size < _DIGEST_KEPT_FROM or ".dist-info/" in rel:
        return None
    return (own, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _tree(root: Path) -> dict[str, tuple[str, str]]:
    """Every entry under `root`: relative path -> (kind, the sha256 of its bytes with `root` written as a mark, or a
    link's target). What the env holds of its own path does not tell two envs in the same state apart."""
    own = os.fsencode(root)
    entries: dict[str, tuple[str, str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        base = Path(dirpath)
        for name in [*dirnames, *filenames]:
            path = base / name
            rel = path.relative_to(root).as_posix()
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                entries[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                entries[rel] = ("dir", "")
            else:
                key = _digest_key(own, rel, st)
                digest = _DIGESTS.get(key) if key is not None else None
                if digest is None:
                    digest = _file_digest(path, name, own)
                    if key is not None:
                        _DIGESTS[key] = digest
                entries[rel] = ("file", digest)
    return entries


def _file_digest(path: Path, name: str, own: bytes) -> str:
    # a .pyc: its code, not its header (the source's time), and the file name it was compiled under
    data = path.read_bytes()[16:] if name.endswith(".pyc") else path.read_bytes()
    data = data.replace(own, _ROOT_MARK)
    if name == "RECORD":  # the paths an installer acts on; the hashes of a script depend on the root
        data = re.sub(rb",[^,\n]*,[0-9]*$", b"", data, flags=re.MULTILINE)
    return hashlib.sha256(data).hexdigest()


def _memoized_install(env: Env, argv: Sequence[str], installer: Installer) -> None:
    """An install of cached wheels that is made once per (installer, its version, arguments, wheels, the env's state
    before): the first one runs the real installer, and what it changed under the env's root (files, with their
    bytes and times; directories; removals) is kept in the cache. A later install of the same wheels into an env in
    the same state is that change applied: what the installer writes holding the env's own path (a script's `#!`)
    is written with this env's path and its RECORD row with its new hash and size, as the installer writes them
    there. Every time is moved by the same whole seconds to now, so install order stays readable from the times
    and each `.pyc` (whose header holds its source's time) stays valid. `pip --python` starts two interpreters
    for each install, 1 to 10 s on two busy cores; the apply takes a fraction of that."""
    before = _tree(env.root)
    version = _dist_version("pip") if installer == "pip" else _dist_version("uv")
    words = [w.replace(str(env.python), "<python>") for w in argv[1:]]
    if installer == "pip":
        words = words[2:]  # `-m pip`: the host interpreter's own path is the one of the test run
    identity = [installer, version, sys.version, *words]
    for item in argv:
        if item.endswith(".whl"):
            stat = Path(item).stat()
            identity.append(f"{Path(item).name} {stat.st_size} {stat.st_mtime_ns}")
    identity.append(hashlib.sha256(repr(sorted(before.items())).encode()).hexdigest())
    key = hashlib.sha256("\n".join(identity).encode()).hexdigest()[:24]
    store = cache_dir() / "installs" / key
    if not (store / "manifest.txt").exists():
        _run(argv, cwd=env.root)
        _keep_install(env, before, store)
        return
    _apply_install(env, store)


def _keep_install(env: Env, before: dict[str, tuple[str, str]], store: Path) -> None:
    after = _tree(env.root)
    removed = sorted(rel for rel in before if rel not in after or after[rel][0] != before[rel][0])
    changed = sorted(rel for rel, entry in after.items() if before.get(rel) != entry)
    store.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="making-", dir=store.parent))
    try:
        lines, digests = [f"root\t{env.root}"], []
        lines += [f"remove\t{rel}" for rel in removed]
        for rel in changed:
            kind, what = after[rel]
            source = env.root / rel
            if kind == "dir":
                lines.append(f"dir\t{rel}")
            elif kind == "link":
                lines.append(f"link\t{rel}\t{what}")
            else:
                info = source.stat()
                kept = work / "files" / rel
                kept.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, kept)
                lines.append(f"file\t{rel}\t{info.st_mtime_ns}\t{info.st_mode & 0o7777:o}")
                digests.append(f"{rel}\t{what}")
        (work / "digests.txt").write_text("\n".join(digests) + "\n")
        (work / "manifest.txt").write_text("\n".join(lines) + "\n")
        try:
            os.rename(work, store)  # atomic; a concurrent worker that kept the same install first wins
        except OSError:
            pass
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _apply_install(env: Env, store: Path) -> None:
    lines = [line.split("\t") for line in (store / "manifest.txt").read_text().splitlines()]
    old, new = os.fsencode(lines[0][1]), os.fsencode(env.root)
    files = [line for line in lines if line[0] == "file"]
    # Whole seconds, so .pyc headers shift exactly; the latest file (the RECORD, written last) lands in the
    # coming second, and the apply ends only once that second has begun: an install after this one, replayed or
    # real, is never older than it (the doctor reads the order of installs from the RECORDs' times).
    latest = max((int(line[2]) for line in files), default=time.time_ns())
    shift = max(0, -(-(time.time_ns() - latest) // 1_000_000_000))
    rewritten: dict[Path, bytes] = {}
    for line in lines[1:]:
        target = env.root / line[1]
        if line[0] == "remove":
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            elif target.exists() or target.is_symlink():
                target.unlink()
        elif line[0] == "dir":
            target.mkdir(parents=True, exist_ok=True)
        elif line[0] == "link":
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.exists() or target.is_symlink():
                target.unlink()
            os.symlink(line[2], target)
    own = os.fsencode(env.root)
    digests: dict[str, str] = {}
    with contextlib.suppress(OSError, ValueError):  # kept beside the manifest from 2026-12-06 on
        digests = dict(line.split("\t", 1) for line in (store / "digests.txt").read_text().splitlines() if line)
    for _, rel, mtime, mode in files:
        target = env.root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        data = (store / "files" / rel).read_bytes()
        if rel.endswith(".pyc"):
            if len(data) >= 16 and data[4:8] == b"\0\0\0\0":  # timestamp-based: the source's time, in seconds
                stamp = (int.from_bytes(data[8:12], "little") + shift) & 0xFFFFFFFF
                data = data[:8] + stamp.to_bytes(4, "little") + data[12:]
        elif old in data:
            data = data.replace(old, new)
            rewritten[target] = data
        if target.is_symlink():
            target.unlink()
        target.write_bytes(data)
        os.chmod(target, int(mode, 8))
        stamp_ns = int(mtime) + shift * 1_000_000_000
        os.utime(target, ns=(stamp_ns, stamp_ns))
        _know_digest(own, rel, target, digests.get(rel))
    _fix_record_rows(env.root, rewritten)
    wait_ns = latest + shift * 1_000_000_000 - time.time_ns()
    if wait_ns > 0:
        time.sleep(wait_ns / 1e9 + 0.001)


def _know_digest(own: bytes, rel: str, target: Path, kept: str | None) -> None:
    """`target`'s digest in `_tree` is the one the cached install kept for it (digests.txt): its bytes differ only in
    the root they name, which the digest reads as a mark. Not a `.pyc`'s: the apply moves its header's time and
    leaves the file name it was compiled under (the keeping env's root) as it was."""
    if not kept or rel.endswith(".pyc"):
        return
    key = _digest_key(own, rel, target.lstat())
    if key is not None:
        _DIGESTS[key] = kept


def uninstall(env: Env, *names: str, installer: Installer = "pip") -> None:
    """Uninstall distributions with a real installer (which deletes what their RECORD lists)."""
    if installer == "pip":
        argv = [*_host_pip(), "--python", str(env.python), "uninstall", "--yes", "--quiet", *names]
    elif installer == "uv":
        argv = [str(uv_bin()), "pip", "uninstall", "--quiet", "--no-config", "--python", str(env.python),
                *names]
    else:
        raise ValueError(f"unknown installer {installer!r}")
    _run(argv, cwd=env.root)


def dist_info(env: Env, name: str) -> Path:
    """The installed `.dist-info` directory of distribution `name` in `env`."""
    found = [p for p in env.site_packages.glob("*.dist-info")
             if _escape(p.name[: -len(".dist-info")].rsplit("-", 1)[0]) == _escape(name)]
    if len(found) != 1:
        raise LookupError(f"{name}: expected one dist-info in {env.site_packages}, found {found}")
    return found[0]


# --------------------------------------------------------------------------- proof of no writes


def dir_digest(path: Path) -> dict[str, str]:
    """Relative path -> sha256 of every file under `path`.

    Directories map to "<dir>" and symlinks to "<symlink> TARGET" (never followed), so a new
    empty __pycache__ or a swapped link shows up as a difference too.
    """
    digest: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(path):
        base = Path(dirpath)
        for d in dirnames:
            p = base / d
            rel = p.relative_to(path).as_posix()
            digest[rel] = f"<symlink> {os.readlink(p)}" if p.is_symlink() else "<dir>"
        for f in filenames:
            p = base / f
            rel = p.relative_to(path).as_posix()
            digest[rel] = f"<symlink> {os.readlink(p)}" if p.is_symlink() else _sha256(p)
    return dict(sorted(digest.items()))


if __name__ == "__main__":
    # Warm the cache before a test run (CI): `python tests/realenv.py`.
    for fn in (fa4_wheel, fa2_wheel):
        t0 = time.perf_counter()
        print(f"{fn.__name__}: {fn()} ({time.perf_counter() - t0:.1f} s)", flush=True)
