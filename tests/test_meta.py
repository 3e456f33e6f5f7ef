"""The project's own invariants: one code table covers every finding, packaging ships every module."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import tomllib

from dflash_doctor.registry import BUILTIN_CHECKS, CODES

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def emitted_ids() -> set[str]:
    """Every literal finding id in the package's source: `id="x.y"`, Finding("x.y", ...), Cause("x.y", ...)."""
    found: set[str] = set()
    for path in ROOT.joinpath("dflash_doctor").rglob("*.py"):
        if "codes" in path.parts or "probes" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.keyword) and node.arg == "id" and isinstance(node.value, ast.Constant):
                found.add(node.value.value)
            if (isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("Finding", "Cause")
                    and node.args and isinstance(node.args[0], ast.Constant)):
                found.add(node.args[0].value)
    return {i for i in found if isinstance(i, str) and re.fullmatch(r"[a-z0-9-]+\.[a-z0-9.-]+", i)}


def test_every_emitted_finding_id_is_in_the_code_table_with_an_explanation() -> None:
    missing = emitted_ids() - set(CODES)
    assert not missing, f"finding ids without a code-table entry: {sorted(missing)}"
    for code in CODES.values():
        assert code.title and len(code.explanation) > 40, code.id


def test_the_builtin_checks_are_the_entry_points() -> None:
    """pyproject's entry points (how an installed doctor and a plugin author see the checks) name exactly the
    classes of BUILTIN_CHECKS, each under its check id."""
    from importlib import import_module

    declared = PYPROJECT["project"]["entry-points"]["dflash_doctor.checks"]
    named = {name: getattr(import_module(value.partition(":")[0]), value.partition(":")[2])
             for name, value in declared.items()}
    assert named == {check.id: check for check in BUILTIN_CHECKS}


def test_the_command_table_and_the_parsers_name_the_same_commands() -> None:
    from dflash_doctor.commands import COMMANDS
    from dflash_doctor.commands.options import SUBCOMMANDS

    assert tuple(COMMANDS) == SUBCOMMANDS


def test_every_package_directory_is_shipped() -> None:
    from setuptools import find_packages

    found = PYPROJECT["tool"]["setuptools"]["packages"]["find"]
    assert found["include"] == ["dflash_doctor", "dflash_doctor.*"]
    listed = set(find_packages(str(ROOT), include=found["include"]))
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in ROOT.joinpath("dflash_doctor").rglob("__init__.py")}
    assert on_disk - listed == set()
    assert "dflash_doctor.checks" in listed and "checks" not in listed  # never a top-level `checks`


def test_the_built_wheel_ships_checks_under_the_package_name_only(tmp_path: Path) -> None:
    import shutil
    import subprocess
    import sys
    import zipfile

    # Built from a copy: a build leaves build/ and *.egg-info behind, and in the checkout they would be a
    # second dflash-doctor distribution to every later test that runs the checkout from its path. A copy of what
    # the build reads, never of a venv a developer keeps in the checkout (.venv/).
    source = tmp_path / "source"
    shutil.copytree(ROOT / "dflash_doctor", source / "dflash_doctor", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                    str(tmp_path), str(source)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("dflash_doctor-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/", 1)[0] for n in names}
    assert tops == {"dflash_doctor", wheel.name.split("-py3")[0] + ".dist-info"}
    assert "dflash_doctor/checks/python/namespaces.py" in names
    assert "dflash_doctor/documents/schema/report-v1.json" in names
    assert "dflash_doctor/facts/probes/environment.py" in names


# Each layer may import only from its own layer and those below it (no exceptions):
# the command line (cli, commands, fleet) -> the run (pipeline, runner, registry, guests, render, fix) ->
# checks, report -> facts, knowledge, documents, codes -> the core's bottom (model, units, shape, context, check,
# request, process).
LAYER_OF = {"cli": 4, "commands": 4, "fleet": 4,
            "pipeline": 3, "runner": 3, "registry": 3, "guest": 3, "guest_process": 3, "render": 3, "fix": 3,
            "checks": 2, "report": 2,
            "facts": 1, "knowledge": 1, "documents": 1, "codes": 1,
            "model": 0, "units": 0, "shape": 0, "context": 0, "check": 0, "request": 0, "process": 0}


def test_imports_point_one_way_and_probes_import_nothing_from_the_package() -> None:
    package = ROOT / "dflash_doctor"
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package).with_suffix("").parts
        tree = ast.parse(path.read_text())
        typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                       and ast.unparse(block.test).endswith("TYPE_CHECKING") for n in ast.walk(block)}
        nodes = [n for n in ast.walk(tree) if id(n) not in typing_only]  # annotations import nothing at run time
        imported = [n.module for n in nodes if isinstance(n, ast.ImportFrom) and n.module]
        imported += [a.name for n in nodes if isinstance(n, ast.Import) for a in n.names]
        # `from dflash_doctor import pipeline` imports the module pipeline
        imported += [f"dflash_doctor.{a.name}" for n in nodes if isinstance(n, ast.ImportFrom)
                     and n.module == "dflash_doctor" for a in n.names]
        ours = [m.split(".")[1] for m in imported if m.startswith("dflash_doctor.") and len(m.split(".")) > 1]
        if parts[:2] == ("facts", "probes") and parts[-1] != "__init__":
            assert not [m for m in imported if m.startswith("dflash_doctor")], path
            continue
        if parts[0] in ("__init__", "__main__"):
            continue
        assert parts[0] in LAYER_OF, f"{path.relative_to(ROOT)} is in no layer: add it to LAYER_OF"
        layer = LAYER_OF[parts[0]]
        above = [m for m in ours if LAYER_OF.get(m, -1) > layer]
        assert not above, f"{path.relative_to(ROOT)} imports {above} from a layer above it"
