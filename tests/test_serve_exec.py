"""`dflash-doctor serve --exec -- vllm serve ...` for real: when the checks pass, the doctor's process becomes
the serve command, with its arguments and environment exactly as given, run by the `vllm` it judged (the
target interpreter's own console script); when they fail, or the program is another one, nothing starts.

The `vllm` the doctor execs here is a stand-in for the server: a real console script, installed by pip into
the target venv from a small wheel built for the test (harmless: it records the argv and environment it was
started with, byte for byte, and exits 7). Another `vllm` is first on PATH: a small real program compiled for
the test, recording to its own file, which must never run. Everything else is real: the doctor runs in a
subprocess against a venv holding the real vLLM 0.20.1 wheel, and the toy target and drafter are real
safetensors files.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("safetensors")

from realenv import build_wheel, install, make_venv
from stacks import add_to_path, vllm_site
from test_models_check import patch_config

try:
    import toymodels as toy
except ImportError:  # tests/ imported as a package
    from tests import toymodels as toy  # type: ignore[no-redef]

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent

RECORDER_C = r"""
#include <stdio.h>
extern char **environ;
int main(int argc, char **argv) {
    FILE *out = fopen(RECORD_PATH, "wb");
    if (!out) return 99;
    fprintf(out, "%d\n", argc);
    for (int i = 0; i < argc; i++) { fputs(argv[i], out); fputc(0, out); }
    for (char **e = environ; *e; e++) { fputs(*e, out); fputc(0, out); }
    fclose(out);
    return 7;
}
"""


def build_recorder(bin_dir: Path, record: Path) -> Path:
    """A real executable named `vllm` that records argv and environ to `record` and exits 7."""
    if shutil.which("cc") is None:
        pytest.skip("no C compiler to build the stand-in server")
    source = bin_dir / "recorder.c"
    source.write_text(RECORDER_C)
    program = bin_dir / "vllm"
    subprocess.run(["cc", f'-DRECORD_PATH="{record}"', "-o", str(program), str(source)], check=True)
    return program


STAND_IN = """import os, sys


def main():
    with open(RECORD, "wb") as out:
        out.write(b"%d\\n" % len(sys.argv))
        for word in sys.argv:
            out.write(os.fsencode(word) + b"\\0")
        for key, value in os.environ.items():
            out.write(os.fsencode(key) + b"=" + os.fsencode(value) + b"\\0")
    return 7
