"""Nothing the doctor read reaches a screen, a log or a document raw (dflash_doctor/render/text.py).

A real venv whose directory name holds a newline and a shell payload, with a flash-attn dist-info whose METADATA
Version carries escape sequences, a C1 control and a bidi override; a venv whose directory name holds a byte that
is no UTF-8; a real plugin wheel whose finding carries Markdown, HTML, workflow commands and a lone surrogate.
The doctor runs on them for real (on a pseudo-terminal where the terminal is the point), and every output is
read back as bytes: no control character from the inputs is sent, every fix is one line that, pasted into bash,
runs only what it shows, and the Markdown parses (markdown-it, CommonMark with tables) to nothing it did not
write itself.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import unicodedata
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import Doctor, validate_report
from markdown_it import MarkdownIt
from realenv import Env, make_venv
from test_ci_gate import parse_workflow_command
from test_plugin_guests import HEADER, check_class, install_plugin
from test_progress import on_a_terminal

# Anything a control character of the inputs may become when sent as it is (the view's own line breaks aside).
CONTROLS = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff\ufeff]")

# Escape sequences a terminal acts on (a window title, clearing the screen, the cursor up a line over the fix),
# a C1 CSI, a bidi override and isolate.
VERSION = "2.8.3\x1b]0;PWNED-TITLE\x07\x1b[2J\x1b[1A\x9b31m\u202eevil\u2066"
SENT = [b"\x1b]0;PWNED", b"\x1b[2J", "\x9b".encode(), "\u202e".encode(), "\u2066".encode()]
SHOWN = "2.8.3\\x1b]0;PWNED-TITLE\\x07\\x1b[2J\\x1b[1A\\x9b31m\\u202eevil\\u2066"
NEWLINE_DIR = "env\n touch PWNED-dir #"


def crafted_env(parent: Path, name: str = NEWLINE_DIR) -> Env:
    """A venv named `name` with a flash-attn dist-info whose Version is VERSION and a leftover flash_attn/ that no
    distribution's RECORD owns (the namespace check's fix removes it: a command that names the directory)."""
    env = make_venv(parent, name=name)
    dist_info = env.site_packages / "flash_attn-2.8.3.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: flash-attn\nVersion: {VERSION}\n")
    (dist_info / "top_level.txt").write_text("flash_attn\n")
    (dist_info / "RECORD").write_text("")
    (env.site_packages / "flash_attn").mkdir()
    return env


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Env:
    return crafted_env(tmp_path_factory.mktemp("crafted"))


# ------------------------------------------------------------------------------------------ what is visible


def test_every_control_format_and_separator_character_of_this_unicode_is_made_visible() -> None:
    from dflash_doctor.render.text import UNSAFE, log_line, visible

    categories = {"Cc", "Cf", "Cs", "Zl", "Zp"}
    missed = [hex(c) for c in range(sys.maxunicode + 1)
              if unicodedata.category(chr(c)) in categories and not UNSAFE.match(chr(c))]
    assert not missed
    assert visible("a\x1b[2Jb\u202ec\udcffd\ne\x7f\x85") == "a\\x1b[2Jb\\u202ec\\udcffd\\ne\\x7f\\x85"
    assert visible("flash_attn 2.8.3 · é 中") == "flash_attn 2.8.3 · é 中"  # letters and punctuation stay
    assert log_line("  ::add-mask::x ##[error]y") == "  \\x3a:add-mask::x #\\x23[error]y"


def test_a_command_word_holding_any_control_character_is_one_line_bash_runs_to_the_same_bytes(tmp_path: Path) -> None:
    from dflash_doctor.checks.remedy import join
    from dflash_doctor.render.text import UNSAFE, shell_line

    words = [f"/tmp/{NEWLINE_DIR}/x", "a\x1b[1Ab", "jos\u00e9", os.fsdecode(b"a\xffb"), "it's\x07", "a##[error]b\u202e",
             "\t\r\x7f\x9b", "back\\slash\n"]
    for word in words:
        command = f"printf '%s\\0' {join([word, 'x y'])} \"dq\x1b\\\"q\" $'an\x1bsi\\n'"
        expected = subprocess.run(["bash", "-c", command], capture_output=True, check=True).stdout
        for ascii_only in (False, True):
            line = shell_line(command, ascii_only=ascii_only)
            assert line.startswith("$ ") and not UNSAFE.search(line), line
            assert not ascii_only or (line.isascii() and "##[" not in line), line
            assert subprocess.run(["bash", "-c", line[2:]], capture_output=True, check=False).stdout == expected, line
    # What cannot be quoted as one line is a comment that runs nothing, and says why.
    for command in ["echo a\ntouch PWNED", "echo x\x1b", "echo $(printf x)\ntouch PWNED", "echo '\ud800'"]:
        line = shell_line(command)
        assert line.startswith("# not shown as a command to paste (") and "\n" not in line, line
        subprocess.run(["bash", "-c", line], cwd=tmp_path, check=True)
        assert not list(tmp_path.iterdir())


# ---------------------------------------------------------------------------------------------- terminal


def test_a_crafted_version_on_a_terminal_is_shown_as_escapes_and_never_sent(env: Env) -> None:
    # a terminal wide enough that no title wraps, whatever the length of the temporary directory's path
    run = on_a_terminal(["--python", str(env.python), "--no-gpu", "--only", "distributions,namespaces"],
                        size=(40, 1000))
    assert run.returncode in (0, 1), run.stderr
    for raw in SENT:
        assert raw not in run.raw, raw
    shown = re.sub(rb"\x1b\[[0-9;]*m", b"", run.raw).decode()  # the terminal's own colours aside
    assert f"flash-attn {SHOWN}" in shown, shown
    # what is left of ESC is rich's own styling and the status line's cursor control, nothing else
    assert not re.findall(rb"\x1b(?!\[[0-9;?]*[mKAGlh])", run.raw)


@pytest.mark.parametrize("how", ["pipe", "no-color terminal"])
def test_the_plain_view_holds_no_control_character_from_the_inputs(doctor: Doctor, env: Env, how: str) -> None:
    args = ["--python", str(env.python), "--no-gpu", "--only", "distributions,namespaces"]
    if how == "pipe":
        output = doctor(*args).stdout.encode()
    else:
        output = on_a_terminal(args, env={"NO_COLOR": "1"}).raw
    assert output.isascii() and b"\x1b" not in output and b"\x9b" not in output
    assert f"flash-attn {SHOWN}".encode() in output


def test_judge_shows_a_saved_reports_control_characters_as_escapes(doctor: Doctor, env: Env, tmp_path: Path) -> None:
    saved = tmp_path / "report.json"
    doctor("--python", str(env.python), "--no-gpu", "--only", "distributions,namespaces", "--json", str(saved))
    report = validate_report(json.loads(saved.read_text()))
    versions = [item.get("version") for check in report["checks"]
                for item in (check["facts"].get("distributions") or {}).get("items", [])]
    assert VERSION in versions  # the saved facts hold it as read; judging them again shows it as escapes
    judged = doctor("judge", str(saved))
    assert judged.returncode in (0, 1), judged.stderr
    assert judged.stdout.isascii() and "\x1b" not in judged.stdout
    assert f"flash-attn {SHOWN}" in judged.stdout
    on_screen = on_a_terminal(["judge", str(saved)])
    for raw in SENT:
        assert raw not in on_screen.raw, raw


# ------------------------------------------------------------------------------- a fix is one line, anywhere


@dataclass
class Sandbox:
    root: Path
    leftover: Path

    def paste(self, line: str) -> list[str]:
        """Run `line` as a user pastes it into bash, with only touch and find on PATH; the markers left anywhere."""
        self.leftover.mkdir(exist_ok=True)
        subprocess.run([shutil.which("bash") or "/bin/bash", "-c", line], cwd=self.root, capture_output=True, timeout=60, check=False,
                       env={"PATH": str(self.root / "bin"), "HOME": str(self.root), "LC_ALL": "C"})
        return sorted(p.name for p in self.root.parent.rglob("PWNED*"))


def sandbox(tmp_path: Path, env: Env) -> Sandbox:
    root = tmp_path / "sandbox"
    (root / "bin").mkdir(parents=True)
    for tool in ("touch", "find"):
        found = shutil.which(tool)
        assert found is not None
        (root / "bin" / tool).symlink_to(found)
    return Sandbox(root, env.site_packages / "flash_attn")


def fix_lines(outputs: dict[str, str]) -> Iterator[tuple[str, str]]:
    """(medium, the shown fix as a user copies it) from every output."""
    for line in outputs["plain"].split("\n"):
        if line.strip().startswith("$ "):
            yield "plain", line.strip()[2:]
    for block in re.findall(r"(`{3,})console\n(.*?)\n\1", outputs["markdown"], flags=re.DOTALL):
        yield "markdown", block[1]
    for element in ET.fromstring(outputs["junit"]).iter():
        for line in (element.text or "").split("\n"):
            if line.strip().startswith("fix: $ "):
                yield "junit", line.strip()[len("fix: $ "):]
    for line in outputs["github"].split("\n"):
        parsed = parse_workflow_command(line)
        for data_line in (parsed[2].split("\n") if parsed else ()):
            if data_line.startswith("fix: $ "):
                yield "github", data_line[len("fix: $ "):]


def test_a_fix_for_a_directory_named_with_a_newline_is_one_line_that_runs_only_what_it_shows(
        doctor: Doctor, tmp_path: Path) -> None:
    env = crafted_env(tmp_path)  # its own: pasting the fix changes the environment the other tests share
    args = ("--python", str(env.python), "--no-gpu", "--only", "namespaces")
    plain = doctor(*args, "--markdown", str(tmp_path / "r.md"), "--junit", str(tmp_path / "r.xml"))
    github = doctor(*args, "--format", "github", env={"GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")})
    report, _ = doctor.report(*args)
    commands = {step["command"] for check in report["checks"] for f in check["findings"] for step in f["remediation"]}
    assert any("\n" in c for c in commands), commands  # the fix names the directory, newline and all
    outputs = {"plain": plain.stdout, "markdown": (tmp_path / "r.md").read_text(), "github": github.stdout,
               "junit": (tmp_path / "r.xml").read_text()}
    shown = list(fix_lines(outputs))
    assert {medium for medium, _ in shown} == {"plain", "markdown", "junit", "github"}, shown
    box = sandbox(tmp_path, env)
    for medium, line in shown:
        assert "\n" not in line, (medium, line)
        assert box.paste(line) == [], (medium, line)
        assert not box.leftover.exists(), (medium, line)  # and it does what the fix is for
    # Every line of the plain view near a fix, pasted alone, runs nothing from the directory's name.
    lines = plain.stdout.split("\n")
    for index, line in enumerate(lines):
        if line.strip().startswith("$ "):
            for neighbour in lines[index:index + 3]:
                assert box.paste(neighbour.strip().removeprefix("$ ")) == [], neighbour


def test_a_non_utf8_byte_in_the_directory_name_renders_every_document_and_exits_as_judged(
        doctor: Doctor, tmp_path: Path) -> None:
    made = crafted_env(tmp_path, name="envb")
    root = Path(os.fsdecode(os.fsencode(tmp_path) + b"/env\xff"))
    os.rename(made.root, root)
    python = root / "bin" / "python"
    summary = tmp_path / "summary.md"
    files = ("--markdown", str(tmp_path / "r.md"), "--junit", str(tmp_path / "r.xml"))
    proc = doctor("--python", str(python), "--no-gpu", "--only", "distributions,namespaces", *files,
                  "--format", "github", env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert proc.returncode in (0, 1) and "error" not in proc.stderr, proc.stderr
    for path in (tmp_path / "r.md", summary):
        text = path.read_text(encoding="utf-8")
        assert "env\\udcff" in text.replace("\\\\", "\\"), text[:400]
    ticket = doctor("--python", str(python), "--no-gpu", "--only", "distributions,namespaces", "--profile", "ticket",
                    cwd=tmp_path)
    assert ticket.returncode == proc.returncode, ticket.stderr
    assert (tmp_path / "dflash-doctor-report.md").read_text(encoding="utf-8").startswith("### dflash-doctor: ")
    box = sandbox(tmp_path, Env(root, python, root / made.site_packages.relative_to(made.root), made.kind))
    markdown_text = (tmp_path / "r.md").read_text(encoding="utf-8")
    shown = [line for medium, line in fix_lines({"plain": proc.stdout, "markdown": markdown_text, "junit": "<x/>",
                                                 "github": proc.stdout}) if medium in ("markdown", "github")]
    assert shown
    for line in shown:
        box.paste(line)
        assert not box.leftover.exists(), line  # $'...\xff...' names the very directory


# ------------------------------------------------------------------------------------- a plugin's finding

INJECTED_TITLE = ("one\n# Injected heading\n![pixel](https://evil.example/p.png) [link](https://evil.example) "
                  "<img src=x onerror=alert(1)> | a cell | `code` ``` &#x202e; *b* _i_")
INJECTED_DETAIL = "```\n# heading from the detail\n::warning::from the detail\nsee ##[error]here\n<script>x</script>"
INJECTED_EXCEPTION = "RuntimeError: boom\n## Exception heading\n![x](https://evil.example/x.png)\n`tick"
PLUGIN = HEADER + check_class(
    f"yield Finding('site-guest.hostile', Status.FAIL, {INJECTED_TITLE!r}, {INJECTED_DETAIL!r},\n"
    f"              evidence={{'exception': {INJECTED_EXCEPTION!r}}},\n"
    "              remediation=(Remediation('ls -ld /tmp', 'look'),\n"
    "                           Remediation(\"echo '``` x\\n# not a heading' | cat\", 'echo')))\n")


SURROGATE_PLUGIN = HEADER + check_class(
    "yield Finding('site-guest.surrogate', Status.FAIL, 'a byte \\udcff that is no UTF-8 and a lone \\udead',\n"
    "              remediation=(Remediation('ls -ld /tmp/\\udcff', 'look'),))\n")


def through_every_output(tmp_path: Path, plugin: str) -> dict[str, str]:
    """A real plugin wheel's finding, through every output: the plain view, --markdown, --junit, the GitHub
    annotations and job summary, and the ticket profile's Markdown; each run exits 1, as judged."""
    env = install_plugin(tmp_path, plugin)
    doctor = Doctor(tmp_path)
    args = ("--no-gpu", "--only", "site")
    plain = doctor(*args, "--markdown", str(tmp_path / "r.md"), "--junit", str(tmp_path / "r.xml"), env=env)
    github = doctor(*args, "--format", "github", env={**env, "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")})
    ticket = doctor(*args, "--profile", "ticket", env=env, cwd=tmp_path)
    for proc in (plain, github, ticket):
        assert proc.returncode == 1 and "error" not in proc.stderr, proc.stderr
    return {"plain": plain.stdout, "github": github.stdout, "markdown": (tmp_path / "r.md").read_text(),
            "summary": (tmp_path / "summary.md").read_text(), "junit": (tmp_path / "r.xml").read_text(),
            "ticket": (tmp_path / "dflash-doctor-report.md").read_text()}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return through_every_output(tmp_path_factory.mktemp("hostile"), PLUGIN)


