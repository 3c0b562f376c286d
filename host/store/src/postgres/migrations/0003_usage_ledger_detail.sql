-- The usage ledger gains what the usage API filters on besides user and key:
-- the model that served the request, the key's group, and the request id.
-- Rows written before keep empty values (their model and group are unknown).
ALTER TABLE usage_ledger
    ADD COLUMN model      text NOT NULL DEFAULT '',
    ADD COLUMN group_id   text,
    ADD COLUMN request_id text NOT NULL DEFAULT '';
CREATE INDEX usage_ledger_group ON usage_ledger (group_id, at) WHERE group_id IS NOT NULL;
CREATE INDEX usage_ledger_model ON usage_ledger (model, at);
