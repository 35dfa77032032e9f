//! Typed reads for the reports. Every query here is served by an index and returns
//! a handful of rows: the reports' latency budget is a couple of milliseconds.

use super::sql::{Arg, Dialect, Row, Sql};
use super::tables::{self, Names};
use super::{FIX_COLUMNS, event_kinds, positions};
use crate::error::{Error, ErrorCode, Result};
use crate::model::{DailyRollup, Event, EventDetail, EventKind, Fix, Stop, Trip, Vehicle, Visit};

const fn int(v: i64) -> Arg<'static> {
    Arg::Int(Some(v))
}

/// All vehicles, by id.
pub fn vehicles(conn: &dyn Sql) -> Result<Vec<(Vehicle, Option<String>)>> {
    conn.rows(
        "SELECT id, plate, kind, driver, active, route FROM vehicles ORDER BY id",
        &[],
        |r| {
            Ok((
                Vehicle {
                    id: r.int(0)?,
                    plate: r.text(1)?,
                    kind: r.text(2)?,
                    driver: r.text(3)?,
                    active: r.flag(4)?,
                },
                r.opt_text(5)?,
            ))
        },
    )
}

/// The newest fix of every vehicle that has one, by vehicle id.
pub fn last_fixes(conn: &dyn Sql) -> Result<Vec<Fix>> {
    conn.rows(
        &format!("SELECT {FIX_COLUMNS} FROM latest_fix ORDER BY vehicle_id"),
        &[],
        fix_from,
    )
}

/// A row of [`FIX_COLUMNS`].
fn fix_from(r: &dyn Row) -> Result<Fix> {
    Ok(Fix {
        vehicle_id: r.int(0)?,
        ts: r.int(1)?,
        lat: r.real(2)?,
        lon: r.real(3)?,
        speed_kmh: r.real(4)?,
        speed_derived: r.flag(5)?,
        heading_deg: r.opt_real(6)?,
        ignition: r.opt_flag(7)?,
        odometer_km: r.opt_real(8)?,
    })
}

/// A vehicle's fixes in `[from_ts, to_ts)`, in time order.
pub fn fixes_between(
    conn: &dyn Sql,
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
    conn: &dyn Sql,
    vehicle_id: i64,
    from_ts: i64,
    to_ts: i64,
    each: &mut dyn FnMut(&Fix, i64),
) -> Result<()> {
    let (from, to) = positions::key_range(vehicle_id, from_ts, to_ts);
    if let Some(pg) = conn.as_postgres() {
        let (_, from_ms) = positions::split_key(from);
        let to_ms = match positions::split_key(to) {
            (id, ms) if id == vehicle_id => ms,
            _ => i64::MAX,
        };
        return super::pg::copy_positions_out(pg, vehicle_id, (from_ms, to_ms), each);
    }
    let (sql, args) = one_vehicles_positions(conn.dialect(), (from, to), "");
    conn.each(&sql, &args, &mut |r| {
        let (fix, ms) = positions::from_sql_row(r)?;
        each(&fix, ms);
        Ok(())
    })
}

/// The positions of one vehicle whose keys are in `[from, to)`, in time order, and
/// the arguments; `tail` ends the statement (` DESC LIMIT 1`).
fn one_vehicles_positions(
    dialect: Dialect,
    (from, to): (i64, i64),
    tail: &str,
) -> (String, Vec<Arg<'static>>) {
    let columns = positions::columns(dialect);
    match dialect {
        Dialect::Sqlite => (
            format!(
                "SELECT {columns} FROM positions WHERE vehicle_time >= ?1 AND vehicle_time < ?2 ORDER BY vehicle_time{tail}"
            ),
            vec![int(from), int(to)],
        ),
        Dialect::Postgres => {
            let (vehicle_id, from_ms) = positions::split_key(from);
            let to_ms = positions::split_key(to).1;
            // The end key of a range up to the vehicle's last instant is the next
            // vehicle's first.
            let to_ms = if positions::split_key(to).0 != vehicle_id {
                i64::MAX
            } else {
                to_ms
            };
            (
                format!(
                    "SELECT {columns} FROM positions WHERE vehicle_id = ?1 AND ts_ms >= ?2 AND ts_ms < ?3 ORDER BY ts_ms{tail}"
                ),
                vec![int(vehicle_id), int(from_ms), int(to_ms)],
            )
        }
    }
}

/// Hands `each` every fix of the database in key order (vehicle, then time), each with
/// its milliseconds past `ts`: a whole fleet's positions, to copy elsewhere.
pub fn all_positions(conn: &dyn Sql, each: &mut dyn FnMut(&Fix, i64)) -> Result<()> {
    let order = match conn.dialect() {
        Dialect::Sqlite => "vehicle_time",
        Dialect::Postgres => "vehicle_id, ts_ms",
    };
    conn.each(
        &format!(
            "SELECT {} FROM positions ORDER BY {order}",
            positions::columns(conn.dialect())
        ),
        &[],
        &mut |r| {
            let (fix, ms) = positions::from_sql_row(r)?;
            each(&fix, ms);
            Ok(())
        },
    )
}

