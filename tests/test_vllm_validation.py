"""The doctor's verdicts on `vllm serve` commands, compared with vLLM's own.

The real vLLM 0.20.1 parses each command with its own parser and runs `create_engine_config`, its whole
config validation (it reads the toy models' configs and loads no weights). It runs on vLLM's CPU
platform, chosen by a platform plugin, with torch 2.13.0 (CPU) beside it: `stacks.vllm_python` says how
and why. The doctor judges the same command with its own rules alone (its documented subset of flags,
vLLM's parser off, vLLM 0.20.1's source read for the version rules, two H200-sized GPUs given as
`--gpus 2 --gpu-memory 139.8`). Limits whose defaults depend on the platform (max_num_seqs,
max_num_batched_tokens) are given in every command, so that both judge the same numbers.
"""

from __future__ import annotations

import copy
import json
import shlex
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("safetensors")

from conftest import Doctor, finding, validate_report
from stacks import vllm_python, warm_model_info_cache
from test_models_check import patch_config, run_checks

from dflash_doctor.facts.probes import ProbeJob, ProbeOutcome, run_probes_sharing_imports
from dflash_doctor.facts.serve.serve_args import parse_serve_command
from dflash_doctor.model import Status

try:
    import toymodels as toy
except ImportError:  # tests/ imported as a package
    from tests import toymodels as toy  # type: ignore[no-redef]

# One worker runs this module: its fixtures (a vLLM cache filled by vLLM itself, vLLM's verdict on eleven
# commands) are built once, not once per worker.
pytestmark = pytest.mark.xdist_group("vllm-0.20.1-validation")

VLLM = "0.20.1"
TARGET, DRAFTER = "TARGET", "DRAFTER"

# (name, flags after `vllm serve TARGET`, speculative config, words of vLLM's reason or None when it accepts)
CASES: list[tuple[str, list[str], dict[str, Any], str | None]] = [
    ("the seed command", ["--max-num-batched-tokens", "32768", "--max-num-seqs", "1024"], {}, None),
    ("8192 tokens, 1024 sequences (H200 default)", ["--max-num-batched-tokens", "8192", "--max-num-seqs", "1024"],
     {}, "max_num_scheduled_tokens is set to -6144 based on the speculative decoding settings"),
    ("8192 tokens, 256 sequences (A6000 default)", ["--max-num-batched-tokens", "8192", "--max-num-seqs", "256"],
     {}, None),
    ("num_speculative_tokens missing", ["--max-num-batched-tokens", "32768", "--max-num-seqs", "256"],
     {"num_speculative_tokens": None},
     "A speculative model was provided, but neither `speculative_token_tree` nor `num_speculative_tokens`"),
    ("num_speculative_tokens 0", ["--max-num-batched-tokens", "32768", "--max-num-seqs", "256"],
     {"num_speculative_tokens": 0}, "greater than 0"),
    ("chunked prefill off, 4096 tokens",
     ["--max-num-batched-tokens", "4096", "--max-num-seqs", "256", "--no-enable-chunked-prefill"], {},
     "max_num_batched_tokens (4096) is smaller than max_model_len (32768)"),
    ("more sequences than tokens", ["--max-num-batched-tokens", "4096", "--max-num-seqs", "8192"], {},
     "max_num_batched_tokens (4096) must be greater than or equal to max_num_seqs (8192)"),
    ("max_model_len past the target's positions",
     ["--max-model-len", "65536", "--max-num-batched-tokens", "65536", "--max-num-seqs", "256"], {},
     "max_model_len (65536) is greater than the derived max_model_len"),
    ("draft TP equal to the target's", ["--max-num-batched-tokens", "32768", "--max-num-seqs", "256"],
     {"draft_tensor_parallel_size": 2}, None),
    ("draft TP 3 under TP 2", ["--max-num-batched-tokens", "32768", "--max-num-seqs", "256"],
     {"draft_tensor_parallel_size": 3}, "cannot be other value than 1 or target model tensor_parallel_size"),
    ("a method vLLM does not know", ["--max-num-batched-tokens", "32768", "--max-num-seqs", "256"],
     {"method": "dflashh"}, "'dflashh'"),
]


def command(target: Path, drafter: Path, flags: list[str], spec_changes: Mapping[str, Any]) -> list[str]:
    spec: dict[str, Any] = {"method": "dflash", "model": str(drafter), "num_speculative_tokens": 15}
    spec.update(spec_changes)
    argv = ["vllm", "serve", str(target), "--tensor-parallel-size", "2", "--language-model-only"]
    if "--max-model-len" not in flags:
        argv += ["--max-model-len", "32768"]
    return [*argv, *flags, "--speculative-config", json.dumps({k: v for k, v in spec.items() if v is not None})]


