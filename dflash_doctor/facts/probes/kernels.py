# Probe: runs inside the TARGET interpreter, standard library only at top level, Python 3.8+.
# Runs ONE kernel family for real on each distinct GPU model this process can see, on a small causal
# problem, and compares it with an fp32 reference computed on the same GPU from the same (rounded)
# inputs. Families: "sdpa" (torch SDPA with the flash and memory-efficient backends forced), "triton"
# (a minimal Triton kernel of the doctor's own: proves Triton compiles and launches here), "flash_attn"
# (flash_attn.flash_attn_func), "flash_attn_cute" (flash-attn-4's flash_attn.cute.flash_attn_func),
# "flash_attn_rotary" (flash_attn.ops.triton.rotary.apply_rotary, called
# as vLLM calls it), "vllm_flash_attn" (vLLM's bundled flash-attention, each FA version it supports
# here) and "vllm_rotary" (vLLM's bundled rotary, as its forward_cuda calls it).
#
# Every case is caught on its own: the facts say what ran, the largest error against the tolerance, the
# first-run (compile) and warm times, and the text of any failure. Inputs are a few hundred kilobytes
# and seeded. Triton's compile cache goes where Triton puts it (~/.triton/cache unless
# TRITON_CACHE_DIR is set), outside the target environment. Prints one JSON document after the marker.
import contextlib
import importlib
import importlib.util
import inspect
import linecache
import math
import os
import time
import traceback
import warnings
from importlib import metadata
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

if TYPE_CHECKING:  # the prelude's, which probe_source puts before this script
    from ._prelude import emit, read_arguments

ARGS = read_arguments()
FAMILY: str = ARGS.get("family", "sdpa")
HEAD_DIMS: List[int] = ARGS.get("head_dims") or [128, 64]
DTYPES: List[str] = ARGS.get("dtypes") or ["float16", "bfloat16"]
BATCH = int(ARGS.get("batch", 2))
SEQLEN = int(ARGS.get("seqlen", 128))
HEADS = int(ARGS.get("heads", 4))
SEED = int(ARGS.get("seed", 0))
WARM_ITERS = int(ARGS.get("warm_iters", 10))
TOLERANCE_ULPS = float(ARGS.get("tolerance_ulps", 2.0))
BF16_MIN_CC: Tuple[int, ...] = tuple(ARGS.get("bf16_min_cc") or (8, 0))
DEVICE: str = ARGS.get("device", "cuda")  # "cpu" only in the doctor's own tests
SDPA_BACKENDS: List[str] = ARGS.get("sdpa_backends") or ["flash", "efficient"]

# What each family needs importable, and the statement that imports it (as the stack writes it).
NEEDS: Dict[str, Tuple[Optional[str], Optional[str]]] = {
    "sdpa": (None, None),
    "triton": ("triton", "import triton"),
    "flash_attn": ("flash_attn", "from flash_attn import flash_attn_func"),
    "flash_attn_cute": ("flash_attn", "from flash_attn.cute import flash_attn_func"),
    "flash_attn_rotary": ("flash_attn", "from flash_attn.ops.triton.rotary import apply_rotary"),
    "vllm_flash_attn": ("vllm", "from vllm.vllm_flash_attn import flash_attn_varlen_func"),
    "vllm_rotary": ("vllm", "from vllm.vllm_flash_attn.layers.rotary import apply_rotary_emb"),
}

TRITON_SOURCE = '''
import triton
import triton.language as tl


@triton.jit
def dflash_doctor_axpy(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offsets, mask=mask).to(tl.float32)
    tl.store(out_ptr + offsets, (x * alpha + y).to(out_ptr.dtype.element_ty), mask=mask)
'''
TRITON_FILENAME = "<dflash-doctor-triton-kernel>"


def kernel_error(exc: BaseException, caught: Iterable[warnings.WarningMessage] = ()) -> Dict[str, Any]:
    """An exception in a kernel case (facts.gpu.cuda_shapes.KernelError): whether CUDA ran out of memory, and the
    warnings caught with it."""
    return {
        "type": type(exc).__name__,
        "message": str(exc)[:3000],
        "oom": type(exc).__name__ == "OutOfMemoryError" or "out of memory" in str(exc).lower(),
        "warnings": [str(w.message)[:1000] for w in caught][:12],
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-3:])[-2000:],
    }


