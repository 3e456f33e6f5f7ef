"""GPU and machine health thresholds the gpu check judges NVML's readings by, each with its source.

The rules follow NVIDIA's own: the DCGM health watches (modules/health/DcgmHealthWatch.cpp, which fail a GPU
on any volatile double-bit ECC error and warn on thermal and power throttling), DCGM's diagnostic PCIe test
(which fails a link below the expected generation or width) and the NVML API reference for what each
reading means. Where no source gives a number, the fact says so in its note and the check does not judge
by a number of its own.
"""

from __future__ import annotations

from dflash_doctor.knowledge import Fact

__all__ = [
    "CLOCK_EVENT_REASONS",
    "ECC_VOLATILE_UNCORRECTED",
    "MEMLOCK_FOR_RDMA",
    "NOFILE_VLLM",
    "PCIE_LINK",
    "POWER_LIMIT",
    "TEMPERATURE_SLOWDOWN",
    "THROTTLE_REASONS_JUDGED",
    "TRANSPARENT_HUGEPAGE",
    "XID_EVENTS",
]

_NVML = "NVML API reference (docs.nvidia.com/deploy/nvml-api)"
_DCGM_HEALTH = "NVIDIA/DCGM modules/health/DcgmHealthWatch.cpp"

CLOCK_EVENT_REASONS: Fact[tuple[tuple[int, str, str], ...]] = Fact(
    # (bit, NVML name, what it means); the bits are NVML's nvmlClocksEventReason* masks
    value=(
        (0x1, "GpuIdle", "nothing runs on the GPU, clocks drop to idle"),
        (0x2, "ApplicationsClocksSetting", "clocks held at the applications clocks set with nvidia-smi -ac"),
        (0x4, "SwPowerCap", "the power-scaling algorithm holds clocks down to stay within the power limit"),
        (0x8, "HwSlowdown", ("hardware slowdown (core clocks cut by a factor of 2 or more): temperature too "
         "high, an external power brake, or power draw too high")),
        (0x10, "SyncBoost", "the GPU is in a sync-boost group and runs at the group's clocks"),
        (0x20, "SwThermalSlowdown", ("clocks reduced to keep GPU and memory below their maximum operating "
         "temperature")),
        (0x40, "HwThermalSlowdown", ("hardware thermal slowdown (core clocks cut by a factor of 2 or more): "
         "temperature too high")),
        (0x80, "HwPowerBrakeSlowdown", ("hardware power brake (core clocks cut by a factor of 2 or more): "
         "asserted by the system, e.g. its power supply")),
        (0x100, "DisplayClockSetting", "clocks limited by the display clocks setting"),
    ),
    source=f"{_NVML}, group nvmlClocksEventReasons: nvmlClocksEventReasonGpuIdle 0x1 'Nothing is running on the "
    "GPU and the clocks are dropping to Idle state', ApplicationsClocksSetting 0x2, SwPowerCap 0x4 'The clocks "
    "have been optimized to ensure not to exceed currently set power limits', nvmlClocksThrottleReasonHwSlowdown "
    "0x8 'HW Slowdown (reducing the core clocks by a factor of 2 or more) is engaged', SyncBoost 0x10, "
    "SwThermalSlowdown 0x20, HwThermalSlowdown 0x40, HwPowerBrakeSlowdown 0x80, DisplayClockSetting 0x100; DCGM "
    "field constants DCGM_CLOCKS_THROTTLE_REASON_HW_SLOWDOWN: 'an indicator of: temperature being too high, "
    "External Power Brake Assertion is triggered (e.g. by the system power supply), Power draw is too high and "
    "Fast Trigger protection is reducing the clocks'",
    read_from="NVML API reference R550 and current; DCGM 3.1 API field constants; nvidia-ml-py 13.615.71 "
    "(nvmlClocksEventReason* constants)",
)

THROTTLE_REASONS_JUDGED: Fact[int] = Fact(
    value=0x4 | 0x8 | 0x20 | 0x40 | 0x80,
    source=f"{_DCGM_HEALTH}: MonitorThermal sets DCGM_HEALTH_RESULT_WARN with DCGM_FR_CLOCK_THROTTLE_THERMAL "
    "when the thermal violation counter grew, MonitorPower DCGM_FR_CLOCK_THROTTLE_POWER for the power "
    "violation counter; dcgm_errors.cpp gives both DCGM_ERROR_MONITOR severity (watch, not isolate)",
    read_from="NVIDIA/DCGM v4.5.0 (DcgmHealthWatch.cpp, dcgm_errors.cpp)",
    note="So a GPU whose clocks are held down for power (SwPowerCap) or heat (SW/HW thermal, HW slowdown, HW "
    "power brake) is a warning, not a failure. Idle, applications clocks, sync boost and display clocks are "
    "settings, not a fault, and are not judged. The doctor reads the reasons once, at the moment it runs "
    "(usually with the GPU idle), where DCGM watches counters over a minute; SwPowerCap is normal under a "
    "full load and is only worth a look on an idle GPU.",
)

