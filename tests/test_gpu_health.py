"""GPU and host health (issue 24): NVML's throttle reasons, power limits, temperature, PCIe link and ECC
counts, and the host's open-file and locked-memory limits, judged by knowledge.health.

The judged facts are the H200's (fixtures/gpu/h200-facts.json, recorded before the doctor read health) with
health values added by `health()` below: each is labelled "derived: degraded values for the test, not
recorded" where it is degraded, and "derived: neutral values, not recorded" for the healthy reading. The
host limits and the transparent huge page mode are read for real, on this machine and in a child process
whose hard limit the test lowers; NVML itself is faked only where this machine has no GPU (a stand-in
pynvml module whose device answers as a GPU would, to check the collector's calls and shapes).
"""

from __future__ import annotations

import copy
import importlib
import json
import os
import resource
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from dflash_doctor.check import Context
from dflash_doctor.checks.gpu import GpuCheck
from dflash_doctor.checks.gpu.devices import machine_limits_finding, reason_names
from dflash_doctor.registry import CODES
from dflash_doctor.facts.gpu import nvml
from dflash_doctor.facts.gpu.nvml_shapes import Gpu, MachineLimits
from dflash_doctor.model import CheckResult, Finding, Status
from dflash_doctor.runner import judge

ROOT = Path(__file__).resolve().parent.parent
GPU_FIXTURES = ROOT / "fixtures" / "gpu"
NEW_IDS = {"gpu.throttled", "gpu.power-capped", "gpu.pcie-link-degraded", "gpu.host-limits"}

# Derived: neutral values, not recorded (an idle GPU at its default limit on a full-width link). The
# recorded H200's own values replace these once fixtures/gpu/h200-health.json is recorded.
NEUTRAL = {
    "clock_event_reasons": 0x1,  # GpuIdle
    "power": {"limit_mw": 700000, "default_limit_mw": 700000, "enforced_limit_mw": 700000},
    "temperature": {"gpu_c": 30, "slowdown_c": 87, "shutdown_c": 92},
    "pcie": {"generation": 1, "max_generation": 5, "gpu_max_generation": 5, "width": 16, "max_width": 16,
             "replay_counter": 0},
    "nvlinks": [],
}


def h200() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((GPU_FIXTURES / "h200-facts.json").read_text())
    assert doc["label"].startswith("recorded on a real H200")
    return copy.deepcopy(doc["sections"])


