# Probe: runs inside the TARGET interpreter, standard library only, Python 3.8+.
# Where a top-level package lives and which distribution version says it is, WITHOUT importing it:
# importlib.util.find_spec of a top-level name only searches sys.path (nothing of the package runs).
import importlib.util
from typing import TYPE_CHECKING, Any, Dict, List

if TYPE_CHECKING:  # the prelude's, which probe_source puts before this script
    from ._prelude import emit, read_arguments

names: List[str] = read_arguments().get("names") or []
found: Dict[str, Dict[str, Any]] = {}
for name in names:
    entry: Dict[str, Any] = {"locations": [], "version": None}
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
emit(found)
