"""{{name}}: a Gatehouse tenant policy (see README.md).

Refuses requests that mention a denied term or name a model that is not approved; lets the rest
through with PII blocked and Prompt Shield strict.
"""

from gatehouse_policy import Context, DataAction, Decision, ShieldMode, allow, deny, export_policy

# The registry name: requests select this policy with "smltp_policy": "{{name}}".
# Changing it publishes a different policy; `gatehouse plugin check` shows the name it serves under.
NAME = "{{name}}"
VERSION = "0.1.0"
# Refused in any letter case, in every message of a request (plus the host config's `deny_terms`).
DENY_TERMS = ["project falcon", "forbidden-word"]
# The only models requests under this policy may name.
APPROVED_MODELS = ["echo/default"]


def evaluate(ctx: Context) -> Decision:
    if ctx.mentions_any(DENY_TERMS) or ctx.mentions_any(ctx.config_list("deny_terms")):
        # Say what is wrong, not which term: the term itself may be sensitive.
        return deny(f"{NAME}: the request mentions a term this tenant does not allow")
    for model in ctx.models:
        if model not in APPROVED_MODELS:
            return deny(f"{NAME}: model {model} is not approved for this tenant")
    return allow().pii(DataAction.BLOCK).shield(ShieldMode.STRICT)


PolicyApi = export_policy(NAME, VERSION, "Tenant policy: denied terms, approved models, PII blocked, strict shield", evaluate)
