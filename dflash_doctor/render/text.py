"""Text from the inputs, made safe for the medium it leaves by: one function per medium.

Titles, details, evidence and commands carry what the doctor read: a distribution's METADATA, a directory's
name, another project's exception message, a saved report, a plugin's finding. None of it reaches a screen, a
log or a document raw. Every renderer builds its lines from fields and hands each line (or each field, where
the medium has places of different rules) to its medium's function here:

- `screen(line)`: a terminal line (render/terminal.py on a TTY). `visible`: C0 and C1 controls, DEL, bidi
  overrides and isolates, zero-width and other invisible format characters, line and paragraph separators
  and lone surrogates (a non-UTF-8 byte in a path) are written as their Python escapes (`\\x1b`, `\\u202e`,
  `\\udcff`), so an escape sequence is shown, never sent, and a newline cannot start a line of its own.
- `log_line(line)`: a line of the plain view, which is what CI logs show: `screen`'s escapes, ASCII to the last
  byte (`plain.to_ascii`), and no GitHub workflow command: the runner parses `::name::` at the start of a
  line and `##[name]` anywhere in it, so those are written `\\x3a:` and `#\\x23[`.
- `shell_line(command, ...)`: a remediation command as one line that, pasted, runs only what it shows: a
  quoted word holding a control character (or, for the ASCII log, any non-ASCII character, or `##[`) is
  written in ANSI-C quoting (`$'...\\n...'`, the bytes the shell will pass); a command whose control
  character is not inside quotes, or whose quoting cannot be followed here, is shown as a `#` comment that
  says why, never as a command.
- `detail_lines(detail)`: a finding's detail as lines, every view's (it keeps the line breaks of what it quotes):
  none of them starts as a fix does (`$`, `fix:`).
- `markdown(text, where)`: text in a paragraph, a table cell, a code span or a fenced block of a Markdown
  document (render/markdown.py, render/fleet.py, and the GitHub job summary).

GitHub workflow commands (render/github.py `command`) and JUnit XML (render/junit.py `_clean`) pass their
text through `visible` the same way. The terminal view takes every string of its lines through `screen` (its
`Text`), then, in plain mode, each whole line through `log_line`; `dflash-doctor fix` and `list` write their
lines through the same two.
"""

from __future__ import annotations

import html
import os
import re
from typing import Literal

from dflash_doctor.render.plain import to_ascii

__all__ = ["UNSAFE", "detail_lines", "log_line", "markdown", "no_legacy_command", "screen", "shell_line", "visible"]

# Unicode's control (Cc), format (Cf), surrogate (Cs), line (Zl) and paragraph (Zp) separator characters, with
# room for format characters later Unicode versions add in these blocks (tests/test_text_boundary.py holds it
# to unicodedata), and the invisible Hangul fillers.
UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u115f\u1160\u180e"
    "\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164\ud800-\udfff\ufeff\uffa0\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e007f]"
)
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escape(char: str) -> str:
    code = ord(char)
    if char in _NAMED:
        return _NAMED[char]
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def visible(text: str, keep: str = "") -> str:
    """`text` with every character that would act rather than show written as its Python escape (but those in
    `keep`, where the medium gives them a meaning of its own and escapes them itself)."""
    return UNSAFE.sub(lambda m: m.group() if m.group() in keep else _escape(m.group()), text)


def screen(line: str) -> str:
    """One line for a terminal: nothing in it moves the cursor, recolours, retitles or reorders the screen."""
    return visible(line)


_V2_COMMAND = re.compile(r"^(\s*):(?=:)")


def log_line(line: str) -> str:
    """One line of the plain view (a CI log): ASCII, visible, and no GitHub workflow command in it."""
    text = no_legacy_command(to_ascii(visible(line)))
    return _V2_COMMAND.sub(lambda m: m.group(1) + "\\x3a", text)


def no_legacy_command(text: str) -> str:
    """`text` without the runner's older workflow command form, `##[name]`, which it reads anywhere in a line of
    a CI log (stdout or stderr)."""
    return text.replace("##[", "#\\x23[")


# -------------------------------------------------------------------------------------------- detail lines

# What starts a fix's line in some view: the terminal's `$ ` prompt and `fix:` heading, the `fix: ` of a GitHub
# annotation and a JUnit body.
_FIX_LIKE = re.compile(r"^(\s*)(?:(\$)|(fix):)", re.IGNORECASE)


