"""Build the gating Dockerfile of docs/ci.md with a real Docker daemon, where no registry image can be pulled.

docs/ci.md's Dockerfile starts `FROM vllm/vllm-openai` and installs dflash-doctor from its source in the build
context. This script builds it as written but for those lines: FROM names a local base image (BASE, a Debian or Ubuntu
image with python3 and venv, of the host's Python version), and the doctor comes from a wheel of this
checkout, its dependencies from wheels the host downloads into the build context. It then does what
docs/ci.md says, in order, and prints each step's exit status:

1. build without the baseline line; the build-time gate (`--profile ci --target-arch sm_86`) must pass;
2. `docker run --entrypoint dflash-doctor ... baseline save` writes golden.json;
3. build with the baseline: the gate must pass on the unchanged image;
4. build again with flash-attn-4 added (WHEEL_FA4, the real wheel): the gate must fail the build;
5. `docker run IMAGE` (its CMD, with toy models mounted) on a host without a GPU: the start gate must
   exit 1 without starting vLLM.

Not part of the test suite (it needs dockerd and a base image); docs/ci.md says how to run it.
Usage: python3 tools/check_ci_dockerfile.py BASE FA4_WHEEL
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


DOCS = REPO / "docs" / "ci.md"


def docs_dockerfile() -> str:
    text = DOCS.read_text(encoding="utf-8")
    match = re.search(r"```dockerfile\n(.*?)```", text, re.DOTALL)
    if match is None:
        raise SystemExit(f"{DOCS} has no dockerfile block")
    return match.group(1)


def adapted(dockerfile: str, base: str, *, baseline: bool, extra_wheel: str | None) -> str:
    lines = []
    for line in dockerfile.splitlines():
        if line.startswith("FROM "):
            # A venv stands in for the serving image's Python, with the doctor and its dependencies.
            lines += [f"FROM {base}", "RUN python3 -m venv /opt/venv", 'ENV PATH="/opt/venv/bin:$PATH"']
            continue
        if line.startswith("COPY dflash-doctor/"):
            continue  # the doctor's source: a wheel of this checkout stands in for it (below)
        if "pip install" in line and "dflash-doctor" in line:
            lines += ["COPY wheels/ /tmp/wheels/",
                      "RUN python3 -m pip install --no-cache-dir --no-index --find-links /tmp/wheels dflash-doctor"]
            if extra_wheel:
                lines.append(f"RUN python3 -m pip install --no-cache-dir --no-deps /tmp/wheels/{extra_wheel}")
            continue
        if not baseline and ("golden.json" in line):
            line = line.replace(" --baseline /etc/dflash-doctor/golden.json", "")
            if line.startswith("COPY "):
                continue
        lines.append(line)
    return "\n".join(lines) + "\n"


def step(name: str, argv: list[str], expect: int, log: Path) -> bool:
    proc = subprocess.run(argv, check=False, capture_output=True, text=True)
    log.write_text(proc.stdout + proc.stderr)
    ok = (proc.returncode == 0) == (expect == 0)
    print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {proc.returncode} (expected {'0' if expect == 0 else 'non-zero'})"
          f"  [log: {log}]")
    return ok


def main() -> int:
    base, fa4_wheel = sys.argv[1], Path(sys.argv[2])
    work = Path(tempfile.mkdtemp(prefix="dflash-docker-"))
    wheels = work / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(REPO)], check=True)
    # Its dependencies travel in the build context: a builder may reach no index (or only through a
    # proxy whose certificate the base image does not trust).
    (doctor,) = wheels.glob("dflash_doctor-*.whl")
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary", ":all:", "-d", str(wheels),
                    str(doctor)], check=True)
    shutil.copy(fa4_wheel, wheels)
    source = docs_dockerfile()
    results = []

    def build(tag: str, dockerfile: str, expect: int, name: str) -> None:
        (work / "Dockerfile").write_text(dockerfile)
        results.append(step(name, ["docker", "build", "--network", "host", "-t", tag, str(work)], expect,
                            work / f"{tag.replace(':', '-')}.log"))

    build("serving:candidate", adapted(source, base, baseline=False, extra_wheel=None), 0,
          "1. build, gate at build time (--profile ci --target-arch sm_86)")
    results.append(step("2. baseline save from the image",
                        ["docker", "run", "--rm", "--entrypoint", "dflash-doctor", "-v", f"{work}:/out",
                         "serving:candidate", "baseline", "save", "/out/golden.json", "--profile", "ci",
                         "--target-arch", "sm_86"], 0, work / "baseline-save.log"))
    build("serving:gated", adapted(source, base, baseline=True, extra_wheel=None), 0,
          "3. build with the golden baseline")
    build("serving:fa4", adapted(source, base, baseline=True, extra_wheel=fa4_wheel.name), 1,
          "4. build with flash-attn-4 added: the gate stops the build")
    # The image's own CMD, with the tests' toy target and drafter mounted where it names them.
    sys.path.insert(0, str(REPO / "tests"))
    import toymodels

    models = work / "models"
    target = toymodels.write_toy_target(models / "Qwen3-8B")
    config = json.loads((target / "config.json").read_text())
    config["max_position_embeddings"] = 40960  # as Qwen3-8B's, for --max-model-len 32768
    (target / "config.json").write_text(json.dumps(config))
    toymodels.write_toy_drafter(models / "Qwen3-8B-DFlash")
    results.append(step("5. start gate (the image's CMD, toy models mounted) on a host without a GPU",
                        ["docker", "run", "--rm", "-v", f"{models}:/models:ro", "serving:gated"], 1,
                        work / "start.log"))
    print(f"logs and build context: {work}")
    return 0 if all(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
