//! The bulk writer of a new database (the generator's, and an import's into a new
//! file): tables created, rows appended in batches, and the finished file put in
//! place (`build_new`).

use super::*;
use crate::error::{Error, Result};
use crate::model::{Fix, InjectedEvent, Vehicle};
use rusqlite::{Connection, OpenFlags, params};
use std::path::{Path, PathBuf};

/// The page size of a database filled in bulk (generate, import): 16 KiB pages
/// append faster than SQLite's default 4 KiB and read as fast; 64 KiB pages append
/// faster still but slow the range reports down. "Where an import's time goes" in
/// docs/benchmarks.md gives the measurements behind both.
pub const BULK_PAGE_SIZE: u32 = 16384;

/// The page size of a database made to be fed live (`init`): a live commit writes
/// each page it touched whole to the journal, a vehicle's positions page and its
/// open rows' pages for a few fixes, so small pages cost less (4 KiB against 16 KiB:
/// about 22,000 against 20,300 fixes/s, "How fast" in docs/live.md).
pub const LIVE_PAGE_SIZE: u32 = 4096;

/// A new database being filled in one transaction, tuned for a bulk load into a
/// temporary file (no journal, no fsync: the caller renames the file into place only
/// once it is complete).
pub struct Writer {
    conn: Connection,
    path: PathBuf,
}

impl Writer {
    /// Creates the tables in the new, empty file at `path` (see `file::create_private`),
    /// marked as fleetctl's with `application_id`, with pages of `page_size` bytes.
    pub fn create(path: &Path, page_size: u32) -> Result<Writer> {
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
        // written by the same program. The page size is set before the first table.
        w.conn
            .execute_batch(
                &format!("PRAGMA page_size = {page_size}; PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA cache_size = -65536; PRAGMA foreign_keys = OFF; PRAGMA application_id = {APPLICATION_ID};"),
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
        super::set_meta(&self.conn, key, value)
    }

    /// Adds the demo's places.
    pub fn insert_places(&self, places: &[crate::geo::Place]) -> Result<()> {
        insert_places(&self.conn, places)
    }

    /// Adds a vehicle with its id, and the route it drives (if synthetic).
    pub fn insert_vehicle(&self, v: &Vehicle, route: Option<&str>) -> Result<()> {
        let new = super::NewVehicle {
            id: Some(v.id),
            plate: &v.plate,
            kind: &v.kind,
            driver: &v.driver,
            active: v.active,
            route,
            device_id: None,
        };
        super::insert_vehicle(&self.conn, &new).map(drop)
    }

    /// Adds a geofence.
    pub fn insert_geofence(&self, g: &crate::geo::atlas::GeofenceDef) -> Result<()> {
        insert_geofence_row(&self.conn, g)
    }

    /// Appends fixes (whole seconds).
    pub fn insert_fixes(&self, fixes: &[Fix]) -> Result<()> {
        append_fixes(&self.conn, fixes.iter().map(|f| (f, 0)))
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

/// Fixes written by one multi-row `INSERT`: SQLite's cost per statement (reset,
/// step, the b-tree seek) is paid once per batch, not once per row, which makes a
/// bulk append about twice as fast.
const FIXES_PER_INSERT: usize = 100;

/// Appends fixes, each with its milliseconds past the second, in batches of
/// [`FIXES_PER_INSERT`] rows (the few left over one by one).
pub(crate) fn append_fixes<'f>(
    conn: &Connection,
    fixes: impl Iterator<Item = (&'f Fix, i64)>,
) -> Result<()> {
    let sql = |rows: usize| format!("INSERT {}", super::positions::insert_sql(rows));
    let bind = |st: &mut rusqlite::Statement, rows: &[(&Fix, i64)]| -> Result<()> {
        for (row, (f, ms)) in rows.iter().enumerate() {
            super::positions::Stored::of(f, *ms)?
                .bind(st, row)
                .map_err(db_write_err)?;
        }
        st.raw_execute().map(drop).map_err(db_write_err)
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
                None => full.insert(
                    conn.prepare_cached(&sql(FIXES_PER_INSERT))
                        .map_err(db_write_err)?,
                ),
            };
            bind(st, &batch)?;
            batch.clear();
        }
    }
    if !batch.is_empty() {
        let mut single = conn.prepare_cached(&sql(1)).map_err(db_write_err)?;
        batch.chunks(1).try_for_each(|row| bind(&mut single, row))?;
    }
    Ok(())
}

/// Builds a new database at `path` and puts it in place only once `build` has
/// filled it: the file is written under a temporary name beside the target (a
/// killed run leaves the target as it was) and installed the way `file::Target`
/// says (never over a file that is not a fleetctl database; over one only with
/// `force`), with pages of `page_size` bytes.
pub fn build_new<T>(
    path: &Path,
    force: bool,
    page_size: u32,
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
    let writer = Writer::create(&tmp, page_size)?;
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
        let w = Writer::create(&dir.join("fleet.db"), BULK_PAGE_SIZE).unwrap();
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
