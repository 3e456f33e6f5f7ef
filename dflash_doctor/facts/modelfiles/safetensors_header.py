"""Read a safetensors header as facts, without the safetensors library and without torch.

The rules follow huggingface/safetensors (HEAD 24b0b28): `README.md` "Format" and
`safetensors/src/tensor.rs` (`read_metadata`, `Metadata::validate`, `Dtype::bitsize`).
Only the 8-byte length and the header are read; tensor data is never touched, so a
60 GB shard costs one `stat`, one `open` and one small read.

Every defect becomes a problem `{"kind", "message", "file"[, "tensor"]}` whose message
names the file (and the tensor); nothing here raises on bad input.

The header is bounded by what the file holds (8 + N <= its size) and by the reference reader's own ceiling
(`const MAX_HEADER_SIZE: usize = 100_000_000;` in safetensors/src/tensor.rs, checked in `read_metadata`
before the header is parsed). Within that, a header may still declare a million tiny tensors: its entries
are scanned one at a time and the facts keep the first MAX_TENSORS_KEPT of them (plus those the caller's
`keep` asks for) with counts and per-dtype totals, never a copy of the whole table.
"""

from __future__ import annotations

import json
import os
import re
import stat
from array import array
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, Final, TypeGuard

__all__ = [
    "DTYPE_BITS",
    "FATAL_KINDS",
    "MAX_DTYPES",
    "MAX_GROUPS",
    "MAX_HEADER_SIZE",
    "MAX_PROBLEMS_PER_KIND",
    "MAX_SHAPE_DIMS",
    "MAX_TENSORS_KEPT",
    "OTHER_GROUP",
    "Problems",
    "cap_problems",
    "header_refusal",
    "problem",
    "read_header_and_names",
    "read_safetensors_header",
]

JSONDict = dict[str, Any]

# tensor.rs `MAX_HEADER_SIZE`: the reference reader refuses anything larger (DoS guard).
MAX_HEADER_SIZE: Final[int] = 100_000_000
_LEN_BYTES: Final[int] = 8
# Rust deserialises sizes and offsets into usize; on 64-bit machines anything >= 2**64 fails.
_USIZE_LIMIT: Final[int] = 2**64

# tensor.rs `Dtype::bitsize` (the complete enum at HEAD 24b0b28).
DTYPE_BITS: Final[dict[str, int]] = {
    "BOOL": 8,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "F8_E4M3FNUZ": 8,
    "F8_E5M2FNUZ": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "C64": 64,
    "F64": 64,
    "I64": 64,
    "U64": 64,
}

# Kinds after which the tensor table is missing or untrustworthy: cross-checks that
# compare tensor names (index vs shard) must not run on such a file.
FATAL_KINDS: Final[frozenset[str]] = frozenset(
    {
        "unreadable",
        "not-a-file",
        "header-too-small",
        "header-too-large",
        "header-past-eof",
        "bad-utf8",
        "bad-json",
    }
)

# What a problem record quotes of a message and of a tensor name; longer names are never kept as facts.
MAX_MESSAGE: Final[int] = 2000
MAX_NAME: Final[int] = 512
# What the facts keep of a header's __metadata__ (a string-to-string map the header may make 100 MB long).
METADATA_MAX_KEYS: Final[int] = 64
METADATA_MAX_CHARS: Final[int] = 512

# The per-dtype totals: every real dtype, and unknown ones (each a problem) up to MAX_DTYPES names in all.
MAX_DTYPES: Final[int] = 64
MAX_DTYPE_CHARS: Final[int] = 64

# A file with a wrong dtype on every tensor would otherwise produce thousands of lines.
MAX_PROBLEMS_PER_KIND: Final[int] = 10

# Real tensors have a handful of dimensions; a header may declare a million. Facts and messages keep the
# first MAX_SHAPE_DIMS of a longer shape and its rank ("rank" in the tensor's facts), never the whole list.
MAX_SHAPE_DIMS: Final[int] = 8

# A real shard holds a few thousand tensors at most; the facts of one file keep this many (in file order, plus
# those the caller's `keep` names) and say how many there are ("tensor_count", "tensors_complete").
MAX_TENSORS_KEPT: Final[int] = 1024
# Byte totals by name group (`group`): a header of a million distinct names gives a million groups otherwise.
MAX_GROUPS: Final[int] = 256
OTHER_GROUP: Final[str] = "(other)"


