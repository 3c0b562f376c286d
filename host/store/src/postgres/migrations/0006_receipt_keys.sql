-- The receipt-signing public keys of the fleet: each host signs receipts with
-- its own Ed25519 key (kept in its data dir) and registers the public half
-- here at start, so a receipt verifies with the fleet's published keys
-- whichever host signed it. A key stays listed after its host is gone: the
-- receipts it signed still verify.
CREATE TABLE receipt_keys (
    -- First 16 hex of SHA-256 of the public key, as `signing_key_id` in receipts.
    key_id     text        PRIMARY KEY,
    -- Base64 of the raw 32-byte public key.
    public_key text        NOT NULL,
    first_seen timestamptz NOT NULL DEFAULT now()
);