class Runner:
    """One device's cases: draws their inputs (`generator`: the seeded CPU generator), picks the dtypes the
    device's `capability` runs (None: the CPU), times each kernel call (first run, then warm) and compares it with
    the reference."""

    def __init__(self, torch: Any, device: Any, capability: Optional[List[int]], generator: Any) -> None:
        self.torch = torch
        self.device = device
        self.capability = capability
        self.generator = generator
        self.broken: Optional[str] = None  # a sticky CUDA error: nothing more can run in this process

    def sync(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)

    def case(self, meta: Dict[str, Any], call: Callable[[], Any], reference: Any, scale: float,
             dtype: Any) -> Dict[str, Any]:
        torch = self.torch
        case: Dict[str, Any] = dict(meta)
        case["dtype"] = str(dtype).replace("torch.", "")
        if self.broken is not None:
            case.update(status="not-run", reason="an earlier case left the CUDA context unusable: " + self.broken)
            return case
        eps = torch.finfo(dtype).eps
        case["tolerance"] = TOLERANCE_ULPS * eps * scale
        case["scale"] = scale
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                self.sync()
                started = time.perf_counter()
                out = call()
                self.sync()
                case["first_ms"] = round((time.perf_counter() - started) * 1000, 3)
                started = time.perf_counter()
                for _ in range(WARM_ITERS):
                    call()
                self.sync()
                case["warm_ms"] = round((time.perf_counter() - started) * 1000 / WARM_ITERS, 4)
                diff = (out.float() - reference).abs()
                finite = bool(torch.isfinite(out.float()).all().item())
                largest, mean = float(diff.max().item()), float(diff.mean().item())
                case["max_abs_err"] = largest if math.isfinite(largest) else None
                case["mean_abs_err"] = mean if math.isfinite(mean) else None
            except Exception as exc:  # noqa: BLE001 - each case fails on its own, as a fact
                case["status"] = "error"
                case["error"] = kernel_error(exc, caught)
                self.check_context(case)
                return case
        ok = finite and case["max_abs_err"] is not None and case["max_abs_err"] <= case["tolerance"]
        case["status"] = "ok" if ok else "mismatch"
        if not finite:
            case["nonfinite"] = True
        return case

    def check_context(self, case: Dict[str, Any]) -> None:
        try:
            self.sync()
        except Exception as exc:  # noqa: BLE001 - the context is lost: said, and no more cases run
            self.broken = f"{type(exc).__name__}: {str(exc)[:300]}"
            case["context_lost"] = True


def randn(runner: Runner, shape: Tuple[int, ...]) -> Any:
    # Drawn on the CPU with a fixed seed, so that every GPU gets the same inputs.
    torch = runner.torch
    return torch.randn(shape, generator=runner.generator, dtype=torch.float32).to(runner.device)


def attention_reference(torch: Any, q: Any, k: Any, v: Any) -> Any:
    """fp32 causal attention; q, k, v (batch, heads, seqlen, head_dim) in fp32."""
    scores = torch.matmul(q, k.transpose(-1, -2)) * (q.shape[-1] ** -0.5)
    seqlen = q.shape[-2]
    mask = torch.ones(seqlen, seqlen, dtype=torch.bool, device=q.device).triu(1)
    scores = scores.masked_fill(mask, float("-inf"))
    return torch.matmul(scores.softmax(dim=-1), v)


def attention_inputs(runner: Runner, dtype: Any, head_dim: int) -> Tuple[Any, ...]:
    shape = (BATCH, HEADS, SEQLEN, head_dim)
    q, k, v = (randn(runner, shape).to(dtype) for _ in range(3))
    reference = attention_reference(runner.torch, q.float(), k.float(), v.float())
    # The output is a convex combination of rows of v: its rounding error scales with max |v|.
    return q, k, v, reference, float(v.float().abs().max().item())


