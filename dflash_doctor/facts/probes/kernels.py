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
import importlib
import importlib.util
import json
import linecache
import math
import os
import sys
import time
import traceback
import warnings

MARKER = "@@dflash-doctor-facts@@"
# Arguments come on stdin (never in argv, where `ps` would show a serve command's --api-key), or as
# argv[1] in a job forked from the shared host.
ARGS = json.loads(sys.argv[1] if len(sys.argv) > 1 else (sys.stdin.read() or "{}"))
FAMILY = ARGS.get("family", "sdpa")
HEAD_DIMS = ARGS.get("head_dims") or [128, 64]
DTYPES = ARGS.get("dtypes") or ["float16", "bfloat16"]
BATCH = int(ARGS.get("batch", 2))
SEQLEN = int(ARGS.get("seqlen", 128))
HEADS = int(ARGS.get("heads", 4))
SEED = int(ARGS.get("seed", 0))
WARM_ITERS = int(ARGS.get("warm_iters", 10))
TOLERANCE_ULPS = float(ARGS.get("tolerance_ulps", 2.0))
BF16_MIN_CC = tuple(ARGS.get("bf16_min_cc") or (8, 0))
DEVICE = ARGS.get("device", "cuda")  # "cpu" only in the doctor's own tests
SDPA_BACKENDS = ARGS.get("sdpa_backends") or ["flash", "efficient"]

# What each family needs importable, and the statement that imports it (as the stack writes it).
NEEDS = {
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


def describe(exc, caught=()):
    return {
        "type": type(exc).__name__,
        "message": str(exc)[:3000],
        "oom": type(exc).__name__ == "OutOfMemoryError" or "out of memory" in str(exc).lower(),
        "warnings": [str(w.message)[:1000] for w in caught][:12],
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-3:])[-2000:],
    }


class Runner:
    """Times one kernel call (first run, then warm) and compares it with the reference."""

    def __init__(self, torch, device):
        self.torch = torch
        self.device = device
        self.broken = None  # a sticky CUDA error: nothing more can run in this process

    def sync(self):
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)

    def case(self, meta, call, reference, scale, dtype):
        torch = self.torch
        case = dict(meta)
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
            except Exception as exc:
                case["status"] = "error"
                case["error"] = describe(exc, caught)
                self.check_context(case)
                return case
        ok = finite and case["max_abs_err"] is not None and case["max_abs_err"] <= case["tolerance"]
        case["status"] = "ok" if ok else "mismatch"
        if not finite:
            case["nonfinite"] = True
        return case

    def check_context(self, case):
        try:
            self.sync()
        except Exception as exc:
            self.broken = "%s: %s" % (type(exc).__name__, str(exc)[:300])
            case["context_lost"] = True


def randn(torch, shape, generator, device):
    # Drawn on the CPU with a fixed seed, so that every GPU gets the same inputs.
    return torch.randn(shape, generator=generator, dtype=torch.float32).to(device)


def attention_reference(torch, q, k, v):
    """fp32 causal attention; q, k, v (batch, heads, seqlen, head_dim) in fp32."""
    scores = torch.matmul(q, k.transpose(-1, -2)) * (q.shape[-1] ** -0.5)
    seqlen = q.shape[-2]
    mask = torch.ones(seqlen, seqlen, dtype=torch.bool, device=q.device).triu(1)
    scores = scores.masked_fill(mask, float("-inf"))
    return torch.matmul(scores.softmax(dim=-1), v)


def attention_inputs(torch, device, dtype, head_dim, generator):
    shape = (BATCH, HEADS, SEQLEN, head_dim)
    q, k, v = (randn(torch, shape, generator, device).to(dtype) for _ in range(3))
    reference = attention_reference(torch, q.float(), k.float(), v.float())
    # The output is a convex combination of rows of v: its rounding error scales with max |v|.
    return q, k, v, reference, float(v.float().abs().max().item())


def rotary_inputs(torch, device, dtype, head_dim, interleaved, generator):
    """x (batch, seqlen, heads, head_dim) and cos/sin (seqlen, head_dim/2) in `dtype`, and the fp32 result."""
    x = randn(torch, (BATCH, SEQLEN, HEADS, head_dim), generator, device).to(dtype)
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