"""


def install_stand_in(env: object, wheels: Path, record: Path) -> Path:
    """A real `vllm` console script in `env`, installed by pip, that records argv and environ to `record`."""
    wheel = build_wheel(wheels, "vllm-stand-in", "1.0", {"vllm_stand_in.py": f"RECORD = {str(record)!r}\n" + STAND_IN},
                        entry_points={"console_scripts": {"vllm": "vllm_stand_in:main"}})
    install(env, wheel)  # type: ignore[arg-type]
    return Path(str(env.python)).parent / "vllm"  # type: ignore[attr-defined]


def read_record(record: Path) -> tuple[list[str], dict[str, str]]:
    raw = record.read_bytes()
    count_line, _, rest = raw.partition(b"\n")
    words = [w.decode() for w in rest.split(b"\0")[:-1]]
    count = int(count_line)
    argv, env_words = words[:count], words[count:]
    return argv, dict(w.split("=", 1) for w in env_words)


@pytest.fixture
def setup(tmp_path: Path) -> dict[str, object]:
    env = make_venv(tmp_path)
    add_to_path(env, vllm_site("0.20.1"))
    target = toy.write_toy_target(tmp_path / "target")
    patch_config(target, max_position_embeddings=40960)
    drafter = toy.write_toy_drafter(tmp_path / "drafter")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record, path_record = tmp_path / "record", tmp_path / "path-record"
    script = install_stand_in(env, tmp_path, record)
    path_vllm = build_recorder(bin_dir, path_record)  # first on PATH: never the one to run
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    environ.update({"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "NO_COLOR": "1",
                    "PYTHONCOERCECLOCALE": "0",  # the stand-in's Python adds nothing to the environment it records
                    "DFLASH_DOCTOR_TEST_MARK": "exec 'quoted' value\twith tab"})
    return {"python": env.python, "target": target, "drafter": drafter, "record": record, "environ": environ,
            "cwd": tmp_path, "script": script, "path_record": path_record, "path_vllm": path_vllm}


def run_gate(setup: dict[str, object], command: list[str], *extra: str,
             python: object = None) -> subprocess.CompletedProcess[str]:
    # The checkout under test, without PYTHONPATH (which the exec'd command would inherit): `-m` alone would
    # run whichever dflash_doctor the interpreter has installed.
    doctor = [sys.executable, "-c", (f"import runpy, sys; sys.path.insert(0, {str(ROOT)!r}); "
              "runpy.run_module('dflash_doctor', run_name='__main__', alter_sys=True)"), "serve", "--exec", "--python", str(python or setup["python"]),
              "--only", "serve-command", "--no-vllm-parser", "--gpus", "2", "--gpu-memory", "48", *extra, "--", *command]
    return subprocess.run(doctor, check=False, cwd=str(setup["cwd"]), env=setup["environ"],  # type: ignore[arg-type]
                          capture_output=True, text=True, timeout=300)


def spec(drafter: object, **extra: object) -> str:
    return json.dumps({"method": "dflash", "model": str(drafter), "num_speculative_tokens": 15, **extra})


def test_exec_replaces_the_doctor_with_the_serve_command_argv_and_env_untouched(setup: dict[str, object]) -> None:
    command = ["vllm", "serve", str(setup["target"]), "--tensor-parallel-size", "2", "--max-model-len", "32768",
               "--max-num-batched-tokens", "32768", "--language-model-only", "--speculative-config",
               spec(setup["drafter"]), "--served-model-name", "a b  c"]
    proc = run_gate(setup, command)
    assert proc.returncode == 7, proc.stdout + proc.stderr  # the stand-in's own exit code: the doctor is gone
    argv, environ = read_record(setup["record"])  # type: ignore[arg-type]
    assert argv == [str(setup["script"]), *command[1:]]  # the target's own `vllm`, given the arguments as they were
    assert environ == setup["environ"]
    assert not Path(str(setup["path_record"])).exists()  # the `vllm` first on PATH never ran
    assert "vllm serve command line" in proc.stdout  # the verdict was printed before the exec


def test_a_failing_check_exits_1_and_starts_nothing(setup: dict[str, object]) -> None:
    command = ["vllm", "serve", str(setup["target"]), "--speculative-config",
               json.dumps({"method": "dflash", "model": str(setup["drafter"])})]
    proc = run_gate(setup, command)
    assert proc.returncode == 1
    assert not Path(str(setup["record"])).exists()
    assert "not starting `vllm serve" in proc.stderr
    assert "serve-command.spec-k-missing" in proc.stdout


def test_a_serve_program_that_cannot_be_started_exits_127(setup: dict[str, object]) -> None:
    command = [str(Path(str(setup["cwd"])) / "missing" / "vllm"), "serve", str(setup["target"]),
               "--max-num-batched-tokens", "32768", "--speculative-config", spec(setup["drafter"])]
    proc = run_gate(setup, command)
    assert proc.returncode == 127 and "cannot start" in proc.stderr
    assert not Path(str(setup["record"])).exists()


def test_a_secret_flag_reaches_the_serve_command_but_no_output(setup: dict[str, object]) -> None:
    command = ["vllm", "serve", str(setup["target"]), "--tensor-parallel-size", "2", "--max-model-len", "32768",
               "--max-num-batched-tokens", "32768", "--speculative-config", spec(setup["drafter"]),
               "--api-key", "plain-secret-4711"]
    proc = run_gate(setup, command)
    assert proc.returncode == 7, proc.stdout + proc.stderr
    argv, _ = read_record(setup["record"])  # type: ignore[arg-type]
    assert argv[1:] == command[1:]  # the real value, untouched
    assert "plain-secret-4711" not in proc.stdout + proc.stderr
    failing = run_gate(setup, ["vllm", "serve", str(setup["target"]), "--api-key", "plain-secret-4711",
                               "--speculative-config", json.dumps({"method": "dflash", "model": str(setup["drafter"])})])
    assert failing.returncode == 1 and "not starting `vllm serve" in failing.stderr
    assert "plain-secret-4711" not in failing.stdout + failing.stderr


def good_command(setup: dict[str, object], program: str = "vllm") -> list[str]:
    return [program, "serve", str(setup["target"]), "--tensor-parallel-size", "2", "--max-model-len", "32768",
            "--max-num-batched-tokens", "32768", "--speculative-config", spec(setup["drafter"])]


def test_a_vllm_path_other_than_the_judged_one_is_refused_with_126(setup: dict[str, object]) -> None:
    proc = run_gate(setup, good_command(setup, str(setup["path_vllm"])))
    assert proc.returncode == 126, proc.stdout + proc.stderr
    assert "not starting" in proc.stderr and "is not" in proc.stderr and "Traceback" not in proc.stderr
    assert not Path(str(setup["path_record"])).exists() and not Path(str(setup["record"])).exists()
    # The judged script's own path is fine.
    assert run_gate(setup, good_command(setup, str(setup["script"]))).returncode == 7
    assert Path(str(setup["record"])).exists() and not Path(str(setup["path_record"])).exists()


def test_a_console_script_of_another_interpreter_is_not_the_judged_vllm(setup: dict[str, object], tmp_path: Path) -> None:
    other = make_venv(tmp_path / "other")
    add_to_path(other, vllm_site("0.20.1"))
    # The first venv's script, copied into the second: its #! line names the first venv's interpreter.
    shutil.copy2(str(setup["script"]), other.python.parent / "vllm")
    proc = run_gate(setup, good_command(setup), python=other.python)
    assert proc.returncode == 126, proc.stdout + proc.stderr
    assert f"not {other.python}" in proc.stderr
    assert not Path(str(setup["path_record"])).exists() and not Path(str(setup["record"])).exists()


def test_exec_live_starts_the_judged_vllm_not_the_first_on_path(setup: dict[str, object]) -> None:
    cwd = Path(str(setup["cwd"]))
    proc = run_gate(setup, good_command(setup), "--live", "--live-wait", "20", "--json", str(cwd / "pre.json"))
    assert "server-died" in (cwd / "pre.live.json").read_text(), proc.stdout + proc.stderr  # the stand-in exits 7
    argv, _ = read_record(setup["record"])  # type: ignore[arg-type]
    assert argv[0] == str(setup["script"])
    assert not Path(str(setup["path_record"])).exists()
