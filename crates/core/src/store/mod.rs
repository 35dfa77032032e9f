//! The store: the only module that speaks SQL.
//!
//! A fleet database is one SQLite file whose layout is `schema.sql` (embedded here).
//! This module creates it, recognises it (and refuses files that are not ours),
//! checks its schema version, and offers typed batched writes to the generator.

use crate::clock::FleetZone;
use crate::error::{Error, ErrorCode, Result};
use crate::geo::{Geofence, Shape};
use crate::model::{Fix, InjectedEvent, Vehicle, VehicleAnalysis};
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use std::path::{Path, PathBuf};

pub mod file;
pub mod import;
pub mod mbtiles;
pub mod read;

pub use file::{APPLICATION_ID, Probe, probe};

/// The schema this binary reads and writes.
pub const SCHEMA_VERSION: i64 = 6;

/// True for the schema versions `fleetctl analyze` brings up to date in place: they
/// differ only in derived columns, which analysis fills from the positions (version 5
/// added `trips.odometer_km` and `daily.odometer_rejected`; version 6 `daily.events`).
pub fn is_upgradable(schema_version: i64) -> bool {
    matches!(schema_version, 4 | 5)
}

/// Inside a write transaction on a database of an upgradable version `from`, adds
/// the columns `SCHEMA_VERSION` has and sets the version: the analysis that follows
/// in the same transaction fills them, so a failure leaves the old version whole.
/// Positions, vehicles, places and settings are not touched.
fn upgrade_derived(conn: &Connection, from: i64) -> Result<()> {
    let mut steps = String::new();
    if from < 5 {
        steps += "ALTER TABLE trips ADD COLUMN odometer_km REAL; \
                  ALTER TABLE daily ADD COLUMN odometer_rejected TEXT; ";
    }
    if from < 6 {
        steps += "ALTER TABLE daily ADD COLUMN events INTEGER NOT NULL DEFAULT 0; ";
    }
    conn.execute_batch(&format!(
        "{steps}UPDATE meta SET value = '{SCHEMA_VERSION}' WHERE key = 'schema_version';"
    ))
    .map_err(db_write_err)
}

/// The whole schema, tables then indexes, split at the `-- @indexes` line.
pub const SCHEMA_SQL: &str = include_str!("../../../../schema.sql");

fn schema_parts() -> (&'static str, &'static str) {
    SCHEMA_SQL
        .split_once("\n-- @indexes\n")
        .unwrap_or((SCHEMA_SQL, ""))
}

/// Derived indexes of older schemas that newer ones replaced (an analyze or import
/// builds the new ones and drops these).
const FORMER_DERIVED_INDEXES: &[&str] = &["visits_geofence"];

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

/// A new database being filled in one transaction, tuned for a bulk load into a
/// temporary file (no journal, no fsync: the caller renames the file into place only
/// once it is complete).
pub struct Writer {
    conn: Connection,
    path: PathBuf,
}