OURS = ("<details>", "</details>", "<summary>", "<details><summary>")


@pytest.mark.parametrize("document", ["markdown", "summary", "ticket"])
def test_markdown_from_a_plugin_adds_no_heading_link_image_html_or_cell(hostile: dict[str, str], document: str) -> None:
    text = hostile[document]
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    inline = [child for token in tokens for child in token.children or ()]
    assert not [t for t in inline if t.type in ("image", "link_open")], document
    html = [t.content.strip() for t in [*tokens, *inline] if t.type in ("html_block", "html_inline")]
    assert all(h.startswith(OURS) for h in html), html
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert not [h for h in headings if h.startswith(("Injected", "heading", "Exception"))], headings
    assert len(headings) == (1 if document == "summary" else 4), headings
    rows = [i for i, t in enumerate(tokens) if t.type == "tr_open"]
    for start in rows:
        end = next(i for i in range(start, len(tokens)) if tokens[i].type == "tr_close")
        assert sum(t.type in ("td_open", "th_open") for t in tokens[start:end]) == 4, document
    rendered = MarkdownIt("commonmark").enable("table").render(text)
    assert "Injected heading" in rendered  # shown, as text


def test_a_plugins_markdown_fixes_are_one_line_each(hostile: dict[str, str]) -> None:
    blocks = re.findall(r"(`{3,})console\n(.*?)\n\1", hostile["markdown"], flags=re.DOTALL)
    assert [b[1] for b in blocks] == ["ls -ld /tmp", "echo $'``` x\\n# not a heading' | cat"]


