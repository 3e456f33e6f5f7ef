"""Output a user can act on: the decisive finding first, what follows from it nested under it (its fix not
repeated), the literal exception quoted without -v, skip lines that do not repeat their title, and plain
ASCII to the last byte when stdout is not a terminal or NO_COLOR is set.

Real runs of the CLI on real environments (the real flash-attn-4 wheel, real toy model files, a real plugin
wheel whose findings name their causes); the renderer is also fed a real report whose findings were
edited to carry causes, as the model checks will set them.
"""

from __future__ import annotations

import io
import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import Doctor, finding, validate_report
from realenv import Env, build_wheel, fa4_wheel, install, make_venv

from dflash_doctor.model import CheckResult, Finding, Status

pytest.importorskip("safetensors")

try:
    import toymodels as toy
except ImportError:  # tests/ imported as a package
    from tests import toymodels as toy  # type: ignore[no-redef]

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
LITERAL = "ModuleNotFoundError: No module named 'flash_attn.ops'"


@pytest.fixture(scope="module")
def fa4_env(tmp_path_factory: pytest.TempPathFactory) -> Env:
    env = make_venv(tmp_path_factory.mktemp("fa4"))
    install(env, fa4_wheel())
    return env


def block(lines: list[str], marker: str) -> list[str]:
    """The lines of the check whose line contains `marker`, up to the next check's line."""
    start = next(i for i, line in enumerate(lines) if line.startswith("[") and marker in line)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("[") or not lines[i]), len(lines))
    return lines[start:end]


def indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def line_with(lines: list[str], marker: str) -> str:
    (found,) = [line for line in lines if marker in line]
    return found


# ------------------------------------------------------------------------- a real run with causes

CAUSING_PLUGIN = '''
from dflash_doctor.model import Finding, Remediation, Status

ROOT_FIX = Remediation("echo fix-the-root", "fixes the root and all that follows")


class CausesCheck:
    id = "site"  # its findings' ids are its own: site.<name>
    layer = "site"
    title = "Site causes"
    needs = frozenset({"target"})
    after = frozenset()
    requires_gpu = False

    def judge(self, facts):
        yield Finding("site.orphan", Status.FAIL, "its cause is in no report", cause="site.nowhere")
        yield Finding("site.follows", Status.FAIL, "a consequence", remediation=(ROOT_FIX,), cause="site.decisive")
        yield Finding("site.deeper", Status.WARN, "a consequence of the consequence", cause="site.follows")
        yield Finding("site.decisive", Status.FAIL, "the root of it all", remediation=(ROOT_FIX,))
        yield Finding("site.after-namespace", Status.WARN, "follows from the namespace",
                      cause="namespaces.v4-without-v2")
        yield Finding("site.loop-a", Status.WARN, "loop a", cause="site.loop-b")
        yield Finding("site.loop-b", Status.WARN, "loop b", cause="site.loop-a")
        yield Finding("site.passing", Status.PASS, "passing")
        yield Finding("site.from-a-pass", Status.FAIL, "a failure does not hide under a pass", cause="site.passing")
'''


def test_consequences_are_nested_under_their_cause_across_checks_with_the_fix_once(
        doctor: Doctor, fa4_env: Env, tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path / "wheels", "acme-causes", "0.1", {"acme_causes.py": CAUSING_PLUGIN},
                        entry_points={"dflash_doctor.checks": {"site-causes": "acme_causes:CausesCheck"}})
    plugins = tmp_path / "plugins"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target",
                    str(plugins), str(wheel)], check=True)
    env = {"PYTHONPATH": os.pathsep.join([str(plugins), str(ROOT)])}
    markdown = tmp_path / "ticket.md"
    args = ("--python", str(fa4_env.python), "--no-gpu", "--only", "python,site")
    proc = doctor(*args, "--markdown", str(markdown), env=env)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    out = proc.stdout
    assert out.isascii()
    lines = out.splitlines()

    # Checks with a failing cause first, in declared order; then warnings; then the rest.
    check_lines = [line for line in lines if line.startswith("[")]
    assert check_lines[0].startswith("[FAIL]") and "Installed distributions" in check_lines[0]
    assert "Site causes" in check_lines[1]
    assert check_lines[1].endswith("[site.decisive]")  # the decisive finding heads its check, not the orphan
    # The footer names the first decisive finding and explains that one.
    assert "start with: flash-attn-4 4.0.0b36 requires torch" in out
    assert lines[-2] == "Explain a finding: dflash-doctor explain distributions.requirement-missing"

    site = block(lines, "Site causes")
    follows = line_with(site, "[site.follows]")
    deeper = line_with(site, "[site.deeper]")
    assert "follows from site.decisive" in follows and "follows from site.follows" in deeper
    assert indent(line_with(site, "[site.orphan]")) == 4 < indent(follows) == 8 < indent(deeper) == 10
    assert site.index(follows) < site.index(deeper) < site.index(line_with(site, "[site.orphan]"))
    assert out.count("echo fix-the-root") == 1  # the consequence's fix is its cause's: shown once
    # A cause in no report and a failure "following" a pass: each shown as a finding of its own.
    for own in ("[site.orphan]", "[site.from-a-pass]"):
        assert line_with(site, own).startswith("    [")
    # A cycle of causes is cut where it closes: both shown, one under the other.
    loop_a, loop_b = line_with(site, "[site.loop-a]"), line_with(site, "[site.loop-b]")
    assert loop_b.startswith("    [") and "follows from site.loop-b" in loop_a
    assert "follows from" not in line_with(site, "[site.orphan]")
    assert "follows from" not in line_with(site, "[site.from-a-pass]")

    # Across checks: nested under the built-in finding it follows from, naming its own check.
    namespace = block(lines, "flash_attn namespace")
    nested = line_with(namespace, "[site.after-namespace]")
    assert "follows from namespaces.v4-without-v2 in Site causes" in nested
    assert "site.after-namespace" not in "\n".join(site)

    text = markdown.read_text()
    assert "**Follows from `site.decisive`:**" in text
    assert "- ❌ fail a consequence `site.follows`" in text
    assert "  - ⚠️ warn a consequence of the consequence `site.deeper`" in text
    assert text.count("echo fix-the-root") == 1
    assert "#### ❌ fail a consequence" not in text

    report, _ = doctor.report(*args, env=env)
    assert finding(report, "site.follows")["cause"] == "site.decisive"


