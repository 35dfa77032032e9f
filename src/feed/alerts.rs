//! Live alerts: the events the feed's analysis finds new (`live::Analysed::new_events`:
//! speeding, long stops, signal losses, geofence entries and exits, ignition) are
//! logged and, with `--alert-webhook URL`, POSTed there as JSON, saying whether the
//! event may still be going on (`live::NewEvent::ongoing`). Each step has a thread
//! of its own, so that a slow or dead receiver never holds up ingest: the alerts to
//! post wait in the database (`store::live::outbox_*`), so that a stop or a crash
//! loses none, and a failed POST is tried again with growing pauses, then given up
//! (logged).

use crate::error::{Error, Result};
use crate::live::NewEvent;
use crate::logging;
use crate::report::{Db, events::events_row};
use std::path::Path;
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::time::Duration;

/// Groups of new events waiting to be logged.
const EVENT_QUEUE: usize = 1024;

/// The pauses before each new try of a failed POST: seven tries over about a minute.
const RETRY_PAUSES: [Duration; 6] = [
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(4),
    Duration::from_secs(8),
    Duration::from_secs(16),
    Duration::from_secs(32),
];
/// How long a receiver may take to accept a connection, and to answer.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// Where alerts are POSTed: an `http://` or `https://` URL (TLS by rustls, the
/// server checked against Mozilla's roots compiled in, or the certificates of
/// `--alert-webhook-ca`), posted by ureq.
#[derive(Debug, Clone)]
pub struct Webhook {
    /// The whole URL.
    url: String,
    /// `host:port`, for messages.
    authority: String,
    /// The roots the receiver's certificate must lead to, PEM (none: Mozilla's).
    ca_pem: Option<Vec<u8>>,
}

impl PartialEq for Webhook {
    fn eq(&self, other: &Self) -> bool {
        self.url == other.url && self.ca_pem == other.ca_pem
    }
}

impl Webhook {
    /// Reads `http[s]://HOST[:PORT][/PATH][?QUERY]`.
    pub fn parse(url: &str) -> Result<Webhook> {
        let bad = |why: &str| {
            Error::invalid(format!("--alert-webhook {url:?} {why}")).with_hint(
                "give an http:// or https:// URL, e.g. https://alerts.example/fleet or http://127.0.0.1:9000/fleet-alerts",
            )
        };
        let (rest, default_port) = match (url.strip_prefix("https://"), url.strip_prefix("http://"))
        {
            (Some(rest), _) => (rest, 443),
            (_, Some(rest)) => (rest, 80),
            _ => return Err(bad("is not an http:// or https:// URL")),
        };
        let (authority, target) = match rest.find(['/', '?']) {
            Some(i) if rest[i..].starts_with('?') => (&rest[..i], format!("/{}", &rest[i..])),
            Some(i) => (&rest[..i], rest[i..].to_string()),
            None => (rest, "/".to_string()),
        };
        if authority.is_empty() || authority.contains('@') {
            return Err(bad("has no host (or has credentials in it)"));
        }
        if target
            .bytes()
            .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
        {
            return Err(bad("has spaces or control characters in its path"));
        }
        // The port follows the last ':' outside an IPv6 literal's brackets.
        let port = match authority.rfind(':') {
            Some(i) if !authority[i..].contains(']') => Some(&authority[i + 1..]),
            _ => None,
        };
        let authority = match port {
            Some(port) if port.parse::<u16>().is_ok_and(|p| p > 0) => authority.to_string(),
            Some(_) => return Err(bad("has a port that is not 1-65535")),
            None => format!("{authority}:{default_port}"),
        };
        let scheme = if default_port == 443 { "https" } else { "http" };
        Ok(Webhook {
            url: format!("{scheme}://{authority}{target}"),
            authority,
            ca_pem: None,
        })
    }

    /// Trusts the certificates in the PEM file at `path` (a private receiver's CA)
    /// instead of Mozilla's roots.
    pub fn with_ca_file(mut self, path: &Path) -> Result<Webhook> {
        let pem = crate::untrusted::read_capped(path, 1024 * 1024).map_err(|e| {
            Error::io(path, e).with_hint("give a PEM file of the receiver's CA certificates")
        })?;
        let certs = ca_certs(&pem);
        if certs.is_empty() {
            return Err(Error::invalid(format!(
                "--alert-webhook-ca {}: no PEM certificate in it",
                path.display()
            ))
            .with_hint("give a PEM file (-----BEGIN CERTIFICATE-----) of the receiver's CA"));
        }
        self.ca_pem = Some(pem);
        Ok(self)
    }

