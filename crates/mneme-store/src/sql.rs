//! One way to run SQL on either engine, so a store operation is written once.
//!
//! [`Exec`] runs a statement with [`Param`]s and hands each result row to the caller as a
//! [`Row`]; `LiteExec` (SQLite, statements cached by rusqlite) and `PgExec` (PostgreSQL,
//! statements prepared once per connection and cached) implement it. Statements are written
//! in SQLite's spelling with `?N` or `?` placeholders; [`pg_placeholders`] turns them into
//! PostgreSQL's `$N`. The SQL both engines accept is most of it (`ON CONFLICT … DO UPDATE`,
//! `IS NOT NULL`, `lower`); a new row's id comes from [`Exec::insert`] (SQLite's
//! `last_insert_rowid`, PostgreSQL's `RETURNING`); where they differ an operation asks
//! [`Exec::dialect`].
//!
//! Types: every integer column is a 64-bit integer on both engines (flags too: `pinned = 1`
//! reads the same on both), reals are `f64`, text is text. Parameters follow suit: `i64`,
//! `f64`, `&str`/`String` and their `Option`s, never `bool` or `usize`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;

use crate::error::{StoreError, StoreResult, classify};

/// Which engine runs the statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Sqlite,
    Postgres,
}

/// A statement parameter both drivers can send.
pub(crate) trait Param {
    fn lite(&self) -> &dyn rusqlite::ToSql;
    fn pg(&self) -> &(dyn postgres::types::ToSql + Sync);
}

impl<T: rusqlite::ToSql + postgres::types::ToSql + Sync> Param for T {
    fn lite(&self) -> &dyn rusqlite::ToSql {
        self
    }
    fn pg(&self) -> &(dyn postgres::types::ToSql + Sync) {
        self
    }
}

/// A result row, read by column position.
pub(crate) trait Row {
    fn i64(&self, i: usize) -> StoreResult<i64>;
    fn opt_i64(&self, i: usize) -> StoreResult<Option<i64>>;
    fn f64(&self, i: usize) -> StoreResult<f64>;
    fn text(&self, i: usize) -> StoreResult<String>;
    fn opt_text(&self, i: usize) -> StoreResult<Option<String>>;
    fn blob(&self, i: usize) -> StoreResult<Vec<u8>>;
    /// A flag: an integer 0/1 column or a boolean expression (`x IS NOT NULL`), which
    /// SQLite returns as an integer and PostgreSQL as a boolean.
    fn flag(&self, i: usize) -> StoreResult<bool>;
}

/// Runs statements inside the current transaction.
pub(crate) trait Exec {
    fn dialect(&self) -> Dialect;
    /// Runs a statement; returns the number of rows it changed.
    fn execute(&self, sql: &str, params: &[&dyn Param]) -> StoreResult<usize>;
    /// Runs a query, handing every row to `each` in order.
    fn query(&self, sql: &str, params: &[&dyn Param], each: &mut dyn FnMut(&dyn Row) -> StoreResult<()>) -> StoreResult<()>;
    /// Runs an `INSERT` and returns the new row's `key` column (an integer id): SQLite's
    /// `last_insert_rowid` (cheaper than `RETURNING` there), PostgreSQL's `RETURNING`.
    fn insert(&self, sql: &str, key: &str, params: &[&dyn Param]) -> StoreResult<i64>;
    /// The SQLite connection, for the SQLite-only paths (FTS5).
    fn sqlite(&self) -> Option<&rusqlite::Connection>;
    /// PostgreSQL only: runs a statement with the driver's own parameters (the column
    /// arrays of a batch statement), handing every row to `each`.
    fn pg_query(&self, sql: &str, params: &[&PgParam<'_>], each: &mut dyn FnMut(&dyn Row) -> StoreResult<()>) -> StoreResult<()>;
}

/// A parameter of [`Exec::pg_query`].
pub(crate) type PgParam<'a> = dyn postgres::types::ToSql + Sync + 'a;

/// Query helpers over any [`Exec`].
impl dyn Exec + '_ {
    /// Every row, mapped.
    pub(crate) fn rows<T>(&self, sql: &str, params: &[&dyn Param], mut map: impl FnMut(&dyn Row) -> StoreResult<T>) -> StoreResult<Vec<T>> {
        let mut out = Vec::new();
        self.query(sql, params, &mut |row| {
            out.push(map(row)?);
            Ok(())
        })?;
        Ok(out)
    }

    /// The first row, mapped, if there is one.
    pub(crate) fn row<T>(
        &self,
        sql: &str,
        params: &[&dyn Param],
        mut map: impl FnMut(&dyn Row) -> StoreResult<T>,
    ) -> StoreResult<Option<T>> {
        let mut out = None;
        self.query(sql, params, &mut |row| {
            if out.is_none() {
                out = Some(map(row)?);
            }
            Ok(())
        })?;
        Ok(out)
    }

    /// A single integer (a count, a sequence number); 0 when there is no row.
    pub(crate) fn int(&self, sql: &str, params: &[&dyn Param]) -> StoreResult<i64> {
        Ok(self.row(sql, params, |r| r.i64(0))?.unwrap_or(0))
    }
}

/// SQLite: one connection, statements cached by rusqlite, errors naming the file.
pub(crate) struct LiteExec<'a> {
    pub conn: &'a rusqlite::Connection,
    pub path: &'a Path,
}

