//! The SQL of `fleetctl import`: vehicles found by plate, rows checked against what is
//! already stored, and appended. All of it runs inside the caller's transaction, so a
//! failed import leaves the database as it was. (The rows wait for their turn in
//! `ingest::sort`, outside the database.)

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
    /// A naive local time the clocks repeated: `fix.ts` is its first occurrence,
    /// and the second is this many seconds later (the import places it by the
    /// vehicle's order). 0 for every other time.
    pub repeated_later_by_s: i64,
}

/// Finds vehicles and appends the rows of one import, in a SQLite file or a
/// PostgreSQL database.
pub enum Importer<'c> {
    /// A SQLite file.
    Sqlite(Sqlite<'c>),
    /// PostgreSQL (`store::pg::import`), its rows copied by a thread of their own.
    Postgres(super::pg::import::CopyBehind),
}

impl<'c> Importer<'c> {
    /// Appends to `conn` (inside the caller's transaction).
    pub fn start(conn: &'c Connection) -> Importer<'c> {
        Importer::Sqlite(Sqlite { conn })
    }

    /// Appends to a PostgreSQL fleet (inside the caller's transaction).
    pub fn postgres(conn: std::sync::Arc<super::pg::PgConn>) -> Result<Importer<'c>> {
        super::pg::import::CopyBehind::start(conn).map(Importer::Postgres)
    }

    /// Returns once every row handed over is appended (on PostgreSQL, a failed
    /// `COPY` is the error here).
    pub fn wait_for_appends(&self) -> Result<()> {
        self.postgres_conn().transpose().map(drop)
    }

    /// PostgreSQL: the connection, once every row handed over is appended.
    pub fn postgres_conn(&self) -> Option<Result<&super::pg::PgConn>> {
        match self {
            Importer::Sqlite(_) => None,
            Importer::Postgres(c) => Some(c.conn()),
        }
    }

    /// The id of the vehicle with this plate, added when there is none (see
    /// [`Sqlite::vehicle_id`]).
    pub fn vehicle_id(&self, plate: &str, device_id: bool) -> Result<(i64, bool)> {
        match self {
            Importer::Sqlite(s) => s.vehicle_id(plate, device_id),
            Importer::Postgres(c) => c.vehicle_id(plate, device_id),
        }
    }

    /// PostgreSQL: writes the rows of a vehicle's analysis made beside the import
    /// (after the rows handed over before it).
    pub fn write_analysis(&self, a: crate::model::VehicleAnalysis) -> Result<()> {
        match self {
            Importer::Sqlite(_) => Err(crate::error::Error::internal(
                "an analysis beside a SQLite import",
            )),
            Importer::Postgres(c) => c.write_analysis(a),
        }
    }

    /// The positions already stored for a vehicle from `from_ts` to `to_ts`
    /// (inclusive), by instant (seconds, milliseconds).
    pub fn stored_between(
        &self,
        vehicle_id: i64,
        from_ts: i64,
        to_ts: i64,
    ) -> Result<std::collections::HashMap<(i64, i64), (f64, f64)>> {
        match self {
            Importer::Sqlite(s) => s.stored_between(vehicle_id, from_ts, to_ts),
            Importer::Postgres(c) => {
                let mut found = std::collections::HashMap::new();
                super::read::positions_between(
                    c.conn()?,
                    vehicle_id,
                    from_ts,
                    to_ts.saturating_add(1),
                    &mut |f, ms| {
                        found.insert((f.ts, ms), (f.lat, f.lon));
                    },
                )?;
                Ok(found)
            }
        }
    }

    /// Appends a vehicle's settled rows (on PostgreSQL, while the caller goes on).
    pub fn append(&self, rows: Vec<Staged>) -> Result<()> {
        match self {
            Importer::Sqlite(s) => s.insert_all(&rows),
            Importer::Postgres(c) => c.append(rows),
        }
    }
}

/// The SQLite importer.
pub struct Sqlite<'c> {
    conn: &'c Connection,
}

impl Sqlite<'_> {
    /// The id of the vehicle with this plate, added (kind `unknown`, no driver) when
    /// the database has none; true when it was added. With `device_id`, the plate is
    /// a device's id: the vehicle gets it as its device id, unless it has one or
    /// another vehicle has this one.
    pub fn vehicle_id(&self, plate: &str, device_id: bool) -> Result<(i64, bool)> {
        let found: Option<i64> = self
            .conn
            .prepare_cached("SELECT id FROM vehicles WHERE plate = ?1")
            .and_then(|mut st| st.query_row([plate], |r| r.get(0)).optional())
            .map_err(db_err)?;
        let (id, added) = match found {
            Some(id) => (id, false),
            None => {
                let id = super::insert_vehicle(self.conn, &super::NewVehicle::plate(plate))?;
                (id, true)
            }
        };
        if device_id {
            self.conn
                .prepare_cached(
                    "UPDATE vehicles SET device_id = ?1 WHERE id = ?2 AND device_id IS NULL \
                     AND NOT EXISTS (SELECT 1 FROM vehicles WHERE device_id = ?1)",
                )
                .and_then(|mut st| st.execute(params![plate, id]))
                .map_err(db_write_err)?;
        }
        Ok((id, added))
    }

    /// The positions already stored for a vehicle from `from_ts` to `to_ts`
    /// (inclusive), by instant (seconds, milliseconds).
    pub fn stored_between(
        &self,
        vehicle_id: i64,
        from_ts: i64,
        to_ts: i64,
    ) -> Result<std::collections::HashMap<(i64, i64), (f64, f64)>> {
        let mut st = self
            .conn
            .prepare_cached(&format!(
                "SELECT {} FROM positions WHERE vehicle_time >= ?1 AND vehicle_time < ?2",
                super::positions::COLUMNS
            ))
            .map_err(db_err)?;
        let (from, to) = super::positions::key_range(vehicle_id, from_ts, to_ts.saturating_add(1));
        st.query_map([from, to], |r| {
            let (fix, ms) = super::positions::from_row(r)?;
            Ok(((fix.ts, ms), (fix.lat, fix.lon)))
        })
        .and_then(|rows| rows.collect())
        .map_err(db_err)
    }

    /// Appends a vehicle's settled rows.
    pub fn insert_all(&self, rows: &[Staged]) -> Result<()> {
        super::append_fixes(self.conn, rows.iter().map(|s| (&s.fix, s.ts_ms)))
    }
}