/// Each vehicle's newest fix at or before `at_ts` (the fleet map at an instant), for
/// the vehicles given; a vehicle with no fix by then is left out. One indexed read per
/// vehicle, through the positions' key.
pub fn fixes_at_or_before(conn: &dyn Sql, vehicle_ids: &[i64], at_ts: i64) -> Result<Vec<Fix>> {
    let mut out = Vec::new();
    for &id in vehicle_ids {
        let (from, _) = positions::vehicle_range(id);
        let (_, to) = positions::key_range(id, at_ts, at_ts + 1);
        let (sql, args) = one_vehicles_positions(conn.dialect(), (from, to), " DESC LIMIT 1");
        if let Some((fix, _)) = conn.first(&sql, &args, positions::from_sql_row)? {
            out.push(fix);
        }
    }
    Ok(out)
}

fn stop_from_row(r: &dyn Row) -> Result<Stop> {
    Ok(Stop {
        vehicle_id: r.int(0)?,
        start_ts: r.int(1)?,
        end_ts: r.int(2)?,
        lat: r.real(3)?,
        lon: r.real(4)?,
        idle_s: r.int(5)?,
        parked_s: r.int(6)?,
        ongoing: r.flag(7)?,
        place: r.text(8)?,
        unknown_s: r.int(9)?,
    })
}

const STOP_COLUMNS: Names = Names(&tables::STOPS, None);

/// A vehicle's newest fix and its stop still going on (the latest begun, if
/// several are marked so), in one query: one round trip on PostgreSQL instead of
/// two. None when the vehicle has no fix.
pub fn last_fix_and_ongoing_stop(
    conn: &dyn Sql,
    vehicle_id: i64,
) -> Result<Option<(Fix, Option<Stop>)>> {
    let sql = format!(
        "SELECT {}, {} FROM latest_fix f LEFT JOIN stops s ON s.vehicle_id = f.vehicle_id \
         AND s.ongoing = {truth} AND s.start_ts = (SELECT max(start_ts) FROM stops \
         WHERE vehicle_id = ?1 AND ongoing = {truth}) WHERE f.vehicle_id = ?1",
        Names(&tables::LATEST_FIX, Some("f")),
        Names(&tables::STOPS, Some("s")),
        truth = conn.truth(),
    );
    let fix_columns = tables::LATEST_FIX.columns.len();
    conn.first(&sql, &[int(vehicle_id)], |r| {
        let fix = fix_from(r)?;
        let stop_row = Shifted {
            row: r,
            by: fix_columns,
        };
        let stop = match stop_row.opt_int(0)? {
            Some(_) => Some(stop_from_row(&stop_row)?),
            None => None,
        };
        Ok((fix, stop))
    })
}

/// Every stop still going on at its vehicle's last fix, by vehicle id.
pub fn ongoing_stops(conn: &dyn Sql) -> Result<std::collections::HashMap<i64, Stop>> {
    let stops = conn.rows(
        &format!(
            "SELECT {STOP_COLUMNS} FROM stops WHERE ongoing = {} ORDER BY vehicle_id",
            conn.truth()
        ),
        &[],
        stop_from_row,
    )?;
    Ok(stops.into_iter().map(|s| (s.vehicle_id, s)).collect())
}

/// The vehicle's stop that spans the instant `ts` (began at or before it, ended at
/// or after it), if any: was it standing still then.
pub fn stop_containing(conn: &dyn Sql, vehicle_id: i64, ts: i64) -> Result<Option<Stop>> {
    let latest = conn.first(
        &format!(
            "SELECT {STOP_COLUMNS} FROM stops WHERE vehicle_id = ?1 AND start_ts <= ?2 ORDER BY start_ts DESC LIMIT 1"
        ),
        &[int(vehicle_id), int(ts)],
        stop_from_row,
    )?;
    Ok(latest.filter(|s| s.end_ts >= ts))
}

/// A vehicle's stops that began in `[from_ts, to_ts)`.
pub fn stops_between(
    conn: &dyn Sql,
    vehicle_id: i64,
    from_ts: i64,
    to_ts: i64,
) -> Result<Vec<Stop>> {
    conn.rows(
        &format!(
            "SELECT {STOP_COLUMNS} FROM stops WHERE vehicle_id = ?1 AND start_ts >= ?2 AND start_ts < ?3 ORDER BY start_ts"
        ),
        &[int(vehicle_id), int(from_ts), int(to_ts)],
        stop_from_row,
    )
}

fn trip_from_row(r: &dyn Row) -> Result<Trip> {
    Ok(Trip {
        vehicle_id: r.int(0)?,
        start_ts: r.int(1)?,
        end_ts: r.int(2)?,
        distance_km: r.real(3)?,
        max_speed_kmh: r.real(4)?,
        start_lat: positions::degrees(r.int(5)?),
        start_lon: positions::degrees(r.int(6)?),
        end_lat: positions::degrees(r.int(7)?),
        end_lon: positions::degrees(r.int(8)?),
        gap_km: r.real(9)?,
        driving_s: r.int(10)?,
        idle_s: r.int(11)?,
        odometer_km: r.opt_real(12)?,
    })
}

