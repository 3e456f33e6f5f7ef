"""The fabric check: host readers on real /proc and /sys files copied from real machines, and judgement on
facts recorded on real hardware (each fixture directory's SOURCE.md says where)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import Doctor
from test_fact_shapes import assert_has_its_shape

from dflash_doctor.check import Facts
from dflash_doctor.checks.fabric import FabricCheck
from dflash_doctor.checks.fabric.machine import vllm_shm_need
from dflash_doctor.facts.fabric.fabric import group_size
from dflash_doctor.facts.fabric.machine import (
    acs_facts,
    container_facts,
    iommu_facts,
    parse_acs,
    shm_facts,
    switch_env,
    sysfs_bdf,
)
from dflash_doctor.facts.gpu.nvml_shapes import Gpu
from dflash_doctor.facts.serve.serve_shapes import ServeArgs

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "fabric"
CPU_HOST = Path(__file__).resolve().parent / "fixtures" / "fabric" / "cpu-host"


# --------------------------------------------------------------------------- host readers, this CPU machine


def test_shm_size_read_from_this_machines_mountinfo() -> None:
    shm = shm_facts(CPU_HOST)
    assert shm["mount"]["fstype"] == "tmpfs"
    assert shm["mount"]["size_option"] == "24683568k"
    # df -B1 /dev/shm on that machine said 25275973632 bytes
    assert shm["total_bytes"] == 24683568 * 1024 == 25275973632
    assert shm["source"] == "mountinfo size="


def test_container_with_host_ipc_namespace_from_this_machines_files() -> None:
    container = container_facts(CPU_HOST)
    assert container["in_container"] is True and container["markers"] == [".dockerenv"]
    assert container["ipc_namespace"] == "ipc:[4026531839]"
    assert container["host_ipc_namespace"] is True


def test_iommu_absent_on_this_machine() -> None:
    iommu = iommu_facts(["0000:00:01.0"], CPU_HOST)
    assert iommu["cmdline"] == {}  # the command line after " -- " is init's, not the kernel's
    assert iommu["units"] == []
    assert iommu["gpus"]["0000:00:01.0"] == {"group": None, "type": None}


def test_acs_parsed_from_real_configuration_space() -> None:
    bridge = (CPU_HOST / "sys/devices/pci0000:00/0000:00:00.0/config").read_bytes()
    assert len(bridge) == 4096
    assert parse_acs(bridge) == {"readable": True, "bridge": False, "acs": False, "extended_capabilities": []}
    conventional = parse_acs((CPU_HOST / "sys/devices/pci0000:00/0000:00:01.0/config").read_bytes())
    assert conventional["readable"] is False and "256 bytes" in conventional["why"]
    facts = acs_facts(["0000:00:01.0", "0000:00:09.0"], CPU_HOST)
    assert facts["paths"] == {"0000:00:01.0": [], "0000:00:09.0": None}  # straight on the root bus; absent


def test_switch_env_keeps_only_the_known_switches() -> None:
    env = {"NCCL_P2P_DISABLE": "1", "VLLM_API_KEY": "secret", "NCCL_DEBUG": "INFO", "VLLM_SKIP_P2P_CHECK": "0"}
    assert switch_env(env) == {"NCCL_P2P_DISABLE": "1", "VLLM_SKIP_P2P_CHECK": "0"}


def test_nvml_bus_id_as_sysfs_names_it() -> None:
    assert sysfs_bdf("00000000:1B:00.0") == "0000:1b:00.0"
    assert sysfs_bdf("0000:C1:00.0") == "0000:c1:00.0"


def test_vllm_shm_need_follows_its_ring_buffers() -> None:
    assert vllm_shm_need(1) == 0
    # (16 MiB + 3) x 10 + 2 x (24 MiB + 2) x 10 + (4 MiB + 2) x 6
    assert vllm_shm_need(2) == (16 * 2**20 + 3) * 10 + 2 * (24 * 2**20 + 2) * 10 + (4 * 2**20 + 2) * 6


def test_group_size_from_the_serve_command_else_visible_gpus() -> None:
    gpu = {"devices": [{"index": 0}, {"index": 1}], "environ": {"CUDA_VISIBLE_DEVICES": None}}
    given = ServeArgs.from_json({"given": True, "fields": {"tensor_parallel_size": 2}})
    assert group_size(given, Gpu.from_json(gpu)) == (2, "serve command")
    assert group_size(ServeArgs(given=False), Gpu.from_json(gpu)) == (2, "visible GPUs")
    assert group_size(ServeArgs(given=False), Gpu.from_json({**gpu, "environ": {"CUDA_VISIBLE_DEVICES": "1"}})) == \
        (1, "visible GPUs")
    assert group_size(None, None) == (1, "visible GPUs")  # neither section collected


# ------------------------------------------------------------------------------------------ the real CLI


def test_fabric_on_a_machine_without_gpu_skips_and_records_the_host(doctor: Doctor) -> None:
    report, proc = doctor.report("--only", "fabric")
    check = next(c for c in report["checks"] if c["id"] == "fabric")
    assert check["status"] == "skip", proc.stdout
    assert check["findings"][0]["id"] == "fabric.skipped"
    assert check["facts"]["fabric"]["host"]["shm"]["total_bytes"] > 0
    assert_has_its_shape("fabric", check["facts"]["fabric"], "this machine's fabric facts")
    report, _ = doctor.report("--only", "fabric", "--no-gpu")
    check = next(c for c in report["checks"] if c["id"] == "fabric")
    assert check["findings"][0]["id"] == "doctor.skipped-no-gpu"


# ------------------------------------------------------------------ judgement on facts recorded on an H200

H200 = FIXTURES / "h200-1gpu"


def _recorded(name: str) -> dict[str, Any]:
    report = json.loads((H200 / name).read_text(encoding="utf-8"))
    check: dict[str, Any] = next(c for c in report["checks"] if c["id"] == "fabric")
    return check


def _judged(check: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f.id: f.to_dict() for f in FabricCheck().judge(Facts(check["facts"]))}


def test_h200_one_gpu_nccl_one_rank_passes_and_peer_checks_are_skipped_with_the_reason() -> None:
    check = _recorded("plain.json")
    fabric = check["facts"]["fabric"]
    rank = fabric["nccl"]["p2p"]["ranks"][0]["data"]
    assert rank["checks"][1] == {"bytes": 16 << 20, "expected": 1.0, "mismatched": 0, "first": 1.0}
    assert "p2p_disabled" not in fabric["nccl"]  # no control arm without a pair
    judged = _judged(check)
    assert {f["status"] for f in judged.values()} == {"pass"}
    assert "NCCL 2.28.9 all-reduce over 1 rank(s): 4 B and 16 MiB values right" in judged["fabric.nccl-ok"]["title"]
    assert "TP 1" in judged["fabric.peer-not-needed"]["title"]
    assert judged["fabric.shm"]["evidence"]["container"]["host_ipc_namespace"] is True
    assert judged["fabric.allreduce-choice"]["evidence"]["choice"] == "none"
    # the findings saved with the report are what the judgement gives now
    assert [f["id"] for f in check["findings"]] == list(judged)


def test_h200_recorded_report_judged_again_by_the_cli(doctor: Doctor) -> None:
    proc = doctor("judge", str(H200 / "plain.json"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "fabric.nccl-ok" in proc.stdout or "Multi-GPU fabric" in proc.stdout


def test_h200_tp2_on_one_gpu_warns_that_the_group_is_short_and_judges_no_all_reduce_choice() -> None:
    check = _recorded("serve-tp2.json")
    fabric = check["facts"]["fabric"]
    assert fabric["requested_tp"] == 2 and fabric["tp_source"] == "serve command"
    assert fabric["peer"]["data"]["device_count"] == 1 and fabric["nccl_world"] == 1
    judged = _judged(check)
    assert judged["fabric.group"]["status"] == "warn"
    assert "only 1 GPU(s) visible" in judged["fabric.group"]["title"]
    assert "CUDA sees 1 GPU(s)" in judged["fabric.peer-not-needed"]["title"]
    assert judged["fabric.allreduce-choice"]["evidence"]["choice"] == "not judged"
    # vLLM at TP 2 maps (16 MiB + 3) x 10 + 2 x (24 MiB + 2) x 10 + (4 MiB + 2) x 6 bytes of /dev/shm
    assert judged["fabric.shm"]["evidence"]["need_bytes"] == vllm_shm_need(2)
    assert "664 MiB" in judged["fabric.shm"]["title"]


def test_h200_host_files_read_by_the_host_readers(tmp_path: Path) -> None:
    host = H200 / "host"
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/mountinfo").write_bytes((host / "mountinfo").read_bytes())
    (tmp_path / "proc/cmdline").write_bytes((host / "cmdline").read_bytes())
    shm = shm_facts(tmp_path)
    # two /dev/shm mounts are listed; the later one is what the process sees (df -B1: 137438953472)
    assert shm["mount"]["size_option"] == "134217728k" and shm["total_bytes"] == 137438953472
    assert "137438953472" in (host / "df_dev_shm.txt").read_text()
    assert iommu_facts([], tmp_path)["cmdline"] == {}  # pci=realloc=off is not an IOMMU setting
    gpu = parse_acs((host / "pci/0000:00:06.0/config").read_bytes())
    # the H200's own extended capabilities: null, LTR, null, AER, ..., vendor-specific, power budgeting, serial
    assert gpu["readable"] and not gpu["bridge"] and gpu["acs"] is False
    assert gpu["extended_capabilities"][:4] == [0x0000, 0x0018, 0x0000, 0x0001]
    assert gpu["extended_capabilities"][-3:] == [0x000B, 0x0004, 0x0003]


def test_a_rank_that_does_not_finish_is_killed_at_the_timeout_and_judged_a_hang(tmp_path: Path) -> None:
    """Real rank processes in a venv with torch (2.13.0, CPU), given 0.3 s: `import torch` alone takes longer,
    so each is killed at the timeout, as a rank stuck in NCCL would be; the H200's facts carry the arm."""
    from realenv import fa2_builder_python

    from dflash_doctor.check import Context
    from dflash_doctor.checks.fabric.nccl import summarize
    from dflash_doctor.facts.fabric.fabric import nccl_arm
    from dflash_doctor.facts.fabric.fabric_shapes import NcclArm

    ctx = Context(python=str(fa2_builder_python()), cwd=str(tmp_path), timeout_s=0.3)
    arm = nccl_arm(ctx, 2, {"PATH": "/usr/bin:/bin", "NCCL_NVLS_ENABLE": "0"})
    assert [r["run"]["timed_out"] for r in arm["ranks"]] == [True, True]
    summed = summarize(NcclArm.from_json(arm))
    assert summed.ok is False and summed.hung_ranks == [0, 1]
    assert summed.what.startswith("hung: rank(s) 0, 1 killed at the timeout")
    check = _recorded("plain.json")
    check["facts"]["fabric"]["nccl"] = {"p2p": arm}
    assert_has_its_shape("fabric", check["facts"]["fabric"], "a hung arm")  # every key the collector wrote is declared
    judged = _judged(check)
    assert judged["fabric.nccl-failed"]["status"] == "fail"
    assert "hung: rank(s) 0, 1 killed at the timeout" in judged["fabric.nccl-failed"]["title"]


