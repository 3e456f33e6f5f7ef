# Sourced by every script that runs on the GPU machine (go.sh, live_go.sh, live_rejected.sh, fix_go.sh, setup.sh).
# RECORD_WORK: the work directory there (the vLLM parts, the venvs v0/v2/v4 and doctor-venv, results in res/);
# default ${TMPDIR:-/tmp}/dflash-record. The committed fixtures were made with RECORD_WORK=/tmp/g, so their
# commands name /tmp/g/... paths.
G=${RECORD_WORK:-${TMPDIR:-/tmp}/dflash-record}
export RECORD_WORK=$G
# NVLink multicast off in every process (the device machines' rule; NCCL's NVLS otherwise asks for it)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$G/res" "$G/bin"

# A zstd that decompresses, from a carried zstandard wheel in $1, where the machine has no zstd.
zstd_from_wheel() {
  command -v zstd >/dev/null && return 0
  python3 -m pip install -q --no-index --no-deps --target "$G/zst" "$1"/zstandard-*.whl
  printf '#!/bin/sh\nexec python3 -c "import sys; sys.path.insert(0, \\"%s\\"); import zstandard; zstandard.ZstdDecompressor(max_window_size=2**31).copy_stream(sys.stdin.buffer, sys.stdout.buffer)"\n' "$G/zst" > "$G/bin/zstd"
  chmod +x "$G/bin/zstd"
  export PATH=$G/bin:$PATH
}

# Copies $G/res into $OUT/results.tgz every 10 s while a call runs (what a call that runs out of time still
# brings back), and once at the end: start_results_copier, then finish_results.
start_results_copier() {
  (while sleep 10; do tar czf "$OUT/r.tmp" -C "$G" res 2>/dev/null && mv "$OUT/r.tmp" "$OUT/results.tgz"; done) &
  COPIER=$!
}
finish_results() {
  kill "$COPIER" 2>/dev/null
  tar czf "$OUT/results.tgz" -C "$G" res
}
