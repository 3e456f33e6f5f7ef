"""Read a safetensors header as facts, without the safetensors library and without torch.

The rules follow huggingface/safetensors (HEAD 24b0b28): `README.md` "Format" and
`safetensors/src/tensor.rs` (`read_metadata`, `Metadata::validate`, `Dtype::bitsize`).
Only the 8-byte length and the header are read; tensor data is never touched, so a
60 GB shard costs one `stat`, one `open` and one small read.

Every defect becomes a problem `{"kind", "message", "file"[, "tensor"]}` whose message
names the file (and the tensor); nothing here raises on bad input.
"""

from __future__ import annotations

import json
import os
import stat
from typing import Any, Final, TypeGuard

__all__ = [
    "DTYPE_BITS",
    "FATAL_KINDS",
    "MAX_HEADER_SIZE",
    "MAX_PROBLEMS_PER_KIND",
    "MAX_SHAPE_DIMS",
    "cap_problems",
    "problem",
    "read_safetensors_header",
]

JSONDict = dict[str, Any]

# tensor.rs `MAX_HEADER_SIZE`: the reference reader refuses anything larger (DoS guard).
MAX_HEADER_SIZE: Final[int] = 100_000_000
_LEN_BYTES: Final[int] = 8
# Rust deserialises sizes and offsets into usize; on 64-bit hosts anything >= 2**64 fails.
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

# A file with a wrong dtype on every tensor would otherwise produce thousands of lines.
MAX_PROBLEMS_PER_KIND: Final[int] = 10

# Real tensors have a handful of dimensions; a header may declare a million. Facts and messages keep the
# first MAX_SHAPE_DIMS of a longer shape and its rank ("rank" in the tensor's facts), never the whole list.
MAX_SHAPE_DIMS: Final[int] = 8


def problem(kind: str, file: str, message: str, tensor: str | None = None) -> JSONDict:
    """One problem record; the message always starts with the file it is about."""
    record: JSONDict = {"kind": kind, "message": f"{file}: {message}", "file": file}
    if tensor is not None:
        record["tensor"] = tensor
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


def read_safetensors_header(path: str | os.PathLike[str]) -> JSONDict:
    """Facts about one safetensors file, from its header alone.

    Returns `{"path", "size", "header_len", "data_len", "tensors": {name: {"dtype", "shape",
    "bytes"}}, "metadata": {str: str}, "problems": [...]}`. `size`, `header_len` and `data_len`
    are None when they could not be established; `bytes` is the span the offsets declare.
    """
    file = os.fspath(path)
    facts: JSONDict = {
        "path": file,
        "size": None,
        "header_len": None,
        "data_len": None,
        "tensors": {},
        "metadata": {},
        "problems": [],
    }
    raw = _read_header_bytes(file, facts)
    if raw is not None:
        header = _decode_header(file, raw, facts["problems"])
        if header is not None:
            _collect_tensors(file, header, facts)
    facts["problems"] = cap_problems(facts["problems"])
    return facts


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
            if n > MAX_HEADER_SIZE:
                problems.append(
                    problem(
                        "header-too-large",
                        file,
                        f"header length {n} exceeds the safetensors limit of {MAX_HEADER_SIZE} bytes",
                    )
                )
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


def _os_reason(exc: Exception) -> str:
    return getattr(exc, "strerror", None) or str(exc) or exc.__class__.__name__