def rotary_inputs(runner: Runner, dtype: Any, head_dim: int, interleaved: bool) -> Tuple[Any, ...]:
    """x (batch, seqlen, heads, head_dim) and cos/sin (seqlen, head_dim/2) in `dtype`, and the fp32 result."""
    torch, device = runner.torch, runner.device
    x = randn(runner, (BATCH, SEQLEN, HEADS, head_dim)).to(dtype)
    half = head_dim // 2
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, half, dtype=torch.float32, device=device) * 2.0 / head_dim))
    angles = torch.outer(torch.arange(SEQLEN, dtype=torch.float32, device=device), inv_freq)
    cos, sin = angles.cos().to(dtype), angles.sin().to(dtype)
    xf, c, s = x.float(), cos.float()[None, :, None, :], sin.float()[None, :, None, :]
    if interleaved:
        x1, x2 = xf[..., 0::2], xf[..., 1::2]
        reference = torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2)
    else:
        x1, x2 = xf[..., :half], xf[..., half:]
        reference = torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1)
    return x, cos, sin, reference, float(reference.abs().max().item())


def dtypes_for(runner: Runner) -> List[Tuple[Any, Optional[str]]]:
    """Each dtype asked for, with why the device cannot run it (None: it can)."""
    torch, capability = runner.torch, runner.capability
    chosen: List[Tuple[Any, Optional[str]]] = []
    for name in DTYPES:
        dtype = getattr(torch, name)
        if dtype is torch.bfloat16 and capability is not None and tuple(capability) < BF16_MIN_CC:
            chosen.append((dtype, "bfloat16 needs compute capability {}.{} or newer".format(*BF16_MIN_CC)))
        else:
            chosen.append((dtype, None))
    return chosen


def skipped(meta: Dict[str, Any], dtype: Any, reason: str) -> Dict[str, Any]:
    case = dict(meta)
    case.update(dtype=str(dtype).replace("torch.", ""), status="not-run", reason=reason)
    return case


# ------------------------------------------------------------------------------------------- families


Family = Callable[[Runner, Any], List[Dict[str, Any]]]
"""A family's cases on one device: (its runner, the family's module) -> cases."""


def attention_problems(runner: Runner, kernel_name: str,
                       cases: List[Dict[str, Any]]) -> Iterator[Tuple[Dict[str, Any], Any, Tuple[Any, ...]]]:
    """For each head dim and dtype: the case's facts, the dtype, and its inputs and fp32 result (q, k, v,
    reference, scale, `attention_inputs`); a dtype this GPU cannot run goes into `cases` as not run."""
    for head_dim in HEAD_DIMS:
        for dtype, reason in dtypes_for(runner):
            meta = {"kernel": kernel_name, "head_dim": head_dim}
            if reason:
                cases.append(skipped(meta, dtype, reason))
                continue
            yield meta, dtype, attention_inputs(runner, dtype, head_dim)


def run_sdpa(runner: Runner, _module: Any) -> List[Dict[str, Any]]:
    torch = runner.torch
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        backends = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION}

        def forced(name: str) -> Any:
            return sdpa_kernel([backends[name]])
    except ImportError:  # torch < 2.3
        def forced(name: str) -> Any:
            return torch.backends.cuda.sdp_kernel(enable_flash=name == "flash", enable_math=False,
                                                  enable_mem_efficient=name == "efficient")
    cases: List[Dict[str, Any]] = []
    for backend in SDPA_BACKENDS:
        for meta, dtype, (q, k, v, reference, scale) in attention_problems(runner, "sdpa-" + backend, cases):
            def call(q: Any = q, k: Any = k, v: Any = v, backend: str = backend) -> Any:
                with forced(backend):
                    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            cases.append(runner.case(meta, call, reference, scale, dtype))
    return cases


def load_triton_kernel() -> Tuple[Any, Any]:
    # Triton reads a kernel's source with inspect; code run with `python -c` has no file, so the source
    # is registered with linecache under a name of its own (nothing is written to disk).
    lines = TRITON_SOURCE.splitlines(True)
    linecache.cache[TRITON_FILENAME] = (len(TRITON_SOURCE), None, lines, TRITON_FILENAME)
    namespace = {"__name__": "dflash_doctor_triton_kernel"}
    exec(compile(TRITON_SOURCE, TRITON_FILENAME, "exec"), namespace)  # noqa: S102 - the doctor's own kernel
    return namespace["triton"], namespace["dflash_doctor_axpy"]