def health(sections: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """The H200's sections with neutral health values on its GPU, then `changes` (degraded values, each
    labelled by its test); a `limits` change goes to the host."""
    device = sections["gpu"]["devices"][0]
    device.update(copy.deepcopy(NEUTRAL))
    limits = changes.pop("limits", None)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(device.get(key), dict):
            device[key].update(value)
        else:
            device[key] = value
    if limits is not None:
        sections["gpu"]["host"]["limits"] = limits
    return sections


def gpu_result(sections: dict[str, Any]) -> CheckResult:
    results = judge([GpuCheck()], {k: v for k, v in sections.items() if k in ("gpu", "distributions")},
                    Context(python="python3", cwd="."))
    for finding in results[0].findings:
        assert finding.id in CODES, finding.id
    return results[0]


def ids(result: CheckResult) -> list[str]:
    return [f.id for f in result.findings]


def one(result: CheckResult, finding_id: str) -> Finding:
    found = [f for f in result.findings if f.id == finding_id]
    assert len(found) == 1, f"{finding_id} in {ids(result)}"
    return found[0]


# ------------------------------------------------------------------------ older recordings judge as before


def test_recordings_without_health_fields_load_and_judge_as_before() -> None:
    cold = json.loads((ROOT / "fixtures" / "h200" / "report-cold.json").read_text())
    recorded_gpu = next(c for c in cold["checks"] if c["id"] == "gpu")
    for sections in (h200(), recorded_gpu["facts"]):
        gpu = Gpu.from_json(sections["gpu"])
        device = gpu.devices[0]
        assert (device.clock_event_reasons, device.power, device.temperature, device.pcie, device.nvlinks) == (
            None, None, None, None, [])
        assert gpu.host is not None and gpu.host.limits is None and device.ecc is not None
        assert device.ecc.aggregate_uncorrected is None
        result = gpu_result(sections)
        assert result.status is Status.PASS and not NEW_IDS & set(ids(result))
    assert [f["id"] for f in recorded_gpu["findings"]] == ids(gpu_result(recorded_gpu["facts"]))


def test_every_saved_h200_report_judges_its_gpu_facts_as_it_recorded_them() -> None:
    reports = sorted((ROOT / "fixtures" / "h200").glob("report-*.json"))
    assert len(reports) >= 5
    for path in reports:
        saved = next((c for c in json.loads(path.read_text())["checks"] if c["id"] == "gpu"), None)
        if saved is None or "gpu" not in saved["facts"]:
            continue
        again = gpu_result(saved["facts"])
        assert [(f["id"], f["status"]) for f in saved["findings"]] == [
            (f.id, f.status.value) for f in again.findings], path.name


def test_neutral_health_values_pass_and_are_in_the_summary_evidence() -> None:
    result = gpu_result(health(h200()))
    assert result.status is Status.PASS and ids(result) == ["gpu.ok"]
    device = one(result, "gpu.ok").evidence["devices"][0]
    assert device["clock_event_reasons"] == ["GpuIdle"]
    assert device["pcie"]["width"] == 16 and device["power"]["default_limit_mw"] == 700000


@pytest.mark.skipif(not (GPU_FIXTURES / "h200-health.json").exists(),
                    reason="not recorded yet: `python3 -m dflash_doctor --only gpu --json OUT.json` on the H200")
def test_recorded_h200_health_facts_judge_healthy() -> None:
    doc = json.loads((GPU_FIXTURES / "h200-health.json").read_text())
    gpu = next(c for c in doc["checks"] if c["id"] == "gpu")
    facts = Gpu.from_json(gpu["facts"]["gpu"])
    assert facts.host is not None and facts.host.limits is not None and facts.host.limits.nofile is not None
    for device in facts.devices:
        # each reading is there, or NVML said why not (unsupported on this GPU, or its error)
        named = set(device.unsupported) | set(device.errors)
        assert device.clock_event_reasons is not None or "clock_event_reasons" in named
        assert device.power is not None or {"power_limit", "power_default_limit"} <= named
        assert device.temperature is not None or "temperature" in named
        assert device.pcie is not None or {"pcie_width", "pcie_max_width"} <= named
    result = gpu_result(gpu["facts"])
    assert not {"gpu.throttled", "gpu.power-capped", "gpu.pcie-link-degraded"} & set(ids(result))


# ------------------------------------------------------------------------------ each finding, degraded


def test_thermal_and_hardware_slowdown_reasons_warn_naming_them() -> None:
    # derived: degraded values for the test, not recorded: HW slowdown and SW thermal slowdown active
    result = gpu_result(health(h200(), clock_event_reasons=0x1 | 0x8 | 0x20))
    throttled = one(result, "gpu.throttled")
    assert throttled.status is Status.WARN and result.status is Status.WARN
    assert "clocks held down: HwSlowdown, SwThermalSlowdown" in throttled.title
    assert "GpuIdle" not in throttled.title and "factor of 2" in throttled.detail
    assert throttled.evidence["reasons"] == ["GpuIdle", "HwSlowdown", "SwThermalSlowdown"]


def test_settings_reasons_alone_do_not_warn() -> None:
    # derived: idle, applications clocks, sync boost and display clocks: settings, not faults
    result = gpu_result(health(h200(), clock_event_reasons=0x1 | 0x2 | 0x10 | 0x100))
    assert "gpu.throttled" not in ids(result)


def test_a_gpu_at_its_slowdown_temperature_warns() -> None:
    # derived: degraded values for the test, not recorded: 87 C with an 87 C slowdown threshold
    result = gpu_result(health(h200(), temperature={"gpu_c": 87}))
    assert "87 C, at or above its slowdown threshold 87 C" in one(result, "gpu.throttled").title
    assert "gpu.throttled" not in ids(gpu_result(health(h200(), temperature={"gpu_c": 86})))


def test_a_power_limit_below_the_default_warns_with_the_restore_command() -> None:
    # derived: degraded values for the test, not recorded: limit set to 500 W of a 700 W default
    result = gpu_result(health(h200(), power={"limit_mw": 500000, "enforced_limit_mw": 500000}))
    capped = one(result, "gpu.power-capped")
    assert capped.status is Status.WARN
    assert capped.title == ("GPU 0 (NVIDIA H200): power limit set to 500 W, below the board's default 700 W: "
                            "clocks are held lower under load")
    assert capped.remediation[0].command == "sudo nvidia-smi -i 0 -pl 700"
    # derived: the driver enforcing less than the limit set (a system power limiter)
    enforced = one(gpu_result(health(h200(), power={"enforced_limit_mw": 600000})), "gpu.power-capped")
    assert "enforced to 600 W" in enforced.title


def test_an_x8_link_and_an_older_slot_warn_but_an_idle_gen1_link_does_not() -> None:
    # derived: degraded values for the test, not recorded: trained x8 of x16, Gen3 slot for a Gen5 GPU
    result = gpu_result(health(h200(), pcie={"width": 8, "max_generation": 3, "generation": 3}))
    degraded = one(result, "gpu.pcie-link-degraded")
    assert degraded.status is Status.WARN
    assert "link x8 where x16 is possible; the slot allows PCIe Gen3, the GPU Gen5" in degraded.title
    assert "idle" in degraded.detail
    # an idle GPU at Gen1 on a Gen5 link is NVML's power saving: not judged
    assert "gpu.pcie-link-degraded" not in ids(gpu_result(health(h200(), pcie={"generation": 1})))


def test_volatile_uncorrected_ecc_fails_and_a_lifetime_count_alone_does_not() -> None:
    # derived: degraded values for the test, not recorded: 2 uncorrected errors since the driver loaded
    result = gpu_result(health(h200(), ecc={"volatile_uncorrected": 2, "aggregate_uncorrected": 5}))
    ecc = one(result, "gpu.ecc-uncorrected")
    assert ecc.status is Status.FAIL and result.status is Status.FAIL
    assert ecc.title.endswith("2 uncorrected ECC error(s) since the driver loaded (5 over the GPU's lifetime)")
    assert ecc.remediation[0].command == "sudo nvidia-smi -r -i 0"
    # derived: errors in the GPU's past only (volatile 0): recorded, not judged
    assert "gpu.ecc-uncorrected" not in ids(gpu_result(health(h200(), ecc={"aggregate_uncorrected": 5})))


def test_pending_row_remap_fails_alongside_the_health_findings() -> None:
    # derived: degraded values for the test, not recorded: a row remap pending and a power cap together
    result = gpu_result(health(h200(), remapped_rows={"uncorrectable": 1, "pending": True},
                               power={"limit_mw": 400000}))
    assert one(result, "gpu.reset-pending").status is Status.FAIL
    assert one(result, "gpu.power-capped").status is Status.WARN


def test_reason_names_keep_unknown_bits() -> None:
    assert reason_names(0) == []
    assert reason_names(0x4 | 0x400) == ["SwPowerCap", "0x400"]


# ---------------------------------------------------------------------------------------- host limits


def test_machine_limits_are_read_for_real_on_this_machine() -> None:
    limits = MachineLimits.from_json(nvml.machine_limits())
    for name, which in (("nofile", resource.RLIMIT_NOFILE), ("memlock", resource.RLIMIT_MEMLOCK)):
        soft, hard = resource.getrlimit(which)
        expected = [-1 if v == resource.RLIM_INFINITY else v for v in (soft, hard)]
        got = getattr(limits, name)
        assert [got.soft, got.hard] == expected, name
    thp = Path(nvml.THP_ENABLED)
    if thp.exists():
        text = thp.read_text()
        assert limits.transparent_hugepage == text[text.index("[") + 1:text.index("]")]
    else:
        assert limits.transparent_hugepage is None and "transparent_hugepage" in limits.errors


CHILD = ("import json, resource, sys; resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 4096)); "
         "from dflash_doctor.facts.gpu import nvml; print(json.dumps(nvml.nvml_facts()['host']['limits']))")


def test_a_hard_open_file_limit_below_vllms_warns_in_a_real_child() -> None:
    # The limits a real process with `ulimit -Hn 4096` reads, judged with the H200's recording (derived:
    # this host's limits spliced into it, not recorded on the H200).
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if 0 <= hard < 4096:
        pytest.skip(f"this machine's hard open-file limit is {hard}, below the 4096 the test sets")
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    limits = json.loads(out.stdout)
    assert limits["nofile"] == {"soft": 1024, "hard": 4096}
    result = gpu_result(health(h200(), limits=limits))
    finding = one(result, "gpu.host-limits")
    assert finding.status is Status.WARN and result.status is Status.WARN
    assert finding.title.startswith("the hard open-file limit 4096 is below the 65535 vLLM raises its soft "
                                    "limit to")
    assert finding.remediation[0].command == "ulimit -Hn 65535; ulimit -n 65535"


def test_a_soft_limit_vllm_can_raise_passes_and_memlock_is_reported_not_judged() -> None:
    # derived: a soft limit of 1024 under an unlimited hard one, memlock 8 MiB (a container's default)
    limits = {"nofile": {"soft": 1024, "hard": -1}, "memlock": {"soft": 8 << 20, "hard": 8 << 20},
              "transparent_hugepage": "madvise", "errors": {}}
    finding = machine_limits_finding(MachineLimits.from_json(limits))
    assert finding.status is Status.PASS
    assert finding.title == ("host limits: open files 1024 (hard unlimited), locked memory 8 (hard 8) MiB, "
                             "transparent huge pages madvise")
    assert "InfiniBand" in finding.detail
    unlimited = dict(limits, memlock={"soft": -1, "hard": -1})
    assert "InfiniBand" not in machine_limits_finding(MachineLimits.from_json(unlimited)).detail


def test_thp_mode_is_read_only_from_a_bounded_regular_file(tmp_path: Path) -> None:
    regular = tmp_path / "enabled"
    regular.write_text("always [madvise] never\n")
    assert nvml.machine_limits(str(regular))["transparent_hugepage"] == "madvise"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # a FIFO with no writer: opening it for a blocking read would hang
    limits = nvml.machine_limits(str(fifo))
    assert limits["transparent_hugepage"] is None
    assert limits["errors"]["transparent_hugepage"] == f"{fifo}: not a regular file: never read"
    huge = tmp_path / "huge"
    huge.write_text(" " * nvml.THP_READ_LIMIT + "[always]")  # the mode past the bound is not read
    assert nvml.machine_limits(str(huge))["transparent_hugepage"] is None
    missing = nvml.machine_limits(str(tmp_path / "absent"))
    assert missing["transparent_hugepage"] is None and "No such file" in missing["errors"]["transparent_hugepage"]


# ------------------------------------------------------------------------------------- the collector


def test_the_real_collector_without_a_driver_gives_facts_with_host_limits() -> None:
    facts = nvml.nvml_facts(timeout_s=20)
    gpu = Gpu.from_json(facts)
    if gpu.nvml is not None and gpu.nvml.ok:
        pytest.skip("this machine has a working NVIDIA driver")
    assert gpu.nvml is not None and gpu.nvml.error is not None and gpu.devices == []
    assert gpu.host is not None and gpu.host.limits is not None and gpu.host.limits.nofile is not None


def test_the_gpu_only_json_report_carries_the_host_limits(tmp_path: Path) -> None:
    out = tmp_path / "gpu.json"
    run = subprocess.run([sys.executable, "-m", "dflash_doctor", "--only", "gpu", "--json", str(out)],
                         check=False, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)},
                         cwd=tmp_path)
    assert run.returncode in (0, 1), run.stderr
    report = json.loads(out.read_text())
    gpu = next(c for c in report["checks"] if c["id"] == "gpu")
    limits = gpu["facts"]["gpu"]["host"]["limits"]
    assert set(limits) >= {"nofile", "memlock", "transparent_hugepage", "errors"}