class _DuplicateKeys:
    """`object_pairs_hook` that remembers duplicate keys (the README disallows them; json keeps the last)."""

    def __init__(self) -> None:
        self.found: list[str] = []

    def __call__(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result = dict(pairs)
        if len(result) != len(pairs):
            names = [k for k, _ in pairs]
            self.found.extend(sorted({k for k in names if names.count(k) > 1}))
        return result


def _reject_constant(name: str) -> Any:
    # serde_json rejects NaN/Infinity; Python's json would accept them.
    raise ValueError(f"non-standard JSON constant {name}")


def _decode_header(file: str, raw: bytes, problems: list[JSONDict]) -> dict[str, Any] | None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        problems.append(problem("bad-utf8", file, f"header is not valid UTF-8 (byte {exc.start})"))
        return None
    if not text.startswith("{"):
        # README: "MUST begin with `{`"; the Rust reader still parses after leading whitespace,
        # so this is its own kind and parsing continues.
        problems.append(
            problem("header-start", file, "header does not begin with '{' as the format requires")
        )
    try:
        header = json.loads(text, parse_constant=_reject_constant)
        if isinstance(header, dict) and _may_have_duplicates(raw, header):
            # Rare path: parse again, slowly, to name the duplicates (json keeps the last silently).
            hook = _DuplicateKeys()
            header = json.loads(text, object_pairs_hook=hook, parse_constant=_reject_constant)
            for key in hook.found:
                problems.append(problem("duplicate-key", file, f"header repeats the key '{key}'"))
    except (ValueError, RecursionError) as exc:
        problems.append(problem("bad-json", file, f"header is not valid JSON: {_short(exc)}"))
        return None
    if not isinstance(header, dict):
        problems.append(problem("bad-json", file, f"header is a JSON {type(header).__name__}, not an object"))
        return None
    return header


_FIELD_TOKENS: Final[tuple[bytes, ...]] = (b'"dtype"', b'"shape"', b'"data_offsets"')


def _may_have_duplicates(raw: bytes, header: dict[str, Any]) -> bool:
    """Cheap screen: with no duplicates, each field token occurs exactly once per tensor entry.

    A JSON string cannot contain an unescaped quote, so these tokens only occur as whole
    strings; any surplus (a duplicate name or field, or a string that happens to equal a
    field name) or any entry lacking a field sends the header to the exact, slower check.
    """
    entries = len(header) - ("__metadata__" in header)
    return any(raw.count(token) != entries for token in _FIELD_TOKENS)


def _short(exc: BaseException, limit: int = 160) -> str:
    text = str(exc) or exc.__class__.__name__
    return text if len(text) <= limit else text[:limit] + "..."


def _collect_tensors(file: str, header: dict[str, Any], facts: JSONDict) -> None:
    problems: list[JSONDict] = facts["problems"]
    tensors: dict[str, JSONDict] = facts["tensors"]
    spans: list[tuple[int, int, str]] = []
    bits_of, limit = DTYPE_BITS.get, _USIZE_LIMIT
    # One tight loop with the common case inlined: a MoE target has tens of thousands of
    # entries and the whole directory must read in well under 0.5 s. Anything unusual falls
    # through to `_tensor_info` / `_check_size`, which are exact and write the messages.
    for name, info in header.items():
        if name == "__metadata__":
            facts["metadata"] = _metadata(file, info, problems)
            continue
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
                continue
            dtype, shape, begin, end = parsed
            elements = _elements(shape)
        span = end - begin
        entry: JSONDict = {"dtype": dtype, "shape": shape, "bytes": span if span >= 0 else None}
        if len(shape) > MAX_SHAPE_DIMS:
            entry["shape"], entry["rank"] = shape[:MAX_SHAPE_DIMS], len(shape)
        tensors[name] = entry
        bits = bits_of(dtype)
        if bits is None or elements >= limit or span * 8 != elements * bits:
            _check_size(file, name, dtype, shape, elements, begin, end, problems)
        spans.append((begin, end, name))
    data_len = _check_offsets(file, spans, problems)
    facts["data_len"] = data_len
    _check_file_length(file, facts["size"], facts["header_len"], data_len, problems)


def _metadata(file: str, info: Any, problems: list[JSONDict]) -> dict[str, str]:
    if not isinstance(info, dict):
        problems.append(problem("bad-metadata", file, "__metadata__ is not a string-to-string map"))
        return {}
    bad = sorted(k for k, v in info.items() if not isinstance(v, str))
    if bad:
        problems.append(
            problem(
                "bad-metadata", file, f"__metadata__ values must be strings; not for {', '.join(bad[:5])}"
            )
        )
    return {k: v for k, v in info.items() if isinstance(v, str)}


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


def _check_offsets(file: str, spans: list[tuple[int, int, str]], problems: list[JSONDict]) -> int:
    """Sorted by offset, each tensor must start where the previous ended, from 0. Returns the buffer end."""
    cursor, previous = 0, None
    for begin, end, name in sorted(spans):
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
