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
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
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

/// Where alerts are POSTed: a plain `http://` URL (fleetctl carries no TLS client;
/// an HTTPS receiver is reached through a relay on this machine or its network).
#[derive(Debug, Clone, PartialEq)]
pub struct Webhook {
    /// `host:port`, for the connection and the `Host` header.
    authority: String,
    /// The path and query, from `/`.
    target: String,
}

impl Webhook {
    /// Reads `http://HOST[:PORT][/PATH][?QUERY]`.
    pub fn parse(url: &str) -> Result<Webhook> {
        let bad = |why: &str| {
            Error::invalid(format!("--alert-webhook {url:?} {why}")).with_hint(
                "give an http:// URL, e.g. http://127.0.0.1:9000/fleet-alerts (for an https:// receiver, a relay that forwards to it)",
            )
        };
        let rest = url.strip_prefix("http://").ok_or_else(|| {
            if url.starts_with("https://") {
                bad("is HTTPS, and fleetctl posts plain HTTP only (it carries no TLS client)")
            } else {
                bad("is not an http:// URL")
            }
        })?;
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
            None => format!("{authority}:80"),
        };
        Ok(Webhook { authority, target })
    }

    /// POSTs one JSON body; `Ok` when the receiver answered 2xx.
    fn post(&self, body: &[u8]) -> std::result::Result<(), String> {
        let addrs = self
            .authority
            .to_socket_addrs()
            .map_err(|e| format!("{}: {e}", self.authority))?;
        let mut last = format!("{}: no address", self.authority);
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
                Ok(stream) => return self.exchange(stream, body),
                Err(e) => last = format!("{addr}: {e}"),
            }
        }
        Err(last)
    }

    fn exchange(&self, mut stream: TcpStream, body: &[u8]) -> std::result::Result<(), String> {
        let io = |e: std::io::Error| e.to_string();
        stream.set_write_timeout(Some(ANSWER_TIMEOUT)).map_err(io)?;
        stream.set_read_timeout(Some(ANSWER_TIMEOUT)).map_err(io)?;
        let head = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: fleetctl/{}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.target,
            self.authority,
            env!("CARGO_PKG_VERSION"),
            body.len()
        );
        stream.write_all(head.as_bytes()).map_err(io)?;
        stream.write_all(body).map_err(io)?;
        // The status line is all that matters: "HTTP/1.1 204 No Content".
        let mut status = Vec::with_capacity(64);
        let mut byte = [0u8; 1];
        while status.len() < 256 && !status.ends_with(b"\r\n") {
            match stream.read(&mut byte).map_err(io)? {
                0 => break,
                _ => status.push(byte[0]),
            }
        }
        let line = String::from_utf8_lossy(&status);
        let code = line
            .strip_prefix("HTTP/1.")
            .and_then(|r| r.get(2..5))
            .and_then(|c| c.parse::<u16>().ok());
        match code {
            Some(200..=299) => Ok(()),
            Some(code) => Err(format!("the receiver answered {code}")),
            None => Err(format!(
                "the receiver's answer is not HTTP: {:?}",
                line.trim_end()
            )),
        }
    }
}

/// The feed's side of the alerts: hands new events on without waiting.
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
    while let Ok(body) = queue.recv() {
        let mut pauses = RETRY_PAUSES.iter();
        loop {
            match hook.post(body.as_bytes()) {
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
        let hook = Webhook::parse("http://127.0.0.1:9000/fleet/alerts?key=1").unwrap();
        assert_eq!(hook.authority, "127.0.0.1:9000");
        assert_eq!(hook.target, "/fleet/alerts?key=1");
        let hook = Webhook::parse("http://alerts.example").unwrap();
        assert_eq!(
            (hook.authority.as_str(), hook.target.as_str()),
            ("alerts.example:80", "/")
        );
        let hook = Webhook::parse("http://[::1]:8080?x").unwrap();
        assert_eq!(
            (hook.authority.as_str(), hook.target.as_str()),
            ("[::1]:8080", "/?x")
        );
        let hook = Webhook::parse("http://[::1]/a").unwrap();
        assert_eq!(hook.authority, "[::1]:80");
        for (url, why) in [
            ("https://alerts.example/x", "HTTPS"),
            ("ftp://x", "not an http:// URL"),
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