# ----------------------------------------------------------- a real report whose checks set causes


def hidden_size_report(doctor: Doctor, tmp_path: Path) -> dict[str, Any]:
    """A real run: a toy target and a drafter whose config.json says hidden_size 4096 (the weights are 64)."""
    target = toy.write_toy_target(tmp_path / "target")
    drafter = toy.write_toy_drafter(tmp_path / "drafter", config_overrides={"hidden_size": 4096})
    spec = json.dumps({"method": "dflash", "model": str(drafter), "num_speculative_tokens": 15})
    proc = doctor("serve", "--no-gpu", "--json", "-", "--", "vllm", "serve", str(target), "--max-model-len", "4096",
                  "--speculative-config", spec)
    report: dict[str, Any] = validate_report(json.loads(proc.stdout))
    return report


CONSEQUENCES = ("drafter.fc-width", "drafter.tensor-shape", "serve-command.drafter-broken")


def render_terminal(report: dict[str, Any]) -> str:
    from dflash_doctor.render.terminal import TerminalReporter, make_console

    stream = io.StringIO()
    results = [CheckResult.from_dict(c) for c in report["checks"]]
    TerminalReporter(make_console(stream, plain=True), plain=True).render(report, results)
    return stream.getvalue()


def test_one_wrong_hidden_size_is_one_decisive_fail_with_its_consequences_under_it(
        doctor: Doctor, tmp_path: Path) -> None:
    report = hidden_size_report(doctor, tmp_path)
    # The drafter check marks what follows from the wrong hidden_size (12 findings without it).
    consequences = sum(f.get("cause") == "drafter.hidden-size-mismatch"
                       for check in report["checks"] for f in check["findings"] if f["id"] in CONSEQUENCES)
    assert consequences >= 12
    validate_report(report)
    out = render_terminal(report)
    assert out.isascii()
    lines = out.splitlines()
    drafter = block(lines, "DFlash drafter against its target")
    assert drafter[0].startswith("[FAIL]") and drafter[0].endswith("[drafter.hidden-size-mismatch]")
    assert not any(line.startswith("    [FAIL]") for line in drafter)  # no other FAIL at the findings' level
    nested = [line for line in drafter if "follows from drafter.hidden-size-mismatch" in line]
    assert len(nested) == consequences
    assert all(indent(line) == 8 for line in nested)
    broken = line_with(drafter, "[serve-command.drafter-broken]")
    assert "in vllm serve command line" in broken  # nested under its cause, though another check's
    serve = block(lines, "vllm serve command line")
    assert "[serve-command.drafter-broken]" not in "\n".join(serve)
    assert next(line for line in lines if line.startswith("[")) == drafter[0]  # the decisive check comes first
    assert f"[drafter.hidden-size-mismatch] (DFlash drafter against its target); {consequences} more follow" in out
    assert "Explain a finding: dflash-doctor explain drafter.hidden-size-mismatch" in out

    from dflash_doctor.render import markdown
    from dflash_doctor.render.text import markdown as shown

    text = markdown.render(report)
    assert text.count("#### ❌ fail") == text.count("#### ") - text.count("#### ⚠️")  # only roots are headings
    assert "drafter.tensor-shape`" in text and "#### ❌ fail /" not in text.replace(
        f"#### ❌ fail {shown(finding(report, 'drafter.hidden-size-mismatch')['title'])}", "")
    assert "**Follows from `drafter.hidden-size-mismatch`:**" in text


# ------------------------------------------------------------------------------------ default output


