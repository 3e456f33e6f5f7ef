"""Facts from a running vLLM server: /health, /v1/models, /metrics before and after a small fixed greedy
workload sent through /v1/completions, and the speculative-decoding counters' differences.

Standard library HTTP only (http.client), every request bounded in time and size. The API key is read from
the environment variable the user names and sent as a bearer token; it is never part of the facts. The
metric names come from the installed vLLM's source (vllm/v1/spec_decode/metrics.py) where the doctor runs
beside it, else from the names the server exposes, else from knowledge.live. Judging is checks/live.py's.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dflash_doctor.check import Context
from dflash_doctor.facts.safefile import read_regular
from dflash_doctor.knowledge.dflash import LAYER_IDS_PLUS_ONE_MARKER
from dflash_doctor.knowledge.live import METRICS_FILE, SPEC_DECODE_METRICS

__all__ = ["DEFAULT_PROMPTS", "Answer", "LiveOptions", "collect", "counters", "gather", "get", "metric_names_from_source",
           "parse_prometheus", "post_json", "split_url"]

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


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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


def _request(url: str, method: str, path: str, body: bytes | None, headers: Mapping[str, str],
             timeout_s: float, limit: int) -> Answer:
    """One request, bounded: `timeout_s` for the whole exchange (connect, headers, body), `limit` bytes."""
    started = time.monotonic()
    deadline = started + timeout_s

    def left() -> float:
        return max(0.01, deadline - time.monotonic())

    scheme, host, port, base = split_url(url)
    cls = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
    conn = cls(host, port, timeout=left())
    try:
        conn.request(method, base + path, body=body, headers=dict(headers))
        if conn.sock is not None:
            conn.sock.settimeout(left())
        response = conn.getresponse()
        chunks: list[bytes] = []
        size = 0
        truncated = False
        while True:
            if time.monotonic() >= deadline:
                raise TimeoutError
            if conn.sock is not None:
                conn.sock.settimeout(left())
            chunk = response.read1(65536) if hasattr(response, "read1") else response.read(65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                truncated = True
                break
        return Answer(response.status, b"".join(chunks)[:limit], round(time.monotonic() - started, 3),
                      truncated=truncated)
    except ConnectionRefusedError:
        return Answer(None, b"", round(time.monotonic() - started, 3), f"connection refused by {host}:{port}")
    except TimeoutError:
        return Answer(None, b"", round(time.monotonic() - started, 3), f"no complete answer within {timeout_s:g} s")
    except http.client.HTTPException as exc:
        return Answer(None, b"", round(time.monotonic() - started, 3),
                      f"not an HTTP answer ({type(exc).__name__}: {str(exc)[:120]})")
    except OSError as exc:
        return Answer(None, b"", round(time.monotonic() - started, 3),
                      f"{type(exc).__name__}: {exc.strerror or exc}"[:200])
    finally:
        conn.close()


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
    """role -> metric name, from the `name="vllm:..."` arguments of vLLM's metrics.py."""
    names: dict[str, str] = {}
    for name in re.findall(r'name\s*=\s*"([A-Za-z_:][A-Za-z0-9_:]*)"', text):
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


def counters(samples: list[tuple[str, dict[str, str], float]], names: Mapping[str, str]) -> dict[str, Any]:
    """The spec-decode counters' totals over every engine and model label (per position for the curve)."""
    totals: dict[str, Any] = {}
    per_pos: dict[str, float] = {}
    wanted = {f"{names[r]}_total": r for r in names} | {names[r]: r for r in names}
    for name, labels, value in samples:
        role = wanted.get(name)
        if role is None:
            continue
        if role == "accepted_per_pos":
            pos = labels.get("position", "?")
            per_pos[pos] = per_pos.get(pos, 0.0) + value
        else:
            totals[role] = totals.get(role, 0.0) + value
    if per_pos:
        totals["accepted_per_pos"] = dict(sorted(per_pos.items(), key=lambda kv: (len(kv[0]), kv[0])))
    for prefix in KEPT_METRICS:
        found = [v for n, _, v in samples if n in (prefix, prefix + "_total")]
        if found:
            totals[prefix] = sum(found)
    return totals


# --- the installed vLLM beside the doctor -----------------------------------------------------------------

