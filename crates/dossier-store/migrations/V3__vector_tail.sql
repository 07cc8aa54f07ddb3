-- The vector tail: commits write vectors without HNSW maintenance (`indexed = false`),
-- searches scan those rows exactly beside the index, and a fold (`PgCatalog`'s
-- `fold_vectors`, one process at a time) moves them into the index later. HNSW insertion
-- grows with the index (about 3 s per 1,000 rows at 110k rows), so a commit no longer
-- pays for it. Rows written before this migration are in the index already.
--
-- Idempotent: every statement checks what is there, so running it again changes nothing.
--
-- The default is `true`: rows already stored are in the graph, and a replica of an older
-- build still writing during a rolling upgrade (its INSERT names no `indexed`) puts its
-- rows into the graph as it always did.
ALTER TABLE chunks ADD COLUMN IF NOT EXISTS indexed boolean NOT NULL DEFAULT true;

-- The tail, in commit order: what searches scan exactly and what a fold takes next.
CREATE INDEX IF NOT EXISTS chunks_pending ON chunks (seq) WHERE NOT indexed;

-- A store created before this migration has a full HNSW index over every row; it becomes
-- the partial one `PgCatalog::create` makes now, so tail rows stay out of the graph. On a
-- fresh database neither the embedding column nor the index exists yet (`create` adds
-- them once the manifest fixes the dimension), and nothing is done here. The index is
-- built inside this migration's transaction, so the new schema is never seen without
-- it; meanwhile `chunks` is locked (searches and commits of running replicas wait) and
-- replicas starting wait on the schema lock. 50k rows of 384 dimensions took about
-- 50 s on 2 cores. (Replicas of an older build that keep running afterwards scan
-- exactly: their query does not name `indexed`, so it cannot use a partial index.)
DO $$
BEGIN
    IF EXISTS (
        SELECT 1 FROM pg_indexes
        WHERE schemaname = current_schema()
          AND tablename = 'chunks'
          AND indexname = 'chunks_embedding'
          AND indexdef NOT LIKE '% WHERE %'
    ) THEN
        DROP INDEX chunks_embedding;
        CREATE INDEX chunks_embedding ON chunks USING hnsw (embedding vector_ip_ops)
            WITH (m = 16, ef_construction = 100) WHERE indexed;
    END IF;
END
$$;