def problem(kind: str, file: str, message: str, tensor: str | None = None) -> JSONDict:
    """One problem record; the message always starts with the file it is about. A message (which may quote a
    tensor name of megabytes) is cut at MAX_MESSAGE characters, the tensor name at MAX_NAME."""
    text = f"{file}: {message}"
    record: JSONDict = {"kind": kind, "message": text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE] + "...",
                        "file": file}
    if tensor is not None:
        record["tensor"] = tensor if len(tensor) <= MAX_NAME else tensor[:MAX_NAME] + "..."
    return record


def cap_problems(problems: list[JSONDict], per_kind: int = MAX_PROBLEMS_PER_KIND) -> list[JSONDict]:
    """Keep the first `per_kind` problems of each (file, kind); summarise the rest in one record."""
    kept: list[JSONDict] = []
    seen: dict[tuple[str, str], int] = {}
    for p in problems:
        if "omitted" in p:  # already a summary from an earlier cap
            kept.append(p)
            continue
        key = (str(p.get("file", "")), str(p["kind"]))
        seen[key] = seen.get(key, 0) + 1
        if seen[key] <= per_kind:
            kept.append(p)
    for (file, kind), count in seen.items():
        if count > per_kind:
            omitted = count - per_kind
            summary = problem(kind, file, f"... and {omitted} more '{kind}' problems not listed")
            summary["omitted"] = omitted
            kept.append(summary)
    return kept


class Problems(list[JSONDict]):
    """A problem list that keeps the first `per_kind` of each (file, kind) as they come: a header whose million
    tensors are all wrong costs a million counts, not a million records. `capped()` adds the summaries."""

    def __init__(self, per_kind: int = MAX_PROBLEMS_PER_KIND) -> None:
        super().__init__()
        self.per_kind = per_kind
        self.counts: dict[tuple[str, str], int] = {}

    def append(self, p: JSONDict) -> None:
        if "omitted" not in p:
            key = (str(p.get("file", "")), str(p["kind"]))
            self.counts[key] = self.counts.get(key, 0) + 1
            if self.counts[key] > self.per_kind:
                return
        super().append(p)

    def extend(self, problems: Any) -> None:
        for p in problems:
            self.append(p)

    def capped(self) -> list[JSONDict]:
        kept = list(self)
        for (file, kind), count in self.counts.items():
            if count > self.per_kind:
                omitted = count - self.per_kind
                summary = problem(kind, file, f"... and {omitted} more '{kind}' problems not listed")
                summary["omitted"] = omitted
                kept.append(summary)
        return cap_problems(kept)


def read_safetensors_header(path: str | os.PathLike[str],
                            keep: Callable[[str], bool] | None = None) -> JSONDict:
    """Facts about one safetensors file, from its header alone.

    Returns `{"path", "size", "header_len", "data_len", "tensor_count", "tensors_complete", "bytes", "dtypes":
    {dtype: {"tensors", "bytes"}}, "tensors": {name: {"dtype", "shape", "bytes"}}, "metadata": {str: str},
    "problems": [...]}`. `size`, `header_len` and `data_len` are None when they could not be established;
    `bytes` is the span the offsets declare. "tensors" holds the first MAX_TENSORS_KEPT entries and up to as
    many more for which `keep(name)` is true; "tensors_complete" says whether that is all of them.
    """
    facts, _ = read_header_and_names(path, keep)
    return facts


def read_header_and_names(path: str | os.PathLike[str], keep: Callable[[str], bool] | None = None,
                          group: Callable[[str], str] | None = None) -> tuple[JSONDict, list[str]]:
    """`read_safetensors_header`'s facts and every tensor name in the file (for cross-checks against an index
    and other shards; the names are not facts: a header may hold a million of them). With `group`, the facts
    also carry "groups": bytes per group(name), for the first MAX_GROUPS groups and "(other)" after."""
    file = os.fspath(path)
    facts: JSONDict = {
        "path": file,
        "size": None,
        "header_len": None,
        "data_len": None,
        "tensor_count": 0,
        "tensors_complete": True,
        "bytes": 0,
        "dtypes": {},
        "tensors": {},
        "metadata": {},
        "problems": Problems(),
    }
    names: list[str] = []
    raw = _read_header_bytes(file, facts)
    if raw is not None:
        _scan_header(file, raw, facts, names, keep, group)
    facts["problems"] = facts["problems"].capped()
    return facts, names


