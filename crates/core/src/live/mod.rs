//! The live feed: positions that trackers and phone apps push to `fleetctl serve
//! --http --ingest`, read from their own protocols (`protocols`) and committed to the
//! store in groups (`Writer::commit`), each device known by its id
//! (`vehicles.device_id`), and their derived rows worked out beside them
//! (`Analyser`) and stored with the next group. The transport (HTTP, the queues,
//! the threads, the answers) is the server's; what a request means and what is
//! stored is decided here.

mod postgres;
pub mod protocols;

use crate::analyze::{
    self,
    window::{Settled, Tail},
};
use crate::clock::FleetZone;
use crate::error::{Error, ErrorCode, Result};
use crate::ingest::units::SpeedUnit;
use crate::model::{Event, EventKey, Fix, VehicleAnalysis};
use crate::store::{self, WrittenRows};
use protocols::{Batch, Reading};
use rusqlite::{Connection, TransactionBehavior};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Creates an empty database for a live fleet at `path` (never over an existing
/// file): its zone, and the wall clock as its "now". Vehicles are then added with
/// `vehicles add PLATE --device-id ID`.
pub fn init(path: &std::path::Path, zone: &FleetZone) -> Result<()> {
    if path.exists() {
        return Err(Error::invalid(format!("{} already exists", path.display())).with_hint(
            "a live fleet starts from an empty database: give another --db path; an existing fleet takes pushed positions as it is (`serve --http --ingest`)",
        ));
    }
    store::build_new(path, false, store::LIVE_PAGE_SIZE, |w| {
        w.set_meta("schema_version", &store::SCHEMA_VERSION.to_string())?;
        w.set_meta("time_zone", &zone.name)?;
        w.set_meta(store::live::CLOCK_META.0, store::live::CLOCK_META.1)
    })
}

/// Where a device pushed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `/ingest/osmand`: the OsmAnd protocol (query, form or Traccar Client 9's JSON).
    Osmand,
    /// `/ingest/traccar`: Traccar's JSON position forwarding.
    Traccar,
    /// `/ingest/owntracks`: OwnTracks' HTTP mode.
    OwnTracks,
}

impl Endpoint {
    /// The endpoint a path's last part names.
    pub fn named(name: &str) -> Option<Endpoint> {
        match name {
            "osmand" => Some(Endpoint::Osmand),
            "traccar" => Some(Endpoint::Traccar),
            "owntracks" => Some(Endpoint::OwnTracks),
            _ => None,
        }
    }
}

/// One request as pushed.
#[derive(Debug, Clone)]
pub struct Request {
    /// Where it was sent.
    pub endpoint: Endpoint,
    /// Its query string, decoded into pairs (the token already taken out).
    pub query: Vec<(String, String)>,
    /// Its body.
    pub body: Vec<u8>,
    /// Whether its `Content-Type` says JSON.
    pub json: bool,
}

/// What a request's fixes came to.
#[derive(Debug, Clone, PartialEq)]
pub struct Accepted {
    /// Fixes stored.
    pub stored: usize,
    /// Fixes at an instant already stored for their vehicle (a retry): kept as stored.
    pub duplicates: usize,
    /// Messages without a fix, ignored on purpose, with why.
    pub ignored: Vec<String>,
}

/// How the feed reads and whom it takes.
#[derive(Debug, Clone)]
pub struct Options {
    /// A device with no vehicle gets one (plate = its id) instead of a refusal, at
    /// most this many a UTC day (past it: `rate_limited`, HTTP 429).
    pub auto_register: Option<u32>,
    /// The unit of the OsmAnd protocol's `speed` field.
    pub osmand_speed: SpeedUnit,
    /// Alerts go to a webhook: new events are queued in `alert_outbox` in the
    /// transaction that stores their rows.
    pub outbox: bool,
}

/// Reads requests and commits them in groups, on the feed's one writing connection.
pub struct Ingestor {
    zone: FleetZone,
    options: Options,
    /// The UTC day and how many vehicles `--auto-register` added on it.
    registered: std::sync::Mutex<(i64, u32)>,
}

/// What a group's commit came to: each request's outcome, in order, and the fixes
/// it added, by vehicle.
pub struct Committed {
    /// Each request's outcome, in the group's order.
    pub outcomes: Vec<Result<Accepted>>,
    /// The fixes stored, by vehicle (to analyse).
    pub added: BTreeMap<i64, Vec<Fix>>,
    /// The analysis must start again from what is stored ([`Analyser::restart`]
    /// with this epoch): another program wrote, or its rows could not be stored.
    pub restart: Option<u64>,
    /// Why the analyser's rows could not be stored (the fixes were).
    pub rows_failed: Option<String>,
    /// Why nothing of the group could be committed (every request failed).
    pub commit_failed: Option<String>,
    /// The new events of the analyser's rows committed with this group: to be
    /// announced now, and only now that they are stored.
    pub announce: Vec<NewEvent>,
}

impl Ingestor {
    /// An ingestor for the database `conn` holds (its zone reads naive local times).
    pub fn new(conn: &dyn store::sql::Sql, options: Options) -> Result<Ingestor> {
        Ok(Ingestor {
            zone: store::read_zone(conn)?,
            options,
            registered: std::sync::Mutex::new((0, 0)),
        })
    }

