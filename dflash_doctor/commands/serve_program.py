"""The program `serve --exec` starts is the one it judged: the vLLM of the target interpreter (`--python`, default
the doctor's own), never whatever `vllm` comes first on PATH.

`judged_program(command, python)` turns the serve command into the argv that runs exactly that, or says why it
cannot (`NotJudged`; the command is then not started):

- `vllm serve ...`: the target's `vllm` console script: the one its vLLM distribution's RECORD lists, else the
  one in its install scheme's scripts directory (as the target's sysconfig says); the first of them that is a
  regular file whose `#!` line names the target interpreter (the same file, in the same directory: a venv's
  bin/python, not the base interpreter it links to). A path given for `vllm` must be that same file.
- `python -m vllm.entrypoints.openai.api_server ...`, or any command whose program is an interpreter: the
  target interpreter itself (a bare `python`/`python3` is taken to mean it; a path must be it).

Both `serve --exec` (exec) and `serve --exec --live` (a background start) run what this returns.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence

from dflash_doctor.facts.probes import run_probe

__all__ = ["NotJudged", "judged_program"]

_SHEBANG_BYTES = 4096
# pip's and uv's form for an interpreter path a #! line cannot hold (spaces, too long):
# #!/bin/sh  /  '''exec' "/path/to/python" "$0" "$@"  /  ' '''
_SH_EXEC = re.compile(r"""^'''exec' (["'])(?P<path>[^"']+)\1 """)


class NotJudged(Exception):
    """The command's program is not the one the doctor judged; `code` is the exit status to end with."""

    def __init__(self, why: str, code: int = 126) -> None:
        super().__init__(why)
        self.code = code


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def _same_interpreter(a: str, b: str) -> bool:
    """`a` and `b` are one interpreter: the same file in the same directory (links inside it allowed)."""
    return _same_file(a, b) and os.path.realpath(os.path.dirname(a)) == os.path.realpath(os.path.dirname(b))


def script_interpreter(path: str) -> str | None:
    """The interpreter the regular file `path` names in its #! line (pip's and uv's forms), or None."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        head = os.read(fd, _SHEBANG_BYTES).decode("utf-8", "replace").splitlines()
    finally:
        os.close(fd)
    if not head or not head[0].startswith("#!"):
        return None
    first = head[0][2:].strip()
    if first == "/bin/sh" and len(head) > 1:
        match = _SH_EXEC.match(head[1])
        return match.group("path") if match else None
    return first if first and " " not in first else None


def _candidates(python: str, timeout_s: float) -> list[str]:
    """Where the target's `vllm` console script may be: its vLLM's RECORD's, then its scripts directory's."""

    outcome = run_probe(python, "scripts_dir", timeout_s=timeout_s)
    data = outcome.data if isinstance(outcome.data, dict) else {}
    recorded = [p for p in data.get("recorded") or [] if isinstance(p, str) and os.path.isabs(p)]
    scripts = data.get("scripts")
    if not isinstance(scripts, str) or not os.path.isabs(scripts):
        raise NotJudged(f"cannot ask {python} where its console scripts are ({outcome.error or 'no answer'})")
    return list(dict.fromkeys([*recorded, os.path.join(scripts, "vllm")]))


def _why_not(script: str, python: str) -> str | None:
    """Why `script` is not the target's own `vllm` (None: it is)."""
    try:
        if not stat.S_ISREG(os.lstat(script).st_mode):
            return f"{script} is not a regular file (a link or something else)"
        interpreter = script_interpreter(script)
    except OSError as exc:
        return f"{script}: {exc.strerror or exc}"
    if interpreter is None or not _same_interpreter(interpreter, python):
        return f"{script} runs {interpreter or 'no Python interpreter named in its #! line'}, not {python}"
    return None


def _console_script(given: str, python: str, timeout_s: float) -> str:
    reasons, valid = [], []
    for script in _candidates(python, timeout_s):
        why = _why_not(script, python)
        if why is None:
            valid.append(script)
        else:
            reasons.append(why)
    if valid and os.sep not in given:
        return valid[0]
    if valid:
        same = [script for script in valid if _same_file(given, script)]
        if same:
            return same[0]
        raise NotJudged(f"{given} is not {valid[0]}, the `vllm` of {python} that was judged; give `vllm` or that path")
    raise NotJudged(f"{python} has no `vllm` console script of its own ({'; '.join(reasons)}); install vLLM there, "
                    f"or run `{python} -m vllm.entrypoints.openai.api_server --model MODEL ...`")


def judged_program(command: Sequence[str], python: str, timeout_s: float) -> list[str]:
    """The argv that runs `command` with the judged program (see the module docstring); NotJudged otherwise."""
    program, rest = command[0], list(command[1:])
    if os.sep in program and not os.path.lexists(program):
        raise NotJudged(f"cannot start {program}: no such file", code=127)
    if os.path.basename(program) == "vllm":
        return [_console_script(program, python, timeout_s), *rest]
    if os.sep not in program and re.fullmatch(r"python(3(\.\d+)?)?", program):
        return [python, *rest]  # `python3 -m vllm...`: the interpreter judged, never one found on PATH
    if os.sep in program and _same_interpreter(program, python):
        return [python, *rest]
    raise NotJudged(f"`{program}` is neither the `vllm` nor the interpreter the doctor judged ({python}); "
                    "give `vllm serve ...` or `PYTHON -m vllm.entrypoints.openai.api_server ...` with --python PYTHON")
