-- Knowledge bases defined through the admin API (the config file's stay in
-- the file): name → definition as JSON text.
CREATE TABLE knowledge_bases (
    name       text PRIMARY KEY,
    definition text NOT NULL
);