    /// What a request says, read with the wall clock `now`. An OsmAnd request may
    /// name its own speed unit (`speed_unit=mps` in its URL or form).
    pub fn read(&self, request: &Request, now: i64) -> Result<Batch> {
        let mut reading = Reading {
            zone: &self.zone,
            now,
            osmand_speed: self.options.osmand_speed,
        };
        match request.endpoint {
            Endpoint::Osmand if request.json => protocols::osmand_json(&request.body, &reading),
            Endpoint::Osmand => {
                let form;
                let fields = if request.query.iter().any(|(k, _)| k != "speed_unit") {
                    &request.query
                } else {
                    form = protocols::form_pairs(&String::from_utf8_lossy(&request.body));
                    &form
                };
                let named = request
                    .query
                    .iter()
                    .chain(fields)
                    .find(|(k, _)| k == "speed_unit");
                if let Some((_, unit)) = named {
                    reading.osmand_speed = SpeedUnit::parse(unit).ok_or_else(|| {
                        Error::invalid(format!(
                            "speed_unit {unit:?} is not a speed unit (use one of {})",
                            SpeedUnit::NAMES
                        ))
                    })?;
                }
                protocols::osmand_fields(fields, &reading)
            }
            Endpoint::Traccar => protocols::traccar_forward(&request.body, &reading),
            Endpoint::OwnTracks => protocols::owntracks(&request.body, &reading),
        }
    }

    /// Reads and stores a group of requests in the caller's transaction: each
    /// request whole or not at all (a refused one leaves the others).
    fn commit_in(
        &self,
        tx: &mut rusqlite::Transaction<'_>,
        group: &[Request],
        now: i64,
    ) -> Committed {
        let mut added: BTreeMap<i64, Vec<Fix>> = BTreeMap::new();
        let mut outcomes = Vec::with_capacity(group.len());
        for request in group {
            let outcome = match self.read(request, now) {
                Err(e) => Err(e),
                // One fix is one insert, whole or not at all by itself: no savepoint
                // to pay for. (With --auto-register its device's new vehicle may come
                // first; that registration stands on its own.)
                Ok(batch) if batch.fixes.len() <= 1 => self.store_batch(&**tx, batch, now),
                Ok(batch) => match tx.savepoint() {
                    Err(e) => Err(savepoint_err(e)),
                    // Dropped without commit, a savepoint rolls its request back.
                    Ok(sp) => self.store_batch(&*sp, batch, now).and_then(|stored| {
                        sp.commit().map_err(savepoint_err)?;
                        Ok(stored)
                    }),
                },
            };
            outcomes.push(outcome.map(|(accepted, stored)| {
                for fix in stored {
                    added.entry(fix.vehicle_id).or_default().push(fix);
                }
                accepted
            }));
        }
        Committed {
            outcomes,
            added,
            restart: None,
            rows_failed: None,
            commit_failed: None,
            announce: Vec::new(),
        }
    }

    /// Every request of a group refused with `e` (nothing of it was written).
    fn all_failed_as(&self, n: usize, e: Error) -> Committed {
        Committed {
            outcomes: (0..n).map(|_| Err(e.clone())).collect(),
            added: BTreeMap::new(),
            restart: None,
            rows_failed: None,
            commit_failed: Some(e.message.clone()),
            announce: Vec::new(),
        }
    }

    fn all_failed(&self, n: usize, why: &str) -> Committed {
        // Another program holding the file's write lock (SQLite's "database is
        // locked") passes: busy, and the device retries after a pause.
        let code = match why.contains("database is locked") || why.contains("database is busy") {
            true => ErrorCode::Busy,
            false => ErrorCode::Io,
        };
        Committed {
            outcomes: (0..n)
                .map(|_| {
                    Err(
                        Error::new(code, format!("the fixes could not be committed: {why}"))
                            .with_hint("nothing of this request was stored; send it again"),
                    )
                })
                .collect(),
            added: BTreeMap::new(),
            restart: None,
            rows_failed: None,
            commit_failed: Some(why.to_string()),
            announce: Vec::new(),
        }
    }

    /// Stores one request's fixes; what was stored, and the new fixes.
    fn store_batch(
        &self,
        conn: &dyn store::sql::Sql,
        batch: Batch,
        now: i64,
    ) -> Result<(Accepted, Vec<Fix>)> {
        let mut by_vehicle: BTreeMap<i64, Vec<protocols::Pushed>> = BTreeMap::new();
        let mut known: HashMap<String, i64> = HashMap::new();
        for fix in batch.fixes {
            if let Some(&vehicle) = known.get(&fix.device_id) {
                by_vehicle.entry(vehicle).or_default().push(fix);
                continue;
            }
            let vehicle = match store::live::vehicle_of_device(conn, &fix.device_id)? {
                Some(v) => v,
                None => match self.options.auto_register {
                    Some(per_day) => {
                        self.admit_new_vehicle(per_day, now)?;
                        store::live::register_device(conn, &fix.device_id)?
                    }
                    None => {
                        return Err(Error::new(
                            ErrorCode::NotFound,
                            format!("device {:?} belongs to no vehicle", fix.device_id),
                        )
                        .with_hint(format!(
                            "add it: `fleetctl vehicles add PLATE --device-id {}` (or start the server with --auto-register)",
                            crate::error::shell_word(&fix.device_id)
                        )));
                    }
                },
            };
            known.insert(fix.device_id.clone(), vehicle);
            by_vehicle.entry(vehicle).or_default().push(fix);
        }
        let mut accepted = Accepted {
            stored: 0,
            duplicates: 0,
            ignored: batch.ignored,
        };
        let mut new = Vec::new();
        for (vehicle, fixes) in by_vehicle {
            let stored = store::live::append_pushed(conn, vehicle, &fixes)?;
            accepted.stored += stored.len();
            accepted.duplicates += fixes.len() - stored.len();
            new.extend(stored);
        }
        Ok((accepted, new))
    }
}

