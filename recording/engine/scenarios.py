"""Ground-truth driver, run ON the GPU machine: the doctor's verdict, then the real `vllm serve`.

Usage: python3 scenarios.py PAYLOAD_DIR RESULT_DIR [KEYS]   (standard library only)
PAYLOAD_DIR holds models/ (recording/engine/make_models.py), fa/ (the flash-attn wheels) and VLLM_VERSION
(engine_transfer.py writes it: the release carried; $VLLM_VERSION overrides); the venvs
are made by setup.sh under RECORD_WORK (common.sh; default: TMPDIR/dflash-record). Each scenario runs in a
thread: the doctor (`serve --json`), then `vllm serve` in its own process group with a hard timeout; a server that answers /health gets one
/v1/completions request (a scenario may give a longer prompt), its /metrics' spec-decode lines are kept (the
drafts' acceptance), and it is stopped. Results: RESULT_DIR/NAME.json, NAME.report.json, NAME.log.
Scenarios 01-12 run on every release; 14-19 where their release range says (NEW_SCENARIOS).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

PAYLOAD = Path(sys.argv[1]).resolve()
RESULTS = Path(sys.argv[2]).resolve()
MODELS = PAYLOAD / "models"
VLLM_VERSION = os.environ.get("VLLM_VERSION") or (PAYLOAD / "VLLM_VERSION").read_text().strip()
SERVE_TIMEOUT = float(os.environ.get("SERVE_TIMEOUT", "240"))
ENV = {**os.environ, "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
       "NVSHMEM_DISABLE_NVLS": "1", "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1",
       "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
ENV.pop("PYTHONPATH", None)
WORK = Path(os.environ.get("RECORD_WORK") or os.path.join(tempfile.gettempdir(), "dflash-record"))  # common.sh's
CWD = tempfile.gettempdir()  # where the doctor and vLLM run: no checkout, no model directory
DOCTOR = [str(WORK / "doctor-venv" / "bin" / "python"), "-m", "dflash_doctor"]


def spec(drafter: str = "drafter", k: int | None = 15) -> str:
    s: dict[str, object] = {"method": "dflash", "model": str(MODELS / drafter)}
    if k is not None:
        s["num_speculative_tokens"] = k
    return json.dumps(s)


def serve_argv(port: int, *extra: str, drafter: str = "drafter", k: int | None = 15,
               max_model_len: str = "512", target: str = "target", spec_flags: bool = False) -> list[str]:
    """spec_flags: --spec-method/--spec-model/--spec-tokens (vLLM 0.26.0 engine/arg_utils.py:1542) in place of
    --speculative-config."""
    speculation = (["--spec-method", "dflash", "--spec-model", str(MODELS / drafter), "--spec-tokens", str(k)]
                   if spec_flags else ["--speculative-config", spec(drafter, k)])
    return ["vllm", "serve", str(MODELS / target), "--served-model-name", "toy", "--port", str(port),
            "--enforce-eager", "--max-model-len", max_model_len, "--max-num-seqs", "4",
            "--gpu-memory-utilization", "0.05", "--kv-cache-memory-bytes", "268435456",
            *extra, *speculation]


def version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".")[:3] if p.isdigit())


def venv_env(venv: str, **extra: str | None) -> dict[str, str]:
    """The venv's environment; a variable given as None is left out (a scenario that unsets one)."""
    env = {**ENV, "PATH": f"{WORK / venv / 'bin'}:" + ENV.get("PATH", ""), "VIRTUAL_ENV": str(WORK / venv), **extra}
    return {k: v for k, v in env.items() if v is not None}


def venv_python(venv: str) -> str:
    return str(WORK / venv / "bin" / "python")


ERROR_LINE = re.compile(r"(^|\s)(ERROR|Error|error:|Traceback|Exception|RuntimeError|ValueError|"
                        r"ModuleNotFoundError|ImportError|AssertionError)")
FINAL_EXC = re.compile(r"^\s*(\w+\.)*\w*(Error|Exception)\b.*")


def doctor(name: str, venv: str, argv: list[str], env: dict[str, str] | None = None) -> dict[str, object]:
    report = RESULTS / f"{name}.report.json"
    started = time.monotonic()
    proc = subprocess.run([*DOCTOR, "serve", "--python", venv_python(venv), "--json", str(report), "--timeout", "180",
                           "--", *argv], env=venv_env(venv, **(env or {})), cwd=CWD, capture_output=True, text=True,
                          timeout=400, check=False)
    (RESULTS / f"{name}.doctor.txt").write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    return {"exit_code": proc.returncode, "seconds": round(time.monotonic() - started, 2)}


SHORT_PROMPT = "w5 w6 w7"


