"""What the target says cannot pass for something the doctor says, in any output, and the bounds hold.

A finding's detail keeps the line breaks of what it quotes (an exception message, a log), so a package whose
import raises a message shaped like the doctor's own `fix:` heading and `$ ` command could otherwise show, in the
plain view, the Markdown report, the JUnit body and a GitHub annotation, a line every user reads as a fix to paste.
"""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import Doctor
from realenv import Env, make_venv
from test_ci_gate import parse_workflow_command

ROOT = Path(__file__).resolve().parent.parent

# What a package's __init__ raises: the doctor's fix heading and a command, as each view writes them.
FORGED = "broken build\n  fix:\n          $ touch PWNED-detail\nfix: $ touch PWNED-annotation\n    FIX: touch PWNED-x"


@pytest.fixture(scope="module")
def raising_env(tmp_path_factory: pytest.TempPathFactory) -> Env:
    env = make_venv(tmp_path_factory.mktemp("raising"))
    dist_info = env.site_packages / "flash_attn-2.8.3.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: flash-attn\nVersion: 2.8.3\n")
    (dist_info / "top_level.txt").write_text("flash_attn\n")
    (dist_info / "RECORD").write_text("flash_attn/__init__.py,,\n")
    (env.site_packages / "flash_attn").mkdir()
    (env.site_packages / "flash_attn" / "__init__.py").write_text(f"raise ImportError({FORGED!r})\n")
    return env


def _lines_of_every_output(doctor: Doctor, env: Env, tmp_path: Path) -> dict[str, list[str]]:
    args = ("--python", str(env.python), "--no-gpu", "--only", "imports")
    plain = doctor(*args, "--markdown", str(tmp_path / "r.md"), "--junit", str(tmp_path / "r.xml"))
    verbose = doctor(*args, "-v")
    github = doctor(*args, "--format", "github", env={"GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")})
    for proc in (plain, verbose, github):
        assert proc.returncode == 1, proc.stderr
    junit = [line for element in ET.fromstring((tmp_path / "r.xml").read_text()).iter()
             for line in (element.text or "").split("\n")]
    annotations = [data_line for line in github.stdout.split("\n")
                   for data_line in ((parse_workflow_command(line) or ("", {}, ""))[2].split("\n"))]
    return {"plain": plain.stdout.split("\n"), "verbose": verbose.stdout.split("\n"),
            "markdown": (tmp_path / "r.md").read_text().split("\n"), "junit": junit, "github": annotations}


def test_an_exception_shaped_like_a_fix_shows_no_fix_line_in_any_output(
        doctor: Doctor, raising_env: Env, tmp_path: Path) -> None:
    outputs = _lines_of_every_output(doctor, raising_env, tmp_path)
    assert any("broken build" in line for line in outputs["plain"])  # the detail is shown, as text
    for medium, lines in outputs.items():
        for line in lines:
            shown = line.strip()
            # a line that starts as a fix does (the `$ ` prompt, the `fix:` heading) names none of the payload
            if re.match(r"(?i)(fix:\s*)?\$|fix:", shown):
                assert "PWNED" not in shown, (medium, line)
        assert any("touch PWNED-detail" in line for line in lines), medium  # still shown, made inert


# ------------------------------------------------------------------------------------------------------ bounds


def _peak_rss_of(args: list[str], env: dict[str, str], cwd: Path, timeout: float) -> tuple[int, str, str, int]:
    """Run the doctor as a child of a fresh Python whose only child it is: (peak RSS of it and its probes in
    bytes, stdout, stderr, exit status)."""
    import json
    import os
    import subprocess
    import sys

    script = ("import json, resource, subprocess, sys\n"
              "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
              "print(json.dumps([resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, p.stdout, p.stderr,"
              " p.returncode]))\n")
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.run([sys.executable, "-c", script, sys.executable, "-m", "dflash_doctor", *args],
                          env={**os.environ, "PYTHONPATH": str(root), **env}, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, check=True)
    peak, out, err, code = json.loads(proc.stdout)
    return int(peak), str(out), str(err), int(code)


