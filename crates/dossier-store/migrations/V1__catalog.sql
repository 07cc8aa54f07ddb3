-- Dossier's catalog on PostgreSQL: the same contract as the embedded redb catalog
-- (crates/dossier-store/src/catalog.rs). Bodies are the embedded catalog's JSON, kept as
-- bytea because Postgres text cannot hold the NUL a document may contain; key columns
-- beside them are what queries filter on.
CREATE EXTENSION IF NOT EXISTS vector;

-- One row: the commit counters. `SELECT … FOR UPDATE` on it serialises commits from
-- every replica, so generations are gapless and the change log is totally ordered.
CREATE TABLE counters (
    id int PRIMARY KEY CHECK (id = 1),
    generation bigint NOT NULL,
    next_seq bigint NOT NULL,
    next_dv bigint NOT NULL
);
INSERT INTO counters VALUES (1, 0, 0, 0);

-- The store's manifest (format version, embedding model, dimension).
CREATE TABLE manifest (
    id int PRIMARY KEY CHECK (id = 1),
    body bytea NOT NULL
);

CREATE TABLE docs (
    tenant text NOT NULL,
    doc_id text NOT NULL,
    version text NOT NULL,
    dv int NOT NULL UNIQUE,
    body bytea NOT NULL,
    PRIMARY KEY (tenant, doc_id, version)
);

-- The embedding column is added when the manifest fixes the dimension
-- (`vector(dim)` and its HNSW index cannot be declared before).
CREATE TABLE chunks (
    seq bigint PRIMARY KEY,
    dv int NOT NULL,
    body bytea NOT NULL
);
CREATE INDEX chunks_dv ON chunks (dv);

CREATE TABLE record_schemas (
    tenant text NOT NULL,
    tbl text NOT NULL,
    body bytea NOT NULL,
    PRIMARY KEY (tenant, tbl)
);

CREATE TABLE records (
    tenant text NOT NULL,
    tbl text NOT NULL,
    key text NOT NULL,
    body bytea NOT NULL,
    PRIMARY KEY (tenant, tbl, key)
);

CREATE TABLE principals (
    id text PRIMARY KEY,
    tenant text NOT NULL,
    body bytea NOT NULL
);

-- What each commit changed, in index terms: the log replicas catch up from.
CREATE TABLE changes (
    generation bigint PRIMARY KEY,
    committed_at timestamptz NOT NULL DEFAULT now(),
    body bytea NOT NULL
);

CREATE TABLE reviews (
    tenant text NOT NULL,
    id text NOT NULL,
    body bytea NOT NULL,
    PRIMARY KEY (tenant, id)
);

CREATE TABLE model_candidates (
    tenant text NOT NULL,
    id text NOT NULL,
    body bytea NOT NULL,
    PRIMARY KEY (tenant, id)
);
