//! The store: the only module that speaks SQL.
//!
//! A fleet database is one SQLite file whose layout is `schema.sql` (embedded here).
//! This module creates it, recognises it (and refuses files that are not ours),
//! checks its schema version, and offers typed batched writes to the generator.
//! Beside this file (opening, transactions, the schema and its upgrades, settings
//! and edits): `writer.rs` (a new database's bulk writer), `derived.rs` (detection's
//! tables), `read.rs` (the reports' reads), `import.rs` (an import's appends),
//! `file.rs` (the file itself) and `mbtiles.rs` (tiles).

use crate::clock::FleetZone;
use crate::error::{Error, ErrorCode, Result};
use crate::geo::{Geofence, Shape};
use crate::model::Fix;
use rusqlite::{Connection, OpenFlags};
use sql::Arg;
use std::path::{Path, PathBuf};

mod derived;
mod event_kinds;
pub mod file;
pub mod import;
pub mod live;
pub mod location;
pub mod mbtiles;
pub mod pg;
pub mod positions;
pub mod read;
pub mod sql;
pub mod tables;
mod writer;

pub use derived::{DerivedWriter, WrittenRows, delete_rows, write_rows};
pub use location::Location;
pub(crate) use writer::append_fixes;
pub use writer::{BULK_PAGE_SIZE, LIVE_PAGE_SIZE, Writer, build_new};

pub use file::{APPLICATION_ID, Probe, probe};

/// The schema this binary reads and writes.
pub const SCHEMA_VERSION: i64 = 9;

/// True for the schema versions `fleetctl migrate` (or `analyze`) brings up to date
/// in place: version 5 added `trips.odometer_km` and `daily.odometer_rejected`, 6
/// `daily.events`, 7 `vehicles.device_id` (derived columns, which the analysis that
/// follows fills, or columns that start empty), 8 keeps positions in fixed-point
/// integers and 9 packs speed, heading and ignition into one (every row rewritten,
/// none lost: `rewrite_positions`).
pub fn is_upgradable(schema_version: i64) -> bool {
    matches!(schema_version, 4..=8)
}

/// Inside a write transaction on a database of an upgradable version `from`, brings
/// the layout to `SCHEMA_VERSION` and sets the version: the analysis that follows in
/// the same transaction fills the new derived columns, so a failure leaves the old
/// version whole. Places, settings and the vehicles' rows are not touched.
fn upgrade_schema(conn: &Connection, from: i64) -> Result<()> {
    let mut steps = String::new();
    if from < 5 {
        steps += "ALTER TABLE trips ADD COLUMN odometer_km REAL; \
                  ALTER TABLE daily ADD COLUMN odometer_rejected TEXT; ";
    }
    if from < 6 {
        steps += "ALTER TABLE daily ADD COLUMN events INTEGER NOT NULL DEFAULT 0; ";
    }
    if from < 7 {
        steps += "ALTER TABLE vehicles ADD COLUMN device_id TEXT; \
                  CREATE UNIQUE INDEX vehicles_device_id ON vehicles (device_id); ";
    }
    steps += &revision_statements(conn)?;
    conn.execute_batch(&steps).map_err(db_write_err)?;
    if from < 9 {
        rewrite_positions(conn, from)?;
        remake_trips_and_events(conn)?;
    }
    conn.execute(
        "UPDATE meta SET value = ?1 WHERE key = 'schema_version'",
        [SCHEMA_VERSION.to_string()],
    )
    .map(drop)
    .map_err(db_write_err)
}

/// What a server reads instead of the small tables, for a file made before it
/// existed: schema.sql's `revision` table and the triggers that move it (the block
/// from `CREATE TABLE revision (` to a blank line) unless `conn` has them, and the
/// newest fix's index.
fn revision_statements(conn: &Connection) -> Result<String> {
    let index = "CREATE INDEX IF NOT EXISTS latest_fix_ts ON latest_fix (ts);\n";
    if read::has_revision(conn)? {
        return Ok(index.to_string());
    }
    let head = "CREATE TABLE revision (";
    SCHEMA_SQL
        .split_once(head)
        .and_then(|(_, rest)| rest.split_once("\n\n"))
        .map(|(body, _)| format!("{head}{body}\n{index}"))
        .ok_or_else(|| Error::internal(format!("schema.sql has no {head:?} block")))
}