    /// The client that posts: rustls with the *ring* provider, the receiver
    /// checked, no redirects followed, every answer's status read (not an error).
    fn agent(&self) -> ureq::Agent {
        let roots = match &self.ca_pem {
            Some(pem) => ureq::tls::RootCerts::new_with_certs(&ca_certs(pem)),
            None => ureq::tls::RootCerts::WebPki,
        };
        ureq::Agent::config_builder()
            .tls_config(ureq::tls::TlsConfig::builder().root_certs(roots).build())
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .timeout_global(Some(ANSWER_TIMEOUT))
            .http_status_as_error(false)
            .max_redirects(0)
            .user_agent(concat!("fleetctl/", env!("CARGO_PKG_VERSION")))
            .build()
            .into()
    }

    /// POSTs one JSON body; `Ok` when the receiver answered 2xx.
    fn post(&self, agent: &ureq::Agent, body: &[u8]) -> std::result::Result<(), String> {
        let answer = agent
            .post(&self.url)
            .header("Content-Type", "application/json")
            .send(body)
            .map_err(|e| format!("{}: {e}", self.authority))?;
        match answer.status().as_u16() {
            200..=299 => Ok(()),
            code => Err(format!("the receiver answered {code}")),
        }
    }
}

/// The certificates of a PEM text.
fn ca_certs(pem: &[u8]) -> Vec<ureq::tls::Certificate<'static>> {
    ureq::tls::parse_pem(pem)
        .filter_map(|item| match item {
            Ok(ureq::tls::PemItem::Certificate(c)) => Some(c),
            _ => None,
        })
        .collect()
}

/// The feed's side of the alerts: hands new events on without waiting.
#[derive(Clone)]
pub(super) struct Alerts {
    events: SyncSender<Vec<NewEvent>>,
}

impl Alerts {
    /// Starts the thread that logs the alerts of the database at `path` and, with a
    /// webhook, the one that posts the alerts queued in its outbox. `posted` takes
    /// the alerts posted (or given up) out of the outbox: on a SQLite file through
    /// the feed's writer, whose connection alone writes there.
    pub(super) fn start(
        path: &crate::store::Location,
        webhook: Option<Webhook>,
        posted: Box<dyn Fn(i64) + Send>,
    ) -> Result<Alerts> {
        let db = Db::open(path)?;
        if let Some(hook) = webhook {
            let queued = crate::store::open_for_reading(path)
                .and_then(|c| crate::store::live::outbox_count(&*c))?;
            if queued > 0 {
                logging::info(&format!(
                    "alerts: {queued} alerts kept from before are posted first"
                ));
            }
            let (at, named) = (path.clone(), Db::open(path)?);
            crate::threads::spawn_named("alert-webhook", move || {
                deliver(&at, named, hook, posted)
            })?;
        }
        let (events, queue) = mpsc::sync_channel(EVENT_QUEUE);
        crate::threads::spawn_named("alerts", move || announce(db, queue))?;
        Ok(Alerts { events })
    }

    /// Hands a group's new events on to be logged; when the queue is full they are
    /// dropped and the log says how many (the webhook's are in the outbox already).
    pub(super) fn found(&self, events: Vec<NewEvent>) {
        if events.is_empty() {
            return;
        }
        let n = events.len();
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
            self.events.try_send(events)
        {
            logging::info(&format!(
                "alerts: {n} alerts not logged: the alert log's queue is full"
            ));
        }
    }
}

/// Logs each alert as the reports name it.
fn announce(mut db: Db, queue: Receiver<Vec<NewEvent>>) {
    while let Ok(events) = queue.recv() {
        if let Err(e) = db.refresh() {
            logging::info(&format!(
                "alerts: the database could not be read again: {e}"
            ));
        }
        for NewEvent { event, ongoing } in &events {
            match events_row(&db, event) {
                Ok(row) => logging::info(&format!(
                    "alert: {} {} at {}, {}{}",
                    row.plate,
                    row.kind,
                    row.at,
                    row.place,
                    if *ongoing { " (going on)" } else { "" }
                )),
                Err(e) => logging::info(&format!("alerts: an event could not be named: {e}")),
            }
        }
        // Named: end the read they were named in (PostgreSQL), see `Db::rest`.
        db.rest();
    }
}

