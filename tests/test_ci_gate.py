"""The CI gate: JUnit XML that CI test reporters accept, GitHub workflow commands, profiles, exit codes.

JUnit output is validated against the two schemas the common readers follow, vendored under
tests/fixtures/junit/ (sources and licences in its README): the Jenkins xUnit plugin's junit-10.xsd and
Windy Road's JUnit.xsd (Apache Ant's format). GitHub annotations are read back with a port of the Actions
runner's own parser (actions/runner, src/Runner.Common/ActionCommand.cs, TryParseV2 and its unescaping).
Environments are real venvs with the real flash-attn-4 wheel from PyPI.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema
from conftest import Doctor, findings_of, validate_report
from realenv import Env, fa4_wheel, install, make_venv

FIXTURES = Path(__file__).parent / "fixtures"
SCHEMAS = {name: xmlschema.XMLSchema(str(FIXTURES / "junit" / name)) for name in ("junit-10.xsd", "JUnit.xsd")}
DOCS = Path(__file__).resolve().parent.parent / "docs" / "ci.md"


@pytest.fixture(scope="module")
def fa4_env(tmp_path_factory: pytest.TempPathFactory) -> Env:
    """flash-attn-4 without flash-attn v2 and without torch: a warning (namespace) and a failure
    (flash-attn-4 requires torch) under the real checks."""
    env = make_venv(tmp_path_factory.mktemp("fa4"))
    install(env, fa4_wheel())
    return env


@pytest.fixture(scope="module")
def clean_env(tmp_path_factory: pytest.TempPathFactory) -> Env:
    return make_venv(tmp_path_factory.mktemp("clean"))


def validate_junit(path: Path) -> ET.Element:
    for name, schema in SCHEMAS.items():
        errors = list(schema.iter_errors(str(path)))
        assert not errors, f"{path.name} is not valid against {name}: {errors[0]}"
    return ET.parse(path).getroot()


# ----------------------------------------------------------------------------------------------- JUnit


def test_junit_has_one_testcase_per_check_and_validates_against_both_schemas(
        doctor: Doctor, fa4_env: Env, tmp_path: Path) -> None:
    junit = tmp_path / "doctor.xml"
    report, proc = doctor.report("--python", str(fa4_env.python), "--no-gpu", "--junit", str(junit))
    root = validate_junit(junit)
    cases = root.findall("./testsuite/testcase")
    assert [c.get("name", "").split(":")[0] for c in cases] == [c["id"] for c in report["checks"]]
    suite = root.find("testsuite")
    assert suite is not None
    assert suite.get("tests") == str(len(report["checks"]))
    assert suite.get("failures") == str(sum(c["status"] == "fail" for c in report["checks"]))
    assert proc.returncode == 1
    # The failing check: finding titles in the message, remediation commands in the body.
    distributions = next(c for c in cases if c.get("name", "").startswith("distributions:"))
    failure = distributions.find("failure")
    assert failure is not None
    assert "flash-attn-4 4.0.0b36 requires torch, which is not installed" in failure.get("message", "")
    assert failure.get("type") == "distributions.requirement-missing"
    fixes = [r["command"] for f in findings_of(report, "distributions") if f["status"] == "fail" for r in f["remediation"]]
    assert fixes and all(f"fix: $ {cmd}" in (failure.text or "") for cmd in fixes)
    # Skipped checks are <skipped>; a warning passes without --strict and is listed in system-out.
    skipped = [c for c in cases if c.find("skipped") is not None]
    assert len(skipped) == sum(c["status"] == "skip" for c in report["checks"])
    namespaces = next(c for c in cases if c.get("name", "").startswith("namespaces:"))
    assert list(namespaces) == []
    assert "namespaces.v4-without-v2" in (suite.findtext("system-out") or "")
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["fingerprint"] == report["fingerprint"]["id"]


def test_under_strict_a_warning_is_a_junit_failure(doctor: Doctor, fa4_env: Env, tmp_path: Path) -> None:
    junit = tmp_path / "strict.xml"
    doctor("--python", str(fa4_env.python), "--profile", "ci", "--target-arch", "sm_86", "--junit", str(junit))
    root = validate_junit(junit)
    namespaces = next(c for c in root.iter("testcase") if c.get("name", "").startswith("namespaces:"))
    failure = namespaces.find("failure")
    assert failure is not None and failure.get("type") == "namespaces.v4-without-v2"


def test_a_passing_run_gives_a_valid_junit_without_failures(doctor: Doctor, clean_env: Env, tmp_path: Path) -> None:
    junit = tmp_path / "ok.xml"
    proc = doctor("--python", str(clean_env.python), "--profile", "ci", "--target-arch", "sm_86,sm_90", "--junit", str(junit))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    root = validate_junit(junit)
    assert not list(root.iter("failure")) and not list(root.iter("error"))


def test_junit_survives_control_characters_and_markup_in_findings(tmp_path: Path) -> None:
    from dflash_doctor.render import junit

    report = validate_report({
        "schema": "dflash-doctor/report/v1", "tool": {"name": "dflash-doctor", "version": "0"},
        "created": "2025-01-01T00:00:00Z",
        "target": {"python": "py", "python_version": None, "platform": None, "env_kind": None},
        "summary": {"pass": 0, "warn": 0, "fail": 0, "skip": 0, "error": 1, "exit_code": 1},
        "checks": [{"id": "imports", "layer": "python", "title": "x", "status": "error", "duration_s": 0.1, "facts": {},
                    "findings": [{"id": "doctor.check-crashed", "status": "error", "title": "<b>&\x1b[31m\x00 \"x\"",
                                  "detail": "stderr: \x07\x08 ]]> done", "evidence": {}, "remediation": []}]}],
    })
    path = tmp_path / "odd.xml"
    junit.write(report, str(path))
    root = validate_junit(path)
    error = next(root.iter("error"))
    assert error.get("message", "").startswith("<b>&")
    assert "]]> done" in (error.text or "")


# ----------------------------------------------------------------------------------------------- GitHub


def parse_workflow_command(line: str) -> tuple[str, dict[str, str], str] | None:
    """A port of actions/runner ActionCommand.TryParseV2 (with UnescapeProperty / UnescapeData)."""
    message = line.lstrip()
    if not message.startswith("::"):
        return None
    end = message.find("::", 2)
    if end < 0:
        return None
    info = message[2:end]
    name, _, props_text = info.partition(" ")
    props: dict[str, str] = {}
    for prop in [p for p in props_text.strip().split(",") if p]:
        pair = [p for p in prop.split("=", 1) if p]
        if len(pair) == 2:
            value = pair[1]
            for token, escaped in (("\r", "%0D"), ("\n", "%0A"), (":", "%3A"), (",", "%2C"), ("%", "%25")):
                value = value.replace(escaped, token)
            props[pair[0].lower()] = value
    data = message[end + 2:]
    for token, escaped in (("\r", "%0D"), ("\n", "%0A"), ("%", "%25")):
        data = data.replace(escaped, token)
    return name, props, data


@pytest.mark.parametrize("text", ["plain", "50% of 2: a,b", "multi\nline\r\nwith %0A literal", "::error::inside", "a=b,c=d"])
def test_escaping_round_trips_through_the_runner_parser(text: str) -> None:
    from dflash_doctor.render.github import command

    parsed = parse_workflow_command(command("error", text, title=text))
    assert parsed == ("error", {"title": text}, text)
    assert "\n" not in command("error", text, title=text)


def test_github_format_annotates_each_finding_that_did_not_pass_once(doctor: Doctor, fa4_env: Env) -> None:
    proc = doctor("--python", str(fa4_env.python), "--no-gpu", "--format", "github")
    report, _ = doctor.report("--python", str(fa4_env.python), "--no-gpu")
    lines = proc.stdout.splitlines()
    commands = [c for c in map(parse_workflow_command, lines) if c is not None]
    not_passing = [(c, f) for c in report["checks"] for f in c["findings"] if f["status"] != "pass"]
    assert len(commands) == len(not_passing)
    level = {"fail": "error", "error": "error", "warn": "warning", "skip": "notice"}
    for (name, props, data), (check, found) in zip(commands, not_passing):
        assert name == level[found["status"]]
        assert set(props) == {"title"}
        assert props["title"] == f"dflash-doctor: {check['title']} [{found['id']}]"
        assert data.splitlines()[0] == found["title"]
        for step in found["remediation"]:
            assert f"fix: $ {step['command']}" in data
    assert lines[-1].startswith("dflash-doctor: ") and f"fingerprint {report['fingerprint']['id']}" in lines[-1]
    assert proc.returncode == 1
    assert all(line.startswith("::") for line in lines[:-1])  # nothing else a runner could misread


def test_github_format_writes_the_job_summary_when_actions_asks(doctor: Doctor, fa4_env: Env, tmp_path: Path) -> None:
    summary = tmp_path / "step_summary.md"
    doctor("--python", str(fa4_env.python), "--no-gpu", "--format", "github", env={"GITHUB_STEP_SUMMARY": str(summary)})
    text = summary.read_text()
    assert text.startswith("### dflash-doctor: FAIL (exit 1)")
    assert "| Installed distributions | python | ❌ fail |" in text


# ----------------------------------------------------------------------------------------------- profiles


def test_ci_profile_requires_target_arch_and_means_no_gpu_and_strict(doctor: Doctor, fa4_env: Env) -> None:
    missing = doctor("--python", str(fa4_env.python), "--profile", "ci")
    assert missing.returncode == 2
    assert "profile 'ci' requires --target-arch" in missing.stderr
    report, proc = doctor.report("--python", str(fa4_env.python), "--profile", "ci", "--target-arch", "sm_86",
                                 "--skip", "distributions")
    assert report["options"] == {**report["options"], "no_gpu": True, "strict": True, "profile": "ci",
                                 "target_archs": ["sm_86"]}
    # Without distributions only warnings remain: --strict (from the profile) makes them fail.
    assert {c["status"] for c in report["checks"]} <= {"pass", "warn", "skip"}
    assert proc.returncode == 1 == report["summary"]["exit_code"]


def test_profiles_are_listed_and_users_add_them_in_pyproject_and_config(doctor: Doctor, tmp_path: Path,
                                                                        clean_env: Env) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "image"\n\n'
        '[tool.dflash-doctor.profiles.a10-image]\ndescription = "The A10 serving image"\nextends = "ci"\n'
        'target-arch = ["sm_86"]\nskip = ["import-surface"]\n')
    config = tmp_path / "more.toml"
    config.write_text('[profiles.quick]\ndescription = "Python layers only"\nonly = "python"\ntimeout = 20\n')
    listing = doctor("profiles", "--config", str(config))
    assert listing.returncode == 0
    for name in ("ci  [built-in]", "ticket  [built-in]", f"a10-image  [{tmp_path / 'pyproject.toml'}]", f"quick  [{config}]"):
        assert name in listing.stdout
    assert "--no-gpu --strict --target-arch sm_86 --skip import-surface" in listing.stdout
    report, proc = doctor.report("--python", str(clean_env.python), "--profile", "a10-image")
    assert proc.returncode == 0, proc.stderr
    assert report["options"]["target_archs"] == ["sm_86"] and report["options"]["profile"] == "a10-image"
    assert "import-surface" not in {c["id"] for c in report["checks"]}
    # The command line wins over the profile.
    report, _ = doctor.report("--python", str(clean_env.python), "--profile", "a10-image", "--target-arch", "sm_90")
    assert report["options"]["target_archs"] == ["sm_90"]


@pytest.mark.parametrize("content, message", [
    ('[profiles.x]\nno-gpu = "yes"\n', "[profiles.x] no-gpu: expected true or false"),
    ('[profiles.x]\nfrobnicate = 1\n', "[profiles.x]: unknown option 'frobnicate'"),
    ('[profiles.x]\nextends = "y"\n', "profile 'x' extends unknown profile 'y'"),
    ('[profiles.x\n', "not valid TOML"),
    ('[other]\na = 1\n', "no [profiles.NAME]"),
])
def test_a_bad_config_file_is_named_with_the_problem_and_exits_2(doctor: Doctor, tmp_path: Path, content: str,
                                                                 message: str) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(content)
    proc = doctor("--config", str(config), "--profile", "x")
    assert proc.returncode == 2
    assert str(config) in proc.stderr and message in proc.stderr
    assert "Traceback" not in proc.stderr


# ----------------------------------------------------------------------------------------------- exit codes


def test_exit_code_contract(doctor: Doctor, fa4_env: Env, clean_env: Env, tmp_path: Path) -> None:
    assert doctor("--python", str(clean_env.python), "--no-gpu").returncode == 0
    assert doctor("--python", str(fa4_env.python), "--no-gpu").returncode == 1
    assert doctor("--profile", "no-such-profile").returncode == 2
    unwritable = doctor("--no-gpu", "--junit", str(tmp_path / "no" / "such" / "dir" / "x.xml"))
    assert unwritable.returncode == 2 and "does not exist" in unwritable.stderr
    assert unwritable.stdout == ""  # refused before running, not after


# ----------------------------------------------------------------------------------------------- the docs
# The CI docs (docs/ci.md). Their steps are run here as written, with the image replaced by this
# environment: `docker run --entrypoint dflash-doctor -v HOST:CONTAINER ... IMAGE ARGS` becomes
# `dflash-doctor ARGS` with each container path mapped to its host directory, a Dockerfile's COPY maps its
# destination, and its RUN lines run as they are. (No Docker daemon is needed, nor one used.)


def _blocks(lang: str) -> list[str]:
    """The code blocks of the CI docs."""
    return re.findall(rf"```{lang}\n(.*?)```", DOCS.read_text(), re.DOTALL)


def _logical_lines(block: str) -> list[str]:
    return [line.strip() for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def _shim(tmp_path: Path) -> dict[str, str]:
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    shim = bindir / "dflash-doctor"
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} -m dflash_doctor \"$@\"\n")
    shim.chmod(0o755)
    return {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}


def _docker_run(line: str, host: dict[str, str]) -> tuple[list[str], dict[str, str], dict[str, str]]:
    """(doctor args, container path -> host path, -e variables) of a documented `docker run` line."""
    for name, value in host.items():
        line = line.replace(name, value)
    words = shlex.split(line[line.index("docker run") + len("docker run"):])
    mounts: dict[str, str] = {}
    env: dict[str, str] = {}
    i = 0
    while words[i].startswith("-"):
        if words[i] in ("-v", "--volume"):
            source, target = words[i + 1].split(":")[:2]
            mounts[target] = source
            i += 2
        elif words[i] in ("-e", "--env"):
            key, _, value = words[i + 1].partition("=")
            env[key] = value
            i += 2
        elif words[i] == "--entrypoint":
            assert words[i + 1] == "dflash-doctor"
            i += 2
        elif words[i] in ("--name", "-w", "--workdir", "--gpus", "-u", "--user", "--network"):
            i += 2  # options with a value that do not matter outside Docker
        else:
            i += 1
    return words[i + 1:], mounts, env


def _mapped(args: list[str], mounts: dict[str, str]) -> list[str]:
    out = []
    for arg in args:
        for target, source in sorted(mounts.items(), key=lambda kv: -len(kv[0])):
            if arg == target or arg.startswith(target + "/"):
                arg = source + arg[len(target):]
                break
        out.append(arg)
    return out


def test_the_ci_docs_steps_run_as_written(tmp_path: Path) -> None:
    env = _shim(tmp_path)
    summary = tmp_path / "step_summary.md"
    summary.touch()
    host = {"${{ github.sha }}": "candidate", '"$IMAGE"': "serving:candidate", "$GITHUB_STEP_SUMMARY": str(summary),
            "$PWD": str(tmp_path)}
    docs = DOCS.read_text()
    yaml_blocks, docker_blocks = _blocks("yaml"), _blocks("dockerfile")
    assert len(yaml_blocks) == 2 and len(docker_blocks) == 1

    def run(args: list[str], extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(["dflash-doctor", *args], cwd=tmp_path, env={**env, **(extra_env or {})},
                              capture_output=True, text=True, timeout=300, check=False)
        assert proc.returncode == 0, f"dflash-doctor {shlex.join(args)}\n{proc.stdout}\n{proc.stderr}"
        return proc

    # 1. The first golden.json, as the Dockerfile section says to make it.
    first = next(m.group(0) for m in re.finditer(r"`(docker run [^`]*baseline save[^`]*)`", docs)).strip("`")
    args, mounts, _ = _docker_run(first, host)
    run(_mapped(args, mounts))
    assert (tmp_path / "golden.json").exists()
    # 2. The Dockerfile: COPY maps the baseline into the image, RUN gates at build time.
    dockerfile = _logical_lines(docker_blocks[0])
    image: dict[str, str] = {}
    for line in dockerfile:
        if line.startswith("COPY "):
            source, target = line.split()[1:3]
            image[target] = str(tmp_path / source)
        elif line.startswith("RUN dflash-doctor"):
            run(_mapped(shlex.split(line)[2:], image))
        elif line.startswith("ENTRYPOINT"):
            assert json.loads(line.split(None, 1)[1])[:3] == ["dflash-doctor", "serve", "--exec"]
    # 3. The GitHub Actions and GitLab CI gate steps, in order (a container's own /tmp is a directory here).
    container_tmp = tmp_path / "container-tmp"
    container_tmp.mkdir()
    gates = 0
    for block in yaml_blocks:
        (tmp_path / "reports").mkdir(exist_ok=True)
        for line in _logical_lines(block):
            line = line.removeprefix("- ").removeprefix("run: ")
            if "--entrypoint dflash-doctor" in line:
                args, mounts, variables = _docker_run(line.split(" || ")[0], host)
                mounts = {"/tmp": str(container_tmp), **image, **mounts}
                proc = run(_mapped(args, mounts), _mapped_env(variables, mounts))
                gates += 1
            elif line.startswith("docker cp "):
                for copy in line.split(" && "):
                    source, target = shlex.split(copy)[2:4]
                    shutil.copy(container_tmp / Path(source.split(":", 1)[1]).relative_to("/tmp"), tmp_path / target)
        junit = tmp_path / "reports" / "dflash-doctor.xml"
        validate_junit(junit)
        assert (tmp_path / "reports" / "dflash-doctor.md").read_text().startswith("### dflash-doctor: PASS")
        assert "Golden baseline" in junit.read_text()
        if "--format github" in block:
            assert proc.stdout.splitlines()[-1].startswith("dflash-doctor: ")
            assert summary.read_text().startswith("### dflash-doctor: PASS")
        shutil.rmtree(tmp_path / "reports")
    assert gates == 2
    # 4. The baseline and local blocks, line by line, as a shell runs them.
    for block in _blocks("bash"):
        script = "set -e\n" + block
        proc = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=600, check=False)
        assert proc.returncode == 0, f"{script}\n{proc.stdout}\n{proc.stderr}"
        assert "Traceback" not in proc.stderr


def _mapped_env(variables: dict[str, str], mounts: dict[str, str]) -> dict[str, str]:
    return {k: _mapped([v], mounts)[0] for k, v in variables.items()}
