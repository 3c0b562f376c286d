-- Gatehouse store, schema version 1: every table the Store and WebhookStore
-- traits need, and the plugin registry. Records the host reads whole are kept
-- as their JSON text in `record` (an added optional field needs no
-- migration, as in redb); what the database must look up, order, count or
-- keep unique is a column of its own. Nothing is `jsonb`: the audit chain
-- hashes exact bytes, and the other records round-trip through serde as text.

-- `email_key` is the record's email lowercased ('' when none): unique
-- among users that have one, so two hosts can never create the same email.
CREATE TABLE users (
    id         text PRIMARY KEY,
    email_key  text NOT NULL DEFAULT '',
    record     text NOT NULL
);
CREATE UNIQUE INDEX users_email ON users (email_key) WHERE email_key <> '';

CREATE TABLE groups (
    id         text PRIMARY KEY,
    record     text NOT NULL
);

CREATE TABLE group_members (
    group_id   text NOT NULL REFERENCES groups (id),
    user_id    text NOT NULL REFERENCES users (id),
    PRIMARY KEY (group_id, user_id)
);

-- `hash` is the SHA-256 of the secret; unique, so two hosts can never
-- register the same secret twice.
CREATE TABLE api_keys (
    id         text PRIMARY KEY,
    user_id    text NOT NULL REFERENCES users (id),
    hash       bytea NOT NULL UNIQUE CHECK (octet_length(hash) = 32),
    admin      boolean NOT NULL,
    revoked_at timestamptz,
    record     text NOT NULL
);