impl Ingestor {
    /// Counts one more vehicle `--auto-register` adds today (UTC), or refuses it
    /// past `per_day`: a holder of the ingest token cannot grow the fleet without
    /// bound (a vehicle a device id, each kept for ever).
    fn admit_new_vehicle(&self, per_day: u32, now: i64) -> Result<()> {
        let mut registered = self.registered.lock().unwrap_or_else(|p| p.into_inner());
        let today = now.div_euclid(86_400);
        if registered.0 != today {
            *registered = (today, 0);
        }
        if registered.1 >= per_day {
            return Err(Error::new(
                ErrorCode::RateLimited,
                format!(
                    "a new device, and {per_day} vehicles were added today already (--max-new-vehicles-per-day {per_day})"
                ),
            )
            .with_hint("retry tomorrow (UTC), or ask the fleet's operator to add it: `fleetctl vehicles add PLATE --device-id ID`"));
        }
        registered.1 += 1;
        Ok(())
    }
}

/// Commits pushed requests in groups, each group one transaction: a 200 means
/// its fixes are committed.
pub enum Writer {
    /// A SQLite file.
    File(Box<FileWriter>),
    /// PostgreSQL: fixes only (each analyser writes its own rows).
    Postgres(Box<postgres::PgWriter>),
}

impl Writer {
    /// Commits a group of requests with the wall clock `now`, with the analyser's
    /// `rows` where the writer stores them (a SQLite file), and takes the alerts
    /// `posted` out of the outbox (on a SQLite file the writer's connection is the
    /// only one that writes: another's commit would make it start its analysis
    /// over; on PostgreSQL the webhook's thread takes them out itself).
    pub fn commit(
        &mut self,
        group: &[Request],
        rows: Vec<Rows>,
        posted: &[i64],
        now: i64,
    ) -> Committed {
        match self {
            Writer::File(w) => w.commit(group, rows, posted, now),
            Writer::Postgres(w) => w.commit(group, now),
        }
    }
}

/// Works out (and, on PostgreSQL, stores) the derived rows of the fixes committed.
pub enum Analyser {
    /// A SQLite file: the rows go to the [`Writer`].
    File(Box<FileAnalyser>),
    /// PostgreSQL: each vehicle's rows written under its lock.
    Postgres(Box<postgres::PgAnalyser>),
}

impl Analyser {
    /// Forgets every open detection: the vehicles that had one, to analyse whole
    /// again. After an error of [`Analyser::analyse`], or before a restart.
    pub fn forget(&mut self) -> Vec<i64> {
        match self {
            Analyser::File(a) => a.forget(),
            Analyser::Postgres(a) => a.forget(),
        }
    }

    /// Reads the settings again for the writer's epoch `epoch`.
    pub fn restart(&mut self, epoch: u64) -> Result<()> {
        match self {
            Analyser::File(a) => a.restart(epoch),
            Analyser::Postgres(a) => a.restart(),
        }
    }

    /// Works out the derived rows for fixes committed since the last call, by
    /// vehicle; the rows equal a full `analyze` of the same positions.
    pub fn analyse(&mut self, added: &BTreeMap<i64, Vec<Fix>>) -> Result<(Rows, Analysed)> {
        match self {
            Analyser::File(a) => a.analyse(added),
            Analyser::Postgres(a) => a.analyse(added),
        }
    }
}

/// Commits pushed requests in groups on the feed's one writing connection
/// (`store::live::open_writer`: WAL, `synchronous = FULL`), and in the same
/// transaction the derived rows the [`Analyser`] worked out since: one sync per
/// group for both.
pub struct FileWriter {
    conn: Connection,
    ingestor: Ingestor,
    /// The database's `data_version` when the zone was read: another connection's
    /// commit (`settings`, an import, `analyze`) changes it.
    seen_version: i64,
    stored: StoredRows,
}

/// What the writer knows of the derived rows it stored.
#[derive(Default)]
struct StoredRows {
    /// What was written for each vehicle since it was last analysed whole.
    written: HashMap<i64, Written>,
    /// Counts the times the analysis had to start again (another program wrote, or
    /// storing its rows failed); rows worked out before are dropped.
    epoch: u64,
}

/// The rows written for one vehicle that later rows may take back.
#[derive(Default)]
struct Written {
    /// Its provisional rows as last written: the next rows for it replace them.
    provisional: WrittenRows,
    /// Its final rows of each segment of detection a rewind can still take back.
    segments: BTreeMap<u64, WrittenRows>,
}

impl StoredRows {
    /// Starts a new epoch: what was written before is no longer known.
    fn restart(&mut self) -> u64 {
        self.written.clear();
        self.epoch += 1;
        self.epoch
    }
}

/// Works out the vehicles' derived rows as their fixes arrive, each from its open
/// detection (`analyze::window::Tail`), without writing: the [`Writer`] stores
/// them. Reads (a vehicle's fixes, the settings) on its own connection.
pub struct FileAnalyser {
    conn: Connection,
    ctx: analyze::Context,
    epoch: u64,
    /// Each vehicle's open detection.
    tails: HashMap<i64, Tail>,
    /// Each vehicle's events announced lately (their rows may not be stored yet):
    /// kept across a vehicle's whole re-analysis and a restart, so that no event
    /// is announced twice.
    announced: HashMap<i64, HashSet<EventKey>>,
}

/// How long an announced event's key is kept, seconds before the vehicle's newest
/// fix: longer than any of its rows waits to be stored.
const ANNOUNCED_KEPT_S: i64 = 2 * 86_400;

/// Derived rows worked out by the analyser for the writer to store.
pub struct Rows {
    epoch: u64,
    vehicles: Vec<VehicleRows>,
    /// The new events these rows hold, announced once the writer has stored them.
    events: Vec<NewEvent>,
}

