-- The full-text rows of `context.rs`: a record's own text, its thread context and its date
-- words, weighted A, B and C in one tsvector (English stemming, as SQLite's porter
-- tokenizer stems). Derived data: rewritten by the store whenever a record or its
-- neighbours change, dropped when the record is forgotten.
CREATE TABLE records_fts (
    seq BIGINT PRIMARY KEY REFERENCES records (seq),
    text TEXT NOT NULL,
    ctx TEXT NOT NULL,
    date TEXT NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('english', text), 'A')
        || setweight(to_tsvector('english', ctx), 'B')
        || setweight(to_tsvector('english', date), 'C')
    ) STORED
);
CREATE INDEX records_fts_tsv ON records_fts USING gin (tsv);
