"""No remediation the doctor prints runs anything that was written in its inputs.

Names the doctor reads from files and puts into commands (a target environment's path, an ELF file's
DT_NEEDED entry, a weights index's shard and a weights file's name, a model directory, a config.json's
layer_types, a README's base_model, a distribution's version) carry shell payloads: `$(...)`, backticks,
`;` and a newline, each of which would `touch` its own marker. The doctor runs on them for real, then every
remediation command of its report is run as a user pastes it (`bash -c`), in a sandbox directory whose PATH
holds only `touch`: a command fails there (that is fine), but no marker may appear.
"""

from __future__ import annotations

import ctypes
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import Doctor, findings_of, validate_report
from realenv import build_wheel, install, make_venv

pytest.importorskip("safetensors")

try:
    import toymodels as toy
except ImportError:  # tests/ imported as a package
    from tests import toymodels as toy  # type: ignore[no-redef]

pytestmark = pytest.mark.slow


def payload(where: str) -> str:
    """A shell payload that leaves the file PWNED-<where> in the shell's working directory, in four forms."""
    return {"env": "$(touch${IFS}PWNED-env)", "weights": "$(touch${IFS}PWNED-weights)",
            "index": "`touch${IFS}PWNED-index`", "target": ";touch${IFS}PWNED-target;",
            "drafter": "$(touch${IFS}PWNED-drafter)", "tokenizer": "\ntouch PWNED-tokenizer\n",
            "layer": "'$(touch${IFS}PWNED-layer)'", "readme": "$(touch${IFS}PWNED-readme)",
            "elf": "$(touch${IFS}PWNED-elf)", "version": "$(touch${IFS}PWNED-version)",
            "missing": "$(touch${IFS}PWNED-missing)"}[where]


def _driver_present() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


def _extension_needing(build: Path, libraries: list[tuple[str, str]]) -> bytes:
    """A real CPython extension `_kernels` whose DT_NEEDED lists `libraries` ((soname, function) in order)."""
    import sysconfig

    stubs = build / "stubs"
    stubs.mkdir(parents=True, exist_ok=True)
    for soname, function in libraries:
        (stubs / "stub.c").write_text(f"int {function}(unsigned int flags) {{ return (int) flags; }}\n")
        subprocess.run(["cc", "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", str(stubs / soname),
                        str(stubs / "stub.c")], check=True)
    source = build / "_kernels.c"
    source.write_text("#define PY_SSIZE_T_CLEAN\n#include <Python.h>\n"
                      + "".join(f"extern int {f}(unsigned int);\n" for _, f in libraries)
                      + 'static struct PyModuleDef d = {PyModuleDef_HEAD_INIT, "_kernels", NULL, -1, NULL};\n'
                      + "PyMODINIT_FUNC PyInit__kernels(void) {\n" + "".join(f"    {f}(0);\n" for _, f in libraries)
                      + "    return PyModule_Create(&d);\n}\n")
    output = build / f"_kernels{sysconfig.get_config_var('EXT_SUFFIX')}"
    subprocess.run(["cc", "-shared", "-fPIC", f"-I{sysconfig.get_paths()['include']}", "-o", str(output),
                    str(source), f"-L{stubs}", *(f"-l:{soname}" for soname, _ in libraries)], check=True)
    return output.read_bytes()


def hostile_inputs(base: Path) -> tuple[Any, list[str]]:
    """A target environment and a serve command whose every name read from a file carries a payload."""
    env = make_venv(base, name=f"env{payload('env')}")
    if shutil.which("cc") and not _driver_present():
        # The loader stops at libcuda.so.1 (the driver's) and the doctor lists the other DT_NEEDED it lacks.
        tag = f"cp{sys.version_info[0]}{sys.version_info[1]}-cp{sys.version_info[0]}{sys.version_info[1]}-linux_x86_64"
        import sysconfig

        extension = _extension_needing(base / "build", [("libcuda.so.1", "cuInit"),
                                                        (f"libfz{payload('elf')}.so.1", "fzInit")])
        install(env, build_wheel(base / "wheels", "flashinfer-python", "0.5.0", {
            "flashinfer/__init__.py": "",
            f"flashinfer/_kernels{sysconfig.get_config_var('EXT_SUFFIX')}": extension,
        }, tag=tag))
    # A distribution whose metadata names a version no installer can read, and a broken RECORD.
    dist_info = env.site_packages / "einops-0.8.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: einops\nVersion: 0.8{payload('version')}\n")
    (dist_info / "RECORD").write_bytes(b"\xff\xfe not a csv \x00\n")

    target = toy.write_toy_target(base / f"Toy-2L{payload('target')}", layers=2)
    drafter = toy.write_toy_drafter(base / f"drafter{payload('drafter')}", target_layer_ids=(1, 3), num_target_layers=4)
    config = json.loads((drafter / "config.json").read_text())
    config["layer_types"] = [f"full_attention{payload('layer')}", "full_attention"]  # 2 entries for 1 layer
    (drafter / "config.json").write_text(json.dumps(config))
    (drafter / "README.md").write_text(f"---\nbase_model:\n- toy-org/Toy-4L{payload('readme')}\ntags:\n- dflash\n---\n")
    (drafter / "model.safetensors").rename(drafter / f"w{payload('weights')}.safetensors")
    (drafter / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {"fc.weight": f"model{payload('index')}.safetensors"}}))
    argv = ["vllm", "serve", str(target), "--tokenizer", str(base / f"tok{payload('tokenizer')}"),
            "--speculative-config", json.dumps({"method": "dflash", "model": str(drafter), "num_speculative_tokens": 15})]
    return env, argv