/// Adds to a file of this schema version made before they existed the `revision`
/// counter, its triggers and the newest fix's index (`fleetctl migrate`), so that a
/// server reads the small tables again only when they changed; `true` when it did.
pub fn add_revision(path: &Path) -> Result<bool> {
    write_transaction(path, false, |tx| {
        if read::has_revision(tx)? {
            return Ok(false);
        }
        tx.execute_batch(&revision_statements(tx)?)
            .map_err(db_write_err)?;
        Ok(true)
    })
}

/// The statement of schema.sql that begins with `head`, through its `;`.
fn schema_statement(head: &str) -> Result<String> {
    SCHEMA_SQL
        .split_once(head)
        .and_then(|(_, rest)| rest.split_once(";\n"))
        .map(|(body, _)| format!("{head}{body};"))
        .ok_or_else(|| Error::internal(format!("schema.sql has no {head:?}")))
}

/// Trips and events made again in version 9's layout (empty: the analysis that
/// follows the upgrade writes them): trips' ends in fixed-point coordinates, events'
/// kinds as codes, named in the new `event_kinds` table.
fn remake_trips_and_events(conn: &Connection) -> Result<()> {
    let mut steps = String::from("DROP TABLE trips; DROP TABLE events; ");
    for head in [
        "CREATE TABLE trips (",
        "CREATE INDEX trips_vehicle_ts ",
        "CREATE INDEX trips_ts ",
        "CREATE TABLE event_kinds (",
        "INSERT INTO event_kinds ",
        "CREATE TABLE events (",
        "CREATE INDEX events_ts ",
        "CREATE INDEX events_vehicle_ts ",
        "CREATE INDEX events_kind_ts ",
    ] {
        steps += &schema_statement(head)?;
        steps += " ";
    }
    conn.execute_batch(&steps).map_err(db_write_err)
}

/// Positions as version `from` kept them rewritten in this version's layout, in key
/// order, and the old table dropped once the counts agree. Versions 3 to 7 kept
/// floating-point columns under a `(vehicle_id, ts, ts_ms)` key; 8 the key of today
/// with speed, heading, ignition and the derived-speed flag in columns of their own.
fn rewrite_positions(conn: &Connection, from: i64) -> Result<()> {
    let drop_view = if from == 8 { "DROP VIEW fixes;" } else { "" };
    conn.execute_batch(&format!(
        "{drop_view} ALTER TABLE positions RENAME TO positions_before; {} {}",
        schema_statement("CREATE TABLE positions (")?,
        schema_statement("CREATE VIEW fixes AS")?
    ))
    .map_err(db_write_err)?;
    let read_old = if from == 8 {
        "SELECT vehicle_time >> 42, (vehicle_time & 4398046511103) / 1000, lat_e7 / 1e7, \
         lon_e7 / 1e7, speed_kmh_e2 / 1e2, speed_derived, heading_deg_e1 / 1e1, ignition, \
         odometer_m / 1e3, (vehicle_time & 4398046511103) % 1000 \
         FROM positions_before ORDER BY vehicle_time"
    } else {
        "SELECT vehicle_id, ts, lat, lon, speed_kmh, speed_derived, heading_deg, ignition, odometer_km, ts_ms \
         FROM positions_before ORDER BY vehicle_id, ts, ts_ms"
    };
    let mut old = conn.prepare(read_old).map_err(db_err)?;
    let mut rows = old.query([]).map_err(db_err)?;
    let mut chunk: Vec<(Fix, i64)> = Vec::with_capacity(REWRITE_CHUNK);
    let mut read_all = false;
    while !read_all {
        match rows.next().map_err(db_err)? {
            Some(r) => chunk.push((fix_from_row(r).map_err(db_err)?, r.get(9).map_err(db_err)?)),
            None => read_all = true,
        }
        if chunk.len() == REWRITE_CHUNK || read_all {
            append_fixes(conn, chunk.iter().map(|(f, ms)| (f, *ms)))?;
            chunk.clear();
        }
    }
    drop(rows);
    drop(old);
    let count = |table: &str| -> Result<i64> {
        conn.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
            .map_err(db_err)
    };
    let (before, after) = (count("positions_before")?, count("positions")?);
    if before != after {
        return Err(Error::internal(format!(
            "rewriting the positions kept {after} of {before} rows; nothing was changed"
        )));
    }
    conn.execute_batch("DROP TABLE positions_before")
        .map_err(db_write_err)
}

