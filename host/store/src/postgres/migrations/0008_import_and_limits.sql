-- Audit records imported from a single host's redb file keep the format they
-- were written in (`gatehouse db import`): a chain begun before format 2 holds
-- format-1 records, whose stored bytes are the record's JSON with `hash` as
-- its last field (the hash covers those bytes with the `hash` value emptied).
-- `content` keeps those bytes exactly; `format` says which rule verifies them.
-- The head's `format` is the last record's, so the next append after a chain
-- that ends in format 1 writes the marker record that starts format 2.
ALTER TABLE audit_records ADD COLUMN format smallint NOT NULL DEFAULT 2 CHECK (format IN (1, 2));
ALTER TABLE audit_head ADD COLUMN format smallint NOT NULL DEFAULT 2 CHECK (format IN (1, 2));