def run_as_pasted(commands: list[str], sandbox: Path) -> list[str]:
    """Run each command with `bash -c` in `sandbox`, PATH holding only `touch`; the markers left there."""
    tools = sandbox / "bin"
    tools.mkdir(parents=True)
    touch = shutil.which("touch")
    assert touch is not None
    (tools / "touch").symlink_to(touch)
    bash = shutil.which("bash")
    assert bash is not None
    for command in commands:
        subprocess.run([bash, "-c", command], cwd=sandbox, capture_output=True, timeout=60, check=False,
                       env={"PATH": str(tools), "HOME": str(sandbox), "PIP_NO_INDEX": "1", "LC_ALL": "C"})
    return sorted(p.name for p in sandbox.rglob("PWNED*"))


def test_no_remediation_run_by_a_shell_executes_anything_written_in_the_inputs(doctor: Doctor, tmp_path: Path) -> None:
    env, argv = hostile_inputs(tmp_path / "inputs")
    proc = doctor("serve", "--python", str(env.python), "--no-gpu", "--no-vllm-parser", "--json", "-", "--", *argv)
    # A second run, for a target directory that is not there (relative: vLLM resolves it from its working directory).
    missing = doctor("serve", "--python", str(env.python), "--no-gpu", "--no-vllm-parser", "--json", "-", "--",
                     "vllm", "serve", f"./gone{payload('missing')}")
    reports = [validate_report(json.loads(p.stdout)) for p in (proc, missing)]
    commands = [r["command"] for report in reports for f in findings_of(report) for r in f.get("remediation") or []]
    by_id = {f["id"] for report in reports for f in findings_of(report) if f.get("remediation")}
    # The remediations that take a name from the inputs are all there (else the test proves nothing about them).
    expected = {"drafter.weights-file", "drafter.layer-types-length", "drafter.made-for", "serve-command.token-budget",
                "distributions.record-broken", "model-files.dir-missing"}
    if (tmp_path / "inputs" / "wheels").exists():
        expected.add("extensions.library-not-found")
    assert expected <= by_id, (sorted(expected - by_id), sorted(by_id), proc.stderr[-2000:])
    assert any("PWNED-weights" in c and "PWNED-index" in c for c in commands)
    assert any("PWNED-readme" in c for c in commands)
    assert any("PWNED-layer" in c for c in commands)
    assert any("PWNED-env" in c for c in commands)
    assert any("PWNED-missing" in c for c in commands)
    assert not (tmp_path / "sandbox").exists()
    assert run_as_pasted(commands, tmp_path / "sandbox") == [], "\n".join(commands)
    assert not list((tmp_path / "inputs").rglob("PWNED*"))


def test_a_command_word_is_quoted_whatever_it_holds() -> None:
    from dflash_doctor.checks.remedy import export, join, quote

    for word in ["$(touch PWNED)", "`id`", "a;b", "a\nb", "it's", "~", "*", "-rf", ""]:
        out = subprocess.run(["bash", "-c", f"printf '%s' {quote(word)}"], capture_output=True, text=True, check=True)
        assert out.stdout == word
    assert join(["mv", "--", "/a b", "w$(x).safetensors"]) == "mv -- '/a b' 'w$(x).safetensors'"
    assert export("TRITON_LIBCUDA_PATH", "/usr/lib/x86_64-linux-gnu") == "export TRITON_LIBCUDA_PATH=/usr/lib/x86_64-linux-gnu"
    assert export("X", "a$(b)") == "export X='a$(b)'"
