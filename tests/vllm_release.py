"""A vLLM release's own functions, compiled from that release's source, to hold the doctor's rules to.

`release_function(version, "config/model.py", "_get_and_verify_max_len", globals)` finds the function (or
`Class.method`) in the release's sdist (tests/vllm_sources.py) and compiles exactly its source. vLLM's
module imports torch, transformers and the rest, none of which a rule needs, so only the names the
function looks up at run time are given, in `globals`: the platform (`current_platform`), `envs`, the
logger. Every decision is the release's own code; only what it would ask the machine is supplied.
"""

from __future__ import annotations
import __future__

import ast
import copy
import functools
import logging
import sys
from collections.abc import Callable, Mapping
from types import ModuleType, SimpleNamespace
from typing import Any

from vllm_sources import vllm_source

# The releases the rules are held to (issue: "at least" these), oldest first.
MATRIX = ("0.20.1", "0.22.1", "0.24.0", "0.26.0", "0.29.0", "0.30.0", "0.33.0", "0.34.0")

LOGGER = logging.getLogger("vllm-release-under-test")


def _find(tree: ast.Module, qualname: str) -> ast.FunctionDef:
    *owners, name = qualname.split(".")
    body: list[ast.stmt] = tree.body
    for owner in owners:
        body = next(n.body for n in body if isinstance(n, ast.ClassDef) and n.name == owner)
    return next(n for n in body if isinstance(n, ast.FunctionDef) and n.name == name)


@functools.lru_cache(maxsize=64)
def _tree(version: str, rel: str) -> ast.Module:
    return ast.parse((vllm_source(version) / rel).read_text())


def release_function(version: str, rel: str, qualname: str, namespace: Mapping[str, Any]) -> Callable[..., Any]:
    node = copy.deepcopy(_find(_tree(version, rel), qualname))
    node.decorator_list = []
    module = ast.Module(body=[node], type_ignores=[])
    code = compile(module, f"<vllm {version} {rel}>", "exec",
                   flags=__future__.annotations.compiler_flag, dont_inherit=True)
    scope: dict[str, Any] = {"logger": LOGGER, "Any": Any, **namespace}
    exec(code, scope)  # noqa: S102 - the release's own function, compiled from its own source
    return scope[node.name]  # type: ignore[no-any-return]


def first_class_with(version: str, rel: str, method: str) -> str:
    """The first class in `rel` that defines `method` (the base class, where subclasses override it)."""
    for node in _tree(version, rel).body:
        if isinstance(node, ast.ClassDef) and any(isinstance(n, ast.FunctionDef) and n.name == method
                                                   for n in node.body):
            return node.name
    raise LookupError(f"no class defines {method} in vLLM {version} {rel}")


# ------------------------------------------------------------------------------ the context length


# transformers' configuration_utils.ALLOWED_LAYER_TYPES (4.57.1; also imported as ALLOWED_ATTENTION_LAYER_TYPES).
ATTENTION_LAYER_TYPES = ("full_attention", "sliding_attention", "chunked_attention", "linear_attention")


class _Platform:
    @staticmethod
    def check_max_model_len(max_model_len: int) -> int:
        return max_model_len  # the CUDA platform's own: Platform.check_max_model_len returns it unchanged


def vllm_max_len(version: str) -> Callable[[Mapping[str, Any], Mapping[str, Any] | None, int | None], int]:
    """The release's own max_model_len: derive_max_model_len_and_key (its ModelArchConfigConvertor) and
    _get_and_verify_max_len (config/model.py), on a config in transformers v5's standardized form."""
    nested = release_function(version, "transformers_utils/config.py", "is_rope_parameters_nested",
                              {"ALLOWED_ATTENTION_LAYER_TYPES": ATTENTION_LAYER_TYPES,
                               "ALLOWED_LAYER_TYPES": ATTENTION_LAYER_TYPES})
    helpers: dict[str, Any] = {"is_rope_parameters_nested": nested}
    if "def iter_rope_parameters(" in (vllm_source(version) / "transformers_utils/config.py").read_text():
        helpers["iter_rope_parameters"] = release_function(version, "transformers_utils/config.py",
                                                           "iter_rope_parameters", helpers)
    convertor = "transformers_utils/model_arch_config_convertor.py"
    derive = release_function(version, convertor,
                              f"{first_class_with(version, convertor, 'derive_max_model_len_and_key')}"
                              ".derive_max_model_len_and_key", {})
    verify = release_function(version, "config/model.py", "_get_and_verify_max_len", {
        **helpers, "current_platform": _Platform(),
        "envs": SimpleNamespace(VLLM_ALLOW_LONG_MAX_MODEL_LEN=False)})

    def max_len(config: Mapping[str, Any], tokenizer_config: Mapping[str, Any] | None, given: int | None) -> int:
        hf_config = SimpleNamespace(**config)
        arch = SimpleNamespace(derived_max_model_len_and_key=derive(SimpleNamespace(hf_text_config=hf_config)))
        return int(verify(hf_config, arch, dict(tokenizer_config) if tokenizer_config else None, given,
                          False, None))
    return max_len


