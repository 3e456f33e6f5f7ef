#!/bin/bash
# The last device call for `dflash-doctor live`: bash .devrun/t4/last/live_go.sh  (vLLM parts already in
# /tmp/g/parts, see engine_transfer.py). Results: $OUT/results.tgz
set -o pipefail
L=$(cd "$(dirname "$0")" && pwd)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p /tmp/g/res /tmp/g/bin
if ! command -v zstd >/dev/null; then  # a zstd that decompresses, from the carried zstandard wheel
  python3 -m pip install -q --no-index --no-deps --target /tmp/g/zst "$L"/zstandard-*.whl
  printf '#!/bin/sh\nexec python3 -c "import sys; sys.path.insert(0, \\"/tmp/g/zst\\"); import zstandard; zstandard.ZstdDecompressor(max_window_size=2**31).copy_stream(sys.stdin.buffer, sys.stdout.buffer)"\n' > /tmp/g/bin/zstd
  chmod +x /tmp/g/bin/zstd; export PATH=/tmp/g/bin:$PATH
fi
(while sleep 10; do tar czf "$OUT/r.tmp" -C /tmp/g res 2>/dev/null && mv "$OUT/r.tmp" "$OUT/results.tgz"; done) &
T=$!
{ nvidia-smi -L; uname -r; } | tee /tmp/g/res/device.txt
cp /tmp/g/extra/*.whl "$L/whl/" 2>/dev/null
bash "$L/setup.sh" "$L" 2>&1 | tee /tmp/g/res/setup.log || { kill $T; tar czf "$OUT/results.tgz" -C /tmp/g res; exit 3; }
SERVE_TIMEOUT=${SERVE_TIMEOUT:-240} timeout ${DRIVER_TIMEOUT:-480} python3 "$L/live_driver.py" "$L" /tmp/g/res 2>&1 | tee /tmp/g/res/driver.log
kill $T; tar czf "$OUT/results.tgz" -C /tmp/g res
