"""vLLM 0.33.0 and 0.34.0 judge a `vllm serve` command themselves on this CPU-only machine, on a CUDA platform
simulated from `--target-arch sm_86 --gpus 2 --gpu-memory 48`, live.

Both releases ask a compiled op about the GPU while they inspect the model (w8a8_utils.py:41
`CUTLASS_BLOCK_FP8_SUPPORTED = cutlass_block_fp8_supported()`, which calls
`torch.ops._C.cutlass_scaled_mm_supports_block_fp8`); the module that registers it, `vllm._C_stable_libtorch`, needs
the CUDA driver (`libcuda.so.1`) and cannot load here. The doctor registers that op as the module does and answers
as the release's csrc does for the simulated capability (knowledge.vllm.DEVICE_QUERY_OPS), so vLLM's validation
runs to its end. The environment `vllm serve` gets is judged by 0.34.0's own `Platform.validate_environ`.

Each release's venv is `stacks.vllm_python(VERSION)`: the real wheel, torch 2.13.0 CPU.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("safetensors")

from conftest import Doctor, finding, validate_report
from stacks import vllm_python, warm_model_info_cache
from test_models_check import patch_config

try:
    import toymodels as toy
except ImportError:  # tests/ imported as a package
    from tests import toymodels as toy  # type: ignore[no-redef]

pytestmark = pytest.mark.xdist_group("vllm-newest-validation")

RELEASES = ("0.33.0", "0.34.0")
A6000_PAIR = ("--target-arch", "sm_86", "--gpus", "2", "--gpu-memory", "48")


@pytest.fixture(scope="module")
def toys(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("toys")
    target = toy.write_toy_target(base / "target")
    patch_config(target, max_position_embeddings=40960)
    return target, toy.write_toy_drafter(base / "drafter")


# The module's runs share a model-info cache vLLM filled (stacks.warm_model_info_cache).
@pytest.fixture(scope="module", autouse=True)
def vllm_cache(toys: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("vllm-cache")
    for version in RELEASES:
        warm_model_info_cache(version, *toys, root)
    assert len(list((root / "modelinfos").iterdir())) >= 2, "vLLM cached nothing"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VLLM_CACHE_ROOT", str(root))
        yield root


def command(toys: tuple[Path, Path], kv: str = "auto") -> list[str]:
    target, drafter = toys
    return ["vllm", "serve", str(target), "--tensor-parallel-size", "2", "--language-model-only", "--max-model-len",
            "32768", "--max-num-batched-tokens", "32768", "--max-num-seqs", "256", "--kv-cache-dtype", kv,
            "--speculative-config", json.dumps({"method": "dflash", "model": str(drafter),
                                                "num_speculative_tokens": 15})]


def serve(doctor: Doctor, version: str, argv: list[str], env: dict[str, str] | None = None,
          ) -> tuple[dict[str, Any], int]:
    proc = doctor("serve", "--python", str(vllm_python(version)), *A6000_PAIR, "--timeout", "400", "--only",
                  "serve-command", "--json", "-", "--", *argv, env=env, timeout=600)
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"not one JSON document:\n{proc.stdout[:2000]}\n{proc.stderr[-2000:]}") from None
    return validate_report(report), proc.returncode


def all_of(report: dict[str, Any], finding_id: str) -> list[dict[str, Any]]:
    return [f for c in report["checks"] for f in c["findings"] if f["id"] == finding_id]


@pytest.mark.slow
@pytest.mark.parametrize("version", RELEASES)
def test_the_newest_releases_validate_to_the_end_with_the_device_query_answered_as_their_compiled_op_does(
    doctor: Doctor, toys: tuple[Path, Path], version: str,
) -> None:
    report, code = serve(doctor, version, command(toys))
    validation = finding(report, "serve-command.vllm-validation")
    assert validation["status"] == "pass", validation
    assert validation["title"] == (f"vLLM {version}'s own config validation (create_engine_config) accepts the "
                                   "command on a simulated 2× sm_86, 48 GiB platform (--gpu-memory, --gpus, "
                                   "--target-arch)")
    backends = {f["evidence"]["role"]: (f["status"], f["evidence"].get("backend"))
                for f in all_of(report, "serve-command.vllm-attention")}
    assert backends == {"target": ("pass", "FLASH_ATTN"), "drafter": ("pass", "FLASH_ATTN")}
    judged = finding(report, "serve-command.judged-by")
    assert "vllm._C_stable_libtorch" in judged["evidence"]["stood_in_for_the_driver"]
    assert judged["evidence"]["answered_for_the_driver"] == ["_C::cutlass_scaled_mm_supports_block_fp8"]
    assert "_C::cutlass_scaled_mm_supports_block_fp8 were answered for the simulated GPU" in judged["title"]
    (block,) = [a for a in judged["evidence"]["platform"]["answered"]
                if a["op"] == "_C::cutlass_scaled_mm_supports_block_fp8"]
    # csrc/quantization/w8a8/cutlass/scaled_mm_entry.cu: block FP8 from sm_90 (CUDA >= 12.0): not on sm_86
    assert (block["asked"], block["answers"]) == ([86], [False])
    assert code == 0


@pytest.mark.slow
def test_vllm_use_v2_model_runner_0_stops_0_34_0_and_unsetting_it_as_the_fix_says_clears_it(
    doctor: Doctor, toys: tuple[Path, Path], tmp_path: Path,
) -> None:
    argv = command(toys)
    report, code = serve(doctor, "0.34.0", argv, env={"VLLM_USE_V2_MODEL_RUNNER": "0"})
    refused = finding(report, "serve-command.environ-refused")
    assert refused["status"] == "fail" and code == 1
    assert refused["title"] == (
        "vLLM 0.34.0 refuses VLLM_USE_V2_MODEL_RUNNER in the environment `vllm serve` gets, before it builds any "
        "config: VLLM_USE_V2_MODEL_RUNNER=0 is no longer supported: Model Runner V1 has been removed. Unset this "
        "variable.")
    assert refused["evidence"]["judged_by"] == ("vLLM 0.34.0's own vllm/platforms/interface.py "
                                                "Platform.validate_environ")
    # create_engine_config runs validate_environ first: its rejection is the same refusal
    assert finding(report, "serve-command.vllm-validation")["cause"] == "serve-command.environ-refused"
    assert "serve-command.environ-refused" in finding(report, "serve-command.judged-by")["evidence"]["vllm"]
    # The remediation, applied literally in the shell that then runs the doctor again: the finding is gone.
    (fix,) = refused["remediation"]
    assert fix["command"] == "unset VLLM_USE_V2_MODEL_RUNNER"
    saved = tmp_path / "again.json"
    rerun = shlex.join([sys.executable, "-m", "dflash_doctor", "serve", "--python", str(vllm_python("0.34.0")),
                        *A6000_PAIR, "--timeout", "400", "--only", "serve-command", "--json", str(saved), "--",
                        *argv])
    script = f"export VLLM_USE_V2_MODEL_RUNNER=0\n{fix['command']}\n{rerun} > /dev/null\n"
    subprocess.run(["bash", "-c", script], cwd=doctor.cwd, check=False, timeout=600)
    again = validate_report(json.loads(saved.read_text()))
    assert all_of(again, "serve-command.environ-refused") == []
    assert finding(again, "serve-command.vllm-validation")["status"] == "pass"
    # The control, the release before: 0.33.0 still has the V1 runner and takes the variable.
    before, _ = serve(doctor, "0.33.0", argv, env={"VLLM_USE_V2_MODEL_RUNNER": "0"})
    assert all_of(before, "serve-command.environ-refused") == []
    assert finding(before, "serve-command.vllm-validation")["status"] == "pass"
