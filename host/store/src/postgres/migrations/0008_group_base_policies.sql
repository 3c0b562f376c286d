-- A group's base policy, where the operator named one: the policy its tenant
-- policies are layered on (without a row, the server default
-- `policies.default`). Kept beside `plugin_versions` because every host
-- re-reads both at each plugin-registry announcement (NOTIFY gatehouse_plugins).
CREATE TABLE group_base_policies (
    group_id text        PRIMARY KEY,
    -- A policy's name: a built-in, bundled, file or operator-published policy, never a group's.
    policy   text        NOT NULL,
    set_at   timestamptz NOT NULL DEFAULT now()
);

-- Each host's last saved counts of a shadow policy version (evaluated, agreed,
-- disagreed, dropped, faults; JSON text), saved periodically and at shutdown,
-- so they outlive a restart and the API can sum the fleet's. Never NOTIFYed.
CREATE TABLE shadow_counts (
    name     text        NOT NULL,
    version  integer     NOT NULL,
    -- The host's receipt-signing key id (one per data dir).
    host     text        NOT NULL,
    counts   text        NOT NULL,
    saved_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (name, version, host)
);