impl Rows {
    /// Has the writer announce `events` once these rows are committed (a SQLite
    /// file, where the writer stores the analyser's rows).
    pub fn announce_when_stored(&mut self, events: Vec<NewEvent>) {
        self.events = events;
    }
}

/// One vehicle's new rows: final ones, and its open stretch (replacing the last).
struct VehicleRows {
    vehicle: i64,
    /// Which of its rows go first.
    from: Redo,
    done: Settled,
    provisional: VehicleAnalysis,
    /// Rows of segments before this one are never taken back.
    oldest_segment: u64,
}

/// Which of a vehicle's rows new rows replace.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Redo {
    /// Analysed whole: every derived row it had.
    Whole,
    /// Resumed: its provisional rows.
    Resumed,
    /// Taken back to a checkpoint before a late fix: its provisional rows and its
    /// final rows of this segment and later ones.
    Rewound(u64),
}

/// How a round of analysis went, and the events it brought.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Analysed {
    /// Vehicles whose new fixes followed all they had: only the stretch after
    /// their last finished stop was analysed again.
    pub resumed: usize,
    /// Vehicles with a fix older than their newest, analysed again from their last
    /// stop before it (within `analyze::window::REWIND_KEPT_S` of their newest).
    pub rewound: usize,
    /// Vehicles analysed whole: seen first since the server started, a fix older
    /// than their newest by more than that, or the fleet's settings changed.
    pub rebuilt: usize,
    /// The events found that were not there before this analysis (a stored event,
    /// or one of a vehicle's open stretch already announced, is not new): the live
    /// alerts. An event still open (a long stop going on) is new once, when first
    /// found.
    pub new_events: Vec<NewEvent>,
}

/// An event the feed's analysis found new: a live alert (kept in the model, where
/// the store's alert outbox reads and writes it too).
pub use crate::model::NewEvent;

/// Opens the fleet at `db` for the feed: its writer and its analyser.
pub fn open(db: &store::Location, options: Options) -> Result<(Writer, Analyser)> {
    let path = match db {
        store::Location::File(path) => path,
        store::Location::Postgres(target) => {
            let (writer, analyser) = postgres::open(target, options)?;
            return Ok((
                Writer::Postgres(Box::new(writer)),
                Analyser::Postgres(Box::new(analyser)),
            ));
        }
    };
    let conn = store::live::open_writer(path)?;
    let ingestor = Ingestor::new(&conn, options)?;
    let seen_version = store::live::data_version(&conn)?;
    // Opened after the writer's, so that it finds the database in WAL mode.
    let reader = store::open_read_only(path)?;
    let ctx = crate::pipeline::stored_context(&reader)?;
    Ok((
        Writer::File(Box::new(FileWriter {
            conn,
            ingestor,
            seen_version,
            stored: StoredRows::default(),
        })),
        Analyser::File(Box::new(FileAnalyser {
            conn: reader,
            ctx,
            epoch: 0,
            tails: HashMap::new(),
            announced: HashMap::new(),
        })),
    ))
}

impl FileWriter {
    /// Stores the analyser's `rows` (those of its current epoch) and commits a
    /// group of requests (`Ingestor::commit_in`) with the wall clock `now`, in one
    /// transaction.
    pub fn commit(
        &mut self,
        group: &[Request],
        rows: Vec<Rows>,
        posted: &[i64],
        now: i64,
    ) -> Committed {
        match self.commit_locked(group, rows, posted, now) {
            Ok(committed) => committed,
            Err(why) => self.failed(group.len(), &why),
        }
    }

    /// [`Writer::commit`] once the write lock is taken; `Err`: nothing was written.
    fn commit_locked(
        &mut self,
        group: &[Request],
        rows: Vec<Rows>,
        posted: &[i64],
        now: i64,
    ) -> std::result::Result<Committed, String> {
        let mut tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| e.to_string())?;
        // Read once the write lock is held: a program that wrote before it (an
        // `analyze` rewriting every derived row) has committed by now.
        let mut restart = None;
        let version = store::live::data_version(&tx).map_err(|e| e.message)?;
        if version != self.seen_version {
            // Somebody else wrote: the zone, the settings or the derived rows (and
            // so the provisional rows' ids) may differ; the analysis starts again
            // from what is stored, and the rows worked out before are dropped.
            self.ingestor.zone = store::read_zone(&*tx).map_err(|e| e.message)?;
            self.seen_version = version;
            restart = Some(self.stored.restart());
        }
        let mut failed = None;
        let epoch = self.stored.epoch;
        let mut current: Vec<Rows> = rows.into_iter().filter(|r| r.epoch == epoch).collect();
        // Rows of an older epoch are dropped with their events: the analysis that
        // follows the restart finds those again (`FileAnalyser::restart`).
        let events: Vec<NewEvent> = current
            .iter_mut()
            .flat_map(|r| std::mem::take(&mut r.events))
            .collect();
        if !current.is_empty() {
            let outbox = self.ingestor.options.outbox;
            let stored = tx.savepoint().map_err(savepoint_err).and_then(|sp| {
                store_rows(&sp, &mut self.stored.written, current)?;
                // The alerts of the rows stored, queued with them (or neither).
                if outbox {
                    store::live::outbox_queue(&*sp, &events, now)?;
                }
                sp.commit().map_err(savepoint_err)
            });
            if let Err(e) = stored {
                failed = Some(e.message);
            }
        }
        if !posted.is_empty()
            && let Err(e) = store::live::outbox_remove(&*tx, posted)
        {
            failed.get_or_insert(e.message);
        }
        let mut committed = self.ingestor.commit_in(&mut tx, group, now);
        if let Err(e) = tx.commit() {
            committed = self.ingestor.all_failed(group.len(), &e.to_string());
            failed.get_or_insert(e.to_string());
        }
        if failed.is_some() {
            // What the analyser counts on being stored may not be: start again.
            restart = Some(self.stored.restart());
        }
        if failed.is_none() {
            committed.announce = events;
        }
        committed.restart = restart;
        committed.rows_failed = failed;
        Ok(committed)
    }

    /// Every request of the group failed before anything was written: the rows
    /// given with it are lost too, so the analysis starts again.
    fn failed(&mut self, n: usize, why: &str) -> Committed {
        let mut committed = self.ingestor.all_failed(n, why);
        committed.restart = Some(self.stored.restart());
        committed.rows_failed = Some(why.to_string());
        committed
    }
}

