# Probe: runs inside the TARGET interpreter, standard library only at top level, Python 3.8+.
# The CUDA stack as the serving process will see it: the driver library the dynamic loader finds
# (libcuda.so.1, asked directly through ctypes), torch's CUDA build (its CUDA version, the archs it was
# compiled for, whether it initializes CUDA and which devices it sees, with UUIDs to match NVML's), and
# where Triton finds ptxas and libcuda, with every place it looked. No kernel is launched and no GPU
# memory is allocated. Prints one JSON document after the marker.
import contextlib
import ctypes
import importlib
import importlib.util
import os
import subprocess
import sys
import time
import warnings
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

if TYPE_CHECKING:  # the prelude's, which probe_source puts before this script
    from ._prelude import describe, emit, error_text


def failure(exc: BaseException) -> Dict[str, Any]:
    return describe(exc, frames=4, chars=3000)


def loaded_path(stem: str) -> Optional[str]:
    try:
        with open("/proc/self/maps") as handle:
            for line in handle:
                path = line.rsplit(None, 1)[-1]
                if path.startswith("/") and os.path.basename(path).startswith(stem):
                    return path
    except OSError:
        pass
    return None


def libcuda_facts() -> Dict[str, Any]:
    """cuInit and cuDriverGetVersion from the libcuda.so.1 this process loads (a cuda-compat one included)."""
    facts: Dict[str, Any] = {"loaded": False}
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        facts["error"] = str(exc)
        return facts
    facts["loaded"] = True
    facts["path"] = loaded_path("libcuda.so")
    version = ctypes.c_int(0)
    if lib.cuDriverGetVersion(ctypes.byref(version)) == 0:
        facts["driver_version_raw"] = version.value
    started = time.monotonic()
    code = lib.cuInit(0)
    facts["cuInit_seconds"] = round(time.monotonic() - started, 4)
    facts["cuInit"] = code
    name = ctypes.c_char_p()
    if code != 0 and lib.cuGetErrorName(code, ctypes.byref(name)) == 0 and name.value:
        facts["cuInit_name"] = name.value.decode()
        text = ctypes.c_char_p()
        if lib.cuGetErrorString(code, ctypes.byref(text)) == 0 and text.value:
            facts["cuInit_message"] = text.value.decode()
    if code == 0:
        count = ctypes.c_int(0)
        if lib.cuDeviceGetCount(ctypes.byref(count)) == 0:
            facts["device_count"] = count.value
    return facts


def imported(name: str, facts: Dict[str, Any]) -> Any:
    """Module `name` (torch, triton), imported, or None; in `facts`, whether it imported and what it raised."""
    try:
        module = importlib.import_module(name)
    except BaseException as exc:  # noqa: BLE001 - a broken torch or Triton is itself the finding
        facts["import_ok"] = False
        facts["exception"] = failure(exc)
        return None
    facts["import_ok"] = True
    return module


def torch_facts() -> Tuple[Dict[str, Any], Any]:
    facts: Dict[str, Any] = {"installed": importlib.util.find_spec("torch") is not None}
    if not facts["installed"]:
        return facts, None
    started = time.monotonic()
    torch = imported("torch", facts)
    facts["import_seconds"] = round(time.monotonic() - started, 3)
    if torch is None:
        return facts, None
    version = getattr(torch, "version", None)
    facts.update({
        "version": getattr(torch, "__version__", None),
        "file": getattr(torch, "__file__", None),
        "cuda": getattr(version, "cuda", None),
        "hip": getattr(version, "hip", None),
        "git": getattr(version, "git_version", None),
    })
    try:
        facts["arch_list"] = torch.cuda.get_arch_list()
    except Exception as exc:  # noqa: BLE001 - recorded as a fact
        facts["arch_list"] = None
        facts["arch_list_error"] = failure(exc)
    return facts, torch


