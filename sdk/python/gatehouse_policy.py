"""Gatehouse tenant policies in Python: the decision builders and request helpers of the Rust SDK.

A policy module defines ``evaluate(ctx)`` and exports it with ``export_policy``::

    from gatehouse_policy import Context, allow, deny, export_policy

    def evaluate(ctx: Context):
        if ctx.mentions_any(["launch date"]):
            return deny("acme: the launch date is not discussed here")
        return allow()

    PolicyApi = export_policy("acme", "0.1.0", "refuses requests about the launch", evaluate)

``componentize-py`` generates the ``wit_world`` bindings from ``wit/gatehouse.wit`` at build time
(``gatehouse plugin build``). Every call runs in a fresh instance: keep no state between calls.
"""

import json
import os
import sys
import traceback
from typing import Callable, Iterable, List, Optional

from wit_world.exports import policy_api
from wit_world.imports import host_log, types

DataAction = policy_api.DataAction
"""What findings of a detector lead to: ``ALLOW``, ``FLAG``, ``REDACT``, ``BLOCK``."""

Role = types.Role
"""Message roles: ``SYSTEM``, ``USER``, ``ASSISTANT``, ``TOOL``."""


class ShieldMode:
    """Prompt Shield's strictness, as a policy sets it."""

    OFF = "off"
    MONITOR = "monitor"
    BALANCED = "balanced"
    STRICT = "strict"


class Decision:
    """A decision under construction: ``allow()`` or ``deny(reason)``, then chainable setters.

    The defaults are the Rust SDK's: every provider and knowledge base, PII flagged, secrets (DLP)
    blocked, Prompt Shield ``balanced`` and not switchable off, canary leaks withheld, prompts not
    logged. The host layers a tenant policy on its base policy and keeps the stricter value of each
    field, so a default never loosens the base.
    """

    def __init__(self, allowed: bool, reason: Optional[str] = None):
        self.allow = allowed
        self._reason = reason
        self.allowed_providers: Optional[List[str]] = None
        self.allowed_indexes: Optional[List[str]] = None
        self.pii_action = DataAction.FLAG
        self.dlp_action = DataAction.BLOCK
        self.restore_pii_answer = False
        self.shield_mode = ShieldMode.BALANCED
        self.shield_disable_allowed = False
        self.withhold_canary_leak = True
        self.log_prompt_text = False

    def reason(self, reason: str) -> "Decision":
        """Why the request was denied (shown to the caller) or, on an allowed one, flagged."""
        self._reason = reason
        return self

    def providers(self, providers: Iterable[str]) -> "Decision":
        """Only these providers (the part of a model name before ``/``) may receive the data."""
        self.allowed_providers = list(providers)
        return self

    def indexes(self, indexes: Iterable[str]) -> "Decision":
        """Only these knowledge bases may be used."""
        self.allowed_indexes = list(indexes)
        return self

    def pii(self, action: "policy_api.DataAction") -> "Decision":
        """What PII findings lead to."""
        self.pii_action = action
        return self

    def dlp(self, action: "policy_api.DataAction") -> "Decision":
        """What DLP (secret) findings lead to."""
        self.dlp_action = action
        return self

    def restore_pii(self, restore: bool) -> "Decision":
        """Put redacted PII back into the answer."""
        self.restore_pii_answer = restore
        return self

    def shield(self, mode: str) -> "Decision":
        """Prompt Shield's strictness: a ``ShieldMode`` value."""
        if mode not in (ShieldMode.OFF, ShieldMode.MONITOR, ShieldMode.BALANCED, ShieldMode.STRICT):
            raise ValueError(f"unknown shield mode {mode!r}")
        self.shield_mode = mode
        return self

    def shield_may_disable(self, may: bool) -> "Decision":
        """Whether a caller may switch Prompt Shield off for a request."""
        self.shield_disable_allowed = may
        return self

    def withhold_on_canary_leak(self, withhold: bool) -> "Decision":
        """Withhold the rest of an answer in which a canary leaks."""
        self.withhold_canary_leak = withhold
        return self

    def log_prompts(self, log: bool) -> "Decision":
        """Whether prompt text may be kept in logs."""
        self.log_prompt_text = log
        return self

    def to_wit(self) -> "policy_api.PolicyDecision":
        """The WIT record the host reads."""
        return policy_api.PolicyDecision(
            allow=self.allow,
            reason=self._reason,
            allowed_providers=self.allowed_providers,
            allowed_indexes=self.allowed_indexes,
            pii_action=self.pii_action,
            dlp_action=self.dlp_action,
            restore_pii=self.restore_pii_answer,
            shield_mode=self.shield_mode,
            shield_may_disable=self.shield_disable_allowed,
            withhold_on_canary_leak=self.withhold_canary_leak,
            log_prompts=self.log_prompt_text,
        )


