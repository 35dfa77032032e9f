//! Live alerts: the events the feed's analysis finds new (`live::Analysed::new_events`:
//! speeding, long stops, signal losses, geofence entries and exits, ignition) are
//! logged and, with `--alert-webhook URL`, POSTed there as JSON, saying whether the
//! event may still be going on (`live::NewEvent::ongoing`). Each step has a
//! thread and a bounded queue of its own, so that a slow or dead receiver never
//! holds up ingest: an alert that does not fit is dropped and counted in the log,
//! and a failed POST is tried again with growing pauses, then given up (logged).

use crate::error::{Error, Result};
use crate::live::NewEvent;
use crate::report::{Db, events::events_row};
use crate::{clock, logging};
use std::path::Path;
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::time::Duration;

/// Groups of new events waiting to be logged.
const EVENT_QUEUE: usize = 1024;
/// Alerts waiting for the webhook.
const WEBHOOK_QUEUE: usize = 4096;
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
    /// Starts the threads that log the alerts of the database at `db` and, with a
    /// webhook, post them.
    pub(super) fn start(db: &Path, webhook: Option<Webhook>) -> Result<Alerts> {
        let db = Db::open(db)?;
        let posts = webhook
            .map(|hook| {
                let (posts, queue) = mpsc::sync_channel::<String>(WEBHOOK_QUEUE);
                super::spawn_named("alert-webhook", move || deliver(hook, queue))?;
                Ok::<_, crate::error::Error>(posts)
            })
            .transpose()?;
        let (events, queue) = mpsc::sync_channel(EVENT_QUEUE);
        super::spawn_named("alerts", move || announce(db, queue, posts))?;
        Ok(Alerts { events })
    }

    /// Hands a group's new events on; when the queue is full they are dropped and
    /// the log says how many.
    pub(super) fn found(&self, events: Vec<NewEvent>) {
        if events.is_empty() {
            return;
        }
        let n = events.len();
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
            self.events.try_send(events)
        {
            logging::info(&format!(
                "alerts: {n} alerts dropped: the alert queue is full"
            ));
        }
    }
}

/// Logs each alert as the reports name it and queues its JSON for the webhook.
fn announce(mut db: Db, queue: Receiver<Vec<NewEvent>>, posts: Option<SyncSender<String>>) {
    let mut dropped = 0u64;
    while let Ok(events) = queue.recv() {
        if let Err(e) = db.refresh() {
            logging::info(&format!(
                "alerts: the database could not be read again: {e}"
            ));
        }
        for NewEvent { event, ongoing } in &events {
            let row = match events_row(&db, event) {
                Ok(row) => row,
                Err(e) => {
                    logging::info(&format!("alerts: an event could not be named: {e}"));
                    continue;
                }
            };
            logging::info(&format!(
                "alert: {} {} at {}, {}{}",
                row.plate,
                row.kind,
                row.at,
                row.place,
                if *ongoing { " (going on)" } else { "" }
            ));
            let Some(posts) = &posts else { continue };
            let body = serde_json::json!({
                "alert": row.kind,
                "plate": row.plate,
                "at": row.at,
                "until": row.until,
                "ongoing": ongoing,
                "place": row.place,
                "lat": event.lat,
                "lon": event.lon,
                "detail": row.detail,
                "detected_at": db.time(clock::wall_clock_now()),
            });
            match posts.try_send(body.to_string()) {
                Ok(()) => {
                    if dropped > 0 {
                        logging::info(&format!(
                            "alerts: the webhook's queue has room again ({dropped} alerts were dropped)"
                        ));
                        dropped = 0;
                    }
                }
                Err(_) => {
                    if dropped == 0 {
                        logging::info(
                            "alerts: the webhook's queue is full (its receiver is slow or down): alerts are dropped until it has room",
                        );
                    }
                    dropped += 1;
                }
            }
        }
        // Named: end the read they were named in (PostgreSQL), see `Db::rest`.
        db.rest();
    }
}

/// POSTs each alert in turn, trying a failed one again after each pause.
fn deliver(hook: Webhook, queue: Receiver<String>) {
    let agent = hook.agent();
    while let Ok(body) = queue.recv() {
        let mut pauses = RETRY_PAUSES.iter();
        loop {
            match hook.post(&agent, body.as_bytes()) {
                Ok(()) => break,
                Err(why) => match pauses.next() {
                    Some(pause) => {
                        logging::verbose(|| {
                            format!("alerts: webhook POST failed ({why}); again in {pause:?}")
                        });
                        std::thread::sleep(*pause);
                    }
                    None => {
                        logging::info(&format!(
                            "alerts: webhook POST given up after {} tries ({why}): {body}",
                            RETRY_PAUSES.len() + 1
                        ));
                        break;
                    }
                },
            }
        }
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
