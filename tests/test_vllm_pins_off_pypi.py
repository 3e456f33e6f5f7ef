"""A remediation that installs a vLLM whose exact pins PyPI cannot satisfy names the index that has them, and
`--verify-fixes` says why such an install fails.

vLLM 0.34.0 requires flashinfer-python==0.7.3 (its wheel's METADATA), which PyPI does not have (0.7.2.post1, then
0.7.4): `pip install vllm==0.34.0` fails, and a plain `pip install vllm` backtracks to 0.33.0.

- the commands: `vllm==0.34.0` (or `vllm>=0.34`) carries `--extra-index-url https://flashinfer.ai/whl/`, with pip
  and uv; a range that admits 0.33.0 does not (pip backtracks to it, from PyPI alone);
- the generic reading, offline and real: pip asked about `vllm==0.34.0` with only the real vLLM 0.34.0 wheel on
  its find-links and no index stops at the first requirement it cannot find; the dry-run facts name vLLM 0.34.0 as
  the distribution that requires it, read from the wheel's own Requires-Dist (pip's --no-deps report);
- the recorded answer of pip 23.2.1 from PyPI (tests/fixtures/dry_runs/vllm-0.34.0-pypi.json, 2026-12-04): the
  fix fails, saying vLLM 0.34.0 requires flashinfer-python==0.7.3 and where FlashInfer publishes it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from realenv import cache_dir, make_venv, uv_bin
from stacks import vllm_site

from dflash_doctor.checks.remedy import Installer, index_for, join
from dflash_doctor.facts.fix import dryrun
from dflash_doctor.facts.fix.dryrun_shapes import DryRuns
from dflash_doctor.fix.verify import judge_item

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "dry_runs" / "vllm-0.34.0-pypi.json"
FLASHINFER_INDEX = "https://flashinfer.ai/whl/"


@pytest.mark.parametrize("spec", ["vllm==0.34.0", "vllm>=0.34", "vllm>=0.34.0,<0.35"])
def test_an_install_that_admits_only_vllm_0_34_names_flashinfers_index(spec: str) -> None:
    assert index_for(spec) == [FLASHINFER_INDEX]
    assert Installer("/env/bin/python").install(spec) == (
        f"/env/bin/python -m pip install --extra-index-url {FLASHINFER_INDEX} '{spec}'")
    assert Installer("/env/bin/python", uv=True).install(spec, reinstall=True) == (
        f"uv pip install --python /env/bin/python --reinstall --extra-index-url {FLASHINFER_INDEX} '{spec}'")


@pytest.mark.parametrize("spec", ["vllm>=0.26.0", "vllm==0.33.0", "vllm", "flash-attn-4==4.0.0b40", "vllm<0.34"])
def test_an_install_pypi_can_satisfy_names_no_other_index(spec: str) -> None:
    assert index_for(spec) == []
    assert "--extra-index-url" not in Installer("/env/bin/python").install(spec)


@pytest.mark.slow
@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_a_requirement_no_index_has_is_read_back_to_the_release_that_requires_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, installer: str) -> None:
    wheel = next((cache_dir() / "wheels").glob("vllm-0.34.0-*.whl"), None)
    if wheel is None:
        vllm_site("0.34.0")  # downloads the wheel into the cache
        wheel = next((cache_dir() / "wheels").glob("vllm-0.34.0-*.whl"))
    links = tmp_path / "links"
    links.mkdir()
    (links / wheel.name).symlink_to(wheel)
    for name, value in (("PIP_CONFIG_FILE", os.devnull), ("PIP_NO_INDEX", "1"), ("PIP_FIND_LINKS", str(links)),
                        ("UV_NO_CONFIG", "1"), ("UV_NO_INDEX", "1"), ("UV_FIND_LINKS", str(links))):
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PATH", os.pathsep.join([str(uv_bin().parent), os.environ.get("PATH", "")]))
    env = make_venv(tmp_path, "uv" if installer == "uv" else "venv", with_pip=installer == "pip")
    # the command as a user would write it, without the index it needs
    command = join(["uv", "pip", "install", "--python", str(env.python), "vllm==0.34.0"] if installer == "uv"
                   else [str(env.python), "-m", "pip", "install", "vllm==0.34.0"])
    facts = dryrun.collect([command], {}, python=str(env.python), timeout_s=120, cwd=str(tmp_path))
    dry = DryRuns.from_json(facts)
    [segment] = dry.items[0].segments
    assert segment.status == "failed", segment.reason
    missing = segment.unavailable
    assert missing is not None and missing.required_by == "vllm 0.34.0"
    verified, _ = judge_item(dry.items[0], dry.installed, dry.marker_environment)
    if installer == "pip":
        # the first requirement pip could not find, as vLLM 0.34.0's own METADATA states it
        assert missing.requires_dist is not None and missing.requires_dist.split(";")[0].replace(" ", "").startswith(
            missing.requirement)
        assert verified.startswith(f"fails: vllm 0.34.0 requires {missing.requirement} (its Requires-Dist), which "
                                   "no configured index has (ERROR: No matching distribution found for ")
    else:  # uv's resolver names the requirer and the pin itself: here, the very pin PyPI lacks
        assert missing.requirement == "flashinfer-python==0.7.3"
        assert verified.startswith("fails: vllm 0.34.0 requires flashinfer-python==0.7.3, which no configured index "
                                   f"has; flashinfer-python publishes it on {FLASHINFER_INDEX}: add --extra-index-url "
                                   f"{FLASHINFER_INDEX} (")


def test_pips_answer_from_pypi_for_vllm_0_34_names_flashinfer_python_0_7_3_and_its_index() -> None:
    data = json.loads(FIXTURE.read_text())
    dry = DryRuns.from_json(data["dry_runs"])
    [item] = dry.items
    verified, _ = judge_item(item, dry.installed, dry.marker_environment)
    assert verified == (
        "fails: vllm 0.34.0 requires flashinfer-python==0.7.3 (its Requires-Dist), which no configured index has; "
        f"flashinfer-python publishes it on {FLASHINFER_INDEX}: add --extra-index-url {FLASHINFER_INDEX} (ERROR: No "
        "matching distribution found for flashinfer-python==0.7.3)")
