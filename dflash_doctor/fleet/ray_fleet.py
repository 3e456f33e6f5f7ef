"""The doctor on every alive node of a Ray cluster. The only module that imports Ray
(the `fleet` extra: `pip install '.[fleet]'` from a clone), and only `dflash-doctor fleet` imports it.

One task per node, pinned to it with Ray's node-affinity scheduling (`soft=False`: it runs there or not at
all), asking for no CPU (so a busy node still runs it) and for all of the node's GPUs (so Ray makes them
visible to the task, as it will for vLLM's workers). Each task runs the doctor in-process, in the node's
Ray worker interpreter, which is the interpreter vLLM's Ray workers use: unless --python was given, that
is the environment examined. dflash-doctor must be installed on every node, as Ray and vLLM are.
"""

from __future__ import annotations

import dataclasses
import logging
import socket
import sys
import time
from collections.abc import Mapping
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from dflash_doctor import pipeline
from dflash_doctor.request import Request
from dflash_doctor.shape import frozen_dataclass

__all__ = ["NodeReport", "alive_nodes", "gather"]

HEAD_RESOURCE = "node:__internal_head__"
BUILTIN_RESOURCES = ("CPU", "GPU", "memory", "object_store_memory", "accelerator_type")


@frozen_dataclass(frozen=True)
class NodeReport:
    node_id: str
    address: str
    resources: Mapping[str, float]
    report: dict[str, Any] | None
    error: str | None
    is_head: bool


def _custom(resources: Mapping[str, float]) -> dict[str, float]:
    return {k: v for k, v in resources.items()
            if not k.startswith(("node:", "accelerator_type:")) and k not in BUILTIN_RESOURCES}


def _node_doctor(fields: dict[str, Any], host: dict[str, Any]) -> dict[str, Any]:
    """Runs on the node: the doctor, in this worker's interpreter unless --python was given. The request comes
    as its fields (plain values, whatever the node's own classes are)."""
    request = Request(**fields)
    host = {**host, "ray": {**host.get("ray", {}), "node_id": ray.get_runtime_context().get_node_id()}}
    return pipeline.run(dataclasses.replace(request, python=request.python or sys.executable, host=host)).report


def alive_nodes(min_nodes: int = 0, wait_s: float = 0.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + wait_s
    while True:
        nodes = [n for n in ray.nodes() if n.get("Alive")]  # type: ignore[no-untyped-call]
        if len(nodes) >= min_nodes or time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    # The head first: where hosts disagree evenly, the first host's value is taken as the fleet's.
    return sorted(nodes, key=lambda n: (HEAD_RESOURCE not in n.get("Resources", {}), n.get("NodeManagerAddress", ""),
                                        n["NodeID"]))


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail fast on a wrong host:port: Ray itself retries a GCS that is not there for minutes."""
    if "://" in address or address == "auto":
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ConnectionError(f"{address!r} is not host:port (e.g. 10.0.0.1:6379), 'auto' or ray://host:port")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise ConnectionError(f"nothing answers at {address} ({exc.strerror or exc}); is the head's GCS port right?") from exc


def gather(address: str, request: Request, *, gpus: str = "all", timeout_s: float = 300.0,
           min_nodes: int = 0, wait_s: float = 30.0) -> tuple[list[NodeReport], list[str]]:
    """Run the doctor on every alive node; returns one NodeReport per node and any cluster-level problems."""
    problems: list[str] = []
    check_reachable(address)
    ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False, namespace="dflash-doctor")
    try:
        nodes = alive_nodes(min_nodes, wait_s if min_nodes else 0.0)
        if len(nodes) < min_nodes:
            problems.append(f"only {len(nodes)} alive node(s) after {wait_s:g} s, expected at least {min_nodes}")
        task = ray.remote(_node_doctor)
        # Only what differs from the defaults: a node with an older doctor then runs any request it can.
        fields = {f.name: getattr(request, f.name) for f in dataclasses.fields(request)
                  if f.default is dataclasses.MISSING or getattr(request, f.name) != f.default}
        fields["options"], fields["host"] = dict(request.options), dict(request.host)
        refs = []
        for node in nodes:
            resources = node.get("Resources", {})
            n_gpus = float(resources.get("GPU", 0)) if gpus == "all" else 0.0
            host = {"ray": {"resources": _custom(resources), "gpus_requested": n_gpus,
                            "address": str(node.get("NodeManagerAddress", ""))}}
            refs.append(task.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node["NodeID"], soft=False),
                num_cpus=0, num_gpus=n_gpus, max_retries=0, name=f"dflash-doctor@{node['NodeID'][:8]}",
            ).remote(fields, host))
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
        done = set(ready)
        out = []
        for node, ref in zip(nodes, refs):
            resources = node.get("Resources", {})
            report, error = None, None
            if ref not in done:
                ray.cancel(ref, force=True)
                gpu_note = (f"; it asked for the node's {resources.get('GPU'):g} GPU(s): if they are in use, "
                            "run with --gpus none") if gpus == "all" and resources.get("GPU") else ""
                error = f"no report after {timeout_s:g} s (the task did not finish{gpu_note})"
            else:
                try:
                    report = ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - a node's failure is that node's result
                    error = f"the task failed: {type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
            out.append(NodeReport(node["NodeID"], str(node.get("NodeManagerAddress", "")), resources, report, error,
                                  HEAD_RESOURCE in resources))
        return out, problems
    finally:
        ray.shutdown()


def node_label(node: NodeReport) -> str:
    custom = sorted(_custom(node.resources))
    return f"node-{node.node_id[:8]}" + (f"({','.join(custom)})" if custom else "")
