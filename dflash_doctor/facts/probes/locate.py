# Probe: runs inside the TARGET interpreter, standard library only, Python 3.8+.
# Where a top-level package lives and which distribution version says it is, WITHOUT importing it:
# importlib.util.find_spec of a top-level name only searches sys.path (nothing of the package runs).
import importlib.util
import json
import sys

MARKER = "@@dflash-doctor-facts@@"

names = json.loads(sys.argv[1] if len(sys.argv) > 1 else (sys.stdin.read() or "{}")).get("names") or []
found = {}
for name in names:
    entry = {"locations": [], "version": None}
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError) as exc:
        spec = None
        entry["error"] = f"{type(exc).__name__}: {exc}"
    if spec is not None:
        entry["locations"] = [str(p) for p in (spec.submodule_search_locations or [])]
    try:
        from importlib import metadata
        entry["version"] = metadata.version(name)
    except Exception as exc:  # noqa: BLE001 - no distribution of that name: the version stays unknown
        entry["version_error"] = type(exc).__name__
    found[name] = entry
sys.stdout.write(MARKER + "\n" + json.dumps(found) + "\n")
sys.stdout.flush()