impl Writer {
    /// Creates the tables in the new, empty file at `path` (see `file::create_private`),
    /// marked as fleetctl's with `application_id`.
    pub fn create(path: &Path) -> Result<Writer> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(|e| Error::io(path, e))?;
        let w = Writer {
            conn,
            path: path.to_path_buf(),
        };
        // No foreign-key lookup per row (the bundled SQLite enforces them by default):
        // a new database's rows take their vehicle ids from its own vehicles table,
        // written by the same program. 16 KiB pages (set before the first table)
        // append faster than SQLite's default 4 KiB and read as fast; 64 KiB pages
        // append faster still but slow the range reports down. The README's "Where an
        // import's time goes" gives the measurements behind both.
        w.conn
            .execute_batch(
                &format!("PRAGMA page_size = 16384; PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA cache_size = -65536; PRAGMA foreign_keys = OFF; PRAGMA application_id = {APPLICATION_ID};"),
            )
            .map_err(|e| w.fail(e))?;
        w.conn
            .execute_batch(schema_parts().0)
            .map_err(|e| w.fail(e))?;
        w.conn.execute_batch("BEGIN").map_err(|e| w.fail(e))?;
        Ok(w)
    }

    fn fail(&self, e: rusqlite::Error) -> Error {
        Error::io(&self.path, e)
    }

    /// Sets one `meta` entry.
    pub fn set_meta(&self, key: &str, value: &str) -> Result<()> {
        set_meta_row(&self.conn, key, value).map_err(|e| self.fail(e))
    }

    /// Adds the demo's places.
    pub fn insert_places(&self, places: &[crate::geo::Place]) -> Result<()> {
        insert_places(&self.conn, places)
    }

    /// Adds a vehicle with its id, and the route it drives (if synthetic).
    pub fn insert_vehicle(&self, v: &Vehicle, route: Option<&str>) -> Result<()> {
        self.conn
            .prepare_cached("INSERT INTO vehicles (id, plate, kind, driver, active, route) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
            .and_then(|mut st| st.execute(params![v.id, v.plate, v.kind, v.driver, v.active, route]))
            .map(drop)
            .map_err(|e| self.fail(e))
    }

    /// Adds a geofence.
    pub fn insert_geofence(&self, g: &crate::geo::atlas::GeofenceDef) -> Result<()> {
        insert_geofence_row(&self.conn, g).map_err(|e| self.fail(e))
    }

    /// Appends fixes (whole seconds).
    pub fn insert_fixes(&self, fixes: &[Fix]) -> Result<()> {
        append_fixes(&self.conn, fixes.iter().map(|f| (f, 0))).map_err(|e| self.fail(e))
    }

    /// Records one planted anomaly.
    pub fn insert_injected(&self, e: &InjectedEvent) -> Result<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO injected_events (vehicle_id, kind, start_ts, end_ts, detail) VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .and_then(|mut st| st.execute(params![e.vehicle_id, e.kind.as_str(), e.start_ts, e.end_ts, e.detail.to_string()]))
            .map(drop)
            .map_err(|e| self.fail(e))
    }

    /// The connection, for detection to run inside the same transaction.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// Deletes every vehicle and position (an import into this new file that must
    /// start again: without a journal, nothing can be rolled back).
    pub fn clear_vehicles_and_positions(&self) -> Result<()> {
        self.conn
            .execute_batch("DELETE FROM positions; DELETE FROM vehicles;")
            .map_err(|e| self.fail(e))
    }

    /// Builds the position indexes (before detection reads the positions back).
    pub fn build_indexes(&self) -> Result<()> {
        self.conn
            .execute_batch(schema_parts().1)
            .map_err(|e| self.fail(e))
    }

    /// Commits and closes the file.
    pub fn finish(self) -> Result<()> {
        self.conn
            .execute_batch("COMMIT")
            .map_err(|e| self.fail(e))?;
        let path = self.path.clone();
        self.conn.close().map_err(|(_, e)| Error::io(&path, e))?;
        // Written without a journal or fsync for speed: make it durable before the
        // caller renames it over the previous database.
        std::fs::File::open(&path)
            .and_then(|f| f.sync_all())
            .map_err(|e| Error::io(&path, e))
    }
}

/// Sets (or, with `None`, clears) a vehicle's own speed limit, km/h.
pub fn set_vehicle_speed_limit(
    conn: &Connection,
    vehicle_id: i64,
    limit_kmh: Option<f64>,
) -> Result<()> {
    conn.prepare_cached("UPDATE vehicles SET speed_limit_kmh = ?2 WHERE id = ?1")
        .and_then(|mut st| st.execute(params![vehicle_id, limit_kmh]))
        .map(drop)
        .map_err(db_write_err)
}

/// Fixes written by one multi-row `INSERT`: SQLite's cost per statement (reset,
/// step, the b-tree seek) is paid once per batch, not once per row, which makes a
/// bulk append about twice as fast.
const FIXES_PER_INSERT: usize = 100;