def dtypes_for(torch, capability):
    chosen = []
    for name in DTYPES:
        dtype = getattr(torch, name)
        if dtype is torch.bfloat16 and capability is not None and tuple(capability) < BF16_MIN_CC:
            chosen.append((dtype, "bfloat16 needs compute capability %d.%d or newer" % BF16_MIN_CC))
        else:
            chosen.append((dtype, None))
    return chosen


def skipped(meta, dtype, reason):
    case = dict(meta)
    case.update(dtype=str(dtype).replace("torch.", ""), status="not-run", reason=reason)
    return case


# ------------------------------------------------------------------------------------------- families


def run_sdpa(torch, runner, device, capability, generator, _module):
    import torch.nn.functional as F

    backends = {}
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        backends = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION}

        def forced(name):
            return sdpa_kernel([backends[name]])
    except ImportError:  # torch < 2.3
        def forced(name):
            return torch.backends.cuda.sdp_kernel(enable_flash=name == "flash", enable_math=False,
                                                  enable_mem_efficient=name == "efficient")
    cases = []
    for backend in SDPA_BACKENDS:
        for head_dim in HEAD_DIMS:
            for dtype, reason in dtypes_for(torch, capability):
                meta = {"kernel": "sdpa-" + backend, "head_dim": head_dim}
                if reason:
                    cases.append(skipped(meta, dtype, reason))
                    continue
                q, k, v, reference, scale = attention_inputs(torch, device, dtype, head_dim, generator)

                def call(q=q, k=k, v=v, backend=backend):
                    with forced(backend):
                        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
                cases.append(runner.case(meta, call, reference, scale, dtype))
    return cases


def load_triton_kernel():
    # Triton reads a kernel's source with inspect; code run with `python -c` has no file, so the source
    # is registered with linecache under a name of its own (nothing is written to disk).
    lines = TRITON_SOURCE.splitlines(True)
    linecache.cache[TRITON_FILENAME] = (len(TRITON_SOURCE), None, lines, TRITON_FILENAME)
    namespace = {"__name__": "dflash_doctor_triton_kernel"}
    exec(compile(TRITON_SOURCE, TRITON_FILENAME, "exec"), namespace)
    return namespace["triton"], namespace["dflash_doctor_axpy"]


def run_triton(torch, runner, device, capability, generator, _module):
    triton, kernel = load_triton_kernel()
    cases = []
    n = BATCH * SEQLEN * HEADS * max(HEAD_DIMS)
    alpha = 0.5
    for dtype, reason in dtypes_for(torch, capability):
        meta = {"kernel": "triton-axpy", "elements": n}
        if reason:
            cases.append(skipped(meta, dtype, reason))
            continue
        x = randn(torch, (n,), generator, device).to(dtype)
        y = randn(torch, (n,), generator, device).to(dtype)
        reference = x.float() * alpha + y.float()
        out = torch.empty_like(x)
        grid = (triton.cdiv(n, 1024),)

        def call(x=x, y=y, out=out, grid=grid):
            kernel[grid](x, y, out, n, alpha, BLOCK=1024)
            return out
        cases.append(runner.case(meta, call, reference, float(reference.abs().max().item()), dtype))
    return cases


def flash_layout_cases(torch, runner, device, capability, generator, kernel_name, attend):
    """Causal attention through a flash-attn API, which takes (batch, seqlen, heads, head_dim)."""
    cases = []
    for head_dim in HEAD_DIMS:
        for dtype, reason in dtypes_for(torch, capability):
            meta = {"kernel": kernel_name, "head_dim": head_dim}
            if reason:
                cases.append(skipped(meta, dtype, reason))
                continue
            q, k, v, reference, scale = attention_inputs(torch, device, dtype, head_dim, generator)
            qt, kt, vt = (t.transpose(1, 2).contiguous() for t in (q, k, v))

            def call(qt=qt, kt=kt, vt=vt):
                return attend(qt, kt, vt).transpose(1, 2)
            cases.append(runner.case(meta, call, reference, scale, dtype))
    return cases


def run_flash_attn(torch, runner, device, capability, generator, module):
    return flash_layout_cases(torch, runner, device, capability, generator, "flash_attn_func",
                              lambda q, k, v: module.flash_attn_func(q, k, v, causal=True))


def run_flash_attn_cute(torch, runner, device, capability, generator, module):
    def attend(q, k, v):
        out = module.flash_attn_func(q, k, v, causal=True)
        # flash-attn-4 4.0 returns (out, lse); take the output whatever the release returns
        return out[0] if isinstance(out, tuple) else out
    return flash_layout_cases(torch, runner, device, capability, generator, "flash_attn.cute.flash_attn_func",
                              attend)


