"""Prepare vLLM 0.20.1, its missing runtime dependencies and the scenarios for the GPU machine.

Usage (on the CPU machine, from a checkout; needs zstd and pip):
    python3 recording/engine/engine_transfer.py DEST [--vllm-site DIR] [--doctor-from REPO] [--part-mb 50]

The device tool carries at most 64 MiB per call, and vLLM's wheel is 244 MB. vLLM installed with
`pip --target` (tests/stacks.py vllm_site) is tarred and compressed with zstd's long-range mode
(the FA3 library's 144 MB shrink to 9 MB; 528 MB become about 182 MB in all) and split into parts of
--part-mb MiB. DEST/p1..pN each hold one part: call `run` with carry [DEST/pK] and
`mkdir -p $RECORD_WORK/parts && cp DEST/pK/vsite.part.* $RECORD_WORK/parts/` while the machine is warm,
then the last call carries DEST/last (wheels, models, driver) and runs go.sh (setup.sh, scenarios.py).
When DEST/last is over the limit with the checkout, carry xgrammar's wheel in a call of its own into
$RECORD_WORK/extra/ (go.sh and live_go.sh copy it in). `bash last/live_go.sh` records `dflash-doctor live`
against real servers (live_driver.py) instead of the start-up scenarios.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# The device tool carries 64 MiB per call with the checkout it sends (about 12 MiB): parts of 50 MiB fit.
PART_MB = 50
PLATFORMS = [f"--platform=manylinux_2_{n}_x86_64" for n in (17, 24, 26, 27, 28, 31, 34, 35)] + [
    "--platform=manylinux2014_x86_64", "--platform=manylinux1_x86_64"]
# vLLM 0.20.1's runtime requirements that the GPU machine's image lacks (KINDS.md's package list) and
# that `vllm serve` imports on its way to a running engine, found by importing the serve path
# (cli main, launch and serve, api_server, engine core, GPU worker and model runner, Qwen3, DFlash) in a venv
# of vLLM 0.20.1 here, with every package the image lacks blocked from import.
# xgrammar 0.1.32 (vLLM allows >=0.1.32,<1.0): later releases need apache-tvm-ffi >= 0.1.11, which
# vLLM's flashinfer pin (0.1.9) excludes. The versions are what pip resolved for vLLM 0.20.1 here.
DEPENDENCIES = """annotated-types==0.8.0 blake3==1.0.11 cachetools==8.0.2 cbor2==6.3.0 diskcache==5.6.3
dnspython==2.9.2 email-validator==2.4.0 fastapi==0.165.0 gguf==0.19.0 googleapis-common-protos==1.76.0
httpcore2==2.16.2 httpx2==2.16.2 httptools==0.9.0 ijson==3.6.0 jiter==0.19.0 lark==1.2.2
llguidance==1.3.0 msgspec==0.23.0 openai==3.57.0 openai-harmony==0.0.8 opentelemetry-api==1.45.2
opentelemetry-exporter-http-transport==0.66b2 opentelemetry-exporter-otlp-common==0.66b2
opentelemetry-exporter-otlp-proto-common==1.45.2 opentelemetry-exporter-otlp-proto-http==1.45.2
opentelemetry-proto==1.45.2 opentelemetry-sdk==1.45.2 opentelemetry-semantic-conventions==0.66b2
partial-json-parser==0.2.1.1.post7 prometheus-fastapi-instrumentator==8.1.0 pybase64==1.5.1
pydantic==2.14.4 pydantic_core==2.50.5 pydantic-extra-types==2.11.1 python-multipart==0.0.34
pyzmq==27.3.0 setproctitle==1.3.8 sniffio==1.3.1 starlette==1.10.0 truststore==0.10.5
typing-inspection==0.4.5 uvicorn==0.55.0 watchfiles==1.3.0 websockets==17.4 xgrammar==0.1.32
python-dotenv==1.2.4 python-json-logger==4.2.0 model-hosting-container-standards==0.1.16 jmespath==1.0.1
supervisor==4.3.0""".split()  # noqa: SIM905 - one long list, read as text


def run(*argv: object, **kw: object) -> None:
    subprocess.run([str(a) for a in argv], check=True, **kw)  # type: ignore[call-overload]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dest", type=Path)
    ap.add_argument("--vllm-site", type=Path, help="vLLM installed with pip --target (tests/stacks.py vllm_site)")
    ap.add_argument("--doctor-from", type=Path, default=ROOT, help="git checkout whose HEAD becomes the doctor wheel")
    ap.add_argument("--tar", type=Path, help="reuse an existing vsite.tar.zst")
    ap.add_argument("--models-python", default=sys.executable, help="a Python with numpy, safetensors, tokenizers")
    ap.add_argument("--part-mb", type=int, default=PART_MB,
                    help=f"size of each part of vLLM's archive in MiB (default {PART_MB}: one device call carries 64 MiB)")
    ap.add_argument("--test-cache", type=Path,
                    default=Path(os.environ.get("DFLASH_DOCTOR_TEST_CACHE") or Path.home() / ".cache" / "dflash-doctor-tests"),
                    help="the tests' artifact cache holding the flash-attn wheels (default: $DFLASH_DOCTOR_TEST_CACHE, "
                    "else ~/.cache/dflash-doctor-tests)")
    args = ap.parse_args()
    dest: Path = args.dest.resolve()
    last = dest / "last"
    shutil.rmtree(dest / "last", ignore_errors=True)
    for old in dest.glob("p[0-9]*"):
        shutil.rmtree(old)
    for sub in ("whl", "fa", "doctor"):
        (last / sub).mkdir(parents=True)
    tar = args.tar
    if tar is None:
        if args.vllm_site is None:
            sys.path.insert(0, str(ROOT / "tests"))
            from stacks import vllm_site
            args.vllm_site = vllm_site("0.20.1")
        tar = dest / "vsite.tar.zst"
        run("bash", "-c", f"tar -C {args.vllm_site} -cf - . | zstd -q -T0 -17 --long=30 -f -o {tar}")
    with tempfile.TemporaryDirectory() as tmp:
        run("split", "-b", f"{args.part_mb}M", "-a", "2", tar, f"{tmp}/vsite.part.")
        for k, part in enumerate(sorted(Path(tmp).iterdir()), 1):
            (dest / f"p{k}").mkdir()
            shutil.move(str(part), dest / f"p{k}" / part.name)
    run(sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version", "3.12",
        "--implementation", "cp", *PLATFORMS, "-d", last / "whl", *DEPENDENCIES)
    cache: Path = args.test_cache
    shutil.copy(cache / "pypi" / "flash_attn_4-4.0.0b36-py3-none-any.whl", last / "fa")
    shutil.copy(cache / "built" / "flash_attn-2.8.3-py3-none-any.whl", last / "fa")  # built without its extension
    with tempfile.TemporaryDirectory() as tmp:
        run("bash", "-c", f"git -C {args.doctor_from} archive HEAD | tar -x -C {tmp}")
        run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", last / "doctor", tmp)
    run(sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", last / "doctor", "pyelftools==0.33")
    run(args.models_python, HERE / "make_models.py", last / "models", cwd="/")
    run(args.models_python, HERE / "live_models.py", last / "live-models", cwd="/")
    for name in ("common.sh", "setup.sh", "go.sh", "scenarios.py", "live_driver.py", "live_go.sh", "live_rejected.sh"):
        shutil.copy(HERE / name, last / name)
    for path in sorted(dest.rglob("*")):
        if path.is_file() and path.parent != dest:
            print(f"{path.stat().st_size / 2**20:8.1f} MiB  {path.relative_to(dest)}")


if __name__ == "__main__":
    main()