def _vllm_facts(python: str, timeout_s: float) -> dict[str, Any]:
    """The vLLM installed beside the doctor (in --python): located by the `locate` probe, never imported."""
    from dflash_doctor.facts.probes import run_probe

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

def _config(path: str | None) -> dict[str, Any] | None:
    if not path or not os.path.isdir(path):
        return None
    try:
        data = json.loads(read_regular(os.path.join(path, "config.json"), MAX_JSON))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    text: dict[str, Any] = data["text_config"] if isinstance(data.get("text_config"), dict) else data
    dflash: dict[str, Any] = data["dflash_config"] if isinstance(data.get("dflash_config"), dict) else {}
    return {"path": path, "num_hidden_layers": text.get("num_hidden_layers"),
            "quantization_config": data.get("quantization_config") or text.get("quantization_config"),
            "torch_dtype": data.get("torch_dtype") or data.get("dtype"),
            "target_layer_ids": dflash.get("target_layer_ids", data.get("target_layer_ids")),
            "num_target_layers": data.get("num_target_layers")}


def _flag(argv: Sequence[str], name: str) -> str | None:
    for at, word in enumerate(argv):
        if word == name and at + 1 < len(argv):
            return argv[at + 1]
        if word.startswith(name + "="):
            return word.split("=", 1)[1]
    return None


def _serve_context(argv: Sequence[str] | None, served_root: str | None) -> dict[str, Any]:
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
            spec = json.loads(spec_text) if spec_text else None
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
        ctx["max_model_len"] = _flag(words, "--max-model-len")
    ctx["target"] = _config(model or served_root)
    return ctx


# --- the run -----------------------------------------------------------------------------------------------

def _json(answer: Answer) -> Any:
    try:
        return json.loads(answer.body)
    except (ValueError, RecursionError):
        return None


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
    models = get(options.url, "/v1/models", key, options.timeout_s, MAX_JSON)
    listed = _json(models) if models.status == 200 else None
    data = listed.get("data") if isinstance(listed, dict) else None
    facts["models"] = {"status": models.status, **({"error": models.error} if models.error else {}),
                       "data": [{k: m.get(k) for k in ("id", "root", "parent", "max_model_len")}
                                for m in data[:16] if isinstance(m, dict)] if isinstance(data, list) else None}
    served = next((m for m in facts["models"]["data"] or [] if isinstance(m.get("id"), str)), None)
    before, samples_before = _metrics(options.url, key, options.timeout_s)
    from_source = (vllm or {}).get("metric_names") or {}
    exposed = names_exposed(samples_before)
    if from_source:
        names, names_from = dict(from_source), f"the installed vLLM's {METRICS_FILE.value}"
    elif exposed:
        names, names_from = exposed, "the names the server exposes"
    else:
        names, names_from = dict(SPEC_DECODE_METRICS.value), f"knowledge.live ({SPEC_DECODE_METRICS.read_from})"
    facts["metric_names"] = {"from": names_from, "names": names, "exposed": exposed}
    before["counters"] = counters(samples_before, names)
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
            body = _json(answer)
            if answer.error:
                result["error"] = answer.error
            elif answer.status != 200 or not isinstance(body, dict):
                result["error"] = f"HTTP {answer.status}: {answer.body[:160].decode('utf-8', 'replace')}"
            else:
                usage: dict[str, Any] = body["usage"] if isinstance(body.get("usage"), dict) else {}
                result["completion_tokens"] = usage.get("completion_tokens")
                result["prompt_tokens"] = usage.get("prompt_tokens")
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
            before["counters"] = counters(samples_before, names)
    after["counters"] = counters(samples_after, names)
    facts["metrics_after"] = after
    facts["context"] = _serve_context(options.serve_argv, served.get("root") if served else None)
    if options.baseline is not None:
        facts["baseline"] = dict(options.baseline)
    facts["seconds"] = round(time.monotonic() - started, 3)
    return facts


def collect(ctx: Context, earlier: Mapping[str, Any]) -> dict[str, Any]:
    """The `live` section: the server named by `--live`'s options, or a note that none was given."""
    given = ctx.options.get("live")
    if not isinstance(given, LiveOptions):
        return {"live": {"given": False}}
    return {"live": {"given": True, **gather(given, _vllm_facts(ctx.python, min(ctx.timeout_s, 30.0)))}}