# ------------------------------------------------------------------------------ the model runner


def _literal(version: str, rel: str, name: str) -> Any:
    for node in _tree(version, rel).body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            if isinstance(value, ast.Call) and value.args:  # frozenset({...}) / frozenset([...])
                value = value.args[0]
            return frozenset(ast.literal_eval(value))
    return frozenset()


def vllm_runs_v2(version: str) -> Callable[..., bool] | None:
    """The release's own VllmConfig.use_v2_model_runner (None where the release has none) on a plain DFlash
    serve: a dense, unquantized generate model of `archs`, a DFlash drafter of `layer_types`, and
    VLLM_USE_V2_MODEL_RUNNER as `env` (None, True or False as vLLM's envs parses it)."""
    rel = "config/vllm.py"
    source = (vllm_source(version) / rel).read_text()
    if "def use_v2_model_runner(" not in source:
        return None
    platforms = ModuleType("vllm.platforms")  # the property imports current_platform from here in 0.29+
    platforms.current_platform = SimpleNamespace(  # type: ignore[attr-defined]
        is_rocm=lambda: False, is_unspecified=lambda: False)
    helpers = [name for name in ("_is_default_v2_model_runner_model", "_dflash_needs_multi_kv_group",
                                 "_is_dflash2_draft") if f"def {name}(" in source]

    def runs_v2(archs: list[str], layer_types: list[str], env: bool | None) -> bool:
        namespace = {
            "envs": SimpleNamespace(VLLM_USE_V2_MODEL_RUNNER=env), "HAS_TRITON": True,
            "current_platform": SimpleNamespace(is_rocm=lambda: False, is_unspecified=lambda: False),
            "DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES": _literal(version, rel, "DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES"),
            "ROCM_DEFAULT_MRV1_ARCHITECTURES": _literal(version, rel, "ROCM_DEFAULT_MRV1_ARCHITECTURES"),
        }
        model = SimpleNamespace(architectures=archs, runner_type="generate", is_moe=False, is_quantized=False,
                                is_diffusion=False, is_hybrid=False, is_attention_free=False)
        drafter = SimpleNamespace(architectures=["DFlashDraftModel"], hf_config=SimpleNamespace(layer_types=layer_types))
        config = SimpleNamespace(
            model_config=model, attention_config=SimpleNamespace(hisparse_config=None), watermark_config=None,
            speculative_config=SimpleNamespace(method="dflash", draft_model_config=drafter, parallel_drafting=False),
            _get_v2_model_runner_unsupported_features=list)
        for name in helpers:
            setattr(config, name, release_function(version, rel, f"VllmConfig.{name}", namespace).__get__(config))
        saved = {name: sys.modules.get(name) for name in ("vllm", "vllm.platforms")}
        sys.modules["vllm"], sys.modules["vllm.platforms"] = ModuleType("vllm"), platforms
        try:
            return bool(release_function(version, rel, "VllmConfig.use_v2_model_runner", namespace)(config))
        finally:
            for name, module in saved.items():
                if module is None:
                    sys.modules.pop(name, None)
                else:
                    sys.modules[name] = module
    return runs_v2


# ------------------------------------------------------------------------------ the attention backend

# KV cache dtypes and GPUs the backend choice is held to (issue 21: sm_80 to sm_100, auto and the fp8 family).
KV_CACHE_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")
CAPABILITIES = ((8, 0), (8, 6), (8, 9), (9, 0), (10, 0))


class _PlatformProxy:
    """`vllm.platforms.current_platform`: the simulated CUDA platform, made once its classes are compiled."""

    target: Any = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.target, name)


