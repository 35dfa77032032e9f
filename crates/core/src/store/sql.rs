//! The one seam between the store's typed reads and its two backends: a read is
//! written once, as SQL with `?N` marks and typed arguments, and runs on SQLite or on
//! PostgreSQL. What differs between the dialects (scalar MIN/MAX, JSON, booleans, a
//! list of ids) is asked of [`Sql::dialect`] by the store, never by a report.

use super::db_err;
use crate::error::{Error, ErrorCode, Result};

/// Which database a connection talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// The embedded default.
    Sqlite,
    /// PostgreSQL + PostGIS.
    Postgres,
}

/// A value bound to a `?N` mark, with its type (PostgreSQL wants one for each).
#[derive(Debug, Clone, Copy)]
pub enum Arg<'a> {
    /// An integer, or none (`NULL`).
    Int(Option<i64>),
    /// A float.
    Real(f64),
    /// Text.
    Text(&'a str),
    /// A local date, `YYYY-MM-DD` (text in SQLite, `date` in PostgreSQL).
    Date(&'a str),
}

/// One row of an answer, read by column number whatever the backend's types.
pub trait Row {
    /// An integer (a boolean reads 0 or 1), or none.
    fn opt_int(&self, i: usize) -> Result<Option<i64>>;
    /// A float (an integer reads as one), or none.
    fn opt_real(&self, i: usize) -> Result<Option<f64>>;
    /// Text (a date reads `YYYY-MM-DD`, JSON its text), or none.
    fn opt_text(&self, i: usize) -> Result<Option<String>>;
}

impl dyn Row + '_ {
    /// An integer that is never NULL.
    pub fn int(&self, i: usize) -> Result<i64> {
        self.opt_int(i)?.ok_or_else(|| null_column(i))
    }
    /// A float that is never NULL.
    pub fn real(&self, i: usize) -> Result<f64> {
        self.opt_real(i)?.ok_or_else(|| null_column(i))
    }
    /// Text that is never NULL.
    pub fn text(&self, i: usize) -> Result<String> {
        self.opt_text(i)?.ok_or_else(|| null_column(i))
    }
    /// A boolean kept as an integer (SQLite) or a boolean (PostgreSQL).
    pub fn flag(&self, i: usize) -> Result<bool> {
        Ok(self.int(i)? != 0)
    }
    /// A boolean, or none.
    pub fn opt_flag(&self, i: usize) -> Result<Option<bool>> {
        Ok(self.opt_int(i)?.map(|v| v != 0))
    }
}

fn null_column(i: usize) -> Error {
    Error::new(
        ErrorCode::DbSchema,
        format!("column {i} of a stored row is NULL where a value belongs"),
    )
    .with_hint("run `fleetctl analyze` to rebuild the derived tables")
}

/// A connection the store's reads run on.
pub trait Sql {
    /// Which backend this is.
    fn dialect(&self) -> Dialect;
    /// Runs `sql` (marks `?1`, `?2`, … numbered as `args`) and hands `each` every row.
    fn each(
        &self,
        sql: &str,
        args: &[Arg],
        each: &mut dyn FnMut(&dyn Row) -> Result<()>,
    ) -> Result<()>;
    /// Runs a statement that changes rows (inside the caller's transaction); how
    /// many it changed.
    fn execute(&self, sql: &str, args: &[Arg]) -> Result<u64>;
    /// Begins a read-only transaction, so that several reads see one state; `false`
    /// when one is open already (the caller then must not end it).
    fn begin_read(&self) -> Result<bool>;
    /// Ends the read transaction [`Sql::begin_read`] began.
    fn end_read(&self);
    /// A number that changes when another connection commits (SQLite's
    /// `data_version`), or `None` where the backend has none (PostgreSQL): the
    /// caller then asks for the revision instead (`read::freshness`).
    fn change_counter(&self) -> Result<Option<i64>>;
    /// The PostgreSQL connection, for the store's bulk paths (`COPY`).
    fn as_postgres(&self) -> Option<&super::pg::PgConn> {
        None
    }
}

