//! The live feed, a server of its own beside the MCP one: what devices push to
//! `serve --http --ingest` (the HTTP side, `mcp/http/ingest.rs`, checks the ingest
//! token and reads the body within its own limit, [`MAX_INGEST_BODY_BYTES`]) joins
//! the queue of the one writer thread, which commits whatever has queued as one group
//! (`live::Writer::commit`, WAL with `synchronous = FULL`) and then answers each
//! request: a 200 means the fixes are on disk. The analyser thread works out the
//! vehicles' rows from those fixes (each vehicle at most every `COALESCE`, all its
//! new fixes at once, so that it keeps up at any rate), and the writer stores them
//! with its next group (docs/live.md: within milliseconds idle, under a second at
//! full load).

pub mod alerts;

use crate::error::{Error, ErrorCode, Result};
use crate::live;
use crate::model::Fix;
use crate::{clock, logging};
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use alerts::Webhook;

/// How the live feed is set up.
#[derive(Debug, Clone)]
pub struct IngestOptions {
    /// The token devices present.
    pub token: String,
    /// Unknown devices get a vehicle (plate = device id) instead of a 404, at most
    /// this many a day.
    pub auto_register: Option<u32>,
    /// The unit of the OsmAnd protocol's `speed`.
    pub osmand_speed: crate::ingest::units::SpeedUnit,
    /// Where new events are POSTed, besides the log.
    pub alert_webhook: Option<alerts::Webhook>,
}

/// Requests waiting for the writer; beyond them devices get 503 and retry.
const QUEUE: usize = 4096;
/// Requests committed together at most.
const MAX_GROUP: usize = 1024;
/// The largest ingest body, bytes (an OwnTracks or Traccar Client buffer upload).
pub const MAX_INGEST_BODY_BYTES: usize = 1024 * 1024;

/// One request on its way to the writer, and where its outcome goes.
struct Push {
    request: live::Request,
    reply: tokio::sync::oneshot::Sender<Result<live::Accepted>>,
}

/// What the writer thread takes: pushed requests, and the analyser's rows.
enum Work {
    Push(Push),
    Rows(live::Rows),
    /// The server stops: have every fix analysed, store the rows, then say so.
    Stop(mpsc::Sender<()>),
    /// The analyser sent the rows of every fix committed before the stop.
    Flushed,
    /// An alert the webhook posted (or gave up): out of the outbox, by the writer.
    Posted(i64),
}

/// What the analyser thread takes from the writer.
enum Committed {
    /// Fixes stored, by vehicle.
    Fixes(BTreeMap<i64, Vec<Fix>>),
    /// Start again from what is stored, at this epoch.
    Restart(u64),
    /// Answer `Work::Flushed` once the rows of everything before are sent.
    Flush,
}

/// The feed as the request handlers see it.
pub struct Feed {
    token: Vec<u8>,
    pushes: SyncSender<Work>,
    /// What `/healthz` says of it.
    pub health: Arc<Health>,
    /// The database, when alerts wait there for a webhook.
    outbox: Option<crate::store::Location>,
}

/// Whether the feed can store what devices push: `/healthz` answers 503 with the
/// problem while the last group could not be committed or a thread of the feed has
/// died; a dead thread also stops the server (exit 70), for its supervisor to start
/// it again, rather than leave it answering every push with an error.
#[derive(Default)]
pub struct Health {
    failing: Mutex<Option<String>>,
    dead: AtomicBool,
    died: tokio::sync::Notify,
}

impl Health {
    /// The problem, if pushes cannot be stored now.
    pub fn problem(&self) -> Option<String> {
        self.failing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn set(&self, problem: Option<String>) {
        *self.failing.lock().unwrap_or_else(|p| p.into_inner()) = problem;
    }

    /// A thread of the feed is gone: say so, and have the server stop.
    fn thread_died(&self, why: String) {
        logging::info(&format!(
            "ingest: {why}; the server stops (exit 70) so that it can be started again"
        ));
        self.set(Some(why));
        self.dead.store(true, Ordering::SeqCst);
        self.died.notify_one();
    }

    /// Whether a thread of the feed has died.
    pub fn is_dead(&self) -> bool {
        self.dead.load(Ordering::SeqCst)
    }

    /// Returns once a thread of the feed has died.
    pub async fn died(&self) {
        if !self.is_dead() {
            self.died.notified().await;
        }
    }
}

/// Runs one of the feed's threads: a panic is caught, logged, and ends the server
/// (never a silent wedge in which every push is refused and `/healthz` says ok).
fn supervised(name: &'static str, health: Arc<Health>, run: impl FnOnce()) {
    if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) {
        let said = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".into());
        health.thread_died(format!("the {name} thread failed: {said}"));
    }
}