/// Rows a positions rewrite holds at once.
const REWRITE_CHUNK: usize = 65_536;

/// The whole schema, tables then indexes, split at the `-- @indexes` line.
pub const SCHEMA_SQL: &str = include_str!("../../../../schema.sql");

fn schema_parts() -> (&'static str, &'static str) {
    SCHEMA_SQL
        .split_once("\n-- @indexes\n")
        .unwrap_or((SCHEMA_SQL, ""))
}

/// Where the database lives when neither `--db` nor `FLEETCTL_DB` says: `fleet.db` in
/// a `fleetctl` folder of the user's data directory.
pub fn default_db_path() -> PathBuf {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let data_dir = if cfg!(windows) {
        env("APPDATA")
    } else if cfg!(target_os = "macos") {
        env("HOME").map(|h| h.join("Library/Application Support"))
    } else {
        env("XDG_DATA_HOME").or_else(|| env("HOME").map(|h| h.join(".local/share")))
    };
    data_dir
        .unwrap_or_else(|| PathBuf::from("."))
        .join("fleetctl")
        .join("fleet.db")
}

/// Sets (or, with `None`, clears) a vehicle's own speed limit, km/h.
pub fn set_vehicle_speed_limit(
    conn: &dyn sql::Sql,
    vehicle_id: i64,
    limit_kmh: Option<f64>,
) -> Result<()> {
    let limit = limit_kmh.map_or(Arg::Int(None), Arg::Real);
    conn.execute(
        "UPDATE vehicles SET speed_limit_kmh = ?2 WHERE id = ?1",
        &[Arg::Int(Some(vehicle_id)), limit],
    )
    .map(drop)
}

/// The next id of a small table whose ids PostgreSQL does not number itself
/// (SQLite's `INTEGER PRIMARY KEY` would; the same expression serves both).
pub(crate) fn next_id(table: &str) -> String {
    format!("(SELECT COALESCE(MAX(id), 0) + 1 FROM {table})")
}

/// Runs `f` in one write transaction on the fleet at `db`: committed when `f`
/// succeeds, rolled back when it fails.
pub fn with_write<T>(db: &Location, f: impl FnOnce(&dyn sql::Sql) -> Result<T>) -> Result<T> {
    match db {
        Location::Postgres(target) => {
            let conn = pg::open_reader(target)?;
            pg::in_transaction(&conn, || f(&conn))
        }
        Location::File(path) => with_write_transaction(path, |conn| f(conn)),
    }
}

/// Opens the fleet at `db` for reading.
pub fn open_for_reading(db: &Location) -> Result<Box<dyn sql::Sql + Send>> {
    Ok(match db {
        Location::Postgres(target) => Box::new(pg::open_reader(target)?),
        Location::File(path) => Box::new(open_read_only(path)?),
    })
}