/// Stores rows in the caller's transaction, each vehicle's replacing those they
/// redo (`written`).
fn store_rows(
    conn: &Connection,
    written: &mut HashMap<i64, Written>,
    rows: Vec<Rows>,
) -> Result<()> {
    for r in rows.into_iter().flat_map(|r| r.vehicles) {
        let before = if r.from == Redo::Whole {
            store::DerivedWriter::for_vehicles(conn, &[r.vehicle])?;
            written
                .entry(r.vehicle)
                .insert_entry(Written::default())
                .into_mut()
        } else {
            let Some(before) = written.get_mut(&r.vehicle) else {
                return Err(Error::internal(format!(
                    "vehicle {} was resumed without rows written before",
                    r.vehicle
                )));
            };
            // The last provisional rows go first: a day they held may now be final.
            store::delete_rows(conn, &before.provisional)?;
            if let Redo::Rewound(segment) = r.from {
                for rows in before.segments.split_off(&segment).values() {
                    store::delete_rows(conn, rows)?;
                }
            }
            before
        };
        for (segment, rows) in &r.done.segments {
            let ids = store::write_rows(conn, rows)?;
            before.segments.entry(*segment).or_default().extend(ids);
        }
        before.segments = before.segments.split_off(&r.oldest_segment);
        before.provisional = store::write_rows(conn, &r.provisional)?;
    }
    Ok(())
}

impl FileAnalyser {
    /// Forgets every open detection: the vehicles that had one, to analyse whole
    /// again (rows worked out for them may never be stored). After an error of
    /// [`Analyser::analyse`], or before a [`Analyser::restart`].
    pub fn forget(&mut self) -> Vec<i64> {
        self.tails.drain().map(|(vehicle, _)| vehicle).collect()
    }

    /// Reads the settings again for the writer's epoch `epoch` (another program
    /// wrote, or rows could not be stored); the open detections are forgotten.
    pub fn restart(&mut self, epoch: u64) -> Result<()> {
        self.tails.clear();
        // Rows in flight are dropped by the writer, their events unannounced: what
        // was announced is what is stored, read again as each vehicle is rebuilt.
        self.announced.clear();
        self.epoch = epoch;
        self.ctx = crate::pipeline::stored_context(&self.conn)?;
        Ok(())
    }

    /// Works out the derived rows for fixes committed since the last call, by
    /// vehicle (several groups' worth at once is the point: a vehicle's detection
    /// runs once for all its new fixes). A vehicle whose new fixes all follow its
    /// newest is resumed from its last finished stop; any other is analysed whole
    /// from its stored fixes. Stored by the writer, the rows equal a full `analyze`
    /// of the same positions.
    /// A vehicle given with no fixes is analysed whole. On an error the open
    /// detections may be ahead of what will be stored: [`Analyser::forget`] them.
    pub fn analyse(&mut self, added: &BTreeMap<i64, Vec<Fix>>) -> Result<(Rows, Analysed)> {
        let mut done = Analysed::default();
        let outcome = self.analyse_into(added, &mut done);
        if outcome.is_err() {
            // Nothing of this round is stored nor announced: neither is it counted
            // as announced, so the round that follows announces it.
            for e in &done.new_events {
                if let Some(keys) = self.announced.get_mut(&e.event.vehicle_id) {
                    keys.remove(&e.event.key());
                }
            }
        }
        outcome.map(|rows| (rows, done))
    }

    fn analyse_into(
        &mut self,
        added: &BTreeMap<i64, Vec<Fix>>,
        done: &mut Analysed,
    ) -> Result<Rows> {
        let mut rows = Rows {
            epoch: self.epoch,
            vehicles: Vec::new(),
            events: Vec::new(),
        };
        for (&vehicle, fixes) in added {
            let announced = self.announced.entry(vehicle).or_default();
            if let Some(tail) = self.tails.get_mut(&vehicle) {
                // A vehicle analysed whole since these fixes were committed holds them.
                let mut fixes: Vec<Fix> =
                    fixes.iter().filter(|f| !tail.holds(f)).copied().collect();
                fixes.sort_by_key(|f| f.ts);
                let from = match (tail.last_ts(), fixes.first()) {
                    (_, None) => continue,
                    (Some(last), Some(first)) if first.ts <= last => {
                        rewound(&self.conn, vehicle, tail, first.ts, &self.ctx)?
                    }
                    _ => {
                        let settled = tail.push(fixes, &self.ctx);
                        let provisional = tail.provisional(&self.ctx);
                        Some((Redo::Resumed, settled, provisional))
                    }
                };
                if let Some((from, settled, provisional)) = from {
                    announce(
                        announced,
                        settled.events().chain(&provisional.events),
                        tail.last_ts(),
                        &mut done.new_events,
                    );
                    rows.vehicles.push(VehicleRows {
                        vehicle,
                        from,
                        done: settled,
                        provisional,
                        oldest_segment: tail.oldest_segment(),
                    });
                    match from {
                        Redo::Rewound(_) => done.rewound += 1,
                        _ => done.resumed += 1,
                    }
                    continue;
                }
            }
            // Stored events are known; so are those announced but not stored yet.
            announced.extend(store::live::event_keys(&self.conn, vehicle)?);
            let (tail, whole) = rebuild(&self.conn, vehicle, &self.ctx)?;
            announce(
                announced,
                whole.done.events().chain(&whole.provisional.events),
                tail.last_ts(),
                &mut done.new_events,
            );
            self.tails.insert(vehicle, tail);
            rows.vehicles.push(whole);
            done.rebuilt += 1;
        }
        injected_analysis_failure(done)?;
        Ok(rows)
    }
}

