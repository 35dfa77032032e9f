//! A whole fleet from a SQLite database into PostgreSQL, in one transaction: how
//! `generate --db postgres://…` fills a database. The fleet is built where building
//! is fast (an embedded file, written in key order), then every table is copied
//! with `COPY`, so the two stores hold the same rows and every report answers the
//! same from either.

use super::{Found, Target};
use crate::error::{Error, ErrorCode, Result};
use rusqlite::Connection;
use rusqlite::types::ValueRef;
use std::io::Write;

/// The tables copied as they are, in an order their readers never mind (no big
/// table has a foreign key). `positions` and `geofences` have their own paths.
const TABLES: &[&str] = &[
    "meta",
    "vehicles",
    "places",
    "injected_events",
    "stops",
    "trips",
    "events",
    "latest_fix",
    "visits",
    "daily",
];

/// What [`load_fleet`] wrote.
#[derive(Debug, Clone, Copy, Default)]
pub struct Loaded {
    /// Positions copied.
    pub positions: u64,
    /// Rows of the other tables.
    pub other_rows: u64,
}

/// Copies the fleet in the SQLite database `source` into `target`: an empty
/// database, or (with `replace`) one holding a fleet already, which is dropped in
/// the same transaction. Another application's tables, or no PostGIS, are refused
/// with nothing changed; a failure anywhere leaves the database as it was.
pub fn load_fleet(
    source: &Connection,
    target: &Target,
    replace: bool,
    progress: &mut dyn FnMut(f64),
) -> Result<Loaded> {
    let mut client = target.connect()?;
    match super::probe(&mut client, target)? {
        Found::Empty => {}
        Found::Fleet { .. } if replace => {}
        Found::Fleet { schema_version } => {
            return Err(super::holds_a_fleet(
                target,
                schema_version,
                super::FORCE_HINT,
            ));
        }
        Found::Other { tables } => return Err(super::other_application(target, &tables)),
    }
    super::require_postgis(&mut client, target)?;
    let write = |e| target.failed("write", e);
    let mut tx = client.transaction().map_err(write)?;
    tx.batch_execute("DROP SCHEMA IF EXISTS fleetctl CASCADE")
        .map_err(write)?;
    super::create_schema(&mut tx, target)?;
    let mut loaded = Loaded::default();
    for table in TABLES {
        loaded.other_rows += copy_table(&mut tx, target, source, table)?;
    }
    loaded.other_rows += copy_geofences(&mut tx, target, source)?;
    let total: i64 = source
        .query_row("SELECT COUNT(*) FROM positions", [], |r| r.get(0))
        .map_err(crate::store::db_err)?;
    // A chunk at a time: memory stays flat however big the fleet.
    let mut chunk = Vec::with_capacity(super::copy::CHUNK);
    let mut failed = None;
    let mut flush = |tx: &mut postgres::Transaction<'_>,
                     chunk: &mut Vec<(crate::model::Fix, i64)>| {
        let written = super::copy_fixes(
            tx,
            target,
            super::Partitions::InTransaction,
            chunk.iter().map(|(f, ms)| (f, *ms)),
        );
        chunk.clear();
        written.map(|n| {
            loaded.positions += n;
            progress(loaded.positions as f64 / total.max(1) as f64);
        })
    };
    crate::store::read::all_positions(source, &mut |fix, ms| {
        if failed.is_some() {
            return;
        }
        chunk.push((*fix, ms));
        if chunk.len() == super::copy::CHUNK
            && let Err(e) = flush(&mut tx, &mut chunk)
        {
            failed = Some(e);
        }
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    flush(&mut tx, &mut chunk)?;
    tx.batch_execute("ANALYZE").map_err(write)?;
    tx.commit().map_err(write)?;
    Ok(loaded)
}

/// The columns PostgreSQL's `table` has, in order.
fn columns_of(
    tx: &mut postgres::Transaction<'_>,
    target: &Target,
    table: &str,
) -> Result<Vec<String>> {
    let rows = tx
        .query(
            "SELECT column_name::text FROM information_schema.columns \
             WHERE table_schema = 'fleetctl' AND table_name = $1 ORDER BY ordinal_position",
            &[&table],
        )
        .map_err(|e| target.failed("read", e))?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// Copies SQLite's `table` into PostgreSQL's (COPY, text format): the columns
/// PostgreSQL's has, read from SQLite's by name.
fn copy_table(
    tx: &mut postgres::Transaction<'_>,
    target: &Target,
    source: &Connection,
    table: &str,
) -> Result<u64> {
    let columns = columns_of(tx, target, table)?.join(", ");
    let mut st = source
        .prepare(&format!("SELECT {columns} FROM {table}"))
        .map_err(crate::store::db_err)?;
    let width = st.column_count();
    let mut rows = st.query([]).map_err(crate::store::db_err)?;
    let mut sink = tx
        .copy_in(&format!("COPY fleetctl.{table} ({columns}) FROM STDIN"))
        .map_err(|e| target.failed("write", e))?;
    let mut line = String::new();
    let mut written = 0;
    while let Some(row) = rows.next().map_err(crate::store::db_err)? {
        line.clear();
        for i in 0..width {
            if i > 0 {
                line.push('\t');
            }
            match row.get_ref(i).map_err(crate::store::db_err)? {
                ValueRef::Null => line.push_str("\\N"),
                ValueRef::Integer(v) => line.push_str(&v.to_string()),
                // Rust writes the shortest text that reads back as the same float.
                ValueRef::Real(v) => line.push_str(&v.to_string()),
                ValueRef::Text(t) => escape_into(&mut line, &String::from_utf8_lossy(t)),
                ValueRef::Blob(_) => {
                    return Err(Error::internal(format!(
                        "{table} holds a blob, which its PostgreSQL table has no column for"
                    )));
                }
            }
        }
        line.push('\n');
        sink.write_all(line.as_bytes()).map_err(|e| {
            Error::new(
                ErrorCode::DbUnavailable,
                format!("copying {table} to {} failed: {e}", target.display()),
            )
        })?;
        written += 1;
    }
    sink.finish().map_err(|e| target.failed("write", e))?;
    Ok(written)
}

/// Text in COPY's text format: backslash, tab, newline and carriage return escaped.
pub(super) fn escape_into(line: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '\\' => line.push_str("\\\\"),
            '\t' => line.push_str("\\t"),
            '\n' => line.push_str("\\n"),
            '\r' => line.push_str("\\r"),
            c => line.push(c),
        }
    }
}

/// Geofences with their PostGIS area (`area_of`).
fn copy_geofences(
    tx: &mut postgres::Transaction<'_>,
    target: &Target,
    source: &Connection,
) -> Result<u64> {
    let mut st = source
        .prepare("SELECT id, name, kind, wkt, radius_m, speed_limit_kmh FROM geofences ORDER BY id")
        .map_err(crate::store::db_err)?;
    type Row = (i64, String, String, String, Option<f64>, Option<f64>);
    let rows: Vec<Row> = st
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            ))
        })
        .and_then(|rows| rows.collect())
        .map_err(crate::store::db_err)?;
    for (id, name, kind, wkt, radius_m, speed_limit_kmh) in &rows {
        tx.execute(
            &format!(
                "INSERT INTO fleetctl.geofences (id, name, kind, wkt, radius_m, speed_limit_kmh, area) \
                 VALUES ($1, $2, $3, $4, $5, $6, {})",
                super::area_of("$4", "$5::float8")
            ),
            &[id, name, kind, wkt, radius_m, speed_limit_kmh],
        )
        .map_err(|e| target.failed("write", e))?;
    }
    Ok(rows.len() as u64)
}

#[cfg(test)]
mod tests {
    #[test]
    fn copy_text_escapes_what_would_end_a_field_or_a_row() {
        let mut line = String::new();
        super::escape_into(&mut line, "a\tb\\c\nd\re ñ");
        assert_eq!(line, "a\\tb\\\\c\\nd\\re ñ");
    }
}
