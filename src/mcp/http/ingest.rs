//! `serve --http --ingest`: the live feed's endpoints, `/ingest/osmand`,
//! `/ingest/traccar` and `/ingest/owntracks`. A request shows the ingest token (not
//! the MCP token: an ingest token only appends positions, and the MCP token never
//! writes), its body is read within the shared budget, and it joins the queue of
//! the one writer thread, which commits whatever has queued as one group
//! (`live::Ingestor::commit`, WAL with `synchronous = FULL`), re-analyses the
//! vehicles that got fixes, and only then answers each request: a 200 means the
//! fixes are on disk and in every report.

use super::policy;
use super::request::{Answer, Refused, authenticate, error_answer, read_body, refuse, respond};
use super::{Conn, Shared};
use crate::error::{Error, ErrorCode, Result};
use crate::live::{self, Endpoint};
use crate::{clock, logging};
use hyper::Request;
use hyper::body::{Bytes, Incoming};
use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::time::{Duration, Instant};

/// How the live feed is set up.
#[derive(Debug, Clone)]
pub struct IngestOptions {
    /// The token devices present.
    pub token: String,
    /// Unknown devices get a vehicle (plate = device id) instead of a 404.
    pub auto_register: bool,
    /// The unit of the OsmAnd protocol's `speed`.
    pub osmand_speed: crate::ingest::units::SpeedUnit,
    /// Where new events are POSTed, besides the log.
    pub alert_webhook: Option<super::alerts::Webhook>,
}

/// Requests waiting for the writer; beyond them devices get 503 and retry.
const QUEUE: usize = 4096;
/// Requests committed together at most.
const MAX_GROUP: usize = 1024;
/// The largest ingest body, bytes (an OwnTracks or Traccar Client buffer upload).
const MAX_INGEST_BODY_BYTES: usize = 1024 * 1024;

/// One request on its way to the writer, and where its outcome goes.
struct Push {
    request: live::Request,
    reply: tokio::sync::oneshot::Sender<Result<live::Accepted>>,
}

/// The feed as the request handlers see it.
pub(super) struct Feed {
    token: Vec<u8>,
    pushes: SyncSender<Push>,
}

/// Opens the writing connection (WAL, `synchronous = FULL`) and starts the writer
/// thread; before the workers open theirs, so that they find the database in WAL
/// mode.
pub(super) fn start(db: &Path, opts: IngestOptions) -> Result<Feed> {
    let writer = live::Writer::open(
        db,
        live::Options {
            auto_register: opts.auto_register,
            osmand_speed: opts.osmand_speed,
        },
    )?;
    let alerts = super::alerts::Alerts::start(db, opts.alert_webhook)?;
    let (pushes, queue) = mpsc::sync_channel(QUEUE);
    std::thread::spawn(move || write_loop(writer, queue, alerts));
    Ok(Feed {
        token: opts.token.into_bytes(),
        pushes,
    })
}

/// Commits what has queued as one group, re-analyses the vehicles that got fixes,
/// hands the events they brought to the alerts, answers the group's requests;
/// until every sender is gone.
fn write_loop(mut writer: live::Writer, queue: Receiver<Push>, alerts: super::alerts::Alerts) {
    let mut refusals_said = HashSet::new();
    let mut stats = Throughput::default();
    while let Ok(first) = queue.recv() {
        let started = Instant::now();
        let mut group = vec![first];
        while group.len() < MAX_GROUP {
            match queue.try_recv() {
                Ok(push) => group.push(push),
                Err(_) => break,
            }
        }
        let (requests, replies): (Vec<_>, Vec<_>) =
            group.into_iter().map(|p| (p.request, p.reply)).unzip();
        let mut committed = writer.commit(&requests, clock::wall_clock_now());
        let committed_at = Instant::now();
        // The fixes are on disk; the answers wait for the vehicles' analysis too, so
        // that a device's 200 means every report already shows its fix.
        if !committed.added.is_empty() {
            match writer.analyse(&committed.added) {
                Ok(analysed) => alerts.found(analysed.new_events),
                Err(e) => {
                    logging::info(&format!(
                        "ingest: the fixes are stored but their analysis failed (the next push analyses the vehicles whole): {e}"
                    ));
                    for accepted in committed.outcomes.iter_mut().flatten() {
                        accepted.analysed = false;
                    }
                }
            }
        }
        stats.add(
            requests.len(),
            committed.added.values().map(Vec::len).sum(),
            committed_at - started,
            committed_at.elapsed(),
        );
        for (reply, outcome) in replies.into_iter().zip(committed.outcomes) {
            if let Err(e) = &outcome
                && e.code == ErrorCode::NotFound
                && refusals_said.insert(e.message.clone())
            {
                // Once per device: the device's owner sees the 404 in its app; the
                // operator sees this, with the command that adds it.
                logging::info(&format!(
                    "ingest: {} — {}",
                    e.message,
                    e.hint.as_deref().unwrap_or("")
                ));
            }
            let _ = reply.send(outcome);
        }
    }
}