/// Debug builds only: the tests make one of the feed's threads panic on its first
/// round (`FLEETCTL_TEST_PANIC_IN=writer` or `analyser`).
fn injected_panic(thread: &str) {
    #[cfg(debug_assertions)]
    if std::env::var("FLEETCTL_TEST_PANIC_IN").is_ok_and(|t| t == thread) {
        panic!("injected for a test");
    }
    let _ = thread;
}

/// Why the feed took no push.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Its writer has stopped (the server stops, to be started again).
    Stopped,
    /// Its queue is full: retry shortly.
    Full,
}

impl Feed {
    /// The token devices must present.
    pub fn token(&self) -> &[u8] {
        &self.token
    }

    /// Hands one request to the writer; its outcome comes once the group it joins
    /// is committed (a 200 means the fixes are on disk).
    pub fn push(
        &self,
        request: live::Request,
    ) -> std::result::Result<tokio::sync::oneshot::Receiver<Result<live::Accepted>>, Refusal> {
        let (reply, outcome) = tokio::sync::oneshot::channel();
        match self.pushes.try_send(Work::Push(Push { request, reply })) {
            Ok(()) => Ok(outcome),
            Err(TrySendError::Disconnected(_)) => Err(Refusal::Stopped),
            Err(TrySendError::Full(_)) => Err(Refusal::Full),
        }
    }

    /// Once no request is in hand: waits until every fix acknowledged is analysed
    /// and its rows stored (at most `within`), so that a stopped server leaves
    /// every report up to date.
    pub fn finish(&self, within: Duration) {
        self.stop_analysis(within);
        let Some(path) = &self.outbox else { return };
        // On a thread of its own: this runs on the HTTP runtime's thread, and the
        // PostgreSQL client runs a runtime of its own, which may not start inside it.
        let counted = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    crate::store::open_for_reading(path)
                        .and_then(|conn| crate::store::live::outbox_count(&*conn))
                })
                .join()
                .unwrap_or_else(|_| Err(Error::internal("counting the queued alerts panicked")))
        });
        match counted {
            Ok(0) => {}
            Ok(n) => logging::info(&format!(
                "alerts: {n} alerts not posted yet are kept in the database; the server posts them when it starts again"
            )),
            Err(e) => logging::info(&format!(
                "alerts: the queued alerts could not be counted: {e}"
            )),
        }
    }

    fn stop_analysis(&self, within: Duration) {
        if self.health.is_dead() {
            logging::info(
                "ingest: stopped with fixes perhaps not analysed; the next `fleetctl analyze` (or their next fixes) brings those vehicles up to date",
            );
            return;
        }
        let (done, finished) = mpsc::channel();
        if self.pushes.send(Work::Stop(done)).is_ok() && finished.recv_timeout(within).is_err() {
            logging::info(
                "ingest: stopped before the last fixes were analysed; the next `fleetctl analyze` (or their next fixes) brings those vehicles up to date",
            );
        }
    }
}

