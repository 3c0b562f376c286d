-- Gatehouse store, schema version 5: the plugin registry's final shape. The
-- `plugins` table of version 1 was never written; it is replaced by
-- `plugin_versions`, whose `record` holds the version's metadata as JSON
-- text (name, kind, checks, owner group, ...), as the other tables keep
-- their records, and whose `state` is a column of its own so the database
-- keeps one active and one shadow version per name.
DROP TABLE plugins;

CREATE TABLE plugin_versions (
    name       text NOT NULL,
    version    integer NOT NULL CHECK (version > 0),
    state      text NOT NULL CHECK (state IN ('active', 'shadow', 'inactive')),
    record     text NOT NULL,
    component  bytea NOT NULL,
    PRIMARY KEY (name, version)
);
CREATE UNIQUE INDEX plugin_versions_one_active ON plugin_versions (name) WHERE state = 'active';
CREATE UNIQUE INDEX plugin_versions_one_shadow ON plugin_versions (name) WHERE state = 'shadow';
