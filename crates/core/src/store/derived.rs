//! The derived tables (stops, trips, events, visits, daily rollups, latest fixes):
//! written by detection, one vehicle's analysis at a time, their indexes dropped
//! during a full rewrite and built again after it.

use super::tables::{Cell, Derived};
use super::*;
use crate::error::Result;
use crate::model::VehicleAnalysis;
use rusqlite::Connection;

/// Derived indexes of older schemas that newer ones replaced (an analyze or import
/// builds the new ones and drops these).
const FORMER_DERIVED_INDEXES: &[&str] = &["visits_geofence", "daily_date"];

/// The derived tables' indexes as the schema declares them: (name, statement).
fn derived_indexes() -> Vec<(&'static str, &'static str)> {
    let tables = schema_parts().0;
    let derived = tables
        .split_once("-- ---- Derived by detection")
        .map_or("", |(_, d)| d);
    derived
        .split(';')
        .map(str::trim)
        .filter_map(|statement| {
            let line = statement
                .lines()
                .map(str::trim_start)
                .find(|l| !l.starts_with("--"))?;
            let name = line
                .strip_prefix("CREATE INDEX ")?
                .split_whitespace()
                .next()?;
            Some((name, statement))
        })
        .collect()
}

/// Replaces the derived tables, vehicle by vehicle, inside the caller's transaction.
pub struct DerivedWriter<'c> {
    conn: &'c Connection,
}

/// The tables of what detection found, which an analysis rewrites (both stores).
pub(crate) const DERIVED_TABLES: [&str; 6] =
    ["stops", "trips", "events", "latest_fix", "visits", "daily"];

