"""Files planted in a model directory or the Hugging Face cache, where the doctor (or vLLM's validation, which it
hands the directory) reads: a FIFO, a link to /dev/zero, a sparse file of gigabytes. Every file is real (mkfifo,
symlinks to the real /dev/zero, sparse files made with truncate); the doctor runs as a user runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("safetensors")

try:
    import toymodels as toy
except ImportError:  # tests/ imported as a package
    from tests import toymodels as toy  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent.parent


def doctor_models(cwd: Path, target: str, drafter: Path, env: dict[str, str] | None = None,
                  ) -> subprocess.CompletedProcess[str]:
    spec = json.dumps({"method": "dflash", "model": str(drafter), "num_speculative_tokens": 15})
    return subprocess.run([sys.executable, "-m", "dflash_doctor", "serve", "--no-gpu", "--no-vllm-parser",
                           "--only", "model-files", "--timeout", "20", "--json", "-", "--",
                           "vllm", "serve", target, "--speculative-config", spec],
                          cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
                          capture_output=True, text=True, timeout=90, check=False)


@pytest.mark.parametrize("plant", ["fifo", "dev-zero"])
def test_a_tokenizer_config_that_is_no_regular_file_neither_hangs_nor_floods_the_doctor(
    tmp_path: Path, plant: str,
) -> None:
    target = toy.write_toy_target(tmp_path / "target")
    drafter = toy.write_toy_drafter(tmp_path / "drafter")
    planted = target / "tokenizer_config.json"
    planted.unlink()
    if plant == "fifo":
        os.mkfifo(planted)
    else:
        planted.symlink_to("/dev/zero")
    proc = doctor_models(tmp_path, str(target), drafter)  # past its 90 s: TimeoutExpired, the test fails
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert '"id": "doctor.interrupted"' not in proc.stdout
    assert '"model-files"' in proc.stdout


@pytest.mark.parametrize("plant", ["fifo", "dev-zero"])
def test_a_planted_hugging_face_cache_ref_neither_hangs_nor_floods_the_doctor(tmp_path: Path, plant: str) -> None:
    from dflash_doctor.facts.models.models import resolve_model_path

    repo = tmp_path / "hub" / "models--org--model"
    (repo / "refs").mkdir(parents=True)
    if plant == "fifo":
        os.mkfifo(repo / "refs" / "main")
    else:
        (repo / "refs" / "main").symlink_to("/dev/zero")
    drafter = toy.write_toy_drafter(tmp_path / "drafter")
    proc = doctor_models(tmp_path, "org/model", drafter, env={"HF_HUB_CACHE": str(tmp_path / "hub")})
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert '"id": "doctor.interrupted"' not in proc.stdout
    resolved = resolve_model_path("org/model", str(tmp_path), {"HF_HUB_CACHE": str(tmp_path / "hub")})
    assert resolved["path"] is None and resolved["hf_cache"]["revision"] is None


def test_every_json_file_vllms_validation_would_read_whole_is_held_to_the_caps(tmp_path: Path) -> None:
    from dflash_doctor.facts.modelfiles import refused_files

    target = toy.write_toy_target(tmp_path / "target")
    with (target / "hf_quant_config.json").open("wb") as handle:
        handle.truncate(1 << 30)  # sparse: a gigabyte that takes no disk, which vLLM would json.load whole
    os.mkfifo(target / "modules.json")
    with (target / "tokenizer.json").open("r+b") as handle:
        handle.truncate(40 << 20)  # a large vocabulary's tokenizer.json is tens of MB: not refused
    refused = {(r["kind"], Path(r["file"]).name) for r in refused_files(target)}
    assert refused == {("too-large", "hf_quant_config.json"), ("not-a-file", "modules.json")}


def test_serve_exec_never_starts_a_vllm_script_a_record_line_places_outside_the_environment(tmp_path: Path) -> None:
    """A RECORD line of the target's vLLM that leads out of the environment to a `vllm` whose #! line names the
    target interpreter: `serve --exec` starts the environment's own console script, never that one."""
    from realenv import build_wheel, dist_info, install, make_venv

    from dflash_doctor.commands.serve_program import judged_program

    env = make_venv(tmp_path)
    wheel = build_wheel(tmp_path / "wheels", "vllm", "0.20.1", {"vllm/__init__.py": "def main():\n    pass\n"},
                        entry_points={"console_scripts": {"vllm": "vllm:main"}})
    install(env, wheel)
    own = Path(env.python).parent / "vllm"
    assert own.is_file()
    outside = tmp_path / "elsewhere" / "bin" / "vllm"
    outside.parent.mkdir(parents=True)
    outside.write_text(f"#!{env.python}\nopen({str(tmp_path / 'ran')!r}, 'w').write('ran')\n")
    outside.chmod(0o755)
    record = dist_info(env, "vllm") / "RECORD"
    escape = os.path.relpath(outside, record.parent.parent)
    record.write_text(f"{escape},,\n" + record.read_text())
    assert judged_program(["vllm", "serve", "MODEL"], str(env.python), 60) == [str(own), "serve", "MODEL"]
    with pytest.raises(Exception, match="is not"):
        judged_program([str(outside), "serve", "MODEL"], str(env.python), 60)
