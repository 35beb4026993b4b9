-- The planner's estimate of how many full-text rows match a query, from the statistics
-- ANALYZE keeps of the tsvector's lexemes (most common elements and their frequencies):
-- a frequent word's document frequency without visiting its matches. (EXPLAIN in a
-- function needs it VOLATILE; it reads nothing and writes nothing.)
CREATE FUNCTION mneme_match_estimate(q tsquery) RETURNS BIGINT LANGUAGE plpgsql VOLATILE AS $$
DECLARE plan json;
BEGIN
    EXECUTE 'EXPLAIN (FORMAT JSON) SELECT 1 FROM records_fts WHERE tsv @@ $1' INTO plan USING q;
    RETURN (plan -> 0 -> 'Plan' ->> 'Plan Rows')::BIGINT;
END
$$;
