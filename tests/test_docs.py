"""README.md is what a user needs first; docs/ holds the rest, one file per topic. Every relative link of
README, docs/ and recording/README.md leads to a file that exists (and an anchor to a heading of it), README's
quick-start commands stay as they are, no install is from a package index the doctor is not on, and the dev tool
that builds the CI docs' Dockerfile still finds it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", ROOT / "recording" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_relative_link_leads_to_a_file_and_heading() -> None:
    assert len(PAGES) > 10
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+://", target):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            assert file.is_file(), f"{page.relative_to(ROOT)}: {target}"
            if anchor:
                headings = [_anchor(h) for h in re.findall(r"^#+ (.*)$", file.read_text(), re.MULTILINE)]
                assert anchor in headings, f"{page.relative_to(ROOT)}: {target}"


def test_every_doc_is_linked_from_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    for doc in sorted((ROOT / "docs").glob("*.md")):
        assert f"(docs/{doc.name}" in readme, doc.name


def test_the_readme_keeps_the_install_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "```sh\npython3 -m pip install . && dflash-doctor\n```" in readme
    assert "```sh\npython3 -m pip install -e '.[test]' && python3 -m pytest -n 3\n```" in readme
    assert len(readme.splitlines()) < 250


# An install of dflash-doctor by its name, from a package index: `pip install dflash-doctor`, `pipx install
# dflash-doctor`, `uv pip install --system dflash-doctor`, and any requirement with its extras ('dflash-doctor[fleet]').
# A path (/tmp/dflash-doctor), a directory (dflash-doctor/) and a command after the install (`... && dflash-doctor`)
# are not.
FROM_AN_INDEX = re.compile(r"""\binstall\b[^\n`&|;#()]*?(?<![\w./-])['"]?dflash-doctor(?![\w/-]|\.\w)|dflash-doctor\[""")


def test_no_page_or_message_installs_dflash_doctor_from_an_index() -> None:
    """dflash-doctor is on no package index: every install a page or a message of the doctor shows installs it
    from a clone or a wheel built from one."""
    sources = [*PAGES, *sorted((ROOT / "dflash_doctor").rglob("*.py"))]
    found = [f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}: {match.group(0)}"
             for path in sources for text in [path.read_text()] for match in FROM_AN_INDEX.finditer(text)]
    assert not found, "\n".join(found)
    # What the pattern catches and what it lets through.
    for caught in ("python3 -m pip install --no-cache-dir dflash-doctor", "pipx install dflash-doctor",
                   "pip install 'dflash-doctor[fleet]'", "uv pip install --system dflash-doctor==0.1.0"):
        assert FROM_AN_INDEX.search(caught), caught
    for passed in ("python3 -m pip install . && dflash-doctor", "pip install --no-cache-dir /tmp/dflash-doctor",
                   "COPY dflash-doctor/ /src/", "pip install '.[fleet]'", "reinstall dflash-doctor 0.1.0 so that"):
        assert not FROM_AN_INDEX.search(passed), passed


def test_the_dockerfile_tool_finds_the_ci_docs_dockerfile() -> None:
    proc = subprocess.run([sys.executable, "-c", "import check_ci_dockerfile as c; print(c.docs_dockerfile())"],
                          cwd=ROOT / "tools", capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("FROM vllm/vllm-openai:") and 'ENTRYPOINT ["dflash-doctor", "serve", "--exec"' in proc.stdout
