"""What vLLM imports from outside itself, and which of those imports sit on the serving path.

The doctor reads the import sites and their guards from the installed vLLM's own source (AST); this
module only says which packages to look for and which sites `vllm serve` is known to reach.
"""

from __future__ import annotations

from dflash_doctor.knowledge import Fact
from dflash_doctor.shape import frozen_dataclass

EXTERNAL_KERNEL_MODULES: Fact[tuple[str, ...]] = Fact(
    value=("flash_attn", "flash_attn_interface", "flash_attn_3", "flashinfer", "xformers", "deep_gemm",
           "triton_kernels", "flash_mla", "aiter"),
    source="grep of `^\\s*(from|import) (flash_attn|flashinfer|...)` and `import_module(\"...\")` over the vllm "
    "package: external packages vLLM imports optionally (its bundled copies live under vllm.vllm_flash_attn "
    "and vllm.third_party and are not external)",
    read_from="vllm 0.20.1 and 0.24.0 wheels",
)

SERVING_PATH_SITES: Fact[tuple[tuple[str, str], ...]] = Fact(
    value=(("vllm/model_executor/layers/rotary_embedding/common.py", "flash_attn"),),
    source="vllm/model_executor/layers/rotary_embedding/base.py: RotaryEmbeddingBase.__init__ builds "
    "ApplyRotaryEmb(...) for every RoPE layer, and ApplyRotaryEmb.__init__ (common.py) imports "
    "flash_attn.ops.triton.rotary; every RoPE target (Qwen3) and the DFlash drafter construct one",
    read_from="vllm 0.20.1 and 0.34.0 wheels",
)

VENDORED_DEEP_GEMM: Fact[dict[str, tuple[str, ...]]] = Fact(
    value={"0.20.1": ("3.12",), "0.24.0": ("3.10", "3.11", "3.12", "3.13", "3.14")},
    source="the wheels' file lists: vllm/third_party/deep_gemm/_C.cpython-3XX-x86_64-linux-gnu.so, one file per "
    "CPython the release ships DeepGEMM's extension for (the wheels themselves are cp38-abi3). When it cannot be "
    "imported, vllm/utils/deep_gemm.py (0.20.1) still finds the package (has_deep_gemm: find_spec of "
    "vllm.third_party.deep_gemm), _import_deep_gemm returns None, and each DeepGEMM entry point then raises "
    "RuntimeError(\"DeepGEMM backend is not available or outdated. ...\") where VLLM_USE_DEEP_GEMM (default 1) "
    "and the GPU select it; VLLM_USE_DEEP_GEMM=0 turns it off",
    read_from="vllm-0.20.1-1-cp38-abi3-manylinux_2_35_x86_64.whl, vllm-0.24.0-cp38-abi3-manylinux_2_28_x86_64.whl",
)
"""vLLM release -> the CPython versions its wheel ships vllm.third_party.deep_gemm._C for."""


SERVE_ENTRY_POINT: Fact[str] = Fact(
    value="vllm.entrypoints.cli.main:main",
    source="the `vllm` console script of vLLM's wheels (vllm-*.dist-info/entry_points.txt: "
    "`vllm = vllm.entrypoints.cli.main:main`); main() imports vllm.entrypoints.cli.serve and the other "
    "subcommands in its body, unconditionally",
    read_from="vllm 0.20.1 and 0.24.0 wheels",
    note="The doctor reads the entry point from the installed dist-info's entry_points.txt; this is the fallback "
    "for a vLLM installed without one (a source tree on PYTHONPATH).",
)

SERVE_LOADED_BY_NAME: Fact[tuple[tuple[str, str], ...]] = Fact(
    value=(
        ("vllm.v1.engine.async_llm", ("vllm/entrypoints/openai/api_server.py build_async_engine_client_from_engine_args: "
         "`from vllm.v1.engine.async_llm import AsyncLLM` inside the function every `vllm serve` runs")),
        ("vllm.platforms.cuda", ("vllm/platforms/__init__.py cuda_platform_plugin: returns the string "
         "\"vllm.platforms.cuda.CudaPlatform\", which resolve_obj_by_qualname imports")),
        ("vllm.v1.worker.gpu_worker", ("vllm/platforms/cuda.py check_and_update_config: parallel_config.worker_cls = "
         "\"vllm.v1.worker.gpu_worker.Worker\", imported by name in the engine's worker process")),
    ),
    source="what `vllm serve` on a CUDA GPU imports by a string or inside a function it always runs: an import scan "
    "that follows module-level imports from the entry point cannot see these (see each entry)",
    read_from="vllm 0.20.1 and 0.24.0 wheels",
    note="The doctor follows the module-level imports of each of these, as of the entry point's module; a release "
    "without one of them is scanned without it (the section says which were found).",
)

