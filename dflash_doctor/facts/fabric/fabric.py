"""Facts of the multi-GPU fabric for tensor parallelism (section `fabric`).

In the doctor's process: NVML (nvidia-ml-py, as the `gpu` collector uses it) for every pair of GPUs: the
topology level between them, P2P status for read, write, NVLink and atomics, the NVLinks up between them
and their version, and each GPU's PCIe generation and width now and at most; and the machine around them
(`facts.fabric.machine`). In the target, each probe its own process with a timeout, NCCL_NVLS_ENABLE=0 always:
`fabric_peer` (can_device_access_peer and a write-and-verify copy per pair) and `fabric_nccl`, one process
per rank of the TP group, run twice: as vLLM will run it, then with NCCL_P2P_DISABLE=1 as the control arm.
They are forked children of the run's one target process, which imported torch once (`facts.probes.SharedTargetProcess`,
as the kernel families are), each given its NCCL variables as arguments; without that process, or with fewer
slots in it than ranks (the ranks of an arm must run at once), each is an interpreter of its own.
A rank that does not finish is killed at the timeout and recorded as hung. The group's size is the serve
command's --tensor-parallel-size, or every visible GPU without a serve command.
"""

from __future__ import annotations

import importlib
import os
import socket
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from dflash_doctor.context import Context
from dflash_doctor.facts.fabric.fabric_shapes import Fabric
from dflash_doctor.facts.fabric.machine import machine_facts, sysfs_bdf
from dflash_doctor.facts.gpu.nvml import _error_name, _text
from dflash_doctor.facts.gpu.nvml_shapes import Gpu
from dflash_doctor.facts.probes import ProbeJob, ProbeOutcome, run_probe
from dflash_doctor.facts.serve.serve_shapes import ServeArgs
from dflash_doctor.facts.shape import Collected, by_section

__all__ = ["collect", "group_size", "nvml_fabric"]

SECTION = "fabric"
NVML_TIMEOUT_S = 20.0
PEER_BYTES = 4 << 20
NCCL_SIZES = (4, 16 << 20)
# pynvml spells some of these as tuples by mistake (`NVML_P2P_CAPS_INDEX_READ = 0,`): nvml.h's values.
P2P_CAPS = {"read": 0, "write": 1, "nvlink": 2, "atomics": 3}
TOPOLOGY_LEVELS = {0: "internal", 10: "single_switch", 20: "multiple_switches", 30: "host_bridge",
                   40: "numa_node", 50: "system"}


def collect(ctx: Context, earlier: Mapping[str, object]) -> Collected:
    if ctx.no_gpu:
        return by_section(Fabric.collected({"skipped": "--no-gpu"}))
    started = time.monotonic()
    gpu = Gpu.read(earlier.get(Gpu.SECTION))
    devices = gpu.devices if gpu is not None else []
    requested, source = group_size(ServeArgs.read(earlier.get(ServeArgs.SECTION)), gpu)
    facts: dict[str, Any] = {"requested_tp": requested, "tp_source": source}
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    facts["nvml"] = nvml_fabric(min(ctx.timeout_s, NVML_TIMEOUT_S))
    timings["nvml"] = time.monotonic() - t0
    t0 = time.monotonic()
    bdfs = [sysfs_bdf(d.pci_bus_id) for d in devices if d.pci_bus_id]
    facts["host"] = machine_facts(bdfs, os.environ)
    timings["host"] = time.monotonic() - t0
    if not devices:
        facts["probes_skipped"] = "NVML lists no GPU"
    else:
        env = dict(os.environ, NCCL_NVLS_ENABLE="0")
        world = min(requested, len(devices))  # one probe process per rank: never more than the GPUs NVML lists
        if requested >= 2:
            t0 = time.monotonic()
            peer = _run(ctx, [ProbeJob("peer", "fabric_peer", {"world": requested, "bytes": PEER_BYTES})], env)[0]
            timings["peer"] = time.monotonic() - t0
            facts["peer"] = {"run": peer.as_facts(), "data": peer.data if isinstance(peer.data, dict) else None}
            count = (peer.data or {}).get("device_count") if isinstance(peer.data, dict) else None
            if isinstance(count, int):
                world = max(1, min(requested, count))
        else:
            facts["peer"] = {"skipped": "TP 1: no pair of GPUs"}
        facts["nccl_world"] = world
        arms: dict[str, Any] = {}
        t0 = time.monotonic()
        arms["p2p"] = nccl_arm(ctx, world, env)
        timings["nccl_p2p"] = time.monotonic() - t0
        if world >= 2:
            t0 = time.monotonic()
            arms["p2p_disabled"] = nccl_arm(ctx, world, dict(env, NCCL_P2P_DISABLE="1"))
            timings["nccl_p2p_disabled"] = time.monotonic() - t0
        facts["nccl"] = arms
    timings["total"] = time.monotonic() - started
    facts["seconds"] = {k: round(v, 3) for k, v in timings.items()}
    return by_section(Fabric.collected(facts))