@pytest.fixture(scope="module")
def toys(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("toys")
    target = toy.write_toy_target(base / "target")
    patch_config(target, max_position_embeddings=40960)  # as Qwen3's config allows
    return target, toy.write_toy_drafter(base / "drafter")


# The module's runs share a model-info cache vLLM filled (stacks.warm_model_info_cache);
# test_vllms_validation_writes_nothing_and_downloads_nothing runs cold.
@pytest.fixture(scope="module", autouse=True)
def vllm_cache(toys: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("vllm-cache")
    assert warm_model_info_cache(VLLM, *toys, root) == 0
    assert list((root / "modelinfos").iterdir()), "vLLM cached nothing"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VLLM_CACHE_ROOT", str(root))
        yield root


@pytest.fixture(scope="module")
def vllm_verdicts(toys: tuple[Path, Path]) -> dict[str, ProbeOutcome]:
    """vLLM's own verdict on every case: the doctor's vllm_args probe, in children sharing one vLLM import."""
    jobs = [ProbeJob(name, "vllm_args", {"args": parse_serve_command(command(*toys, flags, spec))["args"],
                                         "validate": True})
            for name, flags, spec, _ in CASES]
    shared = run_probes_sharing_imports(str(vllm_python(VLLM)), jobs, timeout_s=300, cwd=str(toys[0].parent),
                                        preload=("vllm.engine.arg_utils", "vllm.entrypoints.openai.cli_args"))
    return shared.outcomes


def vllm_error(outcome: ProbeOutcome) -> str | None:
    assert outcome.ok, (outcome.error, outcome.stderr[-2000:])
    data = outcome.data
    assert data["available"] and data["version"] == VLLM and data["parse_error"] is None, data
    validation = data["validation"]
    return None if validation["ok"] else str(validation["error"]["message"])


@pytest.mark.slow
@pytest.mark.parametrize(("name", "flags", "spec", "words"), CASES, ids=[c[0] for c in CASES])
def test_the_doctor_fails_exactly_the_commands_vllm_rejects_and_says_why(
    tmp_path: Path, toys: tuple[Path, Path], vllm_verdicts: dict[str, ProbeOutcome],
    name: str, flags: list[str], spec: dict[str, Any], words: str | None,
) -> None:
    rejected = vllm_error(vllm_verdicts[name])
    results = run_checks(tmp_path, argv=command(*toys, flags, spec), vllm=VLLM, gpus=2, gpu_memory=139.8)
    failing = [f.title for r in results.values() for f in r.findings if f.status in (Status.FAIL, Status.ERROR)]
    if words is None:
        assert rejected is None and failing == []
    else:
        assert rejected is not None and words in rejected
        assert any(words in title for title in failing), failing


# A pair of RTX A6000s as a CI image build gives them: no GPU here, the serving GPUs' facts on the command line.
A6000_PAIR = ("--target-arch", "sm_86", "--gpus", "2", "--gpu-memory", "48")
H200_PAIR = ("--target-arch", "sm_90", "--gpus", "2", "--gpu-memory", "139.8")


def serve_argv(doctor: Doctor, argv: list[str], *options: str, env: dict[str, str] | None = None,
               ) -> tuple[dict[str, Any], int]:
    proc = doctor("serve", "--python", str(vllm_python(VLLM)), *options, "--only", "serve-command", "--json", "-",
                  "--", *argv, env=env, timeout=600)
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"not one JSON document:\n{proc.stdout[:2000]}\n{proc.stderr[-2000:]}") from None
    return validate_report(report), proc.returncode


def serve(doctor: Doctor, toys: tuple[Path, Path], flags: list[str], *options: str,
          spec: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], int]:
    return serve_argv(doctor, command(*toys, flags, spec or {}), *options)


def all_of(report: dict[str, Any], finding_id: str) -> list[dict[str, Any]]:
    return [f for c in report["checks"] for f in c["findings"] if f["id"] == finding_id]


