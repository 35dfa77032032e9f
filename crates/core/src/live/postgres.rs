//! The live feed on PostgreSQL, where several servers may take pushes for one
//! fleet at once: each group of requests is one transaction of fixes (committed
//! before a device hears 200), and each server's analyser writes the rows of the
//! vehicles that got fixes itself, a vehicle at a time under the vehicle's advisory
//! lock — the lock `analyze` and the other servers take — resuming a vehicle's
//! open detection only while nobody else has analysed it since (its newest-fix
//! row's `xmin` says so), else analysing it whole.

use super::{
    Analysed, Committed, Ingestor, Options, Redo, Request, Rows, VehicleRows, announce, rebuild,
    rewound,
};
use crate::analyze::{self, window::Tail};
use crate::error::{Error, Result};
use crate::model::{EventKey, Fix};
use crate::store::{self, pg, pg::PgConn};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Opens a fleet on PostgreSQL for the feed: the writer's connection and the
/// analyser's.
pub(super) fn open(target: &pg::Target, options: Options) -> Result<(PgWriter, PgAnalyser)> {
    let conn = writer_connection(target)?;
    let outbox = options.outbox;
    let ingestor = Ingestor::new(&conn, options)?;
    let reader = feed_connection(target)?;
    let ctx = crate::pipeline::stored_context(&reader)?;
    let revision = reader.freshness()?.revision;
    Ok((
        PgWriter {
            conn,
            ingestor,
            ahead_due: 0,
        },
        PgAnalyser {
            conn: reader,
            ctx,
            revision,
            held: Held::default(),
            unsent: Vec::new(),
            outbox,
        },
    ))
}

/// The ingest writer's connection: on the primary, its commits durable.
fn writer_connection(target: &pg::Target) -> Result<PgConn> {
    let conn = feed_connection(target)?;
    pg::refuse_standby(&conn, "taking pushes (--ingest)")?;
    pg::durable_commits(&conn)?;
    Ok(conn)
}

/// A connection of the feed's own: the server's lock timeout, but no statement
/// timeout (a whole vehicle's analysis streams its history in one statement, for as
/// long as that takes; the request timeout is the tools').
fn feed_connection(target: &pg::Target) -> Result<PgConn> {
    let conn = pg::open_reader(target)?;
    pg::execute(&conn, "SET statement_timeout = 0")?;
    Ok(conn)
}

/// A connection the server closed is opened again before the next use; until it
/// opens, the work is refused as busy (503, retried by devices), never as stored.
fn reconnected(
    conn: &mut PgConn,
    open: impl FnOnce(&pg::Target) -> Result<PgConn>,
) -> Result<bool> {
    if !conn.is_closed() {
        return Ok(false);
    }
    let target = conn.target().clone();
    *conn = open(&target).map_err(|e| {
        Error::new(
            crate::error::ErrorCode::Busy,
            format!(
                "the connection to {} was lost and is not back yet: {}",
                target.display(),
                e.message
            ),
        )
        .with_hint(
            "nothing of this request was stored; retry shortly (the server reconnects by itself)",
        )
    })?;
    Ok(true)
}

/// Commits groups of pushed requests on one connection.
pub struct PgWriter {
    conn: PgConn,
    ingestor: Ingestor,
    /// When to make sure of the coming months' partitions again (UTC epoch
    /// seconds): at once, and a minute after a try that could not have the lock.
    ahead_due: i64,
}

impl PgWriter {
    /// Reads and stores a group of requests in one transaction: each request whole
    /// or not at all (a savepoint each), all committed together.
    pub(super) fn commit(&mut self, group: &[Request], now: i64) -> Committed {
        if let Err(e) = reconnected(&mut self.conn, writer_connection) {
            return self.ingestor.all_failed_as(group.len(), e);
        }
        if self.ahead_due <= now {
            // Best effort: a month that is still missing when a fix needs it is made
            // inside the group's transaction.
            self.ahead_due = match pg::make_months_ahead(&self.conn, now) {
                Ok(()) => now,
                Err(_) => now + 60,
            };
        }
        match self.commit_group(group, now) {
            Ok(committed) => {
                // Made inside the group's transaction, and committed with it.
                self.conn.months_made_inside().clear();
                committed
            }
            // Lost under this group (or ended by the server: the connection may not
            // know it yet): refused as busy, the next group reconnects.
            Err(e) if self.conn.is_closed() || e.code == crate::error::ErrorCode::Busy => {
                pg::forget_months(&self.conn);
                self.ingestor.all_failed_as(
                    group.len(),
                    Error::new(
                        crate::error::ErrorCode::Busy,
                        format!("the database connection was lost: {}", e.message),
                    )
                    .with_hint("nothing of this request was stored; retry shortly (the server reconnects by itself)"),
                )
            }
            Err(e) => {
                pg::forget_months(&self.conn);
                self.ingestor.all_failed(group.len(), &e.message)
            }
        }
    }

