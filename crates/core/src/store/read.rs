//! Typed reads for the reports. Every query here is served by an index and returns
//! a handful of rows: the reports' latency budget is a couple of milliseconds.

use super::db_err;
use crate::error::{Error, ErrorCode, Result};
use crate::model::{DailyRollup, Event, EventDetail, EventKind, Fix, Stop, Trip, Vehicle, Visit};
use rusqlite::types::Value;
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

use super::{FIX_COLUMNS, event_kinds, positions};

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
    let mut fixes = Vec::new();
    positions_between(conn, vehicle_id, from_ts, to_ts, &mut |f, _| fixes.push(*f))?;
    Ok(fixes)
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
        .prepare_cached(&format!(
            "SELECT {} FROM positions WHERE vehicle_time >= ?1 AND vehicle_time < ?2 ORDER BY vehicle_time",
            positions::COLUMNS
        ))
        .map_err(db_err)?;
    let (from, to) = positions::key_range(vehicle_id, from_ts, to_ts);
    let mut rows = st.query(params![from, to]).map_err(db_err)?;
    while let Some(row) = rows.next().map_err(db_err)? {
        let (fix, ms) = positions::from_row(row).map_err(db_err)?;
        each(&fix, ms);
    }
    Ok(())
}

/// Hands `each` every fix of the database in key order (vehicle, then time), each with
/// its milliseconds past `ts`: a whole fleet's positions, to copy elsewhere.
pub fn all_positions(conn: &Connection, each: &mut dyn FnMut(&Fix, i64)) -> Result<()> {
    let mut st = conn
        .prepare(&format!(
            "SELECT {} FROM positions ORDER BY vehicle_time",
            positions::COLUMNS
        ))
        .map_err(db_err)?;
    let mut rows = st.query([]).map_err(db_err)?;
    while let Some(row) = rows.next().map_err(db_err)? {
        let (fix, ms) = positions::from_row(row).map_err(db_err)?;
        each(&fix, ms);
    }
    Ok(())
}

/// Each vehicle's newest fix at or before `at_ts` (the fleet map at an instant), for
/// the vehicles given; a vehicle with no fix by then is left out. One indexed read per
/// vehicle, through the positions' key.
pub fn fixes_at_or_before(conn: &Connection, vehicle_ids: &[i64], at_ts: i64) -> Result<Vec<Fix>> {
    let mut st = conn
        .prepare_cached(&format!(
            "SELECT {} FROM positions WHERE vehicle_time >= ?1 AND vehicle_time < ?2 ORDER BY vehicle_time DESC LIMIT 1",
            positions::COLUMNS
        ))
        .map_err(db_err)?;
    let mut out = Vec::new();
    for &id in vehicle_ids {
        let (from, _) = positions::vehicle_range(id);
        let (_, to) = positions::key_range(id, at_ts, at_ts + 1);
        if let Some((fix, _)) = st
            .query_row(params![from, to], positions::from_row)
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
        start_lat: positions::degrees(r.get(5)?),
        start_lon: positions::degrees(r.get(6)?),
        end_lat: positions::degrees(r.get(7)?),
        end_lon: positions::degrees(r.get(8)?),
        gap_km: r.get(9)?,
        moving_s: r.get(10)?,
        idle_s: r.get(11)?,
        odometer_km: r.get(12)?,
    })
}

const TRIP_COLUMNS: &str = "vehicle_id, start_ts, end_ts, distance_km, max_speed_kmh, start_lat_e7, start_lon_e7, end_lat_e7, end_lon_e7, gap_km, moving_s, idle_s, odometer_km";

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
    format!(" AND kind IN ({})", event_kinds::codes_sql(kinds))
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
        let kind = event_kinds::kind(kind)?;
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

const DAILY_COLUMNS: &str = "d.vehicle_id, d.date, d.gps_distance_km, d.odometer_distance_km, d.moving_min, d.idle_min, \
     d.parked_min, d.trips, d.stops, d.max_speed_kmh, d.avg_moving_speed_kmh, d.first_ts, d.last_ts, d.signal_losses, \
     d.gap_km, d.odometer_rejected, d.events";

fn daily_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<DailyRollup> {
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
        events: r.get(16)?,
    })
}

/// One vehicle's rollups through the primary key; the fleet's through the date index.
fn daily_vehicle_filter(vehicle_id: Option<i64>) -> &'static str {
    if vehicle_id.is_some() {
        "d.vehicle_id = ?3"
    } else {
        "?3 IS NULL"
    }
}

