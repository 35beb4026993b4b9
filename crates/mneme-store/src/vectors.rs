//! Stored embeddings: one vector per record and model, int8-quantised.
//!
//! A vector is derived data (the record's text through a model), so unlike records it may
//! be replaced: re-embedding with another model overwrites it. Vectors are stored as
//! int8 codes with one scale per vector (`x ≈ scale × code`, codes in -127..=127), a
//! quarter of the f32 size; cosine over the codes is within ~1e-3 of the f32 cosine,
//! well below the gaps that decide a ranking (BENCHMARKS.md, "ANN recall").
//!
//! Which records still need a vector is not a queue table but a query ("live records
//! with no vector from this model"), so the embedding queue survives any crash or
//! restart without bookkeeping: what was committed is done, the rest is found again.

use crate::error::StoreResult;
use crate::rows::{ReadTx, WriteTx, decode, fts_text};
use crate::sql::Dialect;

/// One record's vector, quantised.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredVector {
    pub seq: i64,
    pub scale: f32,
    pub codes: Vec<i8>,
}

/// A record whose text has no vector from the current model yet.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbedTodo {
    pub seq: i64,
    /// The text the lexical index holds for the record (summary and payload text).
    pub text: String,
}

/// The stored vectors of a model that changed after a version (PostgreSQL, where other
/// daemons write too): for a daemon's in-memory copy to catch up.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VectorChanges {
    /// Vectors written (new or replaced), in version order.
    pub stored: Vec<StoredVector>,
    /// Records whose vector was deleted (forgotten).
    pub erased: Vec<i64>,
    /// The highest version seen; the next call asks for what came after it.
    pub version: i64,
}

/// The dimension PostgreSQL's HNSW index covers (the default model's); vectors of another
/// dimension are searched exactly there.
pub const PG_HNSW_DIM: usize = 384;

/// Quantises a vector to int8 codes with one scale (symmetric, max-abs).
pub fn quantize(v: &[f32]) -> (f32, Vec<i8>) {
    let max = v.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    if max == 0.0 || !max.is_finite() {
        return (0.0, vec![0; v.len()]);
    }
    let scale = max / 127.0;
    (scale, v.iter().map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8).collect())
}

fn to_blob(codes: &[i8]) -> Vec<u8> {
    codes.iter().map(|c| *c as u8).collect()
}

fn from_blob(blob: Vec<u8>) -> Vec<i8> {
    blob.into_iter().map(|b| b as i8).collect()
}

