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
