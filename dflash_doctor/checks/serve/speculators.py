"""The speculators one-command launch judged for the serve-command check, whose CODES hold the ids: the
reading of `vllm serve SPECULATORS_DIR` (checks.models.speculators.read_launch) becomes findings whose fix names
the target and the drafter explicitly."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dflash_doctor.checks.argv import with_spec
from dflash_doctor.checks.models.speculators import Launch, read_launch
from dflash_doctor.checks.serve.codes import (
    SPECULATORS_LAUNCH,
    SPECULATORS_NO_VERIFIER,
    SPECULATORS_VERIFIER_REFUSED,
)
from dflash_doctor.facts.models.models_shapes import SpeculatorsLaunch
from dflash_doctor.facts.serve.serve_shapes import VllmDflash
from dflash_doctor.knowledge.dflash_reports import SPECULATORS_LAUNCH as LAUNCH_RULE
from dflash_doctor.model import Finding, Remediation, Status

__all__ = ["launch_findings", "with_model"]


def with_model(argv: Sequence[str], old: str, new: str) -> list[str]:
    """The command with its served model `old` (`vllm serve OLD` or `--model OLD`) replaced by `new`."""
    words = list(argv)
    for i, word in enumerate(words):
        if i >= 2 and word == old:
            words[i] = new
            return words
        if word.startswith("--model=") and word.split("=", 1)[1] == old:
            words[i] = f"--model={new}"
            return words
    return words


def _explicit(argv: Sequence[str], launch: Launch, k: Any, method: Any) -> str:
    verifier = launch.verifier if isinstance(launch.verifier, str) and launch.verifier else "TARGET"
    spec = {"method": "dflash" if method in ("dflash", "dflash2") else method, "model": launch.drafter,
            "num_speculative_tokens": k}
    return with_spec(with_model(argv, launch.drafter, verifier), spec)


def launch_findings(launch_facts: SpeculatorsLaunch | None, vllm: VllmDflash | None,
                    user_spec: Mapping[str, Any] | None, argv: Sequence[str], label: str) -> tuple[Launch | None, list[Finding]]:
    """(the reading, its findings) for the serve-command check; (None, []) when the model is no speculators dir."""
    if launch_facts is None:
        return None, []
    launch = read_launch(launch_facts, vllm, user_spec)
    file = launch_facts.file or f"{launch.drafter}/config.json"
    k, method = launch_facts.speculative_tokens, launch_facts.method
    evidence = {"file": file, "verifier": launch.verifier, "verifier_exists": launch_facts.verifier_exists,
                "speculators_model_type": method, "speculative_tokens": k}
    detail = f"Source: {LAUNCH_RULE.source}."
    explicit = Remediation(_explicit(argv, launch, k if k is not None else 15, method),
                           "name the target and the drafter explicitly: vLLM then reads the drafter's config as a "
                           "drafter and never looks for a verifier" + (
                               "; put the target's directory or repo id for TARGET" if not launch.verifier else ""))
    if launch.kind == "refused":
        where = ("a local path" if launch_facts.verifier_exists else "not a string" if not isinstance(
            launch.verifier, str) else "not a valid Hub repo id")
        return launch, [SPECULATORS_VERIFIER_REFUSED.finding(Status.FAIL,
            f"`vllm serve {launch.drafter}` is a speculators drafter whose verifier {launch.verifier!r} is {where}: "
            f"{label} refuses it (\"{launch.message}\")",
            detail=detail, evidence=evidence, remediation=(explicit,))]
    if launch.kind == "invalid":
        return launch, [SPECULATORS_NO_VERIFIER.finding(Status.FAIL,
            f"`vllm serve {launch.drafter}`: {file} has a speculators_config {label} cannot read (\"{launch.message}\"), "
            "so it serves no verifier",
            detail=detail, evidence=evidence, remediation=(explicit,))]
    if launch.kind == "no-verifier":
        return launch, [SPECULATORS_NO_VERIFIER.finding(Status.FAIL,
            f"`vllm serve {launch.drafter}` is a speculators drafter whose {file} names no verifier "
            f"(speculators_config.verifier.name_or_path is {launch_facts.verifier_type}): {label} takes the "
            "verifier as the model to serve and is left with none",
            detail=detail, evidence=evidence, remediation=(explicit,))]
    title = (f"`vllm serve {launch.drafter}` is a speculators drafter: {label} serves its verifier {launch.verifier} "
             f"with it as the {launch.spec['method']} drafter (num_speculative_tokens "
             f"{launch.spec['num_speculative_tokens']}); the doctor judges "
             "that pair")
    if launch.dropped:
        return launch, [SPECULATORS_LAUNCH.finding(Status.WARN,
            f"{title}, and drops {', '.join(launch.dropped)} of the --speculative-config given beside it",
            detail=detail, evidence={**evidence, "dropped": list(launch.dropped)}, remediation=(explicit,))]
    return launch, [SPECULATORS_LAUNCH.finding(Status.PASS, title, detail=detail, evidence=evidence)]