@pytest.mark.slow
def test_by_default_vllm_judges_the_command_itself_on_a_platform_simulated_from_the_builders_facts(
    doctor: Doctor, toys: tuple[Path, Path], tmp_path: Path,
) -> None:
    flags = ["--max-num-batched-tokens", "8192", "--max-num-seqs", "1024"]
    report, code = serve(doctor, toys, flags, "--gpus", "2", "--gpu-memory", "139.8")
    assert finding(report, "serve-command.parsed")["title"] == f"the command was read by vLLM {VLLM}'s own parser"
    rejected = finding(report, "serve-command.vllm-validation")
    assert rejected["status"] == "fail"
    assert rejected["title"] == (
        f"vLLM {VLLM}'s own config validation rejects the command on a simulated 2× unknown arch, 140 GiB platform "
        "(--gpu-memory, --gpus): ValidationError: max_num_scheduled_tokens is set to -6144 based on the speculative "
        "decoding settings, which does not allow any tokens to be scheduled. Increase max_num_batched_tokens to "
        "accommodate the additional draft token slots, or decrease num_speculative_tokens or max_num_seqs.")
    # The doctor's own rule says the same, from the files and the flags alone.
    assert "max_num_scheduled_tokens is set to -6144" in finding(report, "serve-command.token-budget")["title"]
    # vLLM rejected the config: its attention selector has nothing to be asked about.
    assert all_of(report, "serve-command.vllm-attention") == []
    judged = finding(report, "serve-command.judged-by")
    assert judged["title"].startswith(f"judged by vLLM {VLLM}'s own code (its parser, its config validation, "
                                      "its environment check)")
    assert {"serve-command.parsed", "serve-command.vllm-validation"} <= set(judged["evidence"]["vllm"])
    assert "serve-command.token-budget" in judged["evidence"]["rules"]
    platform = judged["evidence"]["platform"]
    assert platform["kind"] == "simulated" and platform["count"] == 2
    assert platform["simulated_from"] == {"count": "--gpus", "memory": "--gpu-memory"}
    # This machine has no CUDA driver: vLLM's compiled modules that need it were stood in for, and named.
    assert "vllm._C" in judged["evidence"]["stood_in_for_the_driver"]
    assert code == 1

    # Facts edited, labelled as such: the same command on a vLLM newer than the rules are verified through,
    # whose own validation accepts it. vLLM's verdict counts first: the rule that restates its validation warns.
    newer = copy.deepcopy(report)
    for check in newer["checks"]:
        facts = check.get("facts") or {}
        if "serve_args" in facts:
            facts["serve_args"]["vllm_parser"].update(version="0.99.0", validation={"ok": True, "error": None})
        if "vllm_dflash" in facts:
            facts["vllm_dflash"]["version"] = "0.99.0"
    saved = tmp_path / "newer.json"
    saved.write_text(json.dumps(newer))
    again, _ = doctor.report("judge", str(saved))
    budget = finding(again, "serve-command.token-budget")
    assert budget["status"] == "warn"
    assert budget["title"].endswith("(vLLM 0.99.0's own validation accepts the command; this rule is verified "
                                    "through 0.34.0)")
    assert finding(again, "serve-command.vllm-newer-than-verified")["status"] == "warn"


@pytest.mark.slow
def test_an_fp8_kv_cache_leaves_the_non_causal_drafter_no_backend_on_sm86_and_the_fix_clears_it(
    doctor: Doctor, toys: tuple[Path, Path],
) -> None:
    flags = ["--max-num-batched-tokens", "32768", "--max-num-seqs", "256", "--kv-cache-dtype", "fp8"]
    report, code = serve(doctor, toys, flags, *A6000_PAIR)
    assert finding(report, "serve-command.vllm-validation")["status"] == "pass"
    drafter = next(f for f in all_of(report, "serve-command.vllm-attention") if f["evidence"]["role"] == "drafter")
    assert drafter["status"] == "fail"
    assert drafter["title"].startswith(f"vLLM {VLLM}'s attention selector finds no backend for the drafter on sm_86 "
                                       "(head size 16, KV cache fp8, non-causal): Reasons: {FLASH_ATTN: "
                                       "[kv_cache_dtype not supported]")
    assert code == 1
    # The remediation, applied literally: the command it gives is judged again, and the finding is gone.
    (fix,) = drafter["remediation"]
    fixed_argv = shlex.split(fix["command"])
    assert fixed_argv[fixed_argv.index("--kv-cache-dtype") + 1] == "auto"
    again, _ = serve_argv(doctor, fixed_argv, *A6000_PAIR)
    backends = {f["evidence"]["role"]: (f["status"], f["evidence"].get("backend"))
                for f in all_of(again, "serve-command.vllm-attention")}
    assert backends == {"target": ("pass", "FLASH_ATTN"), "drafter": ("pass", "FLASH_ATTN")}
    # On Hopper, FlashAttention 3 takes the fp8 KV cache with non-causal attention: vLLM picks it.
    hopper, code = serve(doctor, toys, flags, *H200_PAIR)
    backends = {f["evidence"]["role"]: (f["status"], f["evidence"].get("backend"))
                for f in all_of(hopper, "serve-command.vllm-attention")}
    assert backends == {"target": ("pass", "FLASH_ATTN"), "drafter": ("pass", "FLASH_ATTN")}


