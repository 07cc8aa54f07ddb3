-- Jobs of every replica (ingest, reindex), so any replica can show a job's progress and
-- a job whose replica died is reported failed by another (its heartbeat stops).
CREATE TABLE jobs (
    id text PRIMARY KEY,
    tenant text NOT NULL,
    owner text NOT NULL,
    status text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    body bytea NOT NULL
);
CREATE INDEX jobs_tenant ON jobs (tenant, created_at);
CREATE INDEX jobs_live ON jobs (heartbeat_at) WHERE status IN ('queued', 'running');