def test_the_ranks_forked_from_the_shared_target_process_start_nccl_with_their_arms_variables(tmp_path: Path) -> None:
    """On a GPU run the ranks are forked from the run's one target process, which imported torch once (the
    H200's critical path had a second `import torch` for them); that process has the doctor's environment, so
    each rank sets its arm's NCCL variables itself before NCCL starts. Real: torch 2.13.0 (CPU) in a venv."""
    from realenv import fa2_builder_python

    from dflash_doctor.check import Context
    from dflash_doctor.facts.fabric.fabric import nccl_arm
    from dflash_doctor.facts.probes import SharedTargetProcess

    python = str(fa2_builder_python())
    with SharedTargetProcess(python, preload=("torch",), timeout_s=120.0, cwd=str(tmp_path),
                             parallel=2) as target_process:
        ctx = Context(python=python, cwd=str(tmp_path), timeout_s=120.0, target_process=target_process)
        arm = nccl_arm(ctx, 2, {"PATH": "/usr/bin:/bin", "NCCL_NVLS_ENABLE": "0", "NCCL_P2P_DISABLE": "1"})
        shared = target_process.facts()
    assert shared["forked"] is True and shared["jobs"] == 2  # both ranks were the shared process's children
    assert [r["data"]["rank"] for r in arm["ranks"]] == [0, 1]
    for rank in arm["ranks"]:
        assert rank["data"]["env"]["NCCL_P2P_DISABLE"] == "1" and rank["data"]["env"]["NCCL_NVLS_ENABLE"] == "0"
        assert rank["data"]["torch"].startswith("2.13.0")
        assert rank["data"]["ok"] is False and rank["data"]["stage"] == "init"  # a CPU build has no CUDA device


