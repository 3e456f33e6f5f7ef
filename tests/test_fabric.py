"""The fabric check: host readers on real /proc and /sys files copied from real machines, and judgement on
facts recorded on real hardware (each fixture directory's SOURCE.md says where)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dflash_doctor.check import Facts
from dflash_doctor.checks.fabric import FabricCheck, vllm_shm_need
from dflash_doctor.facts.fabric import group_size
from dflash_doctor.facts.fabric_host import (
    acs_facts,
    container_facts,
    iommu_facts,
    parse_acs,
    shm_facts,
    switch_env,
    sysfs_bdf,
)

from conftest import Doctor

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "fabric"
CPU_HOST = FIXTURES / "cpu-host"


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
    assert parse_acs(bridge) == {"readable": True, "bridge": False, "acs": False}
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
    assert group_size({"given": True, "fields": {"tensor_parallel_size": 2}}, gpu) == (2, "serve command")
    assert group_size({"given": False}, gpu) == (2, "visible GPUs")
    assert group_size({"given": False}, {**gpu, "environ": {"CUDA_VISIBLE_DEVICES": "1"}}) == (1, "visible GPUs")


# ------------------------------------------------------------------------------------------ the real CLI


def test_fabric_on_a_machine_without_gpu_skips_and_records_the_host(doctor: Doctor) -> None:
    report, proc = doctor.report("--only", "fabric")
    check = next(c for c in report["checks"] if c["id"] == "fabric")
    assert check["status"] == "skip", proc.stdout
    assert check["findings"][0]["id"] == "fabric.skipped"
    assert check["facts"]["fabric"]["host"]["shm"]["total_bytes"] > 0
    report, _ = doctor.report("--only", "fabric", "--no-gpu")
    check = next(c for c in report["checks"] if c["id"] == "fabric")
    assert check["findings"][0]["id"] == "doctor.skipped-no-gpu"
