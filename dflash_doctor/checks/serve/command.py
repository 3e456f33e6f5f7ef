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
from collections.abc import Iterable
from typing import Any, ClassVar

from dflash_doctor.check import Facts
from dflash_doctor.checks.argv import with_flag, with_spec
from dflash_doctor.checks.models.common import _is_int, gpu_view, text_config
from dflash_doctor.checks.remedy import installer_for
from dflash_doctor.checks.serve.common import (
    _gib,
    _int_or,
    _not_given,
    _tier,
    effective_settings,
    max_len_refused,
    repair_spec,
    scheduler_refusal,
    spec_token_budget,
)
from dflash_doctor.checks.serve.pairing import serve_rules
from dflash_doctor.checks.serve.speculators import launch_findings
from dflash_doctor.codes import Code
from dflash_doctor.facts.envfacts import release
from dflash_doctor.facts.models_shapes import ConfigView, Models
from dflash_doctor.facts.serve_shapes import BackendChoice, ServeArgs, VllmDflash, VllmPlatform
from dflash_doctor.knowledge.dflash import (
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
from dflash_doctor.model import Finding, Remediation, Status

__all__ = ["ServeCommandCheck"]


CODES: tuple[Code, ...] = (
    Code("serve-command.not-given", "No serve command to check",
         "Run `dflash-doctor serve -- vllm serve MODEL [flags]` with the exact command."),
    Code("serve-command.not-a-serve-command", "The command after -- is not vllm serve",
         "The doctor judges `vllm serve MODEL [flags]` or `python -m vllm.entrypoints.openai.api_server --model "
         "MODEL [flags]`."),
    Code("serve-command.vllm-newer-than-verified", "The installed vLLM is newer than the rules were checked against",
         "The doctor's version-dependent rules are held in CI to the code of each vLLM release up to the one named "
         "(knowledge.dflash_reports.RULES_VERIFIED_THROUGH). A newer vLLM may have changed what they encode: vLLM's "
         "own parser and config validation (run by default when vLLM imports) are the judge: where vLLM accepts the "
         "command, a rule's fail that restates vLLM's validation is shown as a warning; the doctor's other rules "
         "are what that release's predecessor does. Upgrade the doctor when a newer one is out."),
    Code("serve-command.parsed", "Which parser read the command",
         "When vLLM imports in the target interpreter, the doctor parses the command with vLLM's own parser "
         "(make_arg_parser + AsyncEngineArgs.from_cli_args), so every flag of the installed version counts. "
         "Otherwise it reads a documented subset: --tensor-parallel-size, --pipeline-parallel-size, "
         "--max-model-len, --max-num-batched-tokens, --max-num-seqs, --gpu-memory-utilization, --dtype, "
         "--speculative-config, --enable-chunked-prefill, --trust-remote-code, --language-model-only, --port, "
         "--host, --tokenizer, --skip-tokenizer-init, --attention-backend, --kv-cache-dtype. A vLLM that imports "
         "but hangs or dies before it answers (bounded by --timeout) is a warning: `vllm serve` may do the same."),
    Code("serve-command.vllm-parser-rejected", "vLLM's own parser rejects the command",
         "The installed vLLM's argument parser exits on this command line (an unknown flag, a bad value, invalid "
         "JSON). `vllm serve` would stop the same way."),
    Code("serve-command.flag-invalid", "A flag has a value vLLM would refuse",
         "A value that does not parse (a non-integer size, an unknown dtype, a speculative config that is not a "
         "JSON object)."),
    Code("serve-command.flags-unchecked", "Flags outside the doctor's subset",
         "Without vLLM's own parser, flags outside the documented subset are not checked; a typo would only show "
         "when vLLM starts."),
    Code("serve-command.model-missing", "The command names no model",
         "`vllm serve MODEL`: without a model vLLM serves its built-in default, not your target."),
    Code("serve-command.vllm-missing", "vLLM is not installed in the inspected interpreter",
         "The doctor inspects --python (default: its own interpreter). Point it at the interpreter that runs "
         "vllm serve."),
    Code("serve-command.no-speculative-config", "The command does not enable DFlash",
         "Without --speculative-config vLLM serves the target alone."),
    Code("serve-command.spec-json", "--speculative-config is not a JSON object",
         "vLLM parses the value as JSON; shell quoting often breaks it. Quote it with single quotes and use double "
         "quotes inside."),
    Code("serve-command.spec-invalid", "--speculative-config has a key vLLM refuses",
         "'tensor_parallel_size' is refused: 'Please pass draft_tensor_parallel_size instead.'"),
    Code("serve-command.spec-method", "The speculative method is missing or not DFlash",
         "Without \"method\", vLLM picks dflash only when 'dflash' is in the drafter's path and otherwise loads it "
         "as a plain draft model; a method the installed vLLM does not list fails validation. DFlash first shipped "
         "in vLLM 0.20.0."),
    Code("serve-command.spec-model-missing", "--speculative-config names no drafter",
         "DFlash needs \"model\": the drafter's directory or repo id."),
    Code("serve-command.spec-k-missing", "num_speculative_tokens is missing",
         "DFlash drafters have no n_predict, and vLLM never reads their block_size, so vLLM refuses to start: "
         "'A speculative model was provided, but neither `speculative_token_tree` nor `num_speculative_tokens` was "
         "provided'. Use block_size - 1 (15 for b16 drafters)."),
    Code("serve-command.spec-k-invalid", "num_speculative_tokens is not a positive integer",
         "vLLM's SpeculativeConfig takes only num_speculative_tokens > 0: 'Input should be greater than 0'."),
    Code("serve-command.spec-draft-tp", "draft_tensor_parallel_size is neither 1 nor the target's",
         "vLLM: 'cannot be other value than 1 or target model tensor_parallel_size'."),
    Code("serve-command.spec-ok", "The speculative config is complete",
         "Method, drafter, num_speculative_tokens and the draft tensor-parallel size are valid."),
    Code("serve-command.drafter-broken", "The drafter in the speculative config fails its checks",
         "See the drafter check's findings: each is a reason this command would fail or draft badly."),
    Code("serve-command.max-model-len", "--max-model-len exceeds the target's own maximum",
         "vLLM derives a maximum from the target's config (max_position_embeddings scaled by rope_scaling, capped "
         "by tokenizer_config's model_max_length) and refuses a larger --max-model-len unless "
         "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, which risks NaNs past the trained length."),
    Code("serve-command.scheduler", "The batch limits break vLLM's scheduler rules",
         "SchedulerConfig.verify_max_model_len: without chunked prefill, --max-num-batched-tokens must be at least "
         "--max-model-len; always at least --max-num-seqs. The doctor applies vLLM's defaults (which depend on the "
         "first GPU's memory) to the flags you leave out."),
    Code("serve-command.token-budget", "The DFlash token budget",
         "vLLM 0.20-0.24 reserve (num_speculative_tokens - 1) x max_num_seqs draft slots out of "
         "--max-num-batched-tokens and stop when nothing is left to schedule ('max_num_scheduled_tokens is set to "
         "... which does not allow any tokens to be scheduled'); with max_num_seqs defaulting to 1024 on GPUs of 70 "
         "GiB or more, k = 15 needs more than 14336 tokens (so through 0.27.1). From 0.28 nothing is reserved: vLLM "
         "stops only when max_num_batched_tokens <= k ('VllmConfig does not have enough slots...'; k + 1 from 0.33, "
         "which also caps running sequences at max_num_batched_tokens // (k + 1)), and warns under 8192 tokens."),
    Code("serve-command.heads-tp", "Attention heads do not divide by the tensor-parallel size",
         "'Total number of attention heads (...) must be divisible by tensor parallel size (...).' The drafter is "
         "checked against its own draft tensor-parallel size."),
    Code("serve-command.kv-heads-tp", "KV heads and the tensor-parallel size do not divide",
         "vLLM asserts that the KV heads divide by TP, or TP by the KV heads (each is then replicated)."),
    Code("serve-command.vllm-validation", "vLLM's own config validation",
         "When vLLM imports in the target, the doctor runs vLLM's create_engine_config on the exact command "
         "(configs only, no weights, offline) and quotes its verdict. Without the serving GPUs (a CI image build), "
         "vLLM runs on a simulated CUDA platform made of the facts: NVML's GPUs, or --target-arch, --gpus and "
         "--gpu-memory; only the device queries are simulated, and vLLM's compiled modules that need the CUDA "
         "driver are stood in for (named in the facts). Where vLLM's code needs one of those at import (some "
         "releases query compiled ops while inspecting the model), its validation cannot finish there: skip, and "
         "the doctor's rules judge. --no-vllm-validate turns it off."),
    Code("serve-command.vllm-attention", "vLLM's attention selector for the target and the drafter",
         "vLLM's own attention selector (get_attn_backend) is asked which backend the target's and the drafter's "
         "layers get, with the drafter's inputs as the installed release's DFlash proposer sets them (non-causal "
         "attention, its KV cache dtype and backend), on each architecture judged. 'No valid attention backend "
         "found' is a fail quoting vLLM's reasons per backend; an fp8 KV cache with a non-causal drafter is the "
         "usual cause (FlashAttention 2 on sm_8x does not take an fp8 KV cache; FlexAttention takes no fp8; "
         "Triton has no non-causal path in several releases)."),
    Code("serve-command.fp8-kv-float16", "An fp8 KV cache with a float16 model on FlashAttention 3",
         "With --kv-cache-dtype fp8 (or fp8_e4m3), vLLM quantizes each query to fp8 for a backend that takes "
         "quantized queries; on sm_90 that is FlashAttention 3, whose kernel writes an fp8 query's output only as "
         "bfloat16. A float16 model then passes validation, starts, and dies on its first request: 'RuntimeError: "
         "For FP16/BF16 input, output must have the same dtype as inputs. For FP8 input, output must have dtype "
         "BF16' (recorded on an H200 with vLLM 0.20.1, fixtures/engine/11). Serve with --dtype bfloat16 (scenario "
         "12 serves), or keep the model's own KV cache dtype. Sources: knowledge/dflash_reports.py "
         "FP8_QUERY_NEEDS_BFLOAT16."),
    Code("serve-command.judged-by", "Which verdicts are vLLM's own and which the doctor's rules",
         "Says which findings of this check came from vLLM's own code (its parser, create_engine_config, its "
         "attention selector) and on which platform (the machine's GPUs, or a simulated one and where its facts "
         "came from), and which from the doctor's rules."),
    # serve-command: the speculators one-command launch (checks/serve_speculators.py)
    Code("serve-command.speculators-launch", "`vllm serve` names a speculators drafter: vLLM serves its verifier",
         "vLLM reads a served model whose config.json has \"speculators_config\" as a drafter "
         "(transformers_utils/config.py maybe_override_with_speculators): it serves the verifier named in "
         "speculators_config.verifier.name_or_path, with the directory as the drafter and the first proposal "
         "method's speculative_tokens as num_speculative_tokens. The doctor judges that pair. Before vLLM 0.29 a "
         "--speculative-config given beside it is dropped; from 0.29 its keys are merged, except method and model."),
    Code("serve-command.speculators-verifier-refused", "vLLM 0.33+ refuses the speculators drafter's verifier",
         "From vLLM 0.33.0, `vllm serve SPECULATORS_DIR` serves the verifier only when it names a remote Hub "
         "repository: a local path, an invalid repo id or no verifier stops vLLM with \"Speculators verifier must "
         "name a remote model repository. Select local verifiers explicitly with --model and "
         "--speculative-config.\" Serve the target explicitly: `vllm serve TARGET --speculative-config "
         "'{\"method\": \"dflash\", \"model\": \"SPECULATORS_DIR\", \"num_speculative_tokens\": K}'`."),
    Code("serve-command.speculators-no-verifier", "The speculators drafter names no verifier vLLM can serve",
         "`vllm serve SPECULATORS_DIR` serves speculators_config.verifier.name_or_path; a config without it, without "
         "the proposal method's speculative_tokens, speculators_model_type or transformer_layer_config stops vLLM "
         "(\"Invalid speculators config structure\", \"Must provide transformer_layer_config\"), and before 0.33 a "
         "null verifier leaves it with no model to serve. Name the target explicitly."),
    # serve-command: parsers and flags
    Code("serve-command.reasoning-parser", "The reasoning parser is registered",
         "--reasoning-parser names a parser the installed vLLM registers (vllm/reasoning/__init__.py)."),
    Code("serve-command.tool-parser", "The tool-call parser is registered",
         "--tool-call-parser names a parser the installed vLLM registers (vllm/tool_parsers/__init__.py)."),
    Code("serve-command.unknown-reasoning-parser", "The reasoning parser is not registered",
         "vLLM checks --reasoning-parser against its registry before the engine starts and stops with KeyError "
         "\"invalid reasoning parser: NAME (chose from { ... })\". The registry is read from the installed vLLM's "
         "vllm/reasoning/__init__.py; a --reasoning-parser-plugin may add names (then a warning)."),
    Code("serve-command.unknown-tool-parser", "The tool-call parser is not registered",
         "With --enable-auto-tool-choice vLLM checks --tool-call-parser against its registry and stops with KeyError "
         "\"invalid tool call parser: NAME (chose from { ... })\"; without it the parser is not checked and parses "
         "nothing (a warning). The registry is read from the installed vLLM's vllm/tool_parsers/__init__.py."),
    Code("serve-command.auto-tool-choice-without-parser", "--enable-auto-tool-choice without --tool-call-parser",
         "vLLM stops before loading anything: \"Error: --enable-auto-tool-choice requires --tool-call-parser\". Name "
         "the parser for the target's tool-call format, or drop the flag."),
    Code("serve-command.trust-remote-code-needed", "A config.json loads only with --trust-remote-code",
         "The config's model_type is in neither vLLM's own config registry nor the installed transformers, so only "
         "its auto_map code can load it, and transformers refuses remote code without trust_remote_code. Add "
         "--trust-remote-code after reading that code. A known model_type with an auto_map needs nothing."),
    Code("serve-command.multimodal-target", "A multimodal target served without --language-model-only",
         "vLLM builds and loads the vision tower and reserves encoder memory; DFlash drafts text only. "
         "--language-model-only sets every modality limit to 0 and vLLM skips the tower (read from the installed "
         "vLLM's config/multimodal.py)."),
    Code("serve-command.language-model-only", "--language-model-only and what it does here",
         "On a multimodal target it skips the vision tower (text only); on a text-only target it changes nothing; "
         "a vLLM without the flag stops at its parser."),
    Code("serve-command.known-bad-combination", "A DFlash combination reported broken in this vLLM version",
         "A combination users reported failing with DFlash, judged only for the vLLM versions it applies to "
         "(knowledge/dflash_reports.py KNOWN_BAD, each with its issue): CUDA graphs under concurrency on 0.22.1 "
         "(z-lab/dflash #146, --enforce-eager), zero prefix-cache hits with DFlash2 (z-lab/dflash #165, vLLM "
         "#54360), DFlash2's candidate selector only on the V2 runner (club-3090 #1064), acceptance collapsing "
         "at long contexts when the drafter's sliding window is not applied (vLLM PR #40898), and, on sm_80 only, "
         "DFlash2's out-of-bounds read after about 11k decode steps under sampling (vLLM #55279, 0.27.1 on). An "
         "entry bound to an arch is judged from the GPU facts (NVML, or --target-arch/--gpus), and not at all "
         "without them."),
)

_SPEC_ERROR_FLAGS = ("--speculative-config", "-sc")

class _Command:
    def __init__(self, facts: Facts) -> None:
        self.serve = facts.section(ServeArgs)
        self.fields: dict[str, Any] = dict(self.serve.fields)
        self.spec_facts = self.serve.speculative_config
        self.spec: dict[str, Any] = dict(self.spec_facts.value or {})
        models = facts.optional_section(Models) or Models()
        self.target, self.drafter = models.target, models.drafter
        self.vllm = facts.optional_section(VllmDflash)
        self.gpus = gpu_view(facts)
        self.prior = facts.prior
        self.installer = installer_for(facts)
        self.tp = _int_or(self.fields.get("tensor_parallel_size"), 1)
        self.pp = _int_or(self.fields.get("pipeline_parallel_size"), 1)
        self.label = f"vLLM {self.vllm.version}" if self.vllm and self.vllm.installed else "vLLM"
        self.argv: list[str] = list(self.serve.argv)
        # `vllm serve SPECULATORS_DIR`: the speculative config is the one vLLM builds from the drafter's config.
        self.launch, self.launch_findings = launch_findings(
            models.speculators_launch, self.vllm, self.spec_facts.value if self.spec_facts.given else None,
            self.argv, self.label)
        if self.launch is not None and self.launch.kind == "serves":
            self.spec_facts = dataclasses.replace(self.spec_facts, given=True, value=dict(self.launch.spec), error=None)
            self.spec = dict(self.launch.spec)

    def findings(self) -> list[Finding]:
        if self.serve.program_error:
            return [Finding("serve-command.not-a-serve-command", Status.FAIL, self.serve.program_error,
                            evidence={"argv": self.serve.argv})]
        out: list[Finding] = []
        for rule in (self.parsed, self.installed, lambda: self.launch_findings, self.speculative,
                     self.drafter_verdict, self.max_model_len, self.scheduler, self.budget, self.heads,
                     self.vllm_validation, self.vllm_attention, *serve_rules(self)):
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
            cause = "serve-command.spec-json" if self._spec_unreadable() and any(
                flag in reason for flag in (*_SPEC_ERROR_FLAGS, "speculative_config")) else ""
            out.append(Finding("serve-command.vllm-parser-rejected", Status.FAIL,
                               f"vLLM {parser.version}'s own parser rejects the command: {reason}",
                               detail=parser.parse_error, evidence={"argv": self.serve.argv},
                               cause=cause))
        version = release(self.vllm.version) if self.vllm is not None and self.vllm.installed else None
        if version and version > (release(RULES_VERIFIED_THROUGH.value) or ()):
            out.append(Finding("serve-command.vllm-newer-than-verified", Status.WARN,
                               f"vLLM {self.vllm.version if self.vllm else ''} is newer than {RULES_VERIFIED_THROUGH.value}, "
                               "the newest release the doctor's rules are checked against: vLLM's own validation "
                               "decides where it speaks",
                               detail=RULES_VERIFIED_THROUGH.source,
                               evidence={"installed": self.vllm.version if self.vllm else None,
                                         "verified_through": RULES_VERIFIED_THROUGH.value}))
        if self.serve.parser == "vllm":
            out.append(Finding("serve-command.parsed", Status.PASS,
                               f"the command was read by vLLM {parser.version}'s own parser",
                               evidence={"flags_given": self.serve.flags_given}))
        else:
            error = parser.import_error or {}
            unbuilt = parser.parser_error or {}
            why = (f"vLLM does not import in the target ({error.get('type')}: {error.get('message')})" if error
                   # e.g. a CUDA build of vLLM on a machine without a GPU: `vllm serve` fails the same way there
                   else f"vLLM {parser.version}'s parser cannot be built here ({unbuilt.get('type')}: "
                   f"{unbuilt.get('message')})" if unbuilt
                   else "vLLM's parser was not run" if not parser.tried
                   else f"vLLM's parser did not answer ({(parser.process or {}).get('error')})"
                   if not parser.available else "vLLM's parser rejected it")
            silent = parser.tried and not parser.available and not error and not unbuilt
            # A vLLM that hangs or dies while reading the command is worth a warning: `vllm serve` may do the same.
            out.append(Finding("serve-command.parsed", Status.WARN if silent else Status.PASS,
                               f"the command was read by the doctor's documented subset of vLLM's flags: {why}",
                               evidence={"flags_given": self.serve.flags_given,
                                         "process": parser.process if silent else None}))
        for flag_error in self.serve.errors:
            if flag_error.flag in _SPEC_ERROR_FLAGS and self._spec_unreadable():
                continue  # the same error is serve-command.spec-json's, with the command to fix it
            out.append(Finding("serve-command.flag-invalid", Status.FAIL, flag_error.message,
                               evidence={"flag": flag_error.flag}))
        unknown = self.serve.unknown_flags
        if unknown:
            out.append(Finding("serve-command.flags-unchecked", Status.WARN,
                               f"{len(unknown)} flag(s) outside the doctor's subset were not checked: {', '.join(unknown)}",
                               detail="Without vLLM's own parser the doctor reads only its documented subset; a typo "
                               "in one of these would only show when vLLM starts.", evidence={"flags": unknown}))
        if not isinstance(self.fields.get("model"), str) or not self.fields.get("model"):
            out.append(Finding("serve-command.model-missing", Status.FAIL, "the command names no model (`vllm serve MODEL`)",
                               evidence={"argv": self.serve.argv}))
        return out

    def installed(self) -> list[Finding]:
        if self.vllm is None or self.vllm.installed:
            return []
        return [Finding("serve-command.vllm-missing", Status.FAIL,
                        "vLLM is not installed in the inspected interpreter: `vllm serve` cannot run there",
                        remediation=(Remediation("dflash-doctor serve --python /path/to/serving/venv/bin/python -- vllm serve ...",
                                                 "point the doctor at the interpreter that runs vllm"),))]

    def _spec_unreadable(self) -> bool:
        return bool(self.spec_facts.given and (self.spec_facts.error or not self.spec))

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
        if not self.spec_facts.given:
            spec = {"method": "dflash", "model": "DRAFTER_DIR", "num_speculative_tokens": k_fit}
            return [Finding("serve-command.no-speculative-config", Status.WARN,
                            "no --speculative-config: this command serves without DFlash",
                            remediation=(Remediation(with_spec(self.argv, spec),
                                                     "enable DFlash: put the drafter's directory for DRAFTER_DIR"),))]
        if self._spec_unreadable():
            raw = self.spec_facts.raw
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
            return [Finding("serve-command.spec-json", Status.FAIL,
                            f"--speculative-config is not a JSON object: {self.spec_facts.error or 'empty'}",
                            evidence={"raw": raw, "meant": meant},
                            remediation=(Remediation(with_spec(self.argv, fixed), why),))]
        out: list[Finding] = []
        # `vllm serve SPECULATORS_DIR`: the config is the one vLLM builds from the drafter's speculators_config
        flag = "the speculators drafter's config" if self.launch is not None else "--speculative-config"
        if "tensor_parallel_size" in self.spec:
            out.append(Finding("serve-command.spec-invalid", Status.FAIL,
                               f"{flag} has 'tensor_parallel_size': vLLM refuses it (\"Please pass "
                               "'draft_tensor_parallel_size' instead.\")", detail=DRAFT_TP_RULE.source))
        model = self.spec.get("model")
        method = self.spec.get("method")
        methods = self.vllm.methods if self.vllm else None
        if not isinstance(model, str) or not model:
            out.append(Finding("serve-command.spec-model-missing", Status.FAIL,
                               f"{flag} has no \"model\": DFlash needs the drafter directory"))
        if method is None:
            if isinstance(model, str) and "dflash" in model.lower():
                out.append(Finding("serve-command.spec-method", Status.WARN,
                                   f"{flag} has no \"method\": vLLM detects DFlash only because \"dflash\" is in the path",
                                   detail=METHOD_DETECTION.source,
                                   remediation=(Remediation(with_spec(self.argv, {"method": "dflash", **self.spec}),
                                                            "name the method: do not depend on the path"),)))
            else:
                out.append(Finding("serve-command.spec-method", Status.FAIL,
                                   f"{flag} has no \"method\" and the drafter path has no \"dflash\" in it: vLLM loads "
                                   "the drafter as a plain draft model",
                                   detail=METHOD_DETECTION.source,
                                   remediation=(Remediation(with_spec(self.argv, {"method": "dflash", **self.spec}),
                                                            "select DFlash explicitly"),)))
        elif methods is not None and method not in methods:
            drafter = self.prior.get("drafter")
            # The drafter check says the same of this vLLM first (drafter.vllm-without-dflash), with the same fix.
            cause = "drafter.vllm-without-dflash" if method == "dflash" and drafter is not None and any(
                f.id == "drafter.vllm-without-dflash" for f in drafter.findings) else ""
            out.append(Finding("serve-command.spec-method", Status.FAIL,
                               f"{flag}: method {method!r} is not one {self.label} knows ({', '.join(methods)})"
                               + ("; DFlash first shipped in vLLM 0.20.0" if method == "dflash" else ""),
                               remediation=(Remediation(self.installer.install("vllm>=0.20.1"), "a vLLM with DFlash"),),
                               cause=cause))
        elif method != "dflash":
            out.append(Finding("serve-command.spec-method", Status.WARN,
                               f"{flag}: method {method!r} is not DFlash; the DFlash rules do not apply to it"))
        k = self.spec.get("num_speculative_tokens")
        if k is None:
            out.append(Finding("serve-command.spec-k-missing", Status.FAIL,
                               f"{flag} has no \"num_speculative_tokens\": vLLM refuses to start (\"A speculative model was "
                               "provided, but neither `speculative_token_tree` nor `num_speculative_tokens` was "
                               "provided\"); it never takes it from the drafter's block_size",
                               detail=NUM_SPEC_TOKENS_REQUIRED.source,
                               remediation=(Remediation(with_spec(self.argv, {**self.spec,
                                                                              "num_speculative_tokens": k_fit}),
                                                        k_why),)))
        elif not _is_int(k) or k <= 0:
            out.append(Finding("serve-command.spec-k-invalid", Status.FAIL,
                               f"{flag}: num_speculative_tokens {k!r} is not a positive integer (vLLM: \"Input should "
                               "be greater than 0\")", detail=NUM_SPEC_TOKENS_REQUIRED.source))
        draft_tp = self.spec.get("draft_tensor_parallel_size")
        if draft_tp is not None and draft_tp not in (1, self.tp):
            out.append(Finding("serve-command.spec-draft-tp", Status.FAIL,
                               f"{flag}: draft_tensor_parallel_size {draft_tp} is neither 1 nor --tensor-parallel-size "
                               f"{self.tp}: vLLM refuses it (\"cannot be other value than 1 or target model "
                               "tensor_parallel_size\")", detail=DRAFT_TP_RULE.source))
        if not any(f.status is Status.FAIL for f in out):
            out.append(Finding("serve-command.spec-ok", Status.PASS,
                               f"{flag}: method {method or 'dflash (from the path)'}, drafter {model}, "
                               f"num_speculative_tokens {k}, draft TP {draft_tp or self.tp}"))
        return out

    def drafter_verdict(self) -> list[Finding]:
        result = self.prior.get("drafter")
        if result is None or result.status not in (Status.FAIL, Status.ERROR):
            return []
        failing = [f for f in result.findings if f.status in (Status.FAIL, Status.ERROR)]
        # Count causes, not their consequences: one wrong hidden_size is one reason, not thirteen.
        decisive = [f for f in failing if not f.cause] or failing
        return [Finding("serve-command.drafter-broken", Status.FAIL,
                        f"the drafter in --speculative-config fails {len(decisive)} drafter check(s): {decisive[0].title}",
                        evidence={"failed": [f.title for f in decisive[:8]], "failed_ids": [f.id for f in decisive[:8]]},
                        cause=decisive[0].id)]

    def max_model_len(self) -> list[Finding]:
        given = self.fields.get("max_model_len")
        if not _is_int(given):
            return []
        refused, derived, key = max_len_refused(self.target, self.vllm, given)
        if not refused or derived is None:
            return []
        derived = int(derived)
        allowed = str(self.serve.environ.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN") or "").lower() \
            in ("1", "true")
        return [Finding("serve-command.max-model-len", Status.WARN if allowed else Status.FAIL,
                        f"--max-model-len {given} is greater than the target's derived maximum ({key}): "
                        + ("allowed by VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, positions past it give NaN with RoPE" if allowed
                           else f"vLLM stops with \"User-specified max_model_len ({given}) is greater than the "
                           "derived max_model_len\""),
                        detail=MAX_MODEL_LEN_RULE.source, evidence={"given": given, "derived": derived, "key": key},
                        remediation=(Remediation(with_flag(self.argv, "--max-model-len", derived), "what the model was trained for"),))]

    def _tiers(self) -> list[tuple[str, str]]:
        """(tier, why) for the GPU vLLM will size its defaults on (its first visible GPU)."""
        if self.gpus["available"] and self.gpus["devices"]:
            device = self.gpus["devices"][0]
            tier = _tier(device, self.vllm)
            if tier != "unknown":
                return [(tier, f"{device.get('name')} with {_gib((device.get('memory') or {}).get('total'))}")]
        return [("small", "a GPU under 70 GiB (or an A100)"), ("large", "a GPU of 70 GiB or more")]

    def scheduler(self) -> list[Finding]:
        out: list[Finding] = []
        for tier, why in self._tiers():
            s = effective_settings(self.fields, self.target, tier, self.vllm)
            mml, tokens, seqs = s["max_model_len"], s["max_num_batched_tokens"], s["max_num_seqs"]
            cond = "" if len(self._tiers()) == 1 else f" (on {why}, whose default max_num_seqs is {seqs})"
            refusal = scheduler_refusal(tokens, seqs, mml, bool(s["chunked_prefill"]))
            if refusal and "max_model_len" in refusal:
                out.append(Finding("serve-command.scheduler", Status.FAIL,
                                   f"max_num_batched_tokens ({tokens}) is smaller than max_model_len ({mml}) with chunked "
                                   f"prefill off: vLLM stops (\"This effectively limits the maximum sequence length to "
                                   f"max_num_batched_tokens and makes vLLM reject longer sequences.\"){cond}",
                                   detail=SCHEDULER_RULES.source, evidence=s,
                                   remediation=(Remediation(with_flag(self.argv, "--max-num-batched-tokens", mml), "or drop "
                                                            "--no-enable-chunked-prefill"),)))
            if tokens < seqs:  # vLLM's second refusal: reported too, vLLM would stop at the first
                out.append(Finding("serve-command.scheduler", Status.FAIL,
                                   f"max_num_batched_tokens ({tokens}) must be greater than or equal to max_num_seqs "
                                   f"({seqs}){cond}", detail=SCHEDULER_RULES.source, evidence=s,
                                   remediation=(Remediation(with_flag(self.argv, "--max-num-seqs", tokens), "or raise "
                                                            "--max-num-batched-tokens"),)))
        return out[:2]

    def budget(self) -> list[Finding]:
        k = self.spec.get("num_speculative_tokens")
        if not _is_int(k) or k <= 0 or self.spec.get("method", "dflash") != "dflash":
            return []
        out: list[Finding] = []
        tiers = self._tiers()
        # no vLLM to read: the oldest and the newest rules both judge (the command may meet either)
        known = self.vllm is not None and self.vllm.installed
        for rule, (tier, why) in [(r, t) for r in ([None] if known else ["0.20-0.27", "0.33"]) for t in tiers]:
            s = effective_settings(self.fields, self.target, tier, self.vllm)
            tokens, seqs = s["max_num_batched_tokens"], s["max_num_seqs"]
            cond = "" if len(tiers) == 1 else f" on {why}"
            seqs_note = f"max_num_seqs {seqs}" + (" (vLLM's default)" if s["seqs_defaulted"] else "")
            tokens_note = f"max_num_batched_tokens {tokens}" + (" (vLLM's default)" if s["batched_defaulted"] else "")
            b = spec_token_budget(self.vllm, k, tokens, seqs, rule)
            scheduled, slots = b["max_num_scheduled_tokens"], b["slots_per_request"]
            evidence = {**s, **b}
            if b["rule"] == "0.20-0.27":
                delta = b["draft_slots"]
                if b["error"]:
                    out.append(Finding(
                        "serve-command.token-budget", Status.FAIL,
                        f"{tokens_note} leaves no tokens to schedule{cond}: DFlash reserves (k - 1) x "
                        f"max_num_seqs = {slots} x {seqs} = {delta} draft slots, so vLLM stops with \"{b['error']}\"",
                        detail=SPEC_BUDGET_RULE_A.source, evidence=evidence,
                        remediation=(Remediation(with_flag(self.argv, "--max-num-batched-tokens", delta + 8192),
                                                 f"{delta} draft slots plus 8192 to schedule"),
                                     Remediation(with_flag(self.argv, "--max-num-seqs", max(1, tokens // (2 * max(1, slots)))),
                                                 "or run fewer sequences at once"))))
                elif b["warns"]:
                    out.append(Finding("serve-command.token-budget", Status.WARN,
                                       f"{tokens_note} minus {delta} DFlash draft slots ({slots} x {seqs_note}) leaves "
                                       f"max_num_scheduled_tokens {scheduled}{cond}: vLLM warns of suboptimal "
                                       "performance", detail=SPEC_BUDGET_RULE_A.source, evidence=evidence))
                else:
                    out.append(Finding("serve-command.token-budget", Status.PASS,
                                       f"{tokens_note} minus {delta} DFlash draft slots ({slots} x {seqs_note}) leaves "
                                       f"{scheduled} tokens to schedule per step{cond}", evidence=evidence))
                continue
            cap = b["max_num_active_seqs"]
            if b["error"]:
                out.append(Finding("serve-command.token-budget", Status.FAIL, f"\"{b['error']}\"{cond}",
                                   detail=SPEC_BUDGET_RULES.source, evidence=evidence,
                                   remediation=(Remediation(with_flag(self.argv, "--max-num-batched-tokens", 8192),
                                                            "vLLM's default for most GPUs"),)))
            elif cap is not None:
                out.append(Finding("serve-command.token-budget", Status.WARN,
                                   f"DFlash caps running sequences at {tokens_note} // (k + 1 = {slots}) = {cap}, below "
                                   f"{seqs_note}{cond}: vLLM lowers max_num_active_seqs to {cap}",
                                   detail=SPEC_BUDGET_RULES.source, evidence=evidence,
                                   remediation=(Remediation(with_flag(self.argv, "--max-num-batched-tokens", seqs * slots),
                                                            f"room for {seqs} sequences of {slots} queries"),)))
            elif b["warns"]:
                out.append(Finding("serve-command.token-budget", Status.WARN,
                                   f"{tokens_note} leaves max_num_scheduled_tokens {scheduled} under 8192{cond}: vLLM "
                                   "warns of suboptimal performance", detail=SPEC_BUDGET_RULES.source,
                                   evidence=evidence))
            else:
                out.append(Finding("serve-command.token-budget", Status.PASS,
                                   f"{tokens_note} schedules {scheduled} tokens per step with DFlash's {slots} draft "
                                   f"slots per request, {seqs_note}{cond}", evidence=evidence))
        return out

    def heads(self) -> list[Finding]:
        out: list[Finding] = []
        draft_tp = _int_or(self.spec.get("draft_tensor_parallel_size"), self.tp)
        for role, model, tp, flag in (("target", self.target, self.tp, "--tensor-parallel-size"),
                                      ("drafter", self.drafter, draft_tp, "draft_tensor_parallel_size")):
            text = text_config(model)
            heads = text.int("num_attention_heads")
            kv = text.int("num_key_value_heads") if "num_key_value_heads" in text else heads
            if heads is None or not _is_int(tp) or tp < 1:
                continue
            if heads % tp:
                out.append(Finding("serve-command.heads-tp", Status.FAIL,
                                   f"{role}: \"Total number of attention heads ({heads}) must be divisible by tensor "
                                   f"parallel size ({tp}).\" ({flag} {tp})", detail=HEADS_DIVISIBLE_RULE.source,
                                   evidence={"heads": heads, "tp": tp}))
            elif kv is not None and ((kv >= tp and kv % tp) or (kv < tp and tp % kv)):
                out.append(Finding("serve-command.kv-heads-tp", Status.FAIL,
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
        if validation is None and parser.validating:
            process = parser.process or {}
            return [Finding("serve-command.vllm-validation", Status.WARN,
                            f"vLLM {version}'s own config validation did not finish{self._on()}: the probe "
                            f"{process.get('error') or 'ended'}; the doctor's rules judge the command. On a cold "
                            "cache vLLM learns each model class in an interpreter of its own: give --timeout 180",
                            evidence={"process": process})]
        if validation is None:
            return []
        if validation.ok:
            return [Finding("serve-command.vllm-validation", Status.PASS,
                            f"vLLM {version}'s own config validation (create_engine_config) accepts the command"
                            f"{self._on()}", evidence={"served": validation.served.to_json() if validation.served
                                                       else None})]
        error = validation.error
        message = error.message if error else ""
        limit = simulation_limit(parser.platform, error)
        if limit:
            return [Finding("serve-command.vllm-validation", Status.SKIP,
                            f"vLLM {version}'s own config validation could not finish{self._on()}: {limit}; the "
                            "doctor's rules judge the command", detail=error.traceback if error else "")]
        return [Finding("serve-command.vllm-validation", Status.FAIL,
                        f"vLLM {version}'s own config validation rejects the command{self._on()}: "
                        f"{error.type if error else ''}: {_validation_reason(message)}",
                        detail=error.traceback if error else "")]

    def vllm_attention(self) -> list[Finding]:
        parser = self.serve.vllm_parser
        out: list[Finding] = []
        platform = parser.platform
        if parser.validation is not None and parser.validation.ok and not parser.attention and \
                platform is not None and platform.kind == "simulated" and not platform.capability:
            return [Finding("serve-command.vllm-attention", Status.SKIP,
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
            return Finding("serve-command.vllm-attention", Status.PASS,
                           f"vLLM {self.serve.vllm_parser.version}'s attention selector gives the {role} "
                           f"{choice.backend} on {arch} ({asked})", evidence={**evidence, "backend": choice.backend})
        error = choice.error
        message = (error.message if error else "").strip()
        reasons = message[message.find("Reasons:"):] if "Reasons:" in message else message
        limit = simulation_limit(self.serve.vllm_parser.platform, error)
        if limit:
            return Finding("serve-command.vllm-attention", Status.SKIP,
                           f"vLLM's attention selector could not be asked for the {role} on {arch}: {limit}",
                           evidence=evidence)
        fixes: list[Remediation] = []
        if inputs.kv_cache_dtype not in (None, "auto") and "kv_cache_dtype not supported" in message:
            fixed = with_flag(self.argv, "--kv-cache-dtype", "auto")
            fixes.append(Remediation(fixed, f"serve with the model's own KV cache dtype: no backend on {arch} takes "
                                     f"a {'non-causal drafter with a ' if role == 'drafter' else ''}"
                                     f"{inputs.kv_cache_dtype} KV cache here"))
        return Finding("serve-command.vllm-attention", Status.FAIL,
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
        by_vllm = [f.id for f in findings if f.id in _VLLM_OWN or f.id == "serve-command.parsed"
                   and self.serve.parser == "vllm"]
        by_vllm = sorted(set(by_vllm))
        rules = sorted({f.id for f in findings if f.id not in by_vllm and f.status is not Status.SKIP})
        platform = parser.platform
        if by_vllm:
            what = ", ".join(w for w, i in (("its parser", "serve-command.parsed"),
                                            ("its config validation", "serve-command.vllm-validation"),
                                            ("its attention selector", "serve-command.vllm-attention"))
                             if i in by_vllm)
            title = f"judged by vLLM {parser.version}'s own code ({what}){self._on()} and by the doctor's rules"
        else:
            title = "judged by the doctor's rules alone: vLLM's own code did not run on this command"
        stood_in = [s.module for s in platform.stood_in] if platform else []
        return Finding("serve-command.judged-by", Status.PASS, title,
                       evidence={"vllm": by_vllm, "rules": rules,
                                 "platform": platform.to_json() if platform else None,
                                 "stood_in_for_the_driver": stood_in})


_VLLM_OWN = frozenset({"serve-command.vllm-parser-rejected", "serve-command.vllm-validation",
                       "serve-command.vllm-attention"})
# What an error looks like when vLLM's code needed a compiled op that was stood in for (the CUDA driver is
# absent): the stand-in's own words, or torch's for an op that was never registered.
_STAND_IN_WORDS = ("needs the CUDA driver, which this machine does not have", "'_OpNamespace'")


def simulation_limit(platform: VllmPlatform | None, error: Any) -> str | None:
    """Why vLLM's verdict is the simulation's and not the command's, or None."""
    if platform is None or platform.kind != "simulated" or error is None:
        return None
    text = f"{getattr(error, 'message', '')}\n{getattr(error, 'traceback', '')}"
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


class ServeCommandCheck:
    id: ClassVar[str] = "serve-command"
    layer: ClassVar[str] = "serve"
    title: ClassVar[str] = "vllm serve command line"
    codes: ClassVar[tuple[Code, ...]] = tuple(c for c in CODES if c.id.startswith("serve-command."))
    needs: ClassVar[frozenset[str]] = frozenset({"serve_args", "models", "vllm_dflash", "gpu", "target"})
    after: ClassVar[frozenset[str]] = frozenset({"drafter"})
    requires_gpu: ClassVar[bool] = False

    def judge(self, facts: Facts) -> Iterable[Finding]:
        if not facts.section(ServeArgs).given:
            return _not_given(self.id)
        return _Command(facts).findings()
