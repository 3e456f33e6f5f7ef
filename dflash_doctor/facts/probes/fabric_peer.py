# Probe: runs inside the TARGET interpreter, standard library only at top level, Python 3.8+.
# Peer access between the GPUs of a tensor-parallel group, as CUDA in the target sees them:
# torch.cuda.can_device_access_peer for each ordered pair, then a write-and-verify copy: a pattern made
# on GPU i is copied into GPU j's memory (with peer access, a direct GPU-to-GPU copy), copied back and
# compared on both sides, because the driver can report access that the PCIe fabric then drops
# (ACS redirecting peer writes through a translating IOMMU). Arguments: {"world": N, "bytes": B}.
import json
import sys
import time
import traceback

MARKER = "@@dflash-doctor-facts@@"
# Arguments come on stdin (never in argv, where `ps` would show a serve command's --api-key), or as
# argv[1] in a job forked from the shared host.
ARGS = json.loads(sys.argv[1] if len(sys.argv) > 1 else (sys.stdin.read() or "{}"))


def emit(facts):
    sys.stdout.write("\n" + MARKER + "\n" + json.dumps(facts, default=str) + "\n")
    sys.stdout.flush()


def pair(torch, i, j, nbytes):
    result = {"src": i, "dst": j}
    started = time.monotonic()
    try:
        result["can_access_peer"] = bool(torch.cuda.can_device_access_peer(i, j))
    except Exception as exc:  # noqa: BLE001 - recorded as a fact
        result["can_access_peer"] = None
        result["error"] = f"{type(exc).__name__}: {exc}"
        return result
    count = max(1, nbytes // 4)
    try:
        with torch.cuda.device(i):
            pattern = torch.arange(count, dtype=torch.int32, device="cuda:" + str(i)) * 2654435761 % 2147483647 + (i * 7 + j)
        landed = torch.empty(count, dtype=torch.int32, device="cuda:" + str(j))
        landed.copy_(pattern)
        torch.cuda.synchronize(i)
        torch.cuda.synchronize(j)
        with torch.cuda.device(j):
            expected_there = torch.arange(count, dtype=torch.int32, device="cuda:" + str(j)) * 2654435761 % 2147483647 + (i * 7 + j)
            wrong_there = int((landed != expected_there).sum().item())
        back = torch.empty(count, dtype=torch.int32, device="cuda:" + str(i))
        back.copy_(landed)
        torch.cuda.synchronize(i)
        wrong_back = int((back != pattern).sum().item())
        result.update({"bytes": count * 4, "mismatched_on_dst": wrong_there, "mismatched_back": wrong_back,
                       "verified": wrong_there == 0 and wrong_back == 0})
    except Exception as exc:  # noqa: BLE001
        result.update({"verified": False, "error": f"{type(exc).__name__}: {exc}"})
    result["seconds"] = round(time.monotonic() - started, 4)
    return result


def main():
    facts = {"ok": False}
    try:
        import torch
    except Exception as exc:  # noqa: BLE001
        facts["import_error"] = f"{type(exc).__name__}: {exc}"
        emit(facts)
        return
    facts["torch"] = getattr(torch, "__version__", None)
    try:
        count = torch.cuda.device_count()
    except Exception as exc:  # noqa: BLE001
        facts["error"] = f"{type(exc).__name__}: {exc}"
        emit(facts)
        return
    facts["device_count"] = count
    world = min(int(ARGS.get("world") or count), count)
    facts["world"] = world
    nbytes = int(ARGS.get("bytes") or 4 << 20)
    pairs = []
    try:
        for i in range(world):
            for j in range(world):
                if i != j:
                    pairs.append(pair(torch, i, j, nbytes))
        facts["ok"] = True
    except Exception:  # noqa: BLE001
        facts["error"] = traceback.format_exc(limit=4)
    facts["pairs"] = pairs
    emit(facts)


main()