TEMPERATURE_SLOWDOWN: Fact[str] = Fact(
    value="the GPU's own slowdown threshold (NVML_TEMPERATURE_THRESHOLD_SLOWDOWN)",
    source=f"{_NVML}, nvmlDeviceGetTemperatureThreshold: NVML_TEMPERATURE_THRESHOLD_SHUTDOWN 'Temperature at "
    "which the GPU will shut down for HW protection', NVML_TEMPERATURE_THRESHOLD_SLOWDOWN 'Temperature at which "
    "the GPU will begin HW slowdown'; nvmlDeviceGetTemperature(NVML_TEMPERATURE_GPU) the GPU die temperature in "
    "degrees C",
    read_from="NVML API reference (R580); nvidia-ml-py 13.615.71",
    note="No source gives a fixed temperature for all GPUs, so the doctor judges each GPU against the "
    "thresholds the GPU itself reports: at or above its slowdown temperature it is throttling for heat.",
)

POWER_LIMIT: Fact[str] = Fact(
    value="a power management limit below the board's default limit",
    source=f"{_NVML}: nvmlDeviceGetPowerManagementLimit 'the power management limit associated with this "
    "device ... the power limit defines the upper boundary for the card's power draw. If the card's total power "
    "draw reaches this limit the power management algorithm kicks in'; nvmlDeviceGetPowerManagementDefaultLimit "
    "'default power management limit on this device, in milliwatts. Default power management limit is a power "
    "management limit that the device boots with'; nvmlDeviceGetEnforcedPowerLimit 'the effective power limit "
    "that the driver enforces after taking into account all limiters', all in milliwatts",
    read_from="NVML API reference (R580); nvidia-ml-py 13.615.71",
    note="A limit set below the default (`nvidia-smi -pl`, or a lower limit the system enforces) lowers the "
    "clocks under load: decode throughput drops with it. No source sets a tolerance; the doctor warns on any "
    "enforced limit below the default.",
)

PCIE_LINK: Fact[str] = Fact(
    value="a link width below the widest the GPU and slot support, or a slot of an older PCIe generation than "
    "the GPU's",
    source=f"{_NVML}: nvmlDeviceGetMaxPcieLinkWidth 'the maximum PCIe link width possible with this device and "
    "system. I.E. for a device with a 16x PCIe bus width attached to a 8x PCIe system bus this function will "
    "report a max link width of 8'; nvmlDeviceGetMaxPcieLinkGeneration likewise for the generation ('for a "
    "generation 2 PCIe device attached to a generation 1 PCIe bus the max link generation this function will "
    "report is generation 1'); nvmlDeviceGetGpuMaxPcieLinkGeneration 'the maximum PCIe link generation "
    "supported by this device'; nvmlDeviceGetCurrPcieLinkGeneration/Width the link now. DCGM's diagnostic PCIe "
    "test (plugins busgrind) fails a GPU with DCGM_FR_PCIE_GENERATION / DCGM_FR_PCIE_WIDTH ('GPU %u is running "
    "at PCI link width %dX, which is below the minimum allowed') when the link is below the expected generation "
    "or width.",
    read_from="NVML API reference (R580); NVIDIA/DCGM v4.5.0 (nvvs/plugin_src/pcie, dcgm_errors.h)",
    note="The current generation is not judged: GPUs lower their PCIe link speed when idle to save power and "
    "raise it under load, so a preflight reading below the maximum is normal. The width does not change that "
    "way. An x8 slot reports an x8 maximum (the slot's), so NVML cannot tell it from an x8 card; the evidence "
    "shows the widths. Each halving of the link halves host-to-GPU and PCIe peer-to-peer bandwidth (tensor "
    "parallel all-reduce without NVLink).",
)

