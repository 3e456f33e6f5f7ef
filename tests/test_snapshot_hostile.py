"""`fix --undo` on snapshots it did not write: a hand-made or damaged snapshot directory is refused (exit 2, one
line naming the file, no traceback) before anything is touched, and nothing inside or outside the environment
changes; `fix --yes` never writes outside the environment while it takes a snapshot; snapshots are owner-only.

One real uv venv with the real flash-attn-4 wheel (the seed scenario of tests/test_fix.py) is fixed for real
with `fix --yes`; each case copies that run's snapshot directory, mutates it, and runs the real `fix --undo`.
The proof of "nothing changed" is the kind, mode, mtime and content of every path in the environment and in a
sentinel directory outside it, before and after.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import resource
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from realenv import Env, _clean_environ, dir_digest, fa4_wheel, install, make_venv, uv_bin
from stacks import add_to_path, vllm_site

REPO = Path(__file__).resolve().parent.parent
# The code before snapshots were checked took "roots": "/" (a string) as the roots "/", and removed every path
# under them that its manifest did not list: the cases that could hand it such roots never run against it.
CHECKED = (REPO / "dflash_doctor" / "fix" / "snapshot_schema.py").is_file()
UNSAFE_ON_OLD_CODE = "the unchecked code would walk / and remove what it could: not run against it"
MEMORY_LIMIT = 2 << 30  # an unbounded read (/dev/zero) ends in MemoryError, not in the machine's swap


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def doctor_fix(env: Env, *args: str, snapshots: Path, cwd: Path, timeout: float = 180
               ) -> subprocess.CompletedProcess[str]:
    environ = _clean_environ({"DFLASH_DOCTOR_SNAPSHOTS": str(snapshots)})
    environ["PATH"] = os.pathsep.join([str(uv_bin().parent), environ.get("PATH", "")])
    return subprocess.run([sys.executable, "-m", "dflash_doctor", "fix", "--python", str(env.python), "--no-gpu",
                           "--only", "namespaces,imports", *args], cwd=cwd, env={**environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False,
                          preexec_fn=_limit_memory)  # the limit is set in the child


def state(root: Path) -> dict[str, tuple[Any, ...]]:
    """Every path under `root` (and `root`): kind, mode, mtime and content (a link's target), links not followed."""
    found: dict[str, tuple[Any, ...]] = {}
    for path in [root, *sorted(root.rglob("*"))]:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            what: Any = os.readlink(path)
        elif stat.S_ISREG(st.st_mode):
            what = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            what = None
        found[str(path)] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_mtime_ns, what)
    return found


def seed_env(parent: Path) -> Env:
    env = make_venv(parent, "uv")
    install(env, fa4_wheel(), installer="uv")
    add_to_path(env, vllm_site("0.20.1"))
    return env


def fixed(base: Path) -> tuple[Env, Path]:
    """A seed env fixed for real by `fix --yes`, and the run's snapshot directory."""
    env = seed_env(base / "with space")
    proc = doctor_fix(env, "--yes", snapshots=base / "snaps", cwd=base)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = (base / "snaps").iterdir()
    return env, run_dir


@dataclass
class Taken:
    env: Env
    run_dir: Path
    outside: Path
    base: Path


@pytest.fixture(scope="module")
def taken(tmp_path_factory: pytest.TempPathFactory) -> Taken:
    base = tmp_path_factory.mktemp("hostile")
    env, run_dir = fixed(base)
    outside = base / "outside"
    (outside / "victim").mkdir(parents=True)
    (outside / "keep.txt").write_text("keep\n")
    (outside / "victim" / "a.txt").write_text("a\n")
    return Taken(env, run_dir, outside, base)


# --------------------------------------------------------------------------- the hostile snapshots


