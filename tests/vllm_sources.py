"""Real vLLM source for the tests: the sdist from PyPI, downloaded once into the test cache, of which
only the `vllm/` Python files are unpacked (the doctor reads vLLM's source; it never builds it)."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import tarfile
import urllib.request
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
        sdist = pypi_sdist("vllm", version)
        with tarfile.open(sdist) as archive:
            prefix = f"vllm-{version}/vllm/"
            members = [m for m in archive.getmembers() if m.name.startswith(prefix) and m.name.endswith(".py")]
            for member in members:
                member.name = member.name[len(f"vllm-{version}/"):]
            archive.extractall(root, members=members, filter="data")
        done.touch()
    return root / "vllm"


def pypi_sdist(project: str, version: str) -> Path:
    """`project` `version`'s sdist file from PyPI, downloaded once into the test cache's `sdists/`.

    An sdist another helper already cached under `pypi/` (tests/realenv.py's fa2_sdist) is reused."""
    name = f"{project.replace('-', '_')}-{version}.tar.gz"
    for sub in ("sdists", "pypi"):
        if (CACHE / sub / name).is_file():
            return CACHE / sub / name
    destination = CACHE / "sdists" / name
    destination.parent.mkdir(parents=True, exist_ok=True)
    with open(destination.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not destination.exists():
            download_sdist(project, name, destination)
    return destination


def download_sdist(project: str, name: str, destination: Path) -> None:
    """Fetch the sdist file itself through PyPI's simple index, checking PyPI's sha256.

    `pip download --no-binary` cannot do it: pip would run the project's build backend, which for vLLM
    and flash-attn imports torch (or, isolated, builds torch from source)."""
    request = urllib.request.Request(f"https://pypi.org/simple/{project}/",
                                     headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        files = json.load(response)["files"]
    entry = next(f for f in files if f["filename"] == name)
    partial = destination.with_suffix(".part")
    digest = hashlib.sha256()
    with urllib.request.urlopen(entry["url"], timeout=300) as response, open(partial, "wb") as out:
        for block in iter(lambda: response.read(1 << 20), b""):
            digest.update(block)
            out.write(block)
    if digest.hexdigest() != entry["hashes"]["sha256"]:
        partial.unlink()
        raise RuntimeError(f"{name}: sha256 {digest.hexdigest()} differs from PyPI's {entry['hashes']['sha256']}")
    partial.replace(destination)
