"""What a remediation command would really do, asked of the target's own installer without doing it.

Facts only (the judgement, `resolves | would-break | needs-build | fails | not-checked`, is
`dflash_doctor.fix.verify`): for each command of the shapes `checks.remedy` writes,

- `PY -m pip install ...`: `PY -m pip install --dry-run --report FILE ...` (pip >= 22.2, the release that
  added `--report`; an older pip, or none, is "not asked" and says why), run in the target interpreter;
- `uv pip install --python PY ...`: `uv pip install --dry-run --python PY ...`, first with `--no-build`
  (whether wheels alone satisfy it), then without when that fails for want of a wheel;
- `PY -m pip uninstall -y NAMES` / `uv pip uninstall --python PY NAMES`: simulated from each
  distribution's RECORD, plus what stays behind in its top-level directories (files no remaining
  distribution lists, `__pycache__` bytecode, directories that empty), and what a following cleanup
  (`find DIR -depth ... -delete`, `checks.remedy.remove_leftovers`) removes of that;
- `mv X X.disabled`: whether X exists and X.disabled does not.

Each installer call is bounded by `timeout_s` (its process group is killed past it); an index that does
not answer is "not asked: why". Nothing is installed: `--dry-run` resolves and downloads metadata (into
the installer's own cache, outside the environment), and the simulation only reads files.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import field
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from dflash_doctor.documents.jsondoc import parse_json
from dflash_doctor.facts.fix import build_env  # what a source build would find, should one be needed
from dflash_doctor.facts.fix.dryrun_shapes import DryRuns
from dflash_doctor.facts.python.envfacts import canonical, release
from dflash_doctor.facts.python.environment_shapes import Distributions, Target
from dflash_doctor.facts.safefile import environment_roots, under
from dflash_doctor.knowledge.installers import BYTECODE_GLOB, PIP_DRY_RUN_REPORT_MIN
from dflash_doctor.process import kill_group, safe_path_environ
from dflash_doctor.shape import frozen_dataclass

__all__ = ["NOT_AN_INSTALLER_COMMAND", "Segment", "collect", "failure_reason", "parse_command", "pip_report_installs", "read_record_paths"]

MAX_WORKERS = 4
MAX_FILES_LISTED = 20
MAX_WALK = 50_000  # files walked under one top-level directory: bounded, whatever is there
MAX_RECORD_BYTES = 64 << 20
STDERR_KEPT = 2000

# What an installer prints when it could not reach the index (pip's vendored urllib3/requests, uv's reqwest).
_NETWORK_MARKERS = (
    "NewConnectionError", "Failed to establish a new connection", "Temporary failure in name resolution",
    "Name or service not known", "Max retries exceeded", "ConnectTimeout", "Read timed out", "ProxyError",
    "Network is unreachable", "network was disabled", "error sending request", "dns error",
    "Could not connect", "Failed to fetch",
)
_BUILD_NEEDED = re.compile(r"--no-build|no-build|building source distributions is disabled|"
                           r"only source distributions are available", re.IGNORECASE)


@frozen_dataclass(frozen=True)
class Segment:
    """One `&&`-joined part of a remediation command, in a shape the doctor knows."""

    kind: str  # install | uninstall | cleanup | move
    tool: str  # pip | uv | shell
    words: tuple[str, ...]
    python: str = ""
    args: tuple[str, ...] = ()  # after `install` / `uninstall`, without `--python PY`
    env: Mapping[str, str] = field(default_factory=dict)
    paths: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a for a in self.args if not a.startswith("-"))


_ENV_WORD = re.compile(r"^[A-Z_][A-Z0-9_]*=")


def _tokens(command: str) -> list[str] | None:
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:
        return None


def _installer_segment(words: list[str]) -> Segment | None:
    env: dict[str, str] = {}
    while words and _ENV_WORD.match(words[0]):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    if len(words) >= 4 and words[1:3] == ["-m", "pip"] and words[3] in ("install", "uninstall"):
        return Segment(words[3], "pip", tuple(words), python=words[0], args=tuple(words[4:]), env=env)
    if len(words) >= 3 and words[:2] == ["uv", "pip"] and words[2] in ("install", "uninstall"):
        rest = words[3:]
        if "--python" not in rest or rest.index("--python") + 1 >= len(rest):
            return None
        i = rest.index("--python")
        python = rest[i + 1]
        return Segment(words[2], "uv", tuple(words), python=python, args=tuple(rest[:i] + rest[i + 2:]), env=env)
    return None


# No command the doctor runs is longer; a longer one (a serve command with 50,000 keys) is not read word by word.
MAX_COMMAND_CHARS = 65536


NOT_AN_INSTALLER_COMMAND = ("not an installer command: only pip and uv installs and uninstalls, leftover cleanups "
                            "and moves (the commands `dflash-doctor fix` runs) are asked about")
"""Why a remediation's command was not asked about: `parse_command` reads it as none of those."""