@dataclass
class Case:
    env: Env
    run: Path  # this case's copy of the fix run's snapshot directory
    outside: Path

    @property
    def E(self) -> str:  # the environment root, as the snapshot writes it
        return str(self.env.root)

    @property
    def O(self) -> str:  # the sentinel directory outside it
        return str(self.outside)

    @property
    def step(self) -> Path:
        return self.run / "step-1"

    def snap(self, step: str = "step-1") -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.run / step / "snapshot.json").read_text())
        return data

    def write(self, data: Any, step: str = "step-1") -> Path:
        path = self.run / step / "snapshot.json"
        path.write_text(json.dumps(data))
        return path

    def meta(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.run / "fix.json").read_text())
        return data

    def write_meta(self, data: Any) -> Path:
        path = self.run / "fix.json"
        path.write_text(json.dumps(data))
        return path

    def edit(self, change: Callable[[dict[str, Any]], None], step: str = "step-1") -> Path:
        data = self.snap(step)
        change(data)
        return self.write(data, step)

    def a_saved_file(self, data: dict[str, Any]) -> str:
        return min(p for p, i in data["saved"].items() if i["type"] == "file")

    def plant_copy(self, path: str, content: bytes) -> str:
        """A copy in files/ for `path`, where the snapshot keeps them; its sha256."""
        copy = self.step / "files" / path.lstrip("/")
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes(content)
        return hashlib.sha256(content).hexdigest()


DIR = ["dir", 0, 0o755, 0]


def roots_other(c: Case) -> Path:
    return c.edit(lambda d: d.update(roots=[c.O], manifest={c.O: DIR}, saved={}))


def roots_a_string(c: Case) -> Path:
    # Never run on the old code: it walked "/", every character of the string being a root.
    return c.edit(lambda d: d.update(roots=c.E))


def roots_added_outside(c: Case) -> Path:
    return c.edit(lambda d: (d.update(roots=[c.E, c.O]), d["manifest"].update({c.O: DIR})))


def roots_empty(c: Case) -> Path:
    return c.edit(lambda d: d.update(roots=[]))


def saved_dir_outside(c: Case) -> Path:
    return c.edit(lambda d: d["saved"].update({c.O + "/victim/planted": {"type": "dir", "mode": 0o777}}))


def saved_file_outside_chmod(c: Case) -> Path:
    sha = hashlib.sha256(b"keep\n").hexdigest()
    return c.edit(lambda d: d["saved"].update(
        {c.O + "/keep.txt": {"type": "file", "sha256": sha, "mode": 0o777, "mtime_ns": 0}}))


def saved_file_outside_write(c: Case) -> Path:
    path = c.O + "/victim/planted.txt"
    sha = c.plant_copy(path, b"planted\n")
    return c.edit(lambda d: d["saved"].update({path: {"type": "file", "sha256": sha, "mode": 0o644, "mtime_ns": 0}}))


def saved_dotdot(c: Case) -> Path:
    return c.edit(lambda d: d["saved"].update({c.E + "/../../outside/victim/dotdot": {"type": "dir", "mode": 0o755}}))


def manifest_dotdot(c: Case) -> Path:
    return c.edit(lambda d: d["manifest"].update({c.E + "/lib/../../../outside/victim/from-manifest": DIR}))


def saved_relative(c: Case) -> Path:  # run from the sentinel directory: a relative path would land there
    return c.edit(lambda d: d["saved"].update({"victim/relative": {"type": "dir", "mode": 0o755}}))


def saved_through_a_link(c: Case) -> Path:
    os.symlink(c.O, c.E + "/zz-escape")  # a link in the environment, to the sentinel directory
    return c.edit(lambda d: d["saved"].update({c.E + "/zz-escape/planted": {"type": "dir", "mode": 0o755}}))


def saved_below_a_saved_link(c: Case) -> Path:
    return c.edit(lambda d: d["saved"].update({c.E + "/zz-link": {"type": "link", "target": c.O},
                                               c.E + "/zz-link/planted": {"type": "dir", "mode": 0o755}}))