ECC_VOLATILE_UNCORRECTED: Fact[str] = Fact(
    value="any volatile uncorrected (double-bit) ECC error fails the GPU",
    source=f"{_DCGM_HEALTH} MonitorMem / MonitorVolatileDbes: '// Fail for any volatile DBEs ... if "
    "(sample.val.i64 > 0) ... DCGM_FR_VOLATILE_DBE_DETECTED ... DCGM_HEALTH_RESULT_FAIL, "
    "DCGM_HEALTH_WATCH_MEM'; dcgm_errors.cpp: DCGM_FR_VOLATILE_DBE_DETECTED has DCGM_ERROR_ISOLATE severity, "
    "as do DCGM_FR_PENDING_ROW_REMAP and DCGM_FR_ROW_REMAP_FAILURE. NVML nvmlDeviceGetTotalEccErrors(handle, "
    "NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC | NVML_AGGREGATE_ECC): volatile counts reset at "
    "driver load, aggregate counts persist across reboots.",
    read_from="NVIDIA/DCGM v4.5.0; NVML API reference (R580)",
    note="The aggregate (lifetime) count is recorded but not judged: DCGM's health watch does not judge it "
    "either, and a past error whose memory was since remapped leaves it non-zero on a healthy GPU.",
)

XID_EVENTS: Fact[str] = Fact(
    value="not read",
    source=f"{_NVML}: Xid errors reach NVML only as events (nvmlEventSetCreate, nvmlDeviceRegisterEvents with "
    "nvmlEventTypeXidCriticalError, nvmlEventSetWait), i.e. those that happen after the event set is "
    "registered; NVML keeps no history of earlier Xids.",
    read_from="NVML API reference (R580)",
    note="A one-shot preflight would see none, so the doctor does not read them; `dmesg | grep -i xid` (root) "
    "or DCGM's DCGM_FI_DEV_XID_ERRORS field holds the history.",
)

NOFILE_VLLM: Fact[int] = Fact(
    value=65535,
    source="vllm/utils/system_utils.py set_ulimit(target_soft_limit=65535), called by the API server "
    "(vllm/entrypoints/launchers/launcher.py): when the soft RLIMIT_NOFILE is below 65535 it calls "
    "resource.setrlimit(RLIMIT_NOFILE, (65535, current_hard)); when that fails (hard limit below 65535) it logs "
    "'Found ulimit of %s and failed to automatically increase ... This can cause fd limit errors like "
    "`OSError: [Errno 24] Too many open files`. Consider increasing with ulimit -n'",
    read_from="vllm 0.18.0, 0.22.0 and 0.32.0 sources (vllm/utils/system_utils.py)",
    note="So the soft limit does not matter (vLLM raises it) but a hard limit below 65535 does.",
)

MEMLOCK_FOR_RDMA: Fact[str] = Fact(
    value="unlimited",
    source="RDMA (InfiniBand, RoCE) pins the memory it registers, and the kernel counts pinned memory against "
    "RLIMIT_MEMLOCK: Red Hat Enterprise Linux 7 Networking Guide 13.5.3 'Relaxing memlock restrictions for "
    "users' (RDMA communication needs the computer's physical memory pinned; its example limits.d file sets "
    "'* soft memlock unlimited' and '* hard memlock unlimited'); NGC container command lines for NCCL "
    "workloads pass `--ulimit memlock=-1` (e.g. `docker run --gpus all --shm-size=1g --ulimit memlock=-1 "
    "--ulimit stack=67108864 nvcr.io/nvidia/tensorflow:19.10-py3`)",
    read_from="docs.redhat.com RHEL 7 Networking Guide 13.5.3 (zh-cn page, paraphrased); a published NGC "
    "command line (gist mikaelhg/c7c52f7d)",
    note="Only NCCL's InfiniBand/RoCE transport registers memory this way (multi-node tensor or pipeline "
    "parallelism); on one host NCCL uses NVLink, PCIe peer-to-peer and shared memory, which do not count "
    "against it. The gpu check cannot tell whether the deployment spans hosts, so a limited memlock is "
    "reported, not judged. The NCCL documentation page stating this limit was not found in the reference "
    "search; the source above is the RDMA stack's.",
)

TRANSPARENT_HUGEPAGE: Fact[str] = Fact(
    value="recorded, not judged",
    source="Linux Documentation/admin-guide/mm/transhuge.rst: /sys/kernel/mm/transparent_hugepage/enabled "
    "holds 'always', 'madvise' or 'never', the mode in effect in brackets",
    read_from="Linux kernel documentation (6.x)",
    note="No vLLM, NCCL or PyTorch documentation found gives a required THP mode for serving, so the doctor "
    "records the mode (for comparing hosts) without a verdict.",
)