impl ReadTx<'_> {
    /// Live records after `after_seq` (in sequence order) without a vector from `model`.
    pub fn records_needing_vectors(&self, model: &str, after_seq: i64, limit: usize) -> StoreResult<Vec<EmbedTodo>> {
        let rows = self.query_all(
            "SELECT r.seq, r.summary, r.payload FROM records r \
             WHERE r.seq > ?1 AND r.status IN ('active', 'contested') AND r.pruned_at IS NULL \
             AND NOT EXISTS (SELECT 1 FROM record_vectors v WHERE v.record_seq = r.seq AND v.model = ?2) \
             ORDER BY r.seq LIMIT ?3",
            &[&after_seq, &model, &(limit as i64)],
            |r| Ok((r.i64(0)?, r.opt_text(1)?, r.opt_text(2)?)),
        )?;
        rows.into_iter()
            .map(|(seq, summary, payload)| {
                let payload = payload.map(|p| serde_json::from_str(&p).map_err(|e| decode(self.path, e))).transpose()?;
                Ok(EmbedTodo { seq, text: fts_text(summary.as_deref(), payload.as_ref()) })
            })
            .collect()
    }

    /// How many live records have (`.0`) and lack (`.1`) a vector from `model`.
    pub fn vector_coverage(&self, model: &str) -> StoreResult<(u64, u64)> {
        let (with, live) = self
            .exec
            .row(
                "SELECT count(v.record_seq), count(*) FROM records r \
                 LEFT JOIN record_vectors v ON v.record_seq = r.seq AND v.model = ?1 \
                 WHERE r.status IN ('active', 'contested') AND r.pruned_at IS NULL",
                &[&model],
                |r| Ok((r.i64(0)?, r.i64(1)?)),
            )?
            .unwrap_or((0, 0));
        Ok((with as u64, (live - with) as u64))
    }

    /// Every stored vector from `model` (any record status: the caller filters at query
    /// time), in sequence order, handed to `each` one at a time.
    pub fn for_each_vector(&self, model: &str, mut each: impl FnMut(StoredVector)) -> StoreResult<()> {
        self.exec.query("SELECT record_seq, scale, codes FROM record_vectors WHERE model = ?1 ORDER BY record_seq", &[&model], &mut |r| {
            each(StoredVector { seq: r.i64(0)?, scale: r.f64(1)? as f32, codes: from_blob(r.blob(2)?) });
            Ok(())
        })
    }

    /// What changed in `model`'s stored vectors after `version`. Versions are taken under
    /// the store's write lock, so they commit in order and none is skipped. On SQLite (one
    /// process writes) nothing is reported.
    pub fn vector_changes(&self, model: &str, version: i64) -> StoreResult<VectorChanges> {
        let mut changes = VectorChanges { version, ..Default::default() };
        if self.dialect() == Dialect::Sqlite {
            return Ok(changes);
        }
        // One round trip (it runs before every retrieval): stored vectors and erasures, by
        // version.
        self.exec.query(
            "SELECT record_seq, scale, codes, version, TRUE FROM record_vectors WHERE model = ?1 AND version > ?2 \
             UNION ALL SELECT record_seq, 0, ''::bytea, version, FALSE FROM record_vector_erasures WHERE version > ?2 \
             ORDER BY 4",
            &[&model, &version],
            &mut |r| {
                let seq = r.i64(0)?;
                match r.flag(4)? {
                    true => changes.stored.push(StoredVector { seq, scale: r.f64(1)? as f32, codes: from_blob(r.blob(2)?) }),
                    false => changes.erased.push(seq),
                }
                changes.version = changes.version.max(r.i64(3)?);
                Ok(())
            },
        )?;
        Ok(changes)
    }

    /// The highest vector version stored (0 on SQLite), to start [`ReadTx::vector_changes`] from.
    pub fn vector_version(&self) -> StoreResult<i64> {
        if self.dialect() == Dialect::Sqlite {
            return Ok(0);
        }
        self.exec.int(
            "SELECT greatest((SELECT coalesce(max(version), 0) FROM record_vectors), \
                             (SELECT coalesce(max(version), 0) FROM record_vector_erasures))",
            &[],
        )
    }

    /// On PostgreSQL: the `k` stored vectors of `model` nearest to `query` (a unit vector)
    /// by cosine, best first, with their cosine; through pgvector's HNSW index (searching
    /// `ef_search` candidates) when the dimension is [`PG_HNSW_DIM`], exactly otherwise.
    /// `None` on SQLite, whose index is the service's own.
    pub fn nearest_vectors(&self, model: &str, query: &[f32], k: usize, ef_search: usize) -> StoreResult<Option<Vec<(i64, f32)>>> {
        if self.dialect() == Dialect::Sqlite {
            return Ok(None);
        }
        let literal = format!("[{}]", query.iter().map(|x| format!("{x:?}")).collect::<Vec<_>>().join(","));
        // The dimension is a number formatted here (the index's expression and predicate
        // must appear literally for the planner to use it), never user text.
        let dim = query.len();
        let cast = if dim == PG_HNSW_DIM { format!("::halfvec({dim})") } else { String::new() };
        self.exec.int("SELECT length(set_config('hnsw.ef_search', ?1, true))::bigint", &[&ef_search.clamp(1, 1000).to_string()])?;
        let found = self.query_all(
            &format!(
                "SELECT record_seq, (1 - (embedding{cast} <=> (?1::text)::halfvec{cast}))::float8 FROM record_vectors \
                 WHERE model = ?2 AND dim = {dim} AND embedding IS NOT NULL \
                 ORDER BY embedding{cast} <=> (?1::text)::halfvec{cast} LIMIT ?3"
            ),
            &[&literal, &model, &(k as i64)],
            |r| Ok((r.i64(0)?, r.f64(1)? as f32)),
        )?;
        Ok(Some(found))
    }

    /// The vector of one record from `model`, if stored.
    pub fn vector(&self, seq: i64, model: &str) -> StoreResult<Option<StoredVector>> {
        self.exec.row("SELECT scale, codes FROM record_vectors WHERE record_seq = ?1 AND model = ?2", &[&seq, &model], |r| {
            Ok(StoredVector { seq, scale: r.f64(0)? as f32, codes: from_blob(r.blob(1)?) })
        })
    }
}

impl WriteTx<'_> {
    /// Stores (or replaces) the vectors of records, all from `model`.
    pub fn put_vectors(&self, model: &str, vectors: &[StoredVector]) -> StoreResult<()> {
        for v in vectors {
            self.exec.execute(
                "INSERT INTO record_vectors (record_seq, model, dim, scale, codes) VALUES (?1, ?2, ?3, ?4, ?5) \
                 ON CONFLICT (record_seq) DO UPDATE SET model = excluded.model, dim = excluded.dim, \
                 scale = excluded.scale, codes = excluded.codes",
                &[&v.seq, &model, &(v.codes.len() as i64), &f64::from(v.scale), &to_blob(&v.codes)],
            )?;
        }
        Ok(())
    }
}
