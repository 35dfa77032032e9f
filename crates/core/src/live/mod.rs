//! The live feed: positions that trackers and phone apps push to `fleetctl serve
//! --http --ingest`, read from their own protocols (`protocols`) and committed to the
//! store in groups (`Ingestor::commit`), each device known by its id
//! (`vehicles.device_id`). The transport (HTTP, the group's queue, the answers) is
//! the server's; what a request means and what is stored is decided here.

pub mod protocols;

use crate::clock::FleetZone;
use crate::error::{Error, ErrorCode, Result};
use crate::ingest::units::SpeedUnit;
use crate::store;
use protocols::{Batch, Reading};
use rusqlite::{Connection, TransactionBehavior};
use std::collections::BTreeMap;

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
#[derive(Debug, Clone, Default, PartialEq)]
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

/// What a group's commit came to: each request's outcome, in order, and the
/// vehicles that got new fixes.
pub struct Committed {
    /// Each request's outcome, in the group's order.
    pub outcomes: Vec<Result<Accepted>>,
    /// The vehicles with new fixes (to re-analyse).
    pub touched: Vec<i64>,
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
        let mut touched = std::collections::BTreeSet::new();
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
            outcomes.push(outcome.map(|(accepted, vehicles)| {
                touched.extend(vehicles);
                accepted
            }));
        }
        if let Err(e) = tx.commit() {
            return self.all_failed(group.len(), &e.to_string());
        }
        Committed {
            outcomes,
            touched: touched.into_iter().collect(),
        }
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
            touched: Vec::new(),
        }
    }

    /// Stores one request's fixes; what was stored and which vehicles got them.
    fn store_batch(&self, conn: &Connection, batch: Batch) -> Result<(Accepted, Vec<i64>)> {
        let mut by_vehicle: BTreeMap<i64, Vec<protocols::Pushed>> = BTreeMap::new();
        for fix in batch.fixes {
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
            by_vehicle.entry(vehicle).or_default().push(fix);
        }
        let mut accepted = Accepted {
            ignored: batch.ignored,
            ..Accepted::default()
        };
        let mut touched = Vec::new();
        for (vehicle, fixes) in by_vehicle {
            let stored = store::live::append_pushed(conn, vehicle, &fixes)?;
            accepted.stored += stored;
            accepted.duplicates += fixes.len() - stored;
            if stored > 0 {
                touched.push(vehicle);
            }
        }
        Ok((accepted, touched))
    }
}

/// The feed's one writing connection (`store::live::open_writer`: WAL,
/// `synchronous = FULL`) and what reads its requests.
pub struct Writer {
    conn: Connection,
    ingestor: Ingestor,
}

impl Writer {
    /// Opens the database at `path` for the feed.
    pub fn open(path: &std::path::Path, options: Options) -> Result<Writer> {
        let conn = store::live::open_writer(path)?;
        let ingestor = Ingestor::new(&conn, options)?;
        Ok(Writer { conn, ingestor })
    }

    /// Commits a group of requests (`Ingestor::commit`) with the wall clock `now`.
    pub fn commit(&mut self, group: &[Request], now: i64) -> Committed {
        self.ingestor.commit(&mut self.conn, group, now)
    }

    /// Re-runs detection for `vehicles` (those that got fixes), in one transaction.
    pub fn reanalyse(&mut self, vehicles: &[i64]) -> Result<()> {
        let tx = self.conn.transaction().map_err(savepoint_err)?;
        crate::pipeline::detect_vehicles(&tx, vehicles, &mut |_| {})?;
        tx.commit().map_err(savepoint_err)
    }
}

fn savepoint_err(e: rusqlite::Error) -> Error {
    Error::new(ErrorCode::Io, format!("database write failed: {e}"))
}
