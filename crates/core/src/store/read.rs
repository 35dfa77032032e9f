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

use super::FIX_COLUMNS;

/// The newest fix of a vehicle (as of the last analysis).
pub fn last_fix(conn: &Connection, vehicle_id: i64) -> Result<Option<Fix>> {
    conn.prepare_cached(&format!(
        "SELECT {FIX_COLUMNS} FROM latest_fix WHERE vehicle_id = ?1"
    ))
    .and_then(|mut st| st.query_row([vehicle_id], super::fix_from_row).optional())
    .map_err(db_err)
}

/// The newest fix of every vehicle that has one, by vehicle id.
pub fn last_fixes(conn: &Connection) -> Result<Vec<Fix>> {
    let mut st = conn
        .prepare_cached(&format!(
            "SELECT {FIX_COLUMNS} FROM latest_fix ORDER BY vehicle_id"
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
        .prepare_cached(&format!(
            "SELECT {FIX_COLUMNS} FROM positions WHERE vehicle_id = ?1 AND ts >= ?2 AND ts < ?3 ORDER BY ts, ts_ms"
        ))
        .map_err(db_err)?;
    let rows = st
        .query_map(params![vehicle_id, from_ts, to_ts], super::fix_from_row)
        .map_err(db_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(db_err)
}

/// Hands `each` a vehicle's fixes in `[from_ts, to_ts)` in time order, each with its
/// milliseconds past `ts` (exports keep them), without collecting them.
pub fn positions_between(
    conn: &Connection,
    vehicle_id: i64,
    from_ts: i64,
    to_ts: i64,
    each: &mut dyn FnMut(&Fix, i64),
) -> Result<()> {
    let mut st = conn
        .prepare_cached(
            &format!(
                "SELECT {FIX_COLUMNS}, ts_ms FROM positions WHERE vehicle_id = ?1 AND ts >= ?2 AND ts < ?3 ORDER BY ts, ts_ms"
            ),
        )
        .map_err(db_err)?;
    let mut rows = st
        .query(params![vehicle_id, from_ts, to_ts])
        .map_err(db_err)?;
    while let Some(row) = rows.next().map_err(db_err)? {
        let fix = super::fix_from_row(row).map_err(db_err)?;
        each(&fix, row.get(9).map_err(db_err)?);
    }
    Ok(())
}

/// Each vehicle's newest fix at or before `at_ts` (the fleet map at an instant), for
/// the vehicles given; a vehicle with no fix by then is left out. One indexed read per
/// vehicle, through the positions' `(vehicle_id, ts)` key.
pub fn fixes_at_or_before(conn: &Connection, vehicle_ids: &[i64], at_ts: i64) -> Result<Vec<Fix>> {
    let mut st = conn
        .prepare_cached(&format!(
            "SELECT {FIX_COLUMNS} FROM positions WHERE vehicle_id = ?1 AND ts <= ?2 ORDER BY ts DESC, ts_ms DESC LIMIT 1"
        ))
        .map_err(db_err)?;
    let mut out = Vec::new();
    for &id in vehicle_ids {
        if let Some(fix) = st
            .query_row(params![id, at_ts], super::fix_from_row)
            .optional()
            .map_err(db_err)?
        {
            out.push(fix);
        }
    }
    Ok(out)
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
        unknown_s: r.get(9)?,
    })
}

const STOP_COLUMNS: &str =
    "vehicle_id, start_ts, end_ts, lat, lon, idle_s, parked_s, ongoing, place, unknown_s";

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

/// The vehicle's stop that spans the instant `ts` (began at or before it, ended at
/// or after it), if any: was it standing still then.
pub fn stop_containing(conn: &Connection, vehicle_id: i64, ts: i64) -> Result<Option<Stop>> {
    let latest = conn
        .prepare_cached(&format!(
            "SELECT {STOP_COLUMNS} FROM stops WHERE vehicle_id = ?1 AND start_ts <= ?2 ORDER BY start_ts DESC LIMIT 1"
        ))
        .and_then(|mut st| st.query_row(params![vehicle_id, ts], stop_from_row).optional())
        .map_err(db_err)?;
    Ok(latest.filter(|s| s.end_ts >= ts))
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

fn trip_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Trip> {
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
        moving_s: r.get(10)?,
        idle_s: r.get(11)?,
        odometer_km: r.get(12)?,
    })
}

const TRIP_COLUMNS: &str = "vehicle_id, start_ts, end_ts, distance_km, max_speed_kmh, start_lat, start_lon, end_lat, end_lon, gap_km, moving_s, idle_s, odometer_km";