def detail_lines(detail: str, limit: int | None = None) -> list[str]:
    """A finding's detail as the lines every view shows (stripped; the first `limit` of them): a detail keeps the
    line breaks of what it quotes (an exception, a log), so a line of it could otherwise pass for a fix. A line
    that starts, after its indentation, with `$` or `fix:` has that written `\\x24` or `fix\\x3a`; each line still
    goes through its medium's function."""
    lines = detail.strip().split("\n")
    if limit is not None:
        lines = lines[:limit]
    return [_FIX_LIKE.sub(lambda m: m.group(1) + ("\\x24" if m.group(2) else m.group(3) + "\\x3a"), line)
            for line in lines]


# ------------------------------------------------------------------------------------------- shell commands


def _flags(command: str, ascii_only: bool) -> list[bool]:
    """For each character of `command`: whether a shown line may not hold it as it is."""
    flags = [bool(UNSAFE.match(c)) or (ascii_only and not c.isascii()) for c in command]
    if ascii_only:
        for found in re.finditer(r"(?=##\[)", command):
            flags[found.start() + 1] = True
    return flags


def _bytes(char: str) -> str | None:
    """The ANSI-C escapes of the bytes `char` stands for in a path (None: a lone surrogate that is no byte)."""
    if char in _NAMED:
        return _NAMED[char]
    try:
        data = os.fsencode(char)
    except UnicodeEncodeError:
        return None
    return "".join(f"\\x{b:02x}" for b in data)


def _ansi_c(text: str, flags: list[bool]) -> str | None:
    """`text` as a bash ANSI-C quoted word ($'...') of the same bytes, each flagged character escaped."""
    out = []
    for char, flagged in zip(text, flags):
        if flagged:
            escaped = _bytes(char)
            if escaped is None:
                return None
            out.append(escaped)
        else:
            out.append("\\" + char if char in "\\'" else char)
    return "$'" + "".join(out) + "'"


def _regions(command: str) -> list[tuple[str, int, int]] | None:
    """(kind, start, end) of each stretch of `command`: "plain", "single" ('...'), "double" ("..."), "ansi"
    ($'...'), the quotes included; None when a quote is not closed."""
    regions: list[tuple[str, int, int]] = []
    i, n = 0, len(command)
    while i < n:
        char = command[i]
        if command.startswith("$'", i) or char == '"':
            kind, close, j = ("ansi", "'", i + 2) if char == "$" else ("double", '"', i + 1)
            while j < n and command[j] != close:
                j += 2 if command[j] == "\\" else 1
            if j >= n:
                return None
            regions.append((kind, i, j + 1))
            i = j + 1
        elif char == "'":
            j = command.find("'", i + 1)
            if j < 0:
                return None
            regions.append(("single", i, j + 1))
            i = j + 1
        else:
            step = 2 if char == "\\" else 1
            if regions and regions[-1][0] == "plain" and regions[-1][2] == i:
                regions[-1] = ("plain", regions[-1][1], i + step)
            else:
                regions.append(("plain", i, i + step))
            i += step
    return regions


_OPAQUE = ("`", "$(", "${", "<<")  # quoting inside these is the shell's to follow, not this scanner's


def _requote(command: str, ascii_only: bool) -> tuple[str, str]:
    """(the command with each quoted word that needs it in ANSI-C quoting, "") or ("", why it cannot be)."""
    regions = _regions(command)
    if regions is None:
        return "", "a quote that is not closed"
    if any(token in command[start:end] for kind, start, end in regions if kind in ("plain", "double")
           for token in _OPAQUE):
        return "", "its quoting cannot be followed here"
    flags = _flags(command, ascii_only)
    out: list[str] = []
    for kind, start, end in regions:
        text, marks = command[start:end], flags[start:end]
        if not any(marks):
            out.append(text)
            continue
        if kind == "plain":
            broken = any(c in "\n\r" for c, m in zip(text, marks) if m)
            return "", ("a line break" if broken else "a control character") + " outside quotes"
        if kind == "single":
            quoted = _ansi_c(text[1:-1], marks[1:-1])
        elif kind == "ansi":
            quoted = _requote_ansi(text, marks)
        else:
            quoted = _requote_double(text, marks)
        if quoted is None:
            return "", "a character that cannot be quoted here"
        out.append(quoted)
    line = "".join(out)
    if _needs_quoting(line, ascii_only):  # what the rules above missed is never shown as runnable
        return "", "a character that cannot be quoted here"
    return line, ""


def _requote_ansi(text: str, marks: list[bool]) -> str | None:
    out, i = ["$'"], 2
    while i < len(text) - 1:
        if text[i] == "\\":
            if marks[i + 1]:
                return None
            out.append(text[i:i + 2])
            i += 2
            continue
        escaped = _bytes(text[i]) if marks[i] else text[i]
        if escaped is None:
            return None
        out.append(escaped)
        i += 1
    return "".join(out) + "'"