/// Opens a fleet database read-only, checking that it is one and of our schema.
pub fn open_read_only(path: &Path) -> Result<Connection> {
    let hint = "run `fleetctl generate` to create the demo database, or pass --db PATH";
    match probe(path) {
        Ok(Probe::Fleet { schema_version }) if schema_version == SCHEMA_VERSION => {}
        Ok(Probe::Fleet { schema_version }) => {
            let hint = if is_upgradable(schema_version) {
                format!(
                    "run `fleetctl --db {} migrate` once to bring it up to date (every position is kept)",
                    path.display()
                )
            } else {
                "regenerate it with `fleetctl generate --force`".to_string()
            };
            return Err(Error::new(
                ErrorCode::DbSchema,
                format!("{} has schema version {schema_version}; this fleetctl reads version {SCHEMA_VERSION}", path.display()),
            )
            .with_hint(hint));
        }
        Ok(Probe::Missing) => {
            return Err(Error::new(
                ErrorCode::DbUnavailable,
                format!("no database at {}", path.display()),
            )
            .with_hint(hint));
        }
        Ok(Probe::NotFleet { what }) => {
            return Err(Error::new(
                ErrorCode::DbUnavailable,
                format!(
                    "{} is not a fleetctl database: it seems to be {what}",
                    path.display()
                ),
            )
            .with_hint(hint));
        }
        Err(e) => {
            return Err(Error {
                code: ErrorCode::DbUnavailable,
                ..e
            });
        }
    }
    Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| {
        Error::new(ErrorCode::DbUnavailable, format!("{}: {e}", path.display())).with_hint(hint)
    })
}

/// Opens a fleet database for writing derived results (checked like a read).
pub fn open_read_write(path: &Path) -> Result<Connection> {
    drop(open_read_only(path)?);
    Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| Error::io(path, e))
}

/// Runs `f` inside one write transaction on the database at `path`: committed if
/// `f` succeeds, rolled back (leaving everything as it was) if it fails.
pub fn with_write_transaction<T>(
    path: &Path,
    f: impl FnOnce(&Connection) -> Result<T>,
) -> Result<T> {
    write_transaction(path, false, f)
}

/// As [`with_write_transaction`], for a full re-analysis (`fleetctl analyze`): a
/// database of the previous schema version is brought up to date first, in the same
/// transaction, so that the analysis fills the new columns or nothing changes.
pub fn with_upgrading_write_transaction<T>(
    path: &Path,
    f: impl FnOnce(&Connection) -> Result<T>,
) -> Result<T> {
    write_transaction(path, true, f)
}

fn write_transaction<T>(
    path: &Path,
    upgrade: bool,
    f: impl FnOnce(&Connection) -> Result<T>,
) -> Result<T> {
    let old = upgrade
        && matches!(probe(path), Ok(Probe::Fleet { schema_version }) if is_upgradable(schema_version));
    let mut conn = if old {
        Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| Error::io(path, e))?
    } else {
        open_read_write(path)?
    };
    // Another writer (a second `analyze`) holds the file for as long as it runs.
    let _ = conn.busy_timeout(std::time::Duration::from_secs(5));
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(|e| match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
                Error::new(
                    ErrorCode::DbUnavailable,
                    format!("{} is being written by another program", path.display()),
                )
                .with_hint("wait for the other fleetctl (analyze, generate) to finish, then run this again")
                .with_source(e)
            }
            _ => db_write_err(e),
        })?;
    let mut rewrote_positions = false;
    if old {
        // Another fleetctl may have upgraded it while this one waited for the lock.
        let version = read_meta(&*tx, "schema_version")?.and_then(|v| v.trim().parse::<i64>().ok());
        if let Some(from) = version.filter(|&v| is_upgradable(v)) {
            upgrade_schema(&tx, from)?;
            rewrote_positions = from < 9;
        }
    }
    let out = f(&tx)?;
    tx.commit().map_err(|e| Error::io(path, e))?;
    if rewrote_positions {
        // The old positions' pages are free now: give them back to the disk.
        conn.execute_batch("VACUUM").map_err(db_write_err)?;
    }
    Ok(out)
}

pub(crate) fn db_err(e: rusqlite::Error) -> Error {
    Error::new(
        ErrorCode::DbUnavailable,
        format!("database read failed: {e}"),
    )
    .with_source(e)
}

/// A failed write (a full disk, a read-only file), said as a write.
pub(crate) fn db_write_err(e: rusqlite::Error) -> Error {
    Error::new(ErrorCode::Io, format!("database write failed: {e}"))
        .with_hint("check the disk has room and the database and its folder are writable")
        .with_source(e)
}

/// Reads a `meta` value.
pub fn read_meta(conn: &dyn sql::Sql, key: &str) -> Result<Option<String>> {
    injected_meta_failure(key)?;
    conn.first(
        "SELECT value FROM meta WHERE key = ?1",
        &[sql::Arg::Text(key)],
        |r| r.text(0),
    )
}