/// Opens the writing connection (WAL, `synchronous = FULL`) and starts the writer
/// and analyser threads; before the workers open theirs, so that they find the
/// database in WAL mode.
pub fn start(db: &crate::store::Location, opts: IngestOptions) -> Result<Feed> {
    let outbox = opts.alert_webhook.as_ref().map(|_| db.clone());
    if outbox.is_some() {
        crate::store::with_write(db, crate::store::live::outbox_create)?;
    }
    let (writer, analyser) = live::open(
        db,
        live::Options {
            auto_register: opts.auto_register,
            osmand_speed: opts.osmand_speed,
            outbox: outbox.is_some(),
        },
    )?;
    let (pushes, queue) = mpsc::sync_channel(QUEUE);
    // On a SQLite file the writer takes posted alerts out of the outbox (its
    // connection alone writes); on PostgreSQL the webhook's thread does.
    let posted: Box<dyn Fn(i64) + Send> = match &writer {
        live::Writer::File(_) => {
            let to_writer = pushes.clone();
            Box::new(move |id| {
                let _ = to_writer.send(Work::Posted(id));
            })
        }
        live::Writer::Postgres(_) => Box::new(|_| {}),
    };
    let alerts = alerts::Alerts::start(db, opts.alert_webhook, posted)?;
    let (committed, to_analyse) = mpsc::channel();
    let rows = pushes.clone();
    let health = Arc::new(Health::default());
    let writer_health = health.clone();
    let writer_alerts = alerts.clone();
    crate::threads::spawn_named("ingest-writer", move || {
        supervised("ingest writer", writer_health.clone(), || {
            write_loop(writer, queue, committed, &writer_health, &writer_alerts)
        })
    })?;
    let analyser_health = health.clone();
    crate::threads::spawn_named("ingest-analyser", move || {
        // The analyser has up to a second (the freshness target) where a request
        // waits for milliseconds: when the cores are busy, it is the one that waits.
        crate::threads::lower_this_thread(crate::threads::ANALYSER_NICE);
        supervised("ingest analyser", analyser_health, || {
            analyse_loop(analyser, to_analyse, rows, alerts)
        })
    })?;
    Ok(Feed {
        token: opts.token.into_bytes(),
        pushes,
        health,
        outbox,
    })
}