def test_the_plain_view_of_a_plugins_finding_holds_no_workflow_command(hostile: dict[str, str]) -> None:
    for line in hostile["plain"].split("\n"):
        assert parse_workflow_command(line) is None, line
        assert "##[" not in line, line
    assert "\\x3a:warning::from the detail" in hostile["plain"] and "#\\x23[error]here" in hostile["plain"]
    # --format github writes its own commands, and none from the inputs
    commands = [parse_workflow_command(line) for line in hostile["github"].split("\n")]
    assert [c[0] for c in commands if c] == ["error"]


def test_a_default_run_says_once_that_its_fixes_were_not_checked(doctor: Doctor, env: Env,
                                                                hostile: dict[str, str]) -> None:
    plain = hostile["plain"]
    assert "not an installer command" not in plain  # `ls -ld` is no installer's to check: nothing to say
    assert "verified:" not in plain and "not-checked" not in plain
    assert "not-checked: not an installer command" in hostile["markdown"]  # the documents keep it for each fix
    proc = doctor("--python", str(env.python), "--no-gpu", "--only", "distributions,namespaces,imports")
    assert "verified:" not in proc.stdout
    [once] = [line for line in proc.stdout.split("\n") if "not checked" in line or "not-checked" in line]
    python = shlex.quote(str(env.python)).replace("\n", "\\n")
    assert once == ("fixes not checked with the installer: the installer was not asked (no --verify-fixes); "
                    f"to check: dflash-doctor --python {python} --verify-fixes")