/// The `meta` entries named in `keys` that the database has, in one read.
pub fn read_meta_entries(
    conn: &dyn sql::Sql,
    keys: &[&str],
) -> Result<std::collections::HashMap<String, String>> {
    for key in keys {
        injected_meta_failure(key)?;
    }
    let all = conn.rows("SELECT key, value FROM meta", &[], |r| {
        Ok((r.text(0)?, r.text(1)?))
    })?;
    Ok(all
        .into_iter()
        .filter(|(k, _)| keys.contains(&k.as_str()))
        .collect())
}

/// Debug builds only: lets the tests prove that a failed read is an error, never a
/// silent default (`FLEETCTL_TEST_FAIL_META_READ=KEY`).
fn injected_meta_failure(key: &str) -> Result<()> {
    #[cfg(debug_assertions)]
    if std::env::var("FLEETCTL_TEST_FAIL_META_READ").is_ok_and(|k| k == key) {
        return Err(Error::new(
            ErrorCode::DbUnavailable,
            format!("database read failed: meta.{key} (injected by the test)"),
        ));
    }
    let _ = key;
    Ok(())
}

/// The fleet's time zone from `meta.time_zone` (America/Guatemala when absent).
pub fn read_zone(conn: &dyn sql::Sql) -> Result<FleetZone> {
    zone_of(read_meta(conn, "time_zone")?)
}

/// The fleet's zone from its stored name (`meta.time_zone`), the default without one;
/// a name no longer known is a damaged database, said so.
pub fn zone_of(stored: Option<String>) -> Result<FleetZone> {
    match stored {
        None => Ok(FleetZone::default()),
        Some(name) => FleetZone::named(&name).map_err(|e| {
            Error::new(
                ErrorCode::DbSchema,
                format!("meta.time_zone {name:?} is not a known IANA time zone"),
            )
            .with_hint(e.hint.unwrap_or_default())
        }),
    }
}

/// Every geofence with its parsed shape, by id.
pub fn read_geofences(conn: &dyn sql::Sql) -> Result<Vec<Geofence>> {
    let rows = conn.rows(
        "SELECT id, name, kind, wkt, radius_m, speed_limit_kmh FROM geofences ORDER BY id",
        &[],
        |r| {
            Ok((
                r.int(0)?,
                r.text(1)?,
                r.text(2)?,
                r.text(3)?,
                r.opt_real(4)?,
                r.opt_real(5)?,
            ))
        },
    )?;
    let mut out = Vec::new();
    for (id, name, kind, wkt, radius_m, speed_limit_kmh) in rows {
        let shape = Shape::from_wkt(&wkt, radius_m).map_err(|e| {
            Error::new(
                ErrorCode::DbSchema,
                format!("geofence {name:?}: {}", e.message),
            )
        })?;
        out.push(Geofence {
            id,
            name,
            kind,
            shape,
            speed_limit_kmh,
        });
    }
    Ok(out)
}

/// A fix's columns, in the order `fix_from_row` reads them: latest_fix's.
pub(crate) const FIX_COLUMNS: tables::Names = tables::Names(&tables::LATEST_FIX, None);

fn fix_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Fix> {
    Ok(Fix {
        vehicle_id: r.get(0)?,
        ts: r.get(1)?,
        lat: r.get(2)?,
        lon: r.get(3)?,
        speed_kmh: r.get(4)?,
        speed_derived: r.get(5)?,
        heading_deg: r.get(6)?,
        ignition: r.get(7)?,
        odometer_km: r.get(8)?,
    })
}

/// The database's named places.
pub fn read_places(conn: &dyn sql::Sql) -> Result<Vec<crate::geo::Place>> {
    conn.rows(
        "SELECT name, kind, lat, lon FROM places ORDER BY id",
        &[],
        |r| {
            Ok(crate::geo::Place {
                name: r.text(0)?,
                kind: r.text(1)?,
                lat: r.real(2)?,
                lon: r.real(3)?,
            })
        },
    )
}

