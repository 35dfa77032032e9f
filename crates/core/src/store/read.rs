//! Typed reads for the reports. Every query here is served by an index and returns
//! a handful of rows: the reports' latency budget is a couple of milliseconds.

use super::db_err;
use crate::error::{Error, ErrorCode, Result};
use crate::model::{DailyRollup, Event, EventDetail, EventKind, Fix, Stop, Trip, Vehicle, Visit};
use rusqlite::{Connection, OptionalExtension, params};

/// All vehicles, by id.
pub fn vehicles(conn: &Connection) -> Result<Vec<(Vehicle, Option<String>)>> {
    let mut st = conn
        .prepare_cached("SELECT id, plate, kind, driver, active, route FROM vehicles ORDER BY id")
        .map_err(db_err)?;
    let rows = st
        .query_map([], |r| {
            Ok((
                Vehicle {
                    id: r.get(0)?,
                    plate: r.get(1)?,
                    kind: r.get(2)?,
                    driver: r.get(3)?,
                    active: r.get(4)?,
                },
                r.get(5)?,
            ))
        })
        .map_err(db_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(db_err)
}

const LATEST_COLUMNS: &str =
    "vehicle_id, ts, lat, lon, speed_kmh, speed_derived, heading_deg, ignition, odometer_km";

/// The newest fix of a vehicle (as of the last analysis).
pub fn last_fix(conn: &Connection, vehicle_id: i64) -> Result<Option<Fix>> {
    conn.prepare_cached(&format!(
        "SELECT {LATEST_COLUMNS} FROM latest_fix WHERE vehicle_id = ?1"
    ))
    .and_then(|mut st| st.query_row([vehicle_id], super::fix_from_row).optional())
    .map_err(db_err)
}

/// The newest fix of every vehicle that has one, by vehicle id.
pub fn last_fixes(conn: &Connection) -> Result<Vec<Fix>> {
    let mut st = conn
        .prepare_cached(&format!(
            "SELECT {LATEST_COLUMNS} FROM latest_fix ORDER BY vehicle_id"
        ))
        .map_err(db_err)?;
    let rows = st.query_map([], super::fix_from_row).map_err(db_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(db_err)
}

/// A vehicle's fixes in `[from_ts, to_ts)`, in time order.
pub fn fixes_between(
    conn: &Connection,
    vehicle_id: i64,
    from_ts: i64,
    to_ts: i64,
) -> Result<Vec<Fix>> {
    let mut st = conn
        .prepare_cached(
            "SELECT vehicle_id, ts, lat, lon, speed_kmh, speed_derived, heading_deg, ignition, odometer_km \
             FROM positions WHERE vehicle_id = ?1 AND ts >= ?2 AND ts < ?3 ORDER BY ts, ts_ms",
        )
        .map_err(db_err)?;
    let rows = st
        .query_map(params![vehicle_id, from_ts, to_ts], super::fix_from_row)
        .map_err(db_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(db_err)
}

fn stop_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Stop> {
    Ok(Stop {
        vehicle_id: r.get(0)?,
        start_ts: r.get(1)?,
        end_ts: r.get(2)?,
        lat: r.get(3)?,
        lon: r.get(4)?,
        idle_s: r.get(5)?,
        parked_s: r.get(6)?,
        ongoing: r.get(7)?,
        place: r.get(8)?,
    })
}

const STOP_COLUMNS: &str =
    "vehicle_id, start_ts, end_ts, lat, lon, idle_s, parked_s, ongoing, place";

/// The vehicle's stop still going on at its last fix, if any.
pub fn ongoing_stop(conn: &Connection, vehicle_id: i64) -> Result<Option<Stop>> {
    conn.prepare_cached(&format!(
        "SELECT {STOP_COLUMNS} FROM stops WHERE vehicle_id = ?1 AND ongoing = 1 ORDER BY start_ts DESC LIMIT 1"
    ))
    .and_then(|mut st| st.query_row([vehicle_id], stop_from_row).optional())
    .map_err(db_err)
}

/// Every stop still going on at its vehicle's last fix, by vehicle id.
pub fn ongoing_stops(conn: &Connection) -> Result<std::collections::HashMap<i64, Stop>> {
    let mut st = conn
        .prepare_cached(&format!(
            "SELECT {STOP_COLUMNS} FROM stops WHERE ongoing = 1 ORDER BY vehicle_id"
        ))
        .map_err(db_err)?;
    let rows = st.query_map([], stop_from_row).map_err(db_err)?;
    rows.map(|r| r.map(|s| (s.vehicle_id, s)))
        .collect::<rusqlite::Result<_>>()
        .map_err(db_err)
}

/// A vehicle's stops that began in `[from_ts, to_ts)`.
pub fn stops_between(
    conn: &Connection,
    vehicle_id: i64,
    from_ts: i64,
    to_ts: i64,
) -> Result<Vec<Stop>> {
    let mut st = conn
        .prepare_cached(&format!(
            "SELECT {STOP_COLUMNS} FROM stops WHERE vehicle_id = ?1 AND start_ts >= ?2 AND start_ts < ?3 ORDER BY start_ts"
        ))
        .map_err(db_err)?;
    let rows = st
        .query_map(params![vehicle_id, from_ts, to_ts], stop_from_row)
        .map_err(db_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(db_err)
}

/// A vehicle's trips that began in `[from_ts, to_ts)`.
pub fn trips_between(
    conn: &Connection,
    vehicle_id: i64,
    from_ts: i64,
    to_ts: i64,
) -> Result<Vec<Trip>> {
    let mut st = conn
        .prepare_cached(
            "SELECT vehicle_id, start_ts, end_ts, distance_km, max_speed_kmh, start_lat, start_lon, end_lat, end_lon, gap_km \
             FROM trips WHERE vehicle_id = ?1 AND start_ts >= ?2 AND start_ts < ?3 ORDER BY start_ts",
        )
        .map_err(db_err)?;
    let rows = st
        .query_map(params![vehicle_id, from_ts, to_ts], |r| {
            Ok(Trip {
                vehicle_id: r.get(0)?,
                start_ts: r.get(1)?,
                end_ts: r.get(2)?,
                distance_km: r.get(3)?,
                max_speed_kmh: r.get(4)?,
                start_lat: r.get(5)?,
                start_lon: r.get(6)?,
                end_lat: r.get(7)?,
                end_lon: r.get(8)?,
                gap_km: r.get(9)?,
            })
        })
        .map_err(db_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(db_err)
}

/// Events that began in `[from_ts, to_ts)`, optionally for one vehicle and of some
/// kinds, in time order.
pub fn events_between(
    conn: &Connection,
    vehicle_id: Option<i64>,
    kinds: &[EventKind],
    from_ts: i64,
    to_ts: i64,
) -> Result<Vec<Event>> {
    // The kinds come from the closed `EventKind` set, never from user text.
    let kind_filter = if kinds.is_empty() {
        String::new()
    } else {
        let names: Vec<String> = kinds.iter().map(|k| format!("'{}'", k.as_str())).collect();
        format!(" AND kind IN ({})", names.join(", "))
    };
    // One vehicle reads through (vehicle_id, start_ts); the fleet through
    // (kind, start_ts) or start_ts — an OR on the vehicle would defeat both.
    let vehicle_filter = if vehicle_id.is_some() {
        " AND vehicle_id = ?3"
    } else {
        " AND ?3 IS NULL"
    };
    let sql = format!(
        "SELECT vehicle_id, kind, start_ts, end_ts, lat, lon, detail FROM events \
         WHERE start_ts >= ?1 AND start_ts < ?2{vehicle_filter}{kind_filter} ORDER BY start_ts, id"
    );
    let mut st = conn.prepare_cached(&sql).map_err(db_err)?;
    let rows = st
        .query_map(params![from_ts, to_ts, vehicle_id], |r| {
            Ok((
                r.get::<_, String>(1)?,
                r.get::<_, String>(6)?,
                (r.get(0)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?),
            ))
        })
        .map_err(db_err)?;
    let mut out = Vec::new();
    for row in rows {
        let (kind, text, (vehicle_id, start_ts, end_ts, lat, lon)) = row.map_err(db_err)?;
        // What detection wrote must read back: anything else is a damaged database,
        // said so, never skipped or read as empty.
        let kind = EventKind::parse(&kind).ok_or_else(|| {
            Error::new(
                ErrorCode::DbSchema,
                format!("the events table holds an unknown kind {kind:?}"),
            )
            .with_hint("run `fleetctl analyze` to rebuild the detected events")
        })?;
        if kinds.is_empty() || kinds.contains(&kind) {
            // Read into the type the kind names: every figure there, with its type.
            let detail = EventDetail::from_json(kind, &text).map_err(|why| {
                Error::new(
                    ErrorCode::DbSchema,
                    format!(
                        "a {} event's detail is not what detection writes ({why}): {:?}",
                        kind.as_str(),
                        text.chars().take(200).collect::<String>()
                    ),
                )
                .with_hint("run `fleetctl analyze` to rebuild the detected events")
            })?;
            out.push(Event {
                vehicle_id,
                kind,
                start_ts,
                end_ts,
                lat,
                lon,
                detail,
            });
        }
    }
    Ok(out)
}

/// A vehicle's visits to a geofence overlapping `[from_ts, to_ts)`.
pub fn visits_overlapping(
    conn: &Connection,
    vehicle_id: i64,
    geofence_id: i64,
    from_ts: i64,
    to_ts: i64,
) -> Result<Vec<Visit>> {
    let mut st = conn
        .prepare_cached(
            "SELECT vehicle_id, geofence_id, enter_ts, exit_ts FROM visits \
             WHERE vehicle_id = ?1 AND geofence_id = ?2 AND enter_ts < ?4 AND (exit_ts IS NULL OR exit_ts > ?3) \
             ORDER BY enter_ts",
        )
        .map_err(db_err)?;
    let rows = st
        .query_map(params![vehicle_id, geofence_id, from_ts, to_ts], |r| {
            Ok(Visit {
                vehicle_id: r.get(0)?,
                geofence_id: r.get(1)?,
                enter_ts: r.get(2)?,
                exit_ts: r.get(3)?,
            })
        })
        .map_err(db_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(db_err)
}

/// Daily rollups for local dates `from..=to` (`YYYY-MM-DD`), optionally one vehicle.
pub fn daily_between(
    conn: &Connection,
    vehicle_id: Option<i64>,
    from: &str,
    to: &str,
) -> Result<Vec<DailyRollup>> {
    // One vehicle reads through the primary key; the fleet through the date index.
    let vehicle_filter = if vehicle_id.is_some() {
        "vehicle_id = ?3"
    } else {
        "?3 IS NULL"
    };
    let sql = format!(
        "SELECT vehicle_id, date, gps_distance_km, odometer_distance_km, moving_min, idle_min, parked_min, trips, stops, \
         max_speed_kmh, avg_moving_speed_kmh, first_ts, last_ts, signal_losses, gap_km FROM daily \
         WHERE {vehicle_filter} AND date >= ?1 AND date <= ?2 ORDER BY vehicle_id, date"
    );
    let mut st = conn.prepare_cached(&sql).map_err(db_err)?;
    let rows = st
        .query_map(params![from, to, vehicle_id], |r| {
            Ok(DailyRollup {
                vehicle_id: r.get(0)?,
                date: r.get(1)?,
                gps_distance_km: r.get(2)?,
                odometer_distance_km: r.get(3)?,
                moving_min: r.get(4)?,
                idle_min: r.get(5)?,
                parked_min: r.get(6)?,
                trips: r.get(7)?,
                stops: r.get(8)?,
                max_speed_kmh: r.get(9)?,
                avg_moving_speed_kmh: r.get(10)?,
                first_ts: r.get(11)?,
                last_ts: r.get(12)?,
                signal_losses: r.get(13)?,
                gap_km: r.get(14)?,
            })
        })
        .map_err(db_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(db_err)
}

/// The local dates (`YYYY-MM-DD`) on which a vehicle has fixes.
pub fn days_with_data(conn: &Connection, vehicle_id: i64) -> Result<Vec<String>> {
    let mut st = conn
        .prepare_cached("SELECT date FROM daily WHERE vehicle_id = ?1 ORDER BY date")
        .map_err(db_err)?;
    let rows = st.query_map([vehicle_id], |r| r.get(0)).map_err(db_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(db_err)
}

/// For each vehicle with data: its first and last local date and how many days.
pub fn data_days_by_vehicle(conn: &Connection) -> Result<Vec<(i64, String, String, i64)>> {
    let mut st = conn
        .prepare_cached("SELECT vehicle_id, MIN(date), MAX(date), COUNT(*) FROM daily GROUP BY vehicle_id ORDER BY vehicle_id")
        .map_err(db_err)?;
    let rows = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .map_err(db_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(db_err)
}

/// The newest fix time in the store (each vehicle's newest is in `latest_fix`).
pub fn newest_fix_ts(conn: &Connection) -> Result<Option<i64>> {
    conn.query_row("SELECT MAX(ts) FROM latest_fix", [], |r| r.get(0))
        .map_err(db_err)
}