def test_a_lone_surrogate_in_a_plugins_title_is_shown_in_every_output_and_the_run_exits_as_judged(
        tmp_path: Path) -> None:
    outputs = through_every_output(tmp_path, SURROGATE_PLUGIN)
    for name, text in outputs.items():
        assert "\\udcff" in text.replace("\\\\", "\\") and "\\udead" in text.replace("\\\\", "\\"), name
    for name, text in outputs.items():
        assert not CONTROLS.search(text), name
        text.encode("utf-8")


def test_fix_shows_each_step_as_one_line_that_runs_only_what_it_shows(tmp_path: Path) -> None:
    from realenv import fa4_wheel, install

    env = make_venv(tmp_path, name="fa\n touch PWNED-fix #")
    install(env, fa4_wheel())  # flash-attn-4 requires torch: a fix `fix` leaves out without a GPU, and shows
    offline = {"PIP_CONFIG_FILE": os.devnull, "PIP_INDEX_URL": "http://127.0.0.1:9/simple"}
    proc = Doctor(tmp_path)("fix", "--python", str(env.python), "--no-gpu", "--only", "distributions,namespaces,imports",
                            "--timeout", "20", env=offline)
    steps = [line for line in proc.stdout.split("\n") if "$ " in line]
    assert any("-m pip install torch" in line for line in steps), proc.stdout + proc.stderr
    box = sandbox(tmp_path, env)
    for line in proc.stdout.split("\n"):  # whatever line of it is pasted
        assert box.paste(line) == [], line
    shown_python = str(env.python).replace("\n", "\\n")
    assert proc.stdout.startswith(f"dflash-doctor fix | {shown_python}\n")


def test_list_shows_a_plugins_title_with_its_control_characters_as_escapes(tmp_path: Path) -> None:
    title = "A site \x1b]0;PWNED-TITLE\x07check\u202e"
    env = install_plugin(tmp_path, HEADER + check_class("return ()", title=repr(title)))
    listed = Doctor(tmp_path)("list", env=env)
    assert listed.returncode == 0, listed.stderr
    assert "\x1b" not in listed.stdout and "\u202e" not in listed.stdout and "\x07" not in listed.stdout
    assert "A site \\x1b]0;PWNED-TITLE\\x07check\\u202e" in listed.stdout