class _FakeNvml:
    """Stands in for pynvml on a machine without a GPU: the real module's constants and NVMLError, and one
    device that answers the health queries as an NVLink-less PCIe GPU would (NVLink unsupported)."""

    def __init__(self) -> None:
        self.real = importlib.import_module("pynvml")  # untyped, as facts.gpu.nvml loads it

    def module(self) -> types.SimpleNamespace:
        real = self.real
        names = {n: getattr(real, n) for n in dir(real) if n.startswith(("NVML_", "nvmlClocks", "NVMLError",
                                                                          "nvmlMemory"))}
        fake = types.SimpleNamespace(**names)

        def unsupported(*_: Any, **__: Any) -> Any:
            raise real.NVMLError(real.NVML_ERROR_NOT_SUPPORTED)

        answers: dict[str, Any] = {
            "nvmlSystemGetCudaDriverVersion_v2": lambda: 13000,
            "nvmlDeviceGetCount": lambda: 1,
            "nvmlSystemGetNVMLVersion": lambda: "13.580.159.04",
            "nvmlSystemGetDriverVersion": lambda: "580.159.04",
            "nvmlDeviceGetHandleByIndex": lambda i: ("handle", i),
            "nvmlDeviceGetName": lambda h: "NVIDIA H200",
            "nvmlDeviceGetUUID": lambda h: "GPU-00000000-0000-0000-0000-000000000000",
            "nvmlDeviceGetPciInfo": unsupported,
            "nvmlDeviceGetCudaComputeCapability": lambda h: (9, 0),
            "nvmlDeviceGetMemoryInfo": unsupported,
            "nvmlDeviceGetPersistenceMode": lambda h: real.NVML_FEATURE_ENABLED,
            "nvmlDeviceGetMigMode": unsupported,
            "nvmlDeviceGetEccMode": lambda h: (real.NVML_FEATURE_ENABLED, real.NVML_FEATURE_ENABLED),
            "nvmlDeviceGetTotalEccErrors": lambda h, kind, counter: 0 if counter == real.NVML_VOLATILE_ECC else 3,
            "nvmlDeviceGetRetiredPagesPendingStatus": unsupported,
            "nvmlDeviceGetRemappedRows": lambda h: (0, 0, 0, 0),
            "nvmlDeviceGetCurrentClocksEventReasons": lambda h: 0x1 | 0x4,
            "nvmlDeviceGetPowerManagementLimit": lambda h: 700000,
            "nvmlDeviceGetPowerManagementDefaultLimit": lambda h: 700000,
            "nvmlDeviceGetEnforcedPowerLimit": lambda h: 700000,
            "nvmlDeviceGetTemperature": lambda h, sensor: 31 if sensor == real.NVML_TEMPERATURE_GPU else None,
            "nvmlDeviceGetTemperatureThreshold": lambda h, which: {
                real.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN: 87, real.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN: 92}[which],
            "nvmlDeviceGetCurrPcieLinkGeneration": lambda h: 1,
            "nvmlDeviceGetMaxPcieLinkGeneration": lambda h: 5,
            "nvmlDeviceGetGpuMaxPcieLinkGeneration": lambda h: 5,
            "nvmlDeviceGetCurrPcieLinkWidth": lambda h: 16,
            "nvmlDeviceGetMaxPcieLinkWidth": lambda h: 16,
            "nvmlDeviceGetPcieReplayCounter": unsupported,
            "nvmlDeviceGetNvLinkState": unsupported,
            "nvmlDeviceGetNvLinkErrorCounter": unsupported,
            "nvmlDeviceGetComputeRunningProcesses": lambda h: [],
            "nvmlDeviceGetGraphicsRunningProcesses": lambda h: [],
        }
        for name, function in answers.items():
            setattr(fake, name, function)
        return fake


