"""`dflash-doctor live` against the real vLLM server, run ON the GPU machine (standard library only).

Usage: python3 live_driver.py PAYLOAD_DIR RESULT_DIR   (after setup.sh; models from live_models.py in
PAYLOAD_DIR/live-models)

Starts `vllm serve` with DFlash for the accepted pair (port 8201) and the rejected pair (port 8202), the
target without speculation (8204), and `dflash-doctor serve --exec --live` for the accepted pair (8203). Between the doctor's `live` and each
server sits a recording proxy: every request the doctor makes and every answer, byte for byte, in order
(RESULT_DIR/NAME.exchanges.json); the CI tests replay them. Results: NAME.report.json (the doctor's report),
NAME.txt (its terminal output), NAME.exchanges.json, NAME.vllm.log.
"""

from __future__ import annotations

import base64
import http.client
import http.server
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

PAYLOAD = Path(sys.argv[1]).resolve()
RESULTS = Path(sys.argv[2]).resolve()
MODELS = PAYLOAD / "live-models"
SERVE_TIMEOUT = float(os.environ.get("SERVE_TIMEOUT", "240"))
WORK = Path(os.environ.get("RECORD_WORK") or os.path.join(tempfile.gettempdir(), "dflash-record"))  # common.sh's
CWD = tempfile.gettempdir()
TARGET_PYTHON = str(WORK / "v0" / "bin" / "python")
ENV = {**os.environ, "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
       "NVSHMEM_DISABLE_NVLS": "1", "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1",
       "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "PATH": f"{WORK / 'v0' / 'bin'}:" + os.environ.get("PATH", ""),
       "VIRTUAL_ENV": str(WORK / "v0")}
ENV.pop("PYTHONPATH", None)
DOCTOR = [str(WORK / "doctor-venv" / "bin" / "python"), "-m", "dflash_doctor"]
K = 15


def serve_argv(port: int, drafter: str | None) -> list[str]:
    spec = json.dumps({"method": "dflash", "model": str(MODELS / drafter), "num_speculative_tokens": K}) if drafter else ""
    return ["vllm", "serve", str(MODELS / "live-target"), "--served-model-name", "toy", "--port", str(port),
            "--enforce-eager", "--max-model-len", "512", "--max-num-seqs", "4", "--gpu-memory-utilization", "0.05",
            "--kv-cache-memory-bytes", "268435456", *(["--speculative-config", spec] if drafter else [])]


class Recorder(http.server.ThreadingHTTPServer):
    def __init__(self, port: int, upstream: int) -> None:
        self.upstream = upstream
        self.exchanges: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", port), Handler)