def _read_header_bytes(file: str, facts: JSONDict) -> bytes | None:
    """The N header bytes, or None with a problem recorded. Never allocates more than the file holds."""
    problems: list[JSONDict] = facts["problems"]
    try:
        st = os.stat(file)
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        problems.append(problem("unreadable", file, f"cannot stat: {_os_reason(exc)}"))
        return None
    # Opening a FIFO or device would block or read forever: only regular files are read.
    if not stat.S_ISREG(st.st_mode):
        problems.append(problem("not-a-file", file, "is not a regular file"))
        return None
    try:
        with open(file, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            facts["size"] = size
            head = handle.read(_LEN_BYTES)
            if len(head) < _LEN_BYTES:
                problems.append(
                    problem(
                        "header-too-small", file, f"only {size} bytes; the 8-byte header length is missing"
                    )
                )
                return None
            n = int.from_bytes(head, "little")
            facts["header_len"] = n
            too_large = _header_too_large(file, n)
            if too_large is not None:
                problems.append(too_large)
                return None
            if _LEN_BYTES + n > size:
                problems.append(
                    problem(
                        "header-past-eof",
                        file,
                        f"header length {n} runs past the end of the file ({size} bytes): "
                        "corrupt or truncated",
                    )
                )
                return None
            raw = handle.read(n)
    except OSError as exc:
        problems.append(problem("unreadable", file, f"cannot read: {_os_reason(exc)}"))
        return None
    if len(raw) != n:  # the file shrank between fstat and read
        problems.append(problem("header-past-eof", file, f"read {len(raw)} of {n} header bytes"))
        return None
    return raw


def _header_too_large(file: str, n: int) -> JSONDict | None:
    if n > MAX_HEADER_SIZE:
        return problem("header-too-large", file, f"header length {n} exceeds the safetensors limit of {MAX_HEADER_SIZE} bytes")
    return None


def header_refusal(path: str | os.PathLike[str]) -> list[JSONDict]:
    """Why the doctor refuses this safetensors file's header (a length over MAX_HEADER_SIZE), from its first 8
    bytes, as `read_header_and_names` judges it; [] where it would read it (or fails for another reason)."""
    file = os.fspath(path)
    try:
        if not stat.S_ISREG(os.stat(file).st_mode):
            return [problem("not-a-file", file, "is not a regular file")]
        with open(file, "rb") as handle:
            head = handle.read(_LEN_BYTES)
    except (OSError, ValueError):
        return []
    too_large = _header_too_large(file, int.from_bytes(head, "little")) if len(head) == _LEN_BYTES else None
    return [too_large] if too_large is not None else []


def _os_reason(exc: Exception) -> str:
    return getattr(exc, "strerror", None) or str(exc) or exc.__class__.__name__


class _DuplicateKeys:
    """`object_pairs_hook` that remembers duplicate keys (the README disallows them; json keeps the last)."""

    def __init__(self) -> None:
        self.found: list[str] = []

    def __call__(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result = dict(pairs)
        if len(result) != len(pairs) and len(self.found) < MAX_PROBLEMS_PER_KIND * 10:
            self.found.extend(sorted(k for k, times in Counter(k for k, _ in pairs).items() if times > 1))
        return result


def _reject_constant(name: str) -> Any:
    # serde_json rejects NaN/Infinity; Python's json would accept them.
    raise ValueError(f"non-standard JSON constant {name}")


_WHITESPACE: Final[re.Pattern[str]] = re.compile(r"[ \t\n\r]*")
_BLANK: Final[str] = " \t\n\r"
_JSON_KIND: Final[dict[str, str]] = {"[": "list", '"': "str", "t": "bool", "f": "bool", "n": "NoneType"}


_SCANSTRING: Final[Callable[[str, int, bool], tuple[str, int]]] = getattr(json.decoder, "scanstring")  # noqa: B009


def _skip(text: str, idx: int) -> int:
    """The index of the first non-whitespace character at or after idx (JSON whitespace only)."""
    match = _WHITESPACE.match(text, idx)
    return match.end() if match is not None else idx


def _pairs(text: str, decoder: json.JSONDecoder) -> Iterator[tuple[str, Any]]:
    """The (key, value) pairs of the JSON object `text`, one at a time, each key and value parsed by the json
    module's own scanner: a header of a million entries never exists as one dict. Raises ValueError as
    json.loads would (and for a top level that is not an object, "not-object:<kind>")."""
    scan: Callable[[str, int], tuple[Any, int]] = getattr(decoder, "scan_once")  # noqa: B009 - untyped in typeshed
    scanstring, blank = _SCANSTRING, _BLANK
    idx = _skip(text, 0)
    if text[idx:idx + 1] != "{":
        first = text[idx:idx + 1]
        kind = _JSON_KIND.get(first) or ("float" if re.match(r"-?\d+[.eE]", text[idx:idx + 40]) else "int")
        if not first or not (first in _JSON_KIND or first == "-" or first.isdigit()):
            raise ValueError(f"Expecting value: char {idx}")
        raise ValueError(f"not-object:{kind}")
    idx = _skip(text, idx + 1)
    try:
        if text[idx] == "}":
            idx += 1
        else:
            # Written for the compact form every safetensors writer produces (no blanks between tokens); a blank
            # costs one regex match.
            while True:
                if text[idx] != '"':
                    raise ValueError(f"Expecting property name enclosed in double quotes: char {idx}")
                key, idx = scanstring(text, idx + 1, True)
                if text[idx] in blank:
                    idx = _skip(text, idx)
                if text[idx] != ":":
                    raise ValueError(f"Expecting ':' delimiter: char {idx}")
                idx += 1
                if text[idx] in blank:
                    idx = _skip(text, idx)
                try:
                    value, idx = scan(text, idx)
                except StopIteration as exc:
                    raise ValueError(f"Expecting value: char {exc.value}") from None
                yield key, value
                if text[idx] in blank:
                    idx = _skip(text, idx)
                delimiter = text[idx]
                idx += 1
                if delimiter == ",":
                    if text[idx] in blank:
                        idx = _skip(text, idx)
                    continue
                if delimiter == "}":
                    break
                raise ValueError(f"Expecting ',' delimiter: char {idx - 1}")
    except IndexError:
        raise ValueError(f"Expecting '}}': char {len(text)}") from None
    idx = _skip(text, idx)
    if idx != len(text):
        raise ValueError(f"Extra data: char {idx}")


_FIELD_TOKENS: Final[tuple[str, ...]] = ('"dtype"', '"shape"', '"data_offsets"')


def _scan_entries(file: str, text: str, decoder: json.JSONDecoder, keep: Callable[[str], bool] | None,
                  group: Callable[[str], str] | None, problems: Problems) -> _Table | None:
    """The header's entries checked one by one; None (and a bad-json problem) when it is not a JSON object."""
    found = Problems()  # this header's own problems: committed only if the whole header parses
    table = _Table(file, found, keep, group)
    add = table.add
    try:
        for name, info in _pairs(text, decoder):
            if name == "__metadata__":
                table.metadata = _metadata(file, info, found)
            else:
                add(name, info)
    except (ValueError, RecursionError) as exc:
        reason = str(exc)
        if reason.startswith("not-object:"):
            message = f"header is a JSON {reason.split(':', 1)[1]}, not an object"
        else:
            message = f"header is not valid JSON: {_short(exc)}"
        problems.append(problem("bad-json", file, message))
        return None
    return table


def _short(exc: BaseException, limit: int = 160) -> str:
    text = str(exc) or exc.__class__.__name__
    return text if len(text) <= limit else text[:limit] + "..."


def _scan_header(file: str, raw: bytes, facts: JSONDict, names: list[str],
                 keep: Callable[[str], bool] | None, group: Callable[[str], str] | None) -> None:
    """Decode, parse and check the header entry by entry; on bad UTF-8 or JSON nothing of it is kept."""
    problems: Problems = facts["problems"]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        problems.append(problem("bad-utf8", file, f"header is not valid UTF-8 (byte {exc.start})"))
        return
    del raw
    if not text.startswith("{"):
        # README: "MUST begin with `{`"; the Rust reader still parses after leading whitespace,
        # so this is its own kind and parsing continues.
        problems.append(
            problem("header-start", file, "header does not begin with '{' as the format requires")
        )
    # First without a hook (the json module's C scanner builds each entry); a header whose field names occur
    # other than once per entry may repeat a key inside an entry, which json would keep silently: scanned again
    # with a hook that names it.
    table = _scan_entries(file, text, json.JSONDecoder(parse_constant=_reject_constant), keep, group, problems)
    if table is None:
        return
    hook = _DuplicateKeys()
    if any(text.count(token) != table.entries for token in _FIELD_TOKENS):
        table = None  # the first pass's table goes before the second is built
        table = _scan_entries(file, text, json.JSONDecoder(object_pairs_hook=hook, parse_constant=_reject_constant),
                              keep, group, problems)
        if table is None:
            return
    found = table.problems
    del text
    for key in hook.found:
        problems.append(problem("duplicate-key", file, f"header repeats the key '{key}'"))
    table.finish(facts, names)
    problems.extend(found)
    for (pfile, kind), count in found.counts.items():  # what `found` dropped still counts in the summary
        problems.counts[(pfile, kind)] = problems.counts.get((pfile, kind), 0) + count - min(count, found.per_kind)
    _check_file_length(file, facts["size"], facts["header_len"], facts["data_len"], problems)


class _Table:
    """The tensor table of one header, entry by entry: spans in two arrays, names in a list, per-dtype totals,
    and the full facts of the kept entries only."""

    def __init__(self, file: str, problems: Problems, keep: Callable[[str], bool] | None,
                 group: Callable[[str], str] | None) -> None:
        self.file, self.problems, self.keep, self.group = file, problems, keep, group
        self.groups: dict[str, int] = {}
        self.names: list[str] = []
        self.begins: array[int] = array("Q")
        self.ends: array[int] = array("Q")
        self.kept: dict[str, JSONDict] = {}
        self.asked = 0  # entries kept because `keep` asked for them
        self.dtypes: dict[str, list[int]] = {}
        self.metadata: dict[str, str] = {}
        self.entries = 0  # tensor entries scanned, a repeated name counted each time


    def add(self, name: str, info: Any) -> None:
        file, problems, limit = self.file, self.problems, _USIZE_LIMIT
        self.entries += 1
        # The common case inlined: a MoE target has tens of thousands of entries and the whole directory must
        # read in well under 0.5 s. Anything unusual falls through to `_tensor_info` / `_check_size`, which are
        # exact and write the messages.
        try:
            dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
            well_formed = (
                type(dtype) is str
                and type(shape) is list
                and type(begin) is int
                and type(end) is int
                and 0 <= begin <= end < limit
            )
            if well_formed:
                # The element count dimension by dimension, as tensor.rs folds it with checked_mul: once it
                # reaches 2**64 it stops growing, so every product stays below 2**128 and a shape of a
                # million huge dimensions costs a million small multiplications, not a quadratic big-int
                # product. The loop goes on only to check that every dimension is a usize.
                elements = 1
                for d in shape:  # a plain loop: ~3x cheaper than all(<genexpr>) here
                    if type(d) is not int or d < 0 or d >= limit:
                        well_formed = False
                        break
                    if elements < limit:
                        elements *= d
        except (KeyError, TypeError, ValueError):
            well_formed = False
        if not well_formed:
            parsed = _tensor_info(file, name, info, problems)
            if parsed is None:
                return
            dtype, shape, begin, end = parsed
            elements = _elements(shape)
        span = end - begin
        bits = DTYPE_BITS.get(dtype)
        if bits is None or elements >= limit or span * 8 != elements * bits:
            _check_size(file, name, dtype, shape, elements, begin, end, problems)
        if bits is None:  # an unknown dtype (a problem already): any string, so bounded as a key
            dtype = dtype[:MAX_DTYPE_CHARS]
            if dtype not in self.dtypes and len(self.dtypes) >= MAX_DTYPES:
                dtype = OTHER_GROUP
        totals = self.dtypes.get(dtype)
        if totals is None:
            totals = self.dtypes[dtype] = [0, 0]
        totals[0] += 1
        totals[1] += max(span, 0)
        if self.group is not None and span > 0:
            key = self.group(name)
            if key not in self.groups and len(self.groups) >= MAX_GROUPS:
                key = OTHER_GROUP
            self.groups[key] = self.groups.get(key, 0) + span
        count = len(self.names)
        asked = self.keep is not None and self.asked < MAX_TENSORS_KEPT and self.keep(name)
        if (count < MAX_TENSORS_KEPT or asked or name in self.kept) and len(name) <= MAX_NAME:
            entry: JSONDict = {"dtype": dtype, "shape": shape, "bytes": span if span >= 0 else None}
            if len(shape) > MAX_SHAPE_DIMS:
                entry["shape"], entry["rank"] = shape[:MAX_SHAPE_DIMS], len(shape)
            self.kept[name] = entry
            self.asked += asked
        self.names.append(name)
        self.begins.append(begin)
        self.ends.append(end)

    def finish(self, facts: JSONDict, names: list[str]) -> None:
        problems, file = self.problems, self.file
        count = len(self.names)
        if len(set(self.names)) != count:
            # json keeps the last of a repeated name (and the duplicate-key problem says so): so do the spans.
            last = {n: i for i, n in enumerate(self.names)}
            repeated = Counter(self.names)
            for name in sorted(n for n, times in repeated.items() if times > 1):
                problems.append(problem("duplicate-key", file, f"header repeats the key '{name}'"))
            keep_index = sorted(last.values())
            self.names = [self.names[i] for i in keep_index]
            self.begins = array("Q", (self.begins[i] for i in keep_index))
            self.ends = array("Q", (self.ends[i] for i in keep_index))
            count = len(self.names)
        facts["data_len"] = _check_offsets(file, self.begins, self.ends, self.names, problems)
        facts["tensor_count"] = count
        facts["tensors"] = self.kept
        facts["tensors_complete"] = len(self.kept) == count
        facts["bytes"] = sum(t[1] for t in self.dtypes.values())
        facts["dtypes"] = {d: {"tensors": t[0], "bytes": t[1]} for d, t in sorted(self.dtypes.items())}
        facts["metadata"] = self.metadata
        if self.group is not None:
            facts["groups"] = self.groups
        names.extend(self.names)


def _metadata(file: str, info: Any, problems: list[JSONDict]) -> dict[str, str]:
    if not isinstance(info, dict):
        problems.append(problem("bad-metadata", file, "__metadata__ is not a string-to-string map"))
        return {}
    bad = [k for k, v in info.items() if not isinstance(v, str)]
    if bad:
        problems.append(
            problem(
                "bad-metadata", file, f"__metadata__ values must be strings; not for {', '.join(sorted(bad)[:5])}"
            )
        )
    kept = [(k, v) for k, v in info.items() if isinstance(v, str)][:METADATA_MAX_KEYS]
    return {k[:METADATA_MAX_CHARS]: v[:METADATA_MAX_CHARS] for k, v in kept}


def _usizes(values: object) -> TypeGuard[list[int]]:
    """A JSON list of integers in [0, 2**64). `type() is int` also rules out JSON true/false."""
    if type(values) is not list:
        return False
    for v in values:
        if type(v) is not int or v < 0 or v >= _USIZE_LIMIT:
            return False
    return True


def _tensor_info(
    file: str, name: str, info: Any, problems: list[JSONDict]
) -> tuple[str, list[int], int, int] | None:
    """(dtype, shape, begin, end) if the entry has the required structure, else None and a problem."""
    if type(info) is dict:
        dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if type(dtype) is str and _usizes(shape) and _usizes(offsets) and len(offsets) == 2:
            return dtype, shape, offsets[0], offsets[1]
    problems.append(problem("bad-tensor-info", file, f"tensor '{name}': {_why_bad(info)}", tensor=name))
    return None


def _why_bad(info: Any) -> str:
    if not isinstance(info, dict):
        return "entry is not an object with dtype, shape and data_offsets"
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not isinstance(dtype, str):
        return f"dtype {dtype!r} is not a string"
    if not _usizes(shape):
        return f"shape {shape!r} is not a list of non-negative integers"
    return f"data_offsets {offsets!r} is not [begin, end] of non-negative integers"


def _elements(shape: list[int]) -> int:
    """The element count, or any value >= 2**64 once the running product overflows (checked per dimension)."""
    elements = 1
    for d in shape:
        elements *= d
        if elements >= _USIZE_LIMIT:
            break
    return elements


def _shape_text(shape: list[int]) -> str:
    """`[64, 128]`; a shape of more than MAX_SHAPE_DIMS dimensions is cut, with its rank."""
    if len(shape) <= MAX_SHAPE_DIMS:
        return str(shape)
    head = ", ".join(str(d) for d in shape[:MAX_SHAPE_DIMS])
    return f"[{head}, ...] ({len(shape)} dimensions)"


def _check_size(
    file: str,
    name: str,
    dtype: str,
    shape: list[int],
    elements: int,
    begin: int,
    end: int,
    problems: list[JSONDict],
) -> None:
    """dtype known, element bits a whole number of bytes, and the span equal to shape x dtype."""
    bits = DTYPE_BITS.get(dtype)
    if bits is None:
        problems.append(problem("bad-dtype", file, f"tensor '{name}': unknown dtype '{dtype}'", tensor=name))
        return
    if elements >= _USIZE_LIMIT:
        at = _overflow_index(shape)
        problems.append(
            problem(
                "overflow",
                file,
                f"tensor '{name}': shape {_shape_text(shape)} overflows: the element count passes "
                f"2**64 at dimension {at} of {len(shape)}",
                tensor=name,
            )
        )
        return
    nbits = elements * bits
    if nbits >= _USIZE_LIMIT:
        problems.append(
            problem(
                "overflow",
                file,
                f"tensor '{name}': shape {_shape_text(shape)} overflows: "
                f"{elements} elements x {bits} bits pass 2**64",
                tensor=name,
            )
        )
    elif nbits % 8:
        problems.append(
            problem(
                "misaligned",
                file,
                f"tensor '{name}': {dtype}{_shape_text(shape)} is not a whole number of bytes",
                tensor=name,
            )
        )
    elif end >= begin and end - begin != nbits // 8:
        problems.append(
            problem(
                "size-mismatch",
                file,
                f"tensor '{name}': {dtype}{_shape_text(shape)} needs {nbits // 8} bytes but its offsets "
                f"[{begin}, {end}] span {end - begin}",
                tensor=name,
            )
        )


def _overflow_index(shape: list[int]) -> int:
    """The 0-based dimension at which the running element count first reaches 2**64."""
    elements = 1
    for index, d in enumerate(shape):
        elements *= d
        if elements >= _USIZE_LIMIT:
            return index
    return len(shape)


def _check_offsets(file: str, begins: array[int], ends: array[int], names: list[str],
                   problems: list[JSONDict]) -> int:
    """Sorted by offset, each tensor must start where the previous ended, from 0. Returns the buffer end.
    A writer's header is already in offset order; only another order costs a sort (of indices, not copies)."""
    count = len(names)
    in_order = all(begins[i] <= begins[i + 1] and (begins[i] < begins[i + 1] or ends[i] <= ends[i + 1])
                   for i in range(count - 1))
    order: Any = range(count) if in_order else sorted(range(count), key=lambda i: (begins[i], ends[i], names[i]))
    cursor, previous = 0, None
    for i in order:
        begin, end, name = begins[i], ends[i], names[i]
        if end < begin:
            problems.append(
                problem(
                    "bad-offsets",
                    file,
                    f"tensor '{name}': data_offsets [{begin}, {end}] end before they begin",
                    tensor=name,
                )
            )
            continue
        if begin < cursor:
            problems.append(
                problem(
                    "overlap",
                    file,
                    f"tensor '{name}' at [{begin}, {end}] overlaps '{previous}' which ends at {cursor}",
                    tensor=name,
                )
            )
        elif begin > cursor:
            after = f"after '{previous}'" if previous else "at the start of the data"
            problems.append(
                problem(
                    "gap",
                    file,
                    f"{begin - cursor} unindexed bytes {after}, before tensor '{name}' at {begin}",
                    tensor=name,
                )
            )
        if end >= cursor:
            cursor, previous = end, name
    return cursor


def _check_file_length(
    file: str, size: int | None, header_len: int | None, data_len: int, problems: list[JSONDict]
) -> None:
    if size is None or header_len is None:
        return
    expected = _LEN_BYTES + header_len + data_len
    if expected > size:
        problems.append(
            problem(
                "truncated",
                file,
                f"file is {size} bytes but its header describes 8 + {header_len} + {data_len} = {expected}: "
                f"{expected - size} bytes missing (incomplete download or copy?)",
            )
        )
    elif expected < size:
        problems.append(
            problem("trailing-bytes", file, f"{size - expected} bytes after the last tensor are not indexed")
        )
