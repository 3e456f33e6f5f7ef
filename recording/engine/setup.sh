#!/bin/bash
# Run ON the GPU machine, after engine_transfer.py's parts were copied to $RECORD_WORK/parts:
#   bash PAYLOAD/setup.sh PAYLOAD
# Makes $RECORD_WORK/v0 (vLLM PAYLOAD/VLLM_VERSION + the runtime dependencies the image lacks, torch from the image),
# v2 (+ flash-attn-4), v4 (+ flash-attn 2.8.3 without its extension), each seeing v0's packages and the
# image's torch through .pth lines, and doctor-venv (the doctor's wheel). RECORD_WORK: see common.sh.
# Last, v0 imports the serve path's roots (serve_deps.py ROOTS) and names any module still missing.
set -euo pipefail
P=$(cd "$1" && pwd)
. "$(dirname "$0")/common.sh"
V=${VLLM_VERSION:-$(cat "$P/VLLM_VERSION")}
BASE=$(command -v python3)
TS=$($BASE -c "import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))")
PYV=$($BASE -c "import sys; print(f'python{sys.version_info[0]}.{sys.version_info[1]}')")
mk() {  # venv without pip; the image's site-packages (torch, pip) after its own
  $BASE -m venv --without-pip "$G/$1"
  local site="$G/$1/lib/$PYV/site-packages"
  shift
  printf '%s\n' "$@" "$TS" > "$site/zz-stack.pth"
}
t0=$(date +%s)
mk v0
S0="$G/v0/lib/$PYV/site-packages"
mkdir -p "$G/parts"; cp "$P"/vsite.part.* "$G/parts/" 2>/dev/null || true  # the archive's tail, where it came in last
cat "$G"/parts/vsite.part.* | zstd -d -q | tar -x -C "$S0"
# pip --target wrote the console scripts to bin/ and their RECORD rows as ../../bin/NAME (its own lib/python
# layout): put them where those rows lead from this site-packages, so every RECORD is whole (vllm's own script
# is written below, with its row)
if [ -d "$S0/bin" ]; then rm -f "$S0/bin/vllm"; mkdir -p "$G/v0/lib/bin"; mv "$S0"/bin/* "$G/v0/lib/bin/" 2>/dev/null || true; rmdir "$S0/bin"; fi
# the dependencies come inside the parts (engine_transfer.py); whl/ holds only wheels carried on their own
if compgen -G "$P/whl/*.whl" >/dev/null; then
  $G/v0/bin/python -m pip install -q --no-index --no-deps --no-compile --disable-pip-version-check "$P"/whl/*.whl
fi
# vLLM's console script where a venv has it; RECORD says what pip would have written for it
$G/v0/bin/python - "$S0" "$G/v0" "$V" <<'PY'
import base64, hashlib, os, sys
site, venv, version = sys.argv[1], sys.argv[2], sys.argv[3]
script = (f"#!{venv}/bin/python\nimport sys\nfrom vllm.entrypoints.cli.main import main\n"
          "if __name__ == '__main__':\n    sys.exit(main())\n").encode()
open(f"{venv}/bin/vllm", "wb").write(script); os.chmod(f"{venv}/bin/vllm", 0o755)
digest = base64.urlsafe_b64encode(hashlib.sha256(script).digest()).rstrip(b"=").decode()
rec = os.path.join(site, f"vllm-{version}.dist-info", "RECORD")
lines = [l for l in open(rec).read().splitlines() if not l.startswith("../../bin/vllm,")]
lines.insert(0, f"../../../bin/vllm,sha256={digest},{len(script)}")
open(rec, "w").write("\n".join(lines) + "\n")
PY
for v in v2 v4; do
  mk $v "$S0"
  printf '#!%s/%s/bin/python\nimport sys\nfrom vllm.entrypoints.cli.main import main\nif __name__ == "__main__":\n    sys.exit(main())\n' "$G" $v > "$G/$v/bin/vllm"
  chmod +x "$G/$v/bin/vllm"
done
$G/v2/bin/python -m pip install -q --no-index --no-deps --disable-pip-version-check "$P"/fa/flash_attn_4-*.whl
$G/v4/bin/python -m pip install -q --no-index --no-deps --disable-pip-version-check "$P"/fa/flash_attn-2.8.3-*.whl
mk doctor-venv
$G/doctor-venv/bin/python -m pip install -q --no-index --no-deps --disable-pip-version-check "$P"/doctor/*.whl
echo "setup: $(( $(date +%s) - t0 )) s"
$G/v0/bin/python -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__, torch.cuda.get_device_name(0))"
# the serve path's modules, imported as `vllm serve` will (a module the static reading missed shows here)
( cd "${TMPDIR:-/tmp}" && $G/v0/bin/python - <<'PY'
import importlib
roots = ("vllm.entrypoints.cli.main", "vllm.entrypoints.openai.api_server", "vllm.v1.engine.core",
         "vllm.v1.engine.async_llm", "vllm.v1.worker.gpu_worker", "vllm.v1.worker.gpu_model_runner",
         "vllm.v1.worker.gpu.model_runner", "vllm.model_executor.models.qwen3", "vllm.model_executor.models.qwen3_dflash",
         "vllm.v1.spec_decode.dflash", "vllm.v1.attention.backends.flash_attn", "vllm.v1.structured_output",
         "vllm.v1.sample.sampler")
for name in roots:
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as exc:
        print(f"serve-path import {name}: missing {exc.name}" if exc.name and not exc.name.startswith("vllm.") else
              f"serve-path import {name}: absent in this release")
    except Exception as exc:  # noqa: BLE001 - reported, not fatal
        print(f"serve-path import {name}: {type(exc).__name__}: {str(exc)[:200]}")
print("serve-path imports checked")
PY
)
