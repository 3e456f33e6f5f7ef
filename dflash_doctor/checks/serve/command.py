"""Layer: the `vllm serve` command line, judged before it runs (check `serve-command`).

The command is read by vLLM's own parser when it imports in the target, else by the documented subset.
Judged: the speculative config (JSON, method, drafter, num_speculative_tokens, draft TP), the scheduler's
limits exactly as vLLM's SchedulerConfig and VllmConfig reject them, the DFlash token budget,
--max-model-len against the target's config, attention heads against the tensor-parallel size, and vLLM's
own config validation when it was run. Every rule and the vLLM versions it was read from are in
knowledge.dflash; the installed vLLM's source decides which variant applies (collectors.serve).
"""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Sequence

from dflash_doctor.check import Facts
from dflash_doctor.checks.argv import with_flag, with_spec, without_flag
from dflash_doctor.checks.models.model_views import gpu_view, is_int, text_config
from dflash_doctor.checks.remedy import installer_for, join
from dflash_doctor.checks.serve.codes import (
    DRAFTER_BROKEN,
    ENVIRON_REFUSED,
    FLAG_INVALID,
    FLAGS_UNCHECKED,
    HEADS_TP,
    JUDGED_BY,
    KV_HEADS_TP,
    MAX_MODEL_LEN,
    MODEL_CODE_NOT_RUN,
    MODEL_MISSING,
    NO_SPECULATIVE_CONFIG,
    NOT_A_SERVE_COMMAND,
    PARSED,
    SCHEDULER,
    SPEC_DRAFT_TP,
    SPEC_FLAGS_CONFLICT,
    SPEC_FLAGS_UNKNOWN,
    SPEC_INVALID,
    SPEC_JSON,
    SPEC_K_INVALID,
    SPEC_K_MISSING,
    SPEC_METHOD,
    SPEC_MODEL_MISSING,
    SPEC_OK,
    TOKEN_BUDGET,
    VALIDATION_NOT_RUN,
    VLLM_ATTENTION,
    VLLM_MISSING,
    VLLM_NEWER_THAN_VERIFIED,
    VLLM_PARSER_REJECTED,
    VLLM_VALIDATION,
)
from dflash_doctor.checks.serve.environ import ENVIRON_IDS, environ_findings, environ_judged_by_vllm
from dflash_doctor.checks.serve.pairing import serve_rules
from dflash_doctor.checks.serve.settings import (
    effective_settings,
    gpu_tier,
    max_len_refused,
    repair_spec,
    scheduler_refusal,
    size_gib,
    spec_token_budget,
)
from dflash_doctor.checks.serve.speculators import launch_findings
from dflash_doctor.checks.serve.view import ServeCommand
from dflash_doctor.codes import Code
from dflash_doctor.facts.models.models_shapes import ConfigView, Models
from dflash_doctor.facts.python.envfacts import release
from dflash_doctor.facts.serve.serve_shapes import (
    BackendChoice,
    ModelCodeCall,
    NotValidated,
    ServeArgs,
    SpeculativeConfig,
    VllmDflash,
    VllmError,
    VllmPlatform,
)
from dflash_doctor.knowledge.dflash import (
    DFLASH_FIRST_VERSION,
    DFLASH_INSTALL_SPEC,
    DRAFT_TP_RULE,
    HEADS_DIVISIBLE_RULE,
    KV_HEADS_TP_RULE,
    MAX_MODEL_LEN_RULE,
    METHOD_DETECTION,
    NUM_SPEC_TOKENS_REQUIRED,
    SCHEDULER_RULES,
    SPEC_BUDGET_RULE_A,
    SPEC_BUDGET_RULES,
)
from dflash_doctor.knowledge.dflash_reports import RULES_VERIFIED_THROUGH, VALIDATED_BY_VLLM
from dflash_doctor.knowledge.vllm_cli import SPEC_FLAGS
from dflash_doctor.model import Finding, Remediation, Status

__all__ = ["command_findings", "read_command"]


_SPEC_ERROR_FLAGS = ("--speculative-config", "-sc")


def read_command(facts: Facts) -> ServeCommand:
    """The command's view: the parsed command, the models, vLLM and GPUs it is judged against. For `vllm serve
    SPECULATORS_DIR` the speculative config is the one vLLM builds from the drafter's config."""
    serve = facts.section(ServeArgs).as_resolved()  # what vLLM resolved, where its validation ran
    models = facts.optional_section(Models) or Models()
    vllm = facts.optional_section(VllmDflash)
    label = f"vLLM {vllm.version}" if vllm and vllm.installed else "vLLM"
    spec = serve.speculative_config
    launch, found = launch_findings(models.speculators_launch, vllm, spec.value if spec.given else None,
                                    list(serve.argv), label)
    if launch is not None and launch.kind == "serves":
        spec = dataclasses.replace(spec, given=True, value=dict(launch.spec), error=None)
    return ServeCommand(serve=serve, spec=spec, target=models.target, drafter=models.drafter, vllm=vllm,
                        gpus=gpu_view(facts), prior=facts.prior, installer=installer_for(facts), launch=launch,
                        launch_findings=tuple(found))


def command_findings(facts: Facts) -> list[Finding]:
    """The serve-command check's findings (the command is given)."""
    return _Command(read_command(facts)).findings()