def vllm_attention(version: str, flash_attn: tuple[int, ...] = (2, 3, 4)
                   ) -> Callable[[tuple[int, int], str, int, bool, str | None], tuple[str, str]]:
    """The release's own attention-backend selection for one layer: `CudaPlatformBase.get_attn_backend_cls`
    (platforms/cuda.py) with its `_get_backend_priorities`, the `AttentionBackendEnum` registry and each
    backend class's `validate_configuration` and `supports_*` methods, the FlashAttention version helpers
    (v1/attention/backends/fa_utils.py, vllm_flash_attn/flash_attn_interface.py) and `AttentionSelectorConfig`
    (v1/attention/selector.py), all compiled from the release's sdist by tests/vllm_loader.py.

    Simulated: the device capability (`get_device_capability`, everything else of the platform is vLLM's
    CudaPlatformBase); the compiled FlashAttention 2/3/4 extensions present, as they are in vLLM's CUDA wheels
    (`_vllm_fa2_C`, `_vllm_fa3_C`, `cute/interface.py`, checked in the 0.20.1 and 0.24.0 wheels; `flash_attn`
    names the versions present, for a build without some); no current
    VllmConfig (so no `flash_attn_version` override, no user `--block-size`); torch's dtypes as named objects.

    Returns ("backend", NAME) or ("error", vLLM's ValueError message) for (capability, kv_cache_dtype,
    head_size, use_non_causal, explicitly selected backend or None), a bf16 decoder layer."""
    from vllm_loader import OnceLogger, SourceVllm

    proxy = _PlatformProxy()
    release: SourceVllm

    def resolve(qualname: str) -> Any:
        module, _, name = qualname.rpartition(".")
        return release.get(module, name)

    stubs: dict[str, dict[str, Any]] = {
        "vllm.logger": {"init_logger": lambda *_: OnceLogger()},
        "vllm.platforms": {"current_platform": proxy},
        "vllm.envs": {"VLLM_BATCH_INVARIANT": False, "VLLM_USE_V2_MODEL_RUNNER": None},
        "vllm.config": {"get_current_vllm_config": lambda: None, "get_current_vllm_config_or_none": lambda: None},
        "vllm.vllm_flash_attn.flash_attn_interface": {
            **{f"FA{v}_AVAILABLE": v in flash_attn for v in (2, 3, 4)},
            **{f"FA{v}_UNAVAILABLE_REASON": None if v in flash_attn else "not built" for v in (2, 3, 4)}},
        "vllm.utils.import_utils": {"resolve_obj_by_qualname": resolve},
    }
    release = SourceVllm(version, stubs)
    capability_cls = release.get("vllm.platforms.interface", "DeviceCapability")
    cuda_base = release.get("vllm.platforms.cuda", "CudaPlatformBase")

    class Simulated(cuda_base):  # type: ignore[misc, valid-type]
        capability: tuple[int, int] = (9, 0)

        @classmethod
        def get_device_capability(cls, device_id: int = 0) -> Any:
            return capability_cls(*cls.capability)

    proxy.target = Simulated()  # vLLM's current_platform is an instance
    selector_config = release.get("vllm.v1.attention.selector", "AttentionSelectorConfig")
    enum = release.get("vllm.v1.attention.backends.registry", "AttentionBackendEnum")
    paths = {member.value: member.name for member in enum}

    def select(capability: tuple[int, int], kv_cache_dtype: str, head_size: int, non_causal: bool,
               explicit: str | None) -> tuple[str, str]:
        Simulated.capability = capability
        config = selector_config(head_size=head_size, dtype=release.torch.bfloat16, kv_cache_dtype=kv_cache_dtype,
                                 block_size=None, use_non_causal=non_causal)
        with release.installed():
            try:
                path = Simulated.get_attn_backend_cls(enum[explicit] if explicit else None,
                                                      attn_selector_config=config, num_heads=None)
            except ValueError as exc:
                return "error", str(exc)
        return "backend", paths[path]
    return select


# ------------------------------------------------------------------------------ the token budget