# ------------------------------------------------------------------ the knowledge, against vLLM's own source


@pytest.mark.parametrize("version", ["0.18.0", "0.20.1", "0.24.0"])
def test_custom_all_reduce_rules_and_p2p_check_default_are_vllms(version: str) -> None:
    """Network on a cold cache (the vLLM sdist from PyPI); then file reads only."""
    import ast

    from vllm_sources import vllm_source

    from dflash_doctor.knowledge.fabric import CUSTOM_ALL_REDUCE_RULES, VLLM_SKIP_P2P_CHECK_DEFAULT

    root = vllm_source(version)
    car = ast.parse((root / "distributed/device_communicators/custom_all_reduce.py").read_text(encoding="utf-8"))
    sizes = next(ast.literal_eval(n.value) for n in ast.walk(car) if isinstance(n, ast.Assign)
                 and any(getattr(t, "id", None) == "_SUPPORTED_WORLD_SIZES" for t in n.targets))
    assert tuple(sizes) == CUSTOM_ALL_REDUCE_RULES.value["world_sizes"]
    source = (root / "distributed/device_communicators/custom_all_reduce.py").read_text(encoding="utf-8")
    assert "if world_size > 2 and not fully_connected:" in source
    envs = (root / "envs.py").read_text(encoding="utf-8")
    assert ('"VLLM_SKIP_P2P_CHECK": lambda: os.getenv("VLLM_SKIP_P2P_CHECK", "1") == "1"' in envs) \
        is VLLM_SKIP_P2P_CHECK_DEFAULT.value


