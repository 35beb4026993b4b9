-- Workspace knowledge (SQLite's v9): chunks carry the digest of their text, which their
-- vectors are keyed by; reads of the agent's files (heading '') and of their entries. The
-- index is derived data: emptied here, the next sync rebuilds it.
DELETE FROM workspace_chunks;
DELETE FROM workspace_files;
ALTER TABLE workspace_chunks ADD COLUMN digest TEXT NOT NULL DEFAULT '';
CREATE INDEX workspace_chunks_digest ON workspace_chunks (digest);
CREATE TABLE workspace_chunk_vectors (
    digest TEXT NOT NULL,
    model TEXT NOT NULL,
    scale DOUBLE PRECISION NOT NULL,
    codes BYTEA NOT NULL,
    PRIMARY KEY (digest, model)
);
CREATE TABLE workspace_reads (
    path TEXT NOT NULL,
    heading TEXT NOT NULL,
    count BIGINT NOT NULL,
    last_at BIGINT NOT NULL,
    PRIMARY KEY (path, heading)
);
