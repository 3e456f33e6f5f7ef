"""`dflash-doctor fleet --ray`: a real two-node Ray cluster on loopback, one node's environment drifted.

The test starts a head (custom resource `node_a`) and a worker (`node_b`) with `ray start --block`, each in a
process group of its own that dies with the test (PR_SET_PDEATHSIG, and Ray's own fate sharing for what they
start); they are stopped by SIGTERM to those processes, never by `ray stop` (which would stop every Ray on the
machine). The fault is real: the worker node's processes see a PYTHONPATH entry holding the real flash-attn-4
wheel, installed by pip, so the doctor's task on that node finds a stack distribution the head's lacks.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest
from conftest import Doctor, validate_report
from realenv import _host_pip, fa4_wheel

pytest.importorskip("ray", reason="the fleet extra (pip install '.[fleet]') is not installed")

RAY = str(Path(sys.executable).with_name("ray"))
FLEET_SCHEMA = json.loads((Path(__file__).resolve().parent.parent / "dflash_doctor" / "documents" / "schema" / "fleet-v1.json").read_text())
PR_SET_PDEATHSIG = 1


def free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _die_with_parent() -> None:
    os.setsid()
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def start_node(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([RAY, "start", "--block", *args], stdout=log.open("wb"), stderr=subprocess.STDOUT,
                            env=env, preexec_fn=_die_with_parent)  # noqa: PLW1509 - prctl must run in the child


def wait_started(proc: subprocess.Popen[bytes], log: Path, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while b"Ray runtime started" not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"ray start failed:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.2)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the `ray start --block` we started: it shuts down its node; then its whole group, surely."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # whatever of that group is left (it is the group we created)
    except ProcessLookupError:
        pass


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[dict[str, object]]:
    started = time.monotonic()
    fault = tmp_path / "fault-site"
    subprocess.run([*_host_pip(), "install", "--quiet", "--no-deps", "--no-index", "--target", str(fault),
                    str(fa4_wheel())], check=True, capture_output=True)
    gcs, client, *agent = free_ports(10)
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("PYTHONPATH", None)
    temp = Path(f"/tmp/ray-dfd-{os.getpid()}")  # short: Ray's socket paths live under it
    common = ["--node-ip-address=127.0.0.1", "--num-cpus=1", "--disable-usage-stats", f"--temp-dir={temp}",
              "--include-log-monitor=false"]
    nodes: list[subprocess.Popen[bytes]] = []
    try:
        nodes.append(start_node(["--head", f"--port={gcs}", f"--ray-client-server-port={client}", "--include-dashboard=false",
                                 '--resources={"node_a": 1}', f"--dashboard-agent-listen-port={agent[0]}",
                                 f"--dashboard-agent-grpc-port={agent[1]}", f"--metrics-export-port={agent[2]}",
                                 f"--runtime-env-agent-port={agent[3]}", *common], tmp_path / "head.log", env))
        # The worker starts at once: it waits for the head's GCS by itself, and its start-up overlaps the head's.
        nodes.append(start_node([f"--address=127.0.0.1:{gcs}", '--resources={"node_b": 1}',
                                 f"--dashboard-agent-listen-port={agent[4]}", f"--dashboard-agent-grpc-port={agent[5]}",
                                 f"--metrics-export-port={agent[6]}", f"--runtime-env-agent-port={agent[7]}", *common],
                                tmp_path / "worker.log", {**env, "PYTHONPATH": str(fault)}))
        wait_started(nodes[0], tmp_path / "head.log")
        wait_started(nodes[1], tmp_path / "worker.log")
        yield {"address": f"127.0.0.1:{gcs}", "startup_s": time.monotonic() - started}
    finally:
        for proc in reversed(nodes):
            stop(proc)
        subprocess.run(["rm", "-rf", str(temp)], check=False)


def test_fleet_runs_the_doctor_on_every_node_and_singles_out_the_drifted_one(
        doctor: Doctor, cluster: dict[str, object], tmp_path: Path) -> None:
    started = time.monotonic()
    view_path, out_dir = tmp_path / "fleet.json", tmp_path / "nodes"
    proc = doctor("fleet", "--ray", str(cluster["address"]), "--no-gpu", "--min-nodes", "2", "--node-timeout", "120",
                  "--json", str(view_path), "--out-dir", str(out_dir), timeout=180)
    fleet_s = time.monotonic() - started
    print(f"\ncluster start {cluster['startup_s']:.1f} s, fleet command {fleet_s:.1f} s, "
          f"load average {os.getloadavg()[0]:.1f}")
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 1, proc.stdout + proc.stderr
    view = json.loads(view_path.read_text())
    jsonschema.validate(view, FLEET_SCHEMA)
    hosts = {tuple(sorted(h["info"]["ray"]["resources"])): h for h in view["hosts"]}
    assert set(hosts) == {("node_a",), ("node_b",)}
    head, worker = hosts[("node_a",)], hosts[("node_b",)]
    assert head["info"]["ray"]["head"] is True and worker["info"]["ray"]["head"] is False
    assert view["hosts"][0] is not None and view["hosts"][0]["label"] == head["label"]  # the head comes first
    # The drift: flash-attn-4 on the worker only, which is singled out.
    drift = {d["what"]: d for d in view["drift"]}
    assert drift["flash-attn-4"]["values"] == {"absent": [head["label"]], "4.0.0b36": [worker["label"]]}
    assert view["drifted_hosts"] == [worker["label"]] and not head["drifted"]
    assert head["exit_code"] == 0 and worker["exit_code"] == 1
    assert head["fingerprint"] != worker["fingerprint"]
    assert f"{worker['label']} *" in proc.stdout and "flash-attn-4: absent on 1 host" in proc.stdout
    # Each node's own report was saved, valid, and made on that node.
    saved = {p.stem: validate_report(json.loads(p.read_text())) for p in out_dir.glob("*.json")}
    assert len(saved) == 2
    for report in saved.values():
        assert report["host"]["ray"]["node_id"] in {head["info"]["ray"]["node_id"], worker["info"]["ray"]["node_id"]}
        assert report["host"]["ray"]["address"] in ("127.0.0.1", "<ip>")  # redacted unless --keep-hosts
    assert fleet_s < 60


def test_a_wrong_address_fails_fast_with_exit_2(doctor: Doctor) -> None:
    (port,) = free_ports(1)
    started = time.monotonic()
    proc = doctor("fleet", "--ray", f"127.0.0.1:{port}", "--no-gpu")
    assert proc.returncode == 2
    assert f"nothing answers at 127.0.0.1:{port}" in proc.stderr and "Traceback" not in proc.stderr
    assert time.monotonic() - started < 20  # Ray alone would retry for minutes
    assert doctor("fleet", "--no-gpu").returncode == 2  # --ray is required
