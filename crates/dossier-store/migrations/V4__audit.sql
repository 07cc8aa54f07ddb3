-- The audit log: one row per search and ask a server answered (the entry as JSON in
-- `body`, the columns operators filter on beside it), and the agent's trace of each ask
-- by request id and principal. Not part of the catalog's change log. Times are
-- microseconds since the epoch (`finished_us`, what pages and prunes use);
-- `finished_at` is the same instant for people reading the table.
CREATE TABLE IF NOT EXISTS audit_log (
    id bigserial PRIMARY KEY,
    request_id text NOT NULL,
    principal text NOT NULL,
    tenant text NOT NULL,
    route text NOT NULL,
    status text NOT NULL,
    finished_us bigint NOT NULL,
    finished_at timestamptz NOT NULL,
    body bytea NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_log_time ON audit_log (finished_us, id);
CREATE INDEX IF NOT EXISTS audit_log_principal ON audit_log (principal, finished_us);
CREATE INDEX IF NOT EXISTS audit_log_request ON audit_log (request_id);

CREATE TABLE IF NOT EXISTS audit_traces (
    request_id text NOT NULL,
    principal text NOT NULL,
    finished_us bigint NOT NULL,
    body bytea NOT NULL,
    PRIMARY KEY (request_id, principal)
);
CREATE INDEX IF NOT EXISTS audit_traces_time ON audit_traces (finished_us);