def cuda_facts(torch: Any) -> Dict[str, Any]:
    facts: Dict[str, Any] = {}
    started = time.monotonic()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            facts["available"] = bool(torch.cuda.is_available())
        except Exception as exc:  # noqa: BLE001 - recorded as a fact
            facts["available"] = False
            facts["is_available_error"] = failure(exc)
        if not facts["available"]:
            try:
                torch.cuda.init()  # raises with the reason is_available() swallowed
            except Exception as exc:  # noqa: BLE001 - the reason is_available() swallowed is the fact
                facts["init_error"] = failure(exc)
    facts["warnings"] = [str(w.message)[:2000] for w in caught]
    if not facts["available"]:
        facts["seconds"] = round(time.monotonic() - started, 3)
        return facts
    try:
        facts["device_count"] = torch.cuda.device_count()
        devices = []
        for index in range(facts["device_count"]):
            props = torch.cuda.get_device_properties(index)
            devices.append({
                "index": index,
                "name": props.name,
                "capability": [props.major, props.minor],
                "total_memory": int(props.total_memory),
                "multi_processor_count": getattr(props, "multi_processor_count", None),
                "uuid": uuid_text(getattr(props, "uuid", None)),
                "uuid_raw": str(getattr(props, "uuid", None)),
                "pci_bus_id": pci_bus_id(props),
            })
        facts["devices"] = devices
    except Exception as exc:  # noqa: BLE001 - recorded as a fact
        facts["devices_error"] = failure(exc)
    facts["seconds"] = round(time.monotonic() - started, 3)
    return facts


def uuid_text(value: object) -> Optional[str]:
    if value is None:
        return None
    text = str(value)
    if text.startswith("UUID(") and text.endswith(")"):
        text = text[5:-1].strip("'\"")
    if text.startswith(("GPU-", "MIG-")):
        return text
    return "GPU-" + text  # torch prints the bare UUID; NVML and CUDA_VISIBLE_DEVICES use the prefix


def pci_bus_id(props: Any) -> Optional[str]:
    bus = getattr(props, "pci_bus_id", None)
    if bus is None:
        return None
    domain, device = getattr(props, "pci_domain_id", 0) or 0, getattr(props, "pci_device_id", 0) or 0
    return f"{domain:08X}:{bus:02X}:{device:02X}.0"