def link_in_a_later_step(c: Case) -> Path:
    shutil.copytree(c.step, c.run / "step-2", symlinks=True)
    c.edit(lambda d: d.update(saved={c.E + "/zz-link2": {"type": "link", "target": c.O}}), "step-2")
    c.write_meta({**c.meta(), "steps_taken": ["step-1", "step-2"]})
    return c.edit(lambda d: d["saved"].update({c.E + "/zz-link2/planted": {"type": "dir", "mode": 0o755}}))


def saved_root_as_a_link(c: Case) -> Path:
    return c.edit(lambda d: d["saved"].update({c.E: {"type": "link", "target": c.O}}))


def manifest_wrong_types(c: Case) -> Path:
    return c.edit(lambda d: d["manifest"].update({c.E: ["dir", "755", None, 0]}))


def manifest_a_list(c: Case) -> Path:
    return c.edit(lambda d: d.update(manifest=[c.E]))


def manifest_malformed_entry(c: Case) -> Path:
    return c.edit(lambda d: d.update(manifest={c.E: DIR, c.E + "/x": "garbage"}))


def mode_huge(c: Case) -> Path:
    return c.edit(lambda d: d["saved"][c.a_saved_file(d)].update(mode=10 ** 30))


def mtime_huge(c: Case) -> Path:
    return c.edit(lambda d: d["saved"][c.a_saved_file(d)].update(mtime_ns=10 ** 30))


def mode_a_bool(c: Case) -> Path:
    return c.edit(lambda d: d["saved"][c.a_saved_file(d)].update(mode=True))


def size_infinite(c: Case) -> Path:
    path = c.edit(lambda d: d["manifest"][c.E].__setitem__(1, 12345.5))
    path.write_text(path.read_text().replace("12345.5", "1e400"))
    return path


def number_too_long(c: Case) -> Path:
    path = c.edit(lambda d: d["manifest"][c.E].__setitem__(1, 12345))
    path.write_text(path.read_text().replace("12345", "9" * 5000))
    return path


def too_large(c: Case) -> Path:
    path = c.step / "snapshot.json"
    os.truncate(path, 300 << 20)  # sparse: more than a snapshot.json may be, costing no disk
    return path


def nesting_deep(c: Case) -> Path:
    path = c.step / "snapshot.json"
    path.write_text("[" * 200_000 + "]" * 200_000)
    return path


def fix_json_nesting_deep(c: Case) -> Path:
    path = c.run / "fix.json"
    path.write_text('{"a":' * 100_000 + "0" + "}" * 100_000)
    return path


def fifo_snapshot_json(c: Case) -> Path:
    path = c.step / "snapshot.json"
    path.unlink()
    os.mkfifo(path)
    return path


def fifo_fix_json(c: Case) -> Path:
    path = c.run / "fix.json"
    path.unlink()
    os.mkfifo(path)
    return path


def dev_zero_snapshot_json(c: Case) -> Path:
    path = c.step / "snapshot.json"
    path.unlink()
    path.symlink_to("/dev/zero")
    return path


def dev_zero_fix_json(c: Case) -> Path:
    path = c.run / "fix.json"
    path.unlink()
    path.symlink_to("/dev/zero")
    return path


def snapshot_json_a_directory(c: Case) -> Path:
    path = c.step / "snapshot.json"
    path.unlink()
    path.mkdir()
    return path


def saved_without_sha256(c: Case) -> Path:
    return c.edit(lambda d: d["saved"][c.a_saved_file(d)].pop("sha256"))


def saved_kind_not_the_manifests(c: Case) -> Path:
    return c.edit(lambda d: d["saved"].update({c.a_saved_file(d): {"type": "dir", "mode": 0o755}}))


def saved_type_unknown(c: Case) -> Path:
    return c.edit(lambda d: d["saved"].update({c.E + "/zz-fifo": {"type": "fifo"}}))


def link_target_a_number(c: Case) -> Path:
    return c.edit(lambda d: d["saved"].update({c.E + "/zz-l": {"type": "link", "target": 5}}))