/// A vehicle's trips that began in `[from_ts, to_ts)`.
pub fn trips_between(
    conn: &Connection,
    vehicle_id: i64,
    from_ts: i64,
    to_ts: i64,
) -> Result<Vec<Trip>> {
    let mut st = conn
        .prepare_cached(&format!(
            "SELECT {TRIP_COLUMNS} FROM trips WHERE vehicle_id = ?1 AND start_ts >= ?2 AND start_ts < ?3 ORDER BY start_ts"
        ))
        .map_err(db_err)?;
    let rows = st
        .query_map(params![vehicle_id, from_ts, to_ts], trip_from_row)
        .map_err(db_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(db_err)
}

/// ` AND kind IN (…)` for these kinds (nothing for none). The kinds come from the
/// closed `EventKind` set, never from user text.
fn kind_filter(kinds: &[EventKind]) -> String {
    if kinds.is_empty() {
        return String::new();
    }
    let names: Vec<String> = kinds.iter().map(|k| format!("'{}'", k.as_str())).collect();
    format!(" AND kind IN ({})", names.join(", "))
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
    let kind_filter = kind_filter(kinds);
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
        .query_map(params![from_ts, to_ts, vehicle_id], raw_event)
        .map_err(db_err)?;
    let mut out = Vec::new();
    for row in rows {
        let (kind, text, (vehicle_id, start_ts, end_ts, lat, lon)) = row.map_err(db_err)?;
        let kind = event_kind(&kind)?;
        if kinds.is_empty() || kinds.contains(&kind) {
            out.push(event_from(
                kind,
                &text,
                (vehicle_id, start_ts, end_ts, lat, lon),
            )?);
        }
    }
    Ok(out)
}

fn visit_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Visit> {
    Ok(Visit {
        vehicle_id: r.get(0)?,
        geofence_id: r.get(1)?,
        enter_ts: r.get(2)?,
        exit_ts: r.get(3)?,
    })
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
        .query_map(
            params![vehicle_id, geofence_id, from_ts, to_ts],
            visit_from_row,
        )
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
         max_speed_kmh, avg_moving_speed_kmh, first_ts, last_ts, signal_losses, gap_km, odometer_rejected FROM daily \
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
                odometer_rejected: r
                    .get::<_, Option<String>>(15)?
                    .as_deref()
                    .and_then(crate::model::OdometerRejected::parse),
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

/// A vehicle's local dates with at least two fixes (a line to chart), in order.
pub fn days_with_two_fixes(conn: &Connection, vehicle_id: i64) -> Result<Vec<String>> {
    let mut st = conn
        .prepare_cached(
            "SELECT date FROM daily WHERE vehicle_id = ?1 AND last_ts > first_ts ORDER BY date",
        )
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

/// Stop and trip rows of a range, for the range reports: one vehicle's (through
/// `(vehicle_id, start_ts)`) or the fleet's (through `start_ts`), begun in
/// `[from_ts, to_ts)`, in time order then vehicle, lasting at least `min_s`.
pub struct RangeQuery {
    /// One vehicle, or every one.
    pub vehicle_id: Option<i64>,
    /// Begun at or after, UTC epoch seconds.
    pub from_ts: i64,
    /// Begun before.
    pub to_ts: i64,
    /// Lasting at least this many seconds.
    pub min_s: i64,
    /// Only rows whose point lies in this box (south, west, north, east degrees).
    pub bbox: Option<[f64; 4]>,
}

impl RangeQuery {
    /// The WHERE clause and its values: only the conditions asked for, so that the
    /// fleet's rows are counted and paged on the covering `(start_ts, vehicle_id,
    /// end_ts)` index, and a box is searched through the `lat` index instead.
    fn filter(&self, lat: &str, lon: &str) -> (String, Vec<rusqlite::types::Value>) {
        use rusqlite::types::Value as V;
        // Unary + keeps SQLite off the time index when the box is the narrower one.
        let ts = if self.bbox.is_some() {
            "+start_ts"
        } else {
            "start_ts"
        };
        let mut sql = format!("{ts} >= ?1 AND {ts} < ?2");
        let mut values = vec![V::Integer(self.from_ts), V::Integer(self.to_ts)];
        let mut add = |clause: String, v: &[V]| {
            sql += &clause;
            values.extend_from_slice(v);
        };
        if self.min_s > 0 {
            add(
                " AND end_ts - start_ts >= ?3".into(),
                &[V::Integer(self.min_s)],
            );
        }
        if let Some(id) = self.vehicle_id {
            let n = values_len(self.min_s);
            add(format!(" AND vehicle_id = ?{n}"), &[V::Integer(id)]);
        }
        if let Some([south, west, north, east]) = self.bbox {
            let n = values_len(self.min_s) + self.vehicle_id.is_some() as usize;
            add(
                format!(
                    " AND {lat} BETWEEN ?{n} AND ?{} AND {lon} BETWEEN ?{} AND ?{}",
                    n + 1,
                    n + 2,
                    n + 3
                ),
                &[V::Real(south), V::Real(north), V::Real(west), V::Real(east)],
            );
        }
        (sql, values)
    }
}

/// The number of the next `?N` after the times and the optional length.
fn values_len(min_s: i64) -> usize {
    3 + (min_s > 0) as usize
}

/// How many stops match, and the `limit` of them from `offset` on.
pub fn stops_page(
    conn: &Connection,
    q: &RangeQuery,
    offset: usize,
    limit: usize,
) -> Result<(usize, Vec<Stop>)> {
    let (filter, values) = q.filter("lat", "lon");
    let total: i64 = conn
        .prepare_cached(&format!("SELECT COUNT(*) FROM stops WHERE {filter}"))
        .and_then(|mut st| st.query_row(rusqlite::params_from_iter(&values), |r| r.get(0)))
        .map_err(db_err)?;
    let mut st = conn
        .prepare_cached(&format!(
            "SELECT {STOP_COLUMNS} FROM stops WHERE {filter} ORDER BY start_ts, vehicle_id LIMIT {limit} OFFSET {offset}"
        ))
        .map_err(db_err)?;
    let rows = st
        .query_map(rusqlite::params_from_iter(&values), stop_from_row)
        .map_err(db_err)?;
    Ok((
        total as usize,
        rows.collect::<rusqlite::Result<_>>().map_err(db_err)?,
    ))
}

/// How many trips match, and the `limit` of them from `offset` on.
pub fn trips_page(
    conn: &Connection,
    q: &RangeQuery,
    offset: usize,
    limit: usize,
) -> Result<(usize, Vec<Trip>)> {
    let (filter, values) = q.filter("start_lat", "start_lon");
    let total: i64 = conn
        .prepare_cached(&format!("SELECT COUNT(*) FROM trips WHERE {filter}"))
        .and_then(|mut st| st.query_row(rusqlite::params_from_iter(&values), |r| r.get(0)))
        .map_err(db_err)?;
    let mut st = conn
        .prepare_cached(&format!(
            "SELECT {TRIP_COLUMNS} FROM trips WHERE {filter} ORDER BY start_ts, vehicle_id LIMIT {limit} OFFSET {offset}"
        ))
        .map_err(db_err)?;
    let rows = st
        .query_map(rusqlite::params_from_iter(&values), trip_from_row)
        .map_err(db_err)?;
    Ok((
        total as usize,
        rows.collect::<rusqlite::Result<_>>().map_err(db_err)?,
    ))
}

/// How many events match, and the `limit` of them from `offset` on: begun in
/// `[from_ts, to_ts)`, of `kinds` (all when empty), one vehicle's or the fleet's,
/// and, with `geofence_id`, only the entries and exits of that geofence.
pub fn events_page(
    conn: &Connection,
    vehicle_id: Option<i64>,
    kinds: &[EventKind],
    geofence_id: Option<i64>,
    (from_ts, to_ts): (i64, i64),
    offset: usize,
    limit: usize,
) -> Result<(usize, Vec<Event>)> {
    let kind_filter = kind_filter(kinds);
    let vehicle_filter = if vehicle_id.is_some() {
        " AND vehicle_id = ?3"
    } else {
        " AND ?3 IS NULL"
    };
    let geofence_filter = if geofence_id.is_some() {
        " AND kind IN ('geofence_enter', 'geofence_exit') AND json_extract(detail, '$.geofence_id') = ?4"
    } else {
        " AND ?4 IS NULL"
    };
    let filter =
        format!("start_ts >= ?1 AND start_ts < ?2{vehicle_filter}{geofence_filter}{kind_filter}");
    let p = params![from_ts, to_ts, vehicle_id, geofence_id];
    let total: i64 = conn
        .prepare_cached(&format!("SELECT COUNT(*) FROM events WHERE {filter}"))
        .and_then(|mut st| st.query_row(p, |r| r.get(0)))
        .map_err(db_err)?;
    let mut st = conn
        .prepare_cached(&format!(
            "SELECT vehicle_id, kind, start_ts, end_ts, lat, lon, detail FROM events WHERE {filter} \
             ORDER BY start_ts, vehicle_id, id LIMIT {limit} OFFSET {offset}"
        ))
        .map_err(db_err)?;
    let rows = st.query_map(p, raw_event).map_err(db_err)?;
    let mut out = Vec::new();
    for row in rows {
        let (kind, text, place) = row.map_err(db_err)?;
        out.push(event_from(event_kind(&kind)?, &text, place)?);
    }
    Ok((total as usize, out))
}

/// An event row as stored (vehicle_id, kind, start_ts, end_ts, lat, lon, detail): kind, detail text, and the rest.
type RawEvent = (String, String, (i64, i64, i64, f64, f64));

fn raw_event(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawEvent> {
    Ok((
        r.get(1)?,
        r.get(6)?,
        (r.get(0)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?),
    ))
}

/// An event kind as detection writes it; anything else is a damaged database, said
/// so, never skipped.
fn event_kind(name: &str) -> Result<EventKind> {
    EventKind::parse(name).ok_or_else(|| {
        Error::new(
            ErrorCode::DbSchema,
            format!("the events table holds an unknown kind {name:?}"),
        )
        .with_hint("run `fleetctl analyze` to rebuild the detected events")
    })
}

/// An event row, its detail read into the type its kind names (every figure there,
/// with its type), or a `db_schema` error quoting it.
fn event_from(
    kind: EventKind,
    text: &str,
    (vehicle_id, start_ts, end_ts, lat, lon): (i64, i64, i64, f64, f64),
) -> Result<Event> {
    let detail = EventDetail::from_json(kind, text).map_err(|why| {
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
    Ok(Event {
        vehicle_id,
        kind,
        start_ts,
        end_ts,
        lat,
        lon,
        detail,
    })
}

/// The visits to a geofence overlapping `[from_ts, to_ts)`, every vehicle's or one's,
/// by entry time then vehicle (through `(geofence_id, enter_ts)`).
pub fn geofence_visits_between(
    conn: &Connection,
    geofence_id: i64,
    vehicle_id: Option<i64>,
    (from_ts, to_ts): (i64, i64),
) -> Result<Vec<Visit>> {
    let vehicle_filter = if vehicle_id.is_some() {
        " AND vehicle_id = ?4"
    } else {
        " AND ?4 IS NULL"
    };
    let mut st = conn
        .prepare_cached(&format!(
            "SELECT vehicle_id, geofence_id, enter_ts, exit_ts FROM visits \
             WHERE geofence_id = ?1 AND enter_ts < ?3 AND (exit_ts IS NULL OR exit_ts > ?2){vehicle_filter} \
             ORDER BY enter_ts, vehicle_id"
        ))
        .map_err(db_err)?;
    let rows = st
        .query_map(
            params![geofence_id, from_ts, to_ts, vehicle_id],
            visit_from_row,
        )
        .map_err(db_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(db_err)
}

/// A vehicle's trips begun in `[from_ts, to_ts)`, summed: the first start, the last
/// end, and moving and idle seconds (None without trips).
pub fn trips_span(
    conn: &Connection,
    vehicle_id: i64,
    from_ts: i64,
    to_ts: i64,
) -> Result<Option<(i64, i64, i64, i64)>> {
    conn.prepare_cached(
        "SELECT MIN(start_ts), MAX(end_ts), SUM(moving_s), SUM(idle_s) FROM trips \
         WHERE vehicle_id = ?1 AND start_ts >= ?2 AND start_ts < ?3",
    )
    .and_then(|mut st| {
        st.query_row(params![vehicle_id, from_ts, to_ts], |r| {
            let first: Option<i64> = r.get(0)?;
            Ok(first.map(|f| Ok::<_, rusqlite::Error>((f, r.get(1)?, r.get(2)?, r.get(3)?))))
        })
    })
    .and_then(|o| o.transpose())
    .map_err(db_err)
}

/// A vehicle's events begun in `[from_ts, to_ts)`: how many in all, how many
/// speeding, and the speeding seconds.
pub fn event_counts(
    conn: &Connection,
    vehicle_id: i64,
    from_ts: i64,
    to_ts: i64,
) -> Result<(i64, i64, i64)> {
    conn.prepare_cached(
        "SELECT COUNT(*), COALESCE(SUM(kind = 'speeding'), 0), \
         COALESCE(SUM(CASE WHEN kind = 'speeding' THEN json_extract(detail, '$.duration_s') END), 0) \
         FROM events WHERE vehicle_id = ?1 AND start_ts >= ?2 AND start_ts < ?3",
    )
    .and_then(|mut st| {
        st.query_row(params![vehicle_id, from_ts, to_ts], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
    })
    .map_err(db_err)
}

/// The vehicles with a speed limit of their own, km/h, by id.
pub fn vehicle_speed_limits(conn: &Connection) -> Result<std::collections::HashMap<i64, f64>> {
    let mut st = conn
        .prepare_cached(
            "SELECT id, speed_limit_kmh FROM vehicles WHERE speed_limit_kmh IS NOT NULL",
        )
        .map_err(db_err)?;
    let rows = st
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(db_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(db_err)
}
