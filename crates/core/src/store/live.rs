//! The live feed's SQL: which vehicle a device is (`vehicles.device_id`), adding a
//! vehicle for a device, and appending the fixes devices push — idempotently (a fix
//! at an instant the vehicle already has is the one stored) and in any order (a
//! device that uploads its buffer hours late lands in place).

use super::sql::{Arg, Dialect, Sql};
use super::{db_err, db_write_err, positions};
use crate::error::{Error, ErrorCode, Result};
use crate::geo::{LatLon, haversine_m};
use crate::model::{EventKey, Fix, Pushed};
use rusqlite::Connection;
use std::path::Path;

/// The `meta` entry that says which clock a database answers at, and the value of
/// a database fed live: the wall clock. Generated and imported databases have none
/// and keep their data clock (`meta.data_now`, else the newest fix).
pub const CLOCK_META: (&str, &str) = ("clock", "wall");

/// Opens the live feed's one writing connection: WAL mode, so that the server's
/// readers never wait for a commit nor a commit for them, and `synchronous = FULL`,
/// so that a committed group is on disk before its devices hear 200 (a crash or a
/// power cut loses no acknowledged fix).
pub fn open_writer(path: &Path) -> Result<Connection> {
    let conn = super::open_read_write(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(db_err)?;
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .map_err(db_write_err)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(Error::new(
            ErrorCode::DbUnavailable,
            format!("{}: could not switch to WAL mode (it stays {mode})", path.display()),
        )
        .with_hint("the live feed needs a database on a local disk (WAL does not work over a network file system)"));
    }
    // A fleet's fixes land on a page per vehicle, and its open stretches' rows on a
    // few more: 64 MiB of cache keeps a large fleet's pages in memory, and a
    // checkpoint every 10,000 pages (40 MiB of WAL) writes a page rewritten by many
    // groups back once.
    conn.execute_batch(
        "PRAGMA synchronous = FULL; PRAGMA cache_size = -65536; PRAGMA wal_autocheckpoint = 10000",
    )
    .map_err(db_write_err)?;
    Ok(conn)
}

/// The keys of the events stored for a vehicle: what the live feed already knew
/// before it analyses the vehicle again, so that it alerts only what is new.
pub fn event_keys(conn: &dyn Sql, vehicle_id: i64) -> Result<std::collections::HashSet<EventKey>> {
    let rows = conn.rows(
        &format!(
            "SELECT kind, start_ts, COALESCE({}, 0) FROM events WHERE vehicle_id = ?1",
            conn.json_int("detail", "geofence_id")
        ),
        &[Arg::Int(Some(vehicle_id))],
        |r| Ok((r.int(0)?, r.int(1)?, r.int(2)?)),
    )?;
    let mut keys = std::collections::HashSet::new();
    for (kind, start_ts, geofence_id) in rows {
        keys.insert((super::event_kinds::kind(kind)?, start_ts, geofence_id));
    }
    Ok(keys)
}

/// SQLite's `data_version` on this connection: it changes when another connection
/// commits (an import, an edit, an analysis while the feed runs).
pub fn data_version(conn: &Connection) -> Result<i64> {
    conn.query_row("PRAGMA data_version", [], |r| r.get(0))
        .map_err(db_err)
}

/// Each vehicle with positions and the id it pushes as: its device id, else its
/// plate; ordered by vehicle id.
pub fn pushing_ids(conn: &dyn Sql) -> Result<Vec<(i64, String)>> {
    // A vehicle's positions are one key range: one look-up each.
    let has_positions = match conn.dialect() {
        Dialect::Sqlite => format!(
            "SELECT 1 FROM positions WHERE vehicle_time >= {} AND vehicle_time < {}",
            positions::first_key_sql("v.id"),
            positions::first_key_sql("v.id + 1")
        ),
        Dialect::Postgres => "SELECT 1 FROM positions p WHERE p.vehicle_id = v.id".to_string(),
    };
    conn.rows(
        &format!(
            "SELECT id, COALESCE(device_id, plate) FROM vehicles v WHERE EXISTS ({has_positions}) ORDER BY id"
        ),
        &[],
        |r| Ok((r.int(0)?, r.text(1)?)),
    )
}

