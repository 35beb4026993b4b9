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