def copy_tampered(c: Case) -> Path:
    data = c.snap()
    copy = c.step / "files" / c.a_saved_file(data).lstrip("/")
    copy.write_bytes(copy.read_bytes() + b"# planted\n")
    return copy


def copy_a_link_outside(c: Case) -> Path:
    data = c.snap()
    path = c.a_saved_file(data)
    copy = c.step / "files" / path.lstrip("/")
    copy.unlink()
    copy.symlink_to(c.O + "/keep.txt")
    data["saved"][path]["sha256"] = hashlib.sha256(b"keep\n").hexdigest()
    c.write(data)
    return copy


def steps_dotdot(c: Case) -> Path:
    return c.write_meta({**c.meta(), "steps_taken": [f"../{c.run.name}/step-1"]})


def steps_a_string(c: Case) -> Path:
    return c.write_meta({**c.meta(), "steps_taken": "step-1"})


def steps_numbers(c: Case) -> Path:
    return c.write_meta({**c.meta(), "steps_taken": [1]})


def fix_json_another_python(c: Case) -> Path:
    return c.write_meta({**c.meta(), "python": "/usr/bin/python3"})


def snapshot_another_python(c: Case) -> Path:
    return c.edit(lambda d: d.update(python="/usr/bin/python3"))


def format_wrong(c: Case) -> Path:
    return c.edit(lambda d: d.update(format="something/else"))


def command_not_text(c: Case) -> Path:
    return c.edit(lambda d: d.update(command=["rm", "-rf", "/"]))


def step_dir_a_link(c: Case) -> Path:
    elsewhere = c.run.parent / "elsewhere-step"
    shutil.copytree(c.step, elsewhere, symlinks=True)
    shutil.rmtree(c.step)
    c.step.symlink_to(elsewhere)
    return c.step


def path_with_a_newline(c: Case) -> Path:
    return c.edit(lambda d: d["saved"].update({c.O + "/a\nb": {"type": "dir", "mode": 0o755}}))


HOSTILE: dict[str, Callable[[Case], Path]] = {fn.__name__.replace("_", "-"): fn for fn in (
    roots_other, roots_a_string, roots_added_outside, roots_empty, saved_dir_outside, saved_file_outside_chmod,
    saved_file_outside_write, saved_dotdot, manifest_dotdot, saved_relative, saved_through_a_link,
    saved_below_a_saved_link, link_in_a_later_step, saved_root_as_a_link, manifest_wrong_types, manifest_a_list,
    manifest_malformed_entry, mode_huge, mtime_huge, mode_a_bool, size_infinite, number_too_long, too_large, nesting_deep,
    fix_json_nesting_deep, fifo_snapshot_json, fifo_fix_json, dev_zero_snapshot_json, dev_zero_fix_json,
    snapshot_json_a_directory, saved_without_sha256, saved_kind_not_the_manifests, saved_type_unknown, link_target_a_number, copy_tampered,
    copy_a_link_outside, steps_dotdot, steps_a_string, steps_numbers, fix_json_another_python,
    snapshot_another_python, format_wrong, command_not_text, step_dir_a_link, path_with_a_newline)}


def case_of(taken: Taken, tmp_path: Path) -> Case:
    run = tmp_path / "snaps" / taken.run_dir.name
    shutil.copytree(taken.run_dir, run, symlinks=True)
    return Case(taken.env, run, taken.outside)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(HOSTILE))
def test_undo_refuses_a_hostile_snapshot_with_one_line_naming_the_file_and_changes_nothing(
    taken: Taken, tmp_path: Path, name: str
) -> None:
    if name == "roots-a-string" and not CHECKED:
        pytest.skip(UNSAFE_ON_OLD_CODE)
    case = case_of(taken, tmp_path)
    made: list[Path] = []
    try:
        named = HOSTILE[name](case)
        made = [Path(case.E) / n for n in ("zz-escape",) if os.path.lexists(Path(case.E) / n)]
        env_before, outside_before = state(taken.env.root), state(taken.outside)
        proc = doctor_fix(taken.env, "--undo", str(case.run), snapshots=tmp_path / "snaps", cwd=taken.outside,
                          timeout=120)
        assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr[-3000:]
        assert proc.returncode == 2, proc.stdout + proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("dflash-doctor: error: fix --undo: "), proc.stderr
        assert str(named) in lines[0], (str(named), lines[0])
        assert state(taken.env.root) == env_before
        assert state(taken.outside) == outside_before
    finally:
        for path in made:
            path.unlink()