REQUIREMENT_IMPORT_NAMES: Fact[dict[str, tuple[str, ...]]] = Fact(
    value={
        "pyzmq": ("zmq",), "pillow": ("PIL",), "pyyaml": ("yaml",), "py-cpuinfo": ("cpuinfo",),
        "protobuf": ("google.protobuf",), "python-json-logger": ("pythonjsonlogger",),
        "opencv-python-headless": ("cv2",), "lm-format-enforcer": ("lmformatenforcer",),
        "flashinfer-python": ("flashinfer",), "apache-tvm-ffi": ("tvm_ffi",), "nvidia-cudnn-frontend": ("cudnn",),
        "nvidia-cutlass-dsl": ("cutlass",), "quack-kernels": ("quack",), "nvidia-ml-py": ("pynvml",),
        "setuptools": ("setuptools", "pkg_resources", "_distutils_hack"),
        "opentelemetry-api": ("opentelemetry.trace", "opentelemetry.context", "opentelemetry.propagate",
                              "opentelemetry.metrics", "opentelemetry.baggage"),
        "opentelemetry-sdk": ("opentelemetry.sdk",),
        "opentelemetry-exporter-otlp": ("opentelemetry.exporter.otlp",),
        "opentelemetry-semantic-conventions-ai": ("opentelemetry.semconv_ai",),
    },
    source="the import names of vLLM's requirements whose name is not the distribution's, as their wheels install "
    "them (RECORD): pyzmq zmq/, pillow PIL/, pyyaml yaml/, py-cpuinfo cpuinfo/, protobuf google/protobuf/, "
    "python-json-logger pythonjsonlogger/, setuptools setuptools/ pkg_resources/ _distutils_hack/, "
    "opentelemetry-api opentelemetry/{trace,context,propagate,metrics,baggage}/, opentelemetry-sdk "
    "opentelemetry/sdk/ (read from the installed RECORDs of tests/stacks.py vllm_python('0.20.1')); "
    "opencv-python-headless cv2/, lm-format-enforcer lmformatenforcer/, flashinfer-python flashinfer/, "
    "apache-tvm-ffi tvm_ffi/, nvidia-cudnn-frontend cudnn/, nvidia-cutlass-dsl cutlass/, quack-kernels quack/, "
    "nvidia-ml-py pynvml.py, opentelemetry-exporter-otlp opentelemetry/exporter/otlp/, "
    "opentelemetry-semantic-conventions-ai opentelemetry/semconv_ai/ (the names vLLM's source imports them by)",
    read_from="vllm 0.20.1's requirements; the wheels pip resolved for them on 2026-12-03",
    note="For a requirement that is not installed there is no RECORD to read: these names, else the distribution's "
    "name with '-' as '_'. For one that is installed, its RECORD's top-level names, except for the namespace "
    "packages here (google, opentelemetry), whose top-level name says nothing of which part is installed.",
)

IMPORTED_THROUGH: Fact[dict[str, tuple[str, str]]] = Fact(
    value={
        "setuptools": ("torch.utils.cpp_extension", ("torch/utils/cpp_extension.py imports setuptools at module "
                                                     "level (`import setuptools`, line 11 in torch 2.13.0)")),
    },
    source="requirements of vLLM that `vllm serve` imports only through another package on its way up, which a scan "
    "of vLLM's own files cannot see: vllm/distributed/device_communicators/pynccl_allocator.py imports "
    "torch.utils.cpp_extension at module level, and that module imports setuptools (torch's METADATA: "
    "Requires-Dist: setuptools>=77.0.3)",
    read_from="vllm 0.20.1 wheel; torch 2.13.0 (CPU) torch/utils/cpp_extension.py. Checked by a real import: "
    "vLLM 0.20.1's serve modules fail to import without setuptools (tests/test_serve_imports.py)",
    note="Counted only for a requirement that is missing, and only where the scan finds the module named here "
    "on the way up. At another version it is a warning: the engine run of fixtures/engine/01-healthy.json "
    "served with setuptools 81.0.0 where vLLM 0.20.1 asks for <81.0.0, which torch's own >=77.0.3 accepts.",
)