/// Deletes every position before `before_ts` inside the caller's transaction,
/// vehicle by vehicle along the positions' key; how many went, and from which
/// vehicles (to analyse again).
pub fn delete_positions_before(conn: &Connection, before_ts: i64) -> Result<(usize, Vec<i64>)> {
    let all: Vec<i64> = conn
        .prepare_cached("SELECT id FROM vehicles ORDER BY id")
        .and_then(|mut st| {
            st.query_map([], |r| r.get(0))?
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(db_err)?;
    let mut delete = conn
        .prepare_cached("DELETE FROM positions WHERE vehicle_time >= ?1 AND vehicle_time < ?2")
        .map_err(db_write_err)?;
    let (mut deleted, mut vehicles) = (0, Vec::new());
    for v in all {
        let (from, to) = positions::key_range(v, positions::FIRST_TS, before_ts);
        let gone = delete.execute([from, to]).map_err(db_write_err)?;
        if gone > 0 {
            deleted += gone;
            vehicles.push(v);
        }
    }
    Ok((deleted, vehicles))
}

/// The vehicle whose tracker pushes with `device_id`, if one does.
pub fn vehicle_of_device(conn: &dyn Sql, device_id: &str) -> Result<Option<i64>> {
    conn.first(
        "SELECT id FROM vehicles WHERE device_id = ?1",
        &[Arg::Text(device_id)],
        |r| r.int(0),
    )
}

fn device_taken(conn: &dyn Sql, device_id: &str) -> Result<()> {
    let holder = conn.first(
        "SELECT plate FROM vehicles WHERE device_id = ?1",
        &[Arg::Text(device_id)],
        |r| r.text(0),
    )?;
    match holder {
        Some(plate) => Err(Error::invalid(format!(
            "device id {device_id:?} already belongs to {plate}"
        ))
        .with_hint(format!(
            "free it first: `fleetctl vehicles set {plate} --device-id none`"
        ))),
        None => Ok(()),
    }
}

/// Adds a vehicle (kind `unknown`, no driver), with the device id its tracker
/// pushes with, if any; its id.
pub fn add_vehicle(conn: &dyn Sql, plate: &str, device_id: Option<&str>) -> Result<i64> {
    lock_new_vehicles(conn)?;
    let exists = conn.first(
        "SELECT id FROM vehicles WHERE plate = ?1",
        &[Arg::Text(plate)],
        |r| r.int(0),
    )?;
    if exists.is_some() {
        return Err(
            Error::invalid(format!("{plate} is already in the fleet")).with_hint(format!(
                "to give it a device id: `fleetctl vehicles set {plate} --device-id ID`"
            )),
        );
    }
    if let Some(id) = device_id {
        device_taken(conn, id)?;
    }
    let new = super::NewVehicle {
        device_id,
        ..super::NewVehicle::plate(plate)
    };
    super::insert_vehicle(conn, &new)
}

/// The vehicle whose tracker pushes with `device_id`, added (its plate the device
/// id) when there is none: `--auto-register`. Looked up again under the lock new
/// vehicles are added under, so two servers registering one new device at once
/// agree on one vehicle.
pub fn register_device(conn: &dyn Sql, device_id: &str) -> Result<i64> {
    lock_new_vehicles(conn)?;
    match vehicle_of_device(conn, device_id)? {
        Some(vehicle) => Ok(vehicle),
        None => add_vehicle(conn, device_id, Some(device_id)),
    }
}

/// On PostgreSQL, waits for the lock new vehicles are added under (held until the
/// transaction ends), so that two writers never pick the same id; SQLite has one
/// writer at a time already.
fn lock_new_vehicles(conn: &dyn Sql) -> Result<()> {
    if conn.dialect() == Dialect::Postgres {
        conn.execute(
            "SELECT pg_advisory_xact_lock(?1)",
            &[Arg::Int(Some(super::pg::import::NEW_VEHICLE_LOCK))],
        )?;
    }
    Ok(())
}

/// How many positions a vehicle has.
pub fn position_count(conn: &dyn Sql, vehicle_id: i64) -> Result<i64> {
    let (sql, args) = match conn.dialect() {
        Dialect::Sqlite => {
            let (from, to) = positions::vehicle_range(vehicle_id);
            (
                "SELECT count(*) FROM positions WHERE vehicle_time >= ?1 AND vehicle_time < ?2",
                vec![Arg::Int(Some(from)), Arg::Int(Some(to))],
            )
        }
        Dialect::Postgres => (
            "SELECT count(*) FROM positions WHERE vehicle_id = ?1",
            vec![Arg::Int(Some(vehicle_id))],
        ),
    };
    Ok(conn.first(sql, &args, |r| r.int(0))?.unwrap_or(0))
}

/// Removes the vehicle with exactly this plate and everything kept of it
/// (positions, the rows detection derived from them, the generator's ground truth),
/// in the caller's transaction; how many positions went. A vehicle with positions
/// is removed only when `delete_positions` is their number (so that a typo never
/// deletes someone's week of fixes): otherwise the refusal says the number.
pub fn remove_vehicle(conn: &dyn Sql, plate: &str, delete_positions: Option<i64>) -> Result<i64> {
    // On PostgreSQL, under the locks its writers take (a server registering or
    // analysing it waits, then finds it gone); SQLite has one writer at a time.
    lock_new_vehicles(conn)?;
    let vehicle_id = conn
        .first(
            "SELECT id FROM vehicles WHERE plate = ?1",
            &[Arg::Text(plate)],
            |r| r.int(0),
        )?
        .ok_or_else(|| {
            Error::new(
                ErrorCode::NotFound,
                format!("no vehicle with the plate {plate:?}"),
            )
            .with_hint("give the plate exactly as `fleetctl vehicles list` shows it")
        })?;
    if conn.dialect() == Dialect::Postgres {
        conn.execute(
            "SELECT pg_advisory_xact_lock(?1, CAST(?2 AS integer))",
            &[
                Arg::Int(Some(i64::from(super::pg::ANALYSIS_LOCK))),
                Arg::Int(Some(vehicle_id)),
            ],
        )?;
    }
    let count = position_count(conn, vehicle_id)?;
    let quoted = crate::error::shell_word(plate);
    match delete_positions {
        _ if count == 0 => {}
        Some(n) if n == count => {}
        Some(n) => {
            return Err(Error::invalid(format!(
                "--delete-positions {n}: {plate} has {count} positions"
            ))
            .with_hint(format!("nothing was removed; to delete them: `fleetctl vehicles remove {quoted} --delete-positions {count}`")));
        }
        None => {
            return Err(Error::invalid(format!(
                "{plate} has {count} positions: removing it deletes them and every row derived from them"
            ))
            .with_hint(format!("nothing was removed; keep a copy with `fleetctl export positions --plate {quoted}`, then `fleetctl vehicles remove {quoted} --delete-positions {count}`")));
        }
    }
    delete_vehicle(conn, vehicle_id)?;
    Ok(count)
}

/// Deletes a vehicle's rows in every table (its locks taken by the caller).
fn delete_vehicle(conn: &dyn Sql, vehicle_id: i64) -> Result<()> {
    let id = [Arg::Int(Some(vehicle_id))];
    for table in [
        "visits",
        "events",
        "stops",
        "trips",
        "daily",
        "latest_fix",
        "injected_events",
    ] {
        conn.execute(&format!("DELETE FROM {table} WHERE vehicle_id = ?1"), &id)?;
    }
    match conn.dialect() {
        Dialect::Sqlite => {
            let (from, to) = positions::vehicle_range(vehicle_id);
            conn.execute(
                "DELETE FROM positions WHERE vehicle_time >= ?1 AND vehicle_time < ?2",
                &[Arg::Int(Some(from)), Arg::Int(Some(to))],
            )?
        }
        Dialect::Postgres => conn.execute("DELETE FROM positions WHERE vehicle_id = ?1", &id)?,
    };
    conn.execute("DELETE FROM vehicles WHERE id = ?1", &id)
        .map(drop)
}

/// Sets (or, with `None`, clears) the device id a vehicle's tracker pushes with.
pub fn set_device_id(conn: &dyn Sql, vehicle_id: i64, device_id: Option<&str>) -> Result<()> {
    if let Some(id) = device_id {
        let holder = vehicle_of_device(conn, id)?;
        if holder.is_some_and(|v| v != vehicle_id) {
            device_taken(conn, id)?;
        }
    }
    let device = device_id.map_or(Arg::Int(None), Arg::Text);
    conn.execute(
        "UPDATE vehicles SET device_id = ?2 WHERE id = ?1",
        &[Arg::Int(Some(vehicle_id)), device],
    )
    .map(drop)
}

/// A pushed fix without a speed gets the speed from the vehicle's fix before it
/// (distance over time), marked derived; with none within this many seconds, 0.
const DERIVE_SPEED_WITHIN_S: i64 = 300;

/// Appends one vehicle's pushed fixes inside the caller's transaction; the ones
/// that were new, as stored (a fix at an instant already stored is a duplicate, and
/// the stored one stays).
pub fn append_pushed(conn: &dyn Sql, vehicle_id: i64, fixes: &[Pushed]) -> Result<Vec<Fix>> {
    let (previous, insert) = match conn.dialect() {
        Dialect::Sqlite => (
            format!(
                "SELECT {} FROM positions WHERE vehicle_time >= ?1 AND vehicle_time < ?2 ORDER BY vehicle_time DESC LIMIT 1",
                positions::COLUMNS
            ),
            format!(
                "INSERT OR IGNORE INTO positions (vehicle_time, lat_e7, lon_e7, motion, odometer_m) \
                 VALUES ({} | ?2, ?3, ?4, ?5, ?6)",
                positions::first_key_sql("?1")
            ),
        ),
        Dialect::Postgres => (
            format!(
                "SELECT {} FROM positions WHERE vehicle_id = ?1 AND ts_ms >= ?2 AND ts_ms < ?3 ORDER BY ts_ms DESC LIMIT 1",
                positions::columns(Dialect::Postgres)
            ),
            "INSERT INTO positions (vehicle_id, ts_ms, lat_e7, lon_e7, motion, odometer_m) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO NOTHING"
                .to_string(),
        ),
    };
    let mut added = Vec::new();
    for f in fixes {
        let given = Fix {
            vehicle_id,
            ts: f.ts,
            lat: f.lat,
            lon: f.lon,
            speed_kmh: f.speed_kmh.unwrap_or(0.0),
            speed_derived: f.speed_kmh.is_none(),
            heading_deg: f.heading_deg,
            ignition: f.ignition,
            odometer_km: f.odometer_km,
        };
        // As stored: what a batch analysis of these positions will read.
        let mut fix = positions::as_stored(&given)?;
        if fix.speed_derived {
            let (from, to) = positions::key_range(vehicle_id, f.ts - DERIVE_SPEED_WITHIN_S, f.ts);
            let before = match conn.dialect() {
                Dialect::Sqlite => conn.first(
                    &previous,
                    &[Arg::Int(Some(from)), Arg::Int(Some(to))],
                    positions::from_sql_row,
                )?,
                Dialect::Postgres => conn.first(
                    &previous,
                    &[
                        Arg::Int(Some(vehicle_id)),
                        Arg::Int(Some(positions::split_key(from).1)),
                        Arg::Int(Some(positions::split_key(to).1)),
                    ],
                    positions::from_sql_row,
                )?,
            };
            fix.speed_kmh = before.map_or(0.0, |(b, _)| {
                let m = haversine_m(LatLon::new(b.lat, b.lon), LatLon::new(fix.lat, fix.lon));
                // A jump of many km in a second is a bad fix, not a speed to keep.
                (m / (fix.ts - b.ts).max(1) as f64 * 3.6).min(positions::MAX_SPEED_KMH)
            });
            fix = positions::as_stored(&fix)?;
        }
        let stored = positions::Stored::of(&fix, f.ts_ms)?;
        if let Some(pg) = conn.as_postgres() {
            super::pg::ensure_partition_of(pg, stored.instant_ms())?;
        }
        let inserted = conn.execute(
            &insert,
            &[
                Arg::Int(Some(vehicle_id)),
                Arg::Int(Some(stored.instant_ms())),
                Arg::Int(Some(stored.lat_e7)),
                Arg::Int(Some(stored.lon_e7)),
                Arg::Int(Some(stored.motion())),
                Arg::Int(stored.odometer_m),
            ],
        )?;
        if inserted > 0 {
            added.push(fix);
        }
    }
    Ok(added)
}

/// Alerts waiting for the webhook (`serve --alert-webhook`), oldest first: each an
/// event as `events` keeps it, whether it may go on, and when it was found. Queued
/// in the transaction that stores the event's rows (so an alert is queued exactly
/// when its event is stored), kept until posted or given up, so that a stop or a
/// crash loses none and the next start posts them. Made when a server with a
/// webhook starts (a fleet without one never has the table).
fn outbox_table(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Sqlite => {
            "CREATE TABLE IF NOT EXISTS alert_outbox (id INTEGER PRIMARY KEY, \
             vehicle_id INTEGER NOT NULL, kind INTEGER NOT NULL, start_ts INTEGER NOT NULL, \
             end_ts INTEGER NOT NULL, lat REAL NOT NULL, lon REAL NOT NULL, detail TEXT NOT NULL, \
             ongoing INTEGER NOT NULL, found_ts INTEGER NOT NULL)"
        }
        Dialect::Postgres => {
            "CREATE TABLE IF NOT EXISTS alert_outbox (id bigserial PRIMARY KEY, \
             vehicle_id bigint NOT NULL, kind bigint NOT NULL, start_ts bigint NOT NULL, \
             end_ts bigint NOT NULL, lat double precision NOT NULL, lon double precision NOT NULL, \
             detail text NOT NULL, ongoing bigint NOT NULL, found_ts bigint NOT NULL)"
        }
    }
}

/// Alerts queued at most: past it the oldest go (a receiver down for days must not
/// fill the disk).
pub const OUTBOX_CAP: i64 = 100_000;

/// Makes the alert outbox, if the fleet has none.
pub fn outbox_create(conn: &dyn Sql) -> Result<()> {
    conn.execute(outbox_table(conn.dialect()), &[]).map(drop)
}

/// Queues the alerts of `events`, found at `now` (UTC epoch seconds), in the
/// caller's transaction; past [`OUTBOX_CAP`] the oldest go. How many went.
pub fn outbox_queue(conn: &dyn Sql, events: &[crate::model::NewEvent], now: i64) -> Result<u64> {
    if events.is_empty() {
        return Ok(0);
    }
    for new in events {
        let e = &new.event;
        let detail = serde_json::to_string(&e.detail)
            .map_err(|err| Error::internal(format!("an event's detail: {err}")))?;
        conn.execute(
            "INSERT INTO alert_outbox (vehicle_id, kind, start_ts, end_ts, lat, lon, detail, ongoing, found_ts) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            &[
                Arg::Int(Some(e.vehicle_id)),
                Arg::Int(Some(super::event_kinds::code(e.kind))),
                Arg::Int(Some(e.start_ts)),
                Arg::Int(Some(e.end_ts)),
                Arg::Real(e.lat),
                Arg::Real(e.lon),
                Arg::Text(&detail),
                Arg::Int(Some(i64::from(new.ongoing))),
                Arg::Int(Some(now)),
            ],
        )?;
    }
    conn.execute(
        "DELETE FROM alert_outbox WHERE id <= (SELECT max(id) FROM alert_outbox) - ?1",
        &[Arg::Int(Some(OUTBOX_CAP))],
    )
}