/// An alert's JSON, named as the `events` report names it.
fn body_of(db: &Db, new: &NewEvent, found_ts: i64) -> Result<String> {
    let row = events_row(db, &new.event)?;
    Ok(serde_json::json!({
        "alert": row.kind,
        "plate": row.plate,
        "at": row.at,
        "until": row.until,
        "ongoing": new.ongoing,
        "place": row.place,
        "lat": new.event.lat,
        "lon": new.event.lon,
        "detail": row.detail,
        "detected_at": db.time(found_ts),
    })
    .to_string())
}

/// POSTs the queued alerts in turn, oldest first, trying a failed one again after
/// each pause; each leaves the queue once posted or given up (`posted`). Looks for
/// new ones every second when the queue is empty. On PostgreSQL, where several
/// servers may share the queue, an alert is claimed (a row lock others skip) in
/// a transaction that takes it out when its POST is done, so that each is posted
/// by one server, and again only if that server dies meanwhile.
fn deliver(
    path: &crate::store::Location,
    mut db: Db,
    hook: Webhook,
    posted: Box<dyn Fn(i64) + Send>,
) {
    let agent = hook.agent();
    let mut conn = None;
    let mut after_id = 0;
    loop {
        let reader = match conn.as_mut() {
            Some(c) => c,
            None => match crate::store::open_for_reading(path) {
                Ok(c) => conn.insert(c),
                Err(e) => {
                    logging::info(&format!("alerts: the queued alerts cannot be read: {e}"));
                    std::thread::sleep(Duration::from_secs(5));
                    continue;
                }
            },
        };
        let _ = db.refresh();
        let outcome = if reader.dialect() == crate::store::sql::Dialect::Postgres {
            crate::store::live::outbox_claim(&**reader, &mut |id, new, found_ts| {
                post_named(&hook, &agent, &db, &new, found_ts, id);
            })
            .map(usize::from)
        } else {
            crate::store::live::outbox_oldest(&**reader, after_id, 64).map(|batch| {
                let n = batch.len();
                for (id, new, found_ts) in batch {
                    post_named(&hook, &agent, &db, &new, found_ts, id);
                    posted(id);
                    after_id = id;
                }
                n
            })
        };
        db.rest();
        match outcome {
            Ok(0) => std::thread::sleep(Duration::from_secs(1)),
            Ok(_) => {}
            Err(e) => {
                logging::info(&format!("alerts: the queued alerts could not be read: {e}"));
                conn = None;
                std::thread::sleep(Duration::from_secs(5));
            }
        }
    }
}

/// Names an alert and POSTs it (retried, then given up); one that cannot be named
/// is logged and left.
fn post_named(
    hook: &Webhook,
    agent: &ureq::Agent,
    db: &Db,
    new: &NewEvent,
    found_ts: i64,
    id: i64,
) {
    match body_of(db, new, found_ts) {
        Ok(body) => post_with_retries(hook, agent, &body),
        Err(e) => logging::info(&format!(
            "alerts: queued alert {id} could not be named, left out: {e}"
        )),
    }
}

/// POSTs one alert, trying again after each pause; gives up after the last.
fn post_with_retries(hook: &Webhook, agent: &ureq::Agent, body: &str) {
    let mut pauses = RETRY_PAUSES.iter();
    loop {
        let Err(why) = hook.post(agent, body.as_bytes()) else {
            return;
        };
        let Some(pause) = pauses.next() else {
            logging::info(&format!(
                "alerts: webhook POST given up after {} tries ({why}): {body}",
                RETRY_PAUSES.len() + 1
            ));
            return;
        };
        logging::verbose(|| format!("alerts: webhook POST failed ({why}); again in {pause:?}"));
        std::thread::sleep(*pause);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhook_urls_are_read_or_refused_with_the_reason() {
        for (given, url) in [
            (
                "http://127.0.0.1:9000/fleet/alerts?key=1",
                "http://127.0.0.1:9000/fleet/alerts?key=1",
            ),
            ("http://alerts.example", "http://alerts.example:80/"),
            ("http://[::1]:8080?x", "http://[::1]:8080/?x"),
            ("http://[::1]/a", "http://[::1]:80/a"),
            ("https://alerts.example/x", "https://alerts.example:443/x"),
        ] {
            assert_eq!(Webhook::parse(given).unwrap().url, url, "{given}");
        }
        for (url, why) in [
            ("ftp://x", "not an http:// or https:// URL"),
            ("http:///x", "no host"),
            ("http://user:pw@host/x", "credentials"),
            ("http://host:0/x", "port"),
            ("http://host:99999/x", "port"),
            ("http://host/a b", "spaces"),
        ] {
            let e = Webhook::parse(url).unwrap_err();
            assert!(e.message.contains(why), "{url}: {}", e.message);
        }
    }
}