def vllm_token_budget(version: str) -> Callable[[int, int, int], dict[str, Any]]:
    """The release's own `VllmConfig._set_max_num_scheduled_tokens` (config/vllm.py) for a DFlash serve, with its
    `SpeculativeConfig.max_num_new_slots_for_drafting`, `VllmConfig.num_lookahead_tokens` and (0.34) the
    `DFlashSpeculatorConfig` of v1/worker/gpu/spec_decode/dflash/config.py, compiled by tests/vllm_loader.py.

    Simulated: the configs are built field by field (method "dflash", parallel_drafting set as the release's
    SpeculativeConfig.__post_init__ sets it for DFlash, no user max_num_scheduled_tokens or max_num_active_seqs);
    0.34's `speculator_config` property looks the class up in a registry filled by decorators, which the loader
    drops, so it is given the DFlash class directly.

    Returns {"error": vLLM's ValueError or None, "max_num_scheduled_tokens", "max_num_active_seqs", "warnings"}
    for (num_speculative_tokens, max_num_batched_tokens, max_num_seqs)."""
    from vllm_loader import OnceLogger, SourceVllm

    logger = OnceLogger()
    release = SourceVllm(version, {"vllm.logger": {"init_logger": lambda *_: logger}})
    vllm_config = release.get("vllm.config.vllm", "VllmConfig")
    speculative = release.get("vllm.config.speculative", "SpeculativeConfig")
    dflash_config = "vllm.v1.worker.gpu.spec_decode.dflash.config"
    if (vllm_source(version) / "v1/worker/gpu/spec_decode/dflash/config.py").is_file():
        speculator = release.get(dflash_config, "DFlashSpeculatorConfig")
        speculative = type("SpeculativeConfig", (speculative,), {
            "speculator_config": property(lambda self: speculator(self))})

    def budget(k: int, batched: int, seqs: int) -> dict[str, Any]:
        spec = object.__new__(speculative)
        spec.__dict__.update(method="dflash", custom_method=None, num_speculative_tokens=k, parallel_drafting=True,
                             model="drafter", draft_model_config=SimpleNamespace(
                                 hf_config=SimpleNamespace(), architectures=["DFlashDraftModel"]))
        scheduler = SimpleNamespace(max_num_batched_tokens=batched, max_num_seqs=seqs, max_num_scheduled_tokens=None,
                                    max_num_active_seqs=None)
        config = object.__new__(vllm_config)
        config.__dict__.update(speculative_config=spec, scheduler_config=scheduler)
        logger.warnings.clear()
        error = None
        with release.installed():
            try:
                config._set_max_num_scheduled_tokens()
            except ValueError as exc:
                error = str(exc)
        return {"error": error, "max_num_scheduled_tokens": scheduler.max_num_scheduled_tokens,
                "max_num_active_seqs": scheduler.max_num_active_seqs, "warnings": list(logger.warnings)}
    return budget


def vllm_scheduler_refusal(version: str) -> Callable[[int, int, int, bool], str | None]:
    """The release's own `SchedulerConfig.verify_max_model_len` (config/scheduler.py): its ValueError message, or
    None, for (max_num_batched_tokens, max_num_seqs, max_model_len, enable_chunked_prefill); the other fields at
    their defaults (one partial prefill, no max_num_active_seqs)."""
    from vllm_loader import OnceLogger

    verify = release_function(version, "config/scheduler.py", "SchedulerConfig.verify_max_model_len",
                              {"logger": OnceLogger()})

    def refusal(batched: int, seqs: int, max_model_len: int, chunked: bool) -> str | None:
        config = SimpleNamespace(max_num_batched_tokens=batched, max_num_seqs=seqs, enable_chunked_prefill=chunked,
                                 max_num_partial_prefills=1, max_long_partial_prefills=1,
                                 long_prefill_token_threshold=0, max_num_active_seqs=None)
        try:
            verify(config, max_model_len)
        except ValueError as exc:
            return str(exc)
        return None
    return refusal


# ------------------------------------------------------------------------------ the quantized drafter's raw slice


class _Anything:
    """Whatever the release's method asks of torch, of its own module and of `self` beyond what is given: an
    object that answers every attribute, call and index with another, is true, and iterates as empty."""

    def __getattr__(self, name: str) -> Any:
        return _Anything()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _Anything()

    def __getitem__(self, key: Any) -> Any:
        return _Anything()

    def __iter__(self) -> Any:
        return iter(())


class _Given(_Anything):
    """The attributes given, and anything else as `_Anything`."""

    def __init__(self, **given: Any) -> None:
        self.__dict__.update(given)


class _RawWeight(_Anything):
    """qkv_proj.weight: records being sliced as a plain tensor (the read vLLM #51581 is about)."""

    def __init__(self) -> None:
        self.sliced = False

    def __getitem__(self, key: Any) -> Any:
        self.sliced = True
        return _Anything()