def test_a_record_of_ten_million_lines_is_a_finding_within_a_gb_and_the_timeout(tmp_path: Path) -> None:
    site = tmp_path / "site"
    dist_info = site / "flash_attn-2.8.3.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: flash-attn\nVersion: 2.8.3\n")
    with (dist_info / "RECORD").open("w") as record:
        record.write("flash_attn/__init__.py,,\n")
        record.write("a,,\n" * 10_000_000)  # 40 MB: under the size cap of a text the probe reads
    (site / "flash_attn").mkdir()
    (site / "flash_attn" / "__init__.py").write_text("")
    import time

    started = time.monotonic()
    peak, out, err, code = _peak_rss_of(["--no-gpu", "--only", "distributions", "--timeout", "60"],
                                        {"PYTHONPATH": f"{Path(__file__).resolve().parent.parent}:{site}"},
                                        tmp_path, timeout=240)
    assert time.monotonic() - started < 60, (out, err)
    assert peak < 1 << 30, peak
    assert code == 1 and "Traceback" not in err, err
    assert "RECORD is unreadable: more than 200000 lines  [distributions.record-broken]" in out, out


# ------------------------------------------------------------------------------------------- usage errors

KEY, SECOND = "zzTopSecretKey42", "zzSecondKey4242"


@pytest.mark.parametrize("argv", [
    ["--no-gpu", "vllm", "serve", "m", "--api-key", KEY, SECOND],  # the serve command without `serve --`
    ["--no-gpu", "--api-k", KEY],
    ["merge", f"--api-key={KEY}", "r.json"],
    ["fix", "--hf-tok", KEY],
    ["list", "--api-keys", KEY],
    ["live", "http://127.0.0.1:9", "--requests", "1", "--api-key", KEY],
], ids=["run", "abbreviated", "merge", "fix", "list", "live"])
def test_a_usage_error_quoting_the_command_line_masks_its_secrets(tmp_path: Path, argv: list[str]) -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    proc = subprocess.run([sys.executable, "-m", "dflash_doctor", *argv, "--x=\x1b]0;TITLE\x07"], cwd=tmp_path,
                          env={**__import__("os").environ, "PYTHONPATH": str(root)}, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().split("\n")
    assert len(lines) == 1 and "error" in lines[0], proc.stderr
    assert KEY not in proc.stderr + proc.stdout and SECOND not in proc.stderr + proc.stdout, proc.stderr
    assert "\x1b" not in proc.stderr and "\\x1b]0;TITLE\\x07" in proc.stderr, proc.stderr


# A JSON text of 16 MB is five million objects: 0.8 GB once parsed, on the unbounded code, and 40 s in `judge`.
MILLIONS = "[" + "{}," * (5 << 20) + "{}]"


@pytest.mark.parametrize("what", ["judge", "merge", "baseline", "config.json"])
def test_json_of_millions_of_values_is_refused_before_it_is_parsed(tmp_path: Path, what: str) -> None:
    import time

    report = tmp_path / "r.json"
    report.write_text('{"schema": "dflash-doctor/report/v1", "checks": ' + MILLIONS + "}")
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"architectures": ["Qwen3ForCausalLM"], "x": ' + MILLIONS + "}")
    argv = {"judge": ["judge", str(report)], "merge": ["merge", str(report)],
            "baseline": ["--no-gpu", "--only", "distributions", "--baseline", str(report)],
            "config.json": ["serve", "--no-gpu", "--only", "model-files", "--", "vllm", "serve", str(model)]}[what]
    started = time.monotonic()
    peak, out, err, code = _peak_rss_of(argv, {}, tmp_path, timeout=300)
    assert time.monotonic() - started < 30, (what, out[-2000:], err[-2000:])
    assert peak < 300 << 20, peak
    assert "Traceback" not in err, err
    assert re.search(r"more than the \d+ read", out + err), (out[-2000:], err[-2000:])  # its own cap, named
    assert code in ((1,) if what in ("merge", "config.json") else (2,)), (code, err)


def _site_with_flash_attn(tmp_path: Path, metadata: str) -> Path:
    site = tmp_path / "site"
    dist_info = site / "flash_attn-2.8.3.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(metadata)
    (dist_info / "RECORD").write_text("flash_attn/__init__.py,,\n")
    (site / "flash_attn").mkdir()
    (site / "flash_attn" / "__init__.py").write_text("")
    return site


@pytest.mark.parametrize(("fields", "says"), [
    ("Requires-Dist: torch\n" * 3_000_000, "its fields come to more than 4 MiB"),  # 63 MB, under the 64 MiB read
    ("Requires-Dist: torch\n" * 20_000, "more than 10000 Requires-Dist fields"),
], ids=["63MB", "20k-requires"])
def test_a_metadata_of_millions_of_fields_is_a_finding_within_a_gb(tmp_path: Path, fields: str, says: str) -> None:
    site = _site_with_flash_attn(tmp_path, "Metadata-Version: 2.1\nName: flash-attn\nVersion: 2.8.3\n" + fields)
    peak, out, err, code = _peak_rss_of(["--no-gpu", "--only", "distributions", "--timeout", "60"],
                                        {"PYTHONPATH": f"{Path(__file__).resolve().parent.parent}:{site}"},
                                        tmp_path, timeout=240)
    assert peak < 1 << 30, peak
    assert code == 1 and "Traceback" not in err, err
    assert f"METADATA is unreadable: {says}  [distributions.metadata-broken]" in out, out


def test_a_metadata_description_is_not_read_as_fields(tmp_path: Path) -> None:
    description = "\n".join(["# flash-attn", "Version: 9.9.9", "Requires-Dist: evil"] * 200_000)  # 7 MB
    site = _site_with_flash_attn(tmp_path, "Metadata-Version: 2.1\nName: flash-attn\nVersion: 2.8.3\n"
                                           "Requires-Dist: einops\n\n" + description)
    peak, out, err, code = _peak_rss_of(["--no-gpu", "--only", "distributions", "--json", "-"],
                                        {"PYTHONPATH": f"{Path(__file__).resolve().parent.parent}:{site}"},
                                        tmp_path, timeout=240)
    import json

    report = json.loads(out)
    items = [item for check in report["checks"] for item in check["facts"]["distributions"]["items"]
             if item["canonical"] == "flash-attn"]
    assert [(i["version"], i["requires"]) for i in items] == [("2.8.3", ["einops"])], items


def test_an_answer_too_large_for_the_doctor_is_said_to_be_so_not_blamed_on_startup_output(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    # 3,000 distributions of 80 requirements each: the probe's answer (every one's Requires-Dist) passes 8 MiB, as
    # 70,000 bare ones do, in a twentieth of the files.
    requires = "".join(f"Requires-Dist: a-requirement-named-at-some-length-{j} (>=1.0)\n" for j in range(80))
    for i in range(3_000):
        dist_info = site / f"pkg{i}-1.0.dist-info"
        dist_info.mkdir()
        (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: pkg{i}\nVersion: 1.0\n{requires}")
    peak, out, err, code = _peak_rss_of(["--no-gpu", "--only", "distributions", "--timeout", "120"],
                                        {"PYTHONPATH": f"{Path(__file__).resolve().parent.parent}:{site}"},
                                        tmp_path, timeout=400)
    assert peak < 1 << 30, peak
    assert code == 1 and "Traceback" not in err, err
    assert "gave an answer of more than 8 MiB and was stopped: the environment holds more than" in out, out
    assert "without end" not in out, out


# ------------------------------------------------------------------------------------------------- secrets

TOKEN = "hfq7Rk2ZpX9mWv4LsN8cTb3YdJ6gHa5E"  # no known token shape: masked as the value of HF_TOKEN only


@pytest.mark.parametrize("lead", [1990, 1990 + len(TOKEN) - 10, 5000], ids=["start-kept", "end-kept-both", "tail"])
def test_a_secret_cut_by_the_trim_of_a_probes_stderr_leaves_no_piece(tmp_path: Path, lead: int) -> None:
    """The import probe keeps the first and last 2,000 characters of what the import wrote to stderr; the
    secret written across either cut is masked on both sides of it."""
    site = _site_with_flash_attn(tmp_path, "Metadata-Version: 2.1\nName: flash-attn\nVersion: 2.8.3\n")
    trail = 1990 if lead == 5000 else 5000
    (site / "flash_attn" / "__init__.py").write_text(
        "import os, sys\n"
        f"sys.stderr.write('A' * {lead} + os.environ['HF_TOKEN'] + 'B' * {trail})\n"
        "sys.stderr.flush()\nraise ImportError('boom')\n")
    root = Path(__file__).resolve().parent.parent
    _, out, err, code = _peak_rss_of(["--no-gpu", "--only", "imports", "-v", "--json", str(tmp_path / "r.json"),
                                      "--markdown", str(tmp_path / "r.md")],
                                     {"PYTHONPATH": f"{root}:{site}", "HF_TOKEN": TOKEN}, tmp_path, timeout=240)
    assert code == 1, err
    text = out + err + (tmp_path / "r.json").read_text() + (tmp_path / "r.md").read_text()
    assert "characters trimmed" in text
    pieces = [TOKEN[i:i + 6] for i in range(len(TOKEN) - 5)]
    assert not [p for p in pieces if p in text], [p for p in pieces if p in text]


@pytest.mark.parametrize("command", ["judge", "merge"])
def test_a_saved_reports_text_quoted_on_stderr_holds_no_workflow_command(tmp_path: Path, command: str) -> None:
    """stderr is in the CI log too; the runner reads `##[name]` anywhere in a line."""
    report = tmp_path / "r.json"
    report.write_text('{"schema": "x ##[error]FORGED\\u001b[2J"}')
    _, out, err, code = _peak_rss_of([command, str(report)], {}, tmp_path, timeout=120)
    assert code in (1, 2), err
    assert "FORGED" in err and "##[" not in out + err and "\x1b" not in err, err


def test_everything_the_doctor_says_on_stderr_goes_through_one_function() -> None:
    """stderr is a terminal or a CI log: every line the doctor writes there quotes paths, exceptions or the command
    line, so it goes through `options.tell` (secrets masked, control characters escaped, no workflow command)."""
    package = Path(__file__).resolve().parent.parent / "dflash_doctor"
    writes = [(str(path.relative_to(package)), line.strip())
              for path in package.rglob("*.py") if "probes" not in path.parts
              for line in path.read_text().splitlines()
              if "sys.stderr.write(" in line or "file=sys.stderr" in line]
    assert len(writes) == 1 and writes[0][0] == "commands/options.py", writes
    from dflash_doctor.commands import options
    assert writes[0][1] in inspect.getsource(options.tell), writes


def test_an_error_line_quoting_a_path_with_controls_and_a_workflow_command_is_shown_safely(tmp_path: Path) -> None:
    hostile = tmp_path / "out\x1b[2J::error::x##[warning]y"
    hostile.mkdir()
    (hostile / "r.json").symlink_to(tmp_path / "elsewhere.json")
    proc = subprocess.run([sys.executable, "-m", "dflash_doctor", "--no-gpu", "--only", "distributions",
                           "--json", str(hostile / "r.json")], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2, proc.stderr
    assert "\x1b" not in proc.stderr and "##[" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