const TRIP_COLUMNS: Names = Names(&tables::TRIPS, None);

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
    conn: &dyn Sql,
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
        "SELECT {EVENT_COLUMNS} FROM events \
         WHERE start_ts >= ?1 AND start_ts < ?2{vehicle_filter}{kind_filter} ORDER BY start_ts, id"
    );
    let rows = conn.rows(
        &sql,
        &[int(from_ts), int(to_ts), Arg::Int(vehicle_id)],
        raw_event,
    )?;
    let mut out = Vec::new();
    for (kind, text, (vehicle_id, start_ts, end_ts, lat, lon)) in rows {
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

fn visit_from_row(r: &dyn Row) -> Result<Visit> {
    Ok(Visit {
        vehicle_id: r.int(0)?,
        geofence_id: r.int(1)?,
        enter_ts: r.int(2)?,
        exit_ts: r.opt_int(3)?,
    })
}

/// A vehicle's visits to a geofence overlapping `[from_ts, to_ts)`.
pub fn visits_overlapping(
    conn: &dyn Sql,
    vehicle_id: i64,
    geofence_id: i64,
    from_ts: i64,
    to_ts: i64,
) -> Result<Vec<Visit>> {
    conn.rows(
        "SELECT vehicle_id, geofence_id, enter_ts, exit_ts FROM visits \
         WHERE vehicle_id = ?1 AND geofence_id = ?2 AND enter_ts < ?4 AND (exit_ts IS NULL OR exit_ts > ?3) \
         ORDER BY enter_ts",
        &[int(vehicle_id), int(geofence_id), int(from_ts), int(to_ts)],
        visit_from_row,
    )
}

const DAILY_COLUMNS: Names = Names(&tables::DAILY, Some("d"));

fn daily_from_row(r: &dyn Row) -> Result<DailyRollup> {
    Ok(DailyRollup {
        vehicle_id: r.int(0)?,
        date: r.text(1)?,
        gps_distance_km: r.real(2)?,
        odometer_distance_km: r.opt_real(3)?,
        driving_min: r.real(4)?,
        idle_min: r.real(5)?,
        parked_min: r.real(6)?,
        trips: r.int(7)?,
        stops: r.int(8)?,
        max_speed_kmh: r.real(9)?,
        avg_driving_speed_kmh: r.real(10)?,
        first_ts: r.int(11)?,
        last_ts: r.int(12)?,
        signal_losses: r.int(13)?,
        gap_km: r.real(14)?,
        odometer_rejected: r
            .opt_text(15)?
            .as_deref()
            .and_then(crate::model::OdometerRejected::parse),
        events: r.int(16)?,
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
    conn: &dyn Sql,
    vehicle_id: Option<i64>,
    from: &str,
    to: &str,
) -> Result<Vec<DailyRollup>> {
    let sql = format!(
        "SELECT {DAILY_COLUMNS} FROM daily d WHERE {} AND d.date >= ?1 AND d.date <= ?2 ORDER BY d.vehicle_id, d.date",
        daily_vehicle_filter(vehicle_id)
    );
    conn.rows(
        &sql,
        &[Arg::Date(from), Arg::Date(to), Arg::Int(vehicle_id)],
        daily_from_row,
    )
}

/// How many rollups there are for local dates `from..=to`, optionally one vehicle.
pub fn daily_count(conn: &dyn Sql, vehicle_id: Option<i64>, from: &str, to: &str) -> Result<usize> {
    let filter = format!(
        "{} AND d.date >= ?1 AND d.date <= ?2",
        daily_vehicle_filter(vehicle_id)
    );
    count_where(
        conn,
        "daily d",
        &filter,
        &[Arg::Date(from), Arg::Date(to), Arg::Int(vehicle_id)],
    )
}

/// Up to `limit` rollups for local dates `from..=to` after `(date, plate)` = `after`
/// (empty strings: from the start), by date then plate. The date index gives the
/// dates in order; only one date's rows are sorted by plate at a time.
pub fn daily_after(
    conn: &dyn Sql,
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
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    // From the start: after the first date's empty plate (no date is empty in
    // PostgreSQL, and every plate sorts after "").
    let (after_date, after_plate) = if after_date.is_empty() {
        (from, "")
    } else {
        (after_date, after_plate)
    };
    conn.rows(
        &sql,
        &[
            Arg::Date(from),
            Arg::Date(to),
            Arg::Int(vehicle_id),
            Arg::Date(after_date),
            Arg::Text(after_plate),
            int(limit),
        ],
        daily_from_row,
    )
}

/// One vehicle's local day as `trip_summary` shows it.
#[derive(Debug, Default)]
pub struct VehicleDay {
    /// The day's rollup, if the vehicle has data that day.
    pub rollup: Option<DailyRollup>,
    /// Trips begun that day, in time order.
    pub trips: Vec<Trip>,
    /// Stops begun that day, in time order.
    pub stops: Vec<Stop>,
    /// Events begun that day, in time order.
    pub events: Vec<Event>,
}

const EVENT_COLUMNS: Names = Names(&tables::EVENTS, None);

/// A row read `by` columns further on: one table's columns among several side by
/// side.
struct Shifted<'a> {
    row: &'a dyn Row,
    by: usize,
}

impl Row for Shifted<'_> {
    fn opt_int(&self, i: usize) -> Result<Option<i64>> {
        self.row.opt_int(i + self.by)
    }
    fn opt_real(&self, i: usize) -> Result<Option<f64>> {
        self.row.opt_real(i + self.by)
    }
    fn opt_text(&self, i: usize) -> Result<Option<String>> {
        self.row.opt_text(i + self.by)
    }
}

/// The tables of a vehicle's day, in [`vehicle_day`]'s order: their select lists.
/// A branch of its union gives the other tables' columns as NULLs of their
/// PostgreSQL types, for PostgreSQL resolves a union's column types a pair of
/// branches at a time, and a column NULL in the first two would be taken for text.
/// (SQLite accepts the names and keeps the NULLs.)
const DAY_TABLES: [Names; 4] = [DAILY_COLUMNS, TRIP_COLUMNS, STOP_COLUMNS, EVENT_COLUMNS];

/// A vehicle's rollup for local `date` and its trips, stops and events begun in
/// `[from_ts, to_ts)` (that date's bounds), in one query: one round trip on
/// PostgreSQL instead of four. Each row holds the four tables' columns side by
/// side after its branch and sort key, the other tables' NULL.
pub fn vehicle_day(
    conn: &dyn Sql,
    vehicle_id: i64,
    date: &str,
    (from_ts, to_ts): (i64, i64),
) -> Result<VehicleDay> {
    static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let sql = SQL.get_or_init(|| {
        // Branch b's select list: its own table's columns, the others' typed NULLs.
        let columns = |b: usize| {
            DAY_TABLES
                .iter()
                .enumerate()
                .map(|(t, names)| {
                    if t == b {
                        names.to_string()
                    } else {
                        names.0.typed_nulls()
                    }
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let in_day = "vehicle_id = ?1 AND start_ts >= ?2 AND start_ts < ?3";
        format!(
            "SELECT 0, CAST(0 AS bigint), CAST(0 AS bigint), {} FROM daily d WHERE d.vehicle_id = ?1 AND d.date = ?4 \
             UNION ALL SELECT 1, start_ts, id, {} FROM trips WHERE {in_day} \
             UNION ALL SELECT 2, start_ts, id, {} FROM stops WHERE {in_day} \
             UNION ALL SELECT 3, start_ts, id, {} FROM events WHERE {in_day} \
             ORDER BY 1, 2, 3",
            columns(0),
            columns(1),
            columns(2),
            columns(3),
        )
    });
    let mut offsets = [3; 4];
    for t in 1..4 {
        offsets[t] = offsets[t - 1] + DAY_TABLES[t - 1].0.columns.len();
    }
    let mut day = VehicleDay::default();
    conn.each(
        sql,
        &[int(vehicle_id), int(from_ts), int(to_ts), Arg::Date(date)],
        &mut |r| {
            let branch = usize::try_from(r.int(0)?).unwrap_or(usize::MAX);
            let Some(&by) = offsets.get(branch) else {
                return Err(Error::internal(format!("a day's row of branch {branch}")));
            };
            let row = Shifted { row: r, by };
            match branch {
                0 => day.rollup = Some(daily_from_row(&row)?),
                1 => day.trips.push(trip_from_row(&row)?),
                2 => day.stops.push(stop_from_row(&row)?),
                _ => {
                    let (kind, text, rest) = raw_event(&row)?;
                    day.events
                        .push(event_from(event_kinds::kind(kind)?, &text, rest)?);
                }
            }
            Ok(())
        },
    )?;
    Ok(day)
}

/// What a day row shows beside its rollup, from the trips and events of that day.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DayExtras {
    /// The first trip's start and the last trip's end, UTC epoch seconds.
    pub trips_span: Option<(i64, i64)>,
    /// Speeding episodes begun that day.
    pub speeding: i64,
    /// Their seconds.
    pub speeding_s: i64,
}

/// What [`day_extras`] reads for a page of days.
#[derive(Debug, Default)]
pub struct PageExtras {
    /// Per vehicle and local date.
    pub days: std::collections::HashMap<(i64, crate::clock::Date), DayExtras>,
    /// The vehicles whose newest fix reports the ignition (their trackers do, so
    /// their days have engine hours).
    pub ignition_reported: std::collections::HashSet<i64>,
}

/// The trips and speeding episodes begun in `[from_ts, to_ts)` of `vehicle_ids`,
/// summed per vehicle and local day (`day_of` names a time's local date), and which
/// of them report the ignition: one query for a page or an export, however many
/// rows it has (two round trips fewer on PostgreSQL than one for each table). The
/// day's events of every kind are the rollup's count (`daily.events`): the other
/// kinds, most of a day's events (ignition on and off), are not read at all.
pub fn day_extras(
    conn: &dyn Sql,
    vehicle_ids: &[i64],
    (from_ts, to_ts): (i64, i64),
    day_of: &dyn Fn(i64) -> crate::clock::Date,
) -> Result<PageExtras> {
    let ids = serde_json::to_string(vehicle_ids).map_err(|e| Error::internal(e.to_string()))?;
    let args = [int(from_ts), int(to_ts), Arg::Text(&ids)];
    let mut out = PageExtras::default();
    let speeding = event_kinds::code(EventKind::Speeding);
    // A trip's row: 0, vehicle, start, end, 0. A speeding episode's:
    // 1, vehicle, start, 0, its seconds. A vehicle whose newest fix reports the
    // ignition: 2, vehicle. Unary + keeps SQLite off the (kind, start_ts) index,
    // which would read the whole fleet's speeding of those days for a page of one
    // vehicle; its (vehicle_id, start_ts) one reads only theirs.
    let sql = format!(
        "SELECT 0, vehicle_id, start_ts, end_ts, 0 FROM trips \
         WHERE {of_ids} AND start_ts >= ?1 AND start_ts < ?2 \
         UNION ALL \
         SELECT 1, vehicle_id, start_ts, 0, {seconds} FROM events \
         WHERE {of_ids} AND +kind = {speeding} AND start_ts >= ?1 AND start_ts < ?2 \
         UNION ALL \
         SELECT 2, vehicle_id, 0, 0, NULL FROM latest_fix \
         WHERE {of_ids} AND ignition IS NOT NULL",
        of_ids = conn.id_in("vehicle_id", "?3"),
        seconds = conn.json_int("detail", "duration_s"),
    );
    conn.each(&sql, &args, &mut |r| {
        let (branch, vehicle_id) = (r.int(0)?, r.int(1)?);
        if branch == 2 {
            out.ignition_reported.insert(vehicle_id);
            return Ok(());
        }
        let start = r.int(2)?;
        let e = out.days.entry((vehicle_id, day_of(start))).or_default();
        if branch == 0 {
            let end = r.int(3)?;
            e.trips_span = Some(
                e.trips_span
                    .map_or((start, end), |(a, b)| (a.min(start), b.max(end))),
            );
        } else {
            e.speeding += 1;
            e.speeding_s += r.opt_int(4)?.unwrap_or(0);
        }
        Ok(())
    })?;
    Ok(out)
}

/// The local dates (`YYYY-MM-DD`) on which a vehicle has fixes.
pub fn days_with_data(conn: &dyn Sql, vehicle_id: i64) -> Result<Vec<String>> {
    conn.rows(
        "SELECT date FROM daily WHERE vehicle_id = ?1 ORDER BY date",
        &[int(vehicle_id)],
        |r| r.text(0),
    )
}

/// A vehicle's local dates with at least two fixes (a line to chart), in order.
pub fn days_with_two_fixes(conn: &dyn Sql, vehicle_id: i64) -> Result<Vec<String>> {
    conn.rows(
        "SELECT date FROM daily WHERE vehicle_id = ?1 AND last_ts > first_ts ORDER BY date",
        &[int(vehicle_id)],
        |r| r.text(0),
    )
}

/// For each vehicle with data: its first and last local date and how many days.
pub fn data_days_by_vehicle(conn: &dyn Sql) -> Result<Vec<(i64, String, String, i64)>> {
    conn.rows(
        "SELECT vehicle_id, MIN(date), MAX(date), COUNT(*) FROM daily GROUP BY vehicle_id ORDER BY vehicle_id",
        &[],
        |r| Ok((r.int(0)?, r.text(1)?, r.text(2)?, r.int(3)?)),
    )
}

/// The oldest fix time in the store.
pub fn oldest_fix_ts(conn: &dyn Sql) -> Result<Option<i64>> {
    // A vehicle's first fix is one look-up of the positions' key.
    let sql = match conn.dialect() {
        Dialect::Sqlite => {
            let first_key = format!(
                "(SELECT MIN(vehicle_time) FROM positions WHERE vehicle_time >= {} AND vehicle_time < {})",
                positions::first_key_sql("v.id"),
                positions::first_key_sql("v.id + 1")
            );
            format!(
                "SELECT MIN({}) FROM vehicles v",
                positions::ts_of_key_sql(&first_key)
            )
        }
        Dialect::Postgres => {
            "SELECT MIN((SELECT MIN(ts_ms) FROM positions p WHERE p.vehicle_id = v.id)) / 1000 \
             FROM vehicles v"
                .to_string()
        }
    };
    Ok(conn.first(&sql, &[], |r| r.opt_int(0))?.flatten())
}

/// Whether the database has the `revision` that every change of meta, vehicles,
/// geofences and places moves (their triggers): a SQLite file made before it
/// existed has not. PostgreSQL always answers [`freshness`] (a digest stands in).
pub fn has_revision(conn: &dyn Sql) -> Result<bool> {
    if conn.as_postgres().is_some() {
        return Ok(true);
    }
    Ok(conn
        .first(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'revision'",
            &[],
            |r| r.int(0),
        )?
        .is_some_and(|n| n > 0))
}

/// The revision and the newest fix's time, in one read (both backends).
const FRESHNESS_SQL: &str = "SELECT (SELECT n FROM revision), (SELECT MAX(ts) FROM latest_fix)";

/// What a reader compares between requests (see [`freshness`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Freshness {
    /// Moved by every change of meta, vehicles, geofences and places.
    pub revision: i64,
    /// The newest fix's time, UTC epoch seconds.
    pub newest_fix_ts: Option<i64>,
    /// PostgreSQL: the commits this read saw (its snapshot, `xmin:xmax:in-progress`).
    /// The same text twice means no transaction on the server ended in between, so
    /// every table reads as it did. `None` on SQLite, whose `data_version` says it.
    pub commits_seen: Option<String>,
}

/// [`freshness`] read as the first statement of a read transaction, which stays
/// open for the caller's next reads until [`end_held_read`] (PostgreSQL: one round
/// trip for both, see `PgConn::begin_read_with_freshness`). SQLite reads it alone:
/// its reads cost no round trip.
pub fn begin_read_with_freshness(conn: &dyn Sql) -> Result<Freshness> {
    match conn.as_postgres() {
        Some(pg) => pg.begin_read_with_freshness(),
        None => freshness(conn),
    }
}

/// Ends the read transaction [`begin_read_with_freshness`] left open, if any.
pub fn end_held_read(conn: &dyn Sql) {
    if let Some(pg) = conn.as_postgres() {
        pg.end_held_read();
    }
}

/// What a reader keeps between requests, in one read: the revision (see
/// [`has_revision`], which must be true), the newest fix's time, and on PostgreSQL
/// the commits seen.
pub fn freshness(conn: &dyn Sql) -> Result<Freshness> {
    if let Some(pg) = conn.as_postgres() {
        return pg.freshness();
    }
    conn.first(FRESHNESS_SQL, &[], |r| {
        Ok(Freshness {
            revision: r.int(0)?,
            newest_fix_ts: r.opt_int(1)?,
            commits_seen: None,
        })
    })
    .map(|found| {
        found.unwrap_or(Freshness {
            revision: 0,
            newest_fix_ts: None,
            commits_seen: None,
        })
    })
}

/// The newest fix time in the store (each vehicle's newest is in `latest_fix`).
pub fn newest_fix_ts(conn: &dyn Sql) -> Result<Option<i64>> {
    Ok(conn
        .first("SELECT MAX(ts) FROM latest_fix", &[], |r| r.opt_int(0))?
        .flatten())
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
    fn filter(&self, lat: &str, lon: &str) -> (String, Vec<Arg<'static>>) {
        // Unary + keeps SQLite off the time index when the box is the narrower one.
        let ts = if self.bbox.is_some() {
            "+start_ts"
        } else {
            "start_ts"
        };
        let mut sql = format!("{ts} >= ?1 AND {ts} < ?2");
        let mut values = vec![int(self.from_ts), int(self.to_ts)];
        let mut add = |clause: String, v: &[Arg<'static>]| {
            sql += &clause;
            values.extend_from_slice(v);
        };
        if self.min_s > 0 {
            add(" AND end_ts - start_ts >= ?3".into(), &[int(self.min_s)]);
        }
        if let Some(id) = self.vehicle_id {
            let n = values_len(self.min_s);
            add(format!(" AND vehicle_id = ?{n}"), &[int(id)]);
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
                &[
                    Arg::Real(south),
                    Arg::Real(north),
                    Arg::Real(west),
                    Arg::Real(east),
                ],
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
fn count_where(conn: &dyn Sql, table: &str, filter: &str, values: &[Arg]) -> Result<usize> {
    let total = conn.first(
        &format!("SELECT COUNT(*) FROM {table} WHERE {filter}"),
        values,
        |r| r.int(0),
    )?;
    Ok(total.unwrap_or(0) as usize)
}

/// Keyset paging: `filter` narrowed to the rows whose sort key `key_columns` comes
/// after `after`, in that order, at most `limit` of them. Every figure is a bound
/// value (the statement is cached once), and a page deep in a range is found through
/// the index as fast as the first.
fn after_key(
    filter: &str,
    values: &mut Vec<Arg<'_>>,
    key_columns: &str,
    after: &[i64],
    limit: usize,
) -> String {
    let first = values.len() + 1;
    let marks: Vec<String> = (first..first + after.len())
        .map(|n| format!("?{n}"))
        .collect();
    values.extend(after.iter().map(|&k| int(k)));
    values.push(int(i64::try_from(limit).unwrap_or(i64::MAX)));
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
    conn: &dyn Sql,
    column: &str,
    vehicle_id: Option<i64>,
    (from, to): (&str, &str),
) -> Result<usize> {
    let sql = format!(
        "SELECT CAST(COALESCE(SUM(d.{column}), 0) AS BIGINT) FROM daily d WHERE {} AND d.date >= ?1 AND d.date <= ?2",
        daily_vehicle_filter(vehicle_id)
    );
    let total = conn.first(
        &sql,
        &[Arg::Date(from), Arg::Date(to), Arg::Int(vehicle_id)],
        |r| r.int(0),
    )?;
    Ok(total.unwrap_or(0) as usize)
}

/// How many stops match; `days`: the whole local days `q`'s times span, whose
/// rollups count them when nothing else narrows the range.
pub fn stops_count(conn: &dyn Sql, q: &RangeQuery, days: (&str, &str)) -> Result<usize> {
    if q.min_s == 0 && q.bbox.is_none() {
        return daily_sum(conn, "stops", q.vehicle_id, days);
    }
    let (filter, values) = q.filter("lat", "lon");
    count_where(conn, "stops", &filter, &values)
}

/// Up to `limit` matching stops after `(start_ts, vehicle_id)` = `after`, in that
/// order (a vehicle's stops never begin at the same second).
pub fn stops_after(
    conn: &dyn Sql,
    q: &RangeQuery,
    after: [i64; 2],
    limit: usize,
) -> Result<Vec<Stop>> {
    let (filter, mut values) = q.filter("lat", "lon");
    let sql = after_key(&filter, &mut values, "start_ts, vehicle_id", &after, limit);
    conn.rows(
        &format!("SELECT {STOP_COLUMNS} FROM stops WHERE {sql}"),
        &values,
        stop_from_row,
    )
}

/// Where every matching stop is, (lat, lon): a geofence filter counts those inside.
pub fn stop_points(conn: &dyn Sql, q: &RangeQuery) -> Result<Vec<(f64, f64)>> {
    let (filter, values) = q.filter("lat", "lon");
    conn.rows(
        &format!("SELECT lat, lon FROM stops WHERE {filter}"),
        &values,
        |r| Ok((r.real(0)?, r.real(1)?)),
    )
}

/// How many trips match; `days` as in [`stops_count`].
pub fn trips_count(conn: &dyn Sql, q: &RangeQuery, days: (&str, &str)) -> Result<usize> {
    if q.min_s == 0 && q.bbox.is_none() {
        return daily_sum(conn, "trips", q.vehicle_id, days);
    }
    let (filter, values) = q.filter("start_lat", "start_lon");
    count_where(conn, "trips", &filter, &values)
}

/// Up to `limit` matching trips after `(start_ts, vehicle_id)` = `after`, in that
/// order (a vehicle's trips never begin at the same second).
pub fn trips_after(
    conn: &dyn Sql,
    q: &RangeQuery,
    after: [i64; 2],
    limit: usize,
) -> Result<Vec<Trip>> {
    let (filter, mut values) = q.filter("start_lat", "start_lon");
    let sql = after_key(&filter, &mut values, "start_ts, vehicle_id", &after, limit);
    conn.rows(
        &format!("SELECT {TRIP_COLUMNS} FROM trips WHERE {sql}"),
        &values,
        trip_from_row,
    )
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
    fn filter(&self, conn: &dyn Sql) -> (String, Vec<Arg<'static>>) {
        let vehicle_filter = if self.vehicle_id.is_some() {
            " AND vehicle_id = ?3"
        } else {
            " AND ?3 IS NULL"
        };
        let geofence_filter = if self.geofence_id.is_some() {
            &format!(
                " AND kind IN ({}) AND {} = ?4",
                event_kinds::codes_sql(&[EventKind::GeofenceEnter, EventKind::GeofenceExit]),
                conn.json_int("detail", "geofence_id")
            )
        } else {
            " AND ?4 IS NULL"
        };
        let filter = format!(
            "start_ts >= ?1 AND start_ts < ?2{vehicle_filter}{geofence_filter}{}",
            kind_filter(self.kinds)
        );
        let values = vec![
            int(self.from_ts),
            int(self.to_ts),
            Arg::Int(self.vehicle_id),
            Arg::Int(self.geofence_id),
        ];
        (filter, values)
    }
}

/// How many events match; `days` as in [`stops_count`] (the rollups count events of
/// every kind, any geofence).
pub fn events_count(conn: &dyn Sql, q: &EventQuery, days: (&str, &str)) -> Result<usize> {
    if q.kinds.is_empty() && q.geofence_id.is_none() {
        return daily_sum(conn, "events", q.vehicle_id, days);
    }
    let (filter, values) = q.filter(conn);
    count_where(conn, "events", &filter, &values)
}

/// Up to `limit` matching events after `(start_ts, vehicle_id, id)` = `after`, in
/// that order; each with its key.
pub fn events_after(
    conn: &dyn Sql,
    q: &EventQuery,
    after: [i64; 3],
    limit: usize,
) -> Result<Vec<([i64; 3], Event)>> {
    let (filter, mut values) = q.filter(conn);
    let sql = after_key(
        &filter,
        &mut values,
        "start_ts, vehicle_id, id",
        &after,
        limit,
    );
    let rows = conn.rows(
        &format!("SELECT {EVENT_COLUMNS}, id FROM events WHERE {sql}"),
        &values,
        |r| Ok((raw_event(r)?, r.int(7)?)),
    )?;
    let mut out = Vec::new();
    for ((kind, text, place), id) in rows {
        let event = event_from(event_kinds::kind(kind)?, &text, place)?;
        out.push(([event.start_ts, event.vehicle_id, id], event));
    }
    Ok(out)
}

/// The alerts queued in `alert_outbox` after `after_id`, oldest first, at most
/// `limit`: (id, the alert, when it was found). `claim` (PostgreSQL, in a
/// transaction): only rows no other transaction holds, held until it ends.
pub(crate) fn outbox_rows(
    conn: &dyn Sql,
    after_id: i64,
    limit: i64,
    claim: bool,
) -> Result<Vec<(i64, crate::model::NewEvent, i64)>> {
    let rows = conn.rows(
        &format!(
            "SELECT {EVENT_COLUMNS}, id, ongoing, found_ts FROM alert_outbox WHERE id > ?1 ORDER BY id LIMIT ?2{}",
            if claim { " FOR UPDATE SKIP LOCKED" } else { "" }
        ),
        &[Arg::Int(Some(after_id)), Arg::Int(Some(limit))],
        |r| Ok((raw_event(r)?, r.int(7)?, r.int(8)? != 0, r.int(9)?)),
    )?;
    let mut out = Vec::new();
    for ((kind, text, place), id, ongoing, found_ts) in rows {
        let event = event_from(event_kinds::kind(kind)?, &text, place)?;
        out.push((id, crate::model::NewEvent { event, ongoing }, found_ts));
    }
    Ok(out)
}

/// An event row as stored (vehicle_id, kind, start_ts, end_ts, lat, lon, detail): kind, detail text, and the rest.
type RawEvent = (i64, String, (i64, i64, i64, f64, f64));

fn raw_event(r: &dyn Row) -> Result<RawEvent> {
    Ok((
        r.int(1)?,
        r.text(6)?,
        (r.int(0)?, r.int(2)?, r.int(3)?, r.real(4)?, r.real(5)?),
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
    fn filter(&self) -> (String, Vec<Arg<'static>>) {
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
                int(self.geofence_id),
                int(self.from_ts),
                int(self.to_ts),
                Arg::Int(self.vehicle_id),
            ],
        )
    }
}

/// Per vehicle: its visits and the seconds inside them clipped to `[from_ts, until_ts)`
/// (`until_ts`: the range's end or the data clock, whichever is first), by vehicle id.
pub fn visit_sums(conn: &dyn Sql, q: &VisitQuery, until_ts: i64) -> Result<Vec<(i64, usize, i64)>> {
    let (filter, mut values) = q.filter();
    values.push(int(until_ts));
    let inside = format!(
        "{} - {}",
        conn.least("COALESCE(exit_ts, ?5)", "?5"),
        conn.greatest("enter_ts", "?2")
    );
    conn.rows(
        &format!(
            "SELECT vehicle_id, COUNT(*), CAST(SUM({}) AS BIGINT) \
             FROM visits WHERE {filter} GROUP BY vehicle_id ORDER BY vehicle_id",
            conn.greatest(&inside, "0")
        ),
        &values,
        |r| Ok((r.int(0)?, r.int(1)? as usize, r.int(2)?)),
    )
}

/// Up to `limit` visits after `(enter_ts, vehicle_id)` = `after`, in that order (a
/// vehicle enters a geofence once at a time).
pub fn visits_after(
    conn: &dyn Sql,
    q: &VisitQuery,
    after: [i64; 2],
    limit: usize,
) -> Result<Vec<Visit>> {
    let (filter, mut values) = q.filter();
    let sql = after_key(&filter, &mut values, "enter_ts, vehicle_id", &after, limit);
    conn.rows(
        &format!("SELECT vehicle_id, geofence_id, enter_ts, exit_ts FROM visits WHERE {sql}"),
        &values,
        visit_from_row,
    )
}

/// The vehicles with a speed limit of their own, km/h, by id.
pub fn vehicle_speed_limits(conn: &dyn Sql) -> Result<std::collections::HashMap<i64, f64>> {
    let limits = conn.rows(
        "SELECT id, speed_limit_kmh FROM vehicles WHERE speed_limit_kmh IS NOT NULL",
        &[],
        |r| Ok((r.int(0)?, r.real(1)?)),
    )?;
    Ok(limits.into_iter().collect())
}