def test_shm_ring_sizes_are_vllm_0_24s() -> None:
    from vllm_sources import vllm_source

    root = vllm_source("0.24.0")
    shm = (root / "distributed/device_communicators/shm_broadcast.py").read_text(encoding="utf-8")
    assert "max_chunk_bytes: int = 1024 * 1024 * 24," in shm and "max_chunks: int = 10," in shm
    assert "self.max_chunk_bytes + self.metadata_size\n        ) * self.max_chunks" in shm
    assert "self.cpu_group, 1 << 22, 6" in (root / "distributed/parallel_state.py").read_text(encoding="utf-8")
    assert 'os.getenv("VLLM_MQ_MAX_CHUNK_BYTES_MB", "16")' in (root / "envs.py").read_text(encoding="utf-8")
    assert "self.worker_response_mq = MessageQueue(1, 1)" in \
        (root / "v1/executor/multiproc_executor.py").read_text(encoding="utf-8")


def _geforce_pair(check: dict[str, Any], *, names: tuple[str, str] = ("NVIDIA GeForce RTX 3090 Ti", "NVIDIA GeForce RTX 3090"),
                  cc: list[int] | None = None, nvlinks: int = 0) -> dict[str, Any]:
    """DERIVED from the H200's serve-tp2 recording (one GPU, TP 2): a second GPU and the pair between them swapped in,
    as NVML and the peer probe report a patched-driver RTX 3090 pair (club-3090 #1332: Gen4 x8 on separate root
    ports, peer access granted both ways, copies intact). No GeForce pair was recorded; everything else is the H200's."""
    facts = copy.deepcopy(check["facts"])
    gpu, fabric = facts["gpu"], facts["fabric"]
    template = gpu["devices"][0]
    gpu["devices"] = [{**template, "index": i, "name": names[i], "compute_capability": cc or [8, 6],
                       "uuid": f"{template['uuid'][:-1]}{i}", "pci_bus_id": f"00000000:0{i + 1}:00.0"} for i in (0, 1)]
    gpu["device_count"] = 2
    nvml_device = fabric["nvml"]["devices"][0]
    fabric["nvml"]["devices"] = [{**nvml_device, "index": i, "pci_bus_id": f"00000000:0{i + 1}:00.0",
                                  "pcie": {**nvml_device["pcie"], "gen_now": 4, "gen_max": 4, "width_now": 8,
                                           "width_max": 8}} for i in (0, 1)]
    fabric["nvml"]["pairs"] = [{"gpus": [0, 1], "topology": "host bridge", "nvlinks": nvlinks, "nvlink_version": None,
                                "p2p": {"read": "ok", "write": "ok", "nvlink": "not_supported", "atomics": "ok"},
                                "errors": {}}]
    fabric["peer"]["data"].update(device_count=2, world=2, pairs=[
        {"src": s, "dst": d, "can_access_peer": True, "bytes": 64 << 20, "mismatched_on_dst": 0,
         "mismatched_back": 0, "verified": True, "seconds": 0.02} for s, d in ((0, 1), (1, 0))])
    return facts