/// Debug builds only: the tests fail the first analysis round that finds new events
/// (`FLEETCTL_TEST_FAIL_ANALYSIS_WITH_EVENTS`), after they were counted announced.
fn injected_analysis_failure(done: &Analysed) -> Result<()> {
    #[cfg(debug_assertions)]
    {
        use std::sync::atomic::{AtomicBool, Ordering};
        static FAILED: AtomicBool = AtomicBool::new(false);
        if !done.new_events.is_empty()
            && std::env::var_os("FLEETCTL_TEST_FAIL_ANALYSIS_WITH_EVENTS").is_some()
            && !FAILED.swap(true, Ordering::SeqCst)
        {
            return Err(Error::internal("an analysis failure injected for a test"));
        }
    }
    let _ = done;
    Ok(())
}

/// Fixes committed and not analysed yet, by vehicle, and when each vehicle was
/// last analysed: a vehicle falls due at most every `every`, with all the fixes it
/// got meanwhile (a device pushing several a second has them analysed together;
/// one reporting every few seconds is due at once).
pub struct Backlog {
    every: std::time::Duration,
    pending: BTreeMap<i64, Vec<Fix>>,
    analysed_at: HashMap<i64, std::time::Instant>,
}

impl Backlog {
    /// An empty backlog whose vehicles are due at most every `every`.
    pub fn new(every: std::time::Duration) -> Backlog {
        Backlog {
            every,
            pending: BTreeMap::new(),
            analysed_at: HashMap::new(),
        }
    }

    /// Adds fixes committed, by vehicle.
    pub fn add(&mut self, fixes: BTreeMap<i64, Vec<Fix>>) {
        for (vehicle, f) in fixes {
            self.pending.entry(vehicle).or_default().extend(f);
        }
    }

    /// Has these vehicles analysed again, fixes or not (with none, whole).
    pub fn again(&mut self, vehicles: impl IntoIterator<Item = i64>) {
        for vehicle in vehicles {
            self.pending.entry(vehicle).or_default();
        }
    }

    /// How long until a vehicle falls due (zero: one is due now); `None` when
    /// nothing is pending.
    pub fn wait(&self, now: std::time::Instant) -> Option<std::time::Duration> {
        self.pending
            .keys()
            .map(|v| {
                self.analysed_at
                    .get(v)
                    .map_or(std::time::Duration::ZERO, |at| {
                        (*at + self.every).saturating_duration_since(now)
                    })
            })
            .min()
    }

    /// Takes the vehicles due at `now` (`all`: every one pending) with their fixes,
    /// and counts them as analysed at `now`.
    pub fn take_due(&mut self, now: std::time::Instant, all: bool) -> BTreeMap<i64, Vec<Fix>> {
        let every = self.every;
        let analysed_at = &self.analysed_at;
        let due: BTreeMap<i64, Vec<Fix>> = self
            .pending
            .extract_if(.., |v, _| {
                all || analysed_at.get(v).is_none_or(|at| *at + every <= now)
            })
            .collect();
        for vehicle in due.keys() {
            self.analysed_at.insert(*vehicle, now);
        }
        due
    }
}

/// Adds the events not `announced` yet to `new`, each said to be going on when it
/// lasts and ends at the vehicle's newest fix (`newest_ts`), and keeps the keys of
/// the recent ones (within `ANNOUNCED_KEPT_S` of it) and of every event given now:
/// an event of the open stretch is given again at each analysis however long ago it
/// began (a signal loss of days, a long stop), and must not be new each time.
fn announce<'e>(
    announced: &mut HashSet<EventKey>,
    events: impl Iterator<Item = &'e Event>,
    newest_ts: Option<i64>,
    new: &mut Vec<NewEvent>,
) {
    let mut given = HashSet::new();
    for e in events {
        given.insert(e.key());
        if announced.insert(e.key()) {
            new.push(NewEvent {
                ongoing: e.kind.lasts() && newest_ts.is_some_and(|ts| e.end_ts >= ts),
                event: e.clone(),
            });
        }
    }
    let horizon = newest_ts.map_or(i64::MIN, |ts| ts - ANNOUNCED_KEPT_S);
    announced.retain(|key| key.1 >= horizon || given.contains(key));
}

/// Analyses one vehicle whole from its stored fixes, a window at a time, and keeps
/// its detection open: every row it comes to.
fn rebuild(
    conn: &dyn store::sql::Sql,
    vehicle: i64,
    ctx: &analyze::Context,
) -> Result<(Tail, VehicleRows)> {
    let mut tail = Tail::default();
    let mut done = Settled::default();
    let mut chunk = Vec::new();
    store::read::positions_between(conn, vehicle, i64::MIN, i64::MAX, &mut |fix, _| {
        chunk.push(*fix);
        if chunk.len() >= analyze::window::WINDOW_FIXES {
            done.append(tail.push(std::mem::take(&mut chunk), ctx));
        }
    })?;
    done.append(tail.push(chunk, ctx));
    let provisional = tail.provisional(ctx);
    let oldest_segment = tail.oldest_segment();
    Ok((
        tail,
        VehicleRows {
            vehicle,
            from: Redo::Whole,
            done,
            provisional,
            oldest_segment,
        },
    ))
}

