//! The live feed: positions that trackers and phone apps push to `fleetctl serve
//! --http --ingest`, read from their own protocols (`protocols`) and committed to the
//! store in groups (`Ingestor::commit`), each device known by its id
//! (`vehicles.device_id`). The transport (HTTP, the group's queue, the answers) is
//! the server's; what a request means and what is stored is decided here.

pub mod protocols;

use crate::analyze::{self, window::Tail};
use crate::clock::FleetZone;
use crate::error::{Error, ErrorCode, Result};
use crate::ingest::units::SpeedUnit;
use crate::model::{Event, EventKey, Fix, VehicleAnalysis};
use crate::store::{self, WrittenRows};
use protocols::{Batch, Reading};
use rusqlite::{Connection, TransactionBehavior};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Creates an empty database for a live fleet at `path` (never over an existing
/// file): its zone, and the wall clock as its "now". Vehicles are then added with
/// `vehicles add PLATE --device-id ID`.
pub fn init(path: &std::path::Path, zone: &FleetZone) -> Result<()> {
    if path.exists() {
        return Err(Error::invalid(format!("{} already exists", path.display())).with_hint(
            "a live fleet starts from an empty database: give another --db path; an existing fleet takes pushed positions as it is (`serve --http --ingest`)",
        ));
    }
    store::build_new(path, false, |w| {
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
    /// A device with no vehicle gets one (plate = its id) instead of a refusal.
    pub auto_register: bool,
    /// The unit of the OsmAnd protocol's `speed` field.
    pub osmand_speed: SpeedUnit,
}

/// Reads requests and commits them in groups, on the feed's one writing connection.
pub struct Ingestor {
    zone: FleetZone,
    options: Options,
}

/// What a group's commit came to: each request's outcome, in order, and the fixes
/// it added, by vehicle.
pub struct Committed {
    /// Each request's outcome, in the group's order.
    pub outcomes: Vec<Result<Accepted>>,
    /// The fixes stored, by vehicle (to analyse).
    pub added: BTreeMap<i64, Vec<Fix>>,
}

impl Ingestor {
    /// An ingestor for the database `conn` holds (its zone reads naive local times).
    pub fn new(conn: &Connection, options: Options) -> Result<Ingestor> {
        Ok(Ingestor {
            zone: store::read_zone(conn)?,
            options,
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

    /// Reads and stores a group of requests in one transaction: each request whole
    /// or not at all (a refused one leaves the others), the group committed — on
    /// disk, `synchronous = FULL` — before this returns. A failed commit fails every
    /// request of the group.
    pub fn commit(&self, conn: &mut Connection, group: &[Request], now: i64) -> Committed {
        let mut added: BTreeMap<i64, Vec<Fix>> = BTreeMap::new();
        let mut tx = match conn.transaction_with_behavior(TransactionBehavior::Immediate) {
            Ok(tx) => tx,
            Err(e) => return self.all_failed(group.len(), &e.to_string()),
        };
        let mut outcomes = Vec::with_capacity(group.len());
        for request in group {
            let outcome = match self.read(request, now) {
                Err(e) => Err(e),
                Ok(batch) => match tx.savepoint() {
                    Err(e) => Err(savepoint_err(e)),
                    // Dropped without commit, a savepoint rolls its request back.
                    Ok(sp) => self.store_batch(&sp, batch).and_then(|stored| {
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
        if let Err(e) = tx.commit() {
            return self.all_failed(group.len(), &e.to_string());
        }
        Committed { outcomes, added }
    }

    fn all_failed(&self, n: usize, why: &str) -> Committed {
        Committed {
            outcomes: (0..n)
                .map(|_| {
                    Err(Error::new(
                        ErrorCode::Io,
                        format!("the fixes could not be committed: {why}"),
                    )
                    .with_hint("nothing of this request was stored; send it again"))
                })
                .collect(),
            added: BTreeMap::new(),
        }
    }

    /// Stores one request's fixes; what was stored, and the new fixes.
    fn store_batch(&self, conn: &Connection, batch: Batch) -> Result<(Accepted, Vec<Fix>)> {
        let mut by_vehicle: BTreeMap<i64, Vec<protocols::Pushed>> = BTreeMap::new();
        let mut known: HashMap<String, i64> = HashMap::new();
        for fix in batch.fixes {
            if let Some(&vehicle) = known.get(&fix.device_id) {
                by_vehicle.entry(vehicle).or_default().push(fix);
                continue;
            }
            let vehicle = match store::live::vehicle_of_device(conn, &fix.device_id)? {
                Some(v) => v,
                None if self.options.auto_register => {
                    store::live::add_vehicle(conn, &fix.device_id, Some(&fix.device_id))?
                }
                None => {
                    return Err(Error::new(
                        ErrorCode::NotFound,
                        format!("device {:?} belongs to no vehicle", fix.device_id),
                    )
                    .with_hint(format!(
                        "add it: `fleetctl vehicles add PLATE --device-id {}` (or start the server with --auto-register)",
                        fix.device_id
                    )));
                }
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

/// The feed's one writing connection (`store::live::open_writer`: WAL,
/// `synchronous = FULL`), shared by the two halves of the feed: the [`Writer`]
/// that commits pushed fixes, and the [`Analyser`] that brings the derived rows up
/// to date after them. Each holds it only while it touches the database.
type SharedConnection = Arc<Mutex<Connection>>;

/// Commits pushed requests in groups on the feed's connection.
pub struct Writer {
    conn: SharedConnection,
    ingestor: Ingestor,
    /// The database's `data_version` when the zone was read: another connection's
    /// commit (`settings`, an import) changes it.
    seen_version: i64,
}

/// Re-analyses the vehicles that got fixes, each from its open detection
/// (`analyze::window::Tail`), on the feed's connection.
pub struct Analyser {
    conn: SharedConnection,
    ctx: analyze::Context,
    /// The database's `data_version` when `ctx` was read: another connection's
    /// commit (an import, `vehicles set`, `analyze`) changes it.
    seen_version: i64,
    tails: HashMap<i64, LiveVehicle>,
}

/// A vehicle's open detection, the provisional rows it last wrote, and the events
/// among them (already announced).
struct LiveVehicle {
    tail: Tail,
    provisional: WrittenRows,
    provisional_events: HashSet<EventKey>,
}

/// How a round of analysis went, and the events it brought.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Analysed {
    /// Vehicles whose new fixes followed all they had: only the stretch after
    /// their last finished stop was analysed again.
    pub resumed: usize,
    /// Vehicles analysed whole: seen first since the server started, a fix older
    /// than their newest, or the fleet's settings changed.
    pub rebuilt: usize,
    /// The events found that were not there before this analysis (a stored event,
    /// or one of a vehicle's open stretch already announced, is not new): the live
    /// alerts. An event still open (a long stop going on) is new once, when first
    /// found.
    pub new_events: Vec<Event>,
}

/// Opens the database at `path` for the feed: its writer and its analyser.
pub fn open(path: &std::path::Path, options: Options) -> Result<(Writer, Analyser)> {
    let conn = store::live::open_writer(path)?;
    let ingestor = Ingestor::new(&conn, options)?;
    let ctx = crate::pipeline::stored_context(&conn)?;
    let seen_version = store::live::data_version(&conn)?;
    let conn = Arc::new(Mutex::new(conn));
    Ok((
        Writer {
            conn: conn.clone(),
            ingestor,
            seen_version,
        },
        Analyser {
            conn,
            ctx,
            seen_version,
            tails: HashMap::new(),
        },
    ))
}

/// The feed's connection, even if the other half panicked while holding it (its
/// transaction then rolled back when dropped).
fn lock(conn: &SharedConnection) -> MutexGuard<'_, Connection> {
    conn.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Writer {
    /// Commits a group of requests (`Ingestor::commit`) with the wall clock `now`.
    pub fn commit(&mut self, group: &[Request], now: i64) -> Committed {
        let mut conn = lock(&self.conn);
        match store::live::data_version(&conn) {
            Ok(version) if version == self.seen_version => {}
            Ok(version) => {
                // Somebody else wrote: the zone naive local times are read in may differ.
                match store::read_zone(&conn) {
                    Ok(zone) => self.ingestor.zone = zone,
                    Err(e) => return self.ingestor.all_failed(group.len(), &e.message),
                }
                self.seen_version = version;
            }
            Err(e) => return self.ingestor.all_failed(group.len(), &e.message),
        }
        self.ingestor.commit(&mut conn, group, now)
    }
}

/// One vehicle's share of a round: its new fixes, and what resuming its open
/// detection made of them (worked out before the connection is taken).
struct Resumed {
    vehicle: i64,
    done_rows: VehicleAnalysis,
    provisional: VehicleAnalysis,
}

impl Analyser {
    /// Brings the derived rows up to date with fixes committed since the last call,
    /// by vehicle (several groups' worth at once is the point: a vehicle's detection
    /// runs once for all its new fixes), in one transaction. A vehicle whose new
    /// fixes all follow its newest is resumed from its last finished stop (its
    /// provisional rows replaced); any other is analysed whole. The result equals a
    /// full `analyze` of the same positions.
    pub fn analyse(&mut self, added: &BTreeMap<i64, Vec<Fix>>) -> Result<Analysed> {
        {
            let conn = lock(&self.conn);
            let version = store::live::data_version(&conn)?;
            if version != self.seen_version {
                // Somebody else wrote: settings, geofences or derived rows may differ.
                self.ctx = crate::pipeline::stored_context(&conn)?;
                self.tails.clear();
                self.seen_version = version;
            }
        }
        let done = self.analyse_in_one_transaction(added);
        if done.is_err() {
            // The transaction rolled back; the open detections may be ahead of the
            // database: start each vehicle afresh.
            self.tails.clear();
        }
        done
    }

    fn analyse_in_one_transaction(&mut self, added: &BTreeMap<i64, Vec<Fix>>) -> Result<Analysed> {
        let mut done = Analysed::default();
        // The detection runs without the connection, so that commits go on meanwhile.
        let mut resumed = Vec::new();
        let mut rebuild_whole = Vec::new();
        for (&vehicle, fixes) in added {
            let Some(live) = self.tails.get_mut(&vehicle) else {
                rebuild_whole.push(vehicle);
                continue;
            };
            // A vehicle analysed whole since these fixes were committed holds them.
            let mut fixes: Vec<Fix> = fixes
                .iter()
                .filter(|f| !live.tail.holds(f.ts))
                .copied()
                .collect();
            fixes.sort_by_key(|f| f.ts);
            let Some(first) = fixes.first() else { continue };
            if live.tail.last_ts().is_some_and(|last| first.ts <= last) {
                rebuild_whole.push(vehicle);
                continue;
            }
            let done_rows = live.tail.push(fixes, &self.ctx);
            let provisional = live.tail.provisional(&self.ctx);
            let announced = std::mem::take(&mut live.provisional_events);
            done.new_events.extend(
                (done_rows.events.iter().chain(&provisional.events))
                    .filter(|e| !announced.contains(&e.key()))
                    .cloned(),
            );
            live.provisional_events = provisional.events.iter().map(Event::key).collect();
            resumed.push(Resumed {
                vehicle,
                done_rows,
                provisional,
            });
        }
        let mut conn = lock(&self.conn);
        let tx = conn.transaction().map_err(savepoint_err)?;
        for r in resumed {
            let live = self.tails.get_mut(&r.vehicle).expect("resumed above");
            // The last provisional rows go first: a day they held may now be final.
            store::delete_rows(&tx, &live.provisional)?;
            store::write_rows(&tx, &r.done_rows)?;
            live.provisional = store::write_rows(&tx, &r.provisional)?;
            done.resumed += 1;
        }
        for vehicle in rebuild_whole {
            let known = store::live::event_keys(&tx, vehicle)?;
            let live = rebuild(&tx, vehicle, &self.ctx, |e| {
                if !known.contains(&e.key()) {
                    done.new_events.push(e.clone());
                }
            })?;
            self.tails.insert(vehicle, live);
            done.rebuilt += 1;
        }
        tx.commit().map_err(savepoint_err)?;
        Ok(done)
    }
}

/// Analyses one vehicle whole, a window at a time, replacing its derived rows, and
/// keeps its detection open; each event found goes to `found`.
fn rebuild(
    conn: &Connection,
    vehicle: i64,
    ctx: &analyze::Context,
    mut found: impl FnMut(&Event),
) -> Result<LiveVehicle> {
    store::DerivedWriter::for_vehicles(conn, &[vehicle])?;
    let mut tail = Tail::default();
    store::read_fixes(conn, Some(vehicle), |next| {
        let mut chunk = Vec::new();
        loop {
            let fix = next()?;
            let end = fix.is_none();
            chunk.extend(fix);
            if end || chunk.len() >= analyze::window::WINDOW_FIXES {
                let done = tail.push(std::mem::take(&mut chunk), ctx);
                done.events.iter().for_each(&mut found);
                store::write_rows(conn, &done)?;
            }
            if end {
                return Ok(());
            }
        }
    })?;
    let open = tail.provisional(ctx);
    open.events.iter().for_each(&mut found);
    Ok(LiveVehicle {
        provisional: store::write_rows(conn, &open)?,
        provisional_events: open.events.iter().map(Event::key).collect(),
        tail,
    })
}

fn savepoint_err(e: rusqlite::Error) -> Error {
    Error::new(ErrorCode::Io, format!("database write failed: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixes_that_follow_resume_a_late_one_rebuilds_and_each_event_is_announced_once() {
        let dir = std::env::temp_dir().join(format!("fleetctl-live-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("live.db");
        let _ = std::fs::remove_file(&path);
        store::build_new(&path, false, |w| {
            w.set_meta("schema_version", &store::SCHEMA_VERSION.to_string())
        })
        .unwrap();
        store::with_write_transaction(&path, |conn| {
            store::live::add_vehicle(conn, "P-1", Some("d1")).map(drop)
        })
        .unwrap();
        let (mut writer, mut analyser) = open(
            &path,
            Options {
                auto_register: false,
                osmand_speed: SpeedUnit::Kmh,
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
        let (mut resumed, mut rebuilt, mut announced) = (0, 0, Vec::new());
        let mut lat = 14.6;
        for k in 0..20 {
            // Fixes 5 to 11 at 133 km/h: one speeding episode of 90 s.
            let speed_kmh = if (5..12).contains(&k) { 133.2 } else { 26.6 };
            lat += speed_kmh / 3.6 * 15.0 / 111_000.0;
            let c = writer.commit(&[push(t0 + k * 15, lat, speed_kmh)], t0 + 10_000);
            assert!(c.outcomes[0].is_ok(), "{:?}", c.outcomes[0]);
            let a = analyser.analyse(&c.added).unwrap();
            resumed += a.resumed;
            rebuilt += a.rebuilt;
            announced.extend(a.new_events.iter().map(|e| (k, e.kind, e.start_ts)));
        }
        assert_eq!((resumed, rebuilt), (19, 1));
        // Announced once, as soon as its fixes prove 20 s over the limit: two fixes
        // 15 s apart, and half the interval at each end.
        assert_eq!(
            announced,
            vec![(6, crate::model::EventKind::Speeding, t0 + 5 * 15)]
        );
        let late = writer.commit(&[push(t0 + 7, 14.6, 26.6)], t0 + 10_000);
        let a = analyser.analyse(&late.added).unwrap();
        assert_eq!((a.resumed, a.rebuilt), (0, 1));
        assert_eq!(
            a.new_events,
            vec![],
            "a rebuild announces nothing already stored"
        );
        std::fs::remove_dir_all(&dir).ok();
    }
}
