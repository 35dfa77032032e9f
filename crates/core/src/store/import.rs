//! The SQL of `fleetctl import`: vehicles found by plate, rows staged in a temporary
//! table while the files are read, read back one vehicle at a time in time order,
//! checked against what is already stored, and appended. All of it runs inside the
//! caller's transaction, so a failed import leaves the database as it was.

use super::{db_err, db_write_err};
use crate::error::Result;
use crate::model::Fix;
use rusqlite::{Connection, OptionalExtension, params};

/// One row that passed the checks a row can pass alone, waiting for the checks that
/// need its neighbours (duplicates, jumps) and a derived speed.
#[derive(Debug, Clone, PartialEq)]
pub struct Staged {
    /// The fix, with `speed_kmh` 0 and `speed_derived` true when the source had none.
    pub fix: Fix,
    /// Milliseconds past `fix.ts`, 0..=999.
    pub ts_ms: i64,
    /// The file it came from (index into the import's file list).
    pub file_index: usize,
    /// Its line (or record) number in that file, from 1.
    pub line: u64,
}

/// Stages and appends the rows of one import.
pub struct Importer<'c> {
    conn: &'c Connection,
}

impl<'c> Importer<'c> {
    /// Prepares the staging table on `conn` (inside the caller's transaction).
    pub fn start(conn: &'c Connection) -> Result<Importer<'c>> {
        conn.execute_batch(
            "CREATE TEMP TABLE IF NOT EXISTS staged (
                vehicle_id INTEGER NOT NULL, ts INTEGER NOT NULL, ts_ms INTEGER NOT NULL,
                lat REAL NOT NULL, lon REAL NOT NULL, speed_kmh REAL, heading_deg REAL,
                ignition INTEGER, odometer_km REAL, file_index INTEGER NOT NULL, line INTEGER NOT NULL);
             DROP INDEX IF EXISTS temp.staged_order;
             DELETE FROM temp.staged;",
        )
        .map_err(db_write_err)?;
        Ok(Importer { conn })
    }

    /// The id of the vehicle with this plate, added (kind `unknown`, no driver) when
    /// the database has none; true when it was added.
    pub fn vehicle_id(&self, plate: &str) -> Result<(i64, bool)> {
        let found: Option<i64> = self
            .conn
            .prepare_cached("SELECT id FROM vehicles WHERE plate = ?1")
            .and_then(|mut st| st.query_row([plate], |r| r.get(0)).optional())
            .map_err(db_err)?;
        if let Some(id) = found {
            return Ok((id, false));
        }
        self.conn
            .prepare_cached(
                "INSERT INTO vehicles (plate, kind, driver, active, route) VALUES (?1, 'unknown', '', 1, NULL)",
            )
            .and_then(|mut st| st.execute([plate]))
            .map_err(db_write_err)?;
        Ok((self.conn.last_insert_rowid(), true))
    }

    /// Stages one row.
    pub fn stage(&self, s: &Staged) -> Result<()> {
        let f = &s.fix;
        self.conn
            .prepare_cached(
                "INSERT INTO temp.staged VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            )
            .and_then(|mut st| {
                st.execute(params![
                    f.vehicle_id,
                    f.ts,
                    s.ts_ms,
                    f.lat,
                    f.lon,
                    (!f.speed_derived).then_some(f.speed_kmh),
                    f.heading_deg,
                    f.ignition,
                    f.odometer_km,
                    s.file_index as i64,
                    s.line as i64
                ])
            })
            .map(drop)
            .map_err(db_write_err)
    }

    /// The vehicles with staged rows. Indexes the staging table first, so that each
    /// vehicle's rows are then read in time order without a scan of all of them.
    pub fn staged_vehicles(&self) -> Result<Vec<i64>> {
        self.conn
            .execute_batch(
                "CREATE INDEX IF NOT EXISTS temp.staged_order ON staged (vehicle_id, ts, ts_ms, file_index, line)",
            )
            .map_err(db_write_err)?;
        let mut st = self
            .conn
            .prepare("SELECT DISTINCT vehicle_id FROM temp.staged ORDER BY vehicle_id")
            .map_err(db_err)?;
        st.query_map([], |r| r.get(0))
            .and_then(|rows| rows.collect())
            .map_err(db_err)
    }

    /// One vehicle's staged rows, in time order (ties in file and line order, which
    /// the checks do not depend on).
    pub fn staged(&self, vehicle_id: i64) -> Result<Vec<Staged>> {
        let mut st = self
            .conn
            .prepare(
                "SELECT vehicle_id, ts, ts_ms, lat, lon, speed_kmh, heading_deg, ignition, odometer_km, file_index, line \
                 FROM temp.staged WHERE vehicle_id = ?1 ORDER BY ts, ts_ms, file_index, line",
            )
            .map_err(db_err)?;
        st.query_map([vehicle_id], |r| {
            let speed: Option<f64> = r.get(5)?;
            Ok(Staged {
                fix: Fix {
                    vehicle_id: r.get(0)?,
                    ts: r.get(1)?,
                    lat: r.get(3)?,
                    lon: r.get(4)?,
                    speed_kmh: speed.unwrap_or(0.0),
                    speed_derived: speed.is_none(),
                    heading_deg: r.get(6)?,
                    ignition: r.get(7)?,
                    odometer_km: r.get(8)?,
                },
                ts_ms: r.get(2)?,
                file_index: r.get::<_, i64>(9)? as usize,
                line: r.get::<_, i64>(10)? as u64,
            })
        })
        .and_then(|rows| rows.collect())
        .map_err(db_err)
    }

    /// The position already stored for a vehicle at an instant, if any.
    pub fn stored_at(&self, vehicle_id: i64, ts: i64, ts_ms: i64) -> Result<Option<(f64, f64)>> {
        self.conn
            .prepare_cached(
                "SELECT lat, lon FROM positions WHERE vehicle_id = ?1 AND ts = ?2 AND ts_ms = ?3",
            )
            .and_then(|mut st| {
                st.query_row(params![vehicle_id, ts, ts_ms], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .optional()
            })
            .map_err(db_err)
    }

    /// Appends one fix.
    pub fn insert(&self, f: &Fix, ts_ms: i64) -> Result<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO positions (vehicle_id, ts, ts_ms, lat, lon, speed_kmh, speed_derived, heading_deg, ignition, odometer_km) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )
            .and_then(|mut st| {
                st.execute(params![
                    f.vehicle_id,
                    f.ts,
                    ts_ms,
                    f.lat,
                    f.lon,
                    f.speed_kmh,
                    f.speed_derived,
                    f.heading_deg,
                    f.ignition,
                    f.odometer_km
                ])
            })
            .map(drop)
            .map_err(db_write_err)
    }

    /// Empties the staging table.
    pub fn finish(self) -> Result<()> {
        self.conn
            .execute_batch("DROP INDEX IF EXISTS temp.staged_order; DELETE FROM temp.staged")
            .map_err(db_write_err)
    }
}
