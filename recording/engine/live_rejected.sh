#!/bin/bash
# serve --exec --live for the rejected pair: the collapse judged with the serve command's facts.
#   bash .devrun/t4/last/live_rejected.sh   (after live_go.sh's setup inputs are in place; writes into $OUT)
# Environment: RECORD_WORK (common.sh), PORT (8205).
L=$(cd "$(dirname "$0")" && pwd)
. "$L/common.sh"
zstd_from_wheel "$L"
cp "$G"/extra/*.whl "$L/whl/"; bash "$L/setup.sh" "$L" > "$OUT/setup.log" 2>&1 || { tail "$OUT/setup.log"; exit 3; }
cd "${TMPDIR:-/tmp}" && export PATH=$G/v0/bin:$PATH VIRTUAL_ENV=$G/v0 PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
unset PYTHONPATH; M=$L/live-models; S=$(date +%s); T=$OUT/serve-exec-live-rejected.txt
timeout 400 "$G/doctor-venv/bin/python" -m dflash_doctor serve --python "$G/v0/bin/python" --skip distributions,kernels \
  --timeout 180 --no-color --json "$OUT/serve-exec-live-rejected.report.json" --exec --live --live-wait 240 -- \
  vllm serve "$M/live-target" --served-model-name toy --port "${PORT:-8205}" --enforce-eager --max-model-len 512 --max-num-seqs 4 \
  --gpu-memory-utilization 0.05 --kv-cache-memory-bytes 268435456 \
  --speculative-config "{\"method\": \"dflash\", \"model\": \"$M/live-rejected\", \"num_speculative_tokens\": 15}" \
  > "$T" 2>&1
echo "exit $? after $(( $(date +%s) - S )) s" | tee -a "$T"
P=$(grep -o 'left running: PID [0-9]*' "$T" | grep -o '[0-9]*$')
if [ -n "$P" ] && kill -0 "$P"; then echo "PID $P alive after the doctor exited" | tee -a "$T"; kill -- -"$P"; fi
tail -30 "$T" | cut -c1-400
