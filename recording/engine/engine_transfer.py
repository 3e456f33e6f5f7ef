"""Prepare a vLLM release, its missing runtime dependencies and the scenarios for the GPU machine.

Usage (on the CPU machine, from a checkout; needs zstd and pip):
    python3 recording/engine/engine_transfer.py DEST [--vllm VERSION] [--vllm-site DIR] [--doctor-from REPO]
        [--part-mb 44] [--plan-only]

--vllm (default $VLLM_VERSION, else 0.20.1) names the release; its dependencies are deps-VERSION.txt
(serve_deps.py), and DEST/last/VLLM_VERSION tells the device scripts which release they set up.
The device tool carries at most 64 MiB per call, and vLLM's wheel is 244 MB (0.20.1; 0.26.0: 290 MB). vLLM installed with
`pip --target` (tests/stacks.py vllm_site) is tarred and compressed with zstd's long-range mode
(the FA3 library's 144 MB shrink to 9 MB; 528 MB become about 182 MB in all) and split into parts of
--part-mb MiB. DEST/p1..pN each hold one part: call `run` with carry [DEST/pK] and
`mkdir -p $RECORD_WORK/parts && cp DEST/pK/vsite.part.* $RECORD_WORK/parts/` while the machine is warm,
then the last call carries DEST/last (flash-attn wheels, the doctor's, models, driver) and runs go.sh (setup.sh,
scenarios.py). The release's dependencies (deps-VERSION.txt) are installed with pip --target beside vLLM and go
into the same archive (zstd's long range over the unpacked files beats their wheels); a wheel put into
$RECORD_WORK/extra/ in a call of its own is installed too (go.sh and live_go.sh copy it into whl/). `bash last/live_go.sh` records `dflash-doctor live`
against real servers (live_driver.py) instead of the start-up scenarios.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
from serve_deps import PLATFORMS

# The device tool carries 64 MiB per call with the checkout it sends (12 MiB when 0.20.1 was recorded, 17.8 MiB
# of tracked files at 0.26.0's dry run): parts of 44 MiB fit with a margin; plan() names a call over the limit.
PART_MB = 44
# The release's dependencies: deps-VERSION.txt beside this script (serve_deps.py writes it; 0.20.1's was found by
# import-blocking), one requirement a line, `#` comments.
DEFAULT_VERSION = "0.20.1"


def dependencies(version: str) -> list[str]:
    path = HERE / f"deps-{version}.txt"
    if not path.is_file():
        raise SystemExit(f"{path.name} is missing: run python3 recording/engine/serve_deps.py {version}")
    return [ln.strip() for ln in path.read_text().splitlines() if ln.strip() and not ln.startswith("#")]


def run(*argv: object, **kw: object) -> None:
    subprocess.run([str(a) for a in argv], check=True, **kw)  # type: ignore[call-overload]


def mib(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20 if path.is_dir() \
        else path.stat().st_size / 2**20


def checkout_mib(repo: Path) -> float:
    """What the device tool sends of the checkout with every call: the tracked files."""
    out = subprocess.run(["git", "-C", str(repo), "ls-files", "-z"], capture_output=True, check=True).stdout
    return sum((repo / f).stat().st_size for f in out.decode().split("\0") if f and (repo / f).is_file()) / 2**20


def plan(dest: Path, checkout: float, limit: float = 64.0) -> list[str]:
    """The device calls: one per part, then the last (split where it is over the limit with the checkout)."""
    lines = [f"checkout sent with every call: {checkout:.1f} MiB; limit {limit:.0f} MiB a call"]
    parts = sorted(dest.glob("p[0-9]*"), key=lambda p: int(p.name[1:]))
    for part in parts:
        lines.append(f"call {part.name}: carry [{part.name}] {mib(part):.1f} MiB + checkout = {mib(part) + checkout:.1f} MiB")
    last = mib(dest / "last")
    lines.append(f"call last: carry [last] {last:.1f} MiB + checkout = {last + checkout:.1f} MiB"
                 + ("" if last + checkout <= limit else "  OVER: move whl/ wheels into extra calls (see README)"))
    total = sum(mib(p) for p in parts) + last
    lines.append(f"in all: {len(parts) + 1} calls carrying {total:.1f} MiB")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dest", type=Path)
    ap.add_argument("--vllm", default=os.environ.get("VLLM_VERSION") or DEFAULT_VERSION,
                    help=f"the vLLM release (default: $VLLM_VERSION, else {DEFAULT_VERSION}); deps-VERSION.txt lists "
                    "what it needs beside the image")
    ap.add_argument("--vllm-site", type=Path, help="vLLM installed with pip --target (default: tests/stacks.py vllm_site)")
    ap.add_argument("--doctor-from", type=Path, default=ROOT, help="git checkout whose HEAD becomes the doctor wheel")
    ap.add_argument("--tar", type=Path, help="reuse an existing vsite.tar.zst")
    ap.add_argument("--models-python", default=sys.executable, help="a Python with numpy, safetensors, tokenizers")
    ap.add_argument("--part-mb", type=int, default=PART_MB,
                    help=f"size of each part of vLLM's archive in MiB (default {PART_MB}: one device call carries 64 MiB)")
    ap.add_argument("--test-cache", type=Path,
                    default=Path(os.environ.get("DFLASH_DOCTOR_TEST_CACHE") or Path.home() / ".cache" / "dflash-doctor-tests"),
                    help="the tests' artifact cache holding the flash-attn wheels (default: $DFLASH_DOCTOR_TEST_CACHE, "
                    "else ~/.cache/dflash-doctor-tests)")
    ap.add_argument("--level", type=int, default=17, help="zstd's level (default 17; --long=30 always)")
    ap.add_argument("--plan-only", action="store_true", help="print the device calls for an existing DEST")
    args = ap.parse_args()
    dest: Path = args.dest.resolve()
    if args.plan_only:
        print("\n".join(plan(dest, checkout_mib(args.doctor_from))))
        return
    wanted = dependencies(args.vllm)
    timings: list[str] = []
    clock = time.monotonic()

    def lap(what: str) -> None:
        nonlocal clock
        now = time.monotonic()
        timings.append(f"{what}: {now - clock:.0f} s")
        clock = now

    last = dest / "last"
    shutil.rmtree(dest / "last", ignore_errors=True)
    for old in dest.glob("p[0-9]*"):
        shutil.rmtree(old)
    for sub in ("whl", "fa", "doctor"):
        (last / sub).mkdir(parents=True)
    (last / "VLLM_VERSION").write_text(args.vllm + "\n")
    tar = args.tar
    if tar is None:
        if args.vllm_site is None:
            sys.path.insert(0, str(ROOT / "tests"))
            from stacks import vllm_site
            args.vllm_site = vllm_site(args.vllm)
            lap(f"vLLM {args.vllm} installed with pip --target")
        if not (args.vllm_site / f"vllm-{args.vllm}.dist-info").is_dir():
            raise SystemExit(f"{args.vllm_site} holds no vllm-{args.vllm}.dist-info")
        # the dependencies installed beside vLLM, into the same archive: zstd's long range over the unpacked files
        # takes them smaller than their wheels, and the parts carry them (setup.sh unpacks one site)
        deps_site = dest / "deps-site"
        shutil.rmtree(deps_site, ignore_errors=True)
        with tempfile.TemporaryDirectory() as wheels:
            run(sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version",
                "3.12", "--implementation", "cp", *PLATFORMS, "-d", wheels, *wanted)
            got = sorted(Path(wheels).glob("*.whl"))
            lap(f"{len(wanted)} dependency wheels downloaded ({sum(w.stat().st_size for w in got) / 2**20:.1f} MiB)")
            run(sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--no-compile",
                "--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp", *PLATFORMS,
                "--target", deps_site, *got)
        lap(f"installed with pip --target ({mib(deps_site):.0f} MiB)")
        tar = dest / "vsite.tar.zst"
        run("bash", "-c", f"tar -cf - -C {args.vllm_site} . -C {deps_site} . | zstd -q -T0 -{args.level} --long=30 -f -o {tar}")
        lap(f"tar + zstd -{args.level} --long=30 ({mib(args.vllm_site) + mib(deps_site):.0f} MiB -> {mib(tar):.0f} MiB)")
        shutil.rmtree(deps_site)
    with tempfile.TemporaryDirectory() as tmp:
        run("split", "-b", f"{args.part_mb}M", "-a", "2", tar, f"{tmp}/vsite.part.")
        for k, part in enumerate(sorted(Path(tmp).iterdir()), 1):
            (dest / f"p{k}").mkdir()
            shutil.move(str(part), dest / f"p{k}" / part.name)
    cache: Path = args.test_cache
    shutil.copy(cache / "pypi" / "flash_attn_4-4.0.0b36-py3-none-any.whl", last / "fa")
    shutil.copy(cache / "built" / "flash_attn-2.8.3-py3-none-any.whl", last / "fa")  # built without its extension
    with tempfile.TemporaryDirectory() as tmp:
        run("bash", "-c", f"git -C {args.doctor_from} archive HEAD | tar -x -C {tmp}")
        run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", last / "doctor", tmp)
    run(sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", last / "doctor", "pyelftools==0.33")
    # the device has no zstd: common.sh unpacks the parts with this wheel's
    run(sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version", "3.12",
        "--implementation", "cp", *PLATFORMS, "-d", last, "zstandard")
    lap("the doctor's wheel")
    run(args.models_python, HERE / "make_models.py", last / "models", cwd="/")
    run(args.models_python, HERE / "live_models.py", last / "live-models", cwd="/")
    lap("the toy models")
    for name in ("common.sh", "setup.sh", "go.sh", "scenarios.py", "fix_scenario.py", "fix_go.sh", "live_driver.py",
                 "live_go.sh", "live_rejected.sh"):
        shutil.copy(HERE / name, last / name)
    # a last part small enough rides with last (setup.sh copies it into the parts): one call fewer
    parts = sorted(dest.glob("p[0-9]*"), key=lambda p: int(p.name[1:]))
    if len(parts) > 1 and mib(parts[-1]) + mib(last) + checkout_mib(args.doctor_from) <= 60:
        for piece in parts[-1].iterdir():
            shutil.move(str(piece), last / piece.name)
        parts[-1].rmdir()
    for path in [*sorted(dest.glob("p[0-9]*/*")), *sorted((dest / "last").iterdir())]:
        print(f"{mib(path):8.1f} MiB  {path.relative_to(dest)}")
    print("\n".join(timings))
    print("\n".join(plan(dest, checkout_mib(args.doctor_from))))


if __name__ == "__main__":
    main()