def allow() -> Decision:
    """Let the request through, with the default constraints."""
    return Decision(True)


def deny(reason: str) -> Decision:
    """Refuse the request: the caller gets 403 ``Access denied`` with ``reason`` as the message,
    so say what was wrong without echoing sensitive text back."""
    return Decision(False, reason)


class Context:
    """The request as the policy sees it (the WIT ``policy-context``), with the usual questions."""

    def __init__(self, raw: "policy_api.PolicyContext"):
        self.policy_name: str = raw.policy_name
        self.key_id: str = raw.key_id
        self.user_id: str = raw.user_id
        self.group_id: Optional[str] = raw.group_id
        self.models: List[str] = list(raw.models)
        self.index: str = raw.index
        self.messages: List["types.Message"] = list(raw.messages)
        self.shield_disable_requested: bool = raw.shield_disable_requested
        self.config_json: str = raw.config_json

    def mentions_any(self, terms: Iterable[str]) -> bool:
        """Whether any message mentions one of ``terms``, case-insensitively; empty terms are ignored."""
        wanted = [t.lower() for t in terms if t]
        if not wanted:
            return False
        return any(t in m.content.lower() for m in self.messages for t in wanted)

    def config_list(self, field: str) -> List[str]:
        """The strings of the array ``field`` of this policy's config (``[plugins.settings.<policy>.config]``
        in the host config); empty when missing or not an array, non-strings skipped."""
        try:
            config = json.loads(self.config_json) if self.config_json else {}
        except ValueError:
            return []
        value = config.get(field) if isinstance(config, dict) else None
        return [s for s in value if isinstance(s, str)] if isinstance(value, list) else []


def log(level: str, message: str) -> None:
    """One line in the host's log, tagged with the policy's name: ``level`` is ``trace``, ``debug``,
    ``info``, ``warn`` or ``error``."""
    host_log.log(types.LogLevel[level.upper()], message)


def _report(exc: BaseException) -> None:
    # One line on stderr, the form every Gatehouse guest library uses: the host attaches it to the
    # call's error (`gatehouse plugin test`, the server log) instead of a bare trap.
    frames = traceback.extract_tb(exc.__traceback__)
    where = f"{os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else "?"
    print(f"panicked at {where}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)


def export_policy(name: str, version: str, description: str, evaluate: Callable[[Context], Decision]):
    """The class componentize-py exports (assign it to ``PolicyApi`` in the app module).

    ``name`` is the registry name: requests select the policy with ``"smltp_policy": name``.
    """

    class PolicyApi:
        def info(self) -> "types.PluginInfo":
            return types.PluginInfo(name=name, version=version, kind=types.PluginKind.POLICY, description=description)

        def evaluate(self, context: "policy_api.PolicyContext") -> "policy_api.PolicyDecision":
            try:
                decision = evaluate(Context(context))
                if not isinstance(decision, Decision):
                    raise TypeError(f"evaluate returned {type(decision).__name__}, not a Decision (allow() or deny(...))")
                return decision.to_wit()
            except BaseException as e:
                _report(e)
                raise

    return PolicyApi
