#!/bin/bash
# The last device call of the start-up scenarios: bash .devrun/g/last/go.sh  (vLLM's parts already in
# $RECORD_WORK/parts, see engine_transfer.py). Results: $OUT/results.tgz (record.py turns them into fixtures).
# Environment: RECORD_WORK (common.sh), SERVE_TIMEOUT (150 s), DRIVER_TIMEOUT (480 s), ONLY (scenario keys).
set -o pipefail
L=$(cd "$(dirname "$0")" && pwd)
. "$L/common.sh"
zstd_from_wheel "$L"
start_results_copier
{ nvidia-smi -L; uname -r; } | tee "$G/res/device.txt"
cp "$G"/extra/*.whl "$L/whl/" 2>/dev/null
bash "$L/setup.sh" "$L" 2>&1 | tee "$G/res/setup.log" || { finish_results; exit 3; }
SERVE_TIMEOUT=${SERVE_TIMEOUT:-150} timeout "${DRIVER_TIMEOUT:-480}" python3 "$L/scenarios.py" "$L" "$G/res" ${ONLY:-} 2>&1 \
  | tee "$G/res/driver.log"
finish_results
