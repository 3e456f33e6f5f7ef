"""The environment `vllm serve` gets, as the installed vLLM's own `validate_environ` judges it: vLLM's verdict where
it imports (the vllm_args probe runs the function), else the lists read from the installed release's source
(facts.serve.vllm_environ): refused values, removed variables, unknown `VLLM_*` names."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dflash_doctor.checks.serve.codes import ENVIRON_REFUSED, ENVIRON_UNKNOWN
from dflash_doctor.checks.serve.view import ServeCommand
from dflash_doctor.facts.serve.serve_shapes import VllmEnvironRules
from dflash_doctor.model import Finding, Remediation, Status
from dflash_doctor.shape import frozen_dataclass

__all__ = ["ENVIRON_IDS", "UNKNOWN_WORDS", "environ_findings", "environ_judged_by_vllm", "hard_fail", "judge_environ"]

ENVIRON_IDS = frozenset({ENVIRON_REFUSED.id, ENVIRON_UNKNOWN.id})
# validate_environ's own words for an unknown variable (every release 0.18.0 .. 0.34.0)
UNKNOWN_WORDS = "Unknown vLLM environment variable detected: "
HARD_FAIL_FLAG = "--fail-on-environ-validation"


@frozen_dataclass(frozen=True)
class _Verdict:
    refused: list[tuple[str, str]]
    """(variable, vLLM's message)"""
    unknown: list[str]
    by: str
    """Who judged: "vLLM 0.34.0's own vllm/platforms/interface.py Platform.validate_environ" or the rules'."""


def hard_fail(argv: list[str]) -> bool:
    """--fail-on-environ-validation (the last of it and --no-fail-on-environ-validation counts, as argparse's)."""
    value = False
    for word in argv:
        if word.replace("_", "-") == HARD_FAIL_FLAG:
            value = True
        elif word.replace("_", "-") == "--no-" + HARD_FAIL_FLAG[2:]:
            value = False
    return value


def environ_judged_by_vllm(c: ServeCommand) -> bool:
    verdict = c.serve.vllm_parser.environ
    return verdict is not None and verdict.function is not None and verdict.not_run is None


def _vllm_verdict(c: ServeCommand) -> _Verdict | None:
    verdict = c.serve.vllm_parser.environ
    if verdict is None or not environ_judged_by_vllm(c):
        return None
    refused: list[tuple[str, str]] = []
    if verdict.error is not None:
        message = verdict.error.message.strip()
        names = c.serve.vllm_environ or []
        name = next((n for n in names if message.startswith(n)), None) or message.split("=")[0].split(" ")[0]
        if message.startswith("Unknown vLLM environment variable detected: "):
            name = message.removeprefix(UNKNOWN_WORDS).strip()
        refused.append((name, message))
    unknown = [w.removeprefix(UNKNOWN_WORDS).strip() for w in verdict.warnings if w.startswith(UNKNOWN_WORDS)]
    return _Verdict(refused, unknown, f"{c.label}'s own {verdict.function}")


def judge_environ(rules: VllmEnvironRules, names: Sequence[str], values: Mapping[str, str | None],
                  hard: bool) -> tuple[list[tuple[str, str]], list[str]]:
    """The release's validate_environ, as read from its source, over the `VLLM_*` `names` in the serve's
    environment (`values`: those the doctor records): ([(variable, vLLM's message)] it refuses, [names] it warns
    about as unknown). vLLM raises on the first refused one in the environment's order."""
    refused: list[tuple[str, str]] = []
    unknown: list[str] = []
    by_value = {r.name for r in rules.refused_values}
    for name in names:
        if name in by_value:  # the release decides on its value alone, and goes on to the next variable
            value = values.get(name)
            message = rules.refuses(name, value) if value is not None else None
            if message:
                refused.append((name, message))
            continue
        if rules.removed and name in rules.removed:
            refused.append((name, f"{name} has been removed. {rules.removed[name]}"))
        elif rules.unknown_prefix and name.startswith(rules.unknown_prefix) and rules.known is not None \
                and name not in rules.known:
            if hard:
                refused.append((name, f"{UNKNOWN_WORDS.strip()} {name}"))
            else:
                unknown.append(name)
    return refused, unknown


def _rules_verdict(c: ServeCommand) -> _Verdict | None:
    rules = c.vllm.environ if c.vllm is not None else None
    names = c.serve.vllm_environ
    if rules is None or names is None:
        return None
    refused, unknown = judge_environ(rules, names, c.serve.environ, hard_fail(c.argv))
    return _Verdict(refused, unknown, f"the doctor's reading of {c.label}'s {rules.validated_by}")


def environ_findings(c: ServeCommand) -> list[Finding]:
    verdict, rules = _vllm_verdict(c), _rules_verdict(c)
    if verdict is not None and verdict.refused and rules is not None:
        # vLLM stops at the first variable it refuses: what it did not reach is the rules' to say
        seen = {name for name, _ in verdict.refused}
        verdict = _Verdict([*verdict.refused, *((n, m) for n, m in rules.refused if n not in seen)],
                           [*verdict.unknown, *(n for n in rules.unknown if n not in verdict.unknown)], verdict.by)
    verdict = verdict or rules
    if verdict is None:
        return []
    out: list[Finding] = []
    for name, message in verdict.refused:
        out.append(ENVIRON_REFUSED.finding(Status.FAIL,
                   f"{c.label} refuses {name} in the environment `vllm serve` gets, before it builds any config: "
                   f"{message}", evidence={"variable": name, "judged_by": verdict.by},
                   remediation=(Remediation(f"unset {name}", f"in the shell that runs vllm serve: {c.label} "
                                            "refuses it"),)))
    if verdict.unknown:
        shown = ", ".join(verdict.unknown)
        out.append(ENVIRON_UNKNOWN.finding(Status.WARN,
                   f"{c.label} does not know {shown}: it only logs \"{UNKNOWN_WORDS}...\" and the variable does "
                   "nothing (a typo, or one another release reads)",
                   evidence={"variables": list(verdict.unknown), "judged_by": verdict.by},
                   remediation=(Remediation("unset " + " ".join(verdict.unknown),
                                            f"{c.label} ignores them; or correct the name"),)))
    return out