def test_the_collector_puts_each_health_reading_into_the_shape() -> None:
    # Fake GPU hardware (no GPU here): the collector's calls and the shapes its facts load into.
    facts = nvml._gather_initialized(_FakeNvml().module())
    device = Gpu.from_json({**facts, "host": nvml._machine_facts()}).devices[0]
    assert device.clock_event_reasons == 0x5
    assert device.power is not None and device.power.to_json() == {
        "limit_mw": 700000, "default_limit_mw": 700000, "enforced_limit_mw": 700000}
    assert device.temperature is not None and device.temperature.to_json() == {
        "gpu_c": 31, "slowdown_c": 87, "shutdown_c": 92}
    assert device.pcie is not None and device.pcie.to_json() == {
        "generation": 1, "max_generation": 5, "gpu_max_generation": 5, "width": 16, "max_width": 16,
        "replay_counter": None}
    assert device.ecc is not None and (device.ecc.volatile_uncorrected, device.ecc.aggregate_uncorrected) == (0, 3)
    assert device.nvlinks == []
    assert {"pcie_replay_counter", "nvlink_state", "retired_pages_pending"} <= set(device.unsupported)
    assert device.errors == {}
    # an idle GPU with SwPowerCap set at that moment warns; nothing else does
    sections = {"gpu": {**facts, "host": nvml._machine_facts(), "environ": {}}}
    result = gpu_result(sections)
    assert {i for i in ids(result) if i in NEW_IDS - {"gpu.host-limits"}} == {"gpu.throttled"}