/// Takes a vehicle's detection back to its last checkpoint before a late fix at
/// `late_ts` and runs it again over the stored fixes from there: the rows that
/// redoes, with the segment they replace from. `None` when no checkpoint is kept
/// that early: the vehicle is analysed whole.
fn rewound(
    conn: &dyn store::sql::Sql,
    vehicle: i64,
    tail: &mut Tail,
    late_ts: i64,
    ctx: &analyze::Context,
) -> Result<Option<(Redo, Settled, VehicleAnalysis)>> {
    let Some((segment, first)) = tail.rewind(late_ts) else {
        return Ok(None);
    };
    let mut fixes = Vec::new();
    store::read::positions_between(conn, vehicle, first.ts, i64::MAX, &mut |f, _| {
        fixes.push(*f)
    })?;
    // Another fix in its first fix's second may come before it.
    let Some(at) = fixes.iter().position(|f| *f == first) else {
        return Ok(None);
    };
    let settled = tail.push(fixes.drain(at..), ctx);
    let provisional = tail.provisional(ctx);
    Ok(Some((Redo::Rewound(segment), settled, provisional)))
}

fn savepoint_err(e: rusqlite::Error) -> Error {
    Error::new(ErrorCode::Io, format!("database write failed: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: an event of the open stretch that began more than
    /// `ANNOUNCED_KEPT_S` before the newest fix (a tracker silent for days, then
    /// back) is given again at every analysis; it was announced at each one (on
    /// PostgreSQL, one signal loss 17 times in 4 s).
    #[test]
    fn an_old_event_given_again_at_each_analysis_is_announced_once() {
        use crate::model::{EventDetail, EventKind, NoDetail};
        let newest = 10 * 86_400;
        let lost = Event {
            vehicle_id: 1,
            kind: EventKind::SignalLoss,
            start_ts: 86_400,
            end_ts: newest - 60,
            lat: 14.6,
            lon: -90.5,
            detail: EventDetail::Ignition(NoDetail {}),
        };
        let mut announced = HashSet::new();
        let mut new = Vec::new();
        for k in 0..17 {
            announce(
                &mut announced,
                [&lost].into_iter(),
                Some(newest + k),
                &mut new,
            );
        }
        assert_eq!(new.len(), 1);
        // Once no longer given and past the horizon, its key goes.
        announce(
            &mut announced,
            std::iter::empty(),
            Some(newest + 20),
            &mut new,
        );
        assert!(announced.is_empty());
    }

    #[test]
    fn an_alert_is_going_on_when_it_lasts_and_ends_at_the_newest_fix() {
        use crate::model::{EventDetail, EventKind, NoDetail};
        let event = |kind, start_ts, end_ts| Event {
            vehicle_id: 1,
            kind,
            start_ts,
            end_ts,
            lat: 14.6,
            lon: -90.5,
            detail: EventDetail::Ignition(NoDetail {}),
        };
        let events = [
            // Its last fast fix is the newest.
            event(EventKind::Speeding, 900, 1_000),
            // Over: a slower fix followed.
            event(EventKind::Speeding, 700, 850),
            // Still stopped.
            event(EventKind::LongStop, 100, 1_000),
            // Ended by the newest fix.
            event(EventKind::SignalLoss, 400, 1_000),
            event(EventKind::IgnitionOn, 1_000, 1_000),
        ];
        let mut new = Vec::new();
        announce(&mut HashSet::new(), events.iter(), Some(1_000), &mut new);
        let said: Vec<_> = new
            .iter()
            .map(|n| (n.event.kind, n.event.start_ts, n.ongoing))
            .collect();
        assert_eq!(
            said,
            vec![
                (EventKind::Speeding, 900, true),
                (EventKind::Speeding, 700, false),
                (EventKind::LongStop, 100, true),
                (EventKind::SignalLoss, 400, false),
                (EventKind::IgnitionOn, 1_000, false),
            ]
        );
    }

    #[test]
    fn a_vehicle_analysed_is_held_back_until_its_interval_passes_with_all_its_fixes() {
        use std::time::{Duration, Instant};
        let fix = |vehicle_id: i64, ts: i64| Fix {
            vehicle_id,
            ts,
            lat: 14.6,
            lon: -90.5,
            speed_kmh: 0.0,
            speed_derived: false,
            heading_deg: None,
            ignition: None,
            odometer_km: None,
        };
        let every = Duration::from_millis(250);
        let t0 = Instant::now();
        let mut backlog = Backlog::new(every);
        assert_eq!(backlog.wait(t0), None, "nothing pending");
        backlog.add(BTreeMap::from([(1, vec![fix(1, 0)])]));
        assert_eq!(
            backlog.wait(t0),
            Some(Duration::ZERO),
            "never analysed: due now"
        );
        assert_eq!(backlog.take_due(t0, false)[&1].len(), 1);
        // Two more fixes of vehicle 1 and one of vehicle 2, 100 ms later.
        let t1 = t0 + Duration::from_millis(100);
        backlog.add(BTreeMap::from([
            (1, vec![fix(1, 15)]),
            (2, vec![fix(2, 15)]),
        ]));
        backlog.add(BTreeMap::from([(1, vec![fix(1, 30)])]));
        let due = backlog.take_due(t1, false);
        assert_eq!(
            due.keys().collect::<Vec<_>>(),
            [&2],
            "vehicle 1 is held back"
        );
        assert_eq!(backlog.wait(t1), Some(Duration::from_millis(150)));
        let due = backlog.take_due(t0 + every, false);
        assert_eq!(due[&1].iter().map(|f| f.ts).collect::<Vec<_>>(), [15, 30]);
        // Asked again (a restart), with no fixes: due at once when taken all.
        backlog.again([1, 2]);
        let all = backlog.take_due(t0 + every, true);
        assert_eq!((all.len(), all[&1].len()), (2, 0));
        assert_eq!(backlog.wait(t0 + every), None);
    }

    #[test]
    fn fixes_that_follow_resume_a_late_one_rebuilds_and_each_event_is_announced_once() {
        let dir = std::env::temp_dir().join(format!("fleetctl-live-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("live.db");
        let _ = std::fs::remove_file(&path);
        store::build_new(&path, false, store::LIVE_PAGE_SIZE, |w| {
            w.set_meta("schema_version", &store::SCHEMA_VERSION.to_string())
        })
        .unwrap();
        store::with_write_transaction(&path, |conn| {
            store::live::add_vehicle(conn, "P-1", Some("d1")).map(drop)
        })
        .unwrap();
        let (mut writer, mut analyser) = open(
            &store::Location::File(path.clone()),
            Options {
                auto_register: None,
                osmand_speed: SpeedUnit::Kmh,
                outbox: false,
            },
        )
        .unwrap();
        let push = |ts: i64, lat: f64, speed_kmh: f64| Request {
            endpoint: Endpoint::Osmand,
            query: protocols::form_pairs(&format!(
                "id=d1&timestamp={ts}&lat={lat}&lon=-90.5&speed={speed_kmh}"
            )),
            body: Vec::new(),
            json: false,
        };
        let t0 = 1_795_000_000;
        // Each group's commit stores the rows the analysis worked out after the last.
        let mut pending = Vec::new();
        let mut step = |request: Request| {
            let c = writer.commit(&[request], std::mem::take(&mut pending), &[], t0 + 10_000);
            assert!(c.outcomes[0].is_ok(), "{:?}", c.outcomes[0]);
            assert_eq!(c.rows_failed, None);
            if let Some(epoch) = c.restart {
                analyser.restart(epoch).unwrap();
            }
            let (rows, a) = analyser.analyse(&c.added).unwrap();
            pending.push(rows);
            a
        };
        let (mut resumed, mut rebuilt, mut announced) = (0, 0, Vec::new());
        let mut lat = 14.6;
        for k in 0..20 {
            // Fixes 5 to 11 at 133 km/h: one speeding episode of 90 s.
            let speed_kmh = if (5..12).contains(&k) { 133.2 } else { 26.6 };
            lat += speed_kmh / 3.6 * 15.0 / 111_000.0;
            let a = step(push(t0 + k * 15, lat, speed_kmh));
            resumed += a.resumed;
            rebuilt += a.rebuilt;
            announced.extend(
                a.new_events
                    .iter()
                    .map(|e| (k, e.event.kind, e.event.start_ts, e.ongoing)),
            );
        }
        assert_eq!((resumed, rebuilt), (19, 1));
        // Announced once, as soon as its fixes prove 20 s over the limit: three
        // fixes 15 s apart; going on, for the newest fix is one of them.
        assert_eq!(
            announced,
            vec![(7, crate::model::EventKind::Speeding, t0 + 5 * 15, true)]
        );
        let a = step(push(t0 + 7, 14.6, 26.6));
        assert_eq!((a.resumed, a.rebuilt), (0, 1));
        assert_eq!(
            a.new_events,
            vec![],
            "a rebuild announces nothing already stored"
        );
        // Parked for 20 minutes, driven for 20: a fix 5 minutes late lands after
        // the stop, and only the drive since it is analysed again.
        // (The stop starts at the fix that arrived there, and ends at the last one.)
        let (stopped, drove) = (t0 + 19 * 15, t0 + 99 * 15);
        for k in 20..100 {
            let a = step(push(t0 + k * 15, lat + 1e-5 * (k % 3) as f64, 0.0));
            assert_eq!((a.resumed, a.rewound, a.rebuilt), (1, 0, 0));
        }
        for k in 100..180 {
            if k != 160 {
                lat += 1e-3;
                step(push(t0 + k * 15, lat, 26.6));
            }
        }
        let a = step(push(t0 + 160 * 15, lat - 5e-4, 26.6));
        assert_eq!((a.resumed, a.rewound, a.rebuilt), (0, 1, 0));
        let flushed = writer.commit(&[], std::mem::take(&mut pending), &[], t0 + 10_000);
        assert_eq!(flushed.rows_failed, None);
        // What is stored is what an analysis of the whole answers.
        let stored = |path: &std::path::Path| {
            let conn = store::open_read_only(path).unwrap();
            (
                store::read::stops_between(&conn, 1, 0, i64::MAX).unwrap(),
                store::read::events_between(&conn, Some(1), &[], 0, i64::MAX).unwrap(),
                store::read::daily_between(&conn, Some(1), "2000-01-01", "2099-12-31").unwrap(),
            )
        };
        // Closed, the feed's connections leave everything in the file.
        drop((writer, analyser));
        let live = stored(&path);
        let stop: Vec<_> = live.0.iter().map(|s| (s.start_ts, s.end_ts)).collect();
        assert_eq!(stop, [(stopped, drove)]);
        let again = dir.join("again.db");
        std::fs::copy(&path, &again).unwrap();
        crate::pipeline::reanalyze(&again, &|_| {}, &mut |_| {}).unwrap();
        assert_eq!(live, stored(&again));
        std::fs::remove_dir_all(&dir).ok();
    }
}