/// Commits what has queued as one group — requests, and the analyser's rows —
/// answers the group's requests (a 200 means the fixes are on disk) and hands the
/// fixes to the analyser; until every sender is gone.
fn write_loop(
    mut writer: live::Writer,
    queue: Receiver<Work>,
    analyser: mpsc::Sender<Committed>,
    health: &Health,
    alerts: &alerts::Alerts,
) {
    let mut refusals_said = HashSet::new();
    let (mut unnamed, mut over_cap) = (Throttled::default(), Throttled::default());
    let mut stats = Minute::default();
    let (mut stopping, mut flush_asked) = (None, false);
    loop {
        // While pushes cannot be stored, the writer tries an empty commit every
        // couple of seconds, so that `/healthz` recovers even when a load balancer
        // sends no pushes to a node it took out of rotation.
        let first = match health.problem() {
            None => match queue.recv() {
                Ok(work) => work,
                Err(_) => return,
            },
            Some(_) => match queue.recv_timeout(Duration::from_secs(2)) {
                Ok(work) => work,
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let probe = writer.commit(&[], Vec::new(), &[], clock::wall_clock_now());
                    if let Some(epoch) = probe.restart {
                        let _ = analyser.send(Committed::Restart(epoch));
                    }
                    if probe.commit_failed.is_none() && !health.is_dead() {
                        health.set(None);
                    }
                    continue;
                }
            },
        };
        let started = Instant::now();
        let (mut pushes, mut rows, mut flushed) = (Vec::new(), Vec::new(), false);
        let mut posted = Vec::new();
        let mut take = |work| match work {
            Work::Push(push) => pushes.push(push),
            Work::Rows(r) => rows.push(r),
            Work::Stop(done) => stopping = Some(done),
            Work::Flushed => flushed = true,
            Work::Posted(id) => posted.push(id),
        };
        take(first);
        for _ in 1..MAX_GROUP {
            match queue.try_recv() {
                Ok(work) => take(work),
                Err(_) => break,
            }
        }
        let (requests, replies): (Vec<_>, Vec<_>) =
            pushes.into_iter().map(|p| (p.request, p.reply)).unzip();
        injected_panic("writer");
        let mut committed = writer.commit(&requests, rows, &posted, clock::wall_clock_now());
        // Announced now that their rows are stored, never before.
        alerts.found(std::mem::take(&mut committed.announce));
        if !requests.is_empty() {
            health.set(
                committed
                    .commit_failed
                    .as_ref()
                    .map(|why| format!("pushes cannot be stored: {why}")),
            );
        }
        if let Some(why) = &committed.rows_failed {
            logging::info(&format!(
                "ingest: the analysis's rows could not be stored (the vehicles are analysed whole on their next fixes): {why}"
            ));
        }
        if let Some(epoch) = committed.restart {
            let _ = analyser.send(Committed::Restart(epoch));
        }
        let fixes = committed.added.values().map(Vec::len).sum();
        if fixes > 0 {
            let _ = analyser.send(Committed::Fixes(committed.added));
        }
        if stopping.is_some() && !flush_asked {
            // After this group's fixes: the analyser answers once it has sent the
            // rows of every fix committed.
            let _ = analyser.send(Committed::Flush);
            flush_asked = true;
        }
        for (reply, outcome) in replies.into_iter().zip(committed.outcomes) {
            match &outcome {
                Err(e) if e.code == ErrorCode::NotFound && refusals_said.contains(&e.message) => {}
                // Once per device: the device's owner sees the 404 in its app; the
                // operator sees this, with the command that adds it. Past
                // MAX_DEVICES_NAMED devices, a count a minute (memory and log bounded
                // whatever ids a token holder makes up).
                Err(e) if e.code == ErrorCode::NotFound => {
                    if refusals_said.len() < MAX_DEVICES_NAMED {
                        refusals_said.insert(e.message.clone());
                        logging::info(&format!(
                            "ingest: {} — {}",
                            e.message,
                            e.hint.as_deref().unwrap_or("")
                        ));
                    } else if let Some(n) = unnamed.add() {
                        logging::info(&format!(
                            "ingest: {n} pushes refused (404) from devices not named here: {MAX_DEVICES_NAMED} unknown devices were named already; `fleetctl vehicles list` shows the known ones"
                        ));
                    }
                }
                Err(e) if e.code == ErrorCode::RateLimited => {
                    if let Some(n) = over_cap.add() {
                        logging::info(&format!(
                            "ingest: {n} pushes from new devices refused (429): {}",
                            e.message
                        ));
                    }
                }
                _ => {}
            }
            let _ = reply.send(outcome);
        }
        let last = flushed && stopping.is_some();
        stats.add([requests.len(), fixes], started.elapsed(), last, |[requests, fixes], secs, busy| {
            format!(
                "ingest: {fixes} fixes in {secs:.0} s ({:.0}/s) from {requests} requests; the writer was busy {busy:.0}% of the time",
                fixes as f64 / secs.max(1.0)
            )
        });
        if flushed && let Some(done) = stopping.take() {
            // Every row is stored: the feed ends here (the analyser with it, its
            // queue closed), and the connection closes.
            let _ = done.send(());
            return;
        }
    }
}

/// A vehicle's fixes are analysed at most this often: a device pushing several
/// fixes a second (a buffer upload, a replay) has them analysed together, and its
/// rows written once for all of them. A fix is never held longer than this, so
/// the reports lag the feed by under a second even at full load; a vehicle
/// reporting every few seconds, as trackers do, is analysed at once.
const COALESCE: Duration = Duration::from_millis(250);