struct LiteRow<'r, 's> {
    row: &'r rusqlite::Row<'s>,
    path: &'r Path,
}

impl LiteRow<'_, '_> {
    fn get<T: rusqlite::types::FromSql>(&self, i: usize) -> StoreResult<T> {
        self.row.get(i).map_err(|e| classify(e, self.path))
    }
}

/// The typed getters every engine's row answers with its own `get`.
macro_rules! typed_getters {
    () => {
        fn i64(&self, i: usize) -> StoreResult<i64> {
            self.get(i)
        }
        fn opt_i64(&self, i: usize) -> StoreResult<Option<i64>> {
            self.get(i)
        }
        fn f64(&self, i: usize) -> StoreResult<f64> {
            self.get(i)
        }
        fn text(&self, i: usize) -> StoreResult<String> {
            self.get(i)
        }
        fn opt_text(&self, i: usize) -> StoreResult<Option<String>> {
            self.get(i)
        }
        fn blob(&self, i: usize) -> StoreResult<Vec<u8>> {
            self.get(i)
        }
    };
}

impl Row for LiteRow<'_, '_> {
    typed_getters!();
    fn flag(&self, i: usize) -> StoreResult<bool> {
        self.get(i)
    }
}

impl Exec for LiteExec<'_> {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn execute(&self, sql: &str, params: &[&dyn Param]) -> StoreResult<usize> {
        let params: Vec<&dyn rusqlite::ToSql> = params.iter().map(|p| p.lite()).collect();
        let mut stmt = self.conn.prepare_cached(sql).map_err(|e| classify(e, self.path))?;
        stmt.execute(&params[..]).map_err(|e| classify(e, self.path))
    }

    fn query(&self, sql: &str, params: &[&dyn Param], each: &mut dyn FnMut(&dyn Row) -> StoreResult<()>) -> StoreResult<()> {
        let params: Vec<&dyn rusqlite::ToSql> = params.iter().map(|p| p.lite()).collect();
        let mut stmt = self.conn.prepare_cached(sql).map_err(|e| classify(e, self.path))?;
        let mut rows = stmt.query(&params[..]).map_err(|e| classify(e, self.path))?;
        while let Some(row) = rows.next().map_err(|e| classify(e, self.path))? {
            each(&LiteRow { row, path: self.path })?;
        }
        Ok(())
    }

    fn insert(&self, sql: &str, _key: &str, params: &[&dyn Param]) -> StoreResult<i64> {
        self.execute(sql, params)?;
        Ok(self.conn.last_insert_rowid())
    }

    fn sqlite(&self) -> Option<&rusqlite::Connection> {
        Some(self.conn)
    }

    fn pg_query(&self, _: &str, _: &[&PgParam<'_>], _: &mut dyn FnMut(&dyn Row) -> StoreResult<()>) -> StoreResult<()> {
        Err(StoreError::Unsupported { what: "array parameters on SQLite".into() })
    }
}

/// PostgreSQL: one transaction of one connection, with that connection's statement cache.
pub(crate) struct PgExec<'t> {
    pub tx: RefCell<postgres::Transaction<'t>>,
    pub statements: &'t RefCell<HashMap<String, postgres::Statement>>,
    pub target: &'t str,
}

