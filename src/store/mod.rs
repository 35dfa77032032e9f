//! The store: the only module that speaks SQL.
//!
//! A fleet database is one SQLite file whose layout is `schema.sql` (embedded here).
//! This module creates it, recognises it (and refuses files that are not ours),
//! checks its schema version, and offers typed batched writes to the generator.

use crate::error::{Error, ErrorCode, Result};
use crate::model::{Fix, Geofence, InjectedEvent, Vehicle};
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use std::path::{Path, PathBuf};

/// The schema this binary reads and writes.
pub const SCHEMA_VERSION: i64 = 1;

/// The whole schema, tables then indexes, split at the `-- @indexes` line.
pub const SCHEMA_SQL: &str = include_str!("../../schema.sql");

fn schema_parts() -> (&'static str, &'static str) {
    SCHEMA_SQL
        .split_once("-- @indexes")
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

/// What is at a path, as far as fleetctl is concerned.
#[derive(Debug, Clone, PartialEq)]
pub enum Probe {
    /// Nothing there.
    Missing,
    /// A fleetctl database of the given schema version.
    Fleet {
        /// `meta.schema_version`.
        schema_version: i64,
    },
    /// Something else: another SQLite database, or not SQLite at all.
    NotFleet,
}

/// Looks at `path` without changing it.
pub fn probe(path: &Path) -> Result<Probe> {
    let mut header = [0u8; 16];
    match std::fs::File::open(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Probe::Missing),
        Err(e) => return Err(Error::io(path, e)),
        Ok(mut f) => {
            use std::io::Read;
            if path.is_dir() {
                return Ok(Probe::NotFleet);
            }
            let n = f.read(&mut header).map_err(|e| Error::io(path, e))?;
            if n < 16 || &header != b"SQLite format 3\0" {
                return Ok(Probe::NotFleet);
            }
        }
    }
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| Error::io(path, e))?;
    let version: Option<String> = conn
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .optional()
        .unwrap_or(None);
    Ok(match version.and_then(|v| v.parse().ok()) {
        Some(schema_version) => Probe::Fleet { schema_version },
        None => Probe::NotFleet,
    })
}

/// A new database being filled in one transaction, tuned for a bulk load into a
/// temporary file (no journal, no fsync: the caller renames the file into place only
/// once it is complete).
pub struct Writer {
    conn: Connection,
    path: PathBuf,
}

impl Writer {
    /// Creates the tables in a new file at `path` (which must not exist).
    pub fn create(path: &Path) -> Result<Writer> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(|e| Error::io(path, e))?;
        let w = Writer {
            conn,
            path: path.to_path_buf(),
        };
        w.conn
            .execute_batch(
                "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA cache_size = -65536;",
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
        self.conn
            .prepare_cached("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)")
            .and_then(|mut st| st.execute(params![key, value]))
            .map(drop)
            .map_err(|e| self.fail(e))
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
    pub fn insert_geofence(&self, g: &Geofence) -> Result<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO geofences (name, kind, wkt, radius_m) VALUES (?1, ?2, ?3, ?4)",
            )
            .and_then(|mut st| st.execute(params![g.name, g.kind, g.wkt, g.radius_m]))
            .map(drop)
            .map_err(|e| self.fail(e))
    }

    /// Appends fixes.
    pub fn insert_fixes(&self, fixes: &[Fix]) -> Result<()> {
        let mut st = self
            .conn
            .prepare_cached(
                "INSERT INTO positions (vehicle_id, ts, lat, lon, speed_kmh, heading_deg, ignition, odometer_km) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )
            .map_err(|e| self.fail(e))?;
        for f in fixes {
            st.execute(params![
                f.vehicle_id,
                f.ts,
                f.lat,
                f.lon,
                f.speed_kmh,
                f.heading_deg,
                f.ignition,
                f.odometer_km
            ])
            .map_err(|e| self.fail(e))?;
        }
        Ok(())
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

    /// Builds the indexes, commits and closes the file.
    pub fn finish(self) -> Result<()> {
        self.conn
            .execute_batch(schema_parts().1)
            .map_err(|e| self.fail(e))?;
        self.conn
            .execute_batch("COMMIT")
            .map_err(|e| self.fail(e))?;
        self.conn.close().map_err(|(_, e)| Error::io(&self.path, e))
    }
}

/// Opens a fleet database read-only, checking that it is one and of our schema.
pub fn open_read_only(path: &Path) -> Result<Connection> {
    let hint = "run `fleetctl generate` to create the demo database, or pass --db PATH";
    match probe(path) {
        Ok(Probe::Fleet { schema_version }) if schema_version == SCHEMA_VERSION => {}
        Ok(Probe::Fleet { schema_version }) => {
            return Err(Error::new(
                ErrorCode::DbSchema,
                format!("{} has schema version {schema_version}; this fleetctl reads version {SCHEMA_VERSION}", path.display()),
            )
            .with_hint("regenerate it with `fleetctl generate --force`"));
        }
        Ok(Probe::Missing) => {
            return Err(Error::new(
                ErrorCode::DbUnavailable,
                format!("no database at {}", path.display()),
            )
            .with_hint(hint));
        }
        Ok(Probe::NotFleet) => {
            return Err(Error::new(
                ErrorCode::DbUnavailable,
                format!("{} is not a fleetctl database", path.display()),
            )
            .with_hint(hint));
        }
        Err(e) => return Err(Error::new(ErrorCode::DbUnavailable, e.message).with_hint(hint)),
    }
    Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| {
        Error::new(ErrorCode::DbUnavailable, format!("{}: {e}", path.display())).with_hint(hint)
    })
}