/// Appends fixes, each with its milliseconds past the second, in batches of
/// [`FIXES_PER_INSERT`] rows (the few left over one by one).
pub(crate) fn append_fixes<'f>(
    conn: &Connection,
    fixes: impl Iterator<Item = (&'f Fix, i64)>,
) -> rusqlite::Result<()> {
    const COLUMNS: usize = 10;
    let sql = |rows: usize| {
        let one = format!("({})", ["?"; COLUMNS].join(","));
        format!(
            "INSERT INTO positions (vehicle_id, ts, ts_ms, lat, lon, speed_kmh, speed_derived, heading_deg, ignition, odometer_km) VALUES {}",
            vec![one; rows].join(",")
        )
    };
    let bind = |st: &mut rusqlite::Statement, rows: &[(&Fix, i64)]| -> rusqlite::Result<()> {
        for (row, (f, ms)) in rows.iter().enumerate() {
            let at = row * COLUMNS;
            st.raw_bind_parameter(at + 1, f.vehicle_id)?;
            st.raw_bind_parameter(at + 2, f.ts)?;
            st.raw_bind_parameter(at + 3, ms)?;
            st.raw_bind_parameter(at + 4, f.lat)?;
            st.raw_bind_parameter(at + 5, f.lon)?;
            st.raw_bind_parameter(at + 6, f.speed_kmh)?;
            st.raw_bind_parameter(at + 7, f.speed_derived)?;
            st.raw_bind_parameter(at + 8, f.heading_deg)?;
            st.raw_bind_parameter(at + 9, f.ignition)?;
            st.raw_bind_parameter(at + 10, f.odometer_km)?;
        }
        st.raw_execute().map(drop)
    };
    // Full batches through one statement (every parameter bound again each time),
    // then the last rows one statement each.
    let mut full: Option<rusqlite::CachedStatement> = None;
    let mut batch: Vec<(&Fix, i64)> = Vec::with_capacity(FIXES_PER_INSERT);
    for fix in fixes {
        batch.push(fix);
        if batch.len() == FIXES_PER_INSERT {
            let st = match full.as_mut() {
                Some(st) => st,
                None => full.insert(conn.prepare_cached(&sql(FIXES_PER_INSERT))?),
            };
            bind(st, &batch)?;
            batch.clear();
        }
    }
    if !batch.is_empty() {
        let mut single = conn.prepare_cached(&sql(1))?;
        batch.chunks(1).try_for_each(|row| bind(&mut single, row))?;
    }
    Ok(())
}