def run_triton(runner: Runner, _module: Any) -> List[Dict[str, Any]]:
    triton, kernel = load_triton_kernel()
    torch = runner.torch
    cases: List[Dict[str, Any]] = []
    n = BATCH * SEQLEN * HEADS * max(HEAD_DIMS)
    alpha = 0.5
    for dtype, reason in dtypes_for(runner):
        meta = {"kernel": "triton-axpy", "elements": n}
        if reason:
            cases.append(skipped(meta, dtype, reason))
            continue
        x = randn(runner, (n,)).to(dtype)
        y = randn(runner, (n,)).to(dtype)
        reference = x.float() * alpha + y.float()
        out = torch.empty_like(x)
        grid = (triton.cdiv(n, 1024),)

        def call(x: Any = x, y: Any = y, out: Any = out, grid: Tuple[int] = grid) -> Any:
            kernel[grid](x, y, out, n, alpha, BLOCK=1024)
            return out
        cases.append(runner.case(meta, call, reference, float(reference.abs().max().item()), dtype))
    return cases


def flash_layout_cases(runner: Runner, kernel_name: str, attend: Callable[[Any, Any, Any], Any]) -> List[Dict[str, Any]]:
    """Causal attention through a flash-attn API, which takes (batch, seqlen, heads, head_dim)."""
    cases: List[Dict[str, Any]] = []
    for meta, dtype, (q, k, v, reference, scale) in attention_problems(runner, kernel_name, cases):
        qt, kt, vt = (t.transpose(1, 2).contiguous() for t in (q, k, v))

        def call(qt: Any = qt, kt: Any = kt, vt: Any = vt) -> Any:
            return attend(qt, kt, vt).transpose(1, 2)
        cases.append(runner.case(meta, call, reference, scale, dtype))
    return cases


def run_flash_attn(runner: Runner, module: Any) -> List[Dict[str, Any]]:
    return flash_layout_cases(runner, "flash_attn_func", lambda q, k, v: module.flash_attn_func(q, k, v, causal=True))


def run_flash_attn_cute(runner: Runner, module: Any) -> List[Dict[str, Any]]:
    def attend(q: Any, k: Any, v: Any) -> Any:
        out = module.flash_attn_func(q, k, v, causal=True)
        # flash-attn-4 4.0 returns (out, lse); take the output whatever the release returns
        return out[0] if isinstance(out, tuple) else out
    return flash_layout_cases(runner, "flash_attn.cute.flash_attn_func", attend)


def rotary_cases(runner: Runner, kernel_name: str, apply: Callable[[Any, Any, Any, bool], Any]) -> List[Dict[str, Any]]:
    cases: List[Dict[str, Any]] = []
    for interleaved in (False, True):
        for head_dim in HEAD_DIMS:
            for dtype, reason in dtypes_for(runner):
                meta = {"kernel": kernel_name, "head_dim": head_dim,
                        "variant": "interleaved" if interleaved else "neox"}
                if reason:
                    cases.append(skipped(meta, dtype, reason))
                    continue
                x, cos, sin, reference, scale = rotary_inputs(runner, dtype, head_dim, interleaved)

                def call(x: Any = x, cos: Any = cos, sin: Any = sin, interleaved: bool = interleaved) -> Any:
                    return apply(x, cos, sin, interleaved)
                cases.append(runner.case(meta, call, reference, scale, dtype))
    return cases


def run_flash_attn_rotary(runner: Runner, module: Any) -> List[Dict[str, Any]]:
    apply_rotary = module.apply_rotary
    # vllm/model_executor/layers/rotary_embedding/common.py: apply_rotary(x, cos, sin, interleaved=...)
    return rotary_cases(runner, "flash_attn.apply_rotary",
                        lambda x, cos, sin, interleaved: apply_rotary(x, cos, sin, interleaved=interleaved))


def run_vllm_rotary(runner: Runner, module: Any) -> List[Dict[str, Any]]:
    apply_rotary_emb = module.apply_rotary_emb
    # forward_cuda: apply_rotary_emb(x, cos, sin, interleaved)
    return rotary_cases(runner, "vllm_flash_attn.apply_rotary_emb",
                        lambda x, cos, sin, interleaved: apply_rotary_emb(x, cos, sin, interleaved))