@pytest.mark.slow
def test_undo_looking_for_the_newest_run_passes_over_fix_json_that_is_a_fifo_dev_zero_or_too_deep(
    taken: Taken, tmp_path: Path
) -> None:
    snaps = tmp_path / "snaps"
    for name in ("fifo", "zero", "deep"):
        (snaps / name).mkdir(parents=True)
    os.mkfifo(snaps / "fifo" / "fix.json")
    (snaps / "zero" / "fix.json").symlink_to("/dev/zero")
    (snaps / "deep" / "fix.json").write_text("[" * 200_000)
    before = state(taken.env.root)
    proc = doctor_fix(taken.env, "--undo", snapshots=snaps, cwd=tmp_path, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 2 and proc.stderr.strip() == (
        f"dflash-doctor: error: fix --undo: no fix snapshot for {taken.env.python} under {snaps}"), proc.stderr
    assert state(taken.env.root) == before


@pytest.mark.slow
def test_undo_never_follows_a_link_the_snapshot_says_was_a_directory(tmp_path: Path) -> None:
    """A snapshot may rightly say a path was a directory; the link found there now is removed, never followed."""
    env, run_dir = fixed(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o755)
    os.symlink(outside, env.root / "zz-was-a-dir")
    data = json.loads((run_dir / "step-1" / "snapshot.json").read_text())
    data["manifest"][str(env.root / "zz-was-a-dir")] = ["dir", 0, 0o777, 0]
    (run_dir / "step-1" / "snapshot.json").write_text(json.dumps(data))
    before = state(outside)
    proc = doctor_fix(env, "--undo", str(run_dir), snapshots=tmp_path / "snaps", cwd=tmp_path)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert state(outside) == before  # the old code chmod'ed it 0o777 through the link
    assert not (env.root / "zz-was-a-dir").is_symlink() and (env.root / "zz-was-a-dir").is_dir()


@pytest.mark.slow
def test_snapshots_are_owner_only(taken: Taken) -> None:
    modes = {p: stat.S_IMODE(os.lstat(p).st_mode) for p in [taken.run_dir, *taken.run_dir.rglob("*")]}
    dirs = {p: m for p, m in modes.items() if p.is_dir() and not p.is_symlink()}
    files = {p: m for p, m in modes.items() if p.is_file() and not p.is_symlink()}
    assert dirs and files and (taken.run_dir / "fix.json") in files and (taken.run_dir / "step-1" / "snapshot.json") in files
    assert {m for m in dirs.values()} == {0o700}, {str(p): oct(m) for p, m in dirs.items() if m != 0o700}
    assert {m for m in files.values()} == {0o600}, {str(p): oct(m) for p, m in files.items() if m != 0o600}


@pytest.mark.slow
def test_fix_yes_never_writes_outside_through_a_record_link_that_resolves_elsewhere_in_the_snapshot(
    tmp_path: Path
) -> None:
    """flash-attn-4's RECORD lists a relative link whose `..` run stops at / in the environment, where it
    resolves to a directory of the environment, but goes on up inside the deeper snapshot tree, where it resolves
    to a directory outside (that exists); and a file below that link. The snapshot copies by real path."""
    base = tmp_path
    env = seed_env(base / "with space")
    pkg = env.site_packages / "flash_attn"
    inside = env.site_packages / "zz_target"
    inside.mkdir()
    (inside / "data.txt").write_text("inside\n")
    depth = len(pkg.parts) - 1
    snapshot_depth = len((base / "snaps" / "RUN" / "step-1" / "files").parts) - 1
    # The snapshot tree holds the link at base/snaps/RUN/step-1/files/<pkg>: `..` x (depth + 4) reaches base.
    up = depth + snapshot_depth - len(base.parts) + 1
    os.symlink("../" * up + str(inside).lstrip("/"), pkg / "zz_link")
    outside = Path(str(base) + "/" + str(inside).lstrip("/"))  # where the link leads inside the snapshot tree
    outside.mkdir(parents=True)
    assert os.path.realpath(pkg / "zz_link") == str(inside)
    (dist_info,) = env.site_packages.glob("flash_attn_4-*.dist-info")
    with open(dist_info / "RECORD", "a") as fh:
        fh.write("flash_attn/zz_link,,\nflash_attn/zz_link/data.txt,,\n")
    before = dir_digest(env.root)
    proc = doctor_fix(env, "--yes", snapshots=base / "snaps", cwd=base)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert list(outside.iterdir()) == [], "the snapshot wrote outside the environment"
    assert proc.returncode == 0, proc.stdout + proc.stderr
    undo = doctor_fix(env, "--undo", snapshots=base / "snaps", cwd=base)
    assert undo.returncode == 0, undo.stdout + undo.stderr
    assert dir_digest(env.root) == before
    assert list(outside.iterdir()) == []


# --------------------------------------------------------------------------- the audit: random damage


def _junk(rng: random.Random, case: Case) -> Any:
    return rng.choice([None, True, -1, 10 ** 40, 1.5, "", "..", "/", case.O, case.O + "/victim",
                       case.E + "/../outside", [], {}, [case.E], {"type": "dir", "mode": 0o777}, "x" * 5000,
                       ["dir", 0, 0o777, 0], ["link", 0, 0o777, 0]])


def _mutate(rng: random.Random, case: Case) -> None:
    data = case.snap()
    for _ in range(rng.randint(1, 3)):
        where = rng.choice(["top", "manifest", "saved", "saved-value", "path"])
        if where == "top":
            data[rng.choice(["roots", "manifest", "saved", "format", "python", "command"])] = _junk(rng, case)
        elif where in ("manifest", "saved") and isinstance(data.get(where), dict) and data[where]:
            key = rng.choice(sorted(data[where]))
            data[where][key] = _junk(rng, case)
        elif where == "saved-value" and isinstance(data.get("saved"), dict) and data["saved"]:
            info = data["saved"][rng.choice(sorted(data["saved"]))]
            if isinstance(info, dict):
                info[rng.choice(["type", "mode", "sha256", "mtime_ns", "target"])] = _junk(rng, case)
        elif where == "path" and isinstance(data.get("saved"), dict):
            path = rng.choice([case.O + "/victim/p", case.E + "/../outside/p", case.E + "/lib/../../outside/p",
                               "//" + case.O.lstrip("/") + "/p", case.E + "/./p", "relative/p", case.O])
            data[rng.choice(["saved", "manifest"])] = {**(data.get("saved") or {}),
                                                       path: rng.choice([{"type": "dir", "mode": 0o777},
                                                                         ["dir", 0, 0o777, 0]])}
    case.write(data)


@pytest.mark.slow
def test_thirty_randomly_damaged_snapshots_give_no_traceback_and_write_nothing_outside(
    taken: Taken, tmp_path: Path
) -> None:
    if not CHECKED:
        pytest.skip(UNSAFE_ON_OLD_CODE)
    rng = random.Random(20)
    outside_before = state(taken.outside)
    tracebacks, written = [], []
    for n in range(30):
        case = case_of(taken, tmp_path / str(n))
        _mutate(rng, case)
        proc = doctor_fix(taken.env, "--undo", str(case.run), snapshots=case.run.parent, cwd=taken.outside,
                          timeout=120)
        if "Traceback" in proc.stdout + proc.stderr:
            tracebacks.append((n, proc.stderr[-1500:]))
        if state(taken.outside) != outside_before:
            written.append(n)
    assert tracebacks == [] and written == []
