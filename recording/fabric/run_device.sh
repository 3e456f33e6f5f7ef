#!/usr/bin/env bash
# The fabric check on a GPU machine, in one call: installs a wheel of this project (no dependencies: torch and
# nvidia-ml-py are the machine's), runs the doctor's fabric check with no serve command, then with a serve
# command at each TP size given, and records the reports, their timings and the host's own files that the
# host readers read (for tests) under OUT_DIR.
#   usage: run_device.sh WHEEL_DIR OUT_DIR [TP ...]        (default TP sizes: 1 2)
# Environment: FABRIC_SITE, where the wheel is installed (default: ${TMPDIR:-/tmp}/dd-fabric); TIMEOUT, the
# doctor's --timeout (120 s).
set -u
WHEELS=${1:?wheel directory}; OUT_DIR=${2:?output directory}; shift 2
TPS=${*:-1 2}
SITE=${FABRIC_SITE:-${TMPDIR:-/tmp}/dd-fabric}
export FABRIC_SITE=$SITE
export NCCL_NVLS_ENABLE=0
mkdir -p "$OUT_DIR/host" "$SITE"
python3 -m pip install -q --no-deps --target "$SITE" "$WHEELS"/dflash_doctor-*.whl 2>&1 | tail -2
export PYTHONPATH=$SITE PYTHONDONTWRITEBYTECODE=1
PY=$(command -v python3)
run() {  # name, subcommand..., then the doctor's options (the serve command last)
    local name=$1; shift
    local t0=$(date +%s%N)
    python3 -m dflash_doctor "$@" > "$OUT_DIR/$name.txt" 2>&1
    local rc=$?
    local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    echo "$name rc=$rc wall_ms=$ms" | tee -a "$OUT_DIR/timings.txt"
}
run plain --json "$OUT_DIR/plain.json" -v --python "$PY" --only fabric --timeout "${TIMEOUT:-120}"
for tp in $TPS; do
    run "serve-tp$tp" serve --json "$OUT_DIR/serve-tp$tp.json" -v --python "$PY" --only fabric --timeout "${TIMEOUT:-120}" \
        -- vllm serve /models/none --tensor-parallel-size "$tp"
done
# the host's own files, as the readers see them
H=$OUT_DIR/host
cp /proc/cmdline "$H/cmdline"; cp /proc/self/mountinfo "$H/mountinfo"; cp /proc/1/cgroup "$H/cgroup" 2>/dev/null
readlink /proc/self/ns/ipc > "$H/ns_ipc.txt"; ls -a / > "$H/root_listing.txt"
ls -la /sys/class/iommu > "$H/sys_class_iommu.txt" 2>&1; ls /sys/kernel/iommu_groups > "$H/iommu_groups.txt" 2>&1
df -B1 /dev/shm > "$H/df_dev_shm.txt"
nvidia-smi topo -m > "$H/nvidia-smi-topo.txt" 2>&1; nvidia-smi topo -p2p rw > "$H/nvidia-smi-p2p.txt" 2>&1
command -v lspci >/dev/null && lspci -vvv > "$H/lspci-vvv.txt" 2>&1
for bus in $(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader); do
    bdf=$(echo "$bus" | tr 'A-Z' 'a-z' | sed -E 's/^0*([0-9a-f]{4}):/\1:/')
    dev=/sys/bus/pci/devices/$bdf
    d=$H/pci/$bdf; mkdir -p "$d"
    readlink -f "$dev" > "$d/realpath.txt"
    cat "$dev/iommu_group/type" > "$d/iommu_group_type" 2>/dev/null; readlink "$dev/iommu_group" > "$d/iommu_group.txt" 2>/dev/null
    cp "$dev/config" "$d/config" 2>/dev/null
    p=$(readlink -f "$dev"); p=$(dirname "$p")
    while [ -e "$p/config" ]; do
        b=$(basename "$p"); mkdir -p "$H/pci/$b"; cp "$p/config" "$H/pci/$b/config" 2>/dev/null; p=$(dirname "$p")
    done
done
python3 -c "import torch, pynvml; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())" > "$H/versions.txt" 2>&1
# sysfs names (0000:00:06.0) do not travel back as file names: one archive
tar -C "$OUT_DIR" -czf "$OUT_DIR/host.tar.gz" host && rm -rf "$H"
echo done
