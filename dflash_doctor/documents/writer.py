"""Every file the doctor writes goes through here: reports, baselines, fleet views, a job summary, a server's log,
a fix's snapshot and what `fix --undo` puts back.

What the inputs can point it at (a `--json` path, the name a profile picks, a link planted where the ticket
report goes, `GITHUB_STEP_SUMMARY`) never makes it write anywhere else:

- The parent directory is opened once, as a real directory (`O_DIRECTORY | O_NOFOLLOW`: a symbolic link there is
  refused, not followed), and every later step is relative to that open directory.
- The name itself is never followed: a symbolic link, a FIFO, a directory or a device at the path is refused.
- `replace` writes a whole document: a temporary file in the same directory, fsynced, then `os.replace` over the
  name (readers see the old file or the new one, never half of either). What is already at the name is replaced
  only when the doctor made it: a regular file of the user's whose head is a document of the same kind
  (`Kind`: a JSON document whose `schema` or `format` is the doctor's, a Markdown or XML text that names
  dflash-doctor near its start), or an empty one (`mktemp` made it for the doctor to fill). Anything else is
  refused with `WriteError`, which callers print as one line (exit 2): the doctor does not clobber a file it
  did not make.
- `append` adds to a regular file (the job summary GitHub made) without following a link; `create_new` makes a
  file that must not exist yet (a snapshot's copy, a restored file); `new_log` a private temporary file.
- Everything is bounded: at most `MAX_BYTES` written by one call, at most `HEAD_BYTES` read to recognise a file.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator

from dflash_doctor.documents.jsondoc import DocumentError, parse_json, shown_path
from dflash_doctor.shape import frozen_dataclass

__all__ = ["HEAD_BYTES", "JSON_DOCUMENT", "MARKDOWN", "MAX_BYTES", "XML", "Kind", "WriteError", "append",
           "check", "create_new", "new_log", "replace"]

MAX_BYTES = 1 << 30
"""More than any document the doctor writes (a report with every file hashed is a few MB)."""
HEAD_BYTES = 64 << 20
"""How much of an existing file is read to tell whether the doctor made it."""
_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class WriteError(OSError):
    """A file the doctor will not or cannot write: `strerror` says why, `filename` names it, and the message is
    one line with both."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(why)
        self.strerror = why
        self.filename = path

    def __str__(self) -> str:
        return f"{shown_path(self.filename)}: {self.strerror}"


@frozen_dataclass(frozen=True)
class Kind:
    """What a file is, and how to tell that the doctor made the one already at the name."""

    name: str
    made_by_doctor: Callable[[bytes], bool]


_DOCTORS_FIRST_KEY = re.compile(rb'\A[ \t\r\n]*\{[ \t\r\n]*"schema"[ \t\r\n]*:[ \t\r\n]*"dflash-doctor/')
"""How the doctor's reports (and the other documents it writes with a "schema") begin: the tag is the first key. A
"schema" decides over a "format" (`_json_document` below), so only a first "schema" is taken as it stands."""


def _json_document(head: bytes) -> bool:
    # The doctor's own documents are told by their first key, without reading the rest: the file at the name is
    # most often the report of the run before, and parsing it whole (half a megabyte of a serving environment's
    # facts, each number through the bounded parser) cost more than writing the new one.
    if _DOCTORS_FIRST_KEY.match(head):
        return True
    try:
        data = parse_json(head.decode("utf-8"))
    except (DocumentError, UnicodeDecodeError):
        return False
    if not isinstance(data, dict):
        return False
    tag = data.get("schema", data.get("format"))
    return isinstance(tag, str) and tag.startswith("dflash-doctor/")


JSON_DOCUMENT = Kind("dflash-doctor JSON document", _json_document)
"""A report, a baseline, a fleet view, a fix record: JSON whose "schema" (or "format") is the doctor's."""
MARKDOWN = Kind("dflash-doctor Markdown report", lambda head: b"dflash-doctor" in head[:512])
XML = Kind("dflash-doctor JUnit report", lambda head: b'name="dflash-doctor"' in head[:1024])


def _fail(path: str, why: str) -> WriteError:
    return WriteError(path, why)


def _open_parent(path: str) -> tuple[int, str]:
    """The directory `path` is in, opened (never through a link), and the name in it."""
    directory, name = os.path.split(path)
    if not name or name in (".", ".."):
        raise _fail(path, "not a file name")
    try:
        return os.open(directory or ".", os.O_RDONLY | os.O_DIRECTORY | _FLAGS), name
    except OSError as exc:
        if os.path.islink(directory):
            why = f"directory {directory} is a symbolic link; give the directory it points to"
        elif not os.path.lexists(directory):
            why = f"directory {directory} does not exist"
        elif not os.path.isdir(directory):
            why = f"{directory} is not a directory"
        else:
            why = f"cannot open directory {directory} ({exc.strerror or exc})"
        raise _fail(path, why) from None
    except ValueError as exc:  # a NUL in the name
        raise _fail(path, str(exc)) from None