/// The oldest `limit` alerts queued after `after_id`: (id, the alert, when found).
pub fn outbox_oldest(
    conn: &dyn Sql,
    after_id: i64,
    limit: i64,
) -> Result<Vec<(i64, crate::model::NewEvent, i64)>> {
    super::read::outbox_rows(conn, after_id, limit, false)
}

/// PostgreSQL, where several servers share the queue: claims the oldest alert no
/// other server holds, hands it to `post` (id, alert, when found) and takes it out,
/// all in one transaction, so that each alert is posted by one server (and again
/// only if that server dies while posting it). Whether there was one.
pub fn outbox_claim(
    conn: &dyn Sql,
    post: &mut dyn FnMut(i64, crate::model::NewEvent, i64),
) -> Result<bool> {
    conn.execute("BEGIN", &[])?;
    let claimed = super::read::outbox_rows(conn, 0, 1, true).and_then(|mut rows| {
        let Some((id, new, found_ts)) = rows.pop() else {
            return Ok(false);
        };
        post(id, new, found_ts);
        outbox_remove(conn, &[id])?;
        Ok(true)
    });
    match claimed {
        Ok(claimed) => conn.execute("COMMIT", &[]).map(|_| claimed),
        Err(e) => {
            let _ = conn.execute("ROLLBACK", &[]);
            Err(e)
        }
    }
}

