"""The speculators one-command launch, `vllm serve SPECULATORS_DIR`, read the way the installed vLLM reads it
(vllm/transformers_utils/config.py maybe_override_with_speculators; knowledge.dflash_reports.SPECULATORS_LAUNCH).

A served model whose config.json has a "speculators_config" is not the target: vLLM serves the verifier that
config names, with the directory as the DFlash drafter. From 0.33.0 a verifier that is not a remote Hub repo id
(a local path, an invalid id, none at all) is refused. `read_launch` is the doctor's reading (held to each
release's own function in tests/test_release_matrix.py); the serve layer judges it (checks.serve.speculators)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import field
from typing import Any

from dflash_doctor.checks.models.model_views import has_behaviour
from dflash_doctor.facts.models.models_shapes import SpeculatorsLaunch
from dflash_doctor.facts.serve.serve_shapes import ServeArgs, VllmDflash
from dflash_doctor.knowledge.dflash_reports import SPECULATORS_LAUNCH
from dflash_doctor.shape import frozen_dataclass

__all__ = ["Launch", "as_served", "read_launch", "valid_repo_id"]


# huggingface_hub utils/_validators.py REPO_ID_REGEX and validate_repo_id (2.4.0), which vLLM 0.33+ calls.
_REPO_ID = re.compile(r"(\b[\w\-.]{1,96}\b/)?\b[\w\-.]{1,96}\b", flags=re.ASCII)


def valid_repo_id(name: object) -> bool:
    """Whether huggingface_hub's validate_repo_id accepts `name` (a string, at most one '/', word characters,
    '-', '_' and '.', no '--' or '..', not ending in '.git')."""
    if not isinstance(name, str) or name.count("/") > 1 or not _REPO_ID.fullmatch(name):
        return False
    return "--" not in name and ".." not in name and not name.endswith(".git")


@frozen_dataclass(frozen=True)
class Launch:
    """What `vllm serve SPECULATORS_DIR` does on the installed vLLM.

    kind: "serves" (the verifier, with the directory as the drafter and `spec` as the speculative config),
    "refused" (0.33+: the verifier is not a remote repo; `message` is vLLM's), "invalid" (the speculators config
    lacks what vLLM requires; `message` is vLLM's), "no-verifier" (before 0.33: vLLM goes on without a model)."""

    kind: str
    drafter: str
    verifier: str | None
    spec: dict[str, Any] = field(default_factory=dict)
    message: str = ""
    dropped: tuple[str, ...] = ()
    """Keys of a --speculative-config given beside the launch that vLLM drops (before 0.29 it drops them all)."""


def read_launch(launch: SpeculatorsLaunch, vllm: VllmDflash | None,
                user_spec: Mapping[str, Any] | None) -> Launch:
    """The installed vLLM's maybe_override_with_speculators on the facts of facts.models.models.speculators_launch."""
    rule = SPECULATORS_LAUNCH.value
    drafter = launch.model or ""
    verifier = launch.verifier
    tokens = launch.speculative_tokens
    # SpeculatorsConfig.validate_speculators_config, then build_vllm_speculative_config, in vLLM's order
    if not (launch.verifier_key and launch.speculative_tokens_key and launch.method_key):
        return Launch("invalid", drafter, verifier, message=rule["invalid_message"])
    if not launch.layer_config:
        return Launch("invalid", drafter, verifier, message="Must provide transformer_layer_config")
    if tokens is None:
        return Launch("invalid", drafter, verifier, message="Missing 'speculative_tokens' in proposal method")
    remote_only = has_behaviour(vllm, "speculators_verifier_remote_only", rule["remote_only_since"])
    if remote_only and (verifier is None or not valid_repo_id(verifier) or launch.verifier_exists):
        return Launch("refused", drafter, verifier, message=rule["message"])
    if not verifier:
        return Launch("no-verifier", drafter, None)
    method = launch.method
    if method == "dflash2" and has_behaviour(vllm, "speculators_dflash2_as_dflash", rule["dflash2_since"]):
        method = "dflash"
    spec: dict[str, Any] = {"method": method, "num_speculative_tokens": tokens}
    dropped: tuple[str, ...] = ()
    if user_spec:
        if has_behaviour(vllm, "speculators_user_spec_merged", rule["merge_since"]):
            spec.update(user_spec)
            dropped = tuple(k for k in ("method", "model") if k in user_spec and user_spec[k] != (
                method if k == "method" else drafter))
        else:
            dropped = tuple(user_spec)
    spec["method"] = method
    spec["model"] = drafter
    return Launch("serves", drafter, verifier, spec, dropped=dropped)


def as_served(serve: ServeArgs | None, launch: SpeculatorsLaunch | None,
              vllm: VllmDflash | None) -> ServeArgs | None:
    """The serve_args facts as vLLM resolved them where its validation ran (ServeArgs.as_resolved), with the
    speculative config the installed vLLM builds for `vllm serve SPECULATORS_DIR`, for the checks that read
    num_speculative_tokens from them."""
    if serve is None:
        return None
    serve = serve.as_resolved()  # what vLLM resolved, where its validation ran
    if not launch:
        return serve
    given = serve.speculative_config
    read = read_launch(launch, vllm, given.value if given.given else None)
    if read.kind != "serves":
        return serve
    return dataclasses.replace(serve, speculative_config=dataclasses.replace(
        given, given=True, value=dict(read.spec), error=None))
