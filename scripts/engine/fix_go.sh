#!/bin/bash
# The last device call for the `fix --yes` scenario (fix_scenario.py) and the GPU benchmark, in one command:
#   bash .devrun/NAME/p5/fix_go.sh
# Before it, in calls back to back while the machine is warm (engine_transfer.py's parts):
#   cp .devrun/NAME/pK/vsite.part.* /tmp/g/parts/   (K = 1..4), and  cp -r .devrun/NAME/p4/last /tmp/g/last
#   (last = engine_transfer.py's DEST/last without the xgrammar and zstandard wheels, which come here).
# This directory (p5) holds: xgrammar's and zstandard's wheels, the doctor's wheel and pyelftools', setup.sh,
# scenarios.py, fix_scenario.py and benchmarks/bench_gpu_run.py. Results: $OUT/results.tgz
set -o pipefail
H=$(cd "$(dirname "$0")" && pwd)
L=/tmp/g/last
t0=$(date +%s)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p /tmp/g/res /tmp/g/bin "$L/whl" "$L/doctor"
cp "$H"/xgrammar-*.whl "$L/whl/"
rm -f "$L"/doctor/*.whl; cp "$H"/dflash_doctor-*.whl "$H"/pyelftools-*.whl "$L/doctor/"
cp "$H"/setup.sh "$H"/scenarios.py "$H"/fix_scenario.py "$L/"
if ! command -v zstd >/dev/null; then  # a zstd that decompresses, from the carried zstandard wheel
  python3 -m pip install -q --no-index --no-deps --target /tmp/g/zst "$H"/zstandard-*.whl
  printf '#!/bin/sh\nexec python3 -c "import sys; sys.path.insert(0, \\"/tmp/g/zst\\"); import zstandard; zstandard.ZstdDecompressor(max_window_size=2**31).copy_stream(sys.stdin.buffer, sys.stdout.buffer)"\n' > /tmp/g/bin/zstd
  chmod +x /tmp/g/bin/zstd; export PATH=/tmp/g/bin:$PATH
fi
(while sleep 10; do tar czf "$OUT/r.tmp" -C /tmp/g res 2>/dev/null && mv "$OUT/r.tmp" "$OUT/results.tgz"; done) &
T=$!
{ nvidia-smi -L; uname -r; ls /tmp/g/parts; } | tee /tmp/g/res/device.txt
bash "$L/setup.sh" "$L" 2>&1 | tee /tmp/g/res/setup.log || { kill $T; tar czf "$OUT/results.tgz" -C /tmp/g res; exit 3; }
echo "setup done at $(( $(date +%s) - t0 )) s" | tee -a /tmp/g/res/driver.log
SERVE_TIMEOUT=${SERVE_TIMEOUT:-150} timeout ${DRIVER_TIMEOUT:-400} python3 "$L/fix_scenario.py" "$L" /tmp/g/res 2>&1 | tee -a /tmp/g/res/driver.log
left=$(( ${BUDGET_S:-560} - ($(date +%s) - t0) ))
echo "scenario done at $(( $(date +%s) - t0 )) s; ${left} s left for the benchmark" | tee -a /tmp/g/res/driver.log
if [ "$left" -gt 90 ] && [ -z "${NO_BENCH:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/g/dd "$H"/dflash_doctor-*.whl "$H"/pyelftools-*.whl
  nvidia-smi --query-gpu=memory.used --format=csv,noheader | tee /tmp/g/res/bench-gpu-memory.txt
  PYTHONPATH=/tmp/g/dd timeout $(( left - 15 )) python3 "$H/bench_gpu_run.py" --runs ${RUNS:-3} --out /tmp/g/res/bench \
    2>&1 | tee /tmp/g/res/bench.txt
fi
echo "all done at $(( $(date +%s) - t0 )) s" | tee -a /tmp/g/res/driver.log
kill $T; tar czf "$OUT/results.tgz" -C /tmp/g res