/// Adds places (inside the caller's transaction).
pub fn insert_places(conn: &dyn sql::Sql, places: &[crate::geo::Place]) -> Result<()> {
    let insert = format!(
        "INSERT INTO places (id, name, kind, lat, lon) VALUES ({}, ?1, ?2, ?3, ?4)",
        next_id("places")
    );
    for p in places {
        conn.execute(
            &insert,
            &[
                Arg::Text(&p.name),
                Arg::Text(&p.kind),
                Arg::Real(p.lat),
                Arg::Real(p.lon),
            ],
        )?;
    }
    Ok(())
}

/// Removes every place (`None`) or those with this name; how many went.
pub fn remove_places(conn: &dyn sql::Sql, name: Option<&str>) -> Result<usize> {
    match name {
        None => conn.execute("DELETE FROM places", &[]),
        Some(n) => conn.execute("DELETE FROM places WHERE name = ?1", &[Arg::Text(n)]),
    }
    .map(|n| n as usize)
}

/// Adds a geofence (inside the caller's transaction); an existing name is an error.
pub fn insert_geofence(conn: &dyn sql::Sql, g: &crate::geo::atlas::GeofenceDef) -> Result<()> {
    let taken = conn
        .first(
            "SELECT id FROM geofences WHERE name = ?1",
            &[Arg::Text(&g.name)],
            |_| Ok(()),
        )?
        .is_some();
    if taken {
        return Err(
            Error::invalid(format!("a geofence named {:?} already exists", g.name)).with_hint(
                "remove it first (`fleetctl geofences remove NAME`), or rename the new one",
            ),
        );
    }
    insert_geofence_row(conn, g)
}

/// The one insert of a geofence row, every column (the generator's copy once
/// dropped the speed limit); PostgreSQL keeps its area too, for the spatial index.
fn insert_geofence_row(conn: &dyn sql::Sql, g: &crate::geo::atlas::GeofenceDef) -> Result<()> {
    let opt_real = |v: Option<f64>| v.map_or(Arg::Int(None), Arg::Real);
    let insert = match conn.dialect() {
        sql::Dialect::Sqlite => {
            "INSERT INTO geofences (name, kind, wkt, radius_m, speed_limit_kmh) VALUES (?1, ?2, ?3, ?4, ?5)".to_string()
        }
        sql::Dialect::Postgres => format!(
            "INSERT INTO geofences (id, name, kind, wkt, radius_m, speed_limit_kmh, area) VALUES ({}, ?1, ?2, ?3, ?4, ?5, {})",
            next_id("geofences"),
            pg::area_of("?3", "?4")
        ),
    };
    conn.execute(
        &insert,
        &[
            Arg::Text(&g.name),
            Arg::Text(&g.kind),
            Arg::Text(&g.wkt),
            opt_real(g.radius_m),
            opt_real(g.speed_limit_kmh),
        ],
    )
    .map(drop)
}

/// Removes the geofence with this name (and its visits); how many went.
pub fn remove_geofence(conn: &dyn sql::Sql, name: &str) -> Result<usize> {
    conn.execute(
        "DELETE FROM visits WHERE geofence_id IN (SELECT id FROM geofences WHERE name = ?1)",
        &[Arg::Text(name)],
    )?;
    conn.execute("DELETE FROM geofences WHERE name = ?1", &[Arg::Text(name)])
        .map(|n| n as usize)
}

/// Reads fixes in vehicle and time order — every vehicle's, or one's — and hands
/// `f` a puller that gives the next (`None` after the last), so that a reader holds
/// as many as it chooses.
pub fn read_fixes<T>(
    conn: &Connection,
    vehicle_id: Option<i64>,
    f: impl FnOnce(&mut dyn FnMut() -> Result<Option<Fix>>) -> Result<T>,
) -> Result<T> {
    let (from, to) = vehicle_id.map_or((i64::MIN, i64::MAX), positions::vehicle_range);
    let mut st = conn
        .prepare_cached(&format!(
            "SELECT {} FROM positions WHERE vehicle_time >= ?1 AND vehicle_time < ?2 ORDER BY vehicle_time",
            positions::COLUMNS
        ))
        .map_err(db_err)?;
    let mut rows = st.query([from, to]).map_err(db_err)?;
    f(&mut || match rows.next().map_err(db_err)? {
        Some(row) => positions::from_row(row)
            .map(|(fix, _)| Some(fix))
            .map_err(db_err),
        None => Ok(None),
    })
}