def test_the_default_output_quotes_the_exception_vllm_will_raise(doctor: Doctor, fa4_env: Env, tmp_path: Path) -> None:
    markdown = tmp_path / "ticket.md"
    proc = doctor("--python", str(fa4_env.python), "--no-gpu", "--only", "imports", "--markdown", str(markdown))
    imports = block(proc.stdout.splitlines(), "flash_attn rotary import")
    # Quoted once: on a `raises:` line, or as the finding's first detail line when the check puts it there.
    quoted = [line.strip() for line in imports if LITERAL in line]
    assert quoted in ([f"raises: {LITERAL}"], [LITERAL]), imports
    assert f"Raises: `{LITERAL}`" in markdown.read_text() or f"\n{LITERAL}" in markdown.read_text()


def test_skip_lines_do_not_repeat_the_checks_title(doctor: Doctor) -> None:
    proc = doctor("--no-gpu")
    assert proc.returncode == 0, proc.stderr
    skips = [line for line in proc.stdout.splitlines() if line.startswith("[skip]")]
    assert len(skips) >= 8
    for line in skips:
        match = re.match(r"\[skip\]\s+(.+?) - (.+)$", line)
        assert match, line
        title, said = match.groups()
        assert not said.lower().startswith(title.lower()), line
        assert not re.match(r"[^:]{1,40}: skipped", said), line
    assert any(re.match(r"\[skip\]\s+Model files - skipped, ", line) for line in skips)
    assert any(re.match(r"\[skip\]\s+GPUs - skipped \(--no-gpu\)", line) for line in skips)


# ------------------------------------------------------------------------------------------ ASCII


@pytest.fixture(scope="module")
def noisy(fa4_env: Env, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """A run with many findings: a broken env (flash-attn-4 alone), toy models under a non-ASCII path with
    a drafter that disagrees with its target, and a serve command with bad values."""
    models = tmp_path_factory.mktemp("models") / "modèles→2026"
    target = toy.write_toy_target(models / "target")
    drafter = toy.write_toy_drafter(models / "drafter", config_overrides={"hidden_size": 4096})
    spec = json.dumps({"method": "dflash", "model": str(drafter), "num_speculative_tokens": 15, "bogus": 1})
    return ["serve", "--python", str(fa4_env.python), "--no-gpu", "--", "vllm", "serve", str(target),
            "--max-model-len", "32768", "--max-num-batched-tokens", "2048", "--speculative-config", spec]


@pytest.mark.parametrize("verbose", [False, True], ids=["default", "verbose"])
def test_piped_output_is_ascii_to_the_last_byte(doctor: Doctor, noisy: list[str], verbose: bool) -> None:
    proc = doctor(*noisy[:1], *(["-v"] if verbose else []), *noisy[1:])
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.count("\n") > 30
    assert proc.stdout.isascii(), sorted({c for c in proc.stdout if not c.isascii()})
    assert proc.stderr.isascii()
    assert "mod\\xe8les->2026" in proc.stdout  # another path's letters are escaped, never silently changed
    assert "Traceback" not in proc.stderr


def _on_a_terminal(argv: list[str], env: dict[str, str]) -> bytes:
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "dflash_doctor", *argv], stdin=subprocess.DEVNULL,
                            stdout=follower, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the terminal's other end closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    proc.wait(timeout=120)
    return b"".join(chunks)


def test_on_a_terminal_no_color_makes_the_output_ascii(noisy: list[str]) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("NO_COLOR", None)
    coloured = _on_a_terminal(noisy, env)
    assert not coloured.isascii()  # a terminal gets the Unicode marks and colour
    plain = _on_a_terminal(noisy, {**env, "NO_COLOR": "1"})
    assert plain.isascii(), sorted({chr(b) for b in plain if b > 127})
    assert b"\x1b[" not in plain
    assert b"[FAIL]" in plain


def test_of_several_findings_with_the_cause_id_the_one_whose_evidence_agrees_is_the_cause() -> None:
    """Two missing requirements are two `distributions.requirement-missing` findings; an extension that fails because
    torch is missing follows from the torch one, not from whichever comes first."""
    missing = [
        Finding("distributions.requirement-missing", Status.FAIL, f"vllm 0.20.1 requires {name}, which is not installed",
                evidence={"requirer": "vllm", "requirement": requirement})
        for name, requirement in (("transformers", "transformers>=4.56.0"), ("torch", "torch==2.11.0"))]
    extension = Finding("extensions.dependency-missing", Status.FAIL, "vllm: extension vllm._C does not load",
                        evidence={"missing": "torch", "requirement": "torch==2.11.0", "requirer": "vllm"},
                        cause="distributions.requirement-missing")
    results = [CheckResult("distributions", "python", "Installed distributions", Status.FAIL, tuple(missing)),
               CheckResult("extensions", "python", "Compiled extensions load", Status.FAIL, (extension,))]
    lines = render_terminal({"checks": [r.to_dict() for r in results]}).splitlines()
    torch_line = next(i for i, line in enumerate(lines) if "requires torch" in line)
    nested = next(i for i, line in enumerate(lines) if "vllm._C does not load" in line)
    transformers_line = next(i for i, line in enumerate(lines) if "requires transformers" in line)
    assert torch_line < nested and indent(lines[nested]) > indent(lines[torch_line])
    assert not transformers_line < nested < torch_line
