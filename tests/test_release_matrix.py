"""The doctor's version-dependent rules against each vLLM release's own code, on a grid of inputs.

For every release in vllm_release.MATRIX, the release's own functions (compiled from its sdist) and the
doctor's rule judge the same inputs; any disagreement fails. The doctor is told the release the way it
learns it on a user's machine: the markers it reads from that release's installed source, and its version.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from vllm_release import MATRIX, vllm_max_len
from vllm_sources import vllm_source

from dflash_doctor.checks.models.model_views import served_max_len
from dflash_doctor.checks.serve.settings import max_len_refused
from dflash_doctor.facts.models.models_shapes import ConfigView, Model, SpeculatorsLaunch
from dflash_doctor.facts.serve.serve import _markers
from dflash_doctor.facts.serve.serve_shapes import VllmAttentionTable, VllmDflash, VllmPairing
from dflash_doctor.facts.serve.vllm_pairing import VllmSources

YARN_X4 = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768, "rope_theta": 1e6}

# (name, the config as transformers v5 standardizes it, tokenizer_config)
CONTEXT_GRID: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = [
    ("plain", {"model_type": "qwen3", "max_position_embeddings": 40960}, None),
    ("default rope", {"model_type": "qwen3", "max_position_embeddings": 40960,
                      "rope_parameters": {"rope_type": "default", "rope_theta": 1e6}}, None),
    ("qwen3 yarn x4 recipe", {"model_type": "qwen3", "max_position_embeddings": 40960, "rope_parameters": YARN_X4},
     None),
    ("yarn already scaled", {"model_type": "qwen3", "max_position_embeddings": 131072, "rope_parameters": YARN_X4},
     None),
    ("yarn x4 over 8192 drafter", {"model_type": "qwen3", "max_position_embeddings": 8192, "rope_parameters": {
        "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8192}}, None),
    ("linear x2", {"model_type": "llama", "max_position_embeddings": 4096,
                   "rope_parameters": {"rope_type": "linear", "factor": 2.0}}, None),
    ("dynamic x2", {"model_type": "llama", "max_position_embeddings": 4096,
                    "rope_parameters": {"rope_type": "dynamic", "factor": 2.0}}, None),
    ("llama3 x8", {"model_type": "llama", "max_position_embeddings": 131072, "rope_parameters": {
        "rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192,
        "low_freq_factor": 1.0, "high_freq_factor": 4.0}}, None),
    ("longrope", {"model_type": "phi3", "max_position_embeddings": 131072, "original_max_position_embeddings": 4096,
                  "rope_parameters": {"rope_type": "longrope", "short_factor": [1.0], "long_factor": [2.0]}}, None),
    ("gemma3 linear x8", {"model_type": "gemma3_text", "max_position_embeddings": 131072,
                          "rope_parameters": {"rope_type": "linear", "factor": 8.0}}, None),
    ("deepseek_yarn x40", {"model_type": "deepseek_v3", "max_position_embeddings": 163840, "rope_parameters": {
        "rope_type": "deepseek_yarn", "factor": 40.0, "original_max_position_embeddings": 4096}}, None),
    ("nested by layer type", {"model_type": "gemma3n", "max_position_embeddings": 32768, "rope_parameters": {
        "full_attention": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8192},
        "sliding_attention": {"rope_type": "default"}}}, None),
    ("n_positions only", {"model_type": "gpt2", "n_positions": 1024}, None),
    ("smallest key wins", {"model_type": "chatglm", "max_position_embeddings": 40960, "seq_length": 8192}, None),
    ("model_max_length overrides", {"model_type": "cohere", "max_position_embeddings": 8192,
                                    "model_max_length": 131072}, None),
    ("tokenizer cap before yarn", {"model_type": "qwen3", "max_position_embeddings": 40960,
                                   "rope_parameters": YARN_X4}, {"model_max_length": 16384}),
    ("tokenizer cap", {"model_type": "qwen3", "max_position_embeddings": 40960}, {"model_max_length": 8192}),
]
GIVEN = (4096, 32768, 40960, 65536, 131072)


def _vllm_facts(version: str) -> VllmDflash:
    root = str(vllm_source(version))
    return VllmDflash.from_json({"installed": True, "version": version, "root": root,
                                 "markers": _markers(VllmSources(root))})


def _model(config: Mapping[str, Any], tokenizer: Mapping[str, Any] | None) -> Model:
    # The doctor's model facts: config.json's text view (facts.modelfiles), the tokenizer_config read beside it.
    return Model.from_json({"dir": {"config": {"model_type": config.get("model_type"), "text": dict(config)}},
                            "tokenizer_config": dict(tokenizer) if tokenizer else None})


@pytest.mark.parametrize("version", MATRIX)
def test_the_context_length_is_the_one_each_release_derives(version: str) -> None:
    vllm_len = vllm_max_len(version)
    vllm = _vllm_facts(version)
    disagree = []
    for name, config, tokenizer in CONTEXT_GRID:
        model = _model(config, tokenizer)
        expected: int | str
        try:
            expected = vllm_len(config, tokenizer, None)
        except Exception as exc:  # noqa: BLE001 - the release itself refuses the config, whatever it raises
            expected = type(exc).__name__
        served, key = served_max_len(model, vllm)
        if served != expected and not (isinstance(expected, str) and served is None):
            disagree.append(f"{name}: vLLM {expected}, doctor {served} ({key})")
        for given in GIVEN:
            try:
                vllm_len(config, tokenizer, given)
                refused_by_vllm = False
            except ValueError:
                refused_by_vllm = True
            except Exception:  # noqa: BLE001, S112 - a config the release cannot read at all is judged above
                continue
            refused, _, why = max_len_refused(model, vllm, given)
            if refused != refused_by_vllm:
                disagree.append(f"{name} --max-model-len {given}: vLLM refuses={refused_by_vllm}, doctor {refused} ({why})")
    assert not disagree, f"vLLM {version}:\n" + "\n".join(disagree)


def test_without_readable_source_the_version_decides_the_yarn_rule() -> None:
    # A vLLM whose source the doctor cannot read (markers unreadable): the recorded version range decides.
    model = _model(CONTEXT_GRID[2][1], None)
    assert served_max_len(model, VllmDflash(installed=True, version="0.29.0"))[0] == 131072
    assert served_max_len(model, VllmDflash(installed=True, version="0.30.0"))[0] == 40960


DRAFTER_ROPES: list[dict[str, Any] | None] = [
    None, {"rope_type": "default", "rope_theta": 1e6}, {"rope_type": "linear", "factor": 2.0},
    {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192},
    {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8192},
    {"rope_type": "dynamic", "factor": 2.0}, {"rope_type": "longrope", "short_factor": [1.0], "long_factor": [1.0]},
    {"full_attention": {"rope_type": "default"}, "sliding_attention": {"rope_type": "linear", "factor": 2.0}},
    {"full_attention": {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 4096},
     "sliding_attention": {"rope_type": "default"}},
]


@pytest.mark.parametrize("version", MATRIX)
def test_which_drafters_vllm_lengthens_is_each_releases_own_rule(version: str) -> None:
    """A drafter shorter than the served context: raised to it (RoPE that only sizes a cache), or the served
    length lowered to the drafter's, as the release's own _rope_only_sizes_cache and limiter decide."""
    from dflash_doctor.checks.models.drafter_pairing import _context_handling
    from dflash_doctor.checks.models.model_views import rope_entries
    from dflash_doctor.knowledge.dflash_reports import DRAFTER_CONTEXT_RAISED

    speculative = (vllm_source(version) / "config/speculative.py").read_text()
    has_rule = "def _rope_only_sizes_cache(" in speculative
    has_limiter = "def _limit_max_model_len_to_draft(" in (vllm_source(version) / "config/vllm.py").read_text()
    raised, limited = _context_handling(_vllm_facts(version))
    assert (raised, limited) == (has_rule, has_limiter), version
    if not has_rule:
        return
    from vllm_release import ATTENTION_LAYER_TYPES, release_function
    nested = release_function(version, "transformers_utils/config.py", "is_rope_parameters_nested",
                              {"ALLOWED_ATTENTION_LAYER_TYPES": ATTENTION_LAYER_TYPES,
                               "ALLOWED_LAYER_TYPES": ATTENTION_LAYER_TYPES})
    iterate = release_function(version, "transformers_utils/config.py", "iter_rope_parameters",
                               {"is_rope_parameters_nested": nested})
    # The release's own set, read from its source, is what its function runs with; the doctor's must equal it.
    import ast
    assigned = next(n.value for n in ast.parse(speculative).body if isinstance(n, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == "_CACHE_ONLY_ROPE_TYPES" for t in n.targets))
    cache_only_set = frozenset(ast.literal_eval(assigned.args[0]))  # type: ignore[attr-defined]
    assert cache_only_set == frozenset(DRAFTER_CONTEXT_RAISED.value["cache_only_rope_types"]), version
    only_cache = release_function(version, "config/speculative.py", "_rope_only_sizes_cache",
                                  {"iter_rope_parameters": iterate, "_CACHE_ONLY_ROPE_TYPES": cache_only_set})
    from types import SimpleNamespace
    for rope in DRAFTER_ROPES:
        text = {"rope_parameters": rope} if rope is not None else {}
        kinds = [str(e.rope_type or "default") for e in rope_entries(ConfigView(text))]
        doctor = all(kind in cache_only_set for kind in kinds)
        assert doctor == only_cache(SimpleNamespace(**text)), (version, rope)


# ----------------------------------------------------------------------- the speculators one-command launch

LAUNCH_VERIFIERS: list[tuple[str, Any]] = [
    ("remote repo id", "Qwen/Qwen3-8B"), ("local verifier path", "LOCAL"), ("null verifier", None),
    ("empty verifier", ""), ("not a repo id", "org/name/extra"), ("no verifier key", "MISSING"),
]
LAUNCH_USER_SPECS: list[dict[str, Any] | None] = [None, {"model": "/elsewhere", "num_speculative_tokens": 7}]
_REMOTE = {"proposal_methods": [{"speculative_tokens": 15}], "verifier": {"name_or_path": "Qwen/Qwen3-8B"}}
LAUNCH_BROKEN: list[tuple[str, dict[str, Any]]] = [
    ("no transformer_layer_config", {"speculators_model_type": "dflash", "speculators_config": _REMOTE}),
    ("no speculators_model_type", {"transformer_layer_config": {}, "speculators_config": _REMOTE}),
    ("null speculative_tokens", {"speculators_model_type": "dflash", "transformer_layer_config": {},
                                 "speculators_config": {**_REMOTE, "proposal_methods": [{"speculative_tokens": None}]}}),
    ("no proposal methods", {"speculators_model_type": "dflash", "transformer_layer_config": {},
                             "speculators_config": {**_REMOTE, "proposal_methods": []}}),
    ("speculators_config a list", {"speculators_model_type": "dflash", "transformer_layer_config": {},
                                   "speculators_config": ["Qwen/Qwen3-8B"]}),
    ("empty speculators_config", {"speculators_model_type": "dflash", "transformer_layer_config": {},
                                  "speculators_config": {}}),
]


def _release_launch(version: str) -> Any:
    """The release's own maybe_override_with_speculators, with its own SpeculatorsConfig checks; only the file reads
    (get_config_dict), the offline switch and huggingface_hub's repo-id validator are given."""
    import os
    import sys
    from pathlib import Path
    from types import ModuleType, SimpleNamespace

    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id
    from vllm_release import release_function

    base = "transformers_utils/configs/speculators/base.py"
    methods = {name: classmethod(release_function(version, base, f"SpeculatorsConfig.{name}", {}))
               for name in ("extract_vllm_speculative_config", "validate_speculators_config",
                            "build_vllm_speculative_config")}
    speculators = ModuleType("vllm.transformers_utils.configs.speculators.base")
    speculators.SpeculatorsConfig = type("SpeculatorsConfig", (), methods)  # type: ignore[attr-defined]
    custom = ModuleType("vllm.v1.worker.gpu.spec_decode.speculator_config")
    custom.get_custom_speculator_config_class = lambda method: None  # type: ignore[attr-defined]

    def get_config_dict(model: str, **_: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        return json.loads((Path(model) / "config.json").read_text()), {}

    reader = SimpleNamespace(get_config_dict=get_config_dict)
    function = release_function(version, "transformers_utils/config.py", "maybe_override_with_speculators", {
        "PretrainedConfig": reader, "PreTrainedConfig": reader, "os": os, "Path": Path,
        "huggingface_hub": SimpleNamespace(constants=SimpleNamespace(HF_HUB_OFFLINE=True)),
        "without_trust_remote_code": dict, "check_gguf_file": lambda model: False,
        "is_remote_gguf": lambda model: False, "validate_repo_id": validate_repo_id,
        "HFValidationError": HFValidationError})

    def launch(model: str, user_spec: dict[str, Any] | None) -> tuple[str, Any, Any]:
        saved = {name: sys.modules.get(name) for name in (speculators.__name__, custom.__name__)}
        sys.modules[speculators.__name__], sys.modules[custom.__name__] = speculators, custom
        try:
            served, _, spec = function(model=model, tokenizer=None, trust_remote_code=False,
                                       vllm_speculative_config=dict(user_spec) if user_spec else None)
        except ValueError as exc:
            return "error", str(exc).split(". ")[0], None
        finally:
            for name, module in saved.items():
                if module is None:
                    sys.modules.pop(name, None)
                else:
                    sys.modules[name] = module
        return ("serves", served, spec) if isinstance(served, str) and served else ("no-verifier", None, None)
    return launch


@pytest.mark.parametrize("version", MATRIX)
def test_the_speculators_launch_is_read_as_each_release_reads_it(version: str, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """`vllm serve SPECULATORS_DIR`: the verifier served (or vLLM's refusal) and the speculative config, by the
    release's own maybe_override_with_speculators and by the doctor's reading of the same real directory."""
    pytest.importorskip("huggingface_hub")
    from dflash_doctor.checks.models.speculators import read_launch
    from dflash_doctor.facts.models.models import describe_model, speculators_launch

    monkeypatch.chdir(tmp_path)  # vLLM looks for a local verifier relative to where it runs
    (tmp_path / "verifier").mkdir()
    release = _release_launch(version)
    vllm = _vllm_facts(version)
    disagree = []
    for kind in ("dflash", "dflash2"):
        for name, verifier in LAUNCH_VERIFIERS:
            block: dict[str, Any] = {} if verifier == "MISSING" else {
                "name_or_path": "verifier" if verifier == "LOCAL" else verifier}
            drafter = tmp_path / f"{kind}-{name.replace(' ', '-')}"
            drafter.mkdir()
            (drafter / "config.json").write_text(json.dumps({
                "speculators_model_type": kind, "transformer_layer_config": {"model_type": "qwen3"},
                "speculators_config": {"proposal_methods": [{"speculative_tokens": 15}], "verifier": block}}))
            facts = speculators_launch(describe_model(str(drafter), str(tmp_path), "target"), str(tmp_path))
            assert facts is not None
            for user_spec in LAUNCH_USER_SPECS:
                expected = release(str(drafter), user_spec)
                read = read_launch(SpeculatorsLaunch.from_json(facts), vllm, user_spec)
                doctor = (("error", read.message.split(". ")[0], None) if read.kind in ("refused", "invalid")
                          else ("no-verifier", None, None) if read.kind == "no-verifier"
                          else ("serves", read.verifier, read.spec))
                if doctor != expected:
                    disagree.append(f"{kind} {name} spec={user_spec}: vLLM {expected}, doctor {doctor}")
    for name, config in LAUNCH_BROKEN:
        drafter = tmp_path / f"broken-{name.replace(' ', '-')}"
        drafter.mkdir()
        (drafter / "config.json").write_text(json.dumps(config))
        facts = speculators_launch(describe_model(str(drafter), str(tmp_path), "target"), str(tmp_path))
        assert facts is not None
        expected = release(str(drafter), None)
        read = read_launch(SpeculatorsLaunch.from_json(facts), vllm, None)
        doctor = ("error", read.message.split(". ")[0], None) if read.kind in ("refused", "invalid") else (read.kind,)
        if doctor != expected:
            disagree.append(f"{name}: vLLM {expected}, doctor {doctor}")
    assert not disagree, f"vLLM {version}:\n" + "\n".join(disagree)


def test_the_doctors_repo_id_rule_is_huggingface_hubs() -> None:
    hub = pytest.importorskip("huggingface_hub.utils")
    from dflash_doctor.checks.models.speculators import valid_repo_id

    for name in ("Qwen/Qwen3-8B", "gpt2", "a/b/c", "", "-bad", "x--y", "x..y", "repo.git", "café/x", "a" * 97,
                 "/abs/path", "./rel", "org/name.v2", "org_1/name-2"):
        try:
            hub.validate_repo_id(name)
            valid = True
        except hub.HFValidationError:
            valid = False
        assert valid_repo_id(name) == valid, name


RUNNER_ARCHS = (["Qwen3ForCausalLM"], ["LlamaForCausalLM"], ["Gemma3ForCausalLM"])
DRAFTER_LAYERS = (["full_attention"] * 5, ["sliding_attention", "sliding_attention", "full_attention"])


@pytest.mark.parametrize("version", MATRIX)
def test_the_model_runner_is_the_one_each_release_picks(version: str) -> None:
    from vllm_release import vllm_runs_v2

    from dflash_doctor.checks.models.drafter_pairing import model_runner
    from dflash_doctor.facts.serve.vllm_pairing import read_vllm_pairing

    runs_v2 = vllm_runs_v2(version)
    vllm = dataclasses.replace(_vllm_facts(version), pairing=VllmPairing.from_json(
        read_vllm_pairing(VllmSources(str(vllm_source(version))))))
    disagree = []
    for archs in RUNNER_ARCHS:
        for layers in DRAFTER_LAYERS:
            for env in (None, "1", "0"):
                parsed = None if env is None else env == "1"
                if runs_v2 is None:  # no switch: V1 unless asked for V2, or V2 alone (no V1 GPU runner)
                    has_v1 = (vllm_source(version) / "v1/worker/gpu_model_runner.py").is_file()
                    expected = "v2" if env == "1" or not has_v1 else "v1"
                else:
                    expected = "v2" if runs_v2(archs, layers, parsed) else "v1"
                doctor, why = model_runner(vllm, archs, {"VLLM_USE_V2_MODEL_RUNNER": env} if env else {},
                                           drafter_layer_types=layers, target=_model({"architectures": archs}, None))
                if doctor != expected:
                    disagree.append(f"{archs[0]} drafter {sorted(set(layers))} env={env}: vLLM {expected}, "
                                    f"doctor {doctor} ({why})")
    assert not disagree, f"vLLM {version}:\n" + "\n".join(disagree)


SPECULATORS_CONFIGS: list[dict[str, Any]] = [
    {"speculators_model_type": "dflash", "mask_token_id": 151669, "aux_hidden_state_layer_ids": [2, 10, 18, 26, 34],
     "transformer_layer_config": {"model_type": "qwen3", "hidden_size": 4096}},
    {"speculators_model_type": "dflash", "mask_token_id": 5, "aux_hidden_state_layer_ids": [1, 2],
     "draft_vocab_size": 32000, "target_hidden_size": 2048, "sliding_window_non_causal": False,
     "sample_from_anchor": True, "transformer_layer_config": {}},
    {"speculators_model_type": "dflash2", "mask_token_id": 7, "aux_hidden_state_layer_ids": [3, 9],
     "conv_kernel_size": 4, "conv_group_size": 2, "selector_rank": 64, "selector_top_k": None,
     "transformer_layer_config": {}},
]


@pytest.mark.parametrize("version", MATRIX)
def test_a_speculators_drafter_reads_as_each_release_converts_it(version: str) -> None:
    from vllm_release import release_function

    from dflash_doctor.checks.models.model_views import speculators_keys

    rel = "transformers_utils/configs/speculators/algos.py"
    source = (vllm_source(version) / rel).read_text()
    vllm = _vllm_facts(version)
    for config in SPECULATORS_CONFIGS:
        kind = config["speculators_model_type"]
        if f'register_speculator("{kind}")' not in source:
            continue
        update = release_function(version, rel, f"update_{kind}", {})
        if kind == "dflash2":  # it calls update_dflash first
            update = release_function(version, rel, "update_dflash2",
                                      {"update_dflash": release_function(version, rel, "update_dflash", {})})
        pre_trained: dict[str, Any] = {}
        update(config_dict=dict(config), pre_trained_config=pre_trained)
        doctor = speculators_keys(ConfigView(config), vllm)
        for key in ("architectures", "eagle_aux_hidden_state_layer_ids", "dflash_config", "draft_vocab_size"):
            assert doctor.get(key) == pre_trained.get(key), (version, kind, key, doctor.get(key), pre_trained.get(key))


ATTENTION_HEAD_SIZES = (128, 256)
ATTENTION_SELECTED = (None, "FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION")


def _reasons(message: str) -> str:
    """The reasons part of vLLM's selector error ("... Reasons: {...}." or "... Reason: [...]")."""
    return message.rsplit("Reason", 1)[1].split(": ", 1)[1].rstrip(".")


@pytest.mark.parametrize("version", MATRIX)
def test_the_drafters_attention_backend_is_the_one_each_release_picks(version: str) -> None:
    """The DFlash drafter's non-causal attention on sm_80 to sm_100, with each KV cache dtype and head size,
    vLLM choosing or --attention-backend naming the backend: the release's own selector (vllm_attention, its
    CudaPlatformBase.get_attn_backend_cls and backend classes compiled from the sdist, on a simulated GPU)
    against the doctor's choose_backend on the facts it reads from the same source. The backend picked, or
    vLLM's refusal with the same reasons per backend, must agree."""
    from vllm_release import CAPABILITIES, KV_CACHE_DTYPES, vllm_attention

    from dflash_doctor.checks.models.drafter_attention import choose_backend
    from dflash_doctor.facts.serve.serve import _attention

    select = vllm_attention(version)
    vllm = _vllm_facts(version)
    attention = VllmAttentionTable.from_json(_attention(VllmSources(str(vllm_source(version))), ATTENTION_HEAD_SIZES))
    disagree = []
    for capability in CAPABILITIES:
        cc = f"{capability[0]}.{capability[1]}"
        for kv in KV_CACHE_DTYPES:
            for head_size in ATTENTION_HEAD_SIZES:
                # a causal drafter (dflash_config.causal, 0.23+) only as vLLM picks for it: its order differs on sm_100
                for selected, non_causal in [(s, True) for s in ATTENTION_SELECTED] + [(None, False)]:
                    kind, said = select(capability, kv, head_size, non_causal, selected)
                    pick = choose_backend(attention, cc, non_causal, [head_size], selected, kv_cache_dtype=kv,
                                          vllm=vllm)
                    doctor = ("backend", pick["chosen"]) if pick["chosen"] else ("error", pick.get("message") or "")
                    same = doctor == (kind, said) if kind == "backend" else \
                        doctor[0] == "error" and _reasons(doctor[1]) == _reasons(said)
                    if not same:
                        disagree.append(f"sm_{cc} kv={kv} head={head_size} selected={selected} "
                                        f"non_causal={non_causal}: vLLM {kind} "
                                        f"{said if kind == 'backend' else _reasons(said)}; doctor {doctor[0]} "
                                        f"{doctor[1] if doctor[0] == 'backend' else _reasons(doctor[1] or 'Reason: ?')}")
    assert not disagree, f"vLLM {version}:\n" + "\n".join(disagree)


BUDGET_K = (1, 7, 15, 16)
BUDGET_BATCHED = (16, 17, 2048, 8192, 16384, 65536)
BUDGET_SEQS = (1, 4, 256, 1024)


@pytest.mark.parametrize("version", MATRIX)
def test_the_dflash_token_budget_is_each_releases_own(version: str) -> None:
    """DFlash's draft slots against --max-num-batched-tokens and --max-num-seqs: the release's own
    VllmConfig._set_max_num_scheduled_tokens (vllm_token_budget) against the doctor's spec_token_budget, which the
    serve-command check's token-budget findings are made from. vLLM's refusal (its exact message), the
    max_num_scheduled_tokens it sets, the max_num_active_seqs it lowers, and its 'suboptimal performance' warning
    must agree."""
    from vllm_release import vllm_token_budget

    from dflash_doctor.checks.serve.settings import spec_token_budget

    budget = vllm_token_budget(version)
    vllm = _vllm_facts(version)
    disagree = []
    for k in BUDGET_K:
        for batched in BUDGET_BATCHED:
            for seqs in BUDGET_SEQS:
                said = budget(k, batched, seqs)
                doctor = spec_token_budget(vllm, k, batched, seqs)
                warns = any("based on the speculative decoding settings. This may lead to suboptimal" in w
                            for w in said["warnings"])
                theirs = (said["error"], None if said["error"] else said["max_num_scheduled_tokens"],
                          said["max_num_active_seqs"], warns)
                ours = (doctor.error, None if doctor.error else doctor.max_num_scheduled_tokens,
                        doctor.max_num_active_seqs, doctor.warns)
                if theirs != ours:
                    disagree.append(f"k={k} batched={batched} seqs={seqs}: vLLM {theirs}; doctor {ours} "
                                    f"(rule {doctor.rule})")
    assert not disagree, f"vLLM {version}:\n" + "\n".join(disagree)


@pytest.mark.parametrize("version", MATRIX)
def test_the_scheduler_refuses_what_each_release_refuses(version: str) -> None:
    """--max-num-batched-tokens against --max-model-len (chunked prefill on or off) and --max-num-seqs: the
    release's own SchedulerConfig.verify_max_model_len against the doctor's scheduler_refusal (serve-command's
    scheduler finding), vLLM's message word for word."""
    from vllm_release import vllm_scheduler_refusal

    from dflash_doctor.checks.serve.settings import scheduler_refusal

    refusal = vllm_scheduler_refusal(version)
    disagree = []
    for batched in BUDGET_BATCHED:
        for seqs in BUDGET_SEQS:
            for max_model_len in (2048, 8192, 40960):
                for chunked in (True, False):
                    theirs, ours = refusal(batched, seqs, max_model_len, chunked), \
                        scheduler_refusal(batched, seqs, max_model_len, chunked)
                    if theirs != ours:
                        disagree.append(f"batched={batched} seqs={seqs} max_model_len={max_model_len} "
                                        f"chunked={chunked}: vLLM {theirs}; doctor {ours}")
    assert not disagree, f"vLLM {version}:\n" + "\n".join(disagree)


@pytest.mark.parametrize("version", ["0.20.1", "0.34.0"])
def test_a_vllm_built_without_fa3_or_fa4_refuses_the_fp8_kv_cache_as_vllm_does(version: str) -> None:
    """FlashAttention's fp8 KV cache needs FA3 (sm_90) or FA4 (sm_100, 0.27.1+): a vLLM built without them (its
    vllm_flash_attn without `_vllm_fa3_C`, or without `cute/interface.py`) refuses it, and the doctor, told so
    by the facts it reads from the install (`flash_attn_builds`), agrees with the release's own selector."""
    from vllm_release import vllm_attention

    from dflash_doctor.checks.models.drafter_attention import choose_backend
    from dflash_doctor.facts.serve.serve import _attention

    vllm = _vllm_facts(version)
    attention = _attention(VllmSources(str(vllm_source(version))), ATTENTION_HEAD_SIZES)
    for missing in (3, 4):
        built = tuple(v for v in (2, 3, 4) if v != missing)
        select = vllm_attention(version, flash_attn=built)
        facts = VllmAttentionTable.from_json(
            {**attention, "flash_attn_builds": {f"fa{v}": v in built for v in (2, 3, 4)}})
        for capability in ((9, 0), (10, 0)):
            for kv in ("auto", "fp8"):
                kind, said = select(capability, kv, 128, True, "FLASH_ATTN")
                pick = choose_backend(facts, f"{capability[0]}.{capability[1]}", True, [128], "FLASH_ATTN",
                                      kv_cache_dtype=kv, vllm=vllm)
                assert (kind == "backend") == (pick["chosen"] == "FLASH_ATTN"), (missing, capability, kv, said, pick)


def test_the_flash_attention_builds_are_read_from_the_installed_wheel() -> None:
    from vllm_sources import CACHE

    from dflash_doctor.facts.serve.serve import _flash_attn_builds

    site = CACHE / "vllm-site" / "0.20.1" / "vllm"
    if not (site / "vllm_flash_attn").is_dir():
        pytest.skip("the unpacked vLLM 0.20.1 wheel is not in the test cache (tests/warm_cache.py)")
    assert _flash_attn_builds(str(site)) == {"fa2": True, "fa3": True, "fa4": True}
    assert _flash_attn_builds(str(vllm_source("0.20.1"))) is None  # an sdist: as the wheels


@pytest.mark.parametrize("version", MATRIX)
def test_a_quantized_drafter_is_sliced_raw_where_each_release_slices_it(version: str) -> None:
    """vLLM #51581: the release's own fused context-K/V method (every *_dflash.py method holding the raw slice),
    run on a layer whose qkv_proj is quantized, against the doctor's reading of that release's source (the slice
    and the guard on the layers' quant method, facts.serve.vllm_pairing, judged by drafter_pairing.fused_kv_reads for
    an architecture the registry serves from that file). The control: with an unquantized layer every release
    slices raw. qwen3_dflash.py slices a quantized layer up to 0.30.0 and not from 0.31.0 (guarded);
    laguna_dflash.py slices it in every release that has it."""
    from vllm_release import raw_kv_methods, vllm_slices_quantized_qkv_raw

    from dflash_doctor.checks.models.drafter_pairing import fused_kv_reads
    from dflash_doctor.facts.serve.vllm_pairing import read_vllm_pairing

    pairing = VllmPairing.from_json(read_vllm_pairing(VllmSources(str(vllm_source(version)))))
    assert pairing.fused_kv is not None
    methods = raw_kv_methods(version)
    assert "model_executor/models/qwen3_dflash.py" in methods
    verdicts = {}
    for rel, qualname in methods.items():
        slices_raw = vllm_slices_quantized_qkv_raw(version, rel, qualname)
        assert slices_raw(False), (rel, "the control: an unquantized layer is read raw")
        archs = [a for a, f in pairing.fused_kv.archs.items() if f == f"vllm/{rel}"]
        assert archs, rel
        raw, guard = fused_kv_reads(pairing, archs[:1])
        theirs, ours = slices_raw(True), bool(raw)
        assert theirs == ours, f"vLLM {version} {rel}: slices a quantized qkv_proj raw={theirs}, doctor {raw} {guard}"
        assert bool(guard) == (not theirs), (rel, guard)
        verdicts[rel] = theirs
    fixed = tuple(int(p) for p in version.split(".")[:2]) >= (0, 31)
    assert verdicts["model_executor/models/qwen3_dflash.py"] is not fixed
    assert verdicts.get("model_executor/models/laguna_dflash.py", True) is True


CAUSALITY_GRID = [(is_causal, causal, layer_types)
                  for is_causal in (None, True, False) for causal in (None, True, False, "no")
                  for layer_types in (None, [], ["full_attention"] * 2, ["sliding_attention"] * 2,
                                      ["sliding_attention", "full_attention"])]


@pytest.mark.parametrize("version", MATRIX)
def test_the_drafters_causality_is_the_one_each_release_resolves(version: str) -> None:
    """The release's own `_dflash_layer_causal` (0.26.0+; is_causal first from 0.28.0) or `get_dflash_causal`
    (0.24.0) against the doctor's resolved_causality, told which keys the release reads by facts.serve.vllm_pairing,
    on every combination of is_causal, dflash_config.causal (a string included: vLLM takes its truth) and
    layer_types, layer by layer. 0.20.1 and 0.22.1 resolve nothing: every layer non-causal."""
    from vllm_release import vllm_dflash_causal

    from dflash_doctor.checks.models.drafter_formats import resolved_causality
    from dflash_doctor.facts.serve.vllm_pairing import read_vllm_pairing

    pairing = VllmPairing.from_json(read_vllm_pairing(VllmSources(str(vllm_source(version)))))
    assert pairing.causality is not None and pairing.causality.keys is not None
    theirs = vllm_dflash_causal(version)
    disagree = []
    for is_causal, causal, layer_types in CAUSALITY_GRID:
        config: dict[str, Any] = {}
        if is_causal is not None:
            config["is_causal"] = is_causal
        if causal is not None:
            config["dflash_config"] = {"causal": causal}
        if layer_types is not None:
            config["layer_types"] = layer_types
        ours, _ = resolved_causality(pairing.causality.keys, ConfigView(config), 2)
        vllm = [theirs(SimpleNamespace(**config), i) if theirs else False for i in range(2)]
        if ours != vllm:
            disagree.append(f"{config}: vLLM {vllm}, doctor {ours} (keys {pairing.causality.keys})")
    assert not disagree, f"vLLM {version}:\n" + "\n".join(disagree)
    assert ("is_causal" in pairing.causality.keys) is (version >= "0.28")
    assert (pairing.causality.keys == []) is (version in ("0.20.1", "0.22.1"))


@pytest.mark.parametrize("version", MATRIX)
def test_prefix_caching_on_a_hybrid_target_is_judged_as_each_release_schedules_it(version: str) -> None:
    """vLLM #53505. The release's own SpeculativeConfig.use_eagle (compiled from its sdist) counts the doctor's
    eagle-family drafts (dflash; dspark where the release has it) among the methods its scheduler backs off a
    block for, and the doctor's reading of the scheduler and the KV cache coordinator says affected exactly
    through 0.29.0 (no drop_eagle_checkpoint_block) and not from 0.30.0; Qwen3.5's class is hybrid in every release."""
    from vllm_release import release_function

    from dflash_doctor.checks.serve.newest import EAGLE_FAMILY_DRAFTS
    from dflash_doctor.facts.serve.vllm_pairing import read_vllm_pairing

    use_eagle = release_function(version, "config/speculative.py", "SpeculativeConfig.use_eagle", {})
    methods = (vllm_source(version) / "config/speculative.py").read_text()
    for method in EAGLE_FAMILY_DRAFTS:
        if f'"{method}"' in methods:
            assert use_eagle(SimpleNamespace(method=method)), (version, method)
    assert use_eagle(SimpleNamespace(method="dflash"))
    pairing = VllmPairing.from_json(read_vllm_pairing(VllmSources(str(vllm_source(version))),
                                                      ["Qwen3_5ForConditionalGeneration", "Qwen3ForCausalLM"]))
    facts = pairing.hybrid_prefix_cache
    assert facts is not None
    affected = bool(facts.backs_off) and facts.aligned is False
    assert affected is (tuple(int(p) for p in version.split(".")[:2]) <= (0, 29)), (version, facts)
    assert facts.archs["Qwen3_5ForConditionalGeneration"].hybrid is True
    assert facts.archs["Qwen3ForCausalLM"].hybrid is False


# Environments `vllm serve` may get: the V2-runner switch in each form, a variable 0.34.0 removed, a typo, known ones.
ENVIRONS: list[dict[str, str]] = [
    {}, {"VLLM_USE_V2_MODEL_RUNNER": "0"}, {"VLLM_USE_V2_MODEL_RUNNER": "1"}, {"VLLM_USE_V2_MODEL_RUNNER": "false"},
    {"VLLM_USE_V2_MODEL_RUNNER": "true"}, {"VLLM_MARLIN_INPUT_DTYPE": "int8"}, {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"},
    {"VLLM_ALLOW_LONG_MAX_MODE_LEN": "1"}, {"VLLM_HUMMING_INPUT_QUANT_CONFIG": '{"dtype":"int8"}'},
    {"VLLM_ATTENTION_BACKEND": "FLASH_ATTN", "VLLM_NO_USAGE_STATS": "1"},
    {"VLLM_ALLOW_LONG_MAX_MODE_LEN": "1", "VLLM_USE_V2_MODEL_RUNNER": "0", "VLLM_MARLIN_INPUT_DTYPE": "int8"},
    {"HF_HOME": "/x", "VLLM_USE_V2_MODEL_RUNNER": "1", "VLLM_TYPO": "1"},
]


@pytest.mark.parametrize("version", MATRIX)
def test_the_environment_is_refused_and_warned_about_as_each_release_does(version: str) -> None:
    """The release's own validate_environ (vllm/envs.py through 0.30, Platform.validate_environ from 0.33) against
    the doctor's rule on the lists it reads from that release's source (serve-command.environ-refused and
    environ-unknown), with and without --fail-on-environ-validation: vLLM's message word for word."""
    from vllm_release import vllm_validate_environ

    from dflash_doctor.checks.serve.environ import UNKNOWN_WORDS, judge_environ
    from dflash_doctor.facts.serve.serve_shapes import VllmEnvironRules
    from dflash_doctor.facts.serve.vllm_environ import read_vllm_environ

    theirs_of = vllm_validate_environ(version)
    facts = read_vllm_environ(VllmSources(str(vllm_source(version))))
    assert facts is not None
    rules = VllmEnvironRules.from_json(facts)
    disagree = []
    for environ in ENVIRONS:
        for hard in (False, True):
            error, warnings = theirs_of(environ, hard)
            names = [n for n in environ if n.startswith("VLLM_")]
            refused, unknown = judge_environ(rules, names, environ, hard)
            ours = refused[0][1] if refused else None  # vLLM stops at the first, in the environment's order
            warned = [w.removeprefix(UNKNOWN_WORDS) for w in warnings if w.startswith(UNKNOWN_WORDS)]
            if ours != error or (error is None and unknown != warned):
                disagree.append(f"{environ} hard={hard}: vLLM {error!r} {warned}; doctor {refused} {unknown}")
    assert not disagree, f"vLLM {version}:\n" + "\n".join(disagree)


def test_vllm_use_v2_model_runner_0_is_refused_from_0_34_0_only() -> None:
    """The releases' own words: 0.34.0 refuses VLLM_USE_V2_MODEL_RUNNER=0 and knows VLLM_MARLIN_INPUT_DTYPE only as
    removed; 0.33.0, its predecessor, takes both."""
    from vllm_release import vllm_validate_environ

    assert vllm_validate_environ("0.33.0")({"VLLM_USE_V2_MODEL_RUNNER": "0"}, True) == (None, [])
    error, _ = vllm_validate_environ("0.34.0")({"VLLM_USE_V2_MODEL_RUNNER": "0"}, False)
    assert error == ("VLLM_USE_V2_MODEL_RUNNER=0 is no longer supported: Model Runner V1 has been removed. "
                     "Unset this variable.")
    assert vllm_validate_environ("0.33.0")({"VLLM_MARLIN_INPUT_DTYPE": "int8"}, True) == (None, [])
    assert vllm_validate_environ("0.34.0")({"VLLM_MARLIN_INPUT_DTYPE": "int8"}, False)[0].startswith(
        "VLLM_MARLIN_INPUT_DTYPE has been removed.")


# The --spec-* flags' grid: (--speculative-config as given, --spec-method, --spec-model, --spec-tokens).
SPEC_FLAG_GRID: list[tuple[dict[str, Any] | None, str | None, str | None, int | None]] = [
    (None, None, None, None),
    (None, "dflash", "/models/d", 15),
    (None, None, "/models/d", None),
    ({"method": "dflash", "model": "/models/d"}, None, None, 15),
    ({"method": "dflash", "num_speculative_tokens": 7}, None, "/models/d", None),
    ({"method": "dflash", "model": "/models/d"}, None, "/models/e", 15),
    ({"model": "/models/d"}, "dflash", "/models/e", None),
    ({"num_speculative_tokens": 15}, "dflash", "/models/d", 7),
    ({"method": "eagle3"}, "dflash", None, None),
    ({}, None, None, 3),
]


@pytest.mark.parametrize("version", MATRIX)
def test_the_spec_flags_merge_as_each_releases_create_speculative_config_merges_them(version: str) -> None:
    """--spec-method/--spec-model/--spec-tokens: where the release has them (its parser adds them, its
    create_speculative_config merges them), the doctor's merge gives the release's config or its "mutually
    exclusive" error on every row of the grid; where it has none, the doctor's range says the flags are unknown."""
    from vllm_release import release_function

    from dflash_doctor.facts.python.envfacts import release
    from dflash_doctor.facts.serve.serve_args import merge_spec_flags
    from dflash_doctor.knowledge.vllm_cli import SPEC_FLAGS

    source = (vllm_source(version) / "engine/arg_utils.py").read_text()
    has_flags = all(f'"{flag}"' in source for flag in SPEC_FLAGS.value["flags"])
    assert has_flags == (release(version) >= release(SPEC_FLAGS.value["range"][0])), version
    if not has_flags:
        return
    create = release_function(version, "engine/arg_utils.py", "EngineArgs.create_speculative_config",
                              {"SpeculativeConfig": lambda **kwargs: kwargs})
    disagree = []
    for given, method, model, tokens in SPEC_FLAG_GRID:
        engine_args = SimpleNamespace(speculative_config=copy.deepcopy(given), spec_method=method, spec_model=model,
                                      spec_tokens=tokens)
        try:
            built = create(engine_args, "target-model-config", "target-parallel-config")
            expected: Any = None if built is None else {k: v for k, v in built.items() if not k.startswith("target_")}
        except ValueError as exc:
            expected = str(exc)
        merged, _, conflict = merge_spec_flags(copy.deepcopy(given), {"spec_method": method, "spec_model": model,
                                                                      "spec_tokens": tokens})
        doctor = conflict if conflict is not None else merged
        if doctor != expected:
            disagree.append(f"{given} {method} {model} {tokens}: vLLM {expected}, doctor {doctor}")
    assert not disagree, f"vLLM {version}:\n" + "\n".join(disagree)


@pytest.mark.parametrize("version", MATRIX)
def test_a_config_file_and_a_flags_prefix_are_read_as_each_releases_parser_reads_them(version: str,
                                                                                      tmp_path: Path) -> None:
    """--config FILE.yaml: the release's own FlexibleArgumentParser._pull_args_from_config and load_config_file
    (compiled from its sdist, with PyYAML) and the doctor's pull_config_file put the same flags in the same place;
    and no release turns argparse's allow_abbrev off, so a flag's prefix stays the flag."""
    from vllm_release import release_function

    from dflash_doctor.facts.serve.serve_config_file import pull_config_file

    yaml = pytest.importorskip("yaml")
    assert "allow_abbrev" not in (vllm_source(version) / "utils/argparse_utils.py").read_text()
    config = tmp_path / "serve.yaml"
    config.write_text("tensor-parallel-size: 2\nmax_model_len: 8192\nenforce-eager: true\nenable-prefix-caching: "
                      "false\nspeculative-config:\n  method: dflash\n  model: /models/d\n  num_speculative_tokens: 15\n"
                      "api-key: [k1, k2]\n")
    rel = "utils/argparse_utils.py"
    load = release_function(version, rel, "FlexibleArgumentParser.load_config_file", {"yaml": yaml, "json": json})
    pull = release_function(version, rel, "FlexibleArgumentParser._pull_args_from_config", {})
    # the actions the parser has, for `--no-KEY` (0.28.0 and later): vLLM's boolean flags take --no-KEY
    parser = SimpleNamespace(_option_string_actions={"--no-enable-prefix-caching": None, "--no-enforce-eager": None})
    parser.load_config_file = lambda path: load(parser, path)  # type: ignore[attr-defined]
    for args in (["m", "--config", str(config), "-tp", "4"], ["--config", str(config), "--model", "m"],
                 ["m", "-tp", "4", "--config", str(config), "--port", "8001"]):
        expected = pull(parser, list(args))
        got, facts = pull_config_file(args, str(tmp_path))
        assert facts is not None and facts["loaded"]
        if "--no-enable-prefix-caching" not in expected:  # 0.27.1 and older drop a false key; the doctor keeps it
            got = [w for w in got if w != "--no-enable-prefix-caching"]
        assert got == expected, (version, args)


@pytest.mark.parametrize("version", sorted({*MATRIX, "0.18.0", "0.21.0"}, key=lambda v: tuple(map(int, v.split(".")))))
def test_a_missing_flashinfer_fails_where_the_releases_sampler_imports_it_at_engine_start(version: str) -> None:
    """knowledge.vllm_imports.IMPORTED_AT_ENGINE_START against each release's own sampler code (run with the import
    intercepted) and envs.py, for an unset, a 0 and a 1 VLLM_USE_FLASHINFER_SAMPLER: distributions.requirement-missing
    fails exactly where building the sampler imports vllm.v1.attention.backends.flashinfer, whose top level imports
    flashinfer (recorded on 0.26.0: fixtures/engine/vllm-0.26.0/20-flashinfer-missing.json)."""
    from vllm_release import imports_at_module_level, vllm_sampler_imports_flashinfer

    from dflash_doctor.checks.python.distributions import _imported_at_engine_start
    from dflash_doctor.facts.python.vllm_source_shapes import ImportedAt, ImportedElsewhere, VllmServeImports
    from dflash_doctor.knowledge.vllm_imports import IMPORTED_AT_ENGINE_START

    known = IMPORTED_AT_ENGINE_START.value["flashinfer-python"]
    vllm_file = known.vllm_file
    assert imports_at_module_level(version, vllm_file.removeprefix("vllm/"), "flashinfer")
    serve = VllmServeImports(elsewhere={"flashinfer": ImportedElsewhere(files=1, sites=[
        ImportedAt(file=vllm_file, line=12, scope="module")])})
    imports = vllm_sampler_imports_flashinfer(version)
    for environ in ({}, {"VLLM_USE_FLASHINFER_SAMPLER": "0"}, {"VLLM_USE_FLASHINFER_SAMPLER": "1"}):
        ours = _imported_at_engine_start(known, ["flashinfer"], version, serve, environ)
        assert (ours is not None) is imports(environ), (version, environ)
        # a wheel from vLLM's own index carries a local version (+cu130): the same release
        local = _imported_at_engine_start(known, ["flashinfer"], f"{version}+cu130", serve, environ)
        assert (local is not None) is imports(environ), (f"{version}+cu130", environ)


@pytest.mark.parametrize("version", sorted({*MATRIX, "0.18.0"}, key=lambda v: tuple(map(int, v.split(".")))))
def test_no_release_imports_a_module_the_knowledge_says_vllm_never_loads(version: str) -> None:
    """knowledge.vllm_imports.NEVER_IMPORTED against every file of each release: no import statement and no string
    names the module (flash_attn.cute: vLLM's CuTe DSL attention is its bundled vllm.vllm_flash_attn.cute), so a
    broken pin of flash-attn-4 is a warning for `vllm serve` (recorded on 0.26.0:
    fixtures/engine/vllm-0.26.0/02-flash-attn-4-only.json served)."""
    import ast

    from dflash_doctor.knowledge.vllm_imports import NEVER_IMPORTED

    for distribution, (module, oldest, newest) in NEVER_IMPORTED.value.items():
        if not tuple(map(int, oldest.split("."))) <= tuple(map(int, version.split("."))) <= tuple(
                map(int, newest.split("."))):
            continue
        found = []
        for path in sorted(vllm_source(version).rglob("*.py")):
            text = path.read_text(errors="replace")
            if module not in text:
                continue
            for node in ast.walk(ast.parse(text)):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                         [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else
                         [node.value] if isinstance(node, ast.Constant) and isinstance(node.value, str) else [])
                if any(n == module or n.startswith(module + ".") for n in names):
                    found.append(f"{path.relative_to(vllm_source(version))}:{getattr(node, 'lineno', 0)}")
        assert not found, (distribution, version, found)
