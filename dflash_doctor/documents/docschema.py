"""Validation of the doctor's own documents against the JSON Schemas it ships (dflash_doctor/documents/schema/).

The schemas use a small subset of JSON Schema 2020-12, and this module implements exactly that subset
with jsonschema's semantics (bool is not a number, 1.0 is an integer, `enum`/`const` compare without
bool == 1): `type`, `required`, `properties`, `additionalProperties` (a schema), `items` (a schema),
`enum`, `const`, `pattern`, `minimum`, `minLength`, `minItems` and local `$ref`s (`#/$defs/NAME`).
A keyword outside the subset is a `SchemaError` when the schema is used, so a schema edit cannot be
silently half-checked; `tests/test_documents.py` proves agreement with jsonschema on thousands of
mutated reports and baselines.

Why not jsonschema at runtime: it brings attrs, referencing, jsonschema-specifications and the compiled
rpds-py into the tool's environment (and ~0.1 s of imports into every `judge`), for the dozen keywords
used here. Documents are bounded in depth before they get here (`dflash_doctor.documents.jsondoc`), so the
recursion below is bounded too.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["SchemaError", "check_schema", "first_error", "load_schema"]

_HERE = Path(__file__).resolve().parent / "schema"
_ANNOTATIONS = frozenset({"$schema", "$id", "$defs", "title", "description"})
_KEYWORDS = frozenset({"type", "required", "properties", "additionalProperties", "items", "enum", "const",
                       "pattern", "minimum", "minLength", "minItems", "$ref"})
_TYPE_NAMES = {"null": "null", "boolean": "a boolean", "integer": "an integer", "number": "a number",
               "string": "a string", "array": "an array", "object": "an object"}


class SchemaError(Exception):
    """A shipped schema uses something this validator does not implement (a bug of the doctor's)."""


@cache
def load_schema(name: str) -> dict[str, Any]:
    """A shipped schema by file stem, e.g. "report-v1"; SchemaError if it uses more than this module does."""
    schema: dict[str, Any] = json.loads((_HERE / f"{name}.json").read_text(encoding="utf-8"))
    check_schema(schema)
    return schema


def check_schema(schema: Mapping[str, Any]) -> None:
    """SchemaError when `schema`, or a schema inside it, uses a keyword outside the subset."""
    pending: list[Any] = [schema]
    while pending:
        node = pending.pop()
        if not isinstance(node, Mapping):
            raise SchemaError(f"not a schema: {node!r}")
        unknown = set(node) - _KEYWORDS - _ANNOTATIONS
        if unknown:
            raise SchemaError(f"unsupported schema keywords: {', '.join(sorted(unknown))}")
        for key in ("properties", "$defs"):
            pending.extend(node.get(key, {}).values())
        for key in ("items", "additionalProperties"):
            if isinstance(node.get(key), Mapping):
                pending.append(node[key])


def _is_type(value: Any, kind: str) -> bool:
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and math.isfinite(value) and value.is_integer())
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    raise SchemaError(f"unknown type {kind!r}")


def _equal(one: Any, two: Any) -> bool:
    """JSON equality: true is not 1, 1.0 is 1, containers compare element by element."""
    if isinstance(one, str) or isinstance(two, str):
        return bool(one == two)
    if isinstance(one, list) and isinstance(two, list):
        return len(one) == len(two) and all(_equal(a, b) for a, b in zip(one, two))
    if isinstance(one, dict) and isinstance(two, dict):
        return len(one) == len(two) and all(k in two and _equal(v, two[k]) for k, v in one.items())
    if isinstance(one, bool) or isinstance(two, bool):
        return isinstance(one, bool) and isinstance(two, bool) and one is two
    return bool(one == two)


def _kind_of(value: Any) -> str:
    for kind in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _is_type(value, kind):
            return kind
    return type(value).__name__


def _where(path: tuple[str | int, ...]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "the document"


def _resolve(ref: str, root: Mapping[str, Any]) -> Mapping[str, Any]:
    if not ref.startswith("#/"):
        raise SchemaError(f"only local references are supported, not {ref!r}")
    node: Any = root
    for part in ref[2:].split("/"):
        node = node[part]
    if not isinstance(node, Mapping):
        raise SchemaError(f"{ref!r} does not name a schema")
    return node


def _check(value: Any, schema: Mapping[str, Any], root: Mapping[str, Any], path: tuple[str | int, ...]) -> str | None:
    where = _where(path)
    if "$ref" in schema:
        error = _check(value, _resolve(str(schema["$ref"]), root), root, path)
        if error:
            return error
    if "type" in schema:
        kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_is_type(value, k) for k in kinds):
            wanted = " or ".join(_TYPE_NAMES.get(str(k), str(k)) for k in kinds)
            return f"{where}: expected {wanted}, found {_TYPE_NAMES.get(_kind_of(value), _kind_of(value))}"
    if "const" in schema and not _equal(value, schema["const"]):
        return f"{where}: expected {json.dumps(schema['const'])}"
    if "enum" in schema and not any(_equal(value, option) for option in schema["enum"]):
        return f"{where}: expected one of {', '.join(json.dumps(o) for o in schema['enum'])}"
    if isinstance(value, str):
        if "pattern" in schema and re.search(schema["pattern"], value) is None:
            return f"{where}: {_short(value)!r} does not match {schema['pattern']}"
        if "minLength" in schema and len(value) < schema["minLength"]:
            return f"{where}: shorter than {schema['minLength']} characters"
    if _is_type(value, "number") and "minimum" in schema and value < schema["minimum"]:
        return f"{where}: {value} is less than {schema['minimum']}"
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            return f"{where}: fewer than {schema['minItems']} items"
        if "items" in schema:
            for index, item in enumerate(value):
                error = _check(item, schema["items"], root, (*path, index))
                if error:
                    return error
    if isinstance(value, dict):
        missing = [key for key in schema.get("required", ()) if key not in value]
        if missing:
            return f"{where}: missing {', '.join(repr(m) for m in missing)}"
        properties: Mapping[str, Any] = schema.get("properties", {})
        for key, item in value.items():
            if key in properties:
                sub: Any = properties[key]
            elif "additionalProperties" in schema:
                sub = schema["additionalProperties"]
                if sub is False:
                    return f"{where}: unexpected key {_short(key)!r}"
                if sub is True:
                    continue
            else:
                continue
            error = _check(item, sub, root, (*path, key))
            if error:
                return error
    return None


def _short(text: str, keep: int = 60) -> str:
    return text if len(text) <= keep else text[:keep] + "..."


def first_error(document: Any, schema: Mapping[str, Any]) -> str | None:
    """Where and why `document` does not follow `schema` ("checks[0].id: expected a string, found an
    array"), or None when it does."""
    return _check(document, schema, schema, ())