def parse_command(command: str) -> list[Segment] | None:
    """The segments of a remediation command, or None when any part is not a shape the doctor knows
    (then it is neither verified nor ever run by `fix`)."""
    tokens = _tokens(command) if len(command) <= MAX_COMMAND_CHARS else None
    if not tokens:
        return None
    parts: list[list[str]] = [[]]
    for token in tokens:
        if token == "&&":
            parts.append([])
        else:
            parts[-1].append(token)
    segments: list[Segment] = []
    for words in parts:
        if not words:
            return None
        if words[:3] == ["if", "[", "-d"] and len(words) >= 9:
            # if [ -d DIR ] ; then find DIR -depth ( -type f -path GLOB -o -type d -empty ) -delete ; fi
            directory = words[3]
            expected = ["if", "[", "-d", directory, "]", ";", "then", "find", directory, "-depth", "(", "-type", "f",
                        "-path", BYTECODE_GLOB.value, "-o", "-type", "d", "-empty", ")", "-delete", ";", "fi"]
            if words != expected:
                return None
            segments.append(Segment("cleanup", "shell", tuple(words), paths=(directory,)))
        elif words[0] == "mv" and len(words) == 3 and words[2] == words[1] + ".disabled":
            segments.append(Segment("move", "shell", tuple(words), paths=(words[1], words[2])))
        else:
            segment = _installer_segment(list(words))
            if segment is None:
                return None
            segments.append(segment)
    return segments


# --------------------------------------------------------------------------- running an installer


_LIVE: set[subprocess.Popen[bytes]] = set()  # installer runs under way, for collect() to stop on Ctrl-C
_LIVE_LOCK = threading.Lock()
_STOPPED = threading.Event()  # set on Ctrl-C: a worker that had not started its installer yet does not start it


def _kill_live() -> None:
    with _LIVE_LOCK:
        _STOPPED.set()
        live = list(_LIVE)
    for proc in live:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill_group(proc)


def _run(argv: Sequence[str], env: Mapping[str, str], timeout_s: float, cwd: str) -> dict[str, Any]:
    started = time.monotonic()
    # Each installer run gets a temporary directory of its own (TMPDIR), removed on every path: pip unpacks the
    # wheels a dry run downloads there (torch's is ~500 MB), and a pip killed at the timeout or by Ctrl-C never
    # removes its own.
    tmp = tempfile.mkdtemp(prefix="dflash-doctor-installer-")
    try:
        full_env = {**safe_path_environ({**os.environ, **env}), "PYTHONDONTWRITEBYTECODE": "1", "PIP_NO_INPUT": "1",
                    "PIP_DISABLE_PIP_VERSION_CHECK": "1", "UV_NO_PROGRESS": "1", "TMPDIR": tmp, "TEMP": tmp, "TMP": tmp}
        with _LIVE_LOCK:  # started and registered at once, so that _kill_live() misses none
            if _STOPPED.is_set():
                return {"returncode": None, "error": "interrupted", "stdout": "", "stderr": "", "timed_out": False,
                        "duration_s": 0.0}
            try:
                proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        stdin=subprocess.DEVNULL, env=full_env, cwd=cwd, start_new_session=True)
            except OSError as exc:
                return {"returncode": None, "error": f"{type(exc).__name__}: {exc.strerror or exc}", "stdout": "",
                        "stderr": "", "timed_out": False, "duration_s": 0.0}
            _LIVE.add(proc)
        try:
            out, err = proc.communicate(timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):  # not ours to kill: communicate() waits
                kill_group(proc)
            out, err = proc.communicate()
            timed_out = True
        except BaseException:  # Ctrl-C: the installer's whole group goes, then its directory
            with contextlib.suppress(ProcessLookupError, PermissionError):
                kill_group(proc)
            proc.wait()
            raise
        finally:
            with _LIVE_LOCK:
                _LIVE.discard(proc)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"returncode": proc.returncode, "error": None, "stdout": out.decode(errors="replace"),
            "stderr": err.decode(errors="replace"), "timed_out": timed_out,
            "duration_s": round(time.monotonic() - started, 3)}