def _existing(path: str, dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _fail(path, exc.strerror or str(exc)) from None


def _not_regular(info: os.stat_result) -> str | None:
    mode = info.st_mode
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISLNK(mode):
        return "is a symbolic link; the doctor does not write through links (remove it or choose another name)"
    if stat.S_ISDIR(mode):
        return "is a directory; give a file name"
    return "is not a regular file (a FIFO, socket or device); choose another name"


def _made_by_doctor(dir_fd: int, name: str, info: os.stat_result, kind: Kind) -> bool:
    if info.st_uid != os.geteuid():
        return False
    if info.st_size == 0:
        return True
    if info.st_size > HEAD_BYTES:
        return False
    try:
        fd = os.open(name, os.O_RDONLY | _FLAGS, dir_fd=dir_fd)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        head = os.read(fd, HEAD_BYTES)
    except OSError:
        return False
    finally:
        os.close(fd)
    return kind.made_by_doctor(head)


def _write_all(fd: int, chunks: Iterable[bytes], path: str) -> None:
    written = 0
    for chunk in chunks:
        written += len(chunk)
        if written > MAX_BYTES:
            raise _fail(path, f"more than {MAX_BYTES} bytes to write; not written")
        view = memoryview(chunk)
        while view:
            view = view[os.write(fd, view):]


def _data(content: str | bytes) -> bytes:
    return content.encode("utf-8") if isinstance(content, str) else content


def _replaceable(path: str, dir_fd: int, name: str, kind: Kind) -> None:
    info = _existing(path, dir_fd, name)
    if info is None:
        return
    problem = _not_regular(info)
    if problem is not None:
        raise _fail(path, problem)
    if not _made_by_doctor(dir_fd, name, info, kind):
        raise _fail(path, f"exists and is not a {kind.name}; the doctor does not overwrite it "
                          "(remove it or choose another name)")


@contextlib.contextmanager
def _in_parent(path: str) -> Iterator[tuple[int, str]]:
    """The open parent directory of `path` and the name in it; any OSError inside becomes a WriteError."""
    dir_fd, name = _open_parent(path)
    try:
        yield dir_fd, name
    except WriteError:
        raise
    except OSError as exc:
        raise _fail(path, exc.strerror or str(exc)) from None
    finally:
        os.close(dir_fd)


def check(path: str, kind: Kind) -> None:
    """WriteError now when `replace(path, ..., kind)` would refuse: for a long run to fail before it starts."""
    with _in_parent(path) as (dir_fd, name):
        _replaceable(path, dir_fd, name, kind)


def replace(path: str, content: str | bytes, kind: Kind, mode: int = 0o666) -> None:
    """Write `content` as the whole of `path`, atomically; WriteError when `path` or its directory is not one the
    doctor writes (see the module's docstring)."""
    data = _data(content)
    with _in_parent(path) as (dir_fd, name):
        _replaceable(path, dir_fd, name, kind)
        temp = f".{name[:200]}.{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _FLAGS, mode, dir_fd=dir_fd)
        except OSError as exc:
            raise _fail(path, f"cannot write in its directory ({exc.strerror or exc})") from None
        try:
            try:
                _write_all(fd, (data,), path)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=dir_fd)
            raise
        with contextlib.suppress(OSError):  # some file systems cannot sync a directory; the rename is done
            os.fsync(dir_fd)


def append(path: str, content: str | bytes) -> None:
    """Add `content` to the end of the regular file `path` (made when absent), never through a link."""
    data = _data(content)
    with _in_parent(path) as (dir_fd, name):
        try:
            fd = os.open(name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _FLAGS, 0o666, dir_fd=dir_fd)
        except OSError as exc:
            info = _existing(path, dir_fd, name)
            problem = _not_regular(info) if info is not None else None
            raise _fail(path, problem or exc.strerror or str(exc)) from None
        try:
            problem = _not_regular(os.fstat(fd))
            if problem is not None:
                raise _fail(path, problem)
            _write_all(fd, (data,), path)
        finally:
            os.close(fd)


def create_new(path: str, chunks: Iterable[bytes], mode: int = 0o600) -> None:
    """Write `chunks` to `path`, which must not exist yet (nothing at the name is followed or replaced)."""
    with _in_parent(path) as (dir_fd, name):
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _FLAGS, mode, dir_fd=dir_fd)
        try:
            _write_all(fd, chunks, path)
        except BaseException:
            os.close(fd)
            os.unlink(name, dir_fd=dir_fd)
            raise
        os.close(fd)


def new_log(prefix: str, suffix: str) -> tuple[int, str]:
    """A new private file in the temporary directory (made with O_EXCL, never an existing name): its open
    descriptor, for a process's output, and its path."""
    return tempfile.mkstemp(prefix=prefix, suffix=suffix)
