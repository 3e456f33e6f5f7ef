"""Facts from a running vLLM server: /health, /v1/models, /metrics before and after a small fixed greedy
workload sent through /v1/completions, and the speculative-decoding counters' differences.

Standard library HTTP only (http.client), every request bounded in size and by a deadline on the whole
exchange (not only each socket read). What the server answers is data: fields of the wrong type are named
(`malformed`) and read as absent, counters that are not counts are named (`invalid_counters`), and a path it
names is never opened. The API key is read from the environment variable the user names and sent as a bearer
token; it is never part of the facts. The metric names come from the installed vLLM's source
(vllm/v1/spec_decode/metrics.py) where the doctor runs beside it, else from the names the server exposes, else
from knowledge.live. Judging is the live check's (checks/live/).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import socket
import threading
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dflash_doctor.context import Context
from dflash_doctor.documents.jsondoc import DocumentError, parse_json
from dflash_doctor.facts.live.live_shapes import MAX_COUNT, Live
from dflash_doctor.facts.probes import run_probe
from dflash_doctor.facts.safefile import read_regular
from dflash_doctor.facts.serve.serve_args import _human_int_or_auto
from dflash_doctor.facts.shape import Collected, by_section
from dflash_doctor.knowledge.dflash import LAYER_IDS_PLUS_ONE_MARKER
from dflash_doctor.knowledge.live import METRICS_FILE, SPEC_DECODE_METRICS
from dflash_doctor.shape import frozen_dataclass

if TYPE_CHECKING:  # http.client is imported by the exchange itself: 9 ms a run that reaches no server
    import http.client

__all__ = ["DEFAULT_PROMPTS", "Answer", "LiveOptions", "collect", "counters", "gather", "get", "metric_names_from_source",
           "parse_prometheus", "post_json", "split_url", "tally"]

MAX_BODY = 16 * 2**20          # a /metrics payload of a big server is well under 1 MB
MAX_JSON = 4 * 2**20
MAX_SOURCE = 2 * 2**20
MAX_PROMPTS = 64
MAX_PROMPT_CHARS = 8192
ROLES = ("drafts", "draft_tokens", "accepted_tokens", "accepted_per_pos")
KEPT_METRICS = ("vllm:generation_tokens", "vllm:prompt_tokens", "vllm:num_requests_running")

# The fixed workload: short, varied prompts; greedy, so a rerun with the same server gives the same tokens.
DEFAULT_PROMPTS: tuple[str, ...] = (
    "The capital of France is",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "List three prime numbers greater than ten:",
    "Translate to German: The weather is nice today.",
    "Once upon a time, in a small village by the sea,",
    "SELECT name, COUNT(*) FROM orders GROUP BY",
    "Explain in one sentence why the sky is blue.",
    "1, 2, 3, 5, 8, 13,",
)


@frozen_dataclass(frozen=True)
class LiveOptions:
    url: str
    api_key_env: str | None = None
    prompts: tuple[str, ...] = DEFAULT_PROMPTS
    prompts_source: str = "built-in"
    requests: int = 8
    max_tokens: int = 64
    timeout_s: float = 30.0
    """Per request."""
    budget_s: float = 120.0
    """The whole workload."""
    baseline: Mapping[str, Any] | None = None
    serve_argv: Sequence[str] | None = None
    server: Mapping[str, Any] | None = None
    """The server `serve --exec --live` started: pid, log, seconds to ready, or its exit status and log tail."""


@frozen_dataclass(frozen=True)
class Answer:
    status: int | None
    body: bytes
    seconds: float
    error: str = ""
    truncated: bool = False


def split_url(url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, base path) of an http(s) URL; ValueError for anything else."""
    parts = urllib.parse.urlsplit(url if "://" in url else "http://" + url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an http:// or https:// URL")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise ValueError(f"{url!r}: {exc}") from None
    return parts.scheme, parts.hostname, port, parts.path.rstrip("/")


class _Exchange:
    """One HTTP exchange, run on a worker thread so that the caller's wait ends at the deadline whatever the
    server does: a socket timeout bounds each read, and a server that drips its status line, a header or a
    chunk-size line one byte at a time answers every read in time. At the deadline the caller stops waiting
    and shuts the socket, which ends the worker's blocked read (a TLS one too)."""

    def __init__(self, url: str, method: str, path: str, body: bytes | None, headers: Mapping[str, str],
                 deadline: float, limit: int) -> None:
        self.url, self.method, self.path, self.body, self.headers = url, method, path, body, dict(headers)
        self.deadline, self.limit = deadline, limit
        self.conn: http.client.HTTPConnection | None = None
        self.answer: tuple[int | None, bytes, str, bool] | None = None
        """(status, body, error, truncated), once the exchange ended."""

    def left(self) -> float:
        return max(0.01, self.deadline - time.monotonic())

    def run(self) -> None:
        import http.client

        try:
            self.answer = self._exchange()
        except ConnectionRefusedError:
            _, host, port, _ = split_url(self.url)
            self.answer = (None, b"", f"connection refused by {host}:{port}", False)
        except TimeoutError:
            self.answer = (None, b"", "", False)  # the caller words it, with the limit
        except http.client.HTTPException as exc:
            self.answer = (None, b"", f"not an HTTP answer ({type(exc).__name__}: {str(exc)[:120]})", False)
        except OSError as exc:
            self.answer = (None, b"", f"{type(exc).__name__}: {exc.strerror or exc}"[:200], False)
        except Exception as exc:  # noqa: BLE001 - whatever the server sends is a fact, never a crash
            self.answer = (None, b"", f"unreadable answer ({type(exc).__name__}: {str(exc)[:120]})", False)
        finally:
            if self.conn is not None:
                self.conn.close()

    def _exchange(self) -> tuple[int | None, bytes, str, bool]:
        import http.client

        scheme, host, port, base = split_url(self.url)
        cls = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
        conn = self.conn = cls(host, port, timeout=self.left())
        conn.request(self.method, base + self.path, body=self.body, headers=self.headers)
        if conn.sock is not None:
            conn.sock.settimeout(self.left())
        response = conn.getresponse()
        chunks: list[bytes] = []
        size = 0
        while True:
            if time.monotonic() >= self.deadline:
                raise TimeoutError
            if conn.sock is not None:
                conn.sock.settimeout(self.left())
            chunk = response.read1(65536)
            if not chunk:
                return response.status, b"".join(chunks), "", False
            chunks.append(chunk)
            size += len(chunk)
            if size > self.limit:
                return response.status, b"".join(chunks)[:self.limit], "", True

    def abort(self) -> None:
        """Shut the connection's socket: a read blocked in the worker returns at once."""
        sock = self.conn.sock if self.conn is not None else None
        if sock is not None:
            try:
                socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the plain socket's: a TLS one keeps its state
            except OSError:
                pass


def _request(url: str, method: str, path: str, body: bytes | None, headers: Mapping[str, str],
             timeout_s: float, limit: int) -> Answer:
    """One request, bounded: `timeout_s` for the whole exchange (name lookup, connect, headers, body), `limit`
    bytes."""
    started = time.monotonic()
    exchange = _Exchange(url, method, path, body, headers, started + timeout_s, limit)
    worker = threading.Thread(target=exchange.run, name=f"dflash-doctor live {method} {path}", daemon=True)
    worker.start()
    worker.join(timeout_s)
    answer = exchange.answer
    if worker.is_alive() or answer is None:
        exchange.abort()
        answer = (None, b"", "", False)
    status, data, error, truncated = answer
    seconds = round(time.monotonic() - started, 3)
    if status is None and not error:
        error = f"no complete answer within {timeout_s:g} s"
    return Answer(status, data, seconds, error, truncated)


def _headers(api_key: str | None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    headers = {"User-Agent": "dflash-doctor", "Accept": "*/*"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    headers.update(extra or {})
    return headers


def get(url: str, path: str, api_key: str | None, timeout_s: float, limit: int = MAX_BODY) -> Answer:
    return _request(url, "GET", path, None, _headers(api_key), timeout_s, limit)


def post_json(url: str, path: str, data: Mapping[str, Any], api_key: str | None, timeout_s: float) -> Answer:
    body = json.dumps(data).encode()
    return _request(url, "POST", path, body, _headers(api_key, {"Content-Type": "application/json"}),
                    timeout_s, MAX_JSON)


# --- Prometheus text format -------------------------------------------------------------------------------

_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?\s*$")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?\s*')


def parse_prometheus(text: str) -> tuple[list[tuple[str, dict[str, str], float]], int]:
    """(samples, lines that are neither samples nor comments) of a Prometheus text exposition."""
    samples: list[tuple[str, dict[str, str], float]] = []
    bad = 0
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m is None:
            bad += 1
            continue
        labels = {k: v for k, v in _LABEL.findall(m.group(3) or "")}
        try:
            value = float(m.group(4))
        except ValueError:
            bad += 1
            continue
        samples.append((m.group(1), labels, value))
    return samples, bad


def _role(name: str) -> str | None:
    base = name.removesuffix("_total")
    if "spec_decode" not in base:
        return None
    for suffix, role in (("_per_pos", "accepted_per_pos"), ("_num_accepted_tokens", "accepted_tokens"),
                         ("_num_draft_tokens", "draft_tokens"), ("_num_drafts", "drafts")):
        if base.endswith(suffix):
            return role
    return None


def metric_names_from_source(text: str) -> dict[str, str]:
    """role -> metric name, from the string literals of vLLM's metrics.py that are whole metric names: a
    `name="vllm:..."` argument (0.20.1), or a `("vllm:...", "documentation")` row its counters are made from
    (0.26.0)."""
    names: dict[str, str] = {}
    for name in re.findall(r'"(vllm:[A-Za-z0-9_:]+)"', text):
        role = _role(name)
        if role is not None and role not in names:
            names[role] = name
    return names


def names_exposed(samples: list[tuple[str, dict[str, str], float]]) -> dict[str, str]:
    names: dict[str, str] = {}
    for name, _, _ in samples:
        role = _role(name)
        if role is not None and role not in names:
            names[role] = name.removesuffix("_total")
    return names


COUNTED = ("drafts", "draft_tokens", "accepted_tokens", "vllm:generation_tokens", "vllm:prompt_tokens")


def _prometheus_text(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


def _is_count(value: float) -> bool:
    return math.isfinite(value) and 0 <= value <= MAX_COUNT and value.is_integer()


def tally(samples: list[tuple[str, dict[str, str], float]],
          names: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """(counters, invalid) of one scrape: the spec-decode counters' totals over every engine and model label
    (per position for the curve) and the token counters; `invalid` names each counter whose samples or sum is
    not a count (NaN, an infinity, a negative or fractional value, more than MAX_COUNT), with the value as
    Prometheus writes it. An invalid counter is left out of the counters."""
    totals: dict[str, Any] = {}
    per_pos: dict[str, float] = {}
    invalid: dict[str, str] = {}
    wanted = {f"{names[r]}_total": r for r in names} | {names[r]: r for r in names}
    for prefix in KEPT_METRICS:
        wanted.update({prefix: prefix, prefix + "_total": prefix})

    def add(into: dict[str, Any], key: str, shown: str, value: float) -> None:
        if shown in invalid:
            return
        total = into.get(key, 0.0) + value
        if key in COUNTED or into is per_pos:
            if not _is_count(value):
                invalid[shown] = _prometheus_text(value)
                return
            if not _is_count(total):
                invalid[shown] = f"{_prometheus_text(total)} (the sum of its samples)"
                return
        elif not math.isfinite(total):
            invalid[shown] = _prometheus_text(total)
            return
        into[key] = total

    for name, labels, value in samples:
        role = wanted.get(name)
        if role is None:
            continue
        if role == "accepted_per_pos":
            pos = labels.get("position", "?")
            add(per_pos, pos, f"accepted_per_pos[{pos}]", value)
        else:
            add(totals, role, role, value)
    for shown in invalid:
        totals.pop(shown, None)
        if shown.startswith("accepted_per_pos["):
            per_pos.pop(shown[len("accepted_per_pos["):-1], None)
    if per_pos:
        totals["accepted_per_pos"] = dict(sorted(per_pos.items(), key=lambda kv: (len(kv[0]), kv[0])))
    return totals, invalid


def counters(samples: list[tuple[str, dict[str, str], float]], names: Mapping[str, str]) -> dict[str, Any]:
    """The counters of `tally` (the valid ones)."""
    return tally(samples, names)[0]


# --- the installed vLLM beside the doctor -----------------------------------------------------------------

def _vllm_facts(python: str, timeout_s: float) -> dict[str, Any]:
    """The vLLM installed beside the doctor (in --python): located by the `locate` probe, never imported."""

    outcome = run_probe(python, "locate", {"names": ["vllm"]}, timeout_s=timeout_s)
    found = (outcome.data or {}).get("vllm") if isinstance(outcome.data, dict) else None
    if not isinstance(found, dict):
        return {"installed": False, "version": None, "root": None, "probe_error": outcome.error}
    root = next((str(p) for p in found.get("locations") or [] if os.path.isfile(os.path.join(str(p), "__init__.py"))),
                None)
    facts: dict[str, Any] = {"installed": root is not None or found.get("version") is not None,
                             "version": found.get("version"), "root": root}
    if root is None:
        return facts
    rel = METRICS_FILE.value.split("vllm/", 1)[1]
    try:
        text = read_regular(os.path.join(root, rel), MAX_SOURCE).decode("utf-8", "replace")
        facts["metric_names"] = metric_names_from_source(text)
        facts["metrics_file"] = os.path.join(root, rel)
    except OSError as exc:
        facts["metrics_file_error"] = str(exc)
    try:
        runner = read_regular(os.path.join(root, "v1/worker/gpu_model_runner.py"), 8 * MAX_SOURCE).decode(
            "utf-8", "replace")
        facts["layer_ids_plus_one"] = LAYER_IDS_PLUS_ONE_MARKER.value in runner
    except OSError:
        facts["layer_ids_plus_one"] = None
    return facts


# --- what the serve command and the model directories say (for naming causes) -----------------------------

# What a config.json may put into the live facts: the first layer ids and a small quantization_config.
MAX_IDS = 256
MAX_COPIED = 65536


def _config(path: str | None) -> dict[str, Any] | None:
    if not path or not os.path.isdir(path):
        return None
    try:
        data = parse_json(read_regular(os.path.join(path, "config.json"), MAX_JSON).decode("utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    text: dict[str, Any] = data["text_config"] if isinstance(data.get("text_config"), dict) else data
    dflash: dict[str, Any] = data["dflash_config"] if isinstance(data.get("dflash_config"), dict) else {}
    ids = dflash.get("target_layer_ids", data.get("target_layer_ids"))
    quantization = data.get("quantization_config") or text.get("quantization_config")
    facts = {"path": path, "num_hidden_layers": text.get("num_hidden_layers"),
             "quantization_config": quantization if len(json.dumps(quantization, default=str)) <= MAX_COPIED
             else {"quant_method": quantization.get("quant_method") if isinstance(quantization, dict) else None},
             "torch_dtype": data.get("torch_dtype") or data.get("dtype"),
             "target_layer_ids": ids[:MAX_IDS] if isinstance(ids, list) else ids,
             "num_target_layers": data.get("num_target_layers"),
             # the context it was made for, and the RoPE that decides whether vLLM can raise it (0.33+)
             "max_position_embeddings": text.get("max_position_embeddings")
             if isinstance(text.get("max_position_embeddings"), int)
             and not isinstance(text.get("max_position_embeddings"), bool) else None,
             "rope_type": _rope_type(text)}
    if isinstance(ids, list) and len(ids) > MAX_IDS:
        facts["target_layer_ids_count"] = len(ids)  # a report carries the first few and the count, not the input
    return facts


def _rope_type(text: Mapping[str, Any]) -> str | None:
    """The config's RoPE type (rope_parameters, else rope_scaling: "yarn", "default", ...), None when neither says."""
    for key in ("rope_parameters", "rope_scaling"):
        value = text.get(key)
        if isinstance(value, dict):
            kind = value.get("rope_type", value.get("type"))
            return str(kind)[:40] if kind is not None else None
    return None


def _requested_len(text: str | None) -> int | None:
    """--max-model-len as vLLM reads it (facts.serve.serve_args: 32k, 32K, auto); None when not given or unreadable."""
    if text is None:
        return None
    try:
        return _human_int_or_auto(text)
    except ValueError:
        return None


def _flag(argv: Sequence[str], name: str) -> str | None:
    for at, word in enumerate(argv):
        if word == name and at + 1 < len(argv):
            return argv[at + 1]
        if word.startswith(name + "="):
            return word.split("=", 1)[1]
    return None


def _serve_context(argv: Sequence[str] | None) -> dict[str, Any]:
    """What the serve command (the user's own, from `serve --exec --live`) says, and the configs of the
    directories it names. A path in the server's answers (/v1/models' `root`) is never opened: the server may
    be anyone's, and its answer must not make the doctor read a local file into the report."""
    words = list(argv or ())
    ctx: dict[str, Any] = {"serve_command_known": bool(words)}
    model = None
    if words:
        at = words.index("serve") + 1 if "serve" in words else None
        if at is not None and at < len(words) and not words[at].startswith("-"):
            model = words[at]
        model = _flag(words, "--model") or model
        spec_text = _flag(words, "--speculative-config")
        try:
            spec = parse_json(spec_text) if spec_text else None
        except ValueError:
            spec = None
        if isinstance(spec, dict):
            ctx["speculative_config"] = {k: spec.get(k) for k in ("method", "model", "num_speculative_tokens",
                                                                    "quantization") if k in spec}
            ctx["drafter"] = _config(str(spec.get("model"))) if spec.get("model") else None
        ctx["enforce_eager"] = "--enforce-eager" in words
        ctx["attention_backend"] = _flag(words, "--attention-backend")
        ctx["quantization"] = _flag(words, "--quantization") or _flag(words, "-q")
        ctx["kv_cache_dtype"] = _flag(words, "--kv-cache-dtype")
        ctx["max_model_len"] = _flag(words, "--max-model-len") or _flag(words, "--max_model_len")
        ctx["requested_max_model_len"] = _requested_len(ctx["max_model_len"])
    ctx["target"] = _config(model)
    return ctx


# --- the run -----------------------------------------------------------------------------------------------

def _json(answer: Answer) -> tuple[Any, str]:
    """(the JSON value of the answer's body, "") or (None, why it is not usable JSON)."""
    try:
        return parse_json(answer.body.decode("utf-8")), ""
    except UnicodeDecodeError:
        return None, "the answer is not UTF-8 text"
    except DocumentError as exc:
        return None, f"the answer is {exc}"


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, (int, float)):
        text = repr(value)
        return f"a number ({text if len(text) <= 24 else text[:12] + '...'})"
    if isinstance(value, str):
        return f"a string ({value[:40]!r}{'...' if len(value) > 40 else ''})"
    return "a list" if isinstance(value, list) else "an object"


class _Malformed:
    """The fields of the server's answers that do not have their type (vLLM's protocol.py), each named once
    with the first wrong value; the doctor reads them as absent."""

    def __init__(self) -> None:
        self.found: dict[tuple[str, str], dict[str, Any]] = {}

    def note(self, answer: str, field: str, expected: str, value: Any) -> None:
        seen = self.found.setdefault((answer, field), {"answer": answer, "field": field, "expected": expected,
                                                       "found": _json_type(value), "times": 0})
        seen["times"] += 1

    def string(self, answer: str, field: str, value: Any, required: bool = False) -> str | None:
        if isinstance(value, str) and (value or not required):
            return value
        if value is not None or required:
            self.note(answer, field, "a string" if required else "a string or null", value)
        return None

    def count(self, answer: str, field: str, value: Any) -> int | None:
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT:
            return value
        if value is not None:
            self.note(answer, field, f"a whole number from 0 to {MAX_COUNT}", value)
        return None

    def listed(self) -> list[dict[str, Any]]:
        return list(self.found.values())[:32]


def _models(listed: Any, malformed: _Malformed) -> list[dict[str, Any]] | None:
    """The models /v1/models lists (at most 16), each field of its type or None."""
    where = "GET /v1/models"
    data = listed.get("data") if isinstance(listed, dict) else None
    if not isinstance(data, list):
        malformed.note(where, "data" if isinstance(listed, dict) else "(the answer)",
                       "a list" if isinstance(listed, dict) else "an object with a data list",
                       data if isinstance(listed, dict) else listed)
        return None
    models = []
    for i, entry in enumerate(data[:16]):
        if not isinstance(entry, dict):
            malformed.note(where, f"data[{i}]", "an object", entry)
            continue
        models.append({"id": malformed.string(where, f"data[{i}].id", entry.get("id"), required=True),
                       "root": malformed.string(where, f"data[{i}].root", entry.get("root")),
                       "parent": malformed.string(where, f"data[{i}].parent", entry.get("parent")),
                       "max_model_len": malformed.count(where, f"data[{i}].max_model_len", entry.get("max_model_len"))})
    return models


def _metrics(url: str, key: str | None, timeout_s: float) -> tuple[dict[str, Any], list[Any]]:
    answer = get(url, "/metrics", key, timeout_s)
    facts: dict[str, Any] = {"status": answer.status, "seconds": answer.seconds, "bytes": len(answer.body)}
    if answer.error:
        facts["error"] = answer.error
        return facts, []
    if answer.truncated:
        facts["truncated_at"] = MAX_BODY
    samples, bad = parse_prometheus(answer.body.decode("utf-8", "replace")) if answer.status == 200 else ([], 0)
    facts.update({"samples": len(samples), "unparsed_lines": bad})
    if answer.status != 200:
        facts["body_head"] = answer.body[:200].decode("utf-8", "replace")
    return facts, samples


def _count_into(scrape: dict[str, Any], samples: list[tuple[str, dict[str, str], float]],
                names: Mapping[str, str]) -> None:
    scrape["counters"], invalid = tally(samples, names)
    if invalid:
        scrape["invalid_counters"] = invalid
    else:
        scrape.pop("invalid_counters", None)


def prompts_digest(prompts: Sequence[str], max_tokens: int, requests: int) -> str:
    text = json.dumps({"prompts": list(prompts), "max_tokens": max_tokens, "requests": requests})
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def gather(options: LiveOptions, vllm: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Every fact about the server at `options.url`; never raises for what the server does."""
    started = time.monotonic()
    key = os.environ.get(options.api_key_env) if options.api_key_env else None
    facts: dict[str, Any] = {
        "url": options.url, "api_key_env": options.api_key_env, "api_key_set": bool(key),
        "workload": {"prompts_source": options.prompts_source, "prompts": len(options.prompts),
                     "requests": options.requests, "max_tokens": options.max_tokens, "temperature": 0,
                     "digest": prompts_digest(options.prompts, options.max_tokens, options.requests)},
        "vllm": dict(vllm or {}),
    }
    if options.server is not None:
        facts["server"] = dict(options.server)
        if options.server.get("exit_status") is not None:
            facts["seconds"] = round(time.monotonic() - started, 3)
            return facts
    health = get(options.url, "/health", key, options.timeout_s, 65536)
    facts["health"] = {"status": health.status, "seconds": health.seconds, **({"error": health.error} if health.error else {})}
    if health.error:
        facts["seconds"] = round(time.monotonic() - started, 3)
        return facts
    malformed = _Malformed()
    models = get(options.url, "/v1/models", key, options.timeout_s, MAX_JSON)
    facts["models"] = {"status": models.status, **({"error": models.error} if models.error else {}), "data": None}
    if models.status == 200:
        listed, unusable = _json(models)
        if unusable:
            facts["models"]["error"] = unusable
        else:
            facts["models"]["data"] = _models(listed, malformed)
    served = next((m for m in facts["models"]["data"] or [] if m["id"] is not None), None)
    before, samples_before = _metrics(options.url, key, options.timeout_s)
    from_source = (vllm or {}).get("metric_names") or {}
    exposed = names_exposed(samples_before)
    if from_source:
        # a role the source did not name is taken as the server names it
        names, names_from = {**exposed, **from_source}, f"the installed vLLM's {METRICS_FILE.value}"
    elif exposed:
        names, names_from = exposed, "the names the server exposes"
    else:
        names, names_from = dict(SPEC_DECODE_METRICS.value), f"knowledge.live ({SPEC_DECODE_METRICS.read_from})"
    facts["metric_names"] = {"from": names_from, "names": names, "exposed": exposed}
    _count_into(before, samples_before, names)
    facts["metrics_before"] = before
    workload = facts["workload"]
    results: list[dict[str, Any]] = []
    if served is None:
        workload["skipped"] = "the server lists no model in /v1/models"
    else:
        w_started = time.monotonic()
        for i in range(options.requests):
            left = options.budget_s - (time.monotonic() - w_started)
            if left <= 0:
                workload["stopped"] = f"the workload's {options.budget_s:g} s were spent after {i} requests"
                break
            prompt = options.prompts[i % len(options.prompts)]
            answer = post_json(options.url, "/v1/completions",
                               {"model": served["id"], "prompt": prompt, "max_tokens": options.max_tokens,
                                "temperature": 0, "seed": 0}, key, min(options.timeout_s, left))
            result: dict[str, Any] = {"status": answer.status, "seconds": answer.seconds}
            body, _ = _json(answer)
            if answer.error:
                result["error"] = answer.error
            elif answer.status != 200 or not isinstance(body, dict):
                result["error"] = f"HTTP {answer.status}: {answer.body[:160].decode('utf-8', 'replace')}"
            else:
                usage = body.get("usage")
                if not isinstance(usage, dict):
                    if usage is not None:
                        malformed.note("POST /v1/completions", "usage", "an object", usage)
                    usage = {}
                for field in ("completion_tokens", "prompt_tokens"):
                    result[field] = malformed.count("POST /v1/completions", f"usage.{field}", usage.get(field))
            results.append(result)
        workload["wall_s"] = round(time.monotonic() - w_started, 3)
    ok = [r for r in results if "error" not in r]
    workload.update({"sent": len(results), "ok": len(ok),
                     "completion_tokens": sum(int(r.get("completion_tokens") or 0) for r in ok),
                     "prompt_tokens": sum(int(r.get("prompt_tokens") or 0) for r in ok),
                     "errors": sorted({str(r["error"]) for r in results if "error" in r})[:5],
                     "request_seconds": [r["seconds"] for r in results]})
    after, samples_after = _metrics(options.url, key, options.timeout_s)
    if not from_source and not exposed:
        later = names_exposed(samples_after)
        if later:
            names = later
            facts["metric_names"] = {"from": "the names the server exposes", "names": names, "exposed": later}
            _count_into(before, samples_before, names)
    _count_into(after, samples_after, names)
    facts["metrics_after"] = after
    facts["context"] = _serve_context(options.serve_argv)
    facts["malformed"] = malformed.listed()
    if options.baseline is not None:
        facts["baseline"] = dict(options.baseline)
    facts["seconds"] = round(time.monotonic() - started, 3)
    return facts


def collect(ctx: Context, earlier: Mapping[str, object]) -> Collected:
    """The `live` section: the server named by `--live`'s options, or a note that none was given."""
    given = ctx.options.get("live")
    if not isinstance(given, LiveOptions):
        return by_section(Live.collected({"given": False}))
    facts = {"given": True, **gather(given, _vllm_facts(ctx.python, min(ctx.timeout_s, 30.0)))}
    return by_section(Live.collected(facts))