impl dyn Sql + '_ {
    /// Every row, mapped.
    pub fn rows<T>(
        &self,
        sql: &str,
        args: &[Arg],
        mut map: impl FnMut(&dyn Row) -> Result<T>,
    ) -> Result<Vec<T>> {
        let mut out = Vec::new();
        self.each(sql, args, &mut |r| {
            out.push(map(r)?);
            Ok(())
        })?;
        Ok(out)
    }

    /// The first row, mapped, if there is one.
    pub fn first<T>(
        &self,
        sql: &str,
        args: &[Arg],
        mut map: impl FnMut(&dyn Row) -> Result<T>,
    ) -> Result<Option<T>> {
        let mut out = None;
        self.each(sql, args, &mut |r| {
            if out.is_none() {
                out = Some(map(r)?);
            }
            Ok(())
        })?;
        Ok(out)
    }

    /// `MAX(a, b)` of two scalars.
    pub fn greatest(&self, a: &str, b: &str) -> String {
        match self.dialect() {
            Dialect::Sqlite => format!("MAX({a}, {b})"),
            Dialect::Postgres => format!("GREATEST({a}, {b})"),
        }
    }

    /// `MIN(a, b)` of two scalars.
    pub fn least(&self, a: &str, b: &str) -> String {
        match self.dialect() {
            Dialect::Sqlite => format!("MIN({a}, {b})"),
            Dialect::Postgres => format!("LEAST({a}, {b})"),
        }
    }

    /// The literal a true boolean column equals.
    pub fn truth(&self) -> &'static str {
        match self.dialect() {
            Dialect::Sqlite => "1",
            Dialect::Postgres => "TRUE",
        }
    }

    /// An integer member of a JSON object column: `column.key`.
    pub fn json_int(&self, column: &str, key: &str) -> String {
        match self.dialect() {
            Dialect::Sqlite => format!("json_extract({column}, '$.{key}')"),
            Dialect::Postgres => format!("CAST({column} ->> '{key}' AS bigint)"),
        }
    }

    /// `column` is one of the ids in the JSON array at `mark`, as a condition an
    /// index on `column` serves on both backends. On PostgreSQL an array, whose
    /// elements the planner counts (a JSON function's rows it guesses at 100, and
    /// then scanned a week of every vehicle's events to find one vehicle's), as
    /// `= ANY`, which one index scan serves (an `IN (SELECT unnest(…))` over a small
    /// table is a hash join over all its rows, and over trips and events an index
    /// scan per id: 3.5 against 5.0 ms for 20 vehicles' week).
    pub fn id_in(&self, column: &str, mark: &str) -> String {
        match self.dialect() {
            Dialect::Sqlite => format!("{column} IN (SELECT value FROM json_each({mark}))"),
            Dialect::Postgres => {
                format!("{column} = ANY(CAST(translate({mark}, '[]', '{{}}') AS bigint[]))")
            }
        }
    }
}

/// A SQLite value read as the store's types.
impl Row for rusqlite::Row<'_> {
    fn opt_int(&self, i: usize) -> Result<Option<i64>> {
        self.get(i).map_err(db_err)
    }
    fn opt_real(&self, i: usize) -> Result<Option<f64>> {
        self.get(i).map_err(db_err)
    }
    fn opt_text(&self, i: usize) -> Result<Option<String>> {
        self.get(i).map_err(db_err)
    }
}

/// The arguments as SQLite values.
fn sqlite_values<'a>(args: &'a [Arg]) -> impl Iterator<Item = rusqlite::types::Value> + 'a {
    use rusqlite::types::Value;
    args.iter().map(|a| match *a {
        Arg::Int(v) => v.map_or(Value::Null, Value::Integer),
        Arg::Real(v) => Value::Real(v),
        Arg::Text(v) | Arg::Date(v) => Value::Text(v.to_string()),
    })
}

impl Sql for rusqlite::Connection {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn each(
        &self,
        sql: &str,
        args: &[Arg],
        each: &mut dyn FnMut(&dyn Row) -> Result<()>,
    ) -> Result<()> {
        let mut st = self.prepare_cached(sql).map_err(db_err)?;
        let mut rows = st
            .query(rusqlite::params_from_iter(sqlite_values(args)))
            .map_err(db_err)?;
        while let Some(row) = rows.next().map_err(db_err)? {
            each(row)?;
        }
        Ok(())
    }

    fn execute(&self, sql: &str, args: &[Arg]) -> Result<u64> {
        let mut st = self.prepare_cached(sql).map_err(super::db_write_err)?;
        st.execute(rusqlite::params_from_iter(sqlite_values(args)))
            .map(|n| n as u64)
            .map_err(super::db_write_err)
    }

    fn begin_read(&self) -> Result<bool> {
        if !self.is_autocommit() {
            return Ok(false);
        }
        self.execute_batch("BEGIN").map_err(db_err)?;
        Ok(true)
    }

    fn end_read(&self) {
        // A read transaction has nothing to keep: ending it cannot lose data.
        let _ = self.execute_batch("COMMIT");
    }

    fn change_counter(&self) -> Result<Option<i64>> {
        super::live::data_version(self).map(Some)
    }
}