@frozen_dataclass(frozen=True)
class EngineStartImport:
    """A requirement of vLLM that its code imports, inside a function, when the engine starts."""

    vllm_file: str
    """The vLLM file that imports it at module level (found by the scan among the imports off the way up)."""
    route: tuple[str, ...]
    """From the serve path's root to that file: how the engine reaches it."""
    variable: str
    """The environment variable that turns it off with 0."""
    default_on_from: str
    """The first release where the variable unset means on (before it, only a set variable imports it)."""
    oldest: str
    newest: str
    """The releases read."""
    what: str


IMPORTED_AT_ENGINE_START: Fact[dict[str, EngineStartImport]] = Fact(
    value={
        "flashinfer-python": EngineStartImport(
            vllm_file="vllm/v1/attention/backends/flashinfer.py",
            route=("vllm.v1.worker.gpu_worker", "vllm.v1.sample.ops.topk_topp_sampler.flashinfer_sampler_supported()",
                   "vllm.v1.attention.backends.flashinfer"),
            variable="VLLM_USE_FLASHINFER_SAMPLER", default_on_from="0.21.0", oldest="0.18.0", newest="0.34.0",
            what=("its sampler, built when the engine loads the model, asks FlashInfer whether it can sample "
                  "(it imports vllm.v1.attention.backends.flashinfer, which imports flashinfer at module level)")),
    },
    source="vllm/v1/sample/ops/topk_topp_sampler.py: on CUDA, while VLLM_USE_FLASHINFER_SAMPLER is not 0, "
    "`from vllm.v1.attention.backends.flashinfer import FlashInferBackend` (flashinfer_sampler_supported from "
    "0.23.0: \"Assumes flashinfer is installed, as guaranteed by requirements/cuda.txt\"), called from "
    "TopKTopPSampler.__init__ (V1) and vllm/v1/worker/gpu/sample/sampler.py Sampler.__init__ (V2); before 0.23.0 "
    "TopKTopPSampler.__init__ holds the import under `if envs.VLLM_USE_FLASHINFER_SAMPLER:`. envs.py makes an "
    "unset variable True from 0.21.0; in 0.18.0 and 0.20.1 its default is None and only a user who sets it "
    "imports FlashInfer",
    read_from="vllm 0.18.0 to 0.34.0 sdists (tests/test_release_matrix.py runs each release's own code); the "
    "engine: vLLM 0.26.0 on an H200 died at start with `ModuleNotFoundError: No module named 'flashinfer'` "
    "(fixtures/engine/vllm-0.26.0/20-flashinfer-missing.json)",
    note="Counted only for a missing requirement and the installed vLLM inside the releases read.",
)

NEVER_IMPORTED: Fact[dict[str, tuple[str, str, str]]] = Fact(
    value={"flash-attn-4": ("flash_attn.cute", "0.18.0", "0.34.0")},
    source="no file of the vllm package imports the module named (`import flash_attn.cute`, `from flash_attn.cute "
    "...`, or the name as a string): vLLM's CuTe DSL attention is its bundled vllm.vllm_flash_attn.cute, and its "
    "only imports of flash_attn are flash-attn 2's API (v1/attention/backends/fa_utils.py, the rotary op)",
    read_from="vllm 0.18.0 to 0.34.0 sdists (tests/test_release_matrix.py reads each); the engine: vLLM 0.26.0 on an "
    "H200 served with flash-attn-4 4.0.0b36's apache-tvm-ffi pin broken by vLLM's own "
    "(fixtures/engine/vllm-0.26.0/02-flash-attn-4-only.json)",
    note="value: distribution -> (the module of it that no vLLM release imports, the oldest and the newest release "
    "read). A pin of such a distribution that another broke is a warning where the installed vLLM is among those "
    "read: `vllm serve` never loads it, what else imports it fails.",
)
