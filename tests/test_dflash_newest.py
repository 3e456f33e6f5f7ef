"""DFlash on the newest releases: prefix caching with an eagle-family draft on a hybrid target (vLLM #53505),
judged from the installed scheduler and KV cache coordinator of each release's real source, and NVIDIA
Confidential Computing, judged from NVML's state (recorded off on the H200; on only in facts labelled DERIVED)
and collected through the real pynvml bindings."""

from __future__ import annotations

import copy
import json
import shlex
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("safetensors")

from test_models_check import found, gpu_fixture, ids, run_checks

from dflash_doctor.model import Status

try:
    import toymodels as toy
except ImportError:  # tests/ imported as a package
    from tests import toymodels as toy  # type: ignore[no-redef]


def seed(target: Path, drafter: Path, *extra: str) -> list[str]:
    return ["vllm", "serve", str(target), "--max-model-len", "4096", "--max-num-batched-tokens", "8192",
            "--language-model-only", "--speculative-config",
            json.dumps({"method": "dflash", "model": str(drafter), "num_speculative_tokens": 15}), *extra]


# ------------------------------------------------------------------------ prefix caching, hybrid targets


def test_prefix_caching_on_a_hybrid_target_warns_through_0_29_and_not_from_0_30(tmp_path: Path) -> None:
    """Qwen3_5ForConditionalGeneration is IsHybrid in every release read; 0.29.0's scheduler backs off one block
    for DFlash and its coordinator has no drop_eagle_checkpoint_block, 0.30.0's has (the control on the other
    side). A dense Qwen3 target, and prefix caching turned off, are the other controls."""
    hybrid = toy.write_toy_target(tmp_path / "hybrid", nested_text_config=True)
    drafter = toy.write_toy_drafter(tmp_path / "drafter")
    f = found(run_checks(tmp_path, argv=seed(hybrid, drafter), vllm="0.29.0"), "serve-command.hybrid-prefix-cache")
    assert f.status is Status.WARN and "prefix caching with dflash on a hybrid target (Qwen3_5ForConditionalGeneration" \
        in f.title
    assert "vLLM 0.29.0's scheduler backs the cached position off one block" in f.title
    assert "#53505" in f.title and "fa5017a5" in f.detail
    assert f.remediation[1].command.endswith("--no-enable-prefix-caching")
    for fixed in ("0.30.0", "0.34.0"):
        assert "serve-command.hybrid-prefix-cache" not in ids(
            run_checks(tmp_path, argv=seed(hybrid, drafter), vllm=fixed), "serve-command"), fixed
    dense = toy.write_toy_target(tmp_path / "dense")
    assert "serve-command.hybrid-prefix-cache" not in ids(
        run_checks(tmp_path, argv=seed(dense, drafter), vllm="0.29.0"), "serve-command")
    # the remediation's own command, word for word, judged again: the finding is gone
    off = run_checks(tmp_path, argv=shlex.split(f.remediation[1].command), vllm="0.29.0")
    assert "serve-command.hybrid-prefix-cache" not in ids(off, "serve-command")
    # KV offload (a size: engine/arg_utils.py --kv-offloading-size) hits the same lookup
    offload = run_checks(tmp_path, argv=seed(hybrid, drafter, "--no-enable-prefix-caching", "--kv-offloading-size",
                                             "8"), vllm="0.29.0")
    assert "KV offload with dflash on a hybrid target" in found(offload, "serve-command.hybrid-prefix-cache").title


# ------------------------------------------------------------------------------ confidential computing


def cc_on_derived_from_h200(gpus: int) -> dict[str, Any]:
    """DERIVED from fixtures/gpu/h200-facts.json (recorded on a real H200, where CC mode is off): NVML's
    nvmlSystemGetConfComputeState set to ccFeature 1 (NVML_CC_SYSTEM_FEATURE_ENABLED), environment 2 (PROD),
    devToolsMode 0, and the recorded device repeated `gpus` times with its index changed. No CC-on machine was
    recorded."""
    gpu = copy.deepcopy(gpu_fixture("h200-facts.json"))
    gpu["devices"] = [{**copy.deepcopy(gpu["devices"][0]), "index": i} for i in range(gpus)]
    gpu["device_count"] = gpus
    gpu["conf_compute"] = {"cc_feature": 1, "environment": 2, "dev_tools_mode": 0}
    gpu["label"] = "DERIVED: Confidential Computing on"
    return gpu