/// What the writer did lately, logged once a minute while positions arrive: the
/// operator's view of the feed's rate and of where the writer's time goes.
#[derive(Default)]
struct Throughput {
    since: Option<Instant>,
    groups: usize,
    requests: usize,
    fixes: usize,
    committing: Duration,
    analysing: Duration,
}

impl Throughput {
    const EVERY: Duration = Duration::from_secs(60);

    fn add(&mut self, requests: usize, fixes: usize, committing: Duration, analysing: Duration) {
        let since = *self.since.get_or_insert_with(Instant::now);
        self.groups += 1;
        self.requests += requests;
        self.fixes += fixes;
        self.committing += committing;
        self.analysing += analysing;
        let elapsed = since.elapsed();
        if elapsed < Self::EVERY {
            return;
        }
        let share = |d: Duration| 100.0 * d.as_secs_f64() / elapsed.as_secs_f64();
        logging::info(&format!(
            "ingest: {} fixes in {:.0} s ({:.0}/s) from {} requests in {} groups; the writer spent {:.0}% committing, {:.0}% analysing",
            self.fixes,
            elapsed.as_secs_f64(),
            self.fixes as f64 / elapsed.as_secs_f64(),
            self.requests,
            self.groups,
            share(self.committing),
            share(self.analysing),
        ));
        *self = Throughput::default();
    }
}

/// Answers a request to `/ingest/NAME`.
pub(super) async fn answer(
    req: Request<Incoming>,
    name: &str,
    conn: &Conn,
    shared: &Shared,
    deadline: Instant,
) -> std::result::Result<Answer, Refused> {
    let refused = |code, message: String| Box::new(error_answer(code, message, &[], true));
    let Some(feed) = &shared.ingest else {
        return Err(refused(
            ErrorCode::NotFound,
            "this server takes no positions: start it with --ingest".into(),
        ));
    };
    let Some(endpoint) = Endpoint::named(name) else {
        return Err(refused(
            ErrorCode::NotFound,
            format!(
                "no such path /ingest/{name}: use /ingest/osmand, /ingest/traccar or /ingest/owntracks"
            ),
        ));
    };
    let get_allowed = endpoint == Endpoint::Osmand;
    let method = req.method();
    if method != hyper::Method::POST && !(get_allowed && method == hyper::Method::GET) {
        let allow = if get_allowed { "GET, POST" } else { "POST" };
        return Err(Box::new(error_answer(
            ErrorCode::MethodNotAllowed,
            format!("use {allow}"),
            &[("Allow", allow.into())],
            true,
        )));
    }
    let mut query = live::protocols::form_pairs(req.uri().query().unwrap_or(""));
    let query_token = query
        .iter()
        .position(|(k, _)| k == "token")
        .map(|i| query.remove(i).1);
    let presented = policy::presented_ingest_token(
        req.headers().get("authorization").map(|v| v.as_bytes()),
        query_token.as_deref(),
    );
    let token_ok = presented.is_some_and(|t| policy::constant_time_eq(&t, &feed.token));
    if token_ok {
        conn.authenticated.store(true, Ordering::Relaxed);
    }
    authenticate(token_ok, conn.ip, &shared.failures)?;
    if policy::body_too_large(
        req.headers()
            .get("content-length")
            .and_then(|v| v.to_str().ok()),
        MAX_INGEST_BODY_BYTES,
    ) {
        return Err(refused(
            ErrorCode::TooLarge,
            format!("request body over {MAX_INGEST_BODY_BYTES} bytes"),
        ));
    }
    let json = req
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.to_ascii_lowercase().contains("json"));
    // A GET carries its fix in the URL: no body to hold, no share of the budget.
    let (body, budget) = if req.method() == hyper::Method::GET {
        (Bytes::new(), None)
    } else {
        let (body, budget) = read_body(req, shared, deadline, &[]).await?;
        (body, Some(budget))
    };
    conn.clock.take();
    let (reply, outcome) = tokio::sync::oneshot::channel();
    let push = Push {
        request: live::Request {
            endpoint,
            query,
            body: body.to_vec(),
            json,
        },
        reply,
    };
    match feed.pushes.try_send(push) {
        Ok(()) => {}
        Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
            return Err(Box::new(error_answer(
                ErrorCode::Busy,
                "the feed's queue is full; retry shortly",
                &[("Retry-After", "1".into())],
                false,
            )));
        }
    }
    let outcome = outcome
        .await
        .unwrap_or_else(|_| Err(Error::internal("the feed's writer stopped")));
    drop(budget);
    let stopping = shared.stopping.load(Ordering::Relaxed);
    Ok(match outcome {
        Ok(accepted) => {
            // OwnTracks reads the answer as a list of messages for the device.
            let body = if endpoint == Endpoint::OwnTracks {
                "[]".to_string()
            } else {
                serde_json::json!({
                    "stored": accepted.stored,
                    "duplicates": accepted.duplicates,
                    "ignored": accepted.ignored,
                    "analysed": accepted.analysed,
                })
                .to_string()
            };
            respond(
                200,
                Some(super::answer::AnswerBody::unbudgeted(Bytes::from(body))),
                &[],
                stopping,
            )
        }
        Err(e) => refuse(&e, &[], stopping),
    })
}