/// How many prepared statements one PostgreSQL connection keeps before it starts afresh.
pub(crate) const PG_STATEMENT_CACHE: usize = 256;

impl PgExec<'_> {
    fn statement(&self, sql: &str) -> StoreResult<postgres::Statement> {
        if let Some(stmt) = self.statements.borrow().get(sql) {
            return Ok(stmt.clone());
        }
        let stmt = self.tx.borrow_mut().prepare(&pg_placeholders(sql)).map_err(|e| crate::pg::pg_error(self.target, e))?;
        let mut statements = self.statements.borrow_mut();
        // A guard: the store's statements are a few dozen texts, but a text built from
        // values would otherwise grow the cache (and the server session) without end.
        // Dropping a statement closes it on the server.
        if statements.len() >= PG_STATEMENT_CACHE {
            statements.clear();
        }
        statements.insert(sql.to_string(), stmt.clone());
        Ok(stmt)
    }
}

struct PgRow<'r> {
    row: &'r postgres::Row,
    target: &'r str,
}

impl PgRow<'_> {
    fn get<'a, T: postgres::types::FromSql<'a>>(&'a self, i: usize) -> StoreResult<T> {
        self.row.try_get(i).map_err(|e| crate::pg::pg_error(self.target, e))
    }
}

impl Row for PgRow<'_> {
    typed_getters!();
    fn flag(&self, i: usize) -> StoreResult<bool> {
        match self.row.columns().get(i).map(|c| c.type_()) {
            Some(&postgres::types::Type::BOOL) => self.get(i),
            _ => Ok(self.get::<i64>(i)? != 0),
        }
    }
}

impl Exec for PgExec<'_> {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn execute(&self, sql: &str, params: &[&dyn Param]) -> StoreResult<usize> {
        let stmt = self.statement(sql)?;
        let params: Vec<&(dyn postgres::types::ToSql + Sync)> = params.iter().map(|p| p.pg()).collect();
        let n = self.tx.borrow_mut().execute(&stmt, &params).map_err(|e| crate::pg::pg_error(self.target, e))?;
        Ok(n as usize)
    }

    fn query(&self, sql: &str, params: &[&dyn Param], each: &mut dyn FnMut(&dyn Row) -> StoreResult<()>) -> StoreResult<()> {
        let params: Vec<&PgParam<'_>> = params.iter().map(|p| p.pg()).collect();
        self.pg_query(sql, &params, each)
    }

    fn pg_query(&self, sql: &str, params: &[&PgParam<'_>], each: &mut dyn FnMut(&dyn Row) -> StoreResult<()>) -> StoreResult<()> {
        let stmt = self.statement(sql)?;
        let rows = self.tx.borrow_mut().query(&stmt, params).map_err(|e| crate::pg::pg_error(self.target, e))?;
        for row in &rows {
            each(&PgRow { row, target: self.target })?;
        }
        Ok(())
    }

    fn insert(&self, sql: &str, key: &str, params: &[&dyn Param]) -> StoreResult<i64> {
        let sql = format!("{sql} RETURNING {key}");
        let mut id = None;
        self.query(&sql, params, &mut |row| {
            id = Some(row.i64(0)?);
            Ok(())
        })?;
        id.ok_or_else(|| StoreError::Postgres { target: self.target.to_string(), detail: "an insert returned no id".into() })
    }

    fn sqlite(&self) -> Option<&rusqlite::Connection> {
        None
    }
}

/// SQLite's `?N` and `?` placeholders as PostgreSQL's `$N` (a bare `?` takes the next
/// number), outside quoted strings and identifiers.
pub(crate) fn pg_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut chars = sql.chars().peekable();
    let mut quote: Option<char> = None;
    let mut next = 0;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => {
                quote = None;
                out.push(c);
            }
            (Some(_), c) => out.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                out.push(c);
            }
            (None, '?') => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                if digits.is_empty() {
                    next += 1;
                    digits = next.to_string();
                }
                out.push('$');
                out.push_str(&digits);
            }
            (None, c) => out.push(c),
        }
    }
    out
}

/// An operation only SQLite has (its FTS5 statements, its migrations and scrub).
pub(crate) fn not_on_postgres(what: &str) -> StoreError {
    StoreError::Unsupported { what: what.to_string() }
}