def run_vllm_flash_attn(runner: Runner, module: Any) -> List[Dict[str, Any]]:
    torch = runner.torch
    func = module.flash_attn_varlen_func
    takes_version = "fa_version" in inspect.signature(func).parameters
    interface = importlib.import_module("vllm.vllm_flash_attn.flash_attn_interface")
    cases: List[Dict[str, Any]] = []
    versions: List[Optional[int]] = [None]
    if takes_version:
        versions = []
        supported = getattr(interface, "is_fa_version_supported", lambda v: True)
        why_not = getattr(interface, "fa_version_unsupported_reason", lambda v: None)
        for candidate in (2, 3):
            if supported(candidate):
                versions.append(candidate)
                continue
            for dtype, _ in dtypes_for(runner):
                case = skipped({"kernel": f"vllm_flash_attn-fa{candidate}", "head_dim": None}, dtype,
                               f"vLLM says: {why_not(candidate)}")
                case["unsupported"] = True
                cases.append(case)
    for version in versions:
        name = "vllm_flash_attn" + (f"-fa{version}" if version else "")
        for meta, dtype, (q, k, v, reference, scale) in attention_problems(runner, name, cases):
            head_dim = meta["head_dim"]
            # varlen layout: (batch * seqlen, heads, head_dim) with cumulative sequence lengths
            qt, kt, vt = (t.transpose(1, 2).reshape(BATCH * SEQLEN, HEADS, head_dim).contiguous() for t in (q, k, v))
            cu = torch.arange(0, (BATCH + 1) * SEQLEN, SEQLEN, dtype=torch.int32, device=runner.device)
            extra = {"fa_version": version} if version else {}

            def call(qt: Any = qt, kt: Any = kt, vt: Any = vt, cu: Any = cu, extra: Dict[str, Any] = extra,
                     head_dim: int = head_dim) -> Any:
                out = func(qt, kt, vt, max_seqlen_q=SEQLEN, cu_seqlens_q=cu, max_seqlen_k=SEQLEN,
                           cu_seqlens_k=cu, causal=True, **extra)
                if isinstance(out, tuple):
                    out = out[0]
                return out.reshape(BATCH, SEQLEN, HEADS, head_dim).transpose(1, 2)
            cases.append(runner.case(meta, call, reference, scale, dtype))
    return cases


FAMILIES: Dict[str, Tuple[Family, Optional[str]]] = {
    "sdpa": (run_sdpa, None),
    "triton": (run_triton, None),
    "flash_attn": (run_flash_attn, "flash_attn"),
    "flash_attn_cute": (run_flash_attn_cute, "flash_attn.cute"),
    "flash_attn_rotary": (run_flash_attn_rotary, "flash_attn.ops.triton.rotary"),
    "vllm_flash_attn": (run_vllm_flash_attn, "vllm.vllm_flash_attn"),
    "vllm_rotary": (run_vllm_rotary, "vllm.vllm_flash_attn.layers.rotary"),
}


def vllm_selected_version() -> Any:
    try:
        from vllm.v1.attention.backends.fa_utils import get_flash_attn_version
        return get_flash_attn_version()
    except Exception as exc:  # noqa: BLE001 - said in the facts
        return f"unknown ({type(exc).__name__}: {str(exc)[:200]})"


Device = Tuple[Optional[int], List[int], Tuple[str, Optional[int], Optional[int]]]
"""A device the cases run on: (its index, the indices of the same model, (its name, major, minor))."""


def select_devices(torch: Any) -> List[Device]:
    """One device per distinct (name, compute capability): identical GPUs give identical results."""
    seen: Dict[Tuple[str, int, int], List[int]] = {}
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        key = (props.name, props.major, props.minor)
        seen.setdefault(key, []).append(index)
    return [(indices[0], indices, key) for key, indices in seen.items()]


FACTS: Dict[str, Any] = {}


