// Gatehouse tenant policies in JavaScript: the decision builders and request
// helpers of the Rust SDK, over the types componentize-js gives the WIT
// `gatehouse:plugin/policy-api` (records as objects with camelCase fields,
// enums as strings, an absent option as `undefined`).
//
//   import { allow, deny, exportPolicy } from './gatehouse_policy.js';
//   export const policyApi = exportPolicy({
//     name: 'acme', version: '0.1.0', description: 'refuses requests about the launch',
//     evaluate(ctx) {
//       if (ctx.mentionsAny(['launch date'])) return deny('acme: the launch date is not discussed here');
//       return allow();
//     },
//   });
//
// `gatehouse plugin build` turns the policy into a component with
// componentize-js; every call runs in a fresh instance: keep no state between calls.

import { log as hostLog } from 'gatehouse:plugin/host-log@0.1.0';

/** What findings of a detector lead to. */
export const DataAction = Object.freeze({ ALLOW: 'allow', FLAG: 'flag', REDACT: 'redact', BLOCK: 'block' });

/** Prompt Shield's strictness, as a policy sets it. */
export const ShieldMode = Object.freeze({ OFF: 'off', MONITOR: 'monitor', BALANCED: 'balanced', STRICT: 'strict' });

const ACTIONS = new Set(Object.values(DataAction));
const MODES = new Set(Object.values(ShieldMode));

/**
 * A decision under construction: `allow()` or `deny(reason)`, then chainable
 * setters. The defaults are the Rust SDK's: every provider and knowledge base,
 * PII flagged, secrets (DLP) blocked, Prompt Shield `balanced` and not
 * switchable off, canary leaks withheld, prompts not logged. The host layers a
 * tenant policy on its base policy and keeps the stricter value of each field,
 * so a default never loosens the base.
 */
export class Decision {
  constructor(allowed, reason) {
    this.fields = {
      allow: allowed,
      reason,
      allowedProviders: undefined,
      allowedIndexes: undefined,
      piiAction: DataAction.FLAG,
      dlpAction: DataAction.BLOCK,
      restorePii: false,
      shieldMode: ShieldMode.BALANCED,
      shieldMayDisable: false,
      withholdOnCanaryLeak: true,
      logPrompts: false,
    };
  }
  /** Why the request was denied (shown to the caller) or, on an allowed one, flagged. */
  reason(text) { this.fields.reason = String(text); return this; }
  /** Only these providers (the part of a model name before `/`) may receive the data. */
  providers(list) { this.fields.allowedProviders = Array.from(list, String); return this; }
  /** Only these knowledge bases may be used. */
  indexes(list) { this.fields.allowedIndexes = Array.from(list, String); return this; }
  /** What PII findings lead to: a `DataAction`. */
  pii(action) { this.fields.piiAction = checked(ACTIONS, action, 'data action'); return this; }
  /** What DLP (secret) findings lead to: a `DataAction`. */
  dlp(action) { this.fields.dlpAction = checked(ACTIONS, action, 'data action'); return this; }
  /** Put redacted PII back into the answer. */
  restorePii(on) { this.fields.restorePii = Boolean(on); return this; }
  /** Prompt Shield's strictness: a `ShieldMode`. */
  shield(mode) { this.fields.shieldMode = checked(MODES, mode, 'shield mode'); return this; }
  /** Whether a caller may switch Prompt Shield off for a request. */
  shieldMayDisable(may) { this.fields.shieldMayDisable = Boolean(may); return this; }
  /** Withhold the rest of an answer in which a canary leaks. */
  withholdOnCanaryLeak(on) { this.fields.withholdOnCanaryLeak = Boolean(on); return this; }
  /** Whether prompt text may be kept in logs. */
  logPrompts(on) { this.fields.logPrompts = Boolean(on); return this; }
  /** The WIT record the host reads. */
  toWit() { return { ...this.fields }; }
}

function checked(allowed, value, what) {
  if (!allowed.has(value)) throw new TypeError(`unknown ${what} ${JSON.stringify(value)}`);
  return value;
}

/** Let the request through, with the default constraints. */
export function allow() { return new Decision(true, undefined); }

/**
 * Refuse the request: the caller gets 403 `Access denied` with `reason` as the
 * message, so say what was wrong without echoing sensitive text back.
 */
export function deny(reason) { return new Decision(false, String(reason)); }

/** The request as the policy sees it (the WIT `policy-context`), with the usual questions. */
export class Context {
  constructor(raw) { Object.assign(this, raw); }
  /** Whether any message mentions one of `terms`, case-insensitively; empty terms are ignored. */
  mentionsAny(terms) {
    const wanted = Array.from(terms, (t) => String(t).toLowerCase()).filter((t) => t.length > 0);
    if (wanted.length === 0) return false;
    return this.messages.some((m) => {
      const text = m.content.toLowerCase();
      return wanted.some((t) => text.includes(t));
    });
  }
  /**
   * The strings of the array `field` of this policy's config
   * (`[plugins.settings.<policy>.config]` in the host config); empty when
   * missing or not an array, non-strings skipped.
   */
  configList(field) {
    let config;
    try { config = JSON.parse(this.configJson || '{}'); } catch { return []; }
    const value = config !== null && typeof config === 'object' ? config[field] : undefined;
    return Array.isArray(value) ? value.filter((s) => typeof s === 'string') : [];
  }
}

/** One line in the host's log, tagged with the policy's name: `trace`, `debug`, `info`, `warn` or `error`. */
export function log(level, message) { hostLog(level, String(message)); }

// One line on stderr, the form every Gatehouse guest library uses: the host
// attaches it to the call's error (`gatehouse plugin test`, the server log)
// instead of a bare trap.
function report(e) {
  const frame = String((e && e.stack) || '').split('\n').find((l) => l.includes('@')) || '';
  const where = frame.slice(frame.indexOf('@') + 1).split('/').pop() || '?';
  const what = e instanceof Error ? `${e.name}: ${e.message}` : `uncaught ${JSON.stringify(e)}`;
  console.error(`panicked at ${where}: ${what}`);
}

/**
 * The object to export as `policyApi`. `name` is the registry name: requests
 * select the policy with `"smltp_policy": name`.
 */
export function exportPolicy({ name, version, description, evaluate }) {
  return {
    info() { return { name, version, kind: 'policy', description }; },
    evaluate(raw) {
      try {
        const decision = evaluate(new Context(raw));
        if (!(decision instanceof Decision)) {
          throw new TypeError('evaluate returned something other than a Decision (allow() or deny(...))');
        }
        return decision.toWit();
      } catch (e) {
        report(e);
        throw e;
      }
    },
  };
}