def spec_decode_metrics(port: int) -> list[str]:
    """The server's spec-decode counters after the request (their names and values: the drafts' acceptance)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text = r.read().decode("utf-8", "replace")
    except (OSError, http.client.HTTPException) as exc:
        return [f"unread: {exc!r}"[:200]]
    return [ln for ln in text.splitlines() if "spec_decode" in ln and not ln.startswith("#")][:40]


def serve(name: str, venv: str, argv: list[str], port: int, prompt: str = SHORT_PROMPT,
          env: dict[str, str] | None = None) -> dict[str, object]:
    log_path = RESULTS / f"{name}.log"
    started = time.monotonic()
    with log_path.open("wb") as log:
        proc = subprocess.Popen(argv, env=venv_env(venv, **(env or {})), cwd=CWD, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        outcome: dict[str, object] = {"started": False, "answered": False}
        while True:
            if proc.poll() is not None:
                outcome["exit_status"] = proc.returncode
                outcome["seconds_to_failure"] = round(time.monotonic() - started, 2)
                break
            if time.monotonic() - started > SERVE_TIMEOUT:
                outcome["timed_out"] = True
                break
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    ok = r.status == 200
            except (OSError, http.client.HTTPException):
                ok = False
            if ok:
                outcome["started"] = True
                outcome["seconds_to_ready"] = round(time.monotonic() - started, 2)
                body = json.dumps({"model": "toy", "prompt": prompt, "max_tokens": 8,
                                   "temperature": 0}).encode()
                outcome["prompt_words"] = len(prompt.split())
                req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=body,
                                             headers={"Content-Type": "application/json"})
                try:
                    with urllib.request.urlopen(req, timeout=60) as r:
                        answer = json.loads(r.read())
                    outcome["answered"] = True
                    outcome["completion"] = {"text": answer["choices"][0]["text"],
                                             "usage": answer.get("usage")}
                except (OSError, http.client.HTTPException, ValueError, KeyError) as exc:
                    outcome["completion_error"] = repr(exc)[:400]
                time.sleep(1.0)
                outcome["alive_after_request"] = proc.poll() is None
                if outcome["alive_after_request"]:
                    outcome["spec_decode_metrics"] = spec_decode_metrics(port)
                break
            time.sleep(0.5)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            outcome["stopped_by_driver"] = True
            outcome["exit_status_after_stop"] = proc.returncode
    lines = log_path.read_text(errors="replace").splitlines()
    outcome["first_error_line"] = next((ln for ln in lines if ERROR_LINE.search(ln)), "")
    outcome["last_exception_line"] = next((ln.strip() for ln in reversed(lines) if FINAL_EXC.match(ln)), "")
    outcome["log_excerpt"] = [ln[:300] for ln in lines[-30:]]
    return outcome


def first_remediation(report_path: Path, finding_id: str) -> str:
    report = json.loads(report_path.read_text())
    for check in report["checks"]:
        for f in check["findings"]:
            if f["id"] == finding_id and f.get("remediation"):
                return str(f["remediation"][0]["command"])
    return ""


def scenario(name: str, venv: str, argv: list[str], port: int, prompt: str = SHORT_PROMPT,
             env: dict[str, str] | None = None, **notes: object) -> None:
    record: dict[str, object] = {"scenario": name, "vllm_version": VLLM_VERSION, "venv": venv,
                                 "command": shlex.join(argv), **({"env": env} if env else {}), **notes}
    try:
        record["doctor"] = doctor(name, venv, argv, env)
        record["engine"] = serve(name, venv, argv, port, prompt, env)
    except Exception as exc:  # noqa: BLE001 - the record says what broke
        record["driver_error"] = repr(exc)
    (RESULTS / f"{name}.json").write_text(json.dumps(record, indent=1) + "\n")
    print(name, json.dumps({k: record.get(k) for k in ("doctor",)}),
          json.dumps({k: v for k, v in (record.get("engine") or {}).items() if k != "log_excerpt"})[:600],
          flush=True)


def fa4_chain() -> None:
    scenario("02-flash-attn-4-only", "v2", serve_argv(8102), 8102)
    command = first_remediation(RESULTS / "02-flash-attn-4-only.report.json", "namespaces.v4-without-v2")
    done = subprocess.run(["bash", "-c", command], env=venv_env("v2"), cwd=CWD, capture_output=True,
                          text=True, timeout=120, check=False) if command else None
    scenario("03-flash-attn-4-remediated", "v2", serve_argv(8103), 8103, remediation_applied=command,
             remediation_exit=None if done is None else done.returncode,
             remediation_output=None if done is None else (done.stdout + done.stderr)[-1500:])


# A prompt longer than drafter-short-context's 256 positions, shorter than the served 512 with 8 tokens to come.
LONG_PROMPT = " ".join(f"w{5 + i % 500}" for i in range(300))
V1 = {"VLLM_USE_V2_MODEL_RUNNER": "0"}
V2 = {"VLLM_USE_V2_MODEL_RUNNER": "1"}

# The scenarios that name a rule whose release range starts after 0.20.1: key -> (first release, the job).
NEW_SCENARIOS: dict[str, tuple[str, object]] = {
    # the default runner for a dense generate model is V2 from 0.24.0 (config/vllm.py use_v2_model_runner);
    # V1 is still there in 0.26.0: the same healthy command on it
    "14-v1-model-runner": ("0.24.0", lambda: scenario(
        "14-v1-model-runner", "v0", serve_argv(8114), 8114, env=V1)),
    # knowledge.dflash_reports.DRAFTER_CONTEXT_V2: on V2 a request past the drafter's context reads past its
    # rotary cache (the doctor: CUDA illegal memory access, engine down); V1 stops drafting for it
    "15-drafter-context-short-v2": ("0.24.0", lambda: scenario(
        "15-drafter-context-short-v2", "v0", serve_argv(8115, drafter="drafter-short-context"), 8115,
        prompt=LONG_PROMPT, env=V2)),
    "16-drafter-context-short-v1": ("0.24.0", lambda: scenario(
        "16-drafter-context-short-v1", "v0", serve_argv(8116, drafter="drafter-short-context"), 8116,
        prompt=LONG_PROMPT, env=V1)),
    # knowledge.dflash_reports.FUSED_KV_RAW_WEIGHT / QUANTIZED_PAIR_ACCEPTANCE: dies, or serves (acceptance kept)
    "17-fp8-drafter": ("0.20.1", lambda: scenario(
        "17-fp8-drafter", "v0", serve_argv(8117, drafter="drafter-fp8"), 8117)),
    "18-spec-flags": ("0.26.0", lambda: scenario(
        "18-spec-flags", "v0", serve_argv(8118, spec_flags=True), 8118)),
    # knowledge.dflash_reports.PADDED_VOCAB_V2 (0.24 only, fixed in 0.25.1): a target padded to 576 ids, a
    # 512-id drafter without lm_head that drafts the target's token only through the shared lm_head
    "19-padded-vocab-shared-lm-head": ("0.24.0", lambda: scenario(
        "19-padded-vocab-shared-lm-head", "v0", serve_argv(8119, target="padded-target", drafter="padded-drafter"),
        8119, env=V2)),
    # vLLM's sampler asks FlashInfer at engine start unless VLLM_USE_FLASHINFER_SAMPLER=0
    # (v1/sample/ops/topk_topp_sampler.py flashinfer_sampler_supported; "assumes flashinfer is installed"): the
    # healthy command with flashinfer-python absent and the variable unset (the other scenarios set it to 0 where
    # the transfer leaves FlashInfer out)
    "20-flashinfer-missing": ("0.26.0", lambda: scenario(
        "20-flashinfer-missing", "v0", serve_argv(8120), 8120, env={"VLLM_USE_FLASHINFER_SAMPLER": None})),
}


def main() -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    only = set(sys.argv[3].split(",")) if len(sys.argv) > 3 else None
    jobs = {
        "01-healthy": lambda: scenario("01-healthy", "v0", serve_argv(8101), 8101),
        "02": fa4_chain,
        "04-flash-attn-2-no-extension": lambda: scenario("04-flash-attn-2-no-extension", "v4", serve_argv(8104), 8104),
        "05-batched-tokens-too-small": lambda: scenario(
            "05-batched-tokens-too-small", "v0", serve_argv(8105, "--max-num-batched-tokens", "48"), 8105),
        "06-target-layer-ids-out-of-range": lambda: scenario(
            "06-target-layer-ids-out-of-range", "v0", serve_argv(8106, drafter="drafter-ids-out-of-range"), 8106),
        "07-fc-width-mismatch": lambda: scenario(
            "07-fc-width-mismatch", "v0", serve_argv(8107, drafter="drafter-fc-width"), 8107),
        "08-num-speculative-tokens-missing": lambda: scenario(
            "08-num-speculative-tokens-missing", "v0", serve_argv(8108, k=None), 8108),
        "09-tensor-parallel-2-on-one-gpu": lambda: scenario(
            "09-tensor-parallel-2-on-one-gpu", "v0", serve_argv(8109, "--tensor-parallel-size", "2"), 8109),
        "10-max-model-len-above-target": lambda: scenario(
            "10-max-model-len-above-target", "v0", serve_argv(8110, max_model_len="8192"), 8110),
        # The doctor asks vLLM's own attention selector on the real GPU; the engine shows whether it serves.
        "11-kv-cache-fp8": lambda: scenario(
            "11-kv-cache-fp8", "v0", serve_argv(8111, "--kv-cache-dtype", "fp8"), 8111),
        # 11's toy target is float16; FlashAttention 3 wants bfloat16 output for an fp8 query
        "12-kv-cache-fp8-bfloat16": lambda: scenario(
            "12-kv-cache-fp8-bfloat16", "v0", serve_argv(8112, "--kv-cache-dtype", "fp8", "--dtype", "bfloat16"), 8112),
        **{key: job for key, (since, job) in NEW_SCENARIOS.items() if version(VLLM_VERSION) >= version(since)},
    }
    threads = [threading.Thread(target=fn, name=key) for key, fn in jobs.items()  # type: ignore[arg-type]
               if only is None or key in only]
    for t in threads:
        t.start()
        time.sleep(1.0)
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
