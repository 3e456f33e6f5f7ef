"""Every file the doctor writes goes through one writer (dflash_doctor.documents.writer): no link is followed,
nothing the doctor did not make is clobbered, a FIFO cannot make it hang, and a report is replaced atomically.

The attacks are real: links, FIFOs and files planted where the doctor writes, the real CLI run on them.
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest
from conftest import Doctor
from test_cli import one_line_usage_error

from dflash_doctor.documents import writer

ROOT = Path(__file__).resolve().parent.parent
RUN = ("--no-gpu", "--only", "namespaces")
BASHRC = "# the user's shell setup\nexport PATH=$HOME/bin:$PATH\n"


@pytest.mark.parametrize("name", ["dflash-doctor-report.md", "dflash-doctor-report.json"])
def test_ticket_profile_never_writes_through_a_link_planted_at_its_report_names(
        doctor: Doctor, tmp_path: Path, name: str) -> None:
    outside = tmp_path / "home" / ".bashrc"
    outside.parent.mkdir()
    outside.write_text(BASHRC)
    work = tmp_path / "work"
    work.mkdir()
    (work / name).symlink_to(outside)
    proc = doctor("--profile", "ticket", *RUN, cwd=work, timeout=120)
    one_line_usage_error(proc, name, "symbolic link")
    assert outside.read_text() == BASHRC
    assert (work / name).is_symlink() and os.readlink(work / name) == str(outside)


def test_a_report_is_not_written_into_a_directory_reached_through_a_link(doctor: Doctor, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "reports").symlink_to(elsewhere, target_is_directory=True)
    proc = doctor(*RUN, "--json", str(tmp_path / "reports" / "r.json"), cwd=tmp_path, timeout=120)
    one_line_usage_error(proc, "--json", "is a symbolic link")
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("kind", ["fifo", "directory", "unrelated-file"])
def test_what_is_at_an_output_path_and_not_the_doctors_is_refused_unchanged(
        doctor: Doctor, tmp_path: Path, kind: str) -> None:
    path = tmp_path / "out.md"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path.write_text("# My notes\nnot the doctor's\n")
    proc = doctor(*RUN, "--markdown", str(path), cwd=tmp_path, timeout=60)  # a FIFO must not block it
    one_line_usage_error(proc, "--markdown", str(path))
    if kind == "unrelated-file":
        assert path.read_text() == "# My notes\nnot the doctor's\n"
        assert "is not a dflash-doctor Markdown report" in proc.stderr
    else:
        assert path.is_fifo() if kind == "fifo" else path.is_dir()


def test_the_doctors_own_reports_and_an_empty_file_are_replaced(doctor: Doctor, tmp_path: Path) -> None:
    json_path, md_path, xml_path = tmp_path / "r.json", tmp_path / "r.md", tmp_path / "r.xml"
    json_path.touch()  # `mktemp` made it for the doctor to fill
    for _ in range(2):  # the second run replaces what the first wrote
        proc = doctor(*RUN, "--json", str(json_path), "--markdown", str(md_path), "--junit", str(xml_path),
                      cwd=tmp_path, timeout=120)
        assert proc.returncode in (0, 1), proc.stderr
        assert json.loads(json_path.read_text())["schema"] == "dflash-doctor/report/v1"
        assert "dflash-doctor" in md_path.read_text()[:200] and "<testsuites" in xml_path.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "r.md", "r.xml"]  # no temporary file left


def test_a_json_document_is_told_the_doctors_by_its_first_key_or_else_by_reading_it_whole(tmp_path: Path) -> None:
    # Each kind of document the doctor writes, as it writes it: its tag first.
    baseline_like = json.dumps({"format": "dflash-doctor/baseline/v1", "files": {}}, indent=2)
    for text in ('{\n "schema": "dflash-doctor/report/v1",\n "checks": [', baseline_like):
        path = tmp_path / "doc.json"
        path.write_text(text)  # the first, a report cut short (a full disk): still the doctor's, replaced
        writer.replace(str(path), '{"schema": "dflash-doctor/report/v1"}', writer.JSON_DOCUMENT)
        assert json.loads(path.read_text()) == {"schema": "dflash-doctor/report/v1"}
    # A tag that is not the first key is found by parsing the document; a tag in a value or a nested key is not one.
    later = tmp_path / "later.json"
    later.write_text(json.dumps({"created": "now", "schema": "dflash-doctor/report/v1"}))
    writer.replace(str(later), "{}", writer.JSON_DOCUMENT)
    for text in (json.dumps({"note": '"schema": "dflash-doctor/report/v1"'}),
                 json.dumps({"x": {"schema": "dflash-doctor/report/v1"}}), '["schema", "dflash-doctor/report/v1"]'):
        other = tmp_path / "other.json"
        other.write_text(text)
        with pytest.raises(writer.WriteError, match="not a dflash-doctor JSON document"):
            writer.replace(str(other), "{}", writer.JSON_DOCUMENT)
        assert other.read_text() == text


def test_the_job_summary_is_appended_to_but_never_through_a_link(doctor: Doctor, tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    proc = doctor(*RUN, "--format", "github", env={"GITHUB_STEP_SUMMARY": str(summary)}, cwd=tmp_path, timeout=120)
    assert proc.returncode in (0, 1)
    text = summary.read_text()
    assert text.startswith("earlier step\n") and len(text) > len("earlier step\n")

    outside = tmp_path / ".bashrc"
    outside.write_text(BASHRC)
    link = tmp_path / "linked-summary.md"
    link.symlink_to(outside)
    proc = doctor(*RUN, "--format", "github", env={"GITHUB_STEP_SUMMARY": str(link)}, cwd=tmp_path, timeout=120)
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr
    assert outside.read_text() == BASHRC


def test_a_replace_is_atomic_a_reader_sees_the_old_file_or_the_new_one(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    old = json.dumps({"schema": "dflash-doctor/report/v1", "n": "old" * 1000})
    path.write_text(old)
    before = path.stat().st_ino
    with open(path, encoding="utf-8") as reader:  # opened before the replace: it keeps reading the old file whole
        writer.replace(str(path), json.dumps({"schema": "dflash-doctor/report/v1", "n": "new"}), writer.JSON_DOCUMENT)
        assert reader.read() == old
    assert json.loads(path.read_text())["n"] == "new" and path.stat().st_ino != before
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]
    # A refused write leaves what is there as it was, and no temporary file.
    other = tmp_path / "x.json"
    other.write_text('{"schema": "someone-else/v1"}')
    with pytest.raises(writer.WriteError, match="not a dflash-doctor JSON document"):
        writer.replace(str(other), "{}", writer.JSON_DOCUMENT)
    assert json.loads(other.read_text()) == {"schema": "someone-else/v1"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "x.json"]


def test_append_and_create_new_refuse_links_and_existing_names(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_text(BASHRC)
    (tmp_path / "link").symlink_to(outside)
    with pytest.raises(writer.WriteError, match="symbolic link"):
        writer.append(str(tmp_path / "link"), "x")
    with pytest.raises(writer.WriteError):
        writer.create_new(str(tmp_path / "link"), [b"x"])
    with pytest.raises(writer.WriteError):
        writer.create_new(str(outside), [b"x"])
    assert outside.read_text() == BASHRC
    writer.create_new(str(tmp_path / "new"), [b"a", b"b"])
    assert (tmp_path / "new").read_bytes() == b"ab"


# The calls that write a file, create one or move one over another: only the writer makes them.
WRITING_CALLS = {"write_text", "write_bytes", "mkstemp", "NamedTemporaryFile", "copyfile", "copy", "copy2",
                 "copytree", "move", "replace", "rename", "symlink_to", "touch"}
MOVES = {"copy", "move", "replace", "rename"}  # only as os.* or shutil.* (str.replace, dataclasses.replace)
WRITING_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}
# The one exception: stdout redirected to /dev/null when the reader of a pipe went away (cli.main).
ALLOWED = {("dflash_doctor/cli.py", "O_WRONLY")}


def _writes(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in WRITING_FLAGS:
            found.append((node.lineno, node.attr))
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        owner = node.func.value.id if isinstance(node.func, ast.Attribute) and isinstance(
            node.func.value, ast.Name) else None
        if name in WRITING_CALLS and (name not in MOVES or owner in ("os", "shutil")):
            found.append((node.lineno, name))
        if name in ("open", "fdopen"):
            modes = [a for a in node.args[1:2]] + [k.value for k in node.keywords if k.arg == "mode"]
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, int):
                continue  # a standard stream (fd 0, 1, 2) opened as a file object: no file is written
            if any(isinstance(m, ast.Constant) and set(str(m.value)) & set("wax+") for m in modes):
                found.append((node.lineno, f"{name}(..., {modes[0].value!r})"))  # type: ignore[attr-defined]
    return found


def test_no_module_but_the_writer_writes_files() -> None:
    offenders = []
    for path in sorted(ROOT.joinpath("dflash_doctor").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        # The probes run in the target interpreter, write nothing there (test_isolation_and_bad_input holds
        # site-packages byte-identical) and cannot import the writer.
        if rel == "dflash_doctor/documents/writer.py" or "probes" in path.parts:
            continue
        for line, what in _writes(ast.parse(path.read_text())):
            if (rel, what) not in ALLOWED:
                offenders.append(f"{rel}:{line}: {what}")
    assert offenders == [], "write files through dflash_doctor.documents.writer:\n" + "\n".join(offenders)


def test_the_meta_test_sees_the_ways_files_were_written_before() -> None:
    before = ('Path(p).write_text(t)\nwith open(s, "a") as h: pass\nos.fdopen(fd, "wb")\n'
              'fd = os.open(p, os.O_WRONLY | os.O_CREAT)\nshutil.copyfile(a, b, follow_symlinks=False)\n'
              'tempfile.mkstemp()\n')
    assert [w for _, w in _writes(ast.parse(before))] != [] and len(_writes(ast.parse(before))) >= 6
    assert _writes(ast.parse('text.replace("a", "b")\nopen(p, "rb")\n')) == []
