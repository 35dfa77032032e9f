//! The open fleet database as reports see it, a SQLite file or a PostgreSQL
//! database: the data clock, the zone, vehicles, geofences, places and thresholds,
//! loaded when opened and again whenever they changed (`refresh`), so a
//! long-running server answers about the database as it is now.

use super::*;
use crate::analyze::Thresholds;
use crate::clock::{Date, FleetZone};
use crate::error::{Error, ErrorCode, Result};
use crate::geo::{Geofence, LatLon, places::Namer};
use crate::model::Vehicle;
use crate::store;
use crate::store::sql::Sql;
use std::path::Path;

/// An open fleet database with what every report needs loaded once: the data
/// clock, the zone, the vehicles, the geofences and the point namer.
pub struct Db {
    conn: Box<dyn Sql + Send>,
    /// The database file (exports read it on several connections at once); empty
    /// for a PostgreSQL database (see [`Db::file`]).
    pub path: std::path::PathBuf,
    /// The PostgreSQL database, when it is one.
    postgres: Option<store::pg::Target>,
    /// The fleet's time zone.
    pub zone: FleetZone,
    /// The data clock's "now", UTC epoch seconds (the wall clock's, read again at
    /// every `refresh`, for a database fed live).
    pub now_ts: i64,
    /// True when "now" is the wall clock (`meta.clock = wall`: a live database).
    pub live_clock: bool,
    /// The newest fix when loaded: "now" is never before it.
    newest_fix_ts: i64,
    /// `meta.data_now`, when the database has one (a generated fleet's clock).
    data_now: Option<i64>,
    /// Vehicles, by id, with their route slug if synthetic.
    pub vehicles: Vec<(Vehicle, Option<String>)>,
    /// Each vehicle's index in `vehicles` by its plate's key (`resolve::plate_key`),
    /// so that a plate is found without a pass over the fleet; where two plates
    /// share a key, the first in plate order.
    plate_keys: std::collections::HashMap<String, usize>,
    /// Geofences, by id.
    pub geofences: Vec<Geofence>,
    /// Names points for people.
    pub namer: Namer,
    /// Named places a place name can resolve to.
    pub places: Vec<resolve::ResolvedPlace>,
    /// The thresholds detection used.
    pub thresholds: Thresholds,
    /// Raster tiles for maps, when the user gave some.
    pub tiles: Option<route_map::TileSource>,
    /// What the loaded data was read from: SQLite's `data_version` on this
    /// connection, and the file's identity (a `generate --force` puts a new file
    /// there). Unused for PostgreSQL, which is asked for its revision at every refresh.
    loaded_from: (Option<i64>, Option<FileId>),
    /// The `revision` (moved by every change of meta, vehicles, geofences and
    /// places) the kept tables were read at; `None` for a SQLite file made before
    /// it existed, read whole whenever it changed.
    revision: Option<i64>,
    /// PostgreSQL: the commits the last read saw (see `store::read::Freshness`).
    commits_seen: Option<String>,
    /// Moves whenever anything in the database may have changed since: see
    /// [`Db::version`].
    content_version: u64,
}

/// A number never handed out before in this process: a [`Db`]'s content version.
fn new_content_version() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// A file's identity: device and inode (Unix), else its modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId(u64, u64);