    fn commit_group(&mut self, group: &[Request], now: i64) -> Result<Committed> {
        let conn = &self.conn;
        let ingestor = &self.ingestor;
        pg::in_transaction(conn, || {
            let mut added: BTreeMap<i64, Vec<Fix>> = BTreeMap::new();
            let mut outcomes = Vec::with_capacity(group.len());
            for request in group {
                let outcome = match ingestor.read(request, now) {
                    Err(e) => Err(e),
                    Ok(batch) => {
                        pg::execute(conn, "SAVEPOINT request")?;
                        match ingestor.store_batch(conn, batch, now) {
                            Ok(stored) => {
                                pg::execute(conn, "RELEASE SAVEPOINT request")?;
                                Ok(stored)
                            }
                            Err(e) => {
                                pg::execute(conn, "ROLLBACK TO SAVEPOINT request")?;
                                // A partition made inside the savepoint went with
                                // it (those made ahead, outside, did not).
                                pg::forget_months_made_inside(conn);
                                Err(e)
                            }
                        }
                    }
                };
                outcomes.push(outcome.map(|(accepted, stored)| {
                    for fix in stored {
                        added.entry(fix.vehicle_id).or_default().push(fix);
                    }
                    accepted
                }));
            }
            Ok(Committed {
                outcomes,
                added,
                restart: None,
                rows_failed: None,
                commit_failed: None,
                announce: Vec::new(),
            })
        })
    }
}

/// Analyses the vehicles that got fixes and writes their rows, each vehicle in a
/// transaction of its own under its lock.
pub struct PgAnalyser {
    conn: PgConn,
    ctx: analyze::Context,
    /// The fleet's revision (`PgConn::freshness`) when the settings were read:
    /// another means meta, vehicles, geofences or places changed.
    revision: i64,
    held: Held,
    /// New events of vehicles whose rows were committed in a round that then
    /// failed on another vehicle: announced with the next round's.
    unsent: Vec<crate::live::NewEvent>,
    /// Alerts go to a webhook: each vehicle's new events are queued in its
    /// analysis's transaction.
    outbox: bool,
}

/// What an analyser holds of the vehicles it analysed.
#[derive(Default)]
struct Held {
    /// Each vehicle's open detection.
    tails: HashMap<i64, Tail>,
    /// Each vehicle's events announced lately (see the file feed's).
    announced: HashMap<i64, HashSet<EventKey>>,
    /// What this analyser last wrote for a vehicle: the stamp of that write, the
    /// provisional rows to take back, and the next ids.
    written: HashMap<i64, Written>,
}

/// One vehicle's last write by this analyser.
struct Written {
    stamp: i64,
    provisional: pg::WrittenKeys,
    /// Its final rows of each segment of detection a rewind can still take back.
    segments: BTreeMap<u64, pg::WrittenKeys>,
    next: pg::NextIds,
}

impl Written {
    /// Writes a vehicle's rows in place of those they redo (`from`), in the
    /// caller's transaction.
    fn write(
        &mut self,
        c: &mut postgres::Client,
        target: &pg::Target,
        from: Redo,
        rows: &VehicleRows,
    ) -> Result<()> {
        pg::delete_written(c, target, &self.provisional)?;
        if let Redo::Rewound(segment) = from {
            for keys in self.segments.split_off(&segment).values() {
                pg::delete_written(c, target, keys)?;
            }
        }
        for (segment, found) in &rows.done.segments {
            let keys = pg::append_analysis(c, target, found, &mut self.next)?;
            self.segments.entry(*segment).or_default().extend(keys);
        }
        self.segments = self.segments.split_off(&rows.oldest_segment);
        self.provisional = pg::append_analysis(c, target, &rows.provisional, &mut self.next)?;
        Ok(())
    }
}

impl PgAnalyser {
    /// Forgets every open detection: the vehicles that had one.
    pub(super) fn forget(&mut self) -> Vec<i64> {
        self.held.written.clear();
        self.held
            .tails
            .drain()
            .map(|(vehicle, _)| vehicle)
            .collect()
    }

    /// Reads the settings again.
    pub(super) fn restart(&mut self) -> Result<()> {
        self.held.tails.clear();
        self.held.written.clear();
        self.ctx = crate::pipeline::stored_context(&self.conn)?;
        self.revision = self.conn.freshness()?.revision;
        Ok(())
    }