/// Builds a new database at `path` and puts it in place only once `build` has
/// filled it: the file is written under a temporary name beside the target (a
/// killed run leaves the target as it was) and installed the way `file::Target`
/// says (never over a file that is not a fleetctl database; over one only with
/// `force`).
pub fn build_new<T>(
    path: &Path,
    force: bool,
    build: impl FnOnce(&Writer) -> Result<T>,
) -> Result<T> {
    let target = file::Target::check(path, force)?;
    let dir = target.folder();
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    let file_name = target
        .file
        .file_name()
        .ok_or_else(|| Error::invalid(format!("{} is not a file path", path.display())))?;
    let prefix = format!(".{}.tmp-", file_name.to_string_lossy());
    crate::scratch::remove_abandoned(&dir, &prefix);
    let tmp = dir.join(format!("{prefix}{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let mut guard = TempFile(Some(tmp.clone()));
    file::create_private(&tmp)?;
    let writer = Writer::create(&tmp)?;
    let out = build(&writer)?;
    writer.finish()?;
    target.install(&tmp)?;
    guard.0 = None;
    Ok(out)
}

/// Removes the temporary file unless the build completed.
struct TempFile(Option<PathBuf>);

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Opens a fleet database read-only, checking that it is one and of our schema.
pub fn open_read_only(path: &Path) -> Result<Connection> {
    let hint = "run `fleetctl generate` to create the demo database, or pass --db PATH";
    match probe(path) {
        Ok(Probe::Fleet { schema_version }) if schema_version == SCHEMA_VERSION => {}
        Ok(Probe::Fleet { schema_version }) => {
            let hint = if is_upgradable(schema_version) {
                format!(
                    "run `fleetctl --db {} analyze` once to bring it up to date (positions are kept)",
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
    if old {
        // Another fleetctl may have upgraded it while this one waited for the lock.
        let version = read_meta(&tx, "schema_version")?.and_then(|v| v.trim().parse::<i64>().ok());
        if let Some(from) = version.filter(|&v| is_upgradable(v)) {
            upgrade_derived(&tx, from)?;
        }
    }
    let out = f(&tx)?;
    tx.commit().map_err(|e| Error::io(path, e))?;
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
pub fn read_meta(conn: &Connection, key: &str) -> Result<Option<String>> {
    // Debug builds only: lets the tests prove that a failed read is an error, never
    // a silent default (`FLEETCTL_TEST_FAIL_META_READ=KEY`).
    #[cfg(debug_assertions)]
    if std::env::var("FLEETCTL_TEST_FAIL_META_READ").is_ok_and(|k| k == key) {
        return Err(Error::new(
            ErrorCode::DbUnavailable,
            format!("database read failed: meta.{key} (injected by the test)"),
        ));
    }
    conn.prepare_cached("SELECT value FROM meta WHERE key = ?1")
        .and_then(|mut st| st.query_row([key], |r| r.get(0)).optional())
        .map_err(db_err)
}

/// The fleet's time zone from `meta.time_zone` (America/Guatemala when absent).
pub fn read_zone(conn: &Connection) -> Result<FleetZone> {
    match read_meta(conn, "time_zone")? {
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
pub fn read_geofences(conn: &Connection) -> Result<Vec<Geofence>> {
    let mut st = conn
        .prepare_cached(
            "SELECT id, name, kind, wkt, radius_m, speed_limit_kmh FROM geofences ORDER BY id",
        )
        .map_err(db_err)?;
    let rows = st
        .query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get(4)?,
                r.get(5)?,
            ))
        })
        .map_err(db_err)?;
    let mut out = Vec::new();
    for row in rows {
        let (id, name, kind, wkt, radius_m, speed_limit_kmh) = row.map_err(db_err)?;
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

/// A fix's columns, in the order `fix_from_row` reads them (positions and
/// latest_fix share them).
pub(crate) const FIX_COLUMNS: &str =
    "vehicle_id, ts, lat, lon, speed_kmh, speed_derived, heading_deg, ignition, odometer_km";

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
pub fn read_places(conn: &Connection) -> Result<Vec<crate::geo::Place>> {
    let mut st = conn
        .prepare_cached("SELECT name, kind, lat, lon FROM places ORDER BY id")
        .map_err(db_err)?;
    st.query_map([], |r| {
        Ok(crate::geo::Place {
            name: r.get(0)?,
            kind: r.get(1)?,
            lat: r.get(2)?,
            lon: r.get(3)?,
        })
    })
    .and_then(|rows| rows.collect())
    .map_err(db_err)
}

/// Adds places (inside the caller's transaction).
pub fn insert_places(conn: &Connection, places: &[crate::geo::Place]) -> Result<()> {
    let mut st = conn
        .prepare_cached("INSERT INTO places (name, kind, lat, lon) VALUES (?1, ?2, ?3, ?4)")
        .map_err(db_write_err)?;
    for p in places {
        st.execute(params![p.name, p.kind, p.lat, p.lon])
            .map_err(db_write_err)?;
    }
    Ok(())
}

/// Removes every place (`None`) or those with this name; how many went.
pub fn remove_places(conn: &Connection, name: Option<&str>) -> Result<usize> {
    match name {
        None => conn.execute("DELETE FROM places", []),
        Some(n) => conn.execute("DELETE FROM places WHERE name = ?1", [n]),
    }
    .map_err(db_write_err)
}

/// Adds a geofence (inside the caller's transaction); an existing name is an error.
pub fn insert_geofence(conn: &Connection, g: &crate::geo::atlas::GeofenceDef) -> Result<()> {
    let taken: bool = conn
        .query_row(
            "SELECT COUNT(*) FROM geofences WHERE name = ?1",
            [&g.name],
            |r| r.get::<_, i64>(0),
        )
        .map_err(db_err)?
        > 0;
    if taken {
        return Err(
            Error::invalid(format!("a geofence named {:?} already exists", g.name)).with_hint(
                "remove it first (`fleetctl geofences remove NAME`), or rename the new one",
            ),
        );
    }
    insert_geofence_row(conn, g).map_err(db_write_err)
}

/// The one insert of a geofence row, every column (the generator's copy once
/// dropped the speed limit).
fn insert_geofence_row(
    conn: &Connection,
    g: &crate::geo::atlas::GeofenceDef,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO geofences (name, kind, wkt, radius_m, speed_limit_kmh) VALUES (?1, ?2, ?3, ?4, ?5)",
    )
    .and_then(|mut st| st.execute(params![g.name, g.kind, g.wkt, g.radius_m, g.speed_limit_kmh]))
    .map(drop)
}

/// Removes the geofence with this name (and its visits); how many went.
pub fn remove_geofence(conn: &Connection, name: &str) -> Result<usize> {
    conn.execute(
        "DELETE FROM visits WHERE geofence_id IN (SELECT id FROM geofences WHERE name = ?1)",
        [name],
    )
    .map_err(db_write_err)?;
    conn.execute("DELETE FROM geofences WHERE name = ?1", [name])
        .map_err(db_write_err)
}

/// One vehicle's fixes in time order.
pub fn vehicle_fixes(conn: &Connection, vehicle_id: i64) -> Result<Vec<Fix>> {
    let mut st = conn
        .prepare_cached(&format!(
            "SELECT {FIX_COLUMNS} FROM positions WHERE vehicle_id = ?1 ORDER BY ts, ts_ms"
        ))
        .map_err(db_err)?;
    st.query_map([vehicle_id], fix_from_row)
        .and_then(|rows| rows.collect())
        .map_err(db_err)
}

/// Sets one `meta` entry inside the caller's transaction.
pub fn write_meta(conn: &Connection, key: &str, value: &str) -> Result<()> {
    set_meta_row(conn, key, value).map_err(db_write_err)
}

/// The one write of a `meta` entry.
fn set_meta_row(conn: &Connection, key: &str, value: &str) -> rusqlite::Result<()> {
    conn.prepare_cached("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)")
        .and_then(|mut st| st.execute(params![key, value]))
        .map(drop)
}

/// Calls `f` with each vehicle's fixes in time order, one vehicle at a time.
pub fn for_each_vehicle_fixes(
    conn: &Connection,
    mut f: impl FnMut(&[Fix]) -> Result<()>,
) -> Result<()> {
    let mut st = conn
        .prepare(&format!(
            "SELECT {FIX_COLUMNS} FROM positions ORDER BY vehicle_id, ts, ts_ms"
        ))
        .map_err(db_err)?;
    let mut rows = st.query([]).map_err(db_err)?;
    let mut batch: Vec<Fix> = Vec::new();
    while let Some(row) = rows.next().map_err(db_err)? {
        let fix = fix_from_row(row).map_err(db_err)?;
        if batch.last().is_some_and(|b| b.vehicle_id != fix.vehicle_id) {
            f(&batch)?;
            batch.clear();
        }
        batch.push(fix);
    }
    if !batch.is_empty() {
        f(&batch)?;
    }
    Ok(())
}

/// Replaces the derived tables, vehicle by vehicle, inside the caller's transaction.
pub struct DerivedWriter<'c> {
    conn: &'c Connection,
}

impl<'c> DerivedWriter<'c> {
    /// Empties the derived tables of these vehicles only (an import re-analyses
    /// the vehicles it touched).
    pub fn for_vehicles(conn: &'c Connection, vehicle_ids: &[i64]) -> Result<DerivedWriter<'c>> {
        for table in ["stops", "trips", "events", "latest_fix", "visits", "daily"] {
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
            "INSERT INTO trips (vehicle_id, start_ts, end_ts, distance_km, max_speed_kmh, start_lat, start_lon, end_lat, end_lon, gap_km, moving_s, idle_s, odometer_km) \
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
            t.start_lat,
            t.start_lon,
            t.end_lat,
            t.end_lon,
            t.gap_km,
            t.moving_s,
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
            e.kind.as_str(),
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
            d.moving_min,
            d.idle_min,
            d.parked_min,
            d.trips,
            d.stops,
            d.max_speed_kmh,
            d.avg_moving_speed_kmh,
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
                "visits_vehicle",
                "visits_geofence_time",
                "visits_geofence_vehicle",
                "daily_date"
            ]
        );
    }
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
        let w = super::Writer::create(&path).unwrap();
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

#[cfg(test)]
mod writer_tests {
    use super::*;

    /// The generator's writer and `geofences import` store a geofence alike: one of
    /// the two once dropped the speed limit.
    #[test]
    fn a_geofence_keeps_its_speed_limit_whichever_way_it_is_written() {
        let dir = std::env::temp_dir().join(format!("fleetctl-writer-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let school = |name: &str| crate::geo::atlas::GeofenceDef {
            name: name.to_string(),
            kind: "zone".to_string(),
            wkt: "POINT (-90.5 14.6)".to_string(),
            radius_m: Some(150.0),
            speed_limit_kmh: Some(30.0),
        };
        let w = Writer::create(&dir.join("fleet.db")).unwrap();
        w.insert_geofence(&school("Escuela A")).unwrap();
        insert_geofence(w.connection(), &school("Escuela B")).unwrap();
        let limits: Vec<(String, Option<f64>, Option<f64>)> = w
            .connection()
            .prepare("SELECT name, speed_limit_kmh, radius_m FROM geofences ORDER BY name")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(
            limits,
            [
                ("Escuela A".to_string(), Some(30.0), Some(150.0)),
                ("Escuela B".to_string(), Some(30.0), Some(150.0)),
            ]
        );
        drop(w);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