def group_size(serve: ServeArgs | None, gpu: Gpu | None) -> tuple[int, str]:
    """The TP size to test: the serve command's, else every GPU a CUDA process will see."""
    if serve is not None and serve.given and not serve.program_error:
        tp = serve.as_resolved().fields.tensor_parallel_size  # the TP vLLM's own validation resolved, where it ran
        return (tp if isinstance(tp, int) and tp >= 1 else 1), "serve command"
    visible = gpu.cuda_visible_devices if gpu is not None else None
    count = len(gpu.devices) if gpu is not None else 0
    if visible is not None:
        count = min(count, len([e for e in visible.split(",") if e.strip()]))
    return max(1, count), "visible GPUs"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def nccl_arm(ctx: Context, world: int, env: dict[str, str]) -> dict[str, Any]:
    """One all-reduce over `world` ranks, each its own probe process; a rank past the timeout is hung."""
    port = _free_port()
    started = time.monotonic()
    nccl = {k: v for k, v in env.items() if k.startswith("NCCL_")}
    jobs = [ProbeJob(f"rank-{r}", "fabric_nccl", {"rank": r, "world": world, "port": port,
                                                   "sizes": list(NCCL_SIZES), "environ": nccl})
            for r in range(world)]
    outcomes = _run(ctx, jobs, env)
    return {"world": world, "env": {k: env[k] for k in ("NCCL_P2P_DISABLE", "NCCL_NVLS_ENABLE") if k in env},
            "seconds": round(time.monotonic() - started, 3),
            "ranks": [{"run": o.as_facts(), "data": o.data if isinstance(o.data, dict) else None} for o in outcomes]}


def _run(ctx: Context, jobs: list[ProbeJob], env: dict[str, str]) -> list[ProbeOutcome]:
    """Run `jobs` at once, in the order given: forked from the run's target process where it has a slot for
    each (no second `import torch`), else each an interpreter of its own with `env`."""
    target_process = ctx.target_process
    if target_process is not None and len(jobs) <= target_process.parallel:
        outcomes = target_process.run(jobs)
        return [outcomes[job.name] for job in jobs]

    def alone(job: ProbeJob) -> ProbeOutcome:
        return run_probe(ctx.python, job.probe, job.args, timeout_s=ctx.timeout_s, cwd=ctx.cwd, env=env)

    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        return list(pool.map(alone, jobs))


# ------------------------------------------------------------------------------------------------- NVML


def nvml_fabric(timeout_s: float = NVML_TIMEOUT_S) -> dict[str, Any]:
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["facts"] = _gather()
        except Exception as exc:  # noqa: BLE001 - NVML bindings raise many types; each becomes a fact
            box["facts"] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}

    thread = threading.Thread(target=work, name="dflash-doctor-nvml-fabric", daemon=True)
    thread.start()
    thread.join(timeout_s)
    return box.get("facts") or {"ok": False, "error": f"NVML did not answer within {timeout_s:g} s"}