def main(started: float) -> None:
    facts = FACTS
    facts.update({"family": FAMILY, "settings": {
        "batch": BATCH, "seqlen": SEQLEN, "heads": HEADS, "head_dims": HEAD_DIMS, "dtypes": DTYPES,
        "seed": SEED, "warm_iters": WARM_ITERS, "tolerance_ulps": TOLERANCE_ULPS, "causal": True}})
    run, module_name = FAMILIES[FAMILY]
    top, statement = NEEDS[FAMILY]
    facts["import"] = {"statement": statement, "installed": True, "ok": True}
    if top is not None and not installed(top, module_name):
        # Not installed: say so without paying for torch.
        facts["import"].update(installed=False, ok=False)
        return finish(facts, started)
    timings: Dict[str, float] = {}
    facts["timings"] = timings
    t0 = time.monotonic()
    try:
        import torch
    except BaseException as exc:  # noqa: BLE001 - a broken torch is itself the finding
        facts["torch"] = {"import_ok": False, "exception": kernel_error(exc)}
        return finish(facts, started)
    timings["torch_import_s"] = round(time.monotonic() - t0, 3)
    facts["torch"] = {"import_ok": True, "version": torch.__version__, "cuda": getattr(torch.version, "cuda", None)}
    module = None
    if module_name is not None or FAMILY == "triton":
        t0 = time.monotonic()
        try:
            if FAMILY == "triton":
                module = importlib.import_module("triton")
            elif module_name is not None and statement is not None:
                exec(statement, {})  # noqa: S102 - the statement as the stack writes it
                module = importlib.import_module(module_name)
        except BaseException as exc:  # noqa: BLE001 - the import's failure, whatever it raises, is the fact
            facts["import"].update(ok=False, exception=kernel_error(exc))
            return finish(facts, started)
        timings["family_import_s"] = round(time.monotonic() - t0, 3)
        facts["import"]["file"] = getattr(module, "__file__", None)
        facts["import"]["version"] = family_version(module_name or "triton")
    torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 reference stays fp32
    torch.backends.cudnn.allow_tf32 = False
    generator = torch.Generator().manual_seed(SEED)
    devices: List[Device] = []
    if DEVICE == "cpu":
        devices = [(None, [], ("cpu", None, None))]
    else:
        t0 = time.monotonic()
        try:
            available = torch.cuda.is_available()
            if not available:
                torch.cuda.init()
        except Exception as exc:  # noqa: BLE001 - why CUDA is not available is the fact
            facts["cuda"] = {"available": False, "error": kernel_error(exc)}
            return finish(facts, started)
        if not available:
            facts["cuda"] = {"available": False, "error": None}
            return finish(facts, started)
        devices = select_devices(torch)
        facts["cuda"] = {"available": True, "device_count": torch.cuda.device_count()}
        timings["cuda_init_s"] = round(time.monotonic() - t0, 3)
    if FAMILY == "vllm_flash_attn":
        facts["vllm_selects_fa_version"] = vllm_selected_version()
    facts["devices"] = []
    for index, same, (name, major, minor) in devices:
        t0 = time.monotonic()
        device = torch.device("cpu") if index is None else torch.device("cuda", index)
        capability = [major, minor] if major is not None and minor is not None else None
        entry: Dict[str, Any] = {"index": index, "same_model": same, "name": name, "capability": capability}
        runner = Runner(torch, device, capability, generator)
        try:
            if index is not None:
                torch.cuda.set_device(device)  # creates the CUDA context: fails on a full GPU
            entry["cases"] = run(runner, module)
        except Exception as exc:  # noqa: BLE001 - the device or the family's own set-up failed, not one case
            entry["cases"] = []
            entry["error"] = kernel_error(exc)
        entry["seconds"] = round(time.monotonic() - t0, 3)
        facts["devices"].append(entry)
    return finish(facts, started)


def installed(top: str, module_name: Optional[str]) -> bool:
    """Whether the family's package is there, found without running any of its code."""
    spec = importlib.util.find_spec(top)
    if spec is None:
        return False
    if module_name != "flash_attn.cute":
        return True
    # flash-attn-4 installs flash_attn/cute/ alone; v2 (before 2.8.3 carried a copy) may have none.
    return any(os.path.isfile(os.path.join(location, "cute", "__init__.py"))
               for location in (spec.submodule_search_locations or []))


def family_version(module_name: str) -> Optional[str]:
    top = module_name.split(".")[0]
    names = {"flash_attn.cute": ("flash-attn-4", "flash-attn"), "flash_attn": ("flash-attn", "flash_attn"),
             "vllm": ("vllm",), "triton": ("triton",)}
    for dist in names.get(module_name, names.get(top, ())):
        with contextlib.suppress(Exception):  # not installed under that name: the next one
            return metadata.version(dist)
    return None


def finish(facts: Dict[str, Any], started: float) -> None:
    facts["seconds"] = round(time.monotonic() - started, 3)
    emit(facts, allow_nan=False)


if __name__ == "__main__":
    _started = time.monotonic()
    try:
        main(_started)
    except BaseException as _exc:  # noqa: BLE001 - whatever escaped the per-case guards: still report what is known
        FACTS["probe_error"] = kernel_error(_exc)
        finish(FACTS, _started)
