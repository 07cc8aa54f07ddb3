-- Idempotency keys of the server's write routes, by principal and key: in flight
-- (`done` false, `at_us` the claim) or done with the response to replay (`at_us` the
-- completion). Not part of the catalog's change log.
CREATE TABLE IF NOT EXISTS idempotency_keys (
    principal text NOT NULL,
    key text NOT NULL,
    fingerprint text NOT NULL,
    at_us bigint NOT NULL,
    done boolean NOT NULL DEFAULT false,
    status integer,
    content_type text,
    location text,
    body bytea,
    PRIMARY KEY (principal, key)
);