/// The one write of a `meta` entry, on either backend, inside the caller's
/// transaction: added, or replaced whole.
pub fn set_meta(conn: &dyn sql::Sql, key: &str, value: &str) -> Result<()> {
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (?1, ?2) \
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        &[sql::Arg::Text(key), sql::Arg::Text(value)],
    )
    .map(drop)
}

/// A vehicle to add: its id when the caller numbers it (a generated fleet, an
/// import's vehicles chosen under a lock), else the next one.
pub struct NewVehicle<'a> {
    /// Its id, or none for the next.
    pub id: Option<i64>,
    /// Its plate.
    pub plate: &'a str,
    /// What kind of vehicle (`unknown` when the data does not say).
    pub kind: &'a str,
    /// Its driver's name (empty when unknown).
    pub driver: &'a str,
    /// In service.
    pub active: bool,
    /// The stored route it drives (a generated fleet's).
    pub route: Option<&'a str>,
    /// The device id its tracker pushes with.
    pub device_id: Option<&'a str>,
}

impl<'a> NewVehicle<'a> {
    /// A vehicle known only by its plate: kind unknown, no driver, in service.
    pub fn plate(plate: &'a str) -> NewVehicle<'a> {
        NewVehicle {
            id: None,
            plate,
            kind: "unknown",
            driver: "",
            active: true,
            route: None,
            device_id: None,
        }
    }
}

/// The one insert of a vehicle, on either backend, inside the caller's
/// transaction; its id.
pub fn insert_vehicle(conn: &dyn sql::Sql, v: &NewVehicle<'_>) -> Result<i64> {
    let active = match (v.active, conn.dialect()) {
        (true, _) => conn.truth(),
        (false, sql::Dialect::Sqlite) => "0",
        (false, sql::Dialect::Postgres) => "FALSE",
    };
    conn.first(
        &format!(
            "INSERT INTO vehicles (id, plate, kind, driver, active, route, device_id) \
             VALUES (COALESCE(?1, {}), ?2, ?3, ?4, {active}, ?5, ?6) RETURNING id",
            next_id("vehicles")
        ),
        &[
            sql::Arg::Int(v.id),
            sql::Arg::Text(v.plate),
            sql::Arg::Text(v.kind),
            sql::Arg::Text(v.driver),
            v.route.map_or(sql::Arg::Int(None), sql::Arg::Text),
            v.device_id.map_or(sql::Arg::Int(None), sql::Arg::Text),
        ],
        |r| r.int(0),
    )?
    .ok_or_else(|| Error::internal("a vehicle's insert returned no id"))
}

#[cfg(test)]
mod geofence_insert_tests {
    use crate::geo::atlas::GeofenceDef;

    #[test]
    fn both_writers_keep_a_geofences_speed_limit() {
        let dir = std::env::temp_dir().join(format!("fleetctl-geofence-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("fleet.db");
        let _ = std::fs::remove_file(&path);
        let zone = |name: &str| GeofenceDef {
            name: name.into(),
            kind: "zone".into(),
            wkt: "POINT(-90.5 14.6)".into(),
            radius_m: Some(300.0),
            speed_limit_kmh: Some(30.0),
        };
        let w = super::Writer::create(&path, super::BULK_PAGE_SIZE).unwrap();
        w.insert_geofence(&zone("School, built")).unwrap();
        super::insert_geofence(w.connection(), &zone("School, edited")).unwrap();
        let limits: Vec<Option<f64>> = super::read_geofences(w.connection())
            .unwrap()
            .iter()
            .map(|g| g.speed_limit_kmh)
            .collect();
        assert_eq!(limits, [Some(30.0), Some(30.0)]);
        drop(w);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