def test_nvlinks_are_listed_up_to_the_last_with_counters_for_active_ones() -> None:
    # Fake GPU hardware: link 0 active, link 1 absent on this SKU, link 2 down, link 3 past the last.
    fake = _FakeNvml()
    real = fake.real
    module = fake.module()

    def state(_: Any, link: int) -> int:
        if link == 1:
            raise real.NVMLError(real.NVML_ERROR_NOT_SUPPORTED)
        if link >= 3:
            raise real.NVMLError(real.NVML_ERROR_INVALID_ARGUMENT)
        return int(real.NVML_FEATURE_ENABLED if link == 0 else real.NVML_FEATURE_DISABLED)

    module.nvmlDeviceGetNvLinkState = state
    module.nvmlDeviceGetNvLinkErrorCounter = lambda h, link, counter: 7 if counter == real.NVML_NVLINK_ERROR_DL_REPLAY else 0
    device = Gpu.from_json(nvml._gather_initialized(module)).devices[0]
    assert [link.to_json() for link in device.nvlinks] == [
        {"link": 0, "active": True, "replay": 7, "recovery": 0, "crc_flit": 0, "crc_data": 0},
        {"link": 2, "active": False, "replay": None, "recovery": None, "crc_flit": None, "crc_data": None}]
    assert "nvlink_state" not in device.unsupported and device.errors == {}
