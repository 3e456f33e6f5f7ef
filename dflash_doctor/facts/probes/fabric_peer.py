# Probe: runs inside the TARGET interpreter, standard library only at top level, Python 3.8+.
# Peer access between the GPUs of a tensor-parallel group, as CUDA in the target sees them:
# torch.cuda.can_device_access_peer for each ordered pair, then a write-and-verify copy: a pattern made
# on GPU i is copied into GPU j's memory (with peer access, a direct GPU-to-GPU copy), copied back and
# compared on both sides, because the driver can report access that the PCIe fabric then drops
# (ACS redirecting peer writes through a translating IOMMU). Arguments: {"world": N, "bytes": B}.
import time
import traceback
from typing import TYPE_CHECKING, Any, Dict, List

if TYPE_CHECKING:  # the prelude's, which probe_source puts before this script
    from ._prelude import emit, error_text, read_arguments

ARGS = read_arguments()


def pair(torch: Any, i: int, j: int, nbytes: int) -> Dict[str, Any]:
    result: Dict[str, Any] = {"src": i, "dst": j}
    started = time.monotonic()
    try:
        result["can_access_peer"] = bool(torch.cuda.can_device_access_peer(i, j))
    except Exception as exc:  # noqa: BLE001 - recorded as a fact
        result["can_access_peer"] = None
        result["error"] = error_text(exc)
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
    except Exception as exc:  # noqa: BLE001 - recorded as a fact
        result.update({"verified": False, "error": error_text(exc)})
    result["seconds"] = round(time.monotonic() - started, 4)
    return result


def main() -> None:
    facts: Dict[str, Any] = {"ok": False}
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - recorded as a fact
        facts["import_error"] = error_text(exc)
    else:
        facts["torch"] = getattr(torch, "__version__", None)
        every_pair(torch, facts)
    emit(facts)


def every_pair(torch: Any, facts: Dict[str, Any]) -> None:
    """Each ordered pair of the group's GPUs (the first `world` torch sees), into `facts`."""
    try:
        count = torch.cuda.device_count()
    except Exception as exc:  # noqa: BLE001 - recorded as a fact
        facts["error"] = error_text(exc)
        return
    facts["device_count"] = count
    world = min(int(ARGS.get("world") or count), count)
    facts["world"] = world
    nbytes = int(ARGS.get("bytes") or 4 << 20)
    pairs: List[Dict[str, Any]] = []
    try:
        for i in range(world):
            for j in range(world):
                if i != j:
                    pairs.append(pair(torch, i, j, nbytes))
        facts["ok"] = True
    except Exception:  # noqa: BLE001 - recorded as a fact
        facts["error"] = traceback.format_exc(limit=4)
    facts["pairs"] = pairs


main()
