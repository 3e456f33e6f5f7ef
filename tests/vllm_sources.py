"""Real vLLM source for the tests: the sdist from PyPI, downloaded once into the test cache, of which
only the `vllm/` Python files are unpacked (the doctor reads vLLM's source; it never builds it)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tarfile
from pathlib import Path

CACHE = Path(os.environ.get("DFLASH_DOCTOR_TEST_CACHE", Path.home() / ".cache" / "dflash-doctor-tests"))


def vllm_source(version: str) -> Path:
    """The unpacked `vllm` package directory of vLLM `version`'s sdist."""
    root = CACHE / "vllm-src" / version
    done = root / ".complete"
    if done.exists():
        return root / "vllm"
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return root / "vllm"
        sdists = CACHE / "sdists"
        sdist = sdists / f"vllm-{version}.tar.gz"
        if not sdist.exists():
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                            "--no-build-isolation", "-q", "-d", str(sdists), f"vllm=={version}"], check=True)
        with tarfile.open(sdist) as archive:
            prefix = f"vllm-{version}/vllm/"
            members = [m for m in archive.getmembers() if m.name.startswith(prefix) and m.name.endswith(".py")]
            for member in members:
                member.name = member.name[len(f"vllm-{version}/"):]
            archive.extractall(root, members=members, filter="data")
        done.touch()
    return root / "vllm"
