#!/bin/bash
# serve --exec --live for the rejected pair: the collapse judged with the serve command's facts.
L=$(cd "$(dirname "$0")" && pwd)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p /tmp/g/bin
if ! command -v zstd >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/g/zst "$L"/zstandard-*.whl
  printf '#!/bin/sh\nexec python3 -c "import sys; sys.path.insert(0, \\"/tmp/g/zst\\"); import zstandard; zstandard.ZstdDecompressor(max_window_size=2**31).copy_stream(sys.stdin.buffer, sys.stdout.buffer)"\n' > /tmp/g/bin/zstd
  chmod +x /tmp/g/bin/zstd; export PATH=/tmp/g/bin:$PATH
fi
cp /tmp/g/extra/*.whl "$L/whl/"; bash "$L/setup.sh" "$L" > $OUT/setup.log 2>&1 || { tail $OUT/setup.log; exit 3; }
cd /tmp && export PATH=/tmp/g/v0/bin:$PATH VIRTUAL_ENV=/tmp/g/v0 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
unset PYTHONPATH; M=$L/live-models; S=$(date +%s)
timeout 400 /tmp/g/doctor-venv/bin/python -m dflash_doctor serve --python /tmp/g/v0/bin/python --skip distributions,kernels \
  --timeout 180 --no-color --json $OUT/serve-exec-live-rejected.report.json --exec --live --live-wait 240 -- \
  vllm serve $M/live-target --served-model-name toy --port 8205 --enforce-eager --max-model-len 512 --max-num-seqs 4 \
  --gpu-memory-utilization 0.05 --kv-cache-memory-bytes 268435456 \
  --speculative-config "{\"method\": \"dflash\", \"model\": \"$M/live-rejected\", \"num_speculative_tokens\": 15}" \
  > $OUT/serve-exec-live-rejected.txt 2>&1
echo "exit $? after $(( $(date +%s) - S )) s" | tee -a $OUT/serve-exec-live-rejected.txt
P=$(grep -o 'left running: PID [0-9]*' $OUT/serve-exec-live-rejected.txt | grep -o '[0-9]*$')
if [ -n "$P" ] && kill -0 "$P"; then echo "PID $P alive after the doctor exited" | tee -a $OUT/serve-exec-live-rejected.txt; kill -- -"$P"; fi
tail -30 $OUT/serve-exec-live-rejected.txt | cut -c1-400