def _gather() -> dict[str, Any]:
    try:
        pynvml = importlib.import_module("pynvml")
    except ImportError as exc:
        return {"ok": False, "error": f"nvidia-ml-py is not importable: {exc}"}
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return {"ok": False, "error": f"{_error_name(pynvml, exc)}: {exc}"}
    try:
        count = int(pynvml.nvmlDeviceGetCount())
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        devices = [_device(pynvml, i, h) for i, h in enumerate(handles)]
        pairs = [_pair(pynvml, i, j, handles, devices) for i in range(count) for j in range(i + 1, count)]
        return {"ok": True, "devices": devices, "pairs": pairs}
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


def _ask(pynvml: Any, errors: dict[str, str], name: str, query: Any) -> Any:
    try:
        return query()
    except pynvml.NVMLError as exc:
        errors[name] = _error_name(pynvml, exc)
        return None


def _device(pynvml: Any, index: int, handle: Any) -> dict[str, Any]:
    errors: dict[str, str] = {}

    def ask(name: str, fn: str) -> Any:
        return _ask(pynvml, errors, name, lambda: getattr(pynvml, fn)(handle)) if hasattr(pynvml, fn) else None

    pcie = {"gen_now": ask("gen_now", "nvmlDeviceGetCurrPcieLinkGeneration"),
            "gen_max": ask("gen_max", "nvmlDeviceGetMaxPcieLinkGeneration"),
            "gpu_gen_max": ask("gpu_gen_max", "nvmlDeviceGetGpuMaxPcieLinkGeneration"),
            "width_now": ask("width_now", "nvmlDeviceGetCurrPcieLinkWidth"),
            "width_max": ask("width_max", "nvmlDeviceGetMaxPcieLinkWidth")}
    links: list[dict[str, Any]] = []
    for link in range(int(getattr(pynvml, "NVML_NVLINK_MAX_LINKS", 18))):
        state = _ask(pynvml, errors, "nvlink_state", lambda link=link: pynvml.nvmlDeviceGetNvLinkState(handle, link))
        if state is None:
            break  # not supported, or past the last link
        if state != pynvml.NVML_FEATURE_ENABLED:
            links.append({"link": link, "up": False})
            continue
        remote = _ask(pynvml, errors, "nvlink_remote", lambda link=link: pynvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link))
        links.append({"link": link, "up": True,
                      "version": _ask(pynvml, errors, "nvlink_version",
                                      lambda link=link: pynvml.nvmlDeviceGetNvLinkVersion(handle, link)),
                      "remote_bus_id": _text(remote.busId) if remote is not None else None})
    errors.pop("nvlink_state", None)  # the loop's end, not a failure
    bus = _ask(pynvml, errors, "pci", lambda: pynvml.nvmlDeviceGetPciInfo(handle))
    return {"index": index, "pci_bus_id": _text(bus.busId) if bus is not None else None, "pcie": pcie,
            "nvlinks": links, "errors": errors}


def _pair(pynvml: Any, i: int, j: int, handles: list[Any], devices: list[dict[str, Any]]) -> dict[str, Any]:
    errors: dict[str, str] = {}
    level = _ask(pynvml, errors, "topology",
                 lambda: pynvml.nvmlDeviceGetTopologyCommonAncestor(handles[i], handles[j]))
    status_names = {getattr(pynvml, n): n[len("NVML_P2P_STATUS_"):].lower() for n in dir(pynvml)
                    if n.startswith("NVML_P2P_STATUS_") and isinstance(getattr(pynvml, n), int)}
    p2p: dict[str, Any] = {}
    for cap, index in P2P_CAPS.items():
        value = _ask(pynvml, errors, f"p2p_{cap}",
                     lambda index=index: pynvml.nvmlDeviceGetP2PStatus(handles[i], handles[j], index))
        p2p[cap] = status_names.get(value, value) if value is not None else None
    bus_j = (devices[j].get("pci_bus_id") or "").lower()
    nvlinks = [l for l in devices[i]["nvlinks"] if l.get("up") and (l.get("remote_bus_id") or "").lower() == bus_j]
    return {"gpus": [i, j], "topology": TOPOLOGY_LEVELS.get(level, level) if level is not None else None,
            "p2p": p2p, "nvlinks": len(nvlinks),
            "nvlink_version": nvlinks[0].get("version") if nvlinks else None, "errors": errors}