@pytest.mark.slow
def test_vllms_validation_writes_nothing_and_downloads_nothing(doctor: Doctor, toys: tuple[Path, Path],
                                                              tmp_path: Path) -> None:
    def listing(root: Path) -> dict[str, tuple[int, int]]:
        return {str(p): (p.stat().st_mtime_ns, p.stat().st_size) for p in root.rglob("*") if not p.is_symlink()}

    python = vllm_python(VLLM)
    env_root = python.parent.parent
    home = tmp_path / "home"  # vLLM's own cache (~/.cache/vllm) and Hugging Face's live under it by default
    home.mkdir()
    before = {root: listing(root) for root in (*toys, env_root)}
    flags = ["--max-num-batched-tokens", "32768", "--max-num-seqs", "256"]
    cold = {"HOME": str(home), "VLLM_CACHE_ROOT": str(home / ".cache" / "vllm")}  # vLLM's default under HOME
    report, _ = serve_argv(doctor, command(*toys, flags, {}), *A6000_PAIR, "--timeout", "400", env=cold)
    assert finding(report, "serve-command.vllm-validation")["status"] == "pass"
    assert {root: listing(root) for root in (*toys, env_root)} == before
    assert list(home.rglob("*")) == []


@pytest.mark.slow
def test_validation_can_be_turned_off_and_a_vllm_that_does_not_answer_in_time_is_a_warning(
    doctor: Doctor, toys: tuple[Path, Path],
) -> None:
    flags = ["--max-num-batched-tokens", "32768", "--max-num-seqs", "256"]
    report, _ = serve(doctor, toys, flags, *A6000_PAIR, "--no-vllm-validate")
    assert finding(report, "serve-command.parsed")["title"] == f"the command was read by vLLM {VLLM}'s own parser"
    assert all_of(report, "serve-command.vllm-validation") == []
    assert finding(report, "serve-command.judged-by")["evidence"]["vllm"] == ["serve-command.parsed"]
    # A flag vLLM's parser does not know: vLLM's own message, exit 1, no traceback.
    rejected, code = serve(doctor, toys, [*flags, "--max-num-seqz", "4"], *A6000_PAIR, "--no-vllm-validate")
    refusal = finding(rejected, "serve-command.vllm-parser-rejected")
    assert refusal["status"] == "fail" and code == 1
    assert refusal["title"] == (f"vLLM {VLLM}'s own parser rejects the command: vllm serve: error: unrecognized "
                                "arguments: --max-num-seqz 4")
    slow, code = serve(doctor, toys, flags, *A6000_PAIR, "--timeout", "1")
    parsed = finding(slow, "serve-command.parsed")
    assert parsed["status"] == "warn"
    assert "vLLM's parser did not answer" in parsed["title"] and "1 s" in parsed["title"]
    assert finding(slow, "serve-command.judged-by")["title"].startswith("judged by the doctor's rules alone")


RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-validation"