def rotary_cases(torch, runner, device, capability, generator, kernel_name, apply):
    cases = []
    for interleaved in (False, True):
        for head_dim in HEAD_DIMS:
            for dtype, reason in dtypes_for(torch, capability):
                meta = {"kernel": kernel_name, "head_dim": head_dim,
                        "variant": "interleaved" if interleaved else "neox"}
                if reason:
                    cases.append(skipped(meta, dtype, reason))
                    continue
                x, cos, sin, reference, scale = rotary_inputs(torch, device, dtype, head_dim, interleaved, generator)

                def call(x=x, cos=cos, sin=sin, interleaved=interleaved):
                    return apply(x, cos, sin, interleaved)
                cases.append(runner.case(meta, call, reference, scale, dtype))
    return cases


def run_flash_attn_rotary(torch, runner, device, capability, generator, module):
    apply_rotary = module.apply_rotary
    # vllm/model_executor/layers/rotary_embedding/common.py: apply_rotary(x, cos, sin, interleaved=...)
    return rotary_cases(torch, runner, device, capability, generator, "flash_attn.apply_rotary",
                        lambda x, cos, sin, interleaved: apply_rotary(x, cos, sin, interleaved=interleaved))


def run_vllm_rotary(torch, runner, device, capability, generator, module):
    apply_rotary_emb = module.apply_rotary_emb
    # forward_cuda: apply_rotary_emb(x, cos, sin, interleaved)
    return rotary_cases(torch, runner, device, capability, generator, "vllm_flash_attn.apply_rotary_emb",
                        lambda x, cos, sin, interleaved: apply_rotary_emb(x, cos, sin, interleaved))


def run_vllm_flash_attn(torch, runner, device, capability, generator, module):
    import inspect

    func = module.flash_attn_varlen_func
    takes_version = "fa_version" in inspect.signature(func).parameters
    interface = importlib.import_module("vllm.vllm_flash_attn.flash_attn_interface")
    cases = []
    versions = [None]
    if takes_version:
        versions = []
        supported = getattr(interface, "is_fa_version_supported", lambda v: True)
        why_not = getattr(interface, "fa_version_unsupported_reason", lambda v: None)
        for version in (2, 3):
            if supported(version):
                versions.append(version)
                continue
            for dtype, _ in dtypes_for(torch, capability):
                case = skipped({"kernel": "vllm_flash_attn-fa%d" % version, "head_dim": None}, dtype,
                               "vLLM says: %s" % why_not(version))
                case["unsupported"] = True
                cases.append(case)
    for version in versions:
        for head_dim in HEAD_DIMS:
            for dtype, reason in dtypes_for(torch, capability):
                name = "vllm_flash_attn" + ("-fa%d" % version if version else "")
                meta = {"kernel": name, "head_dim": head_dim}
                if reason:
                    cases.append(skipped(meta, dtype, reason))
                    continue
                q, k, v, reference, scale = attention_inputs(torch, device, dtype, head_dim, generator)
                # varlen layout: (batch * seqlen, heads, head_dim) with cumulative sequence lengths
                qt, kt, vt = (t.transpose(1, 2).reshape(BATCH * SEQLEN, HEADS, head_dim).contiguous() for t in (q, k, v))
                cu = torch.arange(0, (BATCH + 1) * SEQLEN, SEQLEN, dtype=torch.int32, device=device)
                extra = {"fa_version": version} if version else {}

                def call(qt=qt, kt=kt, vt=vt, cu=cu, extra=extra, head_dim=head_dim):
                    out = func(qt, kt, vt, max_seqlen_q=SEQLEN, cu_seqlens_q=cu, max_seqlen_k=SEQLEN,
                               cu_seqlens_k=cu, causal=True, **extra)
                    if isinstance(out, tuple):
                        out = out[0]
                    return out.reshape(BATCH, SEQLEN, HEADS, head_dim).transpose(1, 2)
                cases.append(runner.case(meta, call, reference, scale, dtype))
    return cases