-- The audit chain: one sequence for the whole fleet. `content` holds the
-- exact bytes the hash covers (the record's JSON without `hash`);
-- hash = SHA-256(prev_hash || '\n' || content). The other columns are
-- copies of fields in `content`, for filtering only; verification reads
-- `content`, `hash` and `prev_hash` alone.
CREATE TABLE audit_records (
    seq         bigint PRIMARY KEY,
    id          text NOT NULL UNIQUE,
    ts          timestamptz NOT NULL,
    kind        text NOT NULL,
    severity    text NOT NULL,
    user_id     text,
    -- metadata.targetUserId: the user a record is about (`aboutUserId`).
    target_user_id text,
    description text NOT NULL,
    operation   text NOT NULL,
    content     bytea NOT NULL,
    hash        text NOT NULL,
    prev_hash   text NOT NULL
);
CREATE INDEX audit_records_ts ON audit_records (ts, seq);
CREATE INDEX audit_records_kind ON audit_records (kind, ts);
CREATE INDEX audit_records_user ON audit_records (user_id, ts) WHERE user_id IS NOT NULL;
CREATE INDEX audit_records_target_user ON audit_records (target_user_id, ts) WHERE target_user_id IS NOT NULL;
CREATE INDEX audit_records_severity ON audit_records (severity, ts);

-- The chain head: one row, locked (`SELECT ... FOR UPDATE`) by every append,
-- so appends from all hosts are serialised into one sequence.
CREATE TABLE audit_head (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    seq        bigint NOT NULL,
    hash       text NOT NULL,
    ts         timestamptz
);
INSERT INTO audit_head (seq, hash, ts) VALUES (0, '0000000000000000000000000000000000000000000000000000000000000000', NULL);

-- One row per billed request, whichever host served it.
CREATE TABLE usage_ledger (
    id                bigserial PRIMARY KEY,
    at                timestamptz NOT NULL,
    user_id           text NOT NULL,
    key_id            text NOT NULL,
    prompt_tokens     bigint NOT NULL,
    completion_tokens bigint NOT NULL
);
CREATE INDEX usage_ledger_at ON usage_ledger (at);
CREATE INDEX usage_ledger_key ON usage_ledger (key_id, at);
CREATE INDEX usage_ledger_user ON usage_ledger (user_id, at);

-- Running totals per `user` or `key`, updated in the ledger row's
-- transaction. Each is spread over 16 shard rows (a request adds to one,
-- chosen at random; a read sums them): one row per key would be locked by
-- every request of that key until its commit, so a busy key's requests,
-- from every host, would commit one at a time.
CREATE TABLE usage_totals (
    scope             text NOT NULL CHECK (scope IN ('user', 'key')),
    id                text NOT NULL,
    shard             smallint NOT NULL CHECK (shard BETWEEN 0 AND 15),
    requests          bigint NOT NULL DEFAULT 0,
    prompt_tokens     bigint NOT NULL DEFAULT 0,
    completion_tokens bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (scope, id, shard)
);

-- Requests counted per key and window (`d:2026-11-23`, `m:2026-11`). A
-- count is one `INSERT ... ON CONFLICT DO UPDATE`, atomic across hosts, into
-- one of 16 shard rows chosen per transaction (a read sums them), for the
-- reason `usage_totals` gives.
CREATE TABLE quota_windows (
    key_id     text NOT NULL,
    window_id  text NOT NULL,
    shard      smallint NOT NULL CHECK (shard BETWEEN 0 AND 15),
    count      bigint NOT NULL,
    PRIMARY KEY (key_id, window_id, shard)
);

-- Idempotency records by `<key id>/<Idempotency-Key>`; `lease_until` is set
-- while in flight, so a claim lapses when its host stops renewing it.
CREATE TABLE idempotency (
    scope       text PRIMARY KEY,
    expires_at  timestamptz NOT NULL,
    lease_until timestamptz,
    record      text NOT NULL
);
CREATE INDEX idempotency_expires ON idempotency (expires_at);

-- The event outbox in commit order; `seq` is what webhook cursors point
-- into. Numbers are taken from `outbox_head` (one row, locked until the
-- writing transaction commits), not from a sequence: a sequence hands out
-- numbers at insert, so two hosts could commit 8 after 9, and a cursor that
-- had passed 9 would never deliver 8. Under the row lock, number order is
-- commit order.
CREATE TABLE outbox (
    seq        bigint PRIMARY KEY,
    event_id   text NOT NULL,
    created    bigint NOT NULL,
    event      text NOT NULL
);
CREATE TABLE outbox_head (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    seq        bigint NOT NULL
);
INSERT INTO outbox_head (seq) VALUES (0);

-- Receipts: a receipt signed alone carries its signature; one of a batch
-- points at the batch (signed Merkle root over the receipts of one commit).
CREATE TABLE receipt_batches (
    id         bigserial PRIMARY KEY,
    batch      text NOT NULL
);
CREATE TABLE receipts (
    bundle_id  text PRIMARY KEY,
    batch_id   bigint REFERENCES receipt_batches (id),
    leaf       integer,
    row        text NOT NULL
);

-- Webhooks: endpoints, their secrets (apart, never listed with them),
-- each endpoint's cursor into the outbox, and deliveries. A pending
-- delivery is owned by the host whose lease (`lease_owner`,
-- `lease_until`) is current; a lapsed lease is taken over with the same id.
CREATE TABLE webhook_endpoints (
    id         text PRIMARY KEY,
    record     text NOT NULL
);
CREATE TABLE webhook_secrets (
    endpoint_id text PRIMARY KEY REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    secret      text NOT NULL
);
CREATE TABLE webhook_cursors (
    endpoint_id text PRIMARY KEY REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    seq         bigint NOT NULL,
    lease_owner text,
    lease_until timestamptz
);
CREATE TABLE webhook_deliveries (
    id          text PRIMARY KEY,
    endpoint_id text NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    status      text NOT NULL,
    next_at     timestamptz,
    updated_at  timestamptz NOT NULL,
    lease_owner text,
    lease_until timestamptz,
    record      text NOT NULL
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (endpoint_id, next_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_recent ON webhook_deliveries (endpoint_id, updated_at);

-- The plugin registry: every uploaded version of a component, with the
-- result of its checks; at most one active version per name.
CREATE TABLE plugins (
    name        text NOT NULL,
    version     integer NOT NULL,
    sha256      text NOT NULL,
    kind        text NOT NULL,
    component   bytea NOT NULL,
    state       text NOT NULL CHECK (state IN ('active', 'shadow', 'inactive')),
    uploaded_at timestamptz NOT NULL,
    uploaded_by text,
    PRIMARY KEY (name, version)
);
CREATE UNIQUE INDEX plugins_one_active ON plugins (name) WHERE state = 'active';