@pytest.mark.parametrize("version", ["0.33.0", "0.34.0"])
@pytest.mark.parametrize("kv", ["auto", "fp8"])
def test_the_newest_releases_validation_completes_without_the_driver_with_the_device_query_answered(
    doctor: Doctor, version: str, kv: str,
) -> None:
    """vLLM 0.33.0 and 0.34.0, recorded on this machine (fixtures/vllm-validation/README.md): their model inspection
    asks a compiled op about the GPU at import; the op, whose module needs the CUDA driver, was answered as the
    release's csrc answers for sm_86, and vLLM's own validation and attention selector ran to their end."""
    report, proc = doctor.report("judge", str(RECORDED / f"{version}-sm86x2-kv-{kv}.json"))
    assert finding(report, "serve-command.parsed")["title"] == f"the command was read by vLLM {version}'s own parser"
    validation = finding(report, "serve-command.vllm-validation")
    assert validation["status"] == "pass"
    assert validation["title"] == (f"vLLM {version}'s own config validation (create_engine_config) accepts the command "
                                   "on a simulated 2× sm_86, 48 GiB platform (--gpu-memory, --gpus, --target-arch)")
    judged = finding(report, "serve-command.judged-by")
    assert judged["title"].startswith(f"judged by vLLM {version}'s own code (its parser, its config validation, its "
                                      "attention selector, its environment check)")
    assert judged["evidence"]["answered_for_the_driver"] == ["_C::cutlass_scaled_mm_supports_block_fp8"]
    answered = {a["op"]: a for a in judged["evidence"]["platform"]["answered"]}
    assert (answered["_C::cutlass_scaled_mm_supports_block_fp8"]["asked"],
            answered["_C::cutlass_scaled_mm_supports_block_fp8"]["answers"]) == ([86], [False])
    assert "vllm._C_stable_libtorch" in judged["evidence"]["stood_in_for_the_driver"]
    attention = {f["evidence"]["role"]: f for f in all_of(report, "serve-command.vllm-attention")}
    if kv == "auto":
        assert {r: (f["status"], f["evidence"]["backend"]) for r, f in attention.items()} == {
            "target": ("pass", "FLASH_ATTN"), "drafter": ("pass", "FLASH_ATTN")}
        assert proc.returncode == 0
    else:  # FlashAttention takes an fp8 KV cache only as FA3 (sm_90) or FA4: not on sm_86, as on 0.20.1
        assert {f["status"] for f in attention.values()} == {"fail"}
        assert all("FLASH_ATTN: [kv_cache_dtype not supported" in f["title"] for f in attention.values())
        assert proc.returncode == 1


def test_where_the_driver_is_needed_for_more_than_a_device_query_the_validation_is_a_skip_and_the_rules_judge(
    doctor: Doctor,
) -> None:
    """vLLM 0.34.0 recorded before the doctor answered the op (fixtures/vllm-validation/README.md): its validation
    stopped while inspecting the model, and the report says so instead of calling it vLLM's rejection."""
    report, proc = doctor.report("judge", str(RECORDED / "0.34.0-sm86x2-kv-auto-unanswered.json"))
    validation = finding(report, "serve-command.vllm-validation")
    assert validation["status"] == "skip"
    assert validation["title"].startswith(
        "vLLM 0.34.0's own config validation could not finish on a simulated 2× sm_86, 48 GiB platform "
        "(--gpu-memory, --gpus, --target-arch): vLLM's code needs a compiled module this machine cannot load "
        "without the CUDA driver (vllm._C_stable_libtorch")
    judged = finding(report, "serve-command.judged-by")
    assert judged["evidence"]["vllm"] == ["serve-command.parsed", "serve-command.vllm-validation"]
    assert "serve-command.token-budget" in judged["evidence"]["rules"]
    assert proc.returncode == 0


def test_a_skip_names_the_part_vllm_stopped_in_and_the_parts_it_never_reached(doctor: Doctor, tmp_path: Path) -> None:
    """Facts edited, labelled as such: the recording above, with the parts the vllm_args probe reported when 0.34.0
    was run again with no device query answered and a warm model-info cache (it stopped in the speculative config,
    whose drafter config imports w8a8_utils), and the environment check it ran on its own."""
    report = json.loads((RECORDED / "0.34.0-sm86x2-kv-auto-unanswered.json").read_text())
    for check in report["checks"]:
        facts = check.get("facts") or {}
        if "serve_args" in facts:
            facts["serve_args"]["vllm_parser"].update(environ={
                "function": "vllm/platforms/interface.py Platform.validate_environ", "hard_fail": False,
                "error": None, "warnings": []}, skipped_parts=[
                {"part": "speculative", "function": "EngineArgs.create_speculative_config", "ok": False,
                 "error": None, "skipped": "stopped: a compiled module it needs cannot load without the CUDA driver"},
                {"part": "scheduler", "function": "SchedulerConfig", "ok": False, "error": None,
                 "skipped": "not reached: create_engine_config builds it after EngineArgs.create_speculative_config"}])
    saved = tmp_path / "parts.json"
    saved.write_text(json.dumps(report))
    judged, _ = doctor.report("judge", str(saved))
    validation = finding(judged, "serve-command.vllm-validation")
    assert validation["status"] == "skip"
    assert ("(EngineArgs.create_speculative_config stopped: a compiled module it needs cannot load without the CUDA "
            "driver; SchedulerConfig not reached: create_engine_config builds it after "
            "EngineArgs.create_speculative_config; its environment check ran on its own); the doctor's rules judge "
            "the command") in validation["title"]
    assert [p["part"] for p in validation["evidence"]["skipped_parts"]] == ["speculative", "scheduler"]
