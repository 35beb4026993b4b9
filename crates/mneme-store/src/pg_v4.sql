-- Embeddings in pgvector: each stored vector also as a `halfvec` (its int8 codes times its
-- scale), searched by an HNSW index (cosine) for the default model's 384 dimensions;
-- vectors of another dimension are searched exactly. `version` grows with every write of
-- a vector, so a daemon can fetch the vectors other daemons stored since it last looked.
-- A trigger derives both from the stored codes, so every writer (the embedding pipeline,
-- the dump's import) keeps them right.
CREATE EXTENSION IF NOT EXISTS vector;
CREATE SEQUENCE vector_versions;
ALTER TABLE record_vectors ADD COLUMN embedding halfvec;
ALTER TABLE record_vectors ADD COLUMN version BIGINT NOT NULL DEFAULT 0;

-- The codes as signed bytes times the scale; NULL for the zero vector (no direction).
CREATE FUNCTION mneme_dequantize(codes BYTEA, scale DOUBLE PRECISION) RETURNS halfvec
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT CASE WHEN scale = 0 THEN NULL ELSE (
        SELECT array_agg((CASE WHEN get_byte(codes, i) > 127 THEN get_byte(codes, i) - 256 ELSE get_byte(codes, i) END) * scale
                         ORDER BY i)::real[]::halfvec
        FROM generate_series(0, length(codes) - 1) AS i) END
$$;
CREATE FUNCTION mneme_vector_derive() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.embedding := mneme_dequantize(NEW.codes, NEW.scale);
    NEW.version := nextval('vector_versions');
    RETURN NEW;
END
$$;
CREATE TRIGGER record_vectors_derive BEFORE INSERT OR UPDATE ON record_vectors
    FOR EACH ROW EXECUTE FUNCTION mneme_vector_derive();
-- A forgotten record's vector is deleted; other daemons learn it here to drop their copies
-- (the record's sequence number only, nothing of its content).
CREATE TABLE record_vector_erasures (version BIGINT PRIMARY KEY, record_seq BIGINT NOT NULL);
CREATE FUNCTION mneme_vector_erased() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO record_vector_erasures (version, record_seq) VALUES (nextval('vector_versions'), OLD.record_seq);
    RETURN OLD;
END
$$;
CREATE TRIGGER record_vectors_erased AFTER DELETE ON record_vectors
    FOR EACH ROW EXECUTE FUNCTION mneme_vector_erased();
-- Vectors stored before this version (the trigger fills them in).
UPDATE record_vectors SET scale = scale;
CREATE INDEX record_vectors_by_version ON record_vectors (version);
CREATE INDEX record_vectors_hnsw ON record_vectors USING hnsw ((embedding::halfvec(384)) halfvec_cosine_ops) WHERE dim = 384;
