"""A local HTTP server that replays what a real vLLM server answered (fixtures/live/*.exchanges.json).

The exchanges were recorded on the GPU machine by recording/engine/live_driver.py's proxy, between
`dflash-doctor live` and `vllm serve` 0.20.1: every request and answer, in order, byte for byte. The replay
answers each request with the next recorded answer to the same method and path (the last one again once
they are used up), so the doctor sees /metrics before and after its workload exactly as it did there.
`mode` breaks the server on purpose: "hang" accepts and never answers, "garbage" answers with bytes that
are not HTTP, "hang-metrics" answers everything but /metrics. `edited` changes recorded answers (a counter's
value in a real /metrics text, a field of a real /v1/models answer); `dripping` is a server that answers one
byte every few seconds, below the socket level of http.server.
"""

from __future__ import annotations

import base64
import http.server
import json
import re
import socket
import socketserver
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures" / "live"


def exchanges(name: str) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads((FIXTURES / f"{name}.exchanges.json").read_text())
    return data


class _Replay(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, recorded: list[dict[str, Any]], mode: str) -> None:
        self.queues: dict[tuple[str, str], deque[dict[str, Any]]] = defaultdict(deque)
        self.last: dict[tuple[str, str], dict[str, Any]] = {}
        for ex in recorded:
            self.queues[(ex["method"], ex["path"])].append(ex)
        self.mode = mode
        self.seen: list[tuple[str, str, dict[str, str], bytes]] = []
        self.stop = threading.Event()
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Replay

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.seen.append((self.command, self.path, dict(self.headers.items()), body))
        mode = self.server.mode
        if mode == "hang" or (mode == "hang-metrics" and self.path == "/metrics"):
            self.server.stop.wait(60)
            return
        if mode == "garbage":
            self.wfile.write(b"\x00\x17garbage that is not HTTP\r\n\r\n")
            return
        key = (self.command, self.path)
        queue = self.server.queues.get(key)
        ex = queue.popleft() if queue else self.server.last.get(key)
        if ex is None:
            self.send_error(404)
            return
        self.server.last[key] = ex
        data = base64.b64decode(ex["body_b64"])
        self.send_response(ex["status"])
        for k, v in (ex.get("headers") or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = _answer
    do_POST = _answer


@contextmanager
def replay(recorded: list[dict[str, Any]], mode: str = "") -> Iterator[_Replay]:
    server = _Replay(recorded, mode)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stop.set()
        server.shutdown()
        server.server_close()


def url_of(server: socketserver.TCPServer) -> str:
    host, port = server.server_address[:2]
    return f"http://{host!s}:{port}"


def refused_port() -> int:
    """A port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    time.sleep(0.01)
    return port


def edited(name: str, path: str, edit: Callable[[int, bytes], bytes]) -> list[dict[str, Any]]:
    """The recorded exchanges of `name`, each answer to `path` passed through `edit(i, body)` (i: 0 for the
    first answer to that path, 1 for the next...)."""
    out, seen = [], 0
    for ex in exchanges(name):
        if ex["path"] == path:
            ex = {**ex, "body_b64": base64.b64encode(edit(seen, base64.b64decode(ex["body_b64"]))).decode()}
            seen += 1
        out.append(ex)
    return out


def with_sample(metrics: bytes, name: str, value: str) -> bytes:
    """A Prometheus text with the value of every sample of `name` (whatever its labels) replaced."""
    text = metrics.decode()
    pattern = re.compile(rf"^({re.escape(name)}(?:{{[^}}]*}})?) \S+$", re.MULTILINE)
    assert pattern.search(text), f"no {name} in the recorded /metrics"
    return pattern.sub(lambda m: f"{m.group(1)} {value}", text).encode()


def with_json(body: bytes, change: Callable[[Any], None]) -> bytes:
    data = json.loads(body)
    change(data)
    return json.dumps(data).encode()


@contextmanager
def dripping(what: str, every_s: float = 2.0, for_s: float = 45.0) -> Iterator[str]:
    """A server on 127.0.0.1 (its URL is yielded) that reads each request, then answers one byte every
    `every_s` seconds: "headers" drips a header line that never ends; "chunk-size" sends its headers at once
    (chunked) and drips a chunk-size line that never ends. Every socket read of the client is answered in
    time; only a deadline on the whole request ends it. It closes each connection after `for_s`."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
    start, drip = ((head + b"X-Drip: ", b"a") if what == "headers" else
                   (head + b"Transfer-Encoding: chunked\r\n\r\n", b"0"))
    stop = threading.Event()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)

    def answer(conn: socket.socket) -> None:
        with conn:
            try:
                conn.settimeout(5)
                conn.recv(65536)
                conn.sendall(start)
                ends = time.monotonic() + for_s
                while not stop.wait(every_s) and time.monotonic() < ends:
                    conn.sendall(drip)
            except OSError:
                pass

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(2)
        listener.close()