impl<'c> DerivedWriter<'c> {
    /// Empties the derived tables of these vehicles only (an import re-analyses
    /// the vehicles it touched).
    pub fn for_vehicles(conn: &'c Connection, vehicle_ids: &[i64]) -> Result<DerivedWriter<'c>> {
        for table in DERIVED_TABLES {
            let mut st = conn
                .prepare(&format!("DELETE FROM {table} WHERE vehicle_id = ?1"))
                .map_err(db_write_err)?;
            for id in vehicle_ids {
                st.execute([id]).map_err(db_write_err)?;
            }
        }
        Ok(DerivedWriter { conn })
    }

    /// Empties the derived tables for a full rewrite, their indexes dropped until
    /// [`DerivedWriter::finish`] builds them again: building an index over rows
    /// already written is several times faster than keeping it up to date row by
    /// row. Inside the caller's transaction, so a failure restores them.
    pub fn start(conn: &'c Connection) -> Result<DerivedWriter<'c>> {
        for (name, _) in derived_indexes() {
            conn.execute_batch(&format!("DROP INDEX IF EXISTS {name}"))
                .map_err(db_write_err)?;
        }
        conn.execute_batch("DELETE FROM stops; DELETE FROM trips; DELETE FROM events; DELETE FROM latest_fix; DELETE FROM visits; DELETE FROM daily;")
            .map_err(db_write_err)?;
        Ok(DerivedWriter { conn })
    }

    /// Builds the derived tables' indexes (those `start` dropped; a no-op for the
    /// ones that exist), and drops the ones an older schema had in their place.
    pub fn finish(self) -> Result<()> {
        for name in FORMER_DERIVED_INDEXES {
            self.conn
                .execute_batch(&format!("DROP INDEX IF EXISTS {name}"))
                .map_err(db_write_err)?;
        }
        for (_, create) in derived_indexes() {
            self.conn
                .execute_batch(&create.replacen("CREATE INDEX", "CREATE INDEX IF NOT EXISTS", 1))
                .map_err(db_write_err)?;
        }
        Ok(())
    }

    /// Sets one `meta` entry.
    pub fn set_meta(&mut self, key: &str, value: &str) -> Result<()> {
        set_meta(self.conn, key, value)
    }

    /// Writes one vehicle's analysis.
    pub fn write(&mut self, a: &VehicleAnalysis) -> Result<()> {
        let c = self.conn;
        if let Some(f) = &a.latest {
            insert_latest_fix(c, f)?;
        }
        insert(c, &a.stops)?;
        insert(c, &a.trips)?;
        insert(c, &a.events)?;
        insert(c, &a.visits)?;
        insert(c, &a.daily)
    }
}

/// The rows one write added, by table (their rowids), so that they can be taken
/// back: the live feed's provisional answer for a vehicle's open stretch.
#[derive(Debug, Clone, Default)]
pub struct WrittenRows {
    tables: Vec<(&'static str, std::ops::RangeInclusive<i64>)>,
}

impl WrittenRows {
    /// Adds the rows of a later write.
    pub fn extend(&mut self, later: WrittenRows) {
        self.tables.extend(later.tables);
    }
}

/// Writes one vehicle's rows inside the caller's transaction (its latest fix
/// replaced when the analysis has one) and says which rows they are.
pub fn write_rows(c: &Connection, a: &VehicleAnalysis) -> Result<WrittenRows> {
    if let Some(f) = &a.latest {
        c.prepare_cached("DELETE FROM latest_fix WHERE vehicle_id = ?1")
            .and_then(|mut st| st.execute([f.vehicle_id]))
            .map_err(db_write_err)?;
        insert_latest_fix(c, f)?;
    }
    let mut written = WrittenRows::default();
    // Rows inserted one after another into a rowid table get consecutive rowids.
    let mut added = |table: &'static str, n: usize| {
        if n > 0 {
            let last = c.last_insert_rowid();
            written.tables.push((table, last - n as i64 + 1..=last));
        }
    };
    insert(c, &a.stops)?;
    added("stops", a.stops.len());
    insert(c, &a.trips)?;
    added("trips", a.trips.len());
    insert(c, &a.events)?;
    added("events", a.events.len());
    insert(c, &a.visits)?;
    added("visits", a.visits.len());
    insert(c, &a.daily)?;
    added("daily", a.daily.len());
    Ok(written)
}

/// Takes back rows [`write_rows`] wrote, inside the caller's transaction.
pub fn delete_rows(c: &Connection, rows: &WrittenRows) -> Result<()> {
    for (table, ids) in &rows.tables {
        c.prepare_cached(&format!(
            "DELETE FROM {table} WHERE rowid BETWEEN ?1 AND ?2"
        ))
        .and_then(|mut st| st.execute([ids.start(), ids.end()]))
        .map_err(db_write_err)?;
    }
    Ok(())
}

/// The vehicle's newest fix, for the live reports.
fn insert_latest_fix(c: &Connection, f: &crate::model::Fix) -> Result<()> {
    insert(c, std::slice::from_ref(f))
}

/// Rows of one derived table, as its declaration (`tables`) says.
fn insert<R: Derived>(c: &Connection, rows: &[R]) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut st = c
        .prepare_cached(&R::TABLE.sqlite_insert())
        .map_err(db_write_err)?;
    for row in rows {
        let cells = row.cells()?;
        st.execute(rusqlite::params_from_iter(&cells))
            .map_err(db_write_err)?;
    }
    Ok(())
}

impl rusqlite::ToSql for Cell<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, Value, ValueRef};
        Ok(match self {
            Cell::Int(v) => ToSqlOutput::Owned(Value::Integer(*v)),
            Cell::OptInt(v) => v.map_or(ToSqlOutput::Owned(Value::Null), |v| {
                ToSqlOutput::Owned(Value::Integer(v))
            }),
            Cell::Real(v) => ToSqlOutput::Owned(Value::Real(*v)),
            Cell::OptReal(v) => v.map_or(ToSqlOutput::Owned(Value::Null), |v| {
                ToSqlOutput::Owned(Value::Real(v))
            }),
            Cell::Flag(v) => ToSqlOutput::Owned(Value::Integer(i64::from(*v))),
            Cell::OptFlag(v) => v.map_or(ToSqlOutput::Owned(Value::Null), |v| {
                ToSqlOutput::Owned(Value::Integer(i64::from(v)))
            }),
            Cell::Text(t) => ToSqlOutput::Borrowed(ValueRef::Text(t.as_bytes())),
            Cell::OptText(t) => t.map_or(ToSqlOutput::Owned(Value::Null), |t| {
                ToSqlOutput::Borrowed(ValueRef::Text(t.as_bytes()))
            }),
        })
    }
}

#[cfg(test)]
mod derived_index_tests {
    #[test]
    fn every_derived_index_of_the_schema_is_found() {
        let names: Vec<&str> = super::derived_indexes().iter().map(|i| i.0).collect();
        assert_eq!(
            names,
            [
                "stops_vehicle_ts",
                "stops_ts",
                "stops_lat",
                "stops_ongoing",
                "trips_vehicle_ts",
                "trips_ts",
                "events_ts",
                "events_vehicle_ts",
                "events_kind_ts",
                "latest_fix_ts",
                "visits_vehicle",
                "visits_geofence_time",
                "visits_geofence_vehicle",
                "daily_date_counts"
            ]
        );
    }
}