def test_custom_all_reduce_over_a_geforce_pcie_peer_path_warns_with_the_reported_fix() -> None:
    check = _recorded("serve-tp2.json")
    judged = {f.id: f.to_dict() for f in FabricCheck().judge(Facts(_geforce_pair(check)))}
    assert judged["fabric.allreduce-choice"]["evidence"]["choice"].startswith("vLLM's custom all-reduce")
    warn = judged["fabric.custom-allreduce-geforce-p2p"]
    assert warn["status"] == "warn"
    assert warn["title"].startswith("vLLM's custom all-reduce over a patched-driver PCIe peer path between GeForce "
                                    "cards hard-resets the host")
    assert "TP 2 over NVIDIA GeForce RTX 3090, NVIDIA GeForce RTX 3090 Ti (sm_86)" in warn["title"]
    assert "noonghunna/club-3090 #1332" in warn["detail"]
    assert warn["remediation"][0]["command"] == "vllm serve /models/none --tensor-parallel-size 2 " \
                                                "--disable-custom-all-reduce"
    facts = _geforce_pair(check)
    facts["serve_args"]["argv"] = [*facts["serve_args"]["argv"], "--disable-custom-all-reduce"]
    assert "fabric.custom-allreduce-geforce-p2p" not in {f.id for f in FabricCheck().judge(Facts(facts))}


@pytest.mark.parametrize("variant", ["workstation", "nvlink", "other-arch"])
def test_no_geforce_peer_path_warning_for_cards_or_links_it_was_not_reported_on(variant: str) -> None:
    check = _recorded("serve-tp2.json")
    facts = _geforce_pair(check, **{  # type: ignore[arg-type]
        "workstation": {"names": ("NVIDIA RTX A6000", "NVIDIA RTX A6000")},  # peer access is the stock driver's
        "nvlink": {"nvlinks": 4},  # an NVLink bridge, not the patched PCIe path
        "other-arch": {"cc": [8, 9]},  # Ada: not among the reports
    }[variant])
    assert "fabric.custom-allreduce-geforce-p2p" not in {f.id for f in FabricCheck().judge(Facts(facts))}