/// Works out the derived rows of the vehicles that got fixes, each vehicle at
/// most every `COALESCE` (all the fixes it got meanwhile at once, so that the
/// analysis keeps up however fast they come), sends them to the writer, and hands
/// the events found to the alerts; until the writer is gone.
fn analyse_loop(
    mut analyser: live::Analyser,
    committed: Receiver<Committed>,
    writer: SyncSender<Work>,
    alerts: alerts::Alerts,
) {
    let mut stats = Minute::default();
    let mut backlog = live::Backlog::new(COALESCE);
    let mut last_error = None;
    loop {
        // Wait for fixes, or for the first vehicle held back to fall due.
        let first = match backlog.wait(Instant::now()) {
            None => match committed.recv() {
                Ok(first) => Some(first),
                Err(_) => return,
            },
            Some(wait) => match committed.recv_timeout(wait) {
                Ok(first) => Some(first),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            },
        };
        let started = Instant::now();
        let (mut restart, mut flush) = (None, false);
        for next in first.into_iter().chain(committed.try_iter()) {
            match next {
                Committed::Fixes(fixes) => backlog.add(fixes),
                // The fixes already taken are analysed after it, from the store.
                Committed::Restart(epoch) => restart = Some(epoch),
                Committed::Flush => flush = true,
            }
        }
        if let Some(epoch) = restart {
            // Rows worked out for these vehicles may have been dropped: each is
            // analysed whole again, fixes or not.
            backlog.again(analyser.forget());
            if let Err(e) = analyser.restart(epoch) {
                logging::info(&format!(
                    "ingest: the settings could not be read again: {e}"
                ));
            }
        }
        let due = backlog.take_due(Instant::now(), flush);
        if !due.is_empty() {
            injected_panic("analyser");
        }
        let fixes = due.values().map(Vec::len).sum();
        if !due.is_empty() {
            match analyser.analyse(&due) {
                Ok((mut rows, analysed)) => {
                    match &analyser {
                        // The writer stores these rows: it announces their events
                        // once they are committed.
                        live::Analyser::File(_) => rows.announce_when_stored(analysed.new_events),
                        // Stored already, each vehicle in its own transaction.
                        live::Analyser::Postgres(_) => alerts.found(analysed.new_events),
                    }
                    if writer.send(Work::Rows(rows)).is_err() {
                        return;
                    }
                }
                Err(e) => {
                    // Tried again whole, a round later.
                    backlog.again(analyser.forget().into_iter().chain(due.keys().copied()));
                    let said = e.to_string();
                    if last_error.as_ref() != Some(&said) {
                        logging::info(&format!(
                            "ingest: fixes are stored but their analysis failed (tried again, each vehicle whole, every {} ms): {said}",
                            COALESCE.as_millis()
                        ));
                        last_error = Some(said);
                    }
                }
            }
            stats.add([fixes, due.len()], started.elapsed(), false, |[fixes, vehicles], secs, busy| {
                format!(
                    "ingest: analysed {fixes} fixes as {vehicles} vehicle rounds in {secs:.0} s; the analyser was busy {busy:.0}% of the time"
                )
            });
        }
        if flush && writer.send(Work::Flushed).is_err() {
            return;
        }
    }
}

/// Unknown devices named in the log, one line each; past them, a count a minute.
const MAX_DEVICES_NAMED: usize = 1000;

/// A refusal logged at its first occurrence, then at most once a minute with how
/// many there were since.
#[derive(Default)]
struct Throttled {
    said_at: Option<Instant>,
    count: usize,
}

impl Throttled {
    /// Counts one; the count to log now, if a line is due.
    fn add(&mut self) -> Option<usize> {
        self.count += 1;
        let due = self.said_at.is_none_or(|at| at.elapsed() >= Minute::EVERY);
        if !due {
            return None;
        }
        self.said_at = Some(Instant::now());
        Some(std::mem::take(&mut self.count))
    }
}

/// Counts kept for a minute of work and then logged: the operator's view of the
/// feed's rate and of where its two threads' time goes.
#[derive(Default)]
struct Minute {
    since: Option<Instant>,
    counts: [usize; 2],
    busy: Duration,
}

impl Minute {
    const EVERY: Duration = Duration::from_secs(60);

    /// Adds one step's counts and time; once a minute has passed, or at the `last`
    /// step (the server stops) if anything was counted, logs `say(counts, seconds,
    /// busy %)` and starts again.
    fn add(
        &mut self,
        counts: [usize; 2],
        busy: Duration,
        last: bool,
        say: impl Fn([usize; 2], f64, f64) -> String,
    ) {
        let since = *self.since.get_or_insert_with(Instant::now);
        self.counts[0] += counts[0];
        self.counts[1] += counts[1];
        self.busy += busy;
        let secs = since.elapsed().as_secs_f64();
        if secs >= Self::EVERY.as_secs_f64() || (last && self.counts[0] > 0) {
            logging::info(&say(
                self.counts,
                secs,
                100.0 * self.busy.as_secs_f64() / secs,
            ));
            *self = Minute::default();
        }
    }
}