def tool_version(path: str) -> Tuple[Optional[str], Optional[str]]:
    try:
        out = subprocess.run([path, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             timeout=20, check=False).stdout.decode("utf-8", "replace")
    except (OSError, subprocess.SubprocessError) as exc:
        return None, error_text(exc)
    for line in out.splitlines():
        if "release" in line:
            return line.split("release", 1)[1].split(",")[0].strip(), None
    return None, "no version in: " + out.strip()[-300:]


def ptxas_lookup(triton_dir: str, binary: str, knob: Optional[Callable[[], Any]]) -> Dict[str, Any]:
    """Where Triton looks for `binary`: $TRITON_<BINARY>_PATH, then its bundled copy; and what it found."""
    env_key = "TRITON_{}_PATH".format(binary.upper().replace("-", "_"))
    looked: List[Dict[str, Any]] = []
    if os.environ.get(env_key):
        looked.append({"where": env_key, "path": os.environ[env_key]})
    looked.append({"where": "bundled with triton", "path": os.path.join(triton_dir, "backends", "nvidia", "bin", binary)})
    for place in looked:
        place["exists"] = os.path.isfile(place["path"])
        place["executable"] = place["exists"] and os.access(place["path"], os.X_OK)
    facts: Dict[str, Any] = {"looked": looked, "path": None, "version": None, "error": None}
    if knob is not None:
        try:
            tool = knob()
            facts["path"], facts["version"] = tool.path, tool.version
            facts["api"] = "triton.knobs.nvidia"
            return facts
        except Exception as exc:  # noqa: BLE001 - Triton's own refusal is the fact
            facts["error"] = error_text(exc)
            facts["api"] = "triton.knobs.nvidia"
            return facts
    for place in looked:  # Triton < 3.4: the same order, in _path_to_binary
        if place["executable"]:
            version, error = tool_version(place["path"])
            if version is not None:
                facts["path"], facts["version"], facts["api"] = place["path"], version, "path order"
                return facts
            facts["error"] = error
    if facts["error"] is None:
        facts["error"] = f"Cannot find {binary}"
    return facts


def libcuda_lookup(driver_module: Any) -> Dict[str, Any]:
    looked: Dict[str, Any] = {"TRITON_LIBCUDA_PATH": os.environ.get("TRITON_LIBCUDA_PATH"),
              "LD_LIBRARY_PATH": [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]}
    try:
        listing = subprocess.run(["/sbin/ldconfig", "-p"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 timeout=20, check=False).stdout.decode("utf-8", "replace")
        looked["ldconfig"] = [line.split()[-1] for line in listing.splitlines() if "libcuda.so.1" in line]
    except (OSError, subprocess.SubprocessError) as exc:
        looked["ldconfig"] = None
        looked["ldconfig_error"] = error_text(exc)
    facts: Dict[str, Any] = {"looked": looked, "dirs": None, "error": None}
    finder = getattr(driver_module, "libcuda_dirs", None)
    if finder is None:
        facts["error"] = "this Triton has no libcuda_dirs()"
        return facts
    try:
        facts["dirs"] = list(finder())
    except BaseException as exc:  # noqa: BLE001 - Triton asserts, with its own message
        facts["error"] = error_text(exc)
    return facts


def triton_facts() -> Dict[str, Any]:
    facts: Dict[str, Any] = {"installed": importlib.util.find_spec("triton") is not None}
    if not facts["installed"]:
        return facts
    started = time.monotonic()
    triton = imported("triton", facts)
    if triton is None:
        return facts
    facts["version"] = getattr(triton, "__version__", None)
    facts["file"] = getattr(triton, "__file__", None)
    triton_dir = os.path.dirname(triton.__file__)
    knobs = None
    with contextlib.suppress(Exception):  # Triton < 3.4 has no knobs: the path order, below
        from triton import knobs as knobs_module
        knobs = knobs_module.nvidia
    facts["ptxas"] = ptxas_lookup(triton_dir, "ptxas", (lambda: knobs.ptxas) if knobs is not None else None)
    if knobs is not None and hasattr(knobs, "ptxas_blackwell"):
        # Triton >= 3.5 compiles for compute capability 10.0 and later with this one
        facts["ptxas_blackwell"] = ptxas_lookup(triton_dir, "ptxas-blackwell", lambda: knobs.ptxas_blackwell)
    try:
        from triton.backends.nvidia import driver as driver_module
        facts["libcuda"] = libcuda_lookup(driver_module)
    except BaseException as exc:  # noqa: BLE001 - recorded as a fact
        facts["libcuda"] = {"error": "cannot import triton.backends.nvidia.driver: " + error_text(exc),
                            "dirs": None, "looked": {}}
    facts["cache_dir"] = os.environ.get("TRITON_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".triton", "cache")
    facts["seconds"] = round(time.monotonic() - started, 3)
    return facts


def main() -> None:
    started = time.monotonic()
    facts: Dict[str, Any] = {"python": sys.version.split()[0], "executable": sys.executable}
    try:
        facts["libcuda"] = libcuda_facts()
        facts["torch"], torch = torch_facts()
        if torch is not None and facts["torch"].get("cuda"):
            facts["cuda"] = cuda_facts(torch)
        facts["triton"] = triton_facts()
    except BaseException as exc:  # noqa: BLE001 - whatever escaped the guards above: still report what is known
        facts["probe_error"] = failure(exc)
    facts["seconds"] = round(time.monotonic() - started, 3)
    emit(facts)


main()