def raw_kv_methods(version: str) -> dict[str, str]:
    """file (relative to vllm/) -> `Class.method` of each *_dflash.py method that holds the raw K/V slice."""
    found: dict[str, str] = {}
    models = vllm_source(version) / "model_executor" / "models"
    for path in sorted(models.glob("*_dflash.py")):
        rel = f"model_executor/models/{path.name}"
        for node in _tree(version, rel).body:
            if not isinstance(node, ast.ClassDef):
                continue
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and "qkv_proj.weight[a.q_size:]" in ast.unparse(item):
                    found.setdefault(rel, f"{node.name}.{item.name}")
    return found


def vllm_slices_quantized_qkv_raw(version: str, rel: str, qualname: str) -> Callable[[bool], bool]:
    """The release's own method that builds the fused context K/V (`_build_context_kv_buffers`, in 0.20.1
    `_build_fused_kv_buffers`), run on one attention layer whose qkv_proj is quantized (True) or not: whether it
    slices `qkv_proj.weight` raw. The layer's quant_method is an UnquantizedLinearMethod or another class;
    `_reads_raw_weights` (0.34.0) is the release's own, on a CUDA platform; everything else the method touches
    answers anything (`_Anything`)."""

    class UnquantizedLinearMethod:
        pass

    class Fp8LinearMethod:
        pass

    platform = SimpleNamespace(is_cpu=lambda: False)
    namespace: dict[str, Any] = {"UnquantizedLinearMethod": UnquantizedLinearMethod, "current_platform": platform}
    tree = _tree(version, rel)
    if any(isinstance(n, ast.FunctionDef) and n.name == "_reads_raw_weights" for n in tree.body):
        namespace["_reads_raw_weights"] = release_function(version, rel, "_reads_raw_weights", namespace)
    method = _find(tree, qualname)
    builtin = set(dir(__builtins__)) if not isinstance(__builtins__, dict) else set(__builtins__)
    for node in ast.walk(method):
        if isinstance(node, ast.Name) and node.id not in namespace and node.id not in builtin:
            namespace[node.id] = _Anything()
    function = release_function(version, rel, qualname, namespace)

    def slices_raw(quantized: bool) -> bool:
        weight = _RawWeight()
        proj = _Given(weight=weight, bias=None,
                      quant_method=Fp8LinearMethod() if quantized else UnquantizedLinearMethod())
        attn = _Given(qkv_proj=proj, q_size=64, kv_size=32)
        owner = _Given(layers=[_Given(self_attn=attn)])
        args = ([attn], False) if len(method.args.args) > 1 else ()
        function(owner, *args)
        return weight.sliced
    return slices_raw


# ------------------------------------------------------------------------------ the drafter's causality


def vllm_dflash_causal(version: str) -> Callable[[Any, int], bool] | None:
    """The release's own resolution of one DFlash layer's causality, (hf_config, layer index) -> causal:
    qwen3_dflash.py `_dflash_layer_causal` (0.26.0+), else the V2 runner's `get_dflash_causal` (0.24.0, the
    same for every layer); None where the release has neither (0.20.1-0.22.1: every layer non-causal)."""
    rel = "model_executor/models/qwen3_dflash.py"
    if "def _dflash_layer_causal(" in (vllm_source(version) / rel).read_text():
        layer = release_function(version, rel, "_dflash_layer_causal",
                                 {"_SLIDING_ATTENTION": "sliding_attention", "Qwen3Config": Any})
        return lambda config, index: bool(layer(config, index))
    utils = "v1/worker/gpu/spec_decode/dflash/utils.py"
    if (vllm_source(version) / utils).is_file() and "def get_dflash_causal(" in (vllm_source(version) / utils).read_text():
        whole = release_function(version, utils, "get_dflash_causal", {"ModelConfig": Any})
        return lambda config, index: bool(whole(SimpleNamespace(hf_config=config)))
    return None


# ------------------------------------------------------------------------------ the environment check


@functools.lru_cache(maxsize=16)
def _envs_module(version: str) -> ModuleType:
    """The release's vllm/envs.py, executed on its own: its top level imports only the standard library (0.18.0 ..
    0.34.0), and its tables (`environment_variables`, `removed_environment_variables`) are plain literals."""
    path = vllm_source(version) / "envs.py"
    module = ModuleType(f"vllm_envs_{version.replace('.', '_')}")
    module.__file__ = str(path)
    exec(compile(path.read_text(), str(path), "exec", dont_inherit=True), module.__dict__)  # noqa: S102
    return module