/// Takes alerts out of the queue (posted, or given up).
pub fn outbox_remove(conn: &dyn Sql, ids: &[i64]) -> Result<()> {
    for &id in ids {
        conn.execute(
            "DELETE FROM alert_outbox WHERE id = ?1",
            &[Arg::Int(Some(id))],
        )?;
    }
    Ok(())
}

/// How many alerts are queued (0 when the fleet has no outbox).
pub fn outbox_count(conn: &dyn Sql) -> Result<i64> {
    let exists = match conn.dialect() {
        Dialect::Sqlite => conn.first(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'alert_outbox'",
            &[],
            |r| r.int(0),
        )?,
        Dialect::Postgres => conn.first(
            "SELECT 1 FROM pg_tables WHERE schemaname = 'fleetctl' AND tablename = 'alert_outbox'",
            &[],
            |r| r.int(0),
        )?,
    };
    if exists.is_none() {
        return Ok(0);
    }
    Ok(conn
        .first("SELECT count(*) FROM alert_outbox", &[], |r| r.int(0))?
        .unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fleet() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(super::super::SCHEMA_SQL).unwrap();
        conn
    }

    fn pushed(ts: i64, speed_kmh: Option<f64>) -> Pushed {
        Pushed {
            device_id: "d1".into(),
            ts,
            ts_ms: 0,
            lat: 14.6 + (ts - 1000) as f64 * 1e-4,
            lon: -90.5,
            speed_kmh,
            heading_deg: None,
            ignition: None,
            odometer_km: None,
        }
    }

    #[test]
    fn devices_belong_to_one_vehicle_and_fixes_append_once_in_any_order() {
        let conn = fleet();
        let id = add_vehicle(&conn, "P-1", Some("d1")).unwrap();
        assert_eq!(vehicle_of_device(&conn, "d1").unwrap(), Some(id));
        let taken = add_vehicle(&conn, "P-2", Some("d1"))
            .unwrap_err()
            .to_string();
        assert!(taken.contains("already belongs to P-1"), "{taken}");
        assert!(add_vehicle(&conn, "P-1", None).is_err());
        // Late, duplicated and out-of-order fixes: each instant once.
        let added = |fixes: &[Pushed]| append_pushed(&conn, id, fixes).unwrap().len();
        assert_eq!(added(&[pushed(1000, Some(30.0)), pushed(1030, None)]), 2);
        assert_eq!(added(&[pushed(1030, Some(99.0)), pushed(1015, None)]), 1);
        let rows: Vec<(i64, f64, bool)> = conn
            .prepare(&format!(
                "SELECT {} FROM positions ORDER BY vehicle_time",
                positions::COLUMNS
            ))
            .unwrap()
            .query_map([], |r| {
                let (f, _) = positions::from_row(r)?;
                Ok((f.ts, f.speed_kmh, f.speed_derived))
            })
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(
            rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            [1000, 1015, 1030]
        );
        // 1030's speed came from 1000 (0.003° north in 30 s ≈ 40 km/h) and stayed.
        assert!(rows[2].2 && (rows[2].1 - 40.0).abs() < 1.0, "{rows:?}");
        set_device_id(&conn, id, None).unwrap();
        assert_eq!(vehicle_of_device(&conn, "d1").unwrap(), None);
    }
}