FAMILIES = {
    "sdpa": (run_sdpa, None),
    "triton": (run_triton, None),
    "flash_attn": (run_flash_attn, "flash_attn"),
    "flash_attn_cute": (run_flash_attn_cute, "flash_attn.cute"),
    "flash_attn_rotary": (run_flash_attn_rotary, "flash_attn.ops.triton.rotary"),
    "vllm_flash_attn": (run_vllm_flash_attn, "vllm.vllm_flash_attn"),
    "vllm_rotary": (run_vllm_rotary, "vllm.vllm_flash_attn.layers.rotary"),
}


def vllm_selected_version():
    try:
        from vllm.v1.attention.backends.fa_utils import get_flash_attn_version
        return get_flash_attn_version()
    except Exception as exc:
        return "unknown (%s: %s)" % (type(exc).__name__, str(exc)[:200])


def select_devices(torch):
    """One device per distinct (name, compute capability): identical GPUs give identical results."""
    seen = {}
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        key = (props.name, props.major, props.minor)
        seen.setdefault(key, []).append(index)
    return [(indices[0], indices, key) for key, indices in seen.items()]


FACTS = {}


def main(started):
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
    timings = facts["timings"] = {}
    t0 = time.monotonic()
    try:
        import torch
    except BaseException as exc:
        facts["torch"] = {"import_ok": False, "exception": describe(exc)}
        return finish(facts, started)
    timings["torch_import_s"] = round(time.monotonic() - t0, 3)
    facts["torch"] = {"import_ok": True, "version": torch.__version__, "cuda": getattr(torch.version, "cuda", None)}
    module = None
    if module_name is not None or FAMILY == "triton":
        t0 = time.monotonic()
        try:
            if FAMILY == "triton":
                module = importlib.import_module("triton")
            else:
                namespace = {}
                exec(statement, namespace)
                module = importlib.import_module(module_name)
        except BaseException as exc:
            facts["import"].update(ok=False, exception=describe(exc))
            return finish(facts, started)
        timings["family_import_s"] = round(time.monotonic() - t0, 3)
        facts["import"]["file"] = getattr(module, "__file__", None)
        facts["import"]["version"] = family_version(module_name or "triton")
    torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 reference stays fp32
    torch.backends.cudnn.allow_tf32 = False
    generator = torch.Generator().manual_seed(SEED)
    if DEVICE == "cpu":
        devices = [(None, [], ("cpu", None, None))]
    else:
        t0 = time.monotonic()
        try:
            available = torch.cuda.is_available()
            if not available:
                torch.cuda.init()
        except Exception as exc:
            facts["cuda"] = {"available": False, "error": describe(exc)}
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
        capability = [major, minor] if major is not None else None
        entry = {"index": index, "same_model": same, "name": name, "capability": capability}
        runner = Runner(torch, device)
        try:
            if index is not None:
                torch.cuda.set_device(device)  # creates the CUDA context: fails on a full GPU
            entry["cases"] = run(torch, runner, device, capability, generator, module)
        except Exception as exc:  # the device or the family's own set-up failed, not one case
            entry["cases"] = []
            entry["error"] = describe(exc)
        entry["seconds"] = round(time.monotonic() - t0, 3)
        facts["devices"].append(entry)
    return finish(facts, started)


def installed(top, module_name):
    """Whether the family's package is there, found without running any of its code."""
    spec = importlib.util.find_spec(top)
    if spec is None:
        return False
    if module_name != "flash_attn.cute":
        return True
    # flash-attn-4 installs flash_attn/cute/ alone; v2 (before 2.8.3 carried a copy) may have none.
    return any(os.path.isfile(os.path.join(location, "cute", "__init__.py"))
               for location in (spec.submodule_search_locations or []))


def family_version(module_name):
    top = module_name.split(".")[0]
    try:
        from importlib import metadata
    except ImportError:
        return None
    names = {"flash_attn.cute": ("flash-attn-4", "flash-attn"), "flash_attn": ("flash-attn", "flash_attn"),
             "vllm": ("vllm",), "triton": ("triton",)}
    for dist in names.get(module_name, names.get(top, ())):
        try:
            return metadata.version(dist)
        except Exception:
            continue
    return None


def finish(facts, started):
    facts["seconds"] = round(time.monotonic() - started, 3)
    sys.stdout.write("\n" + MARKER + json.dumps(facts, default=str, allow_nan=False) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    _started = time.monotonic()
    try:
        main(_started)
    except BaseException as _exc:  # whatever escaped the per-case guards: still report what is known
        FACTS["probe_error"] = describe(_exc)
        finish(FACTS, _started)
