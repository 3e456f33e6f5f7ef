# Probe: runs inside the TARGET interpreter, standard library only at top level, Python 3.8+.
# One rank of a real NCCL all-reduce through torch.distributed, as vLLM's tensor-parallel group runs it:
# the doctor starts one such process per GPU (rank r on cuda:r), each with a timeout, and a rank that hangs
# is killed and reported as the hang. Values are checked at 4 bytes and 16 MiB (each rank contributes
# rank + 1, the sum is known), then the 16 MiB all-reduce is timed for the bus bandwidth (nccl-tests'
# definition: bytes x 2(n-1)/n / seconds). Arguments: {"rank", "world", "port", "sizes", "iterations", "environ"}.
# "environ" holds the NCCL variables of the arm (NCCL_NVLS_ENABLE=0, and NCCL_P2P_DISABLE=1 for the control
# arm), set here before NCCL starts: a rank forked from the doctor's shared target process inherits that
# process's environment, not the arm's.
import os
import sys
import time
import traceback
from typing import TYPE_CHECKING, Any, Dict, List

if TYPE_CHECKING:  # the prelude's, which probe_source puts before this script
    from ._prelude import emit, error_text, read_arguments

ARGS = read_arguments()


def stage(facts: Dict[str, Any], name: str) -> None:
    # also on stderr, which the doctor keeps when it kills a rank that hangs: the stage it hung in
    facts["stage"] = name
    sys.stderr.write("fabric-nccl rank {}: {}\n".format(facts["rank"], name))
    sys.stderr.flush()


def main() -> None:
    rank, world = int(ARGS.get("rank", 0)), int(ARGS.get("world", 1))
    environ = ARGS.get("environ") or {}
    os.environ.update({str(k): str(v) for k, v in environ.items() if str(k).startswith("NCCL_")})
    facts: Dict[str, Any] = {"rank": rank, "world": world, "ok": False, "stage": "import",
             "env": {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}}
    started = time.monotonic()
    try:
        import torch
        import torch.distributed as dist
        facts["torch"] = getattr(torch, "__version__", None)
        try:
            facts["nccl_version"] = ".".join(str(p) for p in torch.cuda.nccl.version())
        except Exception:  # noqa: BLE001 - only a detail
            facts["nccl_version"] = None
        stage(facts, "init")
        torch.cuda.set_device(rank)
        device = torch.device("cuda", rank)
        init = {"init_method": "tcp://127.0.0.1:" + str(int(ARGS["port"])), "rank": rank, "world_size": world}
        try:  # device_id (torch 2.3+) makes NCCL initialise its communicator now, not at the first collective
            dist.init_process_group("nccl", device_id=device, **init)
        except TypeError:
            dist.init_process_group("nccl", **init)
        facts["init_s"] = round(time.monotonic() - started, 3)
        checks: List[Dict[str, Any]] = []
        expected = world * (world + 1) / 2.0
        for nbytes in ARGS.get("sizes") or [4, 16 << 20]:
            stage(facts, "all_reduce " + str(nbytes) + " bytes")
            tensor = torch.full((max(1, nbytes // 4),), float(rank + 1), dtype=torch.float32, device=device)
            dist.all_reduce(tensor)
            torch.cuda.synchronize(device)
            wrong = int((tensor != expected).sum().item())
            checks.append({"bytes": tensor.numel() * 4, "expected": expected, "mismatched": wrong,
                           "first": float(tensor[0].item())})
        facts["checks"] = checks
        stage(facts, "timing")
        nbytes = max(ARGS.get("sizes") or [16 << 20])
        tensor = torch.ones(max(1, nbytes // 4), dtype=torch.float32, device=device)
        for _ in range(3):
            dist.all_reduce(tensor)
        torch.cuda.synchronize(device)
        iterations = int(ARGS.get("iterations") or 20)
        t0 = time.perf_counter()
        for _ in range(iterations):
            dist.all_reduce(tensor)
        torch.cuda.synchronize(device)
        seconds = (time.perf_counter() - t0) / iterations
        size = tensor.numel() * 4
        facts["timing"] = {"bytes": size, "iterations": iterations, "seconds": seconds,
                           "algbw_gbps": size / seconds / 1e9,
                           "busbw_gbps": size / seconds / 1e9 * 2 * (world - 1) / world}
        stage(facts, "destroy")
        dist.destroy_process_group()
        facts["ok"] = all(c["mismatched"] == 0 for c in checks)
        facts["stage"] = "done"
    except Exception as exc:  # noqa: BLE001 - recorded as a fact
        facts["error"] = error_text(exc)
        facts["traceback"] = traceback.format_exc(limit=4)
    facts["seconds"] = round(time.monotonic() - started, 3)
    emit(facts)


main()