def vllm_validate_environ(version: str) -> Callable[[Mapping[str, str], bool], tuple[str | None, list[str]]]:
    """The release's own validate_environ (vllm/envs.py through 0.30, platforms/interface.py
    Platform.validate_environ from 0.33) over a given environment: (the message it raises or None, the warnings
    it logs)."""
    envs = _envs_module(version)
    on_platform = "validate_environ" in {n.name for n in _tree(version, "platforms/interface.py").body
                                         if isinstance(n, ast.ClassDef) for n in n.body
                                         if isinstance(n, ast.FunctionDef)}

    def judge(environ: Mapping[str, str], hard_fail: bool) -> tuple[str | None, list[str]]:
        warnings: list[str] = []

        class Kept(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                warnings.append(record.getMessage())

        kept = Kept()
        fake_os = SimpleNamespace(environ=dict(environ))
        try:
            if on_platform:
                function = release_function(version, "platforms/interface.py", "Platform.validate_environ",
                                            {"os": fake_os})
                LOGGER.addHandler(kept)
                saved = sys.modules.get("vllm")
                package = ModuleType("vllm")
                package.envs = envs  # type: ignore[attr-defined] - `from vllm import envs` inside the function
                sys.modules["vllm"] = package
                try:
                    function(None, hard_fail)
                finally:
                    if saved is None:
                        sys.modules.pop("vllm", None)
                    else:
                        sys.modules["vllm"] = saved
            else:
                envs.logger.addHandler(kept)
                real_os, envs.os = envs.os, fake_os
                try:
                    envs.validate_environ(hard_fail)
                finally:
                    envs.os = real_os
        except ValueError as exc:
            return str(exc), warnings
        finally:
            LOGGER.removeHandler(kept)
            envs.logger.removeHandler(kept)
        return None, warnings

    return judge


def vllm_sampler_imports_flashinfer(version: str) -> Callable[[Mapping[str, str]], bool]:
    """Whether building the release's sampler on CUDA imports vllm.v1.attention.backends.flashinfer, in a given
    environment: its own flashinfer_sampler_supported where it has one (0.23.0 and later), run with the import
    intercepted; before that, TopKTopPSampler.__init__'s guard (`if envs.VLLM_USE_FLASHINFER_SAMPLER:` around the
    import, read from its source) over the release's own envs.py."""
    import builtins
    import os
    from unittest import mock

    rel = "v1/sample/ops/topk_topp_sampler.py"
    envs = _envs_module(version)
    has_function = any(isinstance(n, ast.FunctionDef) and n.name == "flashinfer_sampler_supported"
                       for n in _tree(version, rel).body)
    if not has_function:
        init = ast.unparse(_find(_tree(version, rel), "TopKTopPSampler.__init__"))
        guard = "if envs.VLLM_USE_FLASHINFER_SAMPLER:\n            from vllm.v1.attention.backends.flashinfer import"
        assert guard in init, f"vLLM {version}: the sampler's FlashInfer import is no longer under its variable"

    class Imported(Exception):
        pass

    def fake_import(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "vllm.v1.attention.backends.flashinfer":
            raise Imported
        return builtins.__import__(name, *args, **kwargs)

    def imports(environ: Mapping[str, str]) -> bool:
        with mock.patch.dict(os.environ, dict(environ)):
            if "VLLM_USE_FLASHINFER_SAMPLER" not in environ:
                os.environ.pop("VLLM_USE_FLASHINFER_SAMPLER", None)
            if not has_function:
                return bool(envs.VLLM_USE_FLASHINFER_SAMPLER)
            function = release_function(version, rel, "flashinfer_sampler_supported", {
                "current_platform": SimpleNamespace(is_cuda=lambda: True),
                "envs": envs,
                "logger": SimpleNamespace(info_once=lambda *a, **k: None, warning_once=lambda *a, **k: None,
                                          info=lambda *a, **k: None, warning=lambda *a, **k: None),
                "__builtins__": {**vars(builtins), "__import__": fake_import},
            })
            try:
                function()
            except Imported:
                return True
            return False

    return imports


def imports_at_module_level(version: str, rel: str, package: str) -> bool:
    """Whether the release's file `rel` imports `package` in a statement at its top level."""
    for node in _tree(version, rel).body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == package:
            return True
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == package for a in node.names):
            return True
    return False