fn file_id(path: &Path) -> Option<FileId> {
    let m = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some(FileId(m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        let t = m
            .modified()
            .ok()?
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?;
        Some(FileId(t.as_secs(), u64::from(t.subsec_nanos())))
    }
}

impl Db {
    /// Opens the fleet at `db` read-only.
    pub fn open(db: &store::Location) -> Result<Db> {
        let path = match db {
            store::Location::Postgres(target) => return Db::open_postgres(target),
            store::Location::File(path) => path,
        };
        let file = file_id(path);
        let conn = store::open_read_only(path)?;
        Db::with(Box::new(conn), path.to_path_buf(), None, file)
    }

    /// Opens a fleet database on PostgreSQL, for reading.
    pub fn open_postgres(target: &store::pg::Target) -> Result<Db> {
        let conn = store::pg::open_for_reports(target)?;
        Db::with(
            Box::new(conn),
            std::path::PathBuf::new(),
            Some(target.clone()),
            None,
        )
    }

    fn with(
        conn: Box<dyn Sql + Send>,
        path: std::path::PathBuf,
        postgres: Option<store::pg::Target>,
        file: Option<FileId>,
    ) -> Result<Db> {
        let zone = store::read_zone(conn.as_ref())?;
        let mut db = Db {
            conn,
            path,
            postgres,
            zone,
            now_ts: 0,
            live_clock: false,
            newest_fix_ts: 0,
            data_now: None,
            vehicles: Vec::new(),
            plate_keys: Default::default(),
            geofences: Vec::new(),
            namer: Namer::for_geofences(&[], &[]),
            places: Vec::new(),
            thresholds: Thresholds::default(),
            tiles: None,
            loaded_from: (None, file),
            revision: None,
            commits_seen: None,
            content_version: new_content_version(),
        };
        db.load(file)?;
        Ok(db)
    }

    /// Reads the data clock, zone, vehicles, geofences, places and thresholds on
    /// this connection; on an error nothing changes.
    fn load(&mut self, file: Option<FileId>) -> Result<()> {
        let conn = self.conn.as_ref();
        // Read before the tables: a change made meanwhile shows at the next refresh.
        let version = conn.change_counter()?;
        let (revision, newest_fix_ts, commits_seen) = match store::read::has_revision(conn)? {
            true => {
                let seen = store::read::freshness(conn)?;
                (Some(seen.revision), seen.newest_fix_ts, seen.commits_seen)
            }
            false => (None, store::read::newest_fix_ts(conn)?, None),
        };
        let newest_fix_ts = newest_fix_ts.unwrap_or(0);
        let zone = store::read_zone(conn)?;
        let (clock_key, wall) = store::live::CLOCK_META;
        let live_clock = store::read_meta(conn, clock_key)?.is_some_and(|v| v.trim() == wall);
        let data_now = match store::read_meta(conn, "data_now")? {
            Some(v) => Some(v.trim().parse().map_err(|_| {
                Error::new(
                    ErrorCode::DbSchema,
                    format!("meta.data_now is {v:?}, not UTC epoch seconds"),
                )
                .with_hint("regenerate the database, or set data_now to epoch seconds")
            })?),
            None => None,
        };
        let vehicles = store::read::vehicles(conn)?;
        let geofences = store::read_geofences(conn)?;
        let known_places = store::read_places(conn)?;
        let thresholds = crate::pipeline::stored_thresholds(conn)?;
        self.namer = Namer::for_geofences(&geofences, &known_places);
        self.places = resolve::place_candidates(&geofences, &known_places);
        self.zone = zone;
        self.live_clock = live_clock;
        self.data_now = data_now;
        self.set_newest_fix(newest_fix_ts);
        self.plate_keys = resolve::plate_keys(&vehicles);
        self.vehicles = vehicles;
        self.geofences = geofences;
        self.thresholds = thresholds;
        self.loaded_from = (version, file);
        self.revision = revision;
        self.commits_seen = commits_seen;
        self.content_version = new_content_version();
        Ok(())
    }

    /// The newest fix is `newest_fix_ts`: the data clock follows it — the wall
    /// clock for a live database, else meta.data_now, or (a database without one)
    /// the newest fix; never before the newest fix (a generated fleet that takes
    /// live positions moves on with them, so no fix is ever from the future).
    fn set_newest_fix(&mut self, newest_fix_ts: i64) {
        let clock_ts = if self.live_clock {
            crate::clock::wall_clock_now()
        } else {
            self.data_now.unwrap_or(newest_fix_ts)
        };
        self.newest_fix_ts = newest_fix_ts;
        self.now_ts = clock_ts.max(newest_fix_ts);
    }

    /// True when the database changed since its data was loaded: another connection
    /// committed (an import, an edit, `analyze`), or another file now has its name.
    /// Costs one pragma and one `stat`. SQLite's alone: PostgreSQL has no counter
    /// of other connections' commits.
    fn is_stale(&self) -> bool {
        match self.conn.change_counter() {
            Ok(Some(version)) => {
                Some(version) != self.loaded_from.0 || file_id(&self.path) != self.loaded_from.1
            }
            Ok(None) | Err(_) => true,
        }
    }

    /// What an answer depends on besides its question: the database's content as
    /// this connection last saw it (a new number whenever a commit may have changed
    /// any table) and the clock's "now". The same version twice means the same
    /// answer to the same question, so a server may keep answers for one version.
    pub fn version(&self) -> (u64, i64) {
        (self.content_version, self.now_ts)
    }

    /// The version as any connection to the same PostgreSQL server would name it
    /// (the snapshot the last read saw, and "now"), so that a process's
    /// connections may share answers; `None` on SQLite.
    pub fn shared_version(&self) -> Option<(String, i64)> {
        Some((self.commits_seen.clone()?, self.now_ts))
    }

    /// Brings what it keeps up to date when the database changed (`is_stale`): the
    /// clock alone when only fixes came (the `revision` did not move), else all of
    /// it, keeping the tiles; `true` when it read all of it again. On an error
    /// nothing changes. A live database's "now" moves to the wall clock's every time.
    ///
    /// On PostgreSQL the reports that follow run in the read transaction the check
    /// began (so they see the state it saw, and pay no round trip to begin one);
    /// it stays open until [`Db::rest`] or the next refresh.
    pub fn refresh(&mut self) -> Result<bool> {
        if self.live_clock {
            self.now_ts = crate::clock::wall_clock_now().max(self.newest_fix_ts);
        }
        if let Some(target) = self.postgres.clone() {
            return self.refresh_postgres(&target);
        }
        if !self.is_stale() {
            return Ok(false);
        }
        self.content_version = new_content_version();
        let file = file_id(&self.path);
        if file == self.loaded_from.1 {
            // The same file, changed: on this connection (a live feed commits many
            // times a second; a new connection would parse the schema each time),
            // only the clock when nothing but fixes came, else everything again.
            if self.revision.is_some() {
                let version = self.conn.change_counter()?;
                let seen = store::read::freshness(self.conn.as_ref())?;
                if Some(seen.revision) == self.revision {
                    self.set_newest_fix(seen.newest_fix_ts.unwrap_or(0));
                    self.loaded_from.0 = version;
                    return Ok(false);
                }
            }
            self.load(file)?;
        } else {
            let mut fresh = Db::open(&store::Location::File(self.path.clone()))?;
            fresh.tiles = self.tiles.take();
            *self = fresh;
        }
        Ok(true)
    }

    /// [`Db::refresh`] on PostgreSQL, in one round trip while nothing but fixes
    /// came (the read transaction begun in it): the clock moves with the newest fix,
    /// and what the server keeps is read again only when the revision moved. A lost
    /// connection (the server restarted, a proxy timed it out) is made anew, so a
    /// server recovers by itself.
    fn refresh_postgres(&mut self, target: &store::pg::Target) -> Result<bool> {
        match store::read::begin_read_with_freshness(self.conn.as_ref()) {
            Ok(seen) if Some(seen.revision) == self.revision => {
                if seen.commits_seen.is_none() || seen.commits_seen != self.commits_seen {
                    self.content_version = new_content_version();
                    self.commits_seen = seen.commits_seen;
                }
                self.set_newest_fix(seen.newest_fix_ts.unwrap_or(0));
                return Ok(false);
            }
            Ok(_) if self.load(None).is_ok() => return Ok(true),
            _ => {}
        }
        let mut fresh = Db::open_postgres(target)?;
        fresh.tiles = self.tiles.take();
        *self = fresh;
        Ok(true)
    }

    /// Ends the read transaction [`Db::refresh`] left open on PostgreSQL (nothing
    /// to do on SQLite): a server calls it when it has no request in hand, so that
    /// an idle server holds no snapshot back from the database's vacuum.
    pub fn rest(&self) {
        store::read::end_held_read(self.conn.as_ref());
    }

    /// The vehicle whose plate has this key (`resolve::plate_key`), if any.
    pub(super) fn vehicle_by_plate_key(&self, key: &str) -> Option<&Vehicle> {
        self.plate_keys.get(key).map(|&i| &self.vehicles[i].0)
    }

    /// The first and last local dates with data over the whole fleet (`None` when no
    /// vehicle has any).
    pub fn data_dates(&self) -> Result<Option<(String, String)>> {
        let days = store::read::data_days_by_vehicle(self.conn.as_ref())?;
        let from = days.iter().map(|d| d.1.clone()).min();
        let to = days.iter().map(|d| d.2.clone()).max();
        Ok(from.zip(to))
    }

    /// The connection, for the store's typed reads: the reports' alone (front ends,
    /// outside this crate, ask the domain functions).
    pub(crate) fn conn(&self) -> &dyn Sql {
        self.conn.as_ref()
    }

    /// The SQLite file, or `None` for a PostgreSQL database.
    pub fn file(&self) -> Option<&Path> {
        self.postgres.is_none().then_some(self.path.as_path())
    }

    /// The PostgreSQL database, if this is one.
    pub fn postgres(&self) -> Option<&store::pg::Target> {
        self.postgres.as_ref()
    }

    /// The data clock's local date.
    pub fn today(&self) -> Date {
        self.zone.local_date(self.now_ts)
    }

    /// RFC 3339 in the fleet's zone.
    pub fn time(&self, ts: i64) -> String {
        self.zone.rfc3339(ts)
    }

    /// `[start, end)` of a local date, UTC epoch seconds.
    pub fn day_bounds(&self, date: Date) -> (i64, i64) {
        let start = self.zone.day_start(date);
        (start, self.zone.day_end(date))
    }

    /// Names a point for people.
    pub fn place(&self, lat: f64, lon: f64) -> String {
        self.namer.name(LatLon::new(lat, lon))
    }

    /// Says why a vehicle has nothing to report on a day: out of service, or which
    /// days do have data. `None` when there is data.
    pub fn no_data_note(&self, v: &Vehicle, empty: bool, date: &str) -> Result<Option<String>> {
        if !v.active {
            return Ok(Some(format!(
                "{} is out of service (inactive) and reports no positions",
                v.plate
            )));
        }
        if !empty {
            return Ok(None);
        }
        let days = store::read::days_with_data(self.conn.as_ref(), v.id)?;
        Ok(Some(match (days.first(), days.last()) {
            (Some(first), Some(last)) => format!(
                "{} has no fixes on {date}; it has data from {first} to {last}",
                v.plate
            ),
            _ => format!("{} has no positions in this database", v.plate),
        }))
    }

    /// The vehicle with this store id.
    pub fn vehicle_of(&self, id: i64) -> Result<&Vehicle> {
        self.vehicle(id).ok_or_else(|| {
            Error::new(
                ErrorCode::Busy,
                format!("a row names vehicle {id}, which this answer's vehicles do not hold: the database changed while it was read"),
            )
            .with_hint("ask again")
        })
    }

    /// The vehicle with this id, if the loaded data holds it.
    pub fn vehicle(&self, id: i64) -> Option<&Vehicle> {
        // The store lists vehicles by id.
        self.vehicles
            .binary_search_by_key(&id, |(v, _)| v.id)
            .ok()
            .map(|i| &self.vehicles[i].0)
    }
}