/// Daily rollups for local dates `from..=to` (`YYYY-MM-DD`), optionally one vehicle.
pub fn daily_between(
    conn: &Connection,
    vehicle_id: Option<i64>,
    from: &str,
    to: &str,
) -> Result<Vec<DailyRollup>> {
    let sql = format!(
        "SELECT {DAILY_COLUMNS} FROM daily d WHERE {} AND d.date >= ?1 AND d.date <= ?2 ORDER BY d.vehicle_id, d.date",
        daily_vehicle_filter(vehicle_id)
    );
    let mut st = conn.prepare_cached(&sql).map_err(db_err)?;
    let rows = st
        .query_map(params![from, to, vehicle_id], daily_from_row)
        .map_err(db_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(db_err)
}

/// How many rollups there are for local dates `from..=to`, optionally one vehicle.
pub fn daily_count(
    conn: &Connection,
    vehicle_id: Option<i64>,
    from: &str,
    to: &str,
) -> Result<usize> {
    let filter = format!(
        "{} AND d.date >= ?1 AND d.date <= ?2",
        daily_vehicle_filter(vehicle_id)
    );
    count_where(
        conn,
        "daily d",
        &filter,
        &[
            Value::Text(from.into()),
            Value::Text(to.into()),
            vehicle_id.map_or(Value::Null, Value::Integer),
        ],
    )
}

/// Up to `limit` rollups for local dates `from..=to` after `(date, plate)` = `after`
/// (empty strings: from the start), by date then plate. The date index gives the
/// dates in order; only one date's rows are sorted by plate at a time.
pub fn daily_after(
    conn: &Connection,
    vehicle_id: Option<i64>,
    (from, to): (&str, &str),
    (after_date, after_plate): (&str, &str),
    limit: usize,
) -> Result<Vec<DailyRollup>> {
    let sql = format!(
        "SELECT {DAILY_COLUMNS} FROM daily d JOIN vehicles v ON v.id = d.vehicle_id \
         WHERE {} AND d.date >= ?1 AND d.date <= ?2 AND d.date >= ?4 AND (d.date, v.plate) > (?4, ?5) \
         ORDER BY d.date, v.plate LIMIT ?6",
        daily_vehicle_filter(vehicle_id)
    );
    let mut st = conn.prepare_cached(&sql).map_err(db_err)?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = st
        .query_map(
            params![from, to, vehicle_id, after_date, after_plate, limit],
            daily_from_row,
        )
        .map_err(db_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(db_err)
}

/// What a day row shows beside its rollup, from the trips and events of that day.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DayExtras {
    /// The first trip's start and the last trip's end, UTC epoch seconds.
    pub trips_span: Option<(i64, i64)>,
    /// Idle seconds inside trips.
    pub trip_idle_s: i64,
    /// Events begun that day.
    pub events: i64,
    /// Speeding episodes begun that day.
    pub speeding: i64,
    /// Their seconds.
    pub speeding_s: i64,
}

/// The trips and events begun in `[from_ts, to_ts)` of `vehicle_ids`, summed per
/// vehicle and local day (`day_of` names a time's local date): two queries for a
/// page or an export, however many rows it has.
pub fn day_extras(
    conn: &Connection,
    vehicle_ids: &[i64],
    (from_ts, to_ts): (i64, i64),
    day_of: &dyn Fn(i64) -> String,
) -> Result<std::collections::HashMap<(i64, String), DayExtras>> {
    let ids = serde_json::to_string(vehicle_ids).map_err(|e| Error::internal(e.to_string()))?;
    let mut out: std::collections::HashMap<(i64, String), DayExtras> = Default::default();
    let mut st = conn
        .prepare_cached(
            "SELECT vehicle_id, start_ts, end_ts, idle_s FROM trips \
             WHERE vehicle_id IN (SELECT value FROM json_each(?3)) AND start_ts >= ?1 AND start_ts < ?2",
        )
        .map_err(db_err)?;
    let mut rows = st.query(params![from_ts, to_ts, ids]).map_err(db_err)?;
    while let Some(r) = rows.next().map_err(db_err)? {
        let (vehicle_id, start, end, idle_s): (i64, i64, i64, i64) = (
            r.get(0).map_err(db_err)?,
            r.get(1).map_err(db_err)?,
            r.get(2).map_err(db_err)?,
            r.get(3).map_err(db_err)?,
        );
        let e = out.entry((vehicle_id, day_of(start))).or_default();
        e.trips_span = Some(
            e.trips_span
                .map_or((start, end), |(a, b)| (a.min(start), b.max(end))),
        );
        e.trip_idle_s += idle_s;
    }
    let mut st = conn
        .prepare_cached(
            &format!(
                "SELECT vehicle_id, start_ts, kind = {speeding}, \
                 CASE WHEN kind = {speeding} THEN json_extract(detail, '$.duration_s') END FROM events \
                 WHERE vehicle_id IN (SELECT value FROM json_each(?3)) AND start_ts >= ?1 AND start_ts < ?2",
                speeding = event_kinds::code(EventKind::Speeding)
            ),
        )
        .map_err(db_err)?;
    let mut rows = st.query(params![from_ts, to_ts, ids]).map_err(db_err)?;
    while let Some(r) = rows.next().map_err(db_err)? {
        let (vehicle_id, start, speeding, seconds): (i64, i64, bool, Option<i64>) = (
            r.get(0).map_err(db_err)?,
            r.get(1).map_err(db_err)?,
            r.get(2).map_err(db_err)?,
            r.get(3).map_err(db_err)?,
        );
        let e = out.entry((vehicle_id, day_of(start))).or_default();
        e.events += 1;
        e.speeding += i64::from(speeding);
        e.speeding_s += seconds.unwrap_or(0);
    }
    Ok(out)
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

/// The oldest fix time in the store.
pub fn oldest_fix_ts(conn: &Connection) -> Result<Option<i64>> {
    // A vehicle's first fix is one look-up of the positions' key.
    let first_key = format!(
        "(SELECT MIN(vehicle_time) FROM positions WHERE vehicle_time >= {} AND vehicle_time < {})",
        positions::first_key_sql("v.id"),
        positions::first_key_sql("v.id + 1")
    );
    conn.query_row(
        &format!(
            "SELECT MIN({}) FROM vehicles v",
            positions::ts_of_key_sql(&first_key)
        ),
        [],
        |r| r.get(0),
    )
    .map_err(db_err)
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
        use Value as V;
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

/// The rows of `table` that match `filter`, counted (the exact total of every page).
fn count_where(conn: &Connection, table: &str, filter: &str, values: &[Value]) -> Result<usize> {
    let total: i64 = conn
        .prepare_cached(&format!("SELECT COUNT(*) FROM {table} WHERE {filter}"))
        .and_then(|mut st| st.query_row(rusqlite::params_from_iter(values), |r| r.get(0)))
        .map_err(db_err)?;
    Ok(total as usize)
}

/// Keyset paging: `filter` narrowed to the rows whose sort key `key_columns` comes
/// after `after`, in that order, at most `limit` of them. Every figure is a bound
/// value (the statement is cached once), and a page deep in a range is found through
/// the index as fast as the first.
fn after_key(
    filter: &str,
    values: &mut Vec<Value>,
    key_columns: &str,
    after: &[i64],
    limit: usize,
) -> String {
    let first = values.len() + 1;
    let marks: Vec<String> = (first..first + after.len())
        .map(|n| format!("?{n}"))
        .collect();
    values.extend(after.iter().map(|&k| Value::Integer(k)));
    values.push(Value::Integer(i64::try_from(limit).unwrap_or(i64::MAX)));
    format!(
        "{filter} AND ({key_columns}) > ({}) ORDER BY {key_columns} LIMIT ?{}",
        marks.join(", "),
        first + after.len()
    )
}

/// The rows a range of whole local days (`from..=to`, `YYYY-MM-DD`) holds, summed
/// from the daily rollups' count `column` (trips, stops or events begun each day):
/// one row per vehicle-day read instead of every trip, stop or event.
fn daily_sum(
    conn: &Connection,
    column: &str,
    vehicle_id: Option<i64>,
    (from, to): (&str, &str),
) -> Result<usize> {
    let sql = format!(
        "SELECT COALESCE(SUM(d.{column}), 0) FROM daily d WHERE {} AND d.date >= ?1 AND d.date <= ?2",
        daily_vehicle_filter(vehicle_id)
    );
    let total: i64 = conn
        .prepare_cached(&sql)
        .and_then(|mut st| st.query_row(params![from, to, vehicle_id], |r| r.get(0)))
        .map_err(db_err)?;
    Ok(total as usize)
}

/// How many stops match; `days`: the whole local days `q`'s times span, whose
/// rollups count them when nothing else narrows the range.
pub fn stops_count(conn: &Connection, q: &RangeQuery, days: (&str, &str)) -> Result<usize> {
    if q.min_s == 0 && q.bbox.is_none() {
        return daily_sum(conn, "stops", q.vehicle_id, days);
    }
    let (filter, values) = q.filter("lat", "lon");
    count_where(conn, "stops", &filter, &values)
}

/// Up to `limit` matching stops after `(start_ts, vehicle_id)` = `after`, in that
/// order (a vehicle's stops never begin at the same second).
pub fn stops_after(
    conn: &Connection,
    q: &RangeQuery,
    after: [i64; 2],
    limit: usize,
) -> Result<Vec<Stop>> {
    let (filter, mut values) = q.filter("lat", "lon");
    let sql = after_key(&filter, &mut values, "start_ts, vehicle_id", &after, limit);
    let mut st = conn
        .prepare_cached(&format!("SELECT {STOP_COLUMNS} FROM stops WHERE {sql}"))
        .map_err(db_err)?;
    let rows = st
        .query_map(rusqlite::params_from_iter(&values), stop_from_row)
        .map_err(db_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(db_err)
}

/// Where every matching stop is, (lat, lon): a geofence filter counts those inside.
pub fn stop_points(conn: &Connection, q: &RangeQuery) -> Result<Vec<(f64, f64)>> {
    let (filter, values) = q.filter("lat", "lon");
    let mut st = conn
        .prepare_cached(&format!("SELECT lat, lon FROM stops WHERE {filter}"))
        .map_err(db_err)?;
    let rows = st
        .query_map(rusqlite::params_from_iter(&values), |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .map_err(db_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(db_err)
}

/// How many trips match; `days` as in [`stops_count`].
pub fn trips_count(conn: &Connection, q: &RangeQuery, days: (&str, &str)) -> Result<usize> {
    if q.min_s == 0 && q.bbox.is_none() {
        return daily_sum(conn, "trips", q.vehicle_id, days);
    }
    let (filter, values) = q.filter("start_lat", "start_lon");
    count_where(conn, "trips", &filter, &values)
}

/// Up to `limit` matching trips after `(start_ts, vehicle_id)` = `after`, in that
/// order (a vehicle's trips never begin at the same second).
pub fn trips_after(
    conn: &Connection,
    q: &RangeQuery,
    after: [i64; 2],
    limit: usize,
) -> Result<Vec<Trip>> {
    let (filter, mut values) = q.filter("start_lat", "start_lon");
    let sql = after_key(&filter, &mut values, "start_ts, vehicle_id", &after, limit);
    let mut st = conn
        .prepare_cached(&format!("SELECT {TRIP_COLUMNS} FROM trips WHERE {sql}"))
        .map_err(db_err)?;
    let rows = st
        .query_map(rusqlite::params_from_iter(&values), trip_from_row)
        .map_err(db_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(db_err)
}

/// The events a range report reads: begun in `[from_ts, to_ts)`, of `kinds` (all when
/// empty), one vehicle's or the fleet's, and, with `geofence_id`, only the entries
/// and exits of that geofence.
pub struct EventQuery<'k> {
    /// One vehicle, or every one.
    pub vehicle_id: Option<i64>,
    /// These kinds; every kind when empty.
    pub kinds: &'k [EventKind],
    /// Only this geofence's entries and exits.
    pub geofence_id: Option<i64>,
    /// Begun at or after, UTC epoch seconds.
    pub from_ts: i64,
    /// Begun before.
    pub to_ts: i64,
}

impl EventQuery<'_> {
    fn filter(&self) -> (String, Vec<Value>) {
        let vehicle_filter = if self.vehicle_id.is_some() {
            " AND vehicle_id = ?3"
        } else {
            " AND ?3 IS NULL"
        };
        let geofence_filter = if self.geofence_id.is_some() {
            &format!(
                " AND kind IN ({}) AND json_extract(detail, '$.geofence_id') = ?4",
                event_kinds::codes_sql(&[EventKind::GeofenceEnter, EventKind::GeofenceExit])
            )
        } else {
            " AND ?4 IS NULL"
        };
        let filter = format!(
            "start_ts >= ?1 AND start_ts < ?2{vehicle_filter}{geofence_filter}{}",
            kind_filter(self.kinds)
        );
        let values = vec![
            Value::Integer(self.from_ts),
            Value::Integer(self.to_ts),
            self.vehicle_id.map_or(Value::Null, Value::Integer),
            self.geofence_id.map_or(Value::Null, Value::Integer),
        ];
        (filter, values)
    }
}

/// How many events match; `days` as in [`stops_count`] (the rollups count events of
/// every kind, any geofence).
pub fn events_count(conn: &Connection, q: &EventQuery, days: (&str, &str)) -> Result<usize> {
    if q.kinds.is_empty() && q.geofence_id.is_none() {
        return daily_sum(conn, "events", q.vehicle_id, days);
    }
    let (filter, values) = q.filter();
    count_where(conn, "events", &filter, &values)
}

/// Up to `limit` matching events after `(start_ts, vehicle_id, id)` = `after`, in
/// that order; each with its key.
pub fn events_after(
    conn: &Connection,
    q: &EventQuery,
    after: [i64; 3],
    limit: usize,
) -> Result<Vec<([i64; 3], Event)>> {
    let (filter, mut values) = q.filter();
    let sql = after_key(
        &filter,
        &mut values,
        "start_ts, vehicle_id, id",
        &after,
        limit,
    );
    let mut st = conn
        .prepare_cached(&format!(
            "SELECT vehicle_id, kind, start_ts, end_ts, lat, lon, detail, id FROM events WHERE {sql}"
        ))
        .map_err(db_err)?;
    let rows = st
        .query_map(rusqlite::params_from_iter(&values), |r| {
            Ok((raw_event(r)?, r.get::<_, i64>(7)?))
        })
        .map_err(db_err)?;
    let mut out = Vec::new();
    for row in rows {
        let ((kind, text, place), id) = row.map_err(db_err)?;
        let event = event_from(event_kinds::kind(kind)?, &text, place)?;
        out.push(([event.start_ts, event.vehicle_id, id], event));
    }
    Ok(out)
}

/// An event row as stored (vehicle_id, kind, start_ts, end_ts, lat, lon, detail): kind, detail text, and the rest.
type RawEvent = (i64, String, (i64, i64, i64, f64, f64));

fn raw_event(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawEvent> {
    Ok((
        r.get(1)?,
        r.get(6)?,
        (r.get(0)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?),
    ))
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
/// The visits to a geofence overlapping `[from_ts, to_ts)`, one vehicle's or the fleet's.
pub struct VisitQuery {
    /// The geofence.
    pub geofence_id: i64,
    /// One vehicle, or every one.
    pub vehicle_id: Option<i64>,
    /// Overlapping from, UTC epoch seconds.
    pub from_ts: i64,
    /// Overlapping before.
    pub to_ts: i64,
}

impl VisitQuery {
    fn filter(&self) -> (String, Vec<Value>) {
        let vehicle_filter = if self.vehicle_id.is_some() {
            " AND vehicle_id = ?4"
        } else {
            " AND ?4 IS NULL"
        };
        (
            format!(
                "geofence_id = ?1 AND enter_ts < ?3 AND (exit_ts IS NULL OR exit_ts > ?2){vehicle_filter}"
            ),
            vec![
                Value::Integer(self.geofence_id),
                Value::Integer(self.from_ts),
                Value::Integer(self.to_ts),
                self.vehicle_id.map_or(Value::Null, Value::Integer),
            ],
        )
    }
}

/// Per vehicle: its visits and the seconds inside them clipped to `[from_ts, until_ts)`
/// (`until_ts`: the range's end or the data clock, whichever is first), by vehicle id.
pub fn visit_sums(
    conn: &Connection,
    q: &VisitQuery,
    until_ts: i64,
) -> Result<Vec<(i64, usize, i64)>> {
    let (filter, mut values) = q.filter();
    values.push(Value::Integer(until_ts));
    let mut st = conn
        .prepare_cached(&format!(
            "SELECT vehicle_id, COUNT(*), SUM(MAX(MIN(COALESCE(exit_ts, ?5), ?5) - MAX(enter_ts, ?2), 0)) \
             FROM visits WHERE {filter} GROUP BY vehicle_id ORDER BY vehicle_id"
        ))
        .map_err(db_err)?;
    let rows = st
        .query_map(rusqlite::params_from_iter(&values), |r| {
            Ok((r.get(0)?, r.get::<_, i64>(1)? as usize, r.get(2)?))
        })
        .map_err(db_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(db_err)
}

/// Up to `limit` visits after `(enter_ts, vehicle_id)` = `after`, in that order (a
/// vehicle enters a geofence once at a time).
pub fn visits_after(
    conn: &Connection,
    q: &VisitQuery,
    after: [i64; 2],
    limit: usize,
) -> Result<Vec<Visit>> {
    let (filter, mut values) = q.filter();
    let sql = after_key(&filter, &mut values, "enter_ts, vehicle_id", &after, limit);
    let mut st = conn
        .prepare_cached(&format!(
            "SELECT vehicle_id, geofence_id, enter_ts, exit_ts FROM visits WHERE {sql}"
        ))
        .map_err(db_err)?;
    let rows = st
        .query_map(rusqlite::params_from_iter(&values), visit_from_row)
        .map_err(db_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(db_err)
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
