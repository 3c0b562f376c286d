// {{name}}: a Gatehouse tenant policy (see README.md).
//
// Refuses requests that mention a denied term or name a model that is not
// approved; lets the rest through with PII blocked and Prompt Shield strict.

import { DataAction, ShieldMode, allow, deny, exportPolicy } from './gatehouse_policy.js';

// The registry name: requests select this policy with "smltp_policy": "{{name}}".
// Changing it publishes a different policy; `gatehouse plugin check` shows the name it serves under.
const NAME = '{{name}}';
const VERSION = '0.1.0';
// Refused in any letter case, in every message of a request (plus the host config's `deny_terms`).
const DENY_TERMS = ['project falcon', 'forbidden-word'];
// The only models requests under this policy may name.
const APPROVED_MODELS = ['echo/default'];

export const policyApi = exportPolicy({
  name: NAME,
  version: VERSION,
  description: 'Tenant policy: denied terms, approved models, PII blocked, strict shield',
  evaluate(ctx) {
    if (ctx.mentionsAny(DENY_TERMS) || ctx.mentionsAny(ctx.configList('deny_terms'))) {
      // Say what is wrong, not which term: the term itself may be sensitive.
      return deny(`${NAME}: the request mentions a term this tenant does not allow`);
    }
    for (const model of ctx.models) {
      if (!APPROVED_MODELS.includes(model)) {
        return deny(`${NAME}: model ${model} is not approved for this tenant`);
      }
    }
    return allow().pii(DataAction.BLOCK).shield(ShieldMode.STRICT);
  },
});
