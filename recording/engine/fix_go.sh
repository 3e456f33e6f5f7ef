#!/bin/bash
# The last device call for the `fix --yes` scenario (fix_scenario.py) and the GPU benchmark, in one command:
#   bash .devrun/NAME/p5/fix_go.sh    or, from engine_transfer.py's DEST/last of any release (NO_BENCH=1 unless
#   bench_gpu_run.py is copied beside it):  NO_BENCH=1 bash .devrun/NAME/last/fix_go.sh
# Before it, in calls back to back while the machine is warm (engine_transfer.py's parts):
#   cp .devrun/NAME/pK/vsite.part.* $RECORD_WORK/parts/   (K = 1..4), and  cp -r .devrun/NAME/p4/last $RECORD_WORK/last
#   (last = engine_transfer.py's DEST/last without the xgrammar and zstandard wheels, which come here).
# This directory (p5) holds: xgrammar's and zstandard's wheels, the doctor's wheel and pyelftools', common.sh,
# setup.sh, scenarios.py, fix_scenario.py and benchmarks/bench_gpu_run.py. Results: $OUT/results.tgz
# Environment: RECORD_WORK (common.sh), SERVE_TIMEOUT (150 s), DRIVER_TIMEOUT (400 s), BUDGET_S (560: the
# device call's 600 s less a margin), RUNS (3, the benchmark's), NO_BENCH (set: no benchmark).
set -o pipefail
H=$(cd "$(dirname "$0")" && pwd)
. "$H/common.sh"
t0=$(date +%s)
if [ -f "$H/VLLM_VERSION" ]; then  # run from engine_transfer.py's DEST/last itself (any release): all is here
  L=$H
else  # 0.20.1's layout: last copied earlier into $RECORD_WORK/last, this directory adds the rest
  L=$G/last
  mkdir -p "$L/whl" "$L/doctor"
  cp "$H"/xgrammar-*.whl "$L/whl/"
  rm -f "$L"/doctor/*.whl; cp "$H"/dflash_doctor-*.whl "$H"/pyelftools-*.whl "$L/doctor/"
  cp "$H"/common.sh "$H"/setup.sh "$H"/scenarios.py "$H"/fix_scenario.py "$L/"
fi
zstd_from_wheel "$H"
start_results_copier
{ nvidia-smi -L; uname -r; ls "$G/parts"; } | tee "$G/res/device.txt"
bash "$L/setup.sh" "$L" 2>&1 | tee "$G/res/setup.log" || { finish_results; exit 3; }
echo "setup done at $(( $(date +%s) - t0 )) s" | tee -a "$G/res/driver.log"
SERVE_TIMEOUT=${SERVE_TIMEOUT:-150} timeout "${DRIVER_TIMEOUT:-400}" python3 "$L/fix_scenario.py" "$L" "$G/res" 2>&1 \
  | tee -a "$G/res/driver.log"
left=$(( ${BUDGET_S:-560} - ($(date +%s) - t0) ))
echo "scenario done at $(( $(date +%s) - t0 )) s; ${left} s left for the benchmark" | tee -a "$G/res/driver.log"
if [ "$left" -gt 90 ] && [ -z "${NO_BENCH:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --target "$G/dd" "$H"/dflash_doctor-*.whl "$H"/pyelftools-*.whl
  nvidia-smi --query-gpu=memory.used --format=csv,noheader | tee "$G/res/bench-gpu-memory.txt"
  PYTHONPATH=$G/dd timeout $(( left - 15 )) python3 "$H/bench_gpu_run.py" --runs "${RUNS:-3}" --out "$G/res/bench" \
    2>&1 | tee "$G/res/bench.txt"
fi
echo "all done at $(( $(date +%s) - t0 )) s" | tee -a "$G/res/driver.log"
finish_results