def _offline(text: str) -> bool:
    return any(marker in text for marker in _NETWORK_MARKERS)


def _tail(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if not line.startswith("WARNING: Location ")]
    return "\n".join(lines)[-STDERR_KEPT:]


_EXCEPTION_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*(Error|Exception)): (.+)$")


def failure_reason(text: str) -> str:
    """The installer's own reason: pip's last `ERROR: ...` line (no version matches); else the exception a
    build step raised, after pip's error code (`metadata-generation-failed: OSError: CUDA_HOME ...`); uv's
    `error: ...` and its `cause:`."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    pip_errors = [line for line in lines if line.startswith("ERROR: ")]
    if pip_errors:
        return pip_errors[-1][:500]
    raised = [line.strip() for line in text.splitlines() if _EXCEPTION_LINE.match(line)]
    code = next((line for line in reversed(lines) if line.startswith("error: ")), "")
    if raised:
        return ((code.removeprefix("error: ") + ": ") if code else "") + raised[-1][:400]
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].lower().startswith("error:") or lines[i].startswith("ERROR:") or lines[i].startswith("×"):
            picked = lines[i]
            if i + 1 < len(lines) and lines[i + 1].startswith("cause:"):
                picked += " " + lines[i + 1]
            return picked[:500]
    return lines[-1][:500] if lines else ""


def _source_kind(download_info: Mapping[str, Any]) -> str:
    url = str(download_info.get("url") or "")
    if "dir_info" in download_info:
        return "directory"
    if "vcs_info" in download_info:
        return "vcs"
    name = url.rsplit("/", 1)[-1].split("#", 1)[0]
    if name.endswith(".whl"):
        return "wheel"
    if name.endswith((".tar.gz", ".zip", ".tar.bz2", ".tgz", ".tar")):
        return "sdist"
    return "unknown"


def _pip_version(python: str, timeout_s: float, cwd: str) -> tuple[str | None, str]:
    ran = _run([python, "-m", "pip", "--version"], {}, timeout_s, cwd)
    if ran["error"] or ran["timed_out"] or ran["returncode"] != 0:
        why = ran["error"] or ("timed out" if ran["timed_out"] else failure_reason(ran["stderr"]) or "failed")
        return None, f"`{python} -m pip --version`: {why}"
    match = re.match(r"pip (\S+)", ran["stdout"])
    return (match.group(1) if match else None), ran["stdout"].strip()


class _PipVersions:
    """`PY -m pip --version` asked once per interpreter in one collection, by whichever worker asks first (the
    others wait for its answer): every pip command of a plan runs the same pip, and each ask is an interpreter
    that imports pip (~0.3 s of CPU). A new collection asks again: a fix applied since may have changed pip."""

    def __init__(self, timeout_s: float, cwd: str) -> None:
        self._timeout_s = timeout_s
        self._cwd = cwd
        self._lock = threading.Lock()
        self._asked: dict[str, tuple[threading.Lock, list[tuple[str | None, str]]]] = {}

    def __call__(self, python: str) -> tuple[str | None, str]:
        with self._lock:
            lock, answer = self._asked.setdefault(python, (threading.Lock(), []))
        with lock:
            if answer:
                return answer[0]
            version, said = _pip_version(python, self._timeout_s, self._cwd)
            if version is not None:  # a pip that did not answer (under load, past the timeout) is asked again
                answer.append((version, said))
            return version, said


def _pip_timeout(timeout_s: float) -> str:
    """pip's --timeout (seconds per socket operation): within the run's bound, 1 to 15 s."""
    return f"{max(1.0, min(timeout_s / 2, 15.0)):g}"


def _pip_install(segment: Segment, timeout_s: float, cwd: str,
                 pip_version: Callable[[str], tuple[str | None, str]]) -> dict[str, Any]:
    facts: dict[str, Any] = {"tool": "pip"}
    version, said = pip_version(segment.python)
    facts["installer_version"] = version
    if version is None:
        return {**facts, "status": "not-checked", "reason": f"the target has no working pip ({said})"}
    if (release(version) or ()) < (release(PIP_DRY_RUN_REPORT_MIN.value) or ()):
        return {**facts, "status": "not-checked",
                "reason": f"pip {version} has no `install --dry-run --report` (pip >= {PIP_DRY_RUN_REPORT_MIN.value})"}
    with tempfile.TemporaryDirectory(prefix="dflash-doctor-dry-run-") as tmp:
        report_path, log_path = os.path.join(tmp, "report.json"), os.path.join(tmp, "pip.log")
        # Ask the index once (no retries), and give up on a silent one well within the run's bound. pip's --log
        # (last, so that it is this one) keeps its debug lines, where a connection error to the index is said
        # (`_pip_unreachable`).
        argv = [segment.python, "-m", "pip", "install", "--dry-run", "--report", report_path, "--quiet",
                "--retries", "0", "--timeout", _pip_timeout(timeout_s), *segment.args, "--log", log_path]
        ran = _run(argv, segment.env, timeout_s, cwd)
        if _BUILD_OUTPUT_HIDDEN in ran["stderr"]:
            # With a log, pip counts a build's own output as shown and leaves it out of stderr, where its error
            # (CUDA_HOME not set, a module missing) is read: that dry run again, without the log.
            argv = argv[:-2]
            ran = _run(argv, segment.env, timeout_s, cwd)
        report: Any = None
        with contextlib.suppress(OSError, ValueError), open(report_path, encoding="utf-8") as fh:
            report = parse_json(fh.read(MAX_RECORD_BYTES))
        unreachable = ""
        if ran["returncode"] != 0 and not ran["timed_out"] and not ran["error"]:
            unreachable = _pip_unreachable(ran["stderr"], log_path)
    facts.update(argv=argv, returncode=ran["returncode"], duration_s=ran["duration_s"], stderr=_tail(ran["stderr"]))
    if ran["timed_out"]:
        return {**facts, "status": "not-checked", "reason": f"pip did not answer within {timeout_s:g} s (--timeout)"}
    if ran["error"]:
        return {**facts, "status": "not-checked", "reason": ran["error"]}
    if ran["returncode"] != 0 or not isinstance(report, dict):
        if _offline(ran["stderr"]):
            return {**facts, "status": "not-checked",
                    "reason": "the package index did not answer (offline?): " + failure_reason(ran["stderr"])}
        if unreachable:
            return {**facts, "status": "not-checked", "reason": f"the package index did not answer (offline?): {unreachable}"}
        failed = {**facts, "status": "failed", "reason": failure_reason(ran["stderr"]) or f"pip exited {ran['returncode']}"}
        unavailable = _unavailable(segment, ran["stderr"], timeout_s, cwd)
        return {**failed, "unavailable": unavailable} if unavailable else failed
    return {**facts, "status": "resolved", "install": pip_report_installs(report), "remove": []}


_NO_MATCH = re.compile(r"No matching distribution found for (\S+)")


def _unavailable(segment: Segment, stderr: str, timeout_s: float, cwd: str) -> dict[str, Any] | None:
    """The requirement no configured index has (pip's "No matching distribution found for X"), and which of the
    distributions the command asks for requires it: read from their own Requires-Dist, in pip's report of the
    asked-for distributions alone (`--no-deps`: their metadata, nothing else resolved). Any pin of any release, not a
    list of known ones."""

    match = _NO_MATCH.search(stderr)
    if match is None:
        return None
    found: dict[str, Any] = {"requirement": match.group(1), "required_by": None, "requires_dist": None}
    try:
        wanted = canonical(Requirement(match.group(1)).name)
    except InvalidRequirement:
        return found
    asked = set()
    for name in segment.names:  # an option's value (an index URL) is no requirement
        with contextlib.suppress(InvalidRequirement):
            asked.add(canonical(Requirement(name).name))
    if wanted in asked:
        return found  # the command asks for it itself
    with tempfile.TemporaryDirectory(prefix="dflash-doctor-dry-run-") as tmp:
        report_path = os.path.join(tmp, "report.json")
        argv = [segment.python, "-m", "pip", "install", "--dry-run", "--no-deps", "--report", report_path, "--quiet",
                "--retries", "0", "--timeout", _pip_timeout(timeout_s), *segment.args]
        _run(argv, segment.env, timeout_s, cwd)
        report: Any = None
        with contextlib.suppress(OSError, ValueError), open(report_path, encoding="utf-8") as fh:
            report = parse_json(fh.read(MAX_RECORD_BYTES))
    for item in (report.get("install") or ()) if isinstance(report, dict) else ():
        meta = item.get("metadata") if isinstance(item, dict) else None
        if not isinstance(meta, dict):
            continue
        for line in meta.get("requires_dist") or ():
            try:
                theirs = Requirement(str(line))
            except InvalidRequirement:
                continue
            if canonical(theirs.name) == wanted:
                return {**found, "required_by": f"{meta.get('name')} {meta.get('version')}", "requires_dist": str(line)}
    return found


# A line of pip's log (after its time stamp and any indent) or of its -vv output.
_PIP_FETCH_FAILED = re.compile(r"^(?:\S+ )?[ \t]*(Could not fetch URL .*: (connection error|.*timed out|.*Max "
                               r"retries exceeded).*)$", re.MULTILINE)
# What pip says in place of a build's output it counts as shown (pip >= 22.0's subprocess errors).
_BUILD_OUTPUT_HIDDEN = "See above for output."
MAX_PIP_LOG_BYTES = 4 << 20  # of pip's log read for it: the index is asked before anything is resolved


def _pip_unreachable(stderr: str, log_path: str) -> str:
    """pip says "No matching distribution" alike for a name no index has and for an index it could not reach
    (with --retries 0 it says the connection error only at debug level): its log of the same run tells them
    apart."""
    if "No matching distribution found" not in stderr:
        return ""
    try:
        with open(log_path, "rb") as fh:
            text = fh.read(MAX_PIP_LOG_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""
    match = _PIP_FETCH_FAILED.search(text)
    return match.group(1)[:400] if match else ""


def pip_report_installs(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What a pip installation report (`pip install --dry-run --report`) would install: name, version, whether
    from a wheel or a source build, and whether it was asked for."""
    installs = []
    for item in report.get("install") or ():
        if not isinstance(item, dict):
            continue
        meta = item.get("metadata") or {}
        installs.append({"name": str(meta.get("name", "")), "version": str(meta.get("version", "")),
                         "source": _source_kind(item.get("download_info") or {}),
                         "requested": bool(item.get("requested"))})
    return installs


_UV_LINE = re.compile(r"^\s*([+-])\s+([A-Za-z0-9._-]+)==(\S+)")


def _uv_install(segment: Segment, timeout_s: float, cwd: str) -> dict[str, Any]:
    uv = shutil.which("uv", path=os.environ.get("PATH"))
    facts: dict[str, Any] = {"tool": "uv"}
    if uv is None:
        return {**facts, "status": "not-checked", "reason": "uv is not on PATH"}
    base = [uv, "pip", "install", "--dry-run", "--python", segment.python]
    # Ask the index once, as pip is asked (--retries 0): uv's retries with backoff cost seconds offline.
    env = {"UV_HTTP_RETRIES": os.environ.get("UV_HTTP_RETRIES", "0"), **segment.env}
    ran = _run([*base, "--no-build", *segment.args], env, timeout_s, cwd)
    source = "wheel"
    if not ran["timed_out"] and not ran["error"] and ran["returncode"] != 0 and not _offline(ran["stderr"]) \
            and _BUILD_NEEDED.search(ran["stderr"]):
        source = "sdist"
        ran = _run([*base, *segment.args], env, timeout_s, cwd)
    facts.update(argv=[*base, *segment.args], returncode=ran["returncode"], duration_s=ran["duration_s"],
                 stderr=_tail(ran["stderr"]))
    if ran["timed_out"]:
        return {**facts, "status": "not-checked", "reason": f"uv did not answer within {timeout_s:g} s (--timeout)"}
    if ran["error"]:
        return {**facts, "status": "not-checked", "reason": ran["error"]}
    if ran["returncode"] != 0:
        if _offline(ran["stderr"]):
            return {**facts, "status": "not-checked",
                    "reason": "the package index did not answer (offline?): " + failure_reason(ran["stderr"])}
        failed = {**facts, "status": "failed", "reason": failure_reason(ran["stderr"]) or f"uv exited {ran['returncode']}"}
        unavailable = _uv_unavailable(segment, ran["stderr"])
        return {**failed, "unavailable": unavailable} if unavailable else failed
    installs, removes = [], []
    for line in (ran["stderr"] + "\n" + ran["stdout"]).splitlines():
        match = _UV_LINE.match(line)
        if match:
            entry = {"name": match.group(2), "version": match.group(3)}
            if match.group(1) == "+":
                installs.append({**entry, "source": source, "requested": True})
            else:
                removes.append(entry)
    # uv's dry run does not say which package needs the build: each new one is marked by what --no-build said.
    return {**facts, "status": "resolved", "install": installs, "remove": removes}


# uv's resolver says who requires what no index has: "Because there is no version of flashinfer-python==0.7.3 and
# vllm==0.34.0 depends on flashinfer-python==0.7.3, ..."; "Because X was not found in the provided package locations
# and all versions of vllm depend on X==1.0, ..." (uv 0.13.9).
_UV_NO_VERSION = re.compile(r"[Bb]ecause (?:there is no version of \S+|\S+ was not found in [^,]+?) and "
                            r"(?:all versions of )?(\S+?) depends? on ([^,\s]+)")


def _uv_unavailable(segment: Segment, stderr: str) -> dict[str, Any] | None:
    """What uv's resolver says no configured index has, and which of the distributions the command asks for requires
    it (uv names the requirer itself; its version is the command's exact pin where uv says "all versions of")."""
    match = _UV_NO_VERSION.search(" ".join(stderr.split()))
    if match is None:
        return None
    requirer, requirement = match.group(1), match.group(2)
    name, spec = re.match(r"([A-Za-z0-9._-]+)(.*)", requirer).groups()  # type: ignore[union-attr]
    pinned = [n.split("==", 1)[1] for n in segment.names
              if "==" in n and canonical(n.split("==", 1)[0]) == canonical(name)]
    version = spec[2:] if spec.startswith("==") else pinned[0] if pinned else spec  # "vllm>=0.34.0": the command's pin
    return {"requirement": requirement, "required_by": f"{name} {version}".strip(), "requires_dist": None}


# --------------------------------------------------------------------------- simulating an uninstall



def read_record_paths(dist_info: str, location: str) -> tuple[list[str], str | None]:
    """Absolute, normalised paths a distribution's RECORD lists (bounded read; only a regular file)."""
    record = os.path.join(dist_info, "RECORD")
    try:
        if not os.path.isfile(record) or os.path.islink(record):
            return [], f"{record}: not a regular file"
        with open(record, encoding="utf-8", errors="replace") as fh:
            text = fh.read(MAX_RECORD_BYTES)
    except OSError as exc:
        return [], f"{record}: {exc.strerror or exc}"
    paths = []
    for line in text.splitlines():
        first = line.split(",", 1)[0].strip().strip('"')
        if first:
            paths.append(os.path.normpath(os.path.join(location, first)))
    return paths, None


def _walk(directory: str) -> tuple[list[str], list[str]]:
    """Files and directories under `directory` (not following links), bounded."""
    files: list[str] = []
    dirs: list[str] = []
    for dirpath, dirnames, filenames in os.walk(directory):
        for d in dirnames:
            full = os.path.join(dirpath, d)
            (files if os.path.islink(full) else dirs).append(full)
        files.extend(os.path.join(dirpath, f) for f in filenames)
        if len(files) > MAX_WALK:
            break
    return files, dirs


def _is_bytecode(path: str) -> bool:
    return path.endswith(".pyc") and os.path.basename(os.path.dirname(path)) == "__pycache__"


def _cached(path: str, cache_tag: str) -> str:
    """importlib.util.cache_from_source for another interpreter's cache tag ("cpython-311")."""
    head, name = os.path.split(path)
    return os.path.join(head, "__pycache__", f"{name[:-3]}.{cache_tag}.pyc")


def _simulate_uninstall(segments: Sequence[Segment], index: int, installed: Sequence[Mapping[str, Any]],
                        roots: Sequence[str], cache_tag: str = "") -> dict[str, Any]:
    segment = segments[index]
    by_name = {canonical(str(d.get("name", ""))): d for d in installed}
    removes, missing, removed_paths = [], [], set()
    removed_names = {canonical(n) for n in segment.names}
    top_dirs: set[str] = set()
    for name in segment.names:
        dist = by_name.get(canonical(name))
        if dist is None or not dist.get("dist_info"):
            missing.append(name)
            continue
        location = str(dist.get("location") or os.path.dirname(str(dist["dist_info"])))
        paths, error = read_record_paths(str(dist["dist_info"]), location)
        if error:
            return {"tool": segment.tool, "status": "failed", "reason": f"cannot read what {name} installed: {error}"}
        paths = [p for p in paths if under(p, roots)]
        removed_paths.update(paths)
        # pip also removes each .py's bytecode for the interpreter it runs in (knowledge.installers)
        removed_paths.update(_cached(p, cache_tag) for p in paths if p.endswith(".py") and cache_tag)
        removed_paths.add(os.path.normpath(str(dist["dist_info"])))
        removes.append({"name": str(dist.get("name")), "version": str(dist.get("version")), "files": len(paths)})
        for path in paths:
            rel = os.path.relpath(path, location)
            top = rel.split(os.sep, 1)[0]
            if os.sep in rel and not top.endswith((".dist-info", ".egg-info", ".data")) and top != "..":
                top_dirs.add(os.path.join(location, top))
    # The files of every distribution that stays, under those directories.
    kept_owned: set[str] = set()
    for dist in installed:
        if canonical(str(dist.get("name", ""))) in removed_names or not dist.get("dist_info"):
            continue
        if not set(dist.get("top_levels") or ()) & {os.path.basename(t) for t in top_dirs}:
            continue
        location = str(dist.get("location") or "")
        paths, _ = read_record_paths(str(dist["dist_info"]), location)
        kept_owned.update(paths)
    cleaned = {p for s in segments[index + 1:] if s.kind == "cleanup" for p in s.paths}
    left: list[dict[str, Any]] = []
    for top in sorted(top_dirs):
        if not os.path.isdir(top) or os.path.islink(top):
            continue
        files, dirs = _walk(top)
        staying = [f for f in files if os.path.normpath(f) not in removed_paths]
        # pip removes a directory whole when it holds a file the RECORD lists directly and every file under it
        # goes (knowledge.installers.PIP_UNINSTALL_LEAVES); uv, each directory it empties
        whole = not staying and any(os.path.dirname(p) == top for p in removed_paths)
        owned = [f for f in staying if os.path.normpath(f) in kept_owned]
        bytecode = [f for f in staying if f not in kept_owned and _is_bytecode(f)]
        unowned = [f for f in staying if f not in kept_owned and not _is_bytecode(f)]
        # uv removes the directories it empties, with their __pycache__ (knowledge.installers.UV_UNINSTALL_LEAVES);
        # pip leaves both; a cleanup step after it removes bytecode and then empty directories.
        clears_bytecode = segment.tool == "uv" or top in cleaned
        after = owned + unowned + ([] if clears_bytecode else bytecode)
        left.append({"directory": top, "stays": not whole and (bool(after) or not clears_bytecode),
                     "owned_by_others": len(owned), "bytecode": len(bytecode),
                     "unowned": [os.path.relpath(f, top) for f in unowned[:MAX_FILES_LISTED]],
                     "unowned_count": len(unowned), "init_stays": os.path.join(top, "__init__.py") in after,
                     "directories": len(dirs)})
    status = "failed" if missing and not removes else "simulated"
    reason = f"not installed: {', '.join(missing)}" if missing else ""
    return {"tool": segment.tool, "status": status, "reason": reason, "remove": removes, "missing": missing,
            "left_behind": left}


def _move(segment: Segment) -> dict[str, Any]:
    source, target = segment.paths
    if not os.path.lexists(source):
        return {"tool": "shell", "status": "failed", "reason": f"{source} does not exist"}
    if os.path.lexists(target):
        return {"tool": "shell", "status": "failed", "reason": f"{target} exists already: mv would move into it"}
    return {"tool": "shell", "status": "simulated", "reason": "", "moves": [source]}


# --------------------------------------------------------------------------- the collector


def _one(command: str, segments: list[Segment], installed: Sequence[Mapping[str, Any]], roots: Sequence[str],
         timeout_s: float, cwd: str, cache_tag: str,
         pip_version: Callable[[str], tuple[str | None, str]]) -> dict[str, Any]:
    results = []
    for i, segment in enumerate(segments):
        if segment.kind == "install":
            facts = (_pip_install(segment, timeout_s, cwd, pip_version) if segment.tool == "pip"
                     else _uv_install(segment, timeout_s, cwd))
        elif segment.kind == "uninstall":
            facts = _simulate_uninstall(segments, i, installed, roots, cache_tag)
        elif segment.kind == "move":
            facts = _move(segment)
        else:
            facts = {"tool": "shell", "status": "simulated", "reason": "", "cleans": list(segment.paths)}
        results.append({"kind": segment.kind, **facts})
    return {"command": command, "segments": results}


def _cache_tag(target: Target | None) -> str:
    """The target's bytecode cache tag (sys.implementation.cache_tag), from its marker environment."""
    markers = target.marker_environment if target is not None else {}
    name, version = markers.get("implementation_name") or "", markers.get("python_version") or ""
    return f"{name}-{version.replace('.', '')}" if name == "cpython" and version else ""


def installed_summary(distributions: Distributions) -> list[dict[str, Any]]:
    """What the judgement needs of each installed distribution (saved with the dry runs): null where the
    environment probe did not say (`requires` of an unreadable METADATA, `top_levels` without a RECORD)."""
    return [{"name": d.name, "version": d.version, "requires": d.requires if d.metadata_error is None else None,
             "location": d.location, "dist_info": d.dist_info,
             "top_levels": d.top_levels if d.record.present else None} for d in distributions.items]


def collect(commands: Iterable[str], sections: Mapping[str, object], *, python: str, timeout_s: float,
            cwd: str, target_archs: Sequence[str] = ()) -> DryRuns:
    """The dry-run facts for `commands` (those of a known shape that name `python`), run concurrently,
    each installer call bounded by `timeout_s` (`sections`: the run's, for what is installed where)."""
    installed = installed_summary(Distributions.read(sections.get(Distributions.SECTION)) or Distributions())
    target = Target.read(sections.get(Target.SECTION))
    roots = environment_roots(target) or []
    planned: dict[str, list[Segment]] = {}
    skipped: dict[str, str] = {}
    for command in dict.fromkeys(commands):
        segments = parse_command(command)
        if segments is None:
            continue
        if any(s.python and s.python != python for s in segments):
            skipped[command] = "it names another interpreter than the target"
            continue
        planned[command] = segments
    started = time.monotonic()
    _STOPPED.clear()
    pip_version = _PipVersions(timeout_s, cwd)
    with ThreadPoolExecutor(max_workers=MAX_WORKERS) as pool:
        futures = {c: pool.submit(_one, c, s, installed, roots, timeout_s, cwd, _cache_tag(target), pip_version)
                   for c, s in planned.items()}
        items = []
        try:
            for command, future in futures.items():
                try:
                    items.append(future.result())
                except Exception as exc:  # noqa: BLE001 - a broken check of one command is that command's "not asked"
                    items.append({"command": command, "segments": [
                        {"kind": "?", "tool": "", "status": "not-checked", "reason": f"{type(exc).__name__}: {exc}"}]})
        except BaseException:
            # Ctrl-C reaches this thread only: stop the installers (their own sessions do not get the signal), so
            # that the workers return at once and remove their temporary directories before the pool is left.
            for future in futures.values():
                future.cancel()
            _kill_live()
            raise
    items += [{"command": c, "segments": [{"kind": "?", "tool": "", "status": "not-checked", "reason": why}]}
              for c, why in skipped.items()]
    document: dict[str, Any] = {
        "python": python, "env_kind": target.env_kind if target is not None else None, "timeout_s": timeout_s,
        "wall_s": round(time.monotonic() - started, 3), "installed": installed,
        "marker_environment": target.marker_environment if target is not None else {}, "items": items}
    if any(s.kind == "install" for segments in planned.values() for s in segments):
        document["build"] = build_env.collect(sections, python=python, target_archs=target_archs)
    return DryRuns.collected(document)