    /// Analyses each vehicle of `added` and writes its rows (nothing is left for
    /// the writer).
    pub(super) fn analyse(&mut self, added: &BTreeMap<i64, Vec<Fix>>) -> Result<(Rows, Analysed)> {
        if reconnected(&mut self.conn, feed_connection)? {
            // What it held may have been written by others meanwhile.
            self.restart()?;
        }
        if self.conn.freshness()?.revision != self.revision {
            // An edit re-analyses every vehicle itself; what this analyser held
            // was worked out with the old settings.
            self.restart()?;
        }
        let mut done = Analysed {
            new_events: std::mem::take(&mut self.unsent),
            ..Analysed::default()
        };
        let (conn, ctx, held, outbox) = (&self.conn, &self.ctx, &mut self.held, self.outbox);
        let now = crate::clock::wall_clock_now();
        for (&vehicle, fixes) in added {
            let before = done.new_events.len();
            let outcome = pg::in_transaction(conn, || {
                conn.with_client(|c| pg::lock_vehicle(c, conn.target(), vehicle))?;
                held.analyse_vehicle(conn, ctx, vehicle, fixes, &mut done)?;
                if outbox {
                    store::live::outbox_queue(conn, &done.new_events[before..], now)?;
                }
                Ok(())
            });
            if let Err(e) = outcome {
                // What was held may be ahead of what is stored; this vehicle's
                // events were not stored (nor counted announced: it is analysed
                // whole again, from what is stored), the ones before it were.
                held.tails.remove(&vehicle);
                held.written.remove(&vehicle);
                if let Some(keys) = held.announced.get_mut(&vehicle) {
                    for ev in &done.new_events[before..] {
                        keys.remove(&ev.event.key());
                    }
                }
                done.new_events.truncate(before);
                self.unsent = done.new_events;
                return Err(e);
            }
        }
        Ok((
            Rows {
                epoch: 0,
                vehicles: Vec::new(),
                events: Vec::new(),
            },
            done,
        ))
    }
}

impl Held {
    /// One vehicle, its lock held: resumed from its open detection when nobody
    /// analysed it since this analyser did and its new fixes all follow what it
    /// holds, else analysed whole; its rows written and its stamp kept.
    fn analyse_vehicle(
        &mut self,
        conn: &PgConn,
        ctx: &analyze::Context,
        vehicle: i64,
        fixes: &[Fix],
        done: &mut Analysed,
    ) -> Result<()> {
        let target = conn.target().clone();
        let stamp = conn.with_client(|c| pg::analysis_stamp(c, &target, vehicle))?;
        let ours = self
            .written
            .get(&vehicle)
            .is_some_and(|w| Some(w.stamp) == stamp);
        let announced = self.announced.entry(vehicle).or_default();
        // Every fix from the newest held on, whichever server stored it, less those
        // held: resumed when all of them are newer than what is held; a late fix,
        // or another in the newest's second, takes detection back to its last
        // checkpoint before it, or has the whole vehicle analysed again.
        let redo = match self.tails.get_mut(&vehicle) {
            Some(tail) if ours => {
                let last = tail.last_ts();
                let mut new = Vec::new();
                let from = last.unwrap_or(i64::MIN);
                store::read::positions_between(conn, vehicle, from, i64::MAX, &mut |f, _| {
                    if !tail.holds(f) {
                        new.push(*f)
                    }
                })?;
                let late = fixes
                    .iter()
                    .chain(&new)
                    .filter(|f| !tail.holds(f) && last.is_some_and(|l| f.ts <= l))
                    .map(|f| f.ts)
                    .min();
                match late {
                    Some(ts) => rewound(conn, vehicle, tail, ts, ctx)?,
                    None if new.is_empty() => return Ok(()),
                    None => {
                        let settled = tail.push(new, ctx);
                        let provisional = tail.provisional(ctx);
                        Some((Redo::Resumed, settled, provisional))
                    }
                }
            }
            _ => None,
        };
        if let Some((from, settled, provisional)) = redo {
            let tail = &self.tails[&vehicle];
            announce(
                announced,
                settled.events().chain(&provisional.events),
                tail.last_ts(),
                &mut done.new_events,
            );
            let rows = VehicleRows {
                vehicle,
                from,
                done: settled,
                provisional,
                oldest_segment: tail.oldest_segment(),
            };
            let written = self.written.get_mut(&vehicle).expect("ours");
            conn.with_client(|c| written.write(c, &target, from, &rows))?;
            written.stamp = stamp_of(conn, vehicle)?;
            match from {
                Redo::Rewound(_) => done.rewound += 1,
                _ => done.resumed += 1,
            }
            return Ok(());
        }
        // Stored events are known; so are those announced but not stored yet.
        announced.extend(store::live::event_keys(conn, vehicle)?);
        let (tail, whole) = rebuild(conn, vehicle, ctx)?;
        announce(
            announced,
            whole.done.events().chain(&whole.provisional.events),
            tail.last_ts(),
            &mut done.new_events,
        );
        let mut written = Written {
            stamp: 0,
            provisional: pg::WrittenKeys::default(),
            segments: BTreeMap::new(),
            next: pg::NextIds::default(),
        };
        conn.with_client(|c| {
            pg::delete_vehicle_rows(c, &target, vehicle)?;
            written.write(c, &target, Redo::Whole, &whole)
        })?;
        written.stamp = stamp_of(conn, vehicle)?;
        self.tails.insert(vehicle, tail);
        self.written.insert(vehicle, written);
        done.rebuilt += 1;
        Ok(())
    }
}

/// The stamp of the vehicle's rows this transaction wrote.
fn stamp_of(conn: &PgConn, vehicle: i64) -> Result<i64> {
    let target = conn.target().clone();
    conn.with_client(|c| pg::analysis_stamp(c, &target, vehicle))?
        .ok_or_else(|| {
            Error::internal(format!(
                "vehicle {vehicle}'s rows were written without its newest fix"
            ))
        })
}
