//! The derived tables (stops, trips, events, visits, daily rollups, latest fixes):
//! written by detection, one vehicle's analysis at a time, their indexes dropped
//! during a full rewrite and built again after it.

use super::*;
use crate::error::{Error, Result};
use crate::model::VehicleAnalysis;
use rusqlite::{Connection, params};

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
        write_meta(self.conn, key, value)
    }

    /// Writes one vehicle's analysis.
    pub fn write(&mut self, a: &VehicleAnalysis) -> Result<()> {
        let c = self.conn;
        if let Some(f) = &a.latest {
            insert_latest_fix(c, f)?;
        }
        insert_stops(c, &a.stops)?;
        insert_trips(c, &a.trips)?;
        insert_events(c, &a.events)?;
        insert_visits(c, &a.visits)?;
        insert_daily(c, &a.daily)
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
    insert_stops(c, &a.stops)?;
    added("stops", a.stops.len());
    insert_trips(c, &a.trips)?;
    added("trips", a.trips.len());
    insert_events(c, &a.events)?;
    added("events", a.events.len());
    insert_visits(c, &a.visits)?;
    added("visits", a.visits.len());
    insert_daily(c, &a.daily)?;
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
    c.prepare_cached(&format!(
        "INSERT INTO latest_fix ({FIX_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
    ))
    .and_then(|mut st| {
        st.execute(params![
            f.vehicle_id,
            f.ts,
            f.lat,
            f.lon,
            f.speed_kmh,
            f.speed_derived,
            f.heading_deg,
            f.ignition,
            f.odometer_km
        ])
    })
    .map_err(db_write_err)?;
    Ok(())
}

/// Stops, as detection found them.
fn insert_stops(c: &Connection, rows: &[crate::model::Stop]) -> Result<()> {
    let mut st = c
        .prepare_cached(
            "INSERT INTO stops (vehicle_id, start_ts, end_ts, lat, lon, idle_s, parked_s, ongoing, place, unknown_s) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        )
        .map_err(db_write_err)?;
    for s in rows {
        st.execute(params![
            s.vehicle_id,
            s.start_ts,
            s.end_ts,
            s.lat,
            s.lon,
            s.idle_s,
            s.parked_s,
            s.ongoing,
            s.place,
            s.unknown_s
        ])
        .map_err(db_write_err)?;
    }
    Ok(())
}

/// Trips.
fn insert_trips(c: &Connection, rows: &[crate::model::Trip]) -> Result<()> {
    let mut st = c
        .prepare_cached(
            "INSERT INTO trips (vehicle_id, start_ts, end_ts, distance_km, max_speed_kmh, start_lat_e7, start_lon_e7, end_lat_e7, end_lon_e7, gap_km, moving_s, idle_s, odometer_km) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
        )
        .map_err(db_write_err)?;
    for t in rows {
        st.execute(params![
            t.vehicle_id,
            t.start_ts,
            t.end_ts,
            t.distance_km,
            t.max_speed_kmh,
            positions::e7(t.start_lat),
            positions::e7(t.start_lon),
            positions::e7(t.end_lat),
            positions::e7(t.end_lon),
            t.gap_km,
            t.driving_s,
            t.idle_s,
            t.odometer_km
        ])
        .map_err(db_write_err)?;
    }
    Ok(())
}

/// Events, each detail as JSON.
fn insert_events(c: &Connection, rows: &[crate::model::Event]) -> Result<()> {
    let mut st = c
        .prepare_cached(
            "INSERT INTO events (vehicle_id, kind, start_ts, end_ts, lat, lon, detail) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )
        .map_err(db_write_err)?;
    for e in rows {
        let detail = serde_json::to_string(&e.detail).map_err(|err| {
            Error::internal(format!("an event's detail did not serialise: {err}"))
        })?;
        st.execute(params![
            e.vehicle_id,
            event_kinds::code(e.kind),
            e.start_ts,
            e.end_ts,
            e.lat,
            e.lon,
            detail
        ])
        .map_err(db_write_err)?;
    }
    Ok(())
}

/// Geofence visits.
fn insert_visits(c: &Connection, rows: &[crate::model::Visit]) -> Result<()> {
    let mut st = c
        .prepare_cached("INSERT INTO visits (vehicle_id, geofence_id, enter_ts, exit_ts) VALUES (?1, ?2, ?3, ?4)")
        .map_err(db_write_err)?;
    for v in rows {
        st.execute(params![v.vehicle_id, v.geofence_id, v.enter_ts, v.exit_ts])
            .map_err(db_write_err)?;
    }
    Ok(())
}

/// Daily rollups.
fn insert_daily(c: &Connection, rows: &[crate::model::DailyRollup]) -> Result<()> {
    let mut st = c
        .prepare_cached(
            "INSERT INTO daily (vehicle_id, date, gps_distance_km, odometer_distance_km, moving_min, idle_min, parked_min, \
             trips, stops, max_speed_kmh, avg_moving_speed_kmh, first_ts, last_ts, signal_losses, gap_km, odometer_rejected, events) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
        )
        .map_err(db_write_err)?;
    for d in rows {
        st.execute(params![
            d.vehicle_id,
            d.date,
            d.gps_distance_km,
            d.odometer_distance_km,
            d.driving_min,
            d.idle_min,
            d.parked_min,
            d.trips,
            d.stops,
            d.max_speed_kmh,
            d.avg_driving_speed_kmh,
            d.first_ts,
            d.last_ts,
            d.signal_losses,
            d.gap_km,
            d.odometer_rejected.map(|r| r.as_str()),
            d.events
        ])
        .map_err(db_write_err)?;
    }
    Ok(())
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