def _requote_double(text: str, marks: list[bool]) -> str | None:
    """"..." with each run of flagged characters spliced in as $'...' (outside the double quotes)."""
    body, flags = text[1:-1], marks[1:-1]
    for k, char in enumerate(body[:-1]):
        if char == "\\" and flags[k + 1]:
            return None
    out, k = [], 0
    while k < len(body):
        j = k
        while j < len(body) and flags[j] == flags[k]:
            j += 1
        if flags[k]:
            quoted = _ansi_c(body[k:j], flags[k:j])
            if quoted is None:
                return None
            out.append(quoted)
        else:
            out.append('"' + body[k:j] + '"')
        k = j
    return "".join(out)


def _needs_quoting(text: str, ascii_only: bool) -> bool:
    return bool(UNSAFE.search(text)) or (ascii_only and (not text.isascii() or "##[" in text))


def shell_line(command: str, prompt: str = "$ ", ascii_only: bool = False) -> str:
    """A remediation command as one line to paste, after `prompt`; or, where it cannot be shown as one that runs
    only what it shows, a `#` comment saying so, with the command's text made visible. `ascii_only`: for the
    plain view (a CI log), where every byte is ASCII and no `##[` may appear."""
    if not _needs_quoting(command, ascii_only):
        return prompt + command
    line, why = _requote(command, ascii_only)
    if line:
        return prompt + line
    shown = to_ascii(visible(command)) if ascii_only else visible(command)
    return f"# not shown as a command to paste ({why}; the JSON report has it as written): {shown}"


# ------------------------------------------------------------------------------------------------ Markdown

MarkdownPlace = Literal["text", "cell", "code", "block", "html"]
# What makes inline structure: an escape, emphasis, a link or an image (`[`, `![`), HTML, an autolink or an entity
# (`<`, `&`), strikethrough; `_` only where it can open or close emphasis (not inside a word: flash_attn).
_INLINE = re.compile(r"[\\*\[<>&~]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")
_CELL = re.compile(r"[\\*\[<>&~|]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")
_LINE_START = ("#", ">", "-", "+", "=")  # a heading, a quote, a list, a setext underline, where text starts a line
_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}


def _code_span(text: str, cell: bool) -> str:
    body = visible(text)
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    ticks = "`" * (longest + 1)
    if body.startswith("`") or body.endswith("`") or (body.startswith(" ") and body.endswith(" ") and body.strip()):
        body = f" {body} "
    if cell:
        body = body.replace("|", "\\|")
    return f"{ticks}{body}{ticks}" if body else "` `"


def _inline(text: str, cell: bool) -> str:
    parts = visible(text).split("`")
    out = []
    for index, part in enumerate(parts):
        code = index % 2 == 1 and index < len(parts) - 1  # between a pair of backticks, as the checks write code
        if code:
            out.append(_code_span(part, cell))
        else:
            lead = "\\`" if index % 2 == 1 else ""  # an unpaired backtick stays a backtick
            pattern = _CELL if cell else _INLINE
            out.append(lead + pattern.sub(lambda m: _ENTITIES.get(m.group(), "\\" + m.group()), part))
    text = "".join(out)
    return "\\" + text if text.startswith(_LINE_START) else text


def _fenced(body: str, lang: str) -> str:
    lines = [visible(line) for line in body.split("\n")]
    text = "\n".join(lines)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{visible(lang)}\n{text}\n{ticks}"


def markdown(text: str, where: MarkdownPlace = "text", lang: str = "") -> str:
    """`text` for a place in a Markdown document, so that it shows as written and adds no structure:
    - "text": inline text (a paragraph, a heading, a list item): one line; Markdown's and HTML's characters
      escaped (no link, image, emphasis, HTML or heading comes from it); text between a pair of backticks, as
      checks write code, becomes a code span whose fence is longer than any run of backticks in it;
    - "cell": the same, and `|` escaped, also inside code spans (GitHub's tables split on it there too);
    - "code": a whole code span;
    - "block": a fenced block (`lang` its info string), newlines kept, fenced longer than any run of backticks;
    - "html": text inside an HTML element of the document (`<summary>`), where Markdown does not apply."""
    if where == "html":
        return html.escape(visible(text))
    if where == "block":
        return _fenced(text, lang)
    if where == "code":
        return _code_span(text, False)
    return _inline(text, where == "cell")
