-- Full-text rows hold the lexemes mneme computes (mneme_core::lexemes: the same words and
-- stems for rows and queries) instead of a tsvector PostgreSQL derives with to_tsvector:
-- its parser and stemmer took most of the database's time in an ingest. The text columns
-- go too (nothing reads them; the records hold the text). The v5 rows are converted by
-- the migration's second step (pg.rs), which fills this table from records_fts_v5, drops
-- it and builds the GIN index over the filled table.
ALTER TABLE records_fts RENAME TO records_fts_v5;
ALTER INDEX records_fts_pkey RENAME TO records_fts_v5_pkey;
ALTER INDEX records_fts_tsv RENAME TO records_fts_v5_tsv;
ALTER TABLE records_fts_v5 RENAME CONSTRAINT records_fts_seq_fkey TO records_fts_v5_seq_fkey;
CREATE TABLE records_fts (
    seq BIGINT PRIMARY KEY REFERENCES records (seq),
    tsv tsvector NOT NULL
);
