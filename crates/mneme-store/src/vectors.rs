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

use rusqlite::OptionalExtension;

use crate::error::{SqlContext, StoreResult};
use crate::rows::{ReadTx, WriteTx, decode, fts_text};

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
            rusqlite::params![after_seq, model, limit as i64],
            |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Option<String>>(1)?, r.get::<_, Option<String>>(2)?)),
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
        let (with, live): (i64, i64) = self
            .conn
            .prepare_cached(
                "SELECT count(v.record_seq), count(*) FROM records r \
                 LEFT JOIN record_vectors v ON v.record_seq = r.seq AND v.model = ?1 \
                 WHERE r.status IN ('active', 'contested') AND r.pruned_at IS NULL",
            )
            .ctx(self.path)?
            .query_row([model], |r| Ok((r.get(0)?, r.get(1)?)))
            .ctx(self.path)?;
        Ok((with as u64, (live - with) as u64))
    }

    /// Every stored vector from `model` (any record status: the caller filters at query
    /// time), in sequence order, handed to `each` one at a time.
    pub fn for_each_vector(&self, model: &str, mut each: impl FnMut(StoredVector)) -> StoreResult<()> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT record_seq, scale, codes FROM record_vectors WHERE model = ?1 ORDER BY record_seq")
            .ctx(self.path)?;
        let mut rows = stmt.query([model]).ctx(self.path)?;
        while let Some(row) = rows.next().ctx(self.path)? {
            each(StoredVector {
                seq: row.get(0).ctx(self.path)?,
                scale: row.get(1).ctx(self.path)?,
                codes: from_blob(row.get(2).ctx(self.path)?),
            });
        }
        Ok(())
    }

    /// The vector of one record from `model`, if stored.
    pub fn vector(&self, seq: i64, model: &str) -> StoreResult<Option<StoredVector>> {
        self.conn
            .prepare_cached("SELECT scale, codes FROM record_vectors WHERE record_seq = ?1 AND model = ?2")
            .ctx(self.path)?
            .query_row(rusqlite::params![seq, model], |r| Ok(StoredVector { seq, scale: r.get(0)?, codes: from_blob(r.get(1)?) }))
            .optional()
            .ctx(self.path)
    }
}

impl WriteTx<'_> {
    /// Stores (or replaces) the vectors of records, all from `model`.
    pub fn put_vectors(&self, model: &str, vectors: &[StoredVector]) -> StoreResult<()> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "INSERT INTO record_vectors (record_seq, model, dim, scale, codes) VALUES (?1, ?2, ?3, ?4, ?5) \
                 ON CONFLICT (record_seq) DO UPDATE SET model = excluded.model, dim = excluded.dim, \
                 scale = excluded.scale, codes = excluded.codes",
            )
            .ctx(self.path)?;
        for v in vectors {
            stmt.execute(rusqlite::params![v.seq, model, v.codes.len() as i64, v.scale, to_blob(&v.codes)]).ctx(self.path)?;
        }
        Ok(())
    }
}
