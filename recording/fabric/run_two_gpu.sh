#!/usr/bin/env bash
# The fabric check on two GPUs of one host, in one device call: the whole record for fixtures/fabric/h200-2gpu/.
#
# Here (the CPU machine), from the root of a checkout of this project (.devrun/ is ignored by git, and the device
# tool carries ignored paths named in `carry`):
#   python3 -m pip wheel --no-deps -w .devrun/fabric/ . && cp recording/fabric/*.sh .devrun/fabric/
# Then one call of the GPU machine, kind nvidia-h200-x2, carry [".devrun/fabric"]:
#   bash .devrun/fabric/run_two_gpu.sh .devrun/fabric $OUT/fabric/h200-2gpu
# and copy what comes back into fixtures/fabric/h200-2gpu/ (then add a judgement test on it in tests/test_fabric.py).
#
# It runs the doctor's fabric check with no serve command (every visible GPU), with a serve command at
# --tensor-parallel-size 1 and 2 (NVML topology and P2P status, the write-and-verify peer copy, the NCCL
# all-reduce at 4 B and 16 MiB with its bus bandwidth, the NCCL_P2P_DISABLE=1 control arm), NVLink multicast
# off throughout (NCCL_NVLS_ENABLE=0), then NCCL's own log of one all-reduce per arm for the record.
# Environment: FABRIC_SITE, where run_device.sh installs the wheel (default: ${TMPDIR:-/tmp}/dd-fabric).
set -u
DIR=${1:?directory holding the wheel and these scripts}; OUT_DIR=${2:?output directory}
export FABRIC_SITE=${FABRIC_SITE:-${TMPDIR:-/tmp}/dd-fabric}
export NCCL_NVLS_ENABLE=0
bash "$DIR/run_device.sh" "$DIR" "$OUT_DIR" 1 2
PROBE=$FABRIC_SITE/dflash_doctor/facts/probes/fabric_nccl.py
for arm in p2p p2p_disabled; do
    extra=(); [ "$arm" = p2p_disabled ] && extra=(NCCL_P2P_DISABLE=1)
    port=$((29500 + RANDOM % 1000))
    for rank in 0 1; do
        env "${extra[@]}" NCCL_DEBUG=INFO timeout 120 python3 -B "$PROBE" \
            "{\"rank\": $rank, \"world\": 2, \"port\": $port, \"sizes\": [4, 16777216]}" \
            > "$OUT_DIR/nccl-$arm-rank$rank.log" 2>&1 &
    done
    wait
done
grep -h "busbw\|\"ok\"" "$OUT_DIR"/nccl-*-rank0.log | cut -c1-300
cat "$OUT_DIR/timings.txt"