@pytest.mark.parametrize("version", ["0.33.0", "0.34.0"])
def test_confidential_computing_with_tp2_warns_and_the_recorded_h200_says_nothing(
        tmp_path: Path, version: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """0.34.0 reads nvmlSystemGetConfComputeState (platforms/cuda.py), 0.33.0 does not; the H200 recording (CC
    off, as collected there) is the control."""
    target = toy.write_toy_target(tmp_path / "target")
    drafter = toy.write_toy_drafter(tmp_path / "drafter")
    argv = seed(target, drafter, "--tensor-parallel-size", "2")
    f = found(run_checks(tmp_path, argv=argv, vllm=version, gpu=cc_on_derived_from_h200(2)),
              "serve-resources.confidential-compute")
    assert f.status is Status.WARN and "ccFeature 1" in f.title and "TP 2 is planned" in f.title
    assert "no plain P2P" in f.title
    if version == "0.34.0":
        assert "vLLM 0.34.0 detects it (vllm/platforms/cuda.py)" in f.title
    else:
        assert "vLLM 0.33.0 does not detect it (no nvmlSystemGetConfComputeState" in f.title
    one = found(run_checks(tmp_path, argv=seed(target, drafter), vllm=version, gpu=cc_on_derived_from_h200(1)),
                "serve-resources.confidential-compute")
    assert one.status is Status.PASS and "on one GPU" in one.title
    recorded = gpu_fixture("h200-facts.json")
    assert "serve-resources.confidential-compute" not in ids(
        run_checks(tmp_path, argv=seed(target, drafter), vllm=version, gpu=recorded), "serve-resources")
    # VLLM_CONFIDENTIAL_COMPUTE=0 turns the detection off, where the release reads it
    gpu = cc_on_derived_from_h200(2)
    gpu["environ"] = {**gpu.get("environ", {}), "VLLM_CONFIDENTIAL_COMPUTE": "0"}
    forced = ids(run_checks(tmp_path, argv=argv, vllm=version, gpu=gpu), "serve-resources")
    assert ("serve-resources.confidential-compute" in forced) is (version == "0.33.0")


def test_the_conf_compute_state_is_collected_through_the_real_pynvml_bindings() -> None:
    """The collector asks nvidia-ml-py's own nvmlSystemGetConfComputeState and reads the fields of its real
    c_nvmlConfComputeSystemState_t; on a machine without the driver NVML's error is a fact, never a crash."""
    pynvml = pytest.importorskip("pynvml")
    from dflash_doctor.facts.gpu import nvml

    fields = {name for name, _ in pynvml.c_nvmlConfComputeSystemState_t._fields_}
    assert {"ccFeature", "environment", "devToolsMode"} <= fields
    state = pynvml.c_nvmlConfComputeSystemState_t()
    state.ccFeature, state.environment = pynvml.NVML_CC_SYSTEM_FEATURE_ENABLED, pynvml.NVML_CC_SYSTEM_ENVIRONMENT_PROD

    class Answering:  # pynvml itself, with the one query answered by its own struct
        def __getattr__(self, name: str) -> Any:
            return getattr(pynvml, name)

        @staticmethod
        def nvmlSystemGetConfComputeState() -> Any:
            return state

    queries = nvml._Queries(Answering())
    assert nvml._conf_compute(Answering(), queries) == {"cc_feature": 1, "environment": 2, "dev_tools_mode": 0}
    real = nvml._Queries(pynvml)
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        collected = nvml._conf_compute(pynvml, real)  # no driver here: NVML refuses, and that is recorded
        assert collected is None and ("conf_compute" in real.errors or "conf_compute" in real.unsupported)
    else:
        try:
            collected = nvml._conf_compute(pynvml, real)
        finally:
            pynvml.nvmlShutdown()
        assert collected is None or set(collected) == {"cc_feature", "environment", "dev_tools_mode"}


# ---------------------------------------------------------------------------------- Domino, in vLLM itself

# The release's own DFlashQwen3Model.load_weights, imported from the real vLLM (CPU platform, tests/stacks.py),
# run on the toy Domino drafter's real safetensors file: the backbone's top-level tensors as the module's
# parameters, the head's tensors given or not.
LOAD_DOMINO = """
import sys, torch
from safetensors.torch import load_file
from vllm.model_executor.models import qwen3_dflash as m
weights = load_file(sys.argv[1])
with_head = sys.argv[2] == "head"
HEAD, PLAIN = ("prefix_gru", "embed_proj"), ("fc", "norm", "hidden_norm")
model = torch.nn.Module()
for name, tensor in weights.items():
    top = name.split(".")[0]
    if top in PLAIN:
        if not hasattr(model, top):
            setattr(model, top, torch.nn.Module())
        getattr(model, top).register_parameter(name.split(".", 1)[1],
                                               torch.nn.Parameter(torch.empty_like(tensor), requires_grad=False))
model._context_kv_proj, model.quant_config = None, None
model.hf_to_vllm_mapper = getattr(m.DFlashQwen3Model, "hf_to_vllm_mapper", None)
items = [(n, t) for n, t in weights.items() if n.split(".")[0] in PLAIN or (with_head and n.split(".")[0] in HEAD)]
try:
    m.DFlashQwen3Model.load_weights(model, iter(items))
    print("LOADED", len(items))
except Exception as e:
    print("REFUSED", type(e).__name__, str(e)[:200])
"""


@pytest.mark.parametrize(("version", "refusal"), [("0.20.1", "REFUSED KeyError 'embed_proj.0.weight'"),
                                                  ("0.34.0", "REFUSED ValueError There is no module or parameter named 'embed_proj'")])
def test_vllms_own_dflash_loader_refuses_the_domino_head_and_loads_the_backbone(
        tmp_path: Path, version: str, refusal: str) -> None:
    """What drafter.domino-head says, in the release itself: 0.20.1's params_dict lookup and 0.34.0's
    AutoWeightsLoader stop on the head's tensors; the same file without them loads (the control)."""
    import subprocess

    from stacks import vllm_python
    from test_dflash_reports import DOMINO_HEAD

    drafter = toy.write_toy_drafter(tmp_path / "domino", extra_tensors=DOMINO_HEAD)
    python = str(vllm_python(version))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1"}
    said = {}
    for mode in ("head", "plain"):
        run = subprocess.run([python, "-c", LOAD_DOMINO, str(drafter / "model.safetensors"), mode], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=600, check=False)
        said[mode] = (run.stdout.strip().splitlines() or [run.stderr[-300:]])[-1]
    assert said["head"].startswith(refusal), said
    assert said["plain"] == "LOADED 3", said
