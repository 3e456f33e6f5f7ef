"""The program `serve --exec` starts is the one it judged: the vLLM of the target interpreter (`--python`, default
the doctor's own), never whatever `vllm` comes first on PATH.

`judged_program(command, python)` turns the serve command into the argv that runs exactly that, or says why it
cannot (`NotJudged`; the command is then not started):

- `vllm serve ...`: the `vllm` console script in the target's scripts directory (its install scheme's, as the
  target's sysconfig says), when it is a regular file whose `#!` line names the target interpreter (the same
  file, in the same directory: a venv's bin/python, not the base interpreter it links to). A path given for
  `vllm` must be that same file.
- `python -m vllm.entrypoints.openai.api_server ...`, or any command whose program is an interpreter: the
  target interpreter itself (a bare `python`/`python3` is taken to mean it; a path must be it).

Both `serve --exec` (exec) and `serve --exec --live` (a background start) run what this returns.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence

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


def _scripts_dir(python: str, timeout_s: float) -> str:
    from dflash_doctor.facts.probes import run_probe

    outcome = run_probe(python, "scripts_dir", timeout_s=timeout_s)
    scripts = outcome.data.get("scripts") if isinstance(outcome.data, dict) else None
    if not isinstance(scripts, str) or not scripts:
        raise NotJudged(f"cannot ask {python} where its console scripts are ({outcome.error or 'no answer'})")
    return scripts


def _console_script(given: str, python: str, timeout_s: float) -> str:
    script = os.path.join(_scripts_dir(python, timeout_s), "vllm")
    try:
        info = os.lstat(script)
    except OSError:
        raise NotJudged(f"{python} has no `vllm` console script ({script} is missing); install vLLM there, or "
                        f"run `{python} -m vllm.entrypoints.openai.api_server --model MODEL ...`") from None
    if not stat.S_ISREG(info.st_mode):
        raise NotJudged(f"{script} is not a regular file (a link or something else), so it is not the `vllm` "
                        "the doctor judged")
    try:
        interpreter = script_interpreter(script)
    except OSError as exc:
        raise NotJudged(f"cannot read {script} ({exc.strerror or exc})") from None
    if interpreter is None or not _same_interpreter(interpreter, python):
        raise NotJudged(f"{script} runs {interpreter or 'no Python interpreter named in its #! line'}, not {python} "
                        "(the interpreter judged)")
    if os.sep in given and not _same_file(given, script):
        raise NotJudged(f"{given} is not {script}, the `vllm` of {python} that was judged; give `vllm` or that path")
    return script


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
