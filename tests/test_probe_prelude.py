"""The probe prelude holds each helper the probe scripts share, once; the scripts run after it and redefine none.

`probe_source` puts probes/_prelude.py in front of every probe script, so a name the prelude defines is the
script's as it runs in the target. A script that defined it again would shadow the prelude's (two truths, one
of them unguarded), and two scripts holding the same function are a copy that will drift. The prelude also keeps
the doctor's own rules where the target applies them (facts/safefile.py: what is never opened), and parses on
Python 2.7 (the handshake runs there); the scripts' annotations are evaluated on Python 3.8.
"""

from __future__ import annotations

import ast
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dflash_doctor.facts import safefile
from dflash_doctor.facts.probes import MARKER, PRELUDE, TARGET_PROCESS_MARKER

PROBES = Path(safefile.__file__).resolve().parent / "probes"
PRELUDE_PATH = PROBES / f"{PRELUDE}.py"
SCRIPTS = sorted(p for p in PROBES.glob("*.py") if not p.name.startswith("_"))


def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def defined(module: ast.Module) -> Iterator[tuple[str, ast.stmt]]:
    """The names a module's own top-level statements bind: functions, classes, assignments."""
    for node in module.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name, node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                for name in target.elts if isinstance(target, ast.Tuple) else [target]:
                    if isinstance(name, ast.Name):
                        yield name.id, node


def prelude_namespace(*names: str) -> dict[str, Any]:
    """The prelude's definitions of `names`, run on their own: the whole prelude would guard this process."""
    nodes = [node for name, node in defined(tree(PRELUDE_PATH)) if name in names]
    namespace: dict[str, Any] = {"os": os, "stat": stat, "json": __import__("json"), "sys": __import__("sys")}
    exec(compile(ast.Module(body=nodes, type_ignores=[]), str(PRELUDE_PATH), "exec"), namespace)  # noqa: S102
    return namespace


def without_docstring(function: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return ast.dump(ast.Module(body=body, type_ignores=[]))


def test_no_probe_script_defines_a_name_the_prelude_defines() -> None:
    prelude = {name for name, _ in defined(tree(PRELUDE_PATH))}
    assert {"MARKER", "read_arguments", "emit", "describe", "refuse_file", "guard_extensions"} <= prelude
    again = {script.name: sorted(names) for script in SCRIPTS
             if (names := {name for name, _ in defined(tree(script))} & prelude)}
    assert not again, again


def test_no_two_probe_scripts_hold_the_same_function() -> None:
    seen: dict[str, str] = {}
    copies = []
    for path in [PRELUDE_PATH, *SCRIPTS]:
        for node in ast.walk(tree(path)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and len(node.body) > 1:
                where = f"{path.name}:{node.name}"
                body = without_docstring(node)
                if body in seen and seen[body].split(":")[0] != path.name:
                    copies.append((seen[body], where))
                seen.setdefault(body, where)
    assert not copies, copies


def test_the_prelude_writes_the_marker_the_doctor_reads() -> None:
    assert prelude_namespace("MARKER")["MARKER"] == MARKER
    script = {name: node for name, node in defined(tree(PROBES / "target_process.py"))}
    assert isinstance(script["TARGET_PROCESS_MARKER"], ast.Assign)
    assert ast.literal_eval(script["TARGET_PROCESS_MARKER"].value) == TARGET_PROCESS_MARKER


def test_the_prelude_refuses_to_open_what_safefile_refuses() -> None:
    """safefile is the doctor's; the prelude, the target's copy of its rules (the probes import nothing of the
    package): the same roots are forbidden, and a file that is no regular one is named alike."""
    prelude = prelude_namespace("FORBIDDEN", "_FORBIDDEN_BELOW", "forbidden", "file_kind")
    assert prelude["FORBIDDEN"] == safefile.FORBIDDEN
    for path in ("/dev", "/dev/zero", "/proc/self/maps", "/sys", "/device", "/proceed/x", "/system", "/", "/usr/dev"):
        assert prelude["forbidden"](path) == safefile.forbidden(path), path
    with tempfile.TemporaryDirectory() as scratch:
        fifo = os.path.join(scratch, "fifo")
        os.mkfifo(fifo)
        regular = os.path.join(scratch, "file")
        Path(regular).write_text("x")
        for path in (fifo, scratch, "/dev/null", regular):
            mode = os.stat(path).st_mode
            assert prelude["file_kind"](mode) == safefile.file_kind(mode), path


def test_the_prelude_parses_on_python_2_7() -> None:
    """The handshake (after the prelude) answers on 2.7 too: no annotations, f-strings or keyword-only
    arguments in the prelude; its types are in type comments."""
    for node in ast.walk(tree(PRELUDE_PATH)):
        assert not isinstance(node, (ast.AnnAssign, ast.JoinedStr)), node.lineno
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = node.args
            assert node.returns is None and not arguments.kwonlyargs, node.name
            assert all(a.annotation is None for a in arguments.args), node.name


BUILTIN_GENERICS = {"list", "dict", "set", "frozenset", "tuple", "type"}


def evaluated_annotations(module: ast.Module) -> Iterator[ast.expr]:
    """The annotations Python 3.8 evaluates as it runs the script: those of function signatures and of
    module-level and class-level names (a local variable's annotation is never evaluated)."""
    for node in ast.walk(module):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = node.args
            every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg,
                     arguments.kwarg]
            yield from (a.annotation for a in every if a is not None and a.annotation is not None)
            if node.returns is not None:
                yield node.returns
        elif isinstance(node, (ast.Module, ast.ClassDef)):
            yield from (n.annotation for n in node.body if isinstance(n, ast.AnnAssign))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_a_probe_scripts_annotations_evaluate_on_python_3_8(script: Path) -> None:
    """No `X | Y` and no `list[...]` where 3.8 evaluates them: the prelude in front of the script keeps
    `from __future__ import annotations` from its first line, so typing's generics stand there."""
    for annotation in evaluated_annotations(tree(script)):
        for node in ast.walk(annotation):
            assert not isinstance(node, ast.BinOp), ast.unparse(annotation)
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
                assert node.value.id not in BUILTIN_GENERICS, ast.unparse(annotation)