class Handler(http.server.BaseHTTPRequestHandler):
    server: Recorder

    def log_message(self, *args: Any) -> None:
        pass

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        started = time.time()
        conn = http.client.HTTPConnection("127.0.0.1", self.server.upstream, timeout=120)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        conn.request(self.command, self.path, body=body or None, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        kept = {k: v for k, v in resp.getheaders() if k.lower() in ("content-type",)}
        with self.server.lock:
            self.server.exchanges.append({
                "method": self.command, "path": self.path,
                "request": body.decode("utf-8", "replace") if body else None,
                "status": resp.status, "headers": kept, "seconds": round(time.time() - started, 4),
                "body_b64": base64.b64encode(data).decode(),
            })
        self.send_response(resp.status)
        for k, v in kept.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        conn.close()

    do_GET = _forward
    do_POST = _forward


def wait_ready(port: int, proc: subprocess.Popen[bytes], started: float) -> dict[str, Any]:
    while True:
        if proc.poll() is not None:
            return {"started": False, "exit_status": proc.returncode, "seconds": round(time.monotonic() - started, 1)}
        if time.monotonic() - started > SERVE_TIMEOUT:
            return {"started": False, "timed_out": True}
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return {"started": True, "seconds_to_ready": round(time.monotonic() - started, 1)}
        except (OSError, http.client.HTTPException):
            pass
        time.sleep(0.5)


def doctor_live(name: str, port: int, *extra: str) -> dict[str, Any]:
    started = time.monotonic()
    proc = subprocess.run([*DOCTOR, "live", f"http://127.0.0.1:{port}", "--python", TARGET_PYTHON,
                           "--no-color", "--json", str(RESULTS / f"{name}.report.json"),
                           "--markdown", str(RESULTS / f"{name}.md"), "--junit", str(RESULTS / f"{name}.junit.xml"),
                           *extra], env=ENV, cwd=CWD, capture_output=True, text=True, timeout=300, check=False)
    (RESULTS / f"{name}.txt").write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    return {"exit_code": proc.returncode, "seconds": round(time.monotonic() - started, 2)}


def pair(name: str, drafter: str | None, port: int, proxy_port: int, baseline: Path | None = None,
         wait_for: threading.Event | None = None, done: threading.Event | None = None) -> None:
    record: dict[str, Any] = {"name": name, "drafter": drafter, "command": serve_argv(port, drafter)}
    log = (RESULTS / f"{name}.vllm.log").open("wb")
    started = time.monotonic()
    proc = subprocess.Popen(serve_argv(port, drafter), env=ENV, cwd=CWD, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        record["engine"] = wait_ready(port, proc, started)
        if record["engine"].get("started"):
            recorder = Recorder(proxy_port, port)
            thread = threading.Thread(target=recorder.serve_forever, daemon=True)
            thread.start()
            record["doctor"] = doctor_live(name, proxy_port)
            recorder.shutdown()
            (RESULTS / f"{name}.exchanges.json").write_text(json.dumps(recorder.exchanges, indent=1) + "\n")
            if baseline is not None and wait_for is not None:
                wait_for.wait(200)
                if baseline.exists():
                    record["doctor_vs_baseline"] = doctor_live(f"{name}-vs-baseline", port, "--baseline", str(baseline))
    finally:
        if done is not None:
            done.set()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        (RESULTS / f"{name}.json").write_text(json.dumps(record, indent=1) + "\n")
        print(name, json.dumps({k: v for k, v in record.items() if k != "command"}), flush=True)


def serve_exec_live(port: int) -> None:
    """The doctor starts the server itself (preflight, start, /health, live), and leaves it running."""
    started = time.monotonic()
    argv = [*DOCTOR, "serve", "--python", TARGET_PYTHON, "--skip", "distributions", "--timeout", "180",
            "--no-color", "--json", str(RESULTS / "serve-exec-live.report.json"), "--exec", "--live",
            "--live-wait", "240", "--", *serve_argv(port, "live-accepted")]
    proc = subprocess.run(argv, env=ENV, cwd=CWD, capture_output=True, text=True, timeout=420, check=False)
    (RESULTS / "serve-exec-live.txt").write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    left = None
    for line in proc.stderr.splitlines():
        if "left running: PID" in line:
            left = int(line.split("PID", 1)[1].split()[0])
    alive = None
    if left is not None:
        try:
            os.kill(left, 0)
            alive = True
        except OSError:
            alive = False
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                alive = alive and r.status == 200
        except (OSError, http.client.HTTPException):
            alive = False
        try:
            os.killpg(left, signal.SIGTERM)
        except OSError:
            pass
    record = {"exit_code": proc.returncode, "seconds": round(time.monotonic() - started, 1), "left_running_pid": left,
              "alive_after_doctor_exit": alive}
    (RESULTS / "serve-exec-live.json").write_text(json.dumps(record, indent=1) + "\n")
    print("serve-exec-live", json.dumps(record), flush=True)


def main() -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    accepted_done = threading.Event()
    jobs = [
        threading.Thread(target=pair, args=("accepted", "live-accepted", 8201, 8301), kwargs={"done": accepted_done}),
        # the rejected pair is judged against the accepted one's report, saved as the baseline (same prompts)
        threading.Thread(target=pair, args=("rejected", "live-rejected", 8202, 8302, RESULTS / "accepted.report.json"),
                         kwargs={"wait_for": accepted_done}),
        threading.Thread(target=serve_exec_live, args=(8203,)),
        threading.Thread(target=pair, args=("no-spec", None, 8204, 8304)),  # no --speculative-config at all
    ]
    for t in jobs:
        t.start()
        time.sleep(1.0)
    for t in jobs:
        t.join()


if __name__ == "__main__":
    main()