class _Command:
    """The serve-command rules over one command's view, one method per rule (the pairing rules are
    checks.serve.pairing's, over the same view)."""

    def __init__(self, view: ServeCommand) -> None:
        self.view = view
        self.serve = view.serve
        self.fields = view.fields
        self.spec = view.spec
        self.target, self.drafter, self.vllm = view.target, view.drafter, view.vllm
        self.gpus, self.prior, self.installer = view.gpus, view.prior, view.installer
        self.tp, self.pp, self.label, self.argv = view.tp, view.pp, view.label, view.argv
        self.launch = view.launch

    def findings(self) -> list[Finding]:
        if self.serve.program_error:
            return [NOT_A_SERVE_COMMAND.finding(Status.FAIL, self.serve.program_error,
                            evidence={"argv": self.serve.argv})]
        out: list[Finding] = []
        for rule in (self.parsed, self.installed, lambda: list(self.view.launch_findings), self.speculative,
                     self.drafter_verdict, self.max_model_len, self.scheduler, self.budget, self.heads,
                     self.vllm_validation, self.vllm_attention, lambda: environ_findings(self.view),
                     *serve_rules(self.view)):
            out.extend(rule())
        out = self._vllm_first(out)
        out.append(self._judged_by(out))
        return _detail_once(out)

    def parsed(self) -> list[Finding]:
        parser = self.serve.vllm_parser
        out: list[Finding] = []
        if parser.available and parser.parse_error:
            reason = parser.parse_error.splitlines()[-1]
            # The speculative config that is not JSON is what vLLM's parser refused: serve-command.spec-json says so.
            cause: Code | str = SPEC_JSON if self._spec_unreadable() and any(
                flag in reason for flag in (*_SPEC_ERROR_FLAGS, "speculative_config")) else ""
            out.append(VLLM_PARSER_REJECTED.finding(Status.FAIL,
                               f"vLLM {parser.version}'s own parser rejects the command: {reason}",
                               detail=parser.parse_error, evidence={"argv": self.serve.argv},
                               cause=cause))
        version = release(self.vllm.version) if self.vllm is not None and self.vllm.installed else None
        if version and version > (release(RULES_VERIFIED_THROUGH.value) or ()):
            out.append(VLLM_NEWER_THAN_VERIFIED.finding(Status.WARN,
                               f"vLLM {self.vllm.version if self.vllm else ''} is newer than {RULES_VERIFIED_THROUGH.value}, "
                               "the newest release the doctor's rules are checked against: vLLM's own validation "
                               "decides where it speaks",
                               detail=RULES_VERIFIED_THROUGH.source,
                               evidence={"installed": self.vllm.version if self.vllm else None,
                                         "verified_through": RULES_VERIFIED_THROUGH.value}))
        if self.serve.parser == "vllm":
            out.append(PARSED.finding(Status.PASS,
                               f"the command was read by vLLM {parser.version}'s own parser",
                               evidence={"flags_given": self.serve.flags_given}))
        else:
            error = parser.import_error
            unbuilt = parser.parser_error
            why = (f"vLLM does not import in the target ({error.type}: {error.message})" if error
                   # e.g. a CUDA build of vLLM on a machine without a GPU: `vllm serve` fails the same way there
                   else f"vLLM {parser.version}'s parser cannot be built here ({unbuilt.type}: "
                   f"{unbuilt.message})" if unbuilt
                   else "vLLM's parser was not run" if not parser.tried
                   else f"vLLM's parser did not answer ({parser.process.error if parser.process else None})"
                   if not parser.available else "vLLM's parser rejected it")
            silent = parser.tried and not parser.available and not error and not unbuilt
            # A vLLM that hangs or dies while reading the command is worth a warning: `vllm serve` may do the same.
            out.append(PARSED.finding(Status.WARN if silent else Status.PASS,
                               f"the command was read by the doctor's documented subset of vLLM's flags: {why}",
                               evidence={"flags_given": self.serve.flags_given,
                                         "abbreviated": dict(self.serve.abbreviated),
                                         "config_file": self.serve.config_file.to_json() if self.serve.config_file
                                         else None,
                                         "process": parser.process.to_json() if silent and parser.process else None}))
        for flag_error in self.serve.errors:
            if flag_error.flag in _SPEC_ERROR_FLAGS and self._spec_unreadable():
                continue  # the same error is serve-command.spec-json's, with the command to fix it
            out.append(FLAG_INVALID.finding(Status.FAIL, flag_error.message,
                               evidence={"flag": flag_error.flag}))
        unknown = self.serve.unknown_flags
        if unknown:
            config = self.serve.config_file
            unread = f"; --config {config.path} was not read: {config.unread}" if config and config.unread else ""
            out.append(FLAGS_UNCHECKED.finding(Status.WARN,
                               f"{len(unknown)} flag(s) outside the doctor's subset were not checked: {', '.join(unknown)}"
                               + unread,
                               detail="Without vLLM's own parser the doctor reads only its documented subset; a typo "
                               "in one of these would only show when vLLM starts.", evidence={"flags": unknown}))
        if not self.fields.model:
            out.append(MODEL_MISSING.finding(Status.FAIL, "the command names no model (`vllm serve MODEL`)",
                               evidence={"argv": self.serve.argv}))
        return out

    def installed(self) -> list[Finding]:
        if self.vllm is None or self.vllm.installed:
            return []
        return [VLLM_MISSING.finding(Status.FAIL,
                        "vLLM is not installed in the inspected interpreter: `vllm serve` cannot run there",
                        remediation=(Remediation("dflash-doctor serve --python /path/to/serving/venv/bin/python -- vllm serve ...",
                                                 "point the doctor at the interpreter that runs vllm"),))]

    def _spec_unreadable(self) -> bool:
        return bool(self.spec.given and (self.spec.error or not self.spec.value))

    def _block_k(self) -> tuple[int, str]:
        """num_speculative_tokens that fills the drafter's trained block (block_size - 1), and why."""
        config = self.drafter.config if self.drafter is not None else None
        keys = config.drafter if config is not None else ConfigView()
        block = keys.int("block_size") if "block_size" in keys else keys.view("dflash_config").int("block_size")
        if block is not None and block > 1:
            return block - 1, f"block_size {block} - 1: one anchor plus {block - 1} masks fill the drafter's block"
        return 15, "one anchor plus block_size - 1 masks: 15 for the b16 drafters"

    def speculative(self) -> list[Finding]:
        if self.launch is not None and self.launch.kind != "serves":
            return []  # vLLM stops before any speculative config: serve-command.speculators-* says why
        k_fit, k_why = self._block_k()
        if not self.spec.given:
            spec = {"method": "dflash", "model": "DRAFTER_DIR", "num_speculative_tokens": k_fit}
            return [NO_SPECULATIVE_CONFIG.finding(Status.WARN,
                            "no --speculative-config: this command serves without DFlash",
                            remediation=(Remediation(with_spec(self.argv, spec),
                                                     "enable DFlash: put the drafter's directory for DRAFTER_DIR"),))]
        if self._spec_unreadable():
            raw = self.spec.raw
            meant = repair_spec(raw)
            if meant is not None:
                fixed = {"method": "dflash", **meant}
                added = [k for k in ("method",) if k not in meant]
                if "num_speculative_tokens" not in fixed:
                    fixed["num_speculative_tokens"] = k_fit
                    added.append("num_speculative_tokens")
                why = ("the same settings written as JSON (single quotes around it, double quotes inside)"
                       + (f", with {' and '.join(added)} added (vLLM needs them; {k_why})" if added else ""))
            else:
                fixed = {"method": "dflash", "model": "DRAFTER_DIR", "num_speculative_tokens": k_fit}
                why = ("single quotes around the JSON, double quotes inside; put the drafter's directory for "
                       f"DRAFTER_DIR ({k_why})")
            return [SPEC_JSON.finding(Status.FAIL,
                            f"--speculative-config is not a JSON object: {self.spec.error or 'empty'}",
                            evidence={"raw": raw, "meant": meant},
                            remediation=(Remediation(with_spec(self.argv, fixed), why),))]
        out: list[Finding] = self.spec_flags()
        # `vllm serve SPECULATORS_DIR`: the config is the one vLLM builds from the drafter's speculators_config
        flag = "the speculators drafter's config" if self.launch is not None else _spec_words(self.spec)
        if self.spec.has("tensor_parallel_size"):
            out.append(SPEC_INVALID.finding(Status.FAIL,
                               f"{flag} has 'tensor_parallel_size': vLLM refuses it (\"Please pass "
                               "'draft_tensor_parallel_size' instead.\")", detail=DRAFT_TP_RULE.source))
        model = self.spec.item("model")
        method = self.spec.method
        methods = self.vllm.methods if self.vllm else None
        if not isinstance(model, str) or not model:
            out.append(SPEC_MODEL_MISSING.finding(Status.FAIL,
                               f"{flag} has no \"model\": DFlash needs the drafter directory"))
        if method is None:
            if isinstance(model, str) and "dflash" in model.lower():
                out.append(SPEC_METHOD.finding(Status.WARN,
                                   f"{flag} has no \"method\": vLLM detects DFlash only because \"dflash\" is in the path",
                                   detail=METHOD_DETECTION.source,
                                   remediation=(Remediation(with_spec(self.argv, {"method": "dflash", **self.spec.keys}),
                                                            "name the method: do not depend on the path"),)))
            else:
                out.append(SPEC_METHOD.finding(Status.FAIL,
                                   f"{flag} has no \"method\" and the drafter path has no \"dflash\" in it: vLLM loads "
                                   "the drafter as a plain draft model",
                                   detail=METHOD_DETECTION.source,
                                   remediation=(Remediation(with_spec(self.argv, {"method": "dflash", **self.spec.keys}),
                                                            "select DFlash explicitly"),)))
        elif methods is not None and method not in methods:
            drafter = self.prior.get("drafter")
            # The drafter check says the same of this vLLM first (drafter.vllm-without-dflash), with the same fix.
            cause = "drafter.vllm-without-dflash" if method == "dflash" and drafter is not None and any(
                f.id == "drafter.vllm-without-dflash" for f in drafter.findings) else ""
            out.append(SPEC_METHOD.finding(Status.FAIL,
                               f"{flag}: method {method!r} is not one {self.label} knows ({', '.join(methods)})"
                               + (f"; DFlash first shipped in vLLM {DFLASH_FIRST_VERSION.value}" if method == "dflash" else ""),
                               remediation=(Remediation(self.installer.install(DFLASH_INSTALL_SPEC.value), "a vLLM with DFlash"),),
                               cause=cause))
        elif method != "dflash":
            out.append(SPEC_METHOD.finding(Status.WARN,
                               f"{flag}: method {method!r} is not DFlash; the DFlash rules do not apply to it"))
        k = self.spec.item("num_speculative_tokens")
        if k is None:
            out.append(SPEC_K_MISSING.finding(Status.FAIL,
                               f"{flag} has no \"num_speculative_tokens\": vLLM refuses to start (\"A speculative model was "
                               "provided, but neither `speculative_token_tree` nor `num_speculative_tokens` was "
                               "provided\"); it never takes it from the drafter's block_size",
                               detail=NUM_SPEC_TOKENS_REQUIRED.source,
                               remediation=(Remediation(with_spec(self.argv, {**self.spec.keys,
                                                                              "num_speculative_tokens": k_fit}),
                                                        k_why),)))
        elif not is_int(k) or k <= 0:
            out.append(SPEC_K_INVALID.finding(Status.FAIL,
                               f"{flag}: num_speculative_tokens {k!r} is not a positive integer (vLLM: \"Input should "
                               "be greater than 0\")", detail=NUM_SPEC_TOKENS_REQUIRED.source))
        draft_tp = self.spec.item("draft_tensor_parallel_size")
        if draft_tp is not None and draft_tp not in (1, self.tp):
            out.append(SPEC_DRAFT_TP.finding(Status.FAIL,
                               f"{flag}: draft_tensor_parallel_size {draft_tp} is neither 1 nor --tensor-parallel-size "
                               f"{self.tp}: vLLM refuses it (\"cannot be other value than 1 or target model "
                               "tensor_parallel_size\")", detail=DRAFT_TP_RULE.source))
        if not any(f.status is Status.FAIL for f in out):
            out.append(SPEC_OK.finding(Status.PASS,
                               f"{flag}: method {method or 'dflash (from the path)'}, drafter {model}, "
                               f"num_speculative_tokens {k}, draft TP {draft_tp or self.tp}"))
        return out

    def spec_flags(self) -> list[Finding]:
        """--spec-method/--spec-model/--spec-tokens: a key given twice (vLLM's own error, from 0.22.0), or the flags
        on a vLLM that has none (0.21.0 and older: its parser refuses them; where it ran, it said so itself)."""
        out: list[Finding] = []
        first, last = SPEC_FLAGS.value["range"]
        if self.spec.conflict:
            flag = self.spec.conflict.split(" ", 1)[0]
            out.append(SPEC_FLAGS_CONFLICT.finding(Status.FAIL,
                               f"{self.spec.conflict}: vLLM {first} to {last} (and the installed {self.label}) stop "
                               "before serving when a --spec-* flag repeats a key of --speculative-config",
                               detail=SPEC_FLAGS.source, evidence={"flag": flag, "from_flags": self.spec.from_flags},
                               remediation=(Remediation(join(without_flag(self.argv, flag, takes_value=True)),
                                                        f"give it once: keep --speculative-config's, drop {flag}"),)))
        given = [*self.spec.from_flags, *([self.spec.conflict.split(" ", 1)[0]] if self.spec.conflict else [])]
        version = release(self.vllm.version) if self.vllm is not None and self.vllm.installed else None
        if given and self.serve.parser == "subset" and version and version < (release(first) or ()):
            out.append(SPEC_FLAGS_UNKNOWN.finding(Status.FAIL,
                               f"{', '.join(given)}: {self.label} has no such flags (they first shipped in vLLM "
                               f"{first}): its parser stops with \"unrecognized arguments\"",
                               detail=SPEC_FLAGS.source, evidence={"flags": given, "installed": self.vllm.version
                                                                   if self.vllm else None},
                               remediation=(Remediation(with_spec(self.argv, self.spec.keys),
                                                        "the same settings in --speculative-config, which every "
                                                        "release reads"),)))
        return out

    def drafter_verdict(self) -> list[Finding]:
        result = self.prior.get("drafter")
        if result is None or result.status not in (Status.FAIL, Status.ERROR):
            return []
        failing = [f for f in result.findings if f.status in (Status.FAIL, Status.ERROR)]
        # Count causes, not their consequences: one wrong hidden_size is one reason, not thirteen.
        decisive = [f for f in failing if not f.cause] or failing
        return [DRAFTER_BROKEN.finding(Status.FAIL,
                        f"the drafter in --speculative-config fails {len(decisive)} drafter check(s): {decisive[0].title}",
                        evidence={"failed": [f.title for f in decisive[:8]], "failed_ids": [f.id for f in decisive[:8]]},
                        cause=decisive[0].id)]

    def max_model_len(self) -> list[Finding]:
        if self.serve.asked.max_model_len is None:
            return []  # vLLM derives it: nothing asked for that it could refuse
        given = self.fields.max_model_len  # what vLLM resolved, where its validation ran
        if given is None:
            return []
        refused, derived, key = max_len_refused(self.target, self.vllm, given)
        if not refused or derived is None:
            return []
        derived = int(derived)
        allowed = str(self.serve.environ.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN") or "").lower() \
            in ("1", "true")
        return [MAX_MODEL_LEN.finding(Status.WARN if allowed else Status.FAIL,
                        f"--max-model-len {given} is greater than the target's derived maximum ({key}): "
                        + ("allowed by VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, positions past it give NaN with RoPE" if allowed
                           else f"vLLM stops with \"User-specified max_model_len ({given}) is greater than the "
                           "derived max_model_len\""),
                        detail=MAX_MODEL_LEN_RULE.source, evidence={"given": given, "derived": derived, "key": key},
                        remediation=(Remediation(with_flag(self.argv, "--max-model-len", derived), "what the model was trained for"),))]

    def _tiers(self) -> list[tuple[str, str]]:
        """(tier, why) for the GPU vLLM will size its defaults on (its first visible GPU)."""
        if self.gpus.available and self.gpus.devices:
            device = self.gpus.devices[0]
            tier = gpu_tier(device, self.vllm)
            if tier != "unknown":
                return [(tier, f"{device.name} with {size_gib(device.memory.total if device.memory else None)}")]
        return [("small", "a GPU under 70 GiB (or an A100)"), ("large", "a GPU of 70 GiB or more")]

    def scheduler(self) -> list[Finding]:
        out: list[Finding] = []
        for tier, why in self._tiers():
            s = effective_settings(self.fields, self.target, tier, self.vllm)
            mml, tokens, seqs = s.max_model_len, s.max_num_batched_tokens, s.max_num_seqs
            cond = "" if len(self._tiers()) == 1 else f" (on {why}, whose default max_num_seqs is {seqs})"
            refusal = scheduler_refusal(tokens, seqs, mml, s.chunked_prefill)
            if refusal and mml is not None and "max_model_len" in refusal:
                out.append(SCHEDULER.finding(Status.FAIL,
                                   f"max_num_batched_tokens ({tokens}) is smaller than max_model_len ({mml}) with chunked "
                                   f"prefill off: vLLM stops (\"This effectively limits the maximum sequence length to "
                                   f"max_num_batched_tokens and makes vLLM reject longer sequences.\"){cond}",
                                   detail=SCHEDULER_RULES.source, evidence=s.evidence(),
                                   remediation=(Remediation(with_flag(self.argv, "--max-num-batched-tokens", mml), "or drop "
                                                            "--no-enable-chunked-prefill"),)))
            if tokens < seqs:  # vLLM's second refusal: reported too, vLLM would stop at the first
                out.append(SCHEDULER.finding(Status.FAIL,
                                   f"max_num_batched_tokens ({tokens}) must be greater than or equal to max_num_seqs "
                                   f"({seqs}){cond}", detail=SCHEDULER_RULES.source, evidence=s.evidence(),
                                   remediation=(Remediation(with_flag(self.argv, "--max-num-seqs", tokens), "or raise "
                                                            "--max-num-batched-tokens"),)))
        return out[:2]

    def budget(self) -> list[Finding]:
        k = self.spec.num_speculative_tokens
        if k is None or k <= 0 or (self.spec.method if self.spec.has("method") else "dflash") != "dflash":
            return []
        out: list[Finding] = []
        tiers = self._tiers()
        # no vLLM to read: the oldest and the newest rules both judge (the command may meet either)
        known = self.vllm is not None and self.vllm.installed
        rules: list[str | None] = [None] if known else list(SPEC_BUDGET_RULES.value["unread_rules"])
        for rule, (tier, why) in [(r, t) for r in rules for t in tiers]:
            s = effective_settings(self.fields, self.target, tier, self.vllm)
            tokens, seqs = s.max_num_batched_tokens, s.max_num_seqs
            cond = "" if len(tiers) == 1 else f" on {why}"
            seqs_note = f"max_num_seqs {seqs}" + (" (vLLM's default)" if s.seqs_defaulted else "")
            tokens_note = f"max_num_batched_tokens {tokens}" + (" (vLLM's default)" if s.batched_defaulted else "")
            b = spec_token_budget(self.vllm, k, tokens, seqs, rule)
            scheduled, slots = b.max_num_scheduled_tokens, b.slots_per_request
            evidence = {**s.evidence(), **b.evidence()}
            if b.draft_slots is not None:  # the oldest rule: draft slots reserved out of the batch
                delta = b.draft_slots
                if b.error:
                    out.append(TOKEN_BUDGET.finding(Status.FAIL,
                        f"{tokens_note} leaves no tokens to schedule{cond}: DFlash reserves (k - 1) x "
                        f"max_num_seqs = {slots} x {seqs} = {delta} draft slots, so vLLM stops with \"{b.error}\"",
                        detail=SPEC_BUDGET_RULE_A.source, evidence=evidence,
                        remediation=(Remediation(with_flag(self.argv, "--max-num-batched-tokens", delta + 8192),
                                                 f"{delta} draft slots plus 8192 to schedule"),
                                     Remediation(with_flag(self.argv, "--max-num-seqs", max(1, tokens // (2 * max(1, slots)))),
                                                 "or run fewer sequences at once"))))
                elif b.warns:
                    out.append(TOKEN_BUDGET.finding(Status.WARN,
                                       f"{tokens_note} minus {delta} DFlash draft slots ({slots} x {seqs_note}) leaves "
                                       f"max_num_scheduled_tokens {scheduled}{cond}: vLLM warns of suboptimal "
                                       "performance", detail=SPEC_BUDGET_RULE_A.source, evidence=evidence))
                else:
                    out.append(TOKEN_BUDGET.finding(Status.PASS,
                                       f"{tokens_note} minus {delta} DFlash draft slots ({slots} x {seqs_note}) leaves "
                                       f"{scheduled} tokens to schedule per step{cond}", evidence=evidence))
                continue
            cap = b.max_num_active_seqs
            if b.error:
                out.append(TOKEN_BUDGET.finding(Status.FAIL, f"\"{b.error}\"{cond}",
                                   detail=SPEC_BUDGET_RULES.source, evidence=evidence,
                                   remediation=(Remediation(with_flag(self.argv, "--max-num-batched-tokens", 8192),
                                                            "vLLM's default for most GPUs"),)))
            elif cap is not None:
                out.append(TOKEN_BUDGET.finding(Status.WARN,
                                   f"DFlash caps running sequences at {tokens_note} // (k + 1 = {slots}) = {cap}, below "
                                   f"{seqs_note}{cond}: vLLM lowers max_num_active_seqs to {cap}",
                                   detail=SPEC_BUDGET_RULES.source, evidence=evidence,
                                   remediation=(Remediation(with_flag(self.argv, "--max-num-batched-tokens", seqs * slots),
                                                            f"room for {seqs} sequences of {slots} queries"),)))
            elif b.warns:
                out.append(TOKEN_BUDGET.finding(Status.WARN,
                                   f"{tokens_note} leaves max_num_scheduled_tokens {scheduled} under 8192{cond}: vLLM "
                                   "warns of suboptimal performance", detail=SPEC_BUDGET_RULES.source,
                                   evidence=evidence))
            else:
                out.append(TOKEN_BUDGET.finding(Status.PASS,
                                   f"{tokens_note} schedules {scheduled} tokens per step with DFlash's {slots} draft "
                                   f"slots per request, {seqs_note}{cond}", evidence=evidence))
        return out

    def heads(self) -> list[Finding]:
        out: list[Finding] = []
        own_tp = self.spec.integer("draft_tensor_parallel_size")
        draft_tp = own_tp if own_tp is not None else self.tp
        for role, model, tp, flag in (("target", self.target, self.tp, "--tensor-parallel-size"),
                                      ("drafter", self.drafter, draft_tp, "draft_tensor_parallel_size")):
            text = text_config(model)
            heads = text.int("num_attention_heads")
            kv = text.int("num_key_value_heads") if "num_key_value_heads" in text else heads
            if heads is None or not is_int(tp) or tp < 1:
                continue
            if heads % tp:
                out.append(HEADS_TP.finding(Status.FAIL,
                                   f"{role}: \"Total number of attention heads ({heads}) must be divisible by tensor "
                                   f"parallel size ({tp}).\" ({flag} {tp})", detail=HEADS_DIVISIBLE_RULE.source,
                                   evidence={"heads": heads, "tp": tp}))
            elif kv is not None and ((kv >= tp and kv % tp) or (kv < tp and tp % kv)):
                out.append(KV_HEADS_TP.finding(Status.FAIL,
                                   f"{role}: {kv} KV heads across {flag} {tp}: vLLM asserts that the KV heads divide by "
                                   "TP, or TP by the KV heads (then each is replicated)", detail=KV_HEADS_TP_RULE.source,
                                   evidence={"kv_heads": kv, "tp": tp}))
        return out

    # ------------------------------------------------------------------------------ vLLM's own verdicts

    def _on(self) -> str:
        """Where vLLM judged: ' on a simulated 2× sm_86, 48 GiB platform (--target-arch, ...)' or ''."""
        return _platform_words(self.serve.vllm_parser.platform)

    def vllm_validation(self) -> list[Finding]:
        parser = self.serve.vllm_parser
        validation = parser.validation
        version = parser.version or ""
        if parser.not_validated is not None:
            return [self._not_validated(parser.not_validated)]
        if validation is not None and validation.model_code:
            return [self._model_code_not_run(validation.model_code)]
        if validation is None and parser.validating:
            process = parser.process
            return [VLLM_VALIDATION.finding(Status.WARN,
                            f"vLLM {version}'s own config validation did not finish{self._on()}: the probe "
                            f"{(process.error if process else None) or 'ended'}; the doctor's rules judge the command. "
                            "On a cold cache vLLM learns each model class in an interpreter of its own: give "
                            "--timeout 180",
                            evidence={"process": process.to_json() if process else {}})]
        if validation is None:
            return []
        ran_code = {"model_code_run": True, "refused_connections": [c.to_json() for c in validation.refused_connections]
                    } if parser.model_code_run else {}
        if validation.ok:
            return [VLLM_VALIDATION.finding(Status.PASS,
                            f"vLLM {version}'s own config validation (create_engine_config) accepts the command"
                            f"{self._on()}", evidence={"served": validation.served.to_json() if validation.served
                                                       else None, **ran_code})]
        error = validation.error
        message = error.message if error else ""
        limit = simulation_limit(parser.platform, error)
        if limit:
            parts = ""
            if parser.skipped_parts:
                ran = "; its environment check ran on its own" if parser.environ is not None else ""
                parts = " (" + "; ".join(f"{p.function or p.part} {p.skipped}" for p in parser.skipped_parts) + \
                    f"{ran})"
            return [VLLM_VALIDATION.finding(Status.SKIP,
                            f"vLLM {version}'s own config validation could not finish{self._on()}: {limit}{parts}; "
                            "the doctor's rules judge the command", detail=error.traceback if error else "",
                            evidence={"skipped_parts": [p.to_json() for p in parser.skipped_parts]})]
        environ = parser.environ.error if parser.environ is not None else None
        return [VLLM_VALIDATION.finding(Status.FAIL,
                        f"vLLM {version}'s own config validation rejects the command{self._on()}: "
                        f"{error.type if error else ''}: {_validation_reason(message)}",
                        detail=error.traceback if error else "", evidence=ran_code,
                        # validate_environ runs first in create_engine_config: the same refusal
                        cause=ENVIRON_REFUSED if environ is not None and environ.message == message else "")]

    def _not_validated(self, why: NotValidated) -> Finding:
        version = self.serve.vllm_parser.version or ""
        if why.files:
            shown = "; ".join(f.message for f in why.files[:3])  # each names its file
            reason = (f"the doctor refused to read {shown}, and vLLM's validation would read the model's files "
                      "whole")
        else:
            reason = (f"vLLM's parser reads the model(s) {', '.join(why.models)}, which the doctor did not look at "
                      "before (their files could be over the doctor's caps)")
        return VALIDATION_NOT_RUN.finding(Status.WARN,
                        f"vLLM {version}'s own config validation was not run: {reason}; vLLM's parser and the "
                        "doctor's rules judge the command",
                        evidence={"reason": why.reason, "files": [f.to_json() for f in why.files],
                                  "models": list(why.models)})

    def _model_code_not_run(self, calls: Sequence[ModelCodeCall]) -> Finding:
        version = self.serve.vllm_parser.version or ""
        models = list(dict.fromkeys(c.model for c in calls if c.model))
        files = list(dict.fromkeys(c.file for c in calls if c.file))
        auto_map = {f"{m.resolved.path or m.name}": list(m.config.auto_map or [])
                    for m in (self.target, self.drafter) if m is not None and m.config is not None
                    and m.config.auto_map and (m.resolved.path in models or m.name in models)}
        named = "; ".join(f"{d} (config.json auto_map: {', '.join(e)})" for d, e in auto_map.items()) or \
            ", ".join(models)
        return MODEL_CODE_NOT_RUN.finding(Status.WARN,
                        f"vLLM {version}'s own config validation was not run past the model's own code: {named} "
                        f"names code of its own ({', '.join(files)}) that vLLM would load, and the doctor runs no "
                        "model repository's code; vLLM's parser and the doctor's rules judge the command",
                        evidence={"models": models, "files": files, "auto_map": auto_map,
                                  "calls": [c.to_json() for c in calls]},
                        remediation=(Remediation(shlex.join(["dflash-doctor", "serve", "--run-model-code", "--",
                                                             *self.argv]),
                                                 "after reading that code: run it in vLLM's validation, with a HOME "
                                                 "of the doctor's own and outbound connections refused"),))

    def vllm_attention(self) -> list[Finding]:
        parser = self.serve.vllm_parser
        out: list[Finding] = []
        platform = parser.platform
        if parser.validation is not None and parser.validation.ok and not parser.attention and \
                platform is not None and platform.kind == "simulated" and not platform.capability:
            return [VLLM_ATTENTION.finding(Status.SKIP,
                            "vLLM's attention selector was not asked: the serving GPUs' architecture is not known "
                            "here (no GPU, no --target-arch); give --target-arch sm_86 (the serving GPUs') to have "
                            "vLLM pick the target's and the drafter's backends")]
        for judged in parser.attention or []:
            arch = f"sm_{judged.capability[0]}{judged.capability[1]}" if judged.capability else "this GPU"
            for role, choice in (("target", judged.target), ("drafter", judged.drafter)):
                if choice is None:
                    continue
                out.append(self._backend_finding(role, arch, choice))
        return out

    def _backend_finding(self, role: str, arch: str, choice: BackendChoice) -> Finding:
        inputs = choice.inputs
        asked = ", ".join(p for p in (
            f"head size {inputs.head_size}" if inputs.head_size else "",
            f"KV cache {inputs.kv_cache_dtype}" if inputs.kv_cache_dtype else "",
            "non-causal" if inputs.use_non_causal is True or isinstance(inputs.use_non_causal, str) else "",
            f"--attention-backend {inputs.backend_asked}" if inputs.backend_asked else "") if p)
        evidence = {"role": role, "arch": arch, "inputs": inputs.to_json()}
        if choice.backend:
            return VLLM_ATTENTION.finding(Status.PASS,
                           f"vLLM {self.serve.vllm_parser.version}'s attention selector gives the {role} "
                           f"{choice.backend} on {arch} ({asked})", evidence={**evidence, "backend": choice.backend})
        error = choice.error
        message = (error.message if error else "").strip()
        reasons = message[message.find("Reasons:"):] if "Reasons:" in message else message
        limit = simulation_limit(self.serve.vllm_parser.platform, error)
        if limit:
            return VLLM_ATTENTION.finding(Status.SKIP,
                           f"vLLM's attention selector could not be asked for the {role} on {arch}: {limit}",
                           evidence=evidence)
        fixes: list[Remediation] = []
        if inputs.kv_cache_dtype not in (None, "auto") and "kv_cache_dtype not supported" in message:
            fixed = with_flag(self.argv, "--kv-cache-dtype", "auto")
            fixes.append(Remediation(fixed, f"serve with the model's own KV cache dtype: no backend on {arch} takes "
                                     f"a {'non-causal drafter with a ' if role == 'drafter' else ''}"
                                     f"{inputs.kv_cache_dtype} KV cache here"))
        return VLLM_ATTENTION.finding(Status.FAIL,
                       f"vLLM {self.serve.vllm_parser.version}'s attention selector finds no backend for the {role} on "
                       f"{arch} ({asked}): {reasons}", detail=message, evidence=evidence, remediation=tuple(fixes))

    def _vllm_first(self, findings: list[Finding]) -> list[Finding]:
        """On a release newer than the rules are verified through, vLLM's own acceptance outranks a rule that
        restates its validation: that rule's fail is shown as a warning."""
        validation = self.serve.vllm_parser.validation
        version = release(self.serve.vllm_parser.version or "")
        if validation is None or not validation.ok or not version or \
                version <= (release(RULES_VERIFIED_THROUGH.value) or ()):
            return findings
        return [dataclasses.replace(f, status=Status.WARN, title=f"{f.title} (vLLM {self.serve.vllm_parser.version}'s "
                                    f"own validation accepts the command; this rule is verified through "
                                    f"{RULES_VERIFIED_THROUGH.value})")
                if f.status is Status.FAIL and f.id in VALIDATED_BY_VLLM.value else f for f in findings]

    def _judged_by(self, findings: list[Finding]) -> Finding:
        parser = self.serve.vllm_parser
        by_vllm = [f.id for f in findings if f.id in _VLLM_OWN or f.id == PARSED.id
                   and self.serve.parser == "vllm" or f.id in ENVIRON_IDS and environ_judged_by_vllm(self.view)]
        by_vllm = sorted(set(by_vllm))
        rules = sorted({f.id for f in findings if f.id not in by_vllm and f.status is not Status.SKIP
                        and f.id not in _VLLM_NOT_RUN})
        platform = parser.platform
        if by_vllm:
            what = ", ".join(w for w, i in (("its parser", PARSED.id),
                                            ("its config validation", VLLM_VALIDATION.id),
                                            ("its attention selector", VLLM_ATTENTION.id))
                             if i in by_vllm)
            if environ_judged_by_vllm(self.view):
                what += ", its environment check"
            title = f"judged by vLLM {parser.version}'s own code ({what}){self._on()} and by the doctor's rules" + (
                " on the values vLLM resolved" if self.serve.resolved is not None else "")
        else:
            title = "judged by the doctor's rules alone: vLLM's own code did not run on this command"
        stood_in = [s.module for s in platform.stood_in] if platform else []
        answered = [a.op for a in platform.answered if a.asked] if platform else []
        if answered:
            title += (f"; the device queries {', '.join(answered)} were answered for the simulated GPU as the "
                      "compiled op answers them (its release's source: knowledge.vllm DEVICE_QUERY_OPS)")
        resolved = self.serve.resolved
        return JUDGED_BY.finding(Status.PASS, title,
                       evidence={"vllm": by_vllm, "rules": rules,
                                 "resolved": resolved.to_json() if resolved is not None else None,
                                 "platform": platform.to_json() if platform else None,
                                 "stood_in_for_the_driver": stood_in, "answered_for_the_driver": answered})


_VLLM_OWN = frozenset({VLLM_PARSER_REJECTED.id, VLLM_VALIDATION.id, VLLM_ATTENTION.id})
_VLLM_NOT_RUN = frozenset({MODEL_CODE_NOT_RUN.id, VALIDATION_NOT_RUN.id})  # what did not judge, neither vLLM nor a rule
# What an error looks like when vLLM's code needed a compiled op that was stood in for (the CUDA driver is
# absent): the stand-in's own words, or torch's for an op that was never registered.
_STAND_IN_WORDS = ("needs the CUDA driver, which this machine does not have", "'_OpNamespace'")


def _spec_words(spec: SpeculativeConfig) -> str:
    """How the command gives its speculative config: "--speculative-config", the --spec-* flags, or both."""
    if not spec.from_flags:
        return "--speculative-config"
    flags = "/".join(spec.from_flags)
    return f"--speculative-config with {flags}" if spec.raw is not None else flags


def simulation_limit(platform: VllmPlatform | None, error: VllmError | None) -> str | None:
    """Why vLLM's verdict is the simulation's and not the command's, or None."""
    if platform is None or platform.kind != "simulated" or error is None:
        return None
    text = f"{error.message}\n{error.traceback}"
    stood_in = [s.module for s in platform.stood_in]
    if any(w in text for w in _STAND_IN_WORDS) or any(m in text for m in stood_in) or (
            stood_in and "failed to be inspected" in text):
        return (f"vLLM's code needs a compiled module this machine cannot load without the CUDA driver "
                f"({', '.join(stood_in)})")
    return None


def _platform_words(platform: VllmPlatform | None) -> str:
    if platform is None or platform.kind != "simulated":
        return ""
    parts = []
    if platform.count:
        parts.append(f"{platform.count}×")
    parts.append(f"sm_{platform.capability[0]}{platform.capability[1]}" if platform.capability else "unknown arch")
    if platform.memory_bytes:
        parts.append(f"{platform.memory_bytes / (1 << 30):.0f} GiB")
    where = sorted(set(platform.simulated_from.values()))
    return f" on a simulated {' '.join(parts[:2])}{', ' + parts[2] if len(parts) > 2 else ''} platform" + (
        f" ({', '.join(where)})" if where else "")


def _validation_reason(message: str) -> str:
    """The reason in vLLM's error. vLLM's configs are pydantic dataclasses, whose ValidationError reads
    "1 validation error for SchedulerConfig\n[field\n]  Value error, REASON [type=value_error, ...]"."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if len(lines) < 2 or " validation error" not in lines[0]:
        return lines[0] if lines else ""
    field = ""
    for line in lines[1:]:
        if line.startswith("For further information"):
            continue
        reason, bracket, _ = line.partition(" [type=")
        if not bracket:
            field = line  # the field's name precedes a field-level error
            continue
        reason = reason.removeprefix("Value error, ")
        return f"{field}: {reason}" if field else reason
    return lines[0]


def _detail_once(findings: list[Finding]) -> list[Finding]:
    """The same rule judged for two GPU tiers gives two findings with one long detail (its source): keep it on
    the worst of them only, so it is read once."""
    keep: dict[tuple[str, str], int] = {}
    for index, f in enumerate(findings):
        if not f.detail:
            continue
        key = (f.id, f.detail)
        if key not in keep or f.status.rank > findings[keep[key]].status.rank:
            keep[key] = index
    kept = set(keep.values())
    return [f if not f.detail or index in kept else dataclasses.replace(f, detail="")
            for index, f in enumerate(findings)]
